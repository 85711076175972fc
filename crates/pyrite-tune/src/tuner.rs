//! `tune.Tuner`: runs trials in parallel threads, asks the searcher for configs and the
//! scheduler for decisions, and writes every step to the experiment database.
//!
//! # How a trial runs
//! The driver (the thread calling `fit`) owns the searcher, the scheduler and the database.
//! Each running trial is a thread running the trainable with a [`Session`]; `session.report`
//! sends the result to the driver and blocks until the driver has decided (continue, pause or
//! stop) and committed the result and the decision in one transaction. A trial's thread has
//! its own intra-op thread budget (`resources_per_trial`), so trials side by side do not fight
//! over the cores.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use pyrite_core::{Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::config::Config;
use crate::progress::ProgressTable;
use crate::result_grid::{ResultGrid, TrialResult};
use crate::schedulers::{Controller, Decision, FifoScheduler, TrialScheduler};
use crate::search::{BasicVariantGenerator, SearchProperties, Searcher, Suggestion};
use crate::session::{io_err, Checkpoint, Link, Message, Session, SessionState};
use crate::space::ParamSpace;
use crate::storage::{open_store, Event, EventKind, ExperimentStore, TrialRow};
use crate::trial::{Metrics, Mode, TrialStatus, TIME_TOTAL_S};

/// A trainable: called with the trial's config and its session; reports through the session.
pub type Trainable = Arc<dyn Fn(&Config, &mut Session) -> Result<()> + Send + Sync>;

/// What each trial may use (`tune.with_resources`).
#[derive(Clone, Debug, PartialEq)]
pub struct Resources {
    /// Intra-op threads for the trial's ops (1).
    pub cpu: usize,
}

impl Default for Resources {
    fn default() -> Resources {
        Resources { cpu: 1 }
    }
}

/// Where trials run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrialExecutor {
    /// Threads of this process (the default): cheap to start, share the loaded data.
    #[default]
    Thread,
    /// Each trial in its own process (this program started again): a crash, an abort or an
    /// out-of-memory kill ends that trial only.
    Process,
}

/// `tune.TuneConfig`.
pub struct TuneConfig {
    /// The metric to optimize (needed by searchers, schedulers and `get_best_result`).
    pub metric: Option<String>,
    /// `min` or `max`.
    pub mode: Option<Mode>,
    /// Trials to run (with grid search: repetitions of the grid); -1 for no limit (until the
    /// time budget or the searcher ends).
    pub num_samples: i64,
    /// Trials running at once (`None`: the cores over `resources_per_trial.cpu`).
    pub max_concurrent_trials: Option<usize>,
    /// The search algorithm (`None`: [`BasicVariantGenerator`]).
    pub search_alg: Option<Box<dyn Searcher>>,
    /// The scheduler (`None`: FIFO).
    pub scheduler: Option<Box<dyn TrialScheduler>>,
    /// Stop everything after this many seconds.
    pub time_budget_s: Option<f64>,
    /// Each trial's resources.
    pub resources_per_trial: Resources,
    /// Seeds the default searcher.
    pub seed: Option<u64>,
    /// Threads (default) or processes.
    pub trial_executor: TrialExecutor,
}

impl Default for TuneConfig {
    fn default() -> TuneConfig {
        TuneConfig {
            metric: None,
            mode: None,
            num_samples: 1,
            max_concurrent_trials: None,
            search_alg: None,
            scheduler: None,
            time_budget_s: None,
            resources_per_trial: Resources::default(),
            seed: None,
            trial_executor: TrialExecutor::Thread,
        }
    }
}

/// When to stop a trial: when any threshold is reached (`result[key] >= value`, Ray's dict
/// form), or when the function says so.
#[derive(Clone, Default)]
pub struct Stop {
    pub thresholds: Vec<(String, f64)>,
    #[allow(clippy::type_complexity)]
    pub func: Option<Arc<dyn Fn(&str, &Metrics) -> bool + Send + Sync>>,
}

impl Stop {
    /// Stops at `result[key] >= value` for any of the pairs.
    pub fn at<K: Into<String>>(pairs: impl IntoIterator<Item = (K, f64)>) -> Stop {
        Stop { thresholds: pairs.into_iter().map(|(k, v)| (k.into(), v)).collect(), func: None }
    }

    fn should_stop(&self, trial: &str, m: &Metrics) -> bool {
        self.thresholds.iter().any(|(k, v)| m.get(k).is_some_and(|x| x >= *v))
            || self.func.as_ref().is_some_and(|f| f(trial, m))
    }
}

/// `train.CheckpointConfig`.
#[derive(Clone, Debug, Default)]
pub struct CheckpointConfig {
    /// Checkpoints kept per trial (`None`: all); the latest is always kept for resuming.
    pub num_to_keep: Option<usize>,
    /// Keep the best by this metric instead of the newest.
    pub checkpoint_score_attribute: Option<String>,
    /// Its direction (max).
    pub checkpoint_score_order: Option<Mode>,
}

/// `train.FailureConfig`.
#[derive(Clone, Debug, Default)]
pub struct FailureConfig {
    /// Retries of a failing trial, each from its last checkpoint (0; -1 for no limit).
    pub max_failures: i64,
}

/// `train.RunConfig`.
#[derive(Clone, Default)]
pub struct RunConfig {
    /// The experiment's name (`None`: `tune_<date>_<time>`).
    pub name: Option<String>,
    /// Where experiments live (`None`: `./tune_results`).
    pub storage_path: Option<PathBuf>,
    /// The database: a SQLite path (`None`: `experiment.db` in the experiment folder).
    pub storage_url: Option<String>,
    /// Per-trial stop conditions.
    pub stop: Option<Stop>,
    pub checkpoint_config: CheckpointConfig,
    pub failure_config: FailureConfig,
    /// 0: silent; 1: the status table every few seconds and at the end (default 1).
    pub verbose: Option<u8>,
    /// Draw the figures (trial curves, best over time, parameters against the metric) into
    /// the experiment folder at the end (default true; needs a metric).
    pub plot: Option<bool>,
    /// Join the experiment if it exists, as one more worker (Optuna's `load_if_exists`): any
    /// number of processes, on any hosts that share the storage, run `fit` on the same
    /// experiment and pull trials from it. Without it an existing experiment is an error
    /// (resume one with `Tuner::restore`).
    pub load_if_exists: bool,
    /// A worker whose running trials show no heartbeat for this long is taken for dead; its
    /// trials are failed and retried from their checkpoints by the others (default 30 s).
    pub heartbeat_timeout_s: Option<f64>,
}

