//! How an op records itself: the one pattern every differentiable op follows.
//!
//! ```ignore
//! pub fn exp(&self) -> Result<Tensor> {
//!     let y = self.exp_impl(Out::New)?;              // the kernel never records
//!     if !needs_grad(&[self]) {
//!         return Ok(y);
//!     }
//!     // d exp(x) = exp(x) dx: save the output, multiply the incoming gradient by it.
//!     record1("ExpBackward0", &[self], y, &[Save::Output(0)], |ctx, g| {
//!         Ok(vec![Some(g[0].mul(&ctx.saved(0)?)?)])
//!     })
//! }
//! ```
//!
//! Backward formulas are written with the same public tensor ops, so when the engine runs
//! them with `create_graph` they record a graph of their own: higher-order gradients come for
//! free. Formulas return one gradient per input, of the input's shape (a gradient that
//! broadcasts to the input, e.g. from a broadcasting op, is summed back by the engine).

use super::graph::{Ctx, Node, NodeKind, TensorMeta};
use super::saved::SavedTensor;
use crate::{Result, Tensor};
use std::borrow::Cow;
use std::sync::Arc;

/// Whether an op on `inputs` must be recorded: grad mode is on and an input requires grad.
#[inline]
pub(crate) fn needs_grad(inputs: &[&Tensor]) -> bool {
    inputs.iter().any(|t| t.requires_grad()) && super::is_grad_enabled()
}

/// A tensor the backward formula needs: one of the op's inputs, or one of its outputs.
pub(crate) enum Save<'a> {
    Input(&'a Tensor),
    Output(usize),
}

/// Records an op: a node named `name` whose formula is `backward`, fed by `inputs`. Returns
/// the outputs as tensors attached to the node (aliases of `outputs`; float outputs only).
/// Fails, as PyTorch does, when an input to save is an inference tensor.
pub(crate) fn record(
    name: impl Into<Cow<'static, str>>,
    inputs: &[&Tensor],
    outputs: Vec<Tensor>,
    saved: &[Save<'_>],
    backward: impl Fn(&Ctx<'_>, &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
) -> Result<Vec<Tensor>> {
    if saved.iter().any(|s| matches!(s, Save::Input(t) if t.is_inference())) {
        crate::bail!(
            Autograd,
            "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`."
        );
    }
    let next = inputs.iter().map(|t| t.gradient_edge()).collect();
    let in_meta = inputs.iter().map(|t| TensorMeta::of(t)).collect();
    let out_meta = outputs.iter().map(TensorMeta::of).collect();
    let saved_tensors: Vec<SavedTensor> = saved
        .iter()
        .map(|s| match s {
            Save::Input(t) => SavedTensor::input(t),
            Save::Output(i) => SavedTensor::output(&outputs[*i], *i),
        })
        .collect();
    let node = Arc::new(Node::new(
        name.into(),
        next,
        in_meta,
        out_meta,
        NodeKind::Backward(Box::new(backward)),
        super::anomaly::trace(),
    ));
    if crate::memory_history::is_recording() {
        note_memory(&node, &outputs, &saved_tensors);
    }
    if crate::profiler_record::is_active() {
        crate::profiler_record::note_forward(node.seq);
    }
    node.saved.lock().unwrap().tensors = saved_tensors;
    Ok(outputs
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            if !t.dtype().is_floating_point() {
                t
            } else if t.is_fresh() {
                t.set_grad_fn(node.clone(), i); // a new tensor only we hold: attach in place
                t
            } else {
                t.attach(node.clone(), i) // shared (e.g. an input returned as is): an alias
            }
        })
        .collect())
}

/// Memory history: the outputs were made by this op, and what it saves is activation memory
/// held for backward. Out of line, so that the generic `record` stays small.
#[cold]
#[inline(never)]
fn note_memory(node: &Node, outputs: &[Tensor], saved: &[SavedTensor]) {
    let op = crate::memory_history::forward_op_name(node.name());
    for t in outputs {
        crate::memory_history::name_op(t, op);
    }
    for st in saved {
        crate::memory_history::tag(st.data(), crate::memory_history::Category::Activation, node.name());
    }
}

