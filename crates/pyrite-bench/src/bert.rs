//! The `bert_forward` workload: one forward pass of a `BertModel` with all-MiniLM-L6-v2's
//! config (vocab 30522, hidden 384, 6 layers, 12 heads, intermediate 1536, 512 positions, gelu),
//! random weights, eval mode and no autograd, on a `[8, 81]` batch of token ids with an
//! all-ones attention mask and zero token types: the sentence-embedding workload of issue 20.
//! Paired with `reference/bench/bert_forward.py` (`transformers.BertModel`, the same shapes).
//! Reports `forward_ms` (median), its best and spread, and tokens per second.

use crate::timing::{min, round, spread, timeit};
use crate::Args;
use pyrite::autograd::no_grad;
use pyrite::nn::Module;
use pyrite::transformers::{BertConfig, BertInputs, BertModel};
use pyrite::{DType, Tensor};
use serde_json::{json, Map, Value};

pub fn bert_forward(args: &Args) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let (batch, seq) = (8usize, 81usize);
    let config = BertConfig::new(30522, 384, 6, 12, 1536, 512);
    let model = BertModel::new(&config).expect("BertModel");
    model.eval();
    let inputs = BertInputs {
        input_ids: Some(Tensor::randint(1000, 30522, [batch, seq], DType::I64).expect("ids")),
        attention_mask: Some(Tensor::ones([batch, seq], DType::I64).expect("mask")),
        token_type_ids: Some(Tensor::zeros([batch, seq], DType::I64).expect("token types")),
        ..Default::default()
    };
    let _g = no_grad();
    let (t, times) = timeit(args, 3, None, || {
        drop(std::hint::black_box(model.call(&inputs).expect("forward")));
    });
    let mut res = Map::new();
    res.insert(
        "config".into(),
        json!("all-MiniLM-L6-v2 shapes: vocab 30522, hidden 384, 6 layers, 12 heads, ff 1536; batch 8 x 81 tokens; eval, no_grad"),
    );
    res.insert("forward_ms".into(), json!(round(t * 1e3, 3)));
    res.insert("forward_ms_best".into(), json!(round(min(&times) * 1e3, 3)));
    res.insert("tokens_per_s".into(), json!(round((batch * seq) as f64 / t, 1)));
    res.insert("spread".into(), json!(spread(&times)));
    res
}

/// The `bert_ops` workload: the three element-wise-and-row ops of that BERT forward, alone, on
/// its shapes and in eval mode without autograd: exact (erf) GELU on the feed-forward
/// activations `[8, 81, 1536]`, softmax over the attention scores `[8, 12, 81, 81]` (last
/// dim), and LayerNorm over the hidden states `[8, 81, 384]` (weight and bias, eps 1e-12).
/// Paired with `reference/bench/bert_ops.py`. Reports `gelu_ms`, `softmax_ms` and
/// `layer_norm_ms` (medians) and their best.
pub fn bert_ops(args: &Args) -> Map<String, Value> {
    use pyrite::nn::functional as F;
    pyrite::manual_seed(0);
    let _g = no_grad();
    let ff = Tensor::randn([8, 81, 1536], DType::F32).expect("ff");
    let scores = Tensor::randn([8, 12, 81, 81], DType::F32).expect("scores");
    let hidden = Tensor::randn([8, 81, 384], DType::F32).expect("hidden");
    let ln = pyrite::nn::LayerNorm::with_options(&[384], 1e-12, true, true).expect("LayerNorm");
    let mut res = Map::new();
    res.insert(
        "config".into(),
        json!("BERT (MiniLM) shapes: gelu [8, 81, 1536], softmax(-1) [8, 12, 81, 81], layer_norm [8, 81, 384] eps 1e-12; f32, no_grad"),
    );
    let mut time = |name: &str, f: &mut dyn FnMut()| {
        let (t, times) = timeit(args, 5, None, f);
        res.insert(format!("{name}_ms"), json!(round(t * 1e3, 4)));
        res.insert(format!("{name}_ms_best"), json!(round(min(&times) * 1e3, 4)));
    };
    time("gelu", &mut || drop(std::hint::black_box(F::gelu(&ff, F::GeluApproximate::None).expect("gelu"))));
    time("softmax", &mut || drop(std::hint::black_box(scores.softmax(-1).expect("softmax"))));
    time("layer_norm", &mut || drop(std::hint::black_box(ln.call(&hidden).expect("layer_norm"))));
    res
}
