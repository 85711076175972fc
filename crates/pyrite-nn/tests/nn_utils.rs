//! `torch.nn.utils` against PyTorch (`reference/gen_nn_utils.py`): gradient clipping by norm
//! (norm types 2, 1, inf, 3.5, 0.5 and 0, f32/f64/mixed, clipping or not, params without
//! grad, non-finite norms with and without the error), `get_total_norm`,
//! `clip_grads_with_norm_`, `clip_grad_value_`, and `parameters_to_vector` /
//! `vector_to_parameters`.

mod common;

use common::{assert_close, load_tensors};
use pyrite::nn::utils::{
    clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm, parameters_to_vector,
    vector_to_parameters, ClipGradNormOptions,
};
use pyrite::nn::{Linear, Module, Parameter};
use pyrite::{DType, ErrorKind, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;

const SHAPES: [&[usize]; 4] = [&[3, 4], &[5], &[2, 3, 2], &[4, 1]];

fn dtype(s: &str) -> DType {
    match s {
        "float32" => DType::F32,
        "float64" => DType::F64,
        other => panic!("dtype {other}"),
    }
}

fn tol(dt: DType) -> (f64, f64) {
    if dt == DType::F64 {
        (1e-12, 1e-10)
    } else {
        (1e-6, 1e-5)
    }
}

struct Data {
    t: HashMap<String, Tensor>,
    cases: Vec<J>,
}

impl Data {
    fn load() -> Data {
        let (t, meta) = load_tensors("nn_utils.safetensors");
        let cases: Vec<J> = serde_json::from_str(&meta["cases"]).unwrap();
        assert!(cases.len() >= 50, "only {} cases", cases.len());
        Data { t, cases }
    }
    fn get(&self, k: &str) -> &Tensor {
        self.t.get(k).unwrap_or_else(|| panic!("missing tensor {k}"))
    }
    fn of_kind(&self, kind: &str) -> Vec<&J> {
        let v: Vec<&J> = self.cases.iter().filter(|c| c["kind"] == kind).collect();
        assert!(!v.is_empty(), "no {kind} cases");
        v
    }
}

fn s<'a>(c: &'a J, k: &str) -> &'a str {
    c[k].as_str().unwrap_or_else(|| panic!("{k}"))
}

/// The case's parameters (zeros of the recorded shapes and dtypes) with copies of the recorded
/// gradients.
fn params(d: &Data, c: &J) -> Vec<Tensor> {
    let name = s(c, "name");
    (0..4)
        .map(|i| {
            let dt = dtype(c["dtypes"][i].as_str().unwrap());
            let p = Parameter::new(Tensor::zeros(SHAPES[i], dt).unwrap()).unwrap().tensor().clone();
            if let Some(g) = d.t.get(&format!("{name}.g{i}")) {
                p.set_grad(Some(g.deep_clone().unwrap())).unwrap();
            }
            p
        })
        .collect()
}

fn check_grads(d: &Data, c: &J, ps: &[Tensor]) {
    let name = s(c, "name");
    for (i, p) in ps.iter().enumerate() {
        match d.t.get(&format!("{name}.gout{i}")) {
            Some(want) => {
                let got = p.grad().unwrap_or_else(|| panic!("{name}: param {i} lost its grad"));
                assert_eq!(got.dtype(), want.dtype(), "{name}: grad {i} dtype");
                let (a, r) = tol(want.dtype());
                assert_close(&got, want, a, r, &format!("{name}: grad {i}"));
            }
            None => assert!(p.grad().is_none(), "{name}: param {i} got a grad"),
        }
    }
}

#[test]
fn clip_grad_norm_matches_pytorch() {
    let d = Data::load();
    let cases = d.of_kind("clip_grad_norm_");
    assert!(cases.len() >= 28);
    for c in cases {
        let name = s(c, "name");
        let ps = params(&d, c);
        let opts = ClipGradNormOptions {
            norm_type: s(c, "norm_type").parse().unwrap(),
            error_if_nonfinite: c["error_if_nonfinite"].as_bool().unwrap(),
            foreach: None,
        };
        let r = clip_grad_norm_(&ps, c["max_norm"].as_f64().unwrap(), opts);
        if let Some(msg) = c.get("error") {
            let e = r.expect_err(name);
            assert_eq!(e.message(), msg.as_str().unwrap(), "{name}");
            assert_eq!(e.kind(), ErrorKind::Value);
        } else {
            let total = r.unwrap_or_else(|e| panic!("{name}: {e}"));
            let want = d.get(&format!("{name}.total"));
            assert_eq!(total.rank(), 0, "{name}: the total norm is a 0-d tensor");
            assert_eq!(total.dtype(), dtype(s(c, "total_dtype")), "{name}: total dtype");
            let (a, r) = tol(want.dtype());
            assert_close(&total, want, a, r, &format!("{name}: total norm"));
        }
        check_grads(&d, c, &ps);
    }
}

