//! `torch.optim.lr_scheduler`: learning-rate schedulers that change the `lr` (and, for the
//! cyclic ones, the momentum) of an optimizer's parameter groups as training goes on.
//!
//! A scheduler does not own its optimizer. Every one is built the same way,
//! `Scheduler::new(&mut optimizer, <PyTorch's positional arguments>, <options>)`, the options
//! being a struct whose `Default` holds PyTorch's defaults; the constructor sets each group's
//! `initial_lr` and applies the first learning rate, as PyTorch's does. The optimizer is taken
//! as `&mut dyn Optimizer`, so a concrete optimizer and a `Box<dyn Optimizer>` are passed
//! alike, and each [`LRScheduler::step`] takes it again. Call it after `optimizer.step()`:
//!
//! ```
//! use pyrite::optim::lr_scheduler::{LRScheduler, StepLR, StepLROptions};
//! use pyrite::optim::{Optimizer, SGD, SGDOptions};
//! use pyrite::Tensor;
//! let w = Tensor::new([1.0f64, 2.0])?.requires_grad_(true)?;
//! let mut opt = SGD::new(vec![w], SGDOptions { lr: 0.1, ..Default::default() })?;
//! let mut sched = StepLR::new(&mut opt, 2, StepLROptions { gamma: 0.5, ..Default::default() })?;
//! let mut seen = vec![];
//! for _epoch in 0..5 {
//!     // ... forward, backward ...
//!     opt.step()?;
//!     sched.step(&mut opt)?;
//!     seen.push(opt.param_groups()[0].lr);
//! }
//! assert_eq!(seen, [0.1, 0.05, 0.05, 0.025, 0.025]);
//! # Ok::<(), pyrite::Error>(())
//! ```
//!
//! Every scheduler computes in `f64` with PyTorch's formulas in PyTorch's order of operations,
//! so the sequences match PyTorch's to the last bit or nearly: the recursive ("chainable")
//! forms on each `step`, and the closed forms where PyTorch uses them (a [`SequentialLR`]
//! restarting a scheduler at a milestone). The deprecated `step(epoch)` argument is not
//! offered. The shared state lives in [`SchedulerBase`]; a scheduler implements
//! [`LRScheduler::get_lr`] and gets stepping and its state_dict from the trait, so a custom
//! schedule is a struct holding a base and a `get_lr`.
//!
//! [`ReduceLROnPlateau`] steps with a metric, `sched.step(&mut optimizer, val_loss)`, so it is
//! not an [`LRScheduler`]: forgetting the metric, or putting it in a [`SequentialLR`], is a
//! compile error rather than a run-time one. [`SequentialLR`] and [`ChainedScheduler`] take
//! their schedulers as a tuple, `(warmup, cosine)` (see [`IntoSchedulers`]).
//!
//! Files: the schedulers with a simple rule (`basic.rs`), the cosine ones (`cosine.rs`),
//! [`CyclicLR`] and [`OneCycleLR`] (`cyclic.rs`), [`ReduceLROnPlateau`] (`plateau.rs`) and the
//! combinators [`SequentialLR`] and [`ChainedScheduler`] (`compose.rs`). `SWALR` is in
//! [`crate::swa_utils`].

mod basic;
mod compose;
mod cosine;
mod cyclic;
mod plateau;
mod state_object;

pub use basic::{
    ConstantLR, ConstantLROptions, ExponentialLR, LambdaLR, LinearLR, LinearLROptions, LrLambda, MultiStepLR,
    MultiStepLROptions, MultiplicativeLR, PolynomialLR, PolynomialLROptions, StepLR, StepLROptions,
};
pub use compose::{ChainedScheduler, IntoSchedulers, SequentialLR};
pub use cosine::{
    CosineAnnealingLR, CosineAnnealingLROptions, CosineAnnealingWarmRestarts,
    CosineAnnealingWarmRestartsOptions,
};
pub use cyclic::{
    AnnealStrategy, CyclicLR, CyclicLROptions, CyclicMode, OneCycleLR, OneCycleLROptions, ScaleFn, ScaleMode,
};
pub use plateau::{PlateauMode, ReduceLROnPlateau, ReduceLROnPlateauOptions, ThresholdMode};
pub use state_object::{SchedulerStateObject, SCHEDULER_LAYOUTS};

