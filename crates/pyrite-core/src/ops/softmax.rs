//! `softmax` and `log_softmax` along a dim, numerically stable (the maximum is subtracted
//! before `exp`), with f16 and bf16 computed in f32.
//!
//! The common case, f32 along the last dim of a contiguous tensor, runs a fused row kernel
//! (max, exp and sum, scale) compiled for AVX-512, AVX2+FMA and baseline x86-64 and picked at
//! run time like the kernels in `simd.rs`, with an FMA-based `exp` for non-positive inputs
//! ([`exp_nonpos`]); rows are split across threads. It prefetches the next row during each
//! row's `exp` pass, and writes outputs too large for the caches with streaming stores. Every
//! path runs the same operations in the same order, so results do not depend on the CPU or
//! thread count.

use super::reduce::{grain_for, line_width, simd, FloatAcc, Real};
use super::SendPtr;
use crate::alloc::CpuBuffer;
use crate::autograd::record::{needs_grad, paused, record1, Save};
use crate::shape::wrap_dim;
use crate::stream::{fence, stream_out_unfenced, worth_streaming};
use crate::threads::parallel_for;
use crate::{bail, dispatch_float, DType, Result, Tensor};

/// Lanes of the f32 row kernel's accumulators.
const L: usize = 16;

/// Whether the row kernel streams its output (see `rows_f32_body`): outputs too large for
/// the caches, in rows whose scratch copy (4 bytes a float) stays within L2.
fn streams(numel: usize, k: usize) -> bool {
    worth_streaming(numel * 4) && k <= 1 << 15
}

/// `exp(d)` for `d <= 0` (softmax, after subtracting the row maximum): Cody-Waite range
/// reduction and Cephes' degree-6 polynomial evaluated with fused multiply-adds, about 1 ulp.
/// `mul_add` is exact, so every CPU computes the same bits: one instruction where the kernel
/// is compiled with FMA, libm's correctly rounded `fmaf` otherwise. NaN gives NaN; results
/// below the smallest normal f32 (`d < -87`) flush to 0, so `-inf` gives exactly 0.
#[inline(always)]
pub(crate) fn exp_nonpos(d: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    const LO: f32 = -87.0;
    let small = d < LO;
    let dc = if small { LO } else { d };
    let t = dc.mul_add(LOG2E, MAGIC);
    let fx = t - MAGIC;
    let n = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = fx.mul_add(-C1, dc);
    let r = fx.mul_add(-C2, r);
    let mut p = 1.987_569_1e-4f32;
    p = p.mul_add(r, 1.398_199_9e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 5.000_000_1e-1);
    let y = p.mul_add(r * r, r) + 1.0;
    let scale = f32::from_bits((n.wrapping_add(127) as u32) << 23);
    if small {
        0.0
    } else {
        y * scale
    }
}

/// The maximum of the lanes (not NaN-aware: a NaN reaches the result through `exp`).
#[inline(never)]
fn lanes_max(m: &[f32; 4 * L]) -> f32 {
    m.iter().fold(f32::NEG_INFINITY, |a, &v| if v > a { v } else { a })
}

/// The sum of the lanes, combined pairwise.
#[inline(never)]
fn lanes_sum(mut s: [f32; 2 * L]) -> f32 {
    let mut w = 2 * L;
    while w > 1 {
        w /= 2;
        for l in 0..w {
            s[l] += s[l + w];
        }
    }
    s[0]
}

