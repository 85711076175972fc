//! What a running trial talks to: `report` each iteration (with a checkpoint now and then),
//! `get_checkpoint` to resume (`ray.train.report` / `get_checkpoint`).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use pyrite_core::{Error, ErrorKind, Result};

use crate::schedulers::Decision;
use crate::trial::{Metrics, TIMESTAMP, TIME_THIS_ITER_S, TIME_TOTAL_S, TRAINING_ITERATION};

/// A checkpoint: a folder of files the trainable wrote (`ray.train.Checkpoint`).
///
/// The tuner moves a reported checkpoint into the trial's folder (`checkpoint_000007`), so
/// the folder handed to [`Checkpoint::from_directory`] may be a temporary one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    path: PathBuf,
}

impl Checkpoint {
    /// The checkpoint in `path` (a folder).
    pub fn from_directory(path: impl Into<PathBuf>) -> Checkpoint {
        Checkpoint { path: path.into() }
    }

    /// Its folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A report on its way to the tuner.
pub(crate) enum Message {
    Report { trial: String, metrics: Metrics, checkpoint: Option<PathBuf>, reply: mpsc::Sender<Decision> },
    Done { trial: String, outcome: std::result::Result<(), String> },
}

/// The running trial's side of the tuner.
pub struct Session {
    pub(crate) trial_id: String,
    pub(crate) trial_dir: PathBuf,
    pub(crate) iteration: u64,
    pub(crate) time_offset: f64,
    pub(crate) started: Instant,
    pub(crate) last_report: Instant,
    pub(crate) checkpoint: Option<Checkpoint>,
    pub(crate) tx: mpsc::Sender<Message>,
    pub(crate) decision: Option<Decision>,
    pub(crate) scratch: u64,
}

impl Session {
    /// Reports this iteration's metrics (and a checkpoint to resume from), then waits for the
    /// scheduler's decision. `training_iteration`, `time_total_s`, `time_this_iter_s` and
    /// `timestamp` are filled in.
    ///
    /// When the scheduler stops or pauses the trial (or a stop condition is met), this returns
    /// an error that ends the trainable through `?`; the tuner knows why, and does not count
    /// it as a failure. A paused trial is started again later from its last checkpoint.
    pub fn report(&mut self, metrics: impl Into<Metrics>, checkpoint: Option<Checkpoint>) -> Result<()> {
        if let Some(d) = self.decision {
            return Err(self.interrupted(d));
        }
        let mut metrics = metrics.into();
        let now = Instant::now();
        self.iteration += 1;
        metrics.insert(TRAINING_ITERATION, self.iteration as f64);
        metrics.insert(TIME_THIS_ITER_S, (now - self.last_report).as_secs_f64());
        metrics.insert(TIME_TOTAL_S, self.time_offset + (now - self.started).as_secs_f64());
        metrics.insert(
            TIMESTAMP,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        );
        self.last_report = now;
        let (reply, rx) = mpsc::channel();
        let msg = Message::Report {
            trial: self.trial_id.clone(),
            metrics,
            checkpoint: checkpoint.map(|c| c.path),
            reply,
        };
        let gone = || Error::new(ErrorKind::Value, "the tuner driving this trial has gone away");
        self.tx.send(msg).map_err(|_| gone())?;
        let decision = rx.recv().map_err(|_| gone())?;
        match decision {
            Decision::Continue => Ok(()),
            d => {
                self.decision = Some(d);
                Err(self.interrupted(d))
            }
        }
    }

    fn interrupted(&self, d: Decision) -> Error {
        let what = if d == Decision::Pause { "paused" } else { "stopped" };
        Error::new(
            ErrorKind::Value,
            format!(
                "trial {} was {what} by the tuner at iteration {}; return from the trainable",
                self.trial_id, self.iteration
            ),
        )
    }

    /// The checkpoint to resume from: the latest one reported (by this trial, or given to it
    /// by PBT), or `None` on a fresh start.
    pub fn get_checkpoint(&self) -> Option<Checkpoint> {
        self.checkpoint.clone()
    }

    /// A new, empty folder inside the trial's folder for the next checkpoint's files.
    pub fn checkpoint_dir(&mut self) -> Result<PathBuf> {
        self.scratch += 1;
        let dir = self.trial_dir.join(format!(".checkpoint_tmp_{}_{}", self.iteration + 1, self.scratch));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        Ok(dir)
    }

    /// This trial's id.
    pub fn trial_id(&self) -> &str {
        &self.trial_id
    }

    /// This trial's folder (checkpoints live here).
    pub fn trial_dir(&self) -> &Path {
        &self.trial_dir
    }

    /// Iterations reported so far (restored with the checkpoint on a resume).
    pub fn iteration(&self) -> u64 {
        self.iteration
    }

    /// Whether the tuner has asked this trial to end.
    pub fn should_stop(&self) -> bool {
        self.decision.is_some()
    }
}

pub(crate) fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("{}: {e}", path.display()))
}
