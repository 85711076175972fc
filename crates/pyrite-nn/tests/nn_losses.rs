//! Every loss layer against PyTorch: `reference/data/nn_losses.safetensors`, recorded by
//! `reference/gen_nn_losses.py`. Each case builds the loss module from its class name and
//! keyword arguments, calls it on the recorded inputs, compares the loss, backpropagates the
//! recorded upstream gradient and compares each input's gradient. Error cases must fail, with
//! PyTorch's message. Then an f64 finite-difference check of each differentiable loss function.

mod common;

use common::{data_path, load_tensors};
use pyrite::autograd::{gradcheck, GradcheckOptions};
use pyrite::nn::functional::{self as F, CrossEntropyOptions, KlReduction, Reduction};
use pyrite::nn::{self, Buffer, Module, Value};
use pyrite::{DType, Generator, Result, Tensor};
use serde_json::Value as Json;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

/// Loss classes of the reference data that this test does not replay. Every class not listed
/// here must be mapped in [`build`]; a case of an unknown class fails the test.
const SKIPPED_CLASSES: &[&str] = &[];

/// A case's keyword arguments; every key must be read, so that an option the test forgets to
/// pass makes the case fail instead of silently running with the default.
struct Kwargs<'a> {
    map: serde_json::Map<String, Json>,
    tensors: &'a HashMap<String, Tensor>,
    used: RefCell<BTreeSet<String>>,
}

impl<'a> Kwargs<'a> {
    fn get(&self, k: &str) -> Option<&Json> {
        let v = self.map.get(k);
        if v.is_some() {
            self.used.borrow_mut().insert(k.to_string());
        }
        v
    }
    fn f64(&self, k: &str, default: f64) -> f64 {
        self.get(k).map(|v| v.as_f64().unwrap_or_else(|| panic!("{k}: {v}"))).unwrap_or(default)
    }
    fn i64(&self, k: &str, default: i64) -> i64 {
        self.get(k).map(|v| v.as_i64().unwrap_or_else(|| panic!("{k}: {v}"))).unwrap_or(default)
    }
    fn bool(&self, k: &str, default: bool) -> bool {
        self.get(k).map(|v| v.as_bool().unwrap_or_else(|| panic!("{k}: {v}"))).unwrap_or(default)
    }
    fn tensor(&self, k: &str) -> Option<Buffer> {
        let v = self.get(k)?;
        if v.is_null() {
            return None;
        }
        let key = v["tensor"].as_str().unwrap_or_else(|| panic!("{k}: {v}"));
        Some(Buffer::new(self.tensors[key].clone()))
    }
    fn reduction_str(&self) -> String {
        self.get("reduction").map(|v| v.as_str().unwrap().to_string()).unwrap_or_else(|| "mean".into())
    }
    fn reduction(&self) -> Reduction {
        match self.reduction_str().as_str() {
            "none" => Reduction::None,
            "mean" => Reduction::Mean,
            "sum" => Reduction::Sum,
            r => panic!("reduction {r}"),
        }
    }
    fn kl_reduction(&self) -> KlReduction {
        match self.reduction_str().as_str() {
            "none" => KlReduction::None,
            "mean" => KlReduction::Mean,
            "sum" => KlReduction::Sum,
            "batchmean" => KlReduction::BatchMean,
            r => panic!("reduction {r}"),
        }
    }
    /// The keys no builder read.
    fn unused(&self) -> Vec<String> {
        let used = self.used.borrow();
        self.map.keys().filter(|k| !used.contains(*k)).cloned().collect()
    }
}

