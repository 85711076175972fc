//! Reverse-mode automatic differentiation, PyTorch's define-by-run autograd.
//!
//! Ops on tensors that require grad record a [`Node`] each (the tensor's `grad_fn`);
//! [`Tensor::backward`] or [`grad`] walks the recorded graph from an output back to the
//! leaves. The pieces, one file each:
//!
//! - `mode`: grad mode per thread ([`no_grad`], [`enable_grad`], [`inference_mode`]).
//! - `meta`: per-tensor state and the tensor methods around it (`requires_grad_`, `grad`,
//!   `detach`, `retain_grad`, hooks).
//! - `graph`: [`Node`]s and edges; iterative freeing of long graphs.
//! - `saved`: tensors saved for backward, checked against in-place changes.
//! - `record`: how an op records itself (the pattern every differentiable op follows).
//! - `engine`: the backward pass.
//! - `function`: user-defined differentiable functions ([`Function`]).
//! - `gradcheck`: [`gradcheck`] and [`gradgradcheck`] by finite differences.
//! - `anomaly`: [`detect_anomaly`].
//!
//! ```
//! use pyrite_core::{autograd, Tensor};
//! let x = Tensor::new([1f64, 2., 3.])?.requires_grad_(true)?;
//! let y = x.mul(&x)?.sum()?; // y = sum(x^2)
//! // dy/dx = 2x, with a graph of its own so that it can be differentiated again
//! let g = autograd::grad(&[&y], &[&x], None, None, true, false)?.remove(0).unwrap();
//! assert_eq!(g.to_vec::<f64>()?, vec![2., 4., 6.]);
//! g.sum()?.backward()?; // d/dx sum(2x) = 2
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![2., 2., 2.]);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

mod anomaly;
mod engine;
mod function;
mod gradcheck;
mod graph;
mod meta;
mod mode;
pub(crate) mod record;
mod saved;

pub use anomaly::{detect_anomaly, is_anomaly_enabled, AnomalyGuard};
pub use engine::queue_callback;
pub use function::{apply, Function, FunctionCtx};
pub use gradcheck::{gradcheck, gradgradcheck, GradcheckOptions};
pub use graph::{Ctx, Node};
pub(crate) use meta::AutogradSlot;
pub use meta::RemovableHandle;
pub use mode::{
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled,
    GradModeGuard,
};

use crate::{bail, Result, Tensor};

/// `torch.autograd.backward(tensors, grad_tensors, retain_graph, create_graph)`: adds the
/// gradients of `tensors` (weighted by `grad_tensors`; implicit ones for scalars) into the
/// `.grad` of every leaf they depend on.
pub fn backward(
    tensors: &[&Tensor],
    grad_tensors: Option<&[&Tensor]>,
    retain_graph: Option<bool>,
    create_graph: bool,
) -> Result<()> {
    let roots = roots(tensors, grad_tensors, "backward")?;
    engine::run_backward(roots, retain_graph.unwrap_or(create_graph), create_graph, None)?;
    Ok(())
}

/// `torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
/// allow_unused)`: the gradients of `outputs` with respect to `inputs`, returned instead of
/// accumulated into `.grad`. With `create_graph` they are recorded, so they can be
/// differentiated again (a gradient penalty, a Hessian-vector product). An input that the
/// outputs do not depend on is an error unless `allow_unused`, then its gradient is `None`.
pub fn grad(
    outputs: &[&Tensor],
    inputs: &[&Tensor],
    grad_outputs: Option<&[&Tensor]>,
    retain_graph: Option<bool>,
    create_graph: bool,
    allow_unused: bool,
) -> Result<Vec<Option<Tensor>>> {
    let roots = roots(outputs, grad_outputs, "grad")?;
    let mut targets = Vec::with_capacity(inputs.len());
    for t in inputs {
        match t.gradient_edge() {
            Some(e) => targets.push(e),
            None => bail!(Autograd, "One of the differentiated Tensors does not require grad"),
        }
    }
    let grads =
        engine::run_backward(roots, retain_graph.unwrap_or(create_graph), create_graph, Some(&targets))?;
    if !allow_unused && grads.iter().any(|g| g.is_none()) {
        bail!(
            Autograd,
            "One of the differentiated Tensors appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior."
        );
    }
    Ok(grads)
}

/// The edges to start from and the gradient for each, checked as PyTorch checks them.
fn roots(tensors: &[&Tensor], grads: Option<&[&Tensor]>, what: &str) -> Result<Vec<(graph::Edge, Tensor)>> {
    if let Some(g) = grads
        && g.len() != tensors.len()
    {
        bail!(Value, "{what}: got {} tensors and {} gradients", tensors.len(), g.len());
    }
    let mut roots = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        let Some(edge) = t.gradient_edge() else {
            bail!(Autograd, "element {i} of tensors does not require grad and does not have a grad_fn");
        };
        let g = match grads.map(|g| g[i]) {
            Some(g) => {
                if g.dims() != t.dims() {
                    bail!(
                        Shape,
                        "Mismatch in shape: grad_output[{i}] has a shape of {:?} and output[{i}] has a shape of {:?}.",
                        g.dims(),
                        t.dims()
                    );
                }
                g.clone()
            }
            None => {
                if t.numel() != 1 {
                    bail!(Autograd, "grad can be implicitly created only for scalar outputs");
                }
                Tensor::ones_like(t)?
            }
        };
        roots.push((edge, g));
    }
    Ok(roots)
}

impl Tensor {
    /// `t.backward()`: for a one-element tensor, adds `d t / d leaf` into the `.grad` of every
    /// leaf it depends on, then frees the graph's saved tensors.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([3f32])?.requires_grad_(true)?;
    /// let y = x.mul(&x)?; // x^2
    /// y.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![6.]);
    /// assert!(y.backward().is_err()); // the graph was freed (retain_graph=false)
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn backward(&self) -> Result<()> {
        backward(&[self], None, None, false)
    }

    /// `t.backward(gradient)`: the vector-Jacobian product with `gradient` (of `t`'s shape),
    /// for non-scalar outputs.
    pub fn backward_with(&self, gradient: &Tensor) -> Result<()> {
        backward(&[self], Some(&[gradient]), None, false)
    }

    /// `t.backward(gradient, retain_graph, create_graph)` with every option.
    pub fn backward_opts(
        &self,
        gradient: Option<&Tensor>,
        retain_graph: bool,
        create_graph: bool,
    ) -> Result<()> {
        match gradient {
            Some(g) => backward(&[self], Some(&[g]), Some(retain_graph), create_graph),
            None => backward(&[self], None, Some(retain_graph), create_graph),
        }
    }
}
