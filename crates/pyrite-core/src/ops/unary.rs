//! Unary pointwise ops: math functions (which promote integers to the default float dtype),
//! activations, rounding, clamp, lerp, nan_to_num.

use super::derivatives::{check_out, unary_ad};
use super::{map1, map3, Out};
use crate::autograd::record::{needs_grad, paused, record1, Save};
use crate::dtype::Scalar;
use crate::ops::binary::scalar_tensor;
use crate::shape::broadcast_shapes;
use crate::{bail, dispatch_all, get_default_dtype, DType, Element, Result, Tensor};
use half::{bf16, f16};

/// Math on f32 and f64 beyond what std offers, with one name per function.
pub(crate) trait MathExt: Copy {
    fn erf_(self) -> Self;
    fn erfinv_(self) -> Self;
}

impl MathExt for f64 {
    fn erf_(self) -> f64 {
        libm::erf(self)
    }
    fn erfinv_(self) -> f64 {
        erfinv_f64(self)
    }
}
impl MathExt for f32 {
    fn erf_(self) -> f32 {
        libm::erff(self)
    }
    fn erfinv_(self) -> f32 {
        erfinv_f64(self as f64) as f32
    }
}

/// Inverse error function: Giles' single-precision approximation refined by two Newton steps.
fn erfinv_f64(y: f64) -> f64 {
    if y.is_nan() || !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y == 1.0 {
        return f64::INFINITY;
    }
    if y == -1.0 {
        return f64::NEG_INFINITY;
    }
    let mut w = -((1.0 - y) * (1.0 + y)).ln();
    let mut x = if w < 5.0 {
        w -= 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ] {
            p = c + p * w;
        }
        p * y
    } else {
        w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ] {
            p = c + p * w;
        }
        p * y
    };
    // Newton: x -= (erf(x) - y) / (2/sqrt(pi) * exp(-x^2))
    for _ in 0..2 {
        let err = libm::erf(x) - y;
        x -= err / (std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp());
    }
    x
}

/// Applies a float function, choosing the f32 or f64 body by dtype; integer and bool inputs
/// are first converted to the default float dtype; f16 and bf16 compute in f32.
fn float_unary(
    x: &Tensor,
    out: Out<'_>,
    name: &str,
    f32op: impl Fn(f32) -> f32 + Sync + Send + Copy,
    f64op: impl Fn(f64) -> f64 + Sync + Send + Copy,
) -> Result<Tensor> {
    x.device().check_available()?;
    let x = if x.dtype().is_floating_point() { x.clone() } else { x.to_dtype(get_default_dtype())? };
    if x.device().is_cuda() {
        return crate::cuda::unary(&x, name, out, [0.0; 2]);
    }
    let shape = x.shape().clone();
    if let Out::Into(o) = out
        && o.dtype() != x.dtype()
    {
        let r = float_unary(&x, Out::New, name, f32op, f64op)?;
        if !o.dtype().is_floating_point() {
            bail!(
                DType,
                "{name}: result type {} can't be cast to the desired output type {}",
                x.dtype(),
                o.dtype()
            );
        }
        o.copy_(&r)?;
        return Ok(o.clone());
    }
    match x.dtype() {
        DType::F32 => map1::<f32, f32>(&x, &shape, out, name, f32op),
        DType::F64 => map1::<f64, f64>(&x, &shape, out, name, f64op),
        DType::F16 => map1::<f16, f16>(&x, &shape, out, name, move |v| f16::from_f32(f32op(v.to_f32()))),
        DType::BF16 => map1::<bf16, bf16>(&x, &shape, out, name, move |v| bf16::from_f32(f32op(v.to_f32()))),
        _ => unreachable!(),
    }
}

/// Writes the same body for f32 and f64.
macro_rules! float_op {
    ($x:expr, $out:expr, $name:expr, |$v:ident| $body:expr) => {
        float_unary($x, $out, $name, move |$v: f32| -> f32 { $body }, move |$v: f64| -> f64 { $body })
    };
}

#[inline(always)]
fn sigmoid32(v: f32) -> f32 {
    1.0 / (1.0 + crate::simd::expf(-v))
}

