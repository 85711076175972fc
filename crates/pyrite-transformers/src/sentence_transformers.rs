//! [`SentenceTransformer`]: sentence-transformers' `SentenceTransformer(folder)` for a BERT
//! folder: tokenizer, [`BertModel`], pooling and (optionally) normalisation, configured by
//! the files sentence-transformers saves, so that [`SentenceTransformer::encode`] gives the
//! embeddings `model.encode(sentences)` gives in Python.
//!
//! - `modules.json` lists the modules: a `Transformer` (its folder holds the BERT files and
//!   `sentence_bert_config.json`), a `Pooling` (its folder holds the pooling `config.json`),
//!   and an optional `Normalize`. Without `modules.json`, sentence-transformers' fallback: the
//!   folder is the transformer, with mean pooling and no normalisation.
//! - `sentence_bert_config.json` gives `max_seq_length`, the truncation length of every call
//!   (256 for `all-MiniLM-L6-v2`, where the tokenizer's own `model_max_length` says 512), and
//!   `do_lower_case`. Without it (or with `max_seq_length` null), the length is
//!   `min(max_position_embeddings, tokenizer.model_max_length)`, as sentence-transformers
//!   computes it.
//! - The pooling `config.json` selects the poolings, concatenated when there are several:
//!   `pooling_mode` (`"mean"`, or a list such as `["cls", "max"]`; sentence-transformers 4 and
//!   later) or the older `pooling_mode_cls_token`, `pooling_mode_max_tokens`,
//!   `pooling_mode_mean_tokens` and `pooling_mode_mean_sqrt_len_tokens` booleans (in that
//!   order). The weighted-mean and last-token modes, and other modules (`Dense`, ...), are
//!   errors that name them.
//!
//! Only in the `tokenizers` feature (on by default).
//!
//! ```no_run
//! use pyrite::transformers::SentenceTransformer;
//! let model = SentenceTransformer::from_pretrained("path/to/all-MiniLM-L6-v2")?;
//! let embeddings = model.encode(&["A first sentence.", "And a second one."])?;
//! assert_eq!(embeddings.dims(), &[2, model.get_sentence_embedding_dimension()]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::bert::{BertInputs, BertModel};
use crate::pooling::{cls_pooling, max_pooling, mean_pooling, normalize};
use crate::tokenization::{AutoTokenizer, Padding, TokenizerOptions};
use pyrite_core::autograd::no_grad;
use pyrite_core::{bail, err, Result, Tensor};
use serde_json::Value as J;
use std::path::Path;

/// One of the poolings of sentence-transformers' `Pooling` module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolingMode {
    /// `pooling_mode_cls_token`: the first token's state.
    Cls,
    /// `pooling_mode_max_tokens`: the element-wise maximum over the tokens.
    Max,
    /// `pooling_mode_mean_tokens`: the mean over the tokens.
    Mean,
    /// `pooling_mode_mean_sqrt_len_tokens`: the sum over the tokens divided by the square root
    /// of their number.
    MeanSqrtLen,
}

/// How many sentences [`SentenceTransformer::encode`] runs through the model at once
/// (`encode`'s default `batch_size`).
const BATCH_SIZE: usize = 32;

/// A sentence-transformers model folder: tokenizer, BERT encoder, pooling, normalisation.
#[derive(Debug)]
pub struct SentenceTransformer {
    tokenizer: AutoTokenizer,
    model: BertModel,
    max_seq_length: usize,
    do_lower_case: bool,
    pooling: Vec<PoolingMode>,
    normalize: bool,
}

fn read_json(path: &Path) -> Result<J> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err!(Io, "SentenceTransformer: reading {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| err!(Value, "SentenceTransformer: {} is not valid JSON: {e}", path.display()))
}

fn flag(cfg: &J, key: &str, path: &Path) -> Result<bool> {
    match cfg.get(key) {
        None | Some(J::Null) => Ok(false),
        Some(J::Bool(b)) => Ok(*b),
        Some(v) => {
            bail!(Value, "SentenceTransformer: {}: \"{key}\" must be a boolean, got {v}", path.display())
        }
    }
}

