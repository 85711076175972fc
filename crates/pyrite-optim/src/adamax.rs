//! `torch.optim.Adamax`: Adam with the infinity norm in place of the second moment.

use crate::adam::check_adam_like;
use crate::foreach::{lerp, Batch, DeviceStep, GradDecay, Real};
use crate::optimizer::{bump_step, state_tensor_or, Optimizer, OptimizerBase, ParamGroup};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{Result, Tensor};

/// Adamax's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct AdamaxOptions {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub maximize: bool,
}

impl Default for AdamaxOptions {
    fn default() -> Self {
        AdamaxOptions { lr: 2e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, maximize: false }
    }
}

/// `torch.optim.Adamax`. Per parameter at step `t`: `m = lerp(m, g, 1 - b1)`,
/// `u = max(b2 * u, |g| + eps)`, `p -= lr / (1 - b1^t) * m / u`.
/// State: `step`, `exp_avg`, `exp_inf`.
pub struct Adamax {
    base: OptimizerBase,
}

impl Adamax {
    pub fn new(params: Vec<Tensor>, options: AdamaxOptions) -> Result<Adamax> {
        Adamax::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, o: AdamaxOptions) -> Result<Adamax> {
        check_adam_like("Adamax", o.lr, o.eps, o.betas, o.weight_decay)?;
        let defaults = crate::hypers![
            "lr" => o.lr, "betas" => o.betas, "eps" => o.eps, "weight_decay" => o.weight_decay, "maximize" => o.maximize,
        ];
        Ok(Adamax { base: OptimizerBase::new("Adamax", defaults, groups)? })
    }
}

struct Coef {
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    maximize: bool,
    clr: f64,
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1` the first moment, `t2` the infinity norm, `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "adamax",
    body: r#"
      T g = tg[i], p = t0[i];
      if (c[0] != 0) g = -g;
      if (c[1] != 0) g = g + (T)c[1] * p;
      const double w = 1.0 - c[2];
      const T m = (w < 0 ? -w : w) < 0.5 ? t1[i] + (T)w * (g - t1[i]) : g - (g - t1[i]) * (T)(1.0 - w);
      t1[i] = m;
      const T a = t2[i] * (T)c[3], b = (g < 0 ? -g : g) + (T)c[4];
      const T u = (a != a || b != b) ? (T)bits_f32(0x7fc00000u) : (a > b ? a : b);
      t2[i] = u;
      t0[i] = p + (T)(-c[5]) * m / u;"#,
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    vec![c.maximize as u8 as f64, c.weight_decay, c.beta1, c.beta2, c.eps, c.clr]
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let [p, m, u] = w else { unreachable!() };
    let (b2, eps, neg_clr) = (T::c(c.beta2), T::c(c.eps), T::c(-c.clr));
    let gd = GradDecay::l2(c.maximize, c.weight_decay);
    for i in 0..p.len() {
        let gi = gd.apply(g[i], &mut p[i]);
        m[i] = lerp(m[i], gi, 1.0 - c.beta1);
        u[i] = (u[i] * b2).maxv(gi.abs() + eps);
        p[i] = p[i] + neg_clr * m[i] / u[i];
    }
}

impl Optimizer for Adamax {
    crate::base_accessors!();

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let (beta1, beta2) = group.pair("betas")?;
            let mut batch = Batch::new(4, 3).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                let (m, _) = state_tensor_or(st, "exp_avg", || p.zeros_like())?;
                let (u, _) = state_tensor_or(st, "exp_inf", || p.zeros_like())?;
                let step = bump_step(st)?;
                let coef = Coef {
                    beta1,
                    beta2,
                    eps: group.f64("eps")?,
                    weight_decay: group.f64("weight_decay")?,
                    maximize: group.bool("maximize")?,
                    clr: group.lr / (1.0 - beta1.powf(step)),
                };
                batch.push("Adamax", vec![p.clone(), m, u, g], coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }
}
