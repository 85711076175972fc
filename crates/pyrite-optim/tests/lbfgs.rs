//! `torch.optim.LBFGS` against PyTorch 2.15 (reference/gen_lbfgs.py writes
//! reference/data/lbfgs.json): per step the parameters, the returned loss, the closure calls,
//! `func_evals`, `n_iter` and `t` (value and whether PyTorch holds it as a float or a 0-d
//! tensor); a resume from a state_dict; and the error cases.

use pyrite::autograd;
use pyrite::optim::{LBFGSOptions, Optimizer, ParamGroup, StateValue, LBFGS};
use pyrite::{DType, Result, Tensor};
use serde_json::Value;
use std::sync::OnceLock;

fn reference() -> &'static Value {
    static DATA: OnceLock<Value> = OnceLock::new();
    DATA.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/lbfgs.json");
        let text =
            std::fs::read_to_string(path).expect("reference/data/lbfgs.json (run reference/gen_lbfgs.py)");
        serde_json::from_str(&text).expect("lbfgs.json parses")
    })
}

fn case(name: &str) -> &'static Value {
    reference()["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name} in lbfgs.json"))
}

fn dtype(c: &Value) -> DType {
    match c["dtype"].as_str().unwrap() {
        "F64" => DType::F64,
        "F32" => DType::F32,
        other => panic!("dtype {other}"),
    }
}

