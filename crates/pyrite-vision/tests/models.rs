//! `pyrite::vision::models` against torchvision (`reference/gen_models.py` ->
//! `reference/data/models.{json,safetensors}` and `mobilenet_v2_x0_1.safetensors`).
//!
//! Each case builds a model as torchvision does, checks its state_dict keys, shapes and dtypes
//! (in order), fills a state_dict with the generator's formula (torchvision's own weights are far
//! too big to commit), loads it with `strict = true`, and compares the eval-mode output with
//! torchvision's to 1e-4. One small real torchvision state_dict is loaded as well.

use pyrite::nn::{BatchNorm2d, Conv2d, Linear, Module, StateDict};
use pyrite::vision::models::*;
use pyrite::{DType, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;
use std::sync::Mutex;

fn data_path(name: &str) -> String {
    format!("{}/../../reference/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn info() -> J {
    let path = data_path("models.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))).unwrap()
}

fn tensors() -> HashMap<String, Tensor> {
    pyrite::nn::load_safetensors(data_path("models.safetensors"))
        .unwrap()
        .iter()
        .map(|(k, t)| (k.to_string(), t.clone()))
        .collect()
}

// ------------------------------------------------------------------------------- the formula

/// FNV-1a, 32 bits, of the key's bytes.
fn fnv1a(key: &str) -> u32 {
    key.bytes().fold(0x811C9DC5u32, |h, b| (h ^ b as u32).wrapping_mul(0x01000193))
}

/// `u_i` of the generator's docstring: MurmurHash3's finaliser of `h + i * 0x9E3779B1`.
fn unit(h: u32, i: usize) -> f64 {
    let mut x = (i as u32).wrapping_mul(0x9E3779B1).wrapping_add(h);
    x ^= x >> 16;
    x = x.wrapping_mul(0x85EBCA6B);
    x ^= x >> 13;
    x = x.wrapping_mul(0xC2B2AE35);
    x ^= x >> 16;
    x as f64 / 4294967296.0
}

/// The kinds of tensor the formula tells apart.
#[derive(Clone, Copy)]
enum Kind {
    /// `0.5 + u`
    RunningVar,
    /// `0.1 * r`: running means and biases
    Small,
    /// `w * (1 + 0.5 * r)`: norm weights
    NormWeight(f64),
    /// `sqrt(6 / fan_in) * r`: conv and linear weights
    Weight(f64),
}

/// The tensor the generator fills for `key` (see `gen_models.py`; the same operations in the
/// same order, so the same f32 bits), with the sum and the sum of magnitudes of its values.
fn formula(key: &str, shape: &[usize], w: f64) -> (Tensor, f64, f64) {
    let h = fnv1a(key);
    let n: usize = shape.iter().product();
    if key.ends_with("num_batches_tracked") {
        let v = (h % 1000) as i64;
        return (Tensor::scalar(v).unwrap(), v as f64, v as f64);
    }
    let kind = if key.ends_with("running_var") {
        Kind::RunningVar
    } else if key.ends_with("running_mean") {
        Kind::Small
    } else if shape.len() == 1 && key.ends_with("weight") {
        Kind::NormWeight(w)
    } else if shape.len() == 1 {
        Kind::Small
    } else {
        Kind::Weight((6.0 / (n / shape[0]) as f64).sqrt())
    };
    let (mut sum, mut l1) = (0.0, 0.0);
    let v: Vec<f32> = (0..n)
        .map(|i| {
            let u = unit(h, i);
            let r = 2.0 * u - 1.0;
            let x = match kind {
                Kind::RunningVar => 0.5 + u,
                Kind::Small => 0.1 * r,
                Kind::NormWeight(w) => w * (1.0 + 0.5 * r),
                Kind::Weight(s) => s * r,
            } as f32;
            sum += x as f64;
            l1 += (x as f64).abs();
            x
        })
        .collect();
    (Tensor::from_vec(v, shape).unwrap(), sum, l1)
}

// ------------------------------------------------------------------------------- the models

fn usize_of(kw: &J, k: &str, d: usize) -> usize {
    kw.get(k).map_or(d, |v| v.as_u64().unwrap() as usize)
}

/// The model a case names, built as torchvision's constructor with these kwargs (VGGs with
/// `init_weights` as given: their init is 100M normal draws, wasted before a load).
fn build(ctor: &str, kw: &J, init_weights: bool) -> Box<dyn Module> {
    let num_classes = usize_of(kw, "num_classes", 1000);
    let dilate = kw.get("replace_stride_with_dilation").map_or([false; 3], |v| {
        let a: Vec<bool> = v.as_array().unwrap().iter().map(|b| b.as_bool().unwrap()).collect();
        [a[0], a[1], a[2]]
    });
    let r = ResNetOptions {
        num_classes,
        groups: usize_of(kw, "groups", 1),
        width_per_group: usize_of(kw, "width_per_group", 64),
        replace_stride_with_dilation: dilate,
        ..Default::default()
    };
    let v = VggOptions { num_classes, init_weights, ..Default::default() };
    let m = MobileNetV2Options {
        num_classes,
        width_mult: kw.get("width_mult").map_or(1.0, |v| v.as_f64().unwrap()),
        ..Default::default()
    };
    match ctor {
        "resnet18" => Box::new(resnet18(r).unwrap()),
        "resnet34" => Box::new(resnet34(r).unwrap()),
        "resnet50" => Box::new(resnet50(r).unwrap()),
        "resnet101" => Box::new(resnet101(r).unwrap()),
        "resnet152" => Box::new(resnet152(r).unwrap()),
        "vgg11" => Box::new(vgg11(v).unwrap()),
        "vgg11_bn" => Box::new(vgg11_bn(v).unwrap()),
        "vgg16" => Box::new(vgg16(v).unwrap()),
        "vgg16_bn" => Box::new(vgg16_bn(v).unwrap()),
        "mobilenet_v2" => Box::new(mobilenet_v2(m).unwrap()),
        other => panic!("no constructor {other}"),
    }
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::I64 => "I64",
        other => panic!("unexpected dtype {other:?}"),
    }
}

/// `(key, shape, dtype)` of every state_dict entry, in order.
fn layout(sd: &StateDict) -> Vec<(String, Vec<usize>, String)> {
    sd.iter().map(|(k, t)| (k.to_string(), t.dims().to_vec(), dtype_name(t.dtype()).to_string())).collect()
}

fn layout_of(j: &J) -> Vec<(String, Vec<usize>, String)> {
    j.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let shape = e[1].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            (e[0].as_str().unwrap().to_string(), shape, e[2].as_str().unwrap().to_string())
        })
        .collect()
}

