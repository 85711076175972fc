//! Logging from a step ([`Context::log`], Lightning's `self.log`) and Lightning's reduction
//! rules.
//!
//! - **Defaults by where it is called**: in `training_step` and the training batch hooks a
//!   value is logged per step (`on_step=true, on_epoch=false`); in `validation_step`,
//!   `test_step` and every epoch hook, per epoch (`on_step=false, on_epoch=true`).
//! - **Epoch values** reduce the values of the epoch's batches with `reduce_fx`: the mean
//!   (default) is weighted by batch size (`batch_size`, or the first tensor's first dimension
//!   of the batch), `sum`, `max` and `min` are plain.
//! - **Names**: logged both per step and per epoch, a value appears as `name_step` and
//!   `name_epoch` to the loggers; otherwise as `name`.
//! - **Callback metrics** (what `ModelCheckpoint`, `EarlyStopping` and schedulers monitor):
//!   in training both the plain and the suffixed names, with the latest value; in
//!   validation and testing the epoch values only. They persist until the next fit.

use crate::module::StepOutput;
use pyrite_core::{bail, err, Result, Tensor};
use pyrite_data::Sample;
use pyrite_serialization::{Dict, Object};
use std::collections::BTreeMap;

/// How an epoch value is reduced from the batches' values (Lightning's `reduce_fx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReduceFx {
    /// The mean, weighted by batch size (default).
    #[default]
    Mean,
    Sum,
    Max,
    Min,
}

/// `self.log(...)`'s keyword arguments, with Lightning's defaults (`on_step` / `on_epoch`
/// `None`: chosen by the hook, see the module docs).
#[derive(Clone, Debug)]
pub struct LogOptions {
    pub on_step: Option<bool>,
    pub on_epoch: Option<bool>,
    /// Show it on the progress bar (default false).
    pub prog_bar: bool,
    /// Send it to the loggers (default true).
    pub logger: bool,
    pub reduce_fx: ReduceFx,
    /// The batch size that weights the epoch mean; default: inferred from the batch.
    pub batch_size: Option<usize>,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            on_step: None,
            on_epoch: None,
            prog_bar: false,
            logger: true,
            reduce_fx: ReduceFx::Mean,
            batch_size: None,
        }
    }
}

/// A value that can be logged: a number or a one-element tensor.
pub trait LogValue {
    fn log_value(self) -> Result<f64>;
}

impl LogValue for f64 {
    fn log_value(self) -> Result<f64> {
        Ok(self)
    }
}
impl LogValue for f32 {
    fn log_value(self) -> Result<f64> {
        Ok(self as f64)
    }
}
impl LogValue for i64 {
    fn log_value(self) -> Result<f64> {
        Ok(self as f64)
    }
}
impl LogValue for usize {
    fn log_value(self) -> Result<f64> {
        Ok(self as f64)
    }
}
impl LogValue for &Tensor {
    fn log_value(self) -> Result<f64> {
        if self.numel() != 1 {
            bail!(
                Value,
                "`log` was called with a tensor of shape {:?}: a logged value must be a number or a tensor with one element",
                self.dims()
            );
        }
        self.detach().to_dtype(pyrite_core::DType::F64)?.flatten(0, -1)?.to_vec::<f64>().map(|v| v[0])
    }
}
impl LogValue for Tensor {
    fn log_value(self) -> Result<f64> {
        (&self).log_value()
    }
}

/// Which loop is running (Lightning's `RunningStage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Stage {
    #[default]
    Train,
    Validate,
    SanityCheck,
    Test,
    Predict,
}

impl Stage {
    /// Lightning's name for it (`"train"`, `"validate"`, `"sanity_check"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Train => "train",
            Stage::Validate => "validate",
            Stage::SanityCheck => "sanity_check",
            Stage::Test => "test",
            Stage::Predict => "predict",
        }
    }
}

#[derive(Clone, Debug)]
struct Entry {
    name: String,
    on_step: bool,
    on_epoch: bool,
    prog_bar: bool,
    logger: bool,
    reduce: ReduceFx,
    /// The value logged by the latest step (Lightning's forward cache).
    last: Option<f64>,
    /// Weighted sum and weight for the mean; sum, max or min for the others.
    acc: f64,
    weight: f64,
    count: usize,
}

