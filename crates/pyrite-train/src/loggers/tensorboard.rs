//! [`TensorBoardLogger`]: Lightning's TensorBoard logger, TensorBoard event files in
//! `save_dir/name/version_N/` written by `pyrite-tensorboard`'s `SummaryWriter`.

use super::csv::hparams_yaml;
use super::{create_dir, next_version, Logger};
use crate::module::HParam;
use pyrite_core::{err, Result};
use pyrite_nn::Module;
use pyrite_tensorboard::{summary, HParamValue, SummaryWriter, SummaryWriterOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// [`TensorBoardLogger`]'s options, with Lightning's defaults.
#[derive(Clone, Debug)]
pub struct TensorBoardLoggerOptions {
    /// The experiment folder under `save_dir` (default `"lightning_logs"`; empty: none).
    pub name: String,
    /// The version folder: `None` takes the next free `version_N`; a name is used as it is.
    pub version: Option<String>,
    /// Lightning's `log_graph`: accepted for compatibility; no graph is written (Pyrite has no
    /// traced graph to give TensorBoard).
    pub log_graph: bool,
    /// `log_hyperparams` also logs `hp_metric = -1` (the placeholder metric the hparams
    /// dashboard shows; log a real `hp_metric` later to replace it). Default true.
    pub default_hp_metric: bool,
    /// Prepended to every metric name, with a `-` (default none).
    pub prefix: String,
    /// A folder under the version folder for the event files (`version_0/<sub_dir>/`).
    pub sub_dir: Option<PathBuf>,
    /// Histograms of every parameter (tag `<name>`) and of its gradient (tag `<name>/grad`,
    /// when it has one) at each epoch's end, at the global step. Default true.
    pub log_histograms: bool,
    /// The `SummaryWriter`'s `max_queue` (10) and `flush_secs` (120).
    pub max_queue: usize,
    pub flush_secs: f64,
}

impl Default for TensorBoardLoggerOptions {
    fn default() -> Self {
        TensorBoardLoggerOptions {
            name: "lightning_logs".into(),
            version: None,
            log_graph: false,
            default_hp_metric: true,
            prefix: String::new(),
            sub_dir: None,
            log_histograms: true,
            max_queue: 10,
            flush_secs: 120.0,
        }
    }
}

/// Logs to TensorBoard, like Lightning's `TensorBoardLogger`: a scalar per metric at the
/// Trainer's global step; the hyperparameters as the hparams plugin's summaries, with
/// `hp_metric = -1` when `default_hp_metric`; `hparams.yaml` in the version folder; and, at
/// each epoch's end ([`Logger::log_module`]), a histogram of each parameter, `<name>` (for
/// example `fc1.weight`), and of its gradient, `<name>/grad`.
///
/// The event files go to `save_dir/name/version/[sub_dir]`, [`log_dir`](Logger::log_dir);
/// read them with `tensorboard --logdir save_dir` or [`pyrite_tensorboard::read_dir_events`].
///
/// ```
/// use pyrite::train::loggers::{Logger, TensorBoardLogger, TensorBoardLoggerOptions};
/// use pyrite::utils::tensorboard::{read_dir_events, scalars};
/// let dir = std::env::temp_dir().join(format!("pyrite-tb-logger-doc-{}", std::process::id()));
/// let mut logger = TensorBoardLogger::new(&dir, TensorBoardLoggerOptions::default())?;
/// logger.log_metrics(&[("train_loss".to_string(), 0.5)].into(), 3)?;
/// logger.finalize("success")?;
/// let events = read_dir_events(logger.log_dir())?;
/// assert_eq!(scalars(&events), [(3, "train_loss".to_string(), 0.5)]);
/// assert!(logger.log_dir().join("hparams.yaml").exists());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct TensorBoardLogger {
    options: TensorBoardLoggerOptions,
    version: String,
    /// The version folder (`hparams.yaml`).
    version_dir: PathBuf,
    /// Where the event files go (the version folder or its `sub_dir`).
    log_dir: PathBuf,
    writer: Option<SummaryWriter>,
    hparams: BTreeMap<String, HParam>,
}

impl TensorBoardLogger {
    /// A logger under `save_dir`; the folder and the first event file are created now, so an
    /// unwritable `save_dir` is an error here.
    pub fn new(save_dir: impl AsRef<Path>, options: TensorBoardLoggerOptions) -> Result<TensorBoardLogger> {
        let root = save_dir.as_ref().join(&options.name);
        let version = match &options.version {
            Some(v) => v.clone(),
            None => format!("version_{}", next_version(&root)),
        };
        let version_dir = root.join(&version);
        let log_dir = match &options.sub_dir {
            Some(s) => version_dir.join(s),
            None => version_dir.clone(),
        };
        create_dir(&log_dir, "TensorBoardLogger")?;
        let mut logger = TensorBoardLogger {
            options,
            version,
            version_dir,
            log_dir,
            writer: None,
            hparams: BTreeMap::new(),
        };
        logger.experiment()?;
        Ok(logger)
    }