/// The poolings of a `Pooling` module's `config.json`: `pooling_mode` (a name or a list of
/// names, in concatenation order; sentence-transformers 4 and later) or the
/// `pooling_mode_*` booleans (earlier versions: concatenated as cls, max, mean, mean_sqrt_len).
fn pooling_modes(cfg: &J, hidden: usize, path: &Path) -> Result<Vec<PoolingMode>> {
    for key in ["word_embedding_dimension", "embedding_dimension"] {
        if let Some(d) = cfg.get(key).and_then(J::as_u64)
            && d != hidden as u64
        {
            bail!(
                Value,
                "SentenceTransformer: {}: {key} {d} is not the model's hidden_size {hidden}",
                path.display()
            );
        }
    }
    let by_name = |name: &str| -> Result<PoolingMode> {
        Ok(match name {
            "cls" => PoolingMode::Cls,
            "max" => PoolingMode::Max,
            "mean" => PoolingMode::Mean,
            "mean_sqrt_len_tokens" => PoolingMode::MeanSqrtLen,
            "weightedmean" | "lasttoken" => {
                bail!(NotImplemented, "SentenceTransformer: {}: the pooling mode \"{name}\" is not supported", path.display())
            }
            other => bail!(
                Value,
                "SentenceTransformer: {}: invalid pooling mode \"{other}\" (valid: cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken)",
                path.display()
            ),
        })
    };
    let modes = match cfg.get("pooling_mode") {
        Some(J::String(s)) => vec![by_name(s)?],
        Some(J::Array(v)) => v
            .iter()
            .map(|m| match m.as_str() {
                Some(s) => by_name(s),
                None => bail!(
                    Value,
                    "SentenceTransformer: {}: a pooling mode must be a string, got {m}",
                    path.display()
                ),
            })
            .collect::<Result<_>>()?,
        Some(other) => {
            bail!(
                Value,
                "SentenceTransformer: {}: \"pooling_mode\" must be a string or a list, got {other}",
                path.display()
            )
        }
        None => {
            let mut modes = Vec::new();
            for (key, name) in [
                ("pooling_mode_cls_token", "cls"),
                ("pooling_mode_max_tokens", "max"),
                ("pooling_mode_mean_tokens", "mean"),
                ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"),
                ("pooling_mode_weightedmean_tokens", "weightedmean"),
                ("pooling_mode_lasttoken", "lasttoken"),
            ] {
                if flag(cfg, key, path)? {
                    modes.push(by_name(name)?);
                }
            }
            modes
        }
    };
    if modes.is_empty() {
        bail!(Value, "SentenceTransformer: {} selects no pooling mode", path.display());
    }
    Ok(modes)
}

impl SentenceTransformer {
    /// `SentenceTransformer(folder)`: the modules of a sentence-transformers folder (see the
    /// module doc). The encoder is loaded with [`BertModel::from_pretrained`], in eval mode.
    pub fn from_pretrained(folder: impl AsRef<Path>) -> Result<SentenceTransformer> {
        let folder = folder.as_ref();
        if !folder.is_dir() {
            bail!(Io, "SentenceTransformer: {} is not a folder", folder.display());
        }
        let modules_path = folder.join("modules.json");
        let (transformer, pooling_cfg, normalize) = if modules_path.is_file() {
            let modules = read_json(&modules_path)?;
            let Some(list) = modules.as_array() else {
                bail!(Value, "SentenceTransformer: {} must hold a list of modules", modules_path.display());
            };
            let (mut transformer, mut pooling, mut normalize) = (None, None, false);
            for m in list {
                let ty = m.get("type").and_then(J::as_str).unwrap_or("");
                let sub = m.get("path").and_then(J::as_str).unwrap_or("");
                if Path::new(sub).components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                    bail!(
                        Value,
                        "SentenceTransformer: {}: the module path \"{sub}\" must be a folder inside the model folder",
                        modules_path.display()
                    );
                }
                let kind = ty.rsplit('.').next().unwrap_or(ty);
                match kind {
                    "Transformer" if transformer.is_none() => transformer = Some(folder.join(sub)),
                    "Pooling" if pooling.is_none() => pooling = Some(folder.join(sub).join("config.json")),
                    "Normalize" => normalize = true,
                    _ => bail!(
                        NotImplemented,
                        "SentenceTransformer: {}: the module \"{ty}\" is not supported (only one Transformer, one Pooling and Normalize)",
                        modules_path.display()
                    ),
                }
            }
            let Some(transformer) = transformer else {
                bail!(Value, "SentenceTransformer: {} lists no Transformer module", modules_path.display());
            };
            (transformer, pooling, normalize)
        } else {
            (folder.to_path_buf(), None, false)
        };