/// `|got - want| <= tol * max(1, max |want|)` everywhere.
fn assert_close(got: &Tensor, want: &Tensor, tol: f64, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    let g = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let w = want.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let scale = w.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= tol * scale,
            "{what}: element {i}: got {a}, want {b} (tolerance {})",
            tol * scale
        );
    }
}

/// What torchvision's init leaves in a freshly built model: Kaiming-normal (fan_out) convs with
/// zero biases, unit/zero BatchNorms with fresh statistics, and `Linear` layers either
/// `N(0, 0.01)` with zero bias (VGG, MobileNetV2) or nn.Linear's uniform init (ResNet).
fn check_init(model: &dyn Module, linear_normal: bool, what: &str) {
    // (on the first 100k values: VGG's classifier has 103M)
    let std_of = |t: &Tensor| {
        let t = t.flatten(0, -1).unwrap();
        let t = t.narrow(0, 0, t.numel().min(100_000)).unwrap();
        let v = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let m = v.iter().sum::<f64>() / v.len() as f64;
        (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt()
    };
    let all =
        |t: &Tensor, x: f64| t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap().iter().all(|&v| v == x);
    for (name, m) in model.named_modules() {
        let any = m.as_any();
        if let Some(c) = any.downcast_ref::<Conv2d>() {
            let fan_out = c.weight.dims()[0] * c.weight.dims()[2] * c.weight.dims()[3];
            if c.weight.numel() >= 2000 {
                let want = (2.0 / fan_out as f64).sqrt();
                let got = std_of(&c.weight);
                assert!((got / want - 1.0).abs() < 0.1, "{what}: {name}.weight std {got}, want {want}");
            }
            assert!(c.bias.as_ref().is_none_or(|b| all(b, 0.0)), "{what}: {name}.bias");
        } else if let Some(bn) = any.downcast_ref::<BatchNorm2d>() {
            assert!(
                all(bn.weight.as_ref().unwrap(), 1.0) && all(bn.bias.as_ref().unwrap(), 0.0),
                "{what}: {name}"
            );
            assert!(
                all(bn.running_mean.as_ref().unwrap(), 0.0) && all(bn.running_var.as_ref().unwrap(), 1.0)
            );
        } else if let Some(l) = any.downcast_ref::<Linear>() {
            if linear_normal {
                let got = std_of(&l.weight);
                assert!((got / 0.01 - 1.0).abs() < 0.1, "{what}: {name}.weight std {got}, want 0.01");
                assert!(all(l.bias.as_ref().unwrap(), 0.0), "{what}: {name}.bias");
            } else {
                let bound = 1.0 / (l.in_features as f64).sqrt();
                let max = l.weight.abs().unwrap().max().unwrap().item::<f32>().unwrap() as f64;
                assert!(max <= bound && max > 0.9 * bound, "{what}: {name}.weight max {max}, bound {bound}");
            }
        }
    }
}

/// A VGG takes about 1 GB here (its weights and the formula's state_dict): one at a time.
static VGG_MEMORY: Mutex<()> = Mutex::new(());

/// The whole check of one recorded case (see the file's doc).
fn check(case: &str) {
    let info = info();
    let c = &info["cases"][case];
    let ctor = c["constructor"].as_str().unwrap();
    let _one_vgg_at_a_time =
        ctor.starts_with("vgg").then(|| VGG_MEMORY.lock().unwrap_or_else(|e| e.into_inner()));
    // one VGG (the smallest) checks its init; the others skip it
    let init = !ctor.starts_with("vgg") || case == "vgg11";
    let model = build(ctor, &c["kwargs"], init);

    // the state_dict layout, in order, and the parameter count
    let want = layout_of(&c["state_dict"]);
    let got = layout(&model.state_dict().unwrap());
    assert_eq!(got.len(), want.len(), "{case}: number of state_dict entries");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{case}: state_dict entry");
    }
    assert_eq!(model.num_parameters(false) as u64, c["num_parameters"].as_u64().unwrap(), "{case}");
    if init {
        check_init(&*model, !ctor.starts_with("resnet"), case);
    }

    // the formula's state_dict (checked by its sums) loads strictly
    let w = c["w"].as_f64().unwrap();
    let mut sd = StateDict::new();
    for ((key, shape, _), sum) in want.iter().zip(c["sums"].as_array().unwrap()) {
        let (t, s, l1) = formula(key, shape, w);
        let want_sum = sum.as_f64().unwrap();
        assert!(
            (s - want_sum).abs() <= 1e-9 * l1.max(1.0),
            "{case}: {key}: formula sum {s}, torchvision's {want_sum}"
        );
        sd.insert(key.clone(), t);
    }
    let r = model.load_state_dict(&sd, true).unwrap();
    assert!(r.missing_keys.is_empty() && r.unexpected_keys.is_empty());
    drop(sd);

    // eval-mode output
    let t = tensors();
    model.eval();
    let _g = pyrite::autograd::no_grad();
    let out = model.call(&t[c["input"].as_str().unwrap()]).unwrap();
    assert_close(&out, &t[&format!("out.{case}")], 1e-4, case);
}

