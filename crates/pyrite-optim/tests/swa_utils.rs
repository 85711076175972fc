//! `torch.optim.swa_utils` against PyTorch (`reference/gen_swa_utils.py`): AveragedModel with
//! SWA (default, `avg_fn`, `multi_avg_fn`), EMA (decay 0.9, `multi_avg_fn` and `avg_fn`), with
//! and without `use_buffers`, over 20 updates of a small MLP with a BatchNorm; the averaged
//! state_dict (`n_averaged`, `module.*`) after several updates, the averaged forward, and
//! `update_bn`'s running statistics.

use pyrite::nn::{self, BatchNorm1d, Linear, Module, ModuleBase, ReLU, StateDict};
use pyrite::optim::swa_utils::{
    get_ema_avg_fn, get_ema_multi_avg_fn, get_swa_avg_fn, get_swa_multi_avg_fn, update_bn, AveragedModel,
    AveragedModelOptions,
};
use pyrite::{DType, Result, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;

// ------------------------------------------------------------------------- reference data

/// The tensors of a safetensors file and its `cases` metadata (the format is a little-endian
/// u64 header length, a JSON header, then the raw data).
fn load(name: &str) -> (HashMap<String, Tensor>, Vec<J>) {
    let path = format!("{}/../../reference/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, J> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut out = HashMap::new();
    let mut cases = Vec::new();
    for (k, v) in &header {
        if k == "__metadata__" {
            cases = serde_json::from_str(v["cases"].as_str().unwrap()).unwrap();
            continue;
        }
        let dtype = match v["dtype"].as_str().unwrap() {
            "F32" => DType::F32,
            "F64" => DType::F64,
            "I64" => DType::I64,
            other => panic!("dtype {other}"),
        };
        let shape: Vec<usize> =
            v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let off: Vec<usize> =
            v["data_offsets"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        out.insert(k.clone(), Tensor::from_raw_bytes(&data[off[0]..off[1]], shape, dtype).unwrap());
    }
    (out, cases)
}

/// The entries under `prefix/`, as a state_dict without the prefix.
fn sub(t: &HashMap<String, Tensor>, prefix: &str) -> StateDict {
    let p = format!("{prefix}/");
    let mut v: Vec<(String, Tensor)> =
        t.iter().filter_map(|(k, x)| k.strip_prefix(&p).map(|k| (k.to_string(), x.clone()))).collect();
    assert!(!v.is_empty(), "no tensors under {prefix}");
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.into_iter().collect()
}

fn assert_close(got: &Tensor, want: &Tensor, tol: f64, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let g = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let w = want.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}[{i}]: got {a}, want {b} (tol {tol})");
    }
}

/// Every entry of `want` is in `got` with the same values, and nothing else.
fn assert_state_dict(got: &StateDict, want: &StateDict, tol: f64, what: &str) {
    let mut gk: Vec<&str> = got.keys().collect();
    let mut wk: Vec<&str> = want.keys().collect();
    gk.sort();
    wk.sort();
    assert_eq!(gk, wk, "{what}: keys");
    for (k, w) in want.iter() {
        assert_close(got.get(k).unwrap(), w, tol, &format!("{what}: {k}"));
    }
}

// ---------------------------------------------------------------------------------- model

/// `Net` of gen_swa_utils.py.
#[derive(nn::Module)]
struct Net {
    base: ModuleBase,
    fc1: Linear,
    bn: BatchNorm1d,
    act: ReLU,
    fc2: Linear,
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.call(&self.act.call(&self.bn.call(&self.fc1.call(x)?)?)?)
    }
}

impl Net {
    fn new(dtype: DType) -> Result<Net> {
        let mut n = Net {
            base: ModuleBase::new(),
            fc1: Linear::new(4, 8)?,
            bn: BatchNorm1d::new(8)?,
            act: ReLU::new(),
            fc2: Linear::new(8, 3)?,
        };
        n.to_dtype(dtype)?;
        Ok(n)
    }
}

