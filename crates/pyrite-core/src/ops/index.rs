//! Indexing ops: `index_select`, `gather`, `take`, `masked_select`, `nonzero`, advanced indexing
//! with tensor indices ([`Tensor::index_tensor`], PyTorch's `t[idx]`), and the scatter family
//! (`scatter`, `scatter_add`, `scatter_reduce`, `index_add`, `index_copy`, `index_fill`,
//! `index_put`, `masked_scatter`) with in-place forms that write through views.
//!
//! Index tensors are int64 (int32 where PyTorch accepts it). Every index is validated before
//! anything is written, so a failing in-place op leaves its target untouched; an index out of
//! range is an [`ErrorKind::Index`](crate::ErrorKind::Index) error such as "index 5 is out of
//! bounds for dimension 0 with size 3".

use super::binary::Arith;
use super::{check_no_internal_overlap, GRAIN};
use crate::autograd::record::{inplace_ad, needs_grad, paused, record1, Save};
use crate::dtype::Scalar;
use crate::layout::Layout;
use crate::shape::{broadcast_shapes, wrap_dim, DimVec, Shape};
use crate::strided::Strided;
use crate::threads::parallel_for;
use crate::{bail, dispatch_all, DType, Element, Result, Tensor};

#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: parallel kernels write disjoint elements from different threads.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole `Send` wrapper).
    #[inline(always)]
    fn get(self) -> *mut T {
        self.0
    }
}

/// The reduction of [`Tensor::scatter_reduce`] (PyTorch's `reduce=` strings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduce {
    /// Plain `scatter`: the last write wins.
    Assign,
    Sum,
    Prod,
    Mean,
    Amax,
    Amin,
}

impl Reduce {
    fn parse(s: &str) -> Result<Reduce> {
        Ok(match s {
            "sum" => Reduce::Sum,
            "prod" => Reduce::Prod,
            "mean" => Reduce::Mean,
            "amax" | "max" => Reduce::Amax,
            "amin" | "min" => Reduce::Amin,
            other => {
                bail!(Value, "reduce argument must be either sum, prod, mean, amax or amin, got {other}")
            }
        })
    }
}

/// Which index dtypes an op accepts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IndexDtypes {
    I64,
    I32OrI64,
}

/// Reads an index tensor's values in row-major order as i64.
pub(crate) fn index_values(index: &Tensor, op: &str, accept_i32: bool) -> Result<Vec<i64>> {
    if index.device().is_cuda() {
        // Read on the host, where the positions are checked (PyTorch checks them on the
        // device, asynchronously).
        return index_values(&index.to_device(crate::Device::Cpu)?, op, accept_i32);
    }
    match index.dtype() {
        DType::I64 => Ok(index.gather_elements::<i64>()),
        DType::I32 if accept_i32 => Ok(index.with_slice::<i32, _>(|s| s.iter().map(|&v| v as i64).collect())),
        dt if accept_i32 => bail!(DType, "{op}(): Expected dtype int32 or int64 for index, but got {dt}"),
        dt => bail!(DType, "{op}(): Expected dtype int64 for index, but got {dt}"),
    }
}

fn read_index(index: &Tensor, op: &str, which: IndexDtypes) -> Result<Vec<i64>> {
    index_values(index, op, which == IndexDtypes::I32OrI64)
}

/// Checks every index against `size` and wraps negative ones when `negative_ok`.
fn wrap_indices(idx: &mut [i64], size: usize, dim: usize, negative_ok: bool, op: &str) -> Result<()> {
    let n = size as i64;
    for v in idx.iter_mut() {
        let x = *v;
        if x >= n || x < -n || (x < 0 && !negative_ok) {
            bail!(Index, "{op}index {x} is out of bounds for dimension {dim} with size {size}");
        }
        if x < 0 {
            *v = x + n;
        }
    }
    Ok(())
}

/// `x` itself, or a private copy when it shares storage with `target` (so a kernel holding
/// `target`'s write lock can still read it).
fn detach_from(x: &Tensor, target: &Tensor) -> Result<Tensor> {
    if x.same_storage(target) {
        x.deep_clone()
    } else {
        Ok(x.clone())
    }
}

/// The smallest value of `T` (identity of `amax`).
fn lowest<T: Element>() -> T {
    match T::DTYPE {
        DType::Bool | DType::U8 => T::from_i64(0),
        DType::I32 => T::from_i64(i32::MIN as i64),
        DType::I64 => T::from_i64(i64::MIN),
        _ => T::from_f64(f64::NEG_INFINITY),
    }
}

/// The largest value of `T` (identity of `amin`).
fn highest<T: Element>() -> T {
    match T::DTYPE {
        DType::Bool => T::from_i64(1),
        DType::U8 => T::from_i64(255),
        DType::I32 => T::from_i64(i32::MAX as i64),
        DType::I64 => T::from_i64(i64::MAX),
        _ => T::from_f64(f64::INFINITY),
    }
}

/// A 0-d tensor of `dtype` holding `v` (converted like PyTorch's fill: floats truncate for ints).
fn scalar_of(dtype: DType, v: Scalar) -> Result<Tensor> {
    dispatch_all!(dtype, T => Tensor::scalar::<T>(T::from_scalar(v)))
}

/// Strides of `t` with the stride of `dim` set to 0 (0-d tensors give an empty list).
fn strides_without(t: &Tensor, dim: usize) -> (DimVec, usize) {
    let mut s: DimVec = t.stride().iter().copied().collect();
    if s.is_empty() {
        return (s, 0);
    }
    let sd = s[dim];
    s[dim] = 0;
    (s, sd)
}

fn gather_kernel<T: Element>(
    src: &Tensor,
    shape: &Shape,
    idx: &[i64],
    strides: &[usize],
    sd: usize,
) -> Result<Tensor> {
    let g = src.storage().read();
    let s = g.cpu().as_slice::<T>();
    let it = Strided::new(shape.dims(), [strides], [src.storage_offset()]);
    Tensor::build::<T>(shape.clone(), |out| {
        let po = SendPtr(out.as_mut_ptr());
        parallel_for(out.len(), GRAIN, |a, b| {
            it.for_range(a, b, |cur, [o], len, [st]| {
                for i in 0..len {
                    let v = s[o + i * st + idx[cur + i] as usize * sd];
                    // SAFETY: `cur + i < out.len()`, and ranges of different threads are disjoint.
                    unsafe { *po.get().add(cur + i) = v };
                }
            });
        });
    })
}

/// Copies `n` blocks per outer row: block `j` of row `o` comes from block `idx[j]` of row `o`
/// of contiguous `src` (`inner` elements each). Parallel over all `outer * n` blocks.
fn index_select_contig<T: Element>(
    src: &[T],
    out: &mut [T],
    outer: usize,
    size: usize,
    inner: usize,
    idx: &[i64],
) {
    let n = idx.len();
    let po = SendPtr(out.as_mut_ptr());
    parallel_for(outer * n, (GRAIN / inner.max(1)).max(1), |a, b| {
        for blk in a..b {
            let (o, j) = (blk / n, blk % n);
            let k = idx[j] as usize;
            let s = &src[(o * size + k) * inner..(o * size + k + 1) * inner];
            // SAFETY: block `blk` is written by exactly one thread and lies in `out`.
            unsafe {
                let d = po.get().add(blk * inner);
                if inner == 1 {
                    *d = s[0];
                } else {
                    std::ptr::copy_nonoverlapping(s.as_ptr(), d, inner);
                }
            }
        }
    });
}

/// An index list prepared for advanced indexing (`t[i0, :, i2]`): which dims are indexed, the
/// broadcast index values, and where the index dims land in the result.
struct AdvIndex {
    /// The indexed tensor (with size-1 dims added for 0-d bool masks).
    src: Tensor,
    /// Per indexed dim: the broadcast, wrapped index values in row-major order over `bshape`.
    idx: Vec<Vec<i64>>,
    /// The indexed dims of `src`, ascending.
    dims: Vec<usize>,
    /// The broadcast shape of the index tensors.
    bshape: DimVec,
    /// The dims of `src` that are not indexed, ascending.
    rest: Vec<usize>,
    /// How many of `rest` come before the index dims in the result (all index dims adjacent:
    /// they stay in place; otherwise they go first).
    before: usize,
}

