//! `schedule` and the profiler's step state machine against PyTorch's, recorded by
//! `reference/profiler_schedule.py`: the action of every step, and, over a real run, at which
//! step each trace reaches `on_trace_ready` and which `ProfilerStep#N` ranges it holds.

use pyrite::{DType, Tensor};
use pyrite_profiler::{
    profile, record_function, schedule, tensorboard_trace_handler, ProfileOptions, ScheduleOptions,
};
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Mutex, MutexGuard};

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/profiler_schedule.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("reference/data/profiler_schedule.json"))
        .unwrap()
}

fn options(case: &Value) -> ScheduleOptions {
    let g = |k: &str| case[k].as_u64().unwrap();
    ScheduleOptions {
        wait: g("wait"),
        warmup: g("warmup"),
        active: g("active"),
        repeat: g("repeat"),
        skip_first: g("skip_first"),
        ..Default::default()
    }
}

#[test]
fn schedule_actions_match_pytorch() {
    let r = reference();
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    for case in cases {
        let s = schedule(options(case)).unwrap();
        let want: Vec<&str> =
            case["actions"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let got: Vec<&str> = (0..want.len() as u64).map(|i| s.action(i).name()).collect();
        assert_eq!(got, want, "case {case}");
    }
}

#[test]
fn traces_are_ready_at_pytorchs_steps_with_pytorchs_step_ranges() {
    let _s = serial();
    let r = reference();
    let a = Tensor::ones([1], DType::F32).unwrap();
    for case in r["cases"].as_array().unwrap() {
        let seen: Rc<RefCell<Vec<Value>>> = Rc::default();
        let sink = seen.clone();
        let mut prof = profile(ProfileOptions {
            schedule: Some(schedule(options(case)).unwrap()),
            on_trace_ready: Some(Box::new(move |p| {
                let mut steps: Vec<&str> = p
                    .events()
                    .iter()
                    .map(|e| e.name.as_str())
                    .filter(|n| n.starts_with("ProfilerStep#"))
                    .collect();
                steps.sort_by_key(|s| s[13..].parse::<u64>().unwrap());
                sink.borrow_mut().push(serde_json::json!({"at_step": p.step_num(), "steps": steps}));
                Ok(())
            })),
            ..Default::default()
        })
        .unwrap();
        for _ in 0..case["steps"].as_u64().unwrap() {
            let _w = record_function("work");
            a.add_scalar(1).unwrap();
            drop(_w);
            prof.step().unwrap();
        }
        prof.stop().unwrap();
        assert_eq!(Value::from(seen.borrow().clone()), case["traces"], "case {case}");
    }
}

#[test]
fn invalid_schedules_and_handler_errors_are_errors() {
    let _s = serial();
    let e = schedule(ScheduleOptions { active: 0, ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("active=0 (need > 0)"), "{e}");

    // tensorboard_trace_handler writes {worker}.{time_ns}.pt.trace.json per trace.
    let dir = std::env::temp_dir().join(format!("pyrite-prof-tb-{}", std::process::id()));
    let mut prof = profile(ProfileOptions {
        schedule: Some(
            schedule(ScheduleOptions { wait: 0, warmup: 0, active: 1, repeat: 2, ..Default::default() })
                .unwrap(),
        ),
        on_trace_ready: Some(tensorboard_trace_handler(&dir, Some("worker0"))),
        ..Default::default()
    })
    .unwrap();
    let a = Tensor::ones([2], DType::F32).unwrap();
    for _ in 0..3 {
        a.mul(&a).unwrap();
        prof.step().unwrap();
    }
    prof.stop().unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        let mid = f.strip_prefix("worker0.").and_then(|r| r.strip_suffix(".pt.trace.json")).unwrap_or("");
        assert!(!mid.is_empty() && mid.chars().all(|c| c.is_ascii_digit()), "{f}");
    }

    // A directory that cannot be created fails the step that finished the trace.
    let file = std::env::temp_dir().join(format!("pyrite-prof-file-{}", std::process::id()));
    std::fs::write(&file, b"not a directory").unwrap();
    let mut prof = profile(ProfileOptions {
        schedule: Some(schedule(ScheduleOptions::default()).unwrap()),
        on_trace_ready: Some(tensorboard_trace_handler(file.join("sub"), None)),
        ..Default::default()
    })
    .unwrap();
    let e = prof.step().unwrap_err();
    std::fs::remove_file(&file).ok();
    assert!(e.to_string().contains("tensorboard_trace_handler: cannot create"), "{e}");
}