        let tokenizer = AutoTokenizer::from_pretrained(&transformer)?;
        let model = BertModel::from_pretrained(&transformer)?;
        let st_path = transformer.join("sentence_bert_config.json");
        let st_cfg = if st_path.is_file() { read_json(&st_path)? } else { J::Null };
        let max_seq_length = match st_cfg.get("max_seq_length") {
            None | Some(J::Null) => {
                let max_pos = model.config.max_position_embeddings;
                tokenizer.model_max_length().map_or(max_pos, |m| m.min(max_pos))
            }
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => n as usize,
                _ => bail!(
                    Value,
                    "SentenceTransformer: {}: \"max_seq_length\" must be a positive integer, got {v}",
                    st_path.display()
                ),
            },
        };
        let do_lower_case = flag(&st_cfg, "do_lower_case", &st_path)?;

        let hidden = model.config.hidden_size;
        let pooling = match pooling_cfg {
            None => vec![PoolingMode::Mean],
            Some(path) => pooling_modes(&read_json(&path)?, hidden, &path)?,
        };
        Ok(SentenceTransformer { tokenizer, model, max_seq_length, do_lower_case, pooling, normalize })
    }

    /// `model.encode(sentences)` (`convert_to_tensor=True`): one embedding per sentence,
    /// `[n, get_sentence_embedding_dimension()]` f32. Each sentence is stripped of surrounding
    /// whitespace (and lowercased with `do_lower_case`), tokenized with padding and truncation
    /// to `max_seq_length`, and run through the model in batches of 32, without autograd.
    pub fn encode(&self, sentences: &[&str]) -> Result<Tensor> {
        let _g = no_grad();
        let dim = self.get_sentence_embedding_dimension();
        if sentences.is_empty() {
            return Tensor::zeros([0, dim], pyrite_core::DType::F32);
        }
        let texts: Vec<String> = sentences
            .iter()
            .map(|s| if self.do_lower_case { s.trim().to_lowercase() } else { s.trim().to_string() })
            .collect();
        let opts = TokenizerOptions {
            padding: Padding::Longest,
            truncation: true,
            max_length: Some(self.max_seq_length),
            add_special_tokens: true,
        };
        let mut out = Vec::new();
        for chunk in texts.chunks(BATCH_SIZE) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let batch = self.tokenizer.call(&refs, &opts)?;
            let inputs: BertInputs = batch.to_inputs();
            let h = self.model.call(&inputs)?.last_hidden_state;
            let mask = &batch.attention_mask;
            let parts = self
                .pooling
                .iter()
                .map(|mode| match mode {
                    PoolingMode::Cls => cls_pooling(&h),
                    PoolingMode::Max => max_pooling(&h, mask),
                    PoolingMode::Mean => mean_pooling(&h, mask),
                    PoolingMode::MeanSqrtLen => {
                        let m = mask.to_dtype(h.dtype())?.unsqueeze(-1)?;
                        let sum = h.mul(&m)?.sum_dims(&[1], false)?;
                        let count = m.sum_dims(&[1], false)?.clamp(Some(1e-9.into()), None)?;
                        sum.div(&count.sqrt()?)
                    }
                })
                .collect::<Result<Vec<Tensor>>>()?;
            let e = if parts.len() == 1 {
                parts.into_iter().next().expect("one part")
            } else {
                Tensor::cat(&parts, 1)?
            };
            out.push(if self.normalize { normalize(&e)? } else { e });
        }
        if out.len() == 1 {
            return Ok(out.pop().expect("one batch"));
        }
        Tensor::cat(&out, 0)
    }

    /// The truncation length of every call (`model.max_seq_length`).
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// `model.max_seq_length = n`.
    pub fn set_max_seq_length(&mut self, n: usize) {
        self.max_seq_length = n;
    }

    /// The length of an embedding: the hidden size times the number of pooling modes.
    pub fn get_sentence_embedding_dimension(&self) -> usize {
        self.model.config.hidden_size * self.pooling.len()
    }

    /// The pooling modes, in the order their outputs are concatenated.
    pub fn pooling_modes(&self) -> &[PoolingMode] {
        &self.pooling
    }

    /// Whether the embeddings are normalised to unit length (a `Normalize` module).
    pub fn normalizes(&self) -> bool {
        self.normalize
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &AutoTokenizer {
        &self.tokenizer
    }

    /// The encoder.
    pub fn model(&self) -> &BertModel {
        &self.model
    }
}