macro_rules! float_methods {
    ($($name:ident, $out:ident, $doc:literal, |$v:ident| $body:expr;)*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", stringify!($name), "`: ", $doc, ". Integer inputs give the default float dtype.")]
            pub fn $name(&self) -> Result<Tensor> {
                if let Some(r) = crate::autocast::dispatch(stringify!($name), &[Some(self)], |t| t.at(0).$name()) {
                    return r;
                }
                let _prof = crate::profiler_record::op(concat!("aten::", stringify!($name)), &[self]);
                unary_ad(stringify!($name), self, float_op!(self, Out::New, stringify!($name), |$v| $body)?)
            }
            #[doc = concat!("`torch.", stringify!($name), "(self, out=out)`.")]
            pub fn $out(&self, out: &Tensor) -> Result<Tensor> {
                check_out(stringify!($name), &[self])?;
                float_op!(self, Out::Into(out), stringify!($name), |$v| $body)
            }
        )*}
    };
}

float_methods! {
    sqrt, sqrt_out, "square root", |v| v.sqrt();
    rsqrt, rsqrt_out, "reciprocal square root", |v| 1.0 / v.sqrt();
    exp2, exp2_out, "2 to the power of each element", |v| v.exp2();
    log, log_out, "natural logarithm", |v| v.ln();
    log2, log2_out, "base-2 logarithm", |v| v.log2();
    log10, log10_out, "base-10 logarithm", |v| v.log10();
    log1p, log1p_out, "`log(1 + x)`, accurate near zero", |v| v.ln_1p();
    expm1, expm1_out, "`exp(x) - 1`, accurate near zero", |v| v.exp_m1();
    sin, sin_out, "sine", |v| v.sin();
    cos, cos_out, "cosine", |v| v.cos();
    tan, tan_out, "tangent", |v| v.tan();
    asin, asin_out, "arc sine", |v| v.asin();
    acos, acos_out, "arc cosine", |v| v.acos();
    atan, atan_out, "arc tangent", |v| v.atan();
    sinh, sinh_out, "hyperbolic sine", |v| v.sinh();
    cosh, cosh_out, "hyperbolic cosine", |v| v.cosh();
    tanh, tanh_out, "hyperbolic tangent", |v| v.tanh();
    erf, erf_out, "error function", |v| v.erf_();
    erfinv, erfinv_out, "inverse error function", |v| v.erfinv_();
    reciprocal, reciprocal_out, "`1 / x`", |v| 1.0 / v;
}

/// Fails for non-float inputs, as PyTorch's activation kernels do ("not implemented for 'Long'").
fn require_float(x: &Tensor, kernel: &str) -> Result<()> {
    if !x.dtype().is_floating_point() {
        bail!(DType, "\"{kernel}\" not implemented for '{}'", x.dtype().type_name());
    }
    Ok(())
}

impl Tensor {
    /// `torch.exp`: e to the power of each element. Integer inputs give the default float dtype.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let y = Tensor::new([0f32, 1.]).unwrap().exp().unwrap();
    /// assert!((y.to_vec::<f32>().unwrap()[1] - std::f32::consts::E).abs() < 1e-6);
    /// ```
    pub fn exp(&self) -> Result<Tensor> {
        if let Some(r) = crate::autocast::dispatch("exp", &[Some(self)], |t| t.at(0).exp()) {
            return r;
        }
        crate::profiler_record::profiled!("aten::exp", [self], {
            unary_ad("exp", self, self.exp_impl(Out::New)?)
        })
    }

    /// `torch.exp(self, out=out)`.
    pub fn exp_out(&self, out: &Tensor) -> Result<Tensor> {
        check_out("exp", &[self])?;
        self.exp_impl(Out::Into(out))
    }

    fn exp_impl(&self, out: Out<'_>) -> Result<Tensor> {
        let contiguous_out = match out {
            Out::New => true,
            Out::Into(o) => o.is_contiguous() && o.dtype() == DType::F32 && o.dims() == self.dims(),
        };
        if self.dtype() == DType::F32 && self.is_contiguous() && contiguous_out && !self.device().is_cuda() {
            // Vectorised path; computes exactly what the generic path computes.
            let n = self.numel();
            let x = match out {
                Out::Into(o) if self.same_storage(o) && self.layout() != o.layout() => self.deep_clone()?,
                _ => self.clone(),
            };
            // `src` and `dst` hold `n` elements each, in distinct buffers.
            let run = |src: *const f32, dst: *mut f32| {
                let (src, dst) = (src as usize, dst as usize);
                let stream = crate::stream::worth_streaming(n * 4);
                crate::threads::parallel_for(n, super::GRAIN, |a, b| unsafe {
                    let (src, dst) = ((src as *const f32).add(a), (dst as *mut f32).add(a));
                    crate::simd::exp_f32(src, dst, b - a, stream)
                });
            };
            return match out {
                Out::New => {
                    let mut buf = crate::alloc::CpuBuffer::for_elems(n, 4)?;
                    let g = x.storage().read();
                    // SAFETY: x is contiguous with `n` elements from its offset.
                    run(
                        unsafe { (g.cpu().as_ptr() as *const f32).add(x.storage_offset()) },
                        buf.as_mut_ptr() as *mut f32,
                    );
                    Ok(Tensor::from_cpu_buffer(buf, self.shape().clone(), DType::F32))
                }
                Out::Into(o) => {
                    o.check_inplace_allowed()?;
                    if o.same_storage(&x) {
                        // exp_ on itself: elementwise in place through the write lock.
                        o.with_elems_mut::<f32, _>(|s| unsafe {
                            let p = s.as_mut_ptr();
                            crate::simd::exp_f32(p, p, s.len(), false)
                        })?;
                    } else {
                        o.with_elems_mut_reading::<f32, _>(&x, |d, s| run(s.as_ptr(), d.as_mut_ptr()))?;
                    }
                    Ok(o.clone())
                }
            };
        }
        float_unary(self, out, "exp", crate::simd::expf, |v: f64| v.exp())
    }

    /// `torch.frac`: fractional part, `x - trunc(x)` (floats only).
    pub fn frac(&self) -> Result<Tensor> {
        unary_ad("frac", self, self.frac_into(Out::New)?)
    }

    fn frac_into(&self, out: Out<'_>) -> Result<Tensor> {
        require_float(self, "frac_cpu")?;
        float_op!(self, out, "frac", |v| v - v.trunc())
    }

    /// `torch.nn.functional.mish`: `x * tanh(softplus(x))` (floats only).
    pub fn mish(&self) -> Result<Tensor> {
        require_float(self, "mish_cpu")?;
        unary_ad(
            "mish",
            self,
            float_op!(self, Out::New, "mish", |v| v * (if v > 20.0 { v } else { v.exp().ln_1p() }).tanh())?,
        )
    }

    /// `torch.sigmoid`: `1 / (1 + exp(-x))`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::sigmoid", [self], {
            unary_ad("sigmoid", self, self.sigmoid_into(Out::New)?)
        })
    }

    fn sigmoid_into(&self, out: Out<'_>) -> Result<Tensor> {
        float_unary(self, out, "sigmoid", sigmoid32, |v: f64| 1.0 / (1.0 + (-v).exp()))
    }

    /// `torch.nn.functional.silu`: `x * sigmoid(x)`.
    pub fn silu(&self) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::silu", [self], {
            require_float(self, "silu_cpu")?;
            unary_ad(
                "silu",
                self,
                float_unary(self, Out::New, "silu", |v| v * sigmoid32(v), |v: f64| v / (1.0 + (-v).exp()))?,
            )
        })
    }

    /// `torch.nn.functional.gelu(x, approximate='none' | 'tanh')`.
    pub fn gelu(&self, tanh_approximation: bool) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::gelu", [self], {
            require_float(self, "GeluKernelImpl")?;
            if tanh_approximation {
                let y = float_op!(self, Out::New, "gelu_tanh", |v| {
                    let k = 0.797_884_560_802_865_4;
                    0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh())
                })?;
                unary_ad("gelu_tanh", self, y)
            } else {
                let y = if self.dtype() == DType::F32 && self.is_contiguous() && !self.device().is_cuda() {
                    // the vectorised kernel (every path computes `simd::gelu_f32`'s bits)
                    let n = self.numel();
                    let mut buf = crate::alloc::CpuBuffer::for_elems(n, 4)?;
                    if n > 0 {
                        let g = self.storage().read();
                        // SAFETY: self is contiguous with `n` elements from its offset; the
                        // output is a fresh buffer of `n` elements, written in disjoint ranges.
                        let src =
                            unsafe { (g.cpu().as_ptr() as *const f32).add(self.storage_offset()) } as usize;
                        let dst = buf.as_mut_ptr() as usize;
                        crate::threads::parallel_for(n, super::GRAIN / 8, |a, b| unsafe {
                            crate::simd::gelu_f32_slice(
                                (src as *const f32).add(a),
                                (dst as *mut f32).add(a),
                                b - a,
                            )
                        });
                    }
                    Tensor::from_cpu_buffer(buf, self.shape().clone(), DType::F32)
                } else {
                    float_unary(self, Out::New, "gelu", crate::simd::gelu_f32, |v: f64| {
                        0.5 * v * (1.0 + (v * std::f64::consts::FRAC_1_SQRT_2).erf_())
                    })?
                };
                unary_ad("gelu", self, y)
            }
        })
    }

    /// `torch.nn.functional.softplus(x, beta, threshold)`: `log(1 + exp(beta x)) / beta`, linear
    /// above `threshold`.
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<Tensor> {
        if let Some(r) =
            crate::autocast::dispatch("softplus", &[Some(self)], |t| t.at(0).softplus(beta, threshold))
        {
            return r;
        }
        require_float(self, "softplus_cpu")?;
        let (b32, t32) = (beta as f32, threshold as f32);
        let y = float_unary(
            self,
            Out::New,
            "softplus",
            move |v| if v * b32 > t32 { v } else { (v * b32).exp().ln_1p() / b32 },
            move |v| if v * beta > threshold { v } else { (v * beta).exp().ln_1p() / beta },
        )?;
        if !needs_grad(&[self]) {
            return Ok(y);
        }
        // d/dx = sigmoid(beta x) below the threshold, 1 above it
        record1("SoftplusBackward0", &[self], y, &[Save::Input(self)], move |ctx, g| {
            let bx = ctx.saved(0)?.mul_scalar(beta)?;
            let d = bx.sigmoid()?.masked_fill(&bx.gt_scalar(threshold)?, 1.0)?;
            Ok(vec![Some(g[0].mul(&d)?)])
        })
    }

    /// `torch.relu`: `max(x, 0)`, keeping the dtype; NaN stays NaN.
    pub fn relu(&self) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::relu", [self], {
            unary_ad("relu", self, self.clamp_impl(Some(Scalar::Int(0)), None, Out::New)?)
        })
    }

    /// `torch.neg`: `-x`. Fails for bool tensors, as in PyTorch.
    pub fn neg(&self) -> Result<Tensor> {
        crate::profiler_record::profiled!("aten::neg", [self], {
            if self.dtype() == DType::Bool {
                bail!(
                    DType,
                    "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
                );
            }
            self.mul_scalar(-1)
        })
    }

    /// `torch.square`: `x * x`, keeping the dtype (bool squares to int64 as in PyTorch).
    pub fn square(&self) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return self.to_dtype(DType::I64)?.square();
        }
        self.mul(self)
    }

    /// `torch.round(x, decimals=d)`.
    pub fn round_decimals(&self, decimals: i32) -> Result<Tensor> {
        let s = 10f64.powi(decimals);
        unary_ad(
            "round",
            self,
            keep_dtype(self, Out::New, "round", move |v| (v * s).round_ties_even() / s, |v| v)?,
        )
    }
    /// `torch.clamp(x, min, max)` with optional scalar bounds; NaN propagates and `min > max`
    /// gives `max`, as in PyTorch. Float bounds on an integer tensor give a float result.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let t = Tensor::new([-2f32, 0.5, 3.]).unwrap();
    /// let c = t.clamp(Some((-1.0).into()), Some(1.0.into())).unwrap();
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![-1., 0.5, 1.]);
    /// ```
    pub fn clamp(&self, min: Option<Scalar>, max: Option<Scalar>) -> Result<Tensor> {
        let y = self.clamp_impl(min, max, Out::New)?;
        if !needs_grad(&[self]) || !y.dtype().is_floating_point() {
            return Ok(y);
        }
        // The gradient passes where min <= x <= max.
        record1("ClampBackward1", &[self], y, &[Save::Input(self)], move |ctx, g| {
            let x = ctx.saved(0)?;
            let mut keep = x.eq(&x)?; // false at NaN
            if let Some(lo) = min {
                keep = keep.logical_and(&x.ge_scalar(lo)?)?;
            }
            if let Some(hi) = max {
                keep = keep.logical_and(&x.le_scalar(hi)?)?;
            }
            Ok(vec![Some(g[0].mul(&keep.to_dtype(g[0].dtype())?)?)])
        })
    }

    /// `torch.clamp(x, min, max, out=out)`.
    pub fn clamp_out(&self, min: Option<Scalar>, max: Option<Scalar>, out: &Tensor) -> Result<Tensor> {
        check_out("clamp", &[self])?;
        self.clamp_impl(min, max, Out::Into(out))
    }

    pub(crate) fn clamp_impl(
        &self,
        min: Option<Scalar>,
        max: Option<Scalar>,
        out: Out<'_>,
    ) -> Result<Tensor> {
        if min.is_none() && max.is_none() {
            bail!(Value, "torch.clamp: At least one of 'min' or 'max' must not be None");
        }
        let mut dt = self.dtype();
        for s in [min, max].into_iter().flatten() {
            dt = s.promote_with(dt);
        }
        if dt == DType::Bool {
            bail!(DType, "\"clamp\" not implemented for 'Bool'");
        }
        let x = self.to_dtype(dt)?;
        let shape = x.shape().clone();
        let outd = match out {
            Out::Into(o) if o.dtype() != dt => {
                let r = x.clamp_impl(min, max, Out::New)?;
                o.copy_(&r)?;
                return Ok(o.clone());
            }
            o => o,
        };
        if x.device().is_cuda() {
            let (lo, hi) = (min.map_or(0.0, |s| s.to_f64()), max.map_or(0.0, |s| s.to_f64()));
            let op = match (min, max) {
                (Some(_), Some(_)) => "clamp",
                (Some(_), None) => "clamp_min",
                _ => "clamp_max",
            };
            let s = if op == "clamp_max" { [hi, 0.0] } else { [lo, hi] };
            return crate::cuda::unary(&x, op, outd, s);
        }
        // Comparisons are false for NaN, so NaN passes through; min > max gives max.
        dispatch_all!(dt, T => match (min.map(T::from_scalar), max.map(T::from_scalar)) {
            (Some(lo), Some(hi)) => map1::<T, T>(&x, &shape, outd, "clamp", move |v: T| {
                let r = if v < lo { lo } else { v };
                if r > hi { hi } else { r }
            }),
            (Some(lo), None) => map1::<T, T>(&x, &shape, outd, "clamp", move |v: T| if v < lo { lo } else { v }),
            (None, Some(hi)) => map1::<T, T>(&x, &shape, outd, "clamp", move |v: T| if v > hi { hi } else { v }),
            (None, None) => unreachable!(),
        })
    }

    /// `torch.clamp(x, min=tensor, max=tensor)` with broadcast tensor bounds.
    pub fn clamp_tensor(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
        match (min, max) {
            (None, None) => bail!(Value, "torch.clamp: At least one of 'min' or 'max' must not be None"),
            (Some(lo), None) => self.maximum(lo),
            (None, Some(hi)) => self.minimum(hi),
            (Some(lo), Some(hi)) => self.maximum(lo)?.minimum(hi),
        }
    }

    /// `torch.lerp(self, end, weight)`: `self + weight * (end - self)`, computed as PyTorch does
    /// for accuracy near `weight = 1`.
    pub fn lerp(&self, end: &Tensor, weight: &Tensor) -> Result<Tensor> {
        let dt = crate::promote_types(self.dtype(), end.dtype());
        if !dt.is_floating_point() {
            bail!(DType, "lerp: expected floating-point tensors, got {} and {}", self.dtype(), end.dtype());
        }
        let shape = broadcast_shapes(
            broadcast_shapes(self.dims(), end.dims(), "lerp")?.dims(),
            weight.dims(),
            "lerp",
        )?;
        let rec = needs_grad(&[self, end, weight]);
        let y = {
            let _g = paused(rec);
            let (a, b, w) = (self.to_dtype(dt)?, end.to_dtype(dt)?, weight.to_dtype(dt)?);
            if [&a, &b, &w].iter().any(|t| t.device().is_cuda()) {
                let expr = "((c < 0 ? -c : c) < 0.5 ? a + c * (b - a) : b - (b - a) * (1 - c))";
                crate::cuda::map("lerp", expr, &[&a, &b, &w], dt, dt, Out::New, [0.0; 2], [0; 2])
            } else {
                crate::dispatch_float!(dt, T => map3::<T, T, T, T>(&a, &b, &w, &shape, Out::New, "lerp", |s, e, w| {
                let (s, e, w) = (s.to_f64(), e.to_f64(), w.to_f64());
                T::from_f64(if w.abs() < 0.5 { s + w * (e - s) } else { e - (e - s) * (1.0 - w) })
            }), _ => unreachable!())
            }?
        };
        if !rec {
            return Ok(y);
        }
        let saves = [Save::Input(self), Save::Input(end), Save::Input(weight)];
        record1("LerpBackward1", &[self, end, weight], y, &saves, |ctx, g| {
            let (s, e, w) = (ctx.saved(0)?, ctx.saved(1)?, ctx.saved(2)?);
            let g = &g[0];
            Ok(vec![
                ctx.needs_input_grad(0).then(|| g.mul(&w.rsub_scalar(1.0)?)).transpose()?,
                ctx.needs_input_grad(1).then(|| g.mul(&w)).transpose()?,
                ctx.needs_input_grad(2).then(|| g.mul(&e.sub(&s)?)).transpose()?,
            ])
        })
    }

    /// `torch.lerp(self, end, weight)` with a scalar weight.
    pub fn lerp_scalar(&self, end: &Tensor, weight: f64) -> Result<Tensor> {
        let w = scalar_tensor(Scalar::Float(weight), self.dtype())?;
        self.lerp(end, &w)
    }

    /// `torch.nan_to_num(x, nan, posinf, neginf)`: defaults are 0 and the dtype's largest and
    /// smallest finite values. Integer tensors are returned unchanged.
    pub fn nan_to_num(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Result<Tensor> {
        let shape = self.shape().clone();
        let replaced = if self.device().is_cuda() && self.dtype().is_floating_point() {
            let (mx, mn) = finite_range(self.dtype());
            let (dt, ins) = (self.dtype(), [self]);
            let f = [nan, posinf.unwrap_or(mx)];
            let y = crate::cuda::map(
                "nan_to_num",
                "(a != a ? s0 : (isinf(a) && a > 0 ? s1 : a))",
                &ins,
                dt,
                dt,
                Out::New,
                f,
                [0; 2],
            )?;
            let ng = [neginf.unwrap_or(mn), 0.0];
            crate::cuda::map(
                "nan_to_num_neginf",
                "(isinf(a) && a < 0 ? s0 : a)",
                &[&y],
                dt,
                dt,
                Out::New,
                ng,
                [0; 2],
            )
        } else {
            crate::dispatch_float!(self.dtype(), T => {
            let (mx, mn) = finite_range(T::DTYPE);
            let pi = T::from_f64(posinf.unwrap_or(mx));
            let ni = T::from_f64(neginf.unwrap_or(mn));
            let nn = T::from_f64(nan);
            map1::<T, T>(self, &shape, Out::New, "nan_to_num", move |v: T| {
                let f = v.to_f64();
                if f.is_nan() { nn } else if f == f64::INFINITY { pi } else if f == f64::NEG_INFINITY { ni } else { v }
            })
        }, _ => self.deep_clone())
        };
        replaced.and_then(|y| {
            if !needs_grad(&[self]) {
                return Ok(y);
            }
            record1("NanToNumBackward0", &[self], y, &[Save::Input(self)], |ctx, g| {
                Ok(vec![Some(g[0].mul(&ctx.saved(0)?.isfinite()?.to_dtype(g[0].dtype())?)?)])
            })
        })
    }
}

