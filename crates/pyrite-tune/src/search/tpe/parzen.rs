//! Optuna's Parzen estimator: a mixture of product kernels, one per observation plus a prior
//! kernel, with truncated normals for numbers (in log space for log domains, as probability
//! masses of the step's cell for discrete ones) and smoothed histograms for categories.

use super::truncnorm::{log_gauss_mass, sample_standard, LN_SQRT_2PI};
use crate::rng::Rng;

/// How one searched parameter is represented inside TPE.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamKind {
    /// A number in `[low, high]`, log-scaled or not, optionally on a grid of `step`.
    Numeric { low: f64, high: f64, log: bool, step: Option<f64> },
    /// An index into `n` categories.
    Categorical { n: usize },
}

/// The estimator's knobs (Optuna's `_ParzenEstimatorParameters`).
#[derive(Clone, Copy, Debug)]
pub struct ParzenOptions {
    pub prior_weight: f64,
    pub consider_magic_clip: bool,
    pub consider_endpoints: bool,
    pub weights: fn(usize) -> Vec<f64>,
}

enum Dist {
    Categorical {
        /// Per kernel, the probabilities of the categories.
        weights: Vec<Vec<f64>>,
    },
    Numeric {
        mus: Vec<f64>,
        sigmas: Vec<f64>,
        /// `1 / σ` per kernel (the density's inner loop multiplies).
        inv_sigmas: Vec<f64>,
        /// Per kernel, `ln σ + ln(Φ(β) - Φ(α))` over the adapted range.
        log_norm: Vec<f64>,
        /// The bounds as given (for clipping samples to the grid).
        low: f64,
        high: f64,
        /// The bounds widened by half a step and log-scaled: the kernels' support.
        alow: f64,
        ahigh: f64,
        log: bool,
        step: Option<f64>,
    },
}

/// A mixture of product distributions over the searched parameters.
pub struct ParzenEstimator {
    /// Per kernel: its log weight plus the normalising terms of every continuous dimension
    /// (`-ln √(2π) - ln σ - ln mass`), so the density's loop only adds `-z² / 2` per dimension.
    base: Vec<f64>,
    weights: Vec<f64>,
    dists: Vec<Dist>,
}