/// A tensor stored as the bit patterns of f64 values, cast to `dt`.
fn from_bits(spec: &Value, dt: DType) -> Tensor {
    let vals: Vec<f64> =
        spec["bits"].as_array().unwrap().iter().map(|b| f64::from_bits(b.as_u64().unwrap())).collect();
    let shape: Vec<usize> =
        spec["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    Tensor::from_vec(vals, shape).unwrap().to_dtype(dt).unwrap()
}

fn options(o: &Value) -> LBFGSOptions {
    LBFGSOptions {
        lr: o["lr"].as_f64().unwrap(),
        max_iter: o["max_iter"].as_u64().unwrap() as usize,
        max_eval: o["max_eval"].as_u64().map(|v| v as usize),
        tolerance_grad: o["tolerance_grad"].as_f64().unwrap(),
        tolerance_change: o["tolerance_change"].as_f64().unwrap(),
        history_size: o["history_size"].as_u64().unwrap() as usize,
        line_search_fn: o["line_search_fn"].as_str().map(String::from),
        maximize: o["maximize"].as_bool().unwrap(),
    }
}

/// The problems of gen_lbfgs.py, with the same ops.
fn objective(problem: &str, p: &[Tensor], data: &[Tensor]) -> Result<Tensor> {
    let mlp_out = |x: &Tensor| -> Result<Tensor> {
        let h = x.matmul(&p[0].t()?)?.add(&p[1])?.tanh()?;
        h.matmul(&p[2].t()?)?.add(&p[3])
    };
    match problem {
        "rosenbrock" => {
            let x = &p[0];
            let n = x.numel();
            let (head, tail) = (x.narrow(0, 0, n - 1)?, x.narrow(0, 1, n - 1)?);
            let a = tail.sub(&head.pow_scalar(2.0)?)?.pow_scalar(2.0)?.mul_scalar(100.0)?;
            a.add(&head.rsub_scalar(1.0)?.pow_scalar(2.0)?)?.sum()
        }
        "mlp" => mlp_out(&data[0])?.sub(&data[1])?.pow_scalar(2.0)?.mean(),
        "logistic" => data[1].neg()?.mul(&mlp_out(&data[0])?)?.softplus(1.0, 20.0)?.mean(),
        other => panic!("problem {other}"),
    }
}

struct Run {
    params: Vec<Tensor>,
    data: Vec<Tensor>,
    opt: LBFGS,
}

fn setup(c: &Value) -> Run {
    let dt = dtype(c);
    let params: Vec<Tensor> = c["params0"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| from_bits(s, dt).requires_grad_(true).unwrap())
        .collect();
    let data = c["data"].as_array().unwrap().iter().map(|s| from_bits(s, dt)).collect();
    let opt = LBFGS::new(params.clone(), options(&c["options"])).unwrap();
    Run { params, data, opt }
}

/// What one `step_with_closure` gave.
struct Step {
    loss: f64,
    params: Vec<Vec<f64>>,
    evals: usize,
    func_evals: i64,
    n_iter: i64,
    t: Option<(f64, bool)>,
}

fn step(run: &mut Run, c: &Value) -> Step {
    let problem = c["problem"].as_str().unwrap();
    let negate = c["negate"].as_bool().unwrap();
    let mut calls = 0;
    let (params, data) = (run.params.clone(), run.data.clone());
    let loss = run
        .opt
        .step_with_closure(&mut |optimizer| {
            calls += 1;
            assert!(autograd::is_grad_enabled(), "the closure runs with grad enabled");
            optimizer.zero_grad()?;
            let loss = objective(problem, &params, &data)?;
            let loss = if negate { loss.neg()? } else { loss };
            loss.backward()?;
            Ok(loss)
        })
        .unwrap();
    assert!(autograd::is_grad_enabled(), "grad mode is restored after the step");
    let st = run.opt.state(&run.params[0]).expect("LBFGS keeps its state on the first parameter");
    let int = |k: &str| match st.get(k) {
        Some(StateValue::Int(v)) => *v,
        other => panic!("state {k}: {other:?}"),
    };
    let t = match st.get("t") {
        None | Some(StateValue::None) => None,
        Some(StateValue::Float(v)) => Some((*v, false)),
        Some(StateValue::Tensor(t)) => Some((t.item::<f64>().unwrap(), true)),
        other => panic!("state t: {other:?}"),
    };
    Step {
        loss: loss.item::<f64>().unwrap(),
        params: run.params.iter().map(|p| p.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()).collect(),
        evals: calls,
        func_evals: int("func_evals"),
        n_iter: int("n_iter"),
        t,
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

/// Checks one step against the reference (`i` is the step's index there).
fn check_step(name: &str, i: usize, got: &Step, want: &Value, tol: f64) {
    let ctx = format!("{name} step {i}");
    assert_eq!(got.evals as u64, want["evals"].as_u64().unwrap(), "{ctx}: closure calls");
    assert_eq!(got.func_evals, want["func_evals"].as_i64().unwrap(), "{ctx}: func_evals");
    assert_eq!(got.n_iter, want["n_iter"].as_i64().unwrap(), "{ctx}: n_iter");
    let wl = want["loss"].as_f64().unwrap();
    assert!(close(got.loss, wl, tol), "{ctx}: loss {} vs PyTorch {wl}", got.loss);
    let mut worst = (0.0f64, String::new());
    for (j, (gp, wp)) in got.params.iter().zip(want["params"].as_array().unwrap()).enumerate() {
        let wp: Vec<f64> = wp.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(gp.len(), wp.len());
        for (k, (a, b)) in gp.iter().zip(&wp).enumerate() {
            let e = (a - b).abs() / (1.0 + b.abs());
            if e >= worst.0 {
                worst = (e, format!("param {j}[{k}] = {a} vs PyTorch {b}"));
            }
        }
    }
    if std::env::var_os("LBFGS_REPORT").is_some() {
        println!("{ctx}: largest parameter error {:.3e} ({})", worst.0, worst.1);
    }
    assert!(worst.0 <= tol, "{ctx}: {} (error {:.3e}, tol {tol})", worst.1, worst.0);
    match (got.t, want["t_kind"].as_str().unwrap()) {
        (None, "none") => {}
        (Some((t, is_tensor)), kind) => {
            assert_eq!(
                if is_tensor { "tensor" } else { "float" },
                kind,
                "{ctx}: state t is a float or a 0-d tensor as in PyTorch"
            );
            let wt = want["t"].as_f64().unwrap();
            assert!(close(t, wt, tol), "{ctx}: t = {t} vs PyTorch {wt}");
        }
        (got, kind) => panic!("{ctx}: state t {got:?}, PyTorch {kind}"),
    }
}

fn check_case(name: &str, tol: f64) {
    check_case_strict_prefix(name, tol, 0);
}

/// Like `check_case`, with the first `strict` steps to 1e-12 (PyTorch's values exactly, but
/// for the last bit of the JSON decimals).
fn check_case_strict_prefix(name: &str, tol: f64, strict: usize) {
    let c = case(name);
    let mut run = setup(c);
    for (i, want) in c["steps"].as_array().unwrap().iter().enumerate() {
        let got = step(&mut run, c);
        check_step(name, i, &got, want, if i < strict { 1e-12 } else { tol });
    }
}

#[test]
fn rosenbrock_2d_fixed_step() {
    check_case("rosen2d_none", 1e-9);
}

#[test]
fn rosenbrock_2d_strong_wolfe() {
    check_case("rosen2d_wolfe", 1e-9);
    check_case("rosen2d_wolfe_default", 1e-9);
}

#[test]
fn rosenbrock_10d() {
    check_case("rosen10d_none", 1e-9);
    check_case("rosen10d_wolfe", 1e-9);
    check_case("rosen10d_wolfe_1iter", 1e-9);
    check_case("rosen10d_wolfe_maxeval", 1e-9);
}

/// Settings that reach the line search's rarer branches: many extrapolations and cubics
/// without a minimizer (tiny lr), steps near the bracket's ends and swapped brackets (lr 5),
/// an exhausted evaluation budget.
#[test]
fn strong_wolfe_branches() {
    check_case("rosen2d_wolfe_small_lr", 1e-9);
    check_case("rosen2d_wolfe_lr5", 1e-9);
    check_case("rosen10d_wolfe_lr5", 1e-9);
    check_case("rosen2d_wolfe_max_ls", 1e-9);
}

#[test]
fn rosenbrock_maximize() {
    check_case("rosen10d_wolfe_maximize", 1e-9);
}

#[test]
fn parameter_without_gradient() {
    check_case("rosen2d_unused_param_wolfe", 1e-9);
}

/// In f32 the first steps are PyTorch's to the bit: the step lengths and tests round where
/// PyTorch's mix of Python floats and 0-d f32 tensors rounds (doing that arithmetic in f64
/// moves the iterates by 1e-8 from the fifth step of the line-search case on).
#[test]
fn rosenbrock_f32() {
    check_case_strict_prefix("rosen2d_f32_wolfe", 1e-4, 6);
    check_case_strict_prefix("rosen2d_f32_none", 1e-4, 12);
}

#[test]
fn mlp_f64() {
    check_case("mlp_f64_none", 1e-6);
    check_case("mlp_f64_wolfe", 1e-6);
    check_case("logistic_f64_wolfe", 1e-6);
}

#[test]
fn mlp_f32() {
    check_case("mlp_f32_none", 1e-4);
    check_case("mlp_f32_wolfe", 1e-4);
    check_case("mlp_f32_wolfe_5iter", 1e-4);
}

/// A state_dict saved part way and loaded into a new optimizer over new parameters continues
/// exactly as the uninterrupted run (and as PyTorch's).
fn check_resume(name: &str, tol: f64) {
    let c = case(name);
    let at = c["resume_at"].as_u64().unwrap() as usize;
    let steps = c["steps"].as_array().unwrap();
    let mut whole = setup(c);
    let mut first = setup(c);
    let mut uninterrupted = Vec::new();
    for _ in 0..steps.len() {
        uninterrupted.push(step(&mut whole, c));
    }
    for _ in 0..at {
        step(&mut first, c);
    }
    let sd = first.opt.state_dict().deep_clone().unwrap();
    assert_eq!(
        sd.state.keys().copied().collect::<Vec<_>>(),
        vec![0],
        "{name}: the state lives on parameter 0"
    );
    let saved = &sd.state[&0];
    let want_state = c["resume_state"].as_object().unwrap();
    let mut keys: Vec<&String> = saved.keys().collect();
    keys.sort();
    let mut want_keys: Vec<&String> = want_state.keys().collect();
    want_keys.sort();
    assert_eq!(keys, want_keys, "{name}: state keys");
    for (k, w) in want_state {
        match (&saved[k], w["kind"].as_str().unwrap()) {
            (StateValue::Int(v), "int") => assert_eq!(*v, w["value"].as_i64().unwrap(), "{name}: state {k}"),
            (StateValue::Float(v), "float") => {
                assert!(close(*v, w["value"].as_f64().unwrap(), tol), "{name}: state {k}")
            }
            (StateValue::Tensor(t), "tensor") => {
                assert_eq!(t.numel() as u64, w["numel"].as_u64().unwrap(), "{name}: state {k}")
            }
            (StateValue::TensorList(l), "list") => {
                assert_eq!(l.len() as u64, w["len"].as_u64().unwrap(), "{name}: state {k}")
            }
            (v, kind) => panic!("{name}: state {k} is {v:?}, PyTorch has a {kind}"),
        }
    }
    let params: Vec<Tensor> =
        first.params.iter().map(|p| p.detach().deep_clone().unwrap().requires_grad_(true).unwrap()).collect();
    let mut opt = LBFGS::new(params.clone(), options(&c["options"])).unwrap();
    opt.load_state_dict(&sd).unwrap();
    let mut resumed = Run { params, data: first.data.clone(), opt };
    drop(first);
    for i in at..steps.len() {
        let got = step(&mut resumed, c);
        check_step(&format!("{name} (resumed)"), i, &got, &steps[i], tol);
        let u = &uninterrupted[i];
        assert_eq!(got.params, u.params, "{name} step {i}: the resumed run is bitwise the uninterrupted one");
        assert_eq!((got.evals, got.func_evals, got.n_iter), (u.evals, u.func_evals, u.n_iter));
    }
}

#[test]
fn resume_from_state_dict() {
    check_resume("rosen10d_wolfe", 1e-9);
    check_resume("mlp_f64_wolfe", 1e-6);
}

fn quadratic(x: &Tensor) -> impl FnMut(&dyn Optimizer) -> Result<Tensor> + '_ {
    move |optimizer| {
        optimizer.zero_grad()?;
        let loss = x.square()?.sum()?;
        loss.backward()?;
        Ok(loss)
    }
}

#[test]
fn step_without_closure_is_an_error() {
    let x = Tensor::new([1.0f64, 2.0]).unwrap().requires_grad_(true).unwrap();
    let mut opt = LBFGS::new(vec![x.clone()], LBFGSOptions::default()).unwrap();
    let err = opt.step().unwrap_err().to_string();
    assert!(err.contains("requires a closure"), "{err}");
    assert_eq!(x.to_vec::<f64>().unwrap(), [1.0, 2.0]);
}

#[test]
fn parameter_groups_are_rejected() {
    let a = Tensor::new([1.0f64]).unwrap().requires_grad_(true).unwrap();
    let b = Tensor::new([2.0f64]).unwrap().requires_grad_(true).unwrap();
    let groups = vec![ParamGroup::new(vec![a.clone()]), ParamGroup::new(vec![b.clone()])];
    let err = LBFGS::with_groups(groups, LBFGSOptions::default()).err().expect("two groups fail").to_string();
    assert!(err.contains("LBFGS doesn't support per-parameter options (parameter groups)"), "{err}");

    // A group added afterwards is accepted, as in PyTorch, and the step then refuses to run.
    let mut opt = LBFGS::new(vec![a.clone()], LBFGSOptions::default()).unwrap();
    opt.add_param_group(ParamGroup::new(vec![b.clone()])).unwrap();
    let err = opt.step_with_closure(&mut quadratic(&a)).unwrap_err().to_string();
    assert!(err.contains("Expected exactly one param_group, but got 2"), "{err}");
}

#[test]
fn unknown_line_search_is_an_error_at_step() {
    let x = Tensor::new([-1.5f64, 2.0]).unwrap().requires_grad_(true).unwrap();
    let opts = LBFGSOptions { line_search_fn: Some("backtracking".into()), ..Default::default() };
    let mut opt = LBFGS::new(vec![x.clone()], opts).unwrap();
    let err = opt.step_with_closure(&mut quadratic(&x)).unwrap_err().to_string();
    assert!(err.contains("only 'strong_wolfe' is supported"), "{err}");
    // As in PyTorch: the parameters are untouched, the counters were already advanced.
    assert_eq!(x.to_vec::<f64>().unwrap(), [-1.5, 2.0]);
    let st = opt.state(&x).unwrap();
    assert!(matches!(st.get("func_evals"), Some(StateValue::Int(1))));
    assert!(matches!(st.get("n_iter"), Some(StateValue::Int(1))));
    assert_eq!(st.len(), 2);
    assert!(autograd::is_grad_enabled());
}

#[test]
fn invalid_options_and_losses() {
    let x = Tensor::new([1.0f64, 2.0]).unwrap().requires_grad_(true).unwrap();
    let err = LBFGS::new(vec![x.clone()], LBFGSOptions { lr: -1.0, ..Default::default() })
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("Invalid learning rate: -1"), "{err}");

    let mut opt = LBFGS::new(vec![x.clone()], LBFGSOptions::default()).unwrap();
    let err = opt
        .step_with_closure(&mut |optimizer| {
            optimizer.zero_grad()?;
            let l = x.square()?;
            l.sum()?.backward()?;
            Ok(l)
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("one-element"), "{err}");

    let err = opt.step_with_closure(&mut |_| pyrite::bail!(Value, "closure failed")).unwrap_err().to_string();
    assert!(err.contains("closure failed"), "{err}");

    // history_size 0 fails where PyTorch's `old_dirs.pop(0)` raises IndexError, without a panic.
    let mut opt =
        LBFGS::new(vec![x.clone()], LBFGSOptions { history_size: 0, ..Default::default() }).unwrap();
    let err = opt
        .step_with_closure(&mut |optimizer| {
            optimizer.zero_grad()?;
            let l = x.square()?.sum()?.add(&x.prod()?)?;
            l.backward()?;
            Ok(l)
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("pop from empty list"), "{err}");
    let st = opt.state(&x).unwrap();
    assert!(
        matches!(st.get("func_evals"), Some(StateValue::Int(2)))
            && matches!(st.get("n_iter"), Some(StateValue::Int(2)))
    );
}

#[test]
fn defaults_and_optimum_on_entry() {
    let x = Tensor::zeros([2], DType::F64).unwrap().requires_grad_(true).unwrap();
    let mut opt = LBFGS::new(vec![x.clone()], LBFGSOptions::default()).unwrap();
    let g = &opt.param_groups()[0];
    assert_eq!(g.lr, 1.0);
    assert_eq!(g.int("max_iter").unwrap(), 20);
    assert_eq!(g.int("max_eval").unwrap(), 25);
    assert_eq!(g.f64("tolerance_grad").unwrap(), 1e-7);
    assert_eq!(g.f64("tolerance_change").unwrap(), 1e-9);
    assert_eq!(g.int("history_size").unwrap(), 100);
    assert_eq!(g.opt_str("line_search_fn").unwrap(), None);
    assert!(!g.bool("maximize").unwrap());

    // At a minimum already: one closure call, nothing moves, and the state holds only the
    // counters ({'func_evals': 1, 'n_iter': 0} in PyTorch).
    let mut calls = 0;
    let mut closure = quadratic(&x);
    let loss = opt
        .step_with_closure(&mut |optimizer| {
            calls += 1;
            closure(optimizer)
        })
        .unwrap();
    assert_eq!((loss.item::<f64>().unwrap(), calls), (0.0, 1));
    let st = opt.state(&x).unwrap();
    assert_eq!(st.len(), 2);
    assert!(matches!(st.get("func_evals"), Some(StateValue::Int(1))));
    assert!(matches!(st.get("n_iter"), Some(StateValue::Int(0))));
    assert_eq!(x.to_vec::<f64>().unwrap(), [0.0, 0.0]);
    assert!(x.is_leaf() && x.requires_grad());
}

/// PyTorch's LBFGS recipe, line for line:
///
/// ```python
/// optimizer = optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
/// for input, target in dataset:
///     def closure():
///         optimizer.zero_grad()
///         output = model(input)
///         loss = loss_fn(output, target)
///         loss.backward()
///         return loss
///     optimizer.step(closure)
/// ```
///
/// The closure zeroes the gradients through the optimizer it is given (without that they
/// would pile up over the closure's calls), and the model fits data it can fit exactly.
#[test]
fn closure_zeroes_the_gradients_as_in_pytorch() {
    use pyrite::nn::functional::{mse_loss, Reduction};
    use pyrite::nn::{Linear, Module};
    let model = Linear::with_options(3, 1, true, DType::F64).unwrap();
    let input = Tensor::new([
        [1.0f64, 2.0, 0.5],
        [0.0, 1.0, -1.0],
        [2.0, -1.0, 1.0],
        [1.0, 1.0, 1.0],
        [-1.0, 0.5, 2.0],
    ])
    .unwrap();
    // target = input @ [0.5, -1, 2] + 0.25: a linear model fits it exactly.
    let target = Tensor::new([[-0.25f64], [-2.75], [4.25], [1.75], [3.25]]).unwrap();
    let loss_fn = |output: &Tensor, target: &Tensor| mse_loss(output, target, Reduction::Mean);
    let opts = LBFGSOptions { line_search_fn: Some("strong_wolfe".into()), ..Default::default() };
    let mut optimizer = LBFGS::new(model.parameters(), opts).unwrap();
    let mut losses = vec![];
    for _ in 0..3 {
        let mut closure = |optimizer: &dyn Optimizer| {
            optimizer.zero_grad()?;
            let output = model.forward(&input)?;
            let loss = loss_fn(&output, &target)?;
            loss.backward()?;
            Ok(loss)
        };
        losses.push(optimizer.step_with_closure(&mut closure).unwrap().item::<f64>().unwrap());
    }
    assert!(losses[0] > 1.0, "{losses:?}");
    assert!(losses[1] < 1e-8 && losses[2] <= losses[1], "{losses:?}");
    let w = model.weight.to_vec2::<f64>().unwrap();
    let b = model.bias.as_ref().unwrap().to_vec::<f64>().unwrap();
    for (got, want) in w[0].iter().chain(&b).zip([0.5, -1.0, 2.0, 0.25]) {
        assert!((got - want).abs() < 1e-4, "{w:?} {b:?}");
    }
}