/// Largest and smallest finite values of a float dtype.
pub(crate) fn finite_range(dt: DType) -> (f64, f64) {
    match dt {
        DType::F16 => (f16::MAX.to_f64(), f16::MIN.to_f64()),
        DType::BF16 => (bf16::MAX.to_f64(), bf16::MIN.to_f64()),
        DType::F32 => (f32::MAX as f64, f32::MIN as f64),
        _ => (f64::MAX, f64::MIN),
    }
}

/// The dtype-preserving ops and their `out=` forms (`out` must have the input's shape and
/// dtype), each from one float body (run in f64, exact for these ops) and one integer body.
macro_rules! keep_dtype_methods {
    ($($name:ident, $out:ident, $doc:literal, $ff:expr, $fi:expr;)*) => {
        impl Tensor {$(
            #[doc = $doc]
            pub fn $name(&self) -> Result<Tensor> {
                unary_ad(stringify!($name), self, keep_dtype(self, Out::New, stringify!($name), $ff, $fi)?)
            }
            #[doc = concat!("`torch.", stringify!($name), "(self, out=out)`.")]
            pub fn $out(&self, out: &Tensor) -> Result<Tensor> {
                check_out(stringify!($name), &[self, out])?;
                keep_dtype(self, Out::Into(out), stringify!($name), $ff, $fi)
            }
        )*}
    };
}

