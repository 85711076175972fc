//! `torch.utils.checkpoint`: activation checkpointing, trading compute for memory.
//!
//! A checkpointed segment runs its forward under `no_grad`: none of its intermediate
//! activations are kept, only its inputs. When the backward pass reaches the segment, its
//! forward is run again with grad enabled (from the saved inputs, with the global RNG state of
//! the first run so that dropout draws the same masks) and the recomputed graph is
//! backpropagated; the gradients of the inputs and of the parameters leave the segment as if
//! it had been recorded normally. The result is the same, bit for bit, as without
//! checkpointing; the price is one more forward of every checkpointed segment.
//!
//! The segment is one node of Pyrite's autograd graph (a custom
//! [`Function`](pyrite_core::autograd::Function) named `CheckpointFunctionBackward`) whose
//! inputs are the segment's inputs and the parameters it uses, so gradients reach both through
//! the ordinary engine: `backward`, `autograd::grad`, tensor hooks and gradient accumulation
//! all behave as without checkpointing (PyTorch's `use_reentrant=False` behaviour).
//!
//! ```
//! use pyrite::nn::{Linear, Module, ReLU, Sequential};
//! use pyrite::utils::checkpoint::{checkpoint_sequential, CheckpointOptions};
//! use pyrite::{DType, Tensor};
//!
//! let model = Sequential::new()
//!     .append(Linear::new(8, 16)?)
//!     .append(ReLU::new())
//!     .append(Linear::new(16, 16)?)
//!     .append(ReLU::new())
//!     .append(Linear::new(16, 1)?);
//! let x = Tensor::randn([4, 8], DType::F32)?.requires_grad_(true)?;
//! // two segments: the first is checkpointed, the last runs normally
//! let y = checkpoint_sequential(&model, 2, &x, CheckpointOptions::default())?;
//! y.sum()?.backward()?;
//! assert_eq!(x.grad().unwrap().dims(), &[4, 8]);
//! assert!(model.parameters().iter().all(|p| p.grad().is_some()));
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::container::Sequential;
use crate::module::Module;
use pyrite_core::autograd::{self, Function, FunctionCtx, Node};
use pyrite_core::{bail, Result, Tensor};
use std::collections::HashSet;
use std::sync::Arc;

/// The keywords of [`checkpoint`] and [`checkpoint_sequential`] (PyTorch's defaults).
///
/// PyTorch's `use_reentrant`, `context_fn`, `determinism_check` and `debug` are not offered:
/// Pyrite has one implementation, which behaves as `use_reentrant=False` for the inputs and
/// the listed `params`.
#[derive(Clone, Debug)]
pub struct CheckpointOptions {
    /// Save the global RNG state before the forward and restore it for the recomputation, so
    /// that random ops (dropout) draw the same numbers both times. Default `true`. With
    /// `false` the recomputation draws fresh numbers: dropout masks differ from the forward's
    /// and the gradients are not those of the computed output.
    pub preserve_rng_state: bool,
    /// Tensors that the function uses besides its inputs (typically the parameters of the
    /// modules it calls): they receive their gradients through the checkpoint's node, as
    /// inputs do. [`checkpoint_sequential`] adds the modules' parameters itself. A leaf that
    /// requires grad, used by the function and not listed here, still gets its `.grad`: the
    /// recomputation adds into it directly (PyTorch's `use_reentrant=True` behaviour), so it
    /// is missed by `autograd::grad`. Default: none.
    pub params: Vec<Tensor>,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions { preserve_rng_state: true, params: Vec::new() }
    }
}

/// A checkpointed function: tensors in, tensors out.
pub type CheckpointFn = dyn Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync;