/// [`record`] for an op with one output.
pub(crate) fn record1(
    name: impl Into<Cow<'static, str>>,
    inputs: &[&Tensor],
    output: Tensor,
    saved: &[Save<'_>],
    backward: impl Fn(&Ctx<'_>, &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
) -> Result<Tensor> {
    Ok(record(name, inputs, vec![output], saved, backward)?.pop().expect("one output"))
}

/// Pauses recording while an op that records itself computes its forward from other public
/// ops (`paused(recording)` returns a no-grad guard when `recording`).
#[inline]
pub(crate) fn paused(recording: bool) -> Option<super::GradModeGuard> {
    recording.then(super::no_grad)
}

/// PyTorch's error for an in-place op on a leaf that requires grad (outside `no_grad`).
fn check_leaf(t: &Tensor) -> Result<()> {
    if t.requires_grad() && t.is_leaf() && super::is_grad_enabled() {
        crate::bail!(Autograd, "a leaf Variable that requires grad is being used in an in-place operation.");
    }
    Ok(())
}

/// Runs in-place op `kernel` on `t`. Under autograd, the op is recorded: it is computed out of
/// place (`out_of_place`, from a recorded copy of `t`'s old value), the result is written into
/// `t` and `t`'s history moves to the new node, as PyTorch's in-place ops rebase history.
/// Saved tensors that shared `t`'s storage see the version bump and refuse to be used.
/// When `t` is a view, its base's history is rewritten ([`rebase_view`]).
pub(crate) fn inplace_ad(
    t: &Tensor,
    others: &[&Tensor],
    out_of_place: impl FnOnce(&Tensor) -> Result<Tensor>,
    kernel: impl FnOnce() -> Result<()>,
) -> Result<()> {
    t.check_inplace_allowed()?;
    t.check_no_grad_view(others.iter().any(|o| o.requires_grad()))?;
    let recording =
        super::is_grad_enabled() && (t.requires_grad() || others.iter().any(|o| o.requires_grad()));
    if !recording {
        return kernel();
    }
    check_leaf(t)?;
    let base = t.view_base();
    if let Some(b) = &base {
        if b.requires_grad() && b.is_leaf() {
            crate::bail!(
                Autograd,
                "a view of a leaf Variable that requires grad is being used in an in-place operation."
            );
        }
        if dense_order(b).is_none() {
            crate::bail!(
                NotImplemented,
                "autograd of an in-place op on a view of a tensor whose elements are not dense in memory (expanded, or with gaps) is not implemented yet"
            );
        }
    }
    let y = out_of_place(&t.deep_clone()?)?.to_dtype(t.dtype())?;
    {
        let _g = super::no_grad();
        t.copy_(&y)?;
    }
    match base {
        Some(b) => rebase_view(t, &b, &y),
        None => {
            match y.grad_fn() {
                Some(f) => t.set_grad_fn(f, y.output_nr()),
                None => {
                    t.detach_()?;
                }
            }
            Ok(())
        }
    }
}

/// The dim order that makes `base` contiguous (`None` if it is already), or `Err` when no
/// order does (an expanded tensor, or one with gaps): a view's storage offset and strides
/// then address the same elements in `base.permute(order)` as in memory, so views of `base`
/// can be located inside gradients of `base`'s shape.
fn dense_order(base: &Tensor) -> Option<Option<Vec<isize>>> {
    if base.is_contiguous() {
        return Some(None);
    }
    let mut order: Vec<usize> = (0..base.rank()).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(base.stride()[d]));
    let order: Vec<isize> = order.into_iter().map(|d| d as isize).collect();
    let p = base.permute(&order).ok()?;
    p.is_contiguous().then_some(Some(order))
}

/// `t`'s elements inside a tensor `g` of `base`'s shape, by `t`'s memory layout (`order` from
/// [`dense_order`] of the base, `offset` relative to the base's first element).
pub(crate) fn region_of(g: &Tensor, order: Option<&[isize]>, t_layout: &ViewGeometry) -> Result<Tensor> {
    let g = match order {
        Some(o) => g.permute(o)?,
        None => g.clone(),
    };
    crate::view::strided_view(&g, t_layout.shape.clone(), t_layout.strides.clone(), t_layout.offset)
}

/// Where a view sits in its base's memory.
#[derive(Clone)]
pub(crate) struct ViewGeometry {
    shape: crate::shape::Shape,
    strides: crate::shape::DimVec,
    offset: usize,
}

impl ViewGeometry {
    /// `t`'s geometry inside `base`, or `None` when `base` is not dense or `t` starts before it.
    pub(crate) fn of(t: &Tensor, base: &Tensor) -> Option<(ViewGeometry, Option<Vec<isize>>)> {
        let order = dense_order(base)?;
        let offset = t.storage_offset().checked_sub(base.storage_offset())?;
        Some((ViewGeometry { shape: t.shape().clone(), strides: t.stride().into(), offset }, order))
    }
}

/// After view `t` of `base` was overwritten in place with `y`: `base`'s history becomes
/// PyTorch's `CopySlices` (the old base with the view's region replaced by `y`), and `t`'s
/// becomes a view of that.
fn rebase_view(t: &Tensor, base: &Tensor, y: &Tensor) -> Result<()> {
    if !base.requires_grad() && !y.requires_grad() {
        return Ok(());
    }
    let Some((geo, order)) = ViewGeometry::of(t, base) else {
        crate::bail!(
            NotImplemented,
            "autograd of an in-place op on this view of its base is not implemented yet"
        );
    };
    // the base in memory order, and back
    let dense_shape: crate::shape::Shape = match &order {
        Some(o) => o.iter().map(|&d| base.dims()[d as usize]).collect::<Vec<usize>>().into(),
        None => base.shape().clone(),
    };
    let inverse: Option<Vec<isize>> = order.as_ref().map(|o| {
        let mut inv = vec![0isize; o.len()];
        for (i, &d) in o.iter().enumerate() {
            inv[d as usize] = i as isize;
        }
        inv
    });
    let (g2, o2) = (geo.clone(), order.clone());
    let new_base = record1("CopySlices", &[base, y], base.detach(), &[], move |_, g| {
        // The region's gradient goes to y, the rest (the region zeroed) to the old base.
        let region = region_of(&g[0], o2.as_deref(), &g2)?;
        let g3 = g2.clone();
        let view: crate::view::ViewFn = Arc::new(move |z: &Tensor| region_of(z, None, &g3));
        let mut placed = crate::view::view_scatter(&region, &dense_shape, view)?;
        if let Some(inv) = &inverse {
            placed = placed.permute(inv)?;
        }
        Ok(vec![Some(g[0].sub(&placed)?), Some(region)])
    })?;
    let node = new_base.grad_fn().expect("recorded");
    base.set_grad_fn(node, 0);
    // t is now a view of the new base
    let t_new = region_of(base, order.as_deref(), &geo)?;
    match t_new.grad_fn() {
        Some(f) => t.set_grad_fn(f, 0),
        None => t.detach_().map(drop)?,
    }
    t.mark_view_synced();
    Ok(())
}

/// PyTorch's `DelayedError`: `t` unchanged, but differentiating through it (a higher-order
/// gradient whose formula is not valid here) fails with `msg`. A no-op when `t` does not
/// require grad.
pub(crate) fn delayed_error(t: Tensor, msg: &'static str) -> Result<Tensor> {
    if !needs_grad(&[&t]) {
        return Ok(t);
    }
    record1("DelayedError", &[&t], t.detach(), &[], move |_, _| Err(crate::err!(Autograd, "{msg}")))
}
