//! Sorting and searching: `sort`, `argsort`, `topk`, `kthvalue`, `unique` (flattened or along
//! a dim), `searchsorted` and `bucketize`.
//!
//! Order is PyTorch's: NaN sorts as the largest value (last ascending, first descending),
//! `-0.0` equals `0.0`. Sorting is always stable: equal elements keep their input order (with
//! `descending`, too), which is one valid outcome of PyTorch's `stable=False` and exactly its
//! `stable=True`. `topk` and `kthvalue` break ties the same way.

use super::GRAIN;
use crate::alloc::CpuBuffer;
use crate::autograd::record::{needs_grad, paused, record1, Save};
use crate::dtype::Scalar;
use crate::shape::{wrap_dim, Shape};
use crate::threads::parallel_for;
use crate::{bail, dispatch_all, DType, Element, Result, Tensor};
use std::cmp::Ordering;

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

/// A total order on elements with NaN above everything (and equal to NaN), as PyTorch sorts.
#[inline(always)]
#[allow(clippy::eq_op)]
pub(crate) fn cmp_nan_last<T: Element>(a: &T, b: &T) -> Ordering {
    match a.partial_cmp(b) {
        Some(o) => o,
        None => (a != a).cmp(&(b != b)),
    }
}

/// Ascending by value, ties by position.
#[inline(always)]
fn asc<T: Element>(a: &(T, i64), b: &(T, i64)) -> Ordering {
    cmp_nan_last(&a.0, &b.0).then(a.1.cmp(&b.1))
}

/// Descending by value, ties by position.
#[inline(always)]
fn desc<T: Element>(a: &(T, i64), b: &(T, i64)) -> Ordering {
    cmp_nan_last(&b.0, &a.0).then(a.1.cmp(&b.1))
}

/// A tensor viewed as rows along `dim`: `outer` blocks of `size` x `inner` elements.
struct Rows {
    outer: usize,
    size: usize,
    inner: usize,
}

impl Rows {
    fn of(dims: &[usize], d: usize) -> Rows {
        // saturating: the product of the other sizes of an empty tensor may not fit
        let prod = |v: &[usize]| v.iter().fold(1usize, |a, &b| a.saturating_mul(b));
        Rows { outer: prod(&dims[..d]), size: dims[d], inner: prod(&dims[d + 1..]) }
    }
}

/// Fresh value and int64 index tensors of `shape`, filled by `f`.
fn two_outputs<T: Element>(shape: &Shape, f: impl FnOnce(&mut [T], &mut [i64])) -> Result<(Tensor, Tensor)> {
    let mut bv = CpuBuffer::for_shape(shape, std::mem::size_of::<T>())?;
    let mut bi = CpuBuffer::for_shape(shape, std::mem::size_of::<i64>())?;
    f(bv.as_mut_slice::<T>(), bi.as_mut_slice::<i64>());
    Ok((
        Tensor::from_cpu_buffer(bv, shape.clone(), T::DTYPE),
        Tensor::from_cpu_buffer(bi, shape.clone(), DType::I64),
    ))
}

/// For each row of contiguous `src` along a dim, collects `(value, position)` pairs, lets `f`
/// reorder them, and writes the first `k` into row-major outputs with `k` along that dim.
fn row_kernel<T: Element>(
    src: &[T],
    rows: &Rows,
    k: usize,
    vals: &mut [T],
    idxs: &mut [i64],
    f: impl Fn(&mut Vec<(T, i64)>) + Sync,
) {
    let Rows { outer, size, inner } = *rows;
    let n = outer * inner;
    let pv = SendPtr(vals.as_mut_ptr());
    let pi = SendPtr(idxs.as_mut_ptr());
    parallel_for(n, (GRAIN / size.max(1)).max(1), |a, b| {
        let mut buf: Vec<(T, i64)> = Vec::with_capacity(size);
        for r in a..b {
            let (o, i) = (r / inner, r % inner);
            let base = o * size * inner + i;
            buf.clear();
            buf.extend((0..size).map(|j| (src[base + j * inner], j as i64)));
            f(&mut buf);
            let obase = o * k * inner + i;
            for (j, &(v, ix)) in buf.iter().take(k).enumerate() {
                // SAFETY: row `r` owns these output positions; they lie inside the outputs.
                unsafe {
                    *pv.get().add(obase + j * inner) = v;
                    *pi.get().add(obase + j * inner) = ix;
                }
            }
        }
    });
}