/// Runs an experiment (`tune.Tuner`).
///
/// ```
/// use pyrite_tune::{uniform, Metrics, Mode, ParamSpace, RunConfig, TuneConfig, Tuner};
/// let dir = std::env::temp_dir().join(format!("tuner_doc_{}", std::process::id()));
/// let tuner = Tuner::new(
///     |config, session| {
///         let x: f64 = config.get("x")?;
///         for i in 0..3 {
///             session.report([("score", -(x - 0.3).powi(2) + i as f64 * 0.01)], None)?;
///         }
///         Ok(())
///     },
///     ParamSpace::new().with("x", uniform(0.0, 1.0)),
///     TuneConfig { metric: Some("score".into()), mode: Some(Mode::Max), num_samples: 8, seed: Some(0), ..Default::default() },
///     RunConfig { name: Some("doc".into()), storage_path: Some(dir.clone()), verbose: Some(0), ..Default::default() },
/// );
/// let results = tuner.fit().unwrap();
/// assert_eq!(results.len(), 8);
/// let best = results.get_best_result(None, None).unwrap();
/// assert_eq!(best.metrics.iteration(), 3);
/// std::fs::remove_dir_all(dir).unwrap();
/// ```
pub struct Tuner {
    trainable: Trainable,
    space: ParamSpace,
    tune: TuneConfig,
    run: RunConfig,
    restore: bool,
}

impl Tuner {
    /// An experiment over `param_space`.
    pub fn new(
        trainable: impl Fn(&Config, &mut Session) -> Result<()> + Send + Sync + 'static,
        param_space: ParamSpace,
        tune_config: TuneConfig,
        run_config: RunConfig,
    ) -> Tuner {
        Tuner {
            trainable: Arc::new(trainable),
            space: param_space,
            tune: tune_config,
            run: run_config,
            restore: false,
        }
    }

    /// Resumes the experiment in the folder `path` (as written by `fit`): finished trials stay
    /// finished, the trials that were running start again from their last checkpoint, and the
    /// searcher and scheduler are rebuilt by replaying the experiment's log, so they must be the
    /// same kind with the same seeds as the first time (a different suggestion while replaying
    /// is an error).
    pub fn restore(
        path: impl AsRef<Path>,
        trainable: impl Fn(&Config, &mut Session) -> Result<()> + Send + Sync + 'static,
        param_space: ParamSpace,
        tune_config: TuneConfig,
        mut run_config: RunConfig,
    ) -> Result<Tuner> {
        let path = path.as_ref();
        // With a database elsewhere (PostgreSQL), the folder holds only the trials' files.
        if run_config.storage_url.is_none() && !Tuner::can_restore(path) {
            return Err(Error::new(
                ErrorKind::Value,
                format!("no experiment to restore in {} (expected its experiment.db)", path.display()),
            ));
        }
        run_config.name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        run_config.storage_path = Some(path.parent().map(Path::to_path_buf).unwrap_or_default());
        let mut t = Tuner::new(trainable, param_space, tune_config, run_config);
        t.restore = true;
        Ok(t)
    }

    /// Whether `path` holds an experiment that `restore` can resume.
    pub fn can_restore(path: impl AsRef<Path>) -> bool {
        path.as_ref().join("experiment.db").is_file()
    }

    /// Runs the experiment to the end and returns every trial's result.
    ///
    /// In a process started to run one trial (`TrialExecutor::Process`), this runs that trial
    /// and ends the process; a tuner of another experiment in the same program returns an
    /// empty grid there.
    pub fn fit(self) -> Result<ResultGrid> {
        if let Some(spec) = crate::process::child_spec() {
            if self.run.name.as_ref().is_some_and(|n| *n != spec.experiment) {
                return Ok(ResultGrid::new(vec![], None, None, PathBuf::new()));
            }
            crate::process::run_child(spec, &self.trainable);
        }
        Driver::new(self)?.run()
    }
}

struct TrialState {
    id: String,
    config: Config,
    status: TrialStatus,
    results: Vec<Metrics>,
    checkpoint: Option<PathBuf>,
    checkpoint_iteration: u64,
    checkpoint_time: f64,
    failures: i64,
    error: Option<String>,
    /// A pause or stop another trial's result asked for, applied at this trial's next report.
    pending: Option<Decision>,
    /// The decision the running thread was given (how to read its end).
    decided: Option<Decision>,
    /// Reports up to this iteration repeat logged ones (after a restart from a checkpoint).
    floor: u64,
    /// The floor for the next start, when PBT gave the trial another trial's checkpoint.
    next_floor: Option<u64>,
    /// Its thread is still running (a paused trial is not started again before it ended).
    thread_live: bool,
    /// The worker that started it last.
    owner: Option<String>,
    /// When this worker started it or last said it was alive (0 for other workers' trials).
    heartbeat: f64,
}

impl TrialState {
    fn row(&self, number: usize) -> TrialRow {
        TrialRow {
            trial_id: self.id.clone(),
            number: number as i64,
            status: self.status,
            config: Value::Object(self.config.0.clone()),
            checkpoint: self.checkpoint.as_ref().map(|p| p.display().to_string()),
            checkpoint_iteration: self.checkpoint_iteration as i64,
            checkpoint_time: self.checkpoint_time,
            failures: self.failures,
            error: self.error.clone(),
            last_result: self.results.last().map(|m| serde_json::to_value(m).unwrap_or(Value::Null)),
            worker: if self.heartbeat > 0.0 { self.owner.clone() } else { None },
            heartbeat: self.heartbeat,
        }
    }

    fn logged_iteration(&self) -> u64 {
        self.results.last().map_or(0, Metrics::iteration)
    }
}

