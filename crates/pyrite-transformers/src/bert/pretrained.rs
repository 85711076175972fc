//! [`BertModel::from_pretrained`]: a model from a Hugging Face folder (what `save_pretrained`
//! writes, or a snapshot downloaded from the Hub).
//!
//! - `config.json` gives the [`BertConfig`];
//! - the weights come from the first of these that the folder has, Hugging Face's order:
//!   `model.safetensors`, the shards that `model.safetensors.index.json` lists,
//!   `pytorch_model.bin` (a `torch.save` file, read weights-only by
//!   [`pyrite_serialization::load`]: nothing but tensors and containers is unpickled), the
//!   shards that `pytorch_model.bin.index.json` lists.
//!
//! Checkpoint keys are mapped to the model's as Hugging Face maps them:
//! - a checkpoint of a model with a head (`BertForMaskedLM`, `BertForSequenceClassification`,
//!   ...) keeps the encoder under `bert.`: that prefix is removed, and the head's keys
//!   (`cls.*`, `classifier.*`) are reported as unexpected, not an error;
//! - the old TensorFlow names `LayerNorm.gamma` / `LayerNorm.beta` become `weight` / `bias`;
//! - `embeddings.position_ids` and `embeddings.token_type_ids`, buffers that older versions of
//!   `transformers` saved, are dropped.
//!
//! The config is checked against the weights before the model is built: a key whose shape
//! differs from the config's is an error naming the key (PyTorch's "size mismatch" message),
//! and so is a config whose parameters the checkpoint mostly lacks (more missing elements
//! than loaded ones: a `num_hidden_layers` of 1000 for a 6-layer checkpoint, say), so that a
//! few bytes of `config.json` cannot make it allocate gigabytes for nothing. Hugging Face
//! would build that model and initialise it at random; see docs/ARCHITECTURE.md.
//!
//! The model is built without random initialisation ([`pyrite_nn::init::no_init_weights`],
//! as Hugging Face builds it), since the checkpoint overwrites it. Missing keys (a
//! `BertForMaskedLM` checkpoint has no pooler, for example) are then given Hugging Face's
//! initialisation (`_init_weights`: normal with `initializer_range` for weights, zero biases,
//! LayerNorm ones and zeros, the padding row of the word embeddings zero); like unexpected
//! keys, they are listed in the [`LoadingInfo`] and raised as a warning. The model is
//! returned in eval mode, as Hugging Face returns it.

use super::config::BertConfig;
use super::modeling::BertModel;
use pyrite_core::autograd::no_grad;
use pyrite_core::{bail, err, warnings, Error, Result, Tensor};
use pyrite_nn::{init, load_safetensors, Module, StateDict};
use std::collections::HashMap;
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
        let in_folder = |e: Error| {
            Error::new(e.kind(), format!("BertModel.from_pretrained({}): {}", folder.display(), e.message()))
        };
        // Everything about the config is checked against the checkpoint before a byte of the
        // model is allocated.
        // A BertModel never has keys under `bert.`: the prefix of a checkpoint with a head is removed.
        let mapped = map_checkpoint(checkpoint, std::iter::empty());
        check_against_checkpoint(&config, opts.add_pooling_layer, &mapped.state_dict).map_err(in_folder)?;
        let model = {
            let _skip = init::no_init_weights();
            BertModel::with_pooling_layer(&config, opts.add_pooling_layer)?
        };
        let info = model.load_mapped(mapped).map_err(in_folder)?;
        model.init_missing(&info.missing_keys)?;
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
    /// missing and unexpected keys are returned (missing ones keep what the model holds), a
    /// shape mismatch is an error.
    pub fn load_checkpoint(&self, checkpoint: &StateDict) -> Result<LoadingInfo> {
        let expected: Vec<String> = self.state_dict()?.keys().map(String::from).collect();
        let mapped = map_checkpoint(checkpoint.clone(), expected.iter().map(String::as_str));
        self.load_mapped(mapped)
    }

    fn load_mapped(&self, mapped: Mapped) -> Result<LoadingInfo> {
        let Mapped { state_dict, original, mut unexpected, has_prefix } = mapped;
        let keys = self.load_state_dict(&state_dict, false)?;
        unexpected.extend(
            keys.unexpected_keys.iter().map(|k| original.get(k).cloned().unwrap_or_else(|| k.clone())),
        );
        Ok(LoadingInfo {
            missing_keys: keys.missing_keys,
            unexpected_keys: unexpected,
            removed_prefix: has_prefix.then(|| BASE_MODEL_PREFIX.to_string()),
        })
    }

    /// Hugging Face's `_init_weights` for the keys a checkpoint did not give (the model was
    /// built without initialisation): normal(0, `initializer_range`) weights, zero biases,
    /// LayerNorm weights one, and the padding row of the word embeddings zero.
    fn init_missing(&self, missing: &[String]) -> Result<()> {
        if missing.is_empty() {
            return Ok(());
        }
        let sd = self.state_dict()?;
        let _g = no_grad();
        for key in missing {
            let Some(t) = sd.get(key) else { continue };
            if key.ends_with("LayerNorm.weight") {
                t.fill_(1.0)?;
            } else if key.ends_with(".bias") {
                t.fill_(0.0)?;
            } else {
                t.normal_(0.0, self.config.initializer_range, None)?;
                if key == "embeddings.word_embeddings.weight"
                    && let Some(p) = self.config.pad_token_id
                {
                    t.select(0, p as isize)?.fill_(0.0)?;
                }
            }
        }
        Ok(())
    }
}

