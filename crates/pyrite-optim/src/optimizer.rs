//! The optimizer base (`torch.optim.Optimizer`): parameter groups with their hyperparameters,
//! per-parameter state, step hooks, `zero_grad`, and the state_dict in PyTorch's structure.
//! An optimizer is a struct holding an [`OptimizerBase`] that implements [`Optimizer::update`];
//! everything else is provided by the trait.

use pyrite_core::{autograd, bail, Result, Tensor};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

/// A hyperparameter value of a parameter group (the values of PyTorch's group dicts).
#[derive(Clone, Debug, PartialEq)]
pub enum Hyper {
    Float(f64),
    Int(i64),
    Bool(bool),
    /// `betas`, `etas`, `step_sizes`.
    Pair(f64, f64),
    Str(String),
    None,
}

impl From<f64> for Hyper {
    fn from(v: f64) -> Hyper {
        Hyper::Float(v)
    }
}
impl From<i64> for Hyper {
    fn from(v: i64) -> Hyper {
        Hyper::Int(v)
    }
}
impl From<usize> for Hyper {
    fn from(v: usize) -> Hyper {
        Hyper::Int(v as i64)
    }
}
impl From<bool> for Hyper {
    fn from(v: bool) -> Hyper {
        Hyper::Bool(v)
    }
}
impl From<(f64, f64)> for Hyper {
    fn from(v: (f64, f64)) -> Hyper {
        Hyper::Pair(v.0, v.1)
    }
}
impl From<&str> for Hyper {
    fn from(v: &str) -> Hyper {
        Hyper::Str(v.to_string())
    }
}
impl<T: Into<Hyper>> From<Option<T>> for Hyper {
    fn from(v: Option<T>) -> Hyper {
        v.map_or(Hyper::None, Into::into)
    }
}

/// The options of one optimizer as hyperparameters (`defaults`): what each optimizer's option
/// struct turns into, and what every parameter group is completed with.
pub type Hypers = BTreeMap<String, Hyper>;

/// A parameter group: its parameters, its learning rate and its other hyperparameters
/// (`optimizer.param_groups[i]`). Keys missing from a group given to an optimizer take the
/// optimizer's defaults; schedulers change `lr` (and `momentum` / `betas`) here.
///
/// ```
/// use pyrite::optim::{Optimizer, ParamGroup, SGD, SGDOptions};
/// use pyrite::nn::{Linear, Module};
/// let backbone = Linear::new(4, 4)?;
/// let head = Linear::new(4, 2)?;
/// let opt = SGD::with_groups(
///     vec![ParamGroup::new(backbone.parameters()).with("lr", 1e-4), ParamGroup::new(head.parameters())],
///     SGDOptions { lr: 1e-2, momentum: 0.9, ..Default::default() },
/// )?;
/// assert_eq!(opt.param_groups()[0].lr, 1e-4);
/// assert_eq!(opt.param_groups()[1].lr, 1e-2);
/// assert_eq!(opt.param_groups()[0].f64("momentum")?, 0.9);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Clone)]
pub struct ParamGroup {
    pub params: Vec<Tensor>,
    /// The learning rate (`group["lr"]`).
    pub lr: f64,
    /// Every other hyperparameter, by PyTorch's name (`momentum`, `betas`, `initial_lr`, ...).
    pub options: Hypers,
}

impl fmt::Debug for ParamGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParamGroup")
            .field("params", &self.params.len())
            .field("lr", &self.lr)
            .field("options", &self.options)
            .finish()
    }
}

impl ParamGroup {
    /// A group of `params` whose hyperparameters are the optimizer's defaults until set with
    /// [`ParamGroup::with`].
    pub fn new(params: Vec<Tensor>) -> ParamGroup {
        ParamGroup { params, lr: f64::NAN, options: Hypers::new() }
    }

    /// Sets a hyperparameter for this group (`{"params": ..., key: value}`); `"lr"` sets
    /// [`ParamGroup::lr`].
    pub fn with(mut self, key: &str, value: impl Into<Hyper>) -> ParamGroup {
        self.set(key, value);
        self
    }

    /// Sets a hyperparameter (`group[key] = value`).
    pub fn set(&mut self, key: &str, value: impl Into<Hyper>) {
        match (key, value.into()) {
            ("lr", Hyper::Float(v)) => self.lr = v,
            (k, v) => {
                self.options.insert(k.to_string(), v);
            }
        }
    }

