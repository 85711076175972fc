//! [`CheckpointManager`]: a folder of checkpoints that keeps the last N and the best K by a
//! monitored metric, as PyTorch Lightning's `ModelCheckpoint` does (`save_top_k`, `monitor`,
//! `mode`, `filename`), for a hand-written loop.
//!
//! Each save writes the checkpoint atomically ([`pyrite_serialization::save`]: a temporary file
//! in the folder, fsync, rename, fsync of the folder), then records it in the folder's index
//! `checkpoints.json` (written atomically too), then removes the files that fell out of both
//! sets and only then rewrites the index without them. A crash at any moment leaves every kept
//! checkpoint whole and the index whole: at worst the newest checkpoint is not indexed yet
//! (recovery adds it as the newest), the index still lists files already removed (recovery
//! drops them), or files that fell out are not removed yet (recovery removes them). A file
//! that is not indexed is therefore always newer than everything indexed.
//! (`tests/crash.rs` aborts a saving process at each of these steps in turn.)
//!
//! [`CheckpointManager::new`] on a folder left by an earlier run recovers it: it removes stale
//! temporary files of killed saves (of checkpoints and of the index, whatever pid they carry),
//! reads the index (dropping entries whose file is gone), adds checkpoints that match the file
//! name template but are missing from the index (a crash between the two writes: their epoch,
//! step and monitored metric are read back from the name; they count as newer than every
//! indexed one), and applies the retention rules again. Files that do not match the template
//! are left alone.
//!
//! One case keeps an older place in the order: a save that replaces a file of the same name
//! that is not the newest (a run that goes back to an earlier epoch) and is killed before the
//! index is written keeps the replaced entry's place.

use crate::filename::{format_filename, FieldValue};
use crate::Mode;
use pyrite_core::{bail, err, Result};
use pyrite_serialization::fault::fault_point;
use pyrite_serialization::{atomic_write, remove_stale_temporaries, save, Object};
use std::path::{Path, PathBuf};

/// The index file a manager keeps in its folder.
pub const INDEX_FILE: &str = "checkpoints.json";

/// [`CheckpointManager`]'s options, with Lightning's defaults where it has them.
#[derive(Clone, Debug)]
pub struct CheckpointOptions {
    /// The file name template (see [`crate::filename`]); fields `epoch`, `step` and any metric
    /// given to [`CheckpointManager::save`]. Default `"epoch={epoch}-step={step}.pt"`, the
    /// names Lightning's default gives.
    pub filename: String,
    /// The metric that ranks checkpoints for the best K (`monitor`); `None` keeps no best set.
    pub monitor: Option<String>,
    /// Whether the monitored metric is better low or high (`mode`, default min).
    pub mode: Mode,
    /// How many of the best checkpoints by `monitor` to keep (`save_top_k`, default 1).
    pub save_top_k: usize,
    /// How many of the most recent checkpoints to keep (default 1, so the last one is always
    /// there to resume from; Lightning's `save_last`).
    pub keep_last: usize,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions {
            filename: "epoch={epoch}-step={step}.pt".into(),
            monitor: None,
            mode: Mode::Min,
            save_top_k: 1,
            keep_last: 1,
        }
    }
}

/// One checkpoint the manager keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedCheckpoint {
    pub path: PathBuf,
    pub epoch: u64,
    pub step: u64,
    /// The monitored metric's value, when a metric is monitored.
    pub score: Option<f64>,
    /// Save order (higher is more recent), across runs.
    pub seq: u64,
}

/// Keeps the last N and the best K checkpoints of a run in a folder.
///
/// ```
/// use pyrite::serialization::Object;
/// use pyrite::train::{CheckpointManager, CheckpointOptions, Mode};
/// let dir = std::env::temp_dir().join(format!("pyrite-ckpt-doc-{}", std::process::id()));
/// let mut manager = CheckpointManager::new(&dir, CheckpointOptions {
///     filename: "epoch={epoch:02}-val_loss={val_loss:.4f}.pt".into(),
///     monitor: Some("val_loss".into()),
///     mode: Mode::Min,
///     save_top_k: 2,
///     keep_last: 1,
/// })?;
/// for (epoch, val_loss) in [(0, 0.9), (1, 0.5), (2, 0.7), (3, 0.6)] {
///     let checkpoint = Object::from_pairs([("epoch", Object::from(epoch))]);
///     manager.save(&checkpoint, epoch as u64, 10 * epoch as u64, &[("val_loss", val_loss)])?;
/// }
/// assert!(manager.best_path().unwrap().ends_with("epoch=01-val_loss=0.5000.pt"));
/// assert!(manager.last_path().unwrap().ends_with("epoch=03-val_loss=0.6000.pt"));
/// assert_eq!(manager.checkpoints().len(), 2); // the best two, the last being one of them
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct CheckpointManager {
    dir: PathBuf,
    options: CheckpointOptions,
    kept: Vec<SavedCheckpoint>,
    next_seq: u64,
}

