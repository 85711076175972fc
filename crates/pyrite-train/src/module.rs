//! [`LightningModule`]: what a model brings to the [`Trainer`](crate::Trainer): its steps,
//! its optimizer and the hooks it wants, as PyTorch Lightning's `LightningModule`.
//!
//! A Lightning module is a plain struct that owns an `nn` [`Module`] (or is one) and says what
//! one step of training, validation, testing and prediction does. The Trainer owns the loop:
//! it calls the steps, runs backward and the optimizer, the schedulers, the callbacks, the
//! loggers and the checkpoints. Values are logged from a step with [`Context::log`], Lightning's
//! `self.log`.

use crate::results::Context;
use pyrite_core::{bail, Result, Tensor};
use pyrite_data::Sample;
use pyrite_nn::Module;
use pyrite_optim::lr_scheduler::{LRScheduler, ReduceLROnPlateau};
use pyrite_optim::Optimizer;
use pyrite_serialization::Object;

/// What `training_step` returns (Lightning's `STEP_OUTPUT`): the loss to optimize, or none to
/// skip the optimizer for this batch, and other tensors handed to `on_train_batch_end`.
/// A tensor converts into one: `Ok(loss.into())`.
#[derive(Clone, Debug, Default)]
pub struct StepOutput {
    /// The loss; `None` skips backward and the optimizer step for this batch, as returning
    /// `None` from a Lightning `training_step` does.
    pub loss: Option<Tensor>,
    /// Other outputs, by name (Lightning's dict entries besides `"loss"`).
    pub extra: Vec<(String, Tensor)>,
}

impl StepOutput {
    /// An output with this loss.
    pub fn new(loss: Tensor) -> StepOutput {
        StepOutput { loss: Some(loss), extra: vec![] }
    }

    /// No loss: this batch is not optimized.
    pub fn skip() -> StepOutput {
        StepOutput::default()
    }

    /// Adds a named output.
    pub fn with(mut self, name: &str, value: Tensor) -> StepOutput {
        self.extra.push((name.to_string(), value));
        self
    }

    /// A named output.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        if name == "loss" {
            return self.loss.as_ref();
        }
        self.extra.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

impl From<Tensor> for StepOutput {
    fn from(loss: Tensor) -> StepOutput {
        StepOutput::new(loss)
    }
}

/// When a scheduler steps (Lightning's `"interval"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Interval {
    /// After each optimizer step (`"step"`).
    Step,
    /// At the end of each training epoch (`"epoch"`, the default).
    #[default]
    Epoch,
}

impl Interval {
    pub fn as_str(self) -> &'static str {
        match self {
            Interval::Step => "step",
            Interval::Epoch => "epoch",
        }
    }
}

/// A learning-rate scheduler the Trainer steps: one of `torch.optim.lr_scheduler`'s, or
/// `ReduceLROnPlateau`, which steps with a monitored metric.
pub enum Scheduler {
    Lr(Box<dyn LRScheduler>),
    Plateau(ReduceLROnPlateau),
}

impl Scheduler {
    /// A scheduler that steps without a metric.
    pub fn lr(scheduler: impl LRScheduler + 'static) -> Scheduler {
        Scheduler::Lr(Box::new(scheduler))
    }

    /// `ReduceLROnPlateau`, stepped with the config's `monitor`.
    pub fn plateau(scheduler: ReduceLROnPlateau) -> Scheduler {
        Scheduler::Plateau(scheduler)
    }

    pub(crate) fn state_object(&self) -> Result<Object> {
        use pyrite_optim::lr_scheduler::SchedulerStateObject;
        match self {
            Scheduler::Lr(s) => s.state_dict().to_object(),
            Scheduler::Plateau(s) => s.state_dict().to_object(),
        }
    }

    pub(crate) fn load_state_object(&mut self, obj: &Object) -> Result<()> {
        use pyrite_optim::lr_scheduler::{SchedulerStateDict, SchedulerStateObject};
        let sd = SchedulerStateDict::from_object(obj)?;
        match self {
            Scheduler::Lr(s) => s.load_state_dict(&sd),
            Scheduler::Plateau(s) => s.load_state_dict(&sd),
        }
    }
}

/// A scheduler with Lightning's `lr_scheduler_config` keys and defaults.
pub struct LrSchedulerConfig {
    pub scheduler: Scheduler,
    /// `"interval"`: epoch (default) or step.
    pub interval: Interval,
    /// `"frequency"`: step every this many intervals (default 1).
    pub frequency: usize,
    /// `"monitor"`: the metric a `ReduceLROnPlateau` steps with (default `"val_loss"`).
    pub monitor: String,
    /// `"strict"`: a monitored metric that was not logged is an error (default true); with
    /// false, a warning, and the scheduler does not step.
    pub strict: bool,
    /// `"name"`: what `LearningRateMonitor` calls it (default `lr-<optimizer>`).
    pub name: Option<String>,
}

