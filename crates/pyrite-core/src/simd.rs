//! Vectorised math kernels with run-time CPU dispatch (AVX-512, AVX2+FMA, baseline).
//!
//! Each kernel is one portable scalar loop written so that LLVM vectorises it; the same loop is
//! compiled again inside `#[target_feature]` functions and the widest one the CPU supports is
//! picked at run time. On AVX-512 machines `exp` has a hand-written kernel instead (fused
//! multiply-adds and `vscalefps`: about half the instructions of the vectorised loop); it
//! agrees with the portable one to within 1 ulp, not bit for bit.

/// `exp` for f32 without a libm call: Cody-Waite range reduction and a degree-6 polynomial
/// (Cephes' `expf`), with the 2^n scaling split in two so that results are right down into the
/// subnormal range. Max error about 1 ulp.
#[inline(always)]
pub(crate) fn expf(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    let xc = x.clamp(-104.0, 89.0);
    let t = xc * LOG2E + MAGIC;
    let fx = t - MAGIC;
    let n = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = xc - fx * C1 - fx * C2;
    let mut y = 1.987_569_1e-4f32;
    y = y * r + 1.398_199_9e-3;
    y = y * r + 8.333_452e-3;
    y = y * r + 4.166_579_6e-2;
    y = y * r + 1.666_666_5e-1;
    y = y * r + 5.000_000_1e-1;
    y = y * r * r + r + 1.0;
    let n1 = n >> 1;
    let n2 = n - n1;
    let p1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let p2 = f32::from_bits(((n2 + 127) as u32) << 23);
    let v = y * p1 * p2;
    if x.is_nan() {
        x
    } else {
        v
    }
}

#[inline(always)]
unsafe fn exp_loop(src: *const f32, dst: *mut f32, n: usize) {
    unsafe {
        for i in 0..n {
            *dst.add(i) = expf(*src.add(i));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn exp_avx512(src: *const f32, dst: *mut f32, n: usize, stream: bool) {
    unsafe {
        use std::arch::x86_64::*;
        // The same reduction and polynomial as `expf`, with fused multiply-adds; `scalef` applies
        // 2^n with correct overflow to infinity and gradual underflow, so no split scaling.
        #[inline(always)]
        unsafe fn exp16(x: __m512) -> __m512 {
            unsafe {
                // max/min return their second operand when either is NaN: NaN inputs stay NaN.
                let xc = _mm512_min_ps(_mm512_set1_ps(89.0), _mm512_max_ps(_mm512_set1_ps(-104.0), x));
                let fx = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                    _mm512_mul_ps(xc, _mm512_set1_ps(std::f32::consts::LOG2_E)),
                );
                let r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693_359_4), xc);
                let r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.121_944_4e-4), r);
                let mut y = _mm512_set1_ps(1.987_569_1e-4);
                y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.398_199_9e-3));
                y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.333_452e-3));
                y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.166_579_6e-2));
                y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.666_666_5e-1));
                y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.000_000_1e-1));
                y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r);
                y = _mm512_add_ps(y, _mm512_set1_ps(1.0));
                _mm512_scalef_ps(y, fx)
            }
        }
        let mut i = 0;
        if stream {
            // Plain stores up to a cache-line boundary, then non-temporal ones (see crate::stream).
            let head = (((64 - (dst as usize) % 64) % 64) / 4).min(n);
            if head > 0 {
                let m: __mmask16 = ((1u32 << head) - 1) as u16;
                _mm512_mask_storeu_ps(dst, m, exp16(_mm512_maskz_loadu_ps(m, src)));
                i = head;
            }
            while i + 16 <= n {
                _mm512_stream_ps(dst.add(i), exp16(_mm512_loadu_ps(src.add(i))));
                i += 16;
            }
            _mm_sfence();
        }
        while i + 16 <= n {
            _mm512_storeu_ps(dst.add(i), exp16(_mm512_loadu_ps(src.add(i))));
            i += 16;
        }
        if i < n {
            let m: __mmask16 = ((1u32 << (n - i)) - 1) as u16;
            _mm512_mask_storeu_ps(dst.add(i), m, exp16(_mm512_maskz_loadu_ps(m, src.add(i))));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_avx2(src: *const f32, dst: *mut f32, n: usize) {
    unsafe { exp_loop(src, dst, n) }
}

/// `dst[i] = exp(src[i])` for `n` elements; `src` may equal `dst`. With `stream`, the results
/// are written with non-temporal stores (for outputs larger than the caches, see
/// [`crate::stream`]).
///
/// # Safety
/// Both pointers must be valid for `n` elements.
pub(crate) unsafe fn exp_f32(src: *const f32, dst: *mut f32, n: usize, stream: bool) {
    unsafe {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return exp_avx512(src, dst, n, stream);
            }
            if stream {
                return crate::stream::stream_out(dst, n, |s, c, into| exp_f32(src.add(s), into, c, false));
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return exp_avx2(src, dst, n);
            }
        }
        exp_loop(src, dst, n)
    }
}