impl CheckpointManager {
    /// A manager of the folder `dir` (created if missing), recovering what an earlier run
    /// left there (see the module docs).
    pub fn new(dir: impl AsRef<Path>, options: CheckpointOptions) -> Result<CheckpointManager> {
        let dir = dir.as_ref().to_path_buf();
        if options.save_top_k == 0 && options.keep_last == 0 {
            bail!(Value, "CheckpointManager: save_top_k and keep_last are both 0: nothing would be kept");
        }
        if options.save_top_k > 0 && options.monitor.is_none() && options.keep_last == 0 {
            bail!(
                Value,
                "CheckpointManager: save_top_k={} needs a monitor (or keep_last > 0)",
                options.save_top_k
            );
        }
        // The template must format with the fields a save gives.
        let mut probe: Vec<(&str, FieldValue)> =
            vec![("epoch", FieldValue::Int(0)), ("step", FieldValue::Int(0))];
        if let Some(m) = &options.monitor {
            probe.push((m.as_str(), FieldValue::Float(0.0)));
        }
        if let Err(e) = format_filename(&options.filename, &probe)
            && !e.to_string().contains("unknown field")
        {
            return Err(e);
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| err!(Io, "CheckpointManager: creating {}: {e}", dir.display()))?;
        let mut manager = CheckpointManager { dir, options, kept: vec![], next_seq: 0 };
        manager.recover()?;
        Ok(manager)
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The checkpoints kept, oldest first.
    pub fn checkpoints(&self) -> &[SavedCheckpoint] {
        &self.kept
    }

    /// The best checkpoint by the monitored metric (`best_model_path`); `None` without a
    /// monitor or before the first save.
    pub fn best(&self) -> Option<&SavedCheckpoint> {
        self.options.monitor.as_ref()?;
        self.ranked().into_iter().next()
    }

    /// The best checkpoint's path (`best_model_path`).
    pub fn best_path(&self) -> Option<&Path> {
        self.best().map(|c| c.path.as_path())
    }

    /// The monitored metric's best value (`best_model_score`).
    pub fn best_score(&self) -> Option<f64> {
        self.best().and_then(|c| c.score)
    }

    /// The most recent checkpoint's path (`last_model_path`): where to resume from.
    pub fn last_path(&self) -> Option<&Path> {
        self.kept.iter().max_by_key(|c| c.seq).map(|c| c.path.as_path())
    }

    /// Saves `checkpoint` under a name made from the template with `epoch`, `step` and
    /// `metrics` (which must hold the monitored metric), then removes the checkpoints that are
    /// neither among the last `keep_last` nor the best `save_top_k`. A file of the same name
    /// is replaced. Returns the path written.
    pub fn save(
        &mut self,
        checkpoint: &Object,
        epoch: u64,
        step: u64,
        metrics: &[(&str, f64)],
    ) -> Result<PathBuf> {
        let score = match &self.options.monitor {
            Some(m) => match metrics.iter().find(|(n, _)| n == m) {
                Some((_, v)) => Some(*v),
                None => {
                    let names: Vec<&str> = metrics.iter().map(|(n, _)| *n).collect();
                    bail!(Value, "CheckpointManager.save: the monitored metric '{m}' is not among the metrics given ({})", names.join(", "))
                }
            },
            None => None,
        };
        let mut fields =
            vec![("epoch", FieldValue::Int(epoch as i64)), ("step", FieldValue::Int(step as i64))];
        fields.extend(metrics.iter().map(|(n, v)| (*n, FieldValue::Float(*v))));
        let name = format_filename(&self.options.filename, &fields)?;
        if name == INDEX_FILE {
            bail!(Value, "CheckpointManager: a checkpoint cannot be named {INDEX_FILE}");
        }
        let path = self.dir.join(&name);
        save(checkpoint, &path)?;
        self.kept.retain(|c| c.path != path);
        self.kept.push(SavedCheckpoint { path: path.clone(), epoch, step, score, seq: self.next_seq });
        self.next_seq += 1;
        self.write_index()?;
        self.prune()?;
        Ok(path)
    }

    /// The kept checkpoints with a score, best first (NaN last; ties: the earlier first, as
    /// Lightning keeps the incumbent).
    fn ranked(&self) -> Vec<&SavedCheckpoint> {
        let mut v: Vec<&SavedCheckpoint> = self.kept.iter().filter(|c| c.score.is_some()).collect();
        let key = |c: &SavedCheckpoint| {
            let s = c.score.unwrap_or(f64::NAN);
            if s.is_nan() {
                f64::INFINITY
            } else if self.options.mode == Mode::Min {
                s
            } else {
                -s
            }
        };
        v.sort_by(|a, b| key(a).total_cmp(&key(b)).then(a.seq.cmp(&b.seq)));
        v
    }

    /// Removes the checkpoints that are neither recent nor best enough.
    fn prune(&mut self) -> Result<()> {
        let mut keep: Vec<u64> = vec![];
        let mut recent: Vec<u64> = self.kept.iter().map(|c| c.seq).collect();
        recent.sort_unstable_by(|a, b| b.cmp(a));
        keep.extend(recent.into_iter().take(self.options.keep_last));
        if self.options.monitor.is_some() {
            keep.extend(self.ranked().into_iter().take(self.options.save_top_k).map(|c| c.seq));
        }
        let (stay, go): (Vec<_>, Vec<_>) = self.kept.drain(..).partition(|c| keep.contains(&c.seq));
        self.kept = stay;
        if !go.is_empty() {
            // The files first, then the index: a crash in between leaves indexed entries whose
            // file is gone (recovery drops them), never an unindexed old file, which recovery
            // would take for a checkpoint saved after everything indexed.
            for c in go {
                match std::fs::remove_file(&c.path) {
                    Ok(()) => fault_point("CheckpointManager: removed a checkpoint"),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => bail!(Io, "CheckpointManager: removing {}: {e}", c.path.display()),
                }
            }
            self.write_index()?;
        }
        Ok(())
    }

    fn write_index(&self) -> Result<()> {
        let entries: Vec<serde_json::Value> = self
            .kept
            .iter()
            .map(|c| {
                serde_json::json!({
                    "file": c.path.file_name().map(|n| n.to_string_lossy().into_owned()),
                    "epoch": c.epoch,
                    "step": c.step,
                    "score": c.score.map(|s| if s.is_nan() { serde_json::Value::Null } else { s.into() }),
                    "seq": c.seq,
                })
            })
            .collect();
        let index = serde_json::json!({
            "filename": self.options.filename,
            "monitor": self.options.monitor,
            "checkpoints": entries,
        });
        let text =
            serde_json::to_string_pretty(&index).map_err(|e| err!(Io, "CheckpointManager: index: {e}"))?;
        atomic_write(self.dir.join(INDEX_FILE), |w| Ok(w.write_all(text.as_bytes())?))
    }

    /// Reads what an earlier run left in the folder (see the module docs).
    fn recover(&mut self) -> Result<()> {
        // Temporaries of killed saves, of checkpoints or of the index (whatever pid they name).
        let template = self.options.filename.clone();
        remove_stale_temporaries(&self.dir, |target| {
            target == INDEX_FILE || parse_filename(&template, target).is_some()
        })?;
        let listing = std::fs::read_dir(&self.dir)
            .map_err(|e| err!(Io, "CheckpointManager: reading {}: {e}", self.dir.display()))?;
        let mut names = vec![];
        for entry in listing.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().map(|t| t.is_file()).unwrap_or(false) && name != INDEX_FILE {
                names.push(name);
            }
        }
        let index_path = self.dir.join(INDEX_FILE);
        if let Ok(text) = std::fs::read_to_string(&index_path) {
            let index: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                err!(Value, "CheckpointManager: {} is not a valid index: {e}", index_path.display())
            })?;
            for c in index["checkpoints"].as_array().map(|v| v.as_slice()).unwrap_or(&[]) {
                let (Some(file), Some(epoch), Some(step), Some(seq)) =
                    (c["file"].as_str(), c["epoch"].as_u64(), c["step"].as_u64(), c["seq"].as_u64())
                else {
                    continue;
                };
                if !names.iter().any(|n| n == file) || file.contains('/') {
                    continue; // removed, or never completed
                }
                let score = self.options.monitor.as_ref().map(|_| c["score"].as_f64().unwrap_or(f64::NAN));
                self.kept.push(SavedCheckpoint { path: self.dir.join(file), epoch, step, score, seq });
            }
        }
        self.next_seq = self.kept.iter().map(|c| c.seq + 1).max().unwrap_or(0);
        // Checkpoints saved but not yet indexed when the earlier run stopped.
        let mut orphans: Vec<(std::time::SystemTime, SavedCheckpoint)> = vec![];
        for name in names {
            let path = self.dir.join(&name);
            if self.kept.iter().any(|c| c.path == path) {
                continue;
            }
            let Some(fields) = parse_filename(&self.options.filename, &name) else { continue };
            let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
            let score = self.options.monitor.as_ref().map(|m| get(m).unwrap_or(f64::NAN));
            let epoch = get("epoch").unwrap_or(0.0).max(0.0) as u64;
            let step = get("step").unwrap_or(0.0).max(0.0) as u64;
            let mtime = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            orphans.push((mtime, SavedCheckpoint { path, epoch, step, score, seq: 0 }));
        }
        orphans.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.step.cmp(&b.1.step)));
        for (_, mut c) in orphans {
            c.seq = self.next_seq;
            self.next_seq += 1;
            self.kept.push(c);
        }
        self.kept.sort_by_key(|c| c.seq);
        self.write_index()?;
        self.prune()
    }
}