#[test]
fn resnet18_matches_torchvision() {
    check("resnet18");
}

#[test]
fn resnet34_matches_torchvision() {
    check("resnet34");
}

#[test]
fn resnet50_matches_torchvision() {
    check("resnet50");
}

#[test]
fn resnet101_matches_torchvision() {
    check("resnet101");
}

#[test]
fn resnet152_matches_torchvision() {
    check("resnet152");
}

#[test]
fn resnet50_with_groups_width_and_dilation_matches_torchvision() {
    check("resnet50_g2_w32_dilated");
}

#[test]
fn vgg11_matches_torchvision() {
    check("vgg11");
}

#[test]
fn vgg11_bn_matches_torchvision() {
    check("vgg11_bn");
}

#[test]
fn vgg16_matches_torchvision() {
    check("vgg16");
}

#[test]
fn vgg16_bn_matches_torchvision() {
    check("vgg16_bn");
}

#[test]
fn mobilenet_v2_matches_torchvision() {
    check("mobilenet_v2");
}

#[test]
fn mobilenet_v2_width_half_matches_torchvision() {
    check("mobilenet_v2_w0_5");
}

// ------------------------------------------------------------------- a real torchvision file

/// `safetensors.torch.save_file(mobilenet_v2(width_mult=0.1, num_classes=10).state_dict())`
/// after three train-mode batches: torchvision's own file loads strictly and gives its output.
#[test]
fn a_torchvision_state_dict_file_loads_strictly_and_gives_torchvisions_output() {
    let info = info();
    let real = &info["real"];
    let model =
        mobilenet_v2(MobileNetV2Options { width_mult: 0.1, num_classes: 10, ..Default::default() }).unwrap();
    assert_eq!(layout(&model.state_dict().unwrap()), layout_of(&real["state_dict"]));
    let sd = pyrite::nn::load_safetensors(data_path(real["file"].as_str().unwrap())).unwrap();
    let r = model.load_state_dict(&sd, true).unwrap();
    assert!(r.missing_keys.is_empty() && r.unexpected_keys.is_empty());
    assert_eq!(model.get_buffer("features.0.1.num_batches_tracked").unwrap().item::<i64>().unwrap(), 3);
    model.eval();
    let t = tensors();
    let out = model.call(&t[real["input"].as_str().unwrap()]).unwrap();
    assert_close(&out, &t[real["output"].as_str().unwrap()], 1e-4, "real mobilenet_v2");
}