/// The trials and their statuses, as the scheduler's [`Controller`].
#[derive(Default)]
struct Trials {
    list: Vec<TrialState>,
    index: HashMap<String, usize>,
    /// Status changes made through the controller, to log.
    changed: Vec<usize>,
    /// Searcher notifications the scheduler asked for: (trial, paused).
    searcher_calls: Vec<(String, bool)>,
    /// Waiting trials the scheduler stopped (it is told they are removed).
    removed: Vec<String>,
    /// PBT exploits to carry out: (trial, donor).
    exploits: Vec<(usize, usize)>,
}

impl Trials {
    fn get(&self, id: &str) -> Option<&TrialState> {
        self.index.get(id).map(|&i| &self.list[i])
    }
    fn set_status(&mut self, id: &str, status: TrialStatus) {
        if let Some(&i) = self.index.get(id) {
            self.list[i].status = status;
            self.changed.push(i);
        }
    }
}

impl Controller for Trials {
    fn trials(&self) -> Vec<(String, TrialStatus)> {
        self.list.iter().map(|t| (t.id.clone(), t.status)).collect()
    }
    fn status(&self, trial: &str) -> Option<TrialStatus> {
        self.get(trial).map(|t| t.status)
    }
    fn stop_trial(&mut self, trial: &str) {
        let Some(&i) = self.index.get(trial) else { return };
        match self.list[i].status {
            TrialStatus::Running => self.list[i].pending = Some(Decision::Stop),
            TrialStatus::Pending | TrialStatus::Paused => {
                self.set_status(trial, TrialStatus::Terminated);
                self.removed.push(trial.to_string());
            }
            _ => {}
        }
    }
    fn pause_trial(&mut self, trial: &str) {
        let Some(&i) = self.index.get(trial) else { return };
        match self.list[i].status {
            TrialStatus::Running => self.list[i].pending = Some(Decision::Pause),
            TrialStatus::Pending => self.set_status(trial, TrialStatus::Paused),
            _ => {}
        }
    }
    fn unpause_trial(&mut self, trial: &str) {
        if self.status(trial) == Some(TrialStatus::Paused) {
            self.set_status(trial, TrialStatus::Pending);
        }
    }
    fn searcher_on_pause(&mut self, trial: &str) {
        self.searcher_calls.push((trial.to_string(), true));
    }
    fn searcher_on_unpause(&mut self, trial: &str) {
        self.searcher_calls.push((trial.to_string(), false));
    }
    fn config(&self, trial: &str) -> Option<Config> {
        self.get(trial).map(|t| t.config.clone())
    }
    fn has_checkpoint(&self, trial: &str) -> bool {
        self.get(trial).is_some_and(|t| t.checkpoint.is_some())
    }
    fn exploit(&mut self, trial: &str, from: &str, config: Config) {
        if let (Some(&i), Some(&j)) = (self.index.get(trial), self.index.get(from)) {
            self.list[i].config = config;
            self.exploits.push((i, j));
        }
    }
}

/// Why a result ended a trial.
fn decided_by(stopper: bool, budget: bool) -> &'static str {
    if budget {
        "time_budget"
    } else if stopper {
        "stop"
    } else {
        "scheduler"
    }
}

struct Driver {
    trainable: Trainable,
    name: String,
    dir: PathBuf,
    store: Box<dyn ExperimentStore>,
    searcher: Box<dyn Searcher>,
    scheduler: Box<dyn TrialScheduler>,
    metric: Option<String>,
    mode: Option<Mode>,
    num_samples: Option<usize>,
    max_concurrent: usize,
    cpu: usize,
    stop: Option<Stop>,
    checkpoint_config: CheckpointConfig,
    max_failures: i64,
    time_budget: Option<Duration>,
    verbose: u8,
    plot: bool,
    executor: TrialExecutor,
    trials: Trials,
    seq: i64,
    created: usize,
    searcher_finished: bool,
    id_prefix: String,
    replaying: bool,
    /// This worker's name (`host:pid`).
    worker: String,
    join: bool,
    heartbeat_timeout: f64,
    /// The events and touched trials of the step under way, written when the lock is released.
    outbox: (Vec<Event>, Vec<usize>),
    locked: bool,
}

fn now_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn default_name() -> String {
    // tune_YYYY-MM-DD_HH-MM-SS in UTC, without a date crate.
    let secs = now_unix() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let (y, m, d) = civil_from_days(days);
    format!("tune_{y:04}-{m:02}-{d:02}_{:02}-{:02}-{:02}", rem / 3600, rem / 60 % 60, rem % 60)
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + if m <= 2 { 1 } else { 0 }, m, d)
}

