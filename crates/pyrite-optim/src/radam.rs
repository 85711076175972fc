//! `torch.optim.RAdam`: Adam with the variance of the adaptive learning rate rectified.

use crate::adam::check_adam_like;
use crate::foreach::{adam_moments, Batch, DeviceStep, GradDecay, Real};
use crate::optimizer::{bump_step, state_tensor_or, Optimizer, OptimizerBase, ParamGroup};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{Result, Tensor};

/// RAdam's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct RAdamOptions {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub decoupled_weight_decay: bool,
    pub maximize: bool,
}

impl Default for RAdamOptions {
    fn default() -> Self {
        RAdamOptions {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
            maximize: false,
        }
    }
}

/// `torch.optim.RAdam`. While the approximated SMA length `rho_t` is at most 5 the step is
/// SGD with momentum (`p -= lr * m / (1 - b1^t)`); after that it is Adam's step scaled by the
/// rectification term. State: `step`, `exp_avg`, `exp_avg_sq`.
pub struct RAdam {
    base: OptimizerBase,
}

impl RAdam {
    pub fn new(params: Vec<Tensor>, options: RAdamOptions) -> Result<RAdam> {
        RAdam::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, o: RAdamOptions) -> Result<RAdam> {
        check_adam_like("RAdam", o.lr, o.eps, o.betas, o.weight_decay)?;
        let defaults = crate::hypers![
            "lr" => o.lr, "betas" => o.betas, "eps" => o.eps, "weight_decay" => o.weight_decay,
            "decoupled_weight_decay" => o.decoupled_weight_decay, "maximize" => o.maximize,
        ];
        Ok(RAdam { base: OptimizerBase::new("RAdam", defaults, groups)? })
    }
}

struct Coef {
    decay: GradDecay,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    bc1: f64,
    bc2_sqrt: f64,
    /// The rectification term when `rho_t > 5`.
    rect: Option<f64>,
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1`, `t2` the moments, `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "radam",
    body: concat!(
        crate::adam::adam_device_head!(),
        r#"
      const T corrected = m / (T)c[7];
      T delta;
      if (c[10] != 0) {
        const T adaptive = ((T)1 / (sqrt{f}(v) + (T)c[6])) * (T)c[9];
        delta = corrected * (T)c[8] * adaptive * (T)c[11];
      } else {
        delta = corrected * (T)c[8];
      }
      t0[i] = p + (T)(-1.0) * delta;"#
    ),
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    let mut v = crate::adam::adam_device_coefs(&c.decay, c.beta1, c.beta2, c.eps);
    v.extend([c.bc1, c.lr, c.bc2_sqrt, c.rect.is_some() as u8 as f64, c.rect.unwrap_or(0.0)]);
    v
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let [p, m, v] = w else { unreachable!() };
    let (bc1, lr, eps, bc2_sqrt) = (T::c(c.bc1), T::c(c.lr), T::c(c.eps), T::c(c.bc2_sqrt));
    for i in 0..p.len() {
        let gi = c.decay.apply(g[i], &mut p[i]);
        adam_moments(&mut m[i], &mut v[i], gi, c.beta1, c.beta2);
        let corrected = m[i] / bc1;
        let delta = match c.rect {
            Some(rect) => {
                // `bc2_sqrt / (sqrt(v) + eps)` as PyTorch computes a scalar over a tensor.
                let adaptive = (T::ONE / (v[i].sqrt() + eps)) * bc2_sqrt;
                corrected * lr * adaptive * T::c(rect)
            }
            None => corrected * lr,
        };
        p[i] = p[i] + T::c(-1.0) * delta;
    }
}

impl Optimizer for RAdam {
    crate::base_accessors!();

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let (beta1, beta2) = group.pair("betas")?;
            let mut batch = Batch::new(4, 3).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                let (m, _) = state_tensor_or(st, "exp_avg", || p.zeros_like())?;
                let (v, _) = state_tensor_or(st, "exp_avg_sq", || p.zeros_like())?;
                let step = bump_step(st)?;
                let bc2 = 1.0 - beta2.powf(step);
                let rho_inf = 2.0 / (1.0 - beta2) - 1.0;
                let rho_t = rho_inf - 2.0 * step * beta2.powf(step) / bc2;
                let rect = (rho_t > 5.0).then(|| {
                    ((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
                        .powf(0.5)
                });
                let coef = Coef {
                    decay: GradDecay {
                        maximize: group.bool("maximize")?,
                        weight_decay: group.f64("weight_decay")?,
                        decoupled: group.bool("decoupled_weight_decay")?,
                        lr: group.lr,
                    },
                    lr: group.lr,
                    beta1,
                    beta2,
                    eps: group.f64("eps")?,
                    bc1: 1.0 - beta1.powf(step),
                    bc2_sqrt: bc2.powf(0.5),
                    rect,
                };
                batch.push("RAdam", vec![p.clone(), m, v, g], coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }
}
