//! [`ModelCheckpoint`]: Lightning's checkpoint callback, on [`CheckpointManager`].

use crate::callback::Callback;
use crate::checkpoint::{CheckpointManager, CheckpointOptions};
use crate::module::LightningModule;
use crate::results::dict_of;
use crate::trainer::Trainer;
use crate::Mode;
use pyrite_core::{bail, Result};
use pyrite_serialization::Object;
use std::path::{Path, PathBuf};

/// [`ModelCheckpoint`]'s options, with Lightning's defaults.
#[derive(Clone, Debug)]
pub struct ModelCheckpointOptions {
    /// The folder; default `<trainer.log_dir>/checkpoints`.
    pub dirpath: Option<PathBuf>,
    /// The file name template without `.ckpt`, with `{epoch}`, `{step}` and logged metrics
    /// (`"{epoch}-{val_loss:.2f}"`); default `"{epoch}-{step}"`.
    pub filename: Option<String>,
    /// The metric that ranks checkpoints; `None` keeps the latest.
    pub monitor: Option<String>,
    pub verbose: bool,
    /// Also save `last.ckpt` at every save (default false).
    pub save_last: bool,
    /// Keep the best k (`-1`: all; `0`: none; default 1).
    pub save_top_k: i64,
    /// Save only the weights (default false).
    pub save_weights_only: bool,
    pub mode: Mode,
    /// `{epoch}` becomes `epoch={epoch}` (default true).
    pub auto_insert_metric_name: bool,
    /// Save every this many optimizer steps (default off).
    pub every_n_train_steps: Option<usize>,
    /// Save every this many epochs (default 1 when nothing else is set).
    pub every_n_epochs: Option<usize>,
    /// Save at the end of the training epoch rather than after validation (default: when
    /// validation runs once per epoch, or never).
    pub save_on_train_epoch_end: Option<bool>,
}

impl Default for ModelCheckpointOptions {
    fn default() -> Self {
        ModelCheckpointOptions {
            dirpath: None,
            filename: None,
            monitor: None,
            verbose: false,
            save_last: false,
            save_top_k: 1,
            save_weights_only: false,
            mode: Mode::Min,
            auto_insert_metric_name: true,
            every_n_train_steps: None,
            every_n_epochs: None,
            save_on_train_epoch_end: None,
        }
    }
}

/// Saves checkpoints while training: the best `save_top_k` by `monitor` (or the latest),
/// optionally `last.ckpt`, every `every_n_epochs` epochs or `every_n_train_steps` steps. Each
/// file is written atomically, so a crash never leaves a half-written checkpoint (or
/// `last.ckpt`).
pub struct ModelCheckpoint {
    options: ModelCheckpointOptions,
    template: String,
    dirpath: Option<PathBuf>,
    manager: Option<CheckpointManager>,
    last_global_step_saved: Option<usize>,
    last_model_path: Option<PathBuf>,
    current_score: Option<f64>,
}

/// `{name...}` becomes `name={name...}`.
fn insert_metric_names(template: &str) -> String {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '{' {
            if chars.peek() == Some(&'{') {
                chars.next();
                out.push_str("{{");
                continue;
            }
            let mut field = String::new();
            while let Some(&d) = chars.peek() {
                if d == '}' || d == ':' {
                    break;
                }
                field.push(d);
                chars.next();
            }
            out.push_str(&format!("{field}={{{field}"));
        } else {
            out.push(c);
        }
    }
    out
}

impl ModelCheckpoint {
    pub fn new(options: ModelCheckpointOptions) -> Result<ModelCheckpoint> {
        if options.save_top_k < -1 {
            bail!(
                Value,
                "ModelCheckpoint: invalid value for save_top_k={}. Must be >= -1",
                options.save_top_k
            );
        }
        if options.monitor.is_none()
            && options.save_top_k != 1
            && options.save_top_k != 0
            && options.save_top_k != -1
        {
            bail!(
                Value,
                "ModelCheckpoint(save_top_k={}, monitor=None) is not a valid configuration. No quantity for top_k to track.",
                options.save_top_k
            );
        }
        if options.every_n_train_steps.is_some() && options.every_n_epochs.is_some_and(|n| n > 0) {
            bail!(
                Value,
                "ModelCheckpoint: combination of every_n_train_steps and every_n_epochs is not valid"
            );
        }
        let base = options.filename.clone().unwrap_or_else(|| "{epoch}-{step}".into());
        let base = if options.auto_insert_metric_name { insert_metric_names(&base) } else { base };
        Ok(ModelCheckpoint {
            template: format!("{base}.ckpt"),
            options,
            dirpath: None,
            manager: None,
            last_global_step_saved: None,
            last_model_path: None,
            current_score: None,
        })
    }

