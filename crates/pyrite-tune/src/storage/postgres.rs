//! The PostgreSQL store (`--features postgres`): the same tables as SQLite's, for workers on
//! many hosts. The experiment's lock is its row, taken with `SELECT ... FOR UPDATE`.

use postgres::{Client, NoTls};
use pyrite_core::{Error, ErrorKind, Result};
use serde_json::Value;

use super::{Event, EventKind, ExperimentStore, TrialRow};
use crate::trial::TrialStatus;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS experiments (
    name TEXT PRIMARY KEY,
    created DOUBLE PRECISION NOT NULL,
    meta TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    experiment TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    body TEXT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (experiment, seq)
);
CREATE TABLE IF NOT EXISTS trials (
    experiment TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    number BIGINT NOT NULL,
    status TEXT NOT NULL,
    config TEXT NOT NULL,
    checkpoint TEXT,
    checkpoint_iteration BIGINT NOT NULL DEFAULT 0,
    checkpoint_time DOUBLE PRECISION NOT NULL DEFAULT 0,
    failures BIGINT NOT NULL DEFAULT 0,
    error TEXT,
    last_result TEXT,
    worker TEXT,
    heartbeat DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (experiment, trial_id)
);
";

/// The advisory lock key that serializes creating the tables.
const SCHEMA_LOCK: i64 = 0x7079_7269_7465; // "pyrite"

/// The server's message (and detail) rather than postgres' bare "db error".
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(d) => format!("{} ({d})", db.message()),
            None => db.message().to_string(),
        },
        None => e.to_string(),
    }
}

/// An experiment database on a PostgreSQL server.
pub struct PostgresStore {
    client: Client,
    /// The URL without its password (for messages).
    shown: String,
    in_tx: bool,
}