#[test]
fn get_total_norm_and_clip_grads_with_norm_match_pytorch() {
    let d = Data::load();
    for c in d.of_kind("get_total_norm") {
        let name = s(c, "name");
        let ts: Vec<&Tensor> = (0..4).map(|i| d.get(&format!("{name}.g{i}"))).collect();
        let got = get_total_norm(&ts, s(c, "norm_type").parse().unwrap(), false).unwrap();
        let want = d.get(&format!("{name}.total"));
        let (a, r) = tol(want.dtype());
        assert_close(&got, want, a, r, name);
    }
    for c in d.of_kind("clip_grads_with_norm_") {
        let ps = params(&d, c);
        let tn = d.get(&format!("{}.tn", s(c, "name")));
        clip_grads_with_norm_(&ps, c["max_norm"].as_f64().unwrap(), tn).unwrap();
        check_grads(&d, c, &ps);
    }
    // an empty list: tensor(0.) in the default dtype
    let z = get_total_norm::<Tensor>(&[], 2.0, true).unwrap();
    assert_eq!((z.dtype(), z.rank(), z.item::<f32>().unwrap()), (DType::F32, 0, 0.0));
    // a total norm of several elements is an error, not a broadcast
    let ps = params(&d, d.of_kind("clip_grads_with_norm_")[0]);
    let e = clip_grads_with_norm_(&ps, 1.0, &Tensor::ones([2], DType::F32).unwrap()).unwrap_err();
    assert!(e.message().contains("one-element"), "{e}");
}

#[test]
fn clip_grad_value_matches_pytorch() {
    let d = Data::load();
    for c in d.of_kind("clip_grad_value_") {
        let ps = params(&d, c);
        clip_grad_value_(&ps, c["clip_value"].as_f64().unwrap()).unwrap();
        check_grads(&d, c, &ps);
    }
}

#[test]
fn parameters_to_vector_and_back_match_pytorch() {
    let d = Data::load();
    for c in d.of_kind("vector") {
        let name = s(c, "name");
        let ps: Vec<Tensor> = (0..4)
            .map(|i| {
                Parameter::new(d.get(&format!("{name}.p{i}")).deep_clone().unwrap()).unwrap().tensor().clone()
            })
            .collect();
        let v = parameters_to_vector(&ps).unwrap();
        assert_eq!(v.requires_grad(), c["requires_grad"].as_bool().unwrap(), "{name}");
        assert_close(&v, d.get(&format!("{name}.out")), 0.0, 0.0, name);
        let vec = d.get(&format!("{name}.vec"));
        let r = vector_to_parameters(vec, &ps);
        if let Some(msg) = c.get("error") {
            let e = r.expect_err(name);
            assert!(e.message().contains(msg.as_str().unwrap()), "{name}: {e}");
            // nothing was written
            for (i, p) in ps.iter().enumerate() {
                assert_close(p, d.get(&format!("{name}.p{i}")), 0.0, 0.0, name);
            }
        } else {
            r.unwrap();
            for (i, p) in ps.iter().enumerate() {
                assert_close(p, d.get(&format!("{name}.pout{i}")), 0.0, 0.0, &format!("{name}: param {i}"));
                assert!(p.is_leaf() && p.requires_grad(), "{name}: param {i} stays a leaf");
            }
        }
    }
}

#[test]
fn vector_utils_errors_and_modules() {
    // a 2-D vector, no parameters
    let net = Linear::new(3, 2).unwrap();
    let e = vector_to_parameters(&Tensor::zeros([2, 4], DType::F32).unwrap(), &net.parameters()).unwrap_err();
    assert!(e.message().contains("1-D") && e.message().contains("[2, 4]"), "{e}");
    let e = parameters_to_vector::<Tensor>(&[]).unwrap_err();
    assert!(e.message().contains("non-empty"), "{e}");
    // the round trip through a module's parameters, and the gradient of the vector
    let v = parameters_to_vector(&net.parameters()).unwrap();
    v.square().unwrap().sum().unwrap().backward().unwrap();
    let w = net.weight.grad().unwrap();
    assert_close(&w, &net.weight.mul_scalar(2.0).unwrap(), 1e-6, 1e-6, "grad through parameters_to_vector");
    let new = Tensor::arange(0.0, 8.0, 1.0, DType::F32).unwrap();
    vector_to_parameters(&new, &net.parameters()).unwrap();
    assert_eq!(net.bias.as_ref().unwrap().to_vec::<f32>().unwrap(), vec![6., 7.]);
    // Parameters themselves (not only tensors) are accepted
    let ps: Vec<Parameter> = vec![Parameter::new(Tensor::ones([2], DType::F64).unwrap()).unwrap()];
    ps[0].set_grad(Some(Tensor::new([30f64, 40.]).unwrap())).unwrap();
    let total = clip_grad_norm_(&ps, 1.0, ClipGradNormOptions::norm_type(1.0)).unwrap();
    assert_eq!(total.item::<f64>().unwrap(), 70.0);
}
