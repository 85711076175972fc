//! [`BertConfig`]: a BERT model's hyper-parameters, read from a Hugging Face `config.json`
//! (Hugging Face's `BertConfig`).
//!
//! The fields that fix the model's shapes (`vocab_size`, `hidden_size`, `num_hidden_layers`,
//! `num_attention_heads`, `intermediate_size`, `max_position_embeddings`) must be in the file:
//! a missing one is an error naming it (Hugging Face would fall back to bert-base's values and
//! then fail on the weights' shapes). The others take Hugging Face's defaults.
//!
//! ```
//! use pyrite::transformers::{BertConfig, HiddenAct};
//! let cfg = BertConfig::from_json_str(
//!     r#"{"vocab_size": 120, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
//!         "intermediate_size": 37, "max_position_embeddings": 64, "hidden_act": "gelu"}"#,
//! )?;
//! assert_eq!(cfg.hidden_act, HiddenAct::Gelu);
//! assert_eq!(cfg.layer_norm_eps, 1e-12);
//! assert_eq!(cfg.type_vocab_size, 2);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::activations::HiddenAct;
use pyrite_core::{bail, err, Error, Result};
use serde_json::{Map, Value as J};
use std::path::Path;

/// A BERT model's hyper-parameters (Hugging Face's `BertConfig`, same names and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    /// The feed-forward activation (default `gelu`, the exact erf form).
    pub hidden_act: HiddenAct,
    /// Dropout after the embeddings and each sub-layer (default 0.1).
    pub hidden_dropout_prob: f64,
    /// Dropout on the attention probabilities (default 0.1).
    pub attention_probs_dropout_prob: f64,
    pub max_position_embeddings: usize,
    /// Number of segment (token type) ids (default 2).
    pub type_vocab_size: usize,
    /// The standard deviation of the random initialisation (default 0.02).
    pub initializer_range: f64,
    /// (default 1e-12)
    pub layer_norm_eps: f64,
    /// The padding token's id: the word embedding's `padding_idx` (default 0).
    pub pad_token_id: Option<usize>,
}

impl BertConfig {
    /// A config with Hugging Face's defaults for everything but the shapes.
    pub fn new(
        vocab_size: usize,
        hidden_size: usize,
        num_hidden_layers: usize,
        num_attention_heads: usize,
        intermediate_size: usize,
        max_position_embeddings: usize,
    ) -> BertConfig {
        BertConfig {
            vocab_size,
            hidden_size,
            num_hidden_layers,
            num_attention_heads,
            intermediate_size,
            hidden_act: HiddenAct::Gelu,
            hidden_dropout_prob: 0.1,
            attention_probs_dropout_prob: 0.1,
            max_position_embeddings,
            type_vocab_size: 2,
            initializer_range: 0.02,
            layer_norm_eps: 1e-12,
            pad_token_id: Some(0),
        }
    }

