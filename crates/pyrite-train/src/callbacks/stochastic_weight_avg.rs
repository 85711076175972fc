//! [`StochasticWeightAveraging`]: averages the weights of the last epochs (Lightning's
//! `StochasticWeightAveraging`, on `pyrite_optim::swa_utils`).

use crate::callback::Callback;
use crate::module::{Interval, LightningModule, LrSchedulerConfig, Scheduler};
use crate::trainer::Trainer;
use pyrite_core::{autograd::no_grad, bail, err, Result, Tensor};
use pyrite_nn::Module;
use pyrite_optim::lr_scheduler::{AnnealStrategy, PerGroup};
use pyrite_optim::swa_utils::{get_swa_avg_fn, AnyBatchNorm, AvgFn, SWALROptions, SWALR};
use pyrite_serialization::{Dict, Object};

/// When averaging starts (Lightning's `swa_epoch_start`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SwaEpochStart {
    /// From this epoch on, counted from 1 (`swa_epoch_start=5`: the fifth epoch).
    Epoch(usize),
    /// From epoch `int(fraction * max_epochs)` on, counted from 1 (`swa_epoch_start=0.8`).
    Fraction(f64),
}

impl From<usize> for SwaEpochStart {
    fn from(e: usize) -> Self {
        SwaEpochStart::Epoch(e)
    }
}

impl From<f64> for SwaEpochStart {
    fn from(f: f64) -> Self {
        SwaEpochStart::Fraction(f)
    }
}

/// [`StochasticWeightAveraging`]'s options, with Lightning's defaults.
#[derive(Clone)]
pub struct StochasticWeightAveragingOptions {
    /// Default `0.8`: the last fifth of the epochs.
    pub swa_epoch_start: SwaEpochStart,
    /// Epochs over which the lr anneals to `swa_lrs` (default 10).
    pub annealing_epochs: usize,
    /// Default cosine.
    pub annealing_strategy: AnnealStrategy,
    /// The averaging function (`avg_fn(averaged, current, n_averaged)`); `None`: the equally
    /// weighted mean.
    pub avg_fn: Option<AvgFn>,
}

impl Default for StochasticWeightAveragingOptions {
    fn default() -> Self {
        StochasticWeightAveragingOptions {
            swa_epoch_start: SwaEpochStart::Fraction(0.8),
            annealing_epochs: 10,
            annealing_strategy: AnnealStrategy::Cos,
            avg_fn: None,
        }
    }
}