impl Entry {
    fn epoch_value(&self) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        Some(match self.reduce {
            ReduceFx::Mean => self.acc / self.weight,
            _ => self.acc,
        })
    }

    fn names(&self) -> (String, String, String) {
        if self.on_step && self.on_epoch {
            (self.name.clone(), format!("{}_step", self.name), format!("{}_epoch", self.name))
        } else {
            (self.name.clone(), self.name.clone(), self.name.clone())
        }
    }
}

/// Metrics taken from the results: for the loggers, for the callbacks, for the progress bar.
#[derive(Clone, Debug, Default)]
pub(crate) struct Metrics {
    pub log: BTreeMap<String, f64>,
    pub callback: BTreeMap<String, f64>,
    pub pbar: BTreeMap<String, f64>,
}

/// The values logged in one loop (Lightning's `_ResultCollection`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Results {
    entries: Vec<Entry>,
}

impl Results {
    fn log(
        &mut self,
        name: &str,
        value: f64,
        on_step: bool,
        on_epoch: bool,
        opts: &LogOptions,
        batch_size: usize,
    ) {
        let i = match self.entries.iter().position(|e| e.name == name) {
            Some(i) => i,
            None => {
                self.entries.push(Entry {
                    name: name.to_string(),
                    on_step,
                    on_epoch,
                    prog_bar: opts.prog_bar,
                    logger: opts.logger,
                    reduce: opts.reduce_fx,
                    last: None,
                    acc: match opts.reduce_fx {
                        ReduceFx::Max => f64::NEG_INFINITY,
                        ReduceFx::Min => f64::INFINITY,
                        _ => 0.0,
                    },
                    weight: 0.0,
                    count: 0,
                });
                self.entries.len() - 1
            }
        };
        let e = &mut self.entries[i];
        e.last = Some(value);
        e.count += 1;
        match e.reduce {
            ReduceFx::Mean => {
                e.acc += value * batch_size as f64;
                e.weight += batch_size as f64;
            }
            ReduceFx::Sum => e.acc += value,
            ReduceFx::Max => e.acc = e.acc.max(value),
            ReduceFx::Min => e.acc = e.acc.min(value),
        }
    }

    /// The step values (Lightning's `metrics(on_step=True)`).
    pub fn step_metrics(&self, training: bool) -> Metrics {
        let mut m = Metrics::default();
        for e in self.entries.iter().filter(|e| e.on_step) {
            let Some(v) = e.last else { continue };
            let (name, forked, _) = e.names();
            if e.logger {
                m.log.insert(forked.clone(), v);
            }
            if training {
                m.callback.insert(name, v);
                m.callback.insert(forked.clone(), v);
            }
            if e.prog_bar {
                m.pbar.insert(forked, v);
            }
        }
        m
    }

    /// The epoch values (Lightning's `metrics(on_step=False)`).
    pub fn epoch_metrics(&self) -> Metrics {
        let mut m = Metrics::default();
        for e in self.entries.iter().filter(|e| e.on_epoch) {
            let Some(v) = e.epoch_value() else { continue };
            let (name, _, forked) = e.names();
            if e.logger {
                m.log.insert(forked.clone(), v);
            }
            m.callback.insert(name, v);
            m.callback.insert(forked.clone(), v);
            if e.prog_bar {
                m.pbar.insert(forked, v);
            }
        }
        m
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// How many times each name was logged, and its latest step value.
    pub fn marks(&self) -> BTreeMap<String, (usize, Option<f64>)> {
        self.entries.iter().map(|e| (e.name.clone(), (e.count, e.last))).collect()
    }

    /// The step values logged since `before` (a [`Results::marks`]).
    pub fn logged_since(&self, before: &BTreeMap<String, (usize, Option<f64>)>) -> BTreeMap<String, f64> {
        self.entries
            .iter()
            .filter(|e| before.get(&e.name).is_none_or(|(c, _)| e.count > *c))
            .filter_map(|e| e.last.map(|v| (e.name.clone(), v)))
            .collect()
    }

    /// The step value of a batch run in micro-batches, from the values each micro-batch
    /// logged and its size: the mean weighted by size, the sum, the max or the min, as the
    /// entry reduces. The epoch accumulators already hold each micro-batch's value.
    pub fn combine_micro_batches(&mut self, pieces: &[(BTreeMap<String, f64>, usize)]) {
        for e in self.entries.iter_mut().filter(|e| e.on_step) {
            let vals: Vec<(f64, f64)> =
                pieces.iter().filter_map(|(m, n)| m.get(&e.name).map(|v| (*v, *n as f64))).collect();
            if vals.len() < 2 {
                continue;
            }
            e.last = Some(match e.reduce {
                ReduceFx::Mean => {
                    vals.iter().map(|(v, n)| v * n).sum::<f64>() / vals.iter().map(|p| p.1).sum::<f64>()
                }
                ReduceFx::Sum => vals.iter().map(|p| p.0).sum(),
                ReduceFx::Max => vals.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max),
                ReduceFx::Min => vals.iter().map(|p| p.0).fold(f64::INFINITY, f64::min),
            });
        }
    }