impl Driver {
    fn new(t: Tuner) -> Result<Driver> {
        let Tuner { trainable, space, mut tune, run, restore } = t;
        let name = run.name.clone().unwrap_or_else(default_name);
        let root = run.storage_path.clone().unwrap_or_else(|| PathBuf::from("tune_results"));
        let dir = root.join(&name);
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let url = run.storage_url.clone().unwrap_or_else(|| dir.join("experiment.db").display().to_string());
        let mut store = open_store(&url)?;
        let num_samples = if tune.num_samples < 0 { None } else { Some(tune.num_samples as usize) };
        let mut searcher = tune.search_alg.take().unwrap_or_else(|| {
            Box::new(BasicVariantGenerator::new(crate::search::BasicVariantOptions {
                random_state: tune.seed,
                ..Default::default()
            }))
        });
        let mut scheduler = tune.scheduler.take().unwrap_or_else(|| Box::new(FifoScheduler));
        let metric = tune.metric.clone();
        let mode = tune.mode;
        let needs = |what: &str| {
            Error::new(
                ErrorKind::Value,
                format!("{what} needs a metric and a mode: set TuneConfig's `metric` and `mode`"),
            )
        };
        match (&metric, mode) {
            (Some(m), Some(mode)) => {
                scheduler.set_search_properties(m, mode)?;
                searcher.set_search_properties(&SearchProperties {
                    metric: m,
                    mode,
                    space: &space,
                    num_samples,
                })?;
            }
            _ => {
                if scheduler.name() != "FIFOScheduler" {
                    return Err(needs(&scheduler.name()));
                }
                if !searcher.handles_num_samples() {
                    return Err(needs(&searcher.name()));
                }
                searcher.set_search_properties(&SearchProperties {
                    metric: "",
                    mode: Mode::Max,
                    space: &space,
                    num_samples,
                })?;
            }
        }
        let meta = json!({
            "metric": metric, "mode": mode.map(Mode::as_str), "num_samples": tune.num_samples,
            "searcher": searcher.name(), "scheduler": scheduler.name(),
        });
        let existed = store.open_experiment(&name, &meta)?;
        if existed && !restore && !run.load_if_exists {
            return Err(Error::new(
                ErrorKind::Value,
                format!(
                    "experiment '{name}' already exists in {}; resume it with Tuner::restore(\"{}\", ...) or choose another name",
                    store.location(),
                    dir.display()
                ),
            ));
        }
        if existed {
            let old = store.experiment_meta(&name)?.unwrap_or(Value::Null);
            for key in ["metric", "mode", "searcher", "scheduler"] {
                if old.get(key) != meta.get(key) {
                    return Err(Error::new(
                        ErrorKind::Value,
                        format!(
                            "cannot restore '{name}': it was run with {key} {} and is now given {}",
                            old[key], meta[key]
                        ),
                    ));
                }
            }
        }
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let cpu = tune.resources_per_trial.cpu.max(1);
        let max_concurrent = tune.max_concurrent_trials.unwrap_or((cores / cpu).max(1)).max(1);
        let id_prefix = format!("{:05x}", fxhash(&name) & 0xfffff);
        let mut d = Driver {
            trainable,
            name,
            dir,
            store,
            searcher,
            scheduler,
            metric,
            mode,
            num_samples,
            max_concurrent,
            cpu,
            stop: run.stop.clone(),
            checkpoint_config: run.checkpoint_config.clone(),
            max_failures: run.failure_config.max_failures,
            time_budget: tune.time_budget_s.map(Duration::from_secs_f64),
            verbose: run.verbose.unwrap_or(1),
            plot: run.plot.unwrap_or(true),
            executor: tune.trial_executor,
            trials: Trials::default(),
            seq: 0,
            created: 0,
            searcher_finished: false,
            id_prefix,
            replaying: false,
            worker: worker_name(),
            join: run.load_if_exists,
            heartbeat_timeout: run.heartbeat_timeout_s.unwrap_or(30.0),
            outbox: (vec![], vec![]),
            locked: false,
        };
        if existed {
            d.replaying = true;
            d.replay()?;
            d.replaying = false;
        }
        Ok(d)
    }

    fn trial_dir(&self, id: &str) -> PathBuf {
        self.dir.join(format!("trial_{id}"))
    }

    fn event(&mut self, kind: EventKind, trial: &str, body: Value) -> Event {
        self.seq += 1;
        Event { seq: self.seq, kind, trial_id: trial.to_string(), body, time: now_unix() }
    }

    /// Commits events with the rows of the trials they touched (and of status changes the
    /// scheduler made), in one transaction.
    fn commit(&mut self, mut events: Vec<Event>, touched: &[usize]) -> Result<()> {
        let mut idx: Vec<usize> = touched.to_vec();
        for i in std::mem::take(&mut self.trials.changed) {
            let id = self.trials.list[i].id.clone();
            let status = self.trials.list[i].status;
            let ev = self.event(EventKind::Status, &id, json!({ "status": status.as_str() }));
            events.push(ev);
            idx.push(i);
        }
        if self.locked {
            self.outbox.0.extend(events);
            self.outbox.1.extend(idx);
            return Ok(());
        }
        idx.sort_unstable();
        idx.dedup();
        let rows: Vec<TrialRow> = idx.iter().map(|&i| self.trials.list[i].row(i)).collect();
        self.store.commit(&self.name, &events, &rows)
    }

    /// Takes the experiment's lock and catches up with what other workers logged since.
    fn lock(&mut self) -> Result<()> {
        self.store.begin(&self.name)?;
        self.locked = true;
        self.catch_up()
    }

    /// Writes the step's events and rows and releases the lock.
    fn unlock(&mut self) -> Result<()> {
        self.locked = false;
        let (events, mut idx) = std::mem::take(&mut self.outbox);
        idx.sort_unstable();
        idx.dedup();
        let rows: Vec<TrialRow> = idx.iter().map(|&i| self.trials.list[i].row(i)).collect();
        self.store.commit(&self.name, &events, &rows)
    }

    /// Applies the events other workers appended since this one last looked.
    fn catch_up(&mut self) -> Result<()> {
        let events = self.store.events(&self.name, self.seq)?;
        if events.is_empty() {
            return Ok(());
        }
        let was = self.replaying;
        self.replaying = true;
        for ev in &events {
            self.apply_logged(ev)?;
        }
        self.replaying = was;
        self.trials.changed.clear();
        Ok(())
    }

    /// Says this worker is alive, and fails the trials of workers that stopped saying so.
    fn maintain(&mut self) -> Result<()> {
        let now = now_unix();
        let own: Vec<String> =
            self.trials.list.iter().filter(|t| t.thread_live).map(|t| t.id.clone()).collect();
        for t in self.trials.list.iter_mut().filter(|t| t.thread_live) {
            t.heartbeat = now;
        }
        self.store.heartbeat(&self.name, &self.worker, &own, now)?;
        let rows = self.store.trials(&self.name)?;
        for r in rows {
            let Some(&i) = self.trials.index.get(&r.trial_id) else { continue };
            let t = &self.trials.list[i];
            if t.status != TrialStatus::Running
                || t.thread_live
                || t.owner.as_deref() == Some(self.worker.as_str())
            {
                continue;
            }
            let silent = now - r.heartbeat;
            if r.heartbeat > 0.0 && silent > self.heartbeat_timeout {
                let msg = format!(
                    "worker {} stopped sending heartbeats ({silent:.1} s without one); the trial goes on from its last checkpoint",
                    r.worker.as_deref().unwrap_or("?")
                );
                let id = r.trial_id.clone();
                let ev = self.event(EventKind::End, &id, json!({ "error": msg, "lost": true }));
                self.on_end(i, Some(msg))?;
                self.commit(vec![ev], &[i])?;
            }
        }
        Ok(())
    }

