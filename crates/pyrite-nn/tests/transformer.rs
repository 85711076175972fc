//! The Transformer layers against PyTorch (`reference/gen_attention.py`): encoder and decoder
//! layers (relu/gelu, post-LN and pre-LN, batch_first, bias=False, causal hints, every kind of
//! mask), `TransformerEncoder` / `TransformerDecoder` with final norms, and `nn.Transformer`.
//! Each case loads PyTorch's state_dict strictly (checking the key order), compares the repr,
//! the output and the gradients of every input and parameter to 1e-5.

mod common;

use common::{assert_close, load_json, load_tensors};
use pyrite::nn::transformer::{Activation, DecoderMasks, EncoderMasks, TransformerMasks};
use pyrite::nn::*;
use pyrite::{DType, Result, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;

const TOL: f64 = 1e-5;

fn t<'a>(ts: &'a HashMap<String, Tensor>, key: &str) -> &'a Tensor {
    ts.get(key).unwrap_or_else(|| panic!("reference tensor {key}"))
}

fn leaf(x: &Tensor) -> Tensor {
    let x = x.detach().deep_clone().unwrap();
    if x.dtype().is_floating_point() {
        x.requires_grad_(true).unwrap()
    } else {
        x
    }
}

fn layer_opts(c: &J) -> TransformerLayerOptions {
    TransformerLayerOptions {
        dim_feedforward: c["dim_feedforward"].as_u64().unwrap_or(2048) as usize,
        dropout: c["dropout"].as_f64().unwrap_or(0.1),
        activation: Activation::from_name(c["activation"].as_str().unwrap_or("relu")).unwrap(),
        layer_norm_eps: c["layer_norm_eps"].as_f64().unwrap_or(1e-5),
        batch_first: c["batch_first"].as_bool().unwrap_or(false),
        norm_first: c["norm_first"].as_bool().unwrap_or(false),
        bias: c["bias"].as_bool().unwrap_or(true),
    }
}

/// The module of a case, and a closure running it on the case's inputs.
type Runner = Box<dyn Fn(&HashMap<String, Tensor>) -> Result<Tensor>>;