impl AdvIndex {
    fn new(t: &Tensor, indices: &[Option<Tensor>]) -> Result<Option<AdvIndex>> {
        let mut src = t.clone();
        let mut list: Vec<Option<Tensor>> = Vec::new();
        let mut pos = 0usize;
        for ix in indices {
            match ix {
                None => {
                    list.push(None);
                    pos += 1;
                }
                Some(x) => match x.dtype() {
                    DType::I64 | DType::I32 => {
                        list.push(Some(x.clone()));
                        pos += 1;
                    }
                    DType::Bool | DType::U8 => {
                        let m = x.to_dtype(DType::Bool)?;
                        if m.rank() == 0 {
                            if pos > src.rank() {
                                bail!(Index, "too many indices for tensor of dimension {}", t.rank());
                            }
                            src = src.unsqueeze(pos as isize)?;
                            let n = m.item::<bool>()? as usize;
                            list.push(Some(Tensor::zeros_on([n], DType::I64, src.device())?));
                            pos += 1;
                            continue;
                        }
                        if pos + m.rank() > src.rank() {
                            bail!(
                                Index,
                                "too many indices for tensor of dimension {} (got {})",
                                t.rank(),
                                pos + m.rank()
                            );
                        }
                        for k in 0..m.rank() {
                            if m.dims()[k] != src.dims()[pos + k] {
                                bail!(
                                    Index,
                                    "The shape of the mask {} at index {k} does not match the shape of the indexed tensor {} at index {}",
                                    m.shape(),
                                    src.shape(),
                                    pos + k
                                );
                            }
                        }
                        let nz = m.nonzero()?;
                        for k in 0..m.rank() {
                            list.push(Some(nz.select(1, k as isize)?));
                        }
                        pos += m.rank();
                    }
                    dt => bail!(
                        Index,
                        "tensors used as indices must be long, int, byte or bool tensors, got {dt}"
                    ),
                },
            }
        }
        if pos > src.rank() {
            bail!(Index, "too many indices for tensor of dimension {} (got {})", t.rank(), pos);
        }
        let defined: Vec<(usize, &Tensor)> =
            list.iter().enumerate().filter_map(|(d, x)| x.as_ref().map(|x| (d, x))).collect();
        if defined.is_empty() {
            return Ok(None);
        }
        let mut bshape = Shape::default();
        for (_, x) in &defined {
            bshape = match broadcast_shapes(bshape.dims(), x.dims(), "index") {
                Ok(s) => s,
                Err(_) => bail!(
                    Index,
                    "shape mismatch: indexing tensors could not be broadcast together with shapes {}",
                    defined.iter().map(|(_, x)| x.shape().to_string()).collect::<Vec<_>>().join(", ")
                ),
            };
        }
        let mut idx = Vec::with_capacity(defined.len());
        let mut dims = Vec::with_capacity(defined.len());
        for (d, x) in &defined {
            let mut v = index_values(&x.broadcast_to(bshape.dims())?, "index", true)?;
            wrap_indices(&mut v, src.dims()[*d], *d, true, "")?;
            idx.push(v);
            dims.push(*d);
        }
        let adjacent = dims[dims.len() - 1] - dims[0] + 1 == dims.len();
        let rest: Vec<usize> = (0..src.rank()).filter(|d| !dims.contains(d)).collect();
        let before = if adjacent { dims[0] } else { 0 };
        Ok(Some(AdvIndex { src, idx, dims, bshape: bshape.0, rest, before }))
    }

    /// The shape of `src[indices]`.
    fn result_shape(&self) -> Shape {
        let sd = self.src.dims();
        let mut out: DimVec = self.rest[..self.before].iter().map(|&d| sd[d]).collect();
        out.extend_from_slice(&self.bshape);
        out.extend(self.rest[self.before..].iter().map(|&d| sd[d]));
        Shape(out)
    }

    /// Visits index positions `b0..b1` of the broadcast index shape. For each one, walks the
    /// non-indexed dims of `src` together with `other` (a layout of the result's shape) and
    /// calls `f(src_offset, other_offset, len, src_stride, other_stride)` per run.
    fn walk(
        &self,
        other: &Layout,
        b0: usize,
        b1: usize,
        mut f: impl FnMut(usize, usize, usize, usize, usize),
    ) {
        if b0 >= b1 {
            return;
        }
        let sl = self.src.layout();
        let nb = self.bshape.len();
        let ost = other.strides();
        let rest_shape: DimVec = self.rest.iter().map(|&d| sl.dims()[d]).collect();
        let src_rest: DimVec = self.rest.iter().map(|&d| sl.strides()[d]).collect();
        let mut other_rest: DimVec = ost[..self.before].iter().copied().collect();
        other_rest.extend_from_slice(&ost[self.before + nb..]);
        let other_b = &ost[self.before..self.before + nb];
        let rest_n: usize = rest_shape.iter().product();
        let sst: Vec<usize> = self.dims.iter().map(|&d| sl.strides()[d]).collect();
        // Odometer over the broadcast index shape, starting at `b0`.
        let mut pos: DimVec = smallvec::smallvec![0; nb];
        let mut oo = other.offset();
        let mut r = b0;
        for k in (0..nb).rev() {
            pos[k] = r % self.bshape[k];
            r /= self.bshape[k];
            oo += pos[k] * other_b[k];
        }
        for b in b0..b1 {
            let mut so = sl.offset();
            for (ix, st) in self.idx.iter().zip(&sst) {
                so += ix[b] as usize * st;
            }
            if rest_shape.is_empty() {
                f(so, oo, 1, 0, 0);
            } else {
                Strided::new(&rest_shape, [&src_rest, &other_rest], [so, oo]).for_range(
                    0,
                    rest_n,
                    |_, [a, o], len, [sa, so2]| f(a, o, len, sa, so2),
                );
            }
            for k in (0..nb).rev() {
                pos[k] += 1;
                oo += other_b[k];
                if pos[k] < self.bshape[k] {
                    break;
                }
                oo -= pos[k] * other_b[k];
                pos[k] = 0;
            }
        }
    }
}

impl Tensor {
    // ------------------------------------------------------------------ reads

