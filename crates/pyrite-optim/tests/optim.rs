//! Every optimizer follows PyTorch's trajectory: the cases of `reference/gen_optim.py` (each
//! optimizer with each of its options, two parameter groups with different hyperparameters,
//! and `maximize`) train the same MLP plus sparse-ish embedding problem for 200 steps from the
//! same initial parameters; the parameters after every 10th step match PyTorch's to 1e-6
//! (f64) and 1e-5 (f32) relative. Resuming at step 100 from our own state_dict, or from the
//! one PyTorch wrote, continues on the same path.

use pyrite::optim::*;
use pyrite::{DType, Tensor};
use serde_json::{Map, Value as J};
use std::collections::{BTreeMap, HashMap};

const NAMES: [&str; 5] = ["W1", "b1", "W2", "b2", "E"];

struct Ref {
    t: HashMap<String, Tensor>,
    cases: Vec<J>,
}

fn load() -> Ref {
    let path = format!("{}/../../reference/data/optim.safetensors", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut t = HashMap::new();
    for (k, v) in st.tensors() {
        let dt = match v.dtype() {
            safetensors::Dtype::F32 => DType::F32,
            safetensors::Dtype::F64 => DType::F64,
            safetensors::Dtype::I64 => DType::I64,
            d => panic!("{d:?}"),
        };
        t.insert(k, Tensor::from_raw_bytes(v.data(), v.shape(), dt).unwrap());
    }
    let cases = serde_json::from_str(&meta.metadata().as_ref().unwrap()["cases"]).unwrap();
    Ref { t, cases }
}

fn hyper(v: &J) -> Hyper {
    match v {
        J::Bool(b) => Hyper::Bool(*b),
        J::Number(n) => Hyper::Float(n.as_f64().unwrap()),
        J::Array(a) if a.len() == 2 => Hyper::Pair(a[0].as_f64().unwrap(), a[1].as_f64().unwrap()),
        J::Null => Hyper::None,
        J::String(s) => Hyper::Str(s.clone()),
        other => panic!("unexpected option {other}"),
    }
}

fn f(o: &Map<String, J>, k: &str, d: f64) -> f64 {
    o.get(k).map_or(d, |v| v.as_f64().unwrap())
}
fn b(o: &Map<String, J>, k: &str) -> bool {
    o.get(k).is_some_and(|v| v.as_bool().unwrap())
}
fn pair(o: &Map<String, J>, k: &str, d: (f64, f64)) -> (f64, f64) {
    o.get(k).map_or(d, |v| (v[0].as_f64().unwrap(), v[1].as_f64().unwrap()))
}

/// The optimizer `name` built from PyTorch's keyword arguments.
fn make(name: &str, groups: Vec<ParamGroup>, o: &Map<String, J>) -> Box<dyn Optimizer> {
    let adam = |d: AdamOptions| AdamOptions {
        lr: f(o, "lr", d.lr),
        betas: pair(o, "betas", d.betas),
        eps: f(o, "eps", d.eps),
        weight_decay: f(o, "weight_decay", d.weight_decay),
        amsgrad: b(o, "amsgrad"),
        maximize: b(o, "maximize"),
        ..d
    };
    let maximize = b(o, "maximize");
    match name {
        "SGD" => Box::new(
            SGD::with_groups(
                groups,
                SGDOptions {
                    lr: f(o, "lr", 1e-3),
                    momentum: f(o, "momentum", 0.0),
                    dampening: f(o, "dampening", 0.0),
                    weight_decay: f(o, "weight_decay", 0.0),
                    nesterov: b(o, "nesterov"),
                    maximize,
                },
            )
            .unwrap(),
        ),
        "Adam" => Box::new(Adam::with_groups(groups, adam(AdamOptions::default())).unwrap()),
        "AdamW" => Box::new(AdamW::with_groups(groups, adam(AdamOptions::adamw())).unwrap()),
        "Adamax" => {
            let d = AdamaxOptions::default();
            let opts = AdamaxOptions {
                lr: f(o, "lr", d.lr),
                betas: pair(o, "betas", d.betas),
                eps: f(o, "eps", d.eps),
                weight_decay: f(o, "weight_decay", 0.0),
                maximize,
            };
            Box::new(Adamax::with_groups(groups, opts).unwrap())
        }
        "NAdam" => {
            let d = NAdamOptions::default();
            let opts = NAdamOptions {
                lr: f(o, "lr", d.lr),
                betas: pair(o, "betas", d.betas),
                eps: f(o, "eps", d.eps),
                weight_decay: f(o, "weight_decay", 0.0),
                momentum_decay: f(o, "momentum_decay", d.momentum_decay),
                decoupled_weight_decay: b(o, "decoupled_weight_decay"),
                maximize,
            };
            Box::new(NAdam::with_groups(groups, opts).unwrap())
        }
        "RAdam" => {
            let d = RAdamOptions::default();
            let opts = RAdamOptions {
                lr: f(o, "lr", d.lr),
                betas: pair(o, "betas", d.betas),
                eps: f(o, "eps", d.eps),
                weight_decay: f(o, "weight_decay", 0.0),
                decoupled_weight_decay: b(o, "decoupled_weight_decay"),
                maximize,
            };
            Box::new(RAdam::with_groups(groups, opts).unwrap())
        }
        "RMSprop" => {
            let d = RMSpropOptions::default();
            let opts = RMSpropOptions {
                lr: f(o, "lr", d.lr),
                alpha: f(o, "alpha", d.alpha),
                eps: f(o, "eps", d.eps),
                weight_decay: f(o, "weight_decay", 0.0),
                momentum: f(o, "momentum", 0.0),
                centered: b(o, "centered"),
                maximize,
            };
            Box::new(RMSprop::with_groups(groups, opts).unwrap())
        }
        "Adagrad" => {
            let d = AdagradOptions::default();
            let opts = AdagradOptions {
                lr: f(o, "lr", d.lr),
                lr_decay: f(o, "lr_decay", 0.0),
                weight_decay: f(o, "weight_decay", 0.0),
                initial_accumulator_value: f(o, "initial_accumulator_value", 0.0),
                eps: f(o, "eps", d.eps),
                maximize,
            };
            Box::new(Adagrad::with_groups(groups, opts).unwrap())
        }
        "Adadelta" => {
            let d = AdadeltaOptions::default();
            let opts = AdadeltaOptions {
                lr: f(o, "lr", d.lr),
                rho: f(o, "rho", d.rho),
                eps: f(o, "eps", d.eps),
                weight_decay: f(o, "weight_decay", 0.0),
                maximize,
            };
            Box::new(Adadelta::with_groups(groups, opts).unwrap())
        }
        "ASGD" => {
            let d = ASGDOptions::default();
            let opts = ASGDOptions {
                lr: f(o, "lr", d.lr),
                lambd: f(o, "lambd", d.lambd),
                alpha: f(o, "alpha", d.alpha),
                t0: f(o, "t0", d.t0),
                weight_decay: f(o, "weight_decay", 0.0),
                maximize,
            };
            Box::new(ASGD::with_groups(groups, opts).unwrap())
        }
        "Rprop" => {
            let d = RpropOptions::default();
            let opts = RpropOptions {
                lr: f(o, "lr", d.lr),
                etas: pair(o, "etas", d.etas),
                step_sizes: pair(o, "step_sizes", d.step_sizes),
                maximize,
            };
            Box::new(Rprop::with_groups(groups, opts).unwrap())
        }
        other => panic!("unknown optimizer {other}"),
    }
}

struct Problem {
    x: Tensor,
    y: Tensor,
    u: Tensor,
    t: Tensor,
    idx: Tensor,
}

impl Problem {
    fn new(r: &Ref, dt: DType) -> Problem {
        let g = |k: &str| r.t[&format!("data/{k}")].to_dtype(dt).unwrap();
        Problem { x: g("X"), y: g("Y"), u: g("u"), t: g("t"), idx: r.t["data/idx"].clone() }
    }

    fn loss(&self, p: &HashMap<&str, Tensor>, step: usize) -> Tensor {
        let h = self.x.matmul(&p["W1"].t().unwrap()).unwrap().add(&p["b1"]).unwrap().tanh().unwrap();
        let y = h.matmul(&p["W2"].t().unwrap()).unwrap().add(&p["b2"]).unwrap();
        let mse = y.sub(&self.y).unwrap().square().unwrap().mean().unwrap();
        let idx = self.idx.narrow(0, step as isize, 1).unwrap().reshape([3]).unwrap();
        let rows = p["E"].index_select(0, &idx).unwrap();
        let pred = rows.mul(&self.u).unwrap().sum_dims(&[1], false).unwrap();
        let emb = pred.sub(&self.t.index_select(0, &idx).unwrap()).unwrap().square().unwrap().mean().unwrap();
        mse.add(&emb).unwrap()
    }
}

fn params_from(r: &Ref, prefix: &str, dt: DType) -> HashMap<&'static str, Tensor> {
    NAMES
        .iter()
        .map(|&n| {
            (
                n,
                r.t[&format!("{prefix}/{n}")]
                    .to_dtype(dt)
                    .unwrap()
                    .deep_clone()
                    .unwrap()
                    .requires_grad_(true)
                    .unwrap(),
            )
        })
        .collect()
}

