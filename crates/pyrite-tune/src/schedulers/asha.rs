//! ASHA, asynchronous successive halving (`tune.schedulers.ASHAScheduler`, Li et al. 2018):
//! rungs at `grace_period * reduction_factor^k`; a trial reaching a rung is stopped unless its
//! result is in the top `1 / reduction_factor` of those recorded there so far.

use std::collections::BTreeMap;

use pyrite_core::{Error, ErrorKind, Result};

use super::{resolve_property, Controller, Decision, TrialScheduler};
use crate::rng::Rng;
use crate::trial::{Metrics, Mode, TRAINING_ITERATION};

/// `AsyncHyperBandScheduler`'s arguments, with Ray's defaults.
#[derive(Clone, Debug)]
pub struct AshaOptions {
    /// The result key that measures progress (`training_iteration`).
    pub time_attr: String,
    /// The metric (`None`: `TuneConfig`'s).
    pub metric: Option<String>,
    /// Its mode (`None`: `TuneConfig`'s).
    pub mode: Option<Mode>,
    /// Trials stop at this much `time_attr` (100).
    pub max_t: f64,
    /// No trial is stopped before this much `time_attr` (1).
    pub grace_period: f64,
    /// Keep the top `1 / reduction_factor` at each rung (4).
    pub reduction_factor: f64,
    /// Brackets with different first rungs (1).
    pub brackets: usize,
    /// Stop trials that reach `max_t` (true).
    pub stop_last_trials: bool,
    /// Seeds the choice of bracket when there are several (`None`: from the clock).
    pub seed: Option<u64>,
}

impl Default for AshaOptions {
    fn default() -> AshaOptions {
        AshaOptions {
            time_attr: TRAINING_ITERATION.into(),
            metric: None,
            mode: None,
            max_t: 100.0,
            grace_period: 1.0,
            reduction_factor: 4.0,
            brackets: 1,
            stop_last_trials: true,
            seed: None,
        }
    }
}

/// One bracket: rungs from the largest milestone down, each with the (signed) results
/// recorded there by trial.
#[derive(Clone, Debug)]
struct Bracket {
    rf: f64,
    rungs: Vec<(f64, BTreeMap<String, f64>)>,
    stop_last_trials: bool,
}

impl Bracket {
    fn new(min_t: f64, max_t: f64, rf: f64, s: usize, stop_last_trials: bool) -> Bracket {
        // int(np.log(max_t / min_t) / np.log(rf) - s + 1), truncated toward zero.
        let max_rungs = ((max_t / min_t).ln() / rf.ln() - s as f64 + 1.0).trunc();
        let max_rungs = if max_rungs > 0.0 { max_rungs as usize } else { 0 };
        let rungs =
            (0..max_rungs).rev().map(|k| (min_t * rf.powf((k + s) as f64), BTreeMap::new())).collect();
        Bracket { rf, rungs, stop_last_trials }
    }

    fn cutoff(&self, recorded: &BTreeMap<String, f64>) -> Option<f64> {
        if recorded.is_empty() {
            return None;
        }
        let values: Vec<f64> = recorded.values().copied().collect();
        Some(nanpercentile(&values, (1.0 - 1.0 / self.rf) * 100.0))
    }

    fn on_result(&mut self, trial: &str, cur_iter: f64, cur_rew: f64) -> Decision {
        let mut action = Decision::Continue;
        for i in 0..self.rungs.len() {
            let (milestone, ref recorded) = self.rungs[i];
            if cur_iter >= milestone && recorded.contains_key(trial) && !self.stop_last_trials {
                break;
            }
            if cur_iter < milestone || recorded.contains_key(trial) {
                continue;
            }
            if let Some(cutoff) = self.cutoff(recorded)
                && cur_rew < cutoff
            {
                action = Decision::Stop;
            }
            self.rungs[i].1.insert(trial.to_string(), cur_rew);
            break;
        }
        action
    }
}

/// `np.nanpercentile(values, p)` with linear interpolation (NaN if every value is NaN).
pub(crate) fn nanpercentile(values: &[f64], p: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let q = p / 100.0;
    let vi = q * (v.len() - 1) as f64;
    let lo = vi.floor();
    let g = vi - lo;
    let lo = (lo as usize).min(v.len() - 1);
    let hi = (lo + 1).min(v.len() - 1);
    let (a, b) = (v[lo], v[hi]);
    // numpy's _lerp: from the nearer end.
    let d = b - a;
    if g >= 0.5 {
        b - d * (1.0 - g)
    } else {
        a + d * g
    }
}

/// Asynchronous HyperBand / ASHA (`ASHAScheduler` is the same type).
///
/// ```
/// use pyrite_tune::schedulers::{AshaOptions, AsyncHyperBandScheduler};
/// let asha = AsyncHyperBandScheduler::new(AshaOptions { max_t: 27.0, reduction_factor: 3.0, ..Default::default() }).unwrap();
/// assert_eq!(asha.milestones(0), vec![27.0, 9.0, 3.0, 1.0]);
/// ```
pub struct AsyncHyperBandScheduler {
    options: AshaOptions,
    brackets: Vec<Bracket>,
    trial_bracket: BTreeMap<String, usize>,
    rng: Rng,
    num_stopped: usize,
}

/// Ray's alias.
pub type ASHAScheduler = AsyncHyperBandScheduler;

