//! A state_dict to and from a safetensors file (the format of Hugging Face's `safetensors`
//! library: `safetensors.torch.save_file(model.state_dict(), path)` in PyTorch). Writing goes to
//! a temporary file beside the target, which is then renamed over it, so an existing file is
//! never left half-written.
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
use pyrite_core::{bail, err, DType, Result, Tensor};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use std::collections::HashMap;
use std::path::Path;

fn to_st(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I64 => Dtype::I64,
        DType::I32 => Dtype::I32,
        DType::U8 => Dtype::U8,
        DType::Bool => Dtype::BOOL,
    }
}

fn from_st(d: Dtype, key: &str) -> Result<DType> {
    Ok(match d {
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I64 => DType::I64,
        Dtype::I32 => DType::I32,
        Dtype::U8 => DType::U8,
        Dtype::BOOL => DType::Bool,
        other => bail!(
            DType,
            "load_safetensors: tensor '{key}' has dtype {other:?}, which Pyrite does not support"
        ),
    })
}

/// Writes `sd` to `path` as safetensors (in the state_dict's order; the format sorts keys).
pub fn save_safetensors(sd: &StateDict, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let bytes: Vec<(String, Vec<u8>, Vec<usize>, DType)> = sd
        .iter()
        .map(|(k, t)| {
            Ok((k.to_string(), t.detach().contiguous()?.to_raw_bytes()?, t.dims().to_vec(), t.dtype()))
        })
        .collect::<Result<_>>()?;
    let mut views = Vec::with_capacity(bytes.len());
    for (k, b, shape, d) in &bytes {
        let v = TensorView::new(to_st(*d), shape.clone(), b)
            .map_err(|e| err!(Value, "save_safetensors: '{k}': {e}"))?;
        views.push((k.clone(), v));
    }
    let data = safetensors::serialize(views, None).map_err(|e| err!(Io, "save_safetensors: {e}"))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &data).map_err(|e| err!(Io, "save_safetensors: writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err!(Io, "save_safetensors: renaming onto {}: {e}", path.display())
    })
}

/// Reads a safetensors file into a state_dict (keys in the file's order: sorted).
pub fn load_safetensors(path: impl AsRef<Path>) -> Result<StateDict> {
    let path = path.as_ref();
    let data =
        std::fs::read(path).map_err(|e| err!(Io, "load_safetensors: reading {}: {e}", path.display()))?;
    let st = safetensors::SafeTensors::deserialize(&data)
        .map_err(|e| err!(Io, "load_safetensors: {} is not a valid safetensors file: {e}", path.display()))?;
    let mut by_name: HashMap<String, Tensor> = HashMap::new();
    let mut names = Vec::new();
    for (k, v) in st.tensors() {
        let t = Tensor::from_raw_bytes(v.data(), v.shape(), from_st(v.dtype(), &k)?)?;
        names.push(k.clone());
        by_name.insert(k, t);
    }
    names.sort();
    let mut sd = StateDict::new();
    for k in names {
        let t = by_name.remove(&k).expect("listed above");
        sd.insert(k, t);
    }
    Ok(sd)
}
