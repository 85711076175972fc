//! What a trial is: its id, status, config and results; the objective's direction; the
//! reported metrics.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use pyrite_core::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

/// Minimize or maximize the metric (`mode="min"` / `"max"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Min,
    Max,
}

impl Mode {
    /// `+1` for max and `-1` for min: multiplying a metric by it makes larger better.
    pub fn sign(self) -> f64 {
        match self {
            Mode::Max => 1.0,
            Mode::Min => -1.0,
        }
    }

    /// Whether `a` is better than `b` (NaN is never better).
    pub fn better(self, a: f64, b: f64) -> bool {
        match self {
            Mode::Max => a > b,
            Mode::Min => a < b,
        }
    }

    /// `"min"` or `"max"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Min => "min",
            Mode::Max => "max",
        }
    }
}

impl FromStr for Mode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Mode> {
        match s {
            "min" => Ok(Mode::Min),
            "max" => Ok(Mode::Max),
            _ => Err(Error::new(ErrorKind::Value, format!("`mode` must be 'min' or 'max', got '{s}'"))),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A trial's state, with Ray's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TrialStatus {
    /// Waiting to start (or to be resumed).
    Pending,
    /// Its trainable is running.
    Running,
    /// Stopped by a scheduler for now, to be resumed from its checkpoint.
    Paused,
    /// Finished: it returned, reached a stop condition or was stopped by the scheduler.
    Terminated,
    /// It failed more than `max_failures` times.
    Error,
}

impl TrialStatus {
    /// `"PENDING"`, `"RUNNING"`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            TrialStatus::Pending => "PENDING",
            TrialStatus::Running => "RUNNING",
            TrialStatus::Paused => "PAUSED",
            TrialStatus::Terminated => "TERMINATED",
            TrialStatus::Error => "ERROR",
        }
    }

    /// Parses [`TrialStatus::as_str`]'s names.
    pub fn parse(s: &str) -> Option<TrialStatus> {
        Some(match s {
            "PENDING" => TrialStatus::Pending,
            "RUNNING" => TrialStatus::Running,
            "PAUSED" => TrialStatus::Paused,
            "TERMINATED" => TrialStatus::Terminated,
            "ERROR" => TrialStatus::Error,
            _ => return None,
        })
    }

    /// Terminated or errored.
    pub fn is_finished(self) -> bool {
        matches!(self, TrialStatus::Terminated | TrialStatus::Error)
    }
}

impl fmt::Display for TrialStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The auto-filled result keys (Ray's names).
pub const TRAINING_ITERATION: &str = "training_iteration";
/// Seconds since the trial (first) started, across restarts.
pub const TIME_TOTAL_S: &str = "time_total_s";
/// Seconds this iteration took.
pub const TIME_THIS_ITER_S: &str = "time_this_iter_s";
/// Unix time of the report.
pub const TIMESTAMP: &str = "timestamp";

/// One reported result: numeric metrics by name, including the auto-filled
/// `training_iteration`, `time_total_s`, `time_this_iter_s` and `timestamp`.
///
/// ```
/// use pyrite_tune::Metrics;
/// let m = Metrics::from([("loss", 0.25), ("accuracy", 0.9)]);
/// assert_eq!(m.get("loss"), Some(0.25));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metrics(pub BTreeMap<String, f64>);

impl Metrics {
    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }

    /// Sets `name`.
    pub fn insert(&mut self, name: impl Into<String>, value: f64) {
        self.0.insert(name.into(), value);
    }

    /// `training_iteration` (0 when missing).
    pub fn iteration(&self) -> u64 {
        self.get(TRAINING_ITERATION).unwrap_or(0.0) as u64
    }
}

impl<K: Into<String>, const N: usize> From<[(K, f64); N]> for Metrics {
    fn from(pairs: [(K, f64); N]) -> Metrics {
        Metrics(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

impl<K: Into<String>> FromIterator<(K, f64)> for Metrics {
    fn from_iter<I: IntoIterator<Item = (K, f64)>>(iter: I) -> Metrics {
        Metrics(iter.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}