/// `torch.utils.checkpoint.checkpoint(function, *inputs)`: runs `function(inputs)` without
/// keeping its intermediate activations, and recomputes them in the backward pass.
///
/// Returns what `function` returns, attached to one node of the graph. The inputs are saved
/// (an in-place change to one of them before backward is PyTorch's "modified by an inplace
/// operation" error). When neither an input nor a listed parameter requires grad, PyTorch's
/// warning "None of the inputs have requires_grad=True. Gradients will be None" is raised
/// (see [`pyrite_core::warnings`]) and the function runs as usual. Under `no_grad` the
/// function simply runs.
///
/// `function` must compute the same thing when run again: modules that change state in their
/// forward (BatchNorm's running statistics) update it twice, as in PyTorch. Differentiating
/// twice through a checkpoint (`create_graph`) gives the gradients but not a graph back to the
/// inputs.
///
/// ```
/// use pyrite::utils::checkpoint::{checkpoint, CheckpointOptions};
/// use pyrite::{DType, Tensor};
///
/// let w = Tensor::randn([3, 3], DType::F64)?.requires_grad_(true)?;
/// let x = Tensor::randn([2, 3], DType::F64)?.requires_grad_(true)?;
/// let w2 = w.clone();
/// let f = move |xs: &[Tensor]| Ok(vec![xs[0].matmul(&w2)?.tanh()?]);
/// let opts = CheckpointOptions { params: vec![w.clone()], ..Default::default() };
/// let y = checkpoint(f, &[&x], opts)?.remove(0);
/// assert_eq!(y.grad_fn().unwrap().name(), "CheckpointFunctionBackward");
/// y.sum()?.backward()?;
/// // the same gradients as without checkpointing
/// let (gx, gw) = (x.grad().unwrap(), w.grad().unwrap());
/// let plain = x.matmul(&w)?.tanh()?.sum()?;
/// let g = pyrite::autograd::grad(&[&plain], &[&x, &w], None, None, false, false)?;
/// assert!(gx.allclose(g[0].as_ref().unwrap(), 0.0, 0.0, false)?);
/// assert!(gw.allclose(g[1].as_ref().unwrap(), 0.0, 0.0, false)?);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn checkpoint(
    function: impl Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync + 'static,
    inputs: &[&Tensor],
    options: CheckpointOptions,
) -> Result<Vec<Tensor>> {
    checkpoint_arc(Arc::new(function), inputs, options)
}

fn checkpoint_arc(
    function: Arc<CheckpointFn>,
    inputs: &[&Tensor],
    options: CheckpointOptions,
) -> Result<Vec<Tensor>> {
    if !autograd::is_grad_enabled() {
        let owned: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        return function(&owned);
    }
    if !inputs.iter().copied().chain(&options.params).any(|t| t.requires_grad()) {
        pyrite_core::warnings::warn(
            "torch.utils.checkpoint",
            "None of the inputs have requires_grad=True. Gradients will be None",
        );
    }
    let rng_state = options.preserve_rng_state.then(pyrite_core::get_rng_state);
    let n_inputs = inputs.len();
    let mut all: Vec<&Tensor> = inputs.to_vec();
    all.extend(options.params.iter());
    autograd::apply(
        CheckpointFunction { function, n_inputs, params: options.params.clone(), rng_state },
        &all,
    )
}

/// The checkpoint's node.
struct CheckpointFunction {
    function: Arc<CheckpointFn>,
    n_inputs: usize,
    params: Vec<Tensor>,
    /// The global RNG state at the forward, when `preserve_rng_state`.
    rng_state: Option<Tensor>,
}

/// Restores the global RNG state when dropped (PyTorch's `fork_rng`).
struct RestoreRng(Tensor);

impl Drop for RestoreRng {
    fn drop(&mut self) {
        let _ = pyrite_core::set_rng_state(&self.0);
    }
}