use crate::optimizer::{HookHandle, Optimizer, ParamGroup};
use pyrite_core::{bail, warnings, Result};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One value of a scheduler's state_dict (the values of PyTorch's `scheduler.state_dict()`).
#[derive(Clone, Debug, PartialEq)]
pub enum SchedulerValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<SchedulerValue>),
    /// A nested dict: a child scheduler's state, a `Counter` of milestones, a phase.
    Dict(SchedulerStateDict),
}

/// `scheduler.state_dict()`: PyTorch's keys (`last_epoch`, `base_lrs`, `_last_lr`,
/// `_step_count`, and each scheduler's own fields) with their values.
pub type SchedulerStateDict = BTreeMap<String, SchedulerValue>;

impl From<f64> for SchedulerValue {
    fn from(v: f64) -> Self {
        SchedulerValue::Float(v)
    }
}
impl From<i64> for SchedulerValue {
    fn from(v: i64) -> Self {
        SchedulerValue::Int(v)
    }
}
impl From<bool> for SchedulerValue {
    fn from(v: bool) -> Self {
        SchedulerValue::Bool(v)
    }
}
impl From<&str> for SchedulerValue {
    fn from(v: &str) -> Self {
        SchedulerValue::Str(v.to_string())
    }
}
impl From<&[f64]> for SchedulerValue {
    fn from(v: &[f64]) -> Self {
        SchedulerValue::List(v.iter().map(|x| SchedulerValue::Float(*x)).collect())
    }
}
impl From<Option<f64>> for SchedulerValue {
    fn from(v: Option<f64>) -> Self {
        v.map_or(SchedulerValue::None, SchedulerValue::Float)
    }
}

impl SchedulerValue {
    /// The value as a float (an `Int` is read as a float).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            SchedulerValue::Float(v) => Some(*v),
            SchedulerValue::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    /// The value as an integer (a `Float` with an integral value is accepted).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            SchedulerValue::Int(v) => Some(*v),
            SchedulerValue::Float(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => Some(*v as i64),
            _ => None,
        }
    }
}

// Readers for `load_state_dict` (and a custom scheduler's `load_fields`). As PyTorch's
// `__dict__.update`, a key missing from the dict leaves the field as it is; a key with a value
// of the wrong type is an error.

fn wrong_type(key: &str, want: &str, got: &SchedulerValue) -> pyrite_core::Error {
    pyrite_core::Error::new(
        pyrite_core::ErrorKind::Value,
        format!("load_state_dict: '{key}' should be {want}, got {got:?}"),
    )
}

/// Reads `sd[key]` as a float into `field`.
pub fn load_f64(sd: &SchedulerStateDict, key: &str, field: &mut f64) -> Result<()> {
    if let Some(v) = sd.get(key) {
        *field = v.as_f64().ok_or_else(|| wrong_type(key, "a float", v))?;
    }
    Ok(())
}

/// Reads `sd[key]` as an integer into `field`.
pub fn load_i64(sd: &SchedulerStateDict, key: &str, field: &mut i64) -> Result<()> {
    if let Some(v) = sd.get(key) {
        *field = v.as_i64().ok_or_else(|| wrong_type(key, "an integer", v))?;
    }
    Ok(())
}

/// Reads `sd[key]` as a bool into `field`.
pub fn load_bool(sd: &SchedulerStateDict, key: &str, field: &mut bool) -> Result<()> {
    match sd.get(key) {
        Some(SchedulerValue::Bool(b)) => *field = *b,
        Some(v) => return Err(wrong_type(key, "a bool", v)),
        None => {}
    }
    Ok(())
}

/// `sd[key]` as a string, if present.
pub fn load_str<'a>(sd: &'a SchedulerStateDict, key: &str) -> Result<Option<&'a str>> {
    match sd.get(key) {
        Some(SchedulerValue::Str(s)) => Ok(Some(s)),
        Some(v) => Err(wrong_type(key, "a string", v)),
        None => Ok(None),
    }
}