/// The Pyrite layer for PyTorch's `nn.<layer>(**kwargs)`; `None` for a class not mapped.
fn build(layer: &str, kw: &Kwargs) -> Option<Box<dyn Module>> {
    Some(match layer {
        "CrossEntropyLoss" => Box::new(
            nn::CrossEntropyLoss::new()
                .weight(kw.tensor("weight"))
                .ignore_index(kw.i64("ignore_index", -100))
                .label_smoothing(kw.f64("label_smoothing", 0.0))
                .reduction(kw.reduction()),
        ),
        "NLLLoss" => Box::new(
            nn::NLLLoss::new()
                .weight(kw.tensor("weight"))
                .ignore_index(kw.i64("ignore_index", -100))
                .reduction(kw.reduction()),
        ),
        "MSELoss" => Box::new(nn::MSELoss::new().reduction(kw.reduction())),
        "L1Loss" => Box::new(nn::L1Loss::new().reduction(kw.reduction())),
        "SmoothL1Loss" => {
            Box::new(nn::SmoothL1Loss::new().beta(kw.f64("beta", 1.0)).reduction(kw.reduction()))
        }
        "HuberLoss" => Box::new(nn::HuberLoss::new().delta(kw.f64("delta", 1.0)).reduction(kw.reduction())),
        "BCELoss" => Box::new(nn::BCELoss::new().weight(kw.tensor("weight")).reduction(kw.reduction())),
        "BCEWithLogitsLoss" => Box::new(
            nn::BCEWithLogitsLoss::new()
                .weight(kw.tensor("weight"))
                .pos_weight(kw.tensor("pos_weight"))
                .reduction(kw.reduction()),
        ),
        "KLDivLoss" => Box::new(
            nn::KLDivLoss::new().log_target(kw.bool("log_target", false)).reduction(kw.kl_reduction()),
        ),
        "PoissonNLLLoss" => Box::new(
            nn::PoissonNLLLoss::new()
                .log_input(kw.bool("log_input", true))
                .full(kw.bool("full", false))
                .eps(kw.f64("eps", 1e-8))
                .reduction(kw.reduction()),
        ),
        "GaussianNLLLoss" => Box::new(
            nn::GaussianNLLLoss::new()
                .full(kw.bool("full", false))
                .eps(kw.f64("eps", 1e-6))
                .reduction(kw.reduction()),
        ),
        "CosineEmbeddingLoss" => {
            Box::new(nn::CosineEmbeddingLoss::new().margin(kw.f64("margin", 0.0)).reduction(kw.reduction()))
        }
        "MarginRankingLoss" => {
            Box::new(nn::MarginRankingLoss::new().margin(kw.f64("margin", 0.0)).reduction(kw.reduction()))
        }
        "TripletMarginLoss" => Box::new(
            nn::TripletMarginLoss::new()
                .margin(kw.f64("margin", 1.0))
                .p(kw.f64("p", 2.0))
                .eps(kw.f64("eps", 1e-6))
                .swap(kw.bool("swap", false))
                .reduction(kw.reduction()),
        ),
        "HingeEmbeddingLoss" => {
            Box::new(nn::HingeEmbeddingLoss::new().margin(kw.f64("margin", 1.0)).reduction(kw.reduction()))
        }
        "SoftMarginLoss" => Box::new(nn::SoftMarginLoss::new().reduction(kw.reduction())),
        "MultiLabelSoftMarginLoss" => Box::new(
            nn::MultiLabelSoftMarginLoss::new().weight(kw.tensor("weight")).reduction(kw.reduction()),
        ),
        "MultiMarginLoss" => Box::new(
            nn::MultiMarginLoss::new()
                .p(kw.i64("p", 1) as u32)
                .margin(kw.f64("margin", 1.0))
                .weight(kw.tensor("weight"))
                .reduction(kw.reduction()),
        ),
        "MultiLabelMarginLoss" => Box::new(nn::MultiLabelMarginLoss::new().reduction(kw.reduction())),
        "CTCLoss" => Box::new(
            nn::CTCLoss::new()
                .blank(kw.i64("blank", 0))
                .zero_infinity(kw.bool("zero_infinity", false))
                .reduction(kw.reduction()),
        ),
        _ => return None,
    })
}

/// Calls the layer on the inputs as PyTorch's `m(*inputs)`.
fn call(m: &dyn Module, xs: &[Tensor]) -> Result<Tensor> {
    m.call_value(Value::Tuple(xs.iter().cloned().map(Value::Tensor).collect()))?.into_tensor()
}

