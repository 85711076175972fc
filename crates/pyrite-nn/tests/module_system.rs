//! The Module system as a PyTorch user sees it, checked against the same model written in
//! PyTorch (`reference/gen_nn_model.py`): names, order, repr, state_dict, a strict load of
//! PyTorch's weights, forward in train and eval mode, gradients, and load errors.

mod common;

use common::{assert_close, load_json, load_tensors};
use pyrite::nn::{
    self, BatchNorm1d, Dropout, Embedding, LayerNorm, Linear, Module, ModuleBase, ModuleDict, ModuleList,
    ReLU, Sequential, StateDict, Value,
};
use pyrite::{DType, Result, Tensor};

#[derive(nn::Module)]
struct Block {
    base: ModuleBase,
    fc: Linear,
    norm: LayerNorm,
    act: ReLU,
}

impl Block {
    fn new(d: usize) -> Result<Block> {
        Ok(Block {
            base: ModuleBase::new(),
            fc: Linear::new(d, d)?,
            norm: LayerNorm::new(&[d])?,
            act: ReLU::new(),
        })
    }
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.act.call(&self.norm.call(&self.fc.call(x)?)?)?.add(x)
    }
}

#[derive(nn::Module)]
struct Net {
    base: ModuleBase,
    embed: Embedding,
    blocks: Sequential,
    heads: ModuleDict,
    bn: BatchNorm1d,
    layers: ModuleList,
    #[module(skip)]
    _note: std::collections::HashMap<String, String>,
}

impl Net {
    fn new() -> Result<Net> {
        let mut base = ModuleBase::new();
        base.register_buffer("scale", Some(Tensor::ones([8], DType::F32)?.mul_scalar(0.5)?), true)?;
        base.register_buffer("cache", Some(Tensor::zeros([2], DType::F32)?), false)?;
        Ok(Net {
            base,
            embed: Embedding::new(10, 8)?.padding_idx(0)?,
            blocks: Sequential::new().append(Block::new(8)?).append(Block::new(8)?),
            heads: ModuleDict::new()
                .add("cls", Linear::new(8, 3)?)?
                .add("reg", Linear::with_options(8, 1, false, DType::F32)?)?,
            bn: BatchNorm1d::new(8)?,
            layers: ModuleList::new().append(Linear::new(8, 8)?).append(Dropout::new(0.1)?),
            _note: Default::default(),
        })
    }
}

impl Module for Net {
    fn forward_value(&self, input: Value) -> Result<Value> {
        let idx = input.into_tensor()?;
        let scale = self.base.buffer("scale").unwrap();
        let h = self.embed.call(&idx)?.mean_dims(&[1], false)?.mul(scale)?;
        let h = self.blocks.call(&h)?;
        let h = self.bn.call(&h)?;
        let h = self.layers.get(0)?.call(&h)?;
        Ok(Value::from((self.heads.get("cls")?.call(&h)?, self.heads.get("reg")?.call(&h)?)))
    }
}

fn names<T>(v: &[(String, T)]) -> Vec<&str> {
    v.iter().map(|(n, _)| n.as_str()).collect()
}

