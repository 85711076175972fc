//! The recorded graph: a [`Node`] per differentiable op, linked to the nodes of its inputs by
//! [`Edge`]s, as in PyTorch. A tensor that requires grad points at the node that made it
//! (its `grad_fn`) or, for a leaf, at an `AccumulateGrad` node that adds into its `.grad`.
//!
//! Nodes own their saved tensors and their edges; graphs are freed when the last tensor or
//! node that refers to them goes away. Dropping is iterative (see [`Node`]'s `Drop`), so a
//! chain of a million ops frees without deep recursion.

use super::meta::{HookFn, PostAccumulateHookFn};
use super::saved::SavedTensor;
use crate::{DType, Device, Result, Shape, Tensor};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The backward formula of one op: given the gradients of its outputs (never missing: absent
/// ones are zeros), returns one gradient per input, `None` where it has none.
pub(crate) type BackwardFn = Box<dyn Fn(&Ctx<'_>, &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// Shape, dtype and device of a tensor the node connects to: gradients are checked (and cast)
/// against it, and missing output gradients are materialised as zeros from it.
#[derive(Clone, Debug)]
pub(crate) struct TensorMeta {
    pub shape: Shape,
    pub dtype: DType,
    pub device: Device,
}

impl TensorMeta {
    pub fn of(t: &Tensor) -> TensorMeta {
        TensorMeta { shape: t.shape().clone(), dtype: t.dtype(), device: t.device() }
    }
}

/// Where a gradient goes: slot `input_nr` of `node`'s incoming gradients.
#[derive(Clone)]
pub(crate) struct Edge {
    pub node: Arc<Node>,
    pub input_nr: usize,
}

pub(crate) enum NodeKind {
    /// An op's backward formula.
    Backward(BackwardFn),
    /// Adds the incoming gradient into a leaf's `.grad`. The lock is held across the read
    /// of `.grad`, the write of the sum and the post-accumulate hooks, so that backward passes
    /// on several threads into one leaf each add their whole contribution (PyTorch's
    /// `AccumulateGrad::mutex_`). Every graph that uses the leaf shares this node.
    AccumulateGrad(Tensor, std::sync::Mutex<()>),
}

/// A hook on one of a node's incoming gradients: a tensor hook of a non-leaf tensor, or
/// `retain_grad`. It may replace the gradient.
pub(crate) struct PreHook {
    pub id: u64,
    pub slot: usize,
    pub f: HookFn,
}

/// One recorded op (PyTorch's `torch.autograd.graph.Node`).
pub struct Node {
    pub(crate) name: Cow<'static, str>,
    /// Creation order; the engine runs ready nodes newest first, as PyTorch does.
    pub(crate) seq: u64,
    /// One per forward input: where that input's gradient goes (`None`: it needs none).
    pub(crate) next: Vec<Option<Edge>>,
    /// One per forward input, for checking the gradients the formula returns.
    pub(crate) inputs: Vec<TensorMeta>,
    /// One per forward output: the gradients this node receives.
    pub(crate) outputs: Vec<TensorMeta>,
    pub(crate) kind: NodeKind,
    pub(crate) saved: Mutex<Saved>,
    pub(crate) pre_hooks: Mutex<Vec<PreHook>>,
    /// Where the forward op was recorded, when anomaly mode was on.
    pub(crate) trace: Option<String>,
}

/// A node's saved tensors; `released` once a backward without `retain_graph` has run it.
#[derive(Default)]
pub(crate) struct Saved {
    pub tensors: Vec<SavedTensor>,
    pub released: bool,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

pub(crate) fn next_seq() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

impl Node {
    pub(crate) fn new(
        name: Cow<'static, str>,
        next: Vec<Option<Edge>>,
        inputs: Vec<TensorMeta>,
        outputs: Vec<TensorMeta>,
        kind: NodeKind,
        trace: Option<String>,
    ) -> Node {
        Node {
            name,
            seq: next_seq(),
            next,
            inputs,
            outputs,
            kind,
            saved: Mutex::new(Saved::default()),
            pre_hooks: Mutex::new(Vec::new()),
            trace,
        }
    }

    /// The node's name, e.g. `MulBackward0` (`grad_fn.name()`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The nodes this one sends gradients to, with the input slot of each
    /// (`grad_fn.next_functions`); `None` for inputs that do not require grad.
    pub fn next_functions(&self) -> Vec<Option<(Arc<Node>, usize)>> {
        self.next.iter().map(|e| e.as_ref().map(|e| (e.node.clone(), e.input_nr))).collect()
    }

    /// For an `AccumulateGrad` node, the leaf it accumulates into (`grad_fn.variable`).
    pub fn variable(&self) -> Option<Tensor> {
        match &self.kind {
            NodeKind::AccumulateGrad(t, _) => Some(t.clone()),
            NodeKind::Backward(_) => None,
        }
    }

    /// Drops the saved tensors (after a backward without `retain_graph`).
    pub(crate) fn release(&self) {
        let mut s = self.saved.lock().unwrap();
        if !s.tensors.is_empty() {
            let old = std::mem::take(&mut s.tensors);
            s.released = true;
            drop(s);
            defer_drop(Box::new(old));
        }
    }

    /// The hooks a tensor registered on incoming slot `slot`, in registration order.
    pub(crate) fn hooks_for(&self, slot: usize) -> Vec<HookFn> {
        let mut hs: Vec<HookFn> =
            self.pre_hooks.lock().unwrap().iter().filter(|h| h.slot == slot).map(|h| h.f.clone()).collect();
        if let NodeKind::AccumulateGrad(leaf, _) = &self.kind {
            hs.extend(leaf.leaf_hooks());
        }
        hs
    }

    pub(crate) fn post_accumulate_hooks(&self) -> Vec<PostAccumulateHookFn> {
        match &self.kind {
            NodeKind::AccumulateGrad(leaf, _) => leaf.post_accumulate_hooks(),
            NodeKind::Backward(_) => Vec::new(),
        }
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{}>", self.name)
    }
}

// Freeing a graph: a node's edges and saved tensors hold the rest of the graph, so dropping
// them inline would recurse once per op. Instead, what a dropped node owned goes on a
// per-thread list that the outermost drop empties in a loop.
thread_local! {
    static GRAVEYARD: RefCell<Vec<Box<dyn Send>>> = const { RefCell::new(Vec::new()) };
    static DRAINING: Cell<bool> = const { Cell::new(false) };
}

fn defer_drop(item: Box<dyn Send>) {
    let queued = GRAVEYARD.try_with(|g| g.borrow_mut().push(item)).is_ok();
    if !queued {
        return; // thread teardown: the item was dropped inside the failed closure call
    }
    if DRAINING.try_with(|d| d.replace(true)).unwrap_or(true) {
        return; // an outer drop is emptying the list
    }
    loop {
        let next = GRAVEYARD.with(|g| g.borrow_mut().pop());
        match next {
            Some(item) => drop(item),
            None => break,
        }
    }
    DRAINING.with(|d| d.set(false));
}

impl Drop for Node {
    fn drop(&mut self) {
        let next = std::mem::take(&mut self.next);
        let saved = std::mem::take(&mut self.saved.get_mut().unwrap().tensors);
        let kind = std::mem::replace(&mut self.kind, NodeKind::Backward(Box::new(|_, _| Ok(Vec::new()))));
        if next.iter().all(|e| e.is_none()) && saved.is_empty() && matches!(kind, NodeKind::Backward(_)) {
            return;
        }
        defer_drop(Box::new((next, saved, kind)));
    }
}

/// What a backward formula can ask about its node.
pub struct Ctx<'a> {
    pub(crate) node: &'a Arc<Node>,
    pub(crate) create_graph: bool,
}

impl Ctx<'_> {
    /// The `i`-th saved tensor, checked against in-place modification since it was saved.
    pub fn saved(&self, i: usize) -> Result<Tensor> {
        let s = self.node.saved.lock().unwrap();
        match s.tensors.get(i) {
            Some(t) => t.unpack(self.node),
            None if s.released => Err(super::saved::freed_error()),
            None => crate::bail!(Autograd, "{}: no saved tensor {i}", self.node.name),
        }
    }

    /// Whether input `i` of the forward op needs a gradient (`ctx.needs_input_grad[i]`).
    pub fn needs_input_grad(&self, i: usize) -> bool {
        matches!(self.node.next.get(i), Some(Some(_)))
    }

    /// Whether this backward pass builds a graph of its own (`create_graph=True`).
    pub fn create_graph(&self) -> bool {
        self.create_graph
    }

    /// Shape of forward input `i`.
    pub fn input_shape(&self, i: usize) -> &Shape {
        &self.node.inputs[i].shape
    }
}
