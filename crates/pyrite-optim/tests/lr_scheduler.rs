//! The LR schedulers against PyTorch: `reference/gen_lr_scheduler.py` records, for each case,
//! the lrs (and momenta) of 300 steps of `optimizer.step(); scheduler.step()` and the
//! scheduler's state_dict at step 150. Here each case is rebuilt from the same spec and must
//! give the same sequence (bit for bit on linux-gnu, to 1e-12 relative elsewhere), the same state_dict, and continue identically
//! after a state_dict round trip, both from our own state_dict and from PyTorch's. Then the
//! error cases (PyTorch's messages) and the "scheduler stepped first" warning.

use pyrite_core::warnings::catch_warnings;
use pyrite_core::{DType, Result, Tensor};
use pyrite_optim::lr_scheduler::*;
use pyrite_optim::swa_utils::{SWALROptions, SWALR};
use pyrite_optim::{hypers, Hyper, Optimizer, OptimizerBase, ParamGroup, SGDOptions, SGD};
use serde_json::{Map, Value};
use std::sync::Arc;

/// An optimizer whose update does nothing: the schedulers only read and write its groups.
/// `kind` picks the hyperparameters PyTorch's SGD ("momentum"), Adam ("betas") or Adagrad
/// (neither) have.
struct TestOpt {
    base: OptimizerBase,
}

impl Optimizer for TestOpt {
    fn base(&self) -> &OptimizerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut OptimizerBase {
        &mut self.base
    }
    fn update(&mut self) -> Result<()> {
        Ok(())
    }
}

fn make_optimizer(spec: &Value) -> TestOpt {
    let lrs: Vec<f64> = spec["lrs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let groups = lrs
        .iter()
        .enumerate()
        .map(|(i, lr)| {
            let p = Tensor::zeros([2], DType::F64).unwrap().requires_grad_(true).unwrap();
            let mut g = ParamGroup::new(vec![p]).with("lr", *lr);
            if let Some(init) = spec.get("initial_lr") {
                g = g.with("initial_lr", init[i].as_f64().unwrap());
            }
            g
        })
        .collect();
    let (name, defaults) = match spec["kind"].as_str().unwrap() {
        "sgd" => (
            "SGD",
            hypers!["lr" => lrs[0], "momentum" => spec.get("momentum").and_then(Value::as_f64).unwrap_or(0.0)],
        ),
        "adam" => ("Adam", hypers!["lr" => lrs[0], "betas" => (0.9, 0.999)]),
        "adagrad" => ("Adagrad", hypers!["lr" => lrs[0]]),
        k => panic!("optimizer kind {k}"),
    };
    TestOpt { base: OptimizerBase::new(name, defaults, groups).unwrap() }
}

/// The lambdas of the generator, by name.
fn lambda(name: &str) -> LrLambda {
    match name {
        "pow095" => Arc::new(|e| 0.95f64.powf(e as f64)),
        "inv" => Arc::new(|e| 1.0 / (1 + e) as f64),
        "warmup10" => Arc::new(|e| {
            let x = (e + 1) as f64 / 10.0;
            if x < 1.0 {
                x
            } else {
                1.0
            }
        }),
        "const099" => Arc::new(|_| 0.99),
        "osc" => Arc::new(|e| if e % 2 != 0 { 1.01 } else { 0.985 }),
        n => panic!("lambda {n}"),
    }
}

fn scale_fn(name: &str) -> ScaleFn {
    match name {
        "inv_iter" => Arc::new(|x| 1.0 / (1.0 + 0.01 * x)),
        "half_pow" => Arc::new(|x| 0.5f64.powf(x)),
        n => panic!("scale_fn {n}"),
    }
}

/// Keyword-argument readers.
struct Kw<'a>(&'a Map<String, Value>);

impl Kw<'_> {
    fn f64(&self, k: &str, default: f64) -> f64 {
        self.0.get(k).map_or(default, |v| v.as_f64().unwrap())
    }
    fn usize(&self, k: &str, default: usize) -> usize {
        self.0.get(k).map_or(default, |v| v.as_u64().unwrap() as usize)
    }
    fn opt_usize(&self, k: &str) -> Option<usize> {
        self.0.get(k).map(|v| v.as_u64().unwrap() as usize)
    }
    fn bool(&self, k: &str, default: bool) -> bool {
        self.0.get(k).map_or(default, |v| v.as_bool().unwrap())
    }
    fn str(&self, k: &str, default: &'static str) -> String {
        self.0.get(k).map_or(default.to_string(), |v| v.as_str().unwrap().to_string())
    }
    fn per_group(&self, k: &str, default: f64) -> PerGroup {
        match self.0.get(k) {
            None => PerGroup::All(default),
            Some(Value::Array(a)) => PerGroup::Each(a.iter().map(|v| v.as_f64().unwrap()).collect()),
            Some(v) => PerGroup::All(v.as_f64().unwrap()),
        }
    }
    fn last_epoch(&self) -> i64 {
        self.0.get("last_epoch").map_or(-1, |v| v.as_i64().unwrap())
    }
    fn anneal(&self) -> AnnealStrategy {
        AnnealStrategy::from_name(&self.str("anneal_strategy", "cos")).unwrap()
    }
}