    /// The folder (known once `fit` has started).
    pub fn dirpath(&self) -> Option<&Path> {
        self.dirpath.as_deref()
    }

    /// `best_model_path`.
    pub fn best_model_path(&self) -> Option<&Path> {
        self.manager.as_ref()?.best_path()
    }

    /// `best_model_score`.
    pub fn best_model_score(&self) -> Option<f64> {
        self.manager.as_ref()?.best_score()
    }

    /// `last_model_path`: the newest file saved.
    pub fn last_model_path(&self) -> Option<&Path> {
        self.last_model_path.as_deref()
    }

    /// The kept checkpoints (the top k, or the latest), oldest first.
    pub fn saved(&self) -> Vec<PathBuf> {
        self.manager.as_ref().map_or(vec![], |m| m.checkpoints().iter().map(|c| c.path.clone()).collect())
    }

    /// Where `ckpt_path="last"` resumes from: `last.ckpt`, else the newest kept checkpoint.
    pub(crate) fn find_last(&self, _trainer: &Trainer) -> Option<PathBuf> {
        let dir = self.dirpath.as_ref()?;
        let last = dir.join("last.ckpt");
        if last.exists() {
            return Some(last);
        }
        self.manager.as_ref()?.last_path().map(Path::to_path_buf)
    }

    fn save_on_train_epoch_end(&self, trainer: &Trainer) -> bool {
        if let Some(v) = self.options.save_on_train_epoch_end {
            return v;
        }
        if trainer.settings().check_val_every_n_epoch != 1 {
            return false;
        }
        trainer.num_val_batches() == 0 || trainer.settings().val_check_interval == crate::Limit::Fraction(1.0)
    }

    fn skip(&self, trainer: &Trainer) -> bool {
        trainer.settings().fast_dev_run > 0
            || trainer.sanity_checking()
            || trainer.stage() != crate::Stage::Train && trainer.stage() != crate::Stage::Validate
            || self.last_global_step_saved == Some(trainer.global_step())
    }

    fn every_n_epochs(&self) -> usize {
        match (self.options.every_n_epochs, self.options.every_n_train_steps) {
            (Some(n), _) => n,
            (None, None) => 1,
            (None, Some(_)) => 0,
        }
    }

    fn save(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        let epoch = trainer.current_epoch();
        let step = trainer.global_step();
        let mut metrics: Vec<(String, f64)> =
            trainer.callback_metrics().iter().map(|(k, v)| (k.clone(), *v)).collect();
        metrics.retain(|(k, _)| k != "epoch" && k != "step");
        if let Some(m) = &self.options.monitor {
            match metrics.iter().find(|(k, _)| k == m) {
                Some((_, v)) => self.current_score = Some(*v),
                None => {
                    let names: Vec<&str> = metrics.iter().map(|(k, _)| k.as_str()).collect();
                    let msg = format!(
                        "`ModelCheckpoint(monitor={m:?})` could not find the monitored key in the returned metrics: {names:?}. HINT: Did you call `log({m:?}, value)` in the `LightningModule`?"
                    );
                    if trainer.validation_has_run() {
                        bail!(Value, "{msg}");
                    }
                    eprintln!("warning: {msg}");
                    return Ok(());
                }
            }
        }
        self.last_global_step_saved = Some(step);
        let ck = if self.options.save_weights_only {
            dict_of(vec![
                ("epoch", Object::Int(epoch as i64)),
                ("global_step", Object::Int(step as i64)),
                ("state_dict", module.module().state_dict()?.to_object()),
            ])
        } else {
            trainer.dump_checkpoint(module, Some(self))?
        };
        let refs: Vec<(&str, f64)> = metrics.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        if let Some(manager) = &mut self.manager {
            let path = manager.save(&ck, epoch as u64, step as u64, &refs)?;
            if self.options.verbose {
                match (&self.options.monitor, self.current_score) {
                    (Some(m), Some(v)) => println!(
                        "Epoch {epoch}, global step {step}: {m:?} was {v:.5}, saving model to {}",
                        path.display()
                    ),
                    _ => println!("Epoch {epoch}, global step {step}: saving model to {}", path.display()),
                }
            }
            self.last_model_path = Some(path);
        }
        if self.options.save_last {
            let last = self.dirpath.as_ref().expect("set up").join("last.ckpt");
            pyrite_serialization::save(&ck, &last)?;
            self.last_model_path = Some(last);
        }
        Ok(())
    }
}

