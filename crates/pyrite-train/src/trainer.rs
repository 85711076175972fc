//! [`Trainer`]: Lightning's training loop (`lightning.pytorch.Trainer`): `fit`, `validate`,
//! `test` and `predict` for a [`LightningModule`], with callbacks, loggers, checkpoints and
//! exact resume.
//!
//! Who owns what: the module owns the model and says what a step is; the Trainer owns the
//! optimizer and scheduler (from `configure_optimizers`), the loop counters, the logged
//! metrics, the callbacks and the loggers. Hooks get the Trainer and the module.
//!
//! A checkpoint (see [`Trainer::dump_checkpoint`]) holds Lightning's keys (`epoch`,
//! `global_step`, `state_dict`, `optimizer_states`, `lr_schedulers`, `callbacks`, `loops`,
//! `hyper_parameters`) and what exact resume needs besides: the global generator
//! (`rng_state`), the training DataLoader's position (`dataloader`), and where in the loop it
//! was taken (`loops.resume_point`: after a training batch, after a validation run, or at an
//! epoch's end). `fit` with a `ckpt_path` restores all of it and goes on from that point, so
//! the resumed run equals the uninterrupted one bit for bit on CPU.

use crate::accelerator::Accelerator;
use crate::callback::Callback;
use crate::callbacks::{ModelCheckpoint, ModelCheckpointOptions, ProgressBar, Timer, TimerOptions};
use crate::loggers::{Logger, TensorBoardLogger, TensorBoardLoggerOptions};
use crate::module::{Flow, Interval, LightningModule, OptimizerConfig, Scheduler, StepOutput};
use crate::oom::{Backward, MicroBatching, OomRecovery};
use crate::precision::Precision;
use crate::results::{check_loss, dict_of, infer_batch_size, Context, HookLevel, Metrics, Results, Stage};
use pyrite_amp::GradScaler;
use pyrite_core::{autograd, bail, err, Device, Error, Result, Tensor};
use pyrite_data::{DataLoader, DataLoaderOptions, DataLoaderState, Sample};
use pyrite_nn::StateDict;
use pyrite_optim::{Optimizer, OptimizerStateDict};
use pyrite_serialization::Object;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A number of batches: a fraction of the loader or a count (Lightning's `float | int`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    Fraction(f64),
    Batches(usize),
}

impl Limit {
    /// The number of batches of a loader of `len` batches.
    pub fn of(self, len: usize) -> usize {
        match self {
            Limit::Fraction(f) => ((len as f64) * f) as usize,
            Limit::Batches(n) => n.min(len),
        }
    }

    fn check(self, name: &str) -> Result<()> {
        if let Limit::Fraction(f) = self
            && !(0.0..=1.0).contains(&f)
        {
            bail!(Value, "`{name}` must be a fraction in [0, 1] or a number of batches, got {f}");
        }
        Ok(())
    }
}

impl From<f64> for Limit {
    fn from(f: f64) -> Limit {
        Limit::Fraction(f)
    }
}

impl From<usize> for Limit {
    fn from(n: usize) -> Limit {
        Limit::Batches(n)
    }
}

/// How gradients are clipped (`gradient_clip_algorithm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GradientClipAlgorithm {
    /// `clip_grad_norm_` to `gradient_clip_val` (default).
    #[default]
    Norm,
    /// `clip_grad_value_` to `gradient_clip_val`.
    Value,
}

/// Which checkpoint to start from (`ckpt_path`).
#[derive(Clone, Debug, PartialEq)]
pub enum CkptPath {
    /// `"last"`: the `last.ckpt` of the ModelCheckpoint callback (or its newest checkpoint).
    Last,
    /// `"best"`: the ModelCheckpoint's best checkpoint (for validate / test).
    Best,
    Path(PathBuf),
}

impl From<&str> for CkptPath {
    fn from(s: &str) -> CkptPath {
        match s {
            "last" => CkptPath::Last,
            "best" => CkptPath::Best,
            p => CkptPath::Path(p.into()),
        }
    }
}

impl From<&Path> for CkptPath {
    fn from(p: &Path) -> CkptPath {
        CkptPath::Path(p.to_path_buf())
    }
}

impl From<PathBuf> for CkptPath {
    fn from(p: PathBuf) -> CkptPath {
        CkptPath::Path(p)
    }
}

/// The Trainer's options, with Lightning's names and defaults.
pub struct TrainerOptions {
    /// Stop after this many epochs (default: 1000 when `max_steps` is not set either).
    pub max_epochs: Option<usize>,
    /// Train at least this many epochs, even if something asks to stop.
    pub min_epochs: Option<usize>,
    /// Stop after this many optimizer steps (default: no limit).
    pub max_steps: Option<usize>,
    pub min_steps: Option<usize>,
    /// Stop after this much training time (adds a [`Timer`]).
    pub max_time: Option<Duration>,
    /// Validate every this many training batches, or this fraction of an epoch (default 1.0:
    /// once per epoch).
    pub val_check_interval: Limit,
    /// Validate every this many epochs (default 1).
    pub check_val_every_n_epoch: usize,
    pub limit_train_batches: Limit,
    pub limit_val_batches: Limit,
    pub limit_test_batches: Limit,
    pub limit_predict_batches: Limit,
    /// Validation batches run before training to catch bugs early (default 2; -1 all).
    pub num_sanity_val_steps: i64,
    /// Accumulate gradients over this many batches per optimizer step (default 1); the loss
    /// is divided by it, as Lightning does.
    pub accumulate_grad_batches: usize,
    pub gradient_clip_val: Option<f64>,
    pub gradient_clip_algorithm: GradientClipAlgorithm,
    /// Accepted for Lightning's sake: Pyrite's CPU kernels are deterministic already.
    pub deterministic: bool,
    /// Run this many batches of each loop once, as a quick test (0: off; Lightning's `True`
    /// is 1): no sanity check, no checkpoints, no loggers.
    pub fast_dev_run: usize,
    /// Train and validate on this many batches (or fraction) again and again, without
    /// shuffling (0: off).
    pub overfit_batches: Limit,
    /// Send step metrics to the loggers every this many optimizer steps (default 50).
    pub log_every_n_steps: usize,
    /// Where logs and checkpoints go when nothing else says (default: the current folder).
    pub default_root_dir: PathBuf,
    pub enable_progress_bar: bool,
    /// Add a [`ModelCheckpoint`] when none is given (default true).
    pub enable_checkpointing: bool,
    /// A non-finite loss is an error naming the step (default false: a warning).
    pub detect_anomaly: bool,
    /// Draw the loss, metric and learning-rate curves to `curves.png` / `curves.svg` in the
    /// log folder at the end of `fit` (default true; Pyrite's addition).
    pub plot_curves: bool,
    /// Recover from an out-of-memory in a training step by splitting the batch into
    /// micro-batches (halving until they fit), accumulating their gradients and stepping the
    /// optimizer once per batch; the smaller size is kept for the next batches and logged as
    /// `micro_batch_size` (default `None`: an out-of-memory ends `fit`; Pyrite's addition, see
    /// [`crate::oom`] for what differs, BatchNorm's statistics above all).
    pub oom_recovery: Option<OomRecovery>,
    /// Lightning's `precision` (default `"32-true"`): `"bf16-mixed"` runs every step under
    /// bf16 autocast; see [`Precision`].
    pub precision: Precision,
    /// Lightning's `accelerator` (default `"auto"`: a CUDA GPU when one is available, else the
    /// CPU); see [`Accelerator`].
    pub accelerator: Accelerator,
    /// How fit spreads over processes (Lightning's `strategy`: `Auto`, or `Strategy::ddp(n)`).
    pub strategy: crate::strategy::Strategy,
    pub callbacks: Vec<Box<dyn Callback>>,
    /// The loggers; `None` (default) is Lightning's `logger=True`: a TensorBoard logger
    /// under `default_root_dir/lightning_logs`; `Some(vec![])` logs nowhere.
    pub logger: Option<Vec<Box<dyn Logger>>>,
}

impl Default for TrainerOptions {
    fn default() -> Self {
        TrainerOptions {
            max_epochs: None,
            min_epochs: None,
            max_steps: None,
            min_steps: None,
            max_time: None,
            val_check_interval: Limit::Fraction(1.0),
            check_val_every_n_epoch: 1,
            limit_train_batches: Limit::Fraction(1.0),
            limit_val_batches: Limit::Fraction(1.0),
            limit_test_batches: Limit::Fraction(1.0),
            limit_predict_batches: Limit::Fraction(1.0),
            num_sanity_val_steps: 2,
            accumulate_grad_batches: 1,
            gradient_clip_val: None,
            gradient_clip_algorithm: GradientClipAlgorithm::Norm,
            deterministic: false,
            fast_dev_run: 0,
            overfit_batches: Limit::Batches(0),
            log_every_n_steps: 50,
            default_root_dir: PathBuf::from("."),
            enable_progress_bar: true,
            enable_checkpointing: true,
            detect_anomaly: false,
            plot_curves: true,
            oom_recovery: None,
            precision: Precision::F32True,
            accelerator: Accelerator::Auto,
            strategy: Default::default(),
            callbacks: vec![],
            logger: None,
        }
    }
}

/// `fit`'s keyword arguments.
#[derive(Clone, Default)]
pub struct FitOptions<'a> {
    pub val_dataloaders: Option<&'a DataLoader>,
    /// Resume from this checkpoint (`"last"` or a path).
    pub ckpt_path: Option<CkptPath>,
}

/// `validate`'s / `test`'s / `predict`'s keyword arguments.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// Load these weights first (`"best"`, `"last"` or a path); default: the module as it is.
    pub ckpt_path: Option<CkptPath>,
    /// Print the results (default true).
    pub verbose: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions { ckpt_path: None, verbose: true }
    }
}

/// Where in the loop a checkpoint was taken, so that resuming goes on from there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum ResumePoint {
    /// Outside the epoch loop: resume starts epoch `current_epoch`.
    #[default]
    Outside,
    /// In `on_train_batch_end` of batch `batch_idx`: validation for it may be due.
    BatchEnd,
    /// In `on_validation_end` after batch `batch_idx`.
    ValidationEnd,
    /// In `on_train_epoch_end`.
    EpochEnd,
}