/// Softmax (or log-softmax) of `rows` rows of `k` f32 each, `src` to `dst`. Several
/// independent accumulators per pass keep the vector units busy; the lane combinations
/// stay out of line (see `Fold::combine_lanes`).
///
/// While a row's `exp` pass runs, the next row is prefetched, so that its loads from memory
/// overlap this row's arithmetic instead of stalling the next max pass. With `stream`, the
/// `exp` values go to a row-sized scratch buffer (in L1) and the final pass writes each row
/// with streaming stores ([`crate::stream`]): the output's cache lines are never read.
#[inline(always)]
unsafe fn rows_f32_body(src: *const f32, dst: *mut f32, rows: usize, k: usize, log: bool, stream: bool) {
    unsafe {
        // Softmax rows are staged in `scratch` when streamed; log-softmax needs no staging.
        let staged = stream && !log;
        let mut scratch = if staged { vec![0f32; k] } else { Vec::new() };
        for r in 0..rows {
            // SAFETY: the caller passes `rows * k` valid elements behind both pointers.
            let x = std::slice::from_raw_parts(src.add(r * k), k);
            let yd = dst.add(r * k);
            let y = if staged { &mut scratch[..] } else { std::slice::from_raw_parts_mut(yd, k) };
            let mut mx = [f32::NEG_INFINITY; 4 * L];
            let mut xc = x.chunks_exact(4 * L);
            for c in &mut xc {
                for l in 0..4 * L {
                    mx[l] = if c[l] > mx[l] { c[l] } else { mx[l] };
                }
            }
            // The remainder (fewer than 4L values) through the same lanes, padded with -inf: a
            // short row (attention's 81 keys) would otherwise spend most of its time in scalar code.
            let rem = xc.remainder();
            if !rem.is_empty() {
                let mut pad = [f32::NEG_INFINITY; 4 * L];
                pad[..rem.len()].copy_from_slice(rem);
                for l in 0..4 * L {
                    mx[l] = if pad[l] > mx[l] { pad[l] } else { mx[l] };
                }
            }
            let m = lanes_max(&mx);
            // A NaN in the row is skipped by the max but propagates through exp and the sum.
            let mut s = [0f32; 2 * L];
            let body = k - k % (2 * L);
            // The next row, two cache lines per chunk of 32 floats (the chunk's own size).
            let next = src.wrapping_add((r + 1) * k);
            if log {
                for (ci, c) in x[..body].chunks_exact(2 * L).enumerate() {
                    prefetch_two_lines(next.wrapping_add(ci * 2 * L));
                    for l in 0..2 * L {
                        s[l] += exp_nonpos(c[l] - m);
                    }
                }
            } else {
                let chunks = y[..body].chunks_exact_mut(2 * L).zip(x[..body].chunks_exact(2 * L));
                for (ci, (yo, xi)) in chunks.enumerate() {
                    prefetch_two_lines(next.wrapping_add(ci * 2 * L));
                    for l in 0..2 * L {
                        let e = exp_nonpos(xi[l] - m);
                        yo[l] = e;
                        s[l] += e;
                    }
                }
            }
            // The tail (fewer than 2L values) through the same lanes, padded with -inf, whose
            // exp is 0 (a row whose maximum is -inf or NaN is NaN either way).
            if body < k {
                let n = k - body;
                let mut pad = [f32::NEG_INFINITY; 2 * L];
                pad[..n].copy_from_slice(&x[body..]);
                let mut e = [0f32; 2 * L];
                for l in 0..2 * L {
                    e[l] = exp_nonpos(pad[l] - m);
                    s[l] += e[l];
                }
                if !log {
                    y[body..].copy_from_slice(&e[..n]);
                }
            }
            let sum = lanes_sum(s);
            if log {
                let ls = sum.ln();
                if stream {
                    stream_out_unfenced(yd, k, |at, c, into| {
                        for j in 0..c {
                            *into.add(j) = x[at + j] - m - ls;
                        }
                    });
                } else {
                    for (yo, &xi) in y.iter_mut().zip(x) {
                        *yo = xi - m - ls;
                    }
                }
            } else {
                let inv = 1.0 / sum;
                if stream {
                    stream_out_unfenced(yd, k, |at, c, into| {
                        for j in 0..c {
                            *into.add(j) = y[at + j] * inv;
                        }
                    });
                } else {
                    for v in y.iter_mut() {
                        *v *= inv;
                    }
                }
            }
        }
        if stream {
            fence();
        }
    }
}

