//! Crash-safe file writes: a file is either its old self or completely new, never half-written.

use pyrite_core::{err, Result};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `path` atomically: `write` fills a temporary file in the same folder, which is
/// flushed to disk (`fsync`) and renamed over `path`; then the folder itself is synced so the
/// rename survives a crash. If `write` fails, the temporary file is removed and `path` is
/// untouched.
///
/// ```
/// use std::io::Write;
/// let path = std::env::temp_dir().join(format!("pyrite-atomic-doc-{}.txt", std::process::id()));
/// pyrite_serialization::atomic_write(&path, |w| Ok(w.write_all(b"hello")?))?;
/// assert_eq!(std::fs::read(&path)?, b"hello");
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn atomic_write(path: impl AsRef<Path>, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let path = path.as_ref();
    let tmp = temp_path(path)?;
    let result = (|| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| err!(Io, "cannot create {}: {e}", tmp.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        let file = w.into_inner().map_err(|e| err!(Io, "writing {}: {}", tmp.display(), e.error()))?;
        file.sync_all().map_err(|e| err!(Io, "syncing {}: {e}", tmp.display()))?;
        drop(file);
        std::fs::rename(&tmp, path)
            .map_err(|e| err!(Io, "renaming {} onto {}: {e}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    sync_parent(path);
    Ok(())
}

/// `.<name>.tmp-<pid>-<n>` beside `path`.
fn temp_path(path: &Path) -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let Some(name) = path.file_name() else {
        return Err(err!(Io, "cannot write to {}: not a file path", path.display()));
    };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp_name = format!(".{}.tmp-{}-{n}", name.to_string_lossy(), std::process::id());
    Ok(path.with_file_name(tmp_name))
}

/// Syncs the folder holding `path` so a rename into it is durable (best effort: some
/// platforms and file systems cannot open or sync a folder).
fn sync_parent(path: &Path) {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(dir) = std::fs::File::open(parent) {
        let _ = dir.sync_all();
    }
}