    // ---- the steps, shared by the live run and the replay of the log ----

    /// Carries out what the scheduler asked of the controller during its last call: searcher
    /// notifications, removals of stopped waiting trials, PBT's checkpoint copies.
    fn settle(&mut self) -> Result<()> {
        loop {
            let calls = std::mem::take(&mut self.trials.searcher_calls);
            let removed = std::mem::take(&mut self.trials.removed);
            let exploits = std::mem::take(&mut self.trials.exploits);
            if calls.is_empty() && removed.is_empty() && exploits.is_empty() {
                return Ok(());
            }
            for (t, paused) in calls {
                if paused {
                    self.searcher.on_pause(&t);
                } else {
                    self.searcher.on_unpause(&t);
                }
            }
            for t in removed {
                self.scheduler.on_trial_remove(&mut self.trials, &t);
                let last = self.trials.get(&t).and_then(|s| s.results.last().cloned());
                self.searcher.on_trial_complete(&t, last.as_ref(), false);
            }
            for (i, j) in exploits {
                if self.replaying {
                    continue;
                }
                let Some(src) = self.trials.list[j].checkpoint.clone() else { continue };
                let id = self.trials.list[i].id.clone();
                let n = std::fs::read_dir(self.trial_dir(&id)).map(|d| d.count()).unwrap_or(0);
                let dest = self.trial_dir(&id).join(format!("checkpoint_exploit_{n:04}"));
                copy_dir(&src, &dest)?;
                let (it, time) =
                    (self.trials.list[j].checkpoint_iteration, self.trials.list[j].checkpoint_time);
                let t = &mut self.trials.list[i];
                t.checkpoint = Some(dest);
                t.checkpoint_iteration = it;
                t.checkpoint_time = time;
                t.next_floor = Some(it);
                self.trials.changed.push(i);
            }
        }
    }

    /// A new trial from the searcher; `logged` is its config when replaying.
    fn add_trial(&mut self, logged: Option<(&str, &Value)>) -> Result<Option<usize>> {
        let id = match logged {
            Some((id, _)) => id.to_string(),
            None => format!("{}_{:05}", self.id_prefix, self.created),
        };
        let config = match self.searcher.suggest(&id)? {
            Suggestion::Config(c) => c,
            Suggestion::Wait if logged.is_none() => return Ok(None),
            Suggestion::Finished if logged.is_none() => {
                self.searcher_finished = true;
                return Ok(None);
            }
            other => {
                return Err(Error::new(
                    ErrorKind::Value,
                    format!("while replaying the log, the searcher answered {other:?} for trial {id}, which it had given a config; restore with the same search algorithm and seed"),
                ))
            }
        };
        if let Some((_, v)) = logged
            && Value::Object(config.0.clone()) != *v
        {
            return Err(Error::new(
                    ErrorKind::Value,
                    format!(
                        "while replaying the log, the searcher suggested {config} for trial {id}, which had {}; restore with the same search algorithm, space and seed",
                        Config(v.as_object().cloned().unwrap_or_default())
                    ),
                ));
        }
        let i = self.trials.list.len();
        self.trials.index.insert(id.clone(), i);
        self.trials.list.push(TrialState {
            id: id.clone(),
            config,
            status: TrialStatus::Pending,
            results: Vec::new(),
            checkpoint: None,
            checkpoint_iteration: 0,
            checkpoint_time: 0.0,
            failures: 0,
            error: None,
            pending: None,
            decided: None,
            floor: 0,
            next_floor: None,
            thread_live: false,
            owner: None,
            heartbeat: 0.0,
        });
        self.created += 1;
        self.scheduler.on_trial_add(&mut self.trials, &id);
        self.settle()?;
        Ok(Some(i))
    }

    /// A result: the decision and who made it. `logged` is the recorded decision when
    /// replaying (stop conditions and the time budget are taken from the log).
    fn on_result(
        &mut self,
        i: usize,
        mut metrics: Metrics,
        logged: Option<(&str, &str)>,
        over_budget: bool,
    ) -> Result<(Decision, &'static str, Metrics)> {
        let id = self.trials.list[i].id.clone();
        let stopper = match logged {
            Some((d, by)) => d == "STOP" && by == "stop",
            None => self.stop.as_ref().is_some_and(|s| s.should_stop(&id, &metrics)),
        };
        let budget = match logged {
            Some((d, by)) => d == "STOP" && by == "time_budget",
            None => over_budget,
        };
        let pending = self.trials.list[i].pending.take();
        let (decision, by) = if stopper || budget {
            (Decision::Stop, decided_by(stopper, budget))
        } else if let Some(p) = pending {
            // Another trial's result asked the scheduler to stop or pause this one.
            (p, "controller")
        } else {
            let d = self.scheduler.on_trial_result(&mut self.trials, &id, &mut metrics);
            (d, "scheduler")
        };
        self.trials.list[i].results.push(metrics.clone());
        self.searcher.on_trial_result(&id, &metrics);
        match decision {
            Decision::Continue => {}
            Decision::Pause => {
                self.trials.list[i].status = TrialStatus::Paused;
            }
            Decision::Stop => {
                // Ray's controller tells the scheduler a stopped trial completed, whoever
                // stopped it (ASHA then forgets the trial; the median rule counts the last
                // result once more).
                self.scheduler.on_trial_complete(&mut self.trials, &id, &metrics);
                self.searcher.on_trial_complete(&id, Some(&metrics), false);
                self.trials.list[i].status = TrialStatus::Terminated;
            }
        }
        self.settle()?;
        Ok((decision, by, metrics))
    }

    /// A trial's trainable returned: `Ok` or its error. Returns whether it ended for good.
    fn on_end(&mut self, i: usize, error: Option<String>) -> Result<bool> {
        let done = self.on_end_inner(i, error);
        self.settle()?;
        Ok(done)
    }