/// Reads `sd[key]` as a list of floats into `field`.
pub fn load_f64_list(sd: &SchedulerStateDict, key: &str, field: &mut Vec<f64>) -> Result<()> {
    match sd.get(key) {
        Some(SchedulerValue::List(l)) => {
            *field = l
                .iter()
                .map(|v| v.as_f64().ok_or_else(|| wrong_type(key, "a list of floats", v)))
                .collect::<Result<_>>()?;
        }
        Some(v) => return Err(wrong_type(key, "a list of floats", v)),
        None => {}
    }
    Ok(())
}

/// A per-group value given as one number for every group or one per group (PyTorch's
/// `float | list[float]` arguments: `base_lr`, `max_lr`, `min_lr`, `swa_lr`, momenta).
#[derive(Clone, Debug, PartialEq)]
pub enum PerGroup {
    All(f64),
    Each(Vec<f64>),
}

impl From<f64> for PerGroup {
    fn from(v: f64) -> Self {
        PerGroup::All(v)
    }
}
impl From<Vec<f64>> for PerGroup {
    fn from(v: Vec<f64>) -> Self {
        PerGroup::Each(v)
    }
}
impl From<&[f64]> for PerGroup {
    fn from(v: &[f64]) -> Self {
        PerGroup::Each(v.to_vec())
    }
}
impl<const N: usize> From<[f64; N]> for PerGroup {
    fn from(v: [f64; N]) -> Self {
        PerGroup::Each(v.to_vec())
    }
}

impl PerGroup {
    /// One value per group (`_format_param`); a list must have one value per group.
    pub(crate) fn expand(&self, who: &str, name: &str, n_groups: usize) -> Result<Vec<f64>> {
        match self {
            PerGroup::All(v) => Ok(vec![*v; n_groups]),
            PerGroup::Each(l) if l.len() == n_groups => Ok(l.clone()),
            PerGroup::Each(l) => bail!(
                Value,
                "{who}: {name} must have the same length as optimizer.param_groups. {name} has {} values, param_groups has {n_groups}.",
                l.len()
            ),
        }
    }
}

/// The options of the schedulers whose only optional argument is `last_epoch`.
#[derive(Clone, Debug)]
pub struct SchedulerOptions {
    /// The index of the last epoch when resuming; `-1` (the default) starts afresh.
    pub last_epoch: i64,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions { last_epoch: -1 }
    }
}

/// Each group's learning rate (`[group["lr"] for group in optimizer.param_groups]`).
pub fn group_lrs(groups: &[ParamGroup]) -> Vec<f64> {
    groups.iter().map(|g| g.lr).collect()
}

const ORDER_WARNING: &str = "Detected call of `lr_scheduler.step()` before `optimizer.step()`. You should call them in \
this order: `optimizer.step()` before `lr_scheduler.step()`; otherwise the first value of the learning rate schedule \
is skipped. See https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate";

/// Knows whether the optimizer has stepped since the scheduler was built: a step pre-hook on
/// the optimizer sets a flag (PyTorch wraps `optimizer.step` for the same purpose). The hook
/// is removed when the scheduler is dropped.
struct StepTracker {
    stepped: Arc<AtomicBool>,
    handle: HookHandle,
}

impl Drop for StepTracker {
    fn drop(&mut self) {
        self.handle.remove();
    }
}

/// The state every scheduler shares (the attributes of PyTorch's `LRScheduler`).
pub struct SchedulerBase {
    /// The index of the current epoch (`last_epoch`); `0` after construction.
    pub last_epoch: i64,
    /// Each group's `initial_lr` at construction (`base_lrs`).
    pub base_lrs: Vec<f64>,
    /// Each group's lr after the last step (`get_last_lr()`).
    pub last_lr: Vec<f64>,
    /// How many times `step` ran, the step done by the constructor included (`_step_count`).
    pub step_count: i64,
    is_initial: bool,
    tracker: Option<StepTracker>,
}

