//! [`BertModel::from_pretrained`]: a model from a Hugging Face folder (what `save_pretrained`
//! writes, or a snapshot downloaded from the Hub).
//!
//! - `config.json` gives the [`BertConfig`];
//! - the weights come from `model.safetensors`, or from the shards that
//!   `model.safetensors.index.json` lists. `pytorch_model.bin` needs a `.pt` reader, which
//!   Pyrite does not have yet: such a folder is an error that says so.
//!
//! Checkpoint keys are mapped to the model's as Hugging Face maps them:
//! - a checkpoint of a model with a head (`BertForMaskedLM`, `BertForSequenceClassification`,
//!   ...) keeps the encoder under `bert.`: that prefix is removed, and the head's keys
//!   (`cls.*`, `classifier.*`) are reported as unexpected, not an error;
//! - the old TensorFlow names `LayerNorm.gamma` / `LayerNorm.beta` become `weight` / `bias`;
//! - `embeddings.position_ids` and `embeddings.token_type_ids`, buffers that older versions of
//!   `transformers` saved, are dropped.
//!
//! Missing keys leave Hugging Face's random initialisation in place (a `BertForMaskedLM`
//! checkpoint has no pooler, for example); like unexpected keys, they are listed in the
//! [`LoadingInfo`] and raised as a warning. A key whose shape differs from the model's is an
//! error naming the key. The model is returned in eval mode, as Hugging Face returns it.

use super::config::BertConfig;
use super::modeling::BertModel;
use pyrite_core::{bail, err, warnings, Error, Result, Tensor};
use pyrite_nn::{load_safetensors, Module, StateDict};
use std::path::{Path, PathBuf};

/// What [`BertModel::from_pretrained_with`] takes.
#[derive(Clone, Debug)]
pub struct FromPretrainedOptions {
    /// Build the pooler (default true, as `BertModel.from_pretrained`).
    pub add_pooling_layer: bool,
}

impl Default for FromPretrainedOptions {
    fn default() -> Self {
        FromPretrainedOptions { add_pooling_layer: true }
    }
}

/// How a checkpoint's keys met the model's (Hugging Face's `output_loading_info=True`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadingInfo {
    /// The model's keys the checkpoint lacks (left as initialised).
    pub missing_keys: Vec<String>,
    /// The checkpoint's keys the model has no place for (a head's, for example), as they are
    /// in the checkpoint.
    pub unexpected_keys: Vec<String>,
    /// The prefix removed from the checkpoint's keys (`"bert."`), if any.
    pub removed_prefix: Option<String>,
}

/// The base-model prefix of BERT checkpoints with a head (`base_model_prefix`).
const BASE_MODEL_PREFIX: &str = "bert.";

/// Buffers older `transformers` versions saved that the model does not load.
const IGNORED_KEYS: [&str; 2] = ["embeddings.position_ids", "embeddings.token_type_ids"];

impl BertModel {
    /// `BertModel.from_pretrained(folder)`: the config and weights of a Hugging Face folder,
    /// in eval mode. Missing and unexpected keys are raised as a warning (see
    /// [`BertModel::from_pretrained_with`] to get them).
    pub fn from_pretrained(folder: impl AsRef<Path>) -> Result<BertModel> {
        Ok(BertModel::from_pretrained_with(folder, FromPretrainedOptions::default())?.0)
    }

    /// [`BertModel::from_pretrained`] with options, returning how the keys were matched.
    pub fn from_pretrained_with(
        folder: impl AsRef<Path>,
        opts: FromPretrainedOptions,
    ) -> Result<(BertModel, LoadingInfo)> {
        let folder = folder.as_ref();
        if !folder.is_dir() {
            bail!(Io, "BertModel.from_pretrained: {} is not a folder", folder.display());
        }
        let config_path = folder.join("config.json");
        if !config_path.is_file() {
            bail!(Io, "BertModel.from_pretrained: {} has no config.json", folder.display());
        }
        let config = BertConfig::from_file(&config_path)?;
        let checkpoint = read_weights(folder)?;
        let model = BertModel::with_pooling_layer(&config, opts.add_pooling_layer)?;
        let info = model.load_checkpoint(&checkpoint).map_err(|e| {
            Error::new(e.kind(), format!("BertModel.from_pretrained({}): {}", folder.display(), e.message()))
        })?;
        if !info.unexpected_keys.is_empty() {
            warnings::warn(
                "transformers",
                &format!(
                    "Some weights of the model checkpoint at {} were not used when initializing BertModel: {:?}",
                    folder.display(),
                    info.unexpected_keys
                ),
            );
        }
        if !info.missing_keys.is_empty() {
            warnings::warn(
                "transformers",
                &format!(
                    "Some weights of BertModel were not initialized from the model checkpoint at {} and are newly initialized: {:?}",
                    folder.display(),
                    info.missing_keys
                ),
            );
        }
        model.eval();
        Ok((model, info))
    }

