//! The strided iteration engine shared by CPU kernels.
//!
//! A kernel describes N operands that walk the same index space (`shape`), each with its own
//! strides and offset (broadcast operands have stride 0). [`Strided`] merges dims that are
//! contiguous for every operand and hands the kernel runs of elements along the innermost
//! dim: `f(linear_index, offsets, len, inner_strides)`. Contiguous operands become one run.

use crate::shape::DimVec;

/// N operands over one index space, with coalesced dims.
pub(crate) struct Strided<const N: usize> {
    shape: DimVec,
    strides: [DimVec; N],
    offsets: [usize; N],
}

impl<const N: usize> Strided<N> {
    /// Operands with `strides[k]` and `offsets[k]` over `shape`.
    pub(crate) fn new(shape: &[usize], strides: [&[usize]; N], offsets: [usize; N]) -> Self {
        let mut sh = DimVec::new();
        let mut st: [DimVec; N] = std::array::from_fn(|_| DimVec::new());
        for d in 0..shape.len() {
            if shape[d] == 1 {
                continue;
            }
            // Merge with the previous kept dim when every operand is contiguous across both.
            if let Some(&last) = sh.last() {
                let mergeable =
                    (0..N).all(|k| Some(*st[k].last().unwrap()) == strides[k][d].checked_mul(shape[d]));
                if mergeable {
                    let n = sh.len() - 1;
                    sh[n] = last.saturating_mul(shape[d]);
                    for k in 0..N {
                        let m = st[k].len() - 1;
                        st[k][m] = strides[k][d];
                    }
                    continue;
                }
            }
            sh.push(shape[d]);
            for k in 0..N {
                st[k].push(strides[k][d]);
            }
        }
        if shape.contains(&0) {
            sh.clear();
            sh.push(0);
            for s in st.iter_mut() {
                s.clear();
                s.push(1);
            }
        }
        Strided { shape: sh, strides: st, offsets }
    }

    /// Visits elements `start..end` (row-major linear indices) as runs along the innermost dim.
    pub(crate) fn for_range(
        &self,
        start: usize,
        end: usize,
        mut f: impl FnMut(usize, [usize; N], usize, [usize; N]),
    ) {
        if start >= end {
            return;
        }
        let r = self.shape.len();
        if r == 0 {
            f(0, self.offsets, 1, [0; N]);
            return;
        }
        let inner = self.shape[r - 1];
        let inner_st: [usize; N] = std::array::from_fn(|k| self.strides[k][r - 1]);
        // Multi-index of the outer dims for `start`.
        let mut idx: DimVec = smallvec::smallvec![0; r - 1];
        let mut outer = start / inner;
        let mut p = start % inner;
        for d in (0..r - 1).rev() {
            idx[d] = outer % self.shape[d];
            outer /= self.shape[d];
        }
        let mut base: [usize; N] = std::array::from_fn(|k| {
            self.offsets[k] + (0..r - 1).map(|d| idx[d] * self.strides[k][d]).sum::<usize>()
        });
        let mut cur = start;
        while cur < end {
            let len = (inner - p).min(end - cur);
            let offs: [usize; N] = std::array::from_fn(|k| base[k] + p * inner_st[k]);
            f(cur, offs, len, inner_st);
            cur += len;
            p = 0;
            // Advance the outer odometer.
            let mut d = r - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                for (b, st) in base.iter_mut().zip(&self.strides) {
                    *b += st[d];
                }
                if idx[d] < self.shape[d] {
                    break;
                }
                for (b, st) in base.iter_mut().zip(&self.strides) {
                    *b -= st[d] * self.shape[d];
                }
                idx[d] = 0;
            }
        }
    }
}
