//! Several worker processes on one experiment (Optuna's model): each runs `fit` with
//! `load_if_exists`, they pull trials from the shared database, and one of them is killed with
//! SIGKILL while training: its trial is taken over after the heartbeat timeout, and in the end
//! every trial ran, each iteration recorded once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pyrite_tune::schedulers::{ASHAScheduler, AshaOptions};
use pyrite_tune::search::{TpeOptions, TpeSearch};
use pyrite_tune::storage::{open_store, EventKind};
use pyrite_tune::{
    uniform, Checkpoint, Config, FailureConfig, Mode, ParamSpace, RunConfig, Session, TrialStatus,
    TuneConfig, Tuner,
};

fn experiment(dir: &Path, name: &str, url: Option<String>) -> pyrite_core::Result<pyrite_tune::ResultGrid> {
    let trainable = |c: &Config, s: &mut Session| -> pyrite_core::Result<()> {
        let x: f64 = c.get("x")?;
        for it in s.iteration()..9 {
            std::thread::sleep(Duration::from_millis(120));
            let d = s.checkpoint_dir()?;
            std::fs::write(d.join("it"), (it + 1).to_string()).unwrap();
            s.report(
                [("loss", (x - 0.3).abs() + 1.0 / (it as f64 + 2.0))],
                Some(Checkpoint::from_directory(d)),
            )?;
        }
        Ok(())
    };
    Tuner::new(
        trainable,
        ParamSpace::new().with("x", uniform(0.0, 1.0)),
        TuneConfig {
            metric: Some("loss".into()),
            mode: Some(Mode::Min),
            num_samples: 12,
            max_concurrent_trials: Some(2),
            search_alg: Some(Box::new(TpeSearch::new(TpeOptions {
                seed: Some(5),
                n_startup_trials: 4,
                ..Default::default()
            }))),
            scheduler: Some(Box::new(
                ASHAScheduler::new(AshaOptions {
                    max_t: 9.0,
                    reduction_factor: 3.0,
                    seed: Some(0),
                    ..Default::default()
                })
                .unwrap(),
            )),
            ..Default::default()
        },
        RunConfig {
            name: Some(name.into()),
            storage_path: Some(dir.to_path_buf()),
            storage_url: url,
            verbose: Some(0),
            plot: Some(false),
            load_if_exists: true,
            heartbeat_timeout_s: Some(1.0),
            failure_config: FailureConfig { max_failures: 3 },
            ..Default::default()
        },
    )
    .fit()
}

#[test]
#[ignore = "a worker process of the tests below"]
fn worker() {
    let dir = PathBuf::from(std::env::var("PYRITE_TUNE_WORKER_DIR").unwrap());
    let name = std::env::var("PYRITE_TUNE_WORKER_NAME").unwrap();
    experiment(&dir, &name, std::env::var("PYRITE_TUNE_WORKER_URL").ok()).unwrap();
}

#[test]
fn several_workers_share_an_experiment_and_survive_one_killed() {
    three_workers_one_killed(None);
}

/// The same on PostgreSQL (`--features postgres`, with `PYRITE_TUNE_POSTGRES_URL` naming a
/// database the test may create tables in; `.ci/run` starts a server for it).
#[cfg(feature = "postgres")]
#[test]
fn several_workers_share_an_experiment_on_postgres() {
    let url = std::env::var("PYRITE_TUNE_POSTGRES_URL").expect(
        "PYRITE_TUNE_POSTGRES_URL=postgres://user:password@host/database is needed for the PostgreSQL tests",
    );
    three_workers_one_killed(Some(url));
}

fn three_workers_one_killed(url: Option<String>) {
    let kind = if url.is_some() { "postgres" } else { "sqlite" };
    let name = format!("shared_{kind}_{}", std::process::id());
    let dir = std::env::temp_dir().join(format!("pyrite_tune_workers_{kind}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let spawn = || {
        std::process::Command::new(&exe)
            .args(["--exact", "worker", "--ignored", "--nocapture"])
            .env("PYRITE_TUNE_WORKER_DIR", &dir)
            .env("PYRITE_TUNE_WORKER_NAME", &name)
            .envs(url.iter().map(|u| ("PYRITE_TUNE_WORKER_URL", u.as_str())))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let db = url.clone().unwrap_or_else(|| dir.join(&name).join("experiment.db").display().to_string());
    let mut workers: Vec<std::process::Child> = (0..3).map(|_| spawn()).collect();
    // Kill one worker while it trains: once the log shows it started a trial.
    let victim = format!(":{}", workers[1].id());
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let started = (url.is_some() || Path::new(&db).exists())
            && open_store(&db).and_then(|mut s| s.events(&name, 0)).is_ok_and(|ev| {
                ev.iter().any(|e| {
                    e.kind == EventKind::Start
                        && e.body["worker"].as_str().is_some_and(|w| w.ends_with(&victim))
                })
            });
        if started {
            break;
        }
        assert!(Instant::now() < until, "worker 1 never started a trial");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(150));
    workers[1].kill().unwrap();
    workers[1].wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    for (k, w) in workers.iter_mut().enumerate() {
        if k == 1 {
            continue;
        }
        loop {
            if let Some(status) = w.try_wait().unwrap() {
                assert!(status.success(), "worker {k} failed: {status}");
                break;
            }
            assert!(Instant::now() < deadline, "worker {k} did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let mut store = open_store(&db).unwrap();
    let events = store.events(&name, 0).unwrap();
    let rows = store.trials(&name).unwrap();
    assert_eq!(rows.len(), 12, "every trial was created once");
    assert!(rows.iter().all(|r| r.status == TrialStatus::Terminated), "{rows:#?}");
    // Trials ran on at least two workers.
    let mut workers_seen: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == EventKind::Start)
        .filter_map(|e| e.body["worker"].as_str())
        .collect();
    workers_seen.sort();
    workers_seen.dedup();
    assert!(workers_seen.len() >= 2, "{workers_seen:?}");
    // Each trial's iterations once each, 1, 2, ... (ASHA stops some at rungs 1 and 3).
    for r in &rows {
        let its: Vec<u64> = events
            .iter()
            .filter(|e| e.kind == EventKind::Result && e.trial_id == r.trial_id)
            .map(|e| e.body["metrics"]["training_iteration"].as_f64().unwrap() as u64)
            .collect();
        assert_eq!(its, (1..=its.len() as u64).collect::<Vec<_>>(), "trial {}", r.trial_id);
    }
    // The killed worker's trials were taken over (if it was running one when killed).
    let lost = events.iter().filter(|e| e.kind == EventKind::End && e.body["lost"] == true).count();
    println!("{} workers ran trials; {lost} trial(s) taken over from the killed one", workers_seen.len());
    assert!(lost >= 1, "the killed worker's running trials were not taken over");
    std::fs::remove_dir_all(dir).unwrap();
}