impl AsyncHyperBandScheduler {
    /// A scheduler with these options (Ray's checks, as errors).
    pub fn new(options: AshaOptions) -> Result<AsyncHyperBandScheduler> {
        let bad = |m: &str| Err(Error::new(ErrorKind::Value, format!("ASHAScheduler: {m}")));
        if options.max_t <= 0.0 {
            return bad("max_t must be positive");
        }
        if options.grace_period <= 0.0 {
            return bad("grace_period must be positive");
        }
        if options.max_t < options.grace_period {
            return bad("grace_period must be <= max_t");
        }
        if options.reduction_factor <= 1.0 {
            return bad("reduction_factor must be above 1");
        }
        if options.brackets == 0 {
            return bad("brackets must be positive");
        }
        let brackets = (0..options.brackets)
            .map(|s| {
                Bracket::new(
                    options.grace_period,
                    options.max_t,
                    options.reduction_factor,
                    s,
                    options.stop_last_trials,
                )
            })
            .collect();
        let rng = options.seed.map_or_else(Rng::from_entropy, Rng::seed_from);
        Ok(AsyncHyperBandScheduler { options, brackets, trial_bracket: BTreeMap::new(), rng, num_stopped: 0 })
    }

    /// Bracket `b`'s rung milestones, largest first.
    pub fn milestones(&self, b: usize) -> Vec<f64> {
        self.brackets[b].rungs.iter().map(|r| r.0).collect()
    }

    /// Puts a new trial in bracket `b` (what `on_trial_add` does with a random bracket;
    /// replaying a recorded run uses this).
    pub fn add_trial_to_bracket(&mut self, trial: &str, b: usize) {
        self.trial_bracket.insert(trial.to_string(), b.min(self.brackets.len() - 1));
    }

    /// Trials stopped so far.
    pub fn num_stopped(&self) -> usize {
        self.num_stopped
    }

    fn metric_and_sign(&self) -> (&str, f64) {
        (self.options.metric.as_deref().unwrap_or(""), self.options.mode.map_or(1.0, Mode::sign))
    }
}

impl TrialScheduler for AsyncHyperBandScheduler {
    fn name(&self) -> String {
        "AsyncHyperBand".into()
    }

    fn set_search_properties(&mut self, metric: &str, mode: Mode) -> Result<()> {
        resolve_property("ASHAScheduler", "metric", &mut self.options.metric, metric.to_string())?;
        resolve_property("ASHAScheduler", "mode", &mut self.options.mode, mode)
    }

    /// A bracket drawn with softmax weights on the brackets' rung counts (Ray's choice).
    fn on_trial_add(&mut self, _ctl: &mut dyn Controller, trial: &str) {
        let sizes: Vec<f64> = self.brackets.iter().map(|b| b.rungs.len() as f64).collect();
        let max = sizes.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let probs: Vec<f64> = sizes.iter().map(|s| (s - max).exp()).collect();
        let b = if self.brackets.len() == 1 { 0 } else { self.rng.weighted_index(&probs) };
        self.add_trial_to_bracket(trial, b);
    }

    fn on_trial_result(&mut self, _ctl: &mut dyn Controller, trial: &str, result: &mut Metrics) -> Decision {
        let (metric, sign) = self.metric_and_sign();
        let (Some(t), Some(v)) = (result.get(&self.options.time_attr), result.get(metric)) else {
            return Decision::Continue;
        };
        let action = if t >= self.options.max_t && self.options.stop_last_trials {
            Decision::Stop
        } else {
            match self.trial_bracket.get(trial) {
                Some(&b) => self.brackets[b].on_result(trial, t, sign * v),
                None => Decision::Continue,
            }
        };
        if action == Decision::Stop {
            self.num_stopped += 1;
        }
        action
    }

    fn on_trial_complete(&mut self, _ctl: &mut dyn Controller, trial: &str, result: &Metrics) {
        let (metric, sign) = self.metric_and_sign();
        if let (Some(t), Some(v)) = (result.get(&self.options.time_attr), result.get(metric)) {
            if let Some(&b) = self.trial_bracket.get(trial) {
                self.brackets[b].on_result(trial, t, sign * v);
            }
            self.trial_bracket.remove(trial);
        }
    }

    fn on_trial_remove(&mut self, _ctl: &mut dyn Controller, trial: &str) {
        self.trial_bracket.remove(trial);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanpercentile_interpolates_like_numpy() {
        // np.nanpercentile([1, 2, 3, 4], 75) = 3.25; with a NaN left out.
        assert_eq!(nanpercentile(&[4.0, 1.0, f64::NAN, 3.0, 2.0], 75.0), 3.25);
        assert_eq!(nanpercentile(&[5.0], 75.0), 5.0);
        assert!(nanpercentile(&[f64::NAN], 50.0).is_nan());
        // (1 - 1/3) * 100 over 3 values: index 1.333...
        let p = nanpercentile(&[0.0, 3.0, 6.0], (1.0 - 1.0 / 3.0) * 100.0);
        assert!((p - 4.0).abs() < 1e-12, "{p}");
    }

    #[test]
    fn rungs_follow_the_paper_and_the_bracket_offset() {
        let a = AsyncHyperBandScheduler::new(AshaOptions { max_t: 100.0, brackets: 3, ..Default::default() })
            .unwrap();
        assert_eq!(a.milestones(0), vec![64.0, 16.0, 4.0, 1.0]);
        assert_eq!(a.milestones(1), vec![64.0, 16.0, 4.0]);
        assert_eq!(a.milestones(2), vec![64.0, 16.0]);
        assert!(
            AsyncHyperBandScheduler::new(AshaOptions { grace_period: 200.0, ..Default::default() }).is_err()
        );
    }
}
