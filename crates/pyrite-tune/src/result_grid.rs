//! `tune.ResultGrid`: every trial's config, last result, history, checkpoint and error.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use pyrite_core::{Error, ErrorKind, Result};

use crate::config::{short_value, Config};
use crate::session::{io_err, Checkpoint};
use crate::trial::{Metrics, Mode, TrialStatus};

/// One trial's outcome (`ray.train.Result`).
#[derive(Clone, Debug)]
pub struct TrialResult {
    pub trial_id: String,
    pub config: Config,
    pub status: TrialStatus,
    /// The last reported result.
    pub metrics: Metrics,
    /// Every reported result, in order (`metrics_dataframe`).
    pub metrics_history: Vec<Metrics>,
    /// The latest checkpoint.
    pub checkpoint: Option<Checkpoint>,
    /// Why it failed for good.
    pub error: Option<String>,
    /// Its folder.
    pub path: PathBuf,
}

/// The results of an experiment.
#[derive(Clone, Debug)]
pub struct ResultGrid {
    results: Vec<TrialResult>,
    metric: Option<String>,
    mode: Option<Mode>,
    experiment_path: PathBuf,
}

impl ResultGrid {
    pub(crate) fn new(
        results: Vec<TrialResult>,
        metric: Option<String>,
        mode: Option<Mode>,
        path: PathBuf,
    ) -> ResultGrid {
        ResultGrid { results, metric, mode, experiment_path: path }
    }

    /// The number of trials.
    pub fn len(&self) -> usize {
        self.results.len()
    }

    /// Whether there were none.
    pub fn is_empty(&self) -> bool {
        self.results.is_empty()
    }

    /// Every trial's result, in creation order.
    pub fn results(&self) -> &[TrialResult] {
        &self.results
    }

    /// The experiment's folder.
    pub fn experiment_path(&self) -> &Path {
        &self.experiment_path
    }

    /// The trials that failed for good (`num_errors` is its length).
    pub fn errors(&self) -> Vec<&TrialResult> {
        self.results.iter().filter(|r| r.status == TrialStatus::Error).collect()
    }

    /// The trial with the best last result of `metric` (`None`: the TuneConfig's metric and
    /// mode), NaN and infinite values left out (Ray's defaults: scope "last",
    /// `filter_nan_and_inf`).
    pub fn get_best_result(&self, metric: Option<&str>, mode: Option<Mode>) -> Result<&TrialResult> {
        let metric = metric.or(self.metric.as_deref()).ok_or_else(|| {
            Error::new(
                ErrorKind::Value,
                "no metric to rank by: pass one to get_best_result or set TuneConfig's `metric`",
            )
        })?;
        let mode = mode.or(self.mode).ok_or_else(|| {
            Error::new(
                ErrorKind::Value,
                "no mode to rank by: pass one to get_best_result or set TuneConfig's `mode`",
            )
        })?;
        let mut best: Option<(&TrialResult, f64)> = None;
        for r in &self.results {
            let Some(v) = r.metrics.get(metric).filter(|v| v.is_finite()) else { continue };
            if best.is_none_or(|(_, b)| mode.better(v, b)) {
                best = Some((r, v));
            }
        }
        best.map(|b| b.0).ok_or_else(|| {
            Error::new(
                ErrorKind::Value,
                format!("no trial reported a finite '{metric}'; cannot pick the best one"),
            )
        })
    }

    /// One row per trial: id, status, config columns (`config/...`), and the last result's
    /// metrics (Ray's `get_dataframe()`), as CSV.
    pub fn to_csv(&self) -> String {
        let mut config_keys: Vec<String> = Vec::new();
        let mut metric_keys: Vec<String> = Vec::new();
        for r in &self.results {
            for (k, _) in r.config.flat() {
                if !config_keys.contains(&k) {
                    config_keys.push(k);
                }
            }
            for k in r.metrics.0.keys() {
                if !metric_keys.contains(k) {
                    metric_keys.push(k.clone());
                }
            }
        }
        let mut out = String::from("trial_id,status");
        for k in &metric_keys {
            let _ = write!(out, ",{}", csv_cell(k));
        }
        for k in &config_keys {
            let _ = write!(out, ",{}", csv_cell(&format!("config/{k}")));
        }
        out.push('\n');
        for r in &self.results {
            let _ = write!(out, "{},{}", r.trial_id, r.status);
            for k in &metric_keys {
                let _ = write!(out, ",{}", r.metrics.get(k).map(|v| v.to_string()).unwrap_or_default());
            }
            for k in &config_keys {
                let _ = write!(
                    out,
                    ",{}",
                    r.config.value(k).map(|v| csv_cell(&short_value(v))).unwrap_or_default()
                );
            }
            out.push('\n');
        }
        out
    }

    /// Writes [`ResultGrid::to_csv`] to `path`.
    pub fn write_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_csv()).map_err(|e| io_err(path, e))
    }

    /// Draws the experiment's figures into its folder (see [`crate::plots::plot_results`]):
    /// per-trial curves, the best value over time, parameters against the metric.
    pub fn plot(&self, metric: Option<&str>, mode: Option<Mode>) -> Result<Vec<PathBuf>> {
        let metric = metric.or(self.metric.as_deref()).ok_or_else(|| {
            Error::new(ErrorKind::Value, "no metric to plot: pass one or set TuneConfig's `metric`")
        })?;
        let mode = mode.or(self.mode).unwrap_or(Mode::Min);
        crate::plots::plot_results(self, metric, mode)
    }

    /// The final status table.
    pub fn table(&self) -> String {
        let view = crate::progress::View {
            metric: self.metric.as_deref(),
            trials: self
                .results
                .iter()
                .map(|r| (r.trial_id.as_str(), r.status, &r.config, r.metrics_history.last()))
                .collect(),
        };
        crate::progress::render(&view, std::time::Duration::ZERO)
    }
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