fn build(c: &J) -> (std::sync::Arc<dyn Module>, Runner) {
    let ctor = &c["ctor"];
    let call = c["call"].clone();
    let (d, nh) = (8, 2);
    let get = |m: &HashMap<String, Tensor>, n: &str| m.get(n).cloned();
    match c["kind"].as_str().unwrap() {
        "TransformerEncoderLayer" => {
            let l =
                std::sync::Arc::new(TransformerEncoderLayer::with_options(d, nh, layer_opts(ctor)).unwrap());
            let l2 = l.clone();
            let run: Runner = Box::new(move |ins| {
                let (mask, kpm) = (get(ins, "src_mask"), get(ins, "src_key_padding_mask"));
                let m = EncoderMasks {
                    src_mask: mask.as_ref(),
                    src_key_padding_mask: kpm.as_ref(),
                    is_causal: call["is_causal"].as_bool(),
                };
                l2.forward_with(&ins["src"], &m)
            });
            (l, run)
        }
        "TransformerDecoderLayer" => {
            let l =
                std::sync::Arc::new(TransformerDecoderLayer::with_options(d, nh, layer_opts(ctor)).unwrap());
            let l2 = l.clone();
            let run: Runner = Box::new(move |ins| {
                let ms: Vec<Option<Tensor>> =
                    ["tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask"]
                        .iter()
                        .map(|n| get(ins, n))
                        .collect();
                let m = DecoderMasks {
                    tgt_mask: ms[0].as_ref(),
                    memory_mask: ms[1].as_ref(),
                    tgt_key_padding_mask: ms[2].as_ref(),
                    memory_key_padding_mask: ms[3].as_ref(),
                    tgt_is_causal: call["tgt_is_causal"].as_bool(),
                    memory_is_causal: false,
                };
                l2.forward_with(&ins["tgt"], &ins["memory"], &m)
            });
            (l, run)
        }
        "TransformerEncoder" => {
            let o = TransformerLayerOptions {
                dim_feedforward: 16,
                dropout: 0.0,
                batch_first: true,
                ..Default::default()
            };
            let layer = TransformerEncoderLayer::with_options(d, nh, o).unwrap();
            let enc = std::sync::Arc::new(
                TransformerEncoder::new(layer, 2, Some(LayerNorm::new(&[d]).unwrap())).unwrap(),
            );
            let e2 = enc.clone();
            let run: Runner = Box::new(move |ins| {
                let (mask, kpm) = (get(ins, "mask"), get(ins, "src_key_padding_mask"));
                let m = EncoderMasks {
                    src_mask: mask.as_ref(),
                    src_key_padding_mask: kpm.as_ref(),
                    is_causal: None,
                };
                e2.forward_with(&ins["src"], &m)
            });
            (enc, run)
        }
        "TransformerDecoder" => {
            let o = TransformerLayerOptions {
                dim_feedforward: 16,
                dropout: 0.0,
                activation: Activation::Gelu,
                ..Default::default()
            };
            let layer = TransformerDecoderLayer::with_options(d, nh, o).unwrap();
            let dec = std::sync::Arc::new(
                TransformerDecoder::new(layer, 2, Some(LayerNorm::new(&[d]).unwrap())).unwrap(),
            );
            let d2 = dec.clone();
            let run: Runner = Box::new(move |ins| {
                let (tm, mk) = (get(ins, "tgt_mask"), get(ins, "memory_key_padding_mask"));
                let m = DecoderMasks {
                    tgt_mask: tm.as_ref(),
                    memory_key_padding_mask: mk.as_ref(),
                    ..Default::default()
                };
                d2.forward_with(&ins["tgt"], &ins["memory"], &m)
            });
            (dec, run)
        }
        "Transformer" => {
            let o = TransformerOptions {
                d_model: d,
                nhead: nh,
                num_encoder_layers: 2,
                num_decoder_layers: 2,
                dim_feedforward: 16,
                dropout: 0.0,
                batch_first: true,
                ..Default::default()
            };
            let tr = std::sync::Arc::new(Transformer::new(o).unwrap());
            let t2 = tr.clone();
            let run: Runner = Box::new(move |ins| {
                let (kpm, tm) = (get(ins, "src_key_padding_mask"), get(ins, "tgt_mask"));
                let m = TransformerMasks {
                    src_key_padding_mask: kpm.as_ref(),
                    tgt_mask: tm.as_ref(),
                    ..Default::default()
                };
                t2.forward_with(&ins["src"], &ins["tgt"], &m)
            });
            (tr, run)
        }
        other => panic!("unknown kind {other}"),
    }
}

