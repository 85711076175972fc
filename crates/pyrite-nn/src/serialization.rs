//! A state_dict to and from a safetensors file (the format of Hugging Face's `safetensors`
//! library: `safetensors.torch.save_file(model.state_dict(), path)` in PyTorch). Both delegate
//! to [`pyrite_serialization::safetensors`], which memory-maps the file when reading and
//! writes atomically (a synced temporary file renamed over the target), so an existing file
//! is never left half-written.
//!
//! ```
//! use pyrite::nn::{load_safetensors, save_safetensors, Linear, Module};
//! let model = Linear::new(3, 2)?;
//! let path = std::env::temp_dir().join(format!("pyrite-doc-{}.safetensors", std::process::id()));
//! save_safetensors(&model.state_dict()?, &path)?;
//! let copy = Linear::new(3, 2)?;
//! copy.load_state_dict(&load_safetensors(&path)?, true)?;
//! assert_eq!(copy.weight.to_vec2::<f32>()?, model.weight.to_vec2::<f32>()?);
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::state_dict::StateDict;
use pyrite_core::Result;
use std::collections::BTreeMap;
use std::path::Path;

/// Writes `sd` to `path` as safetensors, with the metadata `{"format": "pt"}` that
/// Hugging Face's `save_pretrained` writes (and `from_pretrained` expects).
pub fn save_safetensors(sd: &StateDict, path: impl AsRef<Path>) -> Result<()> {
    let metadata = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    pyrite_serialization::safetensors::save_file(sd.iter(), path, Some(&metadata))
}

/// Reads a safetensors file into a state_dict (keys sorted, as the format lists them).
pub fn load_safetensors(path: impl AsRef<Path>) -> Result<StateDict> {
    Ok(pyrite_serialization::safetensors::load_file(path)?.into_iter().collect())
}