/// Hints the CPU to fetch the two cache lines from `p` (any address: a prefetch never faults).
#[inline(always)]
fn prefetch_two_lines(p: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching has no preconditions; SSE is part of x86_64.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
        _mm_prefetch::<_MM_HINT_T0>((p as *const i8).wrapping_add(64));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn rows_f32_avx512(src: *const f32, dst: *mut f32, rows: usize, k: usize, log: bool, stream: bool) {
    unsafe { rows_f32_body(src, dst, rows, k, log, stream) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_f32_avx2(src: *const f32, dst: *mut f32, rows: usize, k: usize, log: bool, stream: bool) {
    unsafe { rows_f32_body(src, dst, rows, k, log, stream) }
}

/// Softmax of f32 rows with the widest kernel the CPU supports.
///
/// # Safety
/// Both pointers must be valid for `rows * k` elements; they must not overlap.
unsafe fn rows_f32(src: *const f32, dst: *mut f32, rows: usize, k: usize, log: bool, stream: bool) {
    unsafe {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("fma") {
                return rows_f32_avx512(src, dst, rows, k, log, stream);
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return rows_f32_avx2(src, dst, rows, k, log, stream);
            }
        }
        rows_f32_body(src, dst, rows, k, log, stream)
    }
}

/// The generic kernel: any float type, any `(outer, k, inner)` arrangement, computed in the
/// compute type (f32 for f16 and bf16).
fn softmax_generic<T: FloatAcc>(
    x: &Tensor,
    (outer, k, inner): (usize, usize, usize),
    log: bool,
) -> Result<Tensor> {
    let n = x.numel();
    let mut buf = CpuBuffer::for_elems(n, std::mem::size_of::<T>())?;
    let p = SendPtr(buf.as_mut_slice::<T>().as_mut_ptr());
    // SAFETY: callers take disjoint ranges of the output, within its `n` elements.
    let out = |start: usize, len: usize| {
        let p = &p;
        unsafe { std::slice::from_raw_parts_mut(p.0.add(start), len) }
    };
    x.with_slice::<T, _>(|src| {
        if inner == 1 {
            parallel_for(outer, grain_for(4 * k), |a, b| {
                simd(
                    #[inline(always)]
                    || {
                        let mut e = vec![T::R::ZERO; k];
                        for r in a..b {
                            let xs = &src[r * k..(r + 1) * k];
                            let ys = out(r * k, k);
                            let mut m = T::R::NEG_INF;
                            for &v in xs {
                                let v = v.to_r();
                                m = if v > m { v } else { m };
                            }
                            let mut s = T::R::ZERO;
                            for (ej, &v) in e.iter_mut().zip(xs) {
                                *ej = (v.to_r() - m).exp_();
                                s = s + *ej;
                            }
                            if log {
                                let ls = s.ln_();
                                for (yo, &v) in ys.iter_mut().zip(xs) {
                                    *yo = T::from_r(v.to_r() - m - ls);
                                }
                            } else {
                                let inv = T::R::ONE / s;
                                for (yo, &ej) in ys.iter_mut().zip(&e) {
                                    *yo = T::from_r(ej * inv);
                                }
                            }
                        }
                    },
                )
            });
            return;
        }
        // Softmax over a middle dim: groups of lines side by side, three passes over k.
        let cw = line_width(outer, inner);
        let nch = inner.div_ceil(cw);
        parallel_for(outer * nch, grain_for(3 * k * cw), |a, b| {
            simd(
                #[inline(always)]
                || {
                    let w = cw;
                    let (mut m, mut s) = (vec![T::R::NEG_INF; w], vec![T::R::ZERO; w]);
                    for item in a..b {
                        let (o, i0) = (item / nch, (item % nch) * cw);
                        let nl = cw.min(inner - i0);
                        let (m, s) = (&mut m[..nl], &mut s[..nl]);
                        let at = |j: usize| (o * k + j) * inner + i0;
                        m.fill(T::R::NEG_INF);
                        s.fill(T::R::ZERO);
                        for j in 0..k {
                            for (ml, &v) in m.iter_mut().zip(&src[at(j)..at(j) + nl]) {
                                let v = v.to_r();
                                *ml = if v > *ml { v } else { *ml };
                            }
                        }
                        for j in 0..k {
                            for ((sl, &ml), &v) in s.iter_mut().zip(m.iter()).zip(&src[at(j)..at(j) + nl]) {
                                *sl = *sl + (v.to_r() - ml).exp_();
                            }
                        }
                        for sl in s.iter_mut() {
                            *sl = if log { sl.ln_() } else { T::R::ONE / *sl };
                        }
                        for j in 0..k {
                            let ys = out(at(j), nl);
                            for (((yo, &v), &ml), &sl) in
                                ys.iter_mut().zip(&src[at(j)..at(j) + nl]).zip(m.iter()).zip(s.iter())
                            {
                                let d = v.to_r() - ml;
                                *yo = T::from_r(if log { d - sl } else { d.exp_() * sl });
                            }
                        }
                    }
                },
            )
        });
    });
    Ok(Tensor::from_cpu_buffer(buf, x.shape().clone(), T::DTYPE))
}

/// Softmax of a contiguous f32 tensor over its last dim, written straight into `out` (a
/// contiguous f32 tensor of the same shape, not sharing `x`'s storage); `false` when the
/// tensors do not qualify, and the caller computes a fresh result instead.
pub(crate) fn softmax_lastdim_into(x: &Tensor, dim: isize, log: bool, out: &Tensor) -> Result<bool> {
    let last = x.rank() > 0 && wrap_dim(dim, x.rank())? == x.rank() - 1;
    let fits = x.dtype() == DType::F32 && out.dtype() == DType::F32 && out.dims() == x.dims();
    if !(last && fits && x.is_contiguous() && out.is_contiguous() && !out.same_storage(x) && x.numel() > 0) {
        return Ok(false);
    }
    let k = x.dims()[x.rank() - 1];
    let o = x.numel() / k;
    let stream = streams(x.numel(), k);
    out.with_elems_mut_reading::<f32, _>(x, |d, s| {
        let (src, dst) = (SendPtr(s.as_ptr() as *mut f32), SendPtr(d.as_mut_ptr()));
        parallel_for(o, grain_for(4 * k), |a, b| {
            let (src, dst) = (src, dst);
            // SAFETY: both slices hold `o * k` elements; threads get disjoint rows.
            unsafe { rows_f32(src.0.add(a * k), dst.0.add(a * k), b - a, k, log, stream) }
        });
    })?;
    Ok(true)
}

fn softmax_impl(x: &Tensor, dim: isize, log: bool) -> Result<Tensor> {
    x.device().check_available()?;
    let d = wrap_dim(dim, x.rank())?;
    if !x.dtype().is_floating_point() {
        let name = if log { "log_softmax_lastdim_kernel_impl" } else { "softmax_lastdim_kernel_impl" };
        bail!(DType, "\"{name}\" not implemented for '{}'", x.dtype().type_name());
    }
    if x.device().is_cuda() {
        return crate::cuda::softmax(x, d, log);
    }
    if x.numel() == 0 {
        // no rows to walk, however many the other sizes make
        return Tensor::empty(x.shape(), x.dtype());
    }
    let x = x.contiguous()?;
    let (o, k, i) = if x.rank() == 0 {
        (1, 1, 1)
    } else {
        let dims = x.dims();
        (dims[..d].iter().product(), dims[d], dims[d + 1..].iter().product())
    };
    if x.dtype() == DType::F32 && i == 1 && x.numel() > 0 {
        let mut buf = CpuBuffer::for_elems(x.numel(), 4)?;
        let dst = SendPtr(buf.as_mut_ptr() as *mut f32);
        let stream = streams(x.numel(), k);
        {
            let g = x.storage().read();
            // SAFETY: x is contiguous with `o * k` elements from its offset.
            let src = SendPtr(unsafe { (g.cpu().as_ptr() as *mut f32).add(x.storage_offset()) });
            parallel_for(o, grain_for(4 * k), |a, b| {
                let (src, dst) = (src, dst);
                // SAFETY: rows a..b lie within both buffers; threads get disjoint rows.
                unsafe { rows_f32(src.0.add(a * k), dst.0.add(a * k), b - a, k, log, stream) }
            });
        }
        return Ok(Tensor::from_cpu_buffer(buf, x.shape().clone(), DType::F32));
    }
    if matches!(x.dtype(), DType::BF16 | DType::F16) && i == 1 {
        // Rows of 16-bit floats: converted to f32 (a vectorized pass), the f32 row kernel,
        // and rounded back: the same f32 arithmetic as the generic kernel, several times
        // faster (attention's probabilities under autocast).
        let _g = crate::autograd::no_grad();
        return softmax_impl(&x.to_dtype(DType::F32)?, dim, log)?.to_dtype(x.dtype());
    }
    dispatch_float!(x.dtype(), T => softmax_generic::<T>(&x, (o, k, i), log), _ => unreachable!())
}

impl Tensor {
    /// `torch.softmax(x, dim)`: `exp(x) / sum(exp(x))` along `dim`, computed stably.
    /// Floating-point inputs only (use [`Tensor::softmax_dtype`] for integers); f16 and bf16
    /// compute in f32. A row containing NaN, or only `-inf`, gives NaN, as in PyTorch.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([[1f32, 1.], [0., 1000.]])?;
    /// assert_eq!(x.softmax(-1)?.to_vec2::<f32>()?, vec![vec![0.5, 0.5], vec![0., 1.]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        if let Some(r) = crate::autocast::dispatch("softmax", &[Some(self)], |t| t.at(0).softmax(dim)) {
            return r;
        }
        crate::profiler_record::profiled!("aten::softmax", [self], softmax_ad(self, dim, false))
    }

    /// `torch.log_softmax(x, dim)`: `x - max - log(sum(exp(x - max)))` along `dim`.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let y = Tensor::new([0f32, 0.])?.log_softmax(0)?.to_vec::<f32>()?;
    /// assert!((y[0] + 2f32.ln()).abs() < 1e-6);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        if let Some(r) = crate::autocast::dispatch("log_softmax", &[Some(self)], |t| t.at(0).log_softmax(dim))
        {
            return r;
        }
        crate::profiler_record::profiled!("aten::log_softmax", [self], softmax_ad(self, dim, true))
    }

    /// `torch.softmax(x, dim, dtype=dtype)`: converts to the floating-point `dtype` first.
    pub fn softmax_dtype(&self, dim: isize, dtype: DType) -> Result<Tensor> {
        softmax_ad(&self.to_dtype(dtype)?, dim, false)
    }

    /// `torch.log_softmax(x, dim, dtype=dtype)`: converts to the floating-point `dtype` first.
    pub fn log_softmax_dtype(&self, dim: isize, dtype: DType) -> Result<Tensor> {
        softmax_ad(&self.to_dtype(dtype)?, dim, true)
    }
}

/// Softmax or log-softmax, recorded for autograd. With `y` the output and `g` its gradient:
/// softmax: `y * (g - sum(g * y))`; log-softmax: `g - exp(y) * sum(g)`, sums along `dim`.
fn softmax_ad(x: &Tensor, dim: isize, log: bool) -> Result<Tensor> {
    let rec = needs_grad(&[x]);
    let y = {
        let _g = paused(rec);
        softmax_impl(x, dim, log)?
    };
    if !rec {
        return Ok(y);
    }
    let name = if log { "LogSoftmaxBackward0" } else { "SoftmaxBackward0" };
    record1(name, &[x], y, &[Save::Output(0)], move |ctx, g| {
        let (y, g) = (ctx.saved(0)?, &g[0]);
        let d = [dim];
        let gx = if log {
            g.sub(&y.exp()?.mul(&g.sum_dims(&d, true)?)?)?
        } else {
            y.mul(&g.sub(&g.mul(&y)?.sum_dims(&d, true)?)?)?
        };
        Ok(vec![Some(gx)])
    })
}
