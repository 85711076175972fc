//! HyperBand (Li et al. 2017) as Ray Tune runs it (`tune.schedulers.HyperBandScheduler`):
//! bands of brackets; a bracket of `n0` trials runs each to its milestone `r`, pauses them,
//! keeps the best `1 / eta`, and multiplies the milestone by `eta`, until `max_t`.
//! `HyperBandForBOHB` is the variant that BOHB pairs with: it fills the largest bracket first
//! and pauses trials even while a bracket is not full, so the searcher can add trials.

use std::collections::{BTreeSet, HashMap};

use pyrite_core::{Error, ErrorKind, Result};

use super::{resolve_property, Controller, Decision, TrialScheduler};
use crate::search::HYPERBAND_BUDGET;
use crate::trial::{Metrics, Mode, TrialStatus, TRAINING_ITERATION};

/// `HyperBandScheduler`'s arguments, with Ray's defaults.
#[derive(Clone, Debug)]
pub struct HyperBandOptions {
    /// The result key that measures progress (`training_iteration`).
    pub time_attr: String,
    /// The metric (`None`: `TuneConfig`'s).
    pub metric: Option<String>,
    /// Its mode (`None`: `TuneConfig`'s).
    pub mode: Option<Mode>,
    /// The most `time_attr` a trial gets (81).
    pub max_t: f64,
    /// `eta`: keep the best `1 / reduction_factor` at each halving (3).
    pub reduction_factor: f64,
    /// Stop the trials that finish the last round (true).
    pub stop_last_trials: bool,
}

impl Default for HyperBandOptions {
    fn default() -> HyperBandOptions {
        HyperBandOptions {
            time_attr: TRAINING_ITERATION.into(),
            metric: None,
            mode: None,
            max_t: 81.0,
            reduction_factor: 3.0,
            stop_last_trials: true,
        }
    }
}

/// The latest `(time, metric)` a live trial reported.
type Res = Option<(f64, f64)>;

struct Bracket {
    /// Live trials in the order added, with their latest result.
    live: Vec<(String, Res)>,
    n: i64,
    r: f64,
    max_t: f64,
    cumul_r: f64,
    eta: f64,
    halves: i64,
    total_work: f64,
    completed_progress: f64,
    stop_last_trials: bool,
    being_processed: bool,
    to_unpause: BTreeSet<String>,
}

fn time(r: &Res) -> f64 {
    r.map_or(0.0, |r| r.0)
}

impl Bracket {
    fn new(max_trials: i64, r0: f64, max_t: f64, eta: f64, s: i64, stop_last_trials: bool) -> Bracket {
        // Ray's _calculate_total_work (its cumulative_r never grows; kept as is).
        let (mut work, mut n, mut r) = (0.0, max_trials as f64, r0);
        for _ in 0..=s {
            work += (n.trunc() * r.trunc()) as i64 as f64;
            n = (n / eta).ceil();
            r = (r * eta).min(max_t - r0).trunc();
        }
        Bracket {
            live: Vec::new(),
            n: max_trials,
            r: r0,
            max_t,
            cumul_r: r0,
            eta,
            halves: s,
            total_work: work,
            completed_progress: 0.0,
            stop_last_trials,
            being_processed: false,
            to_unpause: BTreeSet::new(),
        }
    }

    fn get(&self, trial: &str) -> Option<&Res> {
        self.live.iter().find(|(t, _)| t == trial).map(|(_, r)| r)
    }

    fn filled(&self) -> bool {
        self.live.len() as i64 == self.n
    }

    fn cur_iter_done(&self) -> bool {
        self.live.iter().all(|(_, r)| time(r) >= self.cumul_r)
    }

    fn finished(&self) -> bool {
        self.stop_last_trials && self.halves == 0 && self.cur_iter_done()
    }

    fn continue_trial(&self, trial: &str) -> bool {
        let r = self.get(trial).copied().flatten();
        (!self.stop_last_trials && self.halves == 0) || time(&r) < self.cumul_r
    }