    /// Elements along `dim` at the positions in `index` (1-D or 0-d, int64 or int32)
    /// (`torch.index_select`). The result has `index.numel()` entries along `dim`.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 2., 3.], [4., 5., 6.]])?;
    /// let y = x.index_select(1, &Tensor::new([2i64, 0])?)?;
    /// assert_eq!(y.to_vec2::<f32>()?, vec![vec![3., 1.], vec![6., 4.]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::index_select", [self, index], {
            let y = self.index_select_impl(dim, index)?;
            if !needs_grad(&[self]) {
                return Ok(y);
            }
            let shape = self.shape().clone();
            record1("IndexSelectBackward0", &[self], y, &[Save::Input(index)], move |ctx, g| {
                Ok(vec![Some(index_add_into_zeros(&g[0], dim, &ctx.saved(0)?, &shape)?)])
            })
        })
    }

    fn index_select_impl(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        let d = wrap_dim(dim, self.rank())?;
        if index.rank() > 1 {
            bail!(Index, "index_select(): Index is supposed to be a vector");
        }
        let mut idx = read_index(index, "index_select", IndexDtypes::I32OrI64)?;
        let size = if self.rank() == 0 { 1 } else { self.dims()[d] };
        wrap_indices(&mut idx, size, d, false, "index_select(): ")?;
        if self.rank() == 0 {
            if idx.len() != 1 {
                bail!(
                    Index,
                    "index_select(): Index to scalar can have only 1 value, got {} value(s)",
                    idx.len()
                );
            }
            return self.deep_clone();
        }
        if self.device().is_cuda() {
            return crate::cuda::index_select(self, d, &idx);
        }
        let mut shape = self.shape().clone();
        shape.0[d] = idx.len();
        let outer: usize = self.dims()[..d].iter().product();
        let inner: usize = self.dims()[d + 1..].iter().product();
        if self.is_contiguous() {
            return dispatch_all!(self.dtype(), T => self.with_slice::<T, _>(|s| {
                Tensor::build::<T>(shape.clone(), |out| index_select_contig(s, out, outer, size, inner, &idx))
            }));
        }
        // Strided input: gather with the index broadcast along the other dims.
        let mut istrides: DimVec = smallvec::smallvec![0; self.rank()];
        istrides[d] = 1;
        let (sstrides, sd) = strides_without(self, d);
        let full: Vec<i64> = {
            let mut v = Vec::with_capacity(shape.numel());
            Strided::new(shape.dims(), [&istrides[..]], [0]).for_range(
                0,
                shape.numel(),
                |_, [o], len, [st]| {
                    for i in 0..len {
                        v.push(idx[o + i * st]);
                    }
                },
            );
            v
        };
        dispatch_all!(self.dtype(), T => gather_kernel::<T>(self, &shape, &full, &sstrides, sd))
    }

    /// Values along `dim` picked by `index` (`torch.gather`): `out[i][j] = self[index[i][j]][j]`
    /// for `dim = 0`. `index` has the same rank as `self` and is no larger apart from `dim`;
    /// the result has `index`'s shape. Negative indices are errors, as in PyTorch.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 2.], [3., 4.]])?;
    /// let y = x.gather(1, &Tensor::new([[0i64, 0], [1, 0]])?)?;
    /// assert_eq!(y.to_vec2::<f32>()?, vec![vec![1., 1.], vec![4., 3.]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::gather", [self, index], {
            let y = self.gather_impl(dim, index)?;
            if !needs_grad(&[self]) {
                return Ok(y);
            }
            let shape = self.shape().clone();
            record1("GatherBackward0", &[self], y, &[Save::Input(index)], move |ctx, g| {
                Ok(vec![Some(scatter_into_zeros(&g[0], dim, &ctx.saved(0)?, &shape)?)])
            })
        })
    }

    fn gather_impl(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        let d = wrap_dim(dim, self.rank())?;
        let mut idx = read_index(index, "gather", IndexDtypes::I32OrI64)?;
        if index.numel() == 0 {
            return Tensor::zeros_on(index.shape().clone(), self.dtype(), self.device());
        }
        if index.rank() != self.rank() {
            bail!(Shape, "gather(): Index tensor must have the same number of dimensions as input tensor");
        }
        for k in 0..self.rank() {
            if k != d && index.dims()[k] > self.dims()[k] {
                bail!(
                    Shape,
                    "gather(): Size does not match at dimension {k} expected index {} to be no larger than self {} apart from dimension {d}",
                    index.shape(),
                    self.shape()
                );
            }
        }
        let size = if self.rank() == 0 { 1 } else { self.dims()[d] };
        wrap_indices(&mut idx, size, d, false, "gather(): ")?;
        if self.device().is_cuda() {
            return crate::cuda::gather(self, d, &idx, index.shape());
        }
        let (sstrides, sd) = strides_without(self, d);
        dispatch_all!(self.dtype(), T => gather_kernel::<T>(self, index.shape(), &idx, &sstrides, sd))
    }

    /// The elements at flat (row-major) positions `index` of this tensor, in `index`'s shape
    /// (`torch.take`); negative indices count from the end.
    pub fn take(&self, index: &Tensor) -> Result<Tensor> {
        if index.dtype() != DType::I64 {
            bail!(DType, "take(): Expected a long tensor for index, but got {}", index.dtype());
        }
        let idx = read_index(index, "take", IndexDtypes::I64)?;
        let n = self.numel() as i64;
        for &v in &idx {
            if v >= n || v < -n {
                bail!(Index, "out of range: tried to access index {v} on a tensor of {n} elements.");
            }
        }
        if self.device().is_cuda() {
            // On a GPU: an index_select of the flattened tensor (differentiable as it is).
            let wrapped: Vec<i64> = idx.iter().map(|&v| if v < 0 { v + n } else { v }).collect();
            let k = wrapped.len();
            let pos = Tensor::from_vec(wrapped, [k])?.to_device(self.device())?;
            return self.reshape([self.numel()])?.index_select(0, &pos)?.reshape(index.shape().dims());
        }
        let y = dispatch_all!(self.dtype(), T => self.with_slice::<T, _>(|s| {
            Tensor::build::<T>(index.shape().clone(), |out| {
                for (o, &v) in out.iter_mut().zip(&idx) {
                    *o = s[if v < 0 { v + n } else { v } as usize];
                }
            })
        }))?;
        if !needs_grad(&[self]) {
            return Ok(y);
        }
        // The gradient: zeros of the flattened input with the output's gradient added at the
        // (wrapped) flat positions.
        let wrapped: Vec<i64> = idx.iter().map(|&v| if v < 0 { v + n } else { v }).collect();
        let k = wrapped.len();
        let wrapped = Tensor::from_vec(wrapped, [k])?;
        let shape = self.shape().clone();
        record1("TakeBackward0", &[self], y, &[], move |_, g| {
            let flat = index_add_into_zeros(&g[0].reshape([k])?, 0, &wrapped, &Shape::from([n as usize]))?;
            Ok(vec![Some(flat.reshape(shape.dims())?)])
        })
    }

    /// The elements where `mask` (bool, broadcast with `self`) is true, as a 1-D tensor in
    /// row-major order (`torch.masked_select`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1i64, 2], [3, 4]])?;
    /// let m = Tensor::new([true, false])?;
    /// assert_eq!(x.masked_select(&m)?.to_vec::<i64>()?, vec![1, 3]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            bail!(DType, "masked_select: expected BoolTensor for mask, got {}", mask.dtype());
        }
        let shape = broadcast_shapes(self.dims(), mask.dims(), "masked_select")?;
        if self.device().is_cuda() || mask.device().is_cuda() {
            // On a GPU: `x[mask]` over the broadcast pair (differentiable as it is).
            let (x, m) = (self.broadcast_to(shape.dims())?, mask.broadcast_to(shape.dims())?);
            return x.index_tensor(&[Some(m)]);
        }
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            self.masked_select_impl(mask, &shape)?
        };
        if !rec {
            return Ok(y);
        }
        // The gradient: the selected positions of zeros (of the broadcast shape) get the
        // output's gradient, in order; the engine sums it back to this tensor's shape.
        record1("MaskedSelectBackward0", &[self], y, &[Save::Input(mask)], move |ctx, g| {
            let z = Tensor::zeros_on(shape.clone(), g[0].dtype(), g[0].device())?;
            Ok(vec![Some(z.masked_scatter(&ctx.saved(0)?, &g[0])?)])
        })
    }

    fn masked_select_impl(&self, mask: &Tensor, shape: &Shape) -> Result<Tensor> {
        let x = self.broadcast_to(shape.dims())?;
        let m = mask.broadcast_to(shape.dims())?.gather_elements::<bool>();
        let count = m.iter().filter(|&&b| b).count();
        dispatch_all!(self.dtype(), T => {
            let v = x.gather_elements::<T>();
            Tensor::build::<T>(Shape::from([count]), |out| {
                let mut k = 0;
                for (val, &b) in v.iter().zip(&m) {
                    if b {
                        out[k] = *val;
                        k += 1;
                    }
                }
            })
        })
    }

    /// The indices of the non-zero elements as an int64 tensor of shape `[n, rank]`, in
    /// row-major order (`torch.nonzero`; `torch.argwhere`). NaN counts as non-zero.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[0f32, 1.], [2., 0.]])?;
    /// assert_eq!(x.nonzero()?.to_vec2::<i64>()?, vec![vec![0, 1], vec![1, 0]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn nonzero(&self) -> Result<Tensor> {
        if self.device().is_cuda() {
            return crate::cuda::nonzero(self);
        }
        let flat: Vec<usize> = dispatch_all!(self.dtype(), T => self.with_slice::<T, _>(|s| {
            let zero = T::default();
            s.iter().enumerate().filter(|(_, v)| **v != zero).map(|(i, _)| i).collect()
        }));
        let r = self.rank();
        let dims = self.dims();
        Tensor::build::<i64>(Shape::from([flat.len(), r]), |out| {
            for (row, &f) in flat.iter().enumerate() {
                let mut rem = f;
                for k in (0..r).rev() {
                    out[row * r + k] = (rem % dims[k]) as i64;
                    rem /= dims[k];
                }
            }
        })
    }

    /// `torch.nonzero(t, as_tuple=True)`: one 1-D int64 tensor of indices per dim.
    pub fn nonzero_tuple(&self) -> Result<Vec<Tensor>> {
        let nz = self.nonzero()?;
        if self.rank() == 0 {
            return Ok(vec![Tensor::zeros_on([nz.dims()[0]], DType::I64, nz.device())?]);
        }
        (0..self.rank()).map(|k| nz.select(1, k as isize)?.contiguous()).collect()
    }

    /// Advanced indexing with tensor indices: PyTorch's `t[i0, i1, ...]` where each entry is
    /// an int64/int32 tensor, a bool (or uint8) mask, or `None` for a full slice `:`.
    /// Index tensors broadcast together; negative indices count from the end. When the indexed
    /// dims are adjacent the broadcast index dims replace them in place, otherwise they come
    /// first (NumPy's rule). Always returns a new tensor.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::arange(0.0, 12.0, 1.0, DType::F32)?.reshape([3, 4])?;
    /// let rows = Tensor::new([2i64, 0])?;
    /// let cols = Tensor::new([-1i64, 1])?;
    /// // x[rows, cols]
    /// let y = x.index_tensor(&[Some(rows), Some(cols)])?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![11., 1.]);
    /// // x[x > 9]
    /// let m = x.gt_scalar(9.0)?;
    /// assert_eq!(x.index_tensor(&[Some(m)])?.to_vec::<f32>()?, vec![10., 11.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn index_tensor(&self, indices: &[Option<Tensor>]) -> Result<Tensor> {
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            self.index_tensor_impl(indices)?
        };
        if !rec {
            return Ok(y);
        }
        // The gradient: zeros with the output's gradient accumulated at the indexed positions.
        let shape = self.shape().clone();
        let indices = indices.to_vec();
        record1("IndexBackward0", &[self], y, &[], move |_, g| {
            let z = Tensor::zeros_on(shape.clone(), g[0].dtype(), g[0].device())?;
            Ok(vec![Some(z.index_put(&indices, &g[0], true)?)])
        })
    }

    fn index_tensor_impl(&self, indices: &[Option<Tensor>]) -> Result<Tensor> {
        let adv = match AdvIndex::new(self, indices)? {
            Some(a) => a,
            None => return self.deep_clone(),
        };
        let shape = adv.result_shape();
        if adv.dims.len() == 1 {
            // One indexed dim: an index_select along it, with the index dims unflattened.
            let idx = Tensor::from_slice(&adv.idx[0], [adv.idx[0].len()])?;
            return adv.src.index_select(adv.dims[0] as isize, &idx)?.reshape(&shape);
        }
        let lo = Layout::contiguous(shape.clone());
        let nb: usize = adv.bshape.iter().product();
        if self.device().is_cuda() {
            // On a GPU: the positions planned on the host, then one index_select of the
            // flattened tensor.
            if !self.is_contiguous() {
                return self.contiguous()?.index_tensor_impl(indices);
            }
            let off = self.storage_offset();
            let mut pos = vec![0i64; shape.numel()];
            adv.walk(&lo, 0, nb, |so, oo, len, ss, os| {
                for i in 0..len {
                    pos[oo + i * os] = (so + i * ss - off) as i64;
                }
            });
            let n = pos.len();
            let pos = Tensor::from_slice(&pos, n)?.to_device(self.device())?;
            return self.reshape([self.numel()])?.index_select(0, &pos)?.reshape(&shape);
        }
        let per = (shape.numel() / nb.max(1)).max(1);
        dispatch_all!(self.dtype(), T => {
            let g = adv.src.storage().read();
            let s = g.cpu().as_slice::<T>();
            Tensor::build::<T>(shape.clone(), |out| {
                let po = SendPtr(out.as_mut_ptr());
                parallel_for(nb, (GRAIN / per).max(1), |b0, b1| {
                    adv.walk(&lo, b0, b1, |so, oo, len, ss, os| {
                        for i in 0..len {
                            // SAFETY: each output element belongs to exactly one index position.
                            unsafe { *po.get().add(oo + i * os) = s[so + i * ss] };
                        }
                    });
                });
            })
        })
    }

    // ------------------------------------------------------------------ scatter family

    #[allow(clippy::too_many_arguments)]
    fn scatter_impl(
        &self,
        dim: isize,
        index: &Tensor,
        src: Option<&Tensor>,
        value: Option<Scalar>,
        reduce: Reduce,
        include_self: bool,
        op: &str,
    ) -> Result<()> {
        let d = wrap_dim(dim, self.rank())?;
        let mut idx = read_index(index, op, IndexDtypes::I32OrI64)?;
        if let Some(s) = src
            && s.dtype() != self.dtype()
        {
            bail!(
                DType,
                "{op}(): Expected self.dtype to be equal to src.dtype, got {} and {}",
                self.dtype(),
                s.dtype()
            );
        }
        if index.numel() == 0 {
            return Ok(());
        }
        if index.rank() != self.rank() {
            bail!(Shape, "{op}(): Index tensor must have the same number of dimensions as self tensor");
        }
        if let Some(s) = src
            && s.rank() != index.rank()
        {
            bail!(Shape, "{op}(): Index tensor must have the same number of dimensions as src tensor");
        }
        let bad = (0..self.rank()).any(|k| {
            (k != d && index.dims()[k] > self.dims()[k]) || src.is_some_and(|s| index.dims()[k] > s.dims()[k])
        });
        if bad {
            match src {
                Some(s) => bail!(
                    Shape,
                    "{op}(): Expected index {} to be no larger than self {} apart from dimension {d} and to be no larger size than src {}",
                    index.shape(),
                    self.shape(),
                    s.shape()
                ),
                None => bail!(
                    Shape,
                    "{op}(): Expected index {} to be no larger than self {} apart from dimension {d}",
                    index.shape(),
                    self.shape()
                ),
            }
        }
        if reduce == Reduce::Mean && self.dtype() == DType::Bool {
            bail!(NotImplemented, "\"scatter_reduce\" with reduce='mean' is not implemented for 'Bool'");
        }
        check_no_internal_overlap(self, op)?;
        let size = if self.rank() == 0 { 1 } else { self.dims()[d] };
        wrap_indices(&mut idx, size, d, false, &format!("{op}(): "))?;
        if self.device().is_cuda() {
            return match (src, reduce, include_self) {
                (Some(s), Reduce::Sum, true) => {
                    crate::cuda::scatter_add(self, d, &idx, index.shape(), s, false, 1.0)
                }
                (Some(s), Reduce::Assign, _) => crate::cuda::scatter(self, d, &idx, index.shape(), s),
                (None, Reduce::Assign, _) => {
                    let v = Tensor::full_on(
                        [],
                        value.expect("scatter needs a source"),
                        self.dtype(),
                        self.device(),
                    )?;
                    let v = v.expand(index.dims().to_vec())?;
                    crate::cuda::scatter(self, d, &idx, index.shape(), &v)
                }
                _ => Err(crate::cuda::not_implemented(op)),
            };
        }
        if reduce == Reduce::Mean && !self.is_contiguous() {
            // Mean counts hits per element; work on a contiguous copy and write it back.
            let tmp = self.deep_clone()?;
            tmp.scatter_impl(dim, index, src, value, reduce, include_self, op)?;
            self.copy_(&tmp)?;
            return Ok(());
        }
        let (src, src_layout) = match (src, value) {
            (Some(s), _) => {
                // `src` may be larger than `index`: walk its leading corner.
                let s = detach_from(s, self)?;
                let mut l = s.layout().clone();
                l.shape = index.shape().clone();
                (s, l)
            }
            (None, Some(v)) => {
                let s = scalar_of(self.dtype(), v)?;
                let l = s.layout().expand(index.dims(), op)?;
                (s, l)
            }
            (None, None) => unreachable!("scatter needs a source"),
        };
        let (tstrides, sd) = strides_without(self, d);
        dispatch_all!(self.dtype(), T => {
            self.with_storage_mut_reading::<T, _>(&src, |buf, lay, sv| {
                let it = Strided::new(index.dims(), [&tstrides[..], src_layout.strides()], [lay.offset(), src_layout.offset()]);
                let n = index.numel();
                let visit = |f: &mut dyn FnMut(usize, T)| {
                    it.for_range(0, n, |cur, [o, os], len, [st, sst]| {
                        for i in 0..len {
                            f(o + i * st + idx[cur + i] as usize * sd, sv[os + i * sst]);
                        }
                    });
                };
                scatter_apply::<T>(buf, lay, reduce, include_self, visit);
            })?;
        });
        Ok(())
    }

    /// Writes `src` into this tensor in place at the positions `index` gives along `dim`
    /// (`t.scatter_(dim, index, src)`): `self[index[i][j]][j] = src[i][j]` for `dim = 0`.
    /// With repeated indices the last write wins.
    pub fn scatter_(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<&Tensor> {
        inplace_ad(
            self,
            &[src],
            |old| old.scatter(dim, index, src),
            || self.scatter_impl(dim, index, Some(src), None, Reduce::Assign, true, "scatter"),
        )?;
        Ok(self)
    }

    /// Writes the scalar `value` in place at the positions `index` gives along `dim`
    /// (`t.scatter_(dim, index, value)`).
    pub fn scatter_value_(&self, dim: isize, index: &Tensor, value: impl Into<Scalar>) -> Result<&Tensor> {
        let v = value.into();
        inplace_ad(
            self,
            &[],
            |old| old.scatter_value(dim, index, v),
            || self.scatter_impl(dim, index, None, Some(v), Reduce::Assign, true, "scatter"),
        )?;
        Ok(self)
    }

    /// Out-of-place [`Tensor::scatter_`] (`torch.scatter(self, dim, index, src)`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::zeros([2, 3], DType::F32)?;
    /// let i = Tensor::new([[2i64, 0]])?;
    /// let y = x.scatter(1, &i, &Tensor::new([[5f32, 6.]])?)?;
    /// assert_eq!(y.to_vec2::<f32>()?, vec![vec![6., 0., 5.], vec![0., 0., 0.]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn scatter(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let rec = needs_grad(&[self, src]);
        let out = self.clone_then(rec, |o| o.scatter_(dim, index, src).map(drop))?;
        if !rec {
            return Ok(out);
        }
        // Overwritten positions get no gradient; each src element gets the gradient of the
        // position it was written to (PyTorch's formula, also for repeated indices).
        record1("ScatterBackward0", &[self, src], out, &[Save::Input(index)], move |ctx, g| {
            let idx = ctx.saved(0)?;
            let a = if ctx.needs_input_grad(0) { Some(g[0].scatter_value(dim, &idx, 0)?) } else { None };
            let b = if ctx.needs_input_grad(1) { Some(g[0].gather(dim, &idx)?) } else { None };
            Ok(vec![a, b])
        })
    }

    /// A copy of this tensor (not recorded when `rec`) changed in place by `f`: the forward of
    /// the out-of-place forms of the in-place index ops.
    fn clone_then(&self, rec: bool, f: impl FnOnce(&Tensor) -> Result<()>) -> Result<Tensor> {
        let _g = paused(rec);
        let out = self.deep_clone()?;
        f(&out)?;
        Ok(out)
    }

    /// Out-of-place [`Tensor::scatter_value_`] (`torch.scatter(self, dim, index, value)`).
    pub fn scatter_value(&self, dim: isize, index: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let rec = needs_grad(&[self]);
        let out = self.clone_then(rec, |o| o.scatter_value_(dim, index, value).map(drop))?;
        if !rec {
            return Ok(out);
        }
        record1("ScatterBackward1", &[self], out, &[Save::Input(index)], move |ctx, g| {
            Ok(vec![Some(g[0].scatter_value(dim, &ctx.saved(0)?, 0)?)])
        })
    }

    /// Adds `src` into this tensor in place at the positions `index` gives along `dim`;
    /// repeated indices accumulate (`t.scatter_add_(dim, index, src)`).
    pub fn scatter_add_(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<&Tensor> {
        inplace_ad(
            self,
            &[src],
            |old| old.scatter_add(dim, index, src),
            || self.scatter_impl(dim, index, Some(src), None, Reduce::Sum, true, "scatter_add"),
        )?;
        Ok(self)
    }

    /// Out-of-place [`Tensor::scatter_add_`] (`torch.scatter_add`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::zeros([3], DType::F32)?;
    /// let y = x.scatter_add(0, &Tensor::new([0i64, 2, 0])?, &Tensor::new([1f32, 2., 3.])?)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![4., 0., 2.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        if let Some(r) =
            crate::autocast::dispatch("scatter_add", &[Some(self), Some(index), Some(src)], |t| {
                t.at(0).scatter_add(dim, t.at(1), t.at(2))
            })
        {
            return r;
        }
        let rec = needs_grad(&[self, src]);
        let out = self.clone_then(rec, |o| o.scatter_add_(dim, index, src).map(drop))?;
        if !rec {
            return Ok(out);
        }
        record1("ScatterAddBackward0", &[self, src], out, &[Save::Input(index)], move |ctx, g| {
            let a = if ctx.needs_input_grad(0) { Some(g[0].clone()) } else { None };
            let b = if ctx.needs_input_grad(1) { Some(g[0].gather(dim, &ctx.saved(0)?)?) } else { None };
            Ok(vec![a, b])
        })
    }

    /// Reduces `src` into this tensor in place at the positions `index` gives along `dim`
    /// (`t.scatter_reduce_(dim, index, src, reduce, include_self=...)`). `reduce` is one of
    /// `"sum"`, `"prod"`, `"mean"`, `"amax"`, `"amin"`; with `include_self = false` the
    /// existing values of scattered-to elements do not take part. Integer means round down.
    pub fn scatter_reduce_(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: &str,
        include_self: bool,
    ) -> Result<&Tensor> {
        let r = Reduce::parse(reduce)?;
        inplace_ad(
            self,
            &[src],
            |old| old.scatter_reduce(dim, index, src, reduce, include_self),
            || self.scatter_impl(dim, index, Some(src), None, r, include_self, "scatter_reduce"),
        )?;
        Ok(self)
    }

    /// Out-of-place [`Tensor::scatter_reduce_`] (`torch.scatter_reduce`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([1f32, 1.])?;
    /// let i = Tensor::new([0i64, 0, 1])?;
    /// let s = Tensor::new([3f32, 5., 2.])?;
    /// assert_eq!(x.scatter_reduce(0, &i, &s, "amax", true)?.to_vec::<f32>()?, vec![5., 2.]);
    /// assert_eq!(x.scatter_reduce(0, &i, &s, "mean", false)?.to_vec::<f32>()?, vec![4., 2.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn scatter_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: &str,
        include_self: bool,
    ) -> Result<Tensor> {
        let rec = needs_grad(&[self, src]);
        let out =
            self.clone_then(rec, |o| o.scatter_reduce_(dim, index, src, reduce, include_self).map(drop))?;
        if !rec {
            return Ok(out);
        }
        let r = Reduce::parse(reduce)?;
        let (sshape, srcshape) = (self.shape().clone(), src.shape().clone());
        let saved = [Save::Input(index), Save::Input(self), Save::Input(src), Save::Output(0)];
        record1("ScatterReduceBackward0", &[self, src], out, &saved, move |ctx, g| {
            let (idx, x, s, out) = (ctx.saved(0)?, ctx.saved(1)?, ctx.saved(2)?, ctx.saved(3)?);
            let g = &g[0];
            let (gx, gs) = match r {
                Reduce::Sum | Reduce::Mean | Reduce::Assign => {
                    let mut gs = g.clone();
                    if r == Reduce::Mean {
                        // divide by the number of values averaged into each position (1 where none)
                        let n = {
                            let _g = crate::autograd::no_grad();
                            let base = if include_self {
                                Tensor::ones_on(sshape.clone(), gs.dtype(), gs.device())?
                            } else {
                                Tensor::zeros_on(sshape.clone(), gs.dtype(), gs.device())?
                            };
                            let n = base.scatter_add(
                                dim,
                                &idx,
                                &Tensor::ones_on(srcshape.clone(), gs.dtype(), gs.device())?,
                            )?;
                            n.masked_fill(&n.eq_scalar(0)?, 1)?
                        };
                        gs = gs.div(&n)?;
                    }
                    (gs.clone(), Some(gs.gather(dim, &idx)?))
                }
                Reduce::Amax | Reduce::Amin => {
                    // the gradient is shared evenly by every element equal to the result (self
                    // only when it takes part, i.e. include_self or a position nothing scatters to)
                    let (self_hit, src_hit) = {
                        let _g = crate::autograd::no_grad();
                        let mut self_hit = x.eq(&out)?.to_dtype(x.dtype())?;
                        if !include_self {
                            self_hit = self_hit.scatter_value(dim, &idx, 0)?;
                        }
                        (self_hit, s.eq(&out.gather(dim, &idx)?)?.to_dtype(s.dtype())?)
                    };
                    let n = {
                        let _g = crate::autograd::no_grad();
                        self_hit.scatter_add(dim, &idx, &src_hit)?
                    };
                    let share = g.div(&n)?;
                    (share.mul(&self_hit)?, Some(share.gather(dim, &idx)?.mul(&src_hit)?))
                }
                Reduce::Prod => {
                    scatter_prod_backward(g, dim, &idx, &x, &s, &out, include_self, ctx.needs_input_grad(1))?
                }
            };
            let a = if !ctx.needs_input_grad(0) {
                None
            } else if include_self || matches!(r, Reduce::Amax | Reduce::Amin) {
                Some(gx)
            } else {
                Some(gx.scatter_value(dim, &idx, 0)?)
            };
            let b = if ctx.needs_input_grad(1) { gs } else { None };
            Ok(vec![a, b])
        })
    }

    /// Checks `index` (1-D or 0-d) and `source` for the `index_*` family and returns the
    /// wrapped dim and index values.
    fn index_family_check(
        &self,
        dim: isize,
        index: &Tensor,
        source: Option<&Tensor>,
        which: IndexDtypes,
        negative_ok: bool,
        op: &str,
    ) -> Result<(usize, Vec<i64>)> {
        let d = wrap_dim(dim, self.rank())?;
        if index.rank() > 1 {
            bail!(
                Index,
                "{op}(): Index is supposed to be a vector, but got dim: {} with type: {} and size: {}",
                index.rank(),
                index.dtype(),
                index.shape()
            );
        }
        if which == IndexDtypes::I64 && index.dtype() != DType::I64 {
            bail!(DType, "{op}(): Expected a long tensor for index, but got {}", index.dtype());
        }
        let mut idx = read_index(index, op, which)?;
        if let Some(s) = source {
            if s.dtype() != self.dtype() {
                bail!(
                    DType,
                    "{op}(): self and source expected to have the same dtype, but got (self) {} and (source) {}",
                    self.dtype(),
                    s.dtype()
                );
            }
            let ok =
                s.rank() == self.rank() && (0..self.rank()).all(|k| k == d || s.dims()[k] == self.dims()[k]);
            if !ok {
                bail!(
                    Shape,
                    "{op}(): source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = {} source.shape = {}",
                    self.shape(),
                    s.shape()
                );
            }
            let n = if s.rank() == 0 { 1 } else { s.dims()[d] };
            if idx.len() != n {
                bail!(
                    Shape,
                    "{op}(): Number of indices ({}) should be equal to source.size(dim): ({n}), for dim: {d}",
                    idx.len()
                );
            }
        }
        let size = if self.rank() == 0 { 1 } else { self.dims()[d] };
        wrap_indices(&mut idx, size, d, negative_ok, &format!("{op}(): "))?;
        check_no_internal_overlap(self, op)?;
        Ok((d, idx))
    }

    /// Shared kernel of `index_add_` / `index_copy_` / `index_fill_`: for each `j`, combines
    /// the slice `src.select(d, j)` (or the scalar) into `self.select(d, idx[j])`.
    fn index_slices<T: Arith>(
        &self,
        d: usize,
        idx: &[i64],
        src: Option<&Tensor>,
        f: impl Fn(T, T) -> T,
    ) -> Result<()> {
        let src = match src {
            Some(s) => Some(detach_from(s, self)?),
            None => None,
        };
        let zero_d = self.rank() == 0;
        let combine = |buf: &mut [T], lay: &Layout, sv: Option<&[T]>| {
            let tl = if zero_d { lay.clone() } else { lay.select(d, 0) };
            let td = if zero_d { 0 } else { lay.strides()[d] };
            let sl =
                src.as_ref()
                    .map(|s| if s.rank() == 0 { s.layout().clone() } else { s.layout().select(d, 0) });
            let sdst = src.as_ref().map_or(0, |s| if s.rank() == 0 { 0 } else { s.stride()[d] });
            let n = tl.numel();
            for (j, &k) in idx.iter().enumerate() {
                let toff = tl.offset() + k as usize * td;
                match (&sl, sv) {
                    (Some(sl), Some(sv)) => {
                        let soff = sl.offset() + j * sdst;
                        Strided::new(tl.dims(), [tl.strides(), sl.strides()], [toff, soff]).for_range(
                            0,
                            n,
                            |_, [o, os], len, [st, sst]| {
                                for i in 0..len {
                                    let p = o + i * st;
                                    buf[p] = f(buf[p], sv[os + i * sst]);
                                }
                            },
                        );
                    }
                    _ => {
                        Strided::new(tl.dims(), [tl.strides()], [toff]).for_range(
                            0,
                            n,
                            |_, [o], len, [st]| {
                                for i in 0..len {
                                    let p = o + i * st;
                                    buf[p] = f(buf[p], T::default());
                                }
                            },
                        );
                    }
                }
            }
        };
        match &src {
            Some(s) => {
                self.with_storage_mut_reading::<T, _>(s, |buf, lay, sv| combine(buf, lay, Some(sv)))?
            }
            None => self.with_storage_mut::<T, _>(|buf, lay| combine(buf, lay, None))?,
        }
        Ok(())
    }

    /// Adds `alpha * source` into this tensor in place along `dim` at the positions in `index`
    /// (1-D, int64 or int32); repeated indices accumulate (`t.index_add_(dim, index, source,
    /// alpha=alpha)`).
    pub fn index_add_(
        &self,
        dim: isize,
        index: &Tensor,
        source: &Tensor,
        alpha: impl Into<Scalar>,
    ) -> Result<&Tensor> {
        let alpha = alpha.into();
        inplace_ad(
            self,
            &[source],
            |old| old.index_add(dim, index, source, alpha),
            || {
                let (d, idx) = self.index_family_check(
                    dim,
                    index,
                    Some(source),
                    IndexDtypes::I32OrI64,
                    false,
                    "index_add_",
                )?;
                if self.device().is_cuda() {
                    return crate::cuda::scatter_add(
                        self,
                        d,
                        &idx,
                        source.shape(),
                        source,
                        true,
                        alpha.to_f64(),
                    );
                }
                dispatch_all!(self.dtype(), T => {
                    let a = T::from_scalar(alpha);
                    if is_one(alpha) {
                        self.index_slices::<T>(d, &idx, Some(source), T::op_add)?;
                    } else {
                        self.index_slices::<T>(d, &idx, Some(source), move |x, s| T::op_add(x, T::op_mul(a, s)))?;
                    }
                });
                Ok(())
            },
        )?;
        Ok(self)
    }

    /// Out-of-place [`Tensor::index_add_`] (`torch.index_add`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::zeros([3, 2], DType::F32)?;
    /// let src = Tensor::ones([2, 2], DType::F32)?;
    /// let y = x.index_add(0, &Tensor::new([2i64, 2])?, &src, 3)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![0., 0., 0., 0., 6., 6.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn index_add(
        &self,
        dim: isize,
        index: &Tensor,
        source: &Tensor,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        let alpha = alpha.into();
        let rec = needs_grad(&[self, source]);
        let out = self.clone_then(rec, |o| o.index_add_(dim, index, source, alpha).map(drop))?;
        if !rec {
            return Ok(out);
        }
        record1("IndexAddBackward0", &[self, source], out, &[Save::Input(index)], move |ctx, g| {
            let a = if ctx.needs_input_grad(0) { Some(g[0].clone()) } else { None };
            let b = if ctx.needs_input_grad(1) {
                let s = g[0].index_select(dim, &ctx.saved(0)?)?;
                Some(if is_one(alpha) { s } else { s.mul_scalar(alpha)? })
            } else {
                None
            };
            Ok(vec![a, b])
        })
    }

    /// Copies the slices of `source` along `dim` into this tensor in place at the positions in
    /// `index` (int64) (`t.index_copy_(dim, index, source)`).
    pub fn index_copy_(&self, dim: isize, index: &Tensor, source: &Tensor) -> Result<&Tensor> {
        inplace_ad(
            self,
            &[source],
            |old| old.index_copy(dim, index, source),
            || {
                let (d, idx) = self.index_family_check(
                    dim,
                    index,
                    Some(source),
                    IndexDtypes::I64,
                    false,
                    "index_copy_",
                )?;
                dispatch_all!(self.dtype(), T => self.index_slices::<T>(d, &idx, Some(source), |_, s| s)?);
                Ok(())
            },
        )?;
        Ok(self)
    }

    /// Out-of-place [`Tensor::index_copy_`] (`torch.index_copy`).
    pub fn index_copy(&self, dim: isize, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        let rec = needs_grad(&[self, source]);
        let out = self.clone_then(rec, |o| o.index_copy_(dim, index, source).map(drop))?;
        if !rec {
            return Ok(out);
        }
        record1("IndexCopyBackward0", &[self, source], out, &[Save::Input(index)], move |ctx, g| {
            let idx = ctx.saved(0)?;
            let a = if ctx.needs_input_grad(0) { Some(g[0].index_fill(dim, &idx, 0)?) } else { None };
            let b = if ctx.needs_input_grad(1) { Some(g[0].index_select(dim, &idx)?) } else { None };
            Ok(vec![a, b])
        })
    }

    /// Fills the slices along `dim` at the positions in `index` (int64; negative counts from
    /// the end) with `value`, in place (`t.index_fill_(dim, index, value)`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::zeros([2, 3], DType::I64)?;
    /// x.index_fill_(1, &Tensor::new([-1i64])?, 7)?;
    /// assert_eq!(x.to_vec::<i64>()?, vec![0, 0, 7, 0, 0, 7]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn index_fill_(&self, dim: isize, index: &Tensor, value: impl Into<Scalar>) -> Result<&Tensor> {
        let v = value.into();
        inplace_ad(
            self,
            &[],
            |old| old.index_fill(dim, index, v),
            || {
                if index.dtype() != DType::I64 {
                    bail!(DType, "index_fill_(): Expected dtype int64 for index.");
                }
                let (d, idx) =
                    self.index_family_check(dim, index, None, IndexDtypes::I64, true, "index_fill_")?;
                if self.device().is_cuda() {
                    // On a GPU: `t[:, ..., idx] = value` (an index_put along `d`).
                    let wrapped: Vec<i64> =
                        idx.iter().map(|&i| if i < 0 { i + self.dims()[d] as i64 } else { i }).collect();
                    let n = wrapped.len();
                    let mut list: Vec<Option<Tensor>> = vec![None; d];
                    list.push(Some(Tensor::from_vec(wrapped, [n])?.to_device(self.device())?));
                    let fill = Tensor::full([], v, self.dtype())?.to_device(self.device())?;
                    return self.index_put_impl(&list, &fill, false);
                }
                dispatch_all!(self.dtype(), T => {
                    let fill = T::from_scalar(v);
                    self.index_slices::<T>(d, &idx, None, move |_, _| fill)?;
                });
                Ok(())
            },
        )?;
        Ok(self)
    }

    /// Out-of-place [`Tensor::index_fill_`] (`torch.index_fill`).
    pub fn index_fill(&self, dim: isize, index: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let rec = needs_grad(&[self]);
        let out = self.clone_then(rec, |o| o.index_fill_(dim, index, value).map(drop))?;
        if !rec {
            return Ok(out);
        }
        record1("IndexFillBackward0", &[self], out, &[Save::Input(index)], move |ctx, g| {
            Ok(vec![Some(g[0].index_fill(dim, &ctx.saved(0)?, 0)?)])
        })
    }

    /// `t[indices] = values` in place (`t.index_put_(indices, values, accumulate)`): the
    /// indices are as for [`Tensor::index_tensor`]; `values` (same dtype) broadcasts to the
    /// indexing result's shape. With `accumulate` the values are added, and repeated indices
    /// accumulate; without it, a repeated index keeps the last value.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::zeros([2, 3], DType::F32)?;
    /// let rows = Tensor::new([1i64, 1])?;
    /// let cols = Tensor::new([0i64, 2])?;
    /// x.index_put_(&[Some(rows), Some(cols)], &Tensor::new([4f32, 5.])?, false)?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![0., 0., 0., 4., 0., 5.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn index_put_(
        &self,
        indices: &[Option<Tensor>],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<&Tensor> {
        inplace_ad(
            self,
            &[values],
            |old| old.index_put(indices, values, accumulate),
            || self.index_put_impl(indices, values, accumulate),
        )?;
        Ok(self)
    }

    fn index_put_impl(&self, indices: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<()> {
        if values.dtype() != self.dtype() {
            bail!(
                DType,
                "Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.",
                self.dtype(),
                values.dtype()
            );
        }
        check_no_internal_overlap(self, "index_put_")?;
        let adv = match AdvIndex::new(self, indices)? {
            Some(a) => a,
            None => {
                if accumulate {
                    self.add_(values)?;
                } else {
                    self.copy_(values)?;
                }
                return Ok(());
            }
        };
        let shape = adv.result_shape();
        if self.device().is_cuda() {
            return self.index_put_cuda(&adv, &shape, values, accumulate);
        }
        let vl = match values.layout().expand(shape.dims(), "index_put_") {
            Ok(l) => l,
            Err(_) => bail!(
                Shape,
                "shape mismatch: value tensor of shape {} cannot be broadcast to indexing result of shape {}",
                values.shape(),
                shape
            ),
        };
        let values = detach_from(values, self)?;
        let nb: usize = adv.bshape.iter().product();
        dispatch_all!(self.dtype(), T => {
            // `adv.src` views this tensor's storage (maybe with extra size-1 dims).
            self.with_storage_mut_reading::<T, _>(&values, |buf, _, vv| {
                adv.walk(&vl, 0, nb, |so, vo, len, ss, vs| {
                    for i in 0..len {
                        let p = so + i * ss;
                        let v = vv[vo + i * vs];
                        buf[p] = if accumulate { T::op_add(buf[p], v) } else { v };
                    }
                });
            })?;
        });
        Ok(())
    }

    /// [`Tensor::index_put_`] on a GPU: the positions are planned on the host (the index
    /// values are read there anyway, to check them), then the values, broadcast to the
    /// indexing result, are written with one scatter (`scatter_add_` to accumulate) into the
    /// flattened tensor.
    fn index_put_cuda(&self, adv: &AdvIndex, shape: &Shape, values: &Tensor, accumulate: bool) -> Result<()> {
        if !self.is_contiguous() {
            let c = self.contiguous()?;
            c.index_put_cuda(adv, shape, values, accumulate)?;
            self.copy_(&c)?;
            return Ok(());
        }
        let values = match values.expand(shape.dims().to_vec()) {
            Ok(v) => v.contiguous()?.reshape([shape.numel()])?,
            Err(_) => bail!(
                Shape,
                "shape mismatch: value tensor of shape {} cannot be broadcast to indexing result of shape {}",
                values.shape(),
                shape
            ),
        };
        let flat_layout = crate::layout::Layout::contiguous(shape.clone());
        let (mut to, mut from) = (Vec::new(), Vec::new());
        let nb: usize = adv.bshape.iter().product();
        let off = self.storage_offset();
        adv.walk(&flat_layout, 0, nb, |so, vo, len, ss, vs| {
            for i in 0..len {
                to.push((so + i * ss - off) as i64);
                from.push((vo + i * vs) as i64);
            }
        });
        let device = self.device();
        let n = to.len();
        let to = Tensor::from_slice(&to, n)?.to_device(device)?;
        let from = Tensor::from_slice(&from, n)?.to_device(device)?;
        let picked = values.index_select(0, &from)?;
        let flat = self.reshape([self.numel()])?;
        let _g = crate::autograd::no_grad();
        if accumulate {
            flat.scatter_add_(0, &to, &picked)?;
        } else {
            flat.scatter_(0, &to, &picked)?;
        }
        Ok(())
    }

    /// Out-of-place [`Tensor::index_put_`] (`torch.index_put`).
    pub fn index_put(&self, indices: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<Tensor> {
        // Autocast's promote list (CUDA).
        if let Some(r) = crate::autocast::dispatch("index_put", &[Some(self), Some(values)], |t| {
            t.at(0).index_put(indices, t.at(1), accumulate)
        }) {
            return r;
        }
        let rec = needs_grad(&[self, values]);
        let out = self.clone_then(rec, |o| o.index_put_(indices, values, accumulate).map(drop))?;
        if !rec {
            return Ok(out);
        }
        // self: the gradient where no value was written (all of it with `accumulate`);
        // values: the gradient at the indexed positions (summed back to values' shape).
        let indices = indices.to_vec();
        let vshape = values.shape().clone();
        record1("IndexPutBackward0", &[self, values], out, &[], move |ctx, g| {
            let a = if !ctx.needs_input_grad(0) {
                None
            } else if accumulate {
                Some(g[0].clone())
            } else {
                Some(g[0].index_put(
                    &indices,
                    &Tensor::zeros_on(vshape.clone(), g[0].dtype(), g[0].device())?,
                    false,
                )?)
            };
            let b = if ctx.needs_input_grad(1) { Some(g[0].index_tensor(&indices)?) } else { None };
            Ok(vec![a, b])
        })
    }

    /// Copies consecutive elements of `source` into this tensor in place where `mask` (bool,
    /// broadcast to this tensor's shape) is true, in row-major order (`t.masked_scatter_`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::zeros([2, 2], DType::F32)?;
    /// x.masked_scatter_(&Tensor::new([false, true])?, &Tensor::new([1f32, 2., 3.])?)?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![0., 1., 0., 2.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn masked_scatter_(&self, mask: &Tensor, source: &Tensor) -> Result<&Tensor> {
        inplace_ad(
            self,
            &[source],
            |old| old.masked_scatter(mask, source),
            || self.masked_scatter_impl(mask, source),
        )?;
        Ok(self)
    }

    fn masked_scatter_impl(&self, mask: &Tensor, source: &Tensor) -> Result<()> {
        for t in [self, mask, source] {
            t.device().check_cpu_kernel()?;
        }
        if mask.dtype() != DType::Bool {
            bail!(
                DType,
                "masked_scatter_ only supports boolean masks, but got mask with dtype {}",
                mask.dtype()
            );
        }
        if source.dtype() != self.dtype() {
            bail!(
                DType,
                "masked_scatter: expected self and source to have same dtypes but got {} and {}",
                self.dtype(),
                source.dtype()
            );
        }
        let ml = match mask.layout().expand(self.dims(), "masked_scatter_") {
            Ok(l) => l,
            Err(_) => bail!(
                Shape,
                "masked_scatter_: the mask of shape {} cannot be broadcast to the tensor's shape {}",
                mask.shape(),
                self.shape()
            ),
        };
        check_no_internal_overlap(self, "masked_scatter_")?;
        let m = mask.with_layout(ml).gather_elements::<bool>();
        let count = m.iter().filter(|&&b| b).count();
        if source.numel() < count {
            bail!(Shape, "masked_scatter_: Number of elements of source < number of ones in mask");
        }
        let source = detach_from(source, self)?;
        dispatch_all!(self.dtype(), T => {
            let sv = source.gather_elements::<T>();
            self.with_storage_mut::<T, _>(|buf, lay| {
                let mut k = 0;
                Strided::new(lay.dims(), [lay.strides()], [lay.offset()]).for_range(0, lay.numel(), |cur, [o], len, [st]| {
                    for i in 0..len {
                        if m[cur + i] {
                            buf[o + i * st] = sv[k];
                            k += 1;
                        }
                    }
                });
            })?;
        });
        Ok(())
    }

    /// Out-of-place [`Tensor::masked_scatter_`] (`torch.masked_scatter`); `self` and `mask`
    /// broadcast together.
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        let shape = broadcast_shapes(self.dims(), mask.dims(), "masked_scatter")?;
        let rec = needs_grad(&[self, source]);
        let out = {
            let _g = paused(rec);
            let out = self.broadcast_to(shape.dims())?.deep_clone()?;
            out.masked_scatter_(mask, source)?;
            out
        };
        if !rec {
            return Ok(out);
        }
        // self: the gradient where the mask is false (summed back to self's shape); source:
        // the gradient at the masked positions, in order, padded with zeros to source's size.
        let sshape = source.shape().clone();
        record1("MaskedScatterBackward0", &[self, source], out, &[Save::Input(mask)], move |ctx, g| {
            let mask = ctx.saved(0)?;
            let a = if ctx.needs_input_grad(0) { Some(g[0].masked_fill(&mask, 0)?) } else { None };
            let b = if ctx.needs_input_grad(1) {
                let sel = g[0].masked_select(&mask)?;
                let n = sshape.numel();
                let sel = if sel.numel() < n {
                    Tensor::cat(
                        &[sel.clone(), Tensor::zeros_on([n - sel.numel()], sel.dtype(), sel.device())?],
                        0,
                    )?
                } else {
                    sel
                };
                Some(sel.reshape(sshape.dims())?)
            } else {
                None
            };
            Ok(vec![a, b])
        })
    }
}

