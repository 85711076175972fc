//! `torch.optim.Adadelta`: steps scaled by the ratio of running RMS of updates and gradients.

use crate::foreach::{Batch, GradDecay, Real};
use crate::optimizer::{bump_step, state_tensor_or, Optimizer, OptimizerBase, ParamGroup};
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
            let mut batch = Batch::new(4, 3);
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