fn options(case: &str) -> AveragedModelOptions {
    let o = AveragedModelOptions::default();
    let name = case.trim_end_matches("_f32").trim_end_matches("_f64");
    match name {
        "swa" => o,
        "swa_buffers" => AveragedModelOptions { use_buffers: true, ..o },
        "swa_multi" => AveragedModelOptions { multi_avg_fn: Some(get_swa_multi_avg_fn()), ..o },
        "swa_avgfn" => AveragedModelOptions { avg_fn: Some(get_swa_avg_fn()), ..o },
        "ema" => AveragedModelOptions {
            multi_avg_fn: Some(get_ema_multi_avg_fn(0.9).unwrap()),
            use_buffers: true,
            ..o
        },
        "ema_nobuf" => AveragedModelOptions { multi_avg_fn: Some(get_ema_multi_avg_fn(0.9).unwrap()), ..o },
        "ema_avgfn" => AveragedModelOptions { avg_fn: Some(get_ema_avg_fn(0.9).unwrap()), ..o },
        other => panic!("unknown variant {other}"),
    }
}

// ---------------------------------------------------------------------------------- tests

#[test]
fn averaged_model_matches_pytorch() {
    let (t, cases) = load("swa_utils.safetensors");
    assert_eq!(cases.len(), 10);
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let (dtype, d, tol) = match c["dtype"].as_str().unwrap() {
            "float32" => (DType::F32, "float32", 1e-5),
            _ => (DType::F64, "float64", 1e-6),
        };
        let model = Net::new(dtype).unwrap();
        let avg = AveragedModel::new(&model, || Net::new(dtype), options(name)).unwrap();
        assert_eq!(avg.use_buffers(), c["use_buffers"].as_bool().unwrap());
        let checks: Vec<u64> = c["check"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        for i in 0..c["steps"].as_u64().unwrap() {
            model.load_state_dict(&sub(&t, &format!("{d}/step{i}")), true).unwrap();
            avg.update_parameters(&model).unwrap();
            if checks.contains(&i) {
                let want = sub(&t, &format!("{name}/avg{i}"));
                assert_state_dict(
                    &avg.state_dict().unwrap(),
                    &want,
                    tol,
                    &format!("{name} after update {i}"),
                );
            }
        }
        assert_eq!(avg.n_averaged().unwrap(), 20);
        avg.eval();
        let x = &t[&format!("{d}/x_eval")];
        assert_close(&avg.call(x).unwrap(), &t[&format!("{name}/out")], tol, &format!("{name}: forward"));
        if c["update_bn"].as_bool().unwrap() {
            let loader: Vec<Tensor> = (0..4).map(|j| t[&format!("{d}/loader{j}")].clone()).collect();
            update_bn(&loader, &avg).unwrap();
            assert!(
                !avg.is_training() && !avg.module.bn.is_training(),
                "{name}: the training mode is restored"
            );
            assert_eq!(avg.module.bn.momentum(), Some(0.1), "{name}: the momentum is restored");
            let want = sub(&t, &format!("{name}/bn"));
            assert_state_dict(&avg.state_dict().unwrap(), &want, tol, &format!("{name} after update_bn"));
        }
    }
}

#[test]
fn update_bn_cumulative_momentum_none_and_pairs() {
    let (t, _) = load("swa_utils.safetensors");
    let mut net = Net::new(DType::F32).unwrap();
    net.bn.config.opts.momentum = None;
    net.load_state_dict(&sub(&t, "bn_none/init"), true).unwrap();
    // (input, target) batches: the model runs on the input
    let loader: Vec<(Tensor, Tensor)> = (0..3)
        .map(|j| (t[&format!("bn_none/loader{j}")].clone(), Tensor::zeros([5], DType::F32).unwrap()))
        .collect();
    update_bn(loader, &net).unwrap();
    assert!(net.is_training());
    assert_eq!(net.bn.momentum(), None);
    assert_state_dict(
        &net.state_dict().unwrap(),
        &sub(&t, "bn_none/after"),
        1e-5,
        "update_bn (momentum None)",
    );
}