    /// The `SummaryWriter` (Lightning's `logger.experiment`), to log images, text or anything
    /// else. After [`finalize`](Logger::finalize) a new event file is started, as PyTorch's
    /// writer does after `close`.
    pub fn experiment(&mut self) -> Result<&mut SummaryWriter> {
        if self.writer.is_none() {
            let w = SummaryWriter::with_options(SummaryWriterOptions {
                log_dir: Some(self.log_dir.clone()),
                max_queue: self.options.max_queue,
                flush_secs: self.options.flush_secs,
                ..Default::default()
            })
            .map_err(|e| err!(Io, "TensorBoardLogger: {e}"))?;
            self.writer = Some(w);
        }
        Ok(self.writer.as_mut().expect("set above"))
    }

    fn key(&self, k: &str) -> String {
        if self.options.prefix.is_empty() {
            k.to_string()
        } else {
            format!("{}-{k}", self.options.prefix)
        }
    }

    fn write_yaml_if_missing(&self) -> Result<()> {
        let path = self.version_dir.join("hparams.yaml");
        if self.version_dir.is_dir() && !path.exists() {
            std::fs::write(&path, hparams_yaml(&self.hparams))
                .map_err(|e| err!(Io, "TensorBoardLogger: writing {}: {e}", path.display()))?;
        }
        Ok(())
    }
}

fn hparam_value(v: &HParam) -> HParamValue {
    match v {
        HParam::Bool(b) => HParamValue::Bool(*b),
        HParam::Int(i) => HParamValue::Number(*i as f64),
        HParam::Float(f) => HParamValue::Number(*f),
        HParam::Str(s) => HParamValue::Str(s.clone()),
    }
}

impl Logger for TensorBoardLogger {
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
        let keyed: Vec<(String, f64)> = metrics.iter().map(|(k, v)| (self.key(k), *v)).collect();
        let w = self.experiment()?;
        for (k, v) in keyed {
            w.add_scalar(&k, v, step)?;
        }
        Ok(())
    }

    /// The hyperparameters as the hparams plugin's three summaries (at step 0), after
    /// `hp_metric = -1` when `default_hp_metric` (without it nothing is written to the event
    /// file, as in Lightning); `hparams.yaml` is rewritten with every hyperparameter so far.
    fn log_hyperparams(&mut self, params: &[(String, HParam)]) -> Result<()> {
        self.hparams.extend(params.iter().cloned());
        let path = self.version_dir.join("hparams.yaml");
        std::fs::write(&path, hparams_yaml(&self.hparams))
            .map_err(|e| err!(Io, "TensorBoardLogger: writing {}: {e}", path.display()))?;
        if !self.options.default_hp_metric {
            return Ok(());
        }
        let hp_metric = self.key("hp_metric");
        let hp: Vec<(String, HParamValue)> =
            params.iter().map(|(k, v)| (k.clone(), hparam_value(v))).collect();
        let w = self.experiment()?;
        w.add_scalar_with(&hp_metric, -1.0, None, None)?;
        let (exp, ssi, sei) = summary::hparams(&hp, &["hp_metric".to_string()]);
        for s in [exp, ssi, sei] {
            w.add_summary(s, None, None)?;
        }
        Ok(())
    }

    fn log_module(&mut self, module: &dyn Module, step: u64) -> Result<()> {
        if !self.options.log_histograms {
            return Ok(());
        }
        let prefix = self.options.prefix.clone();
        let tag = |n: &str| if prefix.is_empty() { n.to_string() } else { format!("{prefix}-{n}") };
        let w = self.experiment()?;
        for (name, p) in module.named_parameters() {
            if p.numel() == 0 {
                continue;
            }
            // A parameter without one finite value has no histogram: skipped, not an error
            // that would stop the run.
            if let Ok(s) = summary::histogram(&tag(&name), &p) {
                w.add_summary(s, Some(step), None)?;
            }
            if let Some(g) = p.grad()
                && let Ok(s) = summary::histogram(&tag(&format!("{name}/grad")), &g)
            {
                w.add_summary(s, Some(step), None)?;
            }
        }
        Ok(())
    }

    /// Flushes the event files and writes `hparams.yaml` if it is missing.
    fn save(&mut self) -> Result<()> {
        if let Some(w) = self.writer.as_mut() {
            w.flush()?;
        }
        self.write_yaml_if_missing()
    }

    fn finalize(&mut self, status: &str) -> Result<()> {
        if let Some(mut w) = self.writer.take() {
            w.close()?;
        }
        if status == "success" {
            self.write_yaml_if_missing()?;
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
