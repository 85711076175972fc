//! Vectorised math kernels with run-time CPU dispatch (AVX-512, AVX2+FMA, baseline).
//!
//! Each kernel is one portable scalar loop written so that LLVM vectorises it; the same loop is
//! compiled again inside `#[target_feature]` functions and the widest one the CPU supports is
//! picked at run time. All paths execute the same IEEE operations in the same order (no FMA
//! contraction), so results do not depend on the CPU or on the tensor's layout.

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
    for i in 0..n {
        *dst.add(i) = expf(*src.add(i));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn exp_avx512(src: *const f32, dst: *mut f32, n: usize) {
    exp_loop(src, dst, n)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_avx2(src: *const f32, dst: *mut f32, n: usize) {
    exp_loop(src, dst, n)
}

/// `dst[i] = exp(src[i])` for `n` elements; `src` may equal `dst`.
///
/// # Safety
/// Both pointers must be valid for `n` elements.
pub(crate) unsafe fn exp_f32(src: *const f32, dst: *mut f32, n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return exp_avx512(src, dst, n);
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return exp_avx2(src, dst, n);
        }
    }
    exp_loop(src, dst, n)
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
}
