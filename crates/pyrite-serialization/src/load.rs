//! `torch.load(weights_only=True)`: a PyTorch checkpoint to an [`Object`].
//!
//! Reading recognises what a file is before trusting it: a zip checkpoint (PyTorch 1.6 and
//! later) is read; a legacy pre-1.6 checkpoint, a TorchScript archive (`torch.jit.save`) and
//! a safetensors file are refused with an error that says what they are.

use crate::object::Object;
use crate::unpickler::{unpickle, StorageRef};
use crate::zip::ZipReader;
use pyrite_core::{bail, err, DType, Device, Result, UntypedStorage};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// `torch.load(path, weights_only=True)`: reads a checkpoint written by `torch.save` (or by
/// [`crate::save`]).
///
/// Only tensors, containers and plain values are accepted, as with PyTorch's weights-only
/// unpickler (see [`Object`] for what each Python type becomes); any other global named by
/// the file (a class, `os.system`, ...) is an error naming it, and nothing is ever run.
/// Tensors that shared a storage when saved share one again. Tensors go back to the device
/// they were saved from, as in PyTorch (a file saved from a GPU needs one, or
/// [`LoadOptions::map_location`] to map them elsewhere).
///
/// ```
/// use pyrite::serialization::{load, save, Object};
/// use pyrite::Tensor;
/// let path = std::env::temp_dir().join(format!("pyrite-load-doc-{}.pt", std::process::id()));
/// let sd = Object::from_named_tensors([("weight", Tensor::ones([2, 2], pyrite::DType::F32)?)]);
/// save(&sd, &path)?;
/// let loaded = load(&path)?;
/// assert_eq!(loaded.to_named_tensors()?[0].0, "weight");
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn load(path: impl AsRef<Path>) -> Result<Object> {
    let path = path.as_ref();
    let file =
        std::fs::File::open(path).map_err(|e| err!(Io, "torch.load: cannot open {}: {e}", path.display()))?;
    load_from_reader(file)
        .map_err(|e| pyrite_core::Error::new(e.kind(), format!("{} (in {})", e.message(), path.display())))
}

/// [`load`] from bytes in memory.
pub fn load_from_bytes(bytes: &[u8]) -> Result<Object> {
    load_from_reader(std::io::Cursor::new(bytes))
}

/// [`load`] from any seekable reader.
pub fn load_from_reader<R: Read + Seek>(src: R) -> Result<Object> {
    load_from_reader_with(src, LoadOptions::default())
}

/// How [`load_with`] reads a checkpoint.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions {
    /// Load what can be loaded: an object of a class outside the weights-only allowlist (a
    /// `__main__.Foo`, Lightning's `AttributeDict`) becomes an [`Object::Unsupported`]
    /// placeholder naming the class, instead of failing the whole load. Nothing is imported or
    /// called either way. [`Object::unsupported`] lists the placeholders by key.
    pub skip_unsupported: bool,
    /// `map_location`: the device every storage is loaded onto (`Some(Device::Cpu)` for a
    /// checkpoint saved from a GPU on a machine without one); `None` puts each back where it
    /// was saved from, as PyTorch does.
    pub map_location: Option<Device>,
}

/// [`load`] with options; `load_with(path, LoadOptions::default())` is [`load`].
///
/// ```
/// use pyrite::serialization::{load_with, save, LoadOptions, Object};
/// let path = std::env::temp_dir().join(format!("pyrite-load-with-doc-{}.pt", std::process::id()));
/// save(&Object::from_pairs([("epoch", 3)]), &path)?;
/// let obj = load_with(&path, LoadOptions { skip_unsupported: true, ..Default::default() })?;
/// assert!(obj.unsupported().is_empty());
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn load_with(path: impl AsRef<Path>, options: LoadOptions) -> Result<Object> {
    let path = path.as_ref();
    let file =
        std::fs::File::open(path).map_err(|e| err!(Io, "torch.load: cannot open {}: {e}", path.display()))?;
    load_from_reader_with(file, options)
        .map_err(|e| pyrite_core::Error::new(e.kind(), format!("{} (in {})", e.message(), path.display())))
}

/// [`load_with`] from any seekable reader.
pub fn load_from_reader_with<R: Read + Seek>(mut src: R, options: LoadOptions) -> Result<Object> {
    check_kind(&mut src)?;
    let mut zip = ZipReader::new(src)?;
    let prefix = archive_prefix(&zip)?;
    let byteorder = format!("{prefix}/byteorder");
    if zip.contains(&byteorder) {
        if zip.size(&byteorder).unwrap_or(0) > 16 {
            bail!(Io, "torch.load: the byteorder record is malformed");
        }
        let order = zip.read(&byteorder)?;
        if order != b"little" {
            bail!(
                NotImplemented,
                "torch.load: the checkpoint was written on a '{}'-endian machine; only little-endian files are supported",
                String::from_utf8_lossy(&order)
            );
        }
    }
    let pkl = zip.read(&format!("{prefix}/data.pkl"))?;
    let mut cache: HashMap<String, (UntypedStorage, Option<DType>, u64)> = HashMap::new();
    let mut load_storage = |r: &StorageRef| -> Result<UntypedStorage> {
        if let Some((s, dtype, numel)) = cache.get(r.key) {
            if *dtype != r.dtype || *numel != r.numel {
                bail!(Io, "torch.load: storage '{}' is referenced with different types or sizes", r.key);
            }
            return Ok(s.clone());
        }
        if r.key.is_empty()
            || r.key.len() > 64
            || !r.key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            bail!(Io, "torch.load: invalid storage key {:?}", r.key);
        }
        let name = format!("{prefix}/data/{}", r.key);
        let Some(size) = zip.size(&name) else {
            bail!(Io, "torch.load: the checkpoint has no record {name} for a storage it uses");
        };
        let esize = r.dtype.map_or(1, DType::size_in_bytes) as u64;
        if r.numel.checked_mul(esize) != Some(size) {
            bail!(
                Io,
                "torch.load: storage '{}' should hold {} elements of {} bytes, but its record has {size} bytes",
                r.key,
                r.numel,
                esize
            );
        }
        let size =
            usize::try_from(size).map_err(|_| err!(OutOfMemory, "torch.load: storage of {size} bytes"))?;
        let s = UntypedStorage::new_with(size, |buf| zip.read_into(&name, buf))?;
        let s = match options.map_location.map_or_else(|| saved_device(r.location), Ok)? {
            Device::Cpu => s,
            d => s.to_device(d)?,
        };
        cache.insert(r.key.to_string(), (s.clone(), r.dtype, r.numel));
        Ok(s)
    };
    unpickle(&pkl, options.skip_unsupported, &mut load_storage)
}

