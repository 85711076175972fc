//! Optuna's `MedianPruner` / `PercentilePruner` as a trial scheduler: at a step, stop a trial
//! whose best value so far is worse than the median (a percentile) of the completed trials'
//! values at that same step.

use std::collections::{BTreeMap, BTreeSet};

use pyrite_core::{Error, ErrorKind, Result};

use super::asha::nanpercentile;
use super::{resolve_property, Controller, Decision, TrialScheduler};
use crate::trial::{Metrics, Mode, TRAINING_ITERATION};

/// `PercentilePruner`'s arguments, with Optuna's defaults (`MedianPruner` is percentile 50).
#[derive(Clone, Debug)]
pub struct PercentilePrunerOptions {
    /// Keep the top `percentile` percent (50 for the median).
    pub percentile: f64,
    /// The result key used as Optuna's step (`training_iteration`).
    pub time_attr: String,
    pub metric: Option<String>,
    pub mode: Option<Mode>,
    /// No pruning until this many trials completed (5).
    pub n_startup_trials: usize,
    /// No pruning before this step (0).
    pub n_warmup_steps: i64,
    /// Check once per this many steps after the warm-up (1).
    pub interval_steps: i64,
    /// Completed trials needed at a step to judge (1).
    pub n_min_trials: usize,
}

impl Default for PercentilePrunerOptions {
    fn default() -> PercentilePrunerOptions {
        PercentilePrunerOptions {
            percentile: 50.0,
            time_attr: TRAINING_ITERATION.into(),
            metric: None,
            mode: None,
            n_startup_trials: 5,
            n_warmup_steps: 0,
            interval_steps: 1,
            n_min_trials: 1,
        }
    }
}

/// Optuna's percentile pruning rule (see [`MedianPruner`]).
pub struct PercentilePruner {
    options: PercentilePrunerOptions,
    values: BTreeMap<String, BTreeMap<i64, f64>>,
    completed: Vec<String>,
    pruned: BTreeSet<String>,
}

/// Optuna's `MedianPruner`: a [`PercentilePruner`] at 50.
pub type MedianPruner = PercentilePruner;

impl PercentilePruner {
    /// A pruner with these options (Optuna's checks, as errors).
    pub fn new(options: PercentilePrunerOptions) -> Result<PercentilePruner> {
        let bad = |m: String| Err(Error::new(ErrorKind::Value, m));
        if !(0.0..=100.0).contains(&options.percentile) {
            return bad(format!(
                "Percentile must be between 0 and 100 inclusive, but got percentile={}.",
                options.percentile
            ));
        }
        if options.n_warmup_steps < 0 {
            return bad(format!(
                "Number of warmup steps cannot be negative, but got n_warmup_steps={}.",
                options.n_warmup_steps
            ));
        }
        if options.interval_steps < 1 {
            return bad(format!(
                "Pruning interval steps must be at least 1, but got interval_steps={}.",
                options.interval_steps
            ));
        }
        if options.n_min_trials < 1 {
            return bad(format!(
                "Number of trials for pruning must be at least 1, but got n_min_trials={}.",
                options.n_min_trials
            ));
        }
        Ok(PercentilePruner { options, values: BTreeMap::new(), completed: vec![], pruned: BTreeSet::new() })
    }

    /// Optuna's `MedianPruner` with these options (the percentile is set to 50).
    pub fn median(options: PercentilePrunerOptions) -> Result<PercentilePruner> {
        PercentilePruner::new(PercentilePrunerOptions { percentile: 50.0, ..options })
    }

    /// Records a trial's value at a step and says whether to prune it (Optuna's
    /// `report` + `should_prune`).
    pub fn report(&mut self, trial: &str, step: i64, value: f64) -> bool {
        self.values.entry(trial.to_string()).or_default().insert(step, value);
        self.should_prune(trial)
    }

    /// Marks a trial complete: its values count for the others from now on (Optuna's `tell`).
    pub fn complete(&mut self, trial: &str) {
        if !self.pruned.contains(trial) && !self.completed.iter().any(|t| t == trial) {
            self.completed.push(trial.to_string());
        }
    }

    fn should_prune(&self, trial: &str) -> bool {
        let o = &self.options;
        let n = self.completed.len();
        if n == 0 || n < o.n_startup_trials {
            return false;
        }
        let Some(values) = self.values.get(trial) else { return false };
        let Some(&step) = values.keys().next_back() else { return false };
        if step < o.n_warmup_steps {
            return false;
        }
        let nearest =
            (step - o.n_warmup_steps).div_euclid(o.interval_steps) * o.interval_steps + o.n_warmup_steps;
        let second_last = values.keys().filter(|&&s| s != step).max().copied().unwrap_or(-1);
        if second_last >= nearest {
            return false;
        }
        let maximize = o.mode == Some(Mode::Max);
        let finite: Vec<f64> = values.values().copied().filter(|v| !v.is_nan()).collect();
        if finite.is_empty() {
            return true;
        }
        let best = if maximize {
            finite.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
        } else {
            finite.iter().cloned().fold(f64::INFINITY, f64::min)
        };
        let at_step: Vec<f64> = self
            .completed
            .iter()
            .filter_map(|t| self.values.get(t).and_then(|v| v.get(&step)).copied())
            .collect();
        if at_step.len() < o.n_min_trials || at_step.iter().all(|v| v.is_nan()) {
            return false;
        }
        let percentile = if maximize { 100.0 - o.percentile } else { o.percentile };
        let p = nanpercentile(&at_step, percentile);
        if maximize {
            best < p
        } else {
            best > p
        }
    }
}

impl TrialScheduler for PercentilePruner {
    fn name(&self) -> String {
        if self.options.percentile == 50.0 {
            "MedianPruner".into()
        } else {
            "PercentilePruner".into()
        }
    }

    fn set_search_properties(&mut self, metric: &str, mode: Mode) -> Result<()> {
        resolve_property("MedianPruner", "metric", &mut self.options.metric, metric.to_string())?;
        resolve_property("MedianPruner", "mode", &mut self.options.mode, mode)
    }

    fn on_trial_result(&mut self, _ctl: &mut dyn Controller, trial: &str, result: &mut Metrics) -> Decision {
        let metric = self.options.metric.clone().unwrap_or_default();
        let (Some(step), Some(v)) = (result.get(&self.options.time_attr), result.get(&metric)) else {
            return Decision::Continue;
        };
        if self.report(trial, step as i64, v) {
            self.pruned.insert(trial.to_string());
            Decision::Stop
        } else {
            Decision::Continue
        }
    }

    fn on_trial_complete(&mut self, _ctl: &mut dyn Controller, trial: &str, _result: &Metrics) {
        self.complete(trial);
    }
}