impl ResumePoint {
    fn as_str(self) -> &'static str {
        match self {
            ResumePoint::Outside => "outside",
            ResumePoint::BatchEnd => "batch_end",
            ResumePoint::ValidationEnd => "validation_end",
            ResumePoint::EpochEnd => "epoch_end",
        }
    }

    fn parse(s: &str) -> Result<ResumePoint> {
        Ok(match s {
            "outside" => ResumePoint::Outside,
            "batch_end" => ResumePoint::BatchEnd,
            "validation_end" => ResumePoint::ValidationEnd,
            "epoch_end" => ResumePoint::EpochEnd,
            other => bail!(Value, "checkpoint: unknown resume point '{other}' in `loops`"),
        })
    }
}

/// Where the epoch loop starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EpochStart {
    Fresh,
    /// After `on_train_batch_end` of the batch `batch_idx` (validation may be due).
    AfterBatch,
    /// After validation following batch `batch_idx`.
    AfterValidation,
    /// In `on_train_epoch_end`, after the callbacks ran.
    AtEpochEnd,
}

/// Lightning's Trainer.
///
/// ```no_run
/// # use pyrite::train::{Trainer, TrainerOptions, FitOptions, LightningModule};
/// # fn run(model: &mut dyn LightningModule, train: &pyrite::data::DataLoader, val: &pyrite::data::DataLoader) -> pyrite::Result<()> {
/// let mut trainer = Trainer::new(TrainerOptions { max_epochs: Some(10), ..Default::default() })?;
/// trainer.fit(model, train, FitOptions { val_dataloaders: Some(val), ..Default::default() })?;
/// # Ok(()) }
/// ```
pub struct Trainer {
    settings: TrainerOptions,
    callbacks: Vec<Option<Box<dyn Callback>>>,
    loggers: Vec<Box<dyn Logger>>,
    logger_choice_default: bool,
    ctx: Context,
    optim: Option<OptimizerConfig>,
    num_training_batches: usize,
    num_val_batches: usize,
    num_sanity_val_batches: usize,
    val_check_batch: usize,
    batch_idx: usize,
    batches_that_stepped: usize,
    accumulate_grad_batches: usize,
    is_last_batch: bool,
    sanity_checking: bool,
    callback_metrics: BTreeMap<String, f64>,
    logged_metrics: BTreeMap<String, f64>,
    progress_bar_metrics: BTreeMap<String, f64>,
    history: BTreeMap<String, Vec<(u64, f64)>>,
    train_loader_state: Option<DataLoaderState>,
    resume_point: ResumePoint,
    warned_nonfinite: bool,
    eval_step_count: usize,
    setup_done: bool,
    val_has_run: bool,
    /// Epochs a callback adds to `max_epochs` (StochasticWeightAveraging's BatchNorm epoch).
    pub(crate) extra_epochs: usize,
    /// Run the training steps without backward, optimizer or scheduler steps (the forward
    /// passes of StochasticWeightAveraging's BatchNorm epoch).
    pub(crate) skip_backward: bool,
    /// Micro-batch recovery (`oom_recovery`), during `fit`.
    micro: Option<MicroBatching>,
    /// The `ddp` strategy's state, during and after `fit`.
    dist: Option<crate::strategy::Distributed>,
    /// Where the module and the batches live (from `accelerator`).
    device: Device,
    /// `"16-mixed"` on a GPU: the loss scaler (Lightning's `MixedPrecision.scaler`).
    scaler: Option<GradScaler>,
}

type Hook<'a> = dyn FnMut(&mut dyn Callback, &mut Trainer, &mut dyn LightningModule) -> Result<()> + 'a;

/// Which callbacks a hook runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    All,
    NotMonitoring,
    Monitoring,
}

impl Trainer {
    /// A Trainer; checks the options.
    pub fn new(mut options: TrainerOptions) -> Result<Trainer> {
        let device = match (&options.strategy, options.accelerator) {
            // The ddp strategy reduces gradients over MPI, from host memory.
            (crate::strategy::Strategy::Ddp(_), Accelerator::Auto) => Device::Cpu,
            (crate::strategy::Strategy::Ddp(_), Accelerator::Cuda) => bail!(
                Value,
                "strategy ddp with accelerator cuda needs the NCCL backend, which Pyrite does not have yet: use accelerator cpu (its gradients are reduced over MPI)"
            ),
            (_, a) => a.device()?,
        };
        let scaler = if device.is_cuda() && options.precision == Precision::F16Mixed {
            Some(GradScaler::new(Default::default())?)
        } else {
            None
        };
        if !device.is_cuda() {
            options.precision = options.precision.on_cpu();
        }
        for (name, l) in [
            ("limit_train_batches", options.limit_train_batches),
            ("limit_val_batches", options.limit_val_batches),
            ("limit_test_batches", options.limit_test_batches),
            ("limit_predict_batches", options.limit_predict_batches),
            ("val_check_interval", options.val_check_interval),
            ("overfit_batches", options.overfit_batches),
        ] {
            l.check(name)?;
        }
        if options.accumulate_grad_batches == 0 {
            bail!(Value, "`accumulate_grad_batches` must be at least 1, got 0");
        }
        if options.check_val_every_n_epoch == 0 {
            bail!(Value, "`check_val_every_n_epoch` must be at least 1, got 0");
        }
        if options.num_sanity_val_steps < -1 {
            bail!(
                Value,
                "`num_sanity_val_steps` must be -1 (all), 0 or a number of batches, got {}",
                options.num_sanity_val_steps
            );
        }
        if let Some(v) = options.gradient_clip_val
            && (v.is_nan() || v < 0.0)
        {
            bail!(Value, "`gradient_clip_val` must be a non-negative number, got {v}");
        }
        if let Some(r) = &options.oom_recovery {
            r.check()?;
        }
        if let Limit::Fraction(f) = options.val_check_interval
            && f == 0.0
        {
            bail!(Value, "`val_check_interval` must be greater than 0");
        }
        let mut callbacks = std::mem::take(&mut options.callbacks);
        if let Some(d) = options.max_time {
            callbacks.push(Box::new(Timer::new(TimerOptions { duration: Some(d), ..Default::default() })));
        }
        let loggers = options.logger.take();
        let logger_choice_default = loggers.is_none();
        let mut settings = options;
        if settings.fast_dev_run > 0 {
            let n = settings.fast_dev_run;
            settings.limit_train_batches = Limit::Batches(n);
            settings.limit_val_batches = Limit::Batches(n);
            settings.limit_test_batches = Limit::Batches(n);
            settings.limit_predict_batches = Limit::Batches(n);
            settings.max_steps = Some(n);
            settings.max_epochs = Some(1);
            settings.num_sanity_val_steps = 0;
            settings.val_check_interval = Limit::Fraction(1.0);
            settings.check_val_every_n_epoch = 1;
            settings.plot_curves = false;
        }
        let over = settings.overfit_batches;
        if over != Limit::Batches(0) && over != Limit::Fraction(0.0) {
            settings.limit_train_batches = over;
            settings.limit_val_batches = over;
        }
        let loggers = if settings.fast_dev_run > 0 { vec![] } else { loggers.unwrap_or_default() };
        let mut trainer = Trainer {
            accumulate_grad_batches: settings.accumulate_grad_batches,
            settings,
            callbacks: vec![],
            loggers,
            logger_choice_default,
            ctx: Context::default(),
            optim: None,
            num_training_batches: 0,
            num_val_batches: 0,
            num_sanity_val_batches: 0,
            val_check_batch: 1,
            batch_idx: 0,
            batches_that_stepped: 0,
            is_last_batch: false,
            sanity_checking: false,
            callback_metrics: BTreeMap::new(),
            logged_metrics: BTreeMap::new(),
            progress_bar_metrics: BTreeMap::new(),
            history: BTreeMap::new(),
            train_loader_state: None,
            resume_point: ResumePoint::Outside,
            warned_nonfinite: false,
            eval_step_count: 0,
            setup_done: false,
            val_has_run: false,
            extra_epochs: 0,
            skip_backward: false,
            micro: None,
            dist: None,
            device,
            scaler,
        };
        trainer.set_callbacks(callbacks);
        Ok(trainer)
    }

    /// Puts the callbacks in Lightning's order: checkpoint callbacks last.
    fn set_callbacks(&mut self, callbacks: Vec<Box<dyn Callback>>) {
        let (mut rest, ckpts): (Vec<_>, Vec<_>) =
            callbacks.into_iter().partition(|c| !c.as_any().is::<ModelCheckpoint>());
        rest.extend(ckpts);
        self.callbacks = rest.into_iter().map(Some).collect();
    }

    /// Adds the default progress bar, checkpoint callback and logger where the options ask.
    fn setup_defaults(&mut self) -> Result<()> {
        if self.setup_done {
            return Ok(());
        }
        self.setup_done = true;
        if self.logger_choice_default && self.settings.fast_dev_run == 0 {
            // Lightning's default when tensorboard is installed, which it always is here.
            self.loggers.push(Box::new(TensorBoardLogger::new(
                &self.settings.default_root_dir,
                TensorBoardLoggerOptions::default(),
            )?));
        }
        let mut extra: Vec<Box<dyn Callback>> = vec![];
        if self.settings.enable_progress_bar && self.callback::<ProgressBar>().is_none() {
            extra.push(Box::new(ProgressBar::default()));
        }
        if self.settings.enable_checkpointing && self.callback::<ModelCheckpoint>().is_none() {
            extra.push(Box::new(ModelCheckpoint::new(ModelCheckpointOptions::default())?));
        }
        if !extra.is_empty() {
            let mut all: Vec<Box<dyn Callback>> =
                self.callbacks.drain(..).map(|c| c.expect("no hook is running")).collect();
            all.extend(extra);
            self.set_callbacks(all);
        }
        Ok(())
    }

    // ----- what callbacks and hooks see -----

    /// The options the Trainer was built with (without the callbacks and loggers, which it
    /// holds itself).
    pub fn settings(&self) -> &TrainerOptions {
        &self.settings
    }