// ------------------------------------------------------------------------------------ repr

/// `repr(model)`, but for torchvision's `inplace=True` activations (Pyrite's ReLU and ReLU6
/// have no in-place form: they print `ReLU()`).
fn torchvision_repr(c: &J) -> String {
    c["repr"]
        .as_str()
        .unwrap()
        .replace("ReLU(inplace=True)", "ReLU()")
        .replace("ReLU6(inplace=True)", "ReLU6()")
}

#[test]
fn display_is_torchvisions_repr() {
    let info = info();
    for (case, model) in [
        (
            "resnet18",
            Box::new(resnet18(ResNetOptions { num_classes: 10, ..Default::default() }).unwrap())
                as Box<dyn Module>,
        ),
        ("resnet50", Box::new(resnet50(ResNetOptions { num_classes: 10, ..Default::default() }).unwrap())),
        (
            "mobilenet_v2",
            Box::new(mobilenet_v2(MobileNetV2Options { num_classes: 10, ..Default::default() }).unwrap()),
        ),
    ] {
        let want = torchvision_repr(&info["cases"][case]);
        let got = model.repr();
        for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
            assert_eq!(g, w, "{case}: line {}", i + 1);
        }
        assert_eq!(got.lines().count(), want.lines().count(), "{case}: number of lines");
    }
}

#[test]
fn vgg_display_is_torchvisions_repr() {
    // (the features and head of vgg11_bn; building it is the slow part)
    let _one_vgg_at_a_time = VGG_MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let info = info();
    let model = vgg11_bn(VggOptions { num_classes: 10, init_weights: false, ..Default::default() }).unwrap();
    assert_eq!(model.to_string(), torchvision_repr(&info["cases"]["vgg11_bn"]));
}

// ------------------------------------------------------------------------- transfer learning

