//! `torch.optim.ASGD`: averaged stochastic gradient descent.

use crate::foreach::{scalar_round, Batch, DeviceStep, GradDecay, Real};
use crate::optimizer::{
    bump_step, state_f64, state_tensor_or, Optimizer, OptimizerBase, ParamGroup, StateValue,
};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{bail, Result, Tensor};

/// ASGD's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct ASGDOptions {
    pub lr: f64,
    pub lambd: f64,
    pub alpha: f64,
    pub t0: f64,
    pub weight_decay: f64,
    pub maximize: bool,
}

impl Default for ASGDOptions {
    fn default() -> Self {
        ASGDOptions { lr: 1e-2, lambd: 1e-4, alpha: 0.75, t0: 1e6, weight_decay: 0.0, maximize: false }
    }
}

/// `torch.optim.ASGD`. Per parameter: `p = p * (1 - lambd * eta) - eta * g`; the average
/// `ax` follows `p` with weight `mu`; then `eta = lr / (1 + lambd * lr * t)^alpha` and
/// `mu = 1 / max(1, t - t0)`. State: `step`, `eta`, `mu`, `ax` (the averaged parameters).
pub struct ASGD {
    base: OptimizerBase,
}

impl ASGD {
    pub fn new(params: Vec<Tensor>, options: ASGDOptions) -> Result<ASGD> {
        ASGD::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, o: ASGDOptions) -> Result<ASGD> {
        if o.lr < 0.0 {
            bail!(Value, "ASGD: Invalid learning rate: {}", o.lr);
        }
        if o.weight_decay < 0.0 {
            bail!(Value, "ASGD: Invalid weight_decay value: {}", o.weight_decay);
        }
        let defaults = crate::hypers![
            "lr" => o.lr, "lambd" => o.lambd, "alpha" => o.alpha, "t0" => o.t0,
            "weight_decay" => o.weight_decay, "maximize" => o.maximize,
        ];
        Ok(ASGD { base: OptimizerBase::new("ASGD", defaults, groups)? })
    }
}

struct Coef {
    eta: f64,
    mu: f64,
    lambd: f64,
    weight_decay: f64,
    maximize: bool,
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1` the average, `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "asgd",
    body: r#"
      T g = tg[i], p = t0[i];
      if (c[0] != 0) g = -g;
      if (c[1] != 0) g = g + (T)c[1] * p;
      p = p * (T)(1.0 - c[2] * c[3]);
      p = p + (T)(-c[3]) * g;
      t0[i] = p;
      if (c[4] != 1.0) t1[i] = t1[i] + (p - t1[i]) * (T)c[4];
      else t1[i] = p;"#,
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    vec![c.maximize as u8 as f64, c.weight_decay, c.lambd, c.eta, c.mu]
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let [p, ax] = w else { unreachable!() };
    let (decay, neg_eta, mu) = (T::c(1.0 - c.lambd * c.eta), T::c(-c.eta), T::c(c.mu));
    let gd = GradDecay::l2(c.maximize, c.weight_decay);
    for i in 0..p.len() {
        let gi = gd.apply(g[i], &mut p[i]);
        p[i] = p[i] * decay;
        p[i] = p[i] + neg_eta * gi;
        if c.mu != 1.0 {
            ax[i] = ax[i] + (p[i] - ax[i]) * mu;
        } else {
            ax[i] = p[i];
        }
    }
}

impl Optimizer for ASGD {
    crate::base_accessors!();

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let (lr, lambd, alpha, t0) =
                (group.lr, group.f64("lambd")?, group.f64("alpha")?, group.f64("t0")?);
            let mut batch = Batch::new(3, 2).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                if !st.contains_key("eta") {
                    st.insert("eta".into(), StateValue::Float(scalar_round(lr)));
                    st.insert("mu".into(), StateValue::Float(1.0));
                }
                let (ax, _) = state_tensor_or(st, "ax", || p.zeros_like())?;
                let step = bump_step(st)?;
                let coef = Coef {
                    eta: state_f64(st, "eta")?,
                    mu: state_f64(st, "mu")?,
                    lambd,
                    weight_decay: group.f64("weight_decay")?,
                    maximize: group.bool("maximize")?,
                };
                st.insert(
                    "eta".into(),
                    StateValue::Float(scalar_round(lr / (1.0 + lambd * lr * step).powf(alpha))),
                );
                st.insert("mu".into(), StateValue::Float(scalar_round(1.0 / f64::max(1.0, step - t0))));
                batch.push("ASGD", vec![p.clone(), ax, g], coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }
}