impl Callback for ModelCheckpoint {
    fn state_key(&self) -> String {
        format!(
            "ModelCheckpoint{{'monitor': {:?}, 'mode': '{}', 'every_n_train_steps': {}, 'every_n_epochs': {}}}",
            self.options.monitor,
            if self.options.mode == Mode::Min { "min" } else { "max" },
            self.options.every_n_train_steps.unwrap_or(0),
            self.every_n_epochs()
        )
    }

    fn is_monitoring(&self) -> bool {
        true
    }

    fn setup(
        &mut self,
        trainer: &mut Trainer,
        _m: &mut dyn LightningModule,
        stage: crate::Stage,
    ) -> Result<()> {
        if stage != crate::Stage::Train || self.manager.is_some() {
            return Ok(());
        }
        let dir = self.options.dirpath.clone().unwrap_or_else(|| trainer.log_dir().join("checkpoints"));
        let k = self.options.save_top_k;
        if k != 0 {
            let all = usize::MAX;
            let (save_top_k, keep_last) = match &self.options.monitor {
                Some(_) => (if k < 0 { all } else { k as usize }, 0),
                None => (0, if k < 0 { all } else { 1 }),
            };
            self.manager = Some(CheckpointManager::new(
                &dir,
                CheckpointOptions {
                    filename: self.template.clone(),
                    monitor: self.options.monitor.clone(),
                    mode: self.options.mode,
                    save_top_k,
                    keep_last,
                },
            )?);
        } else {
            crate::loggers::create_dir(&dir, "ModelCheckpoint")?;
        }
        self.dirpath = Some(dir);
        Ok(())
    }

    fn on_train_batch_end(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        _outputs: &crate::StepOutput,
        _batch: &pyrite_data::Sample,
        _batch_idx: usize,
    ) -> Result<()> {
        let Some(n) = self.options.every_n_train_steps else { return Ok(()) };
        if n == 0 || self.skip(trainer) || !trainer.global_step().is_multiple_of(n) {
            return Ok(());
        }
        self.save(trainer, module)
    }

    fn on_train_epoch_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        let n = self.every_n_epochs();
        if !self.skip(trainer)
            && self.save_on_train_epoch_end(trainer)
            && n >= 1
            && (trainer.current_epoch() + 1).is_multiple_of(n)
        {
            self.save(trainer, module)?;
        }
        Ok(())
    }

    fn on_validation_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        let n = self.every_n_epochs();
        if !self.skip(trainer)
            && !self.save_on_train_epoch_end(trainer)
            && n >= 1
            && (trainer.current_epoch() + 1).is_multiple_of(n)
        {
            self.save(trainer, module)?;
        }
        Ok(())
    }

    fn state_dict(&self) -> Object {
        let path = |p: Option<&Path>| p.map_or(Object::None, |p| Object::Str(p.display().to_string()));
        dict_of(vec![
            ("monitor", self.options.monitor.clone().map_or(Object::None, Object::Str)),
            ("best_model_score", self.best_model_score().map_or(Object::None, Object::Float)),
            ("best_model_path", path(self.best_model_path())),
            ("current_score", self.current_score.map_or(Object::None, Object::Float)),
            ("dirpath", path(self.dirpath.as_deref())),
            ("last_model_path", path(self.last_model_path.as_deref())),
        ])
    }

    fn load_state_dict(&mut self, state: &Object) -> Result<()> {
        // The kept files and their scores are recovered from the folder's index; the last path
        // is taken from the state when it is still there.
        if let Some(p) = state.get("last_model_path").and_then(Object::as_str) {
            let p = PathBuf::from(p);
            if p.exists() {
                self.last_model_path = Some(p);
            }
        }
        self.current_score = state.get("current_score").and_then(Object::as_float);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn metric_names_are_inserted_as_lightning_does() {
        assert_eq!(
            super::insert_metric_names("{epoch}-{val_loss:.2f}"),
            "epoch={epoch}-val_loss={val_loss:.2f}"
        );
        assert_eq!(super::insert_metric_names("best-{{x}}"), "best-{{x}}");
    }
}
