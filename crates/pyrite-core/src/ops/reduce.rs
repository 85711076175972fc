//! Reductions: sum, mean, prod, nansum, nanmean, max/min (with indices), amax/amin,
//! argmax/argmin, var/std (and `var_mean`/`std_mean`), vector norms, logsumexp, all/any,
//! count_nonzero, and `sum_to_size` (reducing a broadcast tensor back to a shape).
//!
//! All of them run on one small engine. A [`Plan`] arranges the input as a contiguous
//! `(outer, k, inner)` block, where output element `(o, i)` reduces the `k` elements
//! `x[o, 0..k, i]`: a contiguous input whose reduced dims are adjacent is used in place, any
//! other input is permuted so the reduced dims come last and copied once. Rows (`inner == 1`)
//! are reduced with 32 independent accumulators (vectorisable) in leaves of 1024 elements
//! whose results are combined pairwise, so f32 sums stay accurate; columns (`inner > 1`) are
//! accumulated a whole row segment at a time, in runs of 64 rows combined pairwise. Work is
//! split by output elements (and, for very long rows, by fixed-size blocks whose partial
//! results are combined in a fixed order), so results never depend on the number of threads.
//! The kernels run inside [`simd`], which compiles them for AVX-512 and AVX2 as well.

use super::{reduce_cuda, SendPtr};
use crate::alloc::CpuBuffer;
use crate::autograd::record::{needs_grad, paused, record1, Save};
use crate::cuda::Reduction;
use crate::shape::{wrap_dim, wrap_dims, DimVec, Shape};
use crate::threads::parallel_for;
use crate::{bail, dispatch_all, dispatch_float, get_default_dtype, DType, Element, Result, Tensor};
use half::{bf16, f16};
use std::ops::{Add, Div, Mul, Neg, Sub};

// ------------------------------------------------------------------ numeric helpers

/// A compute type for floating-point reductions: f32 (for f16, bf16, f32) or f64.
pub(crate) trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + Default
    + std::fmt::Debug
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const INF: Self;
    const NEG_INF: Self;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn abs_(self) -> Self;
    fn sqrt_(self) -> Self;
    fn exp_(self) -> Self;
    fn ln_(self) -> Self;
    fn powf_(self, p: Self) -> Self;
    fn is_nan_(self) -> bool;
    fn is_infinite_(self) -> bool;
}