/// `erfc(a)` for `a >= 0` without a libm call: `t P(t) exp(-a^2)` with `t = 1 / (1 + a/2)` and
/// `P` of degree 10, fitted (least squares in relative error, f64) to `erfc(a) exp(a^2) / t`
/// on `[0, 10.1]`; beyond, `erfc` is below f32's smallest subnormal. Relative error about 2e-7
/// from the polynomial, plus `exp`'s; branch-free, so it vectorises.
#[inline(always)]
pub(crate) fn erfc_nonneg(a: f32) -> f32 {
    const P: [f32; 11] = [
        0.282_091_3,
        0.282_179_98,
        0.245_988_4,
        0.180_487_51,
        0.075_069_09,
        -0.016_948_733,
        0.068_444_61,
        -0.392_531_1,
        0.455_596_57,
        -0.221_662_57,
        0.041_284_923,
    ];
    let t = 1.0 / (1.0 + 0.5 * a);
    // Estrin's scheme with fused multiply-adds: depth 5 instead of Horner's 10 dependent
    // steps. `mul_add` is exact, so every CPU computes the same bits (one instruction where
    // the kernel is compiled with FMA, libm's correctly rounded `fmaf` otherwise).
    let t2 = t * t;
    let t4 = t2 * t2;
    let t8 = t4 * t4;
    let q0 = P[1].mul_add(t, P[0]);
    let q2 = P[3].mul_add(t, P[2]);
    let q4 = P[5].mul_add(t, P[4]);
    let q6 = P[7].mul_add(t, P[6]);
    let q8 = P[9].mul_add(t, P[8]);
    let r0 = q2.mul_add(t2, q0);
    let r4 = q6.mul_add(t2, q4);
    let r8 = P[10].mul_add(t2, q8);
    let p = r8.mul_add(t8, r4.mul_add(t4, r0));
    t * p * expf(-(a * a))
}

/// Exact GELU for f32, `x/2 (1 + erf(x / sqrt 2))`, computed as `x/2 (2 - erfc(z))` for
/// `z >= 0` and `x/2 erfc(-z)` below, so the negative tail keeps its relative accuracy (about
/// 1e-6 down to x = -8, where `1 + erf` cancels to 0 in libm's form and PyTorch's).
#[inline(always)]
pub(crate) fn gelu_f32(x: f32) -> f32 {
    let z = x * std::f32::consts::FRAC_1_SQRT_2;
    let e = erfc_nonneg(z.abs());
    let one_plus_erf = if z >= 0.0 { 2.0 - e } else { e };
    if x.is_nan() {
        x
    } else {
        0.5 * x * one_plus_erf
    }
}

