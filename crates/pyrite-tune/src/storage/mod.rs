//! Where an experiment lives: an append-only log of events (trials added, started, results with
//! the decision taken, trials ended) and one row per trial, in a real database, written in
//! transactions.
//!
//! The log is the experiment's state: the searcher and the scheduler are deterministic given
//! their seeds and the events they were shown, so `Tuner::restore` rebuilds them by replaying
//! the log, and nothing else needs saving. Each report is one transaction (its event and the
//! trial's row together), so a driver killed at any moment leaves a consistent database: a
//! trial's result is there with its decision, or not at all.

#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;

#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

use pyrite_core::Result;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::trial::TrialStatus;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A trial was created with a config from the searcher (`body`: the config).
    Add,
    /// A trial started or resumed running.
    Start,
    /// A trial reported (`body`: `{"metrics": ..., "decision": ...}`).
    Result,
    /// A trial's trainable returned (`body`: `{"error": null | message, "final": bool}`).
    End,
    /// The scheduler changed another trial's status (`body`: `{"status": ...}`).
    Status,
    /// The scheduler was asked for a trial to run and changed its state doing so (`body`:
    /// `{"trial": id or null}`); replayed to change it the same way.
    Choose,
}

impl EventKind {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Add => "add",
            EventKind::Start => "start",
            EventKind::Result => "result",
            EventKind::End => "end",
            EventKind::Status => "status",
            EventKind::Choose => "choose",
        }
    }

    /// Parses [`EventKind::as_str`].
    pub fn parse(s: &str) -> Option<EventKind> {
        Some(match s {
            "add" => EventKind::Add,
            "start" => EventKind::Start,
            "result" => EventKind::Result,
            "end" => EventKind::End,
            "status" => EventKind::Status,
            "choose" => EventKind::Choose,
            _ => return None,
        })
    }
}

/// One entry of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Its position in the log (from 1).
    pub seq: i64,
    pub kind: EventKind,
    pub trial_id: String,
    pub body: Value,
    /// Unix time.
    pub time: f64,
}

/// A trial's row: what a table or a restore needs without replaying.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialRow {
    pub trial_id: String,
    /// Creation order.
    pub number: i64,
    pub status: TrialStatus,
    pub config: Value,
    /// The latest checkpoint's folder, and the iteration and `time_total_s` it was taken at.
    pub checkpoint: Option<String>,
    pub checkpoint_iteration: i64,
    pub checkpoint_time: f64,
    pub failures: i64,
    pub error: Option<String>,
    pub last_result: Option<Value>,
    /// The worker running it (set when it starts), and that worker's last heartbeat (Unix
    /// time). A row written by another worker leaves both as they are.
    pub worker: Option<String>,
    pub heartbeat: f64,
}

/// An experiment database.
pub trait ExperimentStore: Send {
    /// Where it is (a path or a URL without the password).
    fn location(&self) -> String;
    /// Creates the experiment, or opens it; `true` if it already existed.
    fn open_experiment(&mut self, name: &str, meta: &Value) -> Result<bool>;
    /// The experiment's metadata as created.
    fn experiment_meta(&mut self, name: &str) -> Result<Option<Value>>;
    /// Takes the experiment's write lock (an exclusive transaction) until the next `commit`:
    /// workers read the log, decide and append under it, one at a time.
    fn begin(&mut self, name: &str) -> Result<()>;
    /// Appends events and writes trial rows, all or nothing (ending the transaction `begin`
    /// opened, if any).
    fn commit(&mut self, name: &str, events: &[Event], rows: &[TrialRow]) -> Result<()>;
    /// Records that `worker` is alive and running `trials`.
    fn heartbeat(&mut self, name: &str, worker: &str, trials: &[String], time: f64) -> Result<()>;
    /// The log from `after_seq` on, in order.
    fn events(&mut self, name: &str, after_seq: i64) -> Result<Vec<Event>>;
    /// Every trial row, in creation order.
    fn trials(&mut self, name: &str) -> Result<Vec<TrialRow>>;
}

/// Opens the store behind `url`: a SQLite file path (or `sqlite://PATH`), or a PostgreSQL URL
/// (`postgres://user:password@host/database`, with the `postgres` feature).
pub fn open_store(url: &str) -> Result<Box<dyn ExperimentStore>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Box::new(PostgresStore::connect(url)?));
        #[cfg(not(feature = "postgres"))]
        return Err(pyrite_core::Error::new(
            pyrite_core::ErrorKind::NotImplemented,
            "this pyrite-tune was built without PostgreSQL: enable the cargo feature `postgres` (pyrite/postgres), or use a SQLite path",
        ));
    }
    let path = url.strip_prefix("sqlite://").unwrap_or(url);
    Ok(Box::new(SqliteStore::open(std::path::Path::new(path))?))
}
