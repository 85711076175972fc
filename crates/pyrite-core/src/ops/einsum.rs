//! Einstein summation: [`einsum`], with PyTorch's equation syntax and semantics.
//!
//! The equation names each operand's dims with letters (`"ij,jk->ik"`); `...` stands for any
//! number of broadcast dims. Without `->` the output is the ellipsis dims followed by the
//! letters that appear exactly once, in ASCII order (upper case first). A letter repeated
//! within one operand takes a diagonal (`"ii->i"`, traces `"ii->"`); letters missing from the
//! output are summed.
//!
//! The computation follows PyTorch's: every operand is viewed (no copy) with its dims aligned
//! to `[output dims..., contracted dims...]` (size-1 dims inserted for missing letters,
//! diagonals taken by stride arithmetic), then operands are contracted left to right, pairwise.
//! Before each pair, dims that no later operand needs and that only one side has are summed
//! out; the pair itself becomes one batched matrix product ([`Tensor::bmm`]) after permuting
//! and reshaping, or an elementwise product when nothing is contracted. So dtypes behave as
//! in PyTorch: sums of integer or bool dims give int64, products keep the operands' dtype
//! and must agree.

use crate::layout::Layout;
use crate::shape::{DimVec, Shape};
use crate::{bail, DType, Result, Tensor};
use std::collections::VecDeque;

const LETTERS: usize = 26;
/// Label ids: `A-Z` are 0..26, `a-z` 26..52 (PyTorch's order for implicit outputs).
const TOTAL_LABELS: usize = 2 * LETTERS;
const ELLIPSIS: u8 = TOTAL_LABELS as u8;
const UNSET: usize = usize::MAX;

fn label_id(c: u8) -> u8 {
    if c.is_ascii_uppercase() {
        c - b'A'
    } else {
        c - b'a' + LETTERS as u8
    }
}

fn label_char(s: usize) -> char {
    if s < LETTERS {
        (b'A' + s as u8) as char
    } else {
        (b'a' + (s - LETTERS) as u8) as char
    }
}

/// `t.sum(dims, keepdim=True)` with PyTorch's dtypes (integers and bool sum to int64),
/// computed as a product with a vector of ones.
fn sum_keepdim(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let t = if t.dtype().is_floating_point() { t.clone() } else { t.to_dtype(DType::I64)? };
    let r = t.rank();
    let keep: Vec<usize> = (0..r).filter(|d| !dims.contains(d)).collect();
    let perm: Vec<isize> = keep.iter().chain(dims).map(|&d| d as isize).collect();
    let ksize: usize = keep.iter().map(|&d| t.dims()[d]).product();
    let rsize: usize = dims.iter().map(|&d| t.dims()[d]).product();
    let mat = t.permute(&perm)?.reshape([ksize, rsize])?;
    let ones = Tensor::ones_on([rsize], t.dtype(), t.device())?;
    let v = mat.mv(&ones)?;
    let out: Vec<usize> = (0..r).map(|d| if dims.contains(&d) { 1 } else { t.dims()[d] }).collect();
    v.reshape(out)
}

/// Drops the trailing dims from `n` on, which must all have size 1 (a view).
fn truncate_dims(t: &Tensor, n: usize) -> Result<Tensor> {
    if t.requires_grad() {
        return t.reshape(&t.dims()[..n]); // a recorded view
    }
    let l = t.layout();
    Ok(t.with_layout(Layout {
        shape: Shape(l.dims()[..n].iter().copied().collect()),
        strides: l.strides()[..n].iter().copied().collect(),
        offset: l.offset(),
    }))
}