/// A checkpoint with its keys mapped to the model's.
struct Mapped {
    state_dict: StateDict,
    /// The checkpoint's key each mapped key came from, to report unexpected keys as written.
    original: HashMap<String, String>,
    /// Keys outside the base model's prefix.
    unexpected: Vec<String>,
    has_prefix: bool,
}

/// Hugging Face's key mapping (see the module doc), for a model with the keys `expected`.
fn map_checkpoint<'a>(checkpoint: StateDict, expected: impl Iterator<Item = &'a str>) -> Mapped {
    let model_has_prefix = expected.into_iter().any(|k| k.starts_with(BASE_MODEL_PREFIX));
    let has_prefix = checkpoint.keys().any(|k| k.starts_with(BASE_MODEL_PREFIX)) && !model_has_prefix;
    let mut state_dict = StateDict::new();
    let mut original = HashMap::new();
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
        state_dict.insert(key, t.clone());
    }
    Mapped { state_dict, original, unexpected, has_prefix }
}

/// The parameters of one layer (under `encoder.layer.N.`) and their shapes.
fn layer_shapes(cfg: &BertConfig) -> Vec<(&'static str, Vec<usize>)> {
    let (h, ff) = (cfg.hidden_size, cfg.intermediate_size);
    vec![
        ("attention.self.query.weight", vec![h, h]),
        ("attention.self.query.bias", vec![h]),
        ("attention.self.key.weight", vec![h, h]),
        ("attention.self.key.bias", vec![h]),
        ("attention.self.value.weight", vec![h, h]),
        ("attention.self.value.bias", vec![h]),
        ("attention.output.dense.weight", vec![h, h]),
        ("attention.output.dense.bias", vec![h]),
        ("attention.output.LayerNorm.weight", vec![h]),
        ("attention.output.LayerNorm.bias", vec![h]),
        ("intermediate.dense.weight", vec![ff, h]),
        ("intermediate.dense.bias", vec![ff]),
        ("output.dense.weight", vec![h, ff]),
        ("output.dense.bias", vec![h]),
        ("output.LayerNorm.weight", vec![h]),
        ("output.LayerNorm.bias", vec![h]),
    ]
}