    /// Forgets the step values (after a batch), keeping the epoch accumulators.
    pub fn clear_step(&mut self) {
        for e in &mut self.entries {
            e.last = None;
        }
    }

    pub fn to_object(&self) -> Object {
        Object::List(
            self.entries
                .iter()
                .map(|e| {
                    Object::from_pairs([
                        ("name", Object::Str(e.name.clone())),
                        ("on_step", Object::Bool(e.on_step)),
                        ("on_epoch", Object::Bool(e.on_epoch)),
                        ("prog_bar", Object::Bool(e.prog_bar)),
                        ("logger", Object::Bool(e.logger)),
                        ("reduce_fx", Object::Int(e.reduce as i64)),
                        ("last", e.last.map(Object::Float).unwrap_or(Object::None)),
                        ("acc", Object::Float(e.acc)),
                        ("weight", Object::Float(e.weight)),
                        ("count", Object::Int(e.count as i64)),
                    ])
                })
                .collect(),
        )
    }

    pub fn from_object(obj: &Object) -> Result<Results> {
        let bad = || err!(Value, "checkpoint: the logged results in `loops` are malformed");
        let mut entries = vec![];
        for o in obj.as_slice().ok_or_else(bad)? {
            let f = |k: &str| o.get(k).and_then(Object::as_float).ok_or_else(bad);
            let b = |k: &str| o.get(k).and_then(Object::as_bool).ok_or_else(bad);
            entries.push(Entry {
                name: o.get("name").and_then(Object::as_str).ok_or_else(bad)?.to_string(),
                on_step: b("on_step")?,
                on_epoch: b("on_epoch")?,
                prog_bar: b("prog_bar")?,
                logger: b("logger")?,
                reduce: match o.get("reduce_fx").and_then(Object::as_int) {
                    Some(0) => ReduceFx::Mean,
                    Some(1) => ReduceFx::Sum,
                    Some(2) => ReduceFx::Max,
                    Some(3) => ReduceFx::Min,
                    _ => return Err(bad()),
                },
                last: o.get("last").and_then(Object::as_float),
                acc: f("acc")?,
                weight: f("weight")?,
                count: o.get("count").and_then(Object::as_int).ok_or_else(bad)? as usize,
            });
        }
        Ok(Results { entries })
    }
}

/// Whether the hook running logs per step or per epoch by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum HookLevel {
    #[default]
    Step,
    Epoch,
}

/// What a [`LightningModule`](crate::LightningModule)'s steps and hooks see of the loop:
/// Lightning's `self.log`, `self.current_epoch`, `self.global_step` and
/// `self.trainer.should_stop`.
#[derive(Debug, Default)]
pub struct Context {
    pub(crate) stage: Stage,
    pub(crate) level: HookLevel,
    pub(crate) current_epoch: usize,
    pub(crate) global_step: usize,
    pub(crate) batch_size: Option<usize>,
    pub(crate) should_stop: bool,
    pub(crate) train_results: Results,
    pub(crate) eval_results: Results,
}

impl Context {
    /// `self.log(name, value)` with the hook's defaults.
    pub fn log(&mut self, name: &str, value: impl LogValue) -> Result<()> {
        self.log_with(name, value, &LogOptions::default())
    }