/// Whether `alpha` is one (so `alpha * x` is `x`).
fn is_one(alpha: Scalar) -> bool {
    alpha == Scalar::Int(1) || alpha == Scalar::Float(1.0) || alpha == Scalar::Bool(true)
}

/// Applies a scatter reduction: `visit` calls its argument with (target storage offset, source
/// value) for every scattered element, in order.
fn scatter_apply<T: Arith>(
    buf: &mut [T],
    lay: &Layout,
    reduce: Reduce,
    include_self: bool,
    visit: impl Fn(&mut dyn FnMut(usize, T)),
) {
    if !include_self {
        let init = match reduce {
            Reduce::Sum | Reduce::Mean => T::from_i64(0),
            Reduce::Prod => T::from_i64(1),
            Reduce::Amax => lowest::<T>(),
            Reduce::Amin => highest::<T>(),
            Reduce::Assign => T::default(),
        };
        if reduce != Reduce::Assign {
            visit(&mut |p, _| buf[p] = init);
        }
    }
    match reduce {
        Reduce::Assign => visit(&mut |p, v| buf[p] = v),
        Reduce::Sum => visit(&mut |p, v| buf[p] = T::op_add(buf[p], v)),
        Reduce::Prod => visit(&mut |p, v| buf[p] = T::op_mul(buf[p], v)),
        Reduce::Amax => visit(&mut |p, v| buf[p] = T::op_maximum(buf[p], v)),
        Reduce::Amin => visit(&mut |p, v| buf[p] = T::op_minimum(buf[p], v)),
        Reduce::Mean => {
            // The target is contiguous here: storage offset `p` is element `p - offset`.
            let off = lay.offset();
            let mut counts = vec![0i64; lay.numel()];
            visit(&mut |p, v| {
                buf[p] = T::op_add(buf[p], v);
                counts[p - off] += 1;
            });
            let float = T::DTYPE.is_floating_point();
            for (k, &c) in counts.iter().enumerate() {
                if c > 0 {
                    let n = T::from_i64(c + include_self as i64);
                    let p = off + k;
                    buf[p] = if float { T::op_div(buf[p], n) } else { T::op_floor_div(buf[p], n) };
                }
            }
        }
    }
}

