//! Trials in their own processes: a trial whose process aborts ends as an error, the others
//! finish, and the experiment goes on. (This file holds one test: the trial processes run this
//! test binary again, which runs its only test, whose `fit` then runs the one trial.)

use pyrite_tune::{
    grid_search, FailureConfig, Metrics, Mode, ParamSpace, RunConfig, TrialExecutor, TrialStatus, TuneConfig,
    Tuner,
};

#[test]
fn a_trial_whose_process_aborts_ends_alone_and_the_others_finish() {
    let dir = std::env::temp_dir().join(format!("pyrite_tune_process_{}", std::process::id()));
    let driver_pid = std::process::id() as f64;
    let grid = Tuner::new(
        |c, s| {
            let crash: bool = c.get("crash")?;
            for i in 0..3 {
                if crash && i == 1 {
                    std::process::abort();
                }
                s.report(
                    [
                        ("step", i as f64),
                        ("pid", std::process::id() as f64),
                        ("threads", pyrite_core::get_num_threads() as f64),
                    ],
                    None,
                )?;
            }
            Ok(())
        },
        ParamSpace::new().with("crash", grid_search([false, true, false])),
        TuneConfig {
            metric: Some("step".into()),
            mode: Some(Mode::Max),
            max_concurrent_trials: Some(2),
            trial_executor: TrialExecutor::Process,
            ..Default::default()
        },
        RunConfig {
            name: Some("proc".into()),
            storage_path: Some(dir.clone()),
            verbose: Some(0),
            failure_config: FailureConfig { max_failures: 0 },
            ..Default::default()
        },
    )
    .fit()
    .unwrap();
    let r = grid.results();
    assert_eq!(r.len(), 3);
    for ok in [&r[0], &r[2]] {
        assert_eq!(ok.status, TrialStatus::Terminated, "{}", grid.table());
        let its: Vec<u64> = ok.metrics_history.iter().map(Metrics::iteration).collect();
        assert_eq!(its, [1, 2, 3]);
        assert_ne!(ok.metrics.get("pid"), Some(driver_pid), "the trial ran in its own process");
        assert_eq!(ok.metrics.get("threads"), Some(1.0), "with its thread budget");
    }
    let crashed = &r[1];
    assert_eq!(crashed.status, TrialStatus::Error);
    let msg = crashed.error.as_deref().unwrap();
    assert!(msg.contains("killed by signal 6 (SIGABRT)"), "{msg}");
    assert_eq!(crashed.metrics_history.len(), 1, "its first report was recorded");
    std::fs::remove_dir_all(dir).unwrap();
}
