//! View ops: new layouts over the same storage (view, reshape, squeeze, unsqueeze, permute,
//! transpose, expand, narrow, slice, select, flatten, unflatten, unfold, diagonal) and the
//! `t[1:, ..., None]`-style indexing helper [`Tensor::index`].

use crate::autograd::record::{needs_grad, paused, record1};
use crate::layout::Layout;
use crate::shape::{wrap_dim, wrap_dims, DimVec, Shape};
use crate::{bail, Result, Tensor};
use smallvec::SmallVec;

/// A shape that may hold one `-1` to infer (what `view` and `reshape` accept).
#[derive(Clone, Debug)]
pub struct ViewShape(pub SmallVec<[isize; 6]>);

macro_rules! view_shape_from {
    ($($t:ty),*) => {$(
        impl<const N: usize> From<[$t; N]> for ViewShape {
            fn from(d: [$t; N]) -> Self { ViewShape(d.iter().map(|&x| x as isize).collect()) }
        }
        impl<const N: usize> From<&[$t; N]> for ViewShape {
            fn from(d: &[$t; N]) -> Self { ViewShape(d.iter().map(|&x| x as isize).collect()) }
        }
        impl From<&[$t]> for ViewShape {
            fn from(d: &[$t]) -> Self { ViewShape(d.iter().map(|&x| x as isize).collect()) }
        }
        impl From<Vec<$t>> for ViewShape {
            fn from(d: Vec<$t>) -> Self { ViewShape(d.iter().map(|&x| x as isize).collect()) }
        }
        impl From<&Vec<$t>> for ViewShape {
            fn from(d: &Vec<$t>) -> Self { ViewShape(d.iter().map(|&x| x as isize).collect()) }
        }
    )*};
}
view_shape_from!(usize, isize, i32, i64);

impl From<&Shape> for ViewShape {
    fn from(s: &Shape) -> Self {
        ViewShape(s.dims().iter().map(|&x| x as isize).collect())
    }
}
impl From<Shape> for ViewShape {
    fn from(s: Shape) -> Self {
        (&s).into()
    }
}
impl From<usize> for ViewShape {
    fn from(d: usize) -> Self {
        ViewShape(smallvec::smallvec![d as isize])
    }
}
impl From<(usize, usize)> for ViewShape {
    fn from(d: (usize, usize)) -> Self {
        ViewShape(smallvec::smallvec![d.0 as isize, d.1 as isize])
    }
}
impl From<(usize, usize, usize)> for ViewShape {
    fn from(d: (usize, usize, usize)) -> Self {
        ViewShape(smallvec::smallvec![d.0 as isize, d.1 as isize, d.2 as isize])
    }
}
impl From<()> for ViewShape {
    fn from(_: ()) -> Self {
        ViewShape(SmallVec::new())
    }
}

impl ViewShape {
    /// Resolves `-1` against `numel` (PyTorch's `infer_size`).
    pub fn infer(&self, numel: usize, op: &str) -> Result<Shape> {
        let mut infer_at = None;
        let mut known = 1usize;
        for (i, &d) in self.0.iter().enumerate() {
            if d == -1 {
                if infer_at.is_some() {
                    bail!(Value, "{op}: only one dimension can be inferred");
                }
                infer_at = Some(i);
            } else if d < 0 {
                bail!(Value, "{op}: invalid shape dimension {d}");
            } else {
                known = match known.checked_mul(d as usize) {
                    Some(k) => k,
                    None => bail!(
                        Value,
                        "{op}: shape [{}] has more elements than fit in memory (the product of its sizes overflows)",
                        self.0.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
                    ),
                };
            }
        }
        let mut dims: DimVec = self.0.iter().map(|&d| d.max(0) as usize).collect();
        let shown = || format!("[{}]", self.0.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "));
        match infer_at {
            Some(i) => {
                if known == 0 || !numel.is_multiple_of(known) {
                    bail!(Shape, "shape '{}' is invalid for input of size {numel}", shown());
                }
                dims[i] = numel / known;
            }
            None => {
                if known != numel {
                    bail!(Shape, "shape '{}' is invalid for input of size {numel}", shown());
                }
            }
        }
        Ok(Shape(dims))
    }
}

/// One entry of [`Tensor::index`]: PyTorch's `t[...]` syntax.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorIndex {
    /// `t[i]`: selects one index (negative counts from the end) and removes the dim.
    Select(isize),
    /// `t[start:end:step]`: Python slice semantics (bounds clamp, negatives count from the end).
    Slice(Option<isize>, Option<isize>, isize),
    /// `t[...]`: as many full slices as needed.
    Ellipsis,
    /// `t[None]`: inserts a size-1 dim.
    NewAxis,
}