/// The parameters outside the layers (embeddings, pooler) and their shapes.
fn top_shapes(cfg: &BertConfig, add_pooling_layer: bool) -> Vec<(&'static str, Vec<usize>)> {
    let h = cfg.hidden_size;
    let mut v = vec![
        ("embeddings.word_embeddings.weight", vec![cfg.vocab_size, h]),
        ("embeddings.position_embeddings.weight", vec![cfg.max_position_embeddings, h]),
        ("embeddings.token_type_embeddings.weight", vec![cfg.type_vocab_size, h]),
        ("embeddings.LayerNorm.weight", vec![h]),
        ("embeddings.LayerNorm.bias", vec![h]),
    ];
    if add_pooling_layer {
        v.push(("pooler.dense.weight", vec![h, h]));
        v.push(("pooler.dense.bias", vec![h]));
    }
    v
}

/// The shape `key` has in `BertModel(config, add_pooling_layer)`, or `None` if the model has
/// no such key; without building the model.
fn expected_shape(cfg: &BertConfig, add_pooling_layer: bool, key: &str) -> Option<Vec<usize>> {
    if let Some(rest) = key.strip_prefix("encoder.layer.") {
        let (i, name) = rest.split_once('.')?;
        let n: usize = i.parse().ok()?;
        if n >= cfg.num_hidden_layers || n.to_string() != i {
            return None;
        }
        let (_, s) = layer_shapes(cfg).into_iter().find(|(k, _)| *k == name)?;
        return Some(s);
    }
    let (_, s) = top_shapes(cfg, add_pooling_layer).into_iter().find(|(k, _)| *k == key)?;
    Some(s)
}

fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// The number of keys and of elements of `BertModel(config, add_pooling_layer)`, overflow
/// checked.
fn model_size(cfg: &BertConfig, add_pooling_layer: bool) -> Option<(usize, usize)> {
    let sum =
        |v: Vec<(&'static str, Vec<usize>)>| v.iter().try_fold(0usize, |n, (_, s)| n.checked_add(numel(s)?));
    let top = sum(top_shapes(cfg, add_pooling_layer))?;
    let layer = sum(layer_shapes(cfg))?;
    let elements = top.checked_add(layer.checked_mul(cfg.num_hidden_layers)?)?;
    let keys = top_shapes(cfg, add_pooling_layer)
        .len()
        .checked_add(layer_shapes(cfg).len().checked_mul(cfg.num_hidden_layers)?)?;
    Some((keys, elements))
}

/// The config against the checkpoint, before the model exists (and in time and memory bounded
/// by the checkpoint, whatever the config says): a shape mismatch is PyTorch's "size
/// mismatch" error, and so is a model mostly missing from the checkpoint (more missing keys
/// or elements than loaded ones).
fn check_against_checkpoint(cfg: &BertConfig, add_pooling_layer: bool, sd: &StateDict) -> Result<()> {
    cfg.validate()?;
    let (mut loaded_keys, mut loaded) = (0usize, 0usize);
    let mut mismatches = Vec::new();
    for (key, t) in sd.iter() {
        let Some(shape) = expected_shape(cfg, add_pooling_layer, key) else { continue };
        if t.dims() != shape.as_slice() {
            mismatches.push(format!(
                "size mismatch for {key}: copying a param with shape torch.Size({:?}) from checkpoint, the shape in current model is torch.Size({:?}).",
                t.dims(),
                shape
            ));
        } else {
            loaded_keys += 1;
            loaded += t.numel();
        }
    }
    if !mismatches.is_empty() {
        bail!(Value, "Error(s) in loading state_dict for BertModel:\n\t{}", mismatches.join("\n\t"));
    }
    let Some((keys, elements)) = model_size(cfg, add_pooling_layer) else {
        bail!(
            Value,
            "config.json describes a model too large to address (its element count overflows: num_hidden_layers {}, hidden_size {}, intermediate_size {})",
            cfg.num_hidden_layers,
            cfg.hidden_size,
            cfg.intermediate_size
        );
    };
    let (missing_keys, missing) = (keys - loaded_keys, elements - loaded);
    if missing_keys > loaded_keys || missing > loaded {
        // The first few missing keys, found in time bounded by the checkpoint's size.
        let mut shown: Vec<String> = top_shapes(cfg, add_pooling_layer)
            .into_iter()
            .map(|(k, _)| k.to_string())
            .filter(|k| !sd.contains_key(k))
            .collect();
        let mut layer = 0;
        while shown.len() < 3 && layer < cfg.num_hidden_layers {
            for (k, _) in layer_shapes(cfg) {
                let k = format!("encoder.layer.{layer}.{k}");
                if shown.len() < 3 && !sd.contains_key(&k) {
                    shown.push(k);
                }
            }
            layer += 1;
        }
        shown.truncate(3);
        bail!(
            Value,
            "config.json does not fit the checkpoint: the checkpoint gives {loaded_keys} of the model's {keys} parameters ({loaded} of {elements} elements), missing {}, ...; check num_hidden_layers and the other sizes in config.json",
            shown.join(", ")
        );
    }
    Ok(())
}

/// TensorFlow-era names: `LayerNorm.gamma` and `LayerNorm.beta`.
fn rename_legacy(key: &str) -> String {
    if let Some(stem) = key.strip_suffix(".gamma")
        && stem.ends_with("LayerNorm")
    {
        return format!("{stem}.weight");
    }
    if let Some(stem) = key.strip_suffix(".beta")
        && stem.ends_with("LayerNorm")
    {
        return format!("{stem}.bias");
    }
    key.to_string()
}

/// The folder's weights as one state_dict, from the first of Hugging Face's files that it
/// has: `model.safetensors`, `model.safetensors.index.json` (shards), `pytorch_model.bin`,
/// `pytorch_model.bin.index.json` (shards).
pub fn read_weights(folder: &Path) -> Result<StateDict> {
    let single = folder.join("model.safetensors");
    if single.is_file() {
        return load_safetensors(&single);
    }
    let index = folder.join("model.safetensors.index.json");
    if index.is_file() {
        return read_sharded(folder, &index, |p| load_safetensors(p));
    }
    let bin = folder.join("pytorch_model.bin");
    if bin.is_file() {
        return load_pt(&bin);
    }
    let index = folder.join("pytorch_model.bin.index.json");
    if index.is_file() {
        return read_sharded(folder, &index, load_pt);
    }
    bail!(
        Io,
        "BertModel.from_pretrained: {} has no model.safetensors, model.safetensors.index.json, pytorch_model.bin nor pytorch_model.bin.index.json",
        folder.display()
    )
}

/// A `torch.save`d state_dict (`pytorch_model.bin`), read weights-only.
fn load_pt(path: &Path) -> Result<StateDict> {
    let obj = pyrite_serialization::load(path)?;
    let tensors = obj
        .to_named_tensors()
        .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))?;
    Ok(tensors.into_iter().collect())
}

