//! The embedded SQLite store (rusqlite, SQLite bundled): one file, WAL journal, one
//! transaction per commit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pyrite_core::{Error, ErrorKind, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::{Event, EventKind, ExperimentStore, TrialRow};
use crate::trial::TrialStatus;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS experiments (
    name TEXT PRIMARY KEY,
    created REAL NOT NULL,
    meta TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    experiment TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    body TEXT NOT NULL,
    time REAL NOT NULL,
    PRIMARY KEY (experiment, seq)
);
CREATE TABLE IF NOT EXISTS trials (
    experiment TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    status TEXT NOT NULL,
    config TEXT NOT NULL,
    checkpoint TEXT,
    checkpoint_iteration INTEGER NOT NULL DEFAULT 0,
    checkpoint_time REAL NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    last_result TEXT,
    worker TEXT,
    heartbeat REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (experiment, trial_id)
);
";

/// An experiment database in one SQLite file.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// A `begin` transaction is open.
    in_tx: bool,
}

fn db_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("experiment database {}: {e}", path.display()))
}

impl SqliteStore {
    /// Opens (or creates) the database file, with its tables.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| db_err(path, e))?;
        }
        let conn = Connection::open(path).map_err(|e| db_err(path, e))?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(|e| db_err(path, e))?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(|e| db_err(path, e))?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(|e| db_err(path, e))?;
        conn.execute_batch(SCHEMA).map_err(|e| db_err(path, e))?;
        Ok(SqliteStore { conn, path: path.to_path_buf(), in_tx: false })
    }

    fn err(&self, e: impl std::fmt::Display) -> Error {
        db_err(&self.path, e)
    }
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

impl ExperimentStore for SqliteStore {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn open_experiment(&mut self, name: &str, meta: &Value) -> Result<bool> {
        let n = self
            .conn
            .execute(
                "INSERT OR IGNORE INTO experiments (name, created, meta) VALUES (?1, ?2, ?3)",
                params![name, now(), meta.to_string()],
            )
            .map_err(|e| self.err(e))?;
        Ok(n == 0)
    }

    fn experiment_meta(&mut self, name: &str) -> Result<Option<Value>> {
        let s: Option<String> = self
            .conn
            .query_row("SELECT meta FROM experiments WHERE name = ?1", params![name], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        s.map(|s| serde_json::from_str(&s).map_err(|e| self.err(e))).transpose()
    }

    fn begin(&mut self, _name: &str) -> Result<()> {
        if !self.in_tx {
            // IMMEDIATE: the write lock now, so what this worker reads stays the latest.
            self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| self.err(e))?;
            self.in_tx = true;
        }
        Ok(())
    }