    /// Where the module and the batches live during a run (Lightning's
    /// `trainer.strategy.root_device`): the CPU, or the GPU the accelerator chose.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The loss scaler of `"16-mixed"` on a GPU (Lightning's `trainer.precision_plugin.scaler`);
    /// `None` otherwise.
    pub fn scaler(&self) -> Option<&GradScaler> {
        self.scaler.as_ref()
    }

    /// The epoch, counted from 0 (after `fit`: the number of epochs run).
    pub fn current_epoch(&self) -> usize {
        self.ctx.current_epoch
    }

    /// Optimizer steps taken.
    pub fn global_step(&self) -> usize {
        self.ctx.global_step
    }

    /// The index of the current training batch in its epoch.
    pub fn batch_idx(&self) -> usize {
        self.batch_idx
    }

    /// Training batches per epoch (after `limit_train_batches`).
    pub fn num_training_batches(&self) -> usize {
        self.num_training_batches
    }

    /// Validation batches per validation run (after `limit_val_batches`); while the sanity
    /// check runs, its batches.
    pub fn num_val_batches(&self) -> usize {
        if self.sanity_checking {
            self.num_sanity_val_batches
        } else {
            self.num_val_batches
        }
    }

    /// Whether the current batch is the epoch's last.
    pub fn is_last_batch(&self) -> bool {
        self.is_last_batch
    }

    /// The running stage.
    pub fn stage(&self) -> Stage {
        self.ctx.stage
    }

    pub fn sanity_checking(&self) -> bool {
        self.sanity_checking
    }

    /// The latest value of every logged metric, by the names callbacks monitor.
    pub fn callback_metrics(&self) -> &BTreeMap<String, f64> {
        &self.callback_metrics
    }

    /// The metrics last sent to the loggers.
    pub fn logged_metrics(&self) -> &BTreeMap<String, f64> {
        &self.logged_metrics
    }

    /// The metrics shown on the progress bar.
    pub fn progress_bar_metrics(&self) -> &BTreeMap<String, f64> {
        &self.progress_bar_metrics
    }

    /// Everything sent to the loggers so far, by name: `(step, value)` points (what the curves
    /// are drawn from).
    pub fn history(&self) -> &BTreeMap<String, Vec<(u64, f64)>> {
        &self.history
    }

    /// Whether training will stop at the next chance (`trainer.should_stop`).
    pub fn should_stop(&self) -> bool {
        self.ctx.should_stop
    }

    /// Asks training to stop (`trainer.should_stop = True`); `min_epochs` / `min_steps` are
    /// still honoured.
    pub fn set_should_stop(&mut self, stop: bool) {
        self.ctx.should_stop = stop;
    }

    /// Whether a validation run (not the sanity check) has finished in this `fit`.
    pub fn validation_has_run(&self) -> bool {
        self.val_has_run
    }

    /// Optimizer steps counted for logging (Lightning's `_batches_that_stepped`): the step
    /// loggers are given.
    pub fn batches_that_stepped(&self) -> usize {
        self.batches_that_stepped
    }

    /// Whether step metrics go to the loggers at this step (every `log_every_n_steps`).
    pub fn should_update_logs(&self) -> bool {
        let n = self.settings.log_every_n_steps;
        n > 0 && ((self.batches_that_stepped + 1).is_multiple_of(n) || self.ctx.should_stop)
    }

    /// The scheduler's interval and name, when there is one.
    pub fn lr_scheduler_info(&self) -> Option<(Interval, Option<String>)> {
        let s = self.optim.as_ref()?.lr_scheduler.as_ref()?;
        Some((s.interval, s.name.clone()))
    }

    /// Gradient accumulation in effect.
    pub fn accumulate_grad_batches(&self) -> usize {
        self.accumulate_grad_batches
    }

    /// Changes gradient accumulation (what `GradientAccumulationScheduler` does).
    pub fn set_accumulate_grad_batches(&mut self, n: usize) -> Result<()> {
        if n == 0 {
            bail!(Value, "accumulate_grad_batches must be at least 1");
        }
        self.accumulate_grad_batches = n;
        Ok(())
    }

    /// The optimizer (during `fit`).
    pub fn optimizer(&self) -> Option<&dyn Optimizer> {
        self.optim.as_ref().map(|o| o.optimizer.as_ref() as &dyn Optimizer)
    }

    /// The optimizer, to change (during `fit`).
    pub fn optimizer_mut(&mut self) -> Option<&mut Box<dyn Optimizer>> {
        self.optim.as_mut().map(|o| &mut o.optimizer)
    }

    /// The optimizer and its scheduler config (during `fit`).
    pub fn optimizer_config_mut(&mut self) -> Option<&mut OptimizerConfig> {
        self.optim.as_mut()
    }

    pub fn loggers(&self) -> &[Box<dyn Logger>] {
        &self.loggers
    }

    /// The first logger's folder, else `default_root_dir` (`trainer.log_dir`).
    pub fn log_dir(&self) -> PathBuf {
        match self.loggers.first() {
            Some(l) => l.log_dir(),
            None => self.settings.default_root_dir.clone(),
        }
    }

    /// The first callback of type `T` (e.g. `trainer.callback::<ModelCheckpoint>()`); `None`
    /// for the callback whose hook is running.
    pub fn callback<T: Callback>(&self) -> Option<&T> {
        self.callbacks.iter().flatten().find_map(|c| c.as_any().downcast_ref::<T>())
    }

    /// The first callback of type `T`, to change.
    pub fn callback_mut<T: Callback>(&mut self) -> Option<&mut T> {
        self.callbacks.iter_mut().flatten().find_map(|c| c.as_any_mut().downcast_mut::<T>())
    }

    /// `trainer.checkpoint_callback`.
    pub fn checkpoint_callback(&self) -> Option<&ModelCheckpoint> {
        self.callback::<ModelCheckpoint>()
    }

    /// Sends metrics to every logger at `step` (and records them for the curves).
    pub fn log_metrics(&mut self, metrics: &BTreeMap<String, f64>, step: u64) -> Result<()> {
        if metrics.is_empty() {
            return Ok(());
        }
        for (k, v) in metrics {
            self.logged_metrics.insert(k.clone(), *v);
            self.history.entry(k.clone()).or_default().push((step, *v));
        }
        for l in &mut self.loggers {
            l.log_metrics(metrics, step)?;
        }
        Ok(())
    }

    /// Logs metrics as Lightning's logger connector does: with the epoch, at the step count.
    fn log_with_epoch(&mut self, mut metrics: BTreeMap<String, f64>) -> Result<()> {
        if metrics.is_empty() {
            return Ok(());
        }
        metrics.entry("epoch".into()).or_insert(self.ctx.current_epoch as f64);
        let step = self.batches_that_stepped as u64;
        self.log_metrics(&metrics, step)
    }

    /// With the `ddp` strategy, epoch-level values averaged over the ranks.
    fn sync_metrics(&self, m: Metrics) -> Result<Metrics> {
        match &self.dist {
            Some(d) => d.sync_metrics(m),
            None => Ok(m),
        }
    }

    /// This process's rank in a `ddp` fit (0 otherwise): Lightning's `global_rank`.
    pub fn global_rank(&self) -> usize {
        self.dist.as_ref().map_or(0, |d| d.rank)
    }

    /// The number of processes of a `ddp` fit (1 otherwise).
    pub fn world_size(&self) -> usize {
        self.dist.as_ref().map_or(1, |d| d.world)
    }

    /// Whether this is rank 0 (the one that logs and checkpoints).
    pub fn is_global_zero(&self) -> bool {
        self.global_rank() == 0
    }

    fn take_metrics(&mut self, m: Metrics) -> BTreeMap<String, f64> {
        self.progress_bar_metrics.extend(m.pbar);
        self.callback_metrics.extend(m.callback);
        m.log
    }

    // ----- hooks -----

    fn call_callbacks(
        &mut self,
        module: &mut dyn LightningModule,
        which: Which,
        hook: &mut Hook<'_>,
    ) -> Result<()> {
        for i in 0..self.callbacks.len() {
            let Some(mut cb) = self.callbacks[i].take() else { continue };
            let run = match which {
                Which::All => true,
                Which::Monitoring => cb.is_monitoring(),
                Which::NotMonitoring => !cb.is_monitoring(),
            };
            let r = if run { hook(cb.as_mut(), self, module) } else { Ok(()) };
            self.callbacks[i] = Some(cb);
            r?;
        }
        Ok(())
    }

    fn with_ctx<T>(
        &mut self,
        module: &mut dyn LightningModule,
        level: HookLevel,
        f: impl FnOnce(&mut dyn LightningModule, &mut Context) -> Result<T>,
    ) -> Result<T> {
        self.ctx.level = level;
        f(module, &mut self.ctx)
    }

    /// Runs a `*_step` on `batch` in the precision's context: under autocast for a mixed
    /// precision, on the converted batch for a `*-true` one.
    fn run_step<T>(
        &mut self,
        module: &mut dyn LightningModule,
        batch: &Sample,
        f: impl FnOnce(&mut dyn LightningModule, &Sample, &mut Context) -> Result<T>,
    ) -> Result<T> {
        let precision = self.settings.precision;
        let moved = match self.device {
            Device::Cpu => None,
            // Non-blocking, as Lightning's `batch_to_device`: a pinned batch's copy overlaps
            // with what the host does next.
            d => Some(batch.map_tensors(&mut |t| {
                t.to(pyrite_core::ToOptions { device: Some(d), non_blocking: true, ..Default::default() })
            })?),
        };
        let batch = moved.as_ref().unwrap_or(batch);
        let converted = precision.convert_input(batch)?;
        let batch = converted.as_ref().unwrap_or(batch);
        let _amp = precision.forward_context(self.device)?;
        self.with_ctx(module, HookLevel::Step, |m, ctx| f(m, batch, ctx))
    }

