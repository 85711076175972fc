//! `torch.optim.NAdam`: Adam with Nesterov momentum and a momentum schedule.

use crate::adam::check_adam_like;
use crate::foreach::{adam_moments, scalar_mul_round, Batch, DeviceStep, GradDecay, Real};
use crate::optimizer::{
    bump_step, state_f64, state_tensor_or, Optimizer, OptimizerBase, ParamGroup, StateValue,
};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{bail, Result, Tensor};

/// NAdam's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct NAdamOptions {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub momentum_decay: f64,
    pub decoupled_weight_decay: bool,
    pub maximize: bool,
}

impl Default for NAdamOptions {
    fn default() -> Self {
        NAdamOptions {
            lr: 2e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            momentum_decay: 4e-3,
            decoupled_weight_decay: false,
            maximize: false,
        }
    }
}

/// `torch.optim.NAdam`. At step `t`, `mu_t = b1 * (1 - 0.5 * 0.96^(t * momentum_decay))`;
/// the moments are Adam's and the parameter moves by a mix of the gradient and the momentum
/// weighted with `mu_t`, `mu_{t+1}` and their running product.
/// State: `step`, `mu_product`, `exp_avg`, `exp_avg_sq`.
pub struct NAdam {
    base: OptimizerBase,
}

impl NAdam {
    pub fn new(params: Vec<Tensor>, options: NAdamOptions) -> Result<NAdam> {
        NAdam::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, o: NAdamOptions) -> Result<NAdam> {
        check_adam_like("NAdam", o.lr, o.eps, o.betas, o.weight_decay)?;
        if o.momentum_decay < 0.0 {
            bail!(Value, "NAdam: Invalid momentum_decay value: {}", o.momentum_decay);
        }
        let defaults = crate::hypers![
            "lr" => o.lr, "betas" => o.betas, "eps" => o.eps, "weight_decay" => o.weight_decay,
            "momentum_decay" => o.momentum_decay, "decoupled_weight_decay" => o.decoupled_weight_decay,
            "maximize" => o.maximize,
        ];
        Ok(NAdam { base: OptimizerBase::new("NAdam", defaults, groups)? })
    }
}

struct Coef {
    decay: GradDecay,
    beta1: f64,
    beta2: f64,
    eps: f64,
    bc2: f64,
    grad_coef: f64,
    avg_coef: f64,
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1`, `t2` the moments, `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "nadam",
    body: concat!(
        crate::adam::adam_device_head!(),
        r#"
      const T denom = sqrt{f}(v / (T)c[7]) + (T)c[6];
      p = p + (T)c[8] * g / denom;
      t0[i] = p + (T)c[9] * m / denom;"#
    ),
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    let mut v = crate::adam::adam_device_coefs(&c.decay, c.beta1, c.beta2, c.eps);
    v.extend([c.bc2, c.grad_coef, c.avg_coef]);
    v
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let [p, m, v] = w else { unreachable!() };
    let (bc2, eps, gc, ac) = (T::c(c.bc2), T::c(c.eps), T::c(c.grad_coef), T::c(c.avg_coef));
    for i in 0..p.len() {
        let gi = c.decay.apply(g[i], &mut p[i]);
        adam_moments(&mut m[i], &mut v[i], gi, c.beta1, c.beta2);
        let denom = (v[i] / bc2).sqrt() + eps;
        p[i] = p[i] + gc * gi / denom;
        p[i] = p[i] + ac * m[i] / denom;
    }
}

impl Optimizer for NAdam {
    crate::base_accessors!();

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let (beta1, beta2) = group.pair("betas")?;
            let momentum_decay = group.f64("momentum_decay")?;
            let mut batch = Batch::new(4, 3).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                if !st.contains_key("mu_product") {
                    st.insert("mu_product".into(), StateValue::Float(1.0));
                }
                let (m, _) = state_tensor_or(st, "exp_avg", || p.zeros_like())?;
                let (v, _) = state_tensor_or(st, "exp_avg_sq", || p.zeros_like())?;
                let step = bump_step(st)?;
                let mu = beta1 * (1.0 - 0.5 * 0.96f64.powf(step * momentum_decay));
                let mu_next = beta1 * (1.0 - 0.5 * 0.96f64.powf((step + 1.0) * momentum_decay));
                let mu_product = scalar_mul_round(state_f64(st, "mu_product")?, mu);
                st.insert("mu_product".into(), StateValue::Float(mu_product));
                let mu_product_next = mu_product * mu_next;
                let lr = group.lr;
                let coef = Coef {
                    decay: GradDecay {
                        maximize: group.bool("maximize")?,
                        weight_decay: group.f64("weight_decay")?,
                        decoupled: group.bool("decoupled_weight_decay")?,
                        lr,
                    },
                    beta1,
                    beta2,
                    eps: group.f64("eps")?,
                    bc2: 1.0 - beta2.powf(step),
                    grad_coef: -lr * (1.0 - mu) / (1.0 - mu_product),
                    avg_coef: (-lr * mu_next) / (1.0 - mu_product_next),
                };
                batch.push("NAdam", vec![p.clone(), m, v, g], coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }
}