    /// A hyperparameter (`group[key]`); `"lr"` included.
    pub fn get(&self, key: &str) -> Option<Hyper> {
        if key == "lr" {
            return Some(Hyper::Float(self.lr));
        }
        self.options.get(key).cloned()
    }

    /// A float hyperparameter; an integer is read as a float.
    pub fn f64(&self, key: &str) -> Result<f64> {
        match self.get(key) {
            Some(Hyper::Float(v)) => Ok(v),
            Some(Hyper::Int(v)) => Ok(v as f64),
            other => bail!(Value, "param group option '{key}' should be a float, got {other:?}"),
        }
    }

    /// A float hyperparameter that may be `None`.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            Some(Hyper::None) | None => Ok(None),
            _ => self.f64(key).map(Some),
        }
    }

    /// A boolean hyperparameter.
    pub fn bool(&self, key: &str) -> Result<bool> {
        match self.get(key) {
            Some(Hyper::Bool(v)) => Ok(v),
            other => bail!(Value, "param group option '{key}' should be a bool, got {other:?}"),
        }
    }

    /// An integer hyperparameter.
    pub fn int(&self, key: &str) -> Result<i64> {
        match self.get(key) {
            Some(Hyper::Int(v)) => Ok(v),
            other => bail!(Value, "param group option '{key}' should be an integer, got {other:?}"),
        }
    }

    /// A pair hyperparameter (`betas`).
    pub fn pair(&self, key: &str) -> Result<(f64, f64)> {
        match self.get(key) {
            Some(Hyper::Pair(a, b)) => Ok((a, b)),
            other => bail!(Value, "param group option '{key}' should be a pair of floats, got {other:?}"),
        }
    }

    /// A string hyperparameter that may be `None` (`line_search_fn`).
    pub fn opt_str(&self, key: &str) -> Result<Option<String>> {
        match self.get(key) {
            Some(Hyper::Str(s)) => Ok(Some(s)),
            Some(Hyper::None) | None => Ok(None),
            other => bail!(Value, "param group option '{key}' should be a string, got {other:?}"),
        }
    }
}

/// One entry of a parameter's optimizer state (`optimizer.state[p][key]`).
#[derive(Clone, Debug)]
pub enum StateValue {
    Tensor(Tensor),
    Float(f64),
    Int(i64),
    /// LBFGS's histories.
    TensorList(Vec<Tensor>),
    None,
}

/// The state of one parameter: `exp_avg`, `step`, `momentum_buffer`, ...
pub type ParamState = BTreeMap<String, StateValue>;

/// Reads a float (a `Float`, an `Int` or a one-element tensor, as PyTorch saves `step`).
pub(crate) fn state_f64(s: &ParamState, key: &str) -> Result<f64> {
    match s.get(key) {
        Some(StateValue::Float(v)) => Ok(*v),
        Some(StateValue::Int(v)) => Ok(*v as f64),
        Some(StateValue::Tensor(t)) if t.numel() == 1 => {
            t.to_dtype(pyrite_core::DType::F64)?.reshape(&[] as &[isize])?.item::<f64>()
        }
        other => bail!(Value, "optimizer state '{key}' should be a number, got {other:?}"),
    }
}

/// `optimizer.state_dict()` in PyTorch's structure: `state` keyed by the parameter's index in
/// the order of the groups, and `param_groups` with `params` as those indices and every
/// hyperparameter (`lr` included).
#[derive(Clone, Debug, Default)]
pub struct OptimizerStateDict {
    pub state: BTreeMap<usize, ParamState>,
    pub param_groups: Vec<SavedGroup>,
    /// The `torch.optim` class whose layout [`OptimizerStateDict::to_object`] writes (`"Adam"`):
    /// set by [`Optimizer::state_dict`], and by [`OptimizerStateDict::from_object`] when it
    /// recognises the group keys. With `None` the groups keep Pyrite's keys, `lr` first.
    pub optimizer: Option<String>,
}

/// One saved parameter group: indices into the flattened parameter list and every option.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedGroup {
    pub params: Vec<usize>,
    pub options: Hypers,
}