fn kw(spec: &Value) -> Kw<'_> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    Kw(spec.get("kw").and_then(Value::as_object).unwrap_or_else(|| EMPTY.get_or_init(Map::new)))
}

fn build_plateau(opt: &mut TestOpt, spec: &Value) -> Result<ReduceLROnPlateau> {
    let k = kw(spec);
    let options = ReduceLROnPlateauOptions {
        mode: if k.str("mode", "min") == "min" { PlateauMode::Min } else { PlateauMode::Max },
        factor: k.f64("factor", 0.1),
        patience: k.usize("patience", 10),
        threshold: k.f64("threshold", 1e-4),
        threshold_mode: if k.str("threshold_mode", "rel") == "rel" {
            ThresholdMode::Rel
        } else {
            ThresholdMode::Abs
        },
        cooldown: k.usize("cooldown", 0),
        min_lr: k.per_group("min_lr", 0.0),
        eps: k.f64("eps", 1e-8),
    };
    ReduceLROnPlateau::new(opt, options)
}

/// Builds the scheduler of a spec (`{"type", "kw"}`, or `{"type", "schedulers", "milestones"}`).
fn build(opt: &mut TestOpt, spec: &Value) -> Result<Box<dyn LRScheduler>> {
    let k = kw(spec);
    let so = SchedulerOptions { last_epoch: k.last_epoch() };
    let n = opt.param_groups().len();
    let lambdas = |v: &Value| -> Vec<LrLambda> {
        match v {
            Value::Array(a) => a.iter().map(|x| lambda(x.as_str().unwrap())).collect(),
            v => vec![lambda(v.as_str().unwrap()); n],
        }
    };
    let children = |opt: &mut TestOpt| -> Result<Vec<Box<dyn LRScheduler>>> {
        spec["schedulers"].as_array().unwrap().iter().map(|s| build(opt, s)).collect()
    };
    Ok(match spec["type"].as_str().unwrap() {
        "SequentialLR" => {
            let inner = children(opt)?;
            let ms: Vec<i64> =
                spec["milestones"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
            Box::new(SequentialLR::new(opt, inner, &ms, so)?)
        }
        "ChainedScheduler" => {
            let inner = children(opt)?;
            Box::new(ChainedScheduler::new(opt, inner)?)
        }
        "LambdaLR" => Box::new(LambdaLR::with_lambdas(opt, lambdas(&k.0["lr_lambda"]), so)?),
        "MultiplicativeLR" => Box::new(MultiplicativeLR::with_lambdas(opt, lambdas(&k.0["lr_lambda"]), so)?),
        "StepLR" => Box::new(StepLR::new(
            opt,
            k.usize("step_size", 0),
            StepLROptions { gamma: k.f64("gamma", 0.1), last_epoch: so.last_epoch },
        )?),
        "MultiStepLR" => {
            let ms: Vec<i64> =
                k.0["milestones"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
            Box::new(MultiStepLR::new(
                opt,
                &ms,
                MultiStepLROptions { gamma: k.f64("gamma", 0.1), last_epoch: so.last_epoch },
            )?)
        }
        "ConstantLR" => Box::new(ConstantLR::new(
            opt,
            ConstantLROptions {
                factor: k.f64("factor", 1.0 / 3.0),
                total_iters: k.usize("total_iters", 5),
                last_epoch: so.last_epoch,
            },
        )?),
        "LinearLR" => Box::new(LinearLR::new(
            opt,
            LinearLROptions {
                start_factor: k.f64("start_factor", 1.0 / 3.0),
                end_factor: k.f64("end_factor", 1.0),
                total_iters: k.usize("total_iters", 5),
                last_epoch: so.last_epoch,
            },
        )?),
        "ExponentialLR" => Box::new(ExponentialLR::new(opt, k.f64("gamma", f64::NAN), so)?),
        "PolynomialLR" => Box::new(PolynomialLR::new(
            opt,
            PolynomialLROptions {
                total_iters: k.usize("total_iters", 5),
                power: k.f64("power", 1.0),
                last_epoch: so.last_epoch,
            },
        )?),
        "CosineAnnealingLR" => Box::new(CosineAnnealingLR::new(
            opt,
            k.usize("T_max", 0),
            CosineAnnealingLROptions { eta_min: k.f64("eta_min", 0.0), last_epoch: so.last_epoch },
        )?),
        "CosineAnnealingWarmRestarts" => Box::new(CosineAnnealingWarmRestarts::new(
            opt,
            k.usize("T_0", 0),
            CosineAnnealingWarmRestartsOptions {
                t_mult: k.usize("T_mult", 1),
                eta_min: k.f64("eta_min", 0.0),
                last_epoch: so.last_epoch,
            },
        )?),
        "CyclicLR" => {
            let options = CyclicLROptions {
                step_size_up: k.usize("step_size_up", 2000),
                step_size_down: k.opt_usize("step_size_down"),
                mode: match k.str("mode", "triangular").as_str() {
                    "triangular" => CyclicMode::Triangular,
                    "triangular2" => CyclicMode::Triangular2,
                    _ => CyclicMode::ExpRange,
                },
                gamma: k.f64("gamma", 1.0),
                scale_fn: k.0.get("scale_fn").map(|v| scale_fn(v.as_str().unwrap())),
                scale_mode: if k.str("scale_mode", "cycle") == "cycle" {
                    ScaleMode::Cycle
                } else {
                    ScaleMode::Iterations
                },
                cycle_momentum: k.bool("cycle_momentum", true),
                base_momentum: k.per_group("base_momentum", 0.8),
                max_momentum: k.per_group("max_momentum", 0.9),
                last_epoch: so.last_epoch,
            };
            Box::new(CyclicLR::new(
                opt,
                k.per_group("base_lr", f64::NAN),
                k.per_group("max_lr", f64::NAN),
                options,
            )?)
        }
        "OneCycleLR" => {
            let options = OneCycleLROptions {
                total_steps: k.opt_usize("total_steps"),
                epochs: k.opt_usize("epochs"),
                steps_per_epoch: k.opt_usize("steps_per_epoch"),
                pct_start: k.f64("pct_start", 0.3),
                anneal_strategy: k.anneal(),
                cycle_momentum: k.bool("cycle_momentum", true),
                base_momentum: k.per_group("base_momentum", 0.85),
                max_momentum: k.per_group("max_momentum", 0.95),
                div_factor: k.f64("div_factor", 25.0),
                final_div_factor: k.f64("final_div_factor", 1e4),
                three_phase: k.bool("three_phase", false),
                last_epoch: so.last_epoch,
            };
            Box::new(OneCycleLR::new(opt, k.per_group("max_lr", f64::NAN), options)?)
        }
        "SWALR" => Box::new(SWALR::new(
            opt,
            k.per_group("swa_lr", f64::NAN),
            SWALROptions {
                anneal_epochs: k.usize("anneal_epochs", 10),
                anneal_strategy: k.anneal(),
                last_epoch: so.last_epoch,
            },
        )?),
        "ReduceLROnPlateau" => panic!("ReduceLROnPlateau is not an LRScheduler: build it with build_plateau"),
        t => panic!("scheduler type {t}"),
    })
}

/// A scheduler under test: ReduceLROnPlateau steps with a metric.
enum Sched {
    Plain(Box<dyn LRScheduler>),
    Plateau(ReduceLROnPlateau),
}

impl Sched {
    fn try_new(opt: &mut TestOpt, spec: &Value) -> Result<Sched> {
        Ok(if spec["type"] == "ReduceLROnPlateau" {
            Sched::Plateau(build_plateau(opt, spec)?)
        } else {
            Sched::Plain(build(opt, spec)?)
        })
    }
    fn new(opt: &mut TestOpt, spec: &Value) -> Sched {
        Sched::try_new(opt, spec).unwrap()
    }
    fn step(&mut self, opt: &mut TestOpt, metric: Option<f64>) -> Result<()> {
        match self {
            Sched::Plain(s) => s.step(opt),
            Sched::Plateau(s) => s.step(opt, metric.expect("ReduceLROnPlateau steps with a metric")),
        }
    }
    fn get_last_lr(&self) -> &[f64] {
        match self {
            Sched::Plain(s) => s.get_last_lr(),
            Sched::Plateau(s) => s.get_last_lr(),
        }
    }
    fn state_dict(&self) -> SchedulerStateDict {
        match self {
            Sched::Plain(s) => s.state_dict(),
            Sched::Plateau(s) => s.state_dict(),
        }
    }
    fn load_state_dict(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        match self {
            Sched::Plain(s) => s.load_state_dict(sd),
            Sched::Plateau(s) => s.load_state_dict(sd),
        }
    }
}

fn momenta(opt: &TestOpt) -> Vec<f64> {
    opt.param_groups()
        .iter()
        .map(|g| match g.get("betas") {
            Some(Hyper::Pair(b1, _)) => b1,
            _ => g.f64("momentum").unwrap(),
        })
        .collect()
}

/// A float of the results: written by the generator as its repr in a string, which Rust
/// parses exactly (serde_json's own number parsing may be one ulp off).
fn float(v: &Value) -> f64 {
    match v {
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("not a float: {s}")),
        v => v.as_f64().unwrap(),
    }
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(float).collect()
}

/// Largest relative error seen, for the report at the end.
#[derive(Default)]
struct Stats {
    compared: usize,
    exact: usize,
    worst: f64,
    first_inexact: Option<String>,
}

const RTOL: f64 = 1e-12;

fn close(stats: &mut Stats, got: &[f64], want: &[f64], ctx: &dyn Fn() -> String) {
    assert_eq!(got.len(), want.len(), "{}: {} values, PyTorch has {}", ctx(), got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        stats.compared += 1;
        if g.to_bits() == w.to_bits() {
            stats.exact += 1;
            continue;
        }
        if stats.first_inexact.is_none() {
            stats.first_inexact = Some(format!("{}: got {g:?}, PyTorch {w:?}", ctx()));
        }
        let err = (g - w).abs();
        let rel = err / w.abs().max(1e-300);
        // Values that PyTorch computes as (nearly) zero are compared absolutely.
        assert!(
            err <= RTOL * w.abs() || err < 1e-18,
            "{}: got {g:e}, PyTorch {w:e} (rel err {rel:e})",
            ctx()
        );
        if w.abs() > 1e-15 {
            stats.worst = stats.worst.max(rel);
        }
    }
}

/// PyTorch's state_dict (JSON, with floats written as repr strings) as ours.
fn to_value(v: &Value) -> SchedulerValue {
    match v {
        Value::Null => SchedulerValue::None,
        Value::Bool(b) => SchedulerValue::Bool(*b),
        Value::Number(n) if n.is_i64() => SchedulerValue::Int(n.as_i64().unwrap()),
        Value::Number(n) => SchedulerValue::Float(n.as_f64().unwrap()),
        Value::String(s) => match s.parse::<f64>() {
            Ok(x) => SchedulerValue::Float(x),
            Err(_) => SchedulerValue::Str(s.clone()),
        },
        Value::Array(a) => SchedulerValue::List(a.iter().map(to_value).collect()),
        Value::Object(o) => SchedulerValue::Dict(o.iter().map(|(k, v)| (k.clone(), to_value(v))).collect()),
    }
}

fn to_dict(v: &Value) -> SchedulerStateDict {
    match to_value(v) {
        SchedulerValue::Dict(d) => d,
        other => panic!("state_dict should be a dict, got {other:?}"),
    }
}

/// Compares our state_dict with PyTorch's: the same keys (a SequentialLR or ChainedScheduler
/// nested first in a SequentialLR gets `_step_count` and `_is_initial` in PyTorch, which we do
/// not keep) and the same values, numbers to 1e-12 whatever their int/float type.
fn same_state(ours: &SchedulerValue, theirs: &SchedulerValue, path: &str) {
    use SchedulerValue as V;
    match (ours, theirs) {
        (V::Dict(a), V::Dict(b)) => {
            let composite = b.contains_key("_schedulers");
            for k in b.keys() {
                let optional = composite && (k == "_step_count" || k == "_is_initial");
                assert!(a.contains_key(k) || optional, "{path}: key '{k}' is missing from our state_dict");
            }
            for (k, v) in a {
                let w = b
                    .get(k)
                    .unwrap_or_else(|| panic!("{path}: our state_dict has '{k}', PyTorch's does not"));
                same_state(v, w, &format!("{path}.{k}"));
            }
        }
        (V::List(a), V::List(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: list lengths");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                same_state(x, y, &format!("{path}[{i}]"));
            }
        }
        (a, b) if a.as_f64().is_some() && b.as_f64().is_some() => {
            let (x, y) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!(x == y || (x - y).abs() <= RTOL * y.abs(), "{path}: ours {x:e}, PyTorch {y:e}");
        }
        (a, b) => assert_eq!(a, b, "{path}"),
    }
}

struct Case<'a> {
    c: &'a Value,
    name: &'a str,
    metrics: Option<Vec<f64>>,
    lrs: Vec<Vec<f64>>,
    momentum: Option<Vec<Vec<f64>>>,
}

