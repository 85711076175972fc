//! Joining and splitting: `cat`, `stack`, `hstack`/`vstack`/`dstack`, `chunk`, `split`,
//! `split_sizes`, `unbind`, and the rearranging copies `flip`, `roll`, `repeat`, `tile`,
//! `repeat_interleave`.
//!
//! Splitting ops return views that share storage with their input (PyTorch's `narrow` /
//! `select`); joining and rearranging ops return fresh contiguous tensors.

use super::GRAIN;
use crate::autograd::record::{needs_grad, paused, record1};
use crate::layout::Layout;
use crate::shape::{wrap_dim, wrap_dims, DimVec, Shape};
use crate::threads::parallel_for;
use crate::{bail, dispatch_all, promote_types, DType, Element, Result, Tensor};

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

impl AsRef<Tensor> for Tensor {
    fn as_ref(&self) -> &Tensor {
        self
    }
}

/// Concatenates contiguous tensors of dtype `T` along a dim: `lens[k]` elements of input `k`
/// per outer row, `outer` rows.
fn cat_kernel<T: Element>(inputs: &[Tensor], lens: &[usize], outer: usize, shape: Shape) -> Result<Tensor> {
    // Each storage read-locked once (inputs may repeat), in address order as every kernel
    // takes its locks.
    let key = |t: &Tensor| &**t.storage() as *const crate::storage::StorageCell as usize;
    let mut cells: Vec<&Tensor> = inputs.iter().collect();
    cells.sort_by_key(|t| key(t));
    cells.dedup_by_key(|t| key(t));
    let guards: Vec<_> = cells.iter().map(|t| (key(t), t.storage().read())).collect();
    let srcs: Vec<&[T]> = inputs
        .iter()
        .map(|t| {
            // An empty input may sit at an offset past its (empty) storage: read nothing.
            if t.numel() == 0 {
                return &[][..];
            }
            let at = guards.binary_search_by_key(&key(t), |(k, _)| *k).expect("locked above");
            let g = &guards[at].1;
            let off = t.storage_offset();
            &g.cpu().as_slice::<T>()[off..off + t.numel()]
        })
        .collect();
    let row_len: usize = lens.iter().sum();
    let mut acc = Vec::with_capacity(lens.len() + 1);
    acc.push(0usize);
    for &l in lens {
        acc.push(acc.last().unwrap() + l);
    }
    let total = outer * row_len;
    Tensor::build::<T>(shape, |out| {
        if total == 0 {
            return;
        }
        let po = SendPtr(out.as_mut_ptr());
        parallel_for(total, GRAIN, |a, b| {
            let mut pos = a;
            let mut row = pos / row_len;
            let mut within = pos % row_len;
            // The input whose block holds `within` (the first with acc[k + 1] > within).
            let mut k = acc.partition_point(|&x| x <= within) - 1;
            while pos < b {
                while k < lens.len() && acc[k + 1] <= within {
                    k += 1;
                }
                if k == lens.len() {
                    row += 1;
                    within = 0;
                    k = 0;
                    continue;
                }
                let off = within - acc[k];
                let n = (lens[k] - off).min(b - pos);
                let s = &srcs[k][row * lens[k] + off..row * lens[k] + off + n];
                // SAFETY: `pos..pos + n` lies in `a..b`, which only this thread writes.
                unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), po.get().add(pos), n) };
                pos += n;
                within += n;
            }
        });
    })
}

/// Reads rows of a tensor through signed strides (for `flip`): `out` is row-major over
/// `dims`; element `m` comes from `src[base + Σ m_d * strides[d]]`.
fn signed_gather<T: Element>(src: &[T], dims: &[usize], strides: &[isize], base: isize, out: &mut [T]) {
    let r = dims.len();
    if r == 0 {
        if !out.is_empty() {
            out[0] = src[base as usize];
        }
        return;
    }
    let inner = dims[r - 1];
    let ist = strides[r - 1];
    if inner == 0 {
        return;
    }
    let rows = out.len() / inner;
    let po = SendPtr(out.as_mut_ptr());
    parallel_for(rows, (GRAIN / inner).max(1), |a, b| {
        for row in a..b {
            let mut rem = row;
            let mut off = base;
            for d in (0..r - 1).rev() {
                off += (rem % dims[d]) as isize * strides[d];
                rem /= dims[d];
            }
            for i in 0..inner {
                // SAFETY: every row is written by one thread; offsets stay inside the layout.
                unsafe { *po.get().add(row * inner + i) = src[(off + i as isize * ist) as usize] };
            }
        }
    });
}