/// The fine-tuning recipe: freeze, replace the head, keep the frozen BatchNorms in eval mode,
/// give the optimizer the trainable parameters only.
#[test]
fn a_frozen_backbone_with_a_new_head_trains_only_the_head() -> pyrite::Result<()> {
    use pyrite::nn::functional as F;
    use pyrite::optim::{Optimizer, SGDOptions, SGD};
    pyrite::manual_seed(0);
    let mut model = resnet18(ResNetOptions { num_classes: 10, ..Default::default() })?;
    model.requires_grad_(false)?;
    model.fc = Linear::new(model.fc.in_features, 3)?;
    assert_eq!(model.num_parameters(true), 512 * 3 + 3);
    let trainable: Vec<Tensor> = model.parameters().into_iter().filter(|p| p.requires_grad()).collect();
    assert_eq!(trainable.len(), 2);
    let mut opt = SGD::new(trainable, SGDOptions { lr: 0.1, ..Default::default() })?;

    model.train();
    model.apply(&mut |m| {
        if m.as_any().is::<BatchNorm2d>() {
            m.eval()
        }
    });
    let conv = model.get_parameter("layer1.0.conv1.weight")?.detach().deep_clone()?;
    let mean = model.get_buffer("layer1.0.bn1.running_mean")?.deep_clone()?;
    let head = model.fc.weight.detach().deep_clone()?;
    let x = Tensor::randn([4, 3, 32, 32], DType::F32)?;
    let y = Tensor::new([0i64, 1, 2, 0])?;
    opt.zero_grad()?;
    F::cross_entropy(&model.call(&x)?, &y, &Default::default())?.backward()?;
    opt.step()?;

    assert!(model.get_parameter("layer1.0.conv1.weight")?.grad().is_none());
    assert!(model.get_parameter("layer1.0.conv1.weight")?.allclose(&conv, 0.0, 0.0, false)?);
    assert!(model.get_buffer("layer1.0.bn1.running_mean")?.allclose(&mean, 0.0, 0.0, false)?);
    assert_eq!(model.get_buffer("layer1.0.bn1.num_batches_tracked")?.item::<i64>()?, 0);
    assert!(!model.fc.weight.allclose(&head, 0.0, 0.0, false)?, "the head trained");

    // unfrozen and in train mode, the BatchNorms update their statistics
    model.requires_grad_(true)?;
    model.train();
    model.call(&x)?;
    assert!(!model.get_buffer("layer1.0.bn1.running_mean")?.allclose(&mean, 0.0, 0.0, false)?);
    assert_eq!(model.get_buffer("layer1.0.bn1.num_batches_tracked")?.item::<i64>()?, 1);
    Ok(())
}

#[test]
fn zero_init_residual_zeroes_the_last_norm_of_each_branch() -> pyrite::Result<()> {
    let zero = |m: &dyn Module, key: &str| {
        m.get_parameter(key).unwrap().abs().unwrap().max().unwrap().item::<f32>().unwrap() == 0.0
    };
    let r18 = resnet18(ResNetOptions { num_classes: 10, zero_init_residual: true, ..Default::default() })?;
    assert!(zero(&r18, "layer1.0.bn2.weight") && zero(&r18, "layer4.1.bn2.weight"));
    assert!(!zero(&r18, "layer1.0.bn1.weight") && !zero(&r18, "layer2.0.downsample.1.weight"));
    let r50 = resnet50(ResNetOptions { num_classes: 10, zero_init_residual: true, ..Default::default() })?;
    assert!(zero(&r50, "layer3.5.bn3.weight") && !zero(&r50, "layer3.5.bn2.weight"));
    // each block then starts as relu(identity or projection): the blocks of layer1 keep a
    // non-negative input as it is
    r18.eval();
    let x = Tensor::rand([1, 64, 8, 8], DType::F32)?;
    assert!(r18.layer1.call(&x)?.allclose(&x, 0.0, 0.0, false)?);
    Ok(())
}