impl<'a> Case<'a> {
    fn new(c: &'a Value) -> Case<'a> {
        Case {
            c,
            name: c["name"].as_str().unwrap(),
            metrics: c["metrics"].as_array().map(|a| a.iter().map(float).collect()),
            lrs: c["lrs"].as_array().unwrap().iter().map(floats).collect(),
            momentum: c.get("momentum").map(|m| m.as_array().unwrap().iter().map(floats).collect()),
        }
    }

    fn build(&self) -> (TestOpt, Sched) {
        let mut opt = make_optimizer(&self.c["optimizer"]);
        let sched = Sched::new(&mut opt, &self.c["scheduler"]);
        (opt, sched)
    }

    /// Steps `from..to` (0-based), comparing each step's lrs and momenta with PyTorch's.
    fn run(
        &self,
        opt: &mut TestOpt,
        sched: &mut Sched,
        from: usize,
        to: usize,
        stats: &mut Stats,
        what: &str,
    ) {
        for i in from..to {
            opt.step().unwrap();
            sched.step(opt, self.metrics.as_ref().map(|m| m[i])).unwrap();
            let ctx = || format!("{} ({what}) step {}", self.name, i + 1);
            close(stats, sched.get_last_lr(), &self.lrs[i], &ctx);
            close(stats, &opt.param_groups().iter().map(|g| g.lr).collect::<Vec<_>>(), &self.lrs[i], &ctx);
            if let Some(m) = &self.momentum {
                close(stats, &momenta(opt), &m[i], &|| format!("{} momentum", ctx()));
            }
        }
    }
}

fn load_data() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/lr_scheduler.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("run reference/gen_lr_scheduler.py")).unwrap()
}