impl LrSchedulerConfig {
    /// A config with Lightning's defaults: every epoch, monitor `val_loss`, strict.
    pub fn new(scheduler: Scheduler) -> LrSchedulerConfig {
        LrSchedulerConfig {
            scheduler,
            interval: Interval::Epoch,
            frequency: 1,
            monitor: "val_loss".into(),
            strict: true,
            name: None,
        }
    }
}

/// What `configure_optimizers` returns: one optimizer and an optional scheduler (Lightning's
/// `{"optimizer": ..., "lr_scheduler": {...}}`).
pub struct OptimizerConfig {
    pub optimizer: Box<dyn Optimizer>,
    pub lr_scheduler: Option<LrSchedulerConfig>,
}

impl OptimizerConfig {
    /// An optimizer without a scheduler.
    pub fn new(optimizer: impl Optimizer + 'static) -> OptimizerConfig {
        OptimizerConfig { optimizer: Box::new(optimizer), lr_scheduler: None }
    }

    /// Adds a scheduler.
    pub fn with_scheduler(mut self, config: LrSchedulerConfig) -> OptimizerConfig {
        self.lr_scheduler = Some(config);
        self
    }
}

/// A hyperparameter's value, for `hparams.yaml` and TensorBoard's hparams.
#[derive(Clone, Debug, PartialEq)]
pub enum HParam {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl From<bool> for HParam {
    fn from(v: bool) -> HParam {
        HParam::Bool(v)
    }
}
impl From<i64> for HParam {
    fn from(v: i64) -> HParam {
        HParam::Int(v)
    }
}
impl From<usize> for HParam {
    fn from(v: usize) -> HParam {
        HParam::Int(v as i64)
    }
}
impl From<f64> for HParam {
    fn from(v: f64) -> HParam {
        HParam::Float(v)
    }
}
impl From<&str> for HParam {
    fn from(v: &str) -> HParam {
        HParam::Str(v.to_string())
    }
}
impl From<String> for HParam {
    fn from(v: String) -> HParam {
        HParam::Str(v)
    }
}

impl std::fmt::Display for HParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HParam::Bool(v) => write!(f, "{v}"),
            HParam::Int(v) => write!(f, "{v}"),
            HParam::Float(v) => write!(f, "{v:?}"),
            HParam::Str(v) => write!(f, "{v}"),
        }
    }
}

/// Whether the training epoch goes on after `on_train_batch_start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Flow {
    #[default]
    Continue,
    /// Skip the rest of this epoch (Lightning's `return -1`).
    SkipRestOfEpoch,
}

/// Lightning's `LightningModule`: the steps and hooks of a model trained by the
/// [`Trainer`](crate::Trainer).
///
/// Only [`module`](LightningModule::module), [`training_step`](LightningModule::training_step)
/// and [`configure_optimizers`](LightningModule::configure_optimizers) are required; the other
/// steps are needed only by the stages that call them (a validation loader needs
/// `validation_step`), and every hook does nothing by default.
///
/// ```
/// use pyrite::data::Sample;
/// use pyrite::nn::{Linear, Module};
/// use pyrite::optim::{SGD, SGDOptions};
/// use pyrite::prelude::*;
/// use pyrite::train::{Context, LightningModule, OptimizerConfig, StepOutput};
///
/// struct Regression { net: Linear }
///
/// impl LightningModule for Regression {
///     fn module(&self) -> &dyn Module { &self.net }
///     fn module_mut(&mut self) -> Option<&mut dyn Module> { Some(&mut self.net) }
///     fn training_step(&mut self, batch: &Sample, _i: usize, ctx: &mut Context) -> pyrite::Result<StepOutput> {
///         let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
///         let loss = F::mse_loss(&self.net.call(x)?, y, Default::default())?;
///         ctx.log("train_loss", &loss)?;
///         Ok(loss.into())
///     }
///     fn configure_optimizers(&mut self) -> pyrite::Result<OptimizerConfig> {
///         let sgd = SGD::new(self.net.parameters(), SGDOptions { lr: 0.1, ..Default::default() })?;
///         Ok(OptimizerConfig::new(sgd))
///     }
/// }
/// # let _ = Regression { net: Linear::new(1, 1)? };
/// # Ok::<(), pyrite::Error>(())
/// ```
#[allow(unused_variables)]
pub trait LightningModule {
    /// The `nn` module whose parameters are trained and whose `state_dict` is checkpointed
    /// (`self` when the struct is itself a module).
    fn module(&self) -> &dyn Module;

