//! TPE, the Tree-structured Parzen Estimator, as Optuna 5's `TPESampler` does it.
//!
//! The finished trials are split into the best `gamma(n)` ("below") and the rest ("above"); a
//! Parzen estimator is fitted to each (`parzen`); `n_ei_candidates` draws from the "below"
//! estimator are scored by `ln l(x) - ln g(x)` and the best one is the suggestion. The first
//! `n_startup_trials` are random. Optuna 5's defaults: the estimators are multivariate (one
//! kernel spans every parameter), and `constant_liar` counts running trials in "above", so
//! parallel workers do not all pile onto the same point.

mod parzen;
pub mod truncnorm;

pub use parzen::ParamKind;
use parzen::{ParzenEstimator, ParzenOptions};

use std::collections::HashMap;

use pyrite_core::{Error, ErrorKind, Result};
use serde_json::Value;

use super::{SearchProperties, Searcher, Suggestion};
use crate::rng::Rng;
use crate::space::{Domain, ParamSpace, Sampler};
use crate::trial::{Metrics, Mode};

/// Optuna's default `gamma`: `min(ceil(0.1 * n), 25)` trials are "good".
pub fn default_gamma(n: usize) -> usize {
    n.div_ceil(10).min(25)
}

/// Hyperopt's `gamma`: `min(ceil(0.25 * sqrt(n)), 25)`.
pub fn hyperopt_default_gamma(n: usize) -> usize {
    ((0.25 * (n as f64).sqrt()).ceil() as usize).min(25)
}

/// Optuna's default weights: flat for fewer than 25 observations; otherwise a ramp from
/// `1/n` to 1 over the oldest `n - 25` and 1 for the newest 25.
pub fn default_weights(n: usize) -> Vec<f64> {
    if n < 25 {
        return vec![1.0; n];
    }
    let m = n - 25;
    let mut w: Vec<f64> = (0..m)
        .map(|i| {
            if m == 1 {
                1.0 / n as f64
            } else {
                1.0 / n as f64 + (1.0 - 1.0 / n as f64) * i as f64 / (m - 1) as f64
            }
        })
        .collect();
    w.extend(std::iter::repeat_n(1.0, 25));
    w
}

/// `TPESampler`'s arguments, with Optuna 5.1's defaults.
#[derive(Clone, Debug)]
pub struct TpeOptions {
    /// Random trials before the model is used (10).
    pub n_startup_trials: usize,
    /// Candidates drawn from the "good" estimator per suggestion (24).
    pub n_ei_candidates: usize,
    /// How many finished trials count as good ([`default_gamma`]).
    pub gamma: fn(usize) -> usize,
    /// The observations' weights by age ([`default_weights`]).
    pub weights: fn(usize) -> Vec<f64>,
    /// The prior kernel's weight (1.0).
    pub prior_weight: f64,
    /// Clip kernel widths from below by the range over `min(100, n + 2)` (true).
    pub consider_magic_clip: bool,
    /// Let the range's ends widen the outermost kernels (false).
    pub consider_endpoints: bool,
    /// One estimator over all parameters (true for one objective in Optuna 5), or one per
    /// parameter.
    pub multivariate: bool,
    /// Count running trials as bad ones ("constant liar", true in Optuna 5).
    pub constant_liar: bool,
    /// The seed (`None`: from the clock).
    pub seed: Option<u64>,
}

