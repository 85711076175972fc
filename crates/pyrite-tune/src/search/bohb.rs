//! BOHB's searcher (Falkner et al. 2018; HpBandSter's `BOHB` config generator behind Ray's
//! `TuneBOHB`): a kernel density model of the good and the bad configurations at the largest
//! budget that has enough results, sampled like TPE. Pair it with `HyperBandForBOHB`, which
//! annotates each milestone result with its budget (`hyperband_info/budget`).

use std::collections::{BTreeMap, BTreeSet};

use pyrite_core::{Error, ErrorKind, Result};
use serde_json::Value;

use super::tpe::truncnorm::sample_standard;
use super::{SearchProperties, Searcher, Suggestion};
use crate::rng::Rng;
use crate::space::{Domain, ParamSpace, Sampler};
use crate::trial::{Metrics, Mode};

/// The result key HyperBandForBOHB sets on a milestone result: the bracket's budget.
pub const HYPERBAND_BUDGET: &str = "hyperband_info/budget";

/// HpBandSter's BOHB arguments, with its defaults.
#[derive(Clone, Debug)]
pub struct BohbOptions {
    /// Results needed at a budget before it gets a model (`None`: dimensions + 1).
    pub min_points_in_model: Option<usize>,
    /// The best percent of results that make the "good" density (15).
    pub top_n_percent: usize,
    /// Candidates drawn per suggestion (64).
    pub num_samples: usize,
    /// The share of suggestions drawn at random, to keep exploring (1/3).
    pub random_fraction: f64,
    /// Widens the good density's bandwidth when sampling (3).
    pub bandwidth_factor: f64,
    /// The smallest bandwidth (1e-3).
    pub min_bandwidth: f64,
    /// Trials live at once, as `TuneBOHB(max_concurrent)` (0: no limit).
    pub max_concurrent: usize,
    /// The seed (`None`: from the clock).
    pub seed: Option<u64>,
}

impl Default for BohbOptions {
    fn default() -> BohbOptions {
        BohbOptions {
            min_points_in_model: None,
            top_n_percent: 15,
            num_samples: 64,
            random_fraction: 1.0 / 3.0,
            bandwidth_factor: 3.0,
            min_bandwidth: 1e-3,
            max_concurrent: 0,
            seed: None,
        }
    }
}

#[derive(Clone, Debug)]
enum Dim {
    /// Normalised to [0, 1]: `low + v * (high - low)` (in log space for log domains), optionally
    /// an integer or a multiple of `q`.
    Numeric {
        low: f64,
        high: f64,
        log: bool,
        integer: bool,
        q: Option<f64>,
    },
    Categorical {
        choices: Vec<Value>,
    },
}

/// A kernel density estimate (statsmodels' `KDEMultivariate`, normal-reference bandwidths):
/// Gaussian kernels for numbers in [0, 1], Aitchison-Aitken kernels for categories.
struct Kde {
    data: Vec<Vec<f64>>,
    bw: Vec<f64>,
}

impl Kde {
    fn new(data: Vec<Vec<f64>>, min_bandwidth: f64) -> Kde {
        let n = data.len() as f64;
        let d = data[0].len();
        let bw = (0..d)
            .map(|j| {
                let mean = data.iter().map(|r| r[j]).sum::<f64>() / n;
                let std = (data.iter().map(|r| (r[j] - mean).powi(2)).sum::<f64>() / n).sqrt();
                (1.06 * std * n.powf(-1.0 / (4.0 + d as f64))).max(min_bandwidth)
            })
            .collect();
        Kde { data, bw }
    }

    fn pdf(&self, x: &[f64], dims: &[Dim]) -> f64 {
        let inv_sqrt_2pi = 1.0 / (2.0 * std::f64::consts::PI).sqrt();
        let mut total = 0.0;
        for row in &self.data {
            let mut p = 1.0;
            for (j, dim) in dims.iter().enumerate() {
                let bw = self.bw[j];
                p *= match dim {
                    Dim::Numeric { .. } => {
                        let z = (row[j] - x[j]) / bw;
                        inv_sqrt_2pi * (-0.5 * z * z).exp() / bw
                    }
                    // Aitchison-Aitken over the domain's choices (HpBandSter counts only the
                    // levels seen in the data, which divides by zero when a column holds one).
                    Dim::Categorical { choices } => {
                        let levels = choices.len().max(2) as f64;
                        let bw = bw.min(1.0);
                        if row[j] == x[j] {
                            1.0 - bw
                        } else {
                            bw / (levels - 1.0)
                        }
                    }
                };
            }
            total += p;
        }
        total / self.data.len() as f64
    }
}