macro_rules! real_impl {
    ($t:ty, $exp:expr) => {
        impl Real for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const INF: $t = <$t>::INFINITY;
            const NEG_INF: $t = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn from_f64(v: f64) -> $t {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn abs_(self) -> $t {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn sqrt_(self) -> $t {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn exp_(self) -> $t {
                $exp(self)
            }
            #[inline(always)]
            fn ln_(self) -> $t {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn powf_(self, p: $t) -> $t {
                <$t>::powf(self, p)
            }
            #[inline(always)]
            fn is_nan_(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn is_infinite_(self) -> bool {
                <$t>::is_infinite(self)
            }
        }
    };
}
real_impl!(f32, crate::simd::expf);
real_impl!(f64, f64::exp);

/// A floating-point element and the type it is computed in (f16 and bf16 compute in f32).
pub(crate) trait FloatAcc: Element {
    type R: Real;
    fn to_r(self) -> Self::R;
    fn from_r(r: Self::R) -> Self;
}

impl FloatAcc for f32 {
    type R = f32;
    #[inline(always)]
    fn to_r(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_r(r: f32) -> f32 {
        r
    }
}
impl FloatAcc for f64 {
    type R = f64;
    #[inline(always)]
    fn to_r(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_r(r: f64) -> f64 {
        r
    }
}
impl FloatAcc for f16 {
    type R = f32;
    #[inline(always)]
    fn to_r(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_r(r: f32) -> f16 {
        f16::from_f32(r)
    }
}
impl FloatAcc for bf16 {
    type R = f32;
    #[inline(always)]
    fn to_r(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_r(r: f32) -> bf16 {
        bf16::from_f32(r)
    }
}

/// The smallest and largest value of an element type (infinities for floats): the identities
/// of max and min.
pub(crate) trait Bounded: Element {
    const LOWEST: Self;
    const HIGHEST: Self;
}
macro_rules! bounded {
    ($($t:ty: $lo:expr, $hi:expr;)*) => {$(
        impl Bounded for $t {
            const LOWEST: $t = $lo;
            const HIGHEST: $t = $hi;
        }
    )*};
}
bounded! {
    bool: false, true;
    u8: u8::MIN, u8::MAX;
    i32: i32::MIN, i32::MAX;
    i64: i64::MIN, i64::MAX;
    f16: f16::NEG_INFINITY, f16::INFINITY;
    bf16: bf16::NEG_INFINITY, bf16::INFINITY;
    f32: f32::NEG_INFINITY, f32::INFINITY;
    f64: f64::NEG_INFINITY, f64::INFINITY;
}

/// The larger of two values; NaN wins (PyTorch's max propagates NaN).
#[inline(always)]
#[allow(clippy::eq_op)]
pub(crate) fn max_nan<T: PartialOrd + Copy>(a: T, x: T) -> T {
    if x > a || x != x {
        x
    } else {
        a
    }
}

/// The smaller of two values; NaN wins.
#[inline(always)]
#[allow(clippy::eq_op)]
pub(crate) fn min_nan<T: PartialOrd + Copy>(a: T, x: T) -> T {
    if x < a || x != x {
        x
    } else {
        a
    }
}

/// Runs `$body` with `$T` bound to the Rust type of an integer or bool `$dtype`.
macro_rules! dispatch_int {
    ($dtype:expr, $T:ident => $body:expr, _ => $other:expr) => {
        match $dtype {
            DType::Bool => {
                type $T = bool;
                $body
            }
            DType::U8 => {
                type $T = u8;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            _ => $other,
        }
    };
}
pub(crate) use dispatch_int;

// ------------------------------------------------------------------ parallel output helpers

/// Work below which kernels stay on one thread, in element visits.
const WORK_GRAIN: usize = super::GRAIN;

/// Items per thread so that each thread gets at least `WORK_GRAIN` element visits.
#[inline]
pub(crate) fn grain_for(cost_per_item: usize) -> usize {
    (WORK_GRAIN / cost_per_item.max(1)).max(1)
}

/// Fills `out` in parallel: `f(start, chunk)` writes `out[start..start + chunk.len()]`.
pub(crate) fn par_fill<X: Send>(out: &mut [X], cost_per_item: usize, f: impl Fn(usize, &mut [X]) + Sync) {
    let n = out.len();
    let p = SendPtr(out.as_mut_ptr());
    parallel_for(n, grain_for(cost_per_item), |a, b| {
        let p = &p;
        // SAFETY: parallel_for hands out disjoint ranges within 0..n.
        let s = unsafe { std::slice::from_raw_parts_mut(p.0.add(a), b - a) };
        f(a, s)
    });
}

/// Like [`par_fill`] for two outputs of the same length.
pub(crate) fn par_fill2<X: Send, Y: Send>(
    o1: &mut [X],
    o2: &mut [Y],
    cost_per_item: usize,
    f: impl Fn(usize, &mut [X], &mut [Y]) + Sync,
) {
    let n = o1.len();
    debug_assert_eq!(n, o2.len());
    let (p1, p2) = (SendPtr(o1.as_mut_ptr()), SendPtr(o2.as_mut_ptr()));
    parallel_for(n, grain_for(cost_per_item), |a, b| {
        let (p1, p2) = (&p1, &p2);
        // SAFETY: parallel_for hands out disjoint ranges within 0..n.
        let (s1, s2) = unsafe {
            (
                std::slice::from_raw_parts_mut(p1.0.add(a), b - a),
                std::slice::from_raw_parts_mut(p2.0.add(a), b - a),
            )
        };
        f(a, s1, s2)
    });
}

/// A fresh contiguous tensor of `shape` filled in parallel by `f` (see [`par_fill`]).
pub(crate) fn fill_out<R: Element>(
    shape: Shape,
    cost_per_item: usize,
    f: impl Fn(usize, &mut [R]) + Sync,
) -> Result<Tensor> {
    let mut buf = CpuBuffer::for_shape(&shape, std::mem::size_of::<R>())?;
    par_fill(buf.as_mut_slice::<R>(), cost_per_item, f);
    Ok(Tensor::from_cpu_buffer(buf, shape, R::DTYPE))
}

/// Two fresh contiguous tensors of `shape` filled in parallel by `f` (values and indices).
pub(crate) fn fill_out2<R1: Element, R2: Element>(
    shape: Shape,
    cost_per_item: usize,
    f: impl Fn(usize, &mut [R1], &mut [R2]) + Sync,
) -> Result<(Tensor, Tensor)> {
    let mut b1 = CpuBuffer::for_shape(&shape, std::mem::size_of::<R1>())?;
    let mut b2 = CpuBuffer::for_shape(&shape, std::mem::size_of::<R2>())?;
    par_fill2(b1.as_mut_slice::<R1>(), b2.as_mut_slice::<R2>(), cost_per_item, f);
    Ok((Tensor::from_cpu_buffer(b1, shape.clone(), R1::DTYPE), Tensor::from_cpu_buffer(b2, shape, R2::DTYPE)))
}

/// Runs `f` compiled for the widest vector unit the CPU has (AVX-512, AVX2+FMA, or the
/// baseline), so the lane loops of the kernels it inlines vectorise fully. The kernels spell
/// out their order of operations (and Rust never contracts to FMA), so every variant computes
/// bit-identical results.
#[inline(always)]
pub(crate) fn simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports the enabled features.
            return unsafe { simd_avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: as above.
            return unsafe { simd_avx2(f) };
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn simd_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn simd_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

// ------------------------------------------------------------------ the plan

/// Which dims to reduce: a mask over the input's dims. An empty list of dims means every dim
/// for most reductions (`x.sum(dim=[])`), but no dim for `all`/`any` (as in PyTorch).
pub(crate) fn reduce_mask(rank: usize, dims: &[isize], empty_means_all: bool, op: &str) -> Result<Vec<bool>> {
    let ds = wrap_dims(dims, rank, op)?;
    let mut mask = vec![dims.is_empty() && empty_means_all; rank];
    for d in ds {
        if d < rank {
            mask[d] = true;
        }
    }
    Ok(mask)
}

/// The input of a reduction arranged as a contiguous `(outer, k, inner)` block: output
/// element `o * inner + i` reduces `src[(o * k + j) * inner + i]` for `j` in `0..k`.
pub(crate) struct Plan {
    /// Contiguous (in the row-major sense) source elements.
    pub(crate) src: Tensor,
    pub(crate) outer: usize,
    pub(crate) k: usize,
    pub(crate) inner: usize,
    /// The output's shape (with size-1 reduced dims when `keepdim`).
    pub(crate) out_shape: Shape,
}

/// A reduction run by the CUDA backend when `x` is on a GPU, else planned for the CPU and
/// run by `cpu`.
fn on_device(
    x: &Tensor,
    mask: &[bool],
    keepdim: bool,
    r: crate::cuda::Reduction,
    cpu: impl FnOnce(&Plan) -> Result<Tensor>,
) -> Result<Tensor> {
    if x.device().is_cuda() {
        return Ok(crate::cuda::reduce(x, mask, keepdim, r)?.0);
    }
    cpu(&Plan::new(x, mask, keepdim)?)
}

/// max/min with indices (and argmax/argmin) on either device.
fn on_device_indexed(x: &Tensor, mask: &[bool], keepdim: bool, max: bool) -> Result<(Tensor, Tensor)> {
    if x.device().is_cuda() {
        let r = if max { Reduction::ArgMax } else { Reduction::ArgMin };
        let (v, i) = crate::cuda::reduce(x, mask, keepdim, r)?;
        return Ok((v, i.expect("indices of an indexed reduction")));
    }
    extreme_index_plan(&Plan::new(x, mask, keepdim)?.rows()?, max)
}

impl Plan {
    /// Plans reducing the dims of `x` selected by `mask`.
    pub(crate) fn new(x: &Tensor, mask: &[bool], keepdim: bool) -> Result<Plan> {
        x.device().check_cpu_kernel()?;
        let dims = x.dims();
        let mut out = DimVec::new();
        let (mut m, mut k) = (1usize, 1usize);
        for (d, &n) in dims.iter().enumerate() {
            if mask[d] {
                k *= n;
                if keepdim {
                    out.push(1);
                }
            } else {
                m *= n;
                out.push(n);
            }
        }
        let out_shape = Shape(out);
        if x.numel() == 0 {
            return Ok(Plan { src: x.clone(), outer: m, k, inner: 1, out_shape });
        }
        if x.is_contiguous() {
            // Reduced dims adjacent (ignoring size-1 dims): use the input in place.
            let (mut o, mut kk, mut i, mut phase) = (1usize, 1usize, 1usize, 0u8);
            let mut ok = true;
            for (d, &n) in dims.iter().enumerate() {
                if n == 1 {
                    continue;
                }
                if mask[d] {
                    if phase == 2 {
                        ok = false;
                        break;
                    }
                    phase = 1;
                    kk *= n;
                } else if phase == 0 {
                    o *= n;
                } else {
                    phase = 2;
                    i *= n;
                }
            }
            if ok {
                return Ok(Plan { src: x.clone(), outer: o, k: kk, inner: i, out_shape });
            }
        }
        let perm: Vec<usize> =
            (0..dims.len()).filter(|&d| !mask[d]).chain((0..dims.len()).filter(|&d| mask[d])).collect();
        let p = x.with_layout(x.layout().permute(&perm));
        let src = if p.is_contiguous() { p } else { p.deep_clone()? };
        Ok(Plan { src, outer: m, k, inner: 1, out_shape })
    }

    /// Number of output elements.
    pub(crate) fn m(&self) -> usize {
        self.outer * self.inner
    }

    /// The same plan with `inner == 1` (copies the source when needed), for kernels that
    /// only reduce contiguous rows.
    pub(crate) fn rows(self) -> Result<Plan> {
        if self.inner == 1 {
            return Ok(self);
        }
        let (o, k, i) = (self.outer, self.k, self.inner);
        let src = self.src.reshape([o, k, i])?.permute(&[0, 2, 1])?.deep_clone()?;
        Ok(Plan { src, outer: o * i, k, inner: 1, out_shape: self.out_shape })
    }
}

// ------------------------------------------------------------------ the fold engine

/// Accumulators per row: independent, so the loop vectorises and errors stay small.
const LANES: usize = 32;
/// Rows are folded in leaves of this many elements, combined pairwise.
const BASE: usize = 32 * LANES;
/// Rows longer than this are reduced as fixed blocks, in parallel, then combined.
const BLOCK: usize = 1 << 15;
/// Most columns handled together by the column kernel (its accumulators stay in L1).
pub(crate) const CW: usize = 2048;

/// How many of the `inner` lines of each of `outer` blocks to walk side by side in line-wise
/// kernels (scans, softmax over a middle dim): at most [`CW`], and narrower when there are
/// few blocks, so that threads get several pieces. Lines are independent, so the width never
/// changes results.
pub(crate) fn line_width(outer: usize, inner: usize) -> usize {
    let w = if outer >= 8 { inner } else { inner.div_ceil(8 / outer.max(1)).next_multiple_of(16) };
    w.clamp(1, CW).min(inner.max(1))
}
/// Columns are folded in runs of this many rows, combined pairwise.
const COLBASE: usize = 64;

/// A reduction as a monoid: `init` is the identity, `step` folds in one element, `merge`
/// combines two partial results.
pub(crate) struct Fold<A, S, M> {
    pub(crate) init: A,
    pub(crate) step: S,
    pub(crate) merge: M,
}

impl<A: Copy + Send + Sync, S, M: Fn(A, A) -> A + Sync> Fold<A, S, M> {
    /// Folds at most [`BASE`] elements: 32 lanes, combined pairwise, then the remainder.
    #[inline(always)]
    fn leaf<T: Copy>(&self, xs: &[T]) -> A
    where
        S: Fn(A, T) -> A + Sync,
    {
        let mut acc = [self.init; LANES];
        let mut chunks = xs.chunks_exact(LANES);
        for c in &mut chunks {
            for l in 0..LANES {
                acc[l] = (self.step)(acc[l], c[l]);
            }
        }
        let mut a = self.combine_lanes(acc);
        for &x in chunks.remainder() {
            a = (self.step)(a, x);
        }
        a
    }

    /// Combines the lanes pairwise. Kept out of line: inlined, the reduction tree makes LLVM
    /// vectorise the lane loop two lanes at a time instead of a whole register.
    #[inline(never)]
    fn combine_lanes(&self, mut acc: [A; LANES]) -> A {
        let mut w = LANES;
        while w > 1 {
            w /= 2;
            for l in 0..w {
                acc[l] = (self.merge)(acc[l], acc[l + w]);
            }
        }
        acc[0]
    }

    /// Folds one row: leaves of [`BASE`] elements combined pairwise (a binary-counter
    /// cascade, so the code stays loop-only and inlines into the vectorised callers).
    #[inline(always)]
    pub(crate) fn row<T: Copy>(&self, xs: &[T]) -> A
    where
        S: Fn(A, T) -> A + Sync,
    {
        if xs.len() <= BASE {
            return self.leaf(xs);
        }
        let mut stack = [(self.init, 0u32); 48];
        let mut sp = 0;
        for c in xs.chunks(BASE) {
            let (mut p, mut lvl) = (self.leaf(c), 0);
            while sp > 0 && stack[sp - 1].1 == lvl {
                sp -= 1;
                p = (self.merge)(stack[sp].0, p);
                lvl += 1;
            }
            stack[sp] = (p, lvl);
            sp += 1;
        }
        let mut a = stack[sp - 1].0;
        for &(p, _) in stack[..sp - 1].iter().rev() {
            a = (self.merge)(p, a);
        }
        a
    }

    /// Combines partial results pairwise.
    fn merge_all(&self, parts: &[A]) -> A {
        match parts.len() {
            0 => self.init,
            1 => parts[0],
            n => (self.merge)(self.merge_all(&parts[..n / 2]), self.merge_all(&parts[n / 2..])),
        }
    }

    /// Folds rows `k0..k1` of columns `i0..i0 + acc.len()` of a `(k, inner)` block into `acc`.
    #[inline(always)]
    fn col_leaf<T: Copy>(&self, blk: &[T], inner: usize, i0: usize, (k0, k1): (usize, usize), acc: &mut [A])
    where
        S: Fn(A, T) -> A + Sync,
    {
        let n = acc.len();
        acc.fill(self.init);
        for k in k0..k1 {
            let row = &blk[k * inner + i0..k * inner + i0 + n];
            for (a, &x) in acc.iter_mut().zip(row) {
                *a = (self.step)(*a, x);
            }
        }
    }

    /// Folds all `k` rows of columns `i0..i0 + acc.len()` of a `(k, inner)` block into
    /// `acc`: runs of [`COLBASE`] rows combined pairwise, as in [`Fold::row`].
    #[inline(always)]
    fn cols<T: Copy>(&self, blk: &[T], inner: usize, i0: usize, k: usize, acc: &mut [A])
    where
        S: Fn(A, T) -> A + Sync,
    {
        if k <= COLBASE {
            return self.col_leaf(blk, inner, i0, (0, k), acc);
        }
        let n = acc.len();
        let mut stack: Vec<(Vec<A>, u32)> = Vec::new();
        let mut pool: Vec<Vec<A>> = Vec::new();
        for k0 in (0..k).step_by(COLBASE) {
            let mut cur = pool.pop().unwrap_or_else(|| vec![self.init; n]);
            self.col_leaf(blk, inner, i0, (k0, (k0 + COLBASE).min(k)), &mut cur);
            let mut lvl = 0;
            while stack.last().is_some_and(|t| t.1 == lvl) {
                let (t, _) = stack.pop().unwrap();
                for (c, &x) in cur.iter_mut().zip(&t) {
                    *c = (self.merge)(x, *c);
                }
                pool.push(t);
                lvl += 1;
            }
            stack.push((cur, lvl));
        }
        let (last, _) = stack.pop().unwrap();
        acc.copy_from_slice(&last);
        for (t, _) in stack.iter().rev() {
            for (a, &x) in acc.iter_mut().zip(t) {
                *a = (self.merge)(x, *a);
            }
        }
    }
}

/// Runs a fold over a plan: `finish` turns each output's accumulator into the result.
pub(crate) fn fold<T: Element, A: Copy + Send + Sync, R: Element>(
    p: &Plan,
    f: &Fold<A, impl Fn(A, T) -> A + Sync, impl Fn(A, A) -> A + Sync>,
    finish: impl Fn(A) -> R + Sync,
) -> Result<Tensor> {
    let (m, k, inner) = (p.m(), p.k, p.inner);
    p.src.with_slice::<T, _>(|src| {
        if inner > 1 {
            let per_o = k * inner;
            return fill_out::<R>(p.out_shape.clone(), k, |a, out| {
                simd(
                    #[inline(always)]
                    || {
                        let mut acc = vec![f.init; CW.min(inner)];
                        let (mut idx, end) = (a, a + out.len());
                        while idx < end {
                            let (o, i0) = (idx / inner, idx % inner);
                            let n = CW.min(inner - i0).min(end - idx);
                            f.cols(&src[o * per_o..(o + 1) * per_o], inner, i0, k, &mut acc[..n]);
                            for (y, &v) in out[idx - a..idx - a + n].iter_mut().zip(&acc[..n]) {
                                *y = finish(v);
                            }
                            idx += n;
                        }
                    },
                )
            });
        }
        if k <= BLOCK {
            return fill_out::<R>(p.out_shape.clone(), k, |a, out| {
                simd(
                    #[inline(always)]
                    || {
                        for (j, o) in out.iter_mut().enumerate() {
                            let r = a + j;
                            *o = finish(f.row(&src[r * k..(r + 1) * k]));
                        }
                    },
                )
            });
        }
        // Long rows: fixed blocks reduced in parallel, then combined in order.
        let nb = k.div_ceil(BLOCK);
        let mut parts = vec![f.init; m * nb];
        par_fill(&mut parts, BLOCK, |a, out| {
            simd(
                #[inline(always)]
                || {
                    for (j, o) in out.iter_mut().enumerate() {
                        let (r, b) = ((a + j) / nb, (a + j) % nb);
                        let s = r * k + b * BLOCK;
                        let e = (s + BLOCK).min(r * k + k);
                        *o = f.row(&src[s..e]);
                    }
                },
            )
        });
        fill_out::<R>(p.out_shape.clone(), nb, |a, out| {
            for (j, o) in out.iter_mut().enumerate() {
                let r = a + j;
                *o = finish(f.merge_all(&parts[r * nb..(r + 1) * nb]));
            }
        })
    })
}

/// Runs `f(row, out)` for each row of a rows plan (`inner == 1`): one output per row.
pub(crate) fn map_rows<T: Element, R: Element>(p: &Plan, f: impl Fn(&[T]) -> R + Sync) -> Result<Tensor> {
    debug_assert_eq!(p.inner, 1);
    let k = p.k;
    p.src.with_slice::<T, _>(|src| {
        fill_out::<R>(p.out_shape.clone(), k, |a, out| {
            simd(
                #[inline(always)]
                || {
                    for (j, o) in out.iter_mut().enumerate() {
                        let r = a + j;
                        *o = f(&src[r * k..(r + 1) * k]);
                    }
                },
            )
        })
    })
}

/// Like [`map_rows`] with two outputs per row.
pub(crate) fn map_rows2<T: Element, R1: Element, R2: Element>(
    p: &Plan,
    f: impl Fn(&[T]) -> (R1, R2) + Sync,
) -> Result<(Tensor, Tensor)> {
    debug_assert_eq!(p.inner, 1);
    let k = p.k;
    p.src.with_slice::<T, _>(|src| {
        fill_out2::<R1, R2>(p.out_shape.clone(), k, |a, o1, o2| {
            simd(
                #[inline(always)]
                || {
                    for j in 0..o1.len() {
                        let r = a + j;
                        let (x, y) = f(&src[r * k..(r + 1) * k]);
                        o1[j] = x;
                        o2[j] = y;
                    }
                },
            )
        })
    })
}

// ------------------------------------------------------------------ kernels

/// The sum of a plan: ints and bool sum in i64, floats in their compute type. `skip_nan`
/// makes it `nansum`.
fn sum_plan(p: &Plan, skip_nan: bool) -> Result<Tensor> {
    fn float<T: FloatAcc>(p: &Plan, skip_nan: bool) -> Result<Tensor> {
        let z = T::R::ZERO;
        if skip_nan {
            let f = Fold {
                init: z,
                step: |a: T::R, x: T| {
                    let v = x.to_r();
                    a + if v.is_nan_() { z } else { v }
                },
                merge: |a, b| a + b,
            };
            fold(p, &f, T::from_r)
        } else {
            fold(p, &Fold { init: z, step: |a: T::R, x: T| a + x.to_r(), merge: |a, b| a + b }, T::from_r)
        }
    }
    fn int<T: Element>(p: &Plan) -> Result<Tensor> {
        let f =
            Fold { init: 0i64, step: |a: i64, x: T| a.wrapping_add(x.to_i64()), merge: i64::wrapping_add };
        fold(p, &f, |a| a)
    }
    let dt = p.src.dtype();
    dispatch_float!(dt, T => float::<T>(p, skip_nan), _ => dispatch_int!(dt, T => int::<T>(p), _ => unreachable!()))
}

/// The mean of a float plan: the sum in the compute type divided by the count.
fn mean_plan(p: &Plan, skip_nan: bool) -> Result<Tensor> {
    fn go<T: FloatAcc>(p: &Plan, skip_nan: bool) -> Result<Tensor> {
        let z = T::R::ZERO;
        if skip_nan {
            let f = Fold {
                init: (z, z),
                step: |(s, c): (T::R, T::R), x: T| {
                    let v = x.to_r();
                    let nan = v.is_nan_();
                    (s + if nan { z } else { v }, c + if nan { z } else { T::R::ONE })
                },
                merge: |a: (T::R, T::R), b: (T::R, T::R)| (a.0 + b.0, a.1 + b.1),
            };
            fold(p, &f, |(s, c)| T::from_r(s / c))
        } else {
            let n = T::R::from_f64(p.k as f64);
            fold(p, &Fold { init: z, step: |a: T::R, x: T| a + x.to_r(), merge: |a, b| a + b }, |s| {
                T::from_r(s / n)
            })
        }
    }
    dispatch_float!(p.src.dtype(), T => go::<T>(p, skip_nan), _ => unreachable!())
}

fn prod_plan(p: &Plan) -> Result<Tensor> {
    fn float<T: FloatAcc>(p: &Plan) -> Result<Tensor> {
        fold(p, &Fold { init: T::R::ONE, step: |a: T::R, x: T| a * x.to_r(), merge: |a, b| a * b }, T::from_r)
    }
    fn int<T: Element>(p: &Plan) -> Result<Tensor> {
        let f =
            Fold { init: 1i64, step: |a: i64, x: T| a.wrapping_mul(x.to_i64()), merge: i64::wrapping_mul };
        fold(p, &f, |a| a)
    }
    let dt = p.src.dtype();
    dispatch_float!(dt, T => float::<T>(p), _ => dispatch_int!(dt, T => int::<T>(p), _ => unreachable!()))
}

/// amax (`is_max`) or amin of a plan, keeping the dtype; NaN propagates.
fn extreme_plan(p: &Plan, is_max: bool) -> Result<Tensor> {
    fn go<T: Bounded>(p: &Plan, is_max: bool) -> Result<Tensor> {
        if is_max {
            fold(p, &Fold { init: T::LOWEST, step: max_nan::<T>, merge: max_nan::<T> }, |a| a)
        } else {
            fold(p, &Fold { init: T::HIGHEST, step: min_nan::<T>, merge: min_nan::<T> }, |a| a)
        }
    }
    dispatch_all!(p.src.dtype(), T => go::<T>(p, is_max))
}

/// Values and first indices of the max (`is_max`) or min along the rows of a rows plan.
/// NaN counts as the extreme; its first occurrence is reported.
fn extreme_index_plan(p: &Plan, is_max: bool) -> Result<(Tensor, Tensor)> {
    #[allow(clippy::eq_op)]
    fn go<T: Bounded>(p: &Plan, is_max: bool) -> Result<(Tensor, Tensor)> {
        let fmax = Fold { init: T::LOWEST, step: max_nan::<T>, merge: max_nan::<T> };
        let fmin = Fold { init: T::HIGHEST, step: min_nan::<T>, merge: min_nan::<T> };
        map_rows2::<T, T, i64>(
            p,
            #[inline(always)]
            |row| {
                let v = if is_max { fmax.row(row) } else { fmin.row(row) };
                let nan = v != v;
                let hit = |x: T| if nan { x != x } else { x == v };
                // Find the first hit a chunk at a time (the chunk test vectorises).
                let mut base = 0;
                for c in row.chunks(LANES) {
                    let mut any = false;
                    for &x in c {
                        any |= hit(x);
                    }
                    if any {
                        break;
                    }
                    base += c.len();
                }
                let i = base + row[base.min(row.len())..].iter().position(|&x| hit(x)).unwrap_or(0);
                (v, i as i64)
            },
        )
    }
    dispatch_all!(p.src.dtype(), T => go::<T>(p, is_max))
}

/// Sum of squared deviations from the mean, per row of a rows plan, with the mean:
/// the two-pass algorithm in the compute type.
fn var_plan(p: &Plan, correction: f64, take_sqrt: bool) -> Result<(Tensor, Tensor)> {
    fn go<T: FloatAcc>(p: &Plan, correction: f64, take_sqrt: bool) -> Result<(Tensor, Tensor)> {
        let z = T::R::ZERO;
        let n = p.k;
        let nr = T::R::from_f64(n as f64);
        let div = T::R::from_f64((n as f64 - correction).max(0.0));
        let sum = Fold { init: z, step: |a: T::R, x: T| a + x.to_r(), merge: |a: T::R, b: T::R| a + b };
        map_rows2::<T, T, T>(
            p,
            #[inline(always)]
            |row| {
                let mean = sum.row(row) / nr;
                let sq = Fold {
                    init: z,
                    step: |a: T::R, x: T| {
                        let d = x.to_r() - mean;
                        a + d * d
                    },
                    merge: |a: T::R, b: T::R| a + b,
                };
                let var = sq.row(row) / div;
                (T::from_r(if take_sqrt { var.sqrt_() } else { var }), T::from_r(mean))
            },
        )
    }
    dispatch_float!(p.src.dtype(), T => go::<T>(p, correction, take_sqrt), _ => unreachable!())
}

/// `torch.linalg.vector_norm` of a float plan.
fn norm_plan(p: &Plan, ord: f64) -> Result<Tensor> {
    fn go<T: FloatAcc>(p: &Plan, ord: f64) -> Result<Tensor> {
        let z = T::R::ZERO;
        let add = |a: T::R, b: T::R| a + b;
        if ord == 0.0 {
            let f = Fold {
                init: z,
                step: |a: T::R, x: T| a + if x.to_r() != z { T::R::ONE } else { z },
                merge: add,
            };
            fold(p, &f, T::from_r)
        } else if ord == 1.0 {
            fold(p, &Fold { init: z, step: |a: T::R, x: T| a + x.to_r().abs_(), merge: add }, T::from_r)
        } else if ord == 2.0 {
            let f = Fold {
                init: z,
                step: |a: T::R, x: T| {
                    let v = x.to_r();
                    a + v * v
                },
                merge: add,
            };
            fold(p, &f, |a| T::from_r(a.sqrt_()))
        } else if ord == f64::INFINITY {
            let f =
                Fold { init: z, step: |a: T::R, x: T| max_nan(a, x.to_r().abs_()), merge: max_nan::<T::R> };
            fold(p, &f, T::from_r)
        } else if ord == f64::NEG_INFINITY {
            let f = Fold {
                init: T::R::INF,
                step: |a: T::R, x: T| min_nan(a, x.to_r().abs_()),
                merge: min_nan::<T::R>,
            };
            fold(p, &f, T::from_r)
        } else {
            let pr = T::R::from_f64(ord);
            let inv = T::R::from_f64(1.0 / ord);
            let f = Fold { init: z, step: |a: T::R, x: T| a + x.to_r().abs_().powf_(pr), merge: add };
            fold(p, &f, |a| T::from_r(a.powf_(inv)))
        }
    }
    dispatch_float!(p.src.dtype(), T => go::<T>(p, ord), _ => unreachable!())
}

/// logsumexp of the rows of a float rows plan, as PyTorch computes it: the max is subtracted
/// unless it is infinite.
fn logsumexp_plan(p: &Plan) -> Result<Tensor> {
    fn go<T: FloatAcc>(p: &Plan) -> Result<Tensor> {
        let z = T::R::ZERO;
        let fmax =
            Fold { init: T::R::NEG_INF, step: |a: T::R, x: T| max_nan(a, x.to_r()), merge: max_nan::<T::R> };
        map_rows::<T, T>(
            p,
            #[inline(always)]
            |row| {
                let m = fmax.row(row);
                let shift = if m.is_infinite_() { z } else { m };
                let f = Fold {
                    init: z,
                    step: |a: T::R, x: T| a + (x.to_r() - shift).exp_(),
                    merge: |a: T::R, b| a + b,
                };
                T::from_r(f.row(row).ln_() + shift)
            },
        )
    }
    dispatch_float!(p.src.dtype(), T => go::<T>(p), _ => unreachable!())
}

/// all (`is_all`) or any over a plan: bool results, uint8 for uint8 input (as PyTorch).
fn all_any_plan(p: &Plan, is_all: bool) -> Result<Tensor> {
    fn go<T: Element>(p: &Plan, is_all: bool) -> Result<Tensor> {
        fn run<T: Element>(
            p: &Plan,
            f: &Fold<bool, impl Fn(bool, T) -> bool + Sync, impl Fn(bool, bool) -> bool + Sync>,
        ) -> Result<Tensor> {
            if T::DTYPE == DType::U8 {
                fold(p, f, |a| a as u8)
            } else {
                fold(p, f, |a| a)
            }
        }
        let zero = T::default();
        if is_all {
            run(
                p,
                &Fold { init: true, step: |a: bool, x: T| a & (x != zero), merge: |a: bool, b: bool| a & b },
            )
        } else {
            run(
                p,
                &Fold { init: false, step: |a: bool, x: T| a | (x != zero), merge: |a: bool, b: bool| a | b },
            )
        }
    }
    dispatch_all!(p.src.dtype(), T => go::<T>(p, is_all))
}

fn count_nonzero_plan(p: &Plan) -> Result<Tensor> {
    fn go<T: Element>(p: &Plan) -> Result<Tensor> {
        let zero = T::default();
        fold(p, &Fold { init: 0i64, step: |a: i64, x: T| a + (x != zero) as i64, merge: |a, b| a + b }, |a| a)
    }
    dispatch_all!(p.src.dtype(), T => go::<T>(p))
}

// ------------------------------------------------------------------ checks

fn require_float(x: &Tensor, msg: impl FnOnce() -> String) -> Result<()> {
    if !x.dtype().is_floating_point() {
        return Err(crate::err!(DType, "{}", msg()));
    }
    Ok(())
}

/// Errors when a reduced dim is empty, for reductions without an identity (max, min, ...).
/// `dims_given` distinguishes `x.max()` from `x.max(dim)`, as PyTorch's messages do.
fn require_nonempty(x: &Tensor, mask: &[bool], dims_given: bool, op: &str) -> Result<()> {
    if x.numel() > 0 {
        return Ok(());
    }
    if !dims_given {
        bail!(
            Index,
            "{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."
        );
    }
    for (d, &m) in mask.iter().enumerate() {
        if m && x.dims()[d] == 0 {
            bail!(Index, "{op}(): Expected reduction dim {d} to have non-zero size.");
        }
    }
    Ok(())
}

fn mask_one(x: &Tensor, dim: isize) -> Result<Vec<bool>> {
    let d = wrap_dim(dim, x.rank())?;
    let mut mask = vec![false; x.rank()];
    if d < x.rank() {
        mask[d] = true;
    }
    Ok(mask)
}

// ------------------------------------------------------------------ the public API

impl Tensor {
    /// `torch.sum(x)`: the sum of all elements as a 0-d tensor. Integer and bool inputs sum in
    /// int64 (giving int64); f16 and bf16 accumulate in f32.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::new([[1i32, 2, 3], [4, 5, 6]])?;
    /// let s = x.sum()?;
    /// assert_eq!((s.dtype(), s.item::<i64>()?), (DType::I64, 21));
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn sum(&self) -> Result<Tensor> {
        self.sum_dims(&[], false)
    }

    /// `torch.sum(x, dim=dims, keepdim=keepdim)`: sums over `dims` (negative dims allowed; an
    /// empty list sums over every dim). The sum of no elements is 0.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 2., 3.], [4., 5., 6.]])?;
    /// assert_eq!(x.sum_dims(&[-1], false)?.to_vec::<f32>()?, vec![6., 15.]);
    /// assert_eq!(x.sum_dims(&[0], true)?.dims(), &[1, 3]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn sum_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        if let Some(r) = crate::autocast::dispatch("sum", &[Some(self)], |t| t.at(0).sum_dims(dims, keepdim))
        {
            return r;
        }
        crate::profiler_record::profiled!("aten::sum", [self], {
            let mask = reduce_mask(self.rank(), dims, true, "sum")?;
            let rec = needs_grad(&[self]);
            let y = {
                let _g = paused(rec);
                on_device(self, &mask, keepdim, Reduction::Sum, |p| sum_plan(p, false))?
            };
            if !rec {
                return Ok(y);
            }
            let shape = self.shape().clone();
            let name = if dims.is_empty() { "SumBackward0" } else { "SumBackward1" };
            record1(name, &[self], y, &[], move |_, g| {
                Ok(vec![Some(unreduce(&g[0], &shape, &mask, keepdim)?.expand(shape.dims())?)])
            })
        })
    }

    /// `torch.nansum(x)`: the sum of all elements, treating NaN as 0.
    pub fn nansum(&self) -> Result<Tensor> {
        self.nansum_dims(&[], false)
    }

    /// `torch.nansum(x, dim=dims, keepdim=keepdim)`: [`Tensor::sum_dims`] treating NaN as 0.
    pub fn nansum_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let mask = reduce_mask(self.rank(), dims, true, "nansum")?;
        let y = if self.device().is_cuda() {
            let _g = paused(true);
            reduce_cuda::nan_skipping(self, &mask, keepdim, false)?
        } else {
            sum_plan(&Plan::new(self, &mask, keepdim)?, true)?
        };
        self.nan_reduction_ad("NansumBackward0", y, mask, keepdim, false)
    }

    /// `x.sum_to_size(shape)`: sums a tensor that was broadcast from `shape` back to `shape`
    /// (leading dims are summed away, dims where `shape` has 1 are summed with keepdim). This
    /// is how autograd reduces the gradient of a broadcast operand. Returns `self` when the
    /// shape already matches.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let g = Tensor::ones([4, 2, 3], DType::F32)?;
    /// let r = g.sum_to_size([2, 1])?;
    /// assert_eq!(r.dims(), &[2, 1]);
    /// assert_eq!(r.to_vec::<f32>()?, vec![12., 12.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn sum_to_size(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        let target = shape.into();
        let (r, t) = (self.rank(), target.rank());
        let fail = || {
            crate::err!(
                Shape,
                "size {{{:?}}} is not expandable to size {{{:?}}}.",
                target.dims(),
                self.dims()
            )
        };
        if t > r {
            return Err(fail());
        }
        let lead = r - t;
        let mut dims: Vec<isize> = (0..lead as isize).collect();
        for (j, &n) in target.dims().iter().enumerate() {
            let d = self.dims()[lead + j];
            if n == d {
                continue;
            }
            if n != 1 {
                return Err(fail());
            }
            dims.push((lead + j) as isize);
        }
        if dims.is_empty() {
            return Ok(self.clone());
        }
        let mut mask = vec![false; r];
        for &d in &dims {
            mask[d as usize] = true;
        }
        let rec = needs_grad(&[self]);
        let s = {
            let _g = paused(rec);
            on_device(self, &mask, true, Reduction::Sum, |p| sum_plan(p, false))?.reshape(&target)?
        };
        if !rec {
            return Ok(s);
        }
        let shape = self.shape().clone();
        record1("SumToSizeBackward0", &[self], s, &[], move |_, g| Ok(vec![Some(g[0].expand(shape.dims())?)]))
    }

    /// Alias of [`Tensor::sum_to_size`].
    pub fn sum_to_shape(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        self.sum_to_size(shape)
    }

    /// `torch.mean(x)`: the mean of all elements. Floating-point inputs only (PyTorch refuses
    /// to infer a dtype for integers); the mean of no elements is NaN.
    pub fn mean(&self) -> Result<Tensor> {
        self.mean_dims(&[], false)
    }

    /// `torch.mean(x, dim=dims, keepdim=keepdim)`; an empty list means every dim.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 2.], [3., 5.]])?;
    /// assert_eq!(x.mean_dims(&[1], false)?.to_vec::<f32>()?, vec![1.5, 4.]);
    /// assert!(Tensor::new([1i64, 2])?.mean().is_err());
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn mean_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::mean", [self], {
            require_float(self, || {
                format!("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}", self.dtype().type_name())
            })?;
            let mask = reduce_mask(self.rank(), dims, true, "mean")?;
            let rec = needs_grad(&[self]);
            let y = {
                let _g = paused(rec);
                on_device(self, &mask, keepdim, Reduction::Mean, |p| mean_plan(p, false))?
            };
            if !rec {
                return Ok(y);
            }
            let shape = self.shape().clone();
            let count: usize = shape.dims().iter().zip(&mask).filter(|&(_, &m)| m).map(|(&d, _)| d).product();
            let name = if dims.is_empty() { "MeanBackward0" } else { "MeanBackward1" };
            record1(name, &[self], y, &[], move |_, g| {
                let g = unreduce(&g[0], &shape, &mask, keepdim)?.div_scalar(count as f64)?;
                Ok(vec![Some(g.expand(shape.dims())?)])
            })
        })
    }

    /// `torch.nanmean(x)`: the mean of the non-NaN elements.
    pub fn nanmean(&self) -> Result<Tensor> {
        self.nanmean_dims(&[], false)
    }

    /// `torch.nanmean(x, dim=dims, keepdim=keepdim)`: the mean ignoring NaNs (NaN when a
    /// row has no other value). Floating-point inputs only.
    pub fn nanmean_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        require_float(self, || {
            format!(
                "nanmean(): expected input to have floating point or complex dtype but got {}",
                self.dtype().type_name()
            )
        })?;
        let mask = reduce_mask(self.rank(), dims, true, "nanmean")?;
        let y = if self.device().is_cuda() {
            let _g = paused(true);
            reduce_cuda::nan_skipping(self, &mask, keepdim, true)?
        } else {
            mean_plan(&Plan::new(self, &mask, keepdim)?, true)?
        };
        self.nan_reduction_ad("NanmeanBackward0", y, mask, keepdim, true)
    }

    /// `torch.prod(x)`: the product of all elements (int64 for integer and bool inputs; 1 for
    /// no elements).
    pub fn prod(&self) -> Result<Tensor> {
        self.prod_dims(&[], false)
    }

    /// `torch.prod(x, dim, keepdim)`, generalised to a list of dims (empty means every dim).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 2.], [3., 4.]])?;
    /// assert_eq!(x.prod_dims(&[0], false)?.to_vec::<f32>()?, vec![3., 8.]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn prod_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        // Autocast's float32 list.
        if let Some(r) =
            crate::autocast::dispatch("prod", &[Some(self)], |t| t.at(0).prod_dims(dims, keepdim))
        {
            return r;
        }
        let mask = reduce_mask(self.rank(), dims, true, "prod")?;
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            on_device(self, &mask, keepdim, Reduction::Prod, prod_plan)?
        };
        if !rec || !y.dtype().is_floating_point() {
            return Ok(y);
        }
        let shape = self.shape().clone();
        let name = if dims.is_empty() { "ProdBackward0" } else { "ProdBackward1" };
        record1(name, &[self], y, &[Save::Input(self), Save::Output(0)], move |ctx, g| {
            let (x, out) = (ctx.saved(0)?, ctx.saved(1)?);
            let g = unreduce(&g[0], &shape, &mask, keepdim)?;
            // d prod / d x_i = the product of the other elements: prod / x_i without zeros
            if !x.eq_scalar(0.0)?.any()?.item::<bool>()? {
                return Ok(vec![Some(g.mul(&unreduce(&out, &shape, &mask, keepdim)?)?.div(&x)?)]);
            }
            // the products of the others by exclusive cumprods from both ends (recorded under
            // create_graph, so that the double backward sees a product with zeros)
            Ok(vec![Some(g.mul(&product_of_others(&x, &mask)?)?)])
        })
    }

    /// `torch.max(x)`: the largest element as a 0-d tensor (NaN if any element is NaN).
    /// Fails for an empty tensor.
    pub fn max(&self) -> Result<Tensor> {
        let mask = vec![true; self.rank()];
        require_nonempty(self, &mask, false, "max")?;
        self.extreme_ad("MaxBackward1", &mask, false, true)
    }

    /// `torch.min(x)`: the smallest element as a 0-d tensor. Fails for an empty tensor.
    pub fn min(&self) -> Result<Tensor> {
        let mask = vec![true; self.rank()];
        require_nonempty(self, &mask, false, "min")?;
        self.extreme_ad("MinBackward1", &mask, false, false)
    }

    /// `torch.max(x, dim, keepdim)`: `(values, indices)` of the largest element along `dim`;
    /// indices are int64 and point at the first maximum (or the first NaN, which counts as
    /// the maximum).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 7., 7.], [f32::NAN, 2., 3.]])?;
    /// let (v, i) = x.max_dim(1, false)?;
    /// assert_eq!(i.to_vec::<i64>()?, vec![1, 0]);
    /// assert!(v.to_vec::<f32>()?[1].is_nan());
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn max_dim(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let mask = mask_one(self, dim)?;
        require_nonempty(self, &mask, true, "max")?;
        self.extreme_index_ad("MaxBackward0", dim, &mask, keepdim, true)
    }

    /// `torch.min(x, dim, keepdim)`: `(values, indices)` of the smallest element along `dim`.
    pub fn min_dim(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let mask = mask_one(self, dim)?;
        require_nonempty(self, &mask, true, "min")?;
        self.extreme_index_ad("MinBackward0", dim, &mask, keepdim, false)
    }

    /// `torch.amax(x, dim=dims, keepdim=keepdim)`: the maximum over `dims` (empty means every
    /// dim), keeping the dtype; NaN propagates.
    pub fn amax(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let mask = reduce_mask(self.rank(), dims, true, "amax")?;
        require_nonempty(self, &mask, !dims.is_empty(), "amax")?;
        self.extreme_ad("AmaxBackward0", &mask, keepdim, true)
    }

    /// `torch.amin(x, dim=dims, keepdim=keepdim)`: the minimum over `dims`.
    pub fn amin(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let mask = reduce_mask(self.rank(), dims, true, "amin")?;
        require_nonempty(self, &mask, !dims.is_empty(), "amin")?;
        self.extreme_ad("AminBackward0", &mask, keepdim, false)
    }

    /// `torch.argmax(x, dim, keepdim)`: int64 index of the first maximum along `dim`, or in
    /// the flattened tensor when `dim` is `None` (then `keepdim` keeps every dim as size 1).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 9.], [9., 3.]])?;
    /// assert_eq!(x.argmax(None, false)?.item::<i64>()?, 1);
    /// assert_eq!(x.argmax(Some(0), false)?.to_vec::<i64>()?, vec![1, 0]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn argmax(&self, dim: Option<isize>, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme(dim, keepdim, true)
    }

    /// `torch.argmin(x, dim, keepdim)`: int64 index of the first minimum.
    pub fn argmin(&self, dim: Option<isize>, keepdim: bool) -> Result<Tensor> {
        self.arg_extreme(dim, keepdim, false)
    }

    fn arg_extreme(&self, dim: Option<isize>, keepdim: bool, is_max: bool) -> Result<Tensor> {
        let op = if is_max { "argmax" } else { "argmin" };
        if self.dtype() == DType::Bool {
            bail!(NotImplemented, "{op}(): does not support bool input");
        }
        let mask = match dim {
            Some(d) => mask_one(self, d)?,
            None => vec![true; self.rank()],
        };
        require_nonempty(self, &mask, dim.is_some(), op)?;
        Ok(on_device_indexed(self, &mask, keepdim, is_max)?.1)
    }

    /// `torch.var(x)`: the variance of all elements with Bessel's correction.
    pub fn var(&self) -> Result<Tensor> {
        self.var_dims(&[], 1.0, false)
    }

    /// `torch.var(x, dim=dims, correction=correction, keepdim=keepdim)`: the sum of squared
    /// deviations divided by `max(0, N - correction)` (`correction` 1 is the unbiased
    /// estimate, 0 the population variance). Floating-point inputs only.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f64, 2., 3., 4.]])?;
    /// assert_eq!(x.var_dims(&[1], 1.0, false)?.to_vec::<f64>()?, vec![5.0 / 3.0]);
    /// assert_eq!(x.var_dims(&[1], 0.0, false)?.to_vec::<f64>()?, vec![1.25]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn var_dims(&self, dims: &[isize], correction: f64, keepdim: bool) -> Result<Tensor> {
        Ok(self.var_impl(dims, correction, keepdim, false)?.0)
    }

    /// `torch.std(x)`: the standard deviation of all elements with Bessel's correction.
    pub fn std(&self) -> Result<Tensor> {
        self.std_dims(&[], 1.0, false)
    }

    /// `torch.std(x, dim=dims, correction=correction, keepdim=keepdim)`: the square root of
    /// [`Tensor::var_dims`].
    pub fn std_dims(&self, dims: &[isize], correction: f64, keepdim: bool) -> Result<Tensor> {
        Ok(self.var_impl(dims, correction, keepdim, true)?.0)
    }

    /// `torch.var_mean(x, dim=dims, correction=correction, keepdim=keepdim)`: `(var, mean)`.
    pub fn var_mean(&self, dims: &[isize], correction: f64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.var_impl(dims, correction, keepdim, false)
    }

    /// `torch.std_mean(x, dim=dims, correction=correction, keepdim=keepdim)`: `(std, mean)`.
    pub fn std_mean(&self, dims: &[isize], correction: f64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.var_impl(dims, correction, keepdim, true)
    }

    fn var_impl(
        &self,
        dims: &[isize],
        correction: f64,
        keepdim: bool,
        sqrt: bool,
    ) -> Result<(Tensor, Tensor)> {
        require_float(self, || "std and var only support floating point and complex dtypes".into())?;
        let mask = reduce_mask(self.rank(), dims, true, if sqrt { "std" } else { "var" })?;
        let rec = needs_grad(&[self]);
        let (v, m) = {
            let _g = paused(rec);
            if self.device().is_cuda() {
                reduce_cuda::var(self, &mask, keepdim, correction, sqrt)?
            } else {
                var_plan(&Plan::new(self, &mask, keepdim)?.rows()?, correction, sqrt)?
            }
        };
        if !rec {
            return Ok((v, m));
        }
        // d var = 2 (x - mean) / (n - correction); d std = d var / (2 std)
        let shape = self.shape().clone();
        let n: usize = shape.dims().iter().zip(&mask).filter(|&(_, &k)| k).map(|(&d, _)| d).product();
        let denom = (n as f64 - correction).max(0.0);
        let rd: Vec<isize> = (0..mask.len()).filter(|&d| mask[d]).map(|d| d as isize).collect();
        let name = if sqrt { "StdBackward0" } else { "VarBackward0" };
        let v = record1(name, &[self], v, &[Save::Input(self), Save::Output(0)], move |ctx, g| {
            let (x, out) = (ctx.saved(0)?, ctx.saved(1)?);
            let mean = x.mean_dims(&rd, true)?;
            let centered = x.sub(&mean)?;
            let g = unreduce(&g[0], &shape, &mask, keepdim)?;
            let gx = if sqrt {
                centered.mul(&g.div(&unreduce(&out, &shape, &mask, keepdim)?)?)?.div_scalar(denom)?
            } else {
                centered.mul(&g)?.mul_scalar(2.0 / denom)?
            };
            Ok(vec![Some(gx)])
        })?;
        let m = self.mean_dims(dims, keepdim)?;
        Ok((v, m))
    }

    /// `torch.linalg.vector_norm(x, ord, dim=dims, keepdim=keepdim)`: `(sum |x|^ord)^(1/ord)`
    /// over `dims` (empty means every dim), with `ord` 0 counting non-zeros, `inf` the max
    /// and `-inf` the min of `|x|`. Floating-point inputs only; `inf` and negative orders
    /// fail on an empty reduction, which has no identity.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[3f32, -4.], [0., 1.]])?;
    /// assert_eq!(x.norm(2.0, &[1], false)?.to_vec::<f32>()?, vec![5., 1.]);
    /// assert_eq!(x.norm(f64::INFINITY, &[], false)?.item::<f32>()?, 4.);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn norm(&self, ord: f64, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        if let Some(r) =
            crate::autocast::dispatch("norm", &[Some(self)], |t| t.at(0).norm(ord, dims, keepdim))
        {
            return r;
        }
        require_float(self, || {
            format!(
                "linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}",
                self.dtype().type_name()
            )
        })?;
        let mask = reduce_mask(self.rank(), dims, true, "linalg.vector_norm")?;
        if (ord < 0.0 || ord.is_infinite()) && self.numel() == 0 {
            if dims.is_empty() {
                bail!(Value, "linalg.vector_norm cannot compute the {ord} norm on an empty tensor because the operation does not have an identity");
            }
            for (d, &m) in mask.iter().enumerate() {
                if m && self.dims()[d] == 0 {
                    bail!(Value, "linalg.vector_norm cannot compute the {ord} norm on the dimension {d} because this dimension is empty and the operation does not have an identity");
                }
            }
        }
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            if self.device().is_cuda() {
                reduce_cuda::norm(self, &mask, keepdim, ord)?
            } else {
                norm_plan(&Plan::new(self, &mask, keepdim)?, ord)?
            }
        };
        if !rec {
            return Ok(y);
        }
        let shape = self.shape().clone();
        record1("NormBackward1", &[self], y, &[Save::Input(self), Save::Output(0)], move |ctx, g| {
            let (x, out) = (ctx.saved(0)?, ctx.saved(1)?);
            let g = unreduce(&g[0], &shape, &mask, keepdim)?;
            let out = unreduce(&out, &shape, &mask, keepdim)?;
            let gx = if ord == 0.0 {
                x.zeros_like()?
            } else if ord == 1.0 {
                x.sign()?.mul(&g)?
            } else if ord.is_infinite() {
                // the gradient goes to the elements of largest |x|, split among ties
                let hit = x.abs()?.eq(&out)?.to_dtype(x.dtype())?;
                let rd: Vec<isize> = (0..mask.len()).filter(|&d| mask[d]).map(|d| d as isize).collect();
                let ties = hit.sum_dims(&rd, true)?;
                x.sign()?.mul(&hit)?.div(&ties)?.mul(&g)?
            } else if ord == 2.0 {
                // x / ||x||, taken as 0 where the norm is 0
                let scale = g.div(&out)?.masked_fill(&out.eq_scalar(0.0)?, 0.0)?;
                x.mul(&scale)?
            } else {
                // x |x|^(p-2) / ||x||^(p-1)
                let scale = g.div(&out.pow_scalar(ord - 1.0)?)?.masked_fill(&out.eq_scalar(0.0)?, 0.0)?;
                let w = x.abs()?.pow_scalar(ord - 2.0)?;
                x.mul(&w)?.mul(&scale)?
            };
            Ok(vec![Some(gx)])
        })
    }

    /// `torch.linalg.vector_norm(x, ord, dim, keepdim)`: alias of [`Tensor::norm`].
    pub fn vector_norm(&self, ord: f64, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.norm(ord, dims, keepdim)
    }

    /// `torch.norm(x, p='fro', dim=dims, keepdim=keepdim)`: the Frobenius (2-) norm over
    /// `dims` (empty means every dim).
    pub fn norm_fro(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        self.norm(2.0, dims, keepdim)
    }

    /// `torch.logsumexp(x, dim=dims, keepdim=keepdim)`: `log(sum(exp(x)))` over `dims`
    /// (empty means every dim), computed stably by subtracting the maximum; rows of `-inf`
    /// give `-inf`. Integer and bool inputs give the default float dtype.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1000f32, 1000.], [f32::NEG_INFINITY, f32::NEG_INFINITY]])?;
    /// let y = x.logsumexp(&[1], false)?.to_vec::<f32>()?;
    /// assert!((y[0] - (1000. + 2f32.ln())).abs() < 1e-3);
    /// assert_eq!(y[1], f32::NEG_INFINITY);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn logsumexp(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        if let Some(r) =
            crate::autocast::dispatch("logsumexp", &[Some(self)], |t| t.at(0).logsumexp(dims, keepdim))
        {
            return r;
        }
        let x =
            if self.dtype().is_floating_point() { self.clone() } else { self.to_dtype(get_default_dtype())? };
        let mask = reduce_mask(x.rank(), dims, true, "logsumexp")?;
        let rec = needs_grad(&[&x]);
        let y = {
            let _g = paused(rec);
            if x.device().is_cuda() {
                reduce_cuda::logsumexp(&x, &mask, keepdim)?
            } else {
                logsumexp_plan(&Plan::new(&x, &mask, keepdim)?.rows()?)?
            }
        };
        if !rec {
            return Ok(y);
        }
        let shape = x.shape().clone();
        record1("LogsumexpBackward0", &[&x], y, &[Save::Input(&x), Save::Output(0)], move |ctx, g| {
            let (x, y) = (ctx.saved(0)?, ctx.saved(1)?);
            let e = x.sub(&unreduce(&y, &shape, &mask, keepdim)?)?.exp()?;
            Ok(vec![Some(unreduce(&g[0], &shape, &mask, keepdim)?.mul(&e)?)])
        })
    }

    /// `torch.all(x)`: true when every element is non-zero (NaN counts as non-zero). The
    /// result is bool, or uint8 for a uint8 input as in PyTorch.
    pub fn all(&self) -> Result<Tensor> {
        self.all_any(&vec![true; self.rank()], false, true)
    }

    /// `torch.any(x)`: true when some element is non-zero.
    pub fn any(&self) -> Result<Tensor> {
        self.all_any(&vec![true; self.rank()], false, false)
    }

    /// `torch.all(x, dim=dims, keepdim=keepdim)`. As in PyTorch, an empty list reduces no dim.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[true, false], [true, true]])?;
    /// assert_eq!(x.all_dims(&[1], false)?.to_vec::<bool>()?, vec![false, true]);
    /// assert_eq!(x.any_dims(&[0], false)?.to_vec::<bool>()?, vec![true, true]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn all_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let mask = reduce_mask(self.rank(), dims, false, "all")?;
        self.all_any(&mask, keepdim, true)
    }

    /// `torch.any(x, dim=dims, keepdim=keepdim)`. As in PyTorch, an empty list reduces no dim.
    pub fn any_dims(&self, dims: &[isize], keepdim: bool) -> Result<Tensor> {
        let mask = reduce_mask(self.rank(), dims, false, "any")?;
        self.all_any(&mask, keepdim, false)
    }

    /// `torch.count_nonzero(x, dim=dims)`: int64 count of non-zero elements over `dims`
    /// (empty means every dim).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[0f32, 1., 2.], [0., 0., 3.]])?;
    /// assert_eq!(x.count_nonzero(&[1])?.to_vec::<i64>()?, vec![2, 1]);
    /// assert_eq!(x.count_nonzero(&[])?.item::<i64>()?, 3);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn count_nonzero(&self, dims: &[isize]) -> Result<Tensor> {
        let mask = reduce_mask(self.rank(), dims, true, "count_nonzero")?;
        if self.device().is_cuda() {
            return reduce_cuda::count_nonzero(self, &mask);
        }
        count_nonzero_plan(&Plan::new(self, &mask, false)?)
    }

    fn all_any(&self, mask: &[bool], keepdim: bool, is_all: bool) -> Result<Tensor> {
        if self.device().is_cuda() {
            return reduce_cuda::all_any(self, mask, keepdim, is_all);
        }
        all_any_plan(&Plan::new(self, mask, keepdim)?, is_all)
    }
}