impl SchedulerBase {
    /// The base of a scheduler on `opt` (`LRScheduler.__init__` before its first step): with
    /// `last_epoch == -1` each group's `initial_lr` is set to its `lr` unless it has one;
    /// otherwise every group must already have an `initial_lr`. Watches `opt` for the
    /// "scheduler stepped before the optimizer" warning.
    pub fn new(opt: &mut dyn Optimizer, last_epoch: i64) -> Result<SchedulerBase> {
        let groups = opt.param_groups_mut();
        for (i, g) in groups.iter_mut().enumerate() {
            if g.get("initial_lr").is_none() {
                if last_epoch != -1 {
                    bail!(
                        Value,
                        "param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with last_epoch >= 0.\n\
                         This typically happens when:\n\
                         1. You're trying to resume training from a checkpoint but haven't properly loaded the optimizer state\n\
                         2. You're using last_epoch >= 0 for a fresh training run (not recommended)"
                    );
                }
                let lr = g.lr;
                g.set("initial_lr", lr);
            }
        }
        let base_lrs = groups.iter().map(|g| g.f64("initial_lr")).collect::<Result<Vec<_>>>()?;
        let stepped = Arc::new(AtomicBool::new(false));
        let flag = stepped.clone();
        let handle = opt.base().register_step_hook(
            true,
            Box::new(move |_: &mut [ParamGroup]| flag.store(true, Ordering::Relaxed)),
        );
        Ok(SchedulerBase {
            last_epoch,
            base_lrs,
            last_lr: Vec::new(),
            step_count: 0,
            is_initial: false,
            tracker: Some(StepTracker { stepped, handle }),
        })
    }

    /// The base of a scheduler that does not follow the common scheme ([`SequentialLR`],
    /// [`ChainedScheduler`], [`ReduceLROnPlateau`]): it only keeps `last_epoch` and `last_lr`.
    pub(crate) fn plain(last_epoch: i64, last_lr: Vec<f64>) -> SchedulerBase {
        SchedulerBase {
            last_epoch,
            base_lrs: Vec::new(),
            last_lr,
            step_count: 0,
            is_initial: false,
            tracker: None,
        }
    }

    /// True during the step made by the constructor (PyTorch's `_is_initial`): most
    /// recursive forms keep the groups' lr then.
    pub fn is_initial(&self) -> bool {
        self.is_initial
    }

    /// Counts a `step`, warning on the first one after construction if the optimizer has not
    /// stepped yet.
    pub fn count_step(&mut self) {
        if self.step_count == 1
            && let Some(t) = &self.tracker
            && !t.stepped.load(Ordering::Relaxed)
        {
            warnings::warn("lr_scheduler", ORDER_WARNING);
        }
        self.step_count += 1;
    }

    /// Writes `lrs` into the groups and records them as the last lrs.
    pub fn apply(&mut self, groups: &mut [ParamGroup], lrs: Vec<f64>) -> Result<()> {
        if lrs.len() != groups.len() {
            bail!(
                Value,
                "lr_scheduler: computed {} learning rates for {} param groups",
                lrs.len(),
                groups.len()
            );
        }
        for (g, lr) in groups.iter_mut().zip(&lrs) {
            g.lr = *lr;
        }
        self.last_lr = lrs;
        Ok(())
    }

    /// Checks that the optimizer has as many groups as when the scheduler was built.
    pub fn check_groups(&self, groups: &[ParamGroup]) -> Result<()> {
        if groups.len() != self.base_lrs.len() {
            bail!(
                Value,
                "lr_scheduler: the optimizer has {} param groups, but the scheduler was built for {}",
                groups.len(),
                self.base_lrs.len()
            );
        }
        Ok(())
    }

    fn save(&self, sd: &mut SchedulerStateDict) {
        sd.insert("base_lrs".into(), self.base_lrs.as_slice().into());
        sd.insert("last_epoch".into(), self.last_epoch.into());
        sd.insert("_step_count".into(), self.step_count.into());
        sd.insert("_is_initial".into(), false.into());
        sd.insert("_get_lr_called_within_step".into(), false.into());
        sd.insert("_last_lr".into(), self.last_lr.as_slice().into());
    }

    fn load(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_f64_list(sd, "base_lrs", &mut self.base_lrs)?;
        load_i64(sd, "last_epoch", &mut self.last_epoch)?;
        load_i64(sd, "_step_count", &mut self.step_count)?;
        load_f64_list(sd, "_last_lr", &mut self.last_lr)
    }
}

/// `torch.optim.lr_scheduler.LRScheduler`. A scheduler implements [`LRScheduler::base`],
/// [`LRScheduler::base_mut`] and [`LRScheduler::get_lr`] (and, to save its own fields,
/// [`LRScheduler::save_fields`] / [`LRScheduler::load_fields`]); stepping and the state_dict
/// come from here.
pub trait LRScheduler: Send {
    fn base(&self) -> &SchedulerBase;
    fn base_mut(&mut self) -> &mut SchedulerBase;

