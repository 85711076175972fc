//! A crash during a save leaves the previous checkpoints intact: a child process (this test
//! binary, re-run on the `child_saver` test with an env var) saves large checkpoints through a
//! `CheckpointManager` in a loop; the parent SIGKILLs it at random moments, then checks that
//! every checkpoint the recovered manager lists loads whole, that the newest one the child
//! reported is still there (or a newer one), and that no temporary file is left.

use pyrite::serialization::{load, Object};
use pyrite::train::{CheckpointManager, CheckpointOptions};
use pyrite::{DType, Tensor};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const DIR_VAR: &str = "PYRITE_CRASH_TEST_DIR";
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