fn read_sharded(folder: &Path, index: &Path, load: fn(&Path) -> Result<StateDict>) -> Result<StateDict> {
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
        if Path::new(f).components().count() != 1 || f == ".." || f == "." {
            bail!(
                Value,
                "{}: the shard of \"{k}\" must be a file name in the folder, got \"{f}\"",
                index.display()
            );
        }
        let p = folder.join(f);
        if !files.contains(&p) {
            files.push(p);
        }
    }
    let mut all: Vec<(String, Tensor)> = Vec::new();
    for f in &files {
        all.extend(load(f)?.iter().map(|(k, t)| (k.to_string(), t.clone())));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(all.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_shapes_and_sizes_are_the_models() -> Result<()> {
        let cfg = BertConfig::new(30, 8, 2, 2, 12, 10);
        for pool in [true, false] {
            let model = BertModel::with_pooling_layer(&cfg, pool)?;
            let sd = model.state_dict()?;
            for (k, t) in sd.iter() {
                assert_eq!(expected_shape(&cfg, pool, k).as_deref(), Some(t.dims()), "{k}");
            }
            let elements: usize = sd.iter().map(|(_, t)| t.numel()).sum();
            assert_eq!(model_size(&cfg, pool), Some((sd.len(), elements)));
        }
        for key in [
            "encoder.layer.2.output.dense.bias",
            "encoder.layer.01.output.dense.bias",
            "cls.bias",
            "encoder.layer.x",
        ] {
            assert_eq!(expected_shape(&cfg, true, key), None, "{key}");
        }
        Ok(())
    }
}