    /// The new learning rate of each group for `base().last_epoch`, which `step` has already
    /// advanced (PyTorch's `get_lr`, the recursive form). It may change other hyperparameters
    /// of the groups (the cyclic schedulers set the momentum).
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>>;

    /// The closed form (`_get_closed_form_lr`), for the schedulers that have one.
    fn closed_form_lr(&self) -> Option<Vec<f64>> {
        None
    }

    /// Adds this scheduler's own fields to its state_dict.
    fn save_fields(&self, _sd: &mut SchedulerStateDict) {}

    /// Reads this scheduler's own fields from a state_dict.
    fn load_fields(&mut self, _sd: &SchedulerStateDict) -> Result<()> {
        Ok(())
    }

    /// `scheduler.step()`: advances one epoch and sets each group's lr.
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.base_mut().count_step();
        self.update_lr(opt, None)
    }

    /// The lrs set by the last step (`get_last_lr()`).
    fn get_last_lr(&self) -> &[f64] {
        &self.base().last_lr
    }

    /// `last_epoch`.
    fn last_epoch(&self) -> i64 {
        self.base().last_epoch
    }

    /// `state_dict()`: every field but the optimizer (and functions, saved as `None`).
    fn state_dict(&self) -> SchedulerStateDict {
        let mut sd = SchedulerStateDict::new();
        self.base().save(&mut sd);
        self.save_fields(&mut sd);
        sd
    }

    /// `load_state_dict(sd)`: the fields present in `sd` replace the scheduler's. The groups'
    /// lrs are not changed (load the optimizer's state_dict for those).
    fn load_state_dict(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        self.base_mut().load(sd)?;
        self.load_fields(sd)
    }

    /// `_update_lr(epoch)`: with `None`, advances `last_epoch` and uses the recursive form;
    /// with `Some(e)`, sets `last_epoch = e` and uses the closed form where there is one.
    #[doc(hidden)]
    fn update_lr(&mut self, opt: &mut dyn Optimizer, epoch: Option<i64>) -> Result<()> {
        let groups = opt.param_groups_mut();
        self.base().check_groups(groups)?;
        let lrs = match epoch {
            None => {
                self.base_mut().last_epoch += 1;
                self.get_lr(groups)?
            }
            Some(e) => {
                self.base_mut().last_epoch = e;
                match self.closed_form_lr() {
                    Some(lrs) => lrs,
                    None => self.get_lr(groups)?,
                }
            }
        };
        self.base_mut().apply(groups, lrs)
    }

    /// `_initial_step()`: the step done by the constructor.
    #[doc(hidden)]
    fn initial_step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.base_mut().step_count = 0;
        self.base_mut().is_initial = true;
        let r = self.step(opt);
        self.base_mut().is_initial = false;
        r
    }

    /// Steps `last_epoch` back by one (`SequentialLR.recursive_undo`).
    #[doc(hidden)]
    fn undo_epoch(&mut self) {
        self.base_mut().last_epoch -= 1;
    }
}

/// Python's `a % b` for a positive `b` (the result has the sign of `b`).
pub(crate) fn py_mod(a: i64, b: i64) -> i64 {
    a.rem_euclid(b)
}

/// Whether the optimizer's groups carry `betas` (Adam-like) rather than `momentum`, for the
/// schedulers that cycle the momentum; an error if it has neither.
pub(crate) fn momentum_uses_beta1(opt: &dyn Optimizer, who: &str) -> Result<bool> {
    let defaults = opt.base().defaults();
    if !defaults.contains_key("momentum") && !defaults.contains_key("betas") {
        bail!(Value, "{who}: optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
    }
    Ok(defaults.contains_key("betas"))
}

/// Sets a group's momentum: `betas[0]` for Adam-like optimizers, `momentum` otherwise.
pub(crate) fn set_momentum(group: &mut ParamGroup, use_beta1: bool, m: f64) -> Result<()> {
    if use_beta1 {
        let (_, b2) = group.pair("betas")?;
        group.set("betas", (m, b2));
    } else {
        group.set("momentum", m);
    }
    Ok(())
}