/// `(left * right).sum(sum_dims, keepdim=True)` for two operands of equal rank whose dims
/// broadcast, as one batched matrix product: dims in both operands and the output become the
/// batch, dims only in one side become its rows or columns, `sum_dims` the inner dimension.
fn sumproduct_pair(left: &Tensor, right: &Tensor, sum_dims: &[usize]) -> Result<Tensor> {
    if sum_dims.is_empty() {
        return left.mul(right);
    }
    let dim = left.rank();
    let (mut left, mut right) = (left.clone(), right.clone());
    let (mut lro, mut lo, mut ro) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lro_size, mut lo_size, mut ro_size, mut sum_size) = (1usize, 1usize, 1usize, 1usize);
    for i in 0..dim {
        let sl = left.dims()[i] != 1;
        let sr = right.dims()[i] != 1;
        if sum_dims.contains(&i) {
            if sl && sr {
                if left.dims()[i] != right.dims()[i] {
                    bail!(Shape, "einsum(): non-broadcast dimensions must match");
                }
                sum_size *= left.dims()[i];
            } else if sl {
                left = sum_keepdim(&left, &[i])?;
            } else if sr {
                right = sum_keepdim(&right, &[i])?;
            }
        } else if sl && sr {
            if left.dims()[i] != right.dims()[i] {
                bail!(Shape, "einsum(): non-broadcast dimensions must match");
            }
            lro.push(i);
            lro_size *= left.dims()[i];
        } else if sl {
            lo.push(i);
            lo_size *= left.dims()[i];
        } else {
            ro.push(i);
            ro_size *= right.dims()[i];
        }
    }
    // Put the right operand first when all its dims come before the left's in the output, so
    // the product comes out in output order.
    if !lo.is_empty() && !ro.is_empty() && ro.last() < lo.first() {
        std::mem::swap(&mut left, &mut right);
        std::mem::swap(&mut lo, &mut ro);
        std::mem::swap(&mut lo_size, &mut ro_size);
    }
    let mut out_size: Vec<usize> = Vec::with_capacity(dim);
    out_size.extend(lro.iter().map(|&d| left.dims()[d]));
    out_size.extend(lo.iter().map(|&d| left.dims()[d]));
    out_size.extend(sum_dims.iter().map(|_| 1));
    out_size.extend(ro.iter().map(|&d| right.dims()[d]));
    let lperm: Vec<isize> = lro.iter().chain(&lo).chain(sum_dims).chain(&ro).map(|&d| d as isize).collect();
    let rperm: Vec<isize> = lro.iter().chain(sum_dims).chain(&ro).chain(&lo).map(|&d| d as isize).collect();
    let mut operm = vec![0isize; dim];
    for (i, &d) in lro.iter().chain(&lo).chain(sum_dims).chain(&ro).enumerate() {
        operm[d] = i as isize;
    }
    let l3 = left.permute(&lperm)?.reshape([lro_size, lo_size, sum_size])?;
    let r3 = right.permute(&rperm)?.reshape([lro_size, sum_size, ro_size])?;
    l3.bmm(&r3)?.view(out_size)?.permute(&operm)
}