impl TensorIndex {
    /// `start:end:step` with optional bounds.
    pub fn slice(start: Option<isize>, end: Option<isize>, step: isize) -> Self {
        TensorIndex::Slice(start, end, step)
    }
}

macro_rules! index_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for TensorIndex {
            fn from(i: $t) -> Self { TensorIndex::Select(i as isize) }
        }
        impl From<std::ops::Range<$t>> for TensorIndex {
            fn from(r: std::ops::Range<$t>) -> Self { TensorIndex::Slice(Some(r.start as isize), Some(r.end as isize), 1) }
        }
        impl From<std::ops::RangeFrom<$t>> for TensorIndex {
            fn from(r: std::ops::RangeFrom<$t>) -> Self { TensorIndex::Slice(Some(r.start as isize), None, 1) }
        }
        impl From<std::ops::RangeTo<$t>> for TensorIndex {
            fn from(r: std::ops::RangeTo<$t>) -> Self { TensorIndex::Slice(None, Some(r.end as isize), 1) }
        }
        impl From<std::ops::RangeInclusive<$t>> for TensorIndex {
            fn from(r: std::ops::RangeInclusive<$t>) -> Self { TensorIndex::Slice(Some(*r.start() as isize), Some(*r.end() as isize + 1), 1) }
        }
    )*};
}
index_from_int!(i32, i64, isize, usize);

impl From<std::ops::RangeFull> for TensorIndex {
    fn from(_: std::ops::RangeFull) -> Self {
        TensorIndex::Slice(None, None, 1)
    }
}
impl From<Option<()>> for TensorIndex {
    /// `None` is PyTorch's new axis.
    fn from(_: Option<()>) -> Self {
        TensorIndex::NewAxis
    }
}

/// Builds an array of [`TensorIndex`] from PyTorch-like entries:
/// `idx![1.., .., None]` is `t[1:, :, None]`; `idx![...]` is an ellipsis.
///
/// ```
/// use pyrite_core::{idx, Tensor, DType};
/// let t = Tensor::arange(0.0, 24.0, 1.0, DType::F32).unwrap().reshape([2, 3, 4]).unwrap();
/// let v = t.index(&idx![1, ..., None, 1..3]).unwrap();
/// assert_eq!(v.dims(), &[3, 1, 2]);
/// ```
#[macro_export]
macro_rules! idx {
    (@acc [$($done:expr,)*]) => { [$($done),*] };
    (@acc [$($done:expr,)*] ... $(, $($rest:tt)*)?) => {
        $crate::idx!(@acc [$($done,)* $crate::TensorIndex::Ellipsis,] $($($rest)*)?)
    };
    (@acc [$($done:expr,)*] None $(, $($rest:tt)*)?) => {
        $crate::idx!(@acc [$($done,)* $crate::TensorIndex::NewAxis,] $($($rest)*)?)
    };
    (@acc [$($done:expr,)*] $e:expr $(, $($rest:tt)*)?) => {
        $crate::idx!(@acc [$($done,)* $crate::TensorIndex::from($e),] $($($rest)*)?)
    };
    ($($t:tt)*) => { $crate::idx!(@acc [] $($t)*) };
}

/// Clamps a Python slice bound into `0..=len`.
fn clamp_bound(b: isize, len: usize) -> usize {
    let l = len as isize;
    let v = if b < 0 { b + l } else { b };
    v.clamp(0, l) as usize
}

