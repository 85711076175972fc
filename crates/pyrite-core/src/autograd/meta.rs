//! Per-tensor autograd state and the tensor methods that read and change it:
//! `requires_grad_`, `grad`, `is_leaf`, `grad_fn`, `detach`, `retain_grad`, hooks.

use super::graph::{Edge, Node, NodeKind, PreHook, TensorMeta};
use crate::{bail, Result, Tensor};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// A tensor hook: sees the gradient flowing into a tensor and may return a replacement.
pub(crate) type HookFn = Arc<dyn Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync>;
/// Runs after a leaf's `.grad` was updated, with the leaf.
pub(crate) type PostAccumulateHookFn = Arc<dyn Fn(&Tensor) -> Result<()> + Send + Sync>;

/// Per-tensor autograd state, allocated only for tensors that take part in autograd.
#[derive(Default)]
pub(crate) struct AutogradMeta {
    /// Set on leaves by `requires_grad_(true)`; non-leaves require grad through `grad_fn`.
    requires_grad: bool,
    grad: Option<Tensor>,
    grad_fn: Option<Arc<Node>>,
    output_nr: usize,
    /// A leaf's `AccumulateGrad` node, shared by every graph that uses the leaf while any
    /// of them is alive.
    accumulator: Weak<Node>,
    retains_grad: bool,
    /// For a view made while grad mode was on: the tensor whose storage it views (never itself
    /// a view). An in-place op on the view rewrites the base's history (`CopySlices`).
    view_base: Option<Tensor>,
    /// Hooks of a leaf (a non-leaf's hooks live on its `grad_fn`).
    hooks: Vec<(u64, HookFn)>,
    post_accumulate_hooks: Vec<(u64, PostAccumulateHookFn)>,
}

/// `AutogradSlot::flags`: the tensor requires grad.
const ACTIVE: u8 = 1;
/// `AutogradSlot::flags`: the tensor is a view that remembers its base.
const VIEW: u8 = 2;
/// `AutogradSlot::flags`: a view made while grad mode was off (set once, when it is made).
const NO_GRAD_VIEW: u8 = 4;
/// `AutogradSlot::flags`: such a view, of a tensor that required grad.
const NO_GRAD_VIEW_OF_GRAD: u8 = 8;

/// The slot in every tensor. `flags` is a lock-free hint that the tensor requires grad (or is
/// a view), so that ops on plain tensors pay one atomic load, not a lock.
pub(crate) struct AutogradSlot {
    flags: AtomicU8,
    /// For a view: the storage version its history was made at. An in-place write through
    /// the base or another view changes the version; the view's history is then regenerated
    /// from the base's new history when next used (PyTorch's view `grad_fn` regeneration).
    view_version: AtomicU64,
    meta: Mutex<Option<Box<AutogradMeta>>>,
}

impl AutogradSlot {
    pub const fn new() -> AutogradSlot {
        AutogradSlot { flags: AtomicU8::new(0), view_version: AtomicU64::new(0), meta: Mutex::new(None) }
    }

    fn with<R>(&self, f: impl FnOnce(&mut AutogradMeta) -> R) -> R {
        let mut g = self.meta.lock().unwrap();
        let m = g.get_or_insert_with(Default::default);
        let r = f(m);
        let active = if m.requires_grad || m.grad_fn.is_some() { ACTIVE } else { 0 };
        let view = if m.view_base.is_some() { VIEW } else { 0 };
        let keep = self.flags.load(Ordering::Relaxed) & (NO_GRAD_VIEW | NO_GRAD_VIEW_OF_GRAD);
        self.flags.store(active | view | keep, Ordering::Release);
        r
    }

    fn read<R>(&self, f: impl FnOnce(Option<&AutogradMeta>) -> R) -> R {
        let g = self.meta.lock().unwrap();
        f(g.as_deref())
    }
}

impl Drop for AutogradSlot {
    fn drop(&mut self) {
        // A grad_fn holds the graph: free it through the node's iterative drop.
        let _ = self.meta.get_mut().map(|m| m.take());
    }
}

static HOOK_ID: AtomicU64 = AtomicU64::new(0);

/// Unregisters a hook when [`RemovableHandle::remove`] is called (PyTorch's
/// `RemovableHandle`). Dropping the handle keeps the hook.
pub struct RemovableHandle {
    id: u64,
    target: HookTarget,
}

enum HookTarget {
    Leaf(Weak<crate::tensor::TensorImpl>),
    Node(Weak<Node>),
}

