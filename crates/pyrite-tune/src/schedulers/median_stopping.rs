//! `tune.schedulers.MedianStoppingRule` (Golovin et al. 2017, Google Vizier): stop a trial whose
//! best result so far is worse than the median of the other trials' running averages up to the
//! same time.

use std::collections::{BTreeMap, BTreeSet};

use pyrite_core::Result;

use super::{resolve_property, Controller, Decision, TrialScheduler};
use crate::trial::{Metrics, Mode, TrialStatus, TIME_TOTAL_S};

/// `MedianStoppingRule`'s arguments, with Ray's defaults.
#[derive(Clone, Debug)]
pub struct MedianStoppingOptions {
    /// The result key that measures progress (`time_total_s`).
    pub time_attr: String,
    /// The metric (`None`: `TuneConfig`'s).
    pub metric: Option<String>,
    /// Its mode (`None`: `TuneConfig`'s).
    pub mode: Option<Mode>,
    /// No trial is stopped before this much `time_attr` (60 s).
    pub grace_period: f64,
    /// Other trials needed before the median means anything (3).
    pub min_samples_required: usize,
    /// Without enough samples, a trial yields to waiting ones at most this often (0).
    pub min_time_slice: f64,
    /// Stop (true) or only pause (false) a trial below the median.
    pub hard_stop: bool,
}

impl Default for MedianStoppingOptions {
    fn default() -> MedianStoppingOptions {
        MedianStoppingOptions {
            time_attr: TIME_TOTAL_S.into(),
            metric: None,
            mode: None,
            grace_period: 60.0,
            min_samples_required: 3,
            min_time_slice: 0.0,
            hard_stop: true,
        }
    }
}

/// The median stopping rule.
pub struct MedianStoppingRule {
    options: MedianStoppingOptions,
    stopped: BTreeSet<String>,
    last_pause: BTreeMap<String, f64>,
    /// Per trial, its `(time, metric)` results, in the order first seen.
    results: Vec<(String, Vec<(f64, f64)>)>,
}

impl MedianStoppingRule {
    /// A rule with these options.
    pub fn new(options: MedianStoppingOptions) -> MedianStoppingRule {
        MedianStoppingRule {
            options,
            stopped: BTreeSet::new(),
            last_pause: BTreeMap::new(),
            results: Vec::new(),
        }
    }

    fn push(&mut self, trial: &str, t: f64, v: f64) {
        match self.results.iter_mut().find(|(id, _)| id == trial) {
            Some((_, r)) => r.push((t, v)),
            None => self.results.push((trial.to_string(), vec![(t, v)])),
        }
    }

    fn running_mean(&self, results: &[(f64, f64)], time: f64) -> f64 {
        let scoped: Vec<f64> = results
            .iter()
            .filter(|(t, _)| self.options.grace_period <= *t && *t <= time)
            .map(|r| r.1)
            .collect();
        if scoped.is_empty() {
            return f64::NAN;
        }
        scoped.iter().sum::<f64>() / scoped.len() as f64
    }
}

/// `np.median`.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl TrialScheduler for MedianStoppingRule {
    fn name(&self) -> String {
        "MedianStoppingRule".into()
    }

    fn set_search_properties(&mut self, metric: &str, mode: Mode) -> Result<()> {
        resolve_property("MedianStoppingRule", "metric", &mut self.options.metric, metric.to_string())?;
        resolve_property("MedianStoppingRule", "mode", &mut self.options.mode, mode)
    }

    fn on_trial_result(&mut self, ctl: &mut dyn Controller, trial: &str, result: &mut Metrics) -> Decision {
        let metric = self.options.metric.clone().unwrap_or_default();
        let mode = self.options.mode.unwrap_or(Mode::Max);
        let (Some(time), Some(value)) = (result.get(&self.options.time_attr), result.get(&metric)) else {
            return Decision::Continue;
        };
        if self.stopped.contains(trial) {
            return Decision::Continue;
        }
        self.push(trial, time, value);
        if time < self.options.grace_period {
            return Decision::Continue;
        }
        // The other trials whose last result is at least this far.
        let mut means: Vec<f64> = self
            .results
            .iter()
            .filter(|(id, r)| id != trial && r.last().is_some_and(|l| l.0 >= time))
            .map(|(_, r)| self.running_mean(r, time))
            .filter(|m| m.is_finite())
            .collect();
        if means.len() < self.options.min_samples_required {
            let last = self.last_pause.get(trial).copied().unwrap_or(f64::NEG_INFINITY);
            let waiting =
                ctl.trials().iter().any(|(_, s)| matches!(s, TrialStatus::Pending | TrialStatus::Paused));
            if time - last > self.options.min_time_slice && waiting {
                self.last_pause.insert(trial.to_string(), time);
                return Decision::Pause;
            }
            return Decision::Continue;
        }
        let median_result = median(&mut means);
        let own = &self.results.iter().find(|(id, _)| id == trial).expect("just pushed").1;
        let best = own.iter().map(|r| r.1).fold(None, |acc: Option<f64>, v| match acc {
            // Python's max/min keep the first of equal values and skip nothing for NaN.
            Some(a) if !mode.better(v, a) => Some(a),
            _ => Some(v),
        });
        let best = best.unwrap_or(value);
        // Ray: compare_op(median, best) != best, i.e. the median is strictly better.
        let pick =
            if mode.better(best, median_result) || best == median_result { best } else { median_result };
        if pick != best {
            self.stopped.insert(trial.to_string());
            if self.options.hard_stop {
                Decision::Stop
            } else {
                Decision::Pause
            }
        } else {
            Decision::Continue
        }
    }

    fn on_trial_complete(&mut self, _ctl: &mut dyn Controller, trial: &str, result: &Metrics) {
        let metric = self.options.metric.clone().unwrap_or_default();
        if let (Some(t), Some(v)) = (result.get(&self.options.time_attr), result.get(&metric)) {
            self.push(trial, t, v);
        }
    }
}