impl Tensor {
    /// A view with a new shape (`t.view(shape)`, one dim may be `-1`). Fails like PyTorch when
    /// the strides do not allow it; use [`Tensor::reshape`] then.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::zeros([2, 3], DType::F32).unwrap();
    /// assert_eq!(t.view([3, -1]).unwrap().dims(), &[3, 2]);
    /// assert!(t.t().unwrap().view([6]).is_err());
    /// ```
    pub fn view(&self, shape: impl Into<ViewShape>) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::view", [self], {
            let shape = shape.into().infer(self.numel(), "view")?;
            match self.layout().view_strides(shape.dims()) {
                Some(strides) => {
                    let out = self.with_layout(Layout { shape, strides, offset: self.storage_offset() });
                    self.view_ad("ViewBackward0", out, reshape_back(self))
                }
                None => bail!(
                    Shape,
                    "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead."
                ),
            }
        })
    }

    /// `t.reshape(shape)`: a view when the strides allow it, a copy otherwise.
    pub fn reshape(&self, shape: impl Into<ViewShape>) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::reshape", [self], {
            let shape = shape.into().infer(self.numel(), "reshape")?;
            match self.layout().view_strides(shape.dims()) {
                Some(strides) => {
                    let out = self.with_layout(Layout { shape, strides, offset: self.storage_offset() });
                    self.view_ad("ViewBackward0", out, reshape_back(self))
                }
                None => self.deep_clone()?.view(shape.dims()),
            }
        })
    }

    /// Removes every size-1 dim (`t.squeeze()`).
    pub fn squeeze(&self) -> Result<Tensor> {
        let keep: Vec<usize> = (0..self.rank()).filter(|&d| self.dims()[d] != 1).collect();
        let out = self.with_layout(Layout {
            shape: Shape(keep.iter().map(|&d| self.dims()[d]).collect()),
            strides: keep.iter().map(|&d| self.stride()[d]).collect(),
            offset: self.storage_offset(),
        });
        self.view_ad("SqueezeBackward0", out, reshape_back(self))
    }

    /// Removes `dim` if it has size 1 (`t.squeeze(dim)`); otherwise returns the same view.
    pub fn squeeze_dim(&self, dim: isize) -> Result<Tensor> {
        self.squeeze_dims(&[dim])
    }

    /// Removes each listed dim that has size 1 (`t.squeeze((d0, d1))`).
    pub fn squeeze_dims(&self, dims: &[isize]) -> Result<Tensor> {
        let ds = wrap_dims(dims, self.rank(), "squeeze")?;
        let keep: Vec<usize> =
            (0..self.rank()).filter(|d| !(ds.contains(d) && self.dims()[*d] == 1)).collect();
        let out = self.with_layout(Layout {
            shape: Shape(keep.iter().map(|&d| self.dims()[d]).collect()),
            strides: keep.iter().map(|&d| self.stride()[d]).collect(),
            offset: self.storage_offset(),
        });
        self.view_ad("SqueezeBackward1", out, reshape_back(self))
    }

    /// Inserts a size-1 dim at `dim` (`t.unsqueeze(dim)`, `-1` appends).
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::unsqueeze", [self], {
            let d = wrap_dim(dim, self.rank() + 1)?;
            let out = self.with_layout(self.layout().unsqueeze(d));
            self.view_ad("UnsqueezeBackward0", out, reshape_back(self))
        })
    }

    /// Reorders dims (`t.permute(dims)`).
    pub fn permute(&self, dims: &[isize]) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::permute", [self], {
            if dims.len() != self.rank() {
                bail!(
                    Shape,
                    "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = {} is not equal to len(dims) = {}",
                    self.rank(),
                    dims.len()
                );
            }
            let ds = wrap_dims(dims, self.rank(), "permute")?;
            let out = self.with_layout(self.layout().permute(&ds));
            let mut inverse = vec![0isize; ds.len()];
            for (i, &d) in ds.iter().enumerate() {
                inverse[d] = i as isize;
            }
            self.view_ad("PermuteBackward0", out, move |g| g.permute(&inverse))
        })
    }

    /// Swaps two dims (`t.transpose(d0, d1)`).
    pub fn transpose(&self, d0: isize, d1: isize) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::transpose", [self], {
            let a = wrap_dim(d0, self.rank())?;
            let b = wrap_dim(d1, self.rank())?;
            if self.rank() == 0 {
                return Ok(self.clone());
            }
            let out = self.with_layout(self.layout().transpose(a, b));
            self.view_ad("TransposeBackward0", out, move |g| g.transpose(a as isize, b as isize))
        })
    }

    /// `t.t()`: transposes a 2-d tensor; 0-d and 1-d tensors are returned as is.
    pub fn t(&self) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::t", [self], {
            match self.rank() {
                0 | 1 => Ok(self.clone()),
                2 => self.transpose(0, 1),
                r => bail!(Shape, "t() expects a tensor with <= 2 dimensions, but self is {r}D"),
            }
        })
    }

    /// Broadcasts to `shape` without copying (`t.expand(shape)`; `-1` keeps a dim).
    pub fn expand(&self, shape: impl Into<ViewShape>) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::expand", [self], {
            let vs = shape.into();
            let n = vs.0.len();
            let r = self.rank();
            let mut target = DimVec::new();
            for (i, &d) in vs.0.iter().enumerate() {
                if d == -1 {
                    if i < n.saturating_sub(r) {
                        bail!(Shape, "expand: -1 is not allowed in a leading, non-existing dimension {i}");
                    }
                    target.push(self.dims()[i + r - n]);
                } else if d < 0 {
                    bail!(Value, "expand: invalid size {d}");
                } else {
                    target.push(d as usize);
                }
            }
            let out = self.with_layout(self.layout().expand(&target, "expand")?);
            let shape = self.shape().clone();
            self.view_ad("ExpandBackward0", out, move |g| g.sum_to_size(shape.clone()))
        })
    }

    /// Broadcasts to `shape` (`torch.broadcast_to`).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let out = self.with_layout(self.layout().expand(shape, "broadcast_to")?);
        let shape = self.shape().clone();
        self.view_ad("ExpandBackward0", out, move |g| g.sum_to_size(shape.clone()))
    }

    /// `t.view_as(other)`: a view with `other`'s shape.
    pub fn view_as(&self, other: &Tensor) -> Result<Tensor> {
        self.view(other.dims())
    }

    /// `t.reshape_as(other)`.
    pub fn reshape_as(&self, other: &Tensor) -> Result<Tensor> {
        self.reshape(other.dims())
    }

    /// `t.type_as(other)`: this tensor in `other`'s dtype (itself when they match).
    pub fn type_as(&self, other: &Tensor) -> Result<Tensor> {
        self.to_dtype(other.dtype())
    }

    /// `t.expand_as(other)`.
    pub fn expand_as(&self, other: &Tensor) -> Result<Tensor> {
        self.broadcast_to(other.dims())
    }

    /// `len` elements of `dim` starting at `start` (negative counts from the end), as a view.
    pub fn narrow(&self, dim: isize, start: isize, len: usize) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::narrow", [self], {
            if self.rank() == 0 {
                bail!(Index, "narrow() cannot be applied to a 0-dim tensor.");
            }
            let d = wrap_dim(dim, self.rank())?;
            let size = self.dims()[d];
            let s = if start < 0 { start + size as isize } else { start };
            if s < 0 || s as usize > size {
                bail!(
                    Index,
                    "start out of range (expected to be in range of [{}, {size}], but got {start})",
                    -(size as isize)
                );
            }
            if len > size - s as usize {
                bail!(Index, "start ({start}) + length ({len}) exceeds dimension size ({size}).");
            }
            let out = self.with_layout(self.layout().narrow(d, s as usize, len));
            let s = s as isize;
            self.scatter_view_ad("SliceBackward0", out, move |t| t.narrow(d as isize, s, len))
        })
    }

    /// `t[start:end:step]` along `dim` with Python's clamping; `step` must be positive.
    pub fn slice(&self, dim: isize, start: Option<isize>, end: Option<isize>, step: isize) -> Result<Tensor> {
        if self.rank() == 0 {
            bail!(Index, "slice() cannot be applied to a 0-dim tensor.");
        }
        let d = wrap_dim(dim, self.rank())?;
        if step <= 0 {
            bail!(Value, "slice step must be positive, got {step}");
        }
        let size = self.dims()[d];
        let s = start.map_or(0, |b| clamp_bound(b, size));
        let e = end.map_or(size, |b| clamp_bound(b, size)).max(s);
        let out = self.with_layout(self.layout().slice(d, s, e, step as usize));
        let (s, e) = (s as isize, e as isize);
        self.scatter_view_ad("SliceBackward0", out, move |t| t.slice(d as isize, Some(s), Some(e), step))
    }

    /// Fixes `dim` at `index` and removes it (`t.select(dim, index)`, `t[..., index]`).
    pub fn select(&self, dim: isize, index: isize) -> Result<Tensor> {
        if self.rank() == 0 {
            bail!(Index, "select() cannot be applied to a 0-dim tensor.");
        }
        let d = wrap_dim(dim, self.rank())?;
        let size = self.dims()[d] as isize;
        if index < -size || index >= size {
            bail!(Index, "index {index} is out of bounds for dimension {d} with size {size}");
        }
        let i = if index < 0 { index + size } else { index } as usize;
        let out = self.with_layout(self.layout().select(d, i));
        self.scatter_view_ad("SelectBackward0", out, move |t| t.select(d as isize, i as isize))
    }

    /// Merges dims `start..=end` into one (`t.flatten(start_dim, end_dim)`); a view when possible.
    pub fn flatten(&self, start_dim: isize, end_dim: isize) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::flatten", [self], {
            if self.rank() == 0 {
                return self.reshape([1]);
            }
            let s = wrap_dim(start_dim, self.rank())?;
            let e = wrap_dim(end_dim, self.rank())?;
            if s > e {
                bail!(Value, "flatten() has invalid args: start_dim cannot come after end_dim");
            }
            let mut dims: Vec<usize> = self.dims()[..s].to_vec();
            dims.push(self.dims()[s..=e].iter().product());
            dims.extend_from_slice(&self.dims()[e + 1..]);
            self.reshape(dims)
        })
    }

    /// Splits `dim` into `sizes` (`t.unflatten(dim, sizes)`, one size may be `-1`).
    pub fn unflatten(&self, dim: isize, sizes: impl Into<ViewShape>) -> Result<Tensor> {
        if self.rank() == 0 {
            bail!(Index, "unflatten: Dimension specified as {dim} but tensor has no dimensions");
        }
        let d = wrap_dim(dim, self.rank())?;
        let inner = sizes.into().infer(self.dims()[d], "unflatten")?;
        let mut dims: Vec<usize> = self.dims()[..d].to_vec();
        dims.extend_from_slice(inner.dims());
        dims.extend_from_slice(&self.dims()[d + 1..]);
        self.view(dims)
    }

    /// Sliding windows of `size` every `step` along `dim`, as a new last dim (`t.unfold`).
    pub fn unfold(&self, dim: isize, size: usize, step: usize) -> Result<Tensor> {
        let d = wrap_dim(dim, self.rank())?;
        let len = if self.rank() == 0 { 1 } else { self.dims()[d] };
        if size > len {
            bail!(Value, "maximum size for tensor at dimension {d} is {len} but size is {size}");
        }
        if step == 0 {
            bail!(Value, "step is {step} but must be > 0");
        }
        let out = self.with_layout(self.layout().unfold(d, size, step));
        let shape = self.shape().clone();
        self.view_ad("UnfoldBackward0", out, move |g| unfold_backward(g, &shape, d, size, step))
    }

    /// The diagonal of dims `d1`, `d2` with `offset` as a view, appended as the last dim
    /// (`torch.diagonal`).
    pub fn diagonal(&self, offset: isize, d1: isize, d2: isize) -> Result<Tensor> {
        let a = wrap_dim(d1, self.rank())?;
        let b = wrap_dim(d2, self.rank())?;
        if a == b {
            bail!(Value, "diagonal dimensions cannot be identical {d1}, {d2}");
        }
        let out = self.with_layout(self.layout().diagonal(offset, a, b));
        self.scatter_view_ad("DiagonalBackward0", out, move |t| t.diagonal(offset, a as isize, b as isize))
    }

    /// PyTorch-style basic indexing: `t.index(&idx![1.., .., None])` is `t[1:, :, None]`.
    /// Integers select (removing the dim), ranges slice, `...` expands, `None` inserts a dim.
    pub fn index(&self, indices: &[TensorIndex]) -> Result<Tensor> {
        let consumed =
            indices.iter().filter(|i| matches!(i, TensorIndex::Select(_) | TensorIndex::Slice(..))).count();
        let ellipses = indices.iter().filter(|i| **i == TensorIndex::Ellipsis).count();
        if ellipses > 1 {
            bail!(Index, "an index can only have a single ellipsis ('...')");
        }
        if consumed > self.rank() {
            bail!(Index, "too many indices for tensor of dimension {}", self.rank());
        }
        let mut t = self.clone();
        let mut dim = 0isize; // current dim in `t`
        for ix in indices {
            match ix {
                TensorIndex::Select(i) => t = t.select(dim, *i)?,
                TensorIndex::Slice(s, e, st) => {
                    t = t.slice(dim, *s, *e, *st)?;
                    dim += 1;
                }
                TensorIndex::Ellipsis => dim += (self.rank() - consumed) as isize,
                TensorIndex::NewAxis => {
                    t = t.unsqueeze(dim)?;
                    dim += 1;
                }
            }
        }
        Ok(t)
    }
}

