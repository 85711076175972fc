//! Every metric against torchmetrics: `reference/data/metrics.json`, recorded by
//! `reference/gen_metrics.py`. Each case replays its batches through `forward` (the value of
//! each batch alone), then checks `compute` over all of them, the same value from two copies
//! fed halves of the batches and merged, and from states saved and loaded into a fresh copy.

use pyrite_core::{DType, Tensor};
use pyrite_metrics::*;
use serde_json::Value;

const TOL: f64 = 2e-6;

fn load() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/metrics.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("reference/data/metrics.json")).unwrap()
}

/// A tensor from `{"dtype", "shape", "data"}`; null data is NaN.
fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> =
        v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<f64> =
        v["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect();
    let dtype = match v["dtype"].as_str().unwrap() {
        "F32" => DType::F32,
        "F64" => DType::F64,
        "I64" => DType::I64,
        "BOOL" => DType::Bool,
        d => panic!("dtype {d}"),
    };
    Tensor::from_vec(data, shape).unwrap().to_dtype(dtype).unwrap()
}

fn average(args: &Value) -> Option<Average> {
    args.get("average").map(|a| match a.as_str().unwrap() {
        "micro" => Average::Micro,
        "macro" => Average::Macro,
        "weighted" => Average::Weighted,
        "none" => Average::None,
        a => panic!("average {a}"),
    })
}

/// The metric a case names, built from its torchmetrics keyword arguments.
fn build(metric: &str, args: &Value) -> Box<dyn Metric> {
    let usize_arg = |k: &str| args.get(k).map(|v| v.as_u64().unwrap() as usize);
    let f64_arg = |k: &str| args.get(k).and_then(Value::as_f64);
    let ignore_index = args.get("ignore_index").map(|v| v.as_i64().unwrap());
    let bin = BinaryOptions {
        threshold: f64_arg("threshold").unwrap_or(0.5),
        ignore_index,
        zero_division: f64_arg("zero_division").unwrap_or(0.0),
    };
    let mc = MulticlassOptions {
        average: average(args).unwrap_or(Average::Macro),
        top_k: usize_arg("top_k").unwrap_or(1),
        ignore_index,
        zero_division: f64_arg("zero_division").unwrap_or(0.0),
    };
    let ml = MultilabelOptions {
        threshold: f64_arg("threshold").unwrap_or(0.5),
        average: average(args).unwrap_or(Average::Macro),
        ignore_index,
        zero_division: f64_arg("zero_division").unwrap_or(0.0),
    };
    let cm = ConfusionMatrixOptions {
        threshold: f64_arg("threshold").unwrap_or(0.5),
        ignore_index,
        normalize: match args.get("normalize").and_then(Value::as_str) {
            None | Some("none") => Normalize::None,
            Some("true") => Normalize::True,
            Some("pred") => Normalize::Pred,
            Some("all") => Normalize::All,
            Some(n) => panic!("normalize {n}"),
        },
    };
    let bc = BinaryCurveOptions { thresholds: usize_arg("thresholds"), ignore_index };
    let mcc = MulticlassCurveOptions {
        average: average(args).unwrap_or(Average::Macro),
        thresholds: usize_arg("thresholds"),
        ignore_index,
    };
    let nan = match args.get("nan_strategy").and_then(Value::as_str) {
        None | Some("warn") => NanStrategy::Warn,
        Some("ignore") => NanStrategy::Ignore,
        Some(s) => panic!("nan_strategy {s}"),
    };
    let c = usize_arg("num_classes").unwrap_or(0);
    let l = usize_arg("num_labels").unwrap_or(0);
    let beta = f64_arg("beta").unwrap_or(1.0);
    let m: Box<dyn Metric> = match metric {
        "BinaryAccuracy" => Box::new(BinaryAccuracy::new(bin).unwrap()),
        "BinaryPrecision" => Box::new(BinaryPrecision::new(bin).unwrap()),
        "BinaryRecall" => Box::new(BinaryRecall::new(bin).unwrap()),
        "BinaryF1Score" => Box::new(BinaryF1Score::new(bin).unwrap()),
        "BinaryFBetaScore" => Box::new(BinaryFBetaScore::new(beta, bin).unwrap()),
        "MulticlassAccuracy" => Box::new(MulticlassAccuracy::new(c, mc).unwrap()),
        "MulticlassPrecision" => Box::new(MulticlassPrecision::new(c, mc).unwrap()),
        "MulticlassRecall" => Box::new(MulticlassRecall::new(c, mc).unwrap()),
        "MulticlassF1Score" => Box::new(MulticlassF1Score::new(c, mc).unwrap()),
        "MulticlassFBetaScore" => Box::new(MulticlassFBetaScore::new(beta, c, mc).unwrap()),
        "MultilabelAccuracy" => Box::new(MultilabelAccuracy::new(l, ml).unwrap()),
        "MultilabelPrecision" => Box::new(MultilabelPrecision::new(l, ml).unwrap()),
        "MultilabelRecall" => Box::new(MultilabelRecall::new(l, ml).unwrap()),
        "MultilabelF1Score" => Box::new(MultilabelF1Score::new(l, ml).unwrap()),
        "BinaryConfusionMatrix" => Box::new(BinaryConfusionMatrix::new(cm).unwrap()),
        "MulticlassConfusionMatrix" => Box::new(MulticlassConfusionMatrix::new(c, cm).unwrap()),
        "MultilabelConfusionMatrix" => Box::new(MultilabelConfusionMatrix::new(l, cm).unwrap()),
        "BinaryAUROC" => Box::new(BinaryAUROC::new(bc).unwrap()),
        "BinaryAveragePrecision" => Box::new(BinaryAveragePrecision::new(bc).unwrap()),
        "MulticlassAUROC" => Box::new(MulticlassAUROC::new(c, mcc).unwrap()),
        "MulticlassAveragePrecision" => Box::new(MulticlassAveragePrecision::new(c, mcc).unwrap()),
        "MeanSquaredError" => Box::new(MeanSquaredError::new(MeanSquaredErrorOptions {
            squared: args.get("squared").and_then(Value::as_bool).unwrap_or(true),
        })),
        "MeanAbsoluteError" => Box::new(MeanAbsoluteError::new()),
        "R2Score" => Box::new(R2Score::new()),
        "MeanMetric" => Box::new(MeanMetric::new(nan)),
        "SumMetric" => Box::new(SumMetric::new(nan)),
        m => panic!("unknown metric {m}"),
    };
    assert_eq!(m.name(), metric);
    m
}