    /// `self.log(name, value, prog_bar=True)`.
    pub fn log_prog_bar(&mut self, name: &str, value: impl LogValue) -> Result<()> {
        self.log_with(name, value, &LogOptions { prog_bar: true, ..Default::default() })
    }

    /// `self.log(name, value, **options)`.
    pub fn log_with(&mut self, name: &str, value: impl LogValue, opts: &LogOptions) -> Result<()> {
        if self.stage == Stage::Predict {
            bail!(Value, "`log(\"{name}\", ...)` cannot be called during prediction");
        }
        let value = value.log_value()?;
        let (def_step, def_epoch) = match (self.stage, self.level) {
            (Stage::Train, HookLevel::Step) => (true, false),
            _ => (false, true),
        };
        let on_step = opts.on_step.unwrap_or(def_step);
        let on_epoch = opts.on_epoch.unwrap_or(def_epoch);
        if !on_step && !on_epoch {
            bail!(
                Value,
                "`log(\"{name}\", ...)`: on_step and on_epoch are both false: the value would go nowhere"
            );
        }
        if self.level == HookLevel::Epoch && on_step {
            bail!(Value, "`log(\"{name}\", on_step=True)` is not allowed in an epoch hook: there is no step");
        }
        let batch_size = match opts.batch_size {
            Some(b) => b,
            None if opts.reduce_fx == ReduceFx::Mean && on_epoch => self.batch_size.unwrap_or(1),
            None => 1,
        };
        let results =
            if self.stage == Stage::Train { &mut self.train_results } else { &mut self.eval_results };
        if let Some(e) = results.entries.iter().find(|e| e.name == name)
            && (e.on_step != on_step || e.on_epoch != on_epoch || e.reduce != opts.reduce_fx)
        {
            bail!(
                Value,
                "`log(\"{name}\", ...)` was called again with different on_step / on_epoch / reduce_fx"
            );
        }
        results.log(name, value, on_step, on_epoch, opts, batch_size);
        Ok(())
    }

    /// `self.log_dict(...)`: each value with the same options.
    pub fn log_dict(&mut self, values: &[(&str, f64)], opts: &LogOptions) -> Result<()> {
        for (k, v) in values {
            self.log_with(k, *v, opts)?;
        }
        Ok(())
    }

    /// The epoch, counted from 0.
    pub fn current_epoch(&self) -> usize {
        self.current_epoch
    }

    /// Optimizer steps taken so far.
    pub fn global_step(&self) -> usize {
        self.global_step
    }

    /// The running loop.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// Asks the Trainer to stop after this step (`self.trainer.should_stop = True`).
    pub fn request_stop(&mut self) {
        self.should_stop = true;
    }
}

/// The batch size Lightning infers: the first dimension of the batch's first tensor.
pub(crate) fn infer_batch_size(batch: &Sample) -> Option<usize> {
    match batch {
        Sample::Tensor(t) => t.dims().first().copied(),
        Sample::Tuple(v) | Sample::List(v) => v.iter().find_map(infer_batch_size),
        Sample::Map(m) => m.values().find_map(infer_batch_size),
        _ => None,
    }
}

/// Checks what `training_step` returned: a scalar loss that has a graph.
pub(crate) fn check_loss(out: &StepOutput, epoch: usize, batch_idx: usize, step: usize) -> Result<()> {
    let Some(loss) = &out.loss else { return Ok(()) };
    if loss.numel() != 1 {
        bail!(
            Value,
            "training_step returned a loss of shape {:?} at epoch {epoch}, batch {batch_idx}: the loss must be a scalar (reduce it with .mean() or .sum())",
            loss.dims()
        );
    }
    if !loss.requires_grad() {
        bail!(
            Value,
            "training_step returned a loss that does not require grad and has no grad_fn (epoch {epoch}, batch {batch_idx}, global step {step}): was it computed under no_grad, or from detached tensors?"
        );
    }
    Ok(())
}

/// Dict helper for checkpoints.
pub(crate) fn dict_of(pairs: Vec<(&str, Object)>) -> Object {
    let mut d = Dict::new();
    for (k, v) in pairs {
        d.insert(k, v);
    }
    Object::Dict(d)
}