    fn heartbeat(&mut self, name: &str, worker: &str, trials: &[String], time: f64) -> Result<()> {
        for t in trials {
            self.conn
                .execute(
                    "UPDATE trials SET worker = ?1, heartbeat = ?2 WHERE experiment = ?3 AND trial_id = ?4",
                    params![worker, time, name, t],
                )
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    fn commit(&mut self, name: &str, events: &[Event], rows: &[TrialRow]) -> Result<()> {
        if !self.in_tx {
            self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| self.err(e))?;
        }
        self.in_tx = false;
        let r = self.write(name, events, rows);
        let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let e = self.conn.execute_batch(end).map_err(|e| self.err(e));
        r.and(e)
    }

    fn events(&mut self, name: &str, after_seq: i64) -> Result<Vec<Event>> {
        self.read_events(name, after_seq)
    }

    fn trials(&mut self, name: &str) -> Result<Vec<TrialRow>> {
        self.read_trials(name)
    }
}

impl SqliteStore {
    fn write(&mut self, name: &str, events: &[Event], rows: &[TrialRow]) -> Result<()> {
        let path = self.path.clone();
        let tx = &self.conn;
        for e in events {
            tx.execute(
                "INSERT INTO events (experiment, seq, kind, trial_id, body, time) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![name, e.seq, e.kind.as_str(), e.trial_id, e.body.to_string(), e.time],
            )
            .map_err(|e| db_err(&path, e))?;
        }
        for r in rows {
            tx.execute(
                "INSERT INTO trials (experiment, trial_id, number, status, config, checkpoint, checkpoint_iteration, checkpoint_time, failures, error, last_result, worker, heartbeat)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT (experiment, trial_id) DO UPDATE SET status = excluded.status, config = excluded.config,
                   checkpoint = excluded.checkpoint, checkpoint_iteration = excluded.checkpoint_iteration,
                   checkpoint_time = excluded.checkpoint_time, failures = excluded.failures, error = excluded.error,
                   last_result = excluded.last_result, worker = COALESCE(excluded.worker, trials.worker),
                   heartbeat = MAX(excluded.heartbeat, trials.heartbeat)",
                params![
                    name,
                    r.trial_id,
                    r.number,
                    r.status.as_str(),
                    r.config.to_string(),
                    r.checkpoint,
                    r.checkpoint_iteration,
                    r.checkpoint_time,
                    r.failures,
                    r.error,
                    r.last_result.as_ref().map(|v| v.to_string()),
                    r.worker,
                    r.heartbeat,
                ],
            )
            .map_err(|e| db_err(&path, e))?;
        }
        Ok(())
    }

    fn read_events(&mut self, name: &str, after_seq: i64) -> Result<Vec<Event>> {
        let path = self.path.clone();
        let mut st = self
            .conn
            .prepare("SELECT seq, kind, trial_id, body, time FROM events WHERE experiment = ?1 AND seq > ?2 ORDER BY seq")
            .map_err(|e| db_err(&path, e))?;
        let rows = st
            .query_map(params![name, after_seq], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, f64>(4)?,
                ))
            })
            .map_err(|e| db_err(&path, e))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, kind, trial_id, body, time) = row.map_err(|e| db_err(&path, e))?;
            let kind = EventKind::parse(&kind)
                .ok_or_else(|| db_err(&path, format!("unknown event kind '{kind}'")))?;
            let body = serde_json::from_str(&body).map_err(|e| db_err(&path, e))?;
            out.push(Event { seq, kind, trial_id, body, time });
        }
        Ok(out)
    }

    fn read_trials(&mut self, name: &str) -> Result<Vec<TrialRow>> {
        let path = self.path.clone();
        let mut st = self
            .conn
            .prepare(
                "SELECT trial_id, number, status, config, checkpoint, checkpoint_iteration, checkpoint_time, failures, error, last_result, worker, heartbeat
                 FROM trials WHERE experiment = ?1 ORDER BY number",
            )
            .map_err(|e| db_err(&path, e))?;
        let rows = st
            .query_map(params![name], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, f64>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, Option<String>>(8)?,
                    r.get::<_, Option<String>>(9)?,
                    r.get::<_, Option<String>>(10)?,
                    r.get::<_, f64>(11)?,
                ))
            })
            .map_err(|e| db_err(&path, e))?;
        let mut out = Vec::new();
        for row in rows {
            let (
                trial_id,
                number,
                status,
                config,
                checkpoint,
                ci,
                ct,
                failures,
                error,
                last,
                worker,
                heartbeat,
            ) = row.map_err(|e| db_err(&path, e))?;
            let status = TrialStatus::parse(&status)
                .ok_or_else(|| db_err(&path, format!("unknown status '{status}'")))?;
            out.push(TrialRow {
                trial_id,
                number,
                status,
                config: serde_json::from_str(&config).map_err(|e| db_err(&path, e))?,
                checkpoint,
                checkpoint_iteration: ci,
                checkpoint_time: ct,
                failures,
                error,
                last_result: last
                    .map(|s| serde_json::from_str(&s))
                    .transpose()
                    .map_err(|e| db_err(&path, e))?,
                worker,
                heartbeat,
            });
        }
        Ok(out)
    }
}