/// BOHB's model-based search (`TuneBOHB`).
///
/// ```
/// use pyrite_tune::search::{BohbOptions, BohbSearch, SearchProperties, Searcher, Suggestion};
/// use pyrite_tune::{uniform, Mode, ParamSpace};
/// let space = ParamSpace::new().with("x", uniform(0.0, 1.0));
/// let mut bohb = BohbSearch::new(BohbOptions { seed: Some(0), ..Default::default() });
/// bohb.set_search_properties(&SearchProperties { metric: "loss", mode: Mode::Min, space: &space, num_samples: None }).unwrap();
/// assert!(matches!(bohb.suggest("t0").unwrap(), Suggestion::Config(_)));
/// ```
pub struct BohbSearch {
    options: BohbOptions,
    rng: Rng,
    metric: String,
    mode: Mode,
    space: ParamSpace,
    paths: Vec<String>,
    dims: Vec<Dim>,
    min_points: usize,
    /// Per budget: the vectors and losses seen.
    results: BTreeMap<u64, (Vec<Vec<f64>>, Vec<f64>)>,
    /// Per budget with a model: the good and bad densities.
    models: BTreeMap<u64, (Kde, Kde)>,
    params: BTreeMap<String, Vec<f64>>,
    running: BTreeSet<String>,
    paused: BTreeSet<String>,
}

/// Budgets as map keys (exact for the integer and simple fractional budgets HyperBand uses).
fn budget_key(b: f64) -> u64 {
    (b * 1e6).round() as u64
}

impl BohbSearch {
    /// A BOHB searcher with these options.
    pub fn new(options: BohbOptions) -> BohbSearch {
        let rng = options.seed.map_or_else(Rng::from_entropy, Rng::seed_from);
        BohbSearch {
            options,
            rng,
            metric: String::new(),
            mode: Mode::Min,
            space: ParamSpace::new(),
            paths: vec![],
            dims: vec![],
            min_points: 0,
            results: BTreeMap::new(),
            models: BTreeMap::new(),
            params: BTreeMap::new(),
            running: BTreeSet::new(),
            paused: BTreeSet::new(),
        }
    }

    /// The budgets that have a model so far.
    pub fn model_budgets(&self) -> Vec<f64> {
        self.models.keys().map(|&k| k as f64 / 1e6).collect()
    }

    fn random_vector(&mut self) -> Vec<f64> {
        let rng = &mut self.rng;
        self.dims
            .iter()
            .map(|d| match d {
                Dim::Numeric { .. } => rng.uniform(),
                Dim::Categorical { choices } => rng.below(choices.len() as u64) as f64,
            })
            .collect()
    }

    fn model_vector(&mut self) -> Option<Vec<f64>> {
        let (good, bad) = self.models.values().next_back()?;
        let mut best: Option<(f64, Vec<f64>)> = None;
        for _ in 0..self.options.num_samples {
            let datum = &good.data[self.rng.below(good.data.len() as u64) as usize];
            let mut x = Vec::with_capacity(self.dims.len());
            for (j, d) in self.dims.iter().enumerate() {
                let bw = good.bw[j].max(self.options.min_bandwidth);
                match d {
                    Dim::Numeric { .. } => {
                        let m = datum[j];
                        let s = self.options.bandwidth_factor * bw;
                        let z = sample_standard(-m / s, (1.0 - m) / s, &mut self.rng);
                        x.push((m + s * z).clamp(0.0, 1.0));
                    }
                    Dim::Categorical { choices } => {
                        if self.rng.uniform() < 1.0 - bw {
                            x.push(datum[j]);
                        } else {
                            x.push(self.rng.below(choices.len() as u64) as f64);
                        }
                    }
                }
            }
            let l = good.pdf(&x, &self.dims);
            let g = bad.pdf(&x, &self.dims);
            let score = g.max(1e-32) / l.max(1e-32);
            if !score.is_finite() && l.is_finite() {
                return Some(x);
            }
            if best.as_ref().is_none_or(|(b, _)| score < *b) {
                best = Some((score, x));
            }
        }
        best.map(|b| b.1)
    }

    fn to_value(&self, j: usize, v: f64) -> Value {
        match &self.dims[j] {
            Dim::Categorical { choices } => choices[(v as usize).min(choices.len() - 1)].clone(),
            Dim::Numeric { low, high, log, integer, q } => {
                let x =
                    if *log { (low.ln() + v * (high.ln() - low.ln())).exp() } else { low + v * (high - low) };
                if *integer {
                    // ConfigSpace's integer cells: [0, 1] split evenly over low..=high.
                    let n = (high - low + 1.0).max(1.0);
                    let i = if *log { x.round() } else { (low + (v * n).floor()).min(*high) };
                    let i = match q {
                        Some(q) => ((i / q).round() * q).clamp((low / q).ceil() * q, (high / q).floor() * q),
                        None => i.clamp(*low, *high),
                    };
                    Value::from(i as i64)
                } else {
                    let x = match q {
                        Some(q) => ((x / q).round() * q).clamp((low / q).ceil() * q, (high / q).floor() * q),
                        None => x,
                    };
                    Value::from(x)
                }
            }
        }
    }