    fn update(&mut self, trial: &str, t: f64, v: f64) {
        if let Some(e) = self.live.iter_mut().find(|(id, _)| id == trial) {
            self.completed_progress += t - time(&e.1);
            e.1 = Some((t, v));
        }
        self.to_unpause.remove(trial);
    }

    fn cleanup(&mut self, trial: &str) {
        self.live.retain(|(t, _)| t != trial);
    }

    fn completion(&self) -> f64 {
        if self.finished() {
            1.0
        } else {
            (self.completed_progress / self.total_work).min(1.0)
        }
    }

    /// Good and bad trials (Ray's stable sort by the signed metric, best last).
    fn successive_halving(&mut self, sign: f64) -> (Vec<String>, Vec<String>) {
        if self.halves == 0 && !self.stop_last_trials {
            return (self.live.iter().map(|t| t.0.clone()).collect(), vec![]);
        }
        self.halves -= 1;
        self.n = (self.n as f64 / self.eta).ceil() as i64;
        self.r = (self.r * self.eta).min(self.max_t).trunc();
        self.cumul_r = self.r;
        let mut sorted: Vec<(String, f64)> =
            self.live.iter().map(|(t, r)| (t.clone(), sign * r.map_or(f64::NAN, |r| r.1))).collect();
        sorted.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
        let keep = (self.n.max(0) as usize).min(sorted.len());
        let split = sorted.len() - keep;
        let bad = sorted[..split].iter().map(|t| t.0.clone()).collect();
        let good = sorted[split..].iter().map(|t| t.0.clone()).collect();
        (good, bad)
    }
}

/// Synchronous HyperBand (and, with [`HyperBandScheduler::for_bohb`], `HyperBandForBOHB`).
///
/// ```
/// use pyrite_tune::schedulers::{HyperBandOptions, HyperBandScheduler};
/// let hb = HyperBandScheduler::new(HyperBandOptions { max_t: 27.0, ..Default::default() }).unwrap();
/// // s = 0, 1, 2, 3: n0 trials starting at r0 iterations.
/// assert_eq!(hb.bracket_sizes(), vec![(4, 27.0), (6, 9.0), (12, 3.0), (27, 1.0)]);
/// ```
pub struct HyperBandScheduler {
    options: HyperBandOptions,
    eta: f64,
    s_max_1: i64,
    bohb: bool,
    /// Bands of brackets (indices into `brackets`; `None` for a skipped, too small one).
    bands: Vec<Vec<Option<usize>>>,
    brackets: Vec<Bracket>,
    trial_bracket: HashMap<String, usize>,
    current: Option<usize>,
    num_stopped: usize,
    /// Bumped by every bracket processing (what `choose_trial_to_run` may do).
    version: u64,
}

impl HyperBandScheduler {
    /// Ray's `HyperBandScheduler`.
    pub fn new(options: HyperBandOptions) -> Result<HyperBandScheduler> {
        if options.max_t <= 0.0 {
            return Err(Error::new(ErrorKind::Value, "HyperBandScheduler: max_t must be positive"));
        }
        if options.reduction_factor <= 1.0 {
            return Err(Error::new(ErrorKind::Value, "HyperBandScheduler: reduction_factor must be above 1"));
        }
        let eta = options.reduction_factor;
        let s_max_1 = (options.max_t.ln() / eta.ln()).round_ties_even() as i64 + 1;
        Ok(HyperBandScheduler {
            options,
            eta,
            s_max_1,
            bohb: false,
            bands: vec![vec![]],
            brackets: Vec::new(),
            trial_bracket: HashMap::new(),
            current: None,
            num_stopped: 0,
            version: 0,
        })
    }

    /// Ray's `HyperBandForBOHB`.
    pub fn for_bohb(options: HyperBandOptions) -> Result<HyperBandScheduler> {
        let mut s = HyperBandScheduler::new(options)?;
        s.bohb = true;
        Ok(s)
    }

    fn n0(&self, s: i64) -> i64 {
        (self.s_max_1 as f64 / (s + 1) as f64 * self.eta.powf(s as f64)).ceil() as i64
    }

    fn r0(&self, s: i64) -> f64 {
        (self.options.max_t * self.eta.powf(-(s as f64))).trunc()
    }