impl Function for CheckpointFunction {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        // apply runs this under no_grad: nothing inside the function is recorded.
        let xs = &inputs[..self.n_inputs];
        ctx.save_for_backward(xs);
        let owned: Vec<Tensor> = xs.iter().map(|t| (*t).clone()).collect();
        (self.function)(&owned)
    }

    fn backward(&self, ctx: &FunctionCtx, grad_outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let create_graph = autograd::is_grad_enabled(); // the engine enables grad only then
        let n = self.n_inputs;
        // The inputs, detached (the recomputed graph ends at them), requiring grad as needed.
        let xs = ctx
            .saved_tensors()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let d = t.detach();
                if ctx.needs_input_grad(i) && d.dtype().is_floating_point() {
                    d.requires_grad_(true)
                } else {
                    Ok(d)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let outputs = {
            let _grad = autograd::enable_grad();
            let _restore = match &self.rng_state {
                Some(state) => {
                    let now = RestoreRng(pyrite_core::get_rng_state());
                    pyrite_core::set_rng_state(state)?;
                    Some(now)
                }
                None => None,
            };
            (self.function)(&xs)?
        };
        if outputs.len() != grad_outputs.len() {
            bail!(
                Autograd,
                "checkpoint: the recomputed function returned {} outputs, the first run {}",
                outputs.len(),
                grad_outputs.len()
            );
        }
        // The outputs to backpropagate, with their gradients.
        let (outs, grads): (Vec<&Tensor>, Vec<&Tensor>) =
            outputs.iter().zip(grad_outputs).filter(|(o, _)| o.requires_grad()).unzip();
        let mut result: Vec<Option<Tensor>> = vec![None; n + self.params.len()];
        if outs.is_empty() {
            return Ok(result);
        }
        // What to differentiate: the inputs and listed parameters that need it, then any other
        // leaf that the recomputation reached (its gradient is added into its .grad here).
        let mut slots: Vec<usize> = Vec::new();
        let mut targets: Vec<Tensor> = Vec::new();
        for (i, x) in xs.iter().enumerate() {
            if x.requires_grad() {
                slots.push(i);
                targets.push(x.clone());
            }
        }
        for (j, p) in self.params.iter().enumerate() {
            if ctx.needs_input_grad(n + j) {
                slots.push(n + j);
                targets.push(p.clone());
            }
        }
        let n_tracked = targets.len();
        targets.extend(unlisted_leaves(&outs, &xs, &self.params));
        if targets.is_empty() {
            return Ok(result);
        }
        let refs: Vec<&Tensor> = targets.iter().collect();
        let g = autograd::grad(&outs, &refs, Some(&grads), Some(false), create_graph, true)?;
        for (k, gk) in g.into_iter().enumerate() {
            if k < n_tracked {
                result[slots[k]] = gk;
            } else if let Some(gk) = gk {
                let leaf = &targets[k];
                let _g = autograd::no_grad();
                let sum = match leaf.grad() {
                    Some(old) => old.add(&gk)?,
                    None => gk,
                };
                leaf.set_grad(Some(sum))?;
            }
        }
        Ok(result)
    }

    fn name(&self) -> String {
        "CheckpointFunctionBackward".to_string()
    }
}

/// The leaves requiring grad that the recomputed graph of `outs` reaches, other than the
/// detached inputs `xs` and the listed `params` (tensors the function captured).
fn unlisted_leaves(outs: &[&Tensor], xs: &[Tensor], params: &[Tensor]) -> Vec<Tensor> {
    let mut seen: HashSet<*const Node> = HashSet::new();
    let mut stack: Vec<Arc<Node>> = outs.iter().filter_map(|o| o.grad_fn()).collect();
    let mut found = Vec::new();
    while let Some(node) = stack.pop() {
        if !seen.insert(Arc::as_ptr(&node)) {
            continue;
        }
        if let Some(leaf) = node.variable() {
            let known = xs.iter().chain(params).any(|t| t.is_same(&leaf));
            if !known {
                found.push(leaf);
            }
            continue;
        }
        for (next, _) in node.next_functions().into_iter().flatten() {
            stack.push(next);
        }
    }
    found
}

/// `torch.utils.checkpoint.checkpoint_sequential(functions, segments, input)`: runs the
/// modules of `functions` in order on `input`, split into `segments` consecutive chunks of
/// `len / segments` modules; every chunk but the last is [`checkpoint`]ed (with its modules'
/// parameters as [`CheckpointOptions::params`], added to any given), the last one (with the
/// remaining modules) runs normally, as in PyTorch.
///
/// `segments` must be between 1 and the number of modules (PyTorch fails on more segments
/// than modules too). See the [module documentation](self) for an example.
pub fn checkpoint_sequential(
    functions: &Sequential,
    segments: usize,
    input: &Tensor,
    options: CheckpointOptions,
) -> Result<Tensor> {
    let n = functions.len();
    if segments == 0 || segments > n {
        bail!(
            Value,
            "checkpoint_sequential: segments must be between 1 and the number of modules ({n}), got {segments}"
        );
    }
    let size = n / segments;
    let mut x = input.clone();
    let mut end = 0;
    for start in (0..size * (segments - 1)).step_by(size) {
        end = start + size;
        let chunk = functions.slice(start..end);
        let mut opts = options.clone();
        opts.params.extend(chunk.parameters().into_iter().filter(|p| p.requires_grad()));
        let run = move |xs: &[Tensor]| Ok(vec![chunk.call(&xs[0])?]);
        x = checkpoint(run, &[&x], opts)?.remove(0);
    }
    functions.slice(end..n).call(&x)
}
