//! How optimizers run their update: [`Batch`] collects, for each parameter with a gradient,
//! its tensors (parameter, state, gradient) and its per-parameter coefficients, then runs one
//! fused kernel over all of them with [`pyrite_core::ops::foreach::foreach_apply`], once per
//! dtype. Kernels are written once, generic over [`Real`] (f32 and f64), and do their
//! arithmetic in the parameter's dtype with coefficients computed in f64, as PyTorch does.

use pyrite_core::ops::foreach::{foreach_apply, foreach_apply_cuda, DeviceKernel};
use pyrite_core::{bail, DType, Element, Result, Tensor};
use std::ops::{Add, Div, Mul, Neg, Sub};

/// The element types an optimizer updates: f32 and f64.
pub trait Real:
    Element
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    fn c(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    fn maxv(self, o: Self) -> Self;
    fn minv(self, o: Self) -> Self;
    /// `torch.sign`: -1, 0 or 1 (0 for 0 and NaN stays NaN).
    fn sign(self) -> Self;
    const ZERO: Self;
    const ONE: Self;
}

macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            #[inline(always)]
            fn c(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn maxv(self, o: Self) -> Self {
                // torch.maximum propagates NaN.
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else if self > o {
                    self
                } else {
                    o
                }
            }
            #[inline(always)]
            fn minv(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else if self < o {
                    self
                } else {
                    o
                }
            }
            #[inline(always)]
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    self * 0.0
                }
            }
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
        }
    };
}
real!(f32);
real!(f64);

/// `torch.lerp(a, b, w)` as ATen computes it.
#[inline(always)]
pub fn lerp<T: Real>(a: T, b: T, w: f64) -> T {
    if w.abs() < 0.5 {
        a + T::c(w) * (b - a)
    } else {
        b - (b - a) * T::c(1.0 - w)
    }
}

/// The optimizers' CUDA updates and the group sizes (arities) each runs with: what the
/// compile test builds.
pub fn device_kernels() -> Vec<(DeviceKernel<'static>, &'static [usize])> {
    vec![
        (crate::adam::DEVICE, &[4, 5]),
        (crate::sgd::DEVICE, &[2, 3]),
        (crate::rmsprop::DEVICE, &[3, 4, 5]),
        (crate::adagrad::DEVICE, &[3]),
        (crate::adadelta::DEVICE, &[4]),
        (crate::adamax::DEVICE, &[4]),
        (crate::nadam::DEVICE, &[4]),
        (crate::radam::DEVICE, &[4]),
        (crate::asgd::DEVICE, &[3]),
        (crate::rprop::DEVICE, &[4]),
    ]
}

/// An optimizer's update for CUDA tensors: the per-element C code (beside the CPU kernel it
/// mirrors) and the coefficients it reads as `c[0]`, `c[1]`, ... (see
/// [`pyrite_core::ops::foreach::DeviceKernel`]).
pub struct DeviceStep<C> {
    pub kernel: DeviceKernel<'static>,
    pub coefs: fn(&C) -> Vec<f64>,
}

/// The tensors and coefficients of one update, grouped by dtype.
pub struct Batch<C> {
    arity: usize,
    n_write: usize,
    f32: (Vec<Tensor>, Vec<C>),
    f64: (Vec<Tensor>, Vec<C>),
    device: Option<DeviceStep<C>>,
}

impl<C: Sync> Batch<C> {
    /// A batch whose items hold `arity` tensors, the first `n_write` updated in place.
    pub fn new(arity: usize, n_write: usize) -> Batch<C> {
        Batch { arity, n_write, f32: (Vec::new(), Vec::new()), f64: (Vec::new(), Vec::new()), device: None }
    }

    /// The update for CUDA tensors (without one, they are updated on host copies).
    pub fn on_cuda(mut self, step: DeviceStep<C>) -> Batch<C> {
        self.device = Some(step);
        self
    }

    /// Adds one parameter's tensors (the parameter first) and its coefficients.
    pub fn push(&mut self, name: &str, tensors: Vec<Tensor>, coef: C) -> Result<()> {
        debug_assert_eq!(tensors.len(), self.arity);
        let list = match tensors[0].dtype() {
            DType::F32 => &mut self.f32,
            DType::F64 => &mut self.f64,
            d => bail!(DType, "{name}: parameters of dtype {d:?} are not supported (f32 and f64 are; keep f32 master weights for mixed precision)"),
        };
        list.0.extend(tensors);
        list.1.push(coef);
        Ok(())
    }

