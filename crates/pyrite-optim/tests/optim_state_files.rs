//! Optimizer and scheduler state_dicts move between PyTorch and Pyrite as `.pt` files.
//!
//! `reference/gen_optim_state.py` trains a tiny model (Linear(4, 3) -> Tanh -> Linear(3, 2),
//! float32, MSE) in PyTorch with each case's optimizer and scheduler for K = 3 steps, saves the
//! model, optimizer and scheduler state_dicts, and records the next M = 4 steps' parameters and
//! learning rates. Here, for every case:
//!
//! - **PyTorch -> Pyrite**: Pyrite's optimizer and scheduler load PyTorch's K-step states and
//!   continue M steps on PyTorch's path: parameters to 1e-6 (absolute, float32), lrs to 1e-12
//!   (relative).
//! - **Pyrite -> PyTorch**: Pyrite trains K steps from the same initial model and its saved
//!   state_dicts are structurally identical to PyTorch's: the same keys in the same order, the
//!   same kinds of values (0-d tensor, float, int, tuple, list, Counter), dtypes and shapes, and
//!   equal values (tensors to 1e-6, floats to 1e-12 relative).
//!
//! With `PYRITE_OPTIM_STATE_OUT=<dir>` set, the second test also writes Pyrite's files there
//! for `reference/check_pyrite_optim_files.py`, which loads them into `torch.optim` and checks
//! that PyTorch continues on its own path.

use pyrite::nn::StateDict;
use pyrite::optim::lr_scheduler::*;
use pyrite::optim::*;
use pyrite::serialization::{load, save, Object};
use pyrite::{DType, Result, Tensor};

const K: usize = 3;
const M: usize = 4;
const CASES: [&str; 15] = [
    "sgd_momentum_steplr",
    "sgd_plain_multisteplr",
    "sgd_dampening_constantlr",
    "adam_exponentiallr",
    "adam_amsgrad_cosine",
    "adamw_linearlr",
    "rmsprop_onecycle",
    "rmsprop_plain_polynomial",
    "adagrad_plateau",
    "adadelta",
    "adamax",
    "nadam",
    "radam",
    "asgd",
    "rprop",
];

