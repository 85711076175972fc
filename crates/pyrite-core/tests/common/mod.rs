//! Reads the PyTorch reference data made by `reference/gen_*.py` and checks Pyrite against it.
//!
//! A test names a family and maps each op name to the Pyrite call that mirrors the recorded
//! PyTorch call:
//!
//! ```ignore
//! common::check_family("pointwise", |c| match c.op.as_str() {
//!     "add" => one(c.x(0).add(c.x(1))),         // torch.add(a, b)
//!     _ => c.unhandled(),
//! });
//! ```
#![allow(dead_code)]

use pyrite_core::{DType, Result, Tensor};
use serde_json::Value;
use std::collections::HashMap;

/// One recorded PyTorch call: inputs (views applied), expected outputs, arguments.
pub struct Case {
    pub name: String,
    pub op: String,
    pub call: String,
    pub args: Value,
    pub inputs: Vec<Tensor>,
    pub outputs: Vec<Tensor>,
    pub atol: f64,
    pub rtol: f64,
    pub error: Option<String>,
}

impl Case {
    /// Input `i`, with the recorded views applied (so possibly non-contiguous).
    pub fn x(&self, i: usize) -> &Tensor {
        &self.inputs[i]
    }
    /// A required argument.
    pub fn arg(&self, key: &str) -> &Value {
        self.args.get(key).unwrap_or_else(|| panic!("case {}: missing arg {key}", self.name))
    }
    /// An optional argument (absent or null gives None).
    pub fn opt(&self, key: &str) -> Option<&Value> {
        self.args.get(key).filter(|v| !v.is_null())
    }
    pub fn i(&self, key: &str) -> isize {
        self.arg(key).as_i64().unwrap_or_else(|| panic!("case {}: arg {key} is not an int", self.name))
            as isize
    }
    pub fn u(&self, key: &str) -> usize {
        self.i(key) as usize
    }
    pub fn f(&self, key: &str) -> f64 {
        self.arg(key).as_f64().unwrap_or_else(|| panic!("case {}: arg {key} is not a number", self.name))
    }
    pub fn b(&self, key: &str) -> bool {
        self.arg(key).as_bool().unwrap_or_else(|| panic!("case {}: arg {key} is not a bool", self.name))
    }
    pub fn s(&self, key: &str) -> &str {
        self.arg(key).as_str().unwrap_or_else(|| panic!("case {}: arg {key} is not a string", self.name))
    }
    /// A list of ints (dims, sizes).
    pub fn dims(&self, key: &str) -> Vec<isize> {
        self.arg(key)
            .as_array()
            .unwrap_or_else(|| panic!("case {}: arg {key} is not a list", self.name))
            .iter()
            .map(|v| v.as_i64().unwrap() as isize)
            .collect()
    }
    pub fn sizes(&self, key: &str) -> Vec<usize> {
        self.dims(key).into_iter().map(|d| d as usize).collect()
    }
    /// Return this from the dispatch closure for an op the test does not know.
    pub fn unhandled(&self) -> Result<Vec<Tensor>> {
        panic!("case {}: op '{}' has no Pyrite mapping in this test ({})", self.name, self.op, self.call)
    }
}

/// Wraps one output.
pub fn one(t: Result<Tensor>) -> Result<Vec<Tensor>> {
    Ok(vec![t?])
}

fn dtype_of(s: safetensors::Dtype) -> DType {
    use safetensors::Dtype as D;
    match s {
        D::F32 => DType::F32,
        D::F64 => DType::F64,
        D::F16 => DType::F16,
        D::BF16 => DType::BF16,
        D::I64 => DType::I64,
        D::I32 => DType::I32,
        D::U8 => DType::U8,
        D::BOOL => DType::Bool,
        other => panic!("unsupported reference dtype {other:?}"),
    }
}

