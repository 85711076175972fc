//! Attention against PyTorch (`reference/gen_attention.py`): `F::scaled_dot_product_attention`
//! on both of its paths (the fused blockwise kernel and the composed math ops) with masks,
//! causal masking, scale, GQA, broadcast batch dims and fully masked rows; and
//! `nn.MultiheadAttention` in every configuration of the reference (bias, add_bias_kv,
//! add_zero_attn, kdim/vdim, batch_first, bool/float 2-D/3-D masks, key_padding_mask,
//! need_weights averaged or not, is_causal), loading PyTorch's state_dict strictly by name.
//! Outputs and the gradients of every input and parameter agree to 1e-5. Gradients are also
//! checked by finite differences in f64 (first and second order), and bad input gives
//! PyTorch's errors.

mod common;

use common::{assert_close, load_json, load_tensors};
use pyrite::autograd::{gradcheck, gradgradcheck, GradcheckOptions};
use pyrite::nn::attention::{sdpa_kernel, MhaCall, SdpBackend};
use pyrite::nn::functional::{self as F, MhaOptions, SdpaOptions};
use pyrite::nn::*;
use pyrite::{DType, Generator, Result, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;

const TOL: f64 = 1e-5;

fn data() -> (HashMap<String, Tensor>, J) {
    (load_tensors("attention.safetensors").0, load_json("attention.json"))
}

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

/// Loads `{prefix}/sd/{key}` for the recorded keys, strictly, after checking that the
/// module's own state_dict has exactly those keys in that order.
fn load_reference_state(m: &dyn Module, ts: &HashMap<String, Tensor>, prefix: &str, keys: &J) {
    let want: Vec<&str> = keys.as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    let sd0 = m.state_dict().unwrap();
    let got: Vec<&str> = sd0.keys().collect();
    assert_eq!(got, want, "{prefix}: state_dict keys");
    let mut sd = StateDict::new();
    for k in &want {
        sd.insert(*k, t(ts, &format!("{prefix}/sd/{k}")).clone());
    }
    m.load_state_dict(&sd, true).unwrap();
}

#[test]
fn sdpa_matches_pytorch_on_both_paths() {
    let (ts, info) = data();
    let cases = info["sdpa"].as_array().unwrap();
    assert_eq!(cases.len(), 17);
    for backend in [SdpBackend::FlashAttention, SdpBackend::Math] {
        let _only = sdpa_kernel(&[backend]);
        for c in cases {
            let name = c["name"].as_str().unwrap();
            let p = |n: &str| t(&ts, &format!("sdpa_{name}/{n}"));
            let what = format!("sdpa {name} ({backend:?})");
            let (q, k, v) = (leaf(p("q")), leaf(p("k")), leaf(p("v")));
            let mut o = SdpaOptions::new()
                .is_causal(c["is_causal"].as_bool().unwrap_or(false))
                .enable_gqa(c["enable_gqa"].as_bool().unwrap_or(false));
            if let Some(s) = c["scale"].as_f64() {
                o = o.scale(s);
            }
            if c["mask"].as_bool().unwrap() {
                o = o.attn_mask(p("mask"));
            }
            let out = F::scaled_dot_product_attention(&q, &k, &v, &o).unwrap();
            assert_close(&out, p("out"), TOL, TOL, &format!("{what}: output"));
            out.mul(p("g")).unwrap().sum().unwrap().backward().unwrap();
            for (x, n) in [(&q, "dq"), (&k, "dk"), (&v, "dv")] {
                assert_close(&x.grad().unwrap(), p(n), TOL, TOL, &format!("{what}: {n}"));
            }
        }
    }
}

#[test]
fn sdpa_fused_path_is_the_default_and_records_its_own_node() {
    let q = Tensor::randn([1, 2, 4, 8], DType::F32).unwrap().requires_grad_(true).unwrap();
    let out = F::scaled_dot_product_attention(&q, &q, &q, &SdpaOptions::new()).unwrap();
    assert_eq!(out.grad_fn().unwrap().name(), "ScaledDotProductFlashAttentionForCpuBackward0");
    // dropout needs the composed path
    let out = F::scaled_dot_product_attention(&q, &q, &q, &SdpaOptions::new().dropout_p(0.5)).unwrap();
    assert_ne!(out.grad_fn().unwrap().name(), "ScaledDotProductFlashAttentionForCpuBackward0");
    let _only = sdpa_kernel(&[SdpBackend::FlashAttention]);
    let e = F::scaled_dot_product_attention(&q, &q, &q, &SdpaOptions::new().dropout_p(0.5)).unwrap_err();
    assert!(e.message().starts_with("No available kernel"), "{e}");
}

#[test]
fn sdpa_dropout_zeroes_weights_and_scales_the_rest() {
    // with value = identity, the output rows are the (dropped-out) attention weights
    let q = Tensor::zeros([1, 1, 4, 4], DType::F64).unwrap();
    let v = Tensor::eye(4, 4, DType::F64).unwrap().reshape([1, 1, 4, 4]).unwrap();
    pyrite::manual_seed(3);
    let out = F::scaled_dot_product_attention(&q, &q, &v, &SdpaOptions::new().dropout_p(0.5)).unwrap();
    let vals = out.to_dtype(DType::F64).unwrap().reshape([16]).unwrap().to_vec::<f64>().unwrap();
    assert!(vals.iter().all(|&x| x == 0.0 || (x - 0.5).abs() < 1e-12), "{vals:?}");
    assert!(vals.contains(&0.0) && vals.contains(&0.5));
}

fn x64(shape: &[usize], seed: u64) -> Tensor {
    let g = Generator::new(seed);
    Tensor::randn_with(shape, DType::F64, Some(&g)).unwrap().requires_grad_(true).unwrap()
}

/// Both paths by central differences in f64, first and second order (the fused path's
/// backward under `create_graph` is composed of recorded ops).
#[test]
fn sdpa_passes_gradcheck_and_gradgradcheck_on_both_paths() {
    let opts = GradcheckOptions { eps: 1e-6, atol: 1e-6, rtol: 1e-4 };
    let mask = Tensor::new([
        [true, false, true, true, true],
        [true, true, false, false, true],
        [false, true, true, true, true],
    ])
    .unwrap();
    let fmask = Tensor::randn_with([3, 5], DType::F64, Some(&Generator::new(9))).unwrap();
    type Case = (&'static str, SdpaOptions, [Vec<usize>; 3]);
    let cases: Vec<Case> = vec![
        ("plain", SdpaOptions::new(), [vec![1, 2, 3, 4], vec![1, 2, 5, 4], vec![1, 2, 5, 3]]),
        (
            "causal",
            SdpaOptions::new().is_causal(true),
            [vec![1, 2, 4, 3], vec![1, 2, 4, 3], vec![1, 2, 4, 3]],
        ),
        (
            "bool mask",
            SdpaOptions::new().attn_mask(&mask),
            [vec![2, 1, 3, 4], vec![2, 1, 5, 4], vec![2, 1, 5, 2]],
        ),
        (
            "float mask, scale",
            SdpaOptions::new().attn_mask(&fmask).scale(0.7),
            [vec![1, 3, 4], vec![2, 5, 4], vec![2, 5, 4]],
        ),
        ("gqa", SdpaOptions::new().enable_gqa(true), [vec![1, 4, 3, 2], vec![1, 2, 4, 2], vec![1, 2, 4, 3]]),
    ];
    let mut failures = Vec::new();
    for backend in [SdpBackend::FlashAttention, SdpBackend::Math] {
        for (i, (name, o, shapes)) in cases.iter().enumerate() {
            let _only = sdpa_kernel(&[backend]);
            let inputs: Vec<Tensor> =
                shapes.iter().enumerate().map(|(j, s)| x64(s, (i * 3 + j) as u64)).collect();
            let f = |x: &[Tensor]| F::scaled_dot_product_attention(&x[0], &x[1], &x[2], o);
            if let Err(e) = gradcheck(f, &inputs, opts) {
                failures.push(format!("{name} ({backend:?}): {e}"));
            }
            if let Err(e) = gradgradcheck(f, &inputs, None, opts) {
                failures.push(format!("{name} ({backend:?}, second order): {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fused kernel's block boundaries (64 query rows, 128 keys) against the composed path
/// in f64, with a causal mask and with an additive mask, forward and backward.
#[test]
fn fused_kernel_agrees_with_composed_ops_across_blocks() -> Result<()> {
    for (l, s, causal) in [(130, 130, true), (65, 300, false), (200, 129, true)] {
        let g = Generator::new(l as u64);
        let q = Tensor::randn_with([2, 2, l, 16], DType::F64, Some(&g))?;
        let k = Tensor::randn_with([2, 1, s, 16], DType::F64, Some(&g))?;
        let v = Tensor::randn_with([2, 1, s, 8], DType::F64, Some(&g))?;
        let go = Tensor::randn_with([2, 2, l, 8], DType::F64, Some(&g))?;
        let mask = Tensor::randn_with([l, s], DType::F64, Some(&g))?;
        let mut o = SdpaOptions::new().enable_gqa(true).is_causal(causal);
        if !causal {
            o = o.attn_mask(&mask);
        }
        let run = |backend| -> Result<Vec<Tensor>> {
            let _only = sdpa_kernel(&[backend]);
            let (q, k, v) = (leaf(&q), leaf(&k), leaf(&v));
            let out = F::scaled_dot_product_attention(&q, &k, &v, &o)?;
            out.mul(&go)?.sum()?.backward()?;
            Ok(vec![out, q.grad().unwrap(), k.grad().unwrap(), v.grad().unwrap()])
        };
        let (a, b) = (run(SdpBackend::FlashAttention)?, run(SdpBackend::Math)?);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_close(x, y, 1e-10, 1e-10, &format!("L={l} S={s} causal={causal} tensor {i}"));
        }
    }
    Ok(())
}

#[test]
fn sdpa_errors_are_pytorchs() {
    let q = Tensor::randn([2, 3, 4, 8], DType::F32).unwrap();
    let k = Tensor::randn([2, 3, 5, 8], DType::F32).unwrap();
    let sdpa = |q: &Tensor, k: &Tensor, v: &Tensor, o: SdpaOptions| {
        F::scaled_dot_product_attention(q, k, v, &o).unwrap_err().message().to_string()
    };
    let m = Tensor::ones([4, 5], DType::Bool).unwrap();
    assert_eq!(
        sdpa(&q, &k, &k, SdpaOptions::new().attn_mask(&m).is_causal(true)),
        "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"
    );
    assert_eq!(
        sdpa(&q, &k, &k.to_dtype(DType::F64).unwrap(), SdpaOptions::new()),
        "Expected query, key, and value to have the same dtype, but got query.dtype: float key.dtype: float and value.dtype: double instead."
    );
    assert_eq!(
        sdpa(
            &q,
            &k.narrow(1, 0, 2).unwrap(),
            &k.narrow(1, 0, 2).unwrap(),
            SdpaOptions::new().enable_gqa(true)
        ),
        "Number of heads in key and value must divide the number of heads in query"
    );
    let e = sdpa(&q, &k.narrow(1, 0, 2).unwrap(), &k.narrow(1, 0, 2).unwrap(), SdpaOptions::new());
    assert!(e.contains("must match the size of tensor"), "{e}");
    let e = sdpa(&q, &k, &k, SdpaOptions::new().attn_mask(&Tensor::zeros([4, 5], DType::I64).unwrap()));
    assert!(e.starts_with("Expected attn_mask dtype to be bool or float"), "{e}");
    let e = sdpa(&q, &k, &k, SdpaOptions::new().attn_mask(&Tensor::zeros([3, 5], DType::F32).unwrap()));
    assert!(e.contains("must match the size of tensor"), "{e}");
    assert_eq!(
        sdpa(&q, &k, &k, SdpaOptions::new().dropout_p(1.5)),
        "dropout probability has to be between 0 and 1, but got 1.5"
    );
    let v1 = Tensor::randn([8], DType::F32).unwrap();
    assert!(sdpa(&v1, &v1, &v1, SdpaOptions::new()).contains("at least 2 dimensional"));
    assert!(sdpa(&q, &k.narrow(3, 0, 7).unwrap(), &k, SdpaOptions::new()).contains("same embedding size"));
    assert!(sdpa(&q, &k, &k.narrow(2, 0, 4).unwrap(), SdpaOptions::new()).contains("same sequence length"));
    let qi = Tensor::zeros([2, 4, 8], DType::I64).unwrap();
    assert!(sdpa(&qi, &qi, &qi, SdpaOptions::new()).contains("floating-point"));
    // empty sequences are not errors: zero queries give an empty result, zero keys zeros
    let out =
        F::scaled_dot_product_attention(&q.narrow(2, 0, 0).unwrap(), &k, &k, &SdpaOptions::new()).unwrap();
    assert_eq!(out.dims(), &[2, 3, 0, 8]);
}

// ------------------------------------------------------------------------ MultiheadAttention

fn mha_from(ctor: &J) -> MultiheadAttention {
    let u = |k: &str| ctor[k].as_u64().map(|x| x as usize);
    let b = |k: &str, d: bool| ctor[k].as_bool().unwrap_or(d);
    let opts = MultiheadAttentionOptions {
        dropout: 0.0,
        bias: b("bias", true),
        add_bias_kv: b("add_bias_kv", false),
        add_zero_attn: b("add_zero_attn", false),
        kdim: u("kdim"),
        vdim: u("vdim"),
        batch_first: b("batch_first", false),
    };
    MultiheadAttention::with_options(u("embed_dim").unwrap(), u("num_heads").unwrap(), opts).unwrap()
}

#[test]
fn multihead_attention_matches_pytorch() {
    let (ts, info) = data();
    let cases = info["mha"].as_array().unwrap();
    assert_eq!(cases.len(), 14);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let prefix = format!("mha_{name}");
        let p = |n: &str| t(&ts, &format!("{prefix}/{n}"));
        let m = mha_from(&c["ctor"]);
        assert_eq!(m.to_string(), c["repr"].as_str().unwrap(), "{name}: repr");
        load_reference_state(&m, &ts, &prefix, &c["state_dict_keys"]);
        let q = leaf(p("in/query"));
        let (k, v) = if c["self_attn"].as_bool().unwrap() {
            (q.clone(), q.clone())
        } else {
            let k = leaf(p("in/key"));
            let v = if c["kv_same"].as_bool().unwrap() { k.clone() } else { leaf(p("in/value")) };
            (k, v)
        };
        let masks: Vec<&str> = c["masks"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
        let mask = |n: &str| masks.contains(&n).then(|| p(&format!("in/{n}")).clone());
        let (am, kpm) = (mask("attn_mask"), mask("key_padding_mask"));
        let call = &c["call"];
        let opts = MhaCall {
            key_padding_mask: kpm.as_ref(),
            need_weights: call["need_weights"].as_bool().unwrap_or(true),
            attn_mask: am.as_ref(),
            average_attn_weights: call["average_attn_weights"].as_bool().unwrap_or(true),
            is_causal: call["is_causal"].as_bool().unwrap_or(false),
        };
        let (out, w) = m.forward_with(&q, &k, &v, &opts).unwrap();
        assert_close(&out, p("out0"), TOL, TOL, &format!("{name}: attn_output"));
        assert_eq!(w.is_some(), c["weights"].as_bool().unwrap(), "{name}: weights returned");
        let mut loss = out.mul(p("g0")).unwrap().sum().unwrap();
        if let Some(w) = &w {
            assert_close(w, p("out1"), TOL, TOL, &format!("{name}: attn_weights"));
            loss = loss.add(&w.mul(p("g1")).unwrap().sum().unwrap()).unwrap();
        }
        loss.backward().unwrap();
        let mut inputs = vec![("query", &q)];
        if !c["self_attn"].as_bool().unwrap() {
            inputs.push(("key", &k));
            if !c["kv_same"].as_bool().unwrap() {
                inputs.push(("value", &v));
            }
        }
        for (n, x) in inputs {
            assert_close(
                &x.grad().unwrap(),
                p(&format!("grad_in/{n}")),
                TOL,
                TOL,
                &format!("{name}: grad {n}"),
            );
        }
        for (n, param) in m.named_parameters() {
            let g = param.grad().unwrap_or_else(|| param.zeros_like().unwrap());
            assert_close(&g, p(&format!("grad/{n}")), TOL, TOL, &format!("{name}: grad {n}"));
        }
    }
}

#[test]
fn multihead_attention_through_call_value_and_hooks() {
    let m = MultiheadAttention::new(8, 2).unwrap();
    let x = Tensor::randn([5, 3, 8], DType::F32).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let _h = m.register_forward_hook(move |_, input, output| {
        s2.lock().unwrap().push((input.tensors().len(), output.get(1).unwrap().kind()));
        Ok(None)
    });
    let out = m.call_value(Value::from((x.clone(), x.clone(), x.clone()))).unwrap();
    let direct = m.forward_with(&x, &x, &x, &MhaCall::default()).unwrap();
    assert!(out.get(0).unwrap().as_tensor().unwrap().allclose(&direct.0, 1e-6, 1e-6, false).unwrap());
    // keyword arguments by name, as a trailing dict
    let kw = Value::Dict(vec![("need_weights".into(), Value::Bool(false))]);
    let out =
        m.call_value(Value::Tuple(vec![x.clone().into(), x.clone().into(), x.clone().into(), kw])).unwrap();
    assert_eq!(out.get(1).unwrap().kind(), "None");
    // the typed call runs the hooks too when there are any
    m.call((&x, &x, &x, &MhaCall::default())).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(3, "Tensor"), (3, "None"), (3, "Tensor")]);
}

#[test]
fn multi_head_attention_forward_passes_gradcheck() {
    let opts = GradcheckOptions { eps: 1e-6, atol: 1e-6, rtol: 1e-4 };
    let (e, l, s, n) = (4, 3, 4, 2);
    let mask =
        Tensor::new([[false, true, false, false], [false, false, false, true], [true, false, false, false]])
            .unwrap();
    let kpm = Tensor::new([[false, false, true, false], [false, false, false, false]]).unwrap();
    let shapes =
        [vec![l, n, e], vec![s, n, e], vec![s, n, e], vec![3 * e, e], vec![3 * e], vec![e, e], vec![e]];
    let inputs: Vec<Tensor> = shapes.iter().enumerate().map(|(i, sh)| x64(sh, 40 + i as u64)).collect();
    for need_weights in [true, false] {
        let f = |x: &[Tensor]| -> Result<Tensor> {
            let o = MhaOptions {
                embed_dim_to_check: e,
                num_heads: 2,
                in_proj_weight: Some(&x[3]),
                in_proj_bias: Some(&x[4]),
                out_proj_weight: Some(&x[5]),
                out_proj_bias: Some(&x[6]),
                attn_mask: Some(&mask),
                key_padding_mask: Some(&kpm),
                need_weights,
                ..Default::default()
            };
            let (out, w) = F::multi_head_attention_forward(&x[0], &x[1], &x[2], &o)?;
            match w {
                Some(w) => out.sum()?.add(&w.square()?.sum()?),
                None => out.square()?.sum(),
            }
        };
        gradcheck(f, &inputs, opts).unwrap_or_else(|e| panic!("need_weights={need_weights}: {e}"));
        gradgradcheck(f, &inputs, None, opts)
            .unwrap_or_else(|e| panic!("need_weights={need_weights} (2nd): {e}"));
    }
    // self-attention without weights: the packed projection through the fused kernel
    let mask = Tensor::new([[false, true, false], [false, false, true], [true, false, false]]).unwrap();
    let self_attn = |x: &[Tensor]| -> Result<Tensor> {
        let o = MhaOptions {
            embed_dim_to_check: e,
            num_heads: 2,
            in_proj_weight: Some(&x[1]),
            in_proj_bias: Some(&x[2]),
            out_proj_weight: Some(&x[3]),
            attn_mask: Some(&mask),
            need_weights: false,
            ..Default::default()
        };
        F::multi_head_attention_forward(&x[0], &x[0], &x[0], &o)?.0.square()?.sum()
    };
    let inputs = vec![inputs[0].clone(), inputs[3].clone(), inputs[4].clone(), inputs[5].clone()];
    gradcheck(self_attn, &inputs, opts).unwrap_or_else(|e| panic!("self-attention: {e}"));
    gradgradcheck(self_attn, &inputs, None, opts).unwrap_or_else(|e| panic!("self-attention (2nd): {e}"));
}

#[test]
fn multihead_attention_errors_are_pytorchs() {
    let m = MultiheadAttention::new(8, 2).unwrap();
    let call = MhaCall::default();
    let msg = |q: &Tensor, k: &Tensor, v: &Tensor, c: &MhaCall| {
        m.forward_with(q, k, v, c).unwrap_err().message().to_string()
    };
    let x = Tensor::randn([5, 3, 8], DType::F32).unwrap();
    let x6 = Tensor::randn([5, 3, 6], DType::F32).unwrap();
    assert_eq!(msg(&x6, &x6, &x6, &call), "was expecting embedding dimension of 8, but got 6");
    assert_eq!(
        MultiheadAttention::new(8, 3).err().unwrap().message(),
        "embed_dim must be divisible by num_heads"
    );
    assert!(MultiheadAttention::new(0, 2).err().unwrap().message().contains("must be greater than 0"));
    let bad = Tensor::zeros([5, 4], DType::Bool).unwrap();
    assert_eq!(
        msg(&x, &x, &x, &MhaCall { attn_mask: Some(&bad), ..call }),
        "The shape of the 2D attn_mask is [5, 4], but should be (5, 5)."
    );
    let bad3 = Tensor::zeros([2, 5, 5], DType::Bool).unwrap();
    assert_eq!(
        msg(&x, &x, &x, &MhaCall { attn_mask: Some(&bad3), ..call }),
        "The shape of the 3D attn_mask is [2, 5, 5], but should be (6, 5, 5)."
    );
    let int_mask = Tensor::zeros([5, 5], DType::I64).unwrap();
    assert_eq!(
        msg(&x, &x, &x, &MhaCall { attn_mask: Some(&int_mask), ..call }),
        "only bool and floating types of attn_mask are supported"
    );
    let kpm = Tensor::zeros([2, 5], DType::Bool).unwrap();
    assert_eq!(
        msg(&x, &x, &x, &MhaCall { key_padding_mask: Some(&kpm), ..call }),
        "Expected key_padded_mask.shape[0] to be 3, but got 2"
    );
    let kpm = Tensor::zeros([3, 4], DType::Bool).unwrap();
    assert_eq!(
        msg(&x, &x, &x, &MhaCall { key_padding_mask: Some(&kpm), ..call }),
        "Expected key_padded_mask.shape[1] to be 5, but got 4"
    );
    let kpm3 = Tensor::zeros([3, 5, 1], DType::Bool).unwrap();
    assert!(msg(&x, &x, &x, &MhaCall { key_padding_mask: Some(&kpm3), ..call })
        .contains("`key_padding_mask` to be `None` or 2-D"));
    assert_eq!(
        msg(&x, &x, &x, &MhaCall { is_causal: true, ..call }),
        "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method `generate_square_subsequent_mask` to create this mask."
    );
    let k4 = Tensor::randn([4, 3, 8], DType::F32).unwrap();
    assert!(msg(&x, &x, &k4, &call).starts_with("key shape [5, 3, 8] does not match value shape [4, 3, 8]"));
    let r4 = Tensor::randn([1, 5, 3, 8], DType::F32).unwrap();
    assert!(msg(&r4, &r4, &r4, &call).contains("received 4-D query tensor"));
    // length-0 sequences: no queries is an empty output; no keys gives zeros (SDPA) or NaN
    // weights (softmax over nothing), as in PyTorch
    let e0 = Tensor::zeros([0, 3, 8], DType::F32).unwrap();
    assert_eq!(m.forward_with(&e0, &x, &x, &call).unwrap().0.dims(), &[0, 3, 8]);
    let (out, _) = m.forward_with(&x, &e0, &e0, &MhaCall { need_weights: false, ..call }).unwrap();
    assert_eq!(out.dims(), &[5, 3, 8]);
}