impl Tensor {
    /// Concatenates tensors along `dim` (`torch.cat`). Dtypes promote like PyTorch's; all
    /// tensors need the same sizes apart from `dim`. As in PyTorch, 1-D empty tensors (shape
    /// `[0]`) are skipped whatever the others' shapes (they still take part in dtype
    /// promotion). Contiguous inputs are copied as memory blocks.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let a = Tensor::new([[1f32, 2.], [3., 4.]])?;
    /// let b = Tensor::new([[5i64], [6]])?;
    /// let c = Tensor::cat(&[&a, &b], 1)?;
    /// assert_eq!(c.to_vec2::<f32>()?, vec![vec![1., 2., 5.], vec![3., 4., 6.]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn cat<T: AsRef<Tensor>>(tensors: &[T], dim: isize) -> Result<Tensor> {
        let ts: Vec<&Tensor> = tensors.iter().map(|t| t.as_ref()).collect();
        let _prof = crate::profiler_record::op("aten::cat", &ts);
        let rec = needs_grad(&ts);
        let y = {
            let _g = paused(rec);
            Tensor::cat_impl(&ts, dim)?
        };
        if !rec {
            return Ok(y);
        }
        // Each input's gradient is its slice of the output's gradient.
        let skipped = |t: &Tensor| t.rank() == 1 && t.numel() == 0;
        let r = ts.iter().find(|t| !skipped(t)).map_or(1, |t| t.rank());
        let d = wrap_dim(dim, r)?;
        let parts: Vec<(usize, usize, Shape)> = {
            let mut start = 0;
            ts.iter()
                .map(|t| {
                    let len = if skipped(t) { 0 } else { t.dims()[d] };
                    start += len;
                    (start - len, len, t.shape().clone())
                })
                .collect()
        };
        record1("CatBackward0", &ts, y, &[], move |ctx, g| {
            parts
                .iter()
                .enumerate()
                .map(|(i, (start, len, shape))| {
                    if !ctx.needs_input_grad(i) {
                        return Ok(None);
                    }
                    if shape.dims() == [0] {
                        return Ok(Some(Tensor::zeros_on([0], g[0].dtype(), g[0].device())?));
                    }
                    Ok(Some(g[0].narrow(d as isize, *start as isize, *len)?))
                })
                .collect()
        })
    }

    fn cat_impl(ts: &[&Tensor], dim: isize) -> Result<Tensor> {
        if ts.is_empty() {
            bail!(Value, "torch.cat(): expected a non-empty list of Tensors");
        }
        let device = ts[0].device();
        for (i, t) in ts.iter().enumerate() {
            if t.rank() == 0 {
                bail!(Shape, "zero-dimensional tensor (at position {i}) cannot be concatenated");
            }
            if t.device() != device {
                bail!(
                    Device,
                    "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
                    device,
                    t.device()
                );
            }
        }
        device.check_available()?;
        let dtype = ts.iter().skip(1).fold(ts[0].dtype(), |a, t| promote_types(a, t.dtype()));
        let kept: Vec<(usize, &Tensor)> = ts
            .iter()
            .enumerate()
            .filter(|(_, t)| !(t.rank() == 1 && t.numel() == 0))
            .map(|(i, t)| (i, *t))
            .collect();
        if kept.is_empty() {
            wrap_dim(dim, 1)?;
            return Tensor::zeros_on([0], dtype, device);
        }
        let first = kept[0].1;
        let r = first.rank();
        let d = wrap_dim(dim, r)?;
        let mut cat_size = 0;
        for &(i, t) in &kept {
            if t.rank() != r {
                bail!(Shape, "Tensors must have same number of dimensions: got {r} and {}", t.rank());
            }
            for k in 0..r {
                if k != d && t.dims()[k] != first.dims()[k] {
                    bail!(
                        Shape,
                        "Sizes of tensors must match except in dimension {d}. Expected size {} but got size {} for tensor number {i} in the list.",
                        first.dims()[k],
                        t.dims()[k]
                    );
                }
            }
            cat_size += t.dims()[d];
        }
        let mut shape = first.shape().clone();
        shape.0[d] = cat_size;
        if device.is_cuda() {
            // Each input copied (and cast) into its slice of the output, on the device.
            let out = Tensor::zeros_on(shape, dtype, device)?;
            let mut at = 0;
            for &(_, t) in &kept {
                out.narrow(d as isize, at as isize, t.dims()[d])?.copy_(t)?;
                at += t.dims()[d];
            }
            return Ok(out);
        }
        let outer: usize = shape.dims()[..d].iter().product();
        let inner: usize = shape.dims()[d + 1..].iter().product();
        let mut inputs = Vec::with_capacity(kept.len());
        let mut lens = Vec::with_capacity(kept.len());
        for &(_, t) in &kept {
            inputs.push(t.to_dtype(dtype)?.contiguous()?);
            lens.push(t.dims()[d] * inner);
        }
        dispatch_all!(dtype, E => cat_kernel::<E>(&inputs, &lens, outer, shape))
    }

    /// Stacks equally shaped tensors along a new dim `dim` (`torch.stack`; `dim` may be
    /// `-1` for a new last dim).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let a = Tensor::new([1i64, 2])?;
    /// let b = Tensor::new([3i64, 4])?;
    /// let s = Tensor::stack(&[&a, &b], 1)?;
    /// assert_eq!(s.to_vec2::<i64>()?, vec![vec![1, 3], vec![2, 4]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn stack<T: AsRef<Tensor>>(tensors: &[T], dim: isize) -> Result<Tensor> {
        let ts: Vec<&Tensor> = tensors.iter().map(|t| t.as_ref()).collect();
        let _prof = crate::profiler_record::op("aten::stack", &ts);
        if ts.is_empty() {
            bail!(Value, "stack expects a non-empty TensorList");
        }
        let d = wrap_dim(dim, ts[0].rank() + 1)?;
        for (i, t) in ts.iter().enumerate() {
            if t.dims() != ts[0].dims() {
                bail!(
                    Shape,
                    "stack expects each tensor to be equal size, but got {} at entry 0 and {} at entry {i}",
                    ts[0].shape(),
                    t.shape()
                );
            }
        }
        let us: Vec<Tensor> = ts.iter().map(|t| t.unsqueeze(d as isize)).collect::<Result<_>>()?;
        Tensor::cat(&us, d as isize)
    }

    /// Stacks tensors horizontally (`torch.hstack`): along dim 0 for 1-D (and 0-d) tensors,
    /// along dim 1 otherwise.
    pub fn hstack<T: AsRef<Tensor>>(tensors: &[T]) -> Result<Tensor> {
        if tensors.is_empty() {
            bail!(Value, "hstack expects a non-empty TensorList");
        }
        let ts: Vec<Tensor> = tensors.iter().map(|t| t.as_ref().atleast_1d()).collect::<Result<_>>()?;
        Tensor::cat(&ts, if ts[0].rank() == 1 { 0 } else { 1 })
    }

    /// Stacks tensors vertically (`torch.vstack`): each is made at least 2-D, then joined
    /// along dim 0.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let v = Tensor::vstack(&[Tensor::new([1f32, 2.])?, Tensor::new([3f32, 4.])?])?;
    /// assert_eq!(v.dims(), &[2, 2]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn vstack<T: AsRef<Tensor>>(tensors: &[T]) -> Result<Tensor> {
        if tensors.is_empty() {
            bail!(Value, "vstack expects a non-empty TensorList");
        }
        let ts: Vec<Tensor> = tensors.iter().map(|t| t.as_ref().atleast_2d()).collect::<Result<_>>()?;
        Tensor::cat(&ts, 0)
    }

    /// Stacks tensors depth-wise (`torch.dstack`): each is made at least 3-D, then joined
    /// along dim 2.
    pub fn dstack<T: AsRef<Tensor>>(tensors: &[T]) -> Result<Tensor> {
        if tensors.is_empty() {
            bail!(Value, "dstack expects a non-empty TensorList");
        }
        let ts: Vec<Tensor> = tensors.iter().map(|t| t.as_ref().atleast_3d()).collect::<Result<_>>()?;
        Tensor::cat(&ts, 2)
    }

    /// A view with at least one dim: 0-d tensors become shape `[1]` (`torch.atleast_1d`).
    pub fn atleast_1d(&self) -> Result<Tensor> {
        match self.rank() {
            0 => self.reshape([1]),
            _ => Ok(self.clone()),
        }
    }

    /// A view with at least two dims: `[n]` becomes `[1, n]` (`torch.atleast_2d`).
    pub fn atleast_2d(&self) -> Result<Tensor> {
        match self.rank() {
            0 => self.reshape([1, 1]),
            1 => self.unsqueeze(0),
            _ => Ok(self.clone()),
        }
    }

    /// A view with at least three dims: `[n]` becomes `[1, n, 1]`, `[m, n]` becomes
    /// `[m, n, 1]` (`torch.atleast_3d`).
    pub fn atleast_3d(&self) -> Result<Tensor> {
        match self.rank() {
            0 => self.reshape([1, 1, 1]),
            1 => self.unsqueeze(0)?.unsqueeze(-1),
            2 => self.unsqueeze(-1),
            _ => Ok(self.clone()),
        }
    }

    /// Splits into `chunks` views along `dim` of `ceil(size / chunks)` elements each; the last
    /// may be smaller and there may be fewer than `chunks` (`torch.chunk`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::arange(0.0, 5.0, 1.0, DType::I64)?;
    /// let parts = x.chunk(3, 0)?;
    /// assert_eq!(parts.iter().map(|p| p.numel()).collect::<Vec<_>>(), vec![2, 2, 1]);
    /// assert!(parts[1].same_storage(&x));
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Tensor>> {
        if self.rank() == 0 {
            bail!(Shape, "chunk expects at least a 1-dimensional tensor");
        }
        if chunks == 0 {
            bail!(Value, "chunk expects `chunks` to be greater than 0, got: 0");
        }
        let d = wrap_dim(dim, self.rank())?;
        let size = self.dims()[d];
        let split = size.div_ceil(chunks);
        if split == 0 && size == 0 {
            return self.split_sizes(&crate::alloc::try_vec(chunks, 0, "chunk")?, dim);
        }
        self.split(split, dim)
    }

    /// Splits into views of `split_size` elements along `dim`; the last may be smaller
    /// (`torch.split(t, split_size, dim)`).
    pub fn split(&self, split_size: usize, dim: isize) -> Result<Vec<Tensor>> {
        if self.rank() == 0 {
            bail!(Shape, "split expects at least a 1-dimensional tensor");
        }
        let d = wrap_dim(dim, self.rank())?;
        let size = self.dims()[d];
        if split_size == 0 && size != 0 {
            bail!(Value, "split_size can only be 0 if dimension size is 0, but got dimension size of {size}");
        }
        let n = if split_size == 0 { 1 } else { size.div_ceil(split_size).max(1) };
        let mut parts = crate::alloc::try_with_capacity(n, "split")?;
        for i in 0..n {
            let start = i * split_size;
            parts.push(self.split_part(d, start, split_size.min(size - start))?);
        }
        Ok(parts)
    }

    /// Splits into views with the given sizes along `dim`, which must sum to its size
    /// (`torch.split(t, [s0, s1, ...], dim)`, `split_with_sizes`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::arange(0.0, 5.0, 1.0, DType::F32)?;
    /// let p = x.split_sizes(&[1, 4], 0)?;
    /// assert_eq!(p[1].to_vec::<f32>()?, vec![1., 2., 3., 4.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn split_sizes(&self, sizes: &[usize], dim: isize) -> Result<Vec<Tensor>> {
        if self.rank() == 0 {
            bail!(Shape, "split_with_sizes expects at least a 1-dimensional tensor");
        }
        let d = wrap_dim(dim, self.rank())?;
        let size = self.dims()[d];
        if sizes.iter().try_fold(0usize, |a, &b| a.checked_add(b)) != Some(size) {
            bail!(
                Value,
                "split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension {d}), but got split_sizes={sizes:?}"
            );
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|&len| {
                let v = self.split_part(d, start, len);
                start += len;
                v
            })
            .collect()
    }

    /// The slices along `dim` as views, with `dim` removed (`torch.unbind`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 2.], [3., 4.]])?;
    /// let cols = x.unbind(1)?;
    /// assert_eq!(cols[1].to_vec::<f32>()?, vec![2., 4.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn unbind(&self, dim: isize) -> Result<Vec<Tensor>> {
        if self.rank() == 0 {
            bail!(Index, "Dimension specified as {dim} but tensor has no dimensions");
        }
        let d = wrap_dim(dim, self.rank())?;
        let n = self.dims()[d];
        let mut parts = crate::alloc::try_with_capacity(n, "unbind")?;
        if needs_grad(&[self]) {
            // recorded views (SelectBackward0), so each part's gradient reaches this tensor
            for i in 0..n {
                parts.push(self.select(d as isize, i as isize)?);
            }
        } else {
            parts.extend((0..n).map(|i| self.with_layout(self.layout().select(d, i))));
        }
        Ok(parts)
    }

    /// One part of a split: a view of `len` elements of `d` from `start`, recorded
    /// (`NarrowBackward0`) when this tensor requires grad.
    fn split_part(&self, d: usize, start: usize, len: usize) -> Result<Tensor> {
        if needs_grad(&[self]) {
            return self.narrow(d as isize, start as isize, len);
        }
        Ok(self.with_layout(self.layout().narrow(d, start, len)))
    }

    /// A copy with the order of elements reversed along each of `dims` (`torch.flip`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1i64, 2, 3], [4, 5, 6]])?;
    /// assert_eq!(x.flip(&[-1])?.to_vec2::<i64>()?, vec![vec![3, 2, 1], vec![6, 5, 4]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn flip(&self, dims: &[isize]) -> Result<Tensor> {
        let y = self.flip_impl(dims)?;
        if !needs_grad(&[self]) {
            return Ok(y);
        }
        let dims = dims.to_vec();
        record1("FlipBackward0", &[self], y, &[], move |_, g| Ok(vec![Some(g[0].flip(&dims)?)]))
    }

    fn flip_impl(&self, dims: &[isize]) -> Result<Tensor> {
        let ds = wrap_dims(dims, self.rank(), "flip")?;
        let l = self.layout();
        let mut strides: Vec<isize> = l.strides().iter().map(|&s| s as isize).collect();
        let mut base = l.offset() as isize;
        if l.numel() > 0 {
            for &d in &ds {
                if d < l.dims().len() {
                    base += (l.dims()[d] as isize - 1) * strides[d];
                    strides[d] = -strides[d];
                }
            }
        }
        if self.device().is_cuda() {
            return crate::cuda::strided_copy(self, &strides, base);
        }
        dispatch_all!(self.dtype(), T => {
            let g = self.storage().read();
            let src = g.cpu().as_slice::<T>();
            Tensor::build::<T>(self.shape().clone(), |out| signed_gather(src, l.dims(), &strides, base, out))
        })
    }

    /// `torch.fliplr`: flips dim 1 (needs at least 2 dims).
    pub fn fliplr(&self) -> Result<Tensor> {
        if self.rank() < 2 {
            bail!(Shape, "Input must be >= 2-d.");
        }
        self.flip(&[1])
    }

    /// `torch.flipud`: flips dim 0 (needs at least 1 dim).
    pub fn flipud(&self) -> Result<Tensor> {
        if self.rank() < 1 {
            bail!(Shape, "Input must be >= 1-d.");
        }
        self.flip(&[0])
    }

    /// Rolls elements along `dims` by `shifts` (`torch.roll`): element `i` moves to
    /// `i + shift` (wrapping). With no dims the tensor is rolled as if flattened, then
    /// restored to its shape.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1i64, 2, 3], [4, 5, 6]])?;
    /// assert_eq!(x.roll(&[1], &[])?.to_vec2::<i64>()?, vec![vec![6, 1, 2], vec![3, 4, 5]]);
    /// assert_eq!(x.roll(&[-1], &[1])?.to_vec2::<i64>()?, vec![vec![2, 3, 1], vec![5, 6, 4]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn roll(&self, shifts: &[isize], dims: &[isize]) -> Result<Tensor> {
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            self.roll_impl(shifts, dims)?
        };
        if !rec {
            return Ok(y);
        }
        // d roll: the gradient rolled back
        let (back, dims) = (shifts.iter().map(|s| -s).collect::<Vec<_>>(), dims.to_vec());
        record1("RollBackward0", &[self], y, &[], move |_, g| Ok(vec![Some(g[0].roll(&back, &dims)?)]))
    }

    /// [`Tensor::roll`] from narrows and a cat (not recorded itself).
    fn roll_impl(&self, shifts: &[isize], dims: &[isize]) -> Result<Tensor> {
        if dims.is_empty() {
            if shifts.len() != 1 {
                bail!(Value, "`shifts` required to be of size 1 when `dims` is empty, got {}", shifts.len());
            }
            let flat = self.reshape([self.numel()])?;
            return flat.roll_impl(shifts, &[0])?.reshape(self.shape());
        }
        if shifts.len() != dims.len() {
            bail!(Value, "shifts and dimensions must align. shifts: {}, dims:{}", shifts.len(), dims.len());
        }
        let mut x = self.clone();
        let mut copied = false;
        for (&s, &dim) in shifts.iter().zip(dims) {
            let d = wrap_dim(dim, self.rank())?;
            let n = if self.rank() == 0 { 1 } else { self.dims()[d] } as isize;
            if n == 0 || self.rank() == 0 {
                continue;
            }
            let s = s.rem_euclid(n);
            if s == 0 {
                continue;
            }
            let a = x.narrow(d as isize, n - s, s as usize)?;
            let b = x.narrow(d as isize, 0, (n - s) as usize)?;
            x = Tensor::cat(&[a, b], d as isize)?;
            copied = true;
        }
        if copied {
            Ok(x)
        } else {
            self.deep_clone()
        }
    }

    /// Repeats the tensor `repeats[i]` times along each dim (`t.repeat(*repeats)`); extra
    /// leading entries add new dims. Always a copy.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([1i64, 2])?;
    /// assert_eq!(x.repeat(&[2, 2])?.to_vec2::<i64>()?, vec![vec![1, 2, 1, 2], vec![1, 2, 1, 2]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn repeat(&self, repeats: &[usize]) -> Result<Tensor> {
        if repeats.len() < self.rank() {
            bail!(
                Shape,
                "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
            );
        }
        let pad = repeats.len() - self.rank();
        let l = self.layout();
        let mut shape = DimVec::new();
        let mut strides = DimVec::new();
        let mut out = DimVec::new();
        for (i, &r) in repeats.iter().enumerate() {
            let (d, s) = if i < pad { (1, 0) } else { (l.dims()[i - pad], l.strides()[i - pad]) };
            shape.push(r);
            strides.push(0);
            shape.push(d);
            strides.push(s);
            match r.checked_mul(d) {
                Some(n) => out.push(n),
                None => bail!(
                    OutOfMemory,
                    "repeat: {r} repeats of a dim of size {d} overflow the size of a tensor"
                ),
            }
        }
        let expanded = self.with_layout(Layout { shape: Shape(shape), strides, offset: l.offset() });
        let y = {
            let _g = crate::autograd::no_grad();
            expanded.deep_clone()?.with_layout(Layout::contiguous(Shape(out)))
        };
        if !needs_grad(&[self]) {
            return Ok(y);
        }
        // The output seen as [r0, d0, r1, d1, ...]: the gradient sums over the repeats.
        let split: Vec<usize> = repeats
            .iter()
            .enumerate()
            .flat_map(|(i, &r)| [r, if i < pad { 1 } else { self.dims()[i - pad] }])
            .collect();
        let rdims: Vec<isize> = (0..repeats.len()).map(|i| 2 * i as isize).collect();
        let shape = self.shape().clone();
        record1("RepeatBackward0", &[self], y, &[], move |_, g| {
            let g = if rdims.is_empty() {
                g[0].clone()
            } else {
                g[0].reshape(split.as_slice())?.sum_dims(&rdims, false)?
            };
            Ok(vec![Some(g.reshape(shape.dims())?)])
        })
    }

    /// `torch.tile`: like [`Tensor::repeat`], but `reps` shorter than the rank is padded with
    /// leading ones.
    pub fn tile(&self, reps: &[usize]) -> Result<Tensor> {
        let mut r = vec![1usize; self.rank().saturating_sub(reps.len())];
        r.extend_from_slice(reps);
        self.repeat(&r)
    }

    /// Repeats each element `repeats` times along `dim`, or over the flattened tensor when
    /// `dim` is `None` (`t.repeat_interleave(repeats, dim)`).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1i64, 2], [3, 4]])?;
    /// assert_eq!(x.repeat_interleave(2, None)?.to_vec::<i64>()?, vec![1, 1, 2, 2, 3, 3, 4, 4]);
    /// assert_eq!(x.repeat_interleave(2, Some(0))?.dims(), &[4, 2]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn repeat_interleave(&self, repeats: usize, dim: Option<isize>) -> Result<Tensor> {
        let (x, d) = match dim {
            Some(dim) if self.rank() > 0 => (self.clone(), wrap_dim(dim, self.rank())?),
            Some(dim) => {
                wrap_dim(dim, 0)?;
                (self.reshape([1])?, 0)
            }
            None => (self.reshape([self.numel()])?, 0),
        };
        let mut out: Vec<usize> = x.dims().to_vec();
        out[d] = out[d].checked_mul(repeats).ok_or_else(|| {
            crate::err!(OutOfMemory, "repeat_interleave: {repeats} repeats overflow the size of a tensor")
        })?;
        let mut dims: Vec<usize> = x.dims().to_vec();
        dims.insert(d + 1, repeats);
        x.unsqueeze(d as isize + 1)?.broadcast_to(&dims)?.contiguous()?.reshape(out)
    }

    /// Repeats each slice `i` along `dim` `repeats[i]` times (`repeats`: an int64/int32 tensor
    /// of one entry, or one per slice), over the flattened tensor when `dim` is `None`
    /// (`t.repeat_interleave(repeats_tensor, dim)`).
    pub fn repeat_interleave_tensor(&self, repeats: &Tensor, dim: Option<isize>) -> Result<Tensor> {
        let (x, d) = match dim {
            Some(dim) if self.rank() > 0 => (self.clone(), wrap_dim(dim, self.rank())?),
            Some(dim) => {
                wrap_dim(dim, 0)?;
                (self.reshape([1])?, 0)
            }
            None => (self.reshape([self.numel()])?, 0),
        };
        let reps = repeat_counts(repeats)?;
        let size = x.dims()[d];
        let reps = if reps.len() == 1 {
            vec![reps[0]; size]
        } else if reps.len() == size {
            reps
        } else {
            bail!(
                Shape,
                "repeats must have the same size as input along dim, but got repeats.size(0) = {} and input.size({d}) = {size}",
                reps.len()
            );
        };
        let idx = expand_counts(&reps)?;
        x.index_select(d as isize, &idx)
    }

    /// `torch.repeat_interleave(repeats)`: with this tensor as the repeat counts (1-D int64 or
    /// int32), the index `i` repeated `repeats[i]` times, as int64.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let r = Tensor::new([1i64, 0, 2])?;
    /// assert_eq!(r.repeat_interleave_counts()?.to_vec::<i64>()?, vec![0, 2, 2]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn repeat_interleave_counts(&self) -> Result<Tensor> {
        let reps = repeat_counts(self)?;
        expand_counts(&reps)
    }
}

