//! `Display`/`Debug` against PyTorch's `repr()`, recorded by `reference/gen_display.py`.

use pyrite_core::display::{set_printoptions, PrintOptions};
use pyrite_core::half::{bf16, f16};
use pyrite_core::{set_default_dtype, DType, Tensor};
use serde_json::Value;
use std::sync::{Mutex, MutexGuard};

/// The default dtype and print options are global: tests here run one at a time.
static GLOBAL: Mutex<()> = Mutex::new(());
fn global() -> MutexGuard<'static, ()> {
    GLOBAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn float(v: &Value) -> f64 {
    v.as_str().expect("floats are recorded as strings").parse::<f64>().unwrap()
}

/// Rebuilds a recorded tensor (and applies its view).
fn tensor_of(c: &Value) -> Tensor {
    let shape: Vec<usize> =
        c["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let vals = c["values"].as_array().unwrap();
    let t = match c["dtype"].as_str().unwrap() {
        "float32" => {
            let v: Vec<f32> = vals.iter().map(|v| v.as_str().unwrap().parse::<f32>().unwrap()).collect();
            Tensor::from_vec(v, shape)
        }
        "float64" => Tensor::from_vec(vals.iter().map(float).collect::<Vec<f64>>(), shape),
        "float16" => {
            Tensor::from_vec(vals.iter().map(|v| f16::from_f64(float(v))).collect::<Vec<_>>(), shape)
        }
        "bfloat16" => {
            Tensor::from_vec(vals.iter().map(|v| bf16::from_f64(float(v))).collect::<Vec<_>>(), shape)
        }
        "int64" => Tensor::from_vec(vals.iter().map(|v| v.as_i64().unwrap()).collect::<Vec<i64>>(), shape),
        "int32" => {
            Tensor::from_vec(vals.iter().map(|v| v.as_i64().unwrap() as i32).collect::<Vec<i32>>(), shape)
        }
        "uint8" => {
            Tensor::from_vec(vals.iter().map(|v| v.as_u64().unwrap() as u8).collect::<Vec<u8>>(), shape)
        }
        "bool" => Tensor::from_vec(vals.iter().map(|v| v.as_bool().unwrap()).collect::<Vec<bool>>(), shape),
        other => panic!("unexpected dtype {other}"),
    }
    .unwrap();
    match c.get("view").and_then(Value::as_str) {
        None => t,
        Some("t") => t.t().unwrap(),                                // x.t()
        Some("slice_step2") => t.slice(-1, None, None, 2).unwrap(), // x[..., ::2]
        Some(v) => panic!("unknown view {v}"),
    }
}

#[test]
fn matches_pytorch_repr() {
    let _g = global();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/display.json");
    let data: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() > 80);
    let mut failures = Vec::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let t = tensor_of(c);
        let default = match c.get("default_dtype").and_then(Value::as_str) {
            Some(d) => DType::from_name(d).unwrap(),
            None => DType::F32,
        };
        set_default_dtype(default).unwrap();
        let got = format!("{t}");
        let debug = format!("{t:?}");
        set_default_dtype(DType::F32).unwrap();
        let want = c["expected"].as_str().unwrap();
        if got != want {
            failures.push(format!("{name}:\n--- pytorch\n{want}\n--- pyrite\n{got}\n"));
        }
        assert_eq!(got, debug, "{name}: Debug differs from Display");
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn common_cases_spelled_out() {
    let _g = global();
    let s = |t: Tensor| t.to_string();
    assert_eq!(s(Tensor::new([[1f32, 2.], [3., 4.]]).unwrap()), "tensor([[1., 2.],\n        [3., 4.]])");
    assert_eq!(s(Tensor::new([1i64, 2, 3]).unwrap()), "tensor([1, 2, 3])");
    assert_eq!(s(Tensor::new([1.5f32, 2.25]).unwrap()), "tensor([1.5000, 2.2500])");
    assert_eq!(s(Tensor::new([1e10f32, 1.0]).unwrap()), "tensor([1.0000e+10, 1.0000e+00])");
    assert_eq!(s(Tensor::new([1i32, 2]).unwrap()), "tensor([1, 2], dtype=torch.int32)");
    assert_eq!(s(Tensor::new([true, false]).unwrap()), "tensor([ True, False])");
    assert_eq!(s(Tensor::zeros([0, 3], DType::F32).unwrap()), "tensor([], size=(0, 3))");
    assert_eq!(s(Tensor::zeros([0], DType::I64).unwrap()), "tensor([], dtype=torch.int64)");
    assert_eq!(s(Tensor::scalar(3.5f32).unwrap()), "tensor(3.5000)");
    assert_eq!(s(Tensor::new([f32::NAN, 1.0, f32::NEG_INFINITY]).unwrap()), "tensor([nan, 1., -inf])");
    let big = Tensor::arange(0.0, 1001.0, 1.0, DType::I64).unwrap();
    assert_eq!(s(big), "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
}

#[test]
fn print_options_change_precision_threshold_and_notation() {
    let _g = global();
    let t = Tensor::new([1.123456f32, 20.5]).unwrap();
    set_printoptions(PrintOptions { precision: 2, ..PrintOptions::default() });
    assert_eq!(t.to_string(), "tensor([ 1.12, 20.50])");
    set_printoptions(PrintOptions { sci_mode: Some(true), ..PrintOptions::default() });
    assert_eq!(t.to_string(), "tensor([1.1235e+00, 2.0500e+01])");
    set_printoptions(PrintOptions { threshold: 5, edgeitems: 2, ..PrintOptions::default() });
    let r = Tensor::arange(0.0, 10.0, 1.0, DType::I64).unwrap();
    assert_eq!(r.to_string(), "tensor([0, 1,  ..., 8, 9])");
    set_printoptions(PrintOptions::default());
    assert_eq!(r.to_string(), "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])");
}

#[test]
fn views_print_their_own_elements() {
    let _g = global();
    let t = Tensor::arange(0.0, 6.0, 1.0, DType::I64).unwrap().reshape([2, 3]).unwrap();
    assert_eq!(t.t().unwrap().to_string(), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
    assert_eq!(t.select(1, 2).unwrap().to_string(), "tensor([2, 5])");
    assert_eq!(t.select(0, 1).unwrap().select(0, 0).unwrap().to_string(), "tensor(3)");
}
