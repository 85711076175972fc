//! Population Based Training (Jaderberg et al. 2017) as Ray Tune runs it
//! (`tune.schedulers.PopulationBasedTraining`, asynchronous mode): every
//! `perturbation_interval`, a trial in the bottom `quantile_fraction` copies the checkpoint of
//! a trial in the top one (exploit) and continues with that trial's config, perturbed
//! (explore).

use std::collections::HashMap;
use std::sync::Arc;

use pyrite_core::{Error, ErrorKind, Result};
use serde_json::Value;

use super::{resolve_property, Controller, Decision, TrialScheduler};
use crate::config::Config;
use crate::rng::Rng;
use crate::space::Domain;
use crate::trial::{Metrics, Mode, TrialStatus, TIME_TOTAL_S};

/// How one hyperparameter is explored.
#[derive(Clone)]
pub enum Mutation {
    /// A list: resample from it, or move to a neighbouring entry.
    Choices(Vec<Value>),
    /// A distribution: resample from it, or multiply by a perturbation factor.
    Domain(Domain),
    /// A function that draws a new value: called to resample, else the value is multiplied by
    /// a perturbation factor.
    #[allow(clippy::type_complexity)]
    Fn(Arc<dyn Fn(&mut Rng) -> Value + Send + Sync>),
}

impl From<Domain> for Mutation {
    fn from(d: Domain) -> Mutation {
        match d {
            Domain::Categorical(v) | Domain::Grid(v) => Mutation::Choices(v),
            d => Mutation::Domain(d),
        }
    }
}

/// `PopulationBasedTraining`'s arguments, with Ray's defaults.
#[derive(Clone)]
pub struct PbtOptions {
    /// The result key that measures progress (`time_total_s`).
    pub time_attr: String,
    pub metric: Option<String>,
    pub mode: Option<Mode>,
    /// Perturb at most this often, in `time_attr` units (60).
    pub perturbation_interval: f64,
    /// No perturbation before this much `time_attr` (0).
    pub burn_in_period: f64,
    /// What to explore: paths (`model/lr`) and how.
    pub hyperparam_mutations: Vec<(String, Mutation)>,
    /// The bottom and top fractions that exploit and are exploited (0.25).
    pub quantile_fraction: f64,
    /// The chance of resampling instead of perturbing (0.25).
    pub resample_probability: f64,
    /// The factors a value is multiplied by (1.2, 0.8).
    pub perturbation_factors: (f64, f64),
    /// Applied to each explored config last.
    #[allow(clippy::type_complexity)]
    pub custom_explore_fn: Option<Arc<dyn Fn(Config) -> Config + Send + Sync>>,
    /// The seed (`None`: from the clock).
    pub seed: Option<u64>,
}