/// Reads the fields back from a name the template made: literal parts must match, each field
/// takes the longest run of number characters. `None` if the name does not fit.
fn parse_filename(template: &str, name: &str) -> Option<Vec<(String, f64)>> {
    let mut out = vec![];
    let (mut t, mut n) = (template, name);
    while !t.is_empty() {
        if let Some(rest) = t.strip_prefix("{{") {
            n = n.strip_prefix('{')?;
            t = rest;
        } else if let Some(rest) = t.strip_prefix("}}") {
            n = n.strip_prefix('}')?;
            t = rest;
        } else if let Some(rest) = t.strip_prefix('{') {
            let end = rest.find('}')?;
            let field = &rest[..end];
            let key = field.split_once(':').map_or(field, |(k, _)| k);
            let len = n
                .char_indices()
                .find(|&(i, c)| {
                    !(c.is_ascii_digit()
                        || c == '.'
                        || c == 'e'
                        || c == 'n'
                        || c == 'a'
                        || c == 'i'
                        || c == 'f'
                        || ((c == '-' || c == '+') && (i == 0 || n[..i].ends_with('e'))))
                })
                .map_or(n.len(), |(i, _)| i);
            // A number never ends with '.', so a literal '.' after a field (".pt") stays literal.
            let mut take = &n[..len];
            let literal_after = &rest[end + 1..];
            while !take.is_empty()
                && !(n[take.len()..].starts_with(literal_after.split('{').next().unwrap_or("")))
            {
                take = &take[..take.len() - 1];
            }
            let value: f64 = take.trim_start().parse().ok()?;
            out.push((key.to_string(), value));
            n = &n[take.len()..];
            t = literal_after;
        } else {
            let c = t.chars().next()?;
            n = n.strip_prefix(c)?;
            t = &t[c.len_utf8()..];
        }
    }
    n.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        let f = parse_filename("epoch={epoch:02}-val_loss={val_loss:.4f}.pt", "epoch=03-val_loss=0.1235.pt")
            .unwrap();
        assert_eq!(f, vec![("epoch".into(), 3.0), ("val_loss".into(), 0.1235)]);
        let f = parse_filename("e{epoch}_{loss:.2e}.pt", "e7_1.50e-03.pt").unwrap();
        assert_eq!(f, vec![("epoch".into(), 7.0), ("loss".into(), 1.5e-3)]);
        assert!(parse_filename("epoch={epoch}.pt", "notes.txt").is_none());
        assert!(parse_filename("epoch={epoch}.pt", "epoch=x.pt").is_none());
    }
}
