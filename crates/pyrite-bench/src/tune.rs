//! The tuning workloads, paired with `reference/bench/tune.py` (Optuna's TPESampler and Ray
//! Tune's ASHA):
//!
//! - `tpe_suggest`: TPE's suggestion time with 1000 completed Hartmann-6 trials in its history
//!   (six uniform parameters in [0, 1]); the median over `--repeats` suggestions (`suggest_us`).
//! - `asha_report`: ASHA's decision time per reported result (its defaults: max_t 100,
//!   grace_period 1, reduction_factor 4), 1000 trials each reporting 100 iterations of a seeded
//!   random loss (`report_us`: the mean per call, median over the repeats).

use crate::timing::round;
use crate::Args;
use pyrite::tune::schedulers::{ASHAScheduler, AshaOptions, Controller, TrialScheduler};
use pyrite::tune::search::{SearchProperties, Searcher, Suggestion, TpeOptions, TpeSearch};
use pyrite::tune::{uniform, Metrics, Mode, ParamSpace, Rng, TrialStatus};
use serde_json::{json, Map, Value};
use std::time::Instant;

fn hartmann6(x: &[f64]) -> f64 {
    const ALPHA: [f64; 4] = [1.0, 1.2, 3.0, 3.2];
    const A: [[f64; 6]; 4] = [
        [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
        [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
        [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
        [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
    ];
    const P: [[f64; 6]; 4] = [
        [1312.0, 1696.0, 5569.0, 124.0, 8283.0, 5886.0],
        [2329.0, 4135.0, 8307.0, 3736.0, 1004.0, 9991.0],
        [2348.0, 1451.0, 3522.0, 2883.0, 3047.0, 6650.0],
        [4047.0, 8828.0, 8732.0, 5743.0, 1091.0, 381.0],
    ];
    -(0..4)
        .map(|i| ALPHA[i] * (-(0..6).map(|j| A[i][j] * (x[j] - P[i][j] * 1e-4).powi(2)).sum::<f64>()).exp())
        .sum::<f64>()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn tpe_suggest(args: &Args) -> Map<String, Value> {
    let mut space = ParamSpace::new();
    for i in 0..6 {
        space = space.with(format!("x{i}"), uniform(0.0, 1.0));
    }
    // 1000 random trials first (as Optuna's study gets them from add_trials), then the model.
    let mut tpe = TpeSearch::new(TpeOptions { seed: Some(0), n_startup_trials: 1000, ..Default::default() });
    tpe.set_search_properties(&SearchProperties {
        metric: "y",
        mode: Mode::Min,
        space: &space,
        num_samples: None,
    })
    .expect("a searchable space");
    let mut step = |id: usize| -> f64 {
        let t0 = Instant::now();
        let Suggestion::Config(c) = tpe.suggest(&id.to_string()).expect("a suggestion") else {
            panic!("TPE suggests")
        };
        let dt = t0.elapsed().as_secs_f64();
        let x: Vec<f64> = (0..6).map(|i| c.get(&format!("x{i}")).expect("x")).collect();
        tpe.on_trial_complete(&id.to_string(), Some(&Metrics::from([("y", hartmann6(&x))])), false);
        dt
    };
    for id in 0..1000 {
        step(id);
    }
    let times: Vec<f64> = (0..3 + args.repeats.max(5)).map(|k| step(1000 + k)).skip(3).collect();
    let mut m = Map::new();
    m.insert("suggest_us".into(), json!(round(median(times) * 1e6, 2)));
    m.insert("history".into(), json!(1000));
    m
}

/// A controller with nothing to steer (ASHA never calls it).
struct NoTrials;
impl Controller for NoTrials {
    fn trials(&self) -> Vec<(String, TrialStatus)> {
        vec![]
    }
    fn status(&self, _t: &str) -> Option<TrialStatus> {
        Some(TrialStatus::Running)
    }
    fn stop_trial(&mut self, _t: &str) {}
    fn pause_trial(&mut self, _t: &str) {}
    fn unpause_trial(&mut self, _t: &str) {}
}

pub fn asha_report(args: &Args) -> Map<String, Value> {
    let mut per_call = vec![];
    for r in 0..args.repeats.clamp(1, 3) {
        let mut asha = ASHAScheduler::new(AshaOptions {
            metric: Some("loss".into()),
            mode: Some(Mode::Min),
            seed: Some(0),
            ..Default::default()
        })
        .expect("ASHA");
        let ids: Vec<String> = (0..1000).map(|i| format!("t{i}")).collect();
        for id in &ids {
            asha.on_trial_add(&mut NoTrials, id);
        }
        let mut rng = Rng::seed_from(r as u64);
        let (mut spent, mut calls) = (0.0, 0usize);
        let mut m = Metrics::default();
        for it in 1..=100 {
            for id in &ids {
                m.insert("training_iteration", it as f64);
                m.insert("loss", rng.uniform());
                let t0 = Instant::now();
                std::hint::black_box(asha.on_trial_result(&mut NoTrials, id, &mut m));
                spent += t0.elapsed().as_secs_f64();
                calls += 1;
            }
        }
        per_call.push(spent / calls as f64);
    }
    let mut m = Map::new();
    m.insert("report_us".into(), json!(round(median(per_call) * 1e6, 3)));
    m
}
