//! [`EarlyStopping`]: stop training when a monitored metric has stopped improving, with Keras's
//! semantics (`keras.callbacks.EarlyStopping`), called by hand once per epoch.
//!
//! Semantics (Keras 3; Lightning's `EarlyStopping` agrees on all but `baseline` and the
//! restore):
//! - An epoch improves when `current - min_delta` beats the best so far in the monitored
//!   direction, with `min_delta` taken as a magnitude (its sign is ignored): in `Min` mode
//!   `current < best - |min_delta|`, in `Max` mode `current > best + |min_delta|`. The first
//!   epoch always improves (unless its value is NaN). NaN never improves.
//! - Each epoch that does not improve adds one to `wait`; an improving epoch resets it to 0,
//!   but with a `baseline` only if it also beats the baseline (by `min_delta`). Training stops
//!   at an epoch that does not improve once `wait >= patience`: with `patience = 0`, the first
//!   such epoch; with a baseline never beaten, the first such epoch after `patience` epochs
//!   (epochs that improve never stop training, even above the baseline).
//! - Keras never stops on the first epoch (`epoch > 0`); neither does this.
//! - Epochs before `start_from_epoch` (a warm-up) are counted but otherwise ignored: they
//!   neither improve nor add to `wait`, as in Keras.
//! - With `restore_best_weights`, the module's `state_dict` is copied at each improvement (and
//!   at the first epoch) and loaded back when training stops (or by
//!   [`EarlyStopping::restore_best`]).
//!
//! Lightning differs in that its `baseline` is the initial best value (an epoch must beat it
//! to count as an improvement) and it has no weight restoring.

use crate::Mode;
use pyrite_core::{bail, Result};
use pyrite_nn::{Module, StateDict};

/// [`EarlyStopping`]'s options, with Keras's defaults.
#[derive(Clone, Debug)]
pub struct EarlyStoppingOptions {
    /// The metric's name, for messages (`monitor`, default `"val_loss"`).
    pub monitor: String,
    pub mode: Mode,
    /// Epochs without improvement before stopping (default 0).
    pub patience: usize,
    /// The least change that counts as an improvement; its sign is ignored (default 0).
    pub min_delta: f64,
    /// A value the metric must beat within `patience` epochs (default none).
    pub baseline: Option<f64>,
    /// Load the best epoch's weights back when stopping (default false).
    pub restore_best_weights: bool,
    /// Epochs (counted from 0) to wait before monitoring starts (default 0).
    pub start_from_epoch: usize,
}

impl Default for EarlyStoppingOptions {
    fn default() -> Self {
        EarlyStoppingOptions {
            monitor: "val_loss".into(),
            mode: Mode::Min,
            patience: 0,
            min_delta: 0.0,
            baseline: None,
            restore_best_weights: false,
            start_from_epoch: 0,
        }
    }
}

/// Early stopping for a hand-written loop: call [`EarlyStopping::step`] once per epoch with
/// the metric; it returns `true` when training should stop.
///
/// ```
/// use pyrite::nn::{Linear, Module};
/// use pyrite::train::{EarlyStopping, EarlyStoppingOptions};
/// let model = Linear::new(2, 1)?;
/// let mut stopper = EarlyStopping::new(EarlyStoppingOptions { patience: 2, ..Default::default() })?;
/// let mut stopped_at = None;
/// for (epoch, val_loss) in [0.9, 0.7, 0.71, 0.72, 0.5].into_iter().enumerate() {
///     if stopper.step(val_loss, &model)? {
///         stopped_at = Some(epoch);
///         break;
///     }
/// }
/// assert_eq!(stopped_at, Some(3));
/// assert_eq!((stopper.best_score(), stopper.best_epoch()), (Some(0.7), Some(1)));
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct EarlyStopping {
    options: EarlyStoppingOptions,
    best: Option<f64>,
    best_epoch: Option<usize>,
    best_weights: Option<StateDict>,
    wait: usize,
    epoch: usize,
    stopped_epoch: Option<usize>,
}

impl EarlyStopping {
    pub fn new(options: EarlyStoppingOptions) -> Result<EarlyStopping> {
        if options.min_delta.is_nan() || options.baseline.is_some_and(f64::is_nan) {
            bail!(Value, "EarlyStopping: min_delta and baseline must not be NaN");
        }
        Ok(EarlyStopping {
            options,
            best: None,
            best_epoch: None,
            best_weights: None,
            wait: 0,
            epoch: 0,
            stopped_epoch: None,
        })
    }

    /// Whether `current` improves on `reference` by more than `min_delta`.
    fn improves(&self, current: f64, reference: Option<f64>) -> bool {
        if current.is_nan() {
            return false;
        }
        let Some(r) = reference else { return true };
        let d = self.options.min_delta.abs();
        match self.options.mode {
            Mode::Min => current + d < r,
            Mode::Max => current - d > r,
        }
    }

    /// Records one epoch's metric; returns `true` when training should stop (then, with
    /// `restore_best_weights`, `model` has the best epoch's weights again).
    pub fn step(&mut self, current: f64, model: &dyn Module) -> Result<bool> {
        let epoch = self.epoch;
        self.epoch += 1;
        if epoch < self.options.start_from_epoch {
            return Ok(false);
        }
        if self.options.restore_best_weights && self.best_weights.is_none() {
            self.best_weights = Some(copy_state(model)?);
        }
        self.wait += 1;
        if self.improves(current, self.best) {
            self.best = Some(current);
            self.best_epoch = Some(epoch);
            if self.options.restore_best_weights {
                self.best_weights = Some(copy_state(model)?);
            }
            if self.options.baseline.is_none() || self.improves(current, self.options.baseline) {
                self.wait = 0;
            }
            return Ok(false);
        }
        if self.wait >= self.options.patience && epoch > 0 {
            self.stopped_epoch = Some(epoch);
            if self.options.restore_best_weights {
                self.restore_best(model)?;
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Loads the best epoch's weights into `model` (a no-op without `restore_best_weights`).
    pub fn restore_best(&self, model: &dyn Module) -> Result<()> {
        if let Some(w) = &self.best_weights {
            model.load_state_dict(w, true)?;
        }
        Ok(())
    }

    /// The best value seen.
    pub fn best_score(&self) -> Option<f64> {
        self.best
    }

    /// The epoch (counted from 0, one per `step`) of the best value.
    pub fn best_epoch(&self) -> Option<usize> {
        self.best_epoch
    }

    /// Epochs since the last improvement that counted (`wait`).
    pub fn wait(&self) -> usize {
        self.wait
    }

    /// The epoch at which `step` said stop.
    pub fn stopped_epoch(&self) -> Option<usize> {
        self.stopped_epoch
    }

    /// The monitored metric's name.
    pub fn monitor(&self) -> &str {
        &self.options.monitor
    }
}

/// A copy of the module's state that later training does not change.
fn copy_state(model: &dyn Module) -> Result<StateDict> {
    let mut out = StateDict::new();
    for (k, t) in model.state_dict()?.iter() {
        out.insert(k, t.detach().deep_clone()?);
    }
    Ok(out)
}