fn groups(p: &HashMap<&str, Tensor>, case: &J) -> Vec<ParamGroup> {
    let all = |ns: &[&str]| ns.iter().map(|n| p[n].clone()).collect::<Vec<_>>();
    if case["groups"] == "one" {
        return vec![ParamGroup::new(all(&NAMES))];
    }
    let mut first = ParamGroup::new(all(&["W1", "b1"]));
    for (k, v) in case["group_options"].as_object().unwrap() {
        first = first.with(k, hyper(v));
    }
    vec![first, ParamGroup::new(all(&["W2", "b2", "E"]))]
}

/// `|got - want| <= rtol * (|want| + max|want|)` for every element: relative to each value,
/// with the tensor's scale as the floor for values near zero.
fn check(r: &Ref, case: &str, step: usize, p: &HashMap<&str, Tensor>, rtol: f64) -> Result<(), String> {
    for n in NAMES {
        let want =
            r.t[&format!("{case}/step{step}/{n}")].to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let got = p[n].to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let scale = want.iter().fold(0f64, |m, v| m.max(v.abs()));
        for (i, (a, w)) in got.iter().zip(&want).enumerate() {
            if (a - w).abs() > rtol * (w.abs() + scale) || a.is_nan() {
                return Err(format!("{case}: step {step}, {n}[{i}]: got {a}, PyTorch {w}"));
            }
        }
    }
    Ok(())
}

