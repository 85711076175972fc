//! Strided layouts: how a tensor's shape maps onto its storage (sizes, strides, offset).
//!
//! Every view op is a pure function from one [`Layout`] to another; the storage is shared.

use crate::shape::{wrap_dim, DimVec, Shape};
use crate::{bail, Result};

/// Sizes, strides (in elements) and a storage offset (in elements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub(crate) shape: Shape,
    pub(crate) strides: DimVec,
    pub(crate) offset: usize,
}

impl Layout {
    /// A row-major layout for `shape` starting at `offset`.
    pub fn contiguous_at(shape: Shape, offset: usize) -> Layout {
        let strides = shape.contiguous_strides();
        Layout { shape, strides, offset }
    }

    /// A row-major layout for `shape` at offset 0.
    pub fn contiguous(shape: Shape) -> Layout {
        Self::contiguous_at(shape, 0)
    }

    /// The sizes.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }
    /// The sizes as a slice.
    pub fn dims(&self) -> &[usize] {
        &self.shape.0
    }
    /// The strides, in elements.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }
    /// The storage offset, in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// PyTorch's `is_contiguous`: row-major, ignoring strides of size-1 dims.
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for i in (0..self.strides.len()).rev() {
            let d = self.shape.0[i];
            if d == 0 {
                return true;
            }
            if d != 1 {
                if self.strides[i] != expected {
                    return false;
                }
                expected = expected.saturating_mul(d);
            }
        }
        true
    }

    /// One past the largest storage element this layout touches (0 when empty).
    pub fn storage_extent(&self) -> usize {
        if self.numel() == 0 {
            return self.offset;
        }
        self.offset + self.shape.0.iter().zip(&self.strides).map(|(&d, &s)| (d - 1) * s).sum::<usize>() + 1
    }

    /// Reorders dims (`permute`).
    pub fn permute(&self, dims: &[usize]) -> Layout {
        Layout {
            shape: Shape(dims.iter().map(|&d| self.shape.0[d]).collect()),
            strides: dims.iter().map(|&d| self.strides[d]).collect(),
            offset: self.offset,
        }
    }

    /// Swaps two (already wrapped) dims.
    pub fn transpose(&self, a: usize, b: usize) -> Layout {
        let mut l = self.clone();
        l.shape.0.swap(a, b);
        l.strides.swap(a, b);
        l
    }

    /// `narrow(dim, start, len)` with already checked bounds.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Layout {
        let mut l = self.clone();
        l.offset += start * self.strides[dim];
        l.shape.0[dim] = len;
        l
    }

    /// Elements `start, start+step, ...` below `end` along `dim` (bounds already clamped).
    pub fn slice(&self, dim: usize, start: usize, end: usize, step: usize) -> Layout {
        let mut l = self.clone();
        let len = if end > start { (end - start).div_ceil(step) } else { 0 };
        if len > 0 {
            l.offset += start * self.strides[dim];
        }
        l.shape.0[dim] = len;
        l.strides[dim] = self.strides[dim] * step;
        l
    }

    /// Removes `dim`, fixing it at `index`.
    pub fn select(&self, dim: usize, index: usize) -> Layout {
        let mut l = self.clone();
        l.offset += index * self.strides[dim];
        l.shape.0.remove(dim);
        l.strides.remove(dim);
        l
    }

    /// Inserts a size-1 dim at `dim` (already wrapped into `0..=rank`).
    pub fn unsqueeze(&self, dim: usize) -> Layout {
        let mut l = self.clone();
        let stride = if dim < self.strides.len() { self.strides[dim] * self.shape.0[dim] } else { 1 };
        l.shape.0.insert(dim, 1);
        l.strides.insert(dim, stride);
        l
    }

    /// Broadcasts to `target` (PyTorch's `expand`): size-1 dims get stride 0.
    pub fn expand(&self, target: &[usize], op: &str) -> Result<Layout> {
        let n = target.len();
        let r = self.shape.rank();
        if n < r {
            bail!(
                Shape,
                "{op}: the number of sizes provided ({n}) must be greater or equal to the number of dimensions in the tensor ({r})"
            );
        }
        let mut strides: DimVec = smallvec::smallvec![0; n];
        let mut shape: DimVec = smallvec::smallvec![0; n];
        for i in 0..n {
            let t = target[i];
            if i < n - r {
                shape[i] = t;
                strides[i] = 0;
                continue;
            }
            let j = i - (n - r);
            let d = self.shape.0[j];
            if d == t {
                shape[i] = d;
                strides[i] = self.strides[j];
            } else if d == 1 {
                shape[i] = t;
                strides[i] = 0;
            } else {
                bail!(
                    Shape,
                    "{op}: The expanded size of the tensor ({t}) must match the existing size ({d}) at non-singleton dimension {i}.  Target sizes: {:?}.  Tensor sizes: {:?}",
                    target,
                    self.dims()
                );
            }
        }
        let shape = Shape(shape);
        if shape.checked_numel().is_none() {
            bail!(
                Value,
                "{op}: the expanded size {:?} has more elements than fit in memory (the product of its sizes overflows)",
                target
            );
        }
        Ok(Layout { shape, strides, offset: self.offset })
    }

    /// The strides a view of `new_shape` would need, or `None` when the existing strides do
    /// not allow a view (PyTorch's `computeStride`).
    pub fn view_strides(&self, new_shape: &[usize]) -> Option<DimVec> {
        let old_shape = &self.shape.0;
        let old_strides = &self.strides;
        let numel = self.numel();
        if numel == 0 || old_shape.is_empty() {
            return Some(Shape(new_shape.iter().copied().collect()).contiguous_strides());
        }
        let mut new_strides: DimVec = smallvec::smallvec![0; new_shape.len()];
        let mut view_d = new_shape.len() as isize - 1;
        let mut chunk_base_stride = *old_strides.last().unwrap();
        let mut tensor_numel = 1usize;
        let mut view_numel = 1usize;
        for tensor_d in (0..old_shape.len()).rev() {
            tensor_numel *= old_shape[tensor_d];
            if tensor_d == 0
                || (old_shape[tensor_d - 1] != 1
                    && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)
            {
                while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                    new_strides[view_d as usize] = view_numel * chunk_base_stride;
                    view_numel *= new_shape[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if tensor_d > 0 {
                    chunk_base_stride = old_strides[tensor_d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(new_strides)
    }

    /// The diagonal of dims `d1`, `d2` with `offset` (already wrapped, d1 != d2).
    pub fn diagonal(&self, offset: isize, d1: usize, d2: usize) -> Layout {
        let (n1, n2, off) = (self.shape.0[d1] as i128, self.shape.0[d2] as i128, offset as i128);
        // An empty diagonal (the offset is past the matrix) starts at the base, as in PyTorch.
        let (len, start) = if offset >= 0 {
            let len = n1.min(n2 - off).max(0) as usize;
            (len, if len == 0 { 0 } else { offset as usize * self.strides[d2] })
        } else {
            let len = (n1 + off).min(n2).max(0) as usize;
            (len, if len == 0 { 0 } else { offset.unsigned_abs() * self.strides[d1] })
        };
        let mut shape = DimVec::new();
        let mut strides = DimVec::new();
        for i in 0..self.shape.rank() {
            if i != d1 && i != d2 {
                shape.push(self.shape.0[i]);
                strides.push(self.strides[i]);
            }
        }
        shape.push(len);
        strides.push(self.strides[d1] + self.strides[d2]);
        Layout {
            shape: Shape(shape),
            strides,
            offset: if len > 0 { self.offset + start } else { self.offset },
        }
    }

    /// `unfold(dim, size, step)`: windows of `size` along `dim` become a new last dim.
    pub fn unfold(&self, dim: usize, size: usize, step: usize) -> Layout {
        let mut l = self.clone();
        let d = self.shape.0.get(dim).copied().unwrap_or(1);
        let st = self.strides.get(dim).copied().unwrap_or(1);
        if !self.shape.0.is_empty() {
            l.shape.0[dim] = (d - size) / step + 1;
            l.strides[dim] = st * step;
        }
        l.shape.0.push(size);
        l.strides.push(st);
        l
    }

    /// Wraps `dim` for this layout's rank.
    pub fn wrap(&self, dim: isize) -> Result<usize> {
        wrap_dim(dim, self.shape.rank())
    }
}
