//! `torch.optim.Adam` and `torch.optim.AdamW`: one algorithm; AdamW is Adam with decoupled
//! weight decay (`decoupled_weight_decay=True`) and a default `weight_decay` of 1e-2.

use crate::foreach::{adam_moments, Batch, DeviceStep, GradDecay, Real};
use crate::optimizer::{bump_step, state_tensor_or, Hypers, Optimizer, OptimizerBase, ParamGroup};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{bail, Result, Tensor};

/// Adam's (and AdamW's) options, with PyTorch's defaults for Adam.
#[derive(Clone, Debug)]
pub struct AdamOptions {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: bool,
    pub maximize: bool,
    /// Decay the weights directly (`p *= 1 - lr * weight_decay`) instead of adding
    /// `weight_decay * p` to the gradient: AdamW.
    pub decoupled_weight_decay: bool,
}

impl Default for AdamOptions {
    fn default() -> Self {
        AdamOptions {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            maximize: false,
            decoupled_weight_decay: false,
        }
    }
}

impl AdamOptions {
    /// AdamW's defaults: Adam's with `weight_decay = 1e-2`, decoupled.
    pub fn adamw() -> AdamOptions {
        AdamOptions { weight_decay: 1e-2, decoupled_weight_decay: true, ..Default::default() }
    }

    pub(crate) fn hypers(&self, name: &str) -> Result<Hypers> {
        check_adam_like(name, self.lr, self.eps, self.betas, self.weight_decay)?;
        Ok(crate::hypers![
            "lr" => self.lr, "betas" => self.betas, "eps" => self.eps, "weight_decay" => self.weight_decay,
            "amsgrad" => self.amsgrad, "maximize" => self.maximize,
            "decoupled_weight_decay" => self.decoupled_weight_decay,
        ])
    }
}

/// PyTorch's checks of the options shared by the Adam family.
pub(crate) fn check_adam_like(
    name: &str,
    lr: f64,
    eps: f64,
    betas: (f64, f64),
    weight_decay: f64,
) -> Result<()> {
    if lr < 0.0 {
        bail!(Value, "{name}: Invalid learning rate: {lr}");
    }
    if eps < 0.0 {
        bail!(Value, "{name}: Invalid epsilon value: {eps}");
    }
    if !(0.0..1.0).contains(&betas.0) {
        bail!(Value, "{name}: Invalid beta parameter at index 0: {}", betas.0);
    }
    if !(0.0..1.0).contains(&betas.1) {
        bail!(Value, "{name}: Invalid beta parameter at index 1: {}", betas.1);
    }
    if weight_decay < 0.0 {
        bail!(Value, "{name}: Invalid weight_decay value: {weight_decay}");
    }
    Ok(())
}

/// `torch.optim.Adam` (and, built with [`AdamW::new`], `torch.optim.AdamW`). Per parameter,
/// at step `t`: `m = lerp(m, g, 1 - b1)`, `v = b2 * v + (1 - b2) * g²` (with amsgrad the
/// running maximum of `v` is used), `p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.
/// State: `step`, `exp_avg`, `exp_avg_sq` (and `max_exp_avg_sq`).
pub struct Adam {
    base: OptimizerBase,
}

impl Adam {
    pub fn new(params: Vec<Tensor>, options: AdamOptions) -> Result<Adam> {
        Adam::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, options: AdamOptions) -> Result<Adam> {
        Ok(Adam { base: OptimizerBase::new("Adam", options.hypers("Adam")?, groups)? })
    }
}

/// `torch.optim.AdamW`: [`Adam`] with decoupled weight decay. Build it with
/// `AdamOptions::adamw()` (PyTorch's AdamW defaults) and change fields as needed.
///
/// ```
/// use pyrite::optim::{AdamOptions, AdamW, Optimizer};
/// let w = pyrite::Tensor::new([1.0f32])?.requires_grad_(true)?;
/// let opt = AdamW::new(vec![w], AdamOptions { lr: 1e-2, ..AdamOptions::adamw() })?;
/// assert_eq!(opt.param_groups()[0].f64("weight_decay")?, 1e-2);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct AdamW {
    base: OptimizerBase,
}

impl AdamW {
    /// AdamW over `params`; `options.decoupled_weight_decay` is forced on.
    pub fn new(params: Vec<Tensor>, options: AdamOptions) -> Result<AdamW> {
        AdamW::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, options: AdamOptions) -> Result<AdamW> {
        let options = AdamOptions { decoupled_weight_decay: true, ..options };
        Ok(AdamW { base: OptimizerBase::new("AdamW", options.hypers("AdamW")?, groups)? })
    }
}