fn apply_view(t: Tensor, step: &Value) -> Tensor {
    let s = step.as_array().expect("view step is a list");
    let kind = s[0].as_str().unwrap();
    let int = |v: &Value| v.as_i64().unwrap() as isize;
    let opt = |v: &Value| v.as_i64().map(|x| x as isize);
    match kind {
        "t" => t.t(),
        "transpose" => t.transpose(int(&s[1]), int(&s[2])),
        "permute" => t.permute(&s[1].as_array().unwrap().iter().map(int).collect::<Vec<_>>()),
        "slice" => t.slice(int(&s[1]), opt(&s[2]), opt(&s[3]), s[4].as_i64().unwrap_or(1) as isize),
        "expand" => {
            t.expand(s[1].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect::<Vec<i64>>())
        }
        other => panic!("unknown view step {other}"),
    }
    .unwrap_or_else(|e| panic!("view step {step}: {e}"))
}

/// Loads every case of `reference/data/<family>.safetensors`.
pub fn load(family: &str) -> Vec<Case> {
    let path = format!("{}/../../reference/data/{family}.safetensors", env!("CARGO_MANIFEST_DIR"));
    let bytes =
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e} (run reference/gen_{family}.py)"));
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let md: &HashMap<String, String> = meta.metadata().as_ref().expect("metadata");
    let cases: Vec<Value> = serde_json::from_str(&md["cases"]).unwrap();
    let get = |key: &str| -> Tensor {
        let v = st.tensor(key).unwrap_or_else(|e| panic!("{key}: {e:?}"));
        Tensor::from_raw_bytes(v.data(), v.shape().to_vec(), dtype_of(v.dtype())).unwrap()
    };
    cases
        .into_iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap().to_string();
            let n_in = c["n_in"].as_u64().unwrap() as usize;
            let n_out = c["n_out"].as_u64().unwrap() as usize;
            let views = c["views"].as_array().cloned().unwrap_or_default();
            let inputs = (0..n_in)
                .map(|i| {
                    let mut t = get(&format!("{name}.in{i}"));
                    if let Some(steps) = views.get(i).and_then(|v| v.as_array()) {
                        for s in steps {
                            t = apply_view(t, s);
                        }
                    }
                    t
                })
                .collect();
            let outputs = (0..n_out).map(|i| get(&format!("{name}.out{i}"))).collect();
            Case {
                op: c["op"].as_str().unwrap().to_string(),
                call: c["call"].as_str().unwrap_or("").to_string(),
                args: c["args"].clone(),
                atol: c["atol"].as_f64().unwrap_or(0.0),
                rtol: c["rtol"].as_f64().unwrap_or(0.0),
                error: c.get("error").and_then(|e| e.as_str()).map(str::to_string),
                name,
                inputs,
                outputs,
            }
        })
        .collect()
}

/// Compares `got` with PyTorch's `want`: same dtype and shape, values within
/// `atol + rtol * |want|` (NaN equals NaN, infinities must match exactly).
pub fn compare(got: &Tensor, want: &Tensor, atol: f64, rtol: f64) -> std::result::Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {} != expected {}", got.dtype(), want.dtype()));
    }
    if got.dims() != want.dims() {
        return Err(format!("shape {:?} != expected {:?}", got.dims(), want.dims()));
    }
    let g = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let w = want.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let mut worst: Option<(usize, f64, f64)> = None;
    let mut bad = 0;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = if a.is_nan() || b.is_nan() {
            a.is_nan() && b.is_nan()
        } else if a.is_infinite() || b.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= atol + rtol * b.abs()
        };
        if !ok {
            bad += 1;
            if worst.is_none() {
                worst = Some((i, a, b));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, a, b)) => Err(format!(
            "{bad} of {} elements differ; first at flat index {i}: got {a}, expected {b} (atol {atol}, rtol {rtol})",
            g.len()
        )),
    }
}