#[test]
fn update_bn_restores_state_on_error_and_skips_models_without_batchnorm() {
    let net = Net::new(DType::F32).unwrap();
    net.eval();
    let before = net.bn.running_var.as_ref().unwrap().deep_clone().unwrap();
    // the second batch has the wrong width: an error, and the momentum and mode come back
    let loader = vec![Tensor::ones([3, 4], DType::F32).unwrap(), Tensor::ones([3, 5], DType::F32).unwrap()];
    assert!(update_bn(&loader, &net).is_err());
    assert!(!net.is_training() && !net.bn.is_training());
    assert_eq!(net.bn.momentum(), Some(0.1));
    assert!(!net.bn.running_var.as_ref().unwrap().allclose(&before, 0.0, 0.0, false).unwrap());
    // no BatchNorm: the loader is not even read
    let lin = Linear::new(2, 2).unwrap();
    let bad = vec![Tensor::ones([1, 7], DType::F32).unwrap()];
    update_bn(&bad, &lin).unwrap();
}

#[test]
fn averaged_model_copies_the_model_and_checks_its_arguments() {
    let model = Net::new(DType::F64).unwrap();
    {
        let _g = pyrite::autograd::no_grad();
        model.fc1.weight.fill_(0.5).unwrap();
        model.bn.running_mean.as_ref().unwrap().fill_(2.0).unwrap();
    }
    model.fc2.weight.requires_grad_(false).unwrap();
    model.bn.eval();
    let avg = AveragedModel::new(&model, || Net::new(DType::F64), AveragedModelOptions::default()).unwrap();
    // PyTorch's deepcopy: values, requires_grad and training flags
    assert_state_dict(&avg.module.state_dict().unwrap(), &model.state_dict().unwrap(), 0.0, "the copy");
    assert!(!avg.module.fc2.weight.requires_grad() && avg.module.fc1.weight.requires_grad());
    assert!(avg.module.is_training() && !avg.module.bn.is_training());
    assert!(!avg.module.fc1.weight.same_storage(&model.fc1.weight), "a copy, not a share");
    assert_eq!(avg.n_averaged().unwrap(), 0);
    assert_eq!(avg.state_dict().unwrap().len(), 10);
    let sd = avg.state_dict().unwrap();
    let keys: Vec<&str> = sd.keys().collect();
    assert_eq!(keys[0], "n_averaged");
    assert_eq!(keys[1], "module.fc1.weight");
    assert!(avg.repr().starts_with("AveragedModel(\n  (module): Net("), "{}", avg.repr());

    // a copy of the wrong dtype, both averaging functions, a bad decay
    let e =
        AveragedModel::new(&model, || Net::new(DType::F32), AveragedModelOptions::default()).err().unwrap();
    assert!(e.message().contains("to_dtype") && e.message().contains("fc1.weight"), "{e}");
    let both = AveragedModelOptions {
        avg_fn: Some(get_swa_avg_fn()),
        multi_avg_fn: Some(get_swa_multi_avg_fn()),
        use_buffers: false,
    };
    let e = AveragedModel::new(&model, || Net::new(DType::F64), both).err().unwrap();
    assert!(e.message().contains("Only one of avg_fn and multi_avg_fn should be provided"), "{e}");
    let e = get_ema_multi_avg_fn(-0.1).err().unwrap();
    assert_eq!(e.message(), "Invalid decay value -0.1 provided. Please provide a value in [0,1] range.");
    assert!(get_ema_avg_fn(2.0).err().unwrap().message().contains("2.0"));

    // a model of another architecture: an error, nothing averaged
    let other = Linear::new(4, 8).unwrap();
    let e = avg.update_parameters(&other).unwrap_err();
    assert!(e.message().contains("parameters"), "{e}");
    assert_eq!(avg.n_averaged().unwrap(), 0);

    // load_state_dict round trip, n_averaged included
    avg.update_parameters(&model).unwrap();
    avg.update_parameters(&model).unwrap();
    let fresh = AveragedModel::new(&model, || Net::new(DType::F64), AveragedModelOptions::default()).unwrap();
    fresh.load_state_dict(&avg.state_dict().unwrap(), true).unwrap();
    assert_eq!(fresh.n_averaged().unwrap(), 2);
}