    /// Reads `config.json` (the file `save_pretrained` writes).
    pub fn from_file(path: impl AsRef<Path>) -> Result<BertConfig> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| err!(Io, "BertConfig: reading {}: {e}", path.display()))?;
        BertConfig::from_json_str(&text)
            .map_err(|e| Error::new(e.kind(), format!("{} ({})", e.message(), path.display())))
    }

    /// Parses the text of a `config.json`. Unknown keys (`architectures`, `model_type`,
    /// `transformers_version`, ...) are ignored, as Hugging Face keeps them as plain attributes.
    pub fn from_json_str(text: &str) -> Result<BertConfig> {
        let v: J = serde_json::from_str(text)
            .map_err(|e| err!(Value, "BertConfig: config.json is not valid JSON: {e}"))?;
        let Some(m) = v.as_object() else {
            bail!(Value, "BertConfig: config.json must hold a JSON object, got {}", kind(&v));
        };
        if let Some(t) = m.get("model_type").and_then(J::as_str)
            && !KNOWN_MODEL_TYPES.contains(&t)
        {
            bail!(
                Value,
                "BertConfig: model_type \"{t}\" is not a BERT-family encoder this crate can load (known: {})",
                KNOWN_MODEL_TYPES.join(", ")
            );
        }
        let pet = opt_str(m, "position_embedding_type")?.unwrap_or("absolute");
        if pet != "absolute" {
            bail!(
                NotImplemented,
                "BertConfig: position_embedding_type \"{pet}\" is not supported (only \"absolute\")"
            );
        }
        let hidden_act = match opt_str(m, "hidden_act")? {
            Some(s) => HiddenAct::from_name(s)?,
            None => HiddenAct::Gelu,
        };
        let cfg = BertConfig {
            vocab_size: req_usize(m, "vocab_size")?,
            hidden_size: req_usize(m, "hidden_size")?,
            num_hidden_layers: req_usize(m, "num_hidden_layers")?,
            num_attention_heads: req_usize(m, "num_attention_heads")?,
            intermediate_size: req_usize(m, "intermediate_size")?,
            hidden_act,
            hidden_dropout_prob: opt_f64(m, "hidden_dropout_prob")?.unwrap_or(0.1),
            attention_probs_dropout_prob: opt_f64(m, "attention_probs_dropout_prob")?.unwrap_or(0.1),
            max_position_embeddings: req_usize(m, "max_position_embeddings")?,
            type_vocab_size: opt_usize(m, "type_vocab_size")?.unwrap_or(2),
            initializer_range: opt_f64(m, "initializer_range")?.unwrap_or(0.02),
            layer_norm_eps: opt_f64(m, "layer_norm_eps")?.unwrap_or(1e-12),
            pad_token_id: match m.get("pad_token_id") {
                None => Some(0),
                Some(J::Null) => None,
                Some(_) => opt_usize(m, "pad_token_id")?,
            },
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// The checks Hugging Face's layers make when they are built: heads divide the hidden
    /// size, the padding id is a word, the dropouts are probabilities.
    pub fn validate(&self) -> Result<()> {
        if self.num_attention_heads == 0 || !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            bail!(
                Value,
                "BertConfig: The hidden size ({}) is not a multiple of the number of attention heads ({})",
                self.hidden_size,
                self.num_attention_heads
            );
        }
        if let Some(p) = self.pad_token_id
            && p >= self.vocab_size
        {
            bail!(Value, "BertConfig: pad_token_id {p} is not below vocab_size {}", self.vocab_size);
        }
        for (name, p) in [
            ("hidden_dropout_prob", self.hidden_dropout_prob),
            ("attention_probs_dropout_prob", self.attention_probs_dropout_prob),
        ] {
            if !(0.0..=1.0).contains(&p) {
                bail!(Value, "BertConfig: {name} has to be between 0 and 1, but got {p}");
            }
        }
        if self.type_vocab_size == 0 || self.max_position_embeddings == 0 || self.vocab_size == 0 {
            bail!(
                Value,
                "BertConfig: vocab_size, max_position_embeddings and type_vocab_size must be positive"
            );
        }
        Ok(())
    }

    /// The size of one attention head (`hidden_size / num_attention_heads`).
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// The `model_type`s whose checkpoints are plain BERT encoders with BERT's parameter names.
const KNOWN_MODEL_TYPES: &[&str] = &["bert"];

fn kind(v: &J) -> &'static str {
    match v {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Number(_) => "a number",
        J::String(_) => "a string",
        J::Array(_) => "an array",
        J::Object(_) => "an object",
    }
}

fn req_usize(m: &Map<String, J>, key: &str) -> Result<usize> {
    opt_usize(m, key)?
        .ok_or_else(|| err!(Value, "BertConfig: config.json is missing the required field \"{key}\""))
}

fn opt_usize(m: &Map<String, J>, key: &str) -> Result<Option<usize>> {
    match m.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) => Ok(Some(n as usize)),
            None => bail!(Value, "BertConfig: \"{key}\" must be a non-negative integer, got {v}"),
        },
    }
}

fn opt_f64(m: &Map<String, J>, key: &str) -> Result<Option<f64>> {
    match m.get(key) {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) => Ok(Some(x)),
            None => bail!(Value, "BertConfig: \"{key}\" must be a number, got {v}"),
        },
    }
}

fn opt_str<'a>(m: &'a Map<String, J>, key: &str) -> Result<Option<&'a str>> {
    match m.get(key) {
        None | Some(J::Null) => Ok(None),
        Some(J::String(s)) => Ok(Some(s)),
        Some(v) => bail!(Value, "BertConfig: \"{key}\" must be a string, got {v}"),
    }
}
