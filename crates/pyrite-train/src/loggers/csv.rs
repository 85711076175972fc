//! [`CSVLogger`]: Lightning's CSV layout, `save_dir/name/version_N/metrics.csv` and
//! `hparams.yaml`.

use super::{create_dir, next_version, python_float, Logger};
use crate::module::HParam;
use pyrite_core::{err, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// [`CSVLogger`]'s options, with Lightning's defaults.
#[derive(Clone, Debug)]
pub struct CSVLoggerOptions {
    /// The experiment folder under `save_dir` (default `"lightning_logs"`).
    pub name: String,
    /// The version folder: `None` takes the next free `version_N`; a name is used as it is.
    pub version: Option<String>,
    /// Prepended to every metric name, with a `-` (default none).
    pub prefix: String,
}

impl Default for CSVLoggerOptions {
    fn default() -> Self {
        CSVLoggerOptions { name: "lightning_logs".into(), version: None, prefix: String::new() }
    }
}

/// Logs metrics to `metrics.csv`, one row per `log_metrics` call with a `step` column and
/// Lightning's sorted columns (a new metric rewrites the file with the wider header), and the
/// hyperparameters to `hparams.yaml`.
///
/// ```
/// use pyrite::train::loggers::{CSVLogger, CSVLoggerOptions, Logger};
/// let dir = std::env::temp_dir().join(format!("pyrite-csv-doc-{}", std::process::id()));
/// let mut logger = CSVLogger::new(&dir, CSVLoggerOptions::default())?;
/// logger.log_metrics(&[("train_loss".to_string(), 0.5)].into(), 0)?;
/// logger.log_metrics(&[("train_loss".to_string(), 0.25), ("epoch".to_string(), 0.0)].into(), 1)?;
/// let csv = std::fs::read_to_string(logger.log_dir().join("metrics.csv")).unwrap();
/// assert_eq!(csv, "epoch,step,train_loss\n,0,0.5\n0,1,0.25\n");
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct CSVLogger {
    options: CSVLoggerOptions,
    version: String,
    log_dir: PathBuf,
    keys: Vec<String>,
    rows: Vec<BTreeMap<String, f64>>,
    written: usize,
    hparams: BTreeMap<String, HParam>,
}

impl CSVLogger {
    /// A logger under `save_dir`; the version folder is created now, so an unwritable
    /// `save_dir` is an error here.
    pub fn new(save_dir: impl AsRef<Path>, options: CSVLoggerOptions) -> Result<CSVLogger> {
        let root = save_dir.as_ref().join(&options.name);
        let version = match &options.version {
            Some(v) => v.clone(),
            None => format!("version_{}", next_version(&root)),
        };
        let log_dir = root.join(&version);
        create_dir(&log_dir, "CSVLogger")?;
        Ok(CSVLogger {
            options,
            version,
            log_dir,
            keys: vec![],
            rows: vec![],
            written: 0,
            hparams: BTreeMap::new(),
        })
    }

    fn metrics_file(&self) -> PathBuf {
        self.log_dir.join("metrics.csv")
    }

    fn row_line(&self, row: &BTreeMap<String, f64>) -> String {
        let cells: Vec<String> = self
            .keys
            .iter()
            .map(|k| match row.get(k) {
                None => String::new(),
                Some(v) if k == "step" || k == "epoch" => format!("{}", *v as i64),
                Some(v) => python_float(*v),
            })
            .collect();
        cells.join(",") + "\n"
    }
}

fn io(path: &Path, e: std::io::Error) -> pyrite_core::Error {
    err!(Io, "CSVLogger: writing {}: {e}", path.display())
}

impl Logger for CSVLogger {
    fn name(&self) -> &str {
        &self.options.name
    }

    fn version(&self) -> String {
        self.version.clone()
    }

    fn log_dir(&self) -> PathBuf {
        self.log_dir.clone()
    }

    fn log_metrics(&mut self, metrics: &BTreeMap<String, f64>, step: u64) -> Result<()> {
        let mut row: BTreeMap<String, f64> = metrics
            .iter()
            .map(|(k, v)| {
                let k = if self.options.prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{}-{k}", self.options.prefix)
                };
                (k, *v)
            })
            .collect();
        row.insert("step".into(), step as f64);
        self.rows.push(row);
        self.save()
    }

    fn log_hyperparams(&mut self, params: &[(String, HParam)]) -> Result<()> {
        self.hparams.extend(params.iter().cloned());
        let path = self.log_dir.join("hparams.yaml");
        std::fs::write(&path, hparams_yaml(&self.hparams)).map_err(|e| io(&path, e))
    }

    /// Writes the rows logged since the last save; a new column rewrites the whole file.
    fn save(&mut self) -> Result<()> {
        if self.written == self.rows.len() {
            return Ok(());
        }
        let path = self.metrics_file();
        let mut new_keys = false;
        for row in &self.rows[self.written..] {
            for k in row.keys() {
                if !self.keys.contains(k) {
                    self.keys.push(k.clone());
                    new_keys = true;
                }
            }
        }
        if new_keys || self.written == 0 {
            self.keys.sort();
            let mut text = self.keys.join(",") + "\n";
            for row in &self.rows {
                text.push_str(&self.row_line(row));
            }
            pyrite_serialization::atomic_write(&path, |w| {
                w.write_all(text.as_bytes()).map_err(|e| io(&path, e))
            })?;
        } else {
            let mut f = std::fs::OpenOptions::new().append(true).open(&path).map_err(|e| io(&path, e))?;
            let mut text = String::new();
            for row in &self.rows[self.written..] {
                text.push_str(&self.row_line(row));
            }
            f.write_all(text.as_bytes()).map_err(|e| io(&path, e))?;
        }
        self.written = self.rows.len();
        Ok(())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `hparams.yaml`'s text, as Lightning's `save_hparams_to_yaml` writes it (`{}` when empty).
pub(super) fn hparams_yaml(hparams: &BTreeMap<String, HParam>) -> String {
    let mut text = String::new();
    if hparams.is_empty() {
        text.push_str("{}\n");
    }
    for (k, v) in hparams {
        let v = match v {
            HParam::Str(s) if needs_quotes(s) => format!("'{}'", s.replace('\'', "''")),
            HParam::Float(f) => python_float(*f).replace("inf", ".inf").replace("nan", ".nan"),
            other => other.to_string(),
        };
        text.push_str(&format!("{k}: {v}\n"));
    }
    text
}

/// Whether YAML would read the string as something else (a number, a bool, null) or choke.
fn needs_quotes(s: &str) -> bool {
    s.is_empty()
        || s.parse::<f64>().is_ok()
        || matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "null" | "~" | "on" | "off"
        )
        || s.starts_with(|c: char| " -?:,[]{}#&*!|>'\"%@`".contains(c))
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(' ')
}