impl RemovableHandle {
    /// Removes the hook; later backward passes no longer call it.
    pub fn remove(&self) {
        match &self.target {
            HookTarget::Leaf(w) => {
                if let Some(t) = w.upgrade() {
                    t.autograd.with(|m| {
                        m.hooks.retain(|(i, _)| *i != self.id);
                        m.post_accumulate_hooks.retain(|(i, _)| *i != self.id);
                    });
                }
            }
            HookTarget::Node(w) => {
                if let Some(n) = w.upgrade() {
                    n.pre_hooks.lock().unwrap().retain(|h| h.id != self.id);
                }
            }
        }
    }
}

impl Tensor {
    /// `t.requires_grad`: whether gradients flow to this tensor (a leaf marked with
    /// [`Tensor::requires_grad_`], or the result of recorded ops on such tensors).
    pub fn requires_grad(&self) -> bool {
        let f = self.0.autograd.flags.load(Ordering::Acquire);
        if f & ACTIVE != 0 {
            return true;
        }
        // a view whose storage was written since its history was made: its base may have
        // gained history through another view (PyTorch's view then requires grad too)
        f & VIEW != 0
            && self.version() != self.0.autograd.view_version.load(Ordering::Acquire)
            && self.view_refresh()
    }

    /// The slow part of [`Tensor::requires_grad`] for a view whose storage was written since
    /// its history was made: regenerates it from the base, then says whether it requires grad.
    #[cold]
    #[inline(never)]
    fn view_refresh(&self) -> bool {
        match self.0.autograd.read(|m| m.and_then(|m| self.stale_view_base(m))) {
            Some(base) => {
                self.regenerate_view(&base);
                self.0.autograd.flags.load(Ordering::Acquire) & ACTIVE != 0
            }
            None => false,
        }
    }

    /// `t.requires_grad_(flag)`: marks a leaf as one whose gradient autograd computes.
    /// Only floating-point tensors can require grad; a non-leaf's flag cannot be turned off.
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let x = Tensor::new([1f32, 2., 3.])?.requires_grad_(true)?;
    /// let y = x.mul(&x)?.sum()?;
    /// y.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![2., 4., 6.]);
    /// assert!(Tensor::new([1i64])?.requires_grad_(true).is_err());
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn requires_grad_(&self, requires_grad: bool) -> Result<Tensor> {
        if requires_grad && !self.dtype().is_floating_point() {
            bail!(
                Autograd,
                "only Tensors of floating point and complex dtype can require gradients (got {})",
                self.dtype()
            );
        }
        if requires_grad && self.is_inference() && !super::is_inference_mode_enabled() {
            bail!(
                Autograd,
                "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed."
            );
        }
        if !self.is_leaf() {
            if !requires_grad {
                bail!(
                    Autograd,
                    "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
                );
            }
            return Ok(self.clone());
        }
        self.0.autograd.with(|m| m.requires_grad = requires_grad);
        if requires_grad {
            // Memory history: a leaf that requires grad is a parameter.
            crate::memory_history::tag(self, crate::memory_history::Category::Parameter, "");
        }
        Ok(self.clone())
    }

    /// `t.is_inference()`: whether this tensor was made inside
    /// [`inference_mode`](crate::autograd::inference_mode) (or is a view of one that was).
    /// Inference tensors cannot be saved for backward, and cannot be updated in place outside
    /// inference mode.
    ///
    /// ```
    /// use pyrite_core::{autograd, DType, Tensor};
    /// let x = {
    ///     let _g = autograd::inference_mode();
    ///     Tensor::ones([2], DType::F32)?
    /// };
    /// assert!(x.is_inference());
    /// assert!(!x.mul_scalar(2.0)?.is_inference()); // made outside: a normal tensor
    /// assert!(x.mul_scalar_(2.0).is_err()); // in place outside inference mode
    /// let y = x.deep_clone()?; // the workaround: a clone is a normal tensor
    /// y.mul_scalar_(2.0)?;
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn is_inference(&self) -> bool {
        self.storage().is_inference()
    }

    /// PyTorch's error for an in-place update of an inference tensor outside inference mode;
    /// every in-place kernel checks it before writing.
    #[inline]
    pub(crate) fn check_inplace_allowed(&self) -> Result<()> {
        if self.storage().is_inference() && !super::is_inference_mode_enabled() {
            bail!(
                Autograd,
                "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details."
            );
        }
        Ok(())
    }