fn hide_password(url: &str) -> String {
    // postgres://user:password@host/db -> postgres://user:***@host/db
    match (url.find("://"), url.rfind('@')) {
        (Some(a), Some(b)) if b > a => {
            let creds = &url[a + 3..b];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..a + 3], &creds[..c], &url[b..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`) and creates the
    /// tables if needed.
    pub fn connect(url: &str) -> Result<PostgresStore> {
        let shown = hide_password(url);
        let fail = |e: postgres::Error| {
            Error::new(ErrorKind::Io, format!("experiment database {shown}: {}", describe(&e)))
        };
        let mut client = Client::connect(url, NoTls).map_err(fail)?;
        // Workers starting together would race on CREATE TABLE IF NOT EXISTS (PostgreSQL's
        // catalog is not safe for that): one at a time, under an advisory lock.
        client
            .batch_execute(&format!(
                "SELECT pg_advisory_lock({SCHEMA_LOCK}); {SCHEMA} SELECT pg_advisory_unlock({SCHEMA_LOCK});"
            ))
            .map_err(fail)?;
        Ok(PostgresStore { client, shown, in_tx: false })
    }

    fn err(&self, e: impl std::fmt::Display) -> Error {
        Error::new(ErrorKind::Io, format!("experiment database {}: {e}", self.shown))
    }

    fn pg(&self, e: postgres::Error) -> Error {
        self.err(describe(&e))
    }

    fn write(
        &mut self,
        name: &str,
        events: &[Event],
        rows: &[TrialRow],
    ) -> std::result::Result<(), postgres::Error> {
        for e in events {
            self.client.execute(
                "INSERT INTO events (experiment, seq, kind, trial_id, body, time) VALUES ($1, $2, $3, $4, $5, $6)",
                &[&name, &e.seq, &e.kind.as_str(), &e.trial_id, &e.body.to_string(), &e.time],
            )?;
        }
        for r in rows {
            let last = r.last_result.as_ref().map(|v| v.to_string());
            self.client.execute(
                "INSERT INTO trials (experiment, trial_id, number, status, config, checkpoint, checkpoint_iteration, checkpoint_time, failures, error, last_result, worker, heartbeat)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                 ON CONFLICT (experiment, trial_id) DO UPDATE SET status = excluded.status, config = excluded.config,
                   checkpoint = excluded.checkpoint, checkpoint_iteration = excluded.checkpoint_iteration,
                   checkpoint_time = excluded.checkpoint_time, failures = excluded.failures, error = excluded.error,
                   last_result = excluded.last_result, worker = COALESCE(excluded.worker, trials.worker),
                   heartbeat = GREATEST(excluded.heartbeat, trials.heartbeat)",
                &[
                    &name,
                    &r.trial_id,
                    &r.number,
                    &r.status.as_str(),
                    &r.config.to_string(),
                    &r.checkpoint,
                    &r.checkpoint_iteration,
                    &r.checkpoint_time,
                    &r.failures,
                    &r.error,
                    &last,
                    &r.worker,
                    &r.heartbeat,
                ],
            )?;
        }
        Ok(())
    }
}

impl ExperimentStore for PostgresStore {
    fn location(&self) -> String {
        self.shown.clone()
    }

    fn open_experiment(&mut self, name: &str, meta: &Value) -> Result<bool> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let n = self
            .client
            .execute(
                "INSERT INTO experiments (name, created, meta) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
                &[&name, &now, &meta.to_string()],
            )
            .map_err(|e| self.pg(e))?;
        Ok(n == 0)
    }

    fn experiment_meta(&mut self, name: &str) -> Result<Option<Value>> {
        let row = self
            .client
            .query_opt("SELECT meta FROM experiments WHERE name = $1", &[&name])
            .map_err(|e| self.pg(e))?;
        match row {
            Some(r) => {
                let s: String = r.get(0);
                Ok(Some(serde_json::from_str(&s).map_err(|e| self.err(e))?))
            }
            None => Ok(None),
        }
    }

    fn begin(&mut self, name: &str) -> Result<()> {
        if !self.in_tx {
            self.client.batch_execute("BEGIN").map_err(|e| self.pg(e))?;
            self.in_tx = true;
            // The experiment's row is the lock: one worker at a time reads, decides, appends.
            self.client
                .query("SELECT name FROM experiments WHERE name = $1 FOR UPDATE", &[&name])
                .map_err(|e| self.pg(e))?;
        }
        Ok(())
    }

    fn commit(&mut self, name: &str, events: &[Event], rows: &[TrialRow]) -> Result<()> {
        if !self.in_tx {
            self.client.batch_execute("BEGIN").map_err(|e| self.pg(e))?;
        }
        self.in_tx = false;
        let r = self.write(name, events, rows).map_err(|e| self.pg(e));
        let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let e = self.client.batch_execute(end).map_err(|e| self.pg(e));
        r.and(e)
    }

    fn heartbeat(&mut self, name: &str, worker: &str, trials: &[String], time: f64) -> Result<()> {
        for t in trials {
            self.client
                .execute(
                    "UPDATE trials SET worker = $1, heartbeat = $2 WHERE experiment = $3 AND trial_id = $4",
                    &[&worker, &time, &name, t],
                )
                .map_err(|e| self.pg(e))?;
        }
        Ok(())
    }

    fn events(&mut self, name: &str, after_seq: i64) -> Result<Vec<Event>> {
        let rows = self
            .client
            .query(
                "SELECT seq, kind, trial_id, body, time FROM events WHERE experiment = $1 AND seq > $2 ORDER BY seq",
                &[&name, &after_seq],
            )
            .map_err(|e| self.pg(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let kind: String = r.get(1);
            let kind =
                EventKind::parse(&kind).ok_or_else(|| self.err(format!("unknown event kind '{kind}'")))?;
            let body: String = r.get(3);
            out.push(Event {
                seq: r.get(0),
                kind,
                trial_id: r.get(2),
                body: serde_json::from_str(&body).map_err(|e| self.err(e))?,
                time: r.get(4),
            });
        }
        Ok(out)
    }

    fn trials(&mut self, name: &str) -> Result<Vec<TrialRow>> {
        let rows = self
            .client
            .query(
                "SELECT trial_id, number, status, config, checkpoint, checkpoint_iteration, checkpoint_time, failures, error, last_result, worker, heartbeat
                 FROM trials WHERE experiment = $1 ORDER BY number",
                &[&name],
            )
            .map_err(|e| self.pg(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let status: String = r.get(2);
            let config: String = r.get(3);
            let last: Option<String> = r.get(9);
            out.push(TrialRow {
                trial_id: r.get(0),
                number: r.get(1),
                status: TrialStatus::parse(&status)
                    .ok_or_else(|| self.err(format!("unknown status '{status}'")))?,
                config: serde_json::from_str(&config).map_err(|e| self.err(e))?,
                checkpoint: r.get(4),
                checkpoint_iteration: r.get(5),
                checkpoint_time: r.get(6),
                failures: r.get(7),
                error: r.get(8),
                last_result: last.map(|s| serde_json::from_str(&s)).transpose().map_err(|e| self.err(e))?,
                worker: r.get(10),
                heartbeat: r.get(11),
            });
        }
        Ok(out)
    }
}