/// Einstein summation over `operands` as described by `equation` (`torch.einsum`).
///
/// Supports explicit (`"ij,jk->ik"`) and implicit (`"ij,jk"`) outputs, diagonals and traces
/// (`"ii->i"`, `"ii"`), ellipsis broadcasting (`"...ij,...jk->...ik"`), spaces, and any number
/// of operands (contracted left to right). Size-1 dims broadcast against the same letter in
/// other operands. Errors (with PyTorch's messages) for malformed equations, operand-count or
/// rank mismatches and incompatible sizes.
///
/// ```
/// use pyrite_core::{einsum, Tensor};
/// let a = Tensor::new([[1f32, 2.], [3., 4.]])?;
/// let b = Tensor::new([[1f32, 0.], [0., 1.]])?;
/// assert_eq!(einsum("ij,jk->ik", &[&a, &b])?.to_vec2::<f32>()?, a.to_vec2::<f32>()?);
/// assert_eq!(einsum("ii", &[&a])?.item::<f32>()?, 5.0); // trace
/// assert_eq!(einsum("ij->j", &[&a])?.to_vec::<f32>()?, vec![4., 6.]);
/// assert_eq!(einsum("ji", &[&a])?.to_vec2::<f32>()?, vec![vec![1., 3.], vec![2., 4.]]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
    if crate::autocast::is_active() {
        let inputs: Vec<Option<&Tensor>> = operands.iter().map(|&t| Some(t)).collect();
        if let Some(r) = crate::autocast::dispatch("einsum", &inputs, |t| {
            einsum(equation, &(0..operands.len()).map(|i| t.at(i)).collect::<Vec<_>>())
        }) {
            return r;
        }
    }
    if operands.is_empty() {
        bail!(Value, "einsum(): must provide at least one operand");
    }
    let num_ops = operands.len();
    let eq = equation.as_bytes();
    let arrow = equation.find("->");
    let lhs = &eq[..arrow.unwrap_or(eq.len())];

    // 1. Parse the operands' labels.
    let mut op_labels: Vec<Vec<u8>> = vec![Vec::new(); num_ops];
    let mut ell_in_input = false;
    let mut cur = 0usize;
    let mut i = 0usize;
    while i < lhs.len() {
        match lhs[i] {
            b' ' => {}
            b'.' => {
                if ell_in_input {
                    bail!(Value, "einsum(): found '.' for operand {cur} for which an ellipsis was already found");
                }
                if !(i + 2 < lhs.len() && lhs[i + 1] == b'.' && lhs[i + 2] == b'.') {
                    bail!(Value, "einsum(): found '.' for operand {cur} that is not part of any ellipsis");
                }
                i += 2;
                op_labels[cur].push(ELLIPSIS);
                ell_in_input = true;
            }
            b',' => {
                cur += 1;
                if cur >= num_ops {
                    bail!(Value, "einsum(): fewer operands were provided than specified in the equation");
                }
                ell_in_input = false;
            }
            c if c.is_ascii_alphabetic() => op_labels[cur].push(label_id(c)),
            _ => bail!(
                Value,
                "einsum(): invalid subscript given at index {i} in the equation string, subscripts must be in [a-zA-Z]"
            ),
        }
        i += 1;
    }
    if cur != num_ops - 1 {
        bail!(Value, "einsum(): more operands were provided than specified in the equation");
    }

    // 2. Label counts and the number of dims the ellipsis covers.
    let mut label_count = [0usize; TOTAL_LABELS];
    let mut ell_num_dim = 0usize;
    for (k, labels) in op_labels.iter().enumerate() {
        let ndims = operands[k].rank();
        let has_ell = labels.contains(&ELLIPSIS);
        let nlabels = labels.len() - has_ell as usize;
        for &l in labels {
            if l != ELLIPSIS {
                label_count[l as usize] += 1;
            }
        }
        if has_ell {
            if nlabels > ndims {
                bail!(
                    Shape,
                    "einsum(): the number of subscripts in the equation ({nlabels}) is more than the number of dimensions ({ndims}) for operand {k}"
                );
            }
            ell_num_dim = ell_num_dim.max(ndims - nlabels);
        } else if nlabels != ndims {
            bail!(
                Shape,
                "einsum(): the number of subscripts in the equation ({nlabels}) does not match the number of dimensions ({ndims}) for operand {k} and no ellipsis was given"
            );
        }
    }

    // 3. Where each label goes in the aligned layout: output dims first, then contractions.
    let mut label_pos = [UNSET; TOTAL_LABELS];
    let mut perm_index = 0usize;
    let mut ell_index = 0usize;
    let mut ell_in_output = false;
    match arrow {
        None => {
            perm_index = ell_num_dim;
            ell_in_output = true;
            for l in 0..TOTAL_LABELS {
                if label_count[l] == 1 {
                    label_pos[l] = perm_index;
                    perm_index += 1;
                }
            }
        }
        Some(pos) => {
            let rhs = &eq[pos + 2..];
            let mut i = 0usize;
            while i < rhs.len() {
                match rhs[i] {
                    b' ' => {}
                    b'.' => {
                        if ell_in_output {
                            bail!(Value, "einsum(): found '.' for output but an ellipsis (...) was already found");
                        }
                        if !(i + 2 < rhs.len() && rhs[i + 1] == b'.' && rhs[i + 2] == b'.') {
                            bail!(Value, "einsum(): found '.' for output that is not part of any ellipsis (...)");
                        }
                        i += 2;
                        ell_index = perm_index;
                        perm_index += ell_num_dim;
                        ell_in_output = true;
                    }
                    c if c.is_ascii_alphabetic() => {
                        let l = label_id(c) as usize;
                        if label_pos[l] != UNSET {
                            bail!(Value, "einsum(): output subscript {} appears more than once in the output", c as char);
                        }
                        if label_count[l] == 0 {
                            bail!(
                                Value,
                                "einsum(): output subscript {} does not appear in the equation for any input operand",
                                c as char
                            );
                        }
                        label_pos[l] = perm_index;
                        perm_index += 1;
                    }
                    _ => bail!(
                        Value,
                        "einsum(): invalid subscript given at index {} in the equation string, subscripts must be in [a-zA-Z]",
                        lhs.len() + 2 + i
                    ),
                }
                i += 1;
            }
        }
    }
    let out_num_dim = perm_index;
    if !ell_in_output {
        ell_index = perm_index;
        perm_index += ell_num_dim;
    }
    for l in 0..TOTAL_LABELS {
        if label_count[l] > 0 && label_pos[l] == UNSET {
            label_pos[l] = perm_index;
            perm_index += 1;
        }
    }

    // 4. Align every operand (views only): check sizes, take diagonals of repeated labels,
    // insert size-1 dims for missing labels, permute. `dim_counts` counts, per aligned dim,
    // the operands where it has a size other than 1.
    let mut label_size = [1usize; TOTAL_LABELS];
    let mut ell_sizes = vec![1usize; ell_num_dim];
    let mut dim_counts = vec![0usize; perm_index];
    let mut ops: VecDeque<Tensor> = VecDeque::with_capacity(num_ops);
    // Under autograd einsum is a composite of recorded ops, as in PyTorch: the aligning view
    // is taken on a contiguous operand with a recorded strided view, the contractions use
    // permute, reshape, mul and bmm.
    let recording = crate::autograd::record::needs_grad(operands);
    for (k, labels) in op_labels.iter().enumerate() {
        let owned = if recording { operands[k].contiguous()? } else { operands[k].clone() };
        let op = &owned;
        let mut shape: Vec<usize> = op.dims().to_vec();
        let mut strides: Vec<usize> = op.stride().to_vec();
        let mut perm = vec![UNSET; perm_index];
        let mut dim = 0usize;
        for &s in labels {
            if s == ELLIPSIS {
                let ndim = op.rank() + 1 - labels.len();
                for j in ell_num_dim - ndim..ell_num_dim {
                    if shape[dim] != 1 {
                        if ell_sizes[j] != 1 && ell_sizes[j] != shape[dim] {
                            bail!(
                                Shape,
                                "einsum(): dimension {dim} covered by ellipsis in operand {k}has size {} which does not broadcast with previously seen ellipsis with size {} for the respective dimension",
                                shape[dim],
                                ell_sizes[j]
                            );
                        }
                        ell_sizes[j] = shape[dim];
                        dim_counts[ell_index + j] += 1;
                    }
                    perm[ell_index + j] = dim;
                    dim += 1;
                }
            } else {
                let s = s as usize;
                let p = label_pos[s];
                if perm[p] == UNSET {
                    if shape[dim] != 1 {
                        if label_size[s] != 1 && label_size[s] != shape[dim] {
                            bail!(
                                Shape,
                                "einsum(): subscript {} has size {} for operand {k} which does not broadcast with previously seen size {}",
                                label_char(s),
                                shape[dim],
                                label_size[s]
                            );
                        }
                        label_size[s] = shape[dim];
                        dim_counts[p] += 1;
                    }
                    perm[p] = dim;
                    dim += 1;
                } else {
                    // Repeated label: the diagonal, in place of the first occurrence.
                    let prev = perm[p];
                    if shape[dim] != shape[prev] {
                        bail!(
                            Shape,
                            "einsum(): subscript {} is repeated for operand {k} but the sizes don't match, {} != {}",
                            label_char(s),
                            shape[dim],
                            shape[prev]
                        );
                    }
                    strides[prev] += strides[dim];
                    shape.remove(dim);
                    strides.remove(dim);
                }
            }
        }
        for p in perm.iter_mut() {
            if *p == UNSET {
                shape.push(1);
                strides.push(1);
                *p = dim;
                dim += 1;
            }
        }
        let layout = Layout {
            shape: Shape(perm.iter().map(|&p| shape[p]).collect::<DimVec>()),
            strides: perm.iter().map(|&p| strides[p]).collect(),
            offset: op.storage_offset(),
        };
        if recording {
            ops.push_back(crate::view::strided_view(op, layout.shape, layout.strides, 0)?);
        } else {
            ops.push_back(op.with_layout(layout));
        }
    }

    // 5. Contract left to right.
    while ops.len() > 1 {
        let mut a = ops.pop_front().unwrap();
        let mut b = ops.pop_front().unwrap();
        let mut sum_dims = Vec::new();
        let mut a_sum = Vec::new();
        let mut b_sum = Vec::new();
        for (d, count) in dim_counts.iter_mut().enumerate().skip(out_num_dim) {
            let sa = a.dims()[d] != 1;
            let sb = b.dims()[d] != 1;
            if sa && sb {
                *count -= 1;
                if *count == 1 {
                    sum_dims.push(d);
                    *count = 0;
                }
            } else if *count == 1 {
                if sa {
                    a_sum.push(d);
                    *count = 0;
                } else if sb {
                    b_sum.push(d);
                    *count = 0;
                }
            }
        }
        if !a_sum.is_empty() {
            a = sum_keepdim(&a, &a_sum)?;
        }
        if !b_sum.is_empty() {
            b = sum_keepdim(&b, &b_sum)?;
        }
        ops.push_front(sumproduct_pair(&a, &b, &sum_dims)?);
    }

    // 6. Sum out (or drop, when already size 1) the contraction dims.
    let result = ops.pop_front().unwrap();
    if perm_index > out_num_dim {
        let trailing: Vec<usize> = (out_num_dim..perm_index).collect();
        if trailing.iter().all(|&d| result.dims()[d] == 1) && num_ops > 1 {
            return truncate_dims(&result, out_num_dim);
        }
        let s = sum_keepdim(&result, &trailing)?;
        return truncate_dims(&s, out_num_dim);
    }
    Ok(result)
}