impl ParzenEstimator {
    /// The estimator of `observations` (one row per trial, one column per parameter).
    pub fn new(observations: &[Vec<f64>], params: &[ParamKind], o: &ParzenOptions) -> ParzenEstimator {
        let n = observations.len();
        let mut weights = if n == 0 {
            vec![1.0]
        } else {
            let mut w: Vec<f64> = (o.weights)(n);
            w.truncate(n);
            w.push(o.prior_weight);
            w
        };
        let total: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= total);
        let dists: Vec<Dist> = params
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let col: Vec<f64> = observations.iter().map(|row| row[j]).collect();
                match *p {
                    ParamKind::Categorical { n: k } => categorical(&col, k, o),
                    ParamKind::Numeric { low, high, log, step } => numeric(&col, low, high, log, step, o),
                }
            })
            .collect();
        let log_weights: Vec<f64> = weights.iter().map(|w| w.ln()).collect();
        let mut base = log_weights.clone();
        for d in &dists {
            if let Dist::Numeric { log_norm, step: None, .. } = d {
                for (b, n) in base.iter_mut().zip(log_norm) {
                    *b -= LN_SQRT_2PI + n;
                }
            }
        }
        ParzenEstimator { base, weights, dists }
    }

    /// `size` draws, each a row of parameter values (category indices for categoricals).
    pub fn sample(&self, rng: &mut Rng, size: usize) -> Vec<Vec<f64>> {
        (0..size)
            .map(|_| {
                let k = rng.weighted_index(&self.weights);
                self.dists
                    .iter()
                    .map(|d| match d {
                        Dist::Categorical { weights } => rng.weighted_index(&weights[k]) as f64,
                        Dist::Numeric { mus, sigmas, low, high, alow, ahigh, log, step, .. } => {
                            let (mu, s) = (mus[k], sigmas[k]);
                            let z = sample_standard((alow - mu) / s, (ahigh - mu) / s, rng);
                            let mut x = mu + s * z;
                            if *log {
                                x = x.exp();
                            }
                            if let Some(step) = step {
                                x = (low + ((x - low) / step).round() * step).clamp(*low, *high);
                            }
                            x
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// The mixture's log-density (log-mass for discrete parameters) at each row of `x`.
    pub fn log_pdf(&self, x: &[Vec<f64>]) -> Vec<f64> {
        let nk = self.weights.len();
        let mut acc = vec![0.0; nk];
        x.iter()
            .map(|row| {
                acc.copy_from_slice(&self.base);
                for (j, d) in self.dists.iter().enumerate() {
                    let v = row[j];
                    match d {
                        Dist::Categorical { weights } => {
                            let c = v as usize;
                            for (a, w) in acc.iter_mut().zip(weights) {
                                *a += w[c].ln();
                            }
                        }
                        Dist::Numeric { mus, inv_sigmas, log, step: None, .. } => {
                            let xv = if *log { v.ln() } else { v };
                            for ((a, mu), inv) in acc.iter_mut().zip(mus).zip(inv_sigmas) {
                                let z = (xv - mu) * inv;
                                *a -= 0.5 * z * z;
                            }
                        }
                        Dist::Numeric { mus, sigmas, log_norm, log, step: Some(step), .. } => {
                            let (l, r) = (v - step / 2.0, v + step / 2.0);
                            let (l, r) = if *log { (l.ln(), r.ln()) } else { (l, r) };
                            for k in 0..nk {
                                let (mu, s) = (mus[k], sigmas[k]);
                                // log_norm holds ln σ + ln mass; the cell's mass needs no σ.
                                acc[k] += log_gauss_mass((l - mu) / s, (r - mu) / s) - (log_norm[k] - s.ln());
                            }
                        }
                    }
                }
                let max = acc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                if max == f64::NEG_INFINITY {
                    return f64::NEG_INFINITY;
                }
                // Terms below e^-40 of the largest change nothing in f64 (and exp's underflow path
                // is slow): they are skipped.
                max + acc.iter().filter(|&&a| a - max > -40.0).map(|a| (a - max).exp()).sum::<f64>().ln()
            })
            .collect()
    }
}

fn categorical(col: &[f64], k: usize, o: &ParzenOptions) -> Dist {
    if col.is_empty() {
        return Dist::Categorical { weights: vec![vec![1.0 / k as f64; k]] };
    }
    let n_kernels = col.len() + 1;
    let mut weights = vec![vec![o.prior_weight / n_kernels as f64; k]; n_kernels];
    for (row, &c) in weights.iter_mut().zip(col) {
        row[c as usize] += 1.0;
    }
    for row in &mut weights {
        let s: f64 = row.iter().sum();
        let s = if s == 0.0 { 1.0 } else { s };
        row.iter_mut().for_each(|w| *w /= s);
    }
    Dist::Categorical { weights }
}

fn numeric(col: &[f64], low: f64, high: f64, log: bool, step: Option<f64>, o: &ParzenOptions) -> Dist {
    let (mut alow, mut ahigh) = (low, high);
    if let Some(step) = step {
        alow -= step / 2.0;
        ahigh += step / 2.0;
    }
    let mut mus: Vec<f64> = col.to_vec();
    if log {
        mus.iter_mut().for_each(|m| *m = m.ln());
        alow = alow.ln();
        ahigh = ahigh.ln();
    }
    let n = mus.len();
    // Each kernel's width: the larger gap to its sorted neighbours (the range's ends count as
    // neighbours), then clipped.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| mus[a].total_cmp(&mus[b]));
    let mut with_ends = Vec::with_capacity(n + 2);
    with_ends.push(alow);
    with_ends.extend(order.iter().map(|&i| mus[i]));
    with_ends.push(ahigh);
    let mut sorted_sigmas: Vec<f64> =
        (1..=n).map(|i| (with_ends[i] - with_ends[i - 1]).max(with_ends[i + 1] - with_ends[i])).collect();
    if !o.consider_endpoints && with_ends.len() >= 4 {
        sorted_sigmas[0] = with_ends[2] - with_ends[1];
        sorted_sigmas[n - 1] = with_ends[n] - with_ends[n - 1];
    }
    let mut sigmas = vec![0.0; n];
    for (pos, &i) in order.iter().enumerate() {
        sigmas[i] = sorted_sigmas[pos];
    }
    let maxsigma = ahigh - alow;
    let minsigma = if o.consider_magic_clip {
        (ahigh - alow) / (100.0f64).min(1.0 + (n + 1) as f64)
    } else {
        f64::EPSILON
    };
    sigmas.iter_mut().for_each(|s| *s = s.clamp(minsigma, maxsigma));
    mus.push(0.5 * (alow + ahigh));
    sigmas.push(ahigh - alow);
    let log_norm = mus
        .iter()
        .zip(&sigmas)
        .map(|(&mu, &s)| s.ln() + log_gauss_mass((alow - mu) / s, (ahigh - mu) / s))
        .collect();
    let inv_sigmas = sigmas.iter().map(|s| 1.0 / s).collect();
    Dist::Numeric { mus, sigmas, inv_sigmas, log_norm, low, high, alow, ahigh, log, step }
}