/// Zeros of `shape` with `src` added at `index` along `dim` (`zeros.scatter_add_(dim, index,
/// src)`): the gradient of `gather`, differentiable in `src` (its gradient is a gather).
pub(crate) fn scatter_into_zeros(src: &Tensor, dim: isize, index: &Tensor, shape: &Shape) -> Result<Tensor> {
    let rec = needs_grad(&[src]);
    let z = {
        let _g = paused(rec);
        let z = Tensor::zeros_on(shape.clone(), src.dtype(), src.device())?;
        z.scatter_add_(dim, index, src)?;
        z
    };
    if !rec {
        return Ok(z);
    }
    record1("ScatterAddBackward0", &[src], z, &[Save::Input(index)], move |ctx, g| {
        Ok(vec![Some(g[0].gather(dim, &ctx.saved(0)?)?)])
    })
}

/// Zeros of `shape` with the slices of `src` added at `index` along `dim`: the gradient of
/// `index_select`, differentiable in `src` (its gradient is an index_select).
fn index_add_into_zeros(src: &Tensor, dim: isize, index: &Tensor, shape: &Shape) -> Result<Tensor> {
    let rec = needs_grad(&[src]);
    let z = {
        let _g = paused(rec);
        let z = Tensor::zeros_on(shape.clone(), src.dtype(), src.device())?;
        z.index_add_(dim, index, src, 1)?;
        z
    };
    if !rec {
        return Ok(z);
    }
    record1("IndexAddBackward0", &[src], z, &[Save::Input(index)], move |ctx, g| {
        Ok(vec![Some(g[0].index_select(dim, &ctx.saved(0)?)?)])
    })
}