    /// `t.is_leaf`: true unless the tensor was made by a recorded op (its `grad_fn` is set).
    pub fn is_leaf(&self) -> bool {
        self.grad_fn().is_none()
    }

    /// `t.grad_fn`: the node that made this tensor, e.g. `MulBackward0`; `None` for leaves.
    pub fn grad_fn(&self) -> Option<Arc<Node>> {
        if !self.requires_grad() {
            return None;
        }
        let (f, stale) = self.0.autograd.read(|m| match m {
            Some(m) => (m.grad_fn.clone(), self.stale_view_base(m)),
            None => (None, None),
        });
        match stale {
            Some(base) => {
                self.regenerate_view(&base);
                self.0.autograd.read(|m| m.and_then(|m| m.grad_fn.clone()))
            }
            None => f,
        }
    }

    /// Which output of its `grad_fn` this tensor is.
    pub(crate) fn output_nr(&self) -> usize {
        self.0.autograd.read(|m| m.map_or(0, |m| m.output_nr))
    }

    /// `t.grad`: the accumulated gradient; `None` until a backward pass reaches this leaf (or
    /// a non-leaf that called [`Tensor::retain_grad`]).
    pub fn grad(&self) -> Option<Tensor> {
        self.0.autograd.read(|m| m.and_then(|m| m.grad.clone()))
    }

