//! Module hooks and the call that runs them (PyTorch's `Module._call_impl`).
//!
//! A call runs, in order: the global forward-pre hooks, then the module's own, each seeing
//! the positional arguments as a tuple (`args`, as PyTorch's hooks do; a replacement that is
//! not a tuple is made a one-element tuple); with backward hooks registered and grad mode on, the input tensors are
//! wrapped so that their gradients reach the backward hooks; `forward`; the global forward
//! hooks, then the module's own (each may replace the output); the output tensors are wrapped so
//! that their gradients reach the backward-pre hooks. With no hook anywhere, a call is
//! `forward` plus two atomic loads.
//!
//! Full backward hooks are built on autograd as PyTorch's `BackwardHook` is: an identity
//! [`Function`] over the inputs and one over the outputs. In backward, the outputs' node sees
//! `grad_output` first (backward-pre hooks may replace it); the inputs' node then sees
//! `grad_input` and calls the backward hooks with both. Backward hooks get the module first,
//! as forward hooks do: backward runs after the call has returned, when the Rust module may
//! have moved or gone, so they get a [`ModuleSnapshot`] taken at the call (its type,
//! configuration, training flag, and its parameters and buffers, which are the module's own
//! tensors).
//!
//! Every `register_*_hook` has a `register_*_hook_with` taking [`HookOptions`]
//! (`prepend: true` runs the hook before those already registered).
//!
//! ```
//! use pyrite::nn::{Linear, Module, ModuleHooks};
//! use pyrite::{DType, Tensor};
//! use std::sync::{Arc, Mutex};
//!
//! // Feature extraction: keep what a layer outputs.
//! let fc = Linear::new(4, 2)?;
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let s = seen.clone();
//! let handle = fc.register_forward_hook(move |_m, _args, output| {
//!     s.lock().unwrap().push(output.as_tensor()?.detach());
//!     Ok(None)
//! });
//! fc.call(&Tensor::ones([3, 4], DType::F32)?)?;
//! assert_eq!(seen.lock().unwrap()[0].dims(), &[3, 2]);
//! handle.remove();
//! fc.call(&Tensor::ones([3, 4], DType::F32)?)?;
//! assert_eq!(seen.lock().unwrap().len(), 1);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::module::{Member, MemberMut, Module, ModuleBase, ModuleFields};
use crate::parameter::{Buffer, Parameter};
use crate::state_dict::{IncompatibleKeys, StateDict};
use crate::value::Value;
use pyrite_core::autograd::{self, Function, FunctionCtx};
use pyrite_core::{bail, Result, Tensor};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// `hook(module, args) -> Option<new args>`; `args` is always a tuple.
pub type ForwardPreHook = Arc<dyn Fn(&dyn Module, &Value) -> Result<Option<Value>> + Send + Sync>;
/// `hook(module, args, output) -> Option<new output>`; `args` is always a tuple.
pub type ForwardHook = Arc<dyn Fn(&dyn Module, &Value, &Value) -> Result<Option<Value>> + Send + Sync>;
/// `hook(module, grad_output) -> Option<new grad_output>`.
pub type BackwardPreHook =
    Arc<dyn Fn(&dyn Module, &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync>;
/// `hook(module, grad_input, grad_output) -> Option<new grad_input>`.
pub type BackwardHook = Arc<
    dyn Fn(&dyn Module, &[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>>
        + Send
        + Sync,
>;
type StateDictPreHook = Arc<dyn Fn(&dyn Module, &str) -> Result<()> + Send + Sync>;
type StateDictPostHook = Arc<dyn Fn(&dyn Module, &mut StateDict, &str) -> Result<()> + Send + Sync>;
type LoadPreHook = Arc<dyn Fn(&dyn Module, &mut StateDict, &str) -> Result<()> + Send + Sync>;
pub(crate) type LoadPostHook = Arc<dyn Fn(&dyn Module, &mut IncompatibleKeys) -> Result<()> + Send + Sync>;

#[derive(Default, Clone)]
pub(crate) struct Lists {
    pub forward_pre: Vec<(u64, ForwardPreHook)>,
    pub forward: Vec<(u64, ForwardHook)>,
    pub backward_pre: Vec<(u64, BackwardPreHook)>,
    pub backward: Vec<(u64, BackwardHook)>,
    pub state_dict_pre: Vec<(u64, StateDictPreHook)>,
    pub state_dict_post: Vec<(u64, StateDictPostHook)>,
    pub load_pre: Vec<(u64, LoadPreHook)>,
    pub load_post: Vec<(u64, LoadPostHook)>,
}

impl Lists {
    fn call_hooks(&self) -> usize {
        self.forward_pre.len() + self.forward.len() + self.backward_pre.len() + self.backward.len()
    }
}

/// A module's hooks (or the global ones). `calls` counts the hooks that run around a call,
/// so that a module with none pays one atomic load.
#[derive(Default)]
pub struct Hooks {
    calls: AtomicUsize,
    lists: Mutex<Lists>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// How a hook is registered (PyTorch's keyword arguments of `register_*_hook`).
///
/// ```
/// use pyrite::nn::{hooks::HookOptions, Linear, Module, ModuleHooks, Value};
/// use pyrite::{DType, Tensor};
/// use std::sync::{Arc, Mutex};
/// let fc = Linear::new(2, 2)?;
/// let order = Arc::new(Mutex::new(Vec::new()));
/// let (a, b) = (order.clone(), order.clone());
/// fc.register_forward_hook(move |_m, _args, _out| {
///     a.lock().unwrap().push("registered first");
///     Ok(None)
/// });
/// let hook = move |_m: &dyn Module, _args: &Value, _out: &Value| {
///     b.lock().unwrap().push("prepended");
///     Ok(None)
/// };
/// fc.register_forward_hook_with(hook, HookOptions { prepend: true });
/// fc.call(&Tensor::ones([1, 2], DType::F32)?)?;
/// assert_eq!(*order.lock().unwrap(), ["prepended", "registered first"]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HookOptions {
    /// Run this hook before the hooks of its kind already registered (default: after).
    pub prepend: bool,
}

macro_rules! adder {
    ($($fn:ident, $field:ident, $ty:ty;)*) => {$(
        pub(crate) fn $fn(self: &Arc<Self>, h: $ty, opts: HookOptions) -> HookHandle {
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            let mut l = self.lock();
            if opts.prepend {
                l.$field.insert(0, (id, h));
            } else {
                l.$field.push((id, h));
            }
            self.calls.store(l.call_hooks(), Ordering::Release);
            HookHandle { hooks: Arc::downgrade(self), id }
        }
    )*};
}

impl Hooks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Lists> {
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the lists (hooks may register or remove hooks while they run).
    pub(crate) fn snapshot(&self) -> Lists {
        self.lock().clone()
    }

    fn has_call_hooks(&self) -> bool {
        self.calls.load(Ordering::Acquire) > 0
    }

    adder! {
        add_forward_pre, forward_pre, ForwardPreHook;
        add_forward, forward, ForwardHook;
        add_backward_pre, backward_pre, BackwardPreHook;
        add_backward, backward, BackwardHook;
        add_state_dict_pre, state_dict_pre, StateDictPreHook;
        add_state_dict_post, state_dict_post, StateDictPostHook;
        add_load_pre, load_pre, LoadPreHook;
        add_load_post, load_post, LoadPostHook;
    }

    fn remove(&self, id: u64) {
        let mut l = self.lock();
        l.forward_pre.retain(|(i, _)| *i != id);
        l.forward.retain(|(i, _)| *i != id);
        l.backward_pre.retain(|(i, _)| *i != id);
        l.backward.retain(|(i, _)| *i != id);
        l.state_dict_pre.retain(|(i, _)| *i != id);
        l.state_dict_post.retain(|(i, _)| *i != id);
        l.load_pre.retain(|(i, _)| *i != id);
        l.load_post.retain(|(i, _)| *i != id);
        self.calls.store(l.call_hooks(), Ordering::Release);
    }
}

/// What registering a hook returns (`RemovableHandle`): [`HookHandle::remove`] takes the
/// hook out. Dropping the handle keeps the hook, as in PyTorch.
#[derive(Clone, Debug)]
pub struct HookHandle {
    hooks: Weak<Hooks>,
    id: u64,
}

impl HookHandle {
    /// Removes the hook (a no-op if it is already gone).
    pub fn remove(&self) {
        if let Some(h) = self.hooks.upgrade() {
            h.remove(self.id)
        }
    }
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hooks({})", self.calls.load(Ordering::Relaxed))
    }
}

fn global() -> &'static Arc<Hooks> {
    static G: OnceLock<Arc<Hooks>> = OnceLock::new();
    G.get_or_init(Default::default)
}

/// `torch.nn.modules.module.register_module_forward_pre_hook`: runs before every module's
/// own forward-pre hooks, on every call of every module.
pub fn register_module_forward_pre_hook(
    hook: impl Fn(&dyn Module, &Value) -> Result<Option<Value>> + Send + Sync + 'static,
) -> HookHandle {
    global().add_forward_pre(Arc::new(hook), HookOptions::default())
}

/// `register_module_forward_hook`: runs before every module's own forward hooks.
pub fn register_module_forward_hook(
    hook: impl Fn(&dyn Module, &Value, &Value) -> Result<Option<Value>> + Send + Sync + 'static,
) -> HookHandle {
    global().add_forward(Arc::new(hook), HookOptions::default())
}

/// `register_module_full_backward_hook`: runs before every module's own backward hooks.
pub fn register_module_full_backward_hook(
    hook: impl Fn(&dyn Module, &[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>>
        + Send
        + Sync
        + 'static,
) -> HookHandle {
    global().add_backward(Arc::new(hook), HookOptions::default())
}

/// Whether a call of a module with this base must run hooks.
#[inline]
pub(crate) fn any_active(base: &ModuleBase) -> bool {
    base.hooks.has_call_hooks() || global().has_call_hooks()
}

/// A call's positional arguments as the tuple hooks see.
fn as_args(v: Value) -> Value {
    match v {
        Value::Tuple(_) => v,
        Value::List(items) => Value::Tuple(items),
        other => Value::Tuple(vec![other]),
    }
}

/// What `forward_value` gets for `args`: the one argument itself, or the tuple.
fn forward_input(args: Value) -> Value {
    match args {
        Value::Tuple(mut items) if items.len() == 1 => items.remove(0),
        other => other,
    }
}

/// A module call with hooks (`_call_impl`).
pub(crate) fn call(m: &dyn Module, input: Value) -> Result<Value> {
    let g = global().snapshot();
    let own = m.base().hooks.snapshot();
    let mut input = as_args(input);
    for (_, h) in g.forward_pre.iter().chain(&own.forward_pre) {
        if let Some(r) = h(m, &input)? {
            input = as_args(r);
        }
    }
    let backward: Vec<BackwardHook> =
        g.backward.iter().chain(&own.backward).map(|(_, h)| h.clone()).collect();
    let backward_pre: Vec<BackwardPreHook> = own.backward_pre.iter().map(|(_, h)| h.clone()).collect();
    let bw = if (!backward.is_empty() || !backward_pre.is_empty()) && autograd::is_grad_enabled() {
        Some(Arc::new(BwHook {
            pre: backward_pre,
            hooks: backward,
            state: Mutex::new(BwState::default()),
            module: ModuleSnapshot::of(m),
        }))
    } else {
        None
    };
    if let Some(bw) = &bw {
        input = bw.setup_input(input)?;
    }
    let mut out = m.forward_value(forward_input(input.clone()))?;
    for (_, h) in g.forward.iter().chain(&own.forward) {
        if let Some(r) = h(m, &input, &out)? {
            out = r;
        }
    }
    if let Some(bw) = bw {
        out = bw.setup_output(out)?;
    }
    Ok(out)
}

#[derive(Default)]
struct BwState {
    /// Tensors among the inputs, and which of them require grad.
    input_requires: Vec<bool>,
    grad_outputs: Option<Vec<Option<Tensor>>>,
}

/// The shared state of one call's backward hooks (PyTorch's `BackwardHook`).
struct BwHook {
    pre: Vec<BackwardPreHook>,
    hooks: Vec<BackwardHook>,
    state: Mutex<BwState>,
    module: ModuleSnapshot,
}

impl BwHook {
    fn state(&self) -> std::sync::MutexGuard<'_, BwState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wraps the input tensors that require grad in an identity whose backward calls the
    /// backward hooks with `grad_input`.
    fn setup_input(self: &Arc<Self>, input: Value) -> Result<Value> {
        let requires: Vec<bool> = input.tensors().iter().map(|t| t.requires_grad()).collect();
        self.state().input_requires = requires.clone();
        if !requires.iter().any(|&r| r) {
            return Ok(input);
        }
        let me = self.clone();
        wrap(input, &requires, "input", Arc::new(move |grads| me.on_grad_input(grads)))
    }

    /// Wraps the output tensors that require grad in an identity whose backward records
    /// `grad_output` (after the backward-pre hooks).
    fn setup_output(self: &Arc<Self>, output: Value) -> Result<Value> {
        let requires: Vec<bool> = output.tensors().iter().map(|t| t.requires_grad()).collect();
        if !requires.iter().any(|&r| r) {
            return Ok(output);
        }
        let me = self.clone();
        wrap(output, &requires, "output", Arc::new(move |grads| me.on_grad_output(grads)))
    }

    fn on_grad_output(&self, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let mut grads = grads;
        for h in &self.pre {
            if let Some(r) = h(&self.module, &grads)? {
                check_len(&self.module.type_name, "backward pre hook", "grad_output", grads.len(), r.len())?;
                grads = r;
            }
        }
        let no_input_grads = {
            let mut s = self.state();
            s.grad_outputs = Some(grads.clone());
            !s.input_requires.iter().any(|&r| r)
        };
        if no_input_grads {
            // No input requires grad: the hooks run now, with grad_input all None.
            let n = self.state().input_requires.len();
            let gi = vec![None; n];
            for h in &self.hooks {
                if h(&self.module, &gi, &grads)?.is_some() {
                    bail!(
                        Autograd,
                        "backward hook of {} returned a grad_input, but no input of the module requires grad",
                        self.module.type_name
                    );
                }
            }
        }
        Ok(grads)
    }

    fn on_grad_input(&self, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let grad_outputs = self.state().grad_outputs.clone().unwrap_or_default();
        let mut grads = grads;
        for h in &self.hooks {
            if let Some(r) = h(&self.module, &grads, &grad_outputs)? {
                check_len(&self.module.type_name, "backward hook", "grad_input", grads.len(), r.len())?;
                grads = r;
            }
        }
        Ok(grads)
    }
}

fn check_len(module: &str, what: &str, name: &str, want: usize, got: usize) -> Result<()> {
    if want != got {
        bail!(Value, "{what} of {module} returned {got} {name} entries, expected {want}");
    }
    Ok(())
}

type OnGrads = Arc<dyn Fn(Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// The identity over some tensors whose backward hands their gradients (one entry per tensor
/// of the value, `None` for those that do not require grad) to a callback.
struct BackwardHookFunction {
    requires: Vec<bool>,
    on_grads: OnGrads,
}

impl Function for BackwardHookFunction {
    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(inputs.iter().map(|t| t.detach()).collect())
    }

    fn backward(&self, _ctx: &FunctionCtx, grad_outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        // grad_outputs has one entry per wrapped tensor; spread them over every tensor slot.
        let mut full = Vec::with_capacity(self.requires.len());
        let mut it = grad_outputs.iter();
        for &r in &self.requires {
            full.push(if r { it.next().cloned() } else { None });
        }
        let full = (self.on_grads)(full)?;
        Ok(full.into_iter().zip(&self.requires).filter(|(_, r)| **r).map(|(g, _)| g).collect())
    }

    fn name(&self) -> String {
        "BackwardHookFunctionBackward".into()
    }
}

fn wrap(v: Value, requires: &[bool], _what: &str, on_grads: OnGrads) -> Result<Value> {
    let tensors: Vec<Tensor> = v.tensors().into_iter().cloned().collect();
    let wrapped: Vec<&Tensor> = tensors.iter().zip(requires).filter(|(_, r)| **r).map(|(t, _)| t).collect();
    let f = BackwardHookFunction { requires: requires.to_vec(), on_grads };
    let mut outs = autograd::apply(f, &wrapped)?.into_iter();
    let mut k = 0;
    v.map_tensors(&mut |t| {
        let r = requires[k];
        k += 1;
        Ok(if r { outs.next().expect("one output per wrapped tensor") } else { t })
    })
}

// ------------------------------------------------------------------------------ snapshots

enum SnapshotMember {
    Parameter(String, Option<Parameter>),
    Buffer(String, Option<Buffer>),
    Module(String, Box<ModuleSnapshot>),
}

/// A module as it was when it was called, for its backward hooks: the type name, the
/// configuration `Display` shows, the training flag, and the parameters, buffers and
/// sub-modules in order. The parameters and buffers are the module's own tensors (shared,
/// not copied), so `module.get_parameter("weight")` in a backward hook reads the weight
/// the call used. Calling a snapshot is an error.
pub struct ModuleSnapshot {
    base: ModuleBase,
    type_name: String,
    extra_repr: String,
    members: Vec<SnapshotMember>,
}

impl ModuleSnapshot {
    /// A snapshot of `m` and its descendants.
    pub fn of(m: &dyn Module) -> ModuleSnapshot {
        let mut members = Vec::new();
        m.visit_members(&mut |mem| {
            members.push(match mem {
                Member::Parameter(n, p) => SnapshotMember::Parameter(n.to_string(), p.cloned()),
                Member::Buffer(n, b) => SnapshotMember::Buffer(n.to_string(), b.cloned()),
                Member::Module(n, c) => {
                    SnapshotMember::Module(n.to_string(), Box::new(ModuleSnapshot::of(c)))
                }
            })
        });
        let base = ModuleBase::new();
        base.set_training_flag(m.is_training());
        ModuleSnapshot { base, type_name: m.type_name().to_string(), extra_repr: m.extra_repr(), members }
    }
}

impl ModuleFields for ModuleSnapshot {
    fn base(&self) -> &ModuleBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut ModuleBase {
        &mut self.base
    }
    fn type_name(&self) -> &str {
        &self.type_name
    }
    fn visit_members<'a>(&'a self, f: &mut dyn FnMut(Member<'a, '_>)) {
        for m in &self.members {
            match m {
                SnapshotMember::Parameter(n, p) => f(Member::Parameter(n, p.as_ref())),
                SnapshotMember::Buffer(n, b) => f(Member::Buffer(n, b.as_ref())),
                SnapshotMember::Module(n, c) => f(Member::Module(n, &**c)),
            }
        }
    }
    fn visit_members_mut(&mut self, f: &mut dyn FnMut(MemberMut<'_, '_>) -> Result<()>) -> Result<()> {
        for m in &mut self.members {
            match m {
                SnapshotMember::Parameter(n, Some(p)) => f(MemberMut::Parameter(n, p))?,
                SnapshotMember::Buffer(n, Some(b)) => f(MemberMut::Buffer(n, b))?,
                SnapshotMember::Module(n, c) => f(MemberMut::Module(n, &mut **c))?,
                _ => {}
            }
        }
        Ok(())
    }
    fn as_module(&self) -> &dyn Module {
        self
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Module for ModuleSnapshot {
    fn forward_value(&self, _input: Value) -> Result<Value> {
        bail!(Value, "{} here is a snapshot taken for a backward hook; it cannot be called", self.type_name)
    }

    fn extra_repr(&self) -> String {
        self.extra_repr.clone()
    }
}

impl std::fmt::Display for ModuleSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.repr())
    }
}
