//! Hugging Face's safetensors format both ways, as `safetensors.torch` reads and writes it
//! (`save_file`, `load_file`, `save`, `load`).
//!
//! A safetensors file is an 8-byte little-endian header length, a JSON header naming every
//! tensor's dtype, shape and byte range (plus an optional `__metadata__` map of strings), and
//! then the raw little-endian bytes of the tensors, back to back.
//!
//! - Reading maps the file into memory (`mmap`) and copies each tensor's bytes once, straight
//!   into its own storage; files of more than a few megabytes are copied on several threads
//!   (up to [`pyrite_core::get_num_threads`]), a share of the tensors each. The header is
//!   checked by the `safetensors` crate (its size against the file before it is parsed; every
//!   tensor's byte range inside the data, exactly covering it, and matching its shape and
//!   dtype, without overflow) and here (dtypes Pyrite lacks are refused by name); nothing is
//!   allocated for a tensor before its size is known to lie inside the file.
//! - Writing goes through [`atomic_write`](crate::atomic_write), streams each tensor from its
//!   storage (no copy of a whole file in memory), and orders the data by element size, largest
//!   first, as the `safetensors` library does, so every tensor starts on a multiple of its
//!   element size.
//!
//! ```
//! use pyrite::serialization::safetensors;
//! use pyrite::Tensor;
//! use std::collections::BTreeMap;
//! let path = std::env::temp_dir().join(format!("pyrite-st-doc-{}.safetensors", std::process::id()));
//! let w = Tensor::new([[1f32, 2.], [3., 4.]])?;
//! let b = Tensor::new([0.5f64])?;
//! let metadata = BTreeMap::from([("format".to_string(), "pt".to_string())]);
//! // safetensors.torch.save_file({"w": w, "b": b}, path, metadata={"format": "pt"})
//! safetensors::save_file([("w", &w), ("b", &b)], &path, Some(&metadata))?;
//! // safetensors.torch.load_file(path): names in sorted order
//! let (tensors, meta) = safetensors::load_file_with_metadata(&path)?;
//! assert_eq!(tensors[0].0, "b");
//! assert_eq!(tensors[1].1.to_vec2::<f32>()?, w.to_vec2::<f32>()?);
//! assert_eq!(meta, metadata);
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), pyrite::Error>(())
//! ```

use pyrite_core::{bail, err, DType, Result, Tensor};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// A file's `__metadata__`: string keys to string values.
pub type Metadata = BTreeMap<String, String>;

/// Files with more data than this are copied on several threads.
const PARALLEL_MIN_BYTES: usize = 8 << 20;

/// The safetensors name of a dtype (`"F32"`, `"BOOL"`, ...).
fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F64 => "F64",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I64 => "I64",
        DType::I32 => "I32",
        DType::U8 => "U8",
        DType::Bool => "BOOL",
    }
}

fn from_st(d: ::safetensors::Dtype, name: &str) -> Result<DType> {
    use ::safetensors::Dtype as S;
    Ok(match d {
        S::F32 => DType::F32,
        S::F64 => DType::F64,
        S::F16 => DType::F16,
        S::BF16 => DType::BF16,
        S::I64 => DType::I64,
        S::I32 => DType::I32,
        S::U8 => DType::U8,
        S::BOOL => DType::Bool,
        other => bail!(
            DType,
            "safetensors: tensor '{name}' has dtype {other:?}, which Pyrite does not support \
             (supported: F32 F64 F16 BF16 I64 I32 U8 BOOL)"
        ),
    })
}

// ------------------------------------------------------------------------------------ writing

/// `safetensors.torch.save_file(tensors, path, metadata)`: writes `tensors` (name, tensor) to
/// `path` atomically, with `metadata` as the header's `__metadata__` (PyTorch's
/// `save_pretrained` writes `{"format": "pt"}`; `None` writes none). Views and
/// non-contiguous tensors are written as their contiguous values. Errors for duplicate names
/// and the reserved name `__metadata__`.
pub fn save_file<'a>(
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    path: impl AsRef<Path>,
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    let path = path.as_ref();
    let plan = Plan::new(tensors, metadata)?; // fail before touching the disk
    crate::atomic_write(path, |w| plan.write(w)).map_err(|e| {
        pyrite_core::Error::new(e.kind(), format!("safetensors: {} ({})", e.message(), path.display()))
    })
}

