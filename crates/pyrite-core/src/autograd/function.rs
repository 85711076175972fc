//! User-defined differentiable functions, like `torch.autograd.Function`: implement
//! [`Function`] (a forward computed without recording, and its backward), then call
//! [`apply`].
//!
//! ```
//! use pyrite_core::autograd::{self, Function, FunctionCtx};
//! use pyrite_core::{Result, Tensor};
//!
//! /// y = x^3, with a hand-written backward dy/dx = 3x^2.
//! struct Cube;
//! impl Function for Cube {
//!     fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
//!         ctx.save_for_backward(&[inputs[0]]);
//!         ctx.save_value("power", 3.0f64);
//!         Ok(vec![inputs[0].pow_scalar(3.0)?])
//!     }
//!     fn backward(&self, ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
//!         let x = &ctx.saved_tensors()[0];
//!         let p: f64 = *ctx.value("power")?;
//!         Ok(vec![Some(grads[0].mul(&x.pow_scalar(p - 1.0)?.mul_scalar(p)?)?)])
//!     }
//! }
//!
//! let x = Tensor::new([2f64])?.requires_grad_(true)?;
//! let y = autograd::apply(Cube, &[&x])?.remove(0);
//! assert_eq!(y.grad_fn().unwrap().name(), "CubeBackward");
//! y.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![12.]);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use super::record::{needs_grad, record, Save};
use crate::{bail, Result, Tensor};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

/// A differentiable function with a hand-written backward (`torch.autograd.Function`).
pub trait Function: Send + Sync + 'static {
    /// Computes the outputs. Ops inside are not recorded; save what backward needs in `ctx`.
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>>;

    /// Given one gradient per output, returns one gradient per input (`None` for inputs that
    /// need none, see [`FunctionCtx::needs_input_grad`]). Ops here are recorded when the
    /// backward pass runs with `create_graph`, so a backward written with tensor ops is itself
    /// differentiable.
    fn backward(&self, ctx: &FunctionCtx, grad_outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>>;

    /// The node's name in `grad_fn`; PyTorch's is the class name followed by `Backward`.
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        let short = full.rsplit("::").next().unwrap_or(full);
        format!("{short}Backward")
    }
}

/// What [`Function::forward`] leaves for [`Function::backward`] (PyTorch's `ctx`).
#[derive(Default)]
pub struct FunctionCtx {
    to_save: Vec<Tensor>,
    saved: Vec<Tensor>,
    values: HashMap<String, Arc<dyn Any + Send + Sync>>,
    needs_input_grad: Vec<bool>,
}

impl FunctionCtx {
    /// `ctx.save_for_backward(*tensors)`: inputs or outputs the backward needs. They are
    /// checked against in-place modification when backward reads them.
    pub fn save_for_backward(&mut self, tensors: &[&Tensor]) {
        self.to_save = tensors.iter().map(|t| (*t).clone()).collect();
    }

    /// `ctx.saved_tensors`, in backward.
    pub fn saved_tensors(&self) -> &[Tensor] {
        &self.saved
    }

    /// Keeps a non-tensor value for backward (`ctx.key = value`).
    pub fn save_value<T: Any + Send + Sync>(&mut self, key: &str, value: T) {
        self.values.insert(key.to_string(), Arc::new(value));
    }

    /// A value kept with [`FunctionCtx::save_value`].
    pub fn value<T: Any + Send + Sync>(&self, key: &str) -> Result<&T> {
        match self.values.get(key).map(|v| v.downcast_ref::<T>()) {
            Some(Some(v)) => Ok(v),
            Some(None) => bail!(Value, "FunctionCtx: value '{key}' has another type"),
            None => bail!(Value, "FunctionCtx: no value named '{key}'"),
        }
    }

    /// `ctx.needs_input_grad[i]`: whether input `i` needs a gradient.
    pub fn needs_input_grad(&self, i: usize) -> bool {
        self.needs_input_grad.get(i).copied().unwrap_or(false)
    }
}

/// `MyFunction.apply(*inputs)`: runs `f`'s forward and, when an input requires grad and grad
/// mode is on, records a node whose backward is `f`'s.
pub fn apply<F: Function>(f: F, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let recording = needs_grad(inputs);
    let needs: Vec<bool> = inputs.iter().map(|t| recording && t.requires_grad()).collect();
    let mut ctx = FunctionCtx { needs_input_grad: needs.clone(), ..Default::default() };
    let outputs = {
        let _g = super::no_grad();
        f.forward(&mut ctx, inputs)?
    };
    if !recording {
        return Ok(outputs);
    }
    let saves: Vec<Save<'_>> = ctx
        .to_save
        .iter()
        .map(|t| match outputs.iter().position(|o| o.is_same(t)) {
            Some(i) => Save::Output(i),
            None => Save::Input(t),
        })
        .collect();
    let n_saved = saves.len();
    let values = ctx.values.clone();
    let name = f.name();
    let inputs_vec: Vec<&Tensor> = inputs.to_vec();
    let out = record(name, &inputs_vec, outputs, &saves, move |c, grads| {
        let saved = (0..n_saved).map(|i| c.saved(i)).collect::<Result<Vec<_>>>()?;
        let bctx = FunctionCtx {
            to_save: Vec::new(),
            saved,
            values: values.clone(),
            needs_input_grad: needs.clone(),
        };
        f.backward(&bctx, grads)
    })?;
    Ok(out)
}