    /// The same module, mutable: the Trainer moves its parameters to a GPU (the
    /// `accelerator`, as Lightning's `module.to(device)`) and converts them for a `*-true`
    /// precision (`"bf16-true"`, `"16-true"`, `"64-true"`, as `module.to(dtype)`). Default:
    /// `None` (a GPU or those precisions then fail with a message saying so, unless the module
    /// is already there).
    fn module_mut(&mut self) -> Option<&mut dyn Module> {
        None
    }

    /// One training step: the loss of `batch` (and values logged with `ctx.log`).
    fn training_step(&mut self, batch: &Sample, batch_idx: usize, ctx: &mut Context) -> Result<StepOutput>;

    /// One validation step, run without gradients in eval mode; log metrics with `ctx.log`.
    fn validation_step(&mut self, batch: &Sample, batch_idx: usize, ctx: &mut Context) -> Result<()> {
        bail!(
            Value,
            "a validation dataloader was given, but `validation_step` is not defined in the LightningModule"
        )
    }

    /// One test step, run without gradients in eval mode.
    fn test_step(&mut self, batch: &Sample, batch_idx: usize, ctx: &mut Context) -> Result<()> {
        bail!(Value, "`Trainer.test` needs `test_step` to be defined in the LightningModule")
    }

    /// One prediction step; by default the module's forward on the batch's first item (or on
    /// the batch, when it is a tensor).
    fn predict_step(&mut self, batch: &Sample, batch_idx: usize) -> Result<Tensor> {
        let x = match batch {
            Sample::Tensor(t) => t,
            other => other.item(0)?.as_tensor()?,
        };
        self.module().forward(x)
    }

    /// The optimizer and its scheduler.
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig>;

    /// Hyperparameters to record (Lightning's `save_hyperparameters()`): written to
    /// `hparams.yaml` by the CSV logger, to TensorBoard's hparams, and into checkpoints.
    fn hparams(&self) -> Vec<(String, HParam)> {
        vec![]
    }

    /// Takes a new learning rate (what `LearningRateFinder` suggests) for the next
    /// `configure_optimizers`; returns whether it was taken (default: no).
    fn set_learning_rate(&mut self, lr: f64) -> Result<bool> {
        Ok(false)
    }

    /// Takes the batch size the [`BatchSizeFinder`](crate::callbacks::BatchSizeFinder) found,
    /// under its `batch_arg_name` (default `"batch_size"`; Lightning sets `model.batch_size`
    /// or `model.hparams.batch_size`); returns whether it was taken (default: no). The
    /// Trainer trains on with that batch size either way.
    fn set_batch_size(&mut self, batch_arg_name: &str, batch_size: usize) -> Result<bool> {
        Ok(false)
    }

    fn on_fit_start(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_fit_end(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_train_start(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_train_end(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_train_epoch_start(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_train_epoch_end(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    /// Before each training batch; [`Flow::SkipRestOfEpoch`] ends the epoch here.
    fn on_train_batch_start(&mut self, batch: &Sample, batch_idx: usize, ctx: &mut Context) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    fn on_train_batch_end(
        &mut self,
        outputs: &StepOutput,
        batch: &Sample,
        batch_idx: usize,
        ctx: &mut Context,
    ) -> Result<()> {
        Ok(())
    }
    fn on_validation_epoch_start(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_validation_epoch_end(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_test_epoch_start(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_test_epoch_end(&mut self, ctx: &mut Context) -> Result<()> {
        Ok(())
    }
    fn on_before_zero_grad(&mut self, optimizer: &dyn Optimizer) -> Result<()> {
        Ok(())
    }
    fn on_before_backward(&mut self, loss: &Tensor) -> Result<()> {
        Ok(())
    }
    fn on_after_backward(&mut self) -> Result<()> {
        Ok(())
    }
    fn on_before_optimizer_step(&mut self, optimizer: &dyn Optimizer) -> Result<()> {
        Ok(())
    }
    /// Adds to (or changes) a checkpoint being saved.
    fn on_save_checkpoint(&mut self, checkpoint: &mut Object) -> Result<()> {
        Ok(())
    }
    /// Reads what `on_save_checkpoint` added, when a checkpoint is loaded.
    fn on_load_checkpoint(&mut self, checkpoint: &Object) -> Result<()> {
        Ok(())
    }
}