/// Runs every case of `family` through `run` and fails listing every mismatch. Cases recorded
/// as PyTorch errors must make `run` return `Err`.
pub fn check_family(family: &str, run: impl Fn(&Case) -> Result<Vec<Tensor>>) {
    let cases = load(family);
    assert!(!cases.is_empty(), "{family}: no cases");
    let mut failures = Vec::new();
    for c in &cases {
        let got = run(c);
        match (&c.error, got) {
            (Some(_), Err(_)) => {}
            (Some(msg), Ok(_)) => failures
                .push(format!("{} [{}]: PyTorch raised \"{msg}\" but Pyrite returned Ok", c.name, c.call)),
            (None, Err(e)) => failures.push(format!("{} [{}]: Pyrite error: {e}", c.name, c.call)),
            (None, Ok(outs)) => {
                if outs.len() != c.outputs.len() {
                    failures.push(format!(
                        "{} [{}]: {} outputs, expected {}",
                        c.name,
                        c.call,
                        outs.len(),
                        c.outputs.len()
                    ));
                    continue;
                }
                for (k, (g, w)) in outs.iter().zip(&c.outputs).enumerate() {
                    if let Err(e) = compare(g, w, c.atol, c.rtol) {
                        failures.push(format!("{} [{}] output {k}: {e}", c.name, c.call));
                    }
                }
            }
        }
    }
    if !failures.is_empty() {
        panic!("{family}: {} of {} cases failed:\n  {}", failures.len(), cases.len(), failures.join("\n  "));
    }
    eprintln!("{family}: {} cases match PyTorch", cases.len());
}

// ------------------------------------------------------------------ gradients

/// The differentiable inputs of a gradient case (`args.diff`), marked as requiring grad; the
/// last input (the upstream gradient) is left out.
pub fn grad_leaves(c: &Case) -> Vec<Tensor> {
    let diff: Vec<usize> = c.sizes("diff");
    let n = c.inputs.len() - 1;
    (0..n)
        .map(|i| if diff.contains(&i) { c.x(i).requires_grad_(true).unwrap() } else { c.x(i).clone() })
        .collect()
}

/// Checks a family recorded by `reference/gen_autograd*.py`: for each case, `op(case, inputs)`
/// must give PyTorch's output, and `autograd::grad` of it (with the recorded upstream
/// gradient) PyTorch's gradients.
pub fn check_gradients(family: &str, op: fn(&Case, &[Tensor]) -> Result<Tensor>) {
    check_family(family, |c| {
        let xs = grad_leaves(c);
        let out = op(c, &xs)?;
        let g = c.inputs.last().unwrap();
        let diff: Vec<&Tensor> = c.sizes("diff").iter().map(|&i| &xs[i]).collect();
        let grads = pyrite_core::autograd::grad(&[&out], &diff, Some(&[g]), None, false, true)?;
        let mut res = vec![out.detach()];
        for (gr, x) in grads.into_iter().zip(&diff) {
            res.push(match gr {
                Some(g) => g,
                None => x.zeros_like()?,
            });
        }
        Ok(res)
    });
}

/// Runs `gradcheck` (and `gradgradcheck`, unless the case name starts with an entry of
/// `no_gradgrad`) on every f64 case of `family` whose name does not start with an entry of
/// `skip`. Returns how many cases were checked.
pub fn check_finite_differences(
    family: &str,
    op: fn(&Case, &[Tensor]) -> Result<Tensor>,
    skip: &[&str],
    no_gradgrad: &[&str],
) -> usize {
    use pyrite_core::autograd::{gradcheck, gradgradcheck, GradcheckOptions};
    let mut checked = 0;
    let mut failures = Vec::new();
    for c in load(family).iter().filter(|c| c.name.ends_with("_f64")) {
        if skip.iter().any(|k| c.name.starts_with(k)) {
            continue;
        }
        let xs = grad_leaves(c);
        let f = |x: &[Tensor]| op(c, x);
        if let Err(e) = gradcheck(f, &xs, GradcheckOptions::default()) {
            failures.push(format!("{} [{}] gradcheck: {e}", c.name, c.call));
        }
        if !no_gradgrad.iter().any(|k| c.name.starts_with(k))
            && let Err(e) = gradgradcheck(f, &xs, None, GradcheckOptions::default())
        {
            failures.push(format!("{} [{}] gradgradcheck: {e}", c.name, c.call));
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "{family}: {} failures:\n{}", failures.len(), failures.join("\n"));
    checked
}
