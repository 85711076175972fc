//! Loggers: where the [`Trainer`](crate::Trainer) sends logged metrics and hyperparameters
//! (Lightning's `lightning.pytorch.loggers`).
//!
//! - [`CSVLogger`]: `metrics.csv` and `hparams.yaml` in `save_dir/name/version_N/`.
//! - [`TensorBoardLogger`]: TensorBoard event files (scalars, hparams, histograms of the
//!   weights and gradients) and `hparams.yaml` in `save_dir/name/version_N/`.
//!
//! The Trainer calls [`Logger::log_metrics`] with the step metrics every
//! `log_every_n_steps` optimizer steps and with the epoch metrics at each epoch's end (plus
//! `epoch`), [`Logger::log_hyperparams`] once at the start of `fit`, and
//! [`Logger::finalize`] at the end.

mod csv;
mod tensorboard;

pub use self::csv::{CSVLogger, CSVLoggerOptions};
pub use self::tensorboard::{TensorBoardLogger, TensorBoardLoggerOptions};

use crate::module::HParam;
use pyrite_core::{err, Result};
use pyrite_nn::Module;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A destination for a run's metrics (Lightning's `Logger`).
#[allow(unused_variables)]
pub trait Logger: std::any::Any {
    /// The experiment's name (`lightning_logs` by default).
    fn name(&self) -> &str;
    /// The version (`version_N`'s N, or a given string).
    fn version(&self) -> String;
    /// The run's folder, where checkpoints and plots go by default.
    fn log_dir(&self) -> PathBuf;
    /// Records metrics logged at `step`.
    fn log_metrics(&mut self, metrics: &BTreeMap<String, f64>, step: u64) -> Result<()>;
    /// Records the hyperparameters.
    fn log_hyperparams(&mut self, params: &[(String, HParam)]) -> Result<()>;
    /// Called at each epoch's end with the trained module: a logger may record weights and
    /// gradients (TensorBoard's histograms).
    fn log_module(&mut self, module: &dyn Module, step: u64) -> Result<()> {
        Ok(())
    }
    /// Writes what is buffered.
    fn save(&mut self) -> Result<()> {
        Ok(())
    }
    /// The run ended (`"success"`, `"failed"`): flush and close.
    fn finalize(&mut self, status: &str) -> Result<()> {
        self.save()
    }
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The next free `version_N` under `root` (0 if none; Lightning's `_get_next_version`).
pub(crate) fn next_version(root: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(root) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("version_")?.parse::<u64>().ok())
        .max()
        .map_or(0, |v| v + 1)
}

/// Creates a log folder, with the path in the error.
pub(crate) fn create_dir(dir: &Path, who: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| err!(Io, "{who}: cannot create the log folder {}: {e}", dir.display()))
}

/// A float as Python's `repr` writes it (`0.1`, `1.0`, `1e-05`, `inf`, `nan`), so files read
/// like Lightning's.
pub(crate) fn python_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let sci = format!("{v:e}"); // shortest round-trip digits: "1.2345e-5"
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if (-4..16).contains(&exp) {
        let s = format!("{v}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::python_float;

    #[test]
    fn floats_read_as_python_writes_them() {
        for (v, s) in [
            (0.1, "0.1"),
            (1.0, "1.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (123456.5, "123456.5"),
            (1e16, "1e+16"),
            (2.5e-7, "2.5e-07"),
            (-3.0, "-3.0"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(python_float(v), s);
        }
    }
}
