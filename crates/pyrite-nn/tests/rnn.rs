//! The recurrent layers and `nn.utils.rnn` against PyTorch (`reference/gen_rnn.py`): every
//! layer case loads PyTorch's state_dict strictly by name, must list the same keys in the same
//! order, print the same repr, and give the same outputs (`output`, `h_n`, `c_n`) and the same
//! gradients of a fixed scalar loss w.r.t. the input, the initial states and every parameter
//! (f32, `|got - want| <= 1e-5 + 1e-5 |want|`). Then: the padding and packing utilities
//! against PyTorch, finite-difference gradchecks in f64, PyTorch's error messages, the Value
//! interface, hooks and dropout.

mod common;

use common::{assert_close, load_tensors, Kw};
use pyrite::autograd::{gradcheck, GradcheckOptions};
use pyrite::nn::functional::{self as F, RnnArgs, RnnMode};
use pyrite::nn::utils::rnn::{
    pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence, unpack_sequence, unpad_sequence,
    PackedSequence, PaddingSide,
};
use pyrite::nn::*;
use pyrite::{DType, Generator, Result, Tensor};
use serde_json::Value as J;
use std::collections::HashMap;
use std::sync::OnceLock;

struct Data {
    t: HashMap<String, Tensor>,
    cases: Vec<J>,
}

fn data() -> &'static Data {
    static D: OnceLock<Data> = OnceLock::new();
    D.get_or_init(|| {
        let (t, meta) = load_tensors("rnn.safetensors");
        let cases: Vec<J> = serde_json::from_str(&meta["cases"]).unwrap();
        Data { t, cases }
    })
}

fn tensor(name: &str, key: &str) -> Tensor {
    data().t.get(&format!("{name}/{key}")).unwrap_or_else(|| panic!("missing {name}/{key}")).clone()
}

fn try_tensor(name: &str, key: &str) -> Option<Tensor> {
    data().t.get(&format!("{name}/{key}")).cloned()
}

// ---------------------------------------------------------------------------- the layers

/// A layer of a case, built from PyTorch's keyword arguments.
enum Layer {
    Rnn(RNN),
    Lstm(LSTM),
    Gru(GRU),
    RnnCell(RNNCell),
    LstmCell(LSTMCell),
    GruCell(GRUCell),
}

fn options(kw: &Kw) -> Result<RnnOptions> {
    let nl = kw.get("nonlinearity").map_or("tanh", |v| v.as_str().unwrap());
    Ok(RnnOptions::new()
        .num_layers(kw.u_or("num_layers", 1))
        .nonlinearity(RnnNonlinearity::parse(nl)?)
        .bias(kw.b_or("bias", true))
        .batch_first(kw.b_or("batch_first", false))
        .dropout(kw.f_or("dropout", 0.0))
        .bidirectional(kw.b_or("bidirectional", false))
        .proj_size(kw.u_or("proj_size", 0)))
}

fn build(layer: &str, kw: &Kw) -> Result<Layer> {
    let (i, h) = (kw.u("input_size"), kw.u("hidden_size"));
    let bias = kw.b_or("bias", true);
    Ok(match layer {
        "RNN" => Layer::Rnn(RNN::new(i, h, options(kw)?)?),
        "LSTM" => Layer::Lstm(LSTM::new(i, h, options(kw)?)?),
        "GRU" => Layer::Gru(GRU::new(i, h, options(kw)?)?),
        "RNNCell" => {
            let nl = RnnNonlinearity::parse(kw.get("nonlinearity").map_or("tanh", |v| v.as_str().unwrap()))?;
            Layer::RnnCell(RNNCell::with_options(i, h, bias, nl, DType::F32)?)
        }
        "LSTMCell" => Layer::LstmCell(LSTMCell::with_options(i, h, bias, DType::F32)?),
        "GRUCell" => Layer::GruCell(GRUCell::with_options(i, h, bias, DType::F32)?),
        other => panic!("layer {other}"),
    })
}

impl Layer {
    fn module(&self) -> &dyn Module {
        match self {
            Layer::Rnn(m) => m,
            Layer::Lstm(m) => m,
            Layer::Gru(m) => m,
            Layer::RnnCell(m) => m,
            Layer::LstmCell(m) => m,
            Layer::GruCell(m) => m,
        }
    }

    /// Runs the layer with its typed call; the outputs by PyTorch's names (`output` is the
    /// packed data for a packed input).
    fn run(
        &self,
        x: &Tensor,
        s: &[Tensor],
        packed: Option<&PackedSequence>,
    ) -> Result<Vec<(&'static str, Tensor)>> {
        let h = s.first();
        let hc = if s.len() == 2 { Some((&s[0], &s[1])) } else { None };
        Ok(match (self, packed) {
            (Layer::Rnn(m), None) => {
                let (o, h) = m.call((x, h))?;
                vec![("output", o), ("h_n", h)]
            }
            (Layer::Rnn(m), Some(p)) => {
                let (o, h) = m.call((p, h))?;
                vec![("output", o.data), ("h_n", h)]
            }
            (Layer::Gru(m), None) => {
                let (o, h) = m.call((x, h))?;
                vec![("output", o), ("h_n", h)]
            }
            (Layer::Gru(m), Some(p)) => {
                let (o, h) = m.call((p, h))?;
                vec![("output", o.data), ("h_n", h)]
            }
            (Layer::Lstm(m), None) => {
                let (o, (h, c)) = m.call((x, hc))?;
                vec![("output", o), ("h_n", h), ("c_n", c)]
            }
            (Layer::Lstm(m), Some(p)) => {
                let (o, (h, c)) = m.call((p, hc))?;
                vec![("output", o.data), ("h_n", h), ("c_n", c)]
            }
            (Layer::RnnCell(m), _) => vec![("h_n", m.call((x, h))?)],
            (Layer::GruCell(m), _) => vec![("h_n", m.call((x, h))?)],
            (Layer::LstmCell(m), _) => {
                let (h, c) = m.call((x, hc))?;
                vec![("h_n", h), ("c_n", c)]
            }
        })
    }
}

