//! A small causal character language model trained like its PyTorch twin
//! (`reference/gen_attention.py`): an embedding, two `TransformerEncoderLayer`s under the
//! causal mask, a final `LayerNorm`, and an output projection tied to the embedding weight.
//! From PyTorch's initial state_dict, 100 Adam steps on a fixed batch of character windows
//! follow PyTorch's loss curve to 1e-4.

mod common;

use common::{load_json, load_tensors};
use pyrite::nn::functional as F;
use pyrite::nn::transformer::EncoderMasks;
use pyrite::nn::*;
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::{Result, Tensor};

#[derive(Module)]
struct CharLm {
    base: ModuleBase,
    emb: Embedding,
    layers: Vec<TransformerEncoderLayer>,
    norm: LayerNorm,
}

impl CharLm {
    fn new(vocab: usize, d_model: usize, nhead: usize, ff: usize) -> Result<CharLm> {
        let o = TransformerLayerOptions {
            dim_feedforward: ff,
            dropout: 0.0,
            batch_first: true,
            ..Default::default()
        };
        let layers = (0..2)
            .map(|_| TransformerEncoderLayer::with_options(d_model, nhead, o.clone()))
            .collect::<Result<_>>()?;
        Ok(CharLm {
            base: ModuleBase::new(),
            emb: Embedding::new(vocab, d_model)?,
            layers,
            norm: LayerNorm::new(&[d_model])?,
        })
    }
}

impl Module for CharLm {
    /// Token ids `(N, L)` to next-token logits `(N, L, vocab)`.
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        let mask = Transformer::generate_square_subsequent_mask(idx.dims()[1])?;
        let masks = EncoderMasks { src_mask: Some(&mask), is_causal: Some(true), ..Default::default() };
        let mut h = self.emb.call(idx)?;
        for layer in &self.layers {
            h = layer.call((&h, &masks))?;
        }
        self.norm.call(&h)?.matmul(&self.emb.weight.t()?)
    }
}

#[test]
fn causal_lm_follows_pytorchs_loss_curve() -> Result<()> {
    let ts = load_tensors("attention.safetensors").0;
    let info = &load_json("attention.json")["lm"];
    let vocab = info["vocab"].as_str().unwrap().chars().count();
    let u = |k: &str| info[k].as_u64().unwrap() as usize;
    let lm = CharLm::new(vocab, u("d_model"), u("nhead"), u("dim_feedforward"))?;
    let keys: Vec<&str> =
        info["state_dict_keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(lm.state_dict()?.keys().collect::<Vec<_>>(), keys);
    let mut sd = StateDict::new();
    for k in &keys {
        sd.insert(*k, ts[&format!("lm/sd/{k}")].clone());
    }
    lm.load_state_dict(&sd, true)?;
    let (x, y) = (&ts["lm/x"], &ts["lm/y"]);
    let mut opt =
        Adam::new(lm.parameters(), AdamOptions { lr: info["lr"].as_f64().unwrap(), ..Default::default() })?;
    let want: Vec<f64> = info["losses"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(want.len(), 100);
    let mut got = Vec::new();
    for _ in 0..100 {
        opt.zero_grad()?;
        let logits = lm.call(x)?;
        let loss =
            F::cross_entropy(&logits.reshape([-1, vocab as isize])?, &y.reshape([-1])?, &Default::default())?;
        loss.backward()?;
        opt.step()?;
        got.push(loss.item::<f32>()? as f64);
    }
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    println!("largest loss difference from PyTorch over 100 steps: {worst:e}");
    assert!(worst <= 1e-4, "largest loss difference {worst:e}\npyrite  {got:?}\npytorch {want:?}");
    assert!(got[99] < 0.2 * got[0], "the model learns: {} -> {}", got[0], got[99]);
    Ok(())
}