/// Whether `dtype` rows of `size` elements sort through packed `u64` keys ([`key32`]).
fn packs(dtype: DType, size: usize) -> bool {
    size <= u32::MAX as usize
        && matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::I32 | DType::U8 | DType::Bool)
}

/// An order-preserving `u32` key for elements of at most 32 bits: NaN above everything (all
/// NaNs equal), `-0.0` equal to `0.0`; inverted for descending order.
#[inline(always)]
fn key32<T: Element>(x: T, descending: bool) -> u32 {
    let k = match T::DTYPE {
        DType::F32 | DType::F16 | DType::BF16 => {
            let f = x.to_f64() as f32;
            if f.is_nan() {
                u32::MAX
            } else {
                let b = (f + 0.0).to_bits(); // -0.0 + 0.0 == +0.0
                if b & 0x8000_0000 != 0 {
                    !b
                } else {
                    b | 0x8000_0000
                }
            }
        }
        DType::I32 => (x.to_i64() as i32 as u32) ^ 0x8000_0000,
        _ => x.to_i64() as u32,
    };
    if descending {
        !k
    } else {
        k
    }
}

/// [`row_kernel`] through packed keys: each row becomes `(key32 << 32) | position` values that
/// `f` reorders ascending (so ties keep input order); the first `k` are written out.
fn row_kernel_keys<T: Element>(
    src: &[T],
    rows: &Rows,
    k: usize,
    descending: bool,
    vals: &mut [T],
    idxs: &mut [i64],
    f: impl Fn(&mut Vec<u64>) + Sync,
) {
    let Rows { outer, size, inner } = *rows;
    let n = outer * inner;
    let pv = SendPtr(vals.as_mut_ptr());
    let pi = SendPtr(idxs.as_mut_ptr());
    parallel_for(n, (GRAIN / size.max(1)).max(1), |a, b| {
        let mut buf: Vec<u64> = Vec::with_capacity(size);
        for r in a..b {
            let (o, i) = (r / inner, r % inner);
            let base = o * size * inner + i;
            buf.clear();
            buf.extend(
                (0..size).map(|j| ((key32(src[base + j * inner], descending) as u64) << 32) | j as u64),
            );
            f(&mut buf);
            let obase = o * k * inner + i;
            for (j, &key) in buf.iter().take(k).enumerate() {
                let ix = (key & 0xffff_ffff) as usize;
                // SAFETY: row `r` owns these output positions; they lie inside the outputs.
                unsafe {
                    *pv.get().add(obase + j * inner) = src[base + ix * inner];
                    *pi.get().add(obase + j * inner) = ix as i64;
                }
            }
        }
    });
}

/// Sorted (or, for `k` below the row length, partially sorted) rows: the first `k` of each row
/// in ascending (or descending) order, ties by position.
fn select_rows<T: Element>(
    src: &[T],
    rows: &Rows,
    k: usize,
    descending: bool,
    full: bool,
    vals: &mut [T],
    idxs: &mut [i64],
) {
    let pick = move |len: usize| -> Option<usize> { (!full && k > 0 && k < len).then(|| k - 1) };
    if packs(T::DTYPE, rows.size) {
        row_kernel_keys(src, rows, k, descending, vals, idxs, |b| {
            if let Some(nth) = pick(b.len()) {
                b.select_nth_unstable(nth);
                b[..k].sort_unstable();
            } else if k > 0 {
                b.sort_unstable();
            }
        });
    } else {
        let cmp: fn(&(T, i64), &(T, i64)) -> Ordering = if descending { desc } else { asc };
        row_kernel(src, rows, k, vals, idxs, |b| {
            if let Some(nth) = pick(b.len()) {
                b.select_nth_unstable_by(nth, cmp);
                b[..k].sort_unstable_by(cmp);
            } else if k > 0 {
                b.sort_unstable_by(cmp);
            }
        });
    }
}

