//! A crash during a save leaves the previous checkpoints intact. Two tests, both running this
//! test binary again as a child (on a `child_*` test, with an env var):
//!
//! - deterministic: the child saves small checkpoints through a `CheckpointManager` with
//!   `keep_last: 1` and aborts at its N-th fault point (`PYRITE_TEST_ABORT_AT`, the steps of
//!   `atomic_write` and of the manager's save and prune), for every N in turn; a second child
//!   recovers the folder and aborts at its own N-th point (kills during recovery), then the
//!   parent checks that recovery kept the newest complete checkpoint on disk, that everything
//!   kept loads, that the index lists exactly the files kept, and that no temporary is left;
//!   a last child finishes the run.
//! - random: the child saves large checkpoints in a loop; the parent SIGKILLs it at random
//!   moments, then checks that every checkpoint the recovered manager lists loads whole, that
//!   the newest one the child reported is still there (or a newer one), and that no temporary
//!   file is left.

use pyrite::serialization::{load, Object};
use pyrite::train::{CheckpointManager, CheckpointOptions};
use pyrite::{DType, Tensor};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const DIR_VAR: &str = "PYRITE_CRASH_TEST_DIR";
const STEP_DIR_VAR: &str = "PYRITE_CRASH_STEP_TEST_DIR";
/// The steps the deterministic test's run saves (0, 1, 2).
const STEPS: i64 = 3;
/// 2 Mi f32 values: 8 MB per checkpoint, so a kill often lands mid-write.
const NUMEL: usize = 2 << 20;

fn options() -> CheckpointOptions {
    CheckpointOptions {
        filename: "ckpt-{step:05}.pt".into(),
        keep_last: 2,
        save_top_k: 0,
        ..Default::default()
    }
}

/// The checkpoint of step `n`: its number and a large tensor filled with it.
fn checkpoint(n: i64) -> Object {
    let big = Tensor::full([NUMEL], n as f64, DType::F32).unwrap();
    Object::from_pairs([("step", Object::from(n)), ("weights", Object::from(big))])
}

/// Loads a checkpoint and checks it is whole; returns its step.
fn check(path: &Path) -> i64 {
    let obj = load(path).unwrap_or_else(|e| panic!("{} does not load: {e}", path.display()));
    let n = obj.get("step").and_then(Object::as_int).expect("a step");
    let w = obj.get("weights").and_then(Object::as_tensor).expect("the weights");
    assert_eq!(w.dims(), &[NUMEL]);
    let (min, max) = (w.min().unwrap().item::<f32>().unwrap(), w.max().unwrap().item::<f32>().unwrap());
    assert_eq!((min, max), (n as f32, n as f32), "{}: wrong contents", path.display());
    n
}

/// Not a test of its own: the child's body when the env var is set.
#[test]
fn child_saver() {
    let Ok(dir) = std::env::var(DIR_VAR) else { return };
    let mut manager = CheckpointManager::new(&dir, options()).unwrap();
    let mut n = manager.last_path().map_or(0, |p| check(p) + 1);
    let mut out = std::io::stdout();
    loop {
        manager.save(&checkpoint(n), 0, n as u64, &[]).unwrap();
        writeln!(out, "saved {n}").unwrap();
        out.flush().unwrap();
        n += 1;
    }
}