impl OptimizerStateDict {
    /// A deep copy: the state's tensors are cloned into new storage, so the copy does not
    /// change when the optimizer steps on (PyTorch's `copy.deepcopy(opt.state_dict())`).
    pub fn deep_clone(&self) -> Result<OptimizerStateDict> {
        let mut out = self.clone();
        for s in out.state.values_mut() {
            for v in s.values_mut() {
                match v {
                    StateValue::Tensor(t) => *t = t.detach().deep_clone()?,
                    StateValue::TensorList(l) => {
                        for t in l.iter_mut() {
                            *t = t.detach().deep_clone()?;
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(out)
    }
}

/// A step hook: called with the parameter groups before or after each `step`.
pub type StepHook = Box<dyn FnMut(&mut [ParamGroup]) + Send>;

#[derive(Default)]
struct HookList {
    next_id: u64,
    pre: Vec<(u64, StepHook)>,
    post: Vec<(u64, StepHook)>,
}

/// What registering a step hook returns (`RemovableHandle`).
#[must_use = "dropping the handle keeps the hook; call remove() to take it out"]
pub struct HookHandle {
    hooks: Weak<Mutex<HookList>>,
    id: u64,
}

impl HookHandle {
    /// Removes the hook; does nothing if it was removed before or the optimizer is gone.
    pub fn remove(&self) {
        if let Some(h) = self.hooks.upgrade() {
            let mut h = h.lock().unwrap_or_else(|e| e.into_inner());
            h.pre.retain(|(i, _)| *i != self.id);
            h.post.retain(|(i, _)| *i != self.id);
        }
    }
}

/// What every optimizer holds: its name, defaults, parameter groups, the state of each
/// parameter (parallel to the groups) and the step hooks.
pub struct OptimizerBase {
    name: &'static str,
    defaults: Hypers,
    groups: Vec<ParamGroup>,
    state: Vec<Vec<ParamState>>,
    hooks: Arc<Mutex<HookList>>,
}

impl OptimizerBase {
    /// An optimizer named `name` (for messages) with `defaults`, over `groups`.
    pub fn new(name: &'static str, defaults: Hypers, groups: Vec<ParamGroup>) -> Result<OptimizerBase> {
        if groups.iter().all(|g| g.params.is_empty()) && groups.len() <= 1 {
            bail!(Value, "{name}: optimizer got an empty parameter list");
        }
        let mut base = OptimizerBase {
            name,
            defaults,
            groups: Vec::new(),
            state: Vec::new(),
            hooks: Default::default(),
        };
        for g in groups {
            base.add_param_group(g)?;
        }
        Ok(base)
    }

    /// The optimizer's name (`Adam`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The defaults every group is completed with.
    pub fn defaults(&self) -> &Hypers {
        &self.defaults
    }

    pub fn groups(&self) -> &[ParamGroup] {
        &self.groups
    }

    pub fn groups_mut(&mut self) -> &mut [ParamGroup] {
        &mut self.groups
    }

    /// Registers a step pre hook (`pre`) or post hook on this optimizer; what
    /// [`Optimizer::register_step_pre_hook`] does, for a `dyn Optimizer` too.
    pub(crate) fn register_step_hook(&self, pre: bool, hook: StepHook) -> HookHandle {
        register(&self.hooks, pre, hook)
    }

    /// Memory history: tags the state's tensors as optimizer state, named after their
    /// parameter (`fc.weight: exp_avg`). Nothing is done unless history is being recorded.
    fn tag_state_memory(&self) {
        if !pyrite_core::memory_history::is_recording() {
            return;
        }
        for (g, states) in self.groups.iter().zip(&self.state) {
            for (p, st) in g.params.iter().zip(states) {
                let param = pyrite_core::memory_history::name_of(p);
                for (key, v) in st {
                    let name = if param.is_empty() { key.clone() } else { format!("{param}: {key}") };
                    let tensors: &[Tensor] = match v {
                        StateValue::Tensor(t) => std::slice::from_ref(t),
                        StateValue::TensorList(ts) => ts,
                        _ => &[],
                    };
                    for t in tensors {
                        pyrite_core::memory_history::tag(
                            t,
                            pyrite_core::memory::Category::OptimizerState,
                            &name,
                        );
                    }
                }
            }
        }
    }

    /// The groups with the state of each of their parameters, for an update.
    pub fn groups_and_state(&mut self) -> impl Iterator<Item = (&ParamGroup, &mut Vec<ParamState>)> {
        self.groups.iter().zip(self.state.iter_mut())
    }

    /// The state of `param` (`optimizer.state[param]`), if it has any.
    pub fn state_of(&self, param: &Tensor) -> Option<&ParamState> {
        for (g, s) in self.groups.iter().zip(&self.state) {
            for (p, st) in g.params.iter().zip(s) {
                if p.is_same(param) {
                    return (!st.is_empty()).then_some(st);
                }
            }
        }
        None
    }

    /// `add_param_group`: completes `group` with the defaults and checks its parameters.
    pub fn add_param_group(&mut self, mut group: ParamGroup) -> Result<()> {
        let name = self.name;
        for p in &group.params {
            if !p.is_leaf() {
                bail!(Value, "{name}: can't optimize a non-leaf Tensor");
            }
            if !p.dtype().is_floating_point() {
                bail!(
                    DType,
                    "{name}: can only optimize floating-point tensors, got a {:?} parameter",
                    p.dtype()
                );
            }
        }
        for (i, p) in group.params.iter().enumerate() {
            if group.params[..i].iter().any(|q| q.same_storage(p) && q.is_same(p)) {
                bail!(Value, "{name}: a parameter group contains the same parameter twice (PyTorch warns that this will become an error)");
            }
        }
        for g in &self.groups {
            if g.params.iter().any(|q| group.params.iter().any(|p| p.is_same(q))) {
                bail!(Value, "{name}: some parameters appear in more than one parameter group");
            }
        }
        for (k, v) in &self.defaults {
            if k == "lr" {
                if group.lr.is_nan() {
                    group.lr = match v {
                        Hyper::Float(x) => *x,
                        _ => bail!(Value, "{name}: parameter group didn't specify a value of required optimization parameter lr"),
                    };
                }
            } else {
                group.options.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        if group.lr.is_nan() {
            bail!(
                Value,
                "{name}: parameter group didn't specify a value of required optimization parameter lr"
            );
        }
        self.state.push(vec![ParamState::new(); group.params.len()]);
        self.groups.push(group);
        Ok(())
    }

    /// `state_dict()`.
    pub fn state_dict(&self) -> OptimizerStateDict {
        let mut sd = OptimizerStateDict { optimizer: Some(self.name.to_string()), ..Default::default() };
        let mut index = 0;
        for (g, s) in self.groups.iter().zip(&self.state) {
            let mut options = g.options.clone();
            options.insert("lr".into(), Hyper::Float(g.lr));
            let params: Vec<usize> = (index..index + g.params.len()).collect();
            for (i, st) in params.iter().zip(s) {
                if !st.is_empty() {
                    sd.state.insert(*i, st.clone());
                }
            }
            index += g.params.len();
            sd.param_groups.push(SavedGroup { params, options });
        }
        sd
    }

    /// `load_state_dict(sd)`: the groups must match in number and size; every hyperparameter
    /// is taken from `sd`, and the state's tensors are copied, cast to each parameter's dtype
    /// (except `step`), so the optimizer never shares memory with `sd`.
    pub fn load_state_dict(&mut self, sd: &OptimizerStateDict) -> Result<()> {
        let name = self.name;
        if sd.param_groups.len() != self.groups.len() {
            bail!(
                Value,
                "{name}: loaded state dict has a different number of parameter groups ({} saved, the optimizer has {})",
                sd.param_groups.len(),
                self.groups.len()
            );
        }
        for (i, (g, s)) in self.groups.iter().zip(&sd.param_groups).enumerate() {
            if g.params.len() != s.params.len() {
                bail!(
                    Value,
                    "{name}: loaded state dict contains a parameter group that doesn't match the size of optimizer's group \
                     (param_groups[{i}] has {} parameters saved, the optimizer's has {})",
                    s.params.len(),
                    g.params.len()
                );
            }
            for (p, idx) in g.params.iter().zip(&s.params) {
                for (k, v) in sd.state.get(idx).into_iter().flatten() {
                    if let StateValue::Tensor(t) = v
                        && crate::optimizer_object::PARAM_SHAPED_KEYS.contains(&k.as_str())
                        && t.dims() != p.dims()
                    {
                        bail!(
                                Value,
                                "{name}: loaded state dict has '{k}' of shape {:?} for parameter {idx} of shape {:?}",
                                t.dims(),
                                p.dims()
                            );
                    }
                }
            }
        }
        let mut new_state = Vec::with_capacity(self.groups.len());
        let mut new_groups = Vec::with_capacity(self.groups.len());
        for (g, s) in self.groups.iter().zip(&sd.param_groups) {
            let mut states = Vec::with_capacity(g.params.len());
            for (p, idx) in g.params.iter().zip(&s.params) {
                let mut st = ParamState::new();
                if let Some(saved) = sd.state.get(idx) {
                    for (k, v) in saved {
                        st.insert(k.clone(), cast_state(k, v, p)?);
                    }
                }
                states.push(st);
            }
            new_state.push(states);
            let mut group = ParamGroup { params: g.params.clone(), lr: g.lr, options: Hypers::new() };
            for (k, v) in &s.options {
                group.set(k, v.clone());
            }
            if let Some(Hyper::Int(lr)) = s.options.get("lr") {
                group.lr = *lr as f64;
            }
            new_groups.push(group);
        }
        self.state = new_state;
        self.groups = new_groups;
        Ok(())
    }

    /// Runs the step pre hooks (`pre`) or post hooks on the groups.
    pub(crate) fn run_step_hooks(&mut self, pre: bool) {
        let mut h = self.hooks.lock().unwrap_or_else(|e| e.into_inner());
        let list = if pre { &mut h.pre } else { &mut h.post };
        for (_, f) in list.iter_mut() {
            f(&mut self.groups);
        }
    }
}

/// A copy of a saved state value for `param`: tensors are copied into new storage and, except
/// `step`, cast to the parameter's dtype (PyTorch's `_process_value_according_to_param_policy`).
/// A loaded state entry as PyTorch's `_process_value_according_to_param_policy` makes it: a
/// copy on the parameter's device, floating-point values in its dtype; `step` stays as saved.
fn cast_state(key: &str, v: &StateValue, param: &Tensor) -> Result<StateValue> {
    let copy = |t: &Tensor| -> Result<Tensor> {
        let t = t.detach();
        if key == "step" {
            return t.deep_clone();
        }
        let t = if t.device() != param.device() { t.to_device(param.device())? } else { t.deep_clone()? };
        if t.dtype().is_floating_point() && t.dtype() != param.dtype() {
            t.to_dtype(param.dtype())
        } else {
            Ok(t)
        }
    };
    Ok(match v {
        StateValue::Tensor(t) => StateValue::Tensor(copy(t)?),
        StateValue::TensorList(l) => StateValue::TensorList(l.iter().map(copy).collect::<Result<_>>()?),
        other => other.clone(),
    })
}

/// `torch.optim.Optimizer`. An optimizer implements [`Optimizer::base`], [`Optimizer::base_mut`]
/// and [`Optimizer::update`] (its algorithm); stepping, hooks, `zero_grad`, groups and the
/// state_dict come from here.
///
/// ```
/// use pyrite::nn::{Linear, Module};
/// use pyrite::optim::{Adam, AdamOptions, Optimizer};
/// use pyrite::Tensor;
/// let model = Linear::new(3, 1)?;
/// let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 0.1, ..Default::default() })?;
/// let x = Tensor::ones([4, 3], pyrite::DType::F32)?;
/// let before = model.weight.to_vec2::<f32>()?;
/// opt.zero_grad()?;
/// model.forward(&x)?.sum()?.backward()?;
/// opt.step()?;
/// // Adam's first step moves every weight by lr against the sign of its gradient.
/// let after = model.weight.to_vec2::<f32>()?;
/// assert!((before[0][0] - after[0][0] - 0.1).abs() < 1e-6);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub trait Optimizer: Send + AsDynOptimizer {
    fn base(&self) -> &OptimizerBase;
    fn base_mut(&mut self) -> &mut OptimizerBase;

    /// One update of every parameter that has a gradient, by this optimizer's algorithm. Called
    /// by [`Optimizer::step`] under `no_grad`, between the step hooks.
    fn update(&mut self) -> Result<()>;

    /// `step()`: runs the pre hooks, the update (without recording autograd) and the post hooks.
    ///
    /// A step that fails (typically out of memory while it creates its state on the first
    /// step) leaves the state as it was before it: step counts are not advanced and the state
    /// tensors it had made are dropped, so the same step can be taken again once memory is
    /// freed. The update allocates before it writes, so the parameters are untouched too,
    /// except where an earlier parameter group was already updated when a later one failed.
    fn step(&mut self) -> Result<()> {
        // The profiler's range, named as PyTorch names it (`Optimizer.step#Adam.step`).
        let _prof = pyrite_core::profiler_record::is_active().then(|| {
            pyrite_core::profiler_record::record_function(&format!(
                "Optimizer.step#{0}.step",
                self.base().name()
            ))
        });
        self.base_mut().run_step_hooks(true);
        {
            let _ng = autograd::no_grad();
            let before = self.base().state.clone(); // shares the state tensors
            let _scope = pyrite_core::memory::scope(self.base().name());
            if let Err(e) = self.update() {
                self.base_mut().state = before;
                return Err(e);
            }
            self.base().tag_state_memory();
        }
        self.base_mut().run_step_hooks(false);
        Ok(())
    }

    /// `step(closure)`: evaluates `closure` with gradients enabled, steps, and returns the
    /// loss. The closure is given the optimizer, so it can do what PyTorch's closure does:
    /// `optimizer.zero_grad()`, compute the loss, `loss.backward()`, return the loss. LBFGS
    /// calls the closure several times per step.
    ///
    /// ```
    /// use pyrite::optim::{Optimizer, SGD, SGDOptions};
    /// let w = pyrite::Tensor::new([3.0f64])?.requires_grad_(true)?;
    /// let mut optimizer = SGD::new(vec![w.clone()], SGDOptions { lr: 0.25, ..Default::default() })?;
    /// let loss = optimizer.step_with_closure(&mut |optimizer| {
    ///     optimizer.zero_grad()?;
    ///     let loss = w.square()?.sum()?;
    ///     loss.backward()?;
    ///     Ok(loss)
    /// })?;
    /// assert_eq!(loss.item::<f64>()?, 9.0);
    /// assert_eq!(w.to_vec::<f64>()?, [1.5]); // 3 - 0.25 * 6
    /// # Ok::<(), pyrite::Error>(())
    /// ```
    fn step_with_closure(
        &mut self,
        closure: &mut dyn FnMut(&dyn Optimizer) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let loss = {
            let _g = autograd::enable_grad();
            closure(self.as_dyn_optimizer())?
        };
        self.step()?;
        Ok(loss)
    }

    /// `zero_grad()`: sets every parameter's gradient to `None` (`set_to_none=True`).
    fn zero_grad(&self) -> Result<()> {
        self.zero_grad_with(true)
    }

    /// `zero_grad(set_to_none)`: with `false`, zeroes existing gradients in place.
    fn zero_grad_with(&self, set_to_none: bool) -> Result<()> {
        let _prof = pyrite_core::profiler_record::is_active().then(|| {
            pyrite_core::profiler_record::record_function(&format!(
                "Optimizer.zero_grad#{0}.zero_grad",
                self.base().name()
            ))
        });
        for g in self.base().groups() {
            for p in &g.params {
                if set_to_none {
                    p.set_grad(None)?;
                } else if let Some(grad) = p.grad() {
                    let grad = if grad.grad_fn().is_some() { grad.detach() } else { grad };
                    let _ng = autograd::no_grad();
                    grad.zero_()?;
                    p.set_grad(Some(grad))?;
                }
            }
        }
        Ok(())
    }

    /// `optimizer.param_groups`.
    fn param_groups(&self) -> &[ParamGroup] {
        self.base().groups()
    }

    /// `optimizer.param_groups`, to change hyperparameters (`group["lr"] = ...`).
    fn param_groups_mut(&mut self) -> &mut [ParamGroup] {
        self.base_mut().groups_mut()
    }

    /// `add_param_group(group)`: keys the group does not set take the optimizer's defaults.
    fn add_param_group(&mut self, group: ParamGroup) -> Result<()> {
        self.base_mut().add_param_group(group)
    }

    /// `optimizer.state[param]`.
    fn state(&self, param: &Tensor) -> Option<&ParamState> {
        self.base().state_of(param)
    }

    /// `state_dict()`: the state's tensors are shared with the optimizer, as in PyTorch; use
    /// [`OptimizerStateDict::deep_clone`] to keep a snapshot while training goes on.
    fn state_dict(&self) -> OptimizerStateDict {
        self.base().state_dict()
    }

    /// `load_state_dict(sd)`.
    fn load_state_dict(&mut self, sd: &OptimizerStateDict) -> Result<()> {
        self.base_mut().load_state_dict(sd)
    }

    /// `register_step_pre_hook(hook)`: `hook(groups)` runs before each step.
    fn register_step_pre_hook(&mut self, hook: impl FnMut(&mut [ParamGroup]) + Send + 'static) -> HookHandle
    where
        Self: Sized,
    {
        register(&self.base().hooks, true, Box::new(hook))
    }

    /// `register_step_post_hook(hook)`: `hook(groups)` runs after each step.
    fn register_step_post_hook(&mut self, hook: impl FnMut(&mut [ParamGroup]) + Send + 'static) -> HookHandle
    where
        Self: Sized,
    {
        register(&self.base().hooks, false, Box::new(hook))
    }
}

/// A boxed optimizer is an optimizer (the one it holds), so a `Box<dyn Optimizer>` chosen at
/// run time is passed as `&mut opt` wherever a `&mut dyn Optimizer` is taken (a scheduler's
/// constructor and `step`), as a concrete optimizer is.
impl<O: Optimizer + ?Sized> Optimizer for Box<O> {
    fn base(&self) -> &OptimizerBase {
        (**self).base()
    }
    fn base_mut(&mut self) -> &mut OptimizerBase {
        (**self).base_mut()
    }
    fn update(&mut self) -> Result<()> {
        (**self).update()
    }
    fn step(&mut self) -> Result<()> {
        (**self).step()
    }
    fn step_with_closure(
        &mut self,
        closure: &mut dyn FnMut(&dyn Optimizer) -> Result<Tensor>,
    ) -> Result<Tensor> {
        (**self).step_with_closure(closure)
    }
    fn zero_grad(&self) -> Result<()> {
        (**self).zero_grad()
    }
    fn zero_grad_with(&self, set_to_none: bool) -> Result<()> {
        let _prof = pyrite_core::profiler_record::is_active().then(|| {
            pyrite_core::profiler_record::record_function(&format!(
                "Optimizer.zero_grad#{0}.zero_grad",
                self.base().name()
            ))
        });
        (**self).zero_grad_with(set_to_none)
    }
    fn param_groups(&self) -> &[ParamGroup] {
        (**self).param_groups()
    }
    fn param_groups_mut(&mut self) -> &mut [ParamGroup] {
        (**self).param_groups_mut()
    }
    fn add_param_group(&mut self, group: ParamGroup) -> Result<()> {
        (**self).add_param_group(group)
    }
    fn state(&self, param: &Tensor) -> Option<&ParamState> {
        (**self).state(param)
    }
    fn state_dict(&self) -> OptimizerStateDict {
        (**self).state_dict()
    }
    fn load_state_dict(&mut self, sd: &OptimizerStateDict) -> Result<()> {
        (**self).load_state_dict(sd)
    }
}

/// An optimizer seen as a `&dyn Optimizer`, what the closure of
/// [`Optimizer::step_with_closure`] is given. Every optimizer has it (a blanket impl); there is
/// nothing to implement.
pub trait AsDynOptimizer {
    fn as_dyn_optimizer(&self) -> &dyn Optimizer;
}

impl<T: Optimizer> AsDynOptimizer for T {
    fn as_dyn_optimizer(&self) -> &dyn Optimizer {
        self
    }
}

fn register(hooks: &Arc<Mutex<HookList>>, pre: bool, hook: StepHook) -> HookHandle {
    let mut h = hooks.lock().unwrap_or_else(|e| e.into_inner());
    let id = h.next_id;
    h.next_id += 1;
    if pre {
        h.pre.push((id, hook));
    } else {
        h.post.push((id, hook));
    }
    HookHandle { hooks: Arc::downgrade(hooks), id }
}

/// The state tensor `key` of a parameter, made by `init` on first use; also says whether it
/// was just made (the first step of an optimizer that starts a buffer from the gradient).
pub(crate) fn state_tensor_or(
    st: &mut ParamState,
    key: &str,
    init: impl FnOnce() -> Result<Tensor>,
) -> Result<(Tensor, bool)> {
    if let Some(StateValue::Tensor(t)) = st.get(key) {
        return Ok((t.clone(), false));
    }
    let t = init()?;
    st.insert(key.to_string(), StateValue::Tensor(t.clone()));
    Ok((t, true))
}

/// Adds one to the parameter's `step` (starting at 0) and returns the new count.
pub(crate) fn bump_step(st: &mut ParamState) -> Result<f64> {
    let step = if st.contains_key("step") { state_f64(st, "step")? } else { 0.0 } + 1.0;
    st.insert("step".into(), StateValue::Float(step));
    Ok(step)
}
