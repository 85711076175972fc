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
        drop(std::hint::black_box(model.run(&inputs).expect("forward")));
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