impl std::fmt::Debug for StochasticWeightAveragingOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StochasticWeightAveragingOptions")
            .field("swa_epoch_start", &self.swa_epoch_start)
            .field("annealing_epochs", &self.annealing_epochs)
            .field("annealing_strategy", &self.annealing_strategy)
            .field("avg_fn", &self.avg_fn.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

/// Stochastic Weight Averaging (Izmailov et al., 2018) as Lightning's callback does it:
///
/// - From epoch `swa_start` on, the optimizer's scheduler is replaced by
///   [`SWALR`] (annealing each group's lr to `swa_lrs` over `annealing_epochs`, stepped every
///   epoch), and at the start of every epoch from `swa_start` to the last, the module's
///   parameters (as they are then: after the previous epoch) are folded into a running
///   average.
/// - At the end of training the average replaces the module's parameters. A module with
///   BatchNorm layers first gets one more epoch of forward passes only (no backward, no
///   optimizer step) with the averaged weights, to recompute the running statistics (the
///   cumulative average, `momentum=None`), as `swa_utils.update_bn` does.
/// - Its state (the average, `n_averaged`, the SWALR scheduler) is saved in checkpoints, and
///   a run resumed from one continues exactly.
///
/// Like Lightning's, it needs `max_epochs` for a fractional `swa_epoch_start`, and the
/// parameters of the last epoch's end are not in the average (the last update is at the
/// start of the last epoch).
///
/// ```
/// use pyrite::train::callbacks::{StochasticWeightAveraging, StochasticWeightAveragingOptions};
/// let swa = StochasticWeightAveraging::new(
///     0.01,
///     StochasticWeightAveragingOptions { swa_epoch_start: 3.into(), annealing_epochs: 2, ..Default::default() },
/// )?;
/// assert!(StochasticWeightAveraging::new(-1.0, Default::default()).is_err());
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct StochasticWeightAveraging {
    swa_lrs: PerGroup,
    options: StochasticWeightAveragingOptions,
    avg_fn: AvgFn,
    /// The 1-based start epoch once resolved.
    swa_epoch_start: Option<usize>,
    max_epochs: Option<usize>,
    contains_bn: bool,
    average: Option<Vec<Tensor>>,
    initialized: bool,
    scheduler_state: Option<Object>,
    init_n_averaged: i64,
    n_averaged: Option<i64>,
    latest_update_epoch: i64,
    momenta: Vec<Option<Option<f64>>>,
}

impl StochasticWeightAveraging {
    /// `StochasticWeightAveraging(swa_lrs, ...)`: one lr for every parameter group, or one per
    /// group.
    pub fn new(
        swa_lrs: impl Into<PerGroup>,
        options: StochasticWeightAveragingOptions,
    ) -> Result<StochasticWeightAveraging> {
        let msg = "swa_epoch_start should be a >0 integer or a float between 0 and 1.";
        match options.swa_epoch_start {
            SwaEpochStart::Epoch(e) if e < 1 => bail!(Value, "{msg}"),
            SwaEpochStart::Fraction(f) if !(0.0..=1.0).contains(&f) => bail!(Value, "{msg}"),
            _ => {}
        }
        let swa_lrs = swa_lrs.into();
        let lrs = match &swa_lrs {
            PerGroup::All(v) => vec![*v],
            PerGroup::Each(v) => v.clone(),
        };
        if lrs.is_empty() || lrs.iter().any(|lr| lr.is_nan() || *lr <= 0.0) {
            bail!(Value, "The `swa_lrs` should a positive float, or a list of positive floats");
        }
        let avg_fn = options.avg_fn.clone().unwrap_or_else(get_swa_avg_fn);
        Ok(StochasticWeightAveraging {
            swa_lrs,
            options,
            avg_fn,
            swa_epoch_start: None,
            max_epochs: None,
            contains_bn: false,
            average: None,
            initialized: false,
            scheduler_state: None,
            init_n_averaged: 0,
            n_averaged: None,
            latest_update_epoch: -1,
            momenta: vec![],
        })
    }

    /// The first averaged epoch, counted from 0 (Lightning's `swa_start`), once `fit` started.
    pub fn swa_start(&self) -> Option<usize> {
        self.swa_epoch_start.map(|e| e.saturating_sub(1))
    }

    /// The last averaged epoch, counted from 0 (`max_epochs - 1`; `None`: no end).
    pub fn swa_end(&self) -> Option<usize> {
        self.max_epochs.map(|m| m.saturating_sub(1))
    }

    /// The number of parameter sets averaged so far.
    pub fn n_averaged(&self) -> i64 {
        self.n_averaged.unwrap_or(self.init_n_averaged)
    }

    /// The averaged parameters (in `module.parameters()` order), once averaging started.
    pub fn averaged_parameters(&self) -> Option<&[Tensor]> {
        self.average.as_deref()
    }

    fn in_swa(&self, epoch: usize) -> bool {
        let start = self.swa_start().unwrap_or(usize::MAX);
        epoch >= start && self.swa_end().is_none_or(|end| epoch <= end)
    }

    /// Replaces the scheduler with SWALR (restoring its state from a checkpoint if there is
    /// one).
    fn initialize(&mut self, trainer: &mut Trainer) -> Result<()> {
        self.initialized = true;
        let max_epochs = trainer.max_epochs();
        let cfg = trainer
            .optimizer_config_mut()
            .ok_or_else(|| err!(Value, "StochasticWeightAveraging: there is no optimizer"))?;
        let opt = cfg.optimizer.as_mut();
        let n = opt.param_groups().len();
        let lrs = match &self.swa_lrs {
            PerGroup::All(v) => vec![*v; n],
            PerGroup::Each(v) if v.len() == n => v.clone(),
            PerGroup::Each(v) => bail!(
                Value,
                "StochasticWeightAveraging: swa_lrs has {} values for {n} parameter groups",
                v.len()
            ),
        };
        for (g, lr) in opt.param_groups_mut().iter_mut().zip(&lrs) {
            g.set("initial_lr", *lr);
        }
        // Lightning builds it with `last_epoch=max_epochs` for the cosine (which SWALR's lrs do
        // not depend on), -1 otherwise.
        let last_epoch = match (self.options.annealing_strategy, max_epochs) {
            (AnnealStrategy::Cos, Some(m)) => m as i64,
            _ => -1,
        };
        let mut scheduler = Scheduler::Lr(Box::new(SWALR::new(
            opt,
            lrs,
            SWALROptions {
                anneal_epochs: self.options.annealing_epochs,
                anneal_strategy: self.options.annealing_strategy,
                last_epoch,
            },
        )?));
        if let Some(state) = &self.scheduler_state {
            scheduler.load_state_object(state)?;
        }
        match &cfg.lr_scheduler {
            Some(old) if old.interval != Interval::Epoch || old.frequency != 1 => {
                eprintln!(
                    "warning: SWA is currently only supported every epoch. Found interval {:?}, frequency {}",
                    old.interval, old.frequency
                );
            }
            _ => {}
        }
        cfg.lr_scheduler = Some(LrSchedulerConfig::new(scheduler));
        if self.n_averaged.is_none() {
            self.n_averaged = Some(self.init_n_averaged);
        }
        Ok(())
    }

    fn update_parameters(&mut self, module: &dyn Module) -> Result<()> {
        let _g = no_grad();
        let params = module.parameters();
        let n = self.n_averaged.unwrap_or(0);
        let average = self.average.get_or_insert_with(Vec::new);
        if average.len() != params.len() {
            if n != 0 {
                bail!(
                    Value,
                    "StochasticWeightAveraging: the module has {} parameters, the average {}",
                    params.len(),
                    average.len()
                );
            }
            *average = params.iter().map(|p| p.detach().deep_clone()).collect::<Result<_>>()?;
        }
        for (a, p) in average.iter().zip(&params) {
            let p = p.detach();
            if n == 0 {
                a.copy_(&p)?;
            } else {
                a.copy_(&(self.avg_fn)(a, &p, n)?)?;
            }
        }
        self.n_averaged = Some(n + 1);
        Ok(())
    }

    fn transfer_weights(&self, module: &dyn Module) -> Result<()> {
        let Some(average) = &self.average else { return Ok(()) };
        let _g = no_grad();
        let params = module.parameters();
        if params.len() != average.len() {
            bail!(
                Value,
                "StochasticWeightAveraging: the module has {} parameters, the average {}",
                params.len(),
                average.len()
            );
        }
        for (p, a) in params.iter().zip(average) {
            p.copy_(a)?;
        }
        Ok(())
    }

    /// Sets every BatchNorm layer's momentum to the cumulative average (`None`), keeping the
    /// old ones; `reset` also zeroes the running statistics.
    fn batch_norm_cumulative(&mut self, module: &dyn Module, reset: bool) -> Result<()> {
        self.momenta.clear();
        for bn in batch_norms(module) {
            if reset {
                bn.reset_running_stats()?;
            }
            self.momenta.push(bn.set_momentum_override(Some(None)));
        }
        Ok(())
    }

    fn restore_momenta(&mut self, module: &dyn Module) -> Result<()> {
        let saved = std::mem::take(&mut self.momenta);
        for (bn, m) in batch_norms(module).into_iter().zip(saved) {
            bn.set_momentum_override(m);
        }
        Ok(())
    }
}

fn batch_norms(module: &dyn Module) -> Vec<AnyBatchNorm<'_>> {
    module.modules().into_iter().filter_map(AnyBatchNorm::of).collect()
}

