//! `torch.optim.Adadelta`: steps scaled by the ratio of running RMS of updates and gradients.

use crate::foreach::{Batch, DeviceStep, GradDecay, Real};
use crate::optimizer::{bump_step, state_tensor_or, Optimizer, OptimizerBase, ParamGroup};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{bail, Result, Tensor};

/// Adadelta's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct AdadeltaOptions {
    pub lr: f64,
    pub rho: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub maximize: bool,
}

impl Default for AdadeltaOptions {
    fn default() -> Self {
        AdadeltaOptions { lr: 1.0, rho: 0.9, eps: 1e-6, weight_decay: 0.0, maximize: false }
    }
}

/// `torch.optim.Adadelta`. Per parameter: `s = rho * s + (1 - rho) * g²`,
/// `d = sqrt(a + eps) / sqrt(s + eps) * g`, `a = rho * a + (1 - rho) * d²`, `p -= lr * d`.
/// State: `step`, `square_avg`, `acc_delta`.
pub struct Adadelta {
    base: OptimizerBase,
}

impl Adadelta {
    pub fn new(params: Vec<Tensor>, options: AdadeltaOptions) -> Result<Adadelta> {
        Adadelta::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, o: AdadeltaOptions) -> Result<Adadelta> {
        if o.lr < 0.0 {
            bail!(Value, "Adadelta: Invalid learning rate: {}", o.lr);
        }
        if !(0.0..=1.0).contains(&o.rho) {
            bail!(Value, "Adadelta: Invalid rho value: {}", o.rho);
        }
        if o.eps < 0.0 {
            bail!(Value, "Adadelta: Invalid epsilon value: {}", o.eps);
        }
        if o.weight_decay < 0.0 {
            bail!(Value, "Adadelta: Invalid weight_decay value: {}", o.weight_decay);
        }
        let defaults = crate::hypers![
            "lr" => o.lr, "rho" => o.rho, "eps" => o.eps, "weight_decay" => o.weight_decay, "maximize" => o.maximize,
        ];
        Ok(Adadelta { base: OptimizerBase::new("Adadelta", defaults, groups)? })
    }
}

struct Coef {
    lr: f64,
    rho: f64,
    eps: f64,
    weight_decay: f64,
    maximize: bool,
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1` the square average, `t2` the accumulated update, `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "adadelta",
    body: r#"
      T g = tg[i], p = t0[i];
      if (c[0] != 0) g = -g;
      if (c[1] != 0) g = g + (T)c[1] * p;
      const T rho = (T)c[2], one_m_rho = (T)(1.0 - c[2]), eps = (T)c[3];
      const T s = t1[i] * rho + one_m_rho * g * g;
      t1[i] = s;
      const T std = sqrt{f}(s + eps);
      const T delta = sqrt{f}(t2[i] + eps) / std * g;
      t2[i] = t2[i] * rho + one_m_rho * delta * delta;
      t0[i] = p + (T)(-c[4]) * delta;"#,
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    vec![c.maximize as u8 as f64, c.weight_decay, c.rho, c.eps, c.lr]
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let [p, s, a] = w else { unreachable!() };
    let (rho, one_m_rho, eps, neg_lr) = (T::c(c.rho), T::c(1.0 - c.rho), T::c(c.eps), T::c(-c.lr));
    let gd = GradDecay::l2(c.maximize, c.weight_decay);
    for i in 0..p.len() {
        let gi = gd.apply(g[i], &mut p[i]);
        s[i] = s[i] * rho + one_m_rho * gi * gi;
        let std = (s[i] + eps).sqrt();
        let delta = (a[i] + eps).sqrt() / std * gi;
        a[i] = a[i] * rho + one_m_rho * delta * delta;
        p[i] = p[i] + neg_lr * delta;
    }
}

impl Optimizer for Adadelta {
    crate::base_accessors!();

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let mut batch = Batch::new(4, 3).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                let (s, _) = state_tensor_or(st, "square_avg", || p.zeros_like())?;
                let (a, _) = state_tensor_or(st, "acc_delta", || p.zeros_like())?;
                bump_step(st)?;
                let coef = Coef {
                    lr: group.lr,
                    rho: group.f64("rho")?,
                    eps: group.f64("eps")?,
                    weight_decay: group.f64("weight_decay")?,
                    maximize: group.bool("maximize")?,
                };
                batch.push("Adadelta", vec![p.clone(), s, a, g], coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }
}