/// The gradient of `t.unfold(d, size, step)` for a `t` of `shape` (PyTorch's
/// `unfold_backward`): each window's gradient added back at the window's place, so elements
/// in several windows (`step < size`) sum theirs and elements in none (a tail) get zero.
/// Recorded as `UnfoldBackwardBackward0`, whose gradient is `grad.unfold(d, size, step)`.
pub(crate) fn unfold_backward(
    g: &Tensor,
    shape: &Shape,
    d: usize,
    size: usize,
    step: usize,
) -> Result<Tensor> {
    if shape.rank() == 0 {
        return g.sum(); // the windows of a 0-d tensor: [t] or none
    }
    let rec = needs_grad(&[g]);
    let z = {
        let _g = paused(rec);
        let z = Tensor::zeros_on(shape.clone(), g.dtype(), g.device())?;
        let windows = g.dims()[d];
        if windows > 0 {
            let last = g.rank() as isize - 1;
            for e in 0..size {
                // element e of every window: positions e, e + step, ... of dim d
                let end = e + (windows - 1) * step + 1;
                z.slice(d as isize, Some(e as isize), Some(end as isize), step as isize)?
                    .add_(&g.select(last, e as isize)?)?;
            }
        }
        z
    };
    if !rec {
        return Ok(z);
    }
    record1("UnfoldBackwardBackward0", &[g], z, &[], move |_, gg| {
        Ok(vec![Some(gg[0].unfold(d as isize, size, step)?)])
    })
}

