//! [`EarlyStopping`]: Lightning's early-stopping callback.

use crate::callback::Callback;
use crate::module::LightningModule;
use crate::results::dict_of;
use crate::trainer::Trainer;
use crate::Mode;
use pyrite_core::{bail, Result};
use pyrite_serialization::Object;

/// [`EarlyStopping`]'s options, with Lightning's defaults.
#[derive(Clone, Debug)]
pub struct EarlyStoppingOptions {
    /// The least change that counts as an improvement (default 0).
    pub min_delta: f64,
    /// Checks without improvement before stopping (default 3).
    pub patience: usize,
    pub verbose: bool,
    pub mode: Mode,
    /// A monitor that was never logged is an error (default true); with false, a warning.
    pub strict: bool,
    /// Stop when the metric is NaN or infinite (default true).
    pub check_finite: bool,
    /// Stop as soon as the metric is better than this.
    pub stopping_threshold: Option<f64>,
    /// Stop as soon as the metric is worse than this.
    pub divergence_threshold: Option<f64>,
    /// Check at the end of the training epoch rather than after validation (default: when
    /// there is no validation).
    pub check_on_train_epoch_end: Option<bool>,
}

impl Default for EarlyStoppingOptions {
    fn default() -> Self {
        EarlyStoppingOptions {
            min_delta: 0.0,
            patience: 3,
            verbose: false,
            mode: Mode::Min,
            strict: true,
            check_finite: true,
            stopping_threshold: None,
            divergence_threshold: None,
            check_on_train_epoch_end: None,
        }
    }
}

/// Stops training when a monitored metric stops improving (Lightning's semantics: an
/// improvement is `current - min_delta` strictly better than the best, the best starts at
/// ±inf, `patience` checks without improvement stop, as do a non-finite value and the
/// thresholds). Its state (`wait_count`, `stopped_epoch`, `best_score`, `patience`) is
/// saved in checkpoints.
pub struct EarlyStopping {
    monitor: String,
    options: EarlyStoppingOptions,
    wait_count: usize,
    stopped_epoch: usize,
    best_score: f64,
    stopping_reason: Option<String>,
}

impl EarlyStopping {
    /// Monitors `monitor` (e.g. `"val_loss"`).
    pub fn new(monitor: &str, options: EarlyStoppingOptions) -> Result<EarlyStopping> {
        if options.min_delta.is_nan() {
            bail!(Value, "EarlyStopping: min_delta must not be NaN");
        }
        let best_score = if options.mode == Mode::Min { f64::INFINITY } else { f64::NEG_INFINITY };
        Ok(EarlyStopping {
            monitor: monitor.into(),
            options,
            wait_count: 0,
            stopped_epoch: 0,
            best_score,
            stopping_reason: None,
        })
    }

    pub fn wait_count(&self) -> usize {
        self.wait_count
    }
    pub fn stopped_epoch(&self) -> usize {
        self.stopped_epoch
    }
    pub fn best_score(&self) -> f64 {
        self.best_score
    }
    /// Why training was stopped, in Lightning's words.
    pub fn stopping_reason(&self) -> Option<&str> {
        self.stopping_reason.as_deref()
    }

    fn better(&self, a: f64, b: f64) -> bool {
        match self.options.mode {
            Mode::Min => a < b,
            Mode::Max => a > b,
        }
    }