fn train(
    prob: &Problem,
    p: &HashMap<&str, Tensor>,
    opt: &mut dyn Optimizer,
    steps: std::ops::Range<usize>,
    sign: f64,
    mut each: impl FnMut(usize) -> Result<(), String>,
) -> Result<(), String> {
    for step in steps {
        opt.zero_grad().unwrap();
        let loss = prob.loss(p, step);
        let loss = if sign < 0.0 { loss.neg().unwrap() } else { loss };
        loss.backward().unwrap();
        opt.step().unwrap();
        if (step + 1) % 10 == 0 {
            each(step + 1)?;
        }
    }
    Ok(())
}

fn sign_of(case: &J) -> f64 {
    if b(case["options"].as_object().unwrap(), "maximize") {
        -1.0
    } else {
        1.0
    }
}

#[test]
fn every_optimizer_follows_pytorchs_trajectory() {
    let r = load();
    let mut failures = Vec::new();
    for case in &r.cases {
        let name = case["name"].as_str().unwrap();
        let (dt, rtol) = if case["dtype"] == "f64" { (DType::F64, 1e-6) } else { (DType::F32, 1e-5) };
        let prob = Problem::new(&r, dt);
        let p = params_from(&r, "init", dt);
        let mut opt =
            make(case["optimizer"].as_str().unwrap(), groups(&p, case), case["options"].as_object().unwrap());
        if let Err(e) =
            train(&prob, &p, opt.as_mut(), 0..200, sign_of(case), |s| check(&r, name, s, &p, rtol))
        {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases left PyTorch's path:\n{}",
        failures.len(),
        r.cases.len(),
        failures.join("\n")
    );
}

/// PyTorch's saved state for a case, as our state_dict structure.
fn pytorch_state_dict(r: &Ref, case: &J) -> OptimizerStateDict {
    let name = case["name"].as_str().unwrap();
    let sd = &case["state_dict"];
    let mut out = OptimizerStateDict::default();
    for (idx, keys) in sd["state"].as_object().unwrap() {
        let mut st = ParamState::new();
        for (k, v) in keys.as_object().unwrap() {
            let val = match v {
                J::String(s) if s == "tensor" => {
                    StateValue::Tensor(r.t[&format!("{name}/state/{idx}/{k}")].clone())
                }
                J::Number(n) => StateValue::Float(n.as_f64().unwrap()),
                other => panic!("{other}"),
            };
            st.insert(k.clone(), val);
        }
        out.state.insert(idx.parse().unwrap(), st);
    }
    for g in sd["param_groups"].as_array().unwrap() {
        let mut options = BTreeMap::new();
        let mut params = Vec::new();
        for (k, v) in g.as_object().unwrap() {
            if k == "params" {
                params = v.as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as usize).collect();
            } else {
                options.insert(k.clone(), hyper(v));
            }
        }
        out.param_groups.push(SavedGroup { params, options });
    }
    out
}

