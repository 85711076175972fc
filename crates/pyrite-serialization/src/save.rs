//! `torch.save`: an [`Object`] to PyTorch's zip checkpoint layout.
//!
//! The archive holds, under one folder (`archive/`), the records PyTorch 2.x writes and in
//! the same order: `data.pkl` (the pickled object), `.format_version`, `.storage_alignment`,
//! `byteorder`, one `data/<key>` record per storage (raw little-endian elements, 64-byte
//! aligned), `version` and `.data/serialization_id`.

use crate::atomic::atomic_write;
use crate::object::Object;
use crate::pickler::pickle;
use crate::zip::ZipWriter;
use pyrite_core::Result;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::path::Path;

/// The folder every record lives in (what PyTorch uses when saving to a buffer).
const ARCHIVE: &str = "archive";
/// The serialization format version PyTorch 2.x writes in `version`.
const FORMAT_VERSION: &str = "3\n";

/// `torch.save(obj, path)`: writes `obj` as a PyTorch checkpoint that `torch.load` reads
/// (also with `weights_only=True`). The file is written atomically: a crash leaves either
/// the old file or the complete new one.
///
/// Tensors that share a storage are written as views of one storage record, so they still
/// share it after loading; a view is written with its storage offset and strides, and its
/// whole storage is written (as PyTorch does: save `t.clone()` to write only the view).
///
/// ```
/// use pyrite::serialization::{load, save, Object};
/// use pyrite::Tensor;
/// let path = std::env::temp_dir().join(format!("pyrite-save-doc-{}.pt", std::process::id()));
/// save(&Object::from(Tensor::new([1f32, 2., 3.])?), &path)?;
/// let t = Tensor::try_from(load(&path)?)?;
/// assert_eq!(t.to_vec::<f32>()?, vec![1., 2., 3.]);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn save(obj: &Object, path: impl AsRef<Path>) -> Result<()> {
    let (pkl, storages) = pickle(obj)?;
    atomic_write(path, |w| write_archive(&pkl, &storages, w))
}

/// `torch.save(obj, f)` for a writer: the checkpoint's bytes into `w`.
pub fn save_to_writer(obj: &Object, w: &mut dyn Write) -> Result<()> {
    let (pkl, storages) = pickle(obj)?;
    write_archive(&pkl, &storages, w)
}

/// `torch.save` into memory.
pub fn save_to_bytes(obj: &Object) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    save_to_writer(obj, &mut out)?;
    Ok(out)
}

fn write_archive(pkl: &[u8], storages: &[crate::pickler::SavedStorage], w: &mut dyn Write) -> Result<()> {
    let mut z = ZipWriter::new(w);
    z.add(&format!("{ARCHIVE}/data.pkl"), pkl)?;
    z.add(&format!("{ARCHIVE}/.format_version"), b"1")?;
    z.add(&format!("{ARCHIVE}/.storage_alignment"), crate::zip::DATA_ALIGNMENT.to_string().as_bytes())?;
    z.add(&format!("{ARCHIVE}/byteorder"), b"little")?;
    for (key, s) in storages.iter().enumerate() {
        let name = format!("{ARCHIVE}/data/{key}");
        s.storage.try_with_bytes(|b| z.add(&name, b))??;
    }
    z.add(&format!("{ARCHIVE}/version"), FORMAT_VERSION.as_bytes())?;
    z.add(&format!("{ARCHIVE}/.data/serialization_id"), serialization_id().as_bytes())?;
    z.finish()?;
    Ok(())
}

/// A fresh 40-digit id, like the one PyTorch writes to tell checkpoints apart.
fn serialization_id() -> String {
    let random = || std::collections::hash_map::RandomState::new().build_hasher().finish();
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let a = random() ^ nanos;
    let b = random() ^ (std::process::id() as u64).rotate_left(32);
    format!("{a:020}{b:020}")
}