/// The positions where each of `vals` would be inserted into the sorted rows (of `len`) of
/// `seq` (PyTorch's binary search, with its NaN behaviour), in parallel.
fn search<T: Element>(
    seq: &[T],
    len: usize,
    seq_rows: bool,
    vals: &[T],
    val_row: usize,
    right: bool,
) -> Vec<i64> {
    let mut out = vec![0i64; vals.len()];
    let po = SendPtr(out.as_mut_ptr());
    parallel_for(vals.len(), GRAIN / 16, |a, b| {
        for (p, v) in vals.iter().enumerate().take(b).skip(a) {
            let row = if seq_rows { p / val_row.max(1) } else { 0 };
            let s = &seq[row * len..(row + 1) * len];
            // PyTorch's probe sequence (mid = lo + (hi - lo) / 2), written without branches:
            // `size` is `hi - lo`. NaN values (never below anything) search to the end.
            let (mut lo, mut size) = (0usize, len);
            while size > 0 {
                let half = size / 2;
                let mid = lo + half;
                let go_right = if right {
                    s[mid].partial_cmp(v) != Some(Ordering::Greater)
                } else {
                    !matches!(s[mid].partial_cmp(v), Some(Ordering::Greater | Ordering::Equal))
                };
                lo = if go_right { mid + 1 } else { lo };
                size = if go_right { size - half - 1 } else { half };
            }
            // SAFETY: position `p` is written by one thread only.
            unsafe { *po.get().add(p) = lo as i64 };
        }
    });
    out
}

/// Sorted unique elements of `v` (NaNs each distinct), plus per-element group ids and counts.
fn unique_flat<T: Element>(v: &[T]) -> (Vec<T>, Vec<i64>, Vec<i64>) {
    let mut pairs: Vec<(T, i64)> = v.iter().enumerate().map(|(i, &x)| (x, i as i64)).collect();
    pairs.sort_unstable_by(asc);
    let mut values = Vec::new();
    let mut inverse = vec![0i64; v.len()];
    let mut counts: Vec<i64> = Vec::new();
    for (j, &(x, i)) in pairs.iter().enumerate() {
        if j == 0 || pairs[j - 1].0 != x {
            values.push(x);
            counts.push(0);
        }
        *counts.last_mut().unwrap() += 1;
        inverse[i as usize] = values.len() as i64 - 1;
    }
    (values, inverse, counts)
}