// ------------------------------------------------------------------ autograd helpers

/// A reduction's result (or its gradient) with the reduced dims put back as size 1, so that
/// it broadcasts against the input.
fn unreduce(t: &Tensor, input: &Shape, mask: &[bool], keepdim: bool) -> Result<Tensor> {
    if keepdim {
        return Ok(t.clone());
    }
    let kept: Vec<usize> = input.dims().iter().zip(mask).map(|(&d, &m)| if m { 1 } else { d }).collect();
    t.reshape(kept.as_slice())
}

impl Tensor {
    /// max/min/amax/amin over `mask`, recorded: the gradient is split evenly among the
    /// elements equal to the extreme (PyTorch's `evenly_distribute_backward`).
    fn extreme_ad(&self, name: &'static str, mask: &[bool], keepdim: bool, max: bool) -> Result<Tensor> {
        let rec = needs_grad(&[self]);
        let y = {
            let _g = paused(rec);
            on_device(self, mask, keepdim, if max { Reduction::Max } else { Reduction::Min }, |p| {
                extreme_plan(p, max)
            })?
        };
        if !rec {
            return Ok(y);
        }
        let shape = self.shape().clone();
        let mask = mask.to_vec();
        record1(name, &[self], y, &[Save::Input(self), Save::Output(0)], move |ctx, g| {
            let (x, out) = (ctx.saved(0)?, ctx.saved(1)?);
            let hit = x.eq(&unreduce(&out, &shape, &mask, keepdim)?)?.to_dtype(x.dtype())?;
            let rd: Vec<isize> = (0..mask.len()).filter(|&d| mask[d]).map(|d| d as isize).collect();
            let ties = hit.sum_dims(&rd, true)?;
            Ok(vec![Some(hit.div(&ties)?.mul(&unreduce(&g[0], &shape, &mask, keepdim)?)?)])
        })
    }