    /// Runs the kernel over every item: `k32` for f32 parameters, `k64` for f64 ones.
    pub fn run(
        self,
        k32: impl Fn(&C, &mut [&mut [f32]], &[&[f32]]) + Sync,
        k64: impl Fn(&C, &mut [&mut [f64]], &[&[f64]]) + Sync,
    ) -> Result<()> {
        let (arity, n_write) = (self.arity, self.n_write);
        let device = self.device.as_ref();
        if !self.f32.1.is_empty() {
            let coefs = &self.f32.1;
            if !on_cuda(&self.f32.0, coefs, arity, n_write, device)? {
                on_host(&self.f32.0, arity, n_write, |ts| {
                    foreach_apply::<f32>(ts, arity, n_write, &|g, w, r| k32(&coefs[g], w, r))
                })?;
            }
        }
        if !self.f64.1.is_empty() {
            let coefs = &self.f64.1;
            if !on_cuda(&self.f64.0, coefs, arity, n_write, device)? {
                on_host(&self.f64.0, arity, n_write, |ts| {
                    foreach_apply::<f64>(ts, arity, n_write, &|g, w, r| k64(&coefs[g], w, r))
                })?;
            }
        }
        Ok(())
    }
}

/// Runs the device step over CUDA `tensors` in one launch; false when they are not on a GPU
/// or the optimizer has no device step.
fn on_cuda<C>(
    tensors: &[Tensor],
    coefs: &[C],
    arity: usize,
    n_write: usize,
    step: Option<&DeviceStep<C>>,
) -> Result<bool> {
    let Some(step) = step else { return Ok(false) };
    if !tensors.first().is_some_and(|t| t.device().is_cuda()) {
        return Ok(false);
    }
    let per: Vec<Vec<f64>> = coefs.iter().map(step.coefs).collect();
    let ncoef = per.first().map_or(0, Vec::len);
    let flat: Vec<f64> = per.into_iter().flatten().collect();
    let ts: Vec<&Tensor> = tensors.iter().collect();
    let _g = pyrite_core::autograd::no_grad();
    foreach_apply_cuda(&ts, arity, n_write, step.kernel, &flat, ncoef)?;
    Ok(true)
}

/// Runs `f` over `tensors` where the fused kernel runs: in place on the CPU; for CUDA
/// tensors of an optimizer without a device step, on host copies whose updated tensors (the
/// first `n_write` of each item) are copied back (correct, with two transfers per step).
fn on_host(
    tensors: &[Tensor],
    arity: usize,
    n_write: usize,
    f: impl FnOnce(&[&Tensor]) -> Result<()>,
) -> Result<()> {
    if !tensors.iter().any(|t| t.device().is_cuda()) {
        let ts: Vec<&Tensor> = tensors.iter().collect();
        return f(&ts);
    }
    let _g = pyrite_core::autograd::no_grad();
    let host: Vec<Tensor> =
        tensors.iter().map(|t| t.detach().to_device(pyrite_core::Device::Cpu)).collect::<Result<_>>()?;
    f(&host.iter().collect::<Vec<_>>())?;
    for (i, (t, h)) in tensors.iter().zip(&host).enumerate() {
        if i % arity < n_write {
            t.detach().copy_(h)?;
        }
    }
    Ok(())
}

/// Rounds a scalar kept as a tensor of the default dtype in PyTorch (`step`, `mu_product`,
/// `eta`, `mu`) as PyTorch stores it: to f32 unless the default dtype is f64.
pub fn scalar_round(v: f64) -> f64 {
    if pyrite_core::get_default_dtype() == DType::F64 {
        v
    } else {
        v as f32 as f64
    }
}

/// `a *= b` for a scalar PyTorch keeps as a tensor of the default dtype (`mu_product`).
pub fn scalar_mul_round(a: f64, b: f64) -> f64 {
    if pyrite_core::get_default_dtype() == DType::F64 {
        a * b
    } else {
        (a as f32 * b as f32) as f64
    }
}

/// The first lines of most updates: the gradient negated under `maximize`, then weight decay,
/// either L2 (`g + weight_decay * p`) or decoupled (the parameter shrinks by
/// `1 - lr * weight_decay` and the gradient is left alone, AdamW's rule).
#[derive(Clone, Copy, Debug)]
pub struct GradDecay {
    pub maximize: bool,
    pub weight_decay: f64,
    pub decoupled: bool,
    pub lr: f64,
}

impl GradDecay {
    /// L2 weight decay (added to the gradient), as most optimizers apply it.
    pub fn l2(maximize: bool, weight_decay: f64) -> GradDecay {
        GradDecay { maximize, weight_decay, decoupled: false, lr: 0.0 }
    }

    /// The gradient for element `p` (which a decoupled decay shrinks in place).
    #[inline(always)]
    pub fn apply<T: Real>(&self, g: T, p: &mut T) -> T {
        let g = if self.maximize { -g } else { g };
        if self.weight_decay == 0.0 {
            g
        } else if self.decoupled {
            *p = *p * T::c(1.0 - self.lr * self.weight_decay);
            g
        } else {
            g + T::c(self.weight_decay) * *p
        }
    }
}

/// Adam's moment updates, shared by Adam, NAdam and RAdam:
/// `m = lerp(m, g, 1 - beta1)`, `v = beta2 * v + (1 - beta2) * g²`.
#[inline(always)]
pub fn adam_moments<T: Real>(m: &mut T, v: &mut T, g: T, beta1: f64, beta2: f64) {
    *m = lerp(*m, g, 1.0 - beta1);
    *v = *v * T::c(beta2) + T::c(1.0 - beta2) * g * g;
}
