//! Module hooks and the call that runs them (PyTorch's `Module._call_impl`).
//!
//! A call runs, in order: the global forward-pre hooks, then the module's own (each may
//! replace the input); with backward hooks registered and grad mode on, the input tensors are
//! wrapped so that their gradients reach the backward hooks; `forward`; the global forward
//! hooks, then the module's own (each may replace the output); the output tensors are wrapped so
//! that their gradients reach the backward-pre hooks. With no hook anywhere, a call is
//! `forward` plus two atomic loads.
//!
//! Full backward hooks are built on autograd as PyTorch's `BackwardHook` is: an identity
//! [`Function`] over the inputs and one over the outputs. In backward, the outputs' node sees
//! `grad_output` first (backward-pre hooks may replace it); the inputs' node then sees
//! `grad_input` and calls the backward hooks with both.
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
//! let handle = fc.register_forward_hook(move |_m, _input, output| {
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

use crate::module::{Module, ModuleBase};
use crate::state_dict::{IncompatibleKeys, StateDict};
use crate::value::Value;
use pyrite_core::autograd::{self, Function, FunctionCtx};
use pyrite_core::{bail, Result, Tensor};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// `hook(module, input) -> Option<new input>`.
pub type ForwardPreHook = Arc<dyn Fn(&dyn Module, &Value) -> Result<Option<Value>> + Send + Sync>;
/// `hook(module, input, output) -> Option<new output>`.
pub type ForwardHook = Arc<dyn Fn(&dyn Module, &Value, &Value) -> Result<Option<Value>> + Send + Sync>;
/// `hook(grad_output) -> Option<new grad_output>`.
pub type BackwardPreHook =
    Arc<dyn Fn(&[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync>;
/// `hook(grad_input, grad_output) -> Option<new grad_input>`.
pub type BackwardHook =
    Arc<dyn Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync>;
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

macro_rules! adder {
    ($($fn:ident, $field:ident, $ty:ty;)*) => {$(
        pub(crate) fn $fn(self: &Arc<Self>, h: $ty) -> HookHandle {
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            let mut l = self.lock();
            l.$field.push((id, h));
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
    global().add_forward_pre(Arc::new(hook))
}

/// `register_module_forward_hook`: runs before every module's own forward hooks.
pub fn register_module_forward_hook(
    hook: impl Fn(&dyn Module, &Value, &Value) -> Result<Option<Value>> + Send + Sync + 'static,
) -> HookHandle {
    global().add_forward(Arc::new(hook))
}

/// `register_module_full_backward_hook`: runs before every module's own backward hooks.
pub fn register_module_full_backward_hook(
    hook: impl Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>>
        + Send
        + Sync
        + 'static,
) -> HookHandle {
    global().add_backward(Arc::new(hook))
}

/// Whether a call of a module with this base must run hooks.
#[inline]
pub(crate) fn any_active(base: &ModuleBase) -> bool {
    base.hooks.has_call_hooks() || global().has_call_hooks()
}

/// A module call with hooks (`_call_impl`).
pub(crate) fn call(m: &dyn Module, mut input: Value) -> Result<Value> {
    let g = global().snapshot();
    let own = m.base().hooks.snapshot();
    for (_, h) in g.forward_pre.iter().chain(&own.forward_pre) {
        if let Some(r) = h(m, &input)? {
            input = r;
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
            module: m.type_name().to_string(),
        }))
    } else {
        None
    };
    if let Some(bw) = &bw {
        input = bw.setup_input(input)?;
    }
    let mut out = m.forward_value(input.clone())?;
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
    module: String,
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
            if let Some(r) = h(&grads)? {
                check_len(&self.module, "backward pre hook", "grad_output", grads.len(), r.len())?;
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
                if h(&gi, &grads)?.is_some() {
                    bail!(
                        Autograd,
                        "backward hook of {} returned a grad_input, but no input of the module requires grad",
                        self.module
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
            if let Some(r) = h(&grads, &grad_outputs)? {
                check_len(&self.module, "backward hook", "grad_input", grads.len(), r.len())?;
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
