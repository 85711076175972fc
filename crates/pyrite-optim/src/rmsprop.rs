//! `torch.optim.RMSprop`: gradients scaled by a running root mean square, optionally
//! centered and with momentum.

use crate::foreach::{lerp, Batch, DeviceStep, GradDecay, Real};
use crate::optimizer::{bump_step, state_tensor_or, Optimizer, OptimizerBase, ParamGroup};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{bail, Result, Tensor};

/// RMSprop's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct RMSpropOptions {
    pub lr: f64,
    pub alpha: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub momentum: f64,
    pub centered: bool,
    pub maximize: bool,
}

impl Default for RMSpropOptions {
    fn default() -> Self {
        RMSpropOptions {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            maximize: false,
        }
    }
}

/// `torch.optim.RMSprop`. Per parameter: `s = alpha * s + (1 - alpha) * g²`; centered, the
/// running mean of `g` is subtracted (`sqrt(s - ḡ²)`); then `p -= lr * g / (sqrt(..) + eps)`,
/// through a momentum buffer when `momentum > 0`.
/// State: `step`, `square_avg` (and `momentum_buffer`, `grad_avg`).
pub struct RMSprop {
    base: OptimizerBase,
}

impl RMSprop {
    pub fn new(params: Vec<Tensor>, options: RMSpropOptions) -> Result<RMSprop> {
        RMSprop::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, o: RMSpropOptions) -> Result<RMSprop> {
        for (what, v) in [
            ("learning rate", o.lr),
            ("epsilon value", o.eps),
            ("momentum value", o.momentum),
            ("weight_decay value", o.weight_decay),
            ("alpha value", o.alpha),
        ] {
            if v < 0.0 {
                bail!(Value, "RMSprop: Invalid {what}: {v}");
            }
        }
        let defaults = crate::hypers![
            "lr" => o.lr, "alpha" => o.alpha, "eps" => o.eps, "weight_decay" => o.weight_decay,
            "momentum" => o.momentum, "centered" => o.centered, "maximize" => o.maximize,
        ];
        Ok(RMSprop { base: OptimizerBase::new("RMSprop", defaults, groups)? })
    }
}

struct Coef {
    lr: f64,
    alpha: f64,
    eps: f64,
    weight_decay: f64,
    momentum: f64,
    centered: bool,
    maximize: bool,
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let (p, rest) = w.split_first_mut().unwrap();
    let (s, rest) = rest.split_first_mut().unwrap();
    let (mut buf, mut gavg) = (None, None);
    let mut rest = rest.iter_mut();
    if c.momentum > 0.0 {
        buf = rest.next();
    }
    if c.centered {
        gavg = rest.next();
    }
    let (alpha, one_m_alpha, eps, mom, neg_lr) =
        (T::c(c.alpha), T::c(1.0 - c.alpha), T::c(c.eps), T::c(c.momentum), T::c(-c.lr));
    let gd = GradDecay::l2(c.maximize, c.weight_decay);
    for i in 0..p.len() {
        let gi = gd.apply(g[i], &mut p[i]);
        s[i] = s[i] * alpha + one_m_alpha * gi * gi;
        let avg = match gavg.as_deref_mut() {
            Some(ga) => {
                ga[i] = lerp(ga[i], gi, 1.0 - c.alpha);
                (s[i] + T::c(-1.0) * ga[i] * ga[i]).sqrt()
            }
            None => s[i].sqrt(),
        } + eps;
        match buf.as_deref_mut() {
            Some(b) => {
                b[i] = b[i] * mom + gi / avg;
                p[i] = p[i] + neg_lr * b[i];
            }
            None => p[i] = p[i] + neg_lr * gi / avg,
        }
    }
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1` the square average, then the momentum buffer and the gradient average when present,
/// read through `row` since their slots depend on which are; `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "rmsprop",
    body: r#"
      T g = tg[i], p = t0[i];
      if (c[0] != 0) g = -g;
      if (c[1] != 0) g = g + (T)c[1] * p;
      const T s = t1[i] * (T)c[2] + (T)(1.0 - c[2]) * g * g;
      t1[i] = s;
      T avg;
      if (c[6] != 0) {
        T* ga = (T*)row[c[5] > 0 ? 3 : 2];
        const double w = 1.0 - c[2];
        const T a = (w < 0 ? -w : w) < 0.5 ? ga[i] + (T)w * (g - ga[i]) : g - (g - ga[i]) * (T)(1.0 - w);
        ga[i] = a;
        avg = sqrt{f}(s + (T)(-1.0) * a * a);
      } else {
        avg = sqrt{f}(s);
      }
      avg = avg + (T)c[3];
      if (c[5] > 0) {
        T* b = (T*)row[2];
        const T bv = b[i] * (T)c[5] + g / avg;
        b[i] = bv;
        t0[i] = p + (T)(-c[4]) * bv;
      } else {
        t0[i] = p + (T)(-c[4]) * g / avg;
      }"#,
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    let b = |v: bool| v as u8 as f64;
    vec![b(c.maximize), c.weight_decay, c.alpha, c.eps, c.lr, c.momentum, b(c.centered)]
}

impl Optimizer for RMSprop {
    crate::base_accessors!();

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let momentum = group.f64("momentum")?;
            let centered = group.bool("centered")?;
            let arity = 3 + usize::from(momentum > 0.0) + usize::from(centered);
            let mut batch =
                Batch::new(arity, arity - 1).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                let mut ts = vec![p.clone(), state_tensor_or(st, "square_avg", || p.zeros_like())?.0];
                if momentum > 0.0 {
                    ts.push(state_tensor_or(st, "momentum_buffer", || p.zeros_like())?.0);
                }
                if centered {
                    ts.push(state_tensor_or(st, "grad_avg", || p.zeros_like())?.0);
                }
                ts.push(g);
                bump_step(st)?;
                let coef = Coef {
                    lr: group.lr,
                    alpha: group.f64("alpha")?,
                    eps: group.f64("eps")?,
                    weight_decay: group.f64("weight_decay")?,
                    momentum,
                    centered,
                    maximize: group.bool("maximize")?,
                };
                batch.push("RMSprop", ts, coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }
}
