//! The `transformer` workload of the reference benchmark: one `TransformerEncoderLayer`
//! (d_model 256, 4 heads, feed-forward 1024, dropout 0, post-LN, relu, batch_first) on a
//! `16 x 128 x 256` batch; a step is `zero_grad(set_to_none)`, the forward pass and
//! `out.sum().backward()`, no optimizer, as the reference does.

use crate::timing::{min, round, spread, timeit};
use crate::Args;
use pyrite::amp::AutocastOptions;
use pyrite::nn::transformer::EncoderMasks;
use pyrite::nn::{Module, TransformerEncoderLayer, TransformerLayerOptions};
use pyrite::{DType, Tensor};
use serde_json::{json, Map, Value};

pub fn transformer(args: &Args) -> Map<String, Value> {
    transformer_in(args, None)
}

/// The `transformer` step with its forward pass under bf16 autocast (Lightning's
/// "bf16-mixed"), as reference/bench/amp_bf16.py's `transformer_bf16`.
pub fn transformer_bf16(args: &Args) -> Map<String, Value> {
    transformer_in(args, Some(DType::BF16))
}

fn transformer_in(args: &Args, autocast: Option<DType>) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let (b, s, d, ff) = (16usize, 128usize, 256usize, 1024usize);
    let opts = TransformerLayerOptions {
        dim_feedforward: ff,
        dropout: 0.0,
        batch_first: true,
        ..Default::default()
    };
    let layer = TransformerEncoderLayer::with_options(d, 4, opts).expect("layer");
    layer.train();
    let x = Tensor::randn([b, s, d], DType::F32).expect("input");
    let step = || {
        layer.zero_grad_with(true).unwrap();
        let out = {
            let _amp = autocast.map(|dtype| {
                pyrite::amp::autocast(AutocastOptions { dtype: Some(dtype), ..Default::default() }).unwrap()
            });
            layer.call((&x, &EncoderMasks::default())).unwrap()
        };
        out.to_dtype(DType::F32).unwrap().sum().unwrap().backward().unwrap();
    };
    let (t, times) = timeit(args, 3, None, step);
    let macs = (b * s * (4 * d * d + 2 * d * ff) + 2 * b * s * s * d) as f64;
    let mut res = Map::new();
    res.insert(
        "config".into(),
        json!("d_model=256 nhead=4 ff=1024 seq=128 batch=16 dropout=0 post-LN relu, no optimizer"),
    );
    if autocast.is_some() {
        res.insert("precision".into(), json!("bf16-mixed"));
    }
    res.insert("steps_per_s".into(), json!(round(1.0 / t, 2)));
    res.insert("steps_per_s_best".into(), json!(round(1.0 / min(&times), 2)));
    res.insert("ms_per_step".into(), json!(round(t * 1e3, 3)));
    res.insert("tokens_per_s".into(), json!(round((b * s) as f64 / t, 1)));
    res.insert("approx_gflops".into(), json!(round(3.0 * 2.0 * macs / t / 1e9, 2)));
    res.insert("spread".into(), json!(spread(&times)));
    res
}