impl Callback for StochasticWeightAveraging {
    fn on_fit_start(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        let max_epochs = trainer.max_epochs();
        self.swa_epoch_start = Some(match self.options.swa_epoch_start {
            SwaEpochStart::Epoch(e) => e,
            SwaEpochStart::Fraction(f) => match max_epochs {
                Some(m) => (m as f64 * f) as usize,
                None => bail!(
                    Value,
                    "SWA with `swa_epoch_start` as a float is not supported when `max_epochs` is unlimited. Please provide `swa_epoch_start` as an integer."
                ),
            },
        });
        self.max_epochs = max_epochs;
        self.contains_bn = !batch_norms(module.module()).is_empty();
        if self.contains_bn && max_epochs.is_some() {
            // one more epoch, of forward passes only, to recompute the BatchNorm statistics
            trainer.extra_epochs += 1;
        }
        if self.scheduler_state.is_some() {
            // Resumed after averaging started: SWALR takes over now, with its saved state.
            self.initialize(trainer)?;
        }
        let epoch = trainer.current_epoch();
        if self.contains_bn && self.swa_end().is_some_and(|end| epoch == end + 1) {
            // Resumed in the BatchNorm epoch: its statistics so far are in the checkpoint.
            self.batch_norm_cumulative(module.module(), false)?;
            trainer.skip_backward = true;
        }
        Ok(())
    }

