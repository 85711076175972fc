//! `torch.optim.SGD`: stochastic gradient descent with momentum, dampening, Nesterov
//! momentum, weight decay and `maximize`.

use crate::foreach::{Batch, DeviceStep, Real};
use crate::optimizer::{Hypers, Optimizer, OptimizerBase, ParamGroup, StateValue};
use pyrite_core::ops::foreach::DeviceKernel;
use pyrite_core::{bail, Result, Tensor};

/// SGD's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct SGDOptions {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    pub maximize: bool,
}

impl Default for SGDOptions {
    fn default() -> Self {
        SGDOptions {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            maximize: false,
        }
    }
}

impl SGDOptions {
    fn hypers(&self) -> Result<Hypers> {
        if self.lr < 0.0 {
            bail!(Value, "SGD: Invalid learning rate: {}", self.lr);
        }
        if self.momentum < 0.0 {
            bail!(Value, "SGD: Invalid momentum value: {}", self.momentum);
        }
        if self.weight_decay < 0.0 {
            bail!(Value, "SGD: Invalid weight_decay value: {}", self.weight_decay);
        }
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            bail!(Value, "SGD: Nesterov momentum requires a momentum and zero dampening");
        }
        Ok(crate::hypers![
            "lr" => self.lr, "momentum" => self.momentum, "dampening" => self.dampening,
            "weight_decay" => self.weight_decay, "nesterov" => self.nesterov, "maximize" => self.maximize,
        ])
    }
}

/// `torch.optim.SGD`. Per parameter: `g = grad (+ weight_decay * p)`; with momentum,
/// `buf = momentum * buf + (1 - dampening) * g` (the first step sets `buf = g`) and `g = buf`
/// (or `g + momentum * buf` with Nesterov); then `p -= lr * g`. State: `momentum_buffer`.
///
/// ```
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// use pyrite::Tensor;
/// let w = Tensor::new([1.0f64, -2.0])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w.clone()], SGDOptions { lr: 0.5, ..Default::default() })?;
/// w.square()?.sum()?.backward()?; // grad = 2w
/// opt.step()?;
/// assert_eq!(w.to_vec::<f64>()?, [0.0, 0.0]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct SGD {
    base: OptimizerBase,
}

impl SGD {
    pub fn new(params: Vec<Tensor>, options: SGDOptions) -> Result<SGD> {
        SGD::with_groups(vec![ParamGroup::new(params)], options)
    }

    pub fn with_groups(groups: Vec<ParamGroup>, options: SGDOptions) -> Result<SGD> {
        Ok(SGD { base: OptimizerBase::new("SGD", options.hypers()?, groups)? })
    }
}

struct Coef {
    lr: f64,
    momentum: f64,
    dampening: f64,
    weight_decay: f64,
    nesterov: bool,
    maximize: bool,
    first: bool,
}

fn kernel<T: Real>(c: &Coef, w: &mut [&mut [T]], r: &[&[T]]) {
    let (lr, wd, mom, damp) = (T::c(c.lr), T::c(c.weight_decay), T::c(c.momentum), T::c(1.0 - c.dampening));
    let (p, rest) = w.split_first_mut().unwrap();
    let g = r[0];
    let mut buf = rest.first_mut();
    for i in 0..p.len() {
        let mut d = if c.maximize { -g[i] } else { g[i] };
        if c.weight_decay != 0.0 {
            d = d + wd * p[i];
        }
        if let Some(b) = buf.as_deref_mut() {
            let nb = if c.first { d } else { b[i] * mom + damp * d };
            b[i] = nb;
            d = if c.nesterov { d + mom * nb } else { nb };
        }
        p[i] = p[i] + (-lr) * d;
    }
}

/// [`kernel`] for CUDA tensors (`t0` the parameter, `t1` the momentum buffer when there is
/// momentum, `tg` the gradient).
pub(crate) const DEVICE: DeviceKernel<'static> = DeviceKernel {
    name: "sgd",
    body: r#"
      const T lr = (T)c[0], wd = (T)c[1], mom = (T)c[2], damp = (T)(1.0 - c[3]);
      T d = c[5] != 0 ? -tg[i] : tg[i];
      if (c[1] != 0) d = d + wd * t0[i];
      if (c[2] != 0) {
        // The momentum buffer (t1 exists only with momentum, where c[2] is not 0).
        const T nb = c[6] != 0 ? d : t1[i] * mom + damp * d;
        t1[i] = nb;
        d = c[4] != 0 ? d + mom * nb : nb;
      }
      t0[i] = t0[i] + (-lr) * d;"#,
};

fn device_coefs(c: &Coef) -> Vec<f64> {
    let b = |v: bool| v as u8 as f64;
    vec![c.lr, c.weight_decay, c.momentum, c.dampening, b(c.nesterov), b(c.maximize), b(c.first)]
}

impl Optimizer for SGD {
    fn base(&self) -> &OptimizerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut OptimizerBase {
        &mut self.base
    }

    fn update(&mut self) -> Result<()> {
        for (group, states) in self.base.groups_and_state() {
            let momentum = group.f64("momentum")?;
            let arity = if momentum != 0.0 { 3 } else { 2 };
            let mut batch =
                Batch::new(arity, arity - 1).on_cuda(DeviceStep { kernel: DEVICE, coefs: device_coefs });
            for (p, st) in group.params.iter().zip(states.iter_mut()) {
                let Some(g) = p.grad() else { continue };
                let mut ts = vec![p.clone()];
                let mut first = false;
                if momentum != 0.0 {
                    let buf = match st.get("momentum_buffer") {
                        Some(StateValue::Tensor(b)) => b.clone(),
                        _ => {
                            first = true;
                            let b = p.zeros_like()?;
                            st.insert("momentum_buffer".into(), StateValue::Tensor(b.clone()));
                            b
                        }
                    };
                    ts.push(buf);
                }
                ts.push(g);
                let coef = Coef {
                    lr: group.lr,
                    momentum,
                    dampening: group.f64("dampening")?,
                    weight_decay: group.f64("weight_decay")?,
                    nesterov: group.bool("nesterov")?,
                    maximize: group.bool("maximize")?,
                    first,
                };
                batch.push("SGD", ts, coef)?;
            }
            batch.run(kernel::<f32>, kernel::<f64>)?;
        }
        Ok(())
    }
}