    /// `t.grad = g`: sets or clears (`None`) the gradient. The gradient must have this
    /// tensor's shape.
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        if let Some(g) = &grad {
            if g.dims() != self.dims() {
                bail!(
                    Shape,
                    "assigned grad has data of a different size: expected {:?}, got {:?}",
                    self.dims(),
                    g.dims()
                );
            }
            if g.dtype() != self.dtype() {
                bail!(
                    DType,
                    "assigned grad has data of a different type: expected {}, got {}",
                    self.dtype(),
                    g.dtype()
                );
            }
        }
        self.0.autograd.with(|m| m.grad = grad);
        Ok(())
    }

    /// `t.retain_grad()`: makes a non-leaf keep its gradient in `.grad` after backward.
    /// A no-op on leaves; an error on tensors that do not require grad.
    pub fn retain_grad(&self) -> Result<()> {
        let Some(f) = self.grad_fn() else {
            if self.requires_grad() {
                return Ok(());
            }
            bail!(Autograd, "can't retain_grad on Tensor that has requires_grad=False");
        };
        if self.0.autograd.with(|m| std::mem::replace(&mut m.retains_grad, true)) {
            return Ok(());
        }
        let weak = Arc::downgrade(&self.0);
        let hook: HookFn = Arc::new(move |g: &Tensor| {
            if let Some(t) = weak.upgrade() {
                let g = g.detach();
                t.autograd.with(|m| -> Result<()> {
                    m.grad = Some(match m.grad.take() {
                        None => g.deep_clone()?,
                        Some(old) => old.add(&g)?,
                    });
                    Ok(())
                })?;
            }
            Ok(None)
        });
        let id = HOOK_ID.fetch_add(1, Ordering::Relaxed);
        f.pre_hooks.lock().unwrap().push(PreHook { id, slot: self.output_nr(), f: hook });
        Ok(())
    }

    /// `t.retains_grad`.
    pub fn retains_grad(&self) -> bool {
        self.0.autograd.read(|m| m.is_some_and(|m| m.retains_grad))
    }

    /// `t.register_hook(f)`: `f` sees every gradient computed for this tensor and may return
    /// a replacement (`Some`) or leave it (`None`). Returns a handle that removes the hook.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let x = Tensor::new([1f32, 2.])?.requires_grad_(true)?;
    /// let h = x.register_hook(|g| Ok(Some(g.mul_scalar(10.0)?)))?;
    /// x.sum()?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![10., 10.]);
    /// h.remove();
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn register_hook(
        &self,
        hook: impl Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync + 'static,
    ) -> Result<RemovableHandle> {
        if !self.requires_grad() {
            bail!(Autograd, "cannot register a hook on a tensor that doesn't require gradient");
        }
        let id = HOOK_ID.fetch_add(1, Ordering::Relaxed);
        let f: HookFn = Arc::new(hook);
        match self.grad_fn() {
            Some(node) => {
                node.pre_hooks.lock().unwrap().push(PreHook { id, slot: self.output_nr(), f });
                Ok(RemovableHandle { id, target: HookTarget::Node(Arc::downgrade(&node)) })
            }
            None => {
                self.0.autograd.with(|m| m.hooks.push((id, f)));
                Ok(RemovableHandle { id, target: HookTarget::Leaf(Arc::downgrade(&self.0)) })
            }
        }
    }

    /// `t.register_post_accumulate_grad_hook(f)`: on a leaf, `f` runs with the leaf after
    /// each backward pass has added into its `.grad` (an optimizer step can live here).
    pub fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Tensor) -> Result<()> + Send + Sync + 'static,
    ) -> Result<RemovableHandle> {
        if !self.requires_grad() {
            bail!(Autograd, "cannot register a hook on a tensor that doesn't require gradient");
        }
        if !self.is_leaf() {
            bail!(Autograd, "post accumulate grad hooks cannot be registered on non-leaf tensors");
        }
        let id = HOOK_ID.fetch_add(1, Ordering::Relaxed);
        self.0.autograd.with(|m| m.post_accumulate_hooks.push((id, Arc::new(hook))));
        Ok(RemovableHandle { id, target: HookTarget::Leaf(Arc::downgrade(&self.0)) })
    }

    /// `t.detach()`: the same data (shared storage, shared version counter) cut off from the
    /// graph; it does not require grad.
    pub fn detach(&self) -> Tensor {
        self.with_layout(self.layout().clone())
    }

    /// `t.detach_()`: cuts this tensor itself off from the graph, making it a leaf that does
    /// not require grad.
    pub fn detach_(&self) -> Result<Tensor> {
        self.0.autograd.with(|m| {
            m.grad_fn = None;
            m.requires_grad = false;
            m.output_nr = 0;
        });
        Ok(self.clone())
    }

    // ---------------------------------------------------------------- crate internals

    /// The edge a gradient for this tensor flows along: its `grad_fn`, or for a leaf that
    /// requires grad its `AccumulateGrad` node (made on first use).
    pub(crate) fn gradient_edge(&self) -> Option<Edge> {
        if !self.requires_grad() {
            return None;
        }
        loop {
            let me = self.clone();
            // Err(base): a view whose history is stale, to regenerate first
            let edge = self.0.autograd.with(|m| {
                if let Some(base) = self.stale_view_base(m) {
                    return Err(base);
                }
                if let Some(f) = &m.grad_fn {
                    return Ok(Some(Edge { node: f.clone(), input_nr: m.output_nr }));
                }
                if !m.requires_grad {
                    return Ok(None);
                }
                if let Some(acc) = m.accumulator.upgrade() {
                    return Ok(Some(Edge { node: acc, input_nr: 0 }));
                }
                let meta = TensorMeta::of(&me);
                let node = Arc::new(Node::new(
                    "AccumulateGrad".into(),
                    Vec::new(),
                    Vec::new(),
                    vec![meta],
                    NodeKind::AccumulateGrad(me, Default::default()),
                    None,
                ));
                m.accumulator = Arc::downgrade(&node);
                Ok(Some(Edge { node, input_nr: 0 }))
            });
            match edge {
                Ok(e) => return e,
                Err(base) => self.regenerate_view(&base), // marks the view in sync: no loop
            }
        }
    }

    /// The base this view was taken from, if it was made while grad mode was on.
    pub(crate) fn view_base(&self) -> Option<Tensor> {
        self.0.autograd.read(|m| m.and_then(|m| m.view_base.clone()))
    }

    /// Records that `out`, a view of this tensor, shares its base (only while grad mode is on:
    /// only then can an in-place op on the view need to rewrite the base's history).
    pub(crate) fn mark_view(&self, out: &Tensor) {
        if !super::is_grad_enabled() {
            // Remembered (one atomic store on the fresh view) for PyTorch's refusal of an
            // in-place op on it once grad mode is back on.
            let own = self.0.autograd.flags.load(Ordering::Acquire);
            let of_grad = if self.requires_grad() || own & NO_GRAD_VIEW_OF_GRAD != 0 {
                NO_GRAD_VIEW_OF_GRAD
            } else {
                0
            };
            out.0.autograd.flags.fetch_or(NO_GRAD_VIEW | of_grad, Ordering::AcqRel);
            return;
        }
        let base = self.view_base().unwrap_or_else(|| self.clone());
        out.0.autograd.view_version.store(out.version(), Ordering::Release);
        out.0.autograd.with(|m| m.view_base = Some(base));
    }

    /// PyTorch's refusal of an in-place op, with grad mode on, on a view made under `no_grad`
    /// when the op would be recorded (the view's base required grad, or `others_need_grad`).
    pub(crate) fn check_no_grad_view(&self, others_need_grad: bool) -> Result<()> {
        let f = self.0.autograd.flags.load(Ordering::Acquire);
        if f & NO_GRAD_VIEW != 0
            && super::is_grad_enabled()
            && (f & NO_GRAD_VIEW_OF_GRAD != 0 || others_need_grad)
        {
            crate::bail!(
                Autograd,
                "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked)."
            );
        }
        Ok(())
    }

    /// Records that this view's history is up to date with its storage's current version.
    pub(crate) fn mark_view_synced(&self) {
        self.0.autograd.view_version.store(self.version(), Ordering::Release);
    }

    /// For a view whose storage was written in place since its history was made: its base.
    #[inline]
    fn stale_view_base(&self, m: &AutogradMeta) -> Option<Tensor> {
        let base = m.view_base.as_ref()?;
        (self.version() != self.0.autograd.view_version.load(Ordering::Acquire)).then(|| base.clone())
    }

    /// Remakes this view's history as a strided view of its base's current history (PyTorch's
    /// `AsStridedBackward0` after an in-place op through the base or another view), so that
    /// gradients through the view see that op.
    fn regenerate_view(&self, base: &Tensor) {
        if base.requires_grad() && !super::is_inference_mode_enabled() {
            let _g = super::enable_grad();
            let fresh = super::record::ViewGeometry::of(self, base)
                .and_then(|(geo, order)| super::record::region_of(base, order.as_deref(), &geo).ok());
            if let Some(f) = fresh.and_then(|v| v.grad_fn()) {
                self.set_grad_fn(f, 0);
            }
        }
        self.mark_view_synced();
    }

    /// Makes this (fresh) tensor output `output_nr` of `node`.
    pub(crate) fn set_grad_fn(&self, node: Arc<Node>, output_nr: usize) {
        self.0.autograd.with(|m| {
            m.grad_fn = Some(node);
            m.output_nr = output_nr;
        });
    }

    /// Whether this handle is the only one to a tensor outside any graph (a kernel's fresh
    /// result), so that autograd state can be set on it directly.
    pub(crate) fn is_fresh(&self) -> bool {
        Arc::strong_count(&self.0) == 1 && Arc::weak_count(&self.0) == 0 && !self.requires_grad()
    }

    /// An alias of this tensor's data that is output `output_nr` of `node`.
    pub(crate) fn attach(&self, node: Arc<Node>, output_nr: usize) -> Tensor {
        let t = self.detach();
        t.set_grad_fn(node, output_nr);
        t
    }

    pub(crate) fn leaf_hooks(&self) -> Vec<HookFn> {
        self.0
            .autograd
            .read(|m| m.map(|m| m.hooks.iter().map(|(_, h)| h.clone()).collect()).unwrap_or_default())
    }

    pub(crate) fn post_accumulate_hooks(&self) -> Vec<PostAccumulateHookFn> {
        self.0.autograd.read(|m| {
            m.map(|m| m.post_accumulate_hooks.iter().map(|(_, h)| h.clone()).collect()).unwrap_or_default()
        })
    }

    /// Adds `g` into this leaf's `.grad` (`AccumulateGrad`). With `create_graph` the sum is
    /// recorded (out of place) so that the gradient itself can be differentiated. The caller
    /// holds the leaf's accumulation lock (see `NodeKind::AccumulateGrad`), so the read of
    /// `.grad` and the write of the sum are one step for other threads.
    pub(crate) fn accumulate_grad(&self, g: Tensor, create_graph: bool) -> Result<()> {
        let old = self.grad();
        let new = match old {
            None => {
                if create_graph {
                    g
                } else if g.is_contiguous()
                    && Arc::strong_count(&g.0) == 1
                    && Arc::strong_count(g.storage()) == 1
                {
                    g.detach() // the engine's own buffer: adopt it
                } else {
                    g.detach().deep_clone()?
                }
            }
            Some(old) => {
                if create_graph || old.requires_grad() {
                    old.add(&g)?
                } else {
                    let _ng = super::no_grad();
                    old.add_(&g)?;
                    old
                }
            }
        };
        self.0.autograd.with(|m| m.grad = Some(new));
        Ok(())
    }
}