impl Default for TpeOptions {
    fn default() -> TpeOptions {
        TpeOptions {
            n_startup_trials: 10,
            n_ei_candidates: 24,
            gamma: default_gamma,
            weights: default_weights,
            prior_weight: 1.0,
            consider_magic_clip: true,
            consider_endpoints: false,
            multivariate: true,
            constant_liar: true,
            seed: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Running,
    Complete,
    Pruned,
    Failed,
}

struct Record {
    params: Vec<f64>,
    state: State,
    value: f64,
    /// The last intermediate value, by step.
    last_intermediate: Option<(u64, f64)>,
}

/// A searched parameter: its path in the config and how TPE sees it.
#[derive(Clone, Debug)]
struct Searched {
    path: String,
    kind: ParamKind,
    /// A grid to snap to after sampling in log space (log domains with `q`).
    quantize: Option<f64>,
    categories: Vec<Value>,
    integer: bool,
}

/// TPE search (Optuna's `TPESampler` behind Ray's searcher interface).
///
/// ```
/// use pyrite_tune::search::{SearchProperties, Searcher, Suggestion, TpeOptions, TpeSearch};
/// use pyrite_tune::{uniform, Metrics, Mode, ParamSpace};
/// let space = ParamSpace::new().with("x", uniform(-5.0, 5.0));
/// let mut tpe = TpeSearch::new(TpeOptions { seed: Some(1), ..Default::default() });
/// tpe.set_search_properties(&SearchProperties { metric: "y", mode: Mode::Min, space: &space, num_samples: None }).unwrap();
/// let mut best = f64::INFINITY;
/// for i in 0..40 {
///     let id = i.to_string();
///     let Suggestion::Config(c) = tpe.suggest(&id).unwrap() else { unreachable!() };
///     let x: f64 = c.get("x").unwrap();
///     let y = (x - 1.0) * (x - 1.0);
///     best = best.min(y);
///     tpe.on_trial_complete(&id, Some(&Metrics::from([("y", y)])), false);
/// }
/// assert!(best < 0.01, "{best}");
/// ```
pub struct TpeSearch {
    options: TpeOptions,
    rng: Rng,
    metric: String,
    mode: Mode,
    space: ParamSpace,
    searched: Vec<Searched>,
    trials: Vec<Record>,
    index: HashMap<String, usize>,
}

impl TpeSearch {
    /// A TPE searcher with these options.
    pub fn new(options: TpeOptions) -> TpeSearch {
        let rng = options.seed.map_or_else(Rng::from_entropy, Rng::seed_from);
        TpeSearch {
            options,
            rng,
            metric: String::new(),
            mode: Mode::Min,
            space: ParamSpace::new(),
            searched: Vec::new(),
            trials: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn parzen_options(&self) -> ParzenOptions {
        ParzenOptions {
            prior_weight: self.options.prior_weight,
            consider_magic_clip: self.options.consider_magic_clip,
            consider_endpoints: self.options.consider_endpoints,
            weights: self.options.weights,
        }
    }

    /// A uniform draw of every parameter (Optuna's `RandomSampler`).
    fn sample_random(&mut self) -> Vec<f64> {
        let rng = &mut self.rng;
        self.searched
            .iter()
            .map(|s| match s.kind {
                ParamKind::Categorical { n } => rng.below(n as u64) as f64,
                ParamKind::Numeric { low, high, log, step } => match (log, step) {
                    (false, Some(step)) => {
                        let cells = ((high - low) / step).round() as u64 + 1;
                        low + rng.below(cells) as f64 * step
                    }
                    (true, Some(step)) => {
                        let x = rng.uniform_in((low - step / 2.0).ln(), (high + step / 2.0).ln()).exp();
                        (low + ((x - low) / step).round() * step).clamp(low, high)
                    }
                    (false, None) => rng.uniform_in(low, high),
                    (true, None) => rng.uniform_in(low.ln(), high.ln()).exp(),
                },
            })
            .collect()
    }

    /// The model-based draw, over the parameters `dims` together.
    fn sample_model(&mut self, current: usize, dims: &[usize]) -> Vec<f64> {
        let use_running = self.options.constant_liar;
        let pool: Vec<usize> = (0..self.trials.len())
            .filter(|&i| i != current)
            .filter(|&i| match self.trials[i].state {
                State::Complete | State::Pruned => true,
                State::Running => use_running,
                State::Failed => false,
            })
            .collect();
        let n = pool.iter().filter(|&&i| self.trials[i].state != State::Running).count();
        let n_below = (self.options.gamma)(n);
        let (below, above) = self.split(&pool, n_below);
        let kinds: Vec<ParamKind> = dims.iter().map(|&d| self.searched[d].kind.clone()).collect();
        let rows = |ids: &[usize]| -> Vec<Vec<f64>> {
            ids.iter().map(|&i| dims.iter().map(|&d| self.trials[i].params[d]).collect()).collect()
        };
        let po = self.parzen_options();
        let l = ParzenEstimator::new(&rows(&below), &kinds, &po);
        let g = ParzenEstimator::new(&rows(&above), &kinds, &po);
        let candidates = l.sample(&mut self.rng, self.options.n_ei_candidates.max(1));
        let ll = l.log_pdf(&candidates);
        let lg = g.log_pdf(&candidates);
        let mut best = 0;
        let mut best_score = f64::NEG_INFINITY;
        for (i, (a, b)) in ll.iter().zip(&lg).enumerate() {
            let score = a - b;
            // np.argmax: the first maximum; NaN counts as the maximum.
            if score > best_score || (score.is_nan() && !best_score.is_nan()) {
                best = i;
                best_score = score;
            }
        }
        candidates.into_iter().nth(best).unwrap_or_default()
    }

    /// Optuna's `_split_trials`: the best complete trials, then the pruned ones (deepest step
    /// first, then value), fill "below"; everything else (and running trials) is "above".
    /// Both keep the trials' creation order.
    fn split(&self, pool: &[usize], n_below: usize) -> (Vec<usize>, Vec<usize>) {
        let sign = self.mode.sign();
        let mut complete: Vec<usize> =
            pool.iter().copied().filter(|&i| self.trials[i].state == State::Complete).collect();
        let mut pruned: Vec<usize> =
            pool.iter().copied().filter(|&i| self.trials[i].state == State::Pruned).collect();
        let running = pool.iter().copied().filter(|&i| self.trials[i].state == State::Running);
        complete.sort_by(|&a, &b| (-sign * self.trials[a].value).total_cmp(&(-sign * self.trials[b].value)));
        let nc = n_below.min(complete.len());
        let mut below: Vec<usize> = complete[..nc].to_vec();
        let mut above: Vec<usize> = complete[nc..].to_vec();
        let score = |i: usize| -> (f64, f64) {
            match self.trials[i].last_intermediate {
                Some((step, v)) if v.is_nan() => (-(step as f64), f64::INFINITY),
                Some((step, v)) => (-(step as f64), -sign * v),
                None => (1.0, 0.0),
            }
        };
        pruned.sort_by(|&a, &b| {
            let (sa, sb) = (score(a), score(b));
            sa.0.total_cmp(&sb.0).then(sa.1.total_cmp(&sb.1))
        });
        let np = (n_below - nc).min(pruned.len());
        below.extend_from_slice(&pruned[..np]);
        above.extend_from_slice(&pruned[np..]);
        above.extend(running);
        below.sort_unstable();
        above.sort_unstable();
        (below, above)
    }
}

fn unsupported(path: &str, what: &str) -> Error {
    Error::new(ErrorKind::Value, format!("TPE cannot search '{path}': {what}"))
}

impl Searcher for TpeSearch {
    fn name(&self) -> String {
        "TPE".into()
    }

    fn set_search_properties(&mut self, props: &SearchProperties<'_>) -> Result<()> {
        props.space.validate()?;
        self.metric = props.metric.to_string();
        self.mode = props.mode;
        self.space = props.space.clone();
        self.searched.clear();
        for (path, d) in props.space.flatten() {
            let s = match d {
                Domain::Float { sampler: Sampler::Normal { .. }, .. } => {
                    return Err(unsupported(&path, "TPE needs bounds, and randn / qrandn are unbounded"))
                }
                Domain::Float { lower, upper, sampler, q } => {
                    let log = matches!(sampler, Sampler::LogUniform { .. });
                    match (log, q) {
                        (false, Some(q)) => {
                            let lo = (lower / q - 1e-9).ceil() * q;
                            let hi = (upper / q + 1e-9).floor() * q;
                            Searched {
                                path,
                                kind: ParamKind::Numeric { low: lo, high: hi, log, step: Some(q) },
                                quantize: None,
                                categories: vec![],
                                integer: false,
                            }
                        }
                        // Optuna has no log domain on a grid: search in log space, then snap.
                        (true, q) => Searched {
                            path,
                            kind: ParamKind::Numeric { low: lower, high: upper, log, step: None },
                            quantize: q,
                            categories: vec![],
                            integer: false,
                        },
                        (false, None) => Searched {
                            path,
                            kind: ParamKind::Numeric { low: lower, high: upper, log, step: None },
                            quantize: None,
                            categories: vec![],
                            integer: false,
                        },
                    }
                }
                Domain::Integer { sampler, q, .. } => {
                    let (lo, hi) = d.integer_range().expect("an integer domain");
                    let log = matches!(sampler, Sampler::LogUniform { .. });
                    let q = q.unwrap_or(1);
                    if log && q > 1 {
                        Searched {
                            path,
                            kind: ParamKind::Numeric { low: lo as f64, high: hi as f64, log, step: None },
                            quantize: Some(q as f64),
                            categories: vec![],
                            integer: true,
                        }
                    } else {
                        Searched {
                            path,
                            kind: ParamKind::Numeric {
                                low: lo as f64,
                                high: hi as f64,
                                log,
                                step: Some(q as f64),
                            },
                            quantize: None,
                            categories: vec![],
                            integer: true,
                        }
                    }
                }
                Domain::Categorical(v) => Searched {
                    path,
                    kind: ParamKind::Categorical { n: v.len() },
                    quantize: None,
                    categories: v.clone(),
                    integer: false,
                },
                Domain::Grid(_) => {
                    return Err(unsupported(
                        &path,
                        "grid_search is not a distribution; use choice, or the default search for grids",
                    ))
                }
                Domain::Constant(_) | Domain::Function(_) | Domain::Space(_) => continue,
            };
            self.searched.push(s);
        }
        Ok(())
    }

    fn suggest(&mut self, trial_id: &str) -> Result<Suggestion> {
        let current = self.trials.len();
        let finished =
            self.trials.iter().filter(|t| matches!(t.state, State::Complete | State::Pruned)).count();
        // Registered before sampling, as Optuna's trial exists (RUNNING) while it samples.
        self.trials.push(Record {
            params: vec![],
            state: State::Running,
            value: f64::NAN,
            last_intermediate: None,
        });
        self.index.insert(trial_id.to_string(), current);
        let params = if finished < self.options.n_startup_trials || self.searched.is_empty() {
            self.sample_random()
        } else if self.options.multivariate {
            let dims: Vec<usize> = (0..self.searched.len()).collect();
            self.sample_model(current, &dims)
        } else {
            (0..self.searched.len()).map(|d| self.sample_model(current, &[d])[0]).collect()
        };
        self.trials[current].params = params.clone();
        let mut fixed = Vec::with_capacity(params.len());
        for (s, &x) in self.searched.iter().zip(&params) {
            let v = match &s.kind {
                ParamKind::Categorical { .. } => s.categories[x as usize].clone(),
                ParamKind::Numeric { low, high, .. } => {
                    let x = match s.quantize {
                        Some(q) => ((x / q).round() * q).clamp((low / q).ceil() * q, (high / q).floor() * q),
                        None => x,
                    };
                    if s.integer {
                        Value::from(x.round() as i64)
                    } else {
                        Value::from(x)
                    }
                }
            };
            fixed.push((s.path.clone(), v));
        }
        Ok(Suggestion::Config(self.space.resolve_with(&fixed, &mut self.rng)?))
    }

    fn on_trial_result(&mut self, trial_id: &str, result: &Metrics) {
        if let (Some(&i), Some(v)) = (self.index.get(trial_id), result.get(&self.metric)) {
            self.trials[i].last_intermediate = Some((result.iteration(), v));
        }
    }

    /// Ray's OptunaSearch: a trial that ends with the metric is complete with its last value
    /// (also when a scheduler stopped it early); without the metric it counts as pruned, and
    /// an error or a NaN makes it fail (left out of the model).
    fn on_trial_complete(&mut self, trial_id: &str, result: Option<&Metrics>, error: bool) {
        let Some(&i) = self.index.get(trial_id) else { return };
        let t = &mut self.trials[i];
        match result.and_then(|r| r.get(&self.metric)) {
            Some(v) if !error && !v.is_nan() => {
                t.state = State::Complete;
                t.value = v;
            }
            None if !error => t.state = State::Pruned,
            _ => t.state = State::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_weights_ramp_after_25_as_optuna() {
        assert_eq!(default_weights(3), vec![1.0; 3]);
        let w = default_weights(30);
        assert_eq!(w.len(), 30);
        // np.linspace(1/30, 1, 5) then 25 ones.
        let expect = [1.0 / 30.0, 0.275, 0.516_666_666_666_666_7, 0.758_333_333_333_333_3, 1.0];
        for (a, b) in w[..5].iter().zip(expect) {
            assert!((a - b).abs() < 1e-12, "{a} {b}");
        }
        assert!(w[5..].iter().all(|&x| x == 1.0));
        assert_eq!(default_weights(26)[0], 1.0 / 26.0);
        assert_eq!((default_gamma(0), default_gamma(11), default_gamma(1000)), (0, 2, 25));
    }
}
