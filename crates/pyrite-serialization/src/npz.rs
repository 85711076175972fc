//! NumPy's `.npz` archives both ways: `numpy.savez` (stored) and `numpy.savez_compressed`
//! (deflated) files are read, and [`savez`] writes what `numpy.savez` writes.
//!
//! An `.npz` file is a zip archive holding one `.npy` file per array, named after its key
//! (`weight.npy`; `arr_0.npy`, `arr_1.npy`, ... for positional arrays). Each member is parsed by
//! Pyrite's `.npy` reader ([`Tensor::read_npy`]: dtypes `<f2 <f4 <f8 <i4 <i8 |u1 |b1` and their
//! big-endian forms, C or Fortran order, any rank including 0-d), so the tensors come back
//! contiguous in C order. The zip container is this crate's [`zip`](crate::zip) module, which
//! checks every size and offset against the file before it allocates, and verifies each
//! member's CRC-32. Members that are not `.npy` files are an error naming them.
//!
//! ```
//! use pyrite::serialization::npz;
//! use pyrite::Tensor;
//! let path = std::env::temp_dir().join(format!("pyrite-npz-doc-{}.npz", std::process::id()));
//! let w = Tensor::new([[1f32, 2.], [3., 4.]])?;
//! let steps = Tensor::scalar(7i64)?;
//! npz::savez(&path, [("w", &w), ("steps", &steps)])?; // np.savez(path, w=w, steps=steps)
//! let arrays = npz::load(&path)?; // dict(np.load(path)), in the file's order
//! assert_eq!(arrays[0].0, "w");
//! assert_eq!(arrays[0].1.to_vec2::<f32>()?, w.to_vec2::<f32>()?);
//! assert_eq!(arrays[1].1.dims(), &[] as &[usize]);
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::zip::{ZipReader, ZipWriter};
use pyrite_core::{bail, err, Result, Tensor};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// `numpy.savez(path, **tensors)`: writes each tensor as `<name>.npy` (C order, exactly the
/// bytes `numpy.save` writes) into a zip archive of stored members, atomically (see
/// [`atomic_write`](crate::atomic_write)). numpy adds the `.npz` extension when it is missing;
/// this writes to `path` as given. Errors for duplicate names and for bfloat16, which NumPy
/// lacks.
pub fn savez<'a>(
    path: impl AsRef<Path>,
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
) -> Result<()> {
    let path = path.as_ref();
    let members = npy_members(tensors)?; // fail before touching the disk
    crate::atomic_write(path, |w| write_members(w, &members)).map_err(|e| {
        pyrite_core::Error::new(e.kind(), format!("savez: {} ({})", e.message(), path.display()))
    })
}

/// [`savez`] into memory: the bytes of the `.npz` file.
pub fn savez_to_bytes<'a>(tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<Vec<u8>> {
    let members = npy_members(tensors)?;
    let mut out = Vec::new();
    write_members(&mut out, &members)?;
    Ok(out)
}

/// The `.npy` bytes of every tensor, under its member name.
fn npy_members<'a>(
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut members: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, t) in tensors {
        let member = format!("{name}.npy");
        if members.iter().any(|(m, _)| *m == member) {
            bail!(Value, "savez: duplicate array name '{name}'");
        }
        let mut bytes = Vec::new();
        t.write_npy(&mut bytes)
            .map_err(|e| pyrite_core::Error::new(e.kind(), format!("savez: '{name}': {}", e.message())))?;
        members.push((member, bytes));
    }
    Ok(members)
}

fn write_members(w: &mut dyn Write, members: &[(String, Vec<u8>)]) -> Result<()> {
    let mut zip = ZipWriter::new(w);
    for (name, bytes) in members {
        zip.add(name, bytes)?;
    }
    zip.finish()?;
    Ok(())
}

/// `numpy.load(path)` of an `.npz` file: every array as (key, tensor), in the archive's order,
/// keys without the `.npy` extension. Reads stored (`numpy.savez`) and deflated
/// (`numpy.savez_compressed`) members.
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| err!(Io, "npz: cannot open {}: {e}", path.display()))?;
    load_from_reader(std::io::BufReader::new(file))
        .map_err(|e| pyrite_core::Error::new(e.kind(), format!("{} ({})", e.message(), path.display())))
}

/// [`load`] from the bytes of an `.npz` file.
pub fn load_from_bytes(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    load_from_reader(std::io::Cursor::new(bytes))
}

/// [`load`] from any seekable reader.
pub fn load_from_reader<R: Read + Seek>(src: R) -> Result<Vec<(String, Tensor)>> {
    let mut zip = ZipReader::new(src).map_err(|e| err!(Io, "npz: not a valid .npz file: {}", e.message()))?;
    let names: Vec<String> = zip.names().map(String::from).collect();
    let mut out = Vec::with_capacity(names.len());
    for member in names {
        let Some(key) = member.strip_suffix(".npy") else {
            bail!(Value, "npz: member '{member}' is not a .npy array (Pyrite reads arrays only)");
        };
        let bytes = zip.read_inflated(&member)?;
        let t = Tensor::read_npy(&bytes).map_err(|e| {
            pyrite_core::Error::new(e.kind(), format!("{} (in npz member '{member}')", e.message()))
        })?;
        out.push((key.to_string(), t));
    }
    Ok(out)
}