    fn on_end_inner(&mut self, i: usize, error: Option<String>) -> bool {
        let id = self.trials.list[i].id.clone();
        let t = &mut self.trials.list[i];
        let decided = t.decided.take();
        if matches!(t.status, TrialStatus::Terminated | TrialStatus::Paused) && decided.is_some() {
            return t.status == TrialStatus::Terminated;
        }
        let last = t.results.last().cloned().unwrap_or_default();
        match error {
            None => {
                t.status = TrialStatus::Terminated;
                self.scheduler.on_trial_complete(&mut self.trials, &id, &last);
                self.searcher.on_trial_complete(&id, Some(&last), false);
                true
            }
            Some(e) => {
                t.failures += 1;
                t.error = Some(e);
                if self.max_failures < 0 || t.failures <= self.max_failures {
                    t.status = TrialStatus::Pending;
                    false
                } else {
                    t.status = TrialStatus::Error;
                    self.scheduler.on_trial_error(&mut self.trials, &id);
                    self.searcher.on_trial_complete(&id, None, true);
                    true
                }
            }
        }
    }

    /// Applies one logged event: what happened then happens again to the searcher, the
    /// scheduler and the trials (on a restore, and as other workers' events arrive).
    fn apply_logged(&mut self, ev: &Event) -> Result<()> {
        self.seq = self.seq.max(ev.seq);
        match ev.kind {
            EventKind::Add => {
                self.add_trial(Some((&ev.trial_id, &ev.body)))?;
            }
            EventKind::Start => {
                if let Some(&i) = self.trials.index.get(&ev.trial_id) {
                    let t = &mut self.trials.list[i];
                    t.status = TrialStatus::Running;
                    t.decided = None;
                    t.pending = None;
                    t.owner = ev.body["worker"].as_str().map(str::to_string);
                }
            }
            EventKind::Result => {
                let Some(&i) = self.trials.index.get(&ev.trial_id) else { return Ok(()) };
                let metrics: Metrics = serde_json::from_value(ev.body["metrics"].clone()).map_err(|e| {
                    Error::new(ErrorKind::Io, format!("a result in the log is unreadable: {e}"))
                })?;
                if let Some(cp) = ev.body["checkpoint"].as_str() {
                    let t = &mut self.trials.list[i];
                    t.checkpoint = Some(PathBuf::from(cp));
                    t.checkpoint_iteration = ev.body["checkpoint_iteration"].as_u64().unwrap_or(0);
                    t.checkpoint_time = ev.body["checkpoint_time"].as_f64().unwrap_or(0.0);
                }
                let d = ev.body["decision"].as_str().unwrap_or("CONTINUE").to_string();
                let by = ev.body["by"].as_str().unwrap_or("scheduler").to_string();
                let (decision, _, _) = self.on_result(i, metrics, Some((&d, &by)), false)?;
                if decision.as_str() != d {
                    return Err(Error::new(
                        ErrorKind::Value,
                        format!(
                            "while replaying the log, the scheduler decided {} for trial {}'s result {}, where it had decided {d}; restore with the same scheduler and seed",
                            decision.as_str(), ev.trial_id, ev.body["metrics"]
                        ),
                    ));
                }
                if decision != Decision::Continue {
                    self.trials.list[i].decided = Some(decision);
                }
            }
            EventKind::End => {
                let Some(&i) = self.trials.index.get(&ev.trial_id) else { return Ok(()) };
                let error = ev.body["error"].as_str().map(str::to_string);
                self.on_end(i, error)?;
            }
            EventKind::Status => {}
            EventKind::Choose => {
                let c = self.choose()?;
                if c.as_deref() != ev.body["trial"].as_str() {
                    return Err(Error::new(
                        ErrorKind::Value,
                        format!(
                            "while replaying the log, the scheduler chose {c:?} where it had chosen {}; restore with the same scheduler",
                            ev.body["trial"]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Rebuilds the searcher, the scheduler and the trials from the log.
    fn replay(&mut self) -> Result<()> {
        let events = self.store.events(&self.name, 0)?;
        let rows = self.store.trials(&self.name)?;
        for ev in &events {
            self.apply_logged(ev)?;
        }
        self.trials.changed.clear();
        // Checkpoints and failures come from the rows; running trials start again.
        for r in rows {
            if let Some(&i) = self.trials.index.get(&r.trial_id) {
                let t = &mut self.trials.list[i];
                if let Some(c) = r.config.as_object() {
                    t.config = Config(c.clone());
                }
                t.checkpoint = r.checkpoint.map(PathBuf::from);
                t.checkpoint_iteration = r.checkpoint_iteration.max(0) as u64;
                t.checkpoint_time = r.checkpoint_time;
                t.failures = r.failures;
                t.error = r.error;
                t.decided = None;
                t.owner = r.worker.clone();
                if t.status == TrialStatus::Running && !self.join {
                    // Restore: this driver takes over; the trials that were running start again.
                    t.status = TrialStatus::Pending;
                }
            }
        }
        Ok(())
    }

    fn choose(&mut self) -> Result<Option<String>> {
        let before = self.scheduler.state_version();
        let c = self.scheduler.choose_trial_to_run(&mut self.trials);
        self.settle()?;
        if !self.replaying && self.scheduler.state_version() != before {
            // The choice changed the scheduler (HyperBandForBOHB processes brackets when no
            // trial runs): logged, so a replay makes the same call at the same point.
            let ev = self.event(EventKind::Choose, c.as_deref().unwrap_or(""), json!({ "trial": c }));
            self.commit(vec![ev], &[])?;
        }
        Ok(c)
    }

    fn may_create(&self, started: Instant) -> bool {
        !self.searcher_finished
            && (self.searcher.handles_num_samples() || self.num_samples.is_none_or(|n| self.created < n))
            && self.time_budget.is_none_or(|b| started.elapsed() < b)
    }

    fn start_trial(&mut self, i: usize, tx: &mpsc::Sender<Message>) -> Result<()> {
        let id = self.trials.list[i].id.clone();
        let dir = self.trial_dir(&id);
        let t = &mut self.trials.list[i];
        t.status = TrialStatus::Running;
        t.decided = None;
        t.pending = None;
        t.floor = t.next_floor.take().unwrap_or_else(|| t.logged_iteration());
        t.thread_live = true;
        t.owner = Some(self.worker.clone());
        t.heartbeat = now_unix();
        let config = t.config.clone();
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let state = SessionState {
            trial_id: id.clone(),
            trial_dir: dir,
            iteration: t.checkpoint_iteration,
            time_offset: t.checkpoint_time,
            started: Instant::now(),
            last_report: Instant::now(),
            checkpoint: t.checkpoint.clone().map(Checkpoint::from_directory),
            link: Link::Local(tx.clone()),
            decision: None,
            scratch: 0,
        };
        let from_iteration = state.iteration;
        let mut session = Session::new(state);
        let ev = self.event(
            EventKind::Start,
            &id,
            json!({ "from_iteration": from_iteration, "worker": self.worker }),
        );
        self.commit(vec![ev], &[i])?;
        if self.executor == TrialExecutor::Process {
            let t = &self.trials.list[i];
            let spec = crate::process::TrialSpec {
                experiment: self.name.clone(),
                trial_id: id.clone(),
                trial_dir: self.trial_dir(&id),
                config: config.clone(),
                checkpoint: t.checkpoint.clone(),
                iteration: t.checkpoint_iteration,
                time_offset: t.checkpoint_time,
                socket: PathBuf::new(),
                cpu: self.cpu,
            };
            drop(session);
            return crate::process::spawn(spec, tx.clone());
        }
        let trainable = self.trainable.clone();
        let cpu = self.cpu;
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(format!("trial-{id}"))
            .spawn(move || {
                pyrite_core::threads::set_thread_num_threads(Some(cpu));
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    trainable(&config, &mut session)
                }));
                let outcome = match r {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(format!("{e:?}")),
                    Err(p) => Err(format!(
                        "the trainable panicked: {}",
                        p.downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| p.downcast_ref::<&str>().copied())
                            .unwrap_or("(no message)")
                    )),
                };
                let _ = tx.send(Message::Done { trial: id, outcome });
            })
            .map_err(|e| Error::new(ErrorKind::Value, format!("could not start a trial thread: {e}")))?;
        Ok(())
    }

    /// Moves a reported checkpoint into the trial's folder and prunes old ones.
    fn keep_checkpoint(&mut self, i: usize, src: &Path, metrics: &Metrics) -> Result<PathBuf> {
        let id = self.trials.list[i].id.clone();
        let dest = self.trial_dir(&id).join(format!("checkpoint_{:06}", metrics.iteration()));
        if src != dest {
            if dest.exists() {
                std::fs::remove_dir_all(&dest).map_err(|e| io_err(&dest, e))?;
            }
            if std::fs::rename(src, &dest).is_err() {
                copy_dir(src, &dest)?;
            }
        }
        Ok(dest)
    }

    fn prune_checkpoints(&mut self, i: usize) {
        let Some(keep) = self.checkpoint_config.num_to_keep else { return };
        let t = &self.trials.list[i];
        let dir = self.trial_dir(&t.id);
        let Ok(entries) = std::fs::read_dir(&dir) else { return };
        let mut cps: Vec<(u64, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix("checkpoint_").and_then(|n| n.parse::<u64>().ok()).map(|n| (n, e.path()))
            })
            .collect();
        cps.sort();
        let latest = cps.last().map(|c| c.0);
        let score = |it: u64| -> f64 {
            let attr = self.checkpoint_config.checkpoint_score_attribute.as_deref();
            let order = self.checkpoint_config.checkpoint_score_order.unwrap_or(Mode::Max);
            match attr {
                Some(a) => t
                    .results
                    .iter()
                    .find(|m| m.iteration() == it)
                    .and_then(|m| m.get(a))
                    .map_or(f64::NEG_INFINITY, |v| order.sign() * v),
                None => it as f64,
            }
        };
        let mut ranked: Vec<(f64, u64, PathBuf)> =
            cps.into_iter().map(|(it, p)| (score(it), it, p)).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        for (rank, (_, it, p)) in ranked.into_iter().enumerate() {
            if rank >= keep.max(1) && Some(it) != latest {
                let _ = std::fs::remove_dir_all(p);
            }
        }
    }

    fn handle_report(
        &mut self,
        trial: String,
        metrics: Metrics,
        checkpoint: Option<PathBuf>,
        over_budget: bool,
    ) -> Result<Decision> {
        let Some(&i) = self.trials.index.get(&trial) else { return Ok(Decision::Stop) };
        // A trial resumed from a checkpoint repeats iterations the log already has: those were
        // decided (continue) and are not counted twice.
        if metrics.iteration() <= self.trials.list[i].floor {
            if let Some(src) = checkpoint {
                let dest = self.keep_checkpoint(i, &src, &metrics)?;
                let t = &mut self.trials.list[i];
                t.checkpoint = Some(dest);
                t.checkpoint_iteration = metrics.iteration();
                t.checkpoint_time = metrics.get(TIME_TOTAL_S).unwrap_or(0.0);
                self.commit(vec![], &[i])?;
            }
            return Ok(Decision::Continue);
        }
        if let Some(src) = checkpoint {
            let dest = self.keep_checkpoint(i, &src, &metrics)?;
            let t = &mut self.trials.list[i];
            t.checkpoint = Some(dest);
            t.checkpoint_iteration = metrics.iteration();
            t.checkpoint_time = metrics.get(TIME_TOTAL_S).unwrap_or(0.0);
        }
        let (decision, by, metrics) = self.on_result(i, metrics, None, over_budget)?;
        if decision != Decision::Continue {
            self.trials.list[i].decided = Some(decision);
        }
        let ev = self.event(
            EventKind::Result,
            &trial,
            json!({
                "metrics": metrics, "decision": decision.as_str(), "by": by,
                "checkpoint": self.trials.list[i].checkpoint.as_ref().map(|p| p.display().to_string()),
                "checkpoint_iteration": self.trials.list[i].checkpoint_iteration,
                "checkpoint_time": self.trials.list[i].checkpoint_time,
            }),
        );
        self.commit(vec![ev], &[i])?;
        self.prune_checkpoints(i);
        Ok(decision)
    }

    fn handle_done(&mut self, trial: String, outcome: std::result::Result<(), String>) -> Result<()> {
        let Some(&i) = self.trials.index.get(&trial) else { return Ok(()) };
        self.trials.list[i].thread_live = false;
        let interrupted = self.trials.list[i].decided.is_some();
        let error = if interrupted { None } else { outcome.err() };
        if interrupted {
            // Ended because we asked; the status is already what the decision made it.
            self.trials.list[i].decided = None;
            let ev = self.event(EventKind::End, &trial, json!({ "error": null, "interrupted": true }));
            self.commit(vec![ev], &[i])?;
            return Ok(());
        }
        let ev = self.event(EventKind::End, &trial, json!({ "error": error }));
        self.on_end(i, error)?;
        self.commit(vec![ev], &[i])
    }

    fn run(mut self) -> Result<ResultGrid> {
        let (tx, rx) = mpsc::channel::<Message>();
        let started = Instant::now();
        let mut running = 0usize;
        let mut progress = ProgressTable::new(self.verbose);
        let mut last_maintain = Instant::now();
        let every = Duration::from_secs_f64((self.heartbeat_timeout / 4.0).clamp(0.05, 5.0));
        loop {
            // Under the experiment's lock: catch up with the other workers, say this one is
            // alive, then fill the free slots: waiting trials first (the scheduler picks), then
            // new ones.
            self.lock()?;
            if last_maintain.elapsed() >= every {
                self.maintain()?;
                last_maintain = Instant::now();
            }
            let mut blocked = false;
            while running < self.max_concurrent {
                let mut next = self.choose()?;
                if next.is_none()
                    && self.may_create(started)
                    && let Some(i) = self.add_trial(None)?
                {
                    let id = self.trials.list[i].id.clone();
                    let body = Value::Object(self.trials.list[i].config.0.clone());
                    let ev = self.event(EventKind::Add, &id, body);
                    self.commit(vec![ev], &[i])?;
                    next = self.choose()?;
                }
                let Some(id) = next else { break };
                let Some(&i) = self.trials.index.get(&id) else { break };
                if !matches!(self.trials.list[i].status, TrialStatus::Pending | TrialStatus::Paused)
                    || self.trials.list[i].thread_live
                {
                    // Its last run has not wound down yet: start it when its end arrives.
                    blocked = true;
                    break;
                }
                self.start_trial(i, &tx)?;
                running += 1;
            }
            let others_running =
                self.trials.list.iter().any(|t| t.status == TrialStatus::Running && !t.thread_live);
            let finished = running == 0 && !blocked && {
                let waiting = self
                    .trials
                    .list
                    .iter()
                    .any(|t| matches!(t.status, TrialStatus::Pending | TrialStatus::Paused));
                !others_running
                    && (!waiting
                        || self.time_budget.is_some_and(|b| started.elapsed() >= b)
                        || self.choose()?.is_none())
            };
            self.unlock()?;
            if finished {
                break;
            }
            // Wait for a trial of this worker to report or end (or, with none running here, for
            // the other workers to move on).
            match rx.recv_timeout(if running == 0 {
                Duration::from_millis(100)
            } else {
                every.min(Duration::from_millis(200))
            }) {
                Ok(Message::Report { trial, metrics, checkpoint, reply }) => {
                    let over = self.time_budget.is_some_and(|b| started.elapsed() >= b);
                    self.lock()?;
                    let decision = self.handle_report(trial, metrics, checkpoint, over)?;
                    self.unlock()?;
                    let _ = reply.send(decision);
                }
                Ok(Message::Done { trial, outcome }) => {
                    running -= 1;
                    self.lock()?;
                    self.handle_done(trial, outcome)?;
                    self.unlock()?;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            progress.maybe_print(&self.view(), started.elapsed(), false);
        }
        let grid = self.result_grid();
        progress.maybe_print(&self.view(), started.elapsed(), true);
        if self.plot && self.metric.is_some() && grid.results().iter().any(|r| !r.metrics_history.is_empty())
        {
            // The results are in the database already: a figure that cannot be drawn is said,
            // not fatal.
            if let Err(e) = grid.plot(None, None) {
                eprintln!("tune: could not draw the experiment's figures: {e}");
            }
        }
        Ok(grid)
    }

    fn view(&self) -> crate::progress::View<'_> {
        crate::progress::View {
            metric: self.metric.as_deref(),
            trials: self
                .trials
                .list
                .iter()
                .map(|t| (t.id.as_str(), t.status, &t.config, t.results.last()))
                .collect(),
        }
    }

    fn result_grid(&self) -> ResultGrid {
        let results = self
            .trials
            .list
            .iter()
            .map(|t| TrialResult {
                trial_id: t.id.clone(),
                config: t.config.clone(),
                status: t.status,
                metrics: t.results.last().cloned().unwrap_or_default(),
                metrics_history: t.results.clone(),
                checkpoint: t.checkpoint.clone().map(Checkpoint::from_directory),
                error: if t.status == TrialStatus::Error { t.error.clone() } else { None },
                path: self.trial_dir(&t.id),
            })
            .collect();
        ResultGrid::new(results, self.metric.clone(), self.mode, self.dir.clone())
    }
}

fn copy_dir(src: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|e| io_err(dest, e))?;
    for entry in std::fs::read_dir(src).map_err(|e| io_err(src, e))? {
        let entry = entry.map_err(|e| io_err(src, e))?;
        let p = entry.path();
        let to = dest.join(entry.file_name());
        if p.is_dir() {
            copy_dir(&p, &to)?;
        } else {
            std::fs::copy(&p, &to).map_err(|e| io_err(&p, e))?;
        }
    }
    Ok(())
}

/// `host:pid`: the host from the kernel, as `hostname` prints it.
fn worker_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host = if host.is_empty() { "localhost".to_string() } else { host };
    format!("{host}:{}", std::process::id())
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}
