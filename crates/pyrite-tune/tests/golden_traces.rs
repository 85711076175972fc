//! The schedulers' decisions equal Ray Tune's and Optuna's, decision for decision, on recorded
//! traces (reference/gen_tune_schedulers.py drove Ray's own AsyncHyperBandScheduler,
//! HyperBandScheduler, HyperBandForBOHB and MedianStoppingRule with a mock controller, and
//! Optuna's MedianPruner on a study, and recorded every call and answer).

use std::collections::HashMap;

use pyrite_tune::schedulers::{
    ASHAScheduler, AshaOptions, Controller, Decision, HyperBandOptions, HyperBandScheduler, MedianPruner,
    MedianStoppingOptions, MedianStoppingRule, PercentilePrunerOptions, TrialScheduler,
};
use pyrite_tune::{Metrics, Mode, TrialStatus};
use serde_json::Value;

fn traces(file: &str) -> Value {
    let path = format!("{}/../../reference/data/tune/{file}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))).unwrap()
}

/// Ray's mock controller: trials in creation order with their statuses, and the calls a
/// scheduler made on it.
#[derive(Default)]
struct Mock {
    order: Vec<String>,
    status: HashMap<String, TrialStatus>,
    calls: Vec<(String, String)>,
    removed: Vec<String>,
}

impl Controller for Mock {
    fn trials(&self) -> Vec<(String, TrialStatus)> {
        self.order.iter().map(|t| (t.clone(), self.status[t])).collect()
    }
    fn status(&self, trial: &str) -> Option<TrialStatus> {
        self.status.get(trial).copied()
    }
    fn stop_trial(&mut self, trial: &str) {
        self.calls.push(("stop_trial".into(), trial.into()));
        if matches!(self.status[trial], TrialStatus::Paused | TrialStatus::Pending) {
            self.removed.push(trial.into());
        }
        self.status.insert(trial.into(), TrialStatus::Terminated);
    }
    fn pause_trial(&mut self, trial: &str) {
        self.calls.push(("pause_trial".into(), trial.into()));
        self.status.insert(trial.into(), TrialStatus::Paused);
    }
    fn unpause_trial(&mut self, trial: &str) {
        self.calls.push(("unpause_trial".into(), trial.into()));
        self.status.insert(trial.into(), TrialStatus::Pending);
    }
    fn searcher_on_pause(&mut self, trial: &str) {
        self.calls.push(("searcher.on_pause".into(), trial.into()));
    }
    fn searcher_on_unpause(&mut self, trial: &str) {
        self.calls.push(("searcher.on_unpause".into(), trial.into()));
    }
}

fn mode(o: &Value) -> Mode {
    o["mode"].as_str().unwrap().parse().unwrap()
}

fn result(o: &Value, e: &Value) -> Metrics {
    Metrics::from([
        (o["time_attr"].as_str().unwrap(), e["t"].as_f64().unwrap()),
        (o["metric"].as_str().unwrap(), e["value"].as_f64().unwrap()),
    ])
}

fn decision(s: &str) -> Decision {
    match s {
        "CONTINUE" => Decision::Continue,
        "PAUSE" => Decision::Pause,
        "STOP" => Decision::Stop,
        other => panic!("decision {other}"),
    }
}

#[test]
fn asha_decides_as_ray_on_every_recorded_result() {
    let t = traces("asha_traces.json");
    let mut checked = 0;
    for case in t["cases"].as_array().unwrap() {
        let o = &case["options"];
        let mut asha = ASHAScheduler::new(AshaOptions {
            time_attr: o["time_attr"].as_str().unwrap().into(),
            metric: Some(o["metric"].as_str().unwrap().into()),
            mode: Some(mode(o)),
            max_t: o["max_t"].as_f64().unwrap(),
            grace_period: o["grace_period"].as_f64().unwrap(),
            reduction_factor: o["reduction_factor"].as_f64().unwrap(),
            brackets: o["brackets"].as_u64().unwrap() as usize,
            stop_last_trials: o["stop_last_trials"].as_bool().unwrap(),
            seed: Some(0),
        })
        .unwrap();
        let mut ctl = Mock::default();
        for e in case["events"].as_array().unwrap() {
            let trial = e["trial"].as_str().unwrap();
            match e["op"].as_str().unwrap() {
                "add" => asha.add_trial_to_bracket(trial, e["bracket"].as_u64().unwrap() as usize),
                "result" => {
                    let d = asha.on_trial_result(&mut ctl, trial, &mut result(o, e));
                    assert_eq!(d, decision(e["decision"].as_str().unwrap()), "{}: {e}", case["name"]);
                    checked += 1;
                }
                "complete" => asha.on_trial_complete(&mut ctl, trial, &result(o, e)),
                op => panic!("unknown op {op}"),
            }
        }
    }
    assert!(checked > 1500, "{checked} decisions");
}

#[test]
fn the_median_stopping_rule_decides_as_ray_on_every_recorded_result() {
    let t = traces("median_stopping_traces.json");
    let mut checked = 0;
    for case in t["cases"].as_array().unwrap() {
        let o = &case["options"];
        let mut rule = MedianStoppingRule::new(MedianStoppingOptions {
            time_attr: o["time_attr"].as_str().unwrap().into(),
            metric: Some(o["metric"].as_str().unwrap().into()),
            mode: Some(mode(o)),
            grace_period: o["grace_period"].as_f64().unwrap(),
            min_samples_required: o["min_samples_required"].as_u64().unwrap() as usize,
            min_time_slice: o["min_time_slice"].as_f64().unwrap(),
            hard_stop: o["hard_stop"].as_bool().unwrap(),
        });
        let mut ctl = Mock::default();
        for e in case["ops"].as_array().unwrap() {
            if e["nested"].as_bool() == Some(true) {
                continue;
            }
            let trial = e["trial"].as_str().unwrap_or("");
            match e["op"].as_str().unwrap() {
                "add" => {
                    ctl.order.push(trial.into());
                    ctl.status.insert(trial.into(), TrialStatus::Pending);
                    rule.on_trial_add(&mut ctl, trial);
                }
                "choose" => {
                    let chosen = rule.choose_trial_to_run(&mut ctl);
                    assert_eq!(chosen.as_deref(), e["trial"].as_str(), "{}: {e}", case["name"]);
                    if let Some(c) = chosen {
                        ctl.status.insert(c, TrialStatus::Running);
                    }
                }
                "result" => {
                    let d = rule.on_trial_result(&mut ctl, trial, &mut result(o, e));
                    assert_eq!(d.as_str(), e["decision"].as_str().unwrap(), "{}: {e}", case["name"]);
                    checked += 1;
                    match d {
                        Decision::Pause => {
                            ctl.status.insert(trial.into(), TrialStatus::Paused);
                        }
                        Decision::Stop | Decision::Continue => {}
                    }
                }
                "complete" => {
                    rule.on_trial_complete(&mut ctl, trial, &result(o, e));
                    ctl.status.insert(trial.into(), TrialStatus::Terminated);
                }
                "end" => {}
                op => panic!("unknown op {op} in {}", case["name"]),
            }
        }
    }
    assert!(checked > 300, "{checked} decisions");
}

/// Replays a HyperBand trace: every chosen trial, every decision and every call on the
/// controller must be Ray's, in order.
fn replay_hyperband(file: &str, bohb: bool) -> usize {
    let t = traces(file);
    let mut checked = 0;
    for case in t["cases"].as_array().unwrap() {
        let o = &case["options"];
        let opts = HyperBandOptions {
            time_attr: o["time_attr"].as_str().unwrap().into(),
            metric: Some(o["metric"].as_str().unwrap().into()),
            mode: Some(mode(o)),
            max_t: o["max_t"].as_f64().unwrap(),
            reduction_factor: o["reduction_factor"].as_f64().unwrap(),
            stop_last_trials: o["stop_last_trials"].as_bool().unwrap(),
        };
        let mut hb =
            if bohb { HyperBandScheduler::for_bohb(opts) } else { HyperBandScheduler::new(opts) }.unwrap();
        let mut ctl = Mock::default();
        let mut last: HashMap<String, Metrics> = HashMap::new();
        // The controller calls Ray made, to be matched by ours in order.
        let mut expected: Vec<(String, String)> = vec![];
        let name = case["name"].as_str().unwrap();
        // Ray's controller runs on_trial_remove inside stop_trial; ours right after the call.
        fn settle(hb: &mut HyperBandScheduler, ctl: &mut Mock) {
            while let Some(t) = (!ctl.removed.is_empty()).then(|| ctl.removed.remove(0)) {
                hb.on_trial_remove(ctl, &t);
            }
        }
        for e in case["ops"].as_array().unwrap() {
            let trial = e["trial"].as_str().unwrap_or("").to_string();
            if e["op"] == "controller" {
                if e["nested"].as_bool() != Some(true) {
                    expected.push((e["call"].as_str().unwrap().into(), trial));
                }
                continue;
            }
            if e["nested"].as_bool() == Some(true) {
                continue;
            }
            // Before the next runner op, the calls so far must match.
            let ours: Vec<(String, String)> = ctl.calls.drain(..).collect();
            assert_eq!(ours, std::mem::take(&mut expected), "{name}: controller calls before {e}");
            match e["op"].as_str().unwrap() {
                "add" => {
                    ctl.order.push(trial.clone());
                    ctl.status.insert(trial.clone(), TrialStatus::Pending);
                    hb.on_trial_add(&mut ctl, &trial);
                }
                "choose" => {
                    let chosen = hb.choose_trial_to_run(&mut ctl);
                    settle(&mut hb, &mut ctl);
                    assert_eq!(chosen.as_deref(), e["trial"].as_str(), "{name}: {e}");
                    if let Some(c) = chosen {
                        ctl.status.insert(c, TrialStatus::Running);
                    }
                    checked += 1;
                }
                "result" => {
                    let mut r = result(o, e);
                    let d = hb.on_trial_result(&mut ctl, &trial, &mut r);
                    settle(&mut hb, &mut ctl);
                    assert_eq!(d.as_str(), e["decision"].as_str().unwrap(), "{name}: {e}");
                    if bohb && d != Decision::Continue {
                        assert!(r.get("hyperband_info/budget").is_some(), "{name}: the budget annotation");
                    }
                    last.insert(trial.clone(), r);
                    if d == Decision::Pause {
                        ctl.status.insert(trial.clone(), TrialStatus::Paused);
                    }
                    checked += 1;
                }
                "complete" => {
                    let r = last.get(&trial).cloned().unwrap_or_default();
                    hb.on_trial_complete(&mut ctl, &trial, &r);
                    settle(&mut hb, &mut ctl);
                    ctl.status.insert(trial.clone(), TrialStatus::Terminated);
                }
                "end" => {
                    let mut ours: Vec<String> = ctl
                        .order
                        .iter()
                        .filter(|t| ctl.status[*t] != TrialStatus::Terminated)
                        .cloned()
                        .collect();
                    ours.sort();
                    let mut theirs: Vec<String> = e["not_terminated"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| {
                            x.as_str()
                                .or_else(|| x["trial"].as_str())
                                .or_else(|| x[0].as_str())
                                .unwrap()
                                .to_string()
                        })
                        .collect();
                    theirs.sort();
                    assert_eq!(ours, theirs, "{name}: trials left unfinished");
                }
                op => panic!("unknown op {op} in {name}"),
            }
        }
    }
    checked
}

#[test]
fn hyperband_decides_and_chooses_as_ray_on_every_recorded_step() {
    let n = replay_hyperband("hyperband_traces.json", false);
    assert!(n > 2000, "{n} steps");
}

#[test]
fn hyperband_for_bohb_decides_and_chooses_as_ray_on_every_recorded_step() {
    let n = replay_hyperband("hyperband_bohb_traces.json", true);
    assert!(n > 300, "{n} steps");
}

#[test]
fn the_median_pruner_prunes_as_optuna_on_every_recorded_report() {
    let t = traces("median_pruner_traces.json");
    let mut checked = 0;
    for case in t["cases"].as_array().unwrap() {
        let o = &case["options"];
        let maximize = case["direction"].as_str() == Some("maximize")
            || case["name"].as_str().unwrap().ends_with("maximize");
        let mut p = MedianPruner::median(PercentilePrunerOptions {
            metric: Some("v".into()),
            mode: Some(if maximize { Mode::Max } else { Mode::Min }),
            n_startup_trials: o["n_startup_trials"].as_u64().unwrap() as usize,
            n_warmup_steps: o["n_warmup_steps"].as_i64().unwrap(),
            interval_steps: o["interval_steps"].as_i64().unwrap(),
            n_min_trials: o["n_min_trials"].as_u64().unwrap() as usize,
            ..Default::default()
        })
        .unwrap();
        for e in case["ops"].as_array().unwrap() {
            let trial = e["trial"].to_string();
            match e["op"].as_str().unwrap() {
                "ask" => {}
                "report" => {
                    let prune = p.report(
                        &trial,
                        e["step"].as_i64().unwrap(),
                        e["value"].as_f64().unwrap_or(f64::NAN),
                    );
                    assert_eq!(prune, e["should_prune"].as_bool().unwrap(), "{}: {e}", case["name"]);
                    checked += 1;
                }
                "tell" => {
                    if e["state"] == "COMPLETE" {
                        p.complete(&trial);
                    }
                }
                op => panic!("unknown op {op}"),
            }
        }
    }
    assert!(checked > 1000, "{checked} reports");
}