    /// Moves the module's parameters and buffers to the accelerator's device, and converts
    /// its floating-point ones for a `*-true` precision other than f32 (each once: a module
    /// already there is left as it is).
    fn convert_module(&mut self, module: &mut dyn LightningModule) -> Result<()> {
        self.move_module(module, self.device)?;
        let Some(dtype) = self.settings.precision.module_dtype() else { return Ok(()) };
        let params = module.module().parameters();
        if params.iter().all(|p| !p.dtype().is_floating_point() || p.dtype() == dtype) {
            return Ok(());
        }
        let precision = self.settings.precision;
        let Some(m) = module.module_mut() else {
            bail!(
                Value,
                "precision={precision:?} converts the module's parameters to {dtype}: implement LightningModule::module_mut to hand the Trainer the module",
                precision = precision.as_str()
            );
        };
        pyrite_nn::module::convert_floating(m, dtype)
    }

    /// Moves the module's parameters and buffers to `device` unless they are all there
    /// (Lightning's `model_to_device`, and `teardown`'s move back to the CPU).
    fn move_module(&mut self, module: &mut dyn LightningModule, device: Device) -> Result<()> {
        let m = module.module();
        if m.parameters().iter().chain(&m.buffers()).all(|t| t.device() == device) {
            return Ok(());
        }
        let Some(m) = module.module_mut() else {
            bail!(
                Value,
                "accelerator {} moves the module's parameters to {device}: implement LightningModule::module_mut to hand the Trainer the module, or move it there before calling the Trainer",
                self.settings.accelerator
            );
        };
        pyrite_nn::module::move_to_device(m, device)
    }

    /// The end of `fit`, `validate`, `test` and `predict` on a GPU: the module goes back to
    /// the CPU (Lightning's `Strategy.teardown`), and an error of the run comes first.
    fn teardown_module<T>(&mut self, module: &mut dyn LightningModule, result: Result<T>) -> Result<T> {
        if !self.device.is_cuda() {
            return result;
        }
        let moved = self.move_module(module, Device::Cpu);
        let out = result?;
        moved?;
        Ok(out)
    }

    // ----- fit -----