keep_dtype_methods! {
    abs, abs_out, "`torch.abs`, keeping the dtype.",
        |v: f64| if v < 0.0 { -v } else { v * 1.0 }, |v: i64| v.wrapping_abs();
    sign, sign_out, "`torch.sign`: -1, 0 or 1 (0 for NaN), keeping the dtype.",
        |v: f64| ((0.0 < v) as i32 - (v < 0.0) as i32) as f64, |v: i64| v.signum();
    floor, floor_out, "`torch.floor`; integers are returned unchanged.", f64::floor, |v| v;
    ceil, ceil_out, "`torch.ceil`; integers are returned unchanged.", f64::ceil, |v| v;
    round, round_out, "`torch.round`: round half to even; integers are returned unchanged.",
        f64::round_ties_even, |v| v;
    trunc, trunc_out, "`torch.trunc`; integers are returned unchanged.", f64::trunc, |v| v;
}

impl Tensor {
    /// `torch.neg(self, out=out)`.
    pub fn neg_out(&self, out: &Tensor) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return self.neg();
        }
        self.mul_out(&scalar_tensor(Scalar::Int(-1), self.dtype())?, out)
    }

    /// `torch.frac(self, out=out)` (floats only).
    pub fn frac_out(&self, out: &Tensor) -> Result<Tensor> {
        check_out("frac", &[self, out])?;
        self.frac_into(Out::Into(out))
    }

    /// `torch.sigmoid(self, out=out)`.
    pub fn sigmoid_out(&self, out: &Tensor) -> Result<Tensor> {
        check_out("sigmoid", &[self, out])?;
        self.sigmoid_into(Out::Into(out))
    }
}

