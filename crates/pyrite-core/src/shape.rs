//! Shapes and dims: [`Shape`], conversions from arrays, slices, tuples and vecs, and PyTorch's
//! negative-dim wrapping.

use crate::{bail, Result};
use smallvec::SmallVec;
use std::fmt;

/// Inline storage for dims: tensors rarely have more than six.
pub type DimVec = SmallVec<[usize; 6]>;

/// A tensor's sizes (`torch.Size`).
#[derive(PartialEq, Eq, Hash, Default)]
pub struct Shape(pub(crate) DimVec);

impl Clone for Shape {
    fn clone(&self) -> Shape {
        Shape(dimvec(&self.0))
    }
}

/// `dims` as a [`DimVec`]. Shapes are copied on every op (a result's shape, its strides), so
/// the common case of at most six dims is a fixed-size copy: no call to `memcpy`.
#[inline]
pub(crate) fn dimvec(dims: &[usize]) -> DimVec {
    if dims.len() > 6 {
        return DimVec::from_slice(dims);
    }
    let buf: [usize; 6] = std::array::from_fn(|i| dims.get(i).copied().unwrap_or(0));
    DimVec::from_buf_and_len(buf, dims.len())
}

/// Whether two shapes are equal, compared inline (a slice `==` calls `memcmp`, whose call
/// costs more than comparing the few dims of a tensor).
#[inline]
pub(crate) fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(true, |eq, (x, y)| eq & (x == y))
}

impl Shape {
    /// The sizes as a slice.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }
    /// Number of dims.
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    /// Number of elements (1 for a 0-d shape); `usize::MAX` when the product overflows (no
    /// buffer that large can be allocated: see [`Shape::checked_numel`]).
    pub fn numel(&self) -> usize {
        self.checked_numel().unwrap_or(usize::MAX)
    }
    /// Number of elements, `None` when the product of the sizes overflows `usize`.
    pub fn checked_numel(&self) -> Option<usize> {
        if self.0.contains(&0) {
            return Some(0);
        }
        self.0.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }
    /// Row-major (C-contiguous) strides for this shape.
    pub fn contiguous_strides(&self) -> DimVec {
        fn fill(dims: &[usize], out: &mut [usize]) {
            let mut acc = 1usize;
            for i in (0..dims.len()).rev() {
                out[i] = acc;
                acc = acc.saturating_mul(dims[i].max(1));
            }
        }
        let d = &self.0;
        if d.len() > 6 {
            let mut s: DimVec = smallvec::smallvec![0; d.len()];
            fill(d, &mut s);
            return s;
        }
        // At most six dims: a fixed array, no SmallVec growth on the path of every op.
        let mut s = [0usize; 6];
        fill(d, &mut s);
        DimVec::from_buf_and_len(s, d.len())
    }
    /// Wraps a possibly negative dim into `0..rank` (PyTorch's `maybe_wrap_dim`).
    pub fn dim(&self, dim: isize) -> Result<usize> {
        wrap_dim(dim, self.rank())
    }
}

/// Wraps a possibly negative `dim` for a tensor of `rank` dims; errors like PyTorch's
/// "Dimension out of range (expected to be in range of [-2, 1], but got 2)".
pub fn wrap_dim(dim: isize, rank: usize) -> Result<usize> {
    let r = rank.max(1) as isize; // 0-d tensors accept dims -1 and 0
    if dim < -r || dim >= r {
        bail!(
            Index,
            "Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -r,
            r - 1
        );
    }
    Ok(if dim < 0 { (dim + r) as usize } else { dim as usize })
}

/// Wraps a list of dims and checks that none repeats.
pub fn wrap_dims(dims: &[isize], rank: usize, op: &str) -> Result<DimVec> {
    let mut out = DimVec::new();
    for &d in dims {
        let w = wrap_dim(d, rank)?;
        if out.contains(&w) {
            bail!(Value, "{op}: dim {w} appears multiple times in the list of dims");
        }
        out.push(w);
    }
    Ok(out)
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &self.0[..])
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Self {
        Shape(d.iter().copied().collect())
    }
}
impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Self {
        Shape(d.into_iter().collect())
    }
}
impl From<&Vec<usize>> for Shape {
    fn from(d: &Vec<usize>) -> Self {
        Shape(d.iter().copied().collect())
    }
}
impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Self {
        Shape(d.iter().copied().collect())
    }
}
impl<const N: usize> From<&[usize; N]> for Shape {
    fn from(d: &[usize; N]) -> Self {
        Shape(d.iter().copied().collect())
    }
}
impl From<&Shape> for Shape {
    fn from(s: &Shape) -> Self {
        s.clone()
    }
}
impl From<DimVec> for Shape {
    fn from(d: DimVec) -> Self {
        Shape(d)
    }
}
impl From<()> for Shape {
    fn from(_: ()) -> Self {
        Shape(DimVec::new())
    }
}
impl From<usize> for Shape {
    fn from(d: usize) -> Self {
        Shape(smallvec::smallvec![d])
    }
}
impl From<(usize,)> for Shape {
    fn from(d: (usize,)) -> Self {
        Shape(smallvec::smallvec![d.0])
    }
}
impl From<(usize, usize)> for Shape {
    fn from(d: (usize, usize)) -> Self {
        Shape(smallvec::smallvec![d.0, d.1])
    }
}
impl From<(usize, usize, usize)> for Shape {
    fn from(d: (usize, usize, usize)) -> Self {
        Shape(smallvec::smallvec![d.0, d.1, d.2])
    }
}
impl From<(usize, usize, usize, usize)> for Shape {
    fn from(d: (usize, usize, usize, usize)) -> Self {
        Shape(smallvec::smallvec![d.0, d.1, d.2, d.3])
    }
}
impl From<(usize, usize, usize, usize, usize)> for Shape {
    fn from(d: (usize, usize, usize, usize, usize)) -> Self {
        Shape(smallvec::smallvec![d.0, d.1, d.2, d.3, d.4])
    }
}

/// PyTorch's broadcasting rule: the shape both `a` and `b` expand to.
pub fn broadcast_shapes(a: &[usize], b: &[usize], op: &str) -> Result<Shape> {
    if same_dims(a, b) {
        return Ok(Shape(dimvec(a)));
    }
    let n = a.len().max(b.len());
    let mut out: DimVec = smallvec::smallvec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            bail!(
                Shape,
                "{op}: The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i}"
            );
        };
    }
    Ok(Shape(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_comparisons_of_dims_hold_for_every_rank() {
        for rank in 0..=9 {
            let dims: Vec<usize> = (0..rank).map(|i| i * 3 + 1).collect();
            let s = Shape(DimVec::from_slice(&dims));
            assert_eq!(s.clone().dims(), &dims[..], "rank {rank}");
            assert!(same_dims(&dims, s.dims()));
            let mut other = dims.clone();
            other.push(1);
            assert!(!same_dims(&dims, &other), "rank {rank}: a longer shape differs");
            if rank > 0 {
                other.pop();
                other[rank - 1] += 1;
                assert!(!same_dims(&dims, &other), "rank {rank}: the last dim differs");
                other[rank - 1] -= 1;
                other[0] += 1;
                assert!(!same_dims(&dims, &other), "rank {rank}: the first dim differs");
            }
            let strides = s.contiguous_strides();
            let mut want = vec![1usize; rank];
            for i in (0..rank.saturating_sub(1)).rev() {
                want[i] = want[i + 1] * dims[i + 1];
            }
            assert_eq!(&strides[..], &want[..], "rank {rank}");
        }
    }
}