fn json_names(j: &serde_json::Value, key: &str) -> Vec<String> {
    j[key].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn names_order_and_repr_match_pytorch() -> Result<()> {
    let j = load_json("nn_model.json");
    let net = Net::new()?;
    assert_eq!(names(&net.named_parameters()), json_names(&j, "named_parameters"));
    assert_eq!(names(&net.named_buffers()), json_names(&j, "named_buffers"));
    assert_eq!(names(&net.named_children()), json_names(&j, "named_children"));
    let mods = net.named_modules();
    let want: Vec<(String, String)> = j["named_modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().into(), e["class"].as_str().unwrap().into()))
        .collect();
    let got: Vec<(String, String)> =
        mods.iter().map(|(n, m)| (n.clone(), m.type_name().to_string())).collect();
    assert_eq!(got, want);
    let sd = net.state_dict()?;
    let want_keys: Vec<String> =
        j["state_dict_keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().into()).collect();
    assert_eq!(sd.keys().collect::<Vec<_>>(), want_keys);
    assert_eq!(net.num_parameters(false) as u64, j["num_parameters"].as_u64().unwrap());
    assert_eq!(net.to_string(), j["repr"].as_str().unwrap());
    Ok(())
}

#[test]
fn pytorch_weights_load_strictly_and_forward_backward_match() -> Result<()> {
    let j = load_json("nn_model.json");
    let (t, _) = load_tensors("nn_model.safetensors");
    let tol = &j["tolerance"];
    let (atol, rtol) = (tol["atol"].as_f64().unwrap(), tol["rtol"].as_f64().unwrap());
    let net = Net::new()?;
    let sd: StateDict =
        t.iter().filter_map(|(k, v)| k.strip_prefix("sd/").map(|k| (k.to_string(), v.clone()))).collect();
    // a HashMap has no order; the load does not need one
    let r = net.load_state_dict(&sd, true)?;
    assert!(r.missing_keys.is_empty() && r.unexpected_keys.is_empty());
    net.train();
    let out = net.call_value(Value::Tensor(t["idx"].clone()))?;
    let (cls, reg) = (out.get(0)?.as_tensor()?.clone(), out.get(1)?.as_tensor()?.clone());
    assert_close(&cls, &t["out_train/cls"], atol, rtol, "train cls");
    assert_close(&reg, &t["out_train/reg"], atol, rtol, "train reg");
    cls.sum()?.add(&reg.square()?.sum()?)?.backward()?;
    for (name, p) in net.named_parameters() {
        let want = &t[&format!("grad/{name}")];
        assert_close(&p.grad().expect(&name), want, atol, rtol, &format!("grad of {name}"));
    }
    let sd_after = net.state_dict()?;
    for k in j["sd_after_keys"].as_array().unwrap() {
        let k = k.as_str().unwrap();
        assert_close(sd_after.get(k).unwrap(), &t[&format!("sd_after/{k}")], atol, rtol, k);
    }
    net.eval();
    assert!(!net.is_training() && !net.bn.is_training() && !net.layers.get(1)?.is_training());
    let out = {
        let _g = pyrite::autograd::no_grad();
        net.call_value(Value::Tensor(t["idx"].clone()))?
    };
    assert_close(out.get(0)?.as_tensor()?, &t["out_eval/cls"], atol, rtol, "eval cls");
    assert_close(out.get(1)?.as_tensor()?, &t["out_eval/reg"], atol, rtol, "eval reg");
    Ok(())
}

#[test]
fn load_state_dict_reports_problems_as_pytorch_does() -> Result<()> {
    let j = load_json("nn_model.json");
    let cases = &j["load_state_dict"];
    let net = Net::new()?;
    let good = net.state_dict()?;
    // one key missing, one unexpected
    let c = &cases["missing_and_unexpected"];
    let mut sd = good.clone();
    sd.remove(c["removed_key"].as_str().unwrap());
    sd.insert(c["added_key"].as_str().unwrap(), Tensor::zeros([1], DType::F32)?);
    let e = net.load_state_dict(&sd, true).unwrap_err();
    assert_eq!(e.message(), c["message"].as_str().unwrap());
    let r = net.load_state_dict(&sd, false)?;
    assert_eq!(r.missing_keys, [c["removed_key"].as_str().unwrap()]);
    assert_eq!(r.unexpected_keys, [c["added_key"].as_str().unwrap()]);
    // a wrong shape is an error even when not strict
    for case in ["wrong_shape", "wrong_shape_strict_false"] {
        let c = &cases[case];
        let mut sd = good.clone();
        let shape: Vec<usize> =
            c["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        sd.insert(c["key"].as_str().unwrap(), Tensor::zeros(shape, DType::F32)?);
        let e = net.load_state_dict(&sd, c["strict"].as_bool().unwrap()).unwrap_err();
        assert_eq!(e.message(), c["message"].as_str().unwrap());
    }
    Ok(())
}

#[test]
fn state_dict_tensors_are_detached_and_share_storage() -> Result<()> {
    let net = Net::new()?;
    let sd = net.state_dict()?;
    let w = sd.get("heads.cls.weight").unwrap();
    assert!(!w.requires_grad());
    assert!(w.same_storage(&net.get_parameter("heads.cls.weight")?));
    // a load copies into the existing tensors, under no_grad
    let other = Net::new()?;
    other.load_state_dict(&sd, true)?;
    let p = other.get_parameter("heads.cls.weight")?;
    assert!(p.requires_grad() && p.is_leaf());
    assert!(p.allclose(w, 0.0, 0.0, false)?);
    assert!(!p.same_storage(w));
    // non-persistent buffers stay out
    assert!(!sd.contains_key("cache") && sd.contains_key("scale"));
    Ok(())
}

#[test]
fn introspection_train_eval_apply_freeze_and_to_dtype() -> Result<()> {
    let mut net = Net::new()?;
    assert_eq!(net.get_submodule("blocks.1.fc")?.type_name(), "Linear");
    assert!(net.get_submodule("blocks.7").is_err());
    assert_eq!(net.get_buffer("bn.running_var")?.dims(), &[8]);
    assert!(net.get_parameter("heads.reg.bias").is_err());
    // apply is post-order: children before their parent
    let mut order = Vec::new();
    net.blocks.apply(&mut |m| order.push(m.type_name().to_string()));
    assert_eq!(
        order,
        ["Linear", "LayerNorm", "ReLU", "Block", "Linear", "LayerNorm", "ReLU", "Block", "Sequential"]
    );
    net.eval();
    assert!(net.modules().iter().all(|m| !m.is_training()));
    net.train();
    assert!(net.modules().iter().all(|m| m.is_training()));
    // freeze the backbone, keep the heads trainable
    net.blocks.requires_grad_(false)?;
    net.embed.requires_grad_(false)?;
    let trainable: Vec<String> =
        net.named_parameters().into_iter().filter(|(_, p)| p.requires_grad()).map(|(n, _)| n).collect();
    assert!(trainable.iter().all(|n| !n.starts_with("blocks") && !n.starts_with("embed")));
    assert_eq!(net.num_parameters(true), net.num_parameters(false) - 80 - 2 * (72 + 16));
    // zero_grad sets grads to None
    net.heads.get("cls")?.get_parameter("weight")?.set_grad(Some(Tensor::ones([3, 8], DType::F32)?))?;
    net.zero_grad()?;
    assert!(net.parameters().iter().all(|p| p.grad().is_none()));
    // to_dtype converts floating parameters and buffers, keeping requires_grad
    net.to_dtype(DType::F64)?;
    assert!(net.parameters().iter().all(|p| p.dtype() == DType::F64));
    assert_eq!(net.get_buffer("bn.num_batches_tracked")?.dtype(), DType::I64);
    assert_eq!(net.get_buffer("scale")?.dtype(), DType::F64);
    assert!(!net.get_parameter("embed.weight")?.requires_grad());
    assert!(net.get_parameter("heads.cls.weight")?.requires_grad());
    Ok(())
}

#[test]
fn dynamic_registration_follows_pytorchs_rules() -> Result<()> {
    let mut base = ModuleBase::new();
    base.register_parameter("w", Some(nn::Parameter::new(Tensor::ones([2], DType::F32)?)?))?;
    base.register_parameter("absent", None)?;
    base.add_module("fc", Linear::new(2, 2)?)?;
    assert!(base.register_buffer("w", None, true).unwrap_err().message().contains("already exists"));
    assert!(base
        .add_module("a.b", ReLU::new())
        .unwrap_err()
        .message()
        .contains("can't be empty or contain \".\""));
    #[derive(nn::Module)]
    struct Dynamic {
        base: ModuleBase,
    }
    impl Module for Dynamic {}
    let d = Dynamic { base };
    assert_eq!(names(&d.named_parameters()), ["w", "fc.weight", "fc.bias"]);
    assert_eq!(d.state_dict()?.keys().collect::<Vec<_>>(), ["w", "fc.weight", "fc.bias"]);
    // a module without forward says so, as PyTorch does
    let e = d.call(&Tensor::ones([2], DType::F32)?).unwrap_err();
    assert_eq!(e.message(), "Module [Dynamic] is missing the required \"forward\" function");
    Ok(())
}

#[test]
fn a_shared_module_is_listed_once_but_saved_under_each_name() -> Result<()> {
    use std::sync::Arc;
    #[derive(nn::Module)]
    struct Tied {
        base: ModuleBase,
        enc: Arc<Linear>,
        dec: Arc<Linear>,
        extra: Vec<Linear>,
        maybe: Option<ReLU>,
    }
    impl Module for Tied {}
    let shared = Arc::new(Linear::new(3, 3)?);
    let mut t = Tied {
        base: ModuleBase::new(),
        enc: shared.clone(),
        dec: shared,
        extra: vec![Linear::new(3, 1)?, Linear::new(1, 1)?],
        maybe: None,
    };
    assert_eq!(names(&t.named_modules()), ["", "enc", "extra.0", "extra.1"]);
    assert_eq!(
        names(&t.named_parameters()),
        ["enc.weight", "enc.bias", "extra.0.weight", "extra.0.bias", "extra.1.weight", "extra.1.bias"]
    );
    let keys: Vec<String> = t.state_dict()?.keys().map(String::from).collect();
    assert_eq!(&keys[..4], ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]);
    // a shared module cannot be converted in place
    let e = t.to_dtype(DType::F64).unwrap_err();
    assert!(e.message().contains("shared"), "{e}");
    Ok(())
}

#[test]
fn containers_index_slice_insert_and_print() -> Result<()> {
    let mut seq = Sequential::new().append(Linear::new(2, 3)?).append(ReLU::new());
    seq.insert(1, Dropout::new(0.2)?)?;
    assert_eq!(names(&seq.named_children()), ["0", "1", "2"]);
    assert_eq!(seq.get(-1)?.type_name(), "ReLU");
    assert!(seq.get_as::<Dropout>(1).is_some() && seq.get_as::<Linear>(1).is_none());
    assert!(seq.get(3).is_err());
    let tail = seq.slice(1..3);
    assert_eq!(names(&tail.named_children()), ["1", "2"]);
    seq.remove(1)?;
    assert_eq!(
        seq.to_string(),
        "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)"
    );
    let mut pl = nn::ParameterList::new();
    pl.push(nn::Parameter::new(Tensor::zeros([3, 4], DType::F32)?)?);
    // PyTorch 2.15 prints a one-entry ParameterList on one line
    assert_eq!(pl.to_string(), "ParameterList(  (0): Parameter containing: [torch.float32 of size 3x4])");
    let mut pd = nn::ParameterDict::new();
    pd.insert("a", nn::Parameter::new(Tensor::zeros([2], DType::F64)?)?)?;
    assert_eq!(names(&pd.named_parameters()), ["a"]);
    assert_eq!(pd.to_string(), "ParameterDict(  (a): Parameter containing: [torch.DoubleTensor of size 2])");
    let j = load_json("nn_model.json");
    let r = |k: &str| j["extra_reprs"][k]["repr"].as_str().unwrap().to_string();
    assert_eq!(
        nn::ModuleList::new().append(Linear::new(2, 2)?).append(ReLU::new()).to_string(),
        r("ModuleList")
    );
    let repeated = nn::ModuleList::new()
        .append(Linear::new(2, 2)?)
        .append(Linear::new(2, 2)?)
        .append(Linear::new(2, 2)?);
    assert_eq!(repeated.to_string(), r("ModuleList_repeated"));
    assert_eq!(
        ModuleDict::new().add("a", ReLU::new())?.add("b", nn::Tanh::new())?.to_string(),
        r("ModuleDict")
    );
    assert_eq!(Sequential::new().to_string(), r("Sequential_empty"));
    Ok(())
}

#[test]
fn reprs_of_single_layers_match_pytorch() -> Result<()> {
    let j = load_json("nn_model.json");
    let r = |k: &str| j["layer_reprs"][k]["repr"].as_str().unwrap().to_string();
    use pyrite::nn::*;
    assert_eq!(Identity::new().to_string(), r("Identity"));
    assert_eq!(Linear::new(4, 3)?.to_string(), r("Linear"));
    assert_eq!(Bilinear::new(3, 4, 2, true)?.to_string(), r("Bilinear"));
    assert_eq!(Flatten::new().to_string(), r("Flatten"));
    assert_eq!(Unflatten::new(1, &[2, 3]).to_string(), r("Unflatten"));
    assert_eq!(BatchNorm1d::new(3)?.to_string(), r("BatchNorm1d"));
    let o = normalization::NormOptions {
        momentum: None,
        affine: false,
        ..normalization::NormOptions::batch_norm()
    };
    assert_eq!(BatchNorm2d::with_options(3, o)?.to_string(), r("BatchNorm2d"));
    assert_eq!(LayerNorm::with_options(&[3, 4], 1e-5, true, false)?.to_string(), r("LayerNorm"));
    assert_eq!(GroupNorm::new(2, 4)?.to_string(), r("GroupNorm"));
    assert_eq!(normalization::InstanceNorm1d::new(3)?.to_string(), r("InstanceNorm1d"));
    assert_eq!(RMSNorm::new(&[4], None, true)?.to_string(), r("RMSNorm"));
    assert_eq!(normalization::LocalResponseNorm::new(3).to_string(), r("LocalResponseNorm"));
    assert_eq!(Dropout::new(0.5)?.to_string(), r("Dropout"));
    assert_eq!(Dropout2d::new(0.5)?.to_string(), r("Dropout2d"));
    assert_eq!(AlphaDropout::new(0.5)?.to_string(), r("AlphaDropout"));
    assert_eq!(Embedding::new(10, 4)?.padding_idx(0)?.max_norm(1.0, 2.0).to_string(), r("Embedding"));
    assert_eq!(sparse::EmbeddingBag::new(8, 3, functional::BagMode::Mean)?.to_string(), r("EmbeddingBag"));
    assert_eq!(ReLU::new().to_string(), r("ReLU"));
    assert_eq!(LeakyReLU::new().negative_slope(0.2).to_string(), r("LeakyReLU"));
    assert_eq!(PReLU::new(3, 0.25)?.to_string(), r("PReLU"));
    assert_eq!(ELU::new().alpha(1.5).to_string(), r("ELU"));
    assert_eq!(CELU::new().alpha(0.7).to_string(), r("CELU"));
    assert_eq!(GELU::new().approximate(functional::GeluApproximate::Tanh).to_string(), r("GELU"));
    assert_eq!(Hardtanh::new().min_val(-0.5).max_val(1.5).to_string(), r("Hardtanh"));
    assert_eq!(Softplus::new().beta(2.0).threshold(5.0).to_string(), r("Softplus"));
    assert_eq!(Softshrink::new().lambd(0.3).to_string(), r("Softshrink"));
    assert_eq!(Hardshrink::new().lambd(0.4).to_string(), r("Hardshrink"));
    assert_eq!(Threshold::new().threshold(0.1).value(-1.0).to_string(), r("Threshold"));
    assert_eq!(GLU::new().dim(1).to_string(), r("GLU"));
    assert_eq!(Softmax::new().dim(1).to_string(), r("Softmax"));
    assert_eq!(LogSoftmax::new().dim(-1).to_string(), r("LogSoftmax"));
    assert_eq!(Softmin::new().dim(0).to_string(), r("Softmin"));
    let so = ConvOptions::new;
    assert_eq!(Conv1d::new(2, 3, 3, so().stride(2).padding(1))?.to_string(), r("Conv1d"));
    let c2 =
        so().stride([2, 1]).padding([1, 2]).groups(2).bias(false).padding_mode(functional::PadMode::Reflect);
    assert_eq!(Conv2d::new(4, 2, 3, c2)?.to_string(), r("Conv2d"));
    assert_eq!(Conv3d::new(2, 2, 3, so().padding_same().dilation(2))?.to_string(), r("Conv3d"));
    assert_eq!(
        ConvTranspose1d::new(2, 3, 3, so().stride(2).padding(1).output_padding(1))?.to_string(),
        r("ConvTranspose1d")
    );
    assert_eq!(
        ConvTranspose2d::new(4, 2, 3, so().stride(2).groups(2).dilation(2))?.to_string(),
        r("ConvTranspose2d")
    );
    assert_eq!(ConvTranspose3d::new(2, 2, 2, so().stride(2))?.to_string(), r("ConvTranspose3d"));
    let po = PoolOptions::new;
    assert_eq!(MaxPool1d::new(3, po().stride(2)).to_string(), r("MaxPool1d"));
    assert_eq!(
        MaxPool2d::new(3, po().stride(2).padding(1).return_indices(true).ceil_mode(true)).to_string(),
        r("MaxPool2d")
    );
    assert_eq!(MaxPool3d::new(2, po()).to_string(), r("MaxPool3d"));
    assert_eq!(MaxUnpool1d::new(2, None, 0)?.to_string(), r("MaxUnpool1d"));
    assert_eq!(MaxUnpool2d::new(3, Some(vec![2]), 1)?.to_string(), r("MaxUnpool2d"));
    assert_eq!(
        AvgPool1d::new(3, po().stride(2).padding(1).count_include_pad(false)).to_string(),
        r("AvgPool1d")
    );
    assert_eq!(AvgPool2d::new(2, po().padding(1).divisor_override(3)).to_string(), r("AvgPool2d"));
    assert_eq!(AvgPool3d::new(2, po().ceil_mode(true)).to_string(), r("AvgPool3d"));
    assert_eq!(AdaptiveAvgPool1d::new(&[Some(3)]).to_string(), r("AdaptiveAvgPool1d"));
    assert_eq!(AdaptiveAvgPool2d::new(&[None, Some(3)]).to_string(), r("AdaptiveAvgPool2d"));
    assert_eq!(AdaptiveMaxPool1d::new(&[Some(4)]).to_string(), r("AdaptiveMaxPool1d"));
    assert_eq!(AdaptiveMaxPool2d::new(&[Some(3), Some(4)]).to_string(), r("AdaptiveMaxPool2d"));
    assert_eq!(LPPool1d::new(2.0, 3, Some(vec![2]), false).to_string(), r("LPPool1d"));
    assert_eq!(LPPool2d::new(2.0, 2, None, false).to_string(), r("LPPool2d"));
    assert_eq!(FeatureAlphaDropout::new(0.5)?.to_string(), r("FeatureAlphaDropout"));
    assert_eq!(RReLU::new().lower(0.1).upper(0.3).to_string(), r("RReLU"));
    assert_eq!(Softmax2d::new().to_string(), r("Softmax2d"));
    assert_eq!(PixelShuffle::new(2).to_string(), r("PixelShuffle"));
    assert_eq!(PixelUnshuffle::new(2).to_string(), r("PixelUnshuffle"));
    assert_eq!(ChannelShuffle::new(2).to_string(), r("ChannelShuffle"));
    assert_eq!(ZeroPad2d::new(&[1, 2, 0, 3])?.to_string(), r("ZeroPad2d"));
    assert_eq!(ConstantPad1d::new(&[2])?.value(3.5).to_string(), r("ConstantPad1d"));
    assert_eq!(ConstantPad3d::new(&[1])?.value(0.5).to_string(), r("ConstantPad3d"));
    assert_eq!(ReflectionPad1d::new(&[2])?.to_string(), r("ReflectionPad1d"));
    assert_eq!(ReplicationPad2d::new(&[2])?.to_string(), r("ReplicationPad2d"));
    assert_eq!(CircularPad1d::new(&[2, 1])?.to_string(), r("CircularPad1d"));
    // the Sequential of PyTorch's documentation example
    let seq = Sequential::new()
        .append(Conv2d::new(1, 32, 3, so().padding(1))?)
        .append(BatchNorm2d::new(32)?)
        .append(MaxPool2d::new(2, po()))
        .append(Dropout::new(0.5)?)
        .append(GELU::new().approximate(functional::GeluApproximate::Tanh))
        .append(Embedding::new(10, 3)?.padding_idx(0)?)
        .append(LayerNorm::new(&[4])?);
    assert_eq!(seq.to_string(), j["repr_sequential"]["repr"].as_str().unwrap());
    for (layer, name) in [
        (Box::new(ReLU6::new()) as Box<dyn Module>, "ReLU6"),
        (Box::new(SELU::new()), "SELU"),
        (Box::new(SiLU::new()), "SiLU"),
        (Box::new(Mish::new()), "Mish"),
        (Box::new(Sigmoid::new()), "Sigmoid"),
        (Box::new(LogSigmoid::new()), "LogSigmoid"),
        (Box::new(Tanh::new()), "Tanh"),
        (Box::new(Hardsigmoid::new()), "Hardsigmoid"),
        (Box::new(Hardswish::new()), "Hardswish"),
        (Box::new(Softsign::new()), "Softsign"),
        (Box::new(Tanhshrink::new()), "Tanhshrink"),
    ] {
        assert_eq!(layer.repr(), r(name));
    }
    Ok(())
}

#[test]
fn a_norm_state_dict_without_num_batches_tracked_loads_strictly() -> Result<()> {
    // PyTorch's _NormBase._load_from_state_dict fills the counter in (older checkpoints)
    fn without(sd: &StateDict, key: &str) -> StateDict {
        sd.iter().filter(|(k, _)| !k.ends_with(key)).map(|(k, t)| (k.to_string(), t.clone())).collect()
    }
    let trained = BatchNorm1d::new(3)?;
    trained.call(&Tensor::randn([4, 3], DType::F32)?)?;
    let old = without(&trained.state_dict()?, "num_batches_tracked");
    assert!(!old.contains_key("num_batches_tracked"));
    let fresh = BatchNorm1d::new(3)?;
    let keys = fresh.load_state_dict(&old, true)?;
    assert!(keys.missing_keys.is_empty() && keys.unexpected_keys.is_empty(), "{keys:?}");
    assert_eq!(fresh.num_batches_tracked.as_ref().unwrap().item::<i64>()?, 0);
    let mean = |m: &BatchNorm1d| m.running_mean.as_ref().unwrap().tensor().clone();
    assert_close(&mean(&fresh), &mean(&trained), 0.0, 0.0, "running_mean");
    // the counter keeps its current value, as in PyTorch (a trained layer's stays at 1)
    trained.load_state_dict(&old, true)?;
    assert_eq!(trained.num_batches_tracked.as_ref().unwrap().item::<i64>()?, 1);

    // BatchNorm2d inside a container (the key has a prefix), and a tracking InstanceNorm
    let net = Sequential::new().append(nn::BatchNorm2d::new(2)?).append(nn::InstanceNorm1d::with_options(
        2,
        nn::normalization::NormOptions {
            track_running_stats: true,
            ..nn::normalization::NormOptions::instance_norm()
        },
    )?);
    let sd = net.state_dict()?;
    assert!(sd.contains_key("0.num_batches_tracked") && sd.contains_key("1.num_batches_tracked"));
    let keys = net.load_state_dict(&without(&sd, "num_batches_tracked"), true)?;
    assert!(keys.missing_keys.is_empty(), "{keys:?}");
    assert_eq!(net.get_buffer("0.num_batches_tracked")?.item::<i64>()?, 0);

    // other keys are still missing keys
    let e = BatchNorm1d::new(3)?.load_state_dict(&without(&old, "running_mean"), true).unwrap_err();
    assert!(e.to_string().contains("Missing key(s) in state_dict: \"running_mean\"."), "{e}");
    let keys = BatchNorm1d::new(3)?.load_state_dict(&without(&old, "running_mean"), false)?;
    assert_eq!(keys.missing_keys, ["running_mean"]);
    Ok(())
}
