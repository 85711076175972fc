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

/// How a session reaches the driver: a channel (a trial in a thread) or a socket (a trial in
/// its own process, `crate::process`).
pub(crate) enum Link {
    Local(mpsc::Sender<Message>),
    Remote {
        reader: std::io::BufReader<std::os::unix::net::UnixStream>,
        writer: std::os::unix::net::UnixStream,
    },
}

/// The running trial's side of the tuner. Cloning it gives another handle to the same
/// session (what a Trainer callback keeps to report for the trainable).
#[derive(Clone)]
pub struct Session {
    state: std::sync::Arc<std::sync::Mutex<SessionState>>,
}

pub(crate) struct SessionState {
    pub(crate) trial_id: String,
    pub(crate) trial_dir: PathBuf,
    pub(crate) iteration: u64,
    pub(crate) time_offset: f64,
    pub(crate) started: Instant,
    pub(crate) last_report: Instant,
    pub(crate) checkpoint: Option<Checkpoint>,
    pub(crate) link: Link,
    pub(crate) decision: Option<Decision>,
    pub(crate) scratch: u64,
}

impl Session {
    pub(crate) fn new(state: SessionState) -> Session {
        Session { state: std::sync::Arc::new(std::sync::Mutex::new(state)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reports this iteration's metrics (and a checkpoint to resume from), then waits for the
    /// scheduler's decision. `training_iteration`, `time_total_s`, `time_this_iter_s` and
    /// `timestamp` are filled in.
    ///
    /// When the scheduler stops or pauses the trial (or a stop condition is met), this returns
    /// an error that ends the trainable through `?`; the tuner knows why, and does not count
    /// it as a failure. A paused trial is started again later from its last checkpoint.
    pub fn report(&self, metrics: impl Into<Metrics>, checkpoint: Option<Checkpoint>) -> Result<()> {
        let mut st = self.lock();
        if let Some(d) = st.decision {
            return Err(interrupted(&st, d));
        }
        let mut metrics = metrics.into();
        let now = Instant::now();
        st.iteration += 1;
        metrics.insert(TRAINING_ITERATION, st.iteration as f64);
        metrics.insert(TIME_THIS_ITER_S, (now - st.last_report).as_secs_f64());
        metrics.insert(TIME_TOTAL_S, st.time_offset + (now - st.started).as_secs_f64());
        metrics.insert(
            TIMESTAMP,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        );
        st.last_report = now;
        let gone = || Error::new(ErrorKind::Value, "the tuner driving this trial has gone away");
        let trial = st.trial_id.clone();
        let decision = match &mut st.link {
            Link::Local(tx) => {
                let (reply, rx) = mpsc::channel();
                let msg = Message::Report { trial, metrics, checkpoint: checkpoint.map(|c| c.path), reply };
                tx.send(msg).map_err(|_| gone())?;
                rx.recv().map_err(|_| gone())?
            }
            Link::Remote { reader, writer } => {
                use std::io::{BufRead, Write};
                let line =
                    serde_json::json!({ "metrics": metrics, "checkpoint": checkpoint.map(|c| c.path) });
                writeln!(writer, "{line}").map_err(|_| gone())?;
                let mut answer = String::new();
                if reader.read_line(&mut answer).map_err(|_| gone())? == 0 {
                    return Err(gone());
                }
                let v: serde_json::Value = serde_json::from_str(&answer).map_err(|_| gone())?;
                match v["decision"].as_str() {
                    Some("CONTINUE") => Decision::Continue,
                    Some("PAUSE") => Decision::Pause,
                    _ => Decision::Stop,
                }
            }
        };
        match decision {
            Decision::Continue => Ok(()),
            d => {
                st.decision = Some(d);
                Err(interrupted(&st, d))
            }
        }
    }

    /// The checkpoint to resume from: the latest one reported (by this trial, or given to it
    /// by PBT), or `None` on a fresh start.
    pub fn get_checkpoint(&self) -> Option<Checkpoint> {
        self.lock().checkpoint.clone()
    }

    /// A new, empty folder inside the trial's folder for the next checkpoint's files.
    pub fn checkpoint_dir(&self) -> Result<PathBuf> {
        let mut st = self.lock();
        st.scratch += 1;
        let dir = st.trial_dir.join(format!(".checkpoint_tmp_{}_{}", st.iteration + 1, st.scratch));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        Ok(dir)
    }

    /// This trial's id.
    pub fn trial_id(&self) -> String {
        self.lock().trial_id.clone()
    }

    /// This trial's folder (checkpoints live here).
    pub fn trial_dir(&self) -> PathBuf {
        self.lock().trial_dir.clone()
    }

    /// Iterations reported so far (restored with the checkpoint on a resume).
    pub fn iteration(&self) -> u64 {
        self.lock().iteration
    }

    /// Tells the driver the trainable returned (a trial in its own process).
    pub(crate) fn send_done(&self, outcome: Option<String>) {
        let mut st = self.lock();
        if let Link::Remote { writer, .. } = &mut st.link {
            use std::io::Write;
            let _ = writeln!(writer, "{}", serde_json::json!({ "done": outcome }));
        }
    }

    /// Whether the tuner has asked this trial to end.
    pub fn should_stop(&self) -> bool {
        self.lock().decision.is_some()
    }
}

fn interrupted(st: &SessionState, d: Decision) -> Error {
    let what = if d == Decision::Pause { "paused" } else { "stopped" };
    Error::new(
        ErrorKind::Value,
        format!(
            "trial {} was {what} by the tuner at iteration {}; return from the trainable",
            st.trial_id, st.iteration
        ),
    )
}

pub(crate) fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("{}: {e}", path.display()))
}