#[test]
fn schedules_match_pytorch() {
    let data = load_data();
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() >= 50, "only {} cases", cases.len());
    let mut stats = Stats::default();
    let mut names = std::collections::BTreeSet::new();
    for c in cases {
        let case = Case::new(c);
        names.insert(c["scheduler"]["type"].as_str().unwrap().to_string());
        let steps = c["steps"].as_u64().unwrap() as usize;
        let state_at = c["state_at"].as_u64().unwrap() as usize;
        let ((ours, opt_state), warnings) = catch_warnings(|| {
            let (mut opt, mut sched) = case.build();
            close(&mut stats, sched.get_last_lr(), &floats(&c["initial"]), &|| {
                format!("{} initial lr", case.name)
            });
            if let Some(m) = c.get("initial_momentum") {
                close(&mut stats, &momenta(&opt), &floats(m), &|| format!("{} initial momentum", case.name));
            }
            case.run(&mut opt, &mut sched, 0, state_at, &mut stats, "run");
            let ours = sched.state_dict();
            let opt_state = opt.state_dict();
            case.run(&mut opt, &mut sched, state_at, steps, &mut stats, "run");
            (ours, opt_state)
        });
        // PyTorch warns where a scheduler's first step comes before any optimizer step (a
        // ChainedScheduler first in a SequentialLR steps its children when built).
        let order = warnings.iter().filter(|w| w.contains("before `optimizer.step()`")).count();
        assert_eq!(
            order as u64,
            c["order_warnings"].as_u64().unwrap(),
            "{}: warnings {warnings:?}",
            case.name
        );
        assert_eq!(order, warnings.len(), "{}: unexpected warnings {warnings:?}", case.name);
        same_state(&SchedulerValue::Dict(ours.clone()), &to_value(&c["state"]), case.name);

        // Resume from our state_dict, and from PyTorch's, with the optimizer's state loaded.
        for (what, sd) in [
            ("resumed from our state_dict", ours),
            ("resumed from PyTorch's state_dict", to_dict(&c["state"])),
        ] {
            let ((mut opt2, mut sched2), _) = catch_warnings(|| case.build());
            opt2.load_state_dict(&opt_state).unwrap();
            sched2.load_state_dict(&sd).unwrap();
            case.run(&mut opt2, &mut sched2, state_at, steps, &mut stats, what);
        }
    }
    for t in [
        "LambdaLR",
        "MultiplicativeLR",
        "StepLR",
        "MultiStepLR",
        "ConstantLR",
        "LinearLR",
        "ExponentialLR",
        "PolynomialLR",
        "CosineAnnealingLR",
        "CosineAnnealingWarmRestarts",
        "CyclicLR",
        "OneCycleLR",
        "ReduceLROnPlateau",
        "SequentialLR",
        "ChainedScheduler",
        "SWALR",
    ] {
        assert!(names.contains(t), "no case for {t}");
    }
    eprintln!(
        "{} cases, {} values compared, {} bit-exact, worst relative error {:e}",
        cases.len(),
        stats.compared,
        stats.exact,
        stats.worst
    );
    // The same formulas in the same order give the same bits, as long as `cos` and `pow` are
    // the same: the reference was made with glibc's libm, which Rust calls on linux-gnu. There
    // every value must be bit-exact (this is what tells a recursive form from a closed one);
    // with another libm, the last bit may differ and 1e-12 is what is checked.
    if cfg!(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64")) {
        assert_eq!(
            stats.exact,
            stats.compared,
            "not bit-exact, first at {}",
            stats.first_inexact.unwrap_or_default()
        );
    }
}