impl Default for PbtOptions {
    fn default() -> PbtOptions {
        PbtOptions {
            time_attr: TIME_TOTAL_S.into(),
            metric: None,
            mode: None,
            perturbation_interval: 60.0,
            burn_in_period: 0.0,
            hyperparam_mutations: vec![],
            quantile_fraction: 0.25,
            resample_probability: 0.25,
            perturbation_factors: (1.2, 0.8),
            custom_explore_fn: None,
            seed: None,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct State {
    last_score: Option<f64>,
    last_perturbation_time: f64,
    last_train_time: f64,
}

/// One exploit: who copied whom, with which config (for logs and tests).
#[derive(Clone, Debug, PartialEq)]
pub struct Exploit {
    pub trial: String,
    pub from: String,
    pub old_config: Config,
    pub new_config: Config,
}

/// Population based training.
pub struct PopulationBasedTraining {
    options: PbtOptions,
    rng: Rng,
    states: HashMap<String, State>,
    order: Vec<String>,
    exploits: Vec<Exploit>,
}

impl PopulationBasedTraining {
    /// A PBT scheduler (Ray's checks, as errors).
    pub fn new(options: PbtOptions) -> Result<PopulationBasedTraining> {
        if options.hyperparam_mutations.is_empty() && options.custom_explore_fn.is_none() {
            return Err(Error::new(
                ErrorKind::Value,
                "PopulationBasedTraining: give hyperparam_mutations or custom_explore_fn",
            ));
        }
        if !(0.0..=0.5).contains(&options.quantile_fraction) {
            return Err(Error::new(
                ErrorKind::Value,
                format!(
                    "PopulationBasedTraining: quantile_fraction must be between 0 and 0.5, got {}",
                    options.quantile_fraction
                ),
            ));
        }
        if options.perturbation_interval <= 0.0 {
            return Err(Error::new(
                ErrorKind::Value,
                "PopulationBasedTraining: perturbation_interval must be positive",
            ));
        }
        let rng = options.seed.map_or_else(Rng::from_entropy, Rng::seed_from);
        Ok(PopulationBasedTraining { options, rng, states: HashMap::new(), order: vec![], exploits: vec![] })
    }

    /// Every exploit so far, in order.
    pub fn exploits(&self) -> &[Exploit] {
        &self.exploits
    }

    /// The lower and upper quantiles among the live trials with a score.
    fn quantiles(&self, ctl: &dyn Controller) -> (Vec<String>, Vec<String>) {
        let mut scored: Vec<(String, f64)> = self
            .order
            .iter()
            .filter(|t| !ctl.status(t).is_some_and(TrialStatus::is_finished))
            .filter_map(|t| self.states[t].last_score.filter(|s| !s.is_nan()).map(|s| (t.clone(), s)))
            .collect();
        if scored.len() <= 1 {
            return (vec![], vec![]);
        }
        scored.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
        let n = scored.len();
        let mut k = (n as f64 * self.options.quantile_fraction).ceil() as usize;
        if k as f64 > n as f64 / 2.0 {
            k = n / 2;
        }
        let lower = scored[..k].iter().map(|s| s.0.clone()).collect();
        let upper = scored[n - k..].iter().map(|s| s.0.clone()).collect();
        (lower, upper)
    }

    /// Ray's `_explore`: a new config from `config`.
    pub fn explore(&mut self, config: &Config) -> Config {
        let mut new = config.clone();
        let p = self.options.resample_probability;
        let (f1, f2) = self.options.perturbation_factors;
        for (path, m) in self.options.hyperparam_mutations.clone() {
            let old = config.value(&path).cloned().unwrap_or(Value::Null);
            let value = match &m {
                Mutation::Choices(list) => {
                    let pos = list.iter().position(|v| *v == old);
                    if self.rng.uniform() < p || pos.is_none() {
                        list[self.rng.below(list.len() as u64) as usize].clone()
                    } else {
                        let shift: i64 = if self.rng.below(2) == 0 { -1 } else { 1 };
                        let i = (pos.unwrap_or(0) as i64 + shift).clamp(0, list.len() as i64 - 1);
                        list[i as usize].clone()
                    }
                }
                Mutation::Domain(_) | Mutation::Fn(_) => {
                    let v = if self.rng.uniform() < p {
                        match &m {
                            Mutation::Domain(d) => d.sample(&mut self.rng),
                            Mutation::Fn(f) => f(&mut self.rng),
                            Mutation::Choices(_) => unreachable!(),
                        }
                    } else {
                        let factor = if self.rng.below(2) == 0 { f1 } else { f2 };
                        Value::from(old.as_f64().unwrap_or(0.0) * factor)
                    };
                    match &old {
                        Value::Bool(_) => {
                            Value::Bool(v.as_f64().is_some_and(|x| x != 0.0) || v.as_bool() == Some(true))
                        }
                        Value::Number(n) if n.is_i64() || n.is_u64() => {
                            Value::from(v.as_f64().unwrap_or(0.0).round_ties_even() as i64)
                        }
                        _ => v,
                    }
                }
            };
            new.set(&path, value);
        }
        match &self.options.custom_explore_fn {
            Some(f) => f(new),
            None => new,
        }
    }
}

impl TrialScheduler for PopulationBasedTraining {
    fn name(&self) -> String {
        "PopulationBasedTraining".into()
    }

    fn set_search_properties(&mut self, metric: &str, mode: Mode) -> Result<()> {
        resolve_property("PopulationBasedTraining", "metric", &mut self.options.metric, metric.to_string())?;
        resolve_property("PopulationBasedTraining", "mode", &mut self.options.mode, mode)
    }

    fn on_trial_add(&mut self, _ctl: &mut dyn Controller, trial: &str) {
        self.states.insert(trial.to_string(), State::default());
        self.order.push(trial.to_string());
    }

    fn on_trial_result(&mut self, ctl: &mut dyn Controller, trial: &str, result: &mut Metrics) -> Decision {
        let metric = self.options.metric.clone().unwrap_or_default();
        let (Some(t), Some(v)) = (result.get(&self.options.time_attr), result.get(&metric)) else {
            return Decision::Continue;
        };
        if t < self.options.burn_in_period {
            return Decision::Continue;
        }
        let sign = self.options.mode.map_or(1.0, Mode::sign);
        let Some(state) = self.states.get_mut(trial) else { return Decision::Continue };
        if t - state.last_perturbation_time < self.options.perturbation_interval {
            return Decision::Continue;
        }
        state.last_score = Some(sign * v);
        state.last_train_time = t;
        state.last_perturbation_time = t;
        let (lower, upper) = self.quantiles(ctl);
        let mut decision = Decision::Continue;
        if ctl.trials().iter().any(|(_, s)| matches!(s, TrialStatus::Pending | TrialStatus::Paused)) {
            decision = Decision::Pause;
        }
        if lower.iter().any(|l| l == trial) && !upper.is_empty() {
            let from = upper[self.rng.below(upper.len() as u64) as usize].clone();
            if ctl.has_checkpoint(&from) {
                let old = ctl.config(trial).unwrap_or_default();
                let source = ctl.config(&from).unwrap_or_default();
                let new = self.explore(&source);
                ctl.exploit(trial, &from, new.clone());
                let donor = self.states[&from].clone();
                let st = self.states.get_mut(trial).expect("a state");
                st.last_perturbation_time = donor.last_perturbation_time;
                st.last_train_time = donor.last_train_time;
                self.exploits.push(Exploit {
                    trial: trial.to_string(),
                    from,
                    old_config: old,
                    new_config: new,
                });
                // Ray: NOOP once the exploited trial is paused; here, the pause restarts it
                // from the copied checkpoint with the new config.
                return Decision::Pause;
            }
        }
        decision
    }

    /// The waiting trial that has trained least (Ray's PBT choice).
    fn choose_trial_to_run(&mut self, ctl: &mut dyn Controller) -> Option<String> {
        let mut best: Option<(f64, String)> = None;
        for (t, s) in ctl.trials() {
            if matches!(s, TrialStatus::Pending | TrialStatus::Paused) {
                let time = self.states.get(&t).map_or(0.0, |s| s.last_train_time);
                if best.as_ref().is_none_or(|(b, _)| time < *b) {
                    best = Some((time, t));
                }
            }
        }
        best.map(|b| b.1)
    }
}