    fn new_result(&mut self, vector: Vec<f64>, budget: f64, loss: f64) {
        let key = budget_key(budget);
        let loss = if loss.is_finite() { loss } else { f64::INFINITY };
        // A result below the largest modelled budget is dropped (HpBandSter).
        if self.models.keys().next_back().is_some_and(|&b| b > key) {
            return;
        }
        let entry = self.results.entry(key).or_default();
        entry.0.push(vector);
        entry.1.push(loss);
        let n = entry.0.len();
        if n < self.min_points {
            return;
        }
        let d = self.dims.len();
        let n_good = self.min_points.max(self.options.top_n_percent * n / 100);
        let n_bad = self.min_points.max((100 - self.options.top_n_percent) * n / 100);
        let mut idx: Vec<usize> = (0..n).collect();
        idx.sort_by(|&a, &b| entry.1[a].total_cmp(&entry.1[b]));
        let good: Vec<Vec<f64>> = idx.iter().take(n_good).map(|&i| entry.0[i].clone()).collect();
        let bad: Vec<Vec<f64>> = idx.iter().skip(n_good).take(n_bad).map(|&i| entry.0[i].clone()).collect();
        if good.len() <= d || bad.len() <= d {
            return;
        }
        let min_bw = self.options.min_bandwidth;
        self.models.insert(key, (Kde::new(good, min_bw), Kde::new(bad, min_bw)));
    }
}

impl Searcher for BohbSearch {
    fn name(&self) -> String {
        "BOHB".into()
    }

    fn set_search_properties(&mut self, props: &SearchProperties<'_>) -> Result<()> {
        props.space.validate()?;
        self.metric = props.metric.to_string();
        self.mode = props.mode;
        self.space = props.space.clone();
        self.paths.clear();
        self.dims.clear();
        for (path, d) in props.space.flatten() {
            let dim = match d {
                Domain::Float { sampler: Sampler::Normal { .. }, .. } => {
                    return Err(Error::new(ErrorKind::Value, format!("BOHB cannot search '{path}': randn is unbounded")))
                }
                Domain::Float { lower, upper, sampler, q } => Dim::Numeric {
                    low: lower,
                    high: upper,
                    log: matches!(sampler, Sampler::LogUniform { .. }),
                    integer: false,
                    q,
                },
                Domain::Integer { sampler, q, .. } => {
                    let (lo, hi) = d.integer_range().expect("an integer domain");
                    Dim::Numeric {
                        low: lo as f64,
                        high: hi as f64,
                        log: matches!(sampler, Sampler::LogUniform { .. }),
                        integer: true,
                        q: q.filter(|&q| q > 1).map(|q| q as f64),
                    }
                }
                Domain::Categorical(v) => Dim::Categorical { choices: v.clone() },
                Domain::Grid(_) => {
                    return Err(Error::new(
                        ErrorKind::Value,
                        format!("BOHB cannot search '{path}': grid search parameters cannot be converted to a BOHB search space"),
                    ))
                }
                Domain::Constant(_) | Domain::Function(_) | Domain::Space(_) => continue,
            };
            self.paths.push(path);
            self.dims.push(dim);
        }
        let d = self.dims.len();
        self.min_points = self.options.min_points_in_model.unwrap_or(d + 1).max(d + 1);
        Ok(())
    }

    fn suggest(&mut self, trial_id: &str) -> Result<Suggestion> {
        if self.options.max_concurrent > 0 && self.running.len() >= self.options.max_concurrent {
            return Ok(Suggestion::Wait);
        }
        let use_model = !self.models.is_empty() && self.rng.uniform() >= self.options.random_fraction;
        let vector = if use_model { self.model_vector() } else { None };
        let vector = match vector {
            Some(v) => v,
            None => self.random_vector(),
        };
        let fixed: Vec<(String, Value)> =
            (0..self.dims.len()).map(|j| (self.paths[j].clone(), self.to_value(j, vector[j]))).collect();
        self.params.insert(trial_id.to_string(), vector);
        self.running.insert(trial_id.to_string());
        Ok(Suggestion::Config(self.space.resolve_with(&fixed, &mut self.rng)?))
    }

    fn on_trial_result(&mut self, trial_id: &str, result: &Metrics) {
        if !self.paused.contains(trial_id) {
            self.running.insert(trial_id.to_string());
        }
        if let (Some(budget), Some(v), Some(x)) =
            (result.get(HYPERBAND_BUDGET), result.get(&self.metric), self.params.get(trial_id))
        {
            let loss = -self.mode.sign() * v;
            let x = x.clone();
            self.new_result(x, budget, loss);
        }
    }

    fn on_trial_complete(&mut self, trial_id: &str, _result: Option<&Metrics>, _error: bool) {
        self.params.remove(trial_id);
        self.paused.remove(trial_id);
        self.running.remove(trial_id);
    }

    fn on_pause(&mut self, trial_id: &str) {
        self.paused.insert(trial_id.to_string());
        self.running.remove(trial_id);
    }

    fn on_unpause(&mut self, trial_id: &str) {
        self.paused.remove(trial_id);
        self.running.insert(trial_id.to_string());
    }
}