/// `|got - want| <= atol + rtol |want|` elementwise (NaN equals NaN, infinities must match).
fn close(got: &Tensor, want: &Tensor, atol: f64, rtol: f64, what: &str) -> std::result::Result<(), String> {
    if got.dims() != want.dims() {
        return Err(format!("{what}: shape {:?}, want {:?}", got.dims(), want.dims()));
    }
    if got.dtype() != want.dtype() {
        return Err(format!("{what}: dtype {:?}, want {:?}", got.dtype(), want.dtype()));
    }
    let g = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let w = want.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            return Err(format!("{what}: element {i}: got {a}, want {b} (atol {atol}, rtol {rtol})\n  got  {g:?}\n  want {w:?}"));
        }
    }
    Ok(())
}

/// PyTorch's error message as Pyrite words it: shapes as `[2, 3]` rather than
/// `torch.Size([2, 3])`, without the `(while checking arguments for ...)` trailer.
fn expected_message(msg: &str) -> String {
    let mut s = msg.to_string();
    while let Some(i) = s.find("torch.Size(") {
        let rest = &s[i + "torch.Size(".len()..];
        let close = rest.find(')').expect("torch.Size(...)");
        s = format!("{}{}{}", &s[..i], &rest[..close], &rest[close + 1..]);
    }
    if let Some(i) = s.find(" (while checking arguments for") {
        s.truncate(i);
    }
    s
}

/// Replays one case; `Err` describes the mismatch.
fn run_case(c: &Json, t: &HashMap<String, Tensor>) -> std::result::Result<(), String> {
    let name = c["name"].as_str().unwrap();
    let layer = c["layer"].as_str().unwrap();
    let kw = Kwargs {
        map: c["kwargs"].as_object().cloned().unwrap_or_default(),
        tensors: t,
        used: RefCell::new(BTreeSet::new()),
    };
    let Some(m) = build(layer, &kw) else {
        return Err(format!("loss class {layer} is not mapped"));
    };
    let unused = kw.unused();
    if !unused.is_empty() {
        return Err(format!("kwargs not passed to {layer}: {unused:?}"));
    }
    let n = c["inputs"].as_u64().unwrap() as usize;
    let rg: Vec<bool> =
        c["input_requires_grad"].as_array().unwrap().iter().map(|b| b.as_bool().unwrap()).collect();
    let xs: Vec<Tensor> = (0..n)
        .map(|i| {
            let x = t[&format!("{name}/in/{i}")].clone();
            if rg[i] {
                x.requires_grad_(true).unwrap()
            } else {
                x
            }
        })
        .collect();
    let res = call(m.as_ref(), &xs);
    if let Some(msg) = c.get("error").and_then(|e| e.as_str()) {
        return match res {
            Ok(out) => Err(format!("expected an error ({msg}), got {out}")),
            Err(e) => {
                let want = expected_message(msg);
                let got = e.to_string();
                if got.contains(&want) {
                    Ok(())
                } else {
                    Err(format!("error message {got:?} does not contain PyTorch's {want:?}"))
                }
            }
        };
    }
    let out = res.map_err(|e| format!("call failed: {e}"))?;
    let (atol, rtol) = (c["atol"].as_f64().unwrap(), c["rtol"].as_f64().unwrap());
    close(&out, &t[&format!("{name}/out/0")], atol, rtol, "output")?;
    if !rg.iter().any(|&r| r) {
        return Ok(());
    }
    out.backward_with(&t[&format!("{name}/gout/0")]).map_err(|e| format!("backward failed: {e}"))?;
    for (i, x) in xs.iter().enumerate() {
        if !rg[i] {
            continue;
        }
        let g = x.grad().unwrap_or_else(|| x.zeros_like().unwrap());
        close(&g, &t[&format!("{name}/gin/{i}")], atol, rtol, &format!("grad of input {i}"))?;
    }
    Ok(())
}