    /// Trains `module` on `train_dataloaders` (and validates on `val_dataloaders`), as
    /// Lightning's `trainer.fit`; with `ckpt_path`, resumes exactly where that checkpoint was
    /// taken.
    pub fn fit(
        &mut self,
        module: &mut dyn LightningModule,
        train_dataloaders: &DataLoader,
        options: FitOptions<'_>,
    ) -> Result<()> {
        let result = self.fit_inner(module, train_dataloaders, &options);
        let result = self.teardown_module(module, result);
        if let Err(e) = &result {
            let e2 = Error::new(e.kind(), e.to_string());
            let _ = self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_exception(t, m, &e2));
            for l in &mut self.loggers {
                let _ = l.finalize("failed");
            }
        }
        self.ctx.stage = Stage::Train;
        self.sanity_checking = false;
        result
    }

    fn fit_inner(
        &mut self,
        module: &mut dyn LightningModule,
        train: &DataLoader,
        options: &FitOptions<'_>,
    ) -> Result<()> {
        self.setup_defaults()?;
        self.ctx = Context::default();
        self.batches_that_stepped = 0;
        self.callback_metrics.clear();
        self.logged_metrics.clear();
        self.progress_bar_metrics.clear();
        self.history.clear();
        self.val_has_run = false;
        self.extra_epochs = 0;
        self.skip_backward = false;
        self.accumulate_grad_batches = self.settings.accumulate_grad_batches;

        let distributed_loader;
        let train = match crate::strategy::setup(&self.settings.strategy, module.module(), train)? {
            Some((d, loader)) => {
                if self.settings.oom_recovery.is_some() {
                    bail!(Value, "oom_recovery is not supported with strategy ddp yet");
                }
                if d.rank != 0 {
                    // rank 0 alone logs, shows progress and writes checkpoints
                    self.loggers.clear();
                    self.callbacks.retain(|c| {
                        c.as_ref().is_none_or(|c| {
                            !c.as_any().is::<ProgressBar>() && !c.as_any().is::<ModelCheckpoint>()
                        })
                    });
                }
                self.dist = Some(d);
                distributed_loader = loader;
                &distributed_loader
            }
            None => {
                self.dist = None;
                train
            }
        };
        let overfit = self.settings.overfit_batches != Limit::Batches(0)
            && self.settings.overfit_batches != Limit::Fraction(0.0);
        let sequential;
        let train = if overfit && (train.options().shuffle || train.options().sampler.is_some()) {
            eprintln!("warning: you requested to overfit but enabled training dataloader shuffling: it is turned off for you");
            sequential = DataLoader::new(
                train.dataset().clone(),
                DataLoaderOptions { shuffle: false, sampler: None, ..train.options().clone() },
            )?;
            &sequential
        } else {
            train
        };
        let val = options.val_dataloaders;
        self.count_batches(train, val)?;

        self.ctx.stage = Stage::Train;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.setup(t, m, Stage::Train))?;
        self.convert_module(module)?;
        let optim = module.configure_optimizers()?;
        self.micro = match &self.settings.oom_recovery {
            Some(o) => {
                let params = optim.optimizer.param_groups().iter().flat_map(|g| g.params.clone()).collect();
                Some(MicroBatching::new(params, o.clone())?)
            }
            None => None,
        };
        self.optim = Some(optim);

        let resume = match &options.ckpt_path {
            Some(p) => match self.resolve_ckpt_path(p)? {
                Some(path) => Some(self.restore(&path, module, true)?),
                None => None,
            },
            None => None,
        };
        if resume.is_none() {
            let hp = module.hparams();
            for l in &mut self.loggers {
                l.log_hyperparams(&hp)?;
            }
        }

        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_fit_start(t, m))?;
        self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_fit_start(ctx))?;
        let rebuilt;
        let train = match self.run_batch_size_finders(module, train, resume.is_some())? {
            Some(batch_size) => {
                rebuilt = train.with_batch_size(batch_size)?;
                self.count_batches(&rebuilt, val)?;
                &rebuilt
            }
            None => train,
        };
        if self.callback::<crate::callbacks::BatchSizeFinder>().is_some_and(|f| f.early_exit) {
            // The Tuner's run ends here (Lightning's `_TunerExitException`).
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.teardown(t, m, Stage::Train))?;
            for l in &mut self.loggers {
                l.finalize("success")?;
            }
            return Ok(());
        }
        self.run_lr_finders(module, train)?;

        if resume.is_none()
            && self.num_sanity_val_batches > 0
            && let Some(v) = val
        {
            self.run_validation(module, v, true)?;
        }

        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_train_start(t, m))?;
        self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_train_start(ctx))?;

        let mut start = EpochStart::Fresh;
        if let Some((point, rng, loader)) = resume {
            if let Some(state) = loader {
                train.load_state_dict(&state)?;
            }
            pyrite_core::set_rng_state(&rng)?;
            start = match point {
                ResumePoint::Outside => EpochStart::Fresh,
                ResumePoint::BatchEnd => EpochStart::AfterBatch,
                ResumePoint::ValidationEnd => EpochStart::AfterValidation,
                ResumePoint::EpochEnd => EpochStart::AtEpochEnd,
            };
        }
        while !self.fit_done() {
            self.run_epoch(module, train, val, start)?;
            start = EpochStart::Fresh;
        }
        self.resume_point = ResumePoint::Outside;

        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_train_end(t, m))?;
        self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_train_end(ctx))?;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_fit_end(t, m))?;
        self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_fit_end(ctx))?;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.teardown(t, m, Stage::Train))?;
        for l in &mut self.loggers {
            l.finalize("success")?;
        }
        if self.settings.plot_curves && !self.history.is_empty() && self.is_global_zero() {
            self.draw_curves()?;
        }
        Ok(())
    }

    /// Batches per epoch and when validation runs, for these loaders.
    fn count_batches(&mut self, train: &DataLoader, val: Option<&DataLoader>) -> Result<()> {
        self.num_training_batches = self.settings.limit_train_batches.of(train.len());
        if self.num_training_batches == 0 {
            bail!(
                Value,
                "the training dataloader has no batches to train on (len {}, limit_train_batches {:?})",
                train.len(),
                self.settings.limit_train_batches
            );
        }
        self.num_val_batches = val.map_or(0, |v| self.settings.limit_val_batches.of(v.len()));
        self.num_sanity_val_batches = match self.settings.num_sanity_val_steps {
            -1 => self.num_val_batches,
            n => (n as usize).min(self.num_val_batches),
        };
        self.val_check_batch = match self.settings.val_check_interval {
            Limit::Fraction(f) => ((self.num_training_batches as f64 * f) as usize).max(1),
            Limit::Batches(n) => {
                if n > self.num_training_batches {
                    bail!(
                        Value,
                        "`val_check_interval` ({n}) must be less than or equal to the number of the training batches ({})",
                        self.num_training_batches
                    );
                }
                n.max(1)
            }
        };
        Ok(())
    }

    /// Draws the logged history to `curves.png` / `curves.svg` in the log folder.
    fn draw_curves(&self) -> Result<()> {
        let dir = self.log_dir();
        crate::loggers::create_dir(&dir, "Trainer")?;
        let drawn: BTreeMap<String, Vec<(u64, f64)>> = self
            .history
            .iter()
            .filter(|(k, _)| k.as_str() != "epoch")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if drawn.is_empty() {
            return Ok(());
        }
        crate::plot::plot_curves(&drawn, &dir).map(|_| ())
    }

    fn can_stop_early(&self) -> bool {
        let epochs = self.settings.min_epochs.is_none_or(|m| self.ctx.current_epoch >= m);
        let steps = self.settings.min_steps.is_none_or(|m| self.ctx.global_step >= m);
        epochs && steps
    }

    fn max_steps_reached(&self) -> bool {
        self.settings.max_steps.is_some_and(|m| self.ctx.global_step >= m)
    }

    /// The epoch limit in effect (`trainer.max_epochs`): `max_epochs`, or 1000 when neither it
    /// nor `max_steps` nor `max_time` is set; `None`: no limit.
    pub fn max_epochs(&self) -> Option<usize> {
        match (self.settings.max_epochs, self.settings.max_steps, self.settings.max_time) {
            (Some(e), _, _) => Some(e),
            (None, None, None) => Some(1000),
            _ => None,
        }
    }

    fn fit_done(&mut self) -> bool {
        let max_epochs = self.max_epochs();
        if max_epochs == Some(0) || self.max_steps_reached() {
            return true;
        }
        if max_epochs.is_some_and(|m| self.ctx.current_epoch >= m + self.extra_epochs) {
            return true;
        }
        if self.ctx.should_stop {
            if self.can_stop_early() {
                return true;
            }
            self.ctx.should_stop = false;
        }
        false
    }

    fn should_check_val(&self, val: Option<&DataLoader>) -> bool {
        if val.is_none() || self.num_val_batches == 0 {
            return false;
        }
        if !(self.ctx.current_epoch + 1).is_multiple_of(self.settings.check_val_every_n_epoch) {
            return false;
        }
        if self.ctx.should_stop && self.can_stop_early() {
            return true;
        }
        if self.settings.val_check_interval == Limit::Fraction(1.0) {
            return self.is_last_batch;
        }
        (self.batch_idx + 1).is_multiple_of(self.val_check_batch)
    }

    fn run_epoch(
        &mut self,
        module: &mut dyn LightningModule,
        train: &DataLoader,
        val: Option<&DataLoader>,
        start: EpochStart,
    ) -> Result<()> {
        let resumed = start != EpochStart::Fresh;
        let mut first = 0;
        if let Some(d) = &self.dist {
            d.sampler.set_epoch(self.ctx.current_epoch as u64);
        }
        if !resumed {
            self.resume_point = ResumePoint::Outside;
            self.ctx.train_results.reset();
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_train_epoch_start(t, m))?;
            self.ctx.stage = Stage::Train;
            self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_train_epoch_start(ctx))?;
        } else {
            first = self.batch_idx + 1;
        }
        module.module().train();
        let mut skip_rest = false;
        if start != EpochStart::AtEpochEnd {
            // A resumed loader continues its epoch only if it was saved mid-epoch; one saved
            // after its last batch starts the next epoch on the next `iter()`.
            let mid = self.train_loader_state.as_ref().is_none_or(|s| s.mid_epoch);
            let mut it = if !resumed || mid { Some(train.iter()?) } else { None };
            if resumed {
                let validated = start == EpochStart::AfterValidation;
                if self.after_batch(module, val, validated)? {
                    skip_rest = true;
                }
            }
            let mut idx = first;
            while !skip_rest && idx < self.num_training_batches {
                let Some(batch) = it.as_mut().and_then(|it| it.next()) else { break };
                let batch = batch?;
                self.batch_idx = idx;
                self.is_last_batch = idx + 1 == self.num_training_batches;
                self.train_loader_state = Some(train.state_dict());
                if self.train_batch(module, &batch, idx)? == Flow::SkipRestOfEpoch {
                    break;
                }
                if self.after_batch(module, val, false)? {
                    break;
                }
                idx += 1;
            }
            drop(it);
            self.train_loader_state = Some(train.state_dict());
            // Monitoring callbacks and the module's epoch-end hook.
            self.ctx.stage = Stage::Train;
            self.ctx.level = HookLevel::Epoch;
            self.resume_point = ResumePoint::EpochEnd;
            self.call_callbacks(module, Which::NotMonitoring, &mut |c, t, m| c.on_train_epoch_end(t, m))?;
            self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_train_epoch_end(ctx))?;
            let epoch_metrics = self.sync_metrics(self.ctx.train_results.epoch_metrics())?;
            let _ = self.take_metrics(epoch_metrics);
            self.call_callbacks(module, Which::Monitoring, &mut |c, t, m| c.on_train_epoch_end(t, m))?;
        } else if self.train_loader_state.as_ref().is_some_and(|s| s.mid_epoch) {
            // The epoch ended early (limit_train_batches): close it as the first run did.
            drop(train.iter()?);
        }
        let epoch_metrics = self.sync_metrics(self.ctx.train_results.epoch_metrics())?;
        let log = self.take_metrics(epoch_metrics);
        if self.is_last_batch {
            // Plateau schedulers step at the end of a complete epoch, after its metrics.
            self.step_schedulers(Interval::Epoch, true)?;
        }
        for l in &mut self.loggers {
            l.log_module(module.module(), self.ctx.global_step as u64)?;
        }
        self.batches_that_stepped = self.batches_that_stepped.saturating_sub(1);
        let r = self.log_with_epoch(log);
        self.batches_that_stepped += 1;
        r?;
        self.ctx.train_results.reset();
        self.resume_point = ResumePoint::Outside;
        self.ctx.current_epoch += 1;
        self.batch_idx = 0;
        Ok(())
    }

    /// One training batch: hooks, step, backward, optimizer, schedulers, `on_train_batch_end`.
    fn train_batch(&mut self, module: &mut dyn LightningModule, batch: &Sample, idx: usize) -> Result<Flow> {
        self.ctx.stage = Stage::Train;
        self.ctx.batch_size = infer_batch_size(batch);
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_train_batch_start(t, m, batch, idx))?;
        if self.with_ctx(module, HookLevel::Step, |m, ctx| m.on_train_batch_start(batch, idx, ctx))?
            == Flow::SkipRestOfEpoch
        {
            return Ok(Flow::SkipRestOfEpoch);
        }
        let (epoch, step) = (self.ctx.current_epoch, self.ctx.global_step);
        // With `oom_recovery`, the step and its backward run together, whole or in
        // micro-batches.
        let recovering = self.micro.is_some() && !self.skip_backward;
        let out = if recovering {
            self.recovering_step(module, batch, idx)?
        } else {
            if let Some(d) = &self.dist {
                d.sync.before_forward()?;
            }
            let out = {
                let _g = autograd::enable_grad();
                self.run_step(module, batch, |m, b, ctx| m.training_step(b, idx, ctx))?
            };
            check_loss(&out, epoch, idx, step)?;
            out
        };
        let k = self.accumulate_grad_batches;
        let should_step = !self.skip_backward && ((idx + 1).is_multiple_of(k) || self.is_last_batch);
        if let Some(loss) = out.loss.as_ref().filter(|_| !self.skip_backward) {
            let value = loss.detach().to_dtype(pyrite_core::DType::F64)?.flatten(0, -1)?.to_vec::<f64>()?[0];
            if !value.is_finite() {
                if self.settings.detect_anomaly {
                    bail!(
                        Value,
                        "training_step returned a non-finite loss ({value}) at epoch {epoch}, batch {idx} (global step {step}); detect_anomaly=True stops here"
                    );
                } else if !self.warned_nonfinite {
                    self.warned_nonfinite = true;
                    eprintln!("warning: the loss is {value} at epoch {epoch}, batch {idx} (global step {step}); set detect_anomaly=True to stop at it");
                }
            }
            if !recovering {
                if idx.is_multiple_of(k) {
                    self.zero_grad(module)?;
                }
                let scaled = if k > 1 { (loss / k as f64)? } else { loss.clone() };
                if let Some(d) = &self.dist {
                    // gradients are averaged by the backward before an optimizer step
                    if should_step {
                        d.sync.prepare_for_backward(&[&scaled])?;
                    } else {
                        d.sync.skip_backward();
                    }
                }
                self.backward(module, &scaled, None)?;
            }
            if should_step {
                // With a loss scaler the hooks and the clipping see the true gradients, and
                // the step is skipped when one is inf or NaN (Lightning's
                // `MixedPrecision.optimizer_step`); the global step counts it either way.
                if let Some(s) = self.scaler.as_mut() {
                    s.unscale_(self.optim.as_ref().expect("configured").optimizer.as_ref())?;
                }
                self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_before_optimizer_step(t, m))?;
                module
                    .on_before_optimizer_step(self.optim.as_ref().expect("configured").optimizer.as_ref())?;
                self.clip_gradients(module)?;
                let optimizer = &mut self.optim.as_mut().expect("configured").optimizer;
                match self.scaler.as_mut() {
                    Some(s) => {
                        s.step(optimizer.as_mut())?;
                        s.update()?;
                    }
                    None => optimizer.step()?,
                }
                self.ctx.global_step += 1;
            }
        }
        if should_step {
            self.step_schedulers(Interval::Step, false)?;
        }
        if self.is_last_batch {
            self.step_schedulers(Interval::Epoch, false)?;
        }
        let m = self.ctx.train_results.step_metrics(true);
        let mut log = self.take_metrics(m);
        if let Some(n) = self.micro.as_ref().and_then(MicroBatching::micro_batch_size) {
            log.insert("micro_batch_size".into(), n as f64);
            self.callback_metrics.insert("micro_batch_size".into(), n as f64);
        }
        self.resume_point = ResumePoint::BatchEnd;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_train_batch_end(t, m, &out, batch, idx))?;
        self.with_ctx(module, HookLevel::Step, |m, ctx| m.on_train_batch_end(&out, batch, idx, ctx))?;
        let m = self.ctx.train_results.step_metrics(true);
        let _ = self.take_metrics(m);
        let accumulating = !should_step;
        let n = self.settings.log_every_n_steps;
        let due = n > 0 && (self.batches_that_stepped + 1).is_multiple_of(n);
        if !accumulating && (due || self.ctx.should_stop || self.settings.fast_dev_run > 0) {
            let mut log = log;
            log.extend(self.ctx.train_results.step_metrics(true).log);
            self.log_with_epoch(log)?;
        }
        self.ctx.train_results.clear_step();
        Ok(Flow::Continue)
    }

    /// `on_before_zero_grad` hooks and the optimizer's `zero_grad`.
    fn zero_grad(&mut self, module: &mut dyn LightningModule) -> Result<()> {
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_before_zero_grad(t, m))?;
        let opt = self.optim.as_ref().expect("configured").optimizer.as_ref();
        module.on_before_zero_grad(opt)?;
        opt.zero_grad()
    }

    /// The backward hooks around `loss.backward()` (or `Backward::run`, recovering).
    fn backward(
        &mut self,
        module: &mut dyn LightningModule,
        loss: &Tensor,
        bw: Option<&Backward<'_>>,
    ) -> Result<()> {
        // "16-mixed" on a GPU: hooks and backward see the scaled loss (Lightning's
        // `MixedPrecision.pre_backward`).
        let scaled = match self.scaler.as_mut() {
            Some(s) => Some(s.scale(loss)?),
            None => None,
        };
        let loss = scaled.as_ref().unwrap_or(loss);
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_before_backward(t, m, loss))?;
        module.on_before_backward(loss)?;
        match bw {
            Some(bw) => bw.run(loss)?,
            None => loss.backward()?,
        }
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_after_backward(t, m))?;
        module.on_after_backward()
    }

    /// `training_step` and backward of a batch with `oom_recovery`: whole, or in micro-batches
    /// after an out-of-memory. Each piece's loss is scaled by its share of the batch; what it
    /// logged is combined into the batch's step values (the epoch accumulators weigh each
    /// micro-batch by its size). Returns the batch's output: the loss (detached) and the extra
    /// outputs (detached) combined over the micro-batches.
    fn recovering_step(
        &mut self,
        module: &mut dyn LightningModule,
        batch: &Sample,
        idx: usize,
    ) -> Result<StepOutput> {
        let mut micro = self.micro.take().expect("recovering");
        let k = self.accumulate_grad_batches;
        let (epoch, step) = (self.ctx.current_epoch, self.ctx.global_step);
        let mut need_zero = idx.is_multiple_of(k);
        let mut marks = self.ctx.train_results.marks();
        let mut logged: Vec<(BTreeMap<String, f64>, usize)> = vec![];
        let mut piece = |b: &Sample, n: usize, frac: f64, bw: &Backward<'_>| -> Result<StepOutput> {
            let saved = self.ctx.train_results.clone();
            let r = (|| -> Result<StepOutput> {
                self.ctx.batch_size = infer_batch_size(b);
                let out = {
                    let _g = autograd::enable_grad();
                    self.run_step(module, b, |m, b, ctx| m.training_step(b, idx, ctx))?
                };
                check_loss(&out, epoch, idx, step)?;
                if let Some(loss) = &out.loss {
                    if need_zero {
                        self.zero_grad(module)?;
                        need_zero = false;
                    }
                    let mut scaled = if frac < 1.0 { (loss * frac)? } else { loss.clone() };
                    if k > 1 {
                        scaled = (&scaled / k as f64)?;
                    }
                    self.backward(module, &scaled, Some(bw))?;
                }
                Ok(out)
            })();
            match r {
                Ok(out) => {
                    let now = self.ctx.train_results.marks();
                    logged.push((self.ctx.train_results.logged_since(&marks), n));
                    marks = now;
                    Ok(out)
                }
                Err(e) => {
                    // Nothing of a failed attempt is counted.
                    self.ctx.train_results = saved;
                    Err(e)
                }
            }
        };
        let r = micro.run(batch, &mut piece);
        self.micro = Some(micro);
        let mut pieces = r?;
        if pieces.len() == 1 {
            return Ok(pieces.pop().expect("one").0);
        }
        self.ctx.train_results.combine_micro_batches(&logged);
        self.ctx.batch_size = infer_batch_size(batch);
        let total: usize = pieces.iter().map(|p| p.1).sum();
        let mut loss: Option<Tensor> = None;
        for (out, n) in &pieces {
            if let Some(l) = &out.loss {
                let part = (&l.detach() * (*n as f64 / total as f64))?;
                loss = Some(match loss {
                    Some(acc) => (&acc + &part)?,
                    None => part,
                });
            }
        }
        let mut extra = vec![];
        for (name, first) in &pieces[0].0.extra {
            let parts: Vec<(Tensor, usize)> =
                pieces.iter().filter_map(|(o, n)| o.get(name).map(|t| (t.detach(), *n))).collect();
            let value = if first.dims().is_empty() {
                let mut acc = (&parts[0].0 * (parts[0].1 as f64 / total as f64))?;
                for (t, n) in &parts[1..] {
                    acc = (&acc + (t * (*n as f64 / total as f64))?)?;
                }
                acc
            } else {
                let ts: Vec<Tensor> = parts.into_iter().map(|p| p.0).collect();
                Tensor::cat(&ts, 0)?
            };
            extra.push((name.clone(), value));
        }
        Ok(StepOutput { loss, extra })
    }

    /// After a batch (and its `on_train_batch_end`): validation when due, plateau schedulers,
    /// counters. Returns whether the epoch ends here.
    fn after_batch(
        &mut self,
        module: &mut dyn LightningModule,
        val: Option<&DataLoader>,
        validated: bool,
    ) -> Result<bool> {
        let accumulating = self.skip_backward
            || !((self.batch_idx + 1).is_multiple_of(self.accumulate_grad_batches) || self.is_last_batch);
        if !validated
            && self.should_check_val(val)
            && let Some(v) = val
        {
            self.run_validation(module, v, false)?;
        }
        self.step_schedulers(Interval::Step, true)?;
        if !accumulating {
            self.batches_that_stepped += 1;
        }
        if self.max_steps_reached() {
            return Ok(true);
        }
        if self.ctx.should_stop && self.settings.min_steps.is_none_or(|m| self.ctx.global_step >= m) {
            return Ok(true);
        }
        Ok(false)
    }

    fn clip_gradients(&mut self, module: &mut dyn LightningModule) -> Result<()> {
        let Some(v) = self.settings.gradient_clip_val else { return Ok(()) };
        if v == 0.0 {
            return Ok(());
        }
        let params = module.module().parameters();
        match self.settings.gradient_clip_algorithm {
            GradientClipAlgorithm::Norm => {
                pyrite_nn::utils::clip_grad_norm_(&params, v, Default::default())?;
            }
            GradientClipAlgorithm::Value => pyrite_nn::utils::clip_grad_value_(&params, v)?,
        }
        Ok(())
    }

    /// Steps the scheduler if its interval and frequency say so (`plateau` picks
    /// ReduceLROnPlateau or the others, as Lightning's `update_lr_schedulers`).
    fn step_schedulers(&mut self, interval: Interval, plateau: bool) -> Result<()> {
        let idx = match interval {
            Interval::Step => self.batch_idx,
            Interval::Epoch => self.ctx.current_epoch,
        };
        let Some(cfg) = self.optim.as_mut() else { return Ok(()) };
        let Some(sc) = cfg.lr_scheduler.as_mut() else { return Ok(()) };
        if sc.interval != interval || !(idx + 1).is_multiple_of(sc.frequency.max(1)) {
            return Ok(());
        }
        match (&mut sc.scheduler, plateau) {
            (Scheduler::Lr(s), false) => s.step(cfg.optimizer.as_mut())?,
            (Scheduler::Plateau(s), true) => match self.callback_metrics.get(&sc.monitor) {
                Some(v) => s.step(cfg.optimizer.as_mut(), *v)?,
                None if sc.strict => {
                    let names: Vec<&str> = self.callback_metrics.keys().map(String::as_str).collect();
                    bail!(
                        Value,
                        "ReduceLROnPlateau conditioned on metric {} which is not available. Available metrics are: {:?}. Condition can be set using `monitor` key in lr scheduler config",
                        sc.monitor,
                        names
                    );
                }
                None => eprintln!("warning: ReduceLROnPlateau conditioned on metric {} which is not available but strict is set to false: skipping", sc.monitor),
            },
            _ => {}
        }
        Ok(())
    }

    /// A validation run (or the sanity check).
    fn run_validation(
        &mut self,
        module: &mut dyn LightningModule,
        val: &DataLoader,
        sanity: bool,
    ) -> Result<()> {
        let saved_stage = self.ctx.stage;
        let saved_point = self.resume_point;
        let n = if sanity { self.num_sanity_val_batches } else { self.num_val_batches };
        self.sanity_checking = sanity;
        self.ctx.stage = if sanity { Stage::SanityCheck } else { Stage::Validate };
        if sanity {
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_sanity_check_start(t, m))?;
        }
        let result = self.eval_loop(module, val, n, Stage::Validate);
        self.sanity_checking = false;
        let log = result?;
        if !sanity {
            self.val_has_run = true;
        }
        if sanity {
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_sanity_check_end(t, m))?;
        } else {
            let _ = log;
        }
        self.ctx.stage = saved_stage;
        if sanity {
            self.resume_point = saved_point;
        }
        self.ctx.eval_results.reset();
        module.module().train();
        Ok(())
    }

    /// The evaluation loop shared by validation and test: returns the epoch metrics logged.
    fn eval_loop(
        &mut self,
        module: &mut dyn LightningModule,
        loader: &DataLoader,
        n: usize,
        kind: Stage,
    ) -> Result<BTreeMap<String, f64>> {
        let validating = kind == Stage::Validate;
        self.convert_module(module)?;
        module.module().eval();
        let _g = autograd::no_grad();
        self.ctx.eval_results.reset();
        if validating {
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_validation_start(t, m))?;
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_validation_epoch_start(t, m))?;
            self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_validation_epoch_start(ctx))?;
        } else {
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_test_start(t, m))?;
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_test_epoch_start(t, m))?;
            self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_test_epoch_start(ctx))?;
        }
        for (i, batch) in loader.iter()?.take(n).enumerate() {
            let batch = batch?;
            self.ctx.batch_size = infer_batch_size(&batch);
            if validating {
                self.call_callbacks(module, Which::All, &mut |c, t, m| {
                    c.on_validation_batch_start(t, m, &batch, i)
                })?;
                self.run_step(module, &batch, |m, b, ctx| m.validation_step(b, i, ctx))?;
                self.call_callbacks(module, Which::All, &mut |c, t, m| {
                    c.on_validation_batch_end(t, m, &batch, i)
                })?;
            } else {
                self.call_callbacks(module, Which::All, &mut |c, t, m| {
                    c.on_test_batch_start(t, m, &batch, i)
                })?;
                self.run_step(module, &batch, |m, b, ctx| m.test_step(b, i, ctx))?;
                self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_test_batch_end(t, m, &batch, i))?;
            }
            self.eval_step_count += 1;
            let step_log = self.ctx.eval_results.step_metrics(false).log;
            if !self.sanity_checking && !step_log.is_empty() {
                let step = self.eval_step_count as u64 - 1;
                self.log_metrics(&step_log, step)?;
            }
            self.ctx.eval_results.clear_step();
        }
        if validating {
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_validation_epoch_end(t, m))?;
            self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_validation_epoch_end(ctx))?;
        } else {
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_test_epoch_end(t, m))?;
            self.with_ctx(module, HookLevel::Epoch, |m, ctx| m.on_test_epoch_end(ctx))?;
        }
        let mut log = BTreeMap::new();
        if !self.sanity_checking {
            let m = self.sync_metrics(self.ctx.eval_results.epoch_metrics())?;
            log = self.take_metrics(m);
            self.log_with_epoch(log.clone())?;
        }
        if validating {
            self.resume_point = ResumePoint::ValidationEnd;
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_validation_end(t, m))?;
        } else {
            self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_test_end(t, m))?;
        }
        Ok(log)
    }

    // ----- validate / test / predict -----

    /// Runs one validation epoch (`trainer.validate`); returns the epoch metrics.
    pub fn validate(
        &mut self,
        module: &mut dyn LightningModule,
        dataloaders: &DataLoader,
        options: EvalOptions,
    ) -> Result<BTreeMap<String, f64>> {
        let r = self.evaluate(module, dataloaders, options, Stage::Validate);
        self.teardown_module(module, r)
    }

    /// Runs one test epoch (`trainer.test`); returns the epoch metrics.
    pub fn test(
        &mut self,
        module: &mut dyn LightningModule,
        dataloaders: &DataLoader,
        options: EvalOptions,
    ) -> Result<BTreeMap<String, f64>> {
        let r = self.evaluate(module, dataloaders, options, Stage::Test);
        self.teardown_module(module, r)
    }

    fn evaluate(
        &mut self,
        module: &mut dyn LightningModule,
        loader: &DataLoader,
        options: EvalOptions,
        kind: Stage,
    ) -> Result<BTreeMap<String, f64>> {
        self.setup_defaults()?;
        if let Some(p) = &options.ckpt_path {
            match self.resolve_ckpt_path(p)? {
                Some(path) => {
                    self.restore(&path, module, false)?;
                }
                None => bail!(Value, "`ckpt_path={p:?}`: there is no such checkpoint"),
            }
        }
        let limit = if kind == Stage::Test {
            self.settings.limit_test_batches
        } else {
            self.settings.limit_val_batches
        };
        let n = limit.of(loader.len());
        self.ctx.stage = kind;
        self.num_val_batches = n;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.setup(t, m, kind))?;
        let r = self.eval_loop(module, loader, n, kind);
        self.ctx.stage = Stage::Train;
        self.ctx.eval_results.reset();
        let log = r?;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.teardown(t, m, kind))?;
        for l in &mut self.loggers {
            l.save()?;
        }
        if options.verbose {
            let title = if kind == Stage::Test { "Test metric" } else { "Validate metric" };
            let w = log.keys().map(|k| k.len()).max().unwrap_or(0).max(title.len());
            println!("{title:<w$}  DataLoader 0");
            for (k, v) in &log {
                println!("{k:<w$}  {v:.6}");
            }
        }
        Ok(log)
    }

    /// Runs `predict_step` over a loader (`trainer.predict`) and returns its outputs.
    pub fn predict(
        &mut self,
        module: &mut dyn LightningModule,
        dataloaders: &DataLoader,
        options: EvalOptions,
    ) -> Result<Vec<Tensor>> {
        let r = self.predict_inner(module, dataloaders, options);
        self.teardown_module(module, r)
    }

    fn predict_inner(
        &mut self,
        module: &mut dyn LightningModule,
        dataloaders: &DataLoader,
        options: EvalOptions,
    ) -> Result<Vec<Tensor>> {
        if let Some(p) = &options.ckpt_path {
            match self.resolve_ckpt_path(p)? {
                Some(path) => {
                    self.restore(&path, module, false)?;
                }
                None => bail!(Value, "`ckpt_path={p:?}`: there is no such checkpoint"),
            }
        }
        self.setup_defaults()?;
        self.ctx.stage = Stage::Predict;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.setup(t, m, Stage::Predict))?;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_predict_start(t, m))?;
        self.convert_module(module)?;
        module.module().eval();
        let n = self.settings.limit_predict_batches.of(dataloaders.len());
        let mut out = vec![];
        {
            let _g = autograd::no_grad();
            for (i, batch) in dataloaders.iter()?.take(n).enumerate() {
                let y = self.run_step(module, &batch?, |m, b, _| m.predict_step(b, i))?;
                // Predictions come back to the CPU, so that a long run does not fill the GPU
                // (as Lightning's prediction loop).
                out.push(y.to_device(Device::Cpu)?);
            }
        }
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.on_predict_end(t, m))?;
        self.call_callbacks(module, Which::All, &mut |c, t, m| c.teardown(t, m, Stage::Predict))?;
        self.ctx.stage = Stage::Train;
        Ok(out)
    }

    // ----- checkpoints -----

    /// The checkpoint dict of the run now (Lightning's `dump_checkpoint`), with the
    /// callbacks' states; `me` is the callback calling this from one of its hooks (its slot
    /// is empty while its hook runs).
    pub fn dump_checkpoint(
        &mut self,
        module: &mut dyn LightningModule,
        me: Option<&mut dyn Callback>,
    ) -> Result<Object> {
        let mut callbacks = pyrite_serialization::Dict::new();
        for c in self.callbacks.iter().flatten() {
            callbacks.insert(c.state_key(), c.state_dict());
        }
        if let Some(c) = me.as_deref() {
            callbacks.insert(c.state_key(), c.state_dict());
        }
        let (optimizer_states, lr_schedulers) = match &self.optim {
            Some(cfg) => (
                vec![cfg.optimizer.state_dict().to_object()?],
                match &cfg.lr_scheduler {
                    Some(s) => vec![s.scheduler.state_object()?],
                    None => vec![],
                },
            ),
            None => (vec![], vec![]),
        };
        let loops = dict_of(vec![
            ("current_epoch", Object::Int(self.ctx.current_epoch as i64)),
            ("global_step", Object::Int(self.ctx.global_step as i64)),
            ("batch_idx", Object::Int(self.batch_idx as i64)),
            ("batches_that_stepped", Object::Int(self.batches_that_stepped as i64)),
            ("is_last_batch", Object::Bool(self.is_last_batch)),
            ("accumulate_grad_batches", Object::Int(self.accumulate_grad_batches as i64)),
            ("should_stop", Object::Bool(self.ctx.should_stop)),
            ("resume_point", Object::Str(self.resume_point.as_str().into())),
            ("train_results", self.ctx.train_results.to_object()),
        ]);
        let history = Object::Dict({
            let mut d = pyrite_serialization::Dict::new();
            for (k, pts) in &self.history {
                let steps: Vec<i64> = pts.iter().map(|p| p.0 as i64).collect();
                let values: Vec<f64> = pts.iter().map(|p| p.1).collect();
                d.insert(
                    k.clone(),
                    Object::Tuple(vec![
                        Object::Tensor(Tensor::from_slice(&steps, steps.len())?),
                        Object::Tensor(Tensor::from_slice(&values, values.len())?),
                    ]),
                );
            }
            d
        });
        let hp = module
            .hparams()
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    crate::HParam::Bool(b) => Object::Bool(b),
                    crate::HParam::Int(i) => Object::Int(i),
                    crate::HParam::Float(f) => Object::Float(f),
                    crate::HParam::Str(s) => Object::Str(s),
                };
                (k, v)
            })
            .collect::<pyrite_serialization::Dict>();
        let metrics: pyrite_serialization::Dict =
            self.callback_metrics.iter().map(|(k, v)| (k.clone(), Object::Float(*v))).collect();
        let mut ck = dict_of(vec![
            ("epoch", Object::Int(self.ctx.current_epoch as i64)),
            ("global_step", Object::Int(self.ctx.global_step as i64)),
            ("pyrite_version", Object::Str(env!("CARGO_PKG_VERSION").into())),
            ("state_dict", module.module().state_dict()?.to_object()),
            ("loops", loops),
            ("callbacks", Object::Dict(callbacks)),
            ("optimizer_states", Object::List(optimizer_states)),
            ("lr_schedulers", Object::List(lr_schedulers)),
            ("hyper_parameters", Object::Dict(hp)),
            ("callback_metrics", Object::Dict(metrics)),
            ("rng_state", Object::Tensor(pyrite_core::get_rng_state())),
            ("dataloader", self.train_loader_state.as_ref().map_or(Object::None, |s| s.to_object())),
            ("history", history),
        ]);
        if let Some(sd) = self.scaler.as_ref().and_then(GradScaler::state_dict)
            && let Object::Dict(d) = &mut ck
        {
            // Lightning keeps the precision plugin's state under its class name.
            d.insert("MixedPrecision", sd.to_object());
        }
        for c in self.callbacks.iter_mut().flatten() {
            c.on_save_checkpoint(&mut ck)?;
        }
        if let Some(c) = me {
            c.on_save_checkpoint(&mut ck)?;
        }
        module.on_save_checkpoint(&mut ck)?;
        Ok(ck)
    }

    /// Saves the checkpoint of the run now to `path`, atomically (a crash leaves the old file
    /// whole), as `trainer.save_checkpoint(path)`. From a callback's hook, use
    /// [`Trainer::dump_checkpoint`] with the callback itself.
    pub fn save_checkpoint(
        &mut self,
        path: impl AsRef<Path>,
        module: &mut dyn LightningModule,
    ) -> Result<()> {
        let ck = self.dump_checkpoint(module, None)?;
        pyrite_serialization::save(&ck, path)
    }

    fn resolve_ckpt_path(&self, p: &CkptPath) -> Result<Option<PathBuf>> {
        // with the ddp strategy rank 0 (which holds the checkpoint callback) decides
        if let Some(d) = &self.dist {
            let mine = if d.rank == 0 { self.resolve_ckpt_path_here(p)? } else { None };
            let mut path = vec![mine.map(|p| p.to_string_lossy().into_owned())];
            pyrite_distributed::broadcast_object_list(&mut path, 0)?;
            return Ok(path.remove(0).map(PathBuf::from));
        }
        self.resolve_ckpt_path_here(p)
    }

    fn resolve_ckpt_path_here(&self, p: &CkptPath) -> Result<Option<PathBuf>> {
        match p {
            CkptPath::Path(p) => {
                if !p.exists() {
                    bail!(Io, "ckpt_path: there is no checkpoint at {}", p.display());
                }
                Ok(Some(p.clone()))
            }
            CkptPath::Last => {
                let found = self
                    .callbacks
                    .iter()
                    .flatten()
                    .filter_map(|c| c.as_any().downcast_ref::<ModelCheckpoint>())
                    .find_map(|c| c.find_last(self));
                if found.is_none() {
                    eprintln!("warning: ckpt_path=\"last\" is set, but there is no last checkpoint available. No checkpoint will be loaded.");
                }
                Ok(found)
            }
            CkptPath::Best => {
                let best =
                    self.checkpoint_callback().and_then(|c| c.best_model_path().map(Path::to_path_buf));
                match best {
                    Some(b) => Ok(Some(b)),
                    None => bail!(Value, "ckpt_path=\"best\": there is no best checkpoint (no ModelCheckpoint with a monitor saved one)"),
                }
            }
        }
    }

    /// Loads a checkpoint: weights (and, for `fit`, everything else). Returns the resume
    /// point, the RNG state and the loader state, to apply when the loop starts.
    fn restore(
        &mut self,
        path: &Path,
        module: &mut dyn LightningModule,
        fit: bool,
    ) -> Result<(ResumePoint, Tensor, Option<DataLoaderState>)> {
        // Every storage is read onto the CPU and copied into the module and the optimizer
        // where they are (Lightning's `map_location=lambda storage, loc: storage`): a
        // checkpoint written on a GPU resumes on the CPU, and the other way round.
        let ck = pyrite_serialization::load_with(
            path,
            pyrite_serialization::LoadOptions { map_location: Some(Device::Cpu), ..Default::default() },
        )
        .map_err(|e| err!(Io, "loading checkpoint {}: {e}", path.display()))?;
        let bad = |what: &str| {
            err!(Value, "checkpoint {} has no valid `{what}`: is it a Trainer checkpoint?", path.display())
        };
        let sd = StateDict::from_object(ck.get("state_dict").ok_or_else(|| bad("state_dict"))?)?;
        module
            .module()
            .load_state_dict(&sd, true)
            .map_err(|e| err!(Value, "checkpoint {} does not fit this model: {e}", path.display()))?;
        let rng = ck
            .get("rng_state")
            .and_then(Object::as_tensor)
            .cloned()
            .unwrap_or_else(pyrite_core::get_rng_state);
        if !fit {
            module.on_load_checkpoint(&ck)?;
            return Ok((ResumePoint::Outside, rng, None));
        }
        let cfg = self.optim.as_mut().expect("configured before restore");
        if let Some(o) = ck.get("optimizer_states").and_then(Object::as_slice).and_then(|s| s.first()) {
            let sd = OptimizerStateDict::from_object(o)?;
            cfg.optimizer.load_state_dict(&sd).map_err(|e| {
                err!(
                    Value,
                    "checkpoint {}: the optimizer state does not fit this optimizer: {e}",
                    path.display()
                )
            })?;
        }
        if let (Some(s), Some(sc)) = (
            ck.get("lr_schedulers").and_then(Object::as_slice).and_then(|s| s.first()),
            cfg.lr_scheduler.as_mut(),
        ) {
            sc.scheduler.load_state_object(s)?;
        }
        if let (Some(s), Some(o)) = (self.scaler.as_mut(), ck.get("MixedPrecision")) {
            let sd = pyrite_amp::GradScalerStateDict::from_object(o)?;
            s.load_state_dict(sd.as_ref())?;
        }
        let loops = ck.get("loops").ok_or_else(|| bad("loops"))?;
        let int = |k: &str| loops.get(k).and_then(Object::as_int).ok_or_else(|| bad(&format!("loops.{k}")));
        let boolean =
            |k: &str| loops.get(k).and_then(Object::as_bool).ok_or_else(|| bad(&format!("loops.{k}")));
        self.ctx.current_epoch = int("current_epoch")? as usize;
        self.ctx.global_step = int("global_step")? as usize;
        self.batch_idx = int("batch_idx")? as usize;
        self.batches_that_stepped = int("batches_that_stepped")? as usize;
        self.is_last_batch = boolean("is_last_batch")?;
        self.accumulate_grad_batches = int("accumulate_grad_batches")? as usize;
        self.ctx.should_stop = boolean("should_stop")?;
        let point = ResumePoint::parse(
            loops.get("resume_point").and_then(Object::as_str).ok_or_else(|| bad("loops.resume_point"))?,
        )?;
        self.ctx.train_results =
            Results::from_object(loops.get("train_results").ok_or_else(|| bad("loops.train_results"))?)?;
        if let Some(m) = ck.get("callback_metrics").and_then(Object::as_dict) {
            for (k, v) in m.iter() {
                if let (Some(k), Some(v)) = (k.as_str(), v.as_float()) {
                    self.callback_metrics.insert(k.to_string(), v);
                }
            }
        }
        if let Some(h) = ck.get("history").and_then(Object::as_dict) {
            for (k, v) in h.iter() {
                let (Some(k), Some(pair)) = (k.as_str(), v.as_slice()) else { continue };
                let (Some(s), Some(v)) =
                    (pair.first().and_then(Object::as_tensor), pair.get(1).and_then(Object::as_tensor))
                else {
                    continue;
                };
                let pts = s
                    .to_vec::<i64>()?
                    .into_iter()
                    .zip(v.to_vec::<f64>()?)
                    .map(|(s, v)| (s as u64, v))
                    .collect();
                self.history.insert(k.to_string(), pts);
            }
        }
        let states = ck.get("callbacks").and_then(Object::as_dict);
        let mut missing = vec![];
        for c in self.callbacks.iter_mut().flatten() {
            match states.and_then(|s| s.get(c.state_key())) {
                Some(s) => c.load_state_dict(s)?,
                None => missing.push(c.state_key()),
            }
        }
        if let Some(states) = states {
            let present: Vec<String> = self.callbacks.iter().flatten().map(|c| c.state_key()).collect();
            let absent: Vec<String> = states
                .keys()
                .filter_map(|k| k.as_str())
                .filter(|k| !present.iter().any(|p| p == k))
                .map(str::to_string)
                .collect();
            if !absent.is_empty() {
                eprintln!("warning: be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be provided during Trainer instantiation. Please add the following callbacks: {absent:?}.");
            }
        }
        let _ = missing;
        let loader = match ck.get("dataloader") {
            Some(o) if !o.is_none() => Some(DataLoaderState::from_object(o)?),
            _ => None,
        };
        self.train_loader_state = loader.clone();
        for c in self.callbacks.iter_mut().flatten() {
            c.on_load_checkpoint(&ck)?;
        }
        module.on_load_checkpoint(&ck)?;
        Ok((point, rng, loader))
    }

    /// Runs the `BatchSizeFinder` callbacks at the start of `fit` (not when resuming); returns
    /// the batch size the last one found.
    fn run_batch_size_finders(
        &mut self,
        module: &mut dyn LightningModule,
        train: &DataLoader,
        resuming: bool,
    ) -> Result<Option<usize>> {
        use crate::callbacks::BatchSizeFinder;
        let mut found = None;
        for i in 0..self.callbacks.len() {
            if !self.callbacks[i].as_ref().is_some_and(|c| c.as_any().is::<BatchSizeFinder>()) {
                continue;
            }
            if resuming {
                eprintln!("warning: BatchSizeFinder does not run when resuming from a checkpoint: the run goes on with the batch size of the training DataLoader");
                continue;
            }
            let mut cb = self.callbacks[i].take().expect("present");
            let finder = cb.as_any_mut().downcast_mut::<BatchSizeFinder>().expect("checked");
            let r = finder.run(self, module, train);
            self.callbacks[i] = Some(cb);
            if let Some(n) = r? {
                found = Some(n);
            }
        }
        Ok(found)
    }

    /// Puts a callback first (the Tuner's finder).
    pub(crate) fn push_front_callback(&mut self, callback: Box<dyn Callback>) {
        self.callbacks.insert(0, Some(callback));
    }

    /// Takes out the first callback of type `T`.
    pub(crate) fn remove_callback<T: Callback>(&mut self) -> Option<Box<dyn Callback>> {
        let i = self.callbacks.iter().position(|c| c.as_ref().is_some_and(|c| c.as_any().is::<T>()))?;
        self.callbacks.remove(i)
    }

    /// Runs the `LearningRateFinder` callbacks' range tests at the start of `fit`.
    fn run_lr_finders(&mut self, module: &mut dyn LightningModule, train: &DataLoader) -> Result<()> {
        for i in 0..self.callbacks.len() {
            let is_finder = self.callbacks[i]
                .as_ref()
                .is_some_and(|c| c.as_any().is::<crate::callbacks::LearningRateFinder>());
            if !is_finder {
                continue;
            }
            let mut cb = self.callbacks[i].take().expect("present");
            let finder =
                cb.as_any_mut().downcast_mut::<crate::callbacks::LearningRateFinder>().expect("checked");
            let r = finder.run(self, module, train);
            self.callbacks[i] = Some(cb);
            r?;
        }
        Ok(())
    }

    /// The training step alone, for the learning-rate range test: step, backward, optimizer
    /// step. Returns the loss.
    pub(crate) fn raw_training_step(
        &mut self,
        module: &mut dyn LightningModule,
        batch: &Sample,
        idx: usize,
    ) -> Result<Option<f64>> {
        self.ctx.stage = Stage::Train;
        self.ctx.batch_size = infer_batch_size(batch);
        let out: StepOutput = {
            let _g = autograd::enable_grad();
            self.run_step(module, batch, |m, b, ctx| m.training_step(b, idx, ctx))?
        };
        self.ctx.train_results.reset();
        let Some(loss) = out.loss else { return Ok(None) };
        let opt = &mut self.optim.as_mut().expect("configured").optimizer;
        opt.zero_grad()?;
        loss.backward()?;
        opt.step()?;
        Ok(Some(loss.detach().to_dtype(pyrite_core::DType::F64)?.flatten(0, -1)?.to_vec::<f64>()?[0]))
    }
}