#[test]
fn blocks_pass_gradcheck_in_f64() -> pyrite::Result<()> {
    use pyrite::autograd::{gradcheck, GradcheckOptions};
    use pyrite::nn::{ConvOptions, Sequential};
    pyrite::manual_seed(0);
    let opts = GradcheckOptions { eps: 1e-6, atol: 1e-6, rtol: 1e-4 };
    let x = Tensor::randn([1, 4, 5, 5], DType::F64)?.requires_grad_(true)?;

    let mut basic = BasicBlock::new(4, 4, 1, None, 1, 64, 1)?;
    basic.to_dtype(DType::F64)?;
    basic.eval();
    gradcheck(|x| basic.call(&x[0]), std::slice::from_ref(&x), opts)?;

    let down = Sequential::new()
        .append(Conv2d::new(4, 8, 1, ConvOptions::new().stride(2).bias(false))?)
        .append(BatchNorm2d::new(8)?);
    let mut bottleneck = Bottleneck::new(4, 2, 2, Some(down), 1, 64, 1)?;
    bottleneck.to_dtype(DType::F64)?;
    bottleneck.train(); // batch statistics, and the projection of the identity
    gradcheck(|x| bottleneck.call(&x[0]), std::slice::from_ref(&x), opts)?;

    let mut inverted = InvertedResidual::new(4, 4, 1, 2)?;
    inverted.to_dtype(DType::F64)?;
    inverted.eval();
    assert!(inverted.use_res_connect);
    gradcheck(|x| inverted.call(&x[0]), std::slice::from_ref(&x), opts)?;
    Ok(())
}

// ---------------------------------------------------------------------------------- errors

#[test]
fn bad_configurations_and_inputs_are_errors() {
    let err = |r: pyrite::Result<()>| r.unwrap_err().to_string();
    let r = |o: ResNetOptions| err(resnet18(o).map(drop));
    assert!(r(ResNetOptions { width_per_group: 32, ..Default::default() })
        .contains("BasicBlock only supports groups=1 and base_width=64"));
    assert!(r(ResNetOptions { groups: 2, ..Default::default() }).contains("BasicBlock only supports"));
    assert!(r(ResNetOptions { replace_stride_with_dilation: [false, true, false], ..Default::default() })
        .contains("Dilation > 1 not supported in BasicBlock"));
    assert!(err(ResNet::new(Block::Bottleneck, [3, 0, 6, 3], Default::default()).map(drop))
        .contains("at least one block"));
    assert!(err(InvertedResidual::new(8, 8, 3, 6).map(drop)).contains("stride should be 1 or 2 instead of 3"));
    let m = |o: MobileNetV2Options| err(mobilenet_v2(o).map(drop));
    assert!(m(MobileNetV2Options { width_mult: 0.0, ..Default::default() }).contains("width_mult"));
    assert!(m(MobileNetV2Options { width_mult: f64::NAN, ..Default::default() }).contains("width_mult"));
    assert!(m(MobileNetV2Options { inverted_residual_setting: Some(vec![]), ..Default::default() })
        .contains("non-empty"));
    assert!(m(MobileNetV2Options { dropout: 1.5, ..Default::default() }).contains("between 0 and 1"));
    assert!(m(MobileNetV2Options { round_nearest: 0, ..Default::default() }).contains("round_nearest"));
    let features = make_layers(&[VggLayer::Conv(8), VggLayer::MaxPool], false).unwrap();
    assert!(err(Vgg::new(features, VggOptions { dropout: -0.1, ..Default::default() }).map(drop))
        .contains("dropout"));

    let model = resnet18(ResNetOptions { num_classes: 10, ..Default::default() }).unwrap();
    model.eval();
    let e = err(model.call(&Tensor::zeros([1, 1, 32, 32], DType::F32).unwrap()).map(drop));
    assert!(e.contains("expected input[1, 1, 32, 32] to have 3 channels"), "{e}");
    let e = err(model.call(&Tensor::zeros([3, 32, 32], DType::F32).unwrap()).map(drop));
    assert!(e.contains("expected 4D input (got 3D input)"), "{e}");
}
