//! Crash-safe file writes: a file is either its old self or completely new, never half-written.

use crate::fault::fault_point;
use pyrite_core::{err, Result};
use std::collections::HashSet;
use std::ffi::OsString;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Writes `path` atomically: `write` fills a temporary file in the same folder, which is
/// flushed to disk (`fsync`) and renamed over `path`; then the folder itself is synced so the
/// rename survives a crash. If `write` fails, the temporary file is removed and `path` is
/// untouched.
///
/// The temporary is named `.<name>.tmp-<pid>-<n>-<random>` and created exclusively (a new
/// name is drawn if one exists, e.g. left by a killed process that had the same pid). A
/// process killed mid-write leaves it behind; [`remove_stale_temporaries`] removes such files.
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
    let (file, tmp) = create_temp(path)?;
    let live = Live::register(&tmp);
    fault_point("atomic_write: temporary created");
    let result = (|| {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        let file = w.into_inner().map_err(|e| err!(Io, "writing {}: {}", tmp.display(), e.error()))?;
        file.sync_all().map_err(|e| err!(Io, "syncing {}: {e}", tmp.display()))?;
        drop(file);
        fault_point("atomic_write: temporary written and synced");
        std::fs::rename(&tmp, path)
            .map_err(|e| err!(Io, "renaming {} onto {}: {e}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    drop(live);
    fault_point("atomic_write: renamed");
    sync_parent(path);
    Ok(())
}

/// Creates a fresh temporary file beside `path` (see [`atomic_write`]).
fn create_temp(path: &Path) -> Result<(std::fs::File, PathBuf)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let Some(name) = path.file_name() else {
        return Err(err!(Io, "cannot write to {}: not a file path", path.display()));
    };
    let name = name.to_string_lossy();
    const TRIES: usize = 16;
    let mut last_error = None;
    for _ in 0..TRIES {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        h.write_u64(nanos);
        let tmp = path.with_file_name(format!(".{name}.tmp-{}-{n}-{:016x}", std::process::id(), h.finish()));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((file, tmp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(err!(Io, "cannot create {}: {e}", tmp.display())),
        }
    }
    let e = last_error.expect("at least one try");
    Err(err!(Io, "cannot create a temporary file beside {} ({TRIES} tries): {e}", path.display()))
}

/// The names of the temporaries that writes in progress in this process own, so that
/// [`remove_stale_temporaries`] leaves them alone.
static LIVE: Mutex<Option<HashSet<OsString>>> = Mutex::new(None);

/// A temporary's registration in [`LIVE`], for as long as its write runs.
struct Live(Option<OsString>);

impl Live {
    fn register(tmp: &Path) -> Live {
        let name = tmp.file_name().map(|n| n.to_os_string());
        if let Some(n) = &name {
            let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
            live.get_or_insert_with(HashSet::new).insert(n.clone());
        }
        Live(name)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(n) = &self.0 {
            let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(set) = live.as_mut() {
                set.remove(n);
            }
        }
    }
}

/// The target name of a temporary file that [`atomic_write`] names: `<name>` for
/// `.<name>.tmp-<pid>-<n>-<random>` (or the older `.<name>.tmp-<pid>-<n>`); `None` for any
/// other name.
fn temporary_target(file_name: &str) -> Option<&str> {
    let rest = file_name.strip_prefix('.')?;
    let (target, tail) = rest.rsplit_once(".tmp-")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = tail.split('-').collect();
    let ok = match parts.as_slice() {
        [pid, n] => digits(pid) && digits(n),
        [pid, n, r] => digits(pid) && digits(n) && r.len() == 16 && r.bytes().all(|b| b.is_ascii_hexdigit()),
        _ => false,
    };
    (ok && !target.is_empty()).then_some(target)
}

/// Removes the temporary files that killed [`atomic_write`] calls left in `dir`: files named
/// as its temporaries are (`.<name>.tmp-<pid>-<n>-<random>`) whose target `<name>` passes
/// `is_ours`, except those of writes still running in this process. Whatever pid a name
/// carries, it is removed (a pid is reused, and in a container the process is often pid 1
/// every time). Returns the paths removed.
///
/// Only one process may write into `dir` at a time: a temporary of another live process is
/// removed too.
pub fn remove_stale_temporaries(
    dir: impl AsRef<Path>,
    is_ours: impl Fn(&str) -> bool,
) -> Result<Vec<PathBuf>> {
    let dir = dir.as_ref();
    let listing = std::fs::read_dir(dir).map_err(|e| err!(Io, "reading {}: {e}", dir.display()))?;
    let mut removed = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name();
        let Some(text) = name.to_str() else { continue };
        let Some(target) = temporary_target(text) else { continue };
        if !is_ours(target) || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|s| s.contains(&name));
        if live {
            continue;
        }
        let path = entry.path();
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err!(Io, "removing the stale temporary {}: {e}", path.display())),
        }
    }
    Ok(removed)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pyrite-atomic-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn stale_temporaries_of_the_same_pid_do_not_block_a_write() {
        // A killed process with this pid (pid reuse; pid 1 in containers) left temporaries
        // under the names a counter-only scheme would pick again.
        let dir = temp_dir("stale");
        let path = dir.join("f.pt");
        let pid = std::process::id();
        for n in 0..512 {
            std::fs::write(dir.join(format!(".f.pt.tmp-{pid}-{n}")), b"stale").unwrap();
        }
        atomic_write(&path, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let removed = remove_stale_temporaries(&dir, |t| t == "f.pt").unwrap();
        assert_eq!(removed.len(), 512);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_temporaries_of_our_targets_are_removed() {
        let dir = temp_dir("ours");
        let names = [
            ".a.pt.tmp-7-3",
            ".a.pt.tmp-1-0-0123456789abcdef",
            ".notes.txt.tmp-7-3", // another target
            "a.pt.tmp-7-3",       // no leading dot
            ".a.pt.tmp-7-x",      // not a counter
            ".a.pt.tmp-7-3-xyz",  // not our random suffix
            "a.pt",
        ];
        for n in names {
            std::fs::write(dir.join(n), b"x").unwrap();
        }
        let mut removed: Vec<String> = remove_stale_temporaries(&dir, |t| t == "a.pt")
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        removed.sort();
        assert_eq!(removed, [".a.pt.tmp-1-0-0123456789abcdef", ".a.pt.tmp-7-3"]);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), names.len() - 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_running_write_keeps_its_temporary() {
        let dir = temp_dir("live");
        let path = dir.join("b.pt");
        atomic_write(&path, |w| {
            // Cleaning the folder from inside the write (as a manager opened meanwhile would).
            let removed = remove_stale_temporaries(&dir, |_| true)?;
            assert!(removed.is_empty(), "{removed:?}");
            Ok(w.write_all(b"done")?)
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"done");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