#[test]
fn resuming_from_a_state_dict_continues_on_the_same_path() {
    let r = load();
    let mut failures = Vec::new();
    for case in r.cases.iter().filter(|c| c["dtype"] == "f64") {
        let name = case["name"].as_str().unwrap();
        let opts = case["options"].as_object().unwrap();
        let opt_name = case["optimizer"].as_str().unwrap();
        let prob = Problem::new(&r, DType::F64);
        let sign = sign_of(case);

        // Our own state_dict, deep-copied at step 100, into a fresh optimizer over fresh tensors.
        let p = params_from(&r, "init", DType::F64);
        let mut opt = make(opt_name, groups(&p, case), opts);
        train(&prob, &p, opt.as_mut(), 0..100, sign, |_| Ok(())).unwrap();
        let saved = opt.state_dict().deep_clone().unwrap();
        let p2: HashMap<&str, Tensor> = p
            .iter()
            .map(|(k, v)| (*k, v.detach().deep_clone().unwrap().requires_grad_(true).unwrap()))
            .collect();
        drop(opt);
        let mut opt2 = make(opt_name, groups(&p2, case), opts);
        opt2.load_state_dict(&saved).unwrap();
        if let Err(e) = train(&prob, &p2, opt2.as_mut(), 100..200, sign, |s| check(&r, name, s, &p2, 1e-6)) {
            failures.push(format!("own state_dict: {e}"));
        }

        // PyTorch's state_dict after step 100, with PyTorch's parameters at step 100.
        let p3 = params_from(&r, &format!("{name}/step100"), DType::F64);
        let mut opt3 = make(opt_name, groups(&p3, case), &Map::new());
        opt3.load_state_dict(&pytorch_state_dict(&r, case)).unwrap();
        if let Err(e) = train(&prob, &p3, opt3.as_mut(), 100..200, sign, |s| check(&r, name, s, &p3, 1e-6)) {
            failures.push(format!("PyTorch's state_dict: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} resumed runs left PyTorch's path:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