/// A dtype-preserving op: the float body runs in f64 (exact for these ops), the integer body
/// in i64.
fn keep_dtype(
    x: &Tensor,
    out: Out<'_>,
    name: &str,
    ff: impl Fn(f64) -> f64 + Sync + Send + Copy,
    fi: impl Fn(i64) -> i64 + Sync + Send + Copy,
) -> Result<Tensor> {
    if x.device().is_cuda() {
        if !x.dtype().is_floating_point() && matches!(name, "floor" | "ceil" | "round" | "trunc") {
            // integers are returned unchanged
            return crate::cuda::unary(x, "copy", out, [0.0; 2]);
        }
        return crate::cuda::unary(x, name, out, [0.0; 2]);
    }
    let shape = x.shape().clone();
    match x.dtype() {
        DType::F32 => map1::<f32, f32>(x, &shape, out, name, move |v| ff(v as f64) as f32),
        DType::F64 => map1::<f64, f64>(x, &shape, out, name, ff),
        DType::F16 => map1::<f16, f16>(x, &shape, out, name, move |v| f16::from_f64(ff(v.to_f64()))),
        DType::BF16 => map1::<bf16, bf16>(x, &shape, out, name, move |v| bf16::from_f64(ff(v.to_f64()))),
        DType::Bool => map1::<bool, bool>(x, &shape, out, name, |v| v),
        _ => {
            dispatch_all!(x.dtype(), T => map1::<T, T>(x, &shape, out, name, move |v: T| T::from_i64(fi(v.to_i64()))))
        }
    }
}
