//! `torch.optim.Rprop`: resilient backpropagation, per-element step sizes driven by the
//! sign of successive gradients.

use crate::foreach::{Batch, DeviceStep, Real};
use crate::optimizer::{bump_step, state_tensor_or, Optimizer, OptimizerBase, ParamGroup};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{bail, Result, Tensor};

/// Rprop's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct RpropOptions {
    pub lr: f64,
    /// `(etaminus, etaplus)`: how step sizes shrink and grow.
    pub etas: (f64, f64),
    /// `(min, max)` step size.
    pub step_sizes: (f64, f64),
    pub maximize: bool,
}

impl Default for RpropOptions {
    fn default() -> Self {
        RpropOptions { lr: 1e-2, etas: (0.5, 1.2), step_sizes: (1e-6, 50.0), maximize: false }
    }
}

/// `torch.optim.Rprop`. Per element: when the gradient keeps its sign the step size grows by
/// `etaplus`, when it flips it shrinks by `etaminus` (and that gradient is taken as zero),
/// clamped to `step_sizes`; then `p -= sign(g) * step_size`.
/// State: `step`, `prev`, `step_size` (starting at `lr`).
pub struct Rprop {
    base: OptimizerBase,
}

impl Rprop {
    pub fn new(params: Vec<Tensor>, options: RpropOptions) -> Result<Rprop> {
        Rprop::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, o: RpropOptions) -> Result<Rprop> {
        if o.lr < 0.0 {
            bail!(Value, "Rprop: Invalid learning rate: {}", o.lr);
        }
        if !(0.0 < o.etas.0 && o.etas.0 < 1.0 && 1.0 < o.etas.1) {
            bail!(Value, "Rprop: Invalid eta values: {}, {}", o.etas.0, o.etas.1);
        }
        let defaults = crate::hypers![
            "lr" => o.lr, "etas" => o.etas, "step_sizes" => o.step_sizes, "maximize" => o.maximize,
        ];
        Ok(Rprop { base: OptimizerBase::new("Rprop", defaults, groups)? })
    }
}

struct Coef {
    etas: (f64, f64),
    step_sizes: (f64, f64),
    maximize: bool,
}

/// [`kernel`] for CUDA tensors: the same arithmetic in the same order (`t0` the parameter,
/// `t1` the previous gradient, `t2` the step sizes, `tg` the gradient); the clamp propagates
/// NaN as `torch.clamp_` does.
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "rprop",
    body: r#"
      T g = tg[i];
      if (c[0] != 0) g = -g;
      const T prod = g * t1[i];
      const T s = prod > 0 ? (T)1 : (prod < 0 ? (T)-1 : prod * (T)0);
      T factor = (T)1;
      bool flipped = false;
      if (s > 0) factor = (T)c[2];
      else if (s < 0) { factor = (T)c[1]; flipped = true; }
      const T nan = (T)bits_f32(0x7fc00000u), lo = (T)c[3], hi = (T)c[4];
      T size = t2[i] * factor;
      size = (size != size || lo != lo) ? nan : (size > lo ? size : lo);
      size = (size != size || hi != hi) ? nan : (size < hi ? size : hi);
      t2[i] = size;
      if (flipped) g = (T)0;
      const T sg = g > 0 ? (T)1 : (g < 0 ? (T)-1 : g * (T)0);
      t0[i] = t0[i] + (T)(-1.0) * sg * size;
      t1[i] = g;"#,
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    vec![c.maximize as u8 as f64, c.etas.0, c.etas.1, c.step_sizes.0, c.step_sizes.1]
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let g = r[0];
    let [p, prev, size] = w else { unreachable!() };
    let (etaminus, etaplus) = (T::c(c.etas.0), T::c(c.etas.1));
    let (smin, smax) = (T::c(c.step_sizes.0), T::c(c.step_sizes.1));
    for i in 0..p.len() {
        let mut gi = if c.maximize { -g[i] } else { g[i] };
        let s = (gi * prev[i]).sign();
        let (factor, flipped) = if s > T::ZERO {
            (etaplus, false)
        } else if s < T::ZERO {
            (etaminus, true)
        } else {
            (T::ONE, false)
        };
        // clamp(min, max) as torch.clamp_: NaN stays NaN (maxv and minv propagate it).
        size[i] = (size[i] * factor).maxv(smin).minv(smax);
        if flipped {
            gi = T::ZERO;
        }
        p[i] = p[i] + T::c(-1.0) * gi.sign() * size[i];
        prev[i] = gi;
    }
}

impl Optimizer for Rprop {
    crate::base_accessors!();

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let lr = group.lr;
            let mut batch = Batch::new(4, 3).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                let (prev, _) = state_tensor_or(st, "prev", || p.zeros_like())?;
                let (size, _) = state_tensor_or(st, "step_size", || p.full_like(lr))?;
                bump_step(st)?;
                let coef = Coef {
                    etas: group.pair("etas")?,
                    step_sizes: group.pair("step_sizes")?,
                    maximize: group.bool("maximize")?,
                };
                batch.push("Rprop", vec![p.clone(), prev, size, g], coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }
}