#[inline(always)]
unsafe fn gelu_loop(src: *const f32, dst: *mut f32, n: usize) {
    unsafe {
        for i in 0..n {
            *dst.add(i) = gelu_f32(*src.add(i));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gelu_avx512(src: *const f32, dst: *mut f32, n: usize) {
    unsafe { gelu_loop(src, dst, n) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_avx2(src: *const f32, dst: *mut f32, n: usize) {
    unsafe { gelu_loop(src, dst, n) }
}

/// `dst[i] = gelu_f32(src[i])` for `n` elements, vectorised for the widest unit the CPU has
/// (every variant computes the same bits: the only fused operations are `mul_add`s, exact
/// everywhere).
///
/// # Safety
/// Both pointers must be valid for `n` elements.
pub(crate) unsafe fn gelu_f32_slice(src: *const f32, dst: *mut f32, n: usize) {
    unsafe {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return gelu_avx512(src, dst, n);
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return gelu_avx2(src, dst, n);
            }
        }
        gelu_loop(src, dst, n)
    }
}

#[cfg(test)]
mod tests {
    use super::expf;

    #[test]
    fn expf_matches_libm_within_two_ulp() {
        let mut x = -103.0f32;
        while x < 88.7 {
            let want = (x as f64).exp();
            let got = expf(x) as f64;
            let ulp = (want as f32).abs().max(f32::MIN_POSITIVE) as f64 * f32::EPSILON as f64;
            assert!((got - want).abs() <= 2.0 * ulp.max(1e-45), "exp({x}) = {got}, want {want}");
            x += 0.0137;
        }
        assert_eq!(expf(100.0), f32::INFINITY);
        assert_eq!(expf(-200.0), 0.0);
        assert!(expf(f32::NAN).is_nan());
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(0.0), 1.0);
    }

    /// Against erfc in f64 (libm): within 5e-6 relative down to x = -8 (where PyTorch's
    /// vectorised GELU, `1 + erf` in f32, loses all digits), and within 4e-7 elsewhere.
    #[test]
    fn gelu_f32_matches_the_exact_formula() {
        let mut x = -10.0f32;
        while x < 10.0 {
            let exact = 0.5 * x as f64 * libm::erfc(-(x as f64) * std::f64::consts::FRAC_1_SQRT_2);
            let got = super::gelu_f32(x) as f64;
            let rel = (got - exact).abs() / exact.abs().max(1e-30);
            let bound = if x < -8.0 {
                2e-5
            } else if x < -1.0 {
                // rounding `x / sqrt 2` costs about 2 z^2 * 6e-8 relative in the tail
                5e-6
            } else {
                4e-7
            };
            assert!(
                rel <= bound || (got - exact).abs() < 1e-38,
                "gelu({x}) = {got}, want {exact} (rel {rel:e})"
            );
            x += 0.000_73;
        }
        assert!(super::gelu_f32(f32::NAN).is_nan());
        assert_eq!(super::gelu_f32(f32::INFINITY), f32::INFINITY);
        // -inf/2 * 0, as PyTorch's (and libm's form) give
        assert!(super::gelu_f32(f32::NEG_INFINITY).is_nan());
        assert_eq!(super::gelu_f32(0.0), 0.0);
        // the dispatched kernel computes the same bits as the scalar function
        let xs: Vec<f32> = (0..1000).map(|i| -9.0 + i as f32 * 0.0181).collect();
        let mut out = vec![0f32; xs.len()];
        unsafe { super::gelu_f32_slice(xs.as_ptr(), out.as_mut_ptr(), xs.len()) };
        for (&x, &y) in xs.iter().zip(&out) {
            assert_eq!(y.to_bits(), super::gelu_f32(x).to_bits(), "gelu({x})");
        }
    }

    #[test]
    fn the_dispatched_kernel_matches_libm_within_two_ulp_at_every_length() {
        let mut xs: Vec<f32> = (0..20_000).map(|i| -103.5 + i as f32 * 0.00963).collect();
        xs.extend([
            100.0,
            -200.0,
            f32::NAN,
            f32::NEG_INFINITY,
            f32::INFINITY,
            0.0,
            -0.0,
            88.7,
            -87.3,
            -100.0,
        ]);
        for len in [xs.len(), 1, 15, 17, 33] {
            let src = &xs[xs.len() - len..];
            let mut out = vec![0.0f32; len];
            unsafe { super::exp_f32(src.as_ptr(), out.as_mut_ptr(), len, len > 16) };
            for (&x, &got) in src.iter().zip(&out) {
                let want = (x as f64).exp();
                if x.is_nan() {
                    assert!(got.is_nan());
                    continue;
                }
                let ulp = (want as f32).abs().max(f32::MIN_POSITIVE) as f64 * f32::EPSILON as f64;
                assert!(
                    (got as f64 - want).abs() <= 2.0 * ulp.max(1e-45)
                        || (want > f32::MAX as f64 && got == f32::INFINITY),
                    "exp({x}) = {got}, want {want}"
                );
            }
        }
    }
}