/// The gradients of `x.scatter_reduce(dim, idx, s, "prod", include_self)` (result `out`) for
/// upstream gradient `g`: each element's is the product of the others reduced into its
/// position, computed without dividing by a zero (PyTorch's `scatter_reduce_backward`).
/// Returns `(grad x before masking the excluded self, grad s if asked)`; differentiable, except the
/// source gradient where two zeros of `s` meet at one position (a `DelayedError`, as in
/// PyTorch).
#[allow(clippy::too_many_arguments)]
fn scatter_prod_backward(
    g: &Tensor,
    dim: isize,
    idx: &Tensor,
    x: &Tensor,
    s: &Tensor,
    out: &Tensor,
    include_self: bool,
    src_grad: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    // self: the product of everything reduced into the position, with self's zeros taken as 1,
    // divided by self (zeros taken as 1)
    let x_zero = x.eq_scalar(0)?;
    let x1 = x.masked_fill(&x_zero, 1)?;
    let gx = g.mul(&x1.scatter_reduce(dim, idx, s, "prod", include_self)?)?.div(&x1)?;
    if !src_grad {
        return Ok((gx, None));
    }
    // src: out / s where s is not zero; where s is the only zero of its position, the product
    // of the others (recomputed with that zero taken as 1); where several zeros meet, zero
    let (s_zero, single, several) = {
        let _g = crate::autograd::no_grad();
        let s_zero = s.eq_scalar(0)?;
        let zeros = x.zeros_like()?.scatter_add(dim, idx, &s_zero.to_dtype(x.dtype())?)?.gather(dim, idx)?;
        let single = s_zero.logical_and(&zeros.eq_scalar(1)?)?;
        let several = zeros.gt_scalar(1)?.any()?.item::<bool>()?;
        (s_zero, single, several)
    };
    let others = x.scatter_reduce(dim, idx, &s.masked_fill(&single, 1)?, "prod", include_self)?;
    let gs = g
        .mul(&others)?
        .gather(dim, idx)?
        .where_(&single, &g.mul(out)?.gather(dim, idx)?.div(&s.masked_fill(&s_zero, 1)?)?)?;
    Ok((gx, Some(if several { crate::autograd::record::delayed_error(gs, SCATTER_PROD_ZEROS)? } else { gs })))
}

const SCATTER_PROD_ZEROS: &str = "scatter_reduce(): Double backward is unsupported for src when >1 zeros in src are scattered to the same position. This may happen if src.requires_grad() is True.";
