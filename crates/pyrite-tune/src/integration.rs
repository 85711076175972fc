//! The Trainer's side of a trial (`ray.tune.integration.pytorch_lightning`): a callback that
//! reports the validation metrics after each validation epoch, with a checkpoint of the run,
//! and stops the Trainer when the scheduler stops the trial.

use pyrite_core::Result;
use pyrite_train::{Callback, LightningModule, Trainer};

use crate::session::{Checkpoint, Session};
use crate::trial::Metrics;

/// Reports the Trainer's `callback_metrics` to the tuner at each validation end (Ray's
/// `TuneReportCheckpointCallback`, `on="validation_end"`), saving the run's checkpoint as
/// `<checkpoint>/checkpoint` so a paused or restarted trial resumes with
/// `FitOptions { ckpt_path: session.get_checkpoint() ... }`.
///
/// ```no_run
/// use pyrite_tune::integration::TuneReportCheckpointCallback;
/// # fn make(session: &pyrite_tune::Session) {
/// // Report `val_loss` as `loss` and `val_acc` as `accuracy`.
/// let cb = TuneReportCheckpointCallback::new(session.clone())
///     .metrics([("loss", "val_loss"), ("accuracy", "val_acc")]);
/// # }
/// ```
pub struct TuneReportCheckpointCallback {
    session: Session,
    metrics: Option<Vec<(String, String)>>,
    filename: String,
    save_checkpoints: bool,
}

impl TuneReportCheckpointCallback {
    /// Reports every callback metric, with a checkpoint named `checkpoint`.
    pub fn new(session: Session) -> TuneReportCheckpointCallback {
        TuneReportCheckpointCallback {
            session,
            metrics: None,
            filename: "checkpoint".into(),
            save_checkpoints: true,
        }
    }

    /// Reports only these metrics, as `(name reported to Tune, Trainer metric)`.
    pub fn metrics<A: Into<String>, B: Into<String>>(
        mut self,
        pairs: impl IntoIterator<Item = (A, B)>,
    ) -> Self {
        self.metrics = Some(pairs.into_iter().map(|(a, b)| (a.into(), b.into())).collect());
        self
    }

    /// The checkpoint file's name inside the checkpoint folder (`checkpoint`).
    pub fn filename(mut self, name: impl Into<String>) -> Self {
        self.filename = name.into();
        self
    }

    /// Whether to save a checkpoint with each report (true).
    pub fn save_checkpoints(mut self, save: bool) -> Self {
        self.save_checkpoints = save;
        self
    }

    /// The checkpoint file to resume from, if the trial has one
    /// (`FitOptions::ckpt_path`).
    pub fn resume_path(session: &Session) -> Option<std::path::PathBuf> {
        session.get_checkpoint().map(|c| c.path().join("checkpoint"))
    }
}

impl Callback for TuneReportCheckpointCallback {
    fn on_validation_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        if trainer.sanity_checking() {
            return Ok(());
        }
        let all = trainer.callback_metrics();
        let metrics: Metrics = match &self.metrics {
            Some(pairs) => {
                pairs.iter().filter_map(|(to, from)| all.get(from).map(|v| (to.clone(), *v))).collect()
            }
            None => all.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        };
        let checkpoint = if self.save_checkpoints {
            let dir = self.session.checkpoint_dir()?;
            let ck = trainer.dump_checkpoint(module, Some(self))?;
            pyrite_serialization::save(&ck, dir.join(&self.filename))?;
            Some(Checkpoint::from_directory(dir))
        } else {
            None
        };
        if self.session.report(metrics, checkpoint).is_err() {
            // Stopped or paused by the tuner: end this fit; the trial's end is the tuner's call.
            trainer.set_should_stop(true);
        }
        Ok(())
    }
}