    /// Loads a checkpoint's state_dict with Hugging Face's key mapping (see the module doc):
    /// missing and unexpected keys are returned, a shape mismatch is an error.
    pub fn load_checkpoint(&self, checkpoint: &StateDict) -> Result<LoadingInfo> {
        let expected: Vec<String> = self.state_dict()?.keys().map(String::from).collect();
        let has_prefix = checkpoint.keys().any(|k| k.starts_with(BASE_MODEL_PREFIX))
            && !expected.iter().any(|k| k.starts_with(BASE_MODEL_PREFIX));
        let mut sd = StateDict::new();
        // The model's key each renamed entry came from, to report unexpected keys as written.
        let mut original = std::collections::HashMap::new();
        let mut unexpected = Vec::new();
        for (k, t) in checkpoint.iter() {
            let key = if has_prefix {
                match k.strip_prefix(BASE_MODEL_PREFIX) {
                    Some(rest) => rest,
                    None => {
                        unexpected.push(k.to_string());
                        continue;
                    }
                }
            } else {
                k
            };
            let key = rename_legacy(key);
            if IGNORED_KEYS.contains(&key.as_str()) {
                continue;
            }
            original.insert(key.clone(), k.to_string());
            sd.insert(key, t.clone());
        }
        let keys = self.load_state_dict(&sd, false)?;
        unexpected.extend(
            keys.unexpected_keys.iter().map(|k| original.get(k).cloned().unwrap_or_else(|| k.clone())),
        );
        Ok(LoadingInfo {
            missing_keys: keys.missing_keys,
            unexpected_keys: unexpected,
            removed_prefix: has_prefix.then(|| BASE_MODEL_PREFIX.to_string()),
        })
    }
}

/// TensorFlow-era names: `LayerNorm.gamma` and `LayerNorm.beta`.
fn rename_legacy(key: &str) -> String {
    if let Some(stem) = key.strip_suffix(".gamma") {
        if stem.ends_with("LayerNorm") {
            return format!("{stem}.weight");
        }
    }
    if let Some(stem) = key.strip_suffix(".beta") {
        if stem.ends_with("LayerNorm") {
            return format!("{stem}.bias");
        }
    }
    key.to_string()
}

/// The folder's weights as one state_dict: `model.safetensors`, or the shards of
/// `model.safetensors.index.json`.
pub fn read_weights(folder: &Path) -> Result<StateDict> {
    let single = folder.join("model.safetensors");
    if single.is_file() {
        return load_safetensors(&single);
    }
    let index = folder.join("model.safetensors.index.json");
    if index.is_file() {
        return read_sharded(folder, &index);
    }
    if folder.join("pytorch_model.bin").is_file() {
        // TODO(issue 18): read it with the `.pt` reader of pyrite-serialization once it lands.
        bail!(
            NotImplemented,
            "BertModel.from_pretrained: {} holds pytorch_model.bin: reading it needs pyrite-serialization (the .pt reader), which is not available yet; save the model with safetensors (`model.save_pretrained(folder, safe_serialization=True)`) instead",
            folder.display()
        );
    }
    bail!(
        Io,
        "BertModel.from_pretrained: {} has no model.safetensors (nor model.safetensors.index.json)",
        folder.display()
    )
}

fn read_sharded(folder: &Path, index: &Path) -> Result<StateDict> {
    let text = std::fs::read_to_string(index).map_err(|e| err!(Io, "reading {}: {e}", index.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| err!(Value, "{} is not valid JSON: {e}", index.display()))?;
    let Some(map) = v.get("weight_map").and_then(|m| m.as_object()) else {
        bail!(Value, "{} has no \"weight_map\" object", index.display());
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for (k, f) in map {
        let Some(f) = f.as_str() else {
            bail!(Value, "{}: the shard of \"{k}\" must be a file name", index.display());
        };
        let p = folder.join(f);
        if !files.contains(&p) {
            files.push(p);
        }
    }
    let mut all: Vec<(String, Tensor)> = Vec::new();
    for f in &files {
        all.extend(load_safetensors(f)?.iter().map(|(k, t)| (k.to_string(), t.clone())));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(all.into_iter().collect())
}