fn fixture(name: &str) -> Object {
    let path = format!("{}/../../reference/data/optim_state/{name}.pt", env!("CARGO_MANIFEST_DIR"));
    load(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The scheduler of a case; ReduceLROnPlateau steps with the loss.
enum Sched {
    Epoch(Box<dyn LRScheduler>),
    Plateau(ReduceLROnPlateau),
}

impl Sched {
    fn step(&mut self, opt: &mut dyn Optimizer, loss: f64) -> Result<()> {
        match self {
            Sched::Epoch(s) => s.step(opt),
            Sched::Plateau(s) => s.step(opt, loss),
        }
    }
    fn state_dict(&self) -> SchedulerStateDict {
        match self {
            Sched::Epoch(s) => s.state_dict(),
            Sched::Plateau(s) => s.state_dict(),
        }
    }
    fn load_state_dict(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        match self {
            Sched::Epoch(s) => s.load_state_dict(sd),
            Sched::Plateau(s) => s.load_state_dict(sd),
        }
    }
}

/// The same optimizer and scheduler as the case in `gen_optim_state.py`, over `params`.
fn build(name: &str, params: Vec<Tensor>) -> Result<(Box<dyn Optimizer>, Option<Sched>)> {
    fn boxed<O: Optimizer + 'static>(
        mut opt: O,
        sched: impl FnOnce(&mut O) -> Result<Option<Sched>>,
    ) -> Result<(Box<dyn Optimizer>, Option<Sched>)> {
        let s = sched(&mut opt)?;
        Ok((Box::new(opt), s))
    }
    fn epoch(s: impl LRScheduler + 'static) -> Result<Option<Sched>> {
        Ok(Some(Sched::Epoch(Box::new(s))))
    }
    fn none<O>(_: &mut O) -> Result<Option<Sched>> {
        Ok(None)
    }
    match name {
        "sgd_momentum_steplr" => boxed(
            SGD::new(
                params,
                SGDOptions {
                    lr: 0.1,
                    momentum: 0.9,
                    nesterov: true,
                    weight_decay: 0.01,
                    ..Default::default()
                },
            )?,
            |o| epoch(StepLR::new(o, 2, StepLROptions { gamma: 0.5, ..Default::default() })?),
        ),
        "sgd_plain_multisteplr" => {
            boxed(SGD::new(params, SGDOptions { lr: 0.1, ..Default::default() })?, |o| {
                epoch(MultiStepLR::new(
                    o,
                    &[2, 4, 4],
                    MultiStepLROptions { gamma: 0.5, ..Default::default() },
                )?)
            })
        }
        "sgd_dampening_constantlr" => boxed(
            SGD::new(params, SGDOptions { lr: 0.05, momentum: 0.5, dampening: 0.1, ..Default::default() })?,
            |o| {
                epoch(ConstantLR::new(
                    o,
                    ConstantLROptions { factor: 0.5, total_iters: 4, ..Default::default() },
                )?)
            },
        ),
        "adam_exponentiallr" => {
            boxed(Adam::new(params, AdamOptions { lr: 0.01, ..Default::default() })?, |o| {
                epoch(ExponentialLR::new(o, 0.9, Default::default())?)
            })
        }
        "adam_amsgrad_cosine" => boxed(
            Adam::new(
                params,
                AdamOptions {
                    lr: 0.01,
                    betas: (0.8, 0.99),
                    amsgrad: true,
                    weight_decay: 0.1,
                    ..Default::default()
                },
            )?,
            |o| {
                epoch(CosineAnnealingLR::new(
                    o,
                    10,
                    CosineAnnealingLROptions { eta_min: 0.001, ..Default::default() },
                )?)
            },
        ),
        "adamw_linearlr" => {
            boxed(AdamW::new(params, AdamOptions { lr: 0.01, ..AdamOptions::adamw() })?, |o| {
                epoch(LinearLR::new(
                    o,
                    LinearLROptions {
                        start_factor: 0.5,
                        end_factor: 1.0,
                        total_iters: 4,
                        ..Default::default()
                    },
                )?)
            })
        }
        "rmsprop_onecycle" => boxed(
            RMSprop::new(
                params,
                RMSpropOptions { lr: 0.01, momentum: 0.9, centered: true, ..Default::default() },
            )?,
            |o| {
                epoch(OneCycleLR::new(
                    o,
                    0.05,
                    OneCycleLROptions { total_steps: Some(20), ..Default::default() },
                )?)
            },
        ),
        "rmsprop_plain_polynomial" => {
            boxed(RMSprop::new(params, RMSpropOptions { lr: 0.01, ..Default::default() })?, |o| {
                epoch(PolynomialLR::new(
                    o,
                    PolynomialLROptions { total_iters: 5, power: 2.0, ..Default::default() },
                )?)
            })
        }
        "adagrad_plateau" => {
            boxed(Adagrad::new(params, AdagradOptions { lr: 0.1, ..Default::default() })?, |o| {
                let s = ReduceLROnPlateau::new(
                    o,
                    ReduceLROnPlateauOptions { factor: 0.5, patience: 0, ..Default::default() },
                )?;
                Ok(Some(Sched::Plateau(s)))
            })
        }
        "adadelta" => boxed(Adadelta::new(params, AdadeltaOptions { lr: 1.0, ..Default::default() })?, none),
        "adamax" => boxed(Adamax::new(params, AdamaxOptions { lr: 0.01, ..Default::default() })?, none),
        "nadam" => boxed(NAdam::new(params, NAdamOptions { lr: 0.01, ..Default::default() })?, none),
        "radam" => boxed(RAdam::new(params, RAdamOptions { lr: 0.01, ..Default::default() })?, none),
        "asgd" => boxed(ASGD::new(params, ASGDOptions { lr: 0.01, ..Default::default() })?, none),
        "rprop" => boxed(Rprop::new(params, RpropOptions { lr: 0.01, ..Default::default() })?, none),
        other => panic!("unknown case {other}"),
    }
}

/// Fresh leaf parameters from a saved module state_dict, in `model.parameters()` order.
fn params_from(obj: &Object) -> Vec<Tensor> {
    let sd = StateDict::from_object(obj).unwrap();
    ["0.weight", "0.bias", "2.weight", "2.bias"]
        .iter()
        .map(|k| sd.get(k).unwrap().detach().deep_clone().unwrap().requires_grad_(true).unwrap())
        .collect()
}

/// One training step as the script does it; returns the loss.
fn train_step(
    p: &[Tensor],
    x: &Tensor,
    y: &Tensor,
    opt: &mut dyn Optimizer,
    sched: Option<&mut Sched>,
) -> Result<f64> {
    opt.zero_grad()?;
    let h = x.matmul(&p[0].t()?)?.add(&p[1])?.tanh()?;
    let out = h.matmul(&p[2].t()?)?.add(&p[3])?;
    let loss = out.sub(y)?.square()?.mean()?;
    loss.backward()?;
    opt.step()?;
    let loss = loss.item::<f32>()? as f64;
    if let Some(s) = sched {
        s.step(opt, loss)?;
    }
    Ok(loss)
}

fn flat(t: &Tensor) -> Vec<f64> {
    t.detach().to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn tensor_at(o: &Object, i: usize) -> &Tensor {
    o.as_slice().unwrap()[i].as_tensor().unwrap()
}

#[test]
fn pyrite_continues_pytorchs_trajectory_from_pytorchs_files() {
    for name in CASES {
        let f = fixture(name);
        let x = f.get("x").and_then(Object::as_tensor).unwrap();
        let y = f.get("y").and_then(Object::as_tensor).unwrap();
        let params = params_from(f.get("model_state_dict").unwrap());
        let (mut opt, mut sched) = build(name, params.clone()).unwrap();
        // As a PyTorch resume: build both, then load the optimizer's state, then the scheduler's.
        let osd = OptimizerStateDict::from_object(f.get("optimizer_state_dict").unwrap()).unwrap();
        opt.load_state_dict(&osd).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(s) = sched.as_mut() {
            let ssd = SchedulerStateDict::from_object(f.get("scheduler_state_dict").unwrap()).unwrap();
            s.load_state_dict(&ssd).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let next_params = f.get("next_params").and_then(Object::as_slice).unwrap();
        let next_lrs = f.get("next_lrs").and_then(Object::as_slice).unwrap();
        for step in 0..M {
            train_step(&params, x, y, opt.as_mut(), sched.as_mut()).unwrap();
            for (i, p) in params.iter().enumerate() {
                let want = flat(tensor_at(&next_params[step], i));
                for (a, b) in flat(p).iter().zip(&want) {
                    // f32: 1e-6 relative to the value (a few ulps), absolute below 1
                    assert!(
                        (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                        "{name}: step {} param {i}: {a} vs PyTorch {b}",
                        K + step + 1
                    );
                }
            }
            let lr = opt.param_groups()[0].lr;
            let want = next_lrs[step].as_slice().unwrap()[0].as_float().unwrap();
            assert!(
                (lr - want).abs() <= 1e-12 * want.abs(),
                "{name}: step {}: lr {lr} vs PyTorch {want}",
                K + step + 1
            );
        }
    }
}

/// Asserts that `ours` has `theirs`' structure and values; `path` names the place in messages.
fn assert_same(path: &str, ours: &Object, theirs: &Object) {
    assert_eq!(ours.type_name(), theirs.type_name(), "{path}: kind");
    match (ours, theirs) {
        (Object::Dict(a), Object::Dict(b))
        | (Object::Counter(a), Object::Counter(b))
        | (Object::OrderedDict(a), Object::OrderedDict(b)) => {
            let ka: Vec<_> = a.keys().collect();
            let kb: Vec<_> = b.keys().collect();
            assert_eq!(ka, kb, "{path}: keys (in order)");
            for ((k, va), vb) in a.iter().zip(b.values()) {
                let k = k.as_str().map_or_else(|| format!("{k:?}"), str::to_string);
                assert_same(&format!("{path}/{k}"), va, vb);
            }
        }
        (Object::List(a), Object::List(b)) | (Object::Tuple(a), Object::Tuple(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: length");
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                assert_same(&format!("{path}/{i}"), va, vb);
            }
        }
        (Object::Tensor(a), Object::Tensor(b)) => {
            assert_eq!(a.dtype(), b.dtype(), "{path}: dtype");
            assert_eq!(a.dims(), b.dims(), "{path}: shape");
            assert_eq!(a.requires_grad(), b.requires_grad(), "{path}: requires_grad");
            for (x, y) in flat(a).iter().zip(flat(b)) {
                // 1e-5 relative: these states come from K training steps run here, whose f32
                // rounding (matmul order) RMSprop's 1 / sqrt(v) amplifies in its first steps
                assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{path}: {x} vs PyTorch {y}");
            }
        }
        (Object::Float(a), Object::Float(b)) => {
            assert!(a == b || (a - b).abs() <= 1e-12 * b.abs(), "{path}: {a} vs PyTorch {b}")
        }
        (a, b) => assert_eq!(a, b, "{path}"),
    }
}

#[test]
fn pyrite_saves_the_state_dicts_pytorch_saves() {
    let out_dir = std::env::var_os("PYRITE_OPTIM_STATE_OUT").map(std::path::PathBuf::from);
    for name in CASES {
        let f = fixture(name);
        let x = f.get("x").and_then(Object::as_tensor).unwrap();
        let y = f.get("y").and_then(Object::as_tensor).unwrap();
        let params = params_from(f.get("initial_model").unwrap());
        let (mut opt, mut sched) = build(name, params.clone()).unwrap();
        for _ in 0..K {
            train_step(&params, x, y, opt.as_mut(), sched.as_mut()).unwrap();
        }
        let osd = opt.state_dict().to_object().unwrap();
        assert_same(&format!("{name}: optimizer"), &osd, f.get("optimizer_state_dict").unwrap());
        let ssd = sched.as_ref().map(|s| s.state_dict().to_object().unwrap());
        if let Some(ssd) = &ssd {
            assert_same(&format!("{name}: scheduler"), ssd, f.get("scheduler_state_dict").unwrap());
        }
        // Through a file and back: the same objects again.
        let path = std::env::temp_dir().join(format!("pyrite-optim-state-{}-{name}.pt", std::process::id()));
        save(&osd, &path).unwrap();
        assert_same(&format!("{name}: optimizer reloaded"), &load(&path).unwrap(), &osd);
        if let Some(ssd) = &ssd {
            save(ssd, &path).unwrap(); // MultiStepLR's Counter included
            assert_same(&format!("{name}: scheduler reloaded"), &load(&path).unwrap(), ssd);
        }
        std::fs::remove_file(&path).ok();

        if let Some(dir) = &out_dir {
            std::fs::create_dir_all(dir).unwrap();
            let sd: StateDict = ["0.weight", "0.bias", "2.weight", "2.bias"]
                .iter()
                .zip(&params)
                .map(|(k, p)| (k.to_string(), p.clone()))
                .collect();
            let mut entries = vec![
                ("x", Object::from(x)),
                ("y", Object::from(y)),
                ("model_state_dict", sd.to_object()),
                ("optimizer_state_dict", osd),
                ("next_params", f.get("next_params").unwrap().clone()),
                ("next_lrs", f.get("next_lrs").unwrap().clone()),
            ];
            if let Some(ssd) = ssd {
                entries.push(("scheduler_state_dict", ssd));
            }
            save(&Object::from_pairs(entries), dir.join(format!("{name}.pt"))).unwrap();
        }
    }
}

#[test]
fn module_state_dict_keeps_pytorchs_keys_and_order() {
    let f = fixture("adam_exponentiallr");
    let sd = StateDict::from_object(f.get("model_state_dict").unwrap()).unwrap();
    assert_eq!(sd.keys().collect::<Vec<_>>(), ["0.weight", "0.bias", "2.weight", "2.bias"]);
    let back = sd.to_object();
    assert!(matches!(back, Object::OrderedDict(_)));
    assert_same("model", &back, f.get("model_state_dict").unwrap());
}

#[test]
fn pytorch_files_written_by_older_versions_load() {
    // `step` as a plain int or float, no foreach/fused/capturable/differentiable keys.
    let f = fixture("adam_exponentiallr");
    let mut obj = f.get("optimizer_state_dict").unwrap().clone();
    let groups = obj.as_dict_mut().unwrap().get_mut("param_groups").unwrap();
    let g = groups.as_vec_mut().unwrap()[0].as_dict_mut().unwrap();
    for k in ["foreach", "fused", "capturable", "differentiable", "decoupled_weight_decay"] {
        g.remove(k);
    }
    let state = obj.as_dict_mut().unwrap().get_mut("state").unwrap().as_dict_mut().unwrap();
    for (i, (_, s)) in state.iter_mut().enumerate() {
        let step = if i % 2 == 0 { Object::Int(3) } else { Object::Float(3.0) };
        s.as_dict_mut().unwrap().insert("step", step);
    }
    let sd = OptimizerStateDict::from_object(&obj).unwrap();
    let params = params_from(f.get("model_state_dict").unwrap());
    let (mut opt, _) = build("adam_exponentiallr", params).unwrap();
    opt.load_state_dict(&sd).unwrap();
    // Saved again, the layout is PyTorch's current one.
    let again = opt.state_dict().to_object().unwrap();
    let g = &again.get("param_groups").unwrap().as_slice().unwrap()[0];
    assert_eq!(g.get("fused"), Some(&Object::None));
    let step = again.get("state").and_then(|s| s.get(0)).and_then(|s| s.get("step")).unwrap();
    assert_eq!(step.as_tensor().unwrap().item::<f32>().unwrap(), 3.0);
}

fn load_error(name: &str, params: Vec<Tensor>, obj: &Object) -> String {
    let sd = match OptimizerStateDict::from_object(obj) {
        Ok(sd) => sd,
        Err(e) => return e.to_string(),
    };
    let (mut opt, _) = build(name, params).unwrap();
    opt.load_state_dict(&sd).expect_err("loading should fail").to_string()
}

#[test]
fn mismatched_optimizer_states_are_clear_errors() {
    let f = fixture("adam_exponentiallr");
    let osd = f.get("optimizer_state_dict").unwrap();
    let params = params_from(f.get("model_state_dict").unwrap());

    // Fewer parameters than the saved group.
    let e = load_error("adam_exponentiallr", params[..3].to_vec(), osd);
    assert!(e.contains("doesn't match the size") && e.contains("4 parameters saved"), "{e}");

    // Two groups saved, one in the optimizer.
    let mut two = osd.clone();
    let groups = two.as_dict_mut().unwrap().get_mut("param_groups").unwrap().as_vec_mut().unwrap();
    let mut g2 = groups[0].clone();
    g2.as_dict_mut().unwrap().insert("params", Object::List(vec![]));
    groups.push(g2);
    let e = load_error("adam_exponentiallr", params.clone(), &two);
    assert!(e.contains("different number of parameter groups (2 saved, the optimizer has 1)"), "{e}");

    // Parameters of other shapes (the two weights swapped with the biases).
    let swapped = vec![params[1].clone(), params[0].clone(), params[3].clone(), params[2].clone()];
    let e = load_error("adam_exponentiallr", swapped, osd);
    assert!(e.contains("'exp_avg' of shape [3, 4] for parameter 0 of shape [3]"), "{e}");

    // Not an optimizer state_dict at all.
    let e = OptimizerStateDict::from_object(f.get("model_state_dict").unwrap()).unwrap_err().to_string();
    assert!(e.contains("expected the keys 'state' and 'param_groups'"), "{e}");
    let e = OptimizerStateDict::from_object(&Object::from(3)).unwrap_err().to_string();
    assert!(e.contains("got a int"), "{e}");
}
