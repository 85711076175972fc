//! A fused layer-norm forward: one pass per row instead of the composed form's six tensor ops
//! (`var_mean`, `sub`, `add`, `rsqrt`, `mul`, `mul`, `add`), for inference (`pyrite::nn`'s
//! `layer_norm` falls back to the composed, differentiable form whenever a gradient is needed).

use super::reduce::simd;
use super::SendPtr;
use crate::alloc::CpuBuffer;
use crate::autograd::record::needs_grad;
use crate::{DType, Result, Tensor};

/// `F.layer_norm` over the last `n` elements of each row of a contiguous f32 `x`, with f32
/// `weight` and `bias` of `n` contiguous elements: `(x - mean) / sqrt(var + eps) * w + b`
/// with the biased variance, computed in f32 as PyTorch's CPU kernel does (two passes over
/// each row, which stays in L1). `None` when the fused kernel does not apply (a gradient is
/// needed, another dtype, layout or device): the caller uses the composed form.
///
/// ```
/// use pyrite_core::ops::norm::fused_layer_norm;
/// use pyrite_core::Tensor;
/// let x = Tensor::new([[1f32, 2., 3., 4.]])?;
/// let y = fused_layer_norm(&x, 4, None, None, 1e-5)?.unwrap();
/// let want = [-1.341_635_5f32, -0.447_211_8, 0.447_211_8, 1.341_635_5];
/// for (a, b) in y.to_vec::<f32>()?.iter().zip(want) {
///     assert!((a - b).abs() < 1e-6);
/// }
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn fused_layer_norm(
    x: &Tensor,
    n: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Option<Tensor>> {
    let _prof = crate::profiler_record::op("aten::native_layer_norm", &[x]);
    let affine_ok = |t: Option<&Tensor>| {
        t.is_none_or(|t| {
            t.dtype() == DType::F32 && t.is_contiguous() && t.numel() == n && t.device() == x.device()
        })
    };
    let mut all = vec![x];
    all.extend(weight);
    all.extend(bias);
    if x.dtype() != DType::F32
        || !x.is_contiguous()
        || n == 0
        || !x.numel().is_multiple_of(n)
        || !affine_ok(weight)
        || !affine_ok(bias)
        || needs_grad(&all)
        || x.device().is_cuda()
    {
        return Ok(None);
    }
    let total = x.numel();
    let rows = total / n;
    let mut buf = CpuBuffer::for_elems(total, 4)?;
    if total > 0 {
        let out = SendPtr(buf.as_mut_ptr() as *mut f32);
        let gx = x.storage().read();
        let gw = weight.map(|w| w.storage().read());
        let gb = bias.map(|b| b.storage().read());
        // SAFETY: each tensor is contiguous with its elements from its offset.
        let px = SendPtr(unsafe { (gx.cpu().as_ptr() as *mut f32).add(x.storage_offset()) });
        let pw = gw.as_ref().map(|g| {
            SendPtr(unsafe { (g.cpu().as_ptr() as *mut f32).add(weight.unwrap().storage_offset()) })
        });
        let pb = gb
            .as_ref()
            .map(|g| SendPtr(unsafe { (g.cpu().as_ptr() as *mut f32).add(bias.unwrap().storage_offset()) }));
        let eps = eps as f32;
        let grain = (16 * 1024 / n).max(1);
        crate::threads::parallel_for(rows, grain, |r0, r1| {
            let (px, out) = (px, out);
            // SAFETY: rows r0..r1 of the input and of the fresh output, disjoint per range.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(px.0.add(r0 * n), (r1 - r0) * n),
                    std::slice::from_raw_parts_mut(out.0.add(r0 * n), (r1 - r0) * n),
                )
            };
            let w = pw.map(|p| unsafe { std::slice::from_raw_parts(p.0 as *const f32, n) });
            let b = pb.map(|p| unsafe { std::slice::from_raw_parts(p.0 as *const f32, n) });
            simd(|| {
                for (xr, yr) in src.chunks_exact(n).zip(dst.chunks_exact_mut(n)) {
                    normalize_row(xr, yr, w, b, eps);
                }
            });
        });
    }
    Ok(Some(Tensor::from_cpu_buffer(buf, x.shape().clone(), DType::F32)))
}