    /// `(n0, r0)` of the brackets `s = 0, 1, ...` of a band (plain HyperBand fills `s = 0`
    /// first, HyperBandForBOHB the largest `s`).
    pub fn bracket_sizes(&self) -> Vec<(i64, f64)> {
        (0..self.s_max_1).map(|s| (self.n0(s), self.r0(s))).collect()
    }

    /// Trials stopped by halving so far.
    pub fn num_stopped(&self) -> usize {
        self.num_stopped
    }

    /// The bracket budget (`hyperband_info.budget`) of `trial` now: its bracket's milestone.
    pub fn trial_budget(&self, trial: &str) -> Option<f64> {
        self.trial_bracket.get(trial).map(|&b| self.brackets[b].cumul_r)
    }

    fn sign(&self) -> f64 {
        self.options.mode.map_or(1.0, Mode::sign)
    }

    fn process_bracket(&mut self, ctl: &mut dyn Controller, b: usize) -> Decision {
        self.version += 1;
        let mut action = Decision::Pause;
        if !self.brackets[b].cur_iter_done() {
            return action;
        }
        if self.brackets[b].finished() {
            for (t, _) in self.brackets[b].live.clone() {
                if ctl.status(&t) == Some(TrialStatus::Paused) {
                    ctl.stop_trial(&t);
                }
            }
            return Decision::Stop;
        }
        self.brackets[b].being_processed = true;
        let sign = self.sign();
        let (good, bad) = self.brackets[b].successive_halving(sign);
        self.num_stopped += bad.len();
        for t in &bad {
            match ctl.status(t) {
                Some(TrialStatus::Paused) => ctl.stop_trial(t),
                Some(TrialStatus::Running) => {
                    self.brackets[b].cleanup(t);
                    action = Decision::Stop;
                }
                _ => {}
            }
        }
        for t in &good {
            if self.brackets[b].continue_trial(t) {
                match ctl.status(t) {
                    Some(TrialStatus::Paused) => {
                        if self.bohb {
                            ctl.searcher_on_unpause(t);
                        }
                        self.brackets[b].to_unpause.insert(t.clone());
                    }
                    Some(TrialStatus::Running) => action = Decision::Continue,
                    _ => {}
                }
            } else if self.brackets[b].finished() && self.brackets[b].stop_last_trials {
                match ctl.status(t) {
                    Some(TrialStatus::Paused) => ctl.stop_trial(t),
                    Some(TrialStatus::Running) => {
                        self.brackets[b].cleanup(t);
                        action = Decision::Stop;
                    }
                    _ => {}
                }
            }
        }
        action
    }

    fn runnable(&self, ctl: &dyn Controller, b: usize) -> Option<String> {
        let br = &self.brackets[b];
        br.live
            .iter()
            .find(|(t, _)| match ctl.status(t) {
                Some(TrialStatus::Paused) => br.to_unpause.contains(t),
                Some(TrialStatus::Pending) => true,
                _ => false,
            })
            .map(|(t, _)| t.clone())
    }

    fn choose(&mut self, ctl: &mut dyn Controller, allow_recurse: bool) -> Option<String> {
        for band in &self.bands {
            let mut brackets: Vec<usize> = band.iter().flatten().copied().collect();
            if !self.bohb {
                // Ray: sorted by completion (stable).
                brackets.sort_by(|&a, &b| {
                    self.brackets[a]
                        .completion()
                        .partial_cmp(&self.brackets[b].completion())
                        .unwrap_or(std::cmp::Ordering::Equal)
                });
            }
            for b in brackets {
                if let Some(t) = self.runnable(ctl, b) {
                    return Some(t);
                }
            }
        }
        if self.bohb && !ctl.trials().iter().any(|(_, s)| *s == TrialStatus::Running) {
            let all: Vec<usize> = self.bands.iter().flatten().flatten().copied().collect();
            for b in all {
                let any_paused =
                    self.brackets[b].live.iter().any(|(t, _)| ctl.status(t) == Some(TrialStatus::Paused));
                if any_paused {
                    self.process_bracket(ctl, b);
                    if allow_recurse && self.runnable(ctl, b).is_some() {
                        return self.choose(ctl, false);
                    }
                }
            }
        }
        None
    }
}

