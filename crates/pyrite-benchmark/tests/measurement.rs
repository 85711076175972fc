//! `Measurement` against torch.utils.benchmark's own (reference/gen_benchmark_measurement.py,
//! torch 2.15, writes reference/data/benchmark_measurement.json): on fixed samples of times,
//! the median, mean, IQR, significant figures and warnings, and the rendering word for word;
//! plus `select_unit` and `trim_sigfig`. Then the Timer on real closures: its block size hides
//! its own cost, its stopping rules hold, and errors from the closure come back.

use pyrite_benchmark::{
    select_unit, trim_sigfig, AdaptiveAutorangeOptions, BlockedAutorangeOptions, Measurement, TaskSpec,
    Timer, TimerOptions,
};
use serde_json::Value;

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/benchmark_measurement.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn opt(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

#[test]
fn statistics_and_rendering_match_pytorch() {
    for c in reference()["cases"].as_array().unwrap() {
        let s = &c["spec"];
        let spec = TaskSpec {
            stmt: s["stmt"].as_str().unwrap().into(),
            setup: s["setup"].as_str().unwrap().into(),
            label: opt(&s["label"]),
            sub_label: opt(&s["sub_label"]),
            description: opt(&s["description"]),
            env: None,
            num_threads: s["num_threads"].as_u64().unwrap() as usize,
        };
        let raw: Vec<f64> = c["raw_times"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let m = Measurement::new(c["number_per_run"].as_u64().unwrap() as usize, raw, spec);
        let close = |a: f64, b: &Value| (a - b.as_f64().unwrap()).abs() <= 1e-12 * a.abs().max(1e-300);
        assert!(close(m.median(), &c["median"]), "median {} vs {}", m.median(), c["median"]);
        assert!(close(m.mean(), &c["mean"]), "mean");
        assert!((m.iqr() - c["iqr"].as_f64().unwrap()).abs() <= 1e-12 * m.median(), "iqr");
        assert_eq!(
            m.significant_figures() as u64,
            c["significant_figures"].as_u64().unwrap(),
            "{}",
            m.title()
        );
        assert_eq!(m.has_warnings(), c["has_warnings"].as_bool().unwrap());
        assert_eq!(m.title(), c["title"].as_str().unwrap());
        assert_eq!(m.to_string(), c["text"].as_str().unwrap());
    }
}

#[test]
fn units_and_significant_figures_match_pytorch() {
    let r = reference();
    for u in r["select_unit"].as_array().unwrap() {
        let (unit, scale) = select_unit(u[0].as_f64().unwrap());
        assert_eq!((unit, scale), (u[1].as_str().unwrap(), u[2].as_f64().unwrap()), "{u}");
    }
    for t in r["trim_sigfig"].as_array().unwrap() {
        let got = trim_sigfig(t[0].as_f64().unwrap(), t[1].as_i64().unwrap() as i32);
        let want = t[2].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want.abs(), "{t}: {got}");
    }
}

#[test]
fn merge_pools_replicates_of_the_same_task() {
    let spec = |s: &str| TaskSpec { stmt: s.into(), num_threads: 1, ..Default::default() };
    let a = Measurement::new(10, vec![1.0, 2.0], spec("a"));
    let b = Measurement::new(5, vec![1.0], spec("b"));
    let a2 = Measurement::new(2, vec![0.4], spec("a"));
    let merged = Measurement::merge(&[a, b, a2]);
    assert_eq!(merged.len(), 2);
    assert_eq!((merged[0].number_per_run, merged[0].times()), (1, vec![0.1, 0.2, 0.2]));
    assert_eq!(merged[1].times(), vec![0.2]);
}

#[test]
fn blocked_autorange_hides_the_timers_cost_and_measures_long_enough() {
    let mut calls = 0usize;
    let mut v = vec![0u64; 256];
    let m = {
        let mut timer = Timer::new(
            "sum",
            || {
                calls += 1;
                v.iter_mut().for_each(|x| *x = x.wrapping_mul(3).wrapping_add(1));
                Ok(())
            },
            TimerOptions { label: Some("vec".into()), ..Default::default() },
        );
        timer.blocked_autorange(BlockedAutorangeOptions { min_run_time: 0.05 }).unwrap()
    };
    // Blocks of a power of ten, at least 50 ms measured in all, and every call counted.
    assert!(m.number_per_run.to_string().trim_start_matches('1').chars().all(|c| c == '0'));
    assert!(m.raw_times.iter().sum::<f64>() >= 0.05);
    assert!(calls >= m.number_per_run * m.raw_times.len());
    assert!(m.median() > 0.0 && m.median() < 1e-3, "{m}");
    assert!(m.to_string().starts_with("vec\n  Median: "), "{m}");
}

#[test]
fn adaptive_autorange_stops_when_the_spread_is_small_or_time_is_up() {
    let mut timer = Timer::new("noop", || Ok(()), TimerOptions::default());
    let m = timer
        .adaptive_autorange(AdaptiveAutorangeOptions { max_run_time: 0.5, ..Default::default() })
        .unwrap();
    assert!(m.raw_times.len() > 3);
    assert!(m.meets_confidence(0.1) || m.raw_times.iter().sum::<f64>() > 0.5);
    eprintln!("the timer's own cost per call:\n{m}");
    // timeit: one block of `number` calls; repeat and autorange as Python's timeit.
    let mut n = 0usize;
    let mut t = Timer::new(
        "count",
        || {
            n += 1;
            Ok(())
        },
        TimerOptions::default(),
    );
    let m = t.timeit(1000).unwrap();
    assert_eq!((m.number_per_run, m.raw_times.len()), (1000, 1));
    assert_eq!(t.repeat(3, 10).unwrap().len(), 3);
    let (number, secs) = t.autorange().unwrap();
    assert!(secs >= 0.2 && number >= 1);
    drop(t);
    assert!(n >= 1000 + 10 + 30);
}

#[test]
fn an_error_in_the_timed_closure_is_returned() {
    let mut left = 3;
    let mut t = Timer::new(
        "fails",
        || {
            left -= 1;
            if left == 0 {
                pyrite_core::bail!(Value, "boom")
            }
            Ok(())
        },
        TimerOptions::default(),
    );
    assert_eq!(t.blocked_autorange(Default::default()).unwrap_err().to_string(), "boom");
    assert!(t.timeit(0).is_err());
}