fn check(got: &Tensor, want: &Tensor, what: &str, failures: &mut Vec<String>) {
    let r =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| assert_close(got, want, 1e-5, 1e-5, what)));
    if let Err(p) = r {
        failures.push(p.downcast_ref::<String>().cloned().unwrap_or_else(|| what.to_string()));
    }
}

fn run_layer_case(c: &J, failures: &mut Vec<String>) -> Result<()> {
    let name = c["name"].as_str().unwrap();
    let kw = Kw(c["kwargs"].as_object().unwrap());
    let layer = build(c["layer"].as_str().unwrap(), &kw)?;
    let m = layer.module();
    let fail = |failures: &mut Vec<String>, msg: String| failures.push(format!("{name}: {msg}"));

    // state_dict: PyTorch's keys, in PyTorch's order, loaded strictly
    let keys: Vec<&str> = c["sd_keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    let ours: Vec<String> = m.state_dict()?.keys().map(String::from).collect();
    if ours != keys {
        fail(failures, format!("state_dict keys {ours:?}, PyTorch {keys:?}"));
    }
    let sd: StateDict = keys.iter().map(|k| (k.to_string(), tensor(name, &format!("sd/{k}")))).collect();
    m.load_state_dict(&sd, true)?;
    if m.repr() != c["repr"].as_str().unwrap() {
        fail(failures, format!("repr {:?}, PyTorch {:?}", m.repr(), c["repr"]));
    }
    m.set_training(c["train"].as_bool().unwrap());

    let x = tensor(name, "in/x").requires_grad_(true)?;
    let state_names: Vec<&str> =
        c["states"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let states: Vec<Tensor> = state_names
        .iter()
        .map(|s| tensor(name, &format!("in/{s}")).requires_grad_(true))
        .collect::<Result<_>>()?;
    let packed = match c.get("lengths") {
        Some(l) => {
            let lengths: Vec<usize> =
                l.as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
            let es = c["enforce_sorted"].as_bool().unwrap();
            Some(pack_padded_sequence(&x, &lengths, kw.b_or("batch_first", false), es)?)
        }
        None => None,
    };
    if let Some(p) = &packed {
        assert_eq!(
            p.batch_sizes.to_vec::<i64>()?,
            tensor(name, "out/batch_sizes").to_vec::<i64>()?,
            "{name}"
        );
        let sorted = p.sorted_indices.as_ref().map(|s| s.to_vec::<i64>().unwrap());
        assert_eq!(
            sorted,
            try_tensor(name, "out/sorted_indices").map(|s| s.to_vec::<i64>().unwrap()),
            "{name}"
        );
        let unsorted = p.unsorted_indices.as_ref().map(|s| s.to_vec::<i64>().unwrap());
        assert_eq!(
            unsorted,
            try_tensor(name, "out/unsorted_indices").map(|s| s.to_vec::<i64>().unwrap()),
            "{name}"
        );
    }
    let outs = layer.run(&x, &states, packed.as_ref())?;
    let want_outs: Vec<&str> = c["outputs"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let got_outs: Vec<&str> = outs.iter().map(|(n, _)| *n).collect();
    assert_eq!(got_outs, want_outs, "{name}: outputs");

    // the fixed scalar loss sum(out * g_out) over the outputs, and its gradients
    let mut loss: Option<Tensor> = None;
    for (k, o) in &outs {
        check(o, &tensor(name, &format!("out/{k}")), &format!("{name}: {k}"), failures);
        let term = o.mul(&tensor(name, &format!("gout/{k}")))?.sum()?;
        loss = Some(match loss {
            Some(l) => l.add(&term)?,
            None => term,
        });
    }
    loss.unwrap().backward()?;
    let zero_if_none = |t: &Tensor, g: Option<Tensor>| g.unwrap_or_else(|| t.zeros_like().unwrap());
    check(&zero_if_none(&x, x.grad()), &tensor(name, "gin/x"), &format!("{name}: grad x"), failures);
    for (s, t) in state_names.iter().zip(&states) {
        check(
            &zero_if_none(t, t.grad()),
            &tensor(name, &format!("gin/{s}")),
            &format!("{name}: grad {s}"),
            failures,
        );
    }
    let params = m.named_parameters();
    let want_params: Vec<&str> =
        c["params"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(params.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), want_params, "{name}: parameters");
    for (k, p) in &params {
        check(
            &zero_if_none(p, p.grad()),
            &tensor(name, &format!("gp/{k}")),
            &format!("{name}: grad {k}"),
            failures,
        );
    }
    Ok(())
}

#[test]
fn layers_match_pytorch() {
    let mut failures = Vec::new();
    let mut n = 0;
    for c in data().cases.iter().filter(|c| c.get("layer").is_some()) {
        n += 1;
        if let Err(e) = run_layer_case(c, &mut failures) {
            failures.push(format!("{}: error: {e}", c["name"]));
        }
    }
    assert!(n >= 36, "only {n} layer cases");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

// ------------------------------------------------------------------------- the utilities

fn util_inputs(name: &str, n: usize) -> Vec<Tensor> {
    (0..n).map(|i| tensor(name, &format!("in/{i}")).requires_grad_(true).unwrap()).collect()
}

fn check_packed(name: &str, p: &PackedSequence, failures: &mut Vec<String>) -> Result<()> {
    check(&p.data, &tensor(name, "out/out"), &format!("{name}: data"), failures);
    if p.batch_sizes.to_vec::<i64>()? != tensor(name, "out/batch_sizes").to_vec::<i64>()? {
        failures.push(format!("{name}: batch_sizes {:?}", p.batch_sizes.to_vec::<i64>()?));
    }
    for (k, got) in [("sorted_indices", &p.sorted_indices), ("unsorted_indices", &p.unsorted_indices)] {
        let got = got.as_ref().map(|t| t.to_vec::<i64>().unwrap());
        let want = try_tensor(name, &format!("out/{k}")).map(|t| t.to_vec::<i64>().unwrap());
        if got != want {
            failures.push(format!("{name}: {k} {got:?}, PyTorch {want:?}"));
        }
    }
    Ok(())
}

fn run_util_case(c: &J, failures: &mut Vec<String>) -> Result<()> {
    let name = c["name"].as_str().unwrap();
    let args = Kw(c["args"].as_object().unwrap());
    let xs = util_inputs(name, c["inputs"].as_u64().unwrap() as usize);
    let out = match c["op"].as_str().unwrap() {
        "pad_sequence" => {
            let side = PaddingSide::parse(args.get("padding_side").unwrap().as_str().unwrap())?;
            let out =
                pad_sequence(&xs, args.b_or("batch_first", false), args.f_or("padding_value", 0.0), side)?;
            check(&out, &tensor(name, "out/out"), name, failures);
            out
        }
        "pack_padded_sequence" => {
            let lengths = args.sizes("lengths");
            let p = pack_padded_sequence(
                &xs[0],
                &lengths,
                args.b_or("batch_first", false),
                args.b_or("enforce_sorted", true),
            )?;
            check_packed(name, &p, failures)?;
            // and back
            let (padded, lens) = pad_packed_sequence(&p, args.b_or("batch_first", false), 0.0, None)?;
            assert_eq!(
                lens.to_vec::<i64>()?,
                lengths.iter().map(|&l| l as i64).collect::<Vec<_>>(),
                "{name}"
            );
            let back = unpad_sequence(&padded, &lengths, args.b_or("batch_first", false))?;
            let orig = unpad_sequence(&xs[0].detach(), &lengths, args.b_or("batch_first", false))?;
            for (b, o) in back.iter().zip(&orig) {
                assert_eq!(b.to_vec::<f32>()?, o.to_vec::<f32>()?, "{name}: round trip");
            }
            p.data
        }
        "pack_sequence" => {
            let p = pack_sequence(&xs, args.b_or("enforce_sorted", true))?;
            check_packed(name, &p, failures)?;
            for (u, x) in unpack_sequence(&p)?.iter().zip(&xs) {
                assert_eq!(u.to_vec::<f32>()?, x.to_vec::<f32>()?, "{name}: unpack_sequence");
            }
            p.data
        }
        "pad_packed_sequence" => {
            let p = pack_sequence(&xs, false)?;
            let total = args.get("total_length").map(|v| v.as_u64().unwrap() as usize);
            let (out, lengths) = pad_packed_sequence(
                &p,
                args.b_or("batch_first", false),
                args.f_or("padding_value", 0.0),
                total,
            )?;
            check(&out, &tensor(name, "out/out"), name, failures);
            assert_eq!(lengths.to_vec::<i64>()?, tensor(name, "out/lengths").to_vec::<i64>()?, "{name}");
            out
        }
        other => panic!("op {other}"),
    };
    if c["grad"].as_bool().unwrap() {
        out.mul(&tensor(name, "gout"))?.sum()?.backward()?;
        for (i, x) in xs.iter().enumerate() {
            let g = x.grad().unwrap_or_else(|| x.zeros_like().unwrap());
            check(&g, &tensor(name, &format!("gin/{i}")), &format!("{name}: grad of input {i}"), failures);
        }
    }
    Ok(())
}

#[test]
fn utils_match_pytorch() {
    let mut failures = Vec::new();
    let mut n = 0;
    for c in data().cases.iter().filter(|c| c.get("op").is_some()) {
        n += 1;
        if let Err(e) = run_util_case(c, &mut failures) {
            failures.push(format!("{}: error: {e}", c["name"]));
        }
    }
    assert!(n >= 14, "only {n} utility cases");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

// --------------------------------------------------------------------------- gradchecks

fn x64(shape: &[usize], seed: u64) -> Tensor {
    let g = Generator::new(seed);
    Tensor::randn_with(shape, DType::F64, Some(&g))
        .unwrap()
        .mul_scalar(0.7)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

/// The weights of a layer, in order, as f64 leaves (the layer's own, converted).
fn weights64(m: &mut dyn Module) -> Vec<Tensor> {
    m.parameters()
        .iter()
        .map(|p| p.detach().to_dtype(DType::F64).unwrap().requires_grad_(true).unwrap())
        .collect()
}

fn flat(parts: &[Tensor]) -> Result<Tensor> {
    let v = parts.iter().map(|t| t.reshape([t.numel()])).collect::<Result<Vec<_>>>()?;
    Tensor::cat(&v, 0)
}

const OPTS: GradcheckOptions = GradcheckOptions { eps: 1e-6, atol: 1e-7, rtol: 1e-5 };

/// `F::rnn` at a random point, w.r.t. the input, the initial states and every weight.
fn gradcheck_run(mode: RnnMode, weights: Vec<Tensor>, args: RnnArgs, hidden: usize) -> Result<()> {
    let dirs = if args.bidirectional { 2 } else { 1 };
    let rows = args.num_layers * dirs;
    // 3 steps of a batch of 2
    let x_shape: &[usize] = if args.batch_first { &[2, 3, 3] } else { &[3, 2, 3] };
    let mut inputs = vec![x64(x_shape, 1), x64(&[rows, 2, hidden], 2)];
    if mode == RnnMode::Lstm {
        inputs.push(x64(&[rows, 2, hidden], 3));
    }
    let n_states = mode.num_states();
    inputs.extend(weights);
    gradcheck(
        |xs| {
            let states: Vec<&Tensor> = xs[1..1 + n_states].iter().collect();
            let w: Vec<&Tensor> = xs[1 + n_states..].iter().collect();
            let (out, finals) = F::rnn(mode, &xs[0], &states, &w, &args)?;
            let mut parts = vec![out];
            parts.extend(finals);
            flat(&parts)
        },
        &inputs,
        OPTS,
    )
}

#[test]
fn recurrences_pass_gradcheck() -> Result<()> {
    let args = RnnArgs { num_layers: 2, bidirectional: true, ..Default::default() };
    let opts = RnnOptions::new().num_layers(2).bidirectional(true);
    let mut lstm = LSTM::new(3, 2, opts)?;
    gradcheck_run(RnnMode::Lstm, weights64(&mut lstm), args, 2)?;
    let mut gru = GRU::new(3, 2, opts)?;
    gradcheck_run(RnnMode::Gru, weights64(&mut gru), args, 2)?;
    let mut rnn = RNN::new(3, 2, opts)?;
    gradcheck_run(RnnMode::RnnTanh, weights64(&mut rnn), args, 2)?;
    // one layer each: relu, LSTM with a projection (h of size 1), batch first without biases
    let mut relu = RNN::new(3, 2, RnnOptions::new().nonlinearity(RnnNonlinearity::Relu))?;
    gradcheck_run(RnnMode::RnnRelu, weights64(&mut relu), RnnArgs::default(), 2)?;
    let mut proj = LSTM::new(3, 2, RnnOptions::new().proj_size(1))?;
    let w = weights64(&mut proj);
    let mut inputs = vec![x64(&[3, 2, 3], 4), x64(&[1, 2, 1], 5), x64(&[1, 2, 2], 6)];
    inputs.extend(w);
    gradcheck(
        |xs| {
            let w: Vec<&Tensor> = xs[3..].iter().collect();
            let (out, f) = F::rnn(RnnMode::Lstm, &xs[0], &[&xs[1], &xs[2]], &w, &RnnArgs::default())?;
            flat(&[out, f[0].clone(), f[1].clone()])
        },
        &inputs,
        OPTS,
    )?;
    let mut nobias = GRU::new(3, 2, RnnOptions::new().bias(false).batch_first(true))?;
    let args = RnnArgs { bias: false, batch_first: true, ..Default::default() };
    gradcheck_run(RnnMode::Gru, weights64(&mut nobias), args, 2)
}

/// Packed input end to end: padded `x` -> pack (unsorted lengths) -> bidirectional LSTM ->
/// pad back, w.r.t. `x`, the states and the weights.
#[test]
fn packed_run_passes_gradcheck() -> Result<()> {
    let mut lstm = LSTM::new(2, 2, RnnOptions::new().bidirectional(true))?;
    let args = RnnArgs { bidirectional: true, ..Default::default() };
    let mut inputs = vec![x64(&[4, 3, 2], 7), x64(&[2, 3, 2], 8), x64(&[2, 3, 2], 9)];
    inputs.extend(weights64(&mut lstm));
    gradcheck(
        |xs| {
            let p = pack_padded_sequence(&xs[0], &[2, 4, 1], false, false)?;
            let sorted = p.sorted_indices.clone().unwrap();
            let h0 = xs[1].index_select(1, &sorted)?;
            let c0 = xs[2].index_select(1, &sorted)?;
            let w: Vec<&Tensor> = xs[3..].iter().collect();
            let bs: Vec<usize> = p.batch_sizes_vec()?;
            let (out, f) = F::rnn_packed(RnnMode::Lstm, &p.data, &bs, &[&h0, &c0], &w, &args)?;
            let out = PackedSequence { data: out, ..p };
            let (padded, _) = pad_packed_sequence(&out, false, 0.0, None)?;
            flat(&[padded, f[0].clone(), f[1].clone()])
        },
        &inputs,
        OPTS,
    )?;
    // GRU through the module's packed path, w.r.t. the padded input and h0
    let mut gru = GRU::new(2, 2, RnnOptions::new().num_layers(2))?;
    gru.to_dtype(DType::F64)?;
    gradcheck(
        |xs| {
            let p = pack_padded_sequence(&xs[0], &[1, 3, 3], true, false)?;
            let (out, h) = gru.call((&p, Some(&xs[1])))?;
            let (padded, _) = pad_packed_sequence(&out, true, 0.0, None)?;
            flat(&[padded, h])
        },
        &[x64(&[3, 3, 2], 10), x64(&[2, 3, 2], 11)],
        OPTS,
    )
}

#[test]
fn cells_pass_gradcheck() -> Result<()> {
    let (x, h, c) = (x64(&[2, 3], 12), x64(&[2, 2], 13), x64(&[2, 2], 14));
    for gates in [1, 3, 4] {
        let w = [
            x64(&[gates * 2, 3], 15),
            x64(&[gates * 2, 2], 16),
            x64(&[gates * 2], 17),
            x64(&[gates * 2], 18),
        ];
        let mut inputs = vec![x.clone(), h.clone(), c.clone()];
        inputs.extend(w);
        gradcheck(
            |v| {
                let b = (Some(&v[5]), Some(&v[6]));
                match gates {
                    1 => F::rnn_tanh_cell(&v[0], &v[1], &v[3], &v[4], b.0, b.1),
                    3 => F::gru_cell(&v[0], &v[1], &v[3], &v[4], b.0, b.1),
                    _ => {
                        let (h, c) = F::lstm_cell(&v[0], (&v[1], &v[2]), &v[3], &v[4], b.0, b.1)?;
                        flat(&[h, c])
                    }
                }
            },
            &inputs,
            OPTS,
        )?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------- errors

fn err<T>(r: Result<T>) -> String {
    match r {
        Ok(_) => "Ok (expected an error)".to_string(),
        Err(e) => e.to_string(),
    }
}

/// PyTorch's messages, where PyTorch's are clear; ours where PyTorch's come from deep inside
/// (the hidden state's dtype, a length longer than the padded input).
#[test]
fn errors_are_pytorchs() -> Result<()> {
    let rnn = RNN::new(10, 20, RnnOptions::new())?;
    let lstm = LSTM::new(10, 20, RnnOptions::new())?;
    let gru = GRU::new(10, 20, RnnOptions::new())?;
    let x = Tensor::randn([5, 3, 10], DType::F32)?;
    let cases: Vec<(String, &str)> = vec![
        (err(rnn.call((&Tensor::randn([5, 3, 5], DType::F32)?, None))), "input.size(-1) must be equal to input_size. Expected 10, got 5"),
        (err(rnn.call((&Tensor::randn([5], DType::F32)?, None))), "RNN: Expected input to be 2D or 3D, got 1D tensor instead"),
        (err(gru.call((&Tensor::randn([5, 3, 10, 1], DType::F32)?, None))), "GRU: Expected input to be 2D or 3D, got 4D instead"),
        (err(rnn.call((&x, Some(&Tensor::randn([1, 3, 2], DType::F32)?)))), "Expected hidden size (1, 3, 20), got [1, 3, 2]"),
        (err(rnn.call((&x, Some(&Tensor::randn([3, 20], DType::F32)?)))), "For batched 3-D input, hx should also be 3-D but got 2-D tensor"),
        (
            err(rnn.call((&Tensor::randn([5, 10], DType::F32)?, Some(&Tensor::randn([1, 3, 20], DType::F32)?)))),
            "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor",
        ),
        (
            err(rnn.call((&x.to_dtype(DType::F64)?, None))),
            "RNN input dtype (torch.float64) does not match weight dtype (torch.float32). Convert input: input.to(torch.float32), or convert model: model.to(torch.float64)",
        ),
        (err(rnn.call((&Tensor::randn([0, 3, 10], DType::F32)?, None))), "Expected sequence length to be larger than 0 in RNN"),
        (
            err(lstm.call((&x, Some((&Tensor::randn([1, 3, 2], DType::F32)?, &Tensor::randn([1, 3, 20], DType::F32)?))))),
            "Expected hidden[0] size (1, 3, 20), got [1, 3, 2]",
        ),
        (
            err(lstm.call((&x, Some((&Tensor::randn([1, 3, 20], DType::F32)?, &Tensor::randn([1, 3, 2], DType::F32)?))))),
            "Expected hidden[1] size (1, 3, 20), got [1, 3, 2]",
        ),
        (
            err(lstm.call((&x, Some((&Tensor::randn([3, 20], DType::F32)?, &Tensor::randn([3, 20], DType::F32)?))))),
            "For batched 3-D input, hx and cx should also be 3-D but got (2-D, 2-D) tensors",
        ),
        (err(RNN::new(10, 20, RnnOptions::new().dropout(1.5))), "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"),
        (err(RNN::new(10, 20, RnnOptions::new().dropout(-0.1))), "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"),
        (err(LSTM::new(10, 20, RnnOptions::new().proj_size(20))), "proj_size has to be smaller than hidden_size"),
        (err(GRU::new(10, 20, RnnOptions::new().proj_size(2))), "proj_size argument is only supported for LSTM, not RNN or GRU"),
        (err(RnnNonlinearity::parse("gelu")), "Unknown nonlinearity 'gelu'. Select from 'tanh' or 'relu'."),
        (err(RNN::new(10, 0, RnnOptions::new())), "hidden_size must be greater than zero"),
        (err(RNN::new(10, 20, RnnOptions::new().num_layers(0))), "num_layers must be greater than zero"),
        (err(RNN::new(0, 20, RnnOptions::new())), "input_size must be greater than zero"),
        // cells
        (err(RNNCell::new(10, 20)?.call((&Tensor::randn([3, 5], DType::F32)?, None))), "input has inconsistent input_size: got 5 expected 10"),
        (
            err(RNNCell::new(10, 20)?.call((&Tensor::randn([3, 10], DType::F32)?, Some(&Tensor::randn([3, 5], DType::F32)?)))),
            "hidden0 has inconsistent hidden_size: got 5, expected 20",
        ),
        (
            err(RNNCell::new(10, 20)?.call((&Tensor::randn([3, 10], DType::F32)?, Some(&Tensor::randn([2, 20], DType::F32)?)))),
            "Input batch size 3 doesn't match hidden0 batch size 2",
        ),
        (err(RNNCell::new(10, 20)?.call((&Tensor::randn([3, 3, 10], DType::F32)?, None))), "RNNCell: Expected input to be 1D or 2D, got 3D instead"),
        (
            err(RNNCell::new(10, 20)?.call((&Tensor::randn([3, 10], DType::F32)?, Some(&Tensor::randn([20], DType::F32)?)))),
            "Expected 2D hidden0 (batch x hidden_size), but got 1D tensor",
        ),
        (
            err(LSTMCell::new(10, 20)?.call((
                &Tensor::randn([3, 10], DType::F32)?,
                Some((&Tensor::randn([3, 20], DType::F32)?, &Tensor::randn([3, 5], DType::F32)?)),
            ))),
            "hidden1 has inconsistent hidden_size: got 5, expected 20",
        ),
        (err(GRUCell::new(10, 20)?.call((&Tensor::randn([3, 3, 10], DType::F32)?, None))), "GRUCell: Expected input to be 1D or 2D, got 3D instead"),
        // utilities
        (
            err(pack_padded_sequence(&Tensor::randn([4, 3, 2], DType::F32)?, &[2, 3, 1], false, true)),
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if you do not need ONNX exportability.",
        ),
        (
            err(pack_padded_sequence(&Tensor::randn([4, 3, 2], DType::F32)?, &[3, 2, 0], false, true)),
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0",
        ),
        (
            err(pack_padded_sequence(&Tensor::randn([4, 3, 2], DType::F32)?, &[3, 2], false, true)),
            "Expected `len(lengths)` to be equal to batch_size, but got 2 (batch_size=3)",
        ),
        (err(pack_padded_sequence(&Tensor::randn([4, 0, 2], DType::F32)?, &[], false, true)), "Cannot pack empty tensors."),
        (err(pad_sequence::<Tensor>(&[], false, 0.0, PaddingSide::Right)), "received an empty list of sequences"),
        (err(PaddingSide::parse("middle")), "Expected padding_side to be one of left or right, but got middle."),
        (
            err(pad_packed_sequence(&pack_sequence(&[Tensor::randn([3, 2], DType::F32)?], true)?, false, 0.0, Some(2))),
            "Expected total_length to be at least the length of the longest sequence in input, but got total_length=2 and max sequence length being 3",
        ),
        // ours
        (
            err(pack_padded_sequence(&Tensor::randn([4, 3, 2], DType::F32)?, &[5, 2, 1], false, true)),
            "pack_padded_sequence: a length of 5 is longer than the padded input's 4 timesteps",
        ),
        (
            err(rnn.call((&x, Some(&Tensor::randn([1, 3, 20], DType::F64)?)))),
            "RNN: the initial state has dtype torch.float64, but the input has torch.float32: they must match",
        ),
    ];
    let bad: Vec<String> = cases
        .iter()
        .filter(|(got, want)| !got.ends_with(want))
        .map(|(got, want)| format!("got:  {got}\nwant: {want}"))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    Ok(())
}

/// The functional forms check what the modules check for them.
#[test]
fn functional_forms_refuse_bad_shapes() -> Result<()> {
    let z = |s: &[usize]| Tensor::zeros(s, DType::F32).unwrap();
    let (w_ih, w_hh, b) = (z(&[8, 3]), z(&[8, 2]), z(&[8]));
    assert!(F::lstm_cell(&z(&[3]), (&z(&[2]), &z(&[2])), &w_ih, &w_hh, Some(&b), Some(&b)).is_err());
    assert!(F::lstm_cell(&z(&[1, 3]), (&z(&[1, 3]), &z(&[1, 2])), &w_ih, &w_hh, None, None).is_err());
    assert!(
        F::gru_cell(&z(&[1, 3]), &z(&[1, 2]), &w_ih, &w_hh, None, None).is_err(),
        "8 rows are not 3 gates"
    );
    let args = RnnArgs::default();
    let x = z(&[4, 1, 3]);
    assert!(
        F::rnn(RnnMode::Lstm, &x, &[&z(&[1, 1, 2])], &[&w_ih, &w_hh, &b, &b], &args).is_err(),
        "one state"
    );
    assert!(F::rnn(RnnMode::Lstm, &x, &[&z(&[1, 1, 2]), &z(&[1, 1, 2])], &[&w_ih, &w_hh, &b], &args).is_err());
    assert!(
        F::rnn(RnnMode::Lstm, &x, &[&z(&[2, 1, 2]), &z(&[2, 1, 2])], &[&w_ih, &w_hh, &b, &b], &args).is_err()
    );
    assert!(F::rnn_packed(
        RnnMode::Lstm,
        &z(&[3, 3]),
        &[1, 2],
        &[&z(&[1, 1, 2]), &z(&[1, 1, 2])],
        &[&w_ih, &w_hh, &b, &b],
        &args
    )
    .is_err());
    let (out, s) =
        F::rnn(RnnMode::Lstm, &x, &[&z(&[1, 1, 2]), &z(&[1, 1, 2])], &[&w_ih, &w_hh, &b, &b], &args)?;
    assert_eq!((out.dims(), s[0].dims(), s[1].dims()), (&[4, 1, 2][..], &[1, 1, 2][..], &[1, 1, 2][..]));
    Ok(())
}

#[test]
fn a_packed_input_must_fit_the_layer() -> Result<()> {
    let gru = GRU::new(4, 3, RnnOptions::new())?;
    let p = pack_sequence(&[Tensor::randn([3, 5], DType::F32)?, Tensor::randn([2, 5], DType::F32)?], true)?;
    assert!(
        err(gru.call((&p, None))).ends_with("input.size(-1) must be equal to input_size. Expected 4, got 5")
    );
    let p = pack_sequence(&[Tensor::randn([3, 4], DType::F32)?, Tensor::randn([2, 4], DType::F32)?], true)?;
    let h0 = Tensor::zeros([1, 3, 3], DType::F32)?;
    assert!(err(gru.call((&p, Some(&h0)))).ends_with("Expected hidden size (1, 2, 3), got [1, 3, 3]"));
    // a hand-made packed sequence that does not add up is refused, not run
    let bad = PackedSequence { batch_sizes: Tensor::new([2i64, 2])?, ..p.clone() };
    assert!(gru.call((&bad, None)).is_err());
    let bad = PackedSequence { batch_sizes: Tensor::new([1i64, 2, 2])?, ..p.clone() };
    assert!(gru.call((&bad, None)).is_err());
    let bad = PackedSequence { sorted_indices: Some(Tensor::new([0i64, 0])?), ..p };
    assert!(gru.call((&bad, None)).is_err());
    Ok(())
}

// ----------------------------------------------------------------- state_dict and Display

#[test]
fn state_dict_and_display_are_pytorchs() -> Result<()> {
    let lstm = LSTM::new(10, 20, RnnOptions::new().num_layers(2).batch_first(true).bidirectional(true))?;
    assert_eq!(lstm.to_string(), "LSTM(10, 20, num_layers=2, batch_first=True, bidirectional=True)");
    let m = LSTM::new(10, 20, RnnOptions::new().proj_size(5).bias(false).dropout(0.5).num_layers(2))?;
    assert_eq!(m.to_string(), "LSTM(10, 20, proj_size=5, num_layers=2, bias=False, dropout=0.5)");
    assert_eq!(
        RNN::new(3, 4, RnnOptions::new().dropout(1.0).num_layers(2))?.to_string(),
        "RNN(3, 4, num_layers=2, dropout=1.0)"
    );
    // PyTorch's RNN repr leaves out the nonlinearity; the cell's shows it
    let relu = RnnOptions::new().nonlinearity(RnnNonlinearity::Relu);
    assert_eq!(RNN::new(10, 20, relu)?.to_string(), "RNN(10, 20)");
    let cell = RNNCell::with_options(10, 20, false, RnnNonlinearity::Relu, DType::F32)?;
    assert_eq!(cell.to_string(), "RNNCell(10, 20, bias=False, nonlinearity=relu)");
    assert_eq!(LSTMCell::new(3, 4)?.to_string(), "LSTMCell(3, 4)");
    assert_eq!(GRUCell::with_options(3, 4, false, DType::F32)?.to_string(), "GRUCell(3, 4, bias=False)");

    let m = LSTM::new(3, 4, RnnOptions::new().num_layers(2).proj_size(2).bidirectional(true))?;
    let keys: Vec<String> = m.state_dict()?.keys().map(String::from).collect();
    let mut want = Vec::new();
    for l in 0..2 {
        for sfx in ["", "_reverse"] {
            for p in ["weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"] {
                want.push(format!("{p}_l{l}{sfx}"));
            }
        }
    }
    assert_eq!(keys, want);
    assert_eq!(m.flat_weights_names(), want.as_slice());
    let shapes: Vec<Vec<usize>> = m.parameters().iter().map(|p| p.dims().to_vec()).collect();
    assert_eq!(&shapes[..5], &[vec![16, 3], vec![16, 2], vec![16], vec![16], vec![2, 4]]);
    assert_eq!(shapes[10], vec![16, 4], "layer 1 reads both directions' projected outputs");
    // PyTorch's initialisation: every parameter in U(-1/sqrt(hidden), 1/sqrt(hidden))
    for p in m.parameters() {
        let v = p.to_vec::<f32>()?;
        assert!(v.iter().all(|x| x.abs() <= 0.5), "bound 1/sqrt(4)");
    }
    Ok(())
}

// ------------------------------------------------------------------ values, hooks, modes

#[test]
fn value_interface_carries_tuples_and_packed_dicts() -> Result<()> {
    let lstm = LSTM::new(2, 3, RnnOptions::new())?;
    let x = Tensor::randn([4, 2, 2], DType::F32)?;
    let out = lstm.call_value(Value::from(x.clone()))?;
    // (output, (h_n, c_n))
    assert_eq!(out.get(0)?.as_tensor()?.dims(), &[4, 2, 3]);
    assert_eq!(out.get(1)?.get(0)?.as_tensor()?.dims(), &[1, 2, 3]);
    assert_eq!(out.get(1)?.get(1)?.as_tensor()?.dims(), &[1, 2, 3]);
    let (o2, _) = lstm.call((&x, None))?;
    assert_eq!(o2.to_vec::<f32>()?, out.get(0)?.as_tensor()?.to_vec::<f32>()?);

    // a packed sequence travels as a dict, in and out
    let p = pack_sequence(&[Tensor::randn([3, 2], DType::F32)?, Tensor::randn([1, 2], DType::F32)?], false)?;
    let out = lstm.call_value(Value::from((p.to_value(), Value::None)))?;
    let po = PackedSequence::from_value(out.get(0)?)?;
    assert_eq!(po.data.dims(), &[4, 3]);
    assert_eq!(po.batch_sizes.to_vec::<i64>()?, vec![2, 1, 1]);
    let (po2, _) = lstm.call((&p, None))?;
    assert_eq!(po.data.to_vec::<f32>()?, po2.data.to_vec::<f32>()?);
    assert!(lstm.call_value(Value::from((x.clone(), x.clone()))).is_err(), "LSTM's state is a pair");
    Ok(())
}

#[test]
fn hooks_see_and_replace_the_output_tuple() -> Result<()> {
    let gru = GRU::new(2, 3, RnnOptions::new())?;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let _h = gru.register_forward_hook(move |_, input, output| {
        s.lock().unwrap().push((input.tensors().len(), output.tensors().len()));
        // replace h_n by zeros
        let o = output.get(0)?.clone();
        let h = output.get(1)?.as_tensor()?.zeros_like()?;
        Ok(Some(Value::Tuple(vec![o, Value::Tensor(h)])))
    });
    let (_, h) =
        gru.call((&Tensor::randn([3, 1, 2], DType::F32)?, Some(&Tensor::ones([1, 1, 3], DType::F32)?)))?;
    assert_eq!(h.to_vec::<f32>()?, vec![0.0; 3]);
    assert_eq!(*seen.lock().unwrap(), vec![(2, 2)]);
    Ok(())
}

#[test]
fn dropout_between_layers_only_in_training() -> Result<()> {
    let x = Tensor::randn([4, 2, 3], DType::F32)?;
    let lstm = LSTM::new(3, 8, RnnOptions::new().num_layers(2).dropout(0.5))?;
    let a = lstm.call((&x, None))?.0.to_vec::<f32>()?;
    let b = lstm.call((&x, None))?.0.to_vec::<f32>()?;
    assert_ne!(a, b, "training: a fresh mask per call");
    lstm.eval();
    let c = lstm.call((&x, None))?.0.to_vec::<f32>()?;
    assert_eq!(c, lstm.call((&x, None))?.0.to_vec::<f32>()?, "eval: deterministic");
    // one layer: no dropout at all (PyTorch warns that dropout then does nothing)
    let (one, warnings) = pyrite::warnings::catch_warnings(|| GRU::new(3, 4, RnnOptions::new().dropout(0.5)));
    let one = one?;
    assert!(warnings[0].contains("non-zero dropout expects num_layers greater than 1"));
    let y = one.call((&x, None))?.0.to_vec::<f32>()?;
    assert_eq!(y, one.call((&x, None))?.0.to_vec::<f32>()?);
    Ok(())
}

#[test]
fn layers_convert_to_f64_and_handle_empty_batches() -> Result<()> {
    let mut gru = GRU::new(3, 4, RnnOptions::new().bidirectional(true))?;
    gru.to_dtype(DType::F64)?;
    let (o, h) = gru.call((&Tensor::randn([5, 2, 3], DType::F64)?, None))?;
    assert_eq!((o.dtype(), o.dims(), h.dims()), (DType::F64, &[5, 2, 8][..], &[2, 2, 4][..]));
    // a batch of zero sequences gives empty outputs, as in PyTorch
    let lstm = LSTM::new(3, 4, RnnOptions::new())?;
    let (o, (h, c)) = lstm.call((&Tensor::zeros([3, 0, 3], DType::F32)?, None))?;
    assert_eq!((o.dims(), h.dims(), c.dims()), (&[3, 0, 4][..], &[1, 0, 4][..], &[1, 0, 4][..]));
    Ok(())
}

#[test]
fn padding_utilities_round_trip() -> Result<()> {
    let seqs = [
        Tensor::randn([2, 3], DType::F32)?,
        Tensor::randn([5, 3], DType::F32)?,
        Tensor::randn([1, 3], DType::F32)?,
    ];
    let padded = pad_sequence(&seqs, true, 0.0, PaddingSide::Right)?;
    assert_eq!(padded.dims(), &[3, 5, 3]);
    for (u, s) in unpad_sequence(&padded, &[2, 5, 1], true)?.iter().zip(&seqs) {
        assert_eq!(u.to_vec::<f32>()?, s.to_vec::<f32>()?);
    }
    let packed = pack_sequence(&seqs, false)?;
    for (u, s) in unpack_sequence(&packed)?.iter().zip(&seqs) {
        assert_eq!(u.to_vec::<f32>()?, s.to_vec::<f32>()?);
    }
    let back = PackedSequence::from_value(&packed.to_value())?;
    assert_eq!(back.unsorted_indices.unwrap().to_vec::<i64>()?, vec![1, 0, 2]);
    Ok(())
}