/// Sums in 16 lanes (vectorised), then the lanes.
#[inline(always)]
fn lane_sum(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 16];
    let mut chunks = v.chunks_exact(16);
    for c in &mut chunks {
        for j in 0..16 {
            acc[j] += f(c[j]);
        }
    }
    for (j, &e) in chunks.remainder().iter().enumerate() {
        acc[j] += f(e);
    }
    acc.iter().sum()
}

#[inline(always)]
fn normalize_row(x: &[f32], y: &mut [f32], w: Option<&[f32]>, b: Option<&[f32]>, eps: f32) {
    let n = x.len() as f32;
    let mean = lane_sum(x, |v| v) / n;
    let var = lane_sum(x, |v| (v - mean) * (v - mean)) / n;
    let rstd = 1.0 / (var + eps).sqrt();
    match (w, b) {
        (Some(w), Some(b)) => {
            for i in 0..x.len() {
                y[i] = (x[i] - mean) * rstd * w[i] + b[i];
            }
        }
        (Some(w), None) => {
            for i in 0..x.len() {
                y[i] = (x[i] - mean) * rstd * w[i];
            }
        }
        (None, Some(b)) => {
            for i in 0..x.len() {
                y[i] = (x[i] - mean) * rstd + b[i];
            }
        }
        (None, None) => {
            for i in 0..x.len() {
                y[i] = (x[i] - mean) * rstd;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fused_layer_norm;
    use crate::{DType, Tensor};

    /// The composed form, as `pyrite::nn::functional::layer_norm` computes it with autograd.
    fn composed(x: &Tensor, w: Option<&Tensor>, b: Option<&Tensor>, eps: f64) -> Tensor {
        let (v, m) = x.var_mean(&[-1], 0.0, true).unwrap();
        let mut y = x.sub(&m).unwrap().mul(&v.add_scalar(eps).unwrap().rsqrt().unwrap()).unwrap();
        if let Some(w) = w {
            y = y.mul(w).unwrap();
        }
        if let Some(b) = b {
            y = y.add(b).unwrap();
        }
        y
    }

    #[test]
    fn matches_the_composed_form() {
        crate::manual_seed(3);
        for (rows, n) in [(648, 384), (3, 17), (1, 1), (5, 64)] {
            let x = Tensor::randn([rows, n], DType::F32)
                .unwrap()
                .mul_scalar(3.0)
                .unwrap()
                .add_scalar(1.5)
                .unwrap();
            let w = Tensor::randn([n], DType::F32).unwrap();
            let b = Tensor::randn([n], DType::F32).unwrap();
            for (wo, bo) in [(Some(&w), Some(&b)), (None, None), (Some(&w), None), (None, Some(&b))] {
                let got = fused_layer_norm(&x, n, wo, bo, 1e-5).unwrap().unwrap();
                let want = composed(&x, wo, bo, 1e-5);
                assert!(got.allclose(&want, 1e-5, 1e-5, false).unwrap(), "rows {rows} n {n}");
            }
        }
    }

    #[test]
    fn declines_what_it_does_not_cover() {
        let x = Tensor::randn([4, 8], DType::F32).unwrap();
        assert!(fused_layer_norm(&x.t().unwrap(), 4, None, None, 1e-5).unwrap().is_none());
        assert!(fused_layer_norm(&x.to_dtype(DType::F64).unwrap(), 8, None, None, 1e-5).unwrap().is_none());
        let w = Tensor::ones([8], DType::F32).unwrap().requires_grad_(true).unwrap();
        assert!(fused_layer_norm(&x, 8, Some(&w), None, 1e-5).unwrap().is_none());
        let _g = crate::autograd::no_grad();
        assert!(fused_layer_norm(&x, 8, Some(&w), None, 1e-5).unwrap().is_some());
    }
}