    fn on_train_epoch_start(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
    ) -> Result<()> {
        let epoch = trainer.current_epoch();
        if !self.initialized && self.in_swa(epoch) {
            if self.scheduler_state.is_none() && Some(epoch) != self.swa_start() {
                eprintln!("warning: SWA is initializing after swa_start without any checkpoint data.");
            }
            self.initialize(trainer)?;
        }
        if self.in_swa(epoch) && epoch as i64 > self.latest_update_epoch {
            self.update_parameters(module.module())?;
            self.latest_update_epoch = epoch as i64;
        }
        if self.contains_bn && self.swa_end().is_some_and(|end| epoch == end + 1) {
            self.transfer_weights(module.module())?;
            self.batch_norm_cumulative(module.module(), true)?;
            trainer.skip_backward = true;
        }
        Ok(())
    }

    fn on_train_epoch_end(&mut self, trainer: &mut Trainer, _module: &mut dyn LightningModule) -> Result<()> {
        trainer.skip_backward = false;
        Ok(())
    }

    fn on_train_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        // the epoch counter is already past the last epoch here
        let done = trainer.current_epoch().checked_sub(1);
        let end = self.swa_end();
        if self.contains_bn && end.is_some() && done == end.map(|e| e + 1) {
            trainer.extra_epochs = trainer.extra_epochs.saturating_sub(1);
            self.restore_momenta(module.module())?;
        } else if done == end || end.is_none() {
            self.transfer_weights(module.module())?;
        }
        Ok(())
    }

    fn on_save_checkpoint(&mut self, checkpoint: &mut Object) -> Result<()> {
        // The SWALR scheduler's state lives in this callback's state (as Lightning keeps it),
        // not in `lr_schedulers`, so that a resumed run does not load it into the scheduler of
        // `configure_optimizers`.
        if !self.initialized {
            return Ok(());
        }
        let Some(ck) = checkpoint.as_dict_mut() else { return Ok(()) };
        let sched = match ck.get_mut("lr_schedulers") {
            Some(Object::List(l)) if !l.is_empty() => l.remove(0),
            _ => Object::None,
        };
        let key = self.state_key();
        if let Some(Object::Dict(mine)) = ck.get_mut("callbacks").and_then(|c| c.as_dict_mut()?.get_mut(key))
        {
            mine.insert("scheduler_state", sched);
        }
        Ok(())
    }

    fn state_dict(&self) -> Object {
        let mut d = Dict::new();
        d.insert("n_averaged", Object::Int(self.n_averaged()));
        d.insert("latest_update_epoch", Object::Int(self.latest_update_epoch));
        d.insert("scheduler_state", self.scheduler_state.clone().unwrap_or(Object::None));
        d.insert(
            "average_model_state",
            match &self.average {
                Some(a) => Object::List(a.iter().map(|t| Object::Tensor(t.clone())).collect()),
                None => Object::None,
            },
        );
        Object::Dict(d)
    }

    fn load_state_dict(&mut self, state: &Object) -> Result<()> {
        let bad = || err!(Value, "StochasticWeightAveraging: the checkpoint's state is not this callback's");
        self.init_n_averaged = state.get("n_averaged").and_then(Object::as_int).ok_or_else(bad)?;
        self.n_averaged = None;
        self.latest_update_epoch =
            state.get("latest_update_epoch").and_then(Object::as_int).ok_or_else(bad)?;
        self.scheduler_state = match state.get("scheduler_state") {
            Some(Object::None) | None => None,
            Some(s) => Some(s.clone()),
        };
        self.initialized = false;
        self.average = match state.get("average_model_state") {
            Some(Object::List(l)) => Some(
                l.iter()
                    .map(|t| t.as_tensor().map(|t| t.deep_clone()).ok_or_else(bad)?)
                    .collect::<Result<_>>()?,
            ),
            _ => None,
        };
        Ok(())
    }
}