    /// Lightning's `_evaluate_stopping_criteria`.
    fn evaluate(&mut self, current: f64) -> (bool, Option<String>) {
        let m = &self.monitor;
        let delta =
            if self.options.mode == Mode::Max { self.options.min_delta } else { -self.options.min_delta };
        if self.options.check_finite && !current.is_finite() {
            return (
                true,
                Some(format!(
                    "Monitored metric {m} = {current} is not finite. Previous best value was {:.3}. Signaling Trainer to stop.",
                    self.best_score
                )),
            );
        }
        if let Some(t) = self.options.stopping_threshold
            && self.better(current, t)
        {
            return (
                true,
                Some(format!(
                    "Stopping threshold reached: {m} = {current} {} {t}. Signaling Trainer to stop.",
                    if self.options.mode == Mode::Min { "<" } else { ">" }
                )),
            );
        }
        if let Some(t) = self.options.divergence_threshold
            && self.better(-current, -t)
        {
            return (
                true,
                Some(format!(
                    "Divergence threshold reached: {m} = {current} {} {t}. Signaling Trainer to stop.",
                    if self.options.mode == Mode::Min { ">" } else { "<" }
                )),
            );
        }
        if self.better(current - delta, self.best_score) {
            let msg = if self.best_score.is_finite() {
                format!(
                    "Metric {m} improved by {:.3} >= min_delta = {}. New best score: {current:.3}",
                    (self.best_score - current).abs(),
                    self.options.min_delta.abs()
                )
            } else {
                format!("Metric {m} improved. New best score: {current:.3}")
            };
            self.best_score = current;
            self.wait_count = 0;
            return (false, Some(msg));
        }
        self.wait_count += 1;
        if self.wait_count >= self.options.patience {
            return (
                true,
                Some(format!(
                    "Monitored metric {m} did not improve in the last {} records. Best score: {:.3}. Signaling Trainer to stop.",
                    self.wait_count, self.best_score
                )),
            );
        }
        (false, None)
    }

    fn check(&mut self, trainer: &mut Trainer) -> Result<()> {
        if trainer.settings().fast_dev_run > 0 || trainer.sanity_checking() {
            return Ok(());
        }
        let Some(&current) = trainer.callback_metrics().get(&self.monitor) else {
            let names: Vec<&str> = trainer.callback_metrics().keys().map(String::as_str).collect();
            let msg = format!(
                "Early stopping conditioned on metric `{}` which is not available. Pass in or modify your `EarlyStopping` callback to use any of the following: `{}`",
                self.monitor,
                names.join("`, `")
            );
            if self.options.strict {
                bail!(Value, "{msg}");
            }
            eprintln!("warning: {msg}");
            return Ok(());
        };
        let (stop, reason) = self.evaluate(current);
        if stop {
            self.stopped_epoch = trainer.current_epoch();
            self.stopping_reason = reason.clone();
            trainer.set_should_stop(true);
        }
        if self.options.verbose
            && let Some(r) = reason
        {
            eprintln!("{r}");
        }
        Ok(())
    }

    fn on_train_end_check(&self, trainer: &Trainer) -> bool {
        match self.options.check_on_train_epoch_end {
            Some(v) => v,
            None => trainer.num_val_batches() == 0,
        }
    }
}

impl Callback for EarlyStopping {
    fn state_key(&self) -> String {
        format!(
            "EarlyStopping{{'monitor': '{}', 'mode': '{}'}}",
            self.monitor,
            if self.options.mode == Mode::Min { "min" } else { "max" }
        )
    }

    fn is_monitoring(&self) -> bool {
        true
    }

    fn on_train_epoch_end(&mut self, trainer: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        if self.on_train_end_check(trainer) {
            self.check(trainer)?;
        }
        Ok(())
    }

    fn on_validation_end(&mut self, trainer: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        if !self.on_train_end_check(trainer) {
            self.check(trainer)?;
        }
        Ok(())
    }

    fn state_dict(&self) -> Object {
        dict_of(vec![
            ("wait_count", Object::Int(self.wait_count as i64)),
            ("stopped_epoch", Object::Int(self.stopped_epoch as i64)),
            ("best_score", Object::Float(self.best_score)),
            ("patience", Object::Int(self.options.patience as i64)),
        ])
    }

    fn load_state_dict(&mut self, state: &Object) -> Result<()> {
        let bad = || pyrite_core::err!(Value, "EarlyStopping: the checkpoint's state is malformed");
        self.wait_count = state.get("wait_count").and_then(Object::as_int).ok_or_else(bad)? as usize;
        self.stopped_epoch = state.get("stopped_epoch").and_then(Object::as_int).ok_or_else(bad)? as usize;
        self.best_score = state.get("best_score").and_then(Object::as_float).ok_or_else(bad)?;
        self.options.patience = state.get("patience").and_then(Object::as_int).ok_or_else(bad)? as usize;
        Ok(())
    }
}