struct Coef {
    decay: GradDecay,
    beta1: f64,
    beta2: f64,
    eps: f64,
    amsgrad: bool,
    step_size: f64,
    bc2_sqrt: f64,
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let (p, rest) = w.split_first_mut().unwrap();
    let (m, rest) = rest.split_first_mut().unwrap();
    let (v, rest) = rest.split_first_mut().unwrap();
    let mut vmax = rest.first_mut();
    let (bc2_sqrt, eps, neg_step) = (T::c(c.bc2_sqrt), T::c(c.eps), T::c(-c.step_size));
    for i in 0..p.len() {
        let gi = c.decay.apply(g[i], &mut p[i]);
        adam_moments(&mut m[i], &mut v[i], gi, c.beta1, c.beta2);
        let vi = match vmax.as_deref_mut() {
            Some(vm) if c.amsgrad => {
                vm[i] = vm[i].maxv(v[i]);
                vm[i]
            }
            _ => v[i],
        };
        let denom = vi.sqrt() / bc2_sqrt + eps;
        p[i] = p[i] + neg_step * m[i] / denom;
    }
}

/// The first lines of the device updates of Adam, NAdam and RAdam, as [`GradDecay::apply`]
/// and [`crate::foreach::adam_moments`] on the CPU: the gradient negated under `maximize`
/// (`c[0]`), weight decay `c[1]` (decoupled when `c[2]`, with the learning rate `c[3]`), the
/// moments `m` and `v` with betas `c[4]`, `c[5]`, written back to `t1` and `t2`.
macro_rules! adam_device_head {
    () => {
        r#"
      T g = tg[i], p = t0[i];
      if (c[0] != 0) g = -g;
      if (c[1] != 0) {
        if (c[2] != 0) p = p * (T)(1.0 - c[3] * c[1]);
        else g = g + (T)c[1] * p;
      }
      const double w = 1.0 - c[4];
      const T m = (w < 0 ? -w : w) < 0.5 ? t1[i] + (T)w * (g - t1[i]) : g - (g - t1[i]) * (T)(1.0 - w);
      const T v = t2[i] * (T)c[5] + (T)(1.0 - c[5]) * g * g;
      t1[i] = m;
      t2[i] = v;"#
    };
}
pub(crate) use adam_device_head;

/// The coefficients [`adam_device_head!`] reads, `c[0]` to `c[5]`, then `eps` as `c[6]`: the
/// start of every Adam-family `device_coefs`.
pub(crate) fn adam_device_coefs(d: &GradDecay, beta1: f64, beta2: f64, eps: f64) -> Vec<f64> {
    let b = |v: bool| v as u8 as f64;
    vec![b(d.maximize), d.weight_decay, b(d.decoupled), d.lr, beta1, beta2, eps]
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1`, `t2` the moments, `t3` the running maximum with amsgrad, `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "adam",
    body: concat!(
        adam_device_head!(),
        r#"
      T vi = v;
      if (c[7] != 0) {
        // The running maximum (t3 exists only with amsgrad, where c[7] is 1).
        t3[i] = (t3[i] != t3[i] || v != v) ? (T)bits_f32(0x7fc00000u) : (t3[i] > v ? t3[i] : v);
        vi = t3[i];
      }
      const T denom = sqrt{f}(vi) / (T)c[9] + (T)c[6];
      t0[i] = p + (T)(-c[8]) * m / denom;"#
    ),
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    let mut v = adam_device_coefs(&c.decay, c.beta1, c.beta2, c.eps);
    v.extend([c.amsgrad as u8 as f64, c.step_size, c.bc2_sqrt]);
    v
}

/// The update shared by [`Adam`] and [`AdamW`].
fn adam_update(base: &mut OptimizerBase) -> Result<()> {
    let name = base.name();
    for (group, states) in base.groups_and_state() {
        let amsgrad = group.bool("amsgrad")?;
        let (beta1, beta2) = group.pair("betas")?;
        let arity = if amsgrad { 5 } else { 4 };
        let mut batch =
            Batch::new(arity, arity - 1).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
        for (p, st) in group.params.iter().zip(states.iter_mut()) {
            let Some(g) = p.grad() else { continue };
            let (m, _) = state_tensor_or(st, "exp_avg", || p.zeros_like())?;
            let (v, _) = state_tensor_or(st, "exp_avg_sq", || p.zeros_like())?;
            let mut ts = vec![p.clone(), m, v];
            if amsgrad {
                ts.push(state_tensor_or(st, "max_exp_avg_sq", || p.zeros_like())?.0);
            }
            ts.push(g);
            let step = bump_step(st)?;
            let coef = Coef {
                decay: GradDecay {
                    maximize: group.bool("maximize")?,
                    weight_decay: group.f64("weight_decay")?,
                    decoupled: group.bool("decoupled_weight_decay")?,
                    lr: group.lr,
                },
                beta1,
                beta2,
                eps: group.f64("eps")?,
                amsgrad,
                step_size: group.lr / (1.0 - beta1.powf(step)),
                bc2_sqrt: (1.0 - beta2.powf(step)).sqrt(),
            };
            batch.push(name, ts, coef)?;
        }
        batch.run(kernel::<f32>, kernel::<f64>)?;
    }
    Ok(())
}

impl Optimizer for Adam {
    fn base(&self) -> &OptimizerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut OptimizerBase {
        &mut self.base
    }
    fn update(&mut self) -> Result<()> {
        adam_update(&mut self.base)
    }
}

impl Optimizer for AdamW {
    fn base(&self) -> &OptimizerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut OptimizerBase {
        &mut self.base
    }
    fn update(&mut self) -> Result<()> {
        adam_update(&mut self.base)
    }
}