/// The gradient of a view that only regroups elements: reshaped back to the input's shape.
fn reshape_back(input: &Tensor) -> impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static {
    let shape = input.shape().clone();
    move |g| g.reshape(shape.dims())
}

impl Tensor {
    /// Records view `out` of `self`; `back` maps the view's gradient to `self`'s.
    fn view_ad(
        &self,
        name: &'static str,
        out: Tensor,
        back: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Result<Tensor> {
        let out = if needs_grad(&[self]) {
            record1(name, &[self], out, &[], move |_, g| Ok(vec![Some(back(&g[0])?)]))?
        } else {
            out
        };
        self.mark_view(&out);
        Ok(out)
    }

    /// Records view `out = view(self)` that picks some of `self`'s elements (narrow, slice,
    /// select, diagonal): the gradient is zeros of `self`'s shape with the view's gradient
    /// written through the same view.
    fn scatter_view_ad(
        &self,
        name: &'static str,
        out: Tensor,
        view: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Result<Tensor> {
        let out = if needs_grad(&[self]) {
            let shape = self.shape().clone();
            let view = std::sync::Arc::new(view);
            record1(name, &[self], out, &[], move |_, g| {
                Ok(vec![Some(view_scatter(&g[0], &shape, view.clone())?)])
            })?
        } else {
            out
        };
        self.mark_view(&out);
        Ok(out)
    }
}

pub(crate) type ViewFn = std::sync::Arc<dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync>;

/// Zeros of `shape` with `src` written into `view(zeros)` (PyTorch's `slice_scatter` family);
/// differentiable: the gradient of `src` is `view(grad)`.
pub(crate) fn view_scatter(src: &Tensor, shape: &Shape, view: ViewFn) -> Result<Tensor> {
    let rec = needs_grad(&[src]);
    let z = {
        let _g = paused(rec);
        let z = Tensor::zeros_on(shape.clone(), src.dtype(), src.device())?;
        view(&z)?.copy_(src)?;
        z
    };
    if !rec {
        return Ok(z);
    }
    record1("ViewScatterBackward0", &[src], z, &[], move |_, g| Ok(vec![Some(view(&g[0])?)]))
}

/// A view of contiguous `t` with an explicit layout (`offset` relative to `t`'s first
/// element): how the in-place machinery addresses a view's elements inside a gradient of its
/// base's shape. Recorded like any view that picks elements.
pub(crate) fn strided_view(t: &Tensor, shape: Shape, strides: DimVec, offset: usize) -> Result<Tensor> {
    let t = t.contiguous()?;
    let layout =
        Layout { shape: shape.clone(), strides: strides.clone(), offset: t.storage_offset() + offset };
    let out = t.with_layout(layout);
    t.scatter_view_ad("AsStridedBackward0", out, move |x| {
        strided_view(x, shape.clone(), strides.clone(), offset)
    })
}