    /// max_dim/min_dim, recorded: the gradient goes to the returned index only.
    fn extreme_index_ad(
        &self,
        name: &'static str,
        dim: isize,
        mask: &[bool],
        keepdim: bool,
        max: bool,
    ) -> Result<(Tensor, Tensor)> {
        let rec = needs_grad(&[self]);
        let (v, i) = {
            let _g = paused(rec);
            on_device_indexed(self, mask, keepdim, max)?
        };
        if !rec {
            return Ok((v, i));
        }
        let shape = self.shape().clone();
        let mask = mask.to_vec();
        let d = wrap_dim(dim, self.rank().max(1))? as isize;
        let v = record1(name, &[self], v, &[Save::Input(&i)], move |ctx, g| {
            let idx = unreduce(&ctx.saved(0)?, &shape, &mask, keepdim)?;
            let g = unreduce(&g[0], &shape, &mask, keepdim)?;
            Ok(vec![Some(crate::ops::index::scatter_into_zeros(&g, d, &idx, &shape)?)])
        })?;
        Ok((v, i))
    }
}

/// For each element, the product of the other elements of its reduction group (over the dims
/// in `mask`), by exclusive cumulative products from both ends: right with zeros, where
/// `prod / x` is not.
fn product_of_others(x: &Tensor, mask: &[bool]) -> Result<Tensor> {
    let r = x.rank();
    let kept: Vec<usize> = (0..r).filter(|&d| !mask[d]).collect();
    let red: Vec<usize> = (0..r).filter(|&d| mask[d]).collect();
    let perm: Vec<isize> = kept.iter().chain(&red).map(|&d| d as isize).collect();
    let outer: usize = kept.iter().map(|&d| x.dims()[d]).product();
    let k: usize = red.iter().map(|&d| x.dims()[d]).product();
    let xp = x.permute(&perm)?.reshape([outer, k])?;
    let ones = Tensor::ones_on([outer, 1], x.dtype(), x.device())?;
    let left = Tensor::cat(&[ones.clone(), xp.narrow(1, 0, k.saturating_sub(1))?], 1)?.cumprod(1)?;
    let right = Tensor::cat(&[xp.narrow(1, 1.min(k) as isize, k.saturating_sub(1))?, ones], 1)?
        .flip(&[1])?
        .cumprod(1)?
        .flip(&[1])?;
    let permuted: Vec<usize> = perm.iter().map(|&d| x.dims()[d as usize]).collect();
    let mut inverse = vec![0isize; r];
    for (i, &d) in perm.iter().enumerate() {
        inverse[d as usize] = i as isize;
    }
    left.mul(&right)?.reshape(permuted.as_slice())?.permute(&inverse)
}

impl Tensor {
    /// nansum/nanmean, recorded: NaN elements get no gradient.
    fn nan_reduction_ad(
        &self,
        name: &'static str,
        y: Tensor,
        mask: Vec<bool>,
        keepdim: bool,
        mean: bool,
    ) -> Result<Tensor> {
        if !needs_grad(&[self]) || !y.dtype().is_floating_point() {
            return Ok(y);
        }
        let shape = self.shape().clone();
        let rd: Vec<isize> = (0..mask.len()).filter(|&d| mask[d]).map(|d| d as isize).collect();
        record1(name, &[self], y, &[Save::Input(self)], move |ctx, g| {
            let x = ctx.saved(0)?;
            let keep = x.isnan()?.logical_not()?.to_dtype(x.dtype())?;
            let mut g = unreduce(&g[0], &shape, &mask, keepdim)?.mul(&keep)?;
            if mean {
                g = g.div(&keep.sum_dims(&rd, true)?)?;
            }
            Ok(vec![Some(g)])
        })
    }
}