/// Runs an error case's construction (and steps); returns the error.
fn error_of(e: &Value) -> pyrite_core::Error {
    let mut opt = make_optimizer(&e["optimizer"]);
    let spec = &e["scheduler"];
    let steps = e["steps"].as_u64().unwrap();
    let r = (|| -> Result<()> {
        let mut s = Sched::try_new(&mut opt, spec)?;
        for _ in 0..steps {
            opt.step()?;
            s.step(&mut opt, None)?;
        }
        Ok(())
    })();
    match r {
        Err(err) => err,
        Ok(()) => panic!("{}: should fail with '{}'", e["name"], e["error"]),
    }
}

#[test]
fn errors_match_pytorch() {
    let data = load_data();
    let errors = data["errors"].as_array().unwrap();
    assert!(errors.len() >= 20);
    // PyTorch refuses a ReduceLROnPlateau inside a SequentialLR or a ChainedScheduler when
    // the composite is built; here ReduceLROnPlateau is not an LRScheduler, so such a composite
    // does not compile (the `compile_fail` example on ReduceLROnPlateau).
    let refused_by_the_compiler = ["sequential_plateau", "chained_plateau"];
    for e in errors {
        if refused_by_the_compiler.contains(&e["name"].as_str().unwrap()) {
            continue;
        }
        let err = error_of(e);
        let want = e["error"].as_str().unwrap();
        assert!(
            err.message().contains(want),
            "{}: got '{}', PyTorch says '{want}'",
            e["name"],
            err.message()
        );
    }
}