#[test]
fn every_loss_case_matches_pytorch() {
    let (t, meta) = load_tensors("nn_losses.safetensors");
    let cases: Vec<Json> = serde_json::from_str(&meta["cases"]).unwrap();
    assert!(!cases.is_empty(), "no cases in {}", data_path("nn_losses.safetensors"));
    let mut failures = Vec::new();
    let (mut passed, mut skipped, mut errors) = (0, 0, 0);
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        if SKIPPED_CLASSES.contains(&c["layer"].as_str().unwrap()) {
            skipped += 1;
            continue;
        }
        match run_case(c, &t) {
            Ok(()) => {
                passed += 1;
                if c.get("error").is_some() {
                    errors += 1;
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    println!("{passed} of {} cases pass ({errors} of them error cases), {skipped} skipped", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases fail:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

// ------------------------------------------------------------------------------ gradcheck

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, DType::F64, Some(&Generator::new(seed))).unwrap()
}

fn rand(shape: &[usize], lo: f64, hi: f64, seed: u64) -> Tensor {
    Tensor::rand_with(shape, DType::F64, Some(&Generator::new(seed)))
        .unwrap()
        .mul_scalar(hi - lo)
        .unwrap()
        .add_scalar(lo)
        .unwrap()
}

fn leaf(t: Tensor) -> Tensor {
    t.requires_grad_(true).unwrap()
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::new(v).unwrap()
}

/// Checks `f` by finite differences at `inputs` (those that require grad), for each reduction.
fn check(what: &str, inputs: &[Tensor], f: impl Fn(&[Tensor], Reduction) -> Result<Tensor>) {
    for r in [Reduction::None, Reduction::Mean, Reduction::Sum] {
        gradcheck(|xs| f(xs, r), inputs, GradcheckOptions::default())
            .unwrap_or_else(|e| panic!("gradcheck of {what} ({r:?}): {e}"));
    }
}

#[test]
fn loss_functions_pass_gradcheck() {
    let x = leaf(randn(&[3, 4], 1));
    let y = leaf(randn(&[3, 4], 2));
    let cls = i64s(&[1, 3, 0]);
    let w4 = rand(&[4], 0.5, 1.5, 3);

    check(
        "cross_entropy (indices, weight, ignore_index, label_smoothing)",
        std::slice::from_ref(&x),
        |xs, r| {
            let o = CrossEntropyOptions {
                weight: Some(w4.clone()),
                ignore_index: 0,
                reduction: r,
                label_smoothing: 0.1,
            };
            F::cross_entropy(&xs[0], &i64s(&[1, 3, 0]), &o)
        },
    );
    let probs = leaf(randn(&[3, 4], 4).softmax(1).unwrap().detach());
    check("cross_entropy (probabilities)", &[x.clone(), probs], |xs, r| {
        let o = CrossEntropyOptions {
            weight: Some(w4.clone()),
            reduction: r,
            label_smoothing: 0.2,
            ..Default::default()
        };
        F::cross_entropy(&xs[0], &xs[1], &o)
    });
    check("nll_loss", std::slice::from_ref(&x), |xs, r| {
        let o = CrossEntropyOptions { weight: Some(w4.clone()), reduction: r, ..Default::default() };
        F::nll_loss(&xs[0], &cls, &o)
    });
    check("mse_loss", &[x.clone(), y.clone()], |xs, r| F::mse_loss(&xs[0], &xs[1], r));
    check("l1_loss", &[x.clone(), y.clone()], |xs, r| F::l1_loss(&xs[0], &xs[1], r));
    check("smooth_l1_loss", &[x.clone(), y.clone()], |xs, r| {
        F::smooth_l1_loss(&xs[0], &xs[1], &F::SmoothL1LossOptions { reduction: r, beta: 0.7 })
    });
    check("huber_loss", &[x.clone(), y.clone()], |xs, r| {
        F::huber_loss(&xs[0], &xs[1], &F::HuberLossOptions { reduction: r, delta: 0.7 })
    });
    let p = leaf(rand(&[3, 4], 0.1, 0.9, 5));
    let q = leaf(rand(&[3, 4], 0.0, 1.0, 6));
    check("binary_cross_entropy", &[p.clone(), q.clone()], |xs, r| {
        F::binary_cross_entropy(
            &xs[0],
            &xs[1],
            &F::BinaryCrossEntropyOptions { weight: Some(w4.clone()), reduction: r },
        )
    });
    let pw = rand(&[4], 0.5, 3.0, 7);
    check("binary_cross_entropy_with_logits", &[x.clone(), q.clone()], |xs, r| {
        let o = F::BinaryCrossEntropyWithLogitsOptions {
            weight: Some(w4.clone()),
            reduction: r,
            pos_weight: Some(pw.clone()),
        };
        F::binary_cross_entropy_with_logits(&xs[0], &xs[1], &o)
    });
    let logp = leaf(randn(&[3, 4], 8).log_softmax(1).unwrap().detach());
    let tp = leaf(randn(&[3, 4], 9).softmax(1).unwrap().detach());
    for red in [KlReduction::None, KlReduction::Mean, KlReduction::Sum, KlReduction::BatchMean] {
        gradcheck(
            |xs| F::kl_div(&xs[0], &xs[1], &F::KlDivOptions { reduction: red, log_target: false }),
            &[logp.clone(), tp.clone()],
            Default::default(),
        )
        .unwrap_or_else(|e| panic!("gradcheck of kl_div ({red:?}): {e}"));
        let lt = leaf(tp.log().unwrap().detach());
        let o = F::KlDivOptions { reduction: red, log_target: true };
        gradcheck(|xs| F::kl_div(&xs[0], &xs[1], &o), &[logp.clone(), lt], Default::default())
            .unwrap_or_else(|e| panic!("gradcheck of kl_div log_target ({red:?}): {e}"));
    }
    let pm1 = Tensor::new([1f64, -1., -1.]).unwrap();
    check("cosine_embedding_loss", &[x.clone(), y.clone()], |xs, r| {
        F::cosine_embedding_loss(
            &xs[0],
            &xs[1],
            &pm1,
            &F::CosineEmbeddingLossOptions { margin: -0.5, reduction: r },
        )
    });
    let (a, b) = (leaf(randn(&[5], 10)), leaf(randn(&[5], 11)));
    let pm5 = Tensor::new([1f64, -1., -1., 1., 1.]).unwrap();
    check("margin_ranking_loss", &[a, b], |xs, r| {
        F::margin_ranking_loss(
            &xs[0],
            &xs[1],
            &pm5,
            &F::MarginRankingLossOptions { margin: 0.1, reduction: r },
        )
    });
    let z = leaf(randn(&[3, 4], 12));
    for (p, swap) in [(2.0, false), (1.0, true), (3.0, false)] {
        check(
            &format!("triplet_margin_loss p={p} swap={swap}"),
            &[x.clone(), y.clone(), z.clone()],
            |xs, r| {
                let o =
                    F::TripletMarginLossOptions { margin: 3.0, p, swap, reduction: r, ..Default::default() };
                F::triplet_margin_loss(&xs[0], &xs[1], &xs[2], &o)
            },
        );
    }
    let pm34 = randn(&[3, 4], 13).sign().unwrap();
    check("hinge_embedding_loss", std::slice::from_ref(&x), |xs, r| {
        F::hinge_embedding_loss(&xs[0], &pm34, &F::HingeEmbeddingLossOptions { margin: 0.8, reduction: r })
    });
    check("soft_margin_loss", std::slice::from_ref(&x), |xs, r| F::soft_margin_loss(&xs[0], &pm34, r));
    let u01 = pm34.add_scalar(1.0).unwrap().div_scalar(2.0).unwrap();
    check("multilabel_soft_margin_loss", std::slice::from_ref(&x), |xs, r| {
        let o = F::MultilabelSoftMarginLossOptions { weight: Some(w4.clone()), reduction: r };
        F::multilabel_soft_margin_loss(&xs[0], &u01, &o)
    });
    for p in [1, 2] {
        check(&format!("multi_margin_loss p={p}"), std::slice::from_ref(&x), |xs, r| {
            let o = F::MultiMarginLossOptions { p, margin: 0.9, weight: Some(w4.clone()), reduction: r };
            F::multi_margin_loss(&xs[0], &cls, &o)
        });
    }
    let ml = Tensor::new([[3i64, 0, -1, 1], [1, 2, 3, 0], [2, -1, 0, 0]]).unwrap();
    check("multilabel_margin_loss", std::slice::from_ref(&x), |xs, r| {
        F::multilabel_margin_loss(&xs[0], &ml, r)
    });
    let counts = rand(&[3, 4], 0.0, 5.0, 14).floor().unwrap();
    check("poisson_nll_loss (log_input, full)", std::slice::from_ref(&x), |xs, r| {
        F::poisson_nll_loss(
            &xs[0],
            &counts,
            &F::PoissonNllLossOptions { full: true, reduction: r, ..Default::default() },
        )
    });
    check("poisson_nll_loss (rates)", std::slice::from_ref(&p), |xs, r| {
        let o = F::PoissonNllLossOptions { log_input: false, reduction: r, ..Default::default() };
        F::poisson_nll_loss(&xs[0], &counts, &o)
    });
    let var = leaf(rand(&[3, 4], 0.5, 1.5, 15));
    check("gaussian_nll_loss", &[x.clone(), y.clone(), var], |xs, r| {
        F::gaussian_nll_loss(
            &xs[0],
            &xs[1],
            &xs[2],
            &F::GaussianNllLossOptions { full: true, reduction: r, ..Default::default() },
        )
    });
    let var1 = leaf(rand(&[3], 0.5, 1.5, 16));
    check("gaussian_nll_loss (var [N])", &[x.clone(), y.clone(), var1], |xs, r| {
        F::gaussian_nll_loss(
            &xs[0],
            &xs[1],
            &xs[2],
            &F::GaussianNllLossOptions { reduction: r, ..Default::default() },
        )
    });

    // CTC's gradient w.r.t. log_probs is PyTorch's (true derivative plus g exp(log_probs)); the
    // extra term cancels through log_softmax, so the check goes through it.
    let logits = leaf(randn(&[6, 2, 4], 17));
    let targets = i64s(&[1, 2, 2, 3, 1, 0]).reshape([2, 3]).unwrap();
    let (il, tl) = (i64s(&[6, 5]), i64s(&[3, 2]));
    check("ctc_loss", &[logits], |xs, r| {
        F::ctc_loss(
            &xs[0].log_softmax(2)?,
            &targets,
            &il,
            &tl,
            &F::CtcLossOptions { reduction: r, ..Default::default() },
        )
    });
}

#[test]
fn class_indices_are_long_or_byte_and_ctc_takes_unbatched_input() {
    let x = randn(&[3, 4], 20);
    let long = i64s(&[1, 3, 0]);
    let byte = long.to_dtype(DType::U8).unwrap();
    for r in [Reduction::None, Reduction::Mean, Reduction::Sum] {
        let o = CrossEntropyOptions { reduction: r, label_smoothing: 0.1, ..Default::default() };
        let a = F::cross_entropy(&x, &long, &o).unwrap();
        let b = F::cross_entropy(&x, &byte, &o).unwrap();
        assert_eq!(a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    }
    for dt in [DType::I32, DType::F64] {
        let e = F::nll_loss(&x, &long.to_dtype(dt).unwrap(), &Default::default()).unwrap_err().to_string();
        let want = format!("expected target dtype to be Long or Byte, but got {}", dt.type_name());
        assert!(e.contains(&want), "{e}");
    }
    // a target of the input's shape is class probabilities, which must be floating-point
    let e =
        F::cross_entropy(&x, &Tensor::zeros([3, 4], DType::I64).unwrap(), &Default::default()).unwrap_err();
    assert!(
        e.to_string().contains("Expected floating point type for target with class probabilities, got Long"),
        "{e}"
    );

    // unbatched CTC: log_probs [T, C], 1-D target, 0-d lengths
    let lp = randn(&[7, 5], 21).log_softmax(1).unwrap();
    let tgt = i64s(&[1, 3, 3]);
    let (il, tl) = (Tensor::new(7i64).unwrap(), Tensor::new(3i64).unwrap());
    let none = F::CtcLossOptions { reduction: Reduction::None, ..Default::default() };
    let one = F::ctc_loss(&lp, &tgt, &il, &tl, &none).unwrap();
    let batched = F::ctc_loss(
        &lp.unsqueeze(1).unwrap(),
        &tgt.unsqueeze(0).unwrap(),
        &il.reshape([1]).unwrap(),
        &tl.reshape([1]).unwrap(),
        &none,
    )
    .unwrap();
    assert_eq!(one.dims(), &[] as &[usize]);
    assert_eq!(one.to_vec::<f64>().unwrap(), batched.to_vec::<f64>().unwrap());
}
