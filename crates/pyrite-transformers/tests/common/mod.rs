//! Reading what `reference/gen_bert.py` recorded: the Hugging Face folders
//! `reference/data/bert-tiny{,-mlm}/` and the outputs in `reference/data/bert.safetensors`.
#![allow(dead_code)]

use pyrite::nn::{load_safetensors, StateDict};
use pyrite::{DType, Tensor};
use std::collections::HashMap;
use std::path::PathBuf;

pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(format!("{}/../../reference/data/{name}", env!("CARGO_MANIFEST_DIR")))
}

/// The tiny BERT folder (`config.json`, `model.safetensors`, `tokenizer.json`, ...).
pub fn bert_tiny() -> PathBuf {
    data_path("bert-tiny")
}

/// The `BertForMaskedLM` folder with the same encoder under `bert.`.
pub fn bert_tiny_mlm() -> PathBuf {
    data_path("bert-tiny-mlm")
}

/// Transformers' outputs, by key (`single/last_hidden_state`, ...).
pub struct Reference {
    tensors: StateDict,
    meta: HashMap<String, String>,
}

impl Reference {
    pub fn load() -> Reference {
        let path = data_path("bert.safetensors");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        Reference {
            tensors: load_safetensors(&path).unwrap(),
            meta: meta.metadata().clone().unwrap_or_default(),
        }
    }

    pub fn get(&self, key: &str) -> Tensor {
        self.tensors.get(key).unwrap_or_else(|| panic!("reference tensor {key}")).clone()
    }

    /// A JSON value of the metadata (`sentences`, `pairs`, `tokens`).
    pub fn meta(&self, key: &str) -> serde_json::Value {
        serde_json::from_str(&self.meta[key]).unwrap()
    }

    pub fn sentences(&self) -> Vec<String> {
        serde_json::from_value(self.meta("sentences")).unwrap()
    }

    pub fn pairs(&self) -> Vec<(String, String)> {
        serde_json::from_value(self.meta("pairs")).unwrap()
    }
}

/// `|got - want| <= atol` everywhere, with a message naming `what` and the worst element.
pub fn assert_close(got: &Tensor, want: &Tensor, atol: f64, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    let g = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let w = want.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let (i, d) = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).enumerate().fold((0, 0.0f64), |m, (i, d)| {
        if d > m.1 || d.is_nan() {
            (i, d)
        } else {
            m
        }
    });
    assert!(d <= atol, "{what}: element {i}: got {}, want {} (|diff| {d:e} > {atol:e})", g[i], w[i]);
}

/// A copy of `src` (a Hugging Face folder) in a fresh temporary folder named after `tag`.
pub fn temp_copy(src: &std::path::Path, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pyrite-transformers-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}