impl TrialScheduler for HyperBandScheduler {
    fn name(&self) -> String {
        if self.bohb {
            "HyperBandForBOHB".into()
        } else {
            "HyperBand".into()
        }
    }

    fn set_search_properties(&mut self, metric: &str, mode: Mode) -> Result<()> {
        resolve_property("HyperBandScheduler", "metric", &mut self.options.metric, metric.to_string())?;
        resolve_property("HyperBandScheduler", "mode", &mut self.options.mode, mode)
    }

    fn on_trial_add(&mut self, _ctl: &mut dyn Controller, trial: &str) {
        let full = self.current.is_none_or(|b| self.brackets[b].filled());
        if full {
            loop {
                if self.bands.last().is_some_and(|b| b.len() as i64 == self.s_max_1) {
                    self.bands.push(Vec::new());
                }
                let len = self.bands.last().map_or(0, Vec::len) as i64;
                let s = if self.bohb { self.s_max_1 - len - 1 } else { len };
                if self.r0(s) == 0.0 {
                    self.bands.last_mut().expect("a band").push(None);
                    self.current = None;
                    continue;
                }
                let b = Bracket::new(
                    self.n0(s),
                    self.r0(s),
                    self.options.max_t,
                    self.eta,
                    s,
                    self.options.stop_last_trials,
                );
                self.brackets.push(b);
                let idx = self.brackets.len() - 1;
                self.bands.last_mut().expect("a band").push(Some(idx));
                self.current = Some(idx);
                break;
            }
        }
        let b = self.current.expect("a current bracket");
        self.brackets[b].live.push((trial.to_string(), None));
        self.trial_bracket.insert(trial.to_string(), b);
    }

    fn on_trial_result(&mut self, ctl: &mut dyn Controller, trial: &str, result: &mut Metrics) -> Decision {
        let metric = self.options.metric.clone().unwrap_or_default();
        if self.bohb {
            result.0.remove(HYPERBAND_BUDGET);
        }
        let Some(&b) = self.trial_bracket.get(trial) else { return Decision::Continue };
        if self.brackets[b].get(trial).is_none() {
            // Not live in its bracket any more (Ray asserts this never happens): it is done.
            return Decision::Stop;
        }
        let t = result.get(&self.options.time_attr).unwrap_or(0.0);
        let v = result.get(&metric).unwrap_or(f64::NAN);
        self.brackets[b].update(trial, t, v);
        if self.brackets[b].continue_trial(trial) {
            return Decision::Continue;
        }
        if self.bohb {
            result.insert(HYPERBAND_BUDGET, self.brackets[b].cumul_r);
            let br = &self.brackets[b];
            let others_not_paused =
                br.live.iter().any(|(id, _)| id != trial && ctl.status(id) != Some(TrialStatus::Paused));
            if !br.filled() || others_not_paused {
                ctl.searcher_on_pause(trial);
                return Decision::Pause;
            }
        }
        let action = self.process_bracket(ctl, b);
        if self.bohb && action == Decision::Pause {
            ctl.searcher_on_pause(trial);
        }
        action
    }

    fn on_trial_complete(&mut self, ctl: &mut dyn Controller, trial: &str, _result: &Metrics) {
        self.on_trial_remove(ctl, trial);
    }

    fn on_trial_error(&mut self, ctl: &mut dyn Controller, trial: &str) {
        self.on_trial_remove(ctl, trial);
    }

    fn on_trial_remove(&mut self, ctl: &mut dyn Controller, trial: &str) {
        let Some(&b) = self.trial_bracket.get(trial) else { return };
        self.brackets[b].cleanup(trial);
        if !self.brackets[b].finished() && !self.brackets[b].being_processed {
            self.process_bracket(ctl, b);
        }
    }

    fn choose_trial_to_run(&mut self, ctl: &mut dyn Controller) -> Option<String> {
        self.choose(ctl, true)
    }

    fn state_version(&self) -> u64 {
        self.version
    }
}