fn sgd(lr: f64) -> SGD {
    let w = Tensor::new([1.0f64, 2.0]).unwrap().requires_grad_(true).unwrap();
    SGD::new(vec![w], SGDOptions { lr, momentum: 0.9, ..Default::default() }).unwrap()
}

#[test]
fn warns_when_the_scheduler_steps_before_the_optimizer() {
    // Scheduler first: one warning, on the first step only.
    let mut opt = sgd(0.1);
    let mut sched = ExponentialLR::new(&mut opt, 0.5, SchedulerOptions::default()).unwrap();
    let (_, seen) = catch_warnings(|| {
        sched.step(&mut opt).unwrap();
        opt.step().unwrap();
        sched.step(&mut opt).unwrap();
    });
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("`lr_scheduler.step()` before `optimizer.step()`"), "{seen:?}");
    assert_eq!(sched.get_last_lr(), [0.025]);

    // The right order: no warning, and none from construction either.
    let (_, seen) = catch_warnings(|| {
        let mut opt = sgd(0.1);
        let mut sched = StepLR::new(&mut opt, 1, StepLROptions::default()).unwrap();
        for _ in 0..3 {
            opt.step().unwrap();
            sched.step(&mut opt).unwrap();
        }
    });
    assert!(seen.is_empty(), "{seen:?}");

    // Through a SequentialLR, the first child warns.
    let (_, seen) = catch_warnings(|| {
        let mut opt = sgd(0.1);
        let a = ConstantLR::new(&mut opt, ConstantLROptions::default()).unwrap();
        let b = ExponentialLR::new(&mut opt, 0.9, SchedulerOptions::default()).unwrap();
        let mut seq = SequentialLR::new(&mut opt, (a, b), &[2], SchedulerOptions::default()).unwrap();
        seq.step(&mut opt).unwrap();
    });
    assert_eq!(seen.len(), 1, "{seen:?}");
}

#[test]
fn state_dict_round_trip_continues_identically() {
    // A OneCycleLR with momentum: save mid-run, restore into fresh objects, run both on.
    let build = |opt: &mut SGD| {
        OneCycleLR::new(
            opt,
            0.3,
            OneCycleLROptions { total_steps: Some(60), three_phase: true, ..Default::default() },
        )
        .unwrap()
    };
    let mut opt = sgd(0.1);
    let mut sched = build(&mut opt);
    for _ in 0..25 {
        opt.step().unwrap();
        sched.step(&mut opt).unwrap();
    }
    let (opt_sd, sd) = (opt.state_dict().deep_clone().unwrap(), sched.state_dict());
    assert_eq!(sd["last_epoch"], SchedulerValue::Int(25));
    let mut opt2 = sgd(0.7);
    let mut sched2 = build(&mut opt2);
    assert_ne!(sched2.get_last_lr(), sched.get_last_lr());
    opt2.load_state_dict(&opt_sd).unwrap();
    sched2.load_state_dict(&sd).unwrap();
    assert_eq!(sched2.state_dict(), sd);
    for _ in 25..60 {
        for (o, s) in [(&mut opt, &mut sched), (&mut opt2, &mut sched2)] {
            o.step().unwrap();
            s.step(o).unwrap();
        }
        assert_eq!(sched.get_last_lr(), sched2.get_last_lr());
        assert_eq!(
            opt.param_groups()[0].f64("momentum").unwrap(),
            opt2.param_groups()[0].f64("momentum").unwrap()
        );
    }
    // Past total_steps: an error, as in PyTorch.
    opt.step().unwrap();
    let err = sched.step(&mut opt).unwrap_err();
    assert!(err.message().contains("Tried to step 61 times"), "{}", err.message());
}