/// The device a storage was saved from, by its location string (`torch.load`'s
/// `default_restore_location`).
fn saved_device(location: &str) -> Result<Device> {
    let cuda = match location {
        "cpu" => return Ok(Device::Cpu),
        "cuda" => Some(0),
        l => l.strip_prefix("cuda:").and_then(|i| i.parse::<usize>().ok()),
    };
    let Some(index) = cuda else {
        bail!(
            Device,
            "torch.load: don't know how to restore data location {location:?}; load it with LoadOptions {{ map_location: Some(Device::Cpu), .. }}"
        );
    };
    if !pyrite_core::cuda_is_available() {
        bail!(
            Device,
            "Attempting to deserialize object on a CUDA device but cuda_is_available() is false. If you are running on a CPU-only machine, please load with LoadOptions {{ map_location: Some(Device::Cpu), .. }} to map your storages to the CPU."
        );
    }
    Ok(Device::Cuda(index))
}

/// Refuses, with a clear message, files that are not zip checkpoints.
fn check_kind<R: Read + Seek>(src: &mut R) -> Result<()> {
    let mut head = [0u8; 512];
    let mut n = 0;
    src.seek(SeekFrom::Start(0)).map_err(|e| err!(Io, "torch.load: cannot seek: {e}"))?;
    while n < head.len() {
        match src.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => bail!(Io, "torch.load: read failed: {e}"),
        }
    }
    let head = &head[..n];
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Ok(());
    }
    // The legacy format starts with a pickled magic number, 0x1950a86a20f9469cfc6c.
    const LEGACY_MAGIC: &[u8] = b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
    if head.len() >= 2 + LEGACY_MAGIC.len() && head[0] == 0x80 && head[2..].starts_with(LEGACY_MAGIC) {
        bail!(
            NotImplemented,
            "torch.load: this is a legacy (pre-1.6, non-zip) PyTorch checkpoint, which Pyrite does not read; \
             load it in PyTorch and save it again with torch.save (the zip format, default since 1.6)"
        );
    }
    if head.len() >= 262 && &head[257..262] == b"ustar" {
        bail!(NotImplemented, "torch.load: this is a tar-format legacy PyTorch checkpoint (before 0.4), which Pyrite does not read");
    }
    if head.len() >= 9 && head[8] == b'{' {
        bail!(
            NotImplemented,
            "torch.load: this looks like a safetensors file, not a torch.save checkpoint; use pyrite::serialization::safetensors::load_file (or pyrite::nn::load_safetensors for a StateDict)"
        );
    }
    bail!(Io, "torch.load: not a PyTorch checkpoint (expected the zip archive torch.save writes)")
}

/// The folder of the archive's records (PyTorch names it after the file, or `archive`);
/// refuses TorchScript archives.
fn archive_prefix<R: Read + Seek>(zip: &ZipReader<R>) -> Result<String> {
    let mut prefixes = Vec::new();
    for name in zip.names() {
        let Some((top, rest)) = name.split_once('/') else { continue };
        if rest == "constants.pkl" || rest.starts_with("code/") {
            bail!(
                NotImplemented,
                "torch.load: this is a TorchScript archive (written by torch.jit.save), which holds code; \
                 Pyrite reads torch.save checkpoints only (save the module's state_dict() instead)"
            );
        }
        if rest == "data.pkl" {
            prefixes.push(top.to_string());
        }
    }
    match prefixes.len() {
        1 => Ok(prefixes.pop().expect("one prefix")),
        0 => {
            bail!(Io, "torch.load: the zip archive has no data.pkl record; it is not a torch.save checkpoint")
        }
        n => bail!(
            Io,
            "torch.load: the zip archive has {n} data.pkl records; it is not a torch.save checkpoint"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_locations_restore_to_their_device_or_say_how_to_map_them() {
        assert_eq!(saved_device("cpu").unwrap(), Device::Cpu);
        let e = saved_device("mps").unwrap_err();
        assert!(e.to_string().contains("don't know how to restore data location \"mps\""), "{e}");
        if pyrite_core::cuda_is_available() {
            assert_eq!(saved_device("cuda:1").unwrap(), Device::Cuda(1));
            assert_eq!(saved_device("cuda").unwrap(), Device::Cuda(0));
        } else {
            let e = saved_device("cuda:0").unwrap_err();
            assert_eq!(e.kind(), pyrite_core::ErrorKind::Device);
            assert!(e.to_string().contains("map_location: Some(Device::Cpu)"), "{e}");
        }
    }
}
