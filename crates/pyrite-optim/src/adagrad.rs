//! `torch.optim.Adagrad`: per-element learning rates from the sum of squared gradients.

use crate::foreach::{Batch, DeviceStep, GradDecay, Real};
use crate::optimizer::{bump_step, state_tensor_or, Optimizer, OptimizerBase, ParamGroup, StateValue};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{bail, Result, Tensor};

/// Adagrad's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct AdagradOptions {
    pub lr: f64,
    pub lr_decay: f64,
    pub weight_decay: f64,
    pub initial_accumulator_value: f64,
    pub eps: f64,
    pub maximize: bool,
}

impl Default for AdagradOptions {
    fn default() -> Self {
        AdagradOptions {
            lr: 1e-2,
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
            maximize: false,
        }
    }
}

/// `torch.optim.Adagrad`. Per parameter at step `t`: `sum += g²`,
/// `p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)`. As in PyTorch, the state
/// (`step`, `sum` filled with `initial_accumulator_value`) exists from construction on.
pub struct Adagrad {
    base: OptimizerBase,
}

impl Adagrad {
    pub fn new(params: Vec<Tensor>, options: AdagradOptions) -> Result<Adagrad> {
        Adagrad::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, o: AdagradOptions) -> Result<Adagrad> {
        for (what, v) in [
            ("learning rate", o.lr),
            ("lr_decay value", o.lr_decay),
            ("weight_decay value", o.weight_decay),
            ("initial_accumulator_value value", o.initial_accumulator_value),
            ("epsilon value", o.eps),
        ] {
            if v < 0.0 {
                bail!(Value, "Adagrad: Invalid {what}: {v}");
            }
        }
        let defaults = crate::hypers![
            "lr" => o.lr, "lr_decay" => o.lr_decay, "weight_decay" => o.weight_decay,
            "initial_accumulator_value" => o.initial_accumulator_value, "eps" => o.eps, "maximize" => o.maximize,
        ];
        let mut opt = Adagrad { base: OptimizerBase::new("Adagrad", defaults, groups)? };
        opt.init_state()?;
        Ok(opt)
    }

    /// Gives every parameter without state its `step` and `sum` (construction and new groups).
    fn init_state(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let init = group.f64("initial_accumulator_value")?;
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                if !st.contains_key("step") {
                    st.insert("step".into(), StateValue::Float(0.0));
                }
                state_tensor_or(st, "sum", || p.full_like(init))?;
            }
        }
        Ok(())
    }
}

struct Coef {
    clr: f64,
    weight_decay: f64,
    eps: f64,
    maximize: bool,
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let [p, s] = w else { unreachable!() };
    let (eps, neg_clr) = (T::c(c.eps), T::c(-c.clr));
    let gd = GradDecay::l2(c.maximize, c.weight_decay);
    for i in 0..p.len() {
        let gi = gd.apply(g[i], &mut p[i]);
        s[i] = s[i] + T::ONE * gi * gi;
        let std = s[i].sqrt() + eps;
        p[i] = p[i] + neg_clr * gi / std;
    }
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1` the sum of squares, `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "adagrad",
    body: r#"
      T g = tg[i], p = t0[i];
      if (c[0] != 0) g = -g;
      if (c[1] != 0) g = g + (T)c[1] * p;
      const T s = t1[i] + (T)1 * g * g;
      t1[i] = s;
      const T std = sqrt{f}(s) + (T)c[2];
      t0[i] = p + (T)(-c[3]) * g / std;"#,
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    vec![c.maximize as u8 as f64, c.weight_decay, c.eps, c.clr]
}

impl Optimizer for Adagrad {
    crate::base_accessors!();

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let init = group.f64("initial_accumulator_value")?;
            let mut batch = Batch::new(3, 2).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                let (s, _) = state_tensor_or(st, "sum", || p.full_like(init))?;
                let step = bump_step(st)?;
                let coef = Coef {
                    clr: group.lr / (1.0 + (step - 1.0) * group.f64("lr_decay")?),
                    weight_decay: group.f64("weight_decay")?,
                    eps: group.f64("eps")?,
                    maximize: group.bool("maximize")?,
                };
                batch.push("Adagrad", vec![p.clone(), s, g], coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }

    fn add_param_group(&mut self, group: ParamGroup) -> Result<()> {
        self.base.add_param_group(group)?;
        self.init_state()
    }
}