/// Compares a computed value with torchmetrics' (shape, dtype class and values; NaN == NaN).
fn check(what: &str, got: &Tensor, want: &Value) -> Result<(), String> {
    let want_t = tensor(want);
    if got.dims() != want_t.dims() {
        return Err(format!("{what}: shape {:?}, torchmetrics {:?}", got.dims(), want_t.dims()));
    }
    if got.dtype().is_floating_point() != want_t.dtype().is_floating_point() {
        return Err(format!("{what}: dtype {}, torchmetrics {}", got.dtype(), want_t.dtype()));
    }
    let g = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let w = want_t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || (a - b).abs() <= TOL * (1.0 + b.abs());
        if !same {
            return Err(format!("{what}: element {i} is {a}, torchmetrics {b} (got {g:?}, want {w:?})"));
        }
    }
    Ok(())
}

fn run_case(case: &Value, inputs: &Value) -> Result<(), String> {
    let (metric, args) = (case["metric"].as_str().unwrap(), &case["args"]);
    let batches: Vec<(Tensor, Tensor)> = inputs[case["inputs"].as_str().unwrap()]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (tensor(&b["preds"]), tensor(&b["target"])))
        .collect();
    let mut m = build(metric, args);
    for (i, ((p, t), want)) in batches.iter().zip(case["forward"].as_array().unwrap()).enumerate() {
        let v = m.forward(p, t).map_err(|e| format!("forward {i}: {e}"))?;
        check(&format!("forward of batch {i}"), &v, want)?;
    }
    assert_eq!(m.update_count(), batches.len());
    let want = &case["compute"];
    check("compute", &m.compute().map_err(|e| e.to_string())?, want)?;

    // Two copies fed halves of the batches, merged.
    let half = batches.len() / 2;
    let (mut a, mut b) = (build(metric, args), build(metric, args));
    for (p, t) in &batches[..half] {
        a.update(p, t).unwrap();
    }
    for (p, t) in &batches[half..] {
        b.update(p, t).unwrap();
    }
    a.merge_states(b.metric_states()).map_err(|e| e.to_string())?;
    check("compute after merging", &a.compute().unwrap(), want)?;

    // States saved and loaded into a fresh copy.
    let mut fresh = build(metric, args);
    fresh.load_states(&m.states().unwrap()).map_err(|e| e.to_string())?;
    check("compute after load_states", &fresh.compute().unwrap(), want)?;

    // Reset forgets everything: the first batch alone again gives its forward value.
    m.reset();
    assert_eq!(m.update_count(), 0);
    m.update(&batches[0].0, &batches[0].1).unwrap();
    check("compute after reset", &m.compute().unwrap(), &case["forward"][0])
}

#[test]
fn every_metric_matches_torchmetrics() {
    let data = load();
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() > 100, "the reference file holds {} cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            run_case(c, &data["inputs"]).err().map(|e| format!("{}: {e}", c["name"].as_str().unwrap()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
