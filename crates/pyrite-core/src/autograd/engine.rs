//! The backward pass: PyTorch's engine, on the calling thread.
//!
//! 1. Discover the graph from the roots (iteratively), counting for every node how many
//!    edges lead into it.
//! 2. With `autograd::grad`, mark which nodes must run: those with a path to a requested
//!    input. Leaves' `AccumulateGrad` nodes do not run then, so `.grad` is left alone.
//! 3. Run nodes whose incoming gradients are complete, newest first: sum what arrived per
//!    slot, run the tensors' hooks, capture requested gradients, call the backward formula
//!    (grad mode on only with `create_graph`), check each result against the input it is for,
//!    and pass it along the edges. Without `retain_graph` each node frees its saved tensors
//!    once it has run.
//! 4. Run the callbacks queued during the pass ([`queue_callback`]), in order.

use super::graph::{Ctx, Edge, Node, NodeKind};
use crate::{bail, Result, Tensor};
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

struct Task {
    node: Arc<Node>,
    deps: usize,
    grads: Vec<Option<Tensor>>,
    run: bool,
}

type Callback = Box<dyn FnOnce() -> Result<()>>;

thread_local! {
    /// One list of queued callbacks per backward pass running on this thread (a hook may run
    /// a nested backward).
    static CALLBACKS: std::cell::RefCell<Vec<Vec<Callback>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `Variable._execution_engine.queue_callback(f)`: runs `f` once the backward pass now
/// running on this thread has finished (after every node, before `backward` returns); an
/// error from `f` is `backward`'s error. Callbacks run in the order they were queued, and
/// one may queue another. Distributed data parallel waits for its gradient all-reduces
/// here. Outside a backward pass this is an error, as in PyTorch.
///
/// ```
/// use pyrite_core::{autograd, Tensor};
/// use std::sync::{Arc, Mutex};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let x = Tensor::new([1f32, 2.])?.requires_grad_(true)?;
/// let s = seen.clone();
/// x.register_post_accumulate_grad_hook(move |_| {
///     s.lock().unwrap().push("hook");
///     let s = s.clone();
///     autograd::queue_callback(move || Ok(s.lock().unwrap().push("end of backward")))
/// })?;
/// x.sum()?.backward()?;
/// assert_eq!(*seen.lock().unwrap(), ["hook", "end of backward"]);
/// assert!(autograd::queue_callback(|| Ok(())).is_err());
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn queue_callback(f: impl FnOnce() -> Result<()> + 'static) -> Result<()> {
    CALLBACKS.with(|c| match c.borrow_mut().last_mut() {
        Some(list) => {
            list.push(Box::new(f));
            Ok(())
        }
        None => bail!(Autograd, "Final callbacks can only be installed during backward pass."),
    })
}

/// Pops this pass's callback list when the pass ends, however it ends.
struct CallbackFrame;

impl CallbackFrame {
    fn push() -> CallbackFrame {
        CALLBACKS.with(|c| c.borrow_mut().push(Vec::new()));
        CallbackFrame
    }
    /// Runs the queued callbacks until none is left.
    fn run(&self) -> Result<()> {
        loop {
            let queued =
                CALLBACKS.with(|c| c.borrow_mut().last_mut().map(std::mem::take).unwrap_or_default());
            if queued.is_empty() {
                return Ok(());
            }
            for f in queued {
                f()?;
            }
        }
    }
}

impl Drop for CallbackFrame {
    fn drop(&mut self) {
        CALLBACKS.with(|c| c.borrow_mut().pop());
    }
}

/// Runs a backward pass from `roots` (an edge and the gradient flowing into it). With
/// `capture`, returns the gradients flowing into those (node, slot) pairs instead of
/// accumulating into leaves.
pub(crate) fn run_backward(
    roots: Vec<(Edge, Tensor)>,
    keep_graph: bool,
    create_graph: bool,
    capture: Option<&[Edge]>,
) -> Result<Vec<Option<Tensor>>> {
    let callbacks = CallbackFrame::push();
    // 1. discover
    let mut index: HashMap<*const Node, usize> = HashMap::new();
    let mut tasks: Vec<Task> = Vec::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    for (e, _) in &roots {
        let p = Arc::as_ptr(&e.node);
        if let std::collections::hash_map::Entry::Vacant(v) = index.entry(p) {
            v.insert(tasks.len());
            let n = e.node.outputs.len();
            tasks.push(Task { node: e.node.clone(), deps: 0, grads: vec![None; n], run: true });
            stack.push(e.node.clone());
        }
    }
    while let Some(node) = stack.pop() {
        for e in node.next.iter().flatten() {
            let p = Arc::as_ptr(&e.node);
            match index.get(&p) {
                Some(&i) => tasks[i].deps += 1,
                None => {
                    index.insert(p, tasks.len());
                    let n = e.node.outputs.len();
                    tasks.push(Task { node: e.node.clone(), deps: 1, grads: vec![None; n], run: true });
                    stack.push(e.node.clone());
                }
            }
        }
    }

    // 2. what runs
    let mut captured: Vec<Option<Tensor>> = Vec::new();
    let mut capture_at: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    if let Some(targets) = capture {
        captured = vec![None; targets.len()];
        let mut is_target = vec![false; tasks.len()];
        for (k, e) in targets.iter().enumerate() {
            if let Some(&i) = index.get(&Arc::as_ptr(&e.node)) {
                is_target[i] = true;
                capture_at.entry((i, e.input_nr)).or_default().push(k);
            }
        }
        // A node runs when one of its edges leads to a target or to a node that runs. Visit
        // nodes children-first (reverse topological order).
        let order = topological(&tasks, &index);
        let mut run = vec![false; tasks.len()];
        for &i in order.iter().rev() {
            run[i] = tasks[i].node.next.iter().flatten().any(|e| {
                let j = index[&Arc::as_ptr(&e.node)];
                is_target[j] || run[j]
            });
        }
        for (t, r) in tasks.iter_mut().zip(run) {
            t.run = r;
        }
    }

    // 3. execute
    for (e, g) in roots {
        let i = index[&Arc::as_ptr(&e.node)];
        add_into(&mut tasks[i].grads[e.input_nr], g)?;
    }
    let mut ready: BinaryHeap<(u64, usize)> = BinaryHeap::new();
    for (i, t) in tasks.iter().enumerate() {
        if t.deps == 0 {
            ready.push((t.node.seq, i));
        }
    }
    while let Some((_, i)) = ready.pop() {
        let node = tasks[i].node.clone();
        let mut grads = std::mem::take(&mut tasks[i].grads);
        // Hooks see (and may replace) each incoming gradient.
        for (slot, g) in grads.iter_mut().enumerate() {
            if let Some(gv) = g.as_ref() {
                let mut cur = gv.clone();
                for h in node.hooks_for(slot) {
                    if let Some(r) = h(&cur)? {
                        check_hook_result(&node, &cur, &r)?;
                        cur = r;
                    }
                }
                *g = Some(cur);
            }
            if let Some(ks) = capture_at.get(&(i, slot)) {
                for &k in ks {
                    captured[k] = g.clone();
                }
            }
        }
        let outs = if tasks[i].run && grads.iter().any(|g| g.is_some()) {
            let o = call(&node, grads, create_graph)?;
            if !keep_graph {
                node.release();
            }
            Some(o)
        } else {
            None
        };
        for (k, e) in node.next.iter().enumerate() {
            let Some(e) = e else { continue };
            let j = index[&Arc::as_ptr(&e.node)];
            if let Some(Some(g)) = outs.as_ref().map(|o| o[k].clone()) {
                add_into(&mut tasks[j].grads[e.input_nr], g)?;
            }
            tasks[j].deps -= 1;
            if tasks[j].deps == 0 {
                ready.push((tasks[j].node.seq, j));
            }
        }
    }
    if !create_graph {
        for g in captured.iter_mut().flatten() {
            *g = g.detach();
        }
    }
    callbacks.run()?;
    Ok(captured)
}

/// Node indices parents-first.
fn topological(tasks: &[Task], index: &HashMap<*const Node, usize>) -> Vec<usize> {
    let mut deps: Vec<usize> = tasks.iter().map(|t| t.deps).collect();
    let mut order: Vec<usize> = (0..tasks.len()).filter(|&i| deps[i] == 0).collect();
    let mut k = 0;
    while k < order.len() {
        let i = order[k];
        k += 1;
        for e in tasks[i].node.next.iter().flatten() {
            let j = index[&Arc::as_ptr(&e.node)];
            deps[j] -= 1;
            if deps[j] == 0 {
                order.push(j);
            }
        }
    }
    order
}

/// Sums gradients arriving at the same slot.
fn add_into(slot: &mut Option<Tensor>, g: Tensor) -> Result<()> {
    *slot = Some(match slot.take() {
        None => g,
        Some(old) => old.add(&g)?,
    });
    Ok(())
}

fn check_hook_result(node: &Node, old: &Tensor, new: &Tensor) -> Result<()> {
    if new.dims() != old.dims() {
        bail!(
            Shape,
            "hook on a gradient of {} changed its shape from {:?} to {:?}",
            node.name,
            old.dims(),
            new.dims()
        );
    }
    if new.dtype() != old.dtype() || new.device() != old.device() {
        bail!(
            DType,
            "hook on a gradient of {} has changed the type of value (was {} on {}, got {} on {})",
            node.name,
            old.dtype(),
            old.device(),
            new.dtype(),
            new.device()
        );
    }
    Ok(())
}

/// Memory history: a scope named after `node` for what its formula allocates.
#[cold]
#[inline(never)]
fn node_scope(node: &Node) -> crate::memory_history::ScopeGuard {
    crate::memory_history::push_op(Arc::from(&*node.name))
}

/// Memory history: `leaf`'s accumulated gradient is gradient memory, named after the leaf.
#[cold]
#[inline(never)]
fn tag_grad(leaf: &Tensor) {
    if let Some(grad) = leaf.grad() {
        let name = crate::memory_history::name_of(leaf);
        let name = if name.is_empty() { String::new() } else { format!("{name}.grad") };
        crate::memory_history::tag(&grad, crate::memory_history::Category::Gradient, &name);
    }
}

/// Runs one node: materialises missing incoming gradients as zeros, applies the formula (or
/// accumulates into the leaf) and checks what comes out.
fn call(node: &Arc<Node>, grads: Vec<Option<Tensor>>, create_graph: bool) -> Result<Vec<Option<Tensor>>> {
    // Profiler: `autograd::engine::evaluate_function: {name}` around `{name}`.
    let _ranges = if crate::profiler_record::is_active() {
        let inputs: Vec<&Tensor> = grads.iter().flatten().collect();
        Some(crate::profiler_record::backward_ranges(&node.name, node.seq, &inputs))
    } else {
        None
    };
    let _mode = super::set_grad_enabled(create_graph);
    // Memory history: what the formula allocates is named after its node.
    let _scope = if crate::memory_history::is_recording() { Some(node_scope(node)) } else { None };
    match &node.kind {
        NodeKind::AccumulateGrad(leaf, lock) => {
            if let Some(g) = grads.into_iter().next().flatten() {
                let _one_at_a_time = lock.lock().unwrap_or_else(|e| e.into_inner());
                leaf.accumulate_grad(g, create_graph)?;
                if crate::memory_history::is_recording() {
                    tag_grad(leaf);
                }
                for h in node.post_accumulate_hooks() {
                    h(leaf)?;
                }
            }
            Ok(Vec::new())
        }
        NodeKind::Backward(f) => {
            let mut full = Vec::with_capacity(grads.len());
            for (g, m) in grads.into_iter().zip(&node.outputs) {
                full.push(match g {
                    Some(g) => g,
                    None => Tensor::zeros_on(m.shape.clone(), m.dtype, m.device)?,
                });
            }
            let ctx = Ctx { node, create_graph };
            let mut outs = f(&ctx, &full)?;
            if outs.len() != node.next.len() {
                bail!(
                    Autograd,
                    "function {} returned an incorrect number of gradients (expected {}, got {})",
                    node.name,
                    node.next.len(),
                    outs.len()
                );
            }
            for (k, o) in outs.iter_mut().enumerate() {
                if node.next[k].is_none() {
                    *o = None;
                    continue;
                }
                let Some(g) = o.as_mut() else { continue };
                let want = &node.inputs[k];
                if g.dims() != want.shape.dims() {
                    // A gradient that broadcasts to the input is summed back (PyTorch does the
                    // same for expandable gradients); anything else is a bug in the formula.
                    if crate::shape::broadcast_shapes(want.shape.dims(), g.dims(), "")
                        .is_ok_and(|s| s.dims() == g.dims())
                    {
                        *g = g.sum_to_size(want.shape.clone())?;
                    } else {
                        bail!(
                            Autograd,
                            "Function {} returned an invalid gradient at index {k} - got {:?} but expected shape compatible with {:?}",
                            node.name,
                            g.dims(),
                            want.shape.dims()
                        );
                    }
                }
                if g.device() != want.device {
                    bail!(
                        Device,
                        "Function {} returned a gradient on {} for an input on {}",
                        node.name,
                        g.device(),
                        want.device
                    );
                }
                if g.dtype() != want.dtype {
                    *g = g.to_dtype(want.dtype)?;
                }
                if super::anomaly::is_anomaly_enabled() && g.isnan()?.any()?.item::<bool>()? {
                    bail!(
                        Autograd,
                        "Function '{}' returned nan values in its {k}th output.{}",
                        node.name,
                        node.trace
                            .as_deref()
                            .map(|t| format!(" The forward op was recorded at:\n{t}"))
                            .unwrap_or_default()
                    );
                }
            }
            Ok(outs)
        }
    }
}