impl Tensor {
    /// Sorts along `dim` (`torch.sort(t, dim, descending)`), returning `(values, indices)`
    /// with int64 indices into `dim`. NaN sorts as the largest value; the sort is stable.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([3f32, f32::NAN, 1., 3.])?;
    /// let (v, i) = x.sort(0, false)?;
    /// assert_eq!(i.to_vec::<i64>()?, vec![2, 0, 3, 1]);
    /// assert!(v.to_vec::<f32>()?[3].is_nan());
    /// let (_, i) = x.sort(-1, true)?;
    /// assert_eq!(i.to_vec::<i64>()?, vec![1, 0, 3, 2]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn sort(&self, dim: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        let rec = needs_grad(&[self]);
        let (v, i) = {
            let _g = paused(rec);
            self.sort_impl(dim, descending)?
        };
        self.select_ad("SortBackward0", rec, dim, false, v, i)
    }

    fn sort_impl(&self, dim: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim(dim, self.rank())?;
        if self.device().is_cuda() {
            return crate::cuda::sort(self, d, descending);
        }
        if self.rank() == 0 {
            return Ok((self.deep_clone()?, Tensor::scalar(0i64)?));
        }
        if self.numel() == 0 {
            return Ok((
                Tensor::empty(self.shape(), self.dtype())?,
                Tensor::empty(self.shape(), DType::I64)?,
            ));
        }
        let rows = Rows::of(self.dims(), d);
        let x = self.contiguous()?;
        dispatch_all!(self.dtype(), T => x.with_slice::<T, _>(|s| {
            two_outputs::<T>(self.shape(), |v, i| select_rows(s, &rows, rows.size, descending, true, v, i))
        }))
    }

    /// `torch.sort(t, dim, descending, stable=True)`: the same as [`Tensor::sort`], which is
    /// always stable.
    pub fn sort_stable(&self, dim: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        self.sort(dim, descending)
    }

    /// The int64 indices that sort along `dim` (`torch.argsort`); stable.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[2i64, 1, 2], [0, 5, -1]])?;
    /// assert_eq!(x.argsort(1, false)?.to_vec2::<i64>()?, vec![vec![1, 0, 2], vec![2, 0, 1]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn argsort(&self, dim: isize, descending: bool) -> Result<Tensor> {
        Ok(self.sort(dim, descending)?.1)
    }

    /// `torch.argsort(t, dim, descending, stable=True)`: the same as [`Tensor::argsort`].
    pub fn argsort_stable(&self, dim: isize, descending: bool) -> Result<Tensor> {
        self.argsort(dim, descending)
    }

    /// The `k` largest (or smallest) elements along `dim` and their int64 indices
    /// (`torch.topk(t, k, dim, largest, sorted)`). Results always come sorted (largest first,
    /// or smallest first when `largest` is false); NaN counts as the largest value and ties go
    /// to the lower index.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([1f32, 5., 3., 4.])?;
    /// let (v, i) = x.topk(2, -1, true, true)?;
    /// assert_eq!(v.to_vec::<f32>()?, vec![5., 4.]);
    /// assert_eq!(i.to_vec::<i64>()?, vec![1, 3]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn topk(&self, k: usize, dim: isize, largest: bool, sorted: bool) -> Result<(Tensor, Tensor)> {
        let _ = sorted;
        let rec = needs_grad(&[self]);
        let (v, i) = {
            let _g = paused(rec);
            self.topk_impl(k, dim, largest)?
        };
        self.select_ad("TopkBackward0", rec, dim, false, v, i)
    }

    fn topk_impl(&self, k: usize, dim: isize, largest: bool) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim(dim, self.rank())?;
        if self.rank() == 0 {
            if k > 1 {
                bail!(Index, "selected index k out of range");
            }
            return Ok((self.deep_clone()?, Tensor::zeros_on([], DType::I64, self.device())?));
        }
        let rows = Rows::of(self.dims(), d);
        if k > rows.size {
            bail!(Index, "selected index k out of range");
        }
        if self.device().is_cuda() {
            // The sorted prefix: ties keep the lower index, NaN counts as the largest.
            let (v, i) = crate::cuda::sort(self, d, largest)?;
            return Ok((
                v.narrow(d as isize, 0, k)?.contiguous()?,
                i.narrow(d as isize, 0, k)?.contiguous()?,
            ));
        }
        let mut shape = self.shape().clone();
        shape.0[d] = k;
        if self.numel() == 0 {
            // the dim is empty (so k is 0) or another one is: an empty result, no rows to walk
            return Ok((Tensor::empty(shape.clone(), self.dtype())?, Tensor::empty(shape, DType::I64)?));
        }
        let x = self.contiguous()?;
        dispatch_all!(self.dtype(), T => x.with_slice::<T, _>(|s| {
            two_outputs::<T>(&shape, |v, i| select_rows(s, &rows, k, largest, false, v, i))
        }))
    }

    /// The `k`-th smallest element (1-based) along `dim` and its int64 index
    /// (`torch.kthvalue(t, k, dim, keepdim)`). NaN counts as the largest value; among equal
    /// values the one at the lower index is picked first.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[3f32, 1., 2.], [9., 7., 8.]])?;
    /// let (v, i) = x.kthvalue(2, 1, false)?;
    /// assert_eq!(v.to_vec::<f32>()?, vec![2., 8.]);
    /// assert_eq!(i.to_vec::<i64>()?, vec![2, 2]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn kthvalue(&self, k: usize, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let rec = needs_grad(&[self]);
        let (v, i) = {
            let _g = paused(rec);
            self.kthvalue_impl(k, dim, keepdim)?
        };
        self.select_ad("KthvalueBackward0", rec, dim, !keepdim && self.rank() > 0, v, i)
    }

    /// Records `values`, picked from `self` along `dim` at `indices` (sort, topk, kthvalue):
    /// the gradient is the values' gradient scattered into zeros at the indices. `squeezed`:
    /// `dim` was removed from the outputs (kthvalue without keepdim).
    fn select_ad(
        &self,
        name: &'static str,
        rec: bool,
        dim: isize,
        squeezed: bool,
        values: Tensor,
        indices: Tensor,
    ) -> Result<(Tensor, Tensor)> {
        if !rec {
            return Ok((values, indices));
        }
        let shape = self.shape().clone();
        let d = wrap_dim(dim, self.rank())? as isize;
        let v = record1(name, &[self], values, &[Save::Input(&indices)], move |ctx, g| {
            if shape.rank() == 0 {
                return Ok(vec![Some(g[0].reshape(shape.dims())?)]);
            }
            let (mut g, mut idx) = (g[0].clone(), ctx.saved(0)?);
            if squeezed {
                g = g.unsqueeze(d)?;
                idx = idx.unsqueeze(d)?;
            }
            Ok(vec![Some(crate::ops::index::scatter_into_zeros(&g, d, &idx, &shape)?)])
        })?;
        Ok((v, indices))
    }

    fn kthvalue_impl(&self, k: usize, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let d = wrap_dim(dim, self.rank())?;
        if self.rank() == 0 {
            if k != 1 {
                bail!(Index, "kthvalue(): selected number k out of range for dimension {d}");
            }
            return Ok((self.deep_clone()?, Tensor::zeros_on([], DType::I64, self.device())?));
        }
        let rows = Rows::of(self.dims(), d);
        if rows.size == 0 {
            bail!(Index, "kthvalue(): Expected reduction dim {d} to have non-zero size.");
        }
        if k < 1 || k > rows.size {
            bail!(Index, "kthvalue(): selected number k out of range for dimension {d}");
        }
        let mut shape = self.shape().clone();
        shape.0[d] = 1;
        let (v, i) = if self.device().is_cuda() {
            // Position k - 1 of the stable ascending sort: equal values in index order.
            let (v, i) = crate::cuda::sort(self, d, false)?;
            let at = (k - 1) as isize;
            (v.narrow(d as isize, at, 1)?.contiguous()?, i.narrow(d as isize, at, 1)?.contiguous()?)
        } else {
            let x = self.contiguous()?;
            dispatch_all!(self.dtype(), T => x.with_slice::<T, _>(|s| {
                two_outputs::<T>(&shape, |v, i| {
                    if packs(T::DTYPE, rows.size) {
                        row_kernel_keys(s, &rows, 1, false, v, i, |b| {
                            b.select_nth_unstable(k - 1);
                            b[0] = b[k - 1];
                        });
                    } else {
                        row_kernel(s, &rows, 1, v, i, |b| {
                            b.select_nth_unstable_by(k - 1, asc);
                            b[0] = b[k - 1];
                        });
                    }
                })
            }))?
        };
        if keepdim {
            Ok((v, i))
        } else {
            Ok((v.squeeze_dim(d as isize)?, i.squeeze_dim(d as isize)?))
        }
    }

    /// The unique elements of the flattened tensor, sorted (`torch.unique(t, sorted,
    /// return_inverse, return_counts)`). Returns `(values, inverse, counts)`: `inverse`
    /// (int64, the input's shape) maps each element to its entry in `values`, `counts` (int64)
    /// counts each value; they are `Some` when requested. The CPU result is always sorted, as
    /// in PyTorch; each NaN is its own unique value.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[3i64, 1], [1, 2]])?;
    /// let (v, inv, cnt) = x.unique(true, true, true)?;
    /// assert_eq!(v.to_vec::<i64>()?, vec![1, 2, 3]);
    /// assert_eq!(inv.unwrap().to_vec2::<i64>()?, vec![vec![2, 0], vec![0, 1]]);
    /// assert_eq!(cnt.unwrap().to_vec::<i64>()?, vec![2, 1, 1]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn unique(
        &self,
        sorted: bool,
        return_inverse: bool,
        return_counts: bool,
    ) -> Result<(Tensor, Option<Tensor>, Option<Tensor>)> {
        let _ = sorted;
        self.device().check_cpu_kernel()?;
        let (values, inverse, counts) = dispatch_all!(self.dtype(), T => {
            let (v, inv, cnt) = self.with_slice::<T, _>(unique_flat);
            let n = v.len();
            (Tensor::from_vec(v, [n])?, inv, cnt)
        });
        let inverse = if return_inverse { Some(Tensor::from_vec(inverse, self.shape())?) } else { None };
        let n = counts.len();
        let counts = if return_counts { Some(Tensor::from_vec(counts, [n])?) } else { None };
        Ok((values, inverse, counts))
    }

    /// Unique slices along `dim`, sorted lexicographically (`torch.unique(t, dim=dim, ...)`).
    /// Returns `(values, inverse, counts)` like [`Tensor::unique`], with `inverse` and `counts`
    /// indexed by slice.
    #[allow(clippy::type_complexity)]
    pub fn unique_dim(
        &self,
        dim: isize,
        sorted: bool,
        return_inverse: bool,
        return_counts: bool,
    ) -> Result<(Tensor, Option<Tensor>, Option<Tensor>)> {
        let _ = sorted;
        if self.rank() == 0 {
            bail!(Index, "unique_dim(): Dimension specified as {dim} but tensor has no dimensions");
        }
        let d = wrap_dim(dim, self.rank())?;
        let size = self.dims()[d];
        let row = self.numel().checked_div(size).unwrap_or(0);
        let mut perm: Vec<isize> = vec![d as isize];
        perm.extend((0..self.rank()).filter(|&k| k != d).map(|k| k as isize));
        let x = self.permute(&perm)?.contiguous()?;
        let (firsts, inverse, counts): (Vec<i64>, Vec<i64>, Vec<i64>) = dispatch_all!(self.dtype(), T => {
            x.with_slice::<T, _>(|s| {
                let slice = |i: usize| &s[i * row..(i + 1) * row];
                let mut order: Vec<usize> = (0..size).collect();
                order.sort_by(|&a, &b| {
                    slice(a)
                        .iter()
                        .zip(slice(b))
                        .map(|(x, y)| cmp_nan_last(x, y))
                        .find(|o| *o != Ordering::Equal)
                        .unwrap_or(Ordering::Equal)
                });
                let mut firsts = Vec::new();
                let mut inverse = vec![0i64; size];
                let mut counts: Vec<i64> = Vec::new();
                for (j, &i) in order.iter().enumerate() {
                    if j == 0 || slice(order[j - 1]) != slice(i) {
                        firsts.push(i as i64);
                        counts.push(0);
                    }
                    *counts.last_mut().unwrap() += 1;
                    inverse[i] = firsts.len() as i64 - 1;
                }
                (firsts, inverse, counts)
            })
        });
        let nf = firsts.len();
        let values = self.index_select(d as isize, &Tensor::from_vec(firsts, [nf])?)?;
        let inverse = if return_inverse { Some(Tensor::from_vec(inverse, [size])?) } else { None };
        let counts = if return_counts { Some(Tensor::from_vec(counts, [nf])?) } else { None };
        Ok((values, inverse, counts))
    }

    /// Where each of `values` would go in this sorted sequence to keep it sorted
    /// (`torch.searchsorted(self, values, out_int32=..., right=..., side=...)`). This tensor is
    /// 1-D, or N-D with one sorted sequence per innermost row (then `values` has the same
    /// leading dims). `right` (or `side = Some("right")`) returns the position after equal
    /// elements instead of before. The result has `values`' shape, int64 (int32 with
    /// `out_int32`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let s = Tensor::new([1f32, 3., 5., 7.])?;
    /// let v = Tensor::new([3f32, 6., 9.])?;
    /// assert_eq!(s.searchsorted(&v, false, false, None)?.to_vec::<i64>()?, vec![1, 3, 4]);
    /// assert_eq!(s.searchsorted(&v, false, true, None)?.to_vec::<i64>()?, vec![2, 3, 4]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn searchsorted(
        &self,
        values: &Tensor,
        out_int32: bool,
        right: bool,
        side: Option<&str>,
    ) -> Result<Tensor> {
        self.device().check_cpu_kernel()?;
        values.device().check_cpu_kernel()?;
        let right = match side {
            None => right,
            Some("right") => true,
            Some("left") => {
                if right {
                    bail!(
                        Value,
                        "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
                    );
                }
                false
            }
            Some(s) => bail!(Value, "torch.searchsorted(): side can only be 'left' or 'right' but got {s}"),
        };
        if self.rank() == 0 {
            bail!(
                Shape,
                "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension"
            );
        }
        let seq_rows = self.rank() > 1;
        if seq_rows
            && (values.rank() != self.rank()
                || values.dims()[..values.rank() - 1] != self.dims()[..self.rank() - 1])
        {
            bail!(
                Shape,
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor {} and input value tensor {}",
                self.shape(),
                values.shape()
            );
        }
        if self.dtype() == DType::Bool || values.dtype() == DType::Bool {
            bail!(NotImplemented, "\"searchsorted_out_cpu\" not implemented for 'Bool'");
        }
        let dt = crate::result_type(self, values);
        let seq = self.to_dtype(dt)?;
        let vals = values.to_dtype(dt)?;
        let len = self.dims()[self.rank() - 1];
        let val_row = if values.rank() == 0 { 1 } else { values.dims()[values.rank() - 1] };
        let pos = dispatch_all!(dt, T => seq.with_slice::<T, _>(|s| {
            vals.with_slice::<T, _>(|v| search(s, len, seq_rows, v, val_row, right))
        }));
        if out_int32 {
            let p: Vec<i32> = pos.into_iter().map(|x| x as i32).collect();
            Tensor::from_vec(p, values.shape())
        } else {
            Tensor::from_vec(pos, values.shape())
        }
    }

    /// [`Tensor::searchsorted`] for one scalar value; returns a 0-d tensor
    /// (`torch.searchsorted(self, scalar)`).
    pub fn searchsorted_scalar(
        &self,
        value: impl Into<Scalar>,
        out_int32: bool,
        right: bool,
        side: Option<&str>,
    ) -> Result<Tensor> {
        let v = value.into();
        let t = dispatch_all!(v.dtype(), T => Tensor::scalar::<T>(T::from_scalar(v))?);
        self.searchsorted(&t, out_int32, right, side)
    }

    /// The index of the bucket each element falls in, given sorted 1-D `boundaries`
    /// (`torch.bucketize(self, boundaries, out_int32, right)`): with `right = false`,
    /// `boundaries[i-1] < x <= boundaries[i]`; with `right = true`,
    /// `boundaries[i-1] <= x < boundaries[i]`.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let b = Tensor::new([1f32, 3., 5.])?;
    /// let x = Tensor::new([[0f32, 3.], [4., 6.]])?;
    /// assert_eq!(x.bucketize(&b, false, false)?.to_vec2::<i64>()?, vec![vec![0, 1], vec![2, 3]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn bucketize(&self, boundaries: &Tensor, out_int32: bool, right: bool) -> Result<Tensor> {
        if boundaries.rank() != 1 {
            bail!(Shape, "boundaries tensor must be 1 dimension, but got dim({})", boundaries.rank());
        }
        boundaries.searchsorted(self, out_int32, right, None)
    }
}