#[test]
fn load_state_dict_rejects_bad_values() {
    let mut opt = sgd(0.1);
    let mut plateau = ReduceLROnPlateau::new(&mut opt, ReduceLROnPlateauOptions::default()).unwrap();
    let mut sd = plateau.state_dict();
    sd.insert("mode".into(), SchedulerValue::Str("sideways".into()));
    let err = plateau.load_state_dict(&sd).unwrap_err();
    assert!(err.message().contains("mode sideways is unknown!"), "{}", err.message());

    let mut opt = sgd(0.1);
    let mut step = StepLR::new(&mut opt, 3, StepLROptions::default()).unwrap();
    let mut sd = step.state_dict();
    sd.insert("gamma".into(), SchedulerValue::Str("half".into()));
    assert!(step.load_state_dict(&sd).is_err());
    let mut sd = step.state_dict();
    sd.insert("step_size".into(), SchedulerValue::Int(0));
    assert!(step.load_state_dict(&sd).is_err());
}

#[test]
fn plateau_steps_with_the_metric_and_composites_restart_only_simple_schedulers() {
    // PyTorch: `scheduler.step(val_loss)`. The metric is an argument of its `step`; a step
    // without one does not compile (the `compile_fail` example on ReduceLROnPlateau).
    let mut opt = sgd(0.1);
    let options = ReduceLROnPlateauOptions { patience: 0, ..Default::default() };
    let mut plateau = ReduceLROnPlateau::new(&mut opt, options).unwrap();
    for val_loss in [1.0, 2.0] {
        opt.step().unwrap();
        plateau.step(&mut opt, val_loss).unwrap();
    }
    assert!((plateau.get_last_lr()[0] - 0.01).abs() < 1e-15, "{:?}", plateau.get_last_lr());
    assert_eq!(plateau.last_epoch(), 2);

    // A ChainedScheduler second in a SequentialLR cannot be restarted at the milestone
    // (PyTorch raises NotImplementedError there).
    let mut opt = sgd(0.1);
    let a = ExponentialLR::new(&mut opt, 0.9, SchedulerOptions::default()).unwrap();
    let b = ExponentialLR::new(&mut opt, 0.8, SchedulerOptions::default()).unwrap();
    let chain = ChainedScheduler::new(&mut opt, (b,)).unwrap();
    let mut seq = SequentialLR::new(&mut opt, (a, chain), &[2], SchedulerOptions::default()).unwrap();
    opt.step().unwrap();
    seq.step(&mut opt).unwrap();
    opt.step().unwrap();
    assert_eq!(seq.step(&mut opt).unwrap_err().kind(), pyrite_core::ErrorKind::NotImplemented);

    // A scheduler stepped with an optimizer that has a different number of groups.
    let mut opt = sgd(0.1);
    let mut sched = ExponentialLR::new(&mut opt, 0.9, SchedulerOptions::default()).unwrap();
    let p = Tensor::zeros([1], DType::F64).unwrap().requires_grad_(true).unwrap();
    opt.add_param_group(ParamGroup::new(vec![p])).unwrap();
    assert!(sched.step(&mut opt).is_err());
}