#[test]
fn a_killed_save_leaves_the_previous_checkpoint_intact() {
    let dir = std::env::temp_dir().join(format!("pyrite-crash-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let exe = std::env::current_exe().unwrap();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut newest_reported = -1i64;
    for round in 0..5 {
        let mut child = Command::new(&exe)
            .args(["--exact", "child_saver", "--nocapture", "--test-threads=1"])
            .env(DIR_VAR, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for 1-3 saves, then kill after 0-40 ms: often in the middle of the next save.
        let saves = 1 + next() % 3;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0;
        while seen < saves {
            let line = lines.next().expect("the child reports its saves").unwrap();
            if let Some(n) = line.strip_prefix("saved ") {
                newest_reported = n.parse().unwrap();
                seen += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(next() % 40));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let mid_write = std::fs::read_dir(&dir)
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().contains(".tmp-"));
        eprintln!(
            "round {round}: killed after save {newest_reported}{}",
            if mid_write { ", mid-write" } else { "" }
        );
        let manager = CheckpointManager::new(&dir, options()).unwrap();
        let kept = manager.checkpoints();
        assert!(!kept.is_empty() && kept.len() <= 2, "round {round}: {kept:?}");
        for c in kept {
            assert_eq!(check(&c.path) as u64, c.step, "round {round}");
        }
        let last = check(manager.last_path().unwrap());
        assert!(
            last >= newest_reported,
            "round {round}: newest {last}, the child reported {newest_reported}"
        );
        let leftovers: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "round {round}: temporary files left: {leftovers:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn step_options() -> CheckpointOptions {
    CheckpointOptions {
        filename: "ckpt-{step:05}.pt".into(),
        keep_last: 1,
        save_top_k: 0,
        ..Default::default()
    }
}

/// A small checkpoint of step `n`.
fn small_checkpoint(n: i64) -> Object {
    let t = Tensor::full([4], n as f64, DType::F32).unwrap();
    Object::from_pairs([("step", Object::from(n)), ("weights", Object::from(t))])
}

/// Loads a small checkpoint whole; returns its step.
fn check_small(path: &Path) -> i64 {
    let obj = load(path).unwrap_or_else(|e| panic!("{} does not load: {e}", path.display()));
    let n = obj.get("step").and_then(Object::as_int).expect("a step");
    let w = obj.get("weights").and_then(Object::as_tensor).expect("the weights");
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![n as f32; 4], "{}: wrong contents", path.display());
    n
}

/// Not a test of its own: the deterministic test's child when the env var is set. Resumes
/// the run in the folder and saves up to step `STEPS - 1`.
#[test]
fn child_step_saver() {
    let Ok(dir) = std::env::var(STEP_DIR_VAR) else { return };
    let mut manager = CheckpointManager::new(&dir, step_options()).unwrap();
    let mut n = manager.last_path().map_or(0, |p| check_small(p) + 1);
    let mut out = std::io::stdout();
    while n < STEPS {
        manager.save(&small_checkpoint(n), 0, n as u64, &[]).unwrap();
        writeln!(out, "saved {n}").unwrap();
        out.flush().unwrap();
        n += 1;
    }
    writeln!(out, "run finished").unwrap();
}

/// Runs the step child on `dir`, aborting at fault point `abort_at` (0: never). Returns
/// whether it finished and the steps it reported saved.
fn run_step_child(dir: &Path, abort_at: usize) -> (bool, Vec<i64>) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_step_saver", "--nocapture", "--test-threads=1"])
        .env(STEP_DIR_VAR, dir)
        .env(pyrite_serialization::fault::ABORT_AT_VAR, abort_at.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // (libtest may print "test child_step_saver ... " at the start of the first line.)
    let saved = stdout
        .lines()
        .filter_map(|l| l.split_once("saved "))
        .map(|(_, n)| n.trim().parse().unwrap())
        .collect();
    let finished = stdout.lines().any(|l| l.contains("run finished"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        finished || stderr.contains("aborting at fault point"),
        "the child failed without an injected fault: {stderr}"
    );
    assert_eq!(finished, out.status.success(), "{stderr}");
    (finished, saved)
}

/// The checkpoint files in `dir` and the other files, sorted.
fn listing(dir: &Path) -> (Vec<String>, Vec<String>) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.into_iter().partition(|n| n.starts_with("ckpt-") && n.ends_with(".pt"))
}

#[test]
fn a_kill_at_every_step_keeps_the_newest_checkpoint() {
    let dir = std::env::temp_dir().join(format!("pyrite-crash-steps-{}", std::process::id()));
    let mut points = 0;
    for abort_at in 1.. {
        let _ = std::fs::remove_dir_all(&dir);
        let (finished, mut reported) = run_step_child(&dir, abort_at);
        if finished {
            points = abort_at - 1;
            break;
        }
        // Kills during recovery of the crashed folder (and, past it, in the saves after).
        let (_, more) = run_step_child(&dir, abort_at);
        reported.extend(more);
        // The newest complete checkpoint on disk: every checkpoint file there loads whole.
        let (before, _) = listing(&dir);
        let newest_on_disk = before.iter().map(|n| check_small(&dir.join(n))).max();

        let manager = CheckpointManager::new(&dir, step_options()).unwrap();
        let at = format!("abort at fault point {abort_at}");
        let kept: Vec<i64> = manager.checkpoints().iter().map(|c| check_small(&c.path)).collect();
        let last = manager.last_path().map(check_small);
        assert_eq!(last, newest_on_disk, "{at}: recovery lost the newest checkpoint; kept {kept:?}");
        assert!(last >= reported.iter().copied().max(), "{at}: newest {last:?}, reported {reported:?}");
        assert_eq!(kept.len(), newest_on_disk.is_some() as usize, "{at}: kept {kept:?}");
        // Nothing else is left: the kept files, the index (listing exactly them), no temporaries.
        let (ckpts, others) = listing(&dir);
        let kept_names: Vec<String> = manager
            .checkpoints()
            .iter()
            .map(|c| c.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(ckpts, kept_names, "{at}");
        assert_eq!(others, ["checkpoints.json"], "{at}");
        let index: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("checkpoints.json")).unwrap()).unwrap();
        let indexed: Vec<&str> =
            index["checkpoints"].as_array().unwrap().iter().map(|c| c["file"].as_str().unwrap()).collect();
        assert_eq!(indexed, kept_names, "{at}");
        drop(manager);

        // The run resumes and finishes from what was kept.
        let (finished, _) = run_step_child(&dir, 0);
        assert!(finished, "{at}");
        let manager = CheckpointManager::new(&dir, step_options()).unwrap();
        assert_eq!(manager.last_path().map(check_small), Some(STEPS - 1), "{at}");
        assert_eq!(listing(&dir).0.len(), 1, "{at}");
    }
    // Each save is a few fault points (the file's temporary, rename; the index's; removals).
    eprintln!("{points} fault points in a run of {STEPS} saves, each one killed");
    assert!(points >= 8 * STEPS as usize, "only {points} fault points were reached");
    std::fs::remove_dir_all(&dir).unwrap();
}