/// `safetensors.torch.save(tensors, metadata)`: the bytes of a safetensors file.
pub fn save<'a>(
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<Vec<u8>> {
    let plan = Plan::new(tensors, metadata)?;
    let mut out = Vec::new();
    plan.write(&mut out)?;
    Ok(out)
}

/// What a file will hold: the header and the contiguous tensors in data order.
struct Plan {
    header: Vec<u8>,
    tensors: Vec<Tensor>,
}

impl Plan {
    fn new<'a>(
        tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
        metadata: Option<&BTreeMap<String, String>>,
    ) -> Result<Plan> {
        let mut items: Vec<(&str, Tensor)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (name, t) in tensors {
            if name == "__metadata__" {
                bail!(Value, "safetensors: '__metadata__' is reserved and cannot name a tensor");
            }
            if !seen.insert(name) {
                bail!(Value, "safetensors: duplicate tensor name '{name}'");
            }
            t.device().check_available()?;
            items.push((name, t.detach().contiguous()?));
        }
        // Largest elements first, then by name: every tensor then starts on a multiple of
        // its element size (the order the safetensors library writes).
        items.sort_by(|a, b| {
            b.1.dtype().size_in_bytes().cmp(&a.1.dtype().size_in_bytes()).then_with(|| a.0.cmp(b.0))
        });
        let json_str = |s: &str| serde_json::to_string(s).expect("a string serializes");
        let mut h = String::from("{");
        if let Some(m) = metadata {
            h.push_str("\"__metadata__\":{");
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    h.push(',');
                }
                h.push_str(&format!("{}:{}", json_str(k), json_str(v)));
            }
            h.push('}');
        }
        let mut offset = 0usize;
        for (i, (name, t)) in items.iter().enumerate() {
            if i > 0 || metadata.is_some() {
                h.push(',');
            }
            let n = t.numel() * t.dtype().size_in_bytes();
            let shape: Vec<String> = t.dims().iter().map(|d| d.to_string()).collect();
            h.push_str(&format!(
                "{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{}]}}",
                json_str(name),
                dtype_name(t.dtype()),
                shape.join(","),
                offset + n
            ));
            offset += n;
        }
        h.push('}');
        // Pad with spaces so that the data starts on a multiple of 8 bytes.
        while h.len() % 8 != 0 {
            h.push(' ');
        }
        let mut header = Vec::with_capacity(8 + h.len());
        header.extend_from_slice(&(h.len() as u64).to_le_bytes());
        header.extend_from_slice(h.as_bytes());
        Ok(Plan { header, tensors: items.into_iter().map(|(_, t)| t).collect() })
    }

    fn write(&self, w: &mut dyn Write) -> Result<()> {
        w.write_all(&self.header)?;
        for t in &self.tensors {
            let start = t.storage_offset() * t.dtype().size_in_bytes();
            let n = t.numel() * t.dtype().size_in_bytes();
            t.untyped_storage().try_with_bytes(|b| w.write_all(&b[start..start + n]))??;
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------------ reading

/// `safetensors.torch.load_file(path)`: every tensor of a safetensors file, sorted by name.
/// See [`load_file_with_metadata`].
pub fn load_file(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    Ok(load_file_with_metadata(path)?.0)
}

/// Every tensor of a safetensors file (sorted by name) and its `__metadata__` (empty when the
/// file has none). The file is memory-mapped and each tensor's bytes copied once into its own
/// storage; the tensors do not keep the file open.
///
/// The file must not change while it is read (as with any memory-mapped reader, another
/// process truncating it meanwhile can crash this one).
pub fn load_file_with_metadata(path: impl AsRef<Path>) -> Result<(Vec<(String, Tensor)>, Metadata)> {
    let path = path.as_ref();
    let with_path = |e: pyrite_core::Error| {
        pyrite_core::Error::new(e.kind(), format!("{} ({})", e.message(), path.display()))
    };
    let file = std::fs::File::open(path)
        .map_err(|e| err!(Io, "safetensors: cannot open {}: {e}", path.display()))?;
    let len =
        file.metadata().map_err(|e| err!(Io, "safetensors: cannot stat {}: {e}", path.display()))?.len();
    if len < 8 {
        // Mapping an empty file fails on some systems; this is not a safetensors file anyway.
        return load_with_metadata(&[0u8; 8][..len as usize]).map_err(with_path);
    }
    // SAFETY: the map is read-only and lives until the copies below are done; the file must
    // not be truncated meanwhile (documented above), the caveat of every mmap reader.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }
        .map_err(|e| err!(Io, "safetensors: cannot map {}: {e}", path.display()))?;
    load_with_metadata(&map).map_err(with_path)
}

/// `safetensors.torch.load(bytes)`: the tensors of a safetensors file held in memory, sorted
/// by name.
pub fn load(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    Ok(load_with_metadata(bytes)?.0)
}

/// [`load`], plus the file's `__metadata__` (empty when it has none).
pub fn load_with_metadata(bytes: &[u8]) -> Result<(Vec<(String, Tensor)>, Metadata)> {
    // The crate checks the header length against the buffer before parsing it, and every
    // tensor's range against the data (in bounds, covering it exactly, matching the shape).
    let (n, meta) = ::safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| err!(Io, "safetensors: not a valid safetensors file: {e}"))?;
    let data = &bytes[8 + n..];
    let mut infos: Vec<(String, DType, Vec<usize>, &[u8])> = Vec::new();
    for (name, info) in meta.tensors() {
        let dtype = from_st(info.dtype, &name)?;
        let (a, b) = info.data_offsets;
        // Checked by the crate; checked again so a change there cannot make this panic.
        let Some(src) = data.get(a..b) else {
            bail!(
                Io,
                "safetensors: tensor '{name}' has data offsets [{a}, {b}] outside the data ({} bytes)",
                data.len()
            );
        };
        infos.push((name, dtype, info.shape.clone(), src));
    }
    infos.sort_by(|a, b| a.0.cmp(&b.0));
    let total: usize = infos.iter().map(|i| i.3.len()).sum();
    let threads = pyrite_core::get_num_threads().min(infos.len()).max(1);
    let tensors: Vec<Tensor> = if threads > 1 && total >= PARALLEL_MIN_BYTES {
        copy_parallel(&infos, threads)?
    } else {
        infos
            .iter()
            .map(|(_, d, s, src)| Tensor::from_raw_bytes(src, s.as_slice(), *d))
            .collect::<Result<_>>()?
    };
    let named = infos.into_iter().map(|i| i.0).zip(tensors).collect();
    let metadata = meta.metadata().as_ref().map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
    Ok((named, metadata.unwrap_or_default()))
}

/// Copies the tensors on `threads` threads, each taking a share of about equal bytes (largest
/// tensors first, each to the least loaded thread).
fn copy_parallel(infos: &[(String, DType, Vec<usize>, &[u8])], threads: usize) -> Result<Vec<Tensor>> {
    let mut order: Vec<usize> = (0..infos.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(infos[i].3.len()));
    let mut shares: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); threads];
    for i in order {
        let least = shares.iter_mut().min_by_key(|s| s.0).expect("threads > 0");
        least.0 += infos[i].3.len();
        least.1.push(i);
    }
    let mut out: Vec<Option<Tensor>> = vec![None; infos.len()];
    let results: Vec<Result<Vec<(usize, Tensor)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .iter()
            .map(|(_, share)| {
                scope.spawn(move || {
                    share
                        .iter()
                        .map(|&i| {
                            let (_, d, s, src) = &infos[i];
                            Ok((i, Tensor::from_raw_bytes(src, s.as_slice(), *d)?))
                        })
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(err!(Io, "safetensors: a copying thread panicked"))))
            .collect()
    });
    for r in results {
        for (i, t) in r? {
            out[i] = Some(t);
        }
    }
    Ok(out.into_iter().map(|t| t.expect("every tensor is in one share")).collect())
}
