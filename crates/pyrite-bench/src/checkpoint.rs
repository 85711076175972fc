//! The `checkpoint` workload: loading a ~100 MB f32 state_dict, paired with
//! `reference/bench/checkpoint.py` (PyTorch). Both sides build the same shapes (a small
//! transformer language model: embeddings, six layers of attention and MLP weights, biases and
//! LayerNorms, a head; 74 tensors, 25.2M floats), save them once to `.pt` and `.safetensors`
//! in a temporary folder, and time loading them back:
//!
//! - `pt_load_ms`: the `.pt` file (`pyrite::load` / `torch.load(weights_only=True)`);
//! - `safetensors_load_ms`: the safetensors file (`safetensors::load_file` /
//!   `safetensors.torch.load_file`);
//! - `weights_load_ms`: each side's way of loading weights that issue 18 compares: Pyrite's
//!   safetensors load against PyTorch's `torch.load` of the `.pt`.

use crate::timing::{min, round, spread, timeit};
use crate::Args;
use pyrite::serialization::{safetensors, Object};
use pyrite::{DType, Tensor};
use serde_json::{json, Map, Value};

/// The state_dict's names and shapes (the same list as the reference script's).
fn shapes() -> Vec<(String, Vec<usize>)> {
    let (vocab, d, ff) = (8192, 512, 2048);
    let mut v = vec![("embed.weight".to_string(), vec![vocab, d])];
    for l in 0..6 {
        let p = format!("layers.{l}");
        v.push((format!("{p}.attn.in_proj_weight"), vec![3 * d, d]));
        v.push((format!("{p}.attn.in_proj_bias"), vec![3 * d]));
        v.push((format!("{p}.attn.out_proj.weight"), vec![d, d]));
        v.push((format!("{p}.attn.out_proj.bias"), vec![d]));
        v.push((format!("{p}.linear1.weight"), vec![ff, d]));
        v.push((format!("{p}.linear1.bias"), vec![ff]));
        v.push((format!("{p}.linear2.weight"), vec![d, ff]));
        v.push((format!("{p}.linear2.bias"), vec![d]));
        for n in ["norm1", "norm2"] {
            v.push((format!("{p}.{n}.weight"), vec![d]));
            v.push((format!("{p}.{n}.bias"), vec![d]));
        }
    }
    v.push(("head.weight".to_string(), vec![vocab / 2, d]));
    v
}

pub fn checkpoint(args: &Args) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let sd: Vec<(String, Tensor)> = shapes()
        .into_iter()
        .map(|(k, s)| (k, Tensor::randn(s.as_slice(), DType::F32).expect("randn")))
        .collect();
    let nbytes: usize = sd.iter().map(|(_, t)| t.numel() * 4).sum();
    let dir = std::env::temp_dir().join(format!("pyrite-bench-checkpoint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pt = dir.join("weights.pt");
    let st = dir.join("weights.safetensors");
    pyrite::save(&Object::from_named_tensors(sd.iter().map(|(k, t)| (k.as_str(), t))), &pt)
        .expect("save .pt");
    safetensors::save_file(sd.iter().map(|(k, t)| (k.as_str(), t)), &st, None).expect("save safetensors");
    drop(sd);

    let mut res = Map::new();
    res.insert("tensors".into(), json!(shapes().len()));
    res.insert("mb".into(), json!(round(nbytes as f64 / 1e6, 1)));
    let (t_pt, times_pt) =
        timeit(args, 1, None, || drop(std::hint::black_box(pyrite::load(&pt).expect("load .pt"))));
    let (t_st, times_st) = timeit(args, 1, None, || {
        drop(std::hint::black_box(safetensors::load_file(&st).expect("load safetensors")))
    });
    for (name, t, times) in [
        ("pt_load", t_pt, &times_pt),
        ("safetensors_load", t_st, &times_st),
        ("weights_load", t_st, &times_st),
    ] {
        res.insert(format!("{name}_ms"), json!(round(t * 1e3, 3)));
        res.insert(format!("{name}_ms_best"), json!(round(min(times) * 1e3, 3)));
        res.insert(format!("{name}_gbs"), json!(round(nbytes as f64 / t / 1e9, 2)));
        res.insert(format!("{name}_spread"), json!(spread(times)));
    }
    res.insert(
        "note".into(),
        json!(
            "weights_load = Pyrite's safetensors load vs PyTorch's torch.load(.pt); files in the page cache"
        ),
    );
    std::fs::remove_dir_all(&dir).ok();
    res
}
