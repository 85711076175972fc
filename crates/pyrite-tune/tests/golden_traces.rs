//! The schedulers' decisions equal Ray Tune's, decision for decision, on recorded traces
//! (reference/gen_tune_schedulers.py drove Ray's own AsyncHyperBandScheduler and
//! MedianStoppingRule with a mock controller and recorded every call and answer).

use std::collections::HashMap;

use pyrite_tune::schedulers::{
    ASHAScheduler, AshaOptions, Controller, Decision, MedianStoppingOptions, MedianStoppingRule,
    TrialScheduler,
};
use pyrite_tune::{Metrics, Mode, TrialStatus};
use serde_json::Value;

fn traces(file: &str) -> Value {
    let path = format!("{}/../../reference/data/tune/{file}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))).unwrap()
}

/// Ray's mock controller: trials in creation order with their statuses.
#[derive(Default)]
struct Mock {
    order: Vec<String>,
    status: HashMap<String, TrialStatus>,
}

impl Controller for Mock {
    fn trials(&self) -> Vec<(String, TrialStatus)> {
        self.order.iter().map(|t| (t.clone(), self.status[t])).collect()
    }
    fn status(&self, trial: &str) -> Option<TrialStatus> {
        self.status.get(trial).copied()
    }
    fn stop_trial(&mut self, trial: &str) {
        self.status.insert(trial.into(), TrialStatus::Terminated);
    }
    fn pause_trial(&mut self, trial: &str) {
        self.status.insert(trial.into(), TrialStatus::Paused);
    }
    fn unpause_trial(&mut self, trial: &str) {
        self.status.insert(trial.into(), TrialStatus::Pending);
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
                    let d = asha.on_trial_result(&mut ctl, trial, &result(o, e));
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
                    let d = rule.on_trial_result(&mut ctl, trial, &result(o, e));
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