#[test]
fn transformer_layers_match_pytorch() {
    let ts = load_tensors("attention.safetensors").0;
    let info = load_json("attention.json");
    let cases = info["layers"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let prefix = format!("layer_{name}");
        let p = |n: &str| t(&ts, &format!("{prefix}/{n}"));
        let (m, run) = build(c);
        assert_eq!(m.repr(), c["repr"].as_str().unwrap(), "{name}: repr");
        let want: Vec<&str> =
            c["state_dict_keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        let sd0 = m.state_dict().unwrap();
        assert_eq!(sd0.keys().collect::<Vec<_>>(), want, "{name}: state_dict keys");
        let mut sd = StateDict::new();
        for k in &want {
            sd.insert(*k, p(&format!("sd/{k}")).clone());
        }
        m.load_state_dict(&sd, true).unwrap();
        let names: Vec<String> =
            c["inputs"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
        let ins: HashMap<String, Tensor> =
            names.iter().map(|n| (n.clone(), leaf(p(&format!("in/{n}"))))).collect();
        let out = run(&ins).unwrap();
        assert_close(&out, p("out0"), TOL, TOL, &format!("{name}: output"));
        out.mul(p("g0")).unwrap().sum().unwrap().backward().unwrap();
        for n in &names {
            if ins[n].requires_grad() {
                // a mask the causal hint stands for gets no gradient (None in PyTorch: zeros)
                let g = ins[n].grad().unwrap_or_else(|| ins[n].zeros_like().unwrap());
                assert_close(&g, p(&format!("grad_in/{n}")), TOL, TOL, &format!("{name}: grad {n}"));
            }
        }
        for (n, param) in m.named_parameters() {
            let g = param.grad().unwrap_or_else(|| param.zeros_like().unwrap());
            assert_close(&g, p(&format!("grad/{n}")), TOL, TOL, &format!("{name}: grad {n}"));
        }
    }
}

#[test]
fn reprs_with_defaults_match_pytorch() {
    let info = load_json("attention.json");
    let r = |k: &str| info["reprs"][k].as_str().unwrap().to_string();
    let mha = MultiheadAttention::with_options(
        8,
        2,
        MultiheadAttentionOptions { kdim: Some(6), vdim: Some(5), add_bias_kv: true, ..Default::default() },
    )
    .unwrap();
    assert_eq!(mha.to_string(), r("MultiheadAttention(8, 2, kdim=6, vdim=5, add_bias_kv=True)"));
    assert_eq!(TransformerEncoderLayer::new(8, 2).unwrap().to_string(), r("TransformerEncoderLayer(8, 2)"));
    let o =
        TransformerLayerOptions { dim_feedforward: 16, activation: Activation::Gelu, ..Default::default() };
    assert_eq!(
        TransformerDecoderLayer::with_options(8, 2, o).unwrap().to_string(),
        r("TransformerDecoderLayer(8, 2, 16, activation='gelu')")
    );
    let o = TransformerOptions {
        d_model: 8,
        nhead: 2,
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        dim_feedforward: 16,
        ..Default::default()
    };
    assert_eq!(Transformer::new(o).unwrap().to_string(), r("Transformer(8, 2, 1, 1, 16)"));
}

#[test]
fn square_subsequent_mask_and_causal_detection() -> Result<()> {
    let info = load_json("attention.json");
    let m = Transformer::generate_square_subsequent_mask(3)?;
    let want: Vec<Vec<f32>> = info["generate_square_subsequent_mask_3"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|v| v.as_str().unwrap().parse::<f32>().unwrap()).collect())
        .collect();
    assert_eq!(m.to_vec2::<f32>()?, want);
    // an encoder given the causal mask without a hint finds it causal: same result as the hint
    let o = TransformerLayerOptions { dim_feedforward: 8, dropout: 0.0, ..Default::default() };
    let enc = TransformerEncoder::new(TransformerEncoderLayer::with_options(4, 2, o)?, 2, None)?;
    let x = Tensor::randn([5, 2, 4], DType::F32)?;
    let mask = Transformer::generate_square_subsequent_mask(5)?;
    let a = enc.forward_with(&x, &EncoderMasks { src_mask: Some(&mask), ..Default::default() })?;
    let b = enc.forward_with(
        &x,
        &EncoderMasks { src_mask: Some(&mask), is_causal: Some(true), ..Default::default() },
    )?;
    assert!(a.allclose(&b, 1e-6, 1e-6, false)?);
    Ok(())
}

#[test]
fn encoder_layers_are_independent_copies() -> Result<()> {
    let layer = TransformerEncoderLayer::with_options(
        4,
        2,
        TransformerLayerOptions { dim_feedforward: 8, ..Default::default() },
    )?;
    let enc = TransformerEncoder::new(layer, 3, Some(LayerNorm::new(&[4])?))?;
    let sd = enc.state_dict()?;
    let (a, b) = (sd.get("layers.0.linear1.weight").unwrap(), sd.get("layers.2.linear1.weight").unwrap());
    assert!(a.allclose(b, 0.0, 0.0, false)?, "copies start equal");
    assert!(!a.same_storage(b), "copies own their parameters");
    assert_eq!(enc.parameters().len(), 3 * 12 + 2);
    let names: Vec<String> = enc.named_modules().into_iter().map(|(n, _)| n).take(4).collect();
    assert_eq!(names, ["", "layers", "layers.0", "layers.0.self_attn"]);
    Ok(())
}

#[test]
fn layers_accept_value_tuples_and_keywords() -> Result<()> {
    let o =
        TransformerLayerOptions { dim_feedforward: 8, dropout: 0.0, batch_first: true, ..Default::default() };
    let layer = TransformerEncoderLayer::with_options(4, 2, o.clone())?;
    let x = Tensor::randn([2, 3, 4], DType::F32)?;
    let mask = Transformer::generate_square_subsequent_mask(3)?;
    let typed = layer.forward_with(&x, &EncoderMasks { src_mask: Some(&mask), ..Default::default() })?;
    let by_pos = layer.call_value(Value::from((x.clone(), mask.clone())))?.into_tensor()?;
    let by_kw = layer.call_value(Value::Tuple(vec![
        x.clone().into(),
        Value::Dict(vec![("src_mask".into(), mask.clone().into())]),
    ]))?;
    assert!(typed.allclose(&by_pos, 1e-6, 1e-6, false)?);
    assert!(typed.allclose(by_kw.as_tensor()?, 1e-6, 1e-6, false)?);
    let dec = TransformerDecoderLayer::with_options(4, 2, o)?;
    let y = dec.call_value(Value::from((x.clone(), x.clone())))?.into_tensor()?;
    assert_eq!(y.dims(), &[2, 3, 4]);
    let e = dec.call_value(Value::from(x.clone())).unwrap_err();
    assert_eq!(e.message(), "TransformerDecoderLayer.forward() missing required argument: 'memory'");
    Ok(())
}

#[test]
fn transformer_errors_are_pytorchs() -> Result<()> {
    let o = TransformerOptions {
        d_model: 4,
        nhead: 2,
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        dim_feedforward: 8,
        ..Default::default()
    };
    let t = Transformer::new(o)?;
    let src = Tensor::randn([5, 2, 4], DType::F32)?;
    let e = t
        .forward_with(&src, &Tensor::randn([3, 3, 4], DType::F32)?, &TransformerMasks::default())
        .unwrap_err();
    assert_eq!(e.message(), "the batch number of src and tgt must be equal");
    let e = t
        .forward_with(&src, &Tensor::randn([3, 2, 6], DType::F32)?, &TransformerMasks::default())
        .unwrap_err();
    assert_eq!(e.message(), "the feature number of src and tgt must be equal to d_model");
    assert_eq!(
        Activation::from_name("tanh").unwrap_err().message(),
        "activation should be relu/gelu, not tanh"
    );
    assert!(TransformerEncoderLayer::new(6, 4).is_err());
    let layer = TransformerEncoderLayer::new(4, 2)?;
    let e = layer.forward_with(&Tensor::randn([5, 2, 6], DType::F32)?, &EncoderMasks::default()).unwrap_err();
    assert_eq!(e.message(), "was expecting embedding dimension of 4, but got 6");
    let int_mask = Tensor::zeros([5, 5], DType::I64)?;
    let e = layer
        .forward_with(&src, &EncoderMasks { src_mask: Some(&int_mask), ..Default::default() })
        .unwrap_err();
    assert_eq!(e.message(), "only bool and floating types of src_mask are supported");
    // a user activation
    let o = TransformerLayerOptions {
        activation: Activation::custom(|x| x.tanh()),
        dim_feedforward: 8,
        ..Default::default()
    };
    let l = TransformerEncoderLayer::with_options(4, 2, o)?;
    assert_eq!(l.forward_with(&src, &EncoderMasks::default())?.dims(), &[5, 2, 4]);
    Ok(())
}