/// Validated repeat counts: an int tensor of rank <= 1 without negative entries.
fn repeat_counts(repeats: &Tensor) -> Result<Vec<usize>> {
    if !matches!(repeats.dtype(), DType::I64 | DType::I32) {
        bail!(NotImplemented, "\"repeat_interleave_cpu\" not implemented for '{}'", repeats.dtype());
    }
    if repeats.rank() > 1 {
        bail!(Shape, "repeats must be 0-dim or 1-dim tensor");
    }
    let v = super::index::index_values(repeats, "repeat_interleave", true)?;
    if v.iter().any(|&r| r < 0) {
        bail!(Value, "repeats can not be negative");
    }
    Ok(v.into_iter().map(|r| r as usize).collect())
}

/// `[0; reps[0]] ++ [1; reps[1]] ++ ...` as an int64 tensor.
fn expand_counts(reps: &[usize]) -> Result<Tensor> {
    let Some(total) = reps.iter().try_fold(0usize, |a, &r| a.checked_add(r)) else {
        bail!(OutOfMemory, "repeat_interleave: the repeat counts add up to more than fit in memory");
    };
    Tensor::build::<i64>(Shape::from([total]), |out| {
        let mut k = 0;
        for (i, &r) in reps.iter().enumerate() {
            out[k..k + r].fill(i as i64);
            k += r;
        }
    })
}