/// Every scheduler is built the same way, `new(&mut optimizer, ..)`, whatever the optimizer's
/// static type: a concrete one or a `Box<dyn Optimizer>` (a training loop choosing its
/// optimizer at run time), composites and ReduceLROnPlateau included.
#[test]
fn every_scheduler_is_built_from_any_optimizer_the_same_way() -> Result<()> {
    let lrs = |opt: &dyn Optimizer| opt.param_groups().iter().map(|g| g.lr).collect::<Vec<_>>();
    let w = Tensor::new([1.0f64, 2.0])?.requires_grad_(true)?;
    let mut opt: Box<dyn Optimizer> =
        Box::new(SGD::new(vec![w], SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() })?);
    let so = SchedulerOptions::default;
    let mut epoch: Vec<Box<dyn LRScheduler>> = vec![
        Box::new(LambdaLR::new(&mut opt, |e| 1.0 / (1 + e) as f64, so())?),
        Box::new(MultiplicativeLR::new(&mut opt, |_| 1.0, so())?),
        Box::new(StepLR::new(&mut opt, 2, StepLROptions::default())?),
        Box::new(MultiStepLR::new(&mut opt, &[3], MultiStepLROptions::default())?),
        Box::new(ConstantLR::new(&mut opt, ConstantLROptions::default())?),
        Box::new(LinearLR::new(&mut opt, LinearLROptions::default())?),
        Box::new(ExponentialLR::new(&mut opt, 0.9, so())?),
        Box::new(PolynomialLR::new(&mut opt, PolynomialLROptions::default())?),
        Box::new(CosineAnnealingLR::new(&mut opt, 10, CosineAnnealingLROptions::default())?),
        Box::new(CosineAnnealingWarmRestarts::new(
            &mut opt,
            10,
            CosineAnnealingWarmRestartsOptions::default(),
        )?),
        Box::new(SWALR::new(&mut opt, 0.05, SWALROptions::default())?),
    ];
    let a = ExponentialLR::new(&mut opt, 0.5, so())?;
    let b = ExponentialLR::new(&mut opt, 0.5, so())?;
    epoch.push(Box::new(SequentialLR::new(&mut opt, (a,), &[], so())?));
    let c = ExponentialLR::new(&mut opt, 0.5, so())?;
    epoch.push(Box::new(ChainedScheduler::new(&mut opt, (b, c))?));
    opt.step()?;
    for s in epoch.iter_mut() {
        s.step(&mut opt)?;
    }
    let mut plateau = ReduceLROnPlateau::new(&mut opt, ReduceLROnPlateauOptions::default())?;
    plateau.step(&mut opt, 1.0)?;
    assert_eq!(plateau.get_last_lr(), lrs(&*opt));

    // The cyclic ones set the momentum as well.
    let mut cyclic =
        CyclicLR::new(&mut opt, 0.01, 0.1, CyclicLROptions { step_size_up: 2, ..Default::default() })?;
    opt.step()?;
    cyclic.step(&mut opt)?;
    assert!((cyclic.get_last_lr()[0] - 0.055).abs() < 1e-15, "{:?}", cyclic.get_last_lr());
    let options = OneCycleLROptions { total_steps: Some(10), ..Default::default() };
    let one_cycle = OneCycleLR::new(&mut opt, 0.5, options)?;
    assert!((one_cycle.get_last_lr()[0] - 0.02).abs() < 1e-15, "{:?}", one_cycle.get_last_lr());
    assert!((opt.param_groups()[0].f64("momentum")? - 0.95).abs() < 1e-15);
    Ok(())
}

/// PyTorch's `SequentialLR(optimizer, schedulers=[warmup, cosine], milestones=[5])` and
/// `ChainedScheduler([constant, exponential])`: the schedulers are given as they are, as a
/// tuple, without boxing them by hand; a `Vec<Box<dyn LRScheduler>>` still does when their
/// number is known only at run time.
#[test]
fn composites_take_their_schedulers_as_a_tuple() -> Result<()> {
    let run = |sched: &mut dyn LRScheduler, opt: &mut SGD, n: usize| -> Result<Vec<f64>> {
        let mut seen = vec![sched.get_last_lr()[0]];
        for _ in 0..n {
            opt.step()?;
            sched.step(opt)?;
            seen.push(sched.get_last_lr()[0]);
        }
        Ok(seen)
    };
    let mut opt = sgd(1.0);
    let warmup =
        LinearLR::new(&mut opt, LinearLROptions { start_factor: 0.5, total_iters: 2, ..Default::default() })?;
    let decay = StepLR::new(&mut opt, 1, StepLROptions { gamma: 0.5, ..Default::default() })?;
    let mut seq = SequentialLR::new(&mut opt, (warmup, decay), &[2], SchedulerOptions::default())?;
    // LinearLR for two epochs, then StepLR restarted from the initial lr.
    assert_eq!(run(&mut seq, &mut opt, 4)?, [0.5, 0.75, 1.0, 0.5, 0.25]);

    let mut opt = sgd(1.0);
    let constant =
        ConstantLR::new(&mut opt, ConstantLROptions { factor: 0.5, total_iters: 2, ..Default::default() })?;
    let exponential = ExponentialLR::new(&mut opt, 0.5, SchedulerOptions::default())?;
    let mut chain = ChainedScheduler::new(&mut opt, (constant, exponential))?;
    assert_eq!(run(&mut chain, &mut opt, 3)?, [0.5, 0.25, 0.25, 0.125]);

    let mut opt = sgd(1.0);
    let n = 3;
    let children: Vec<Box<dyn LRScheduler>> = (0..n)
        .map(|_| {
            Ok(Box::new(ExponentialLR::new(&mut opt, 0.5, SchedulerOptions::default())?)
                as Box<dyn LRScheduler>)
        })
        .collect::<Result<_>>()?;
    let mut chain = ChainedScheduler::new(&mut opt, children)?;
    assert_eq!(run(&mut chain, &mut opt, 1)?, [1.0, 0.125]);
    Ok(())
}
