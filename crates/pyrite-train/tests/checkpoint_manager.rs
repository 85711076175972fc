//! CheckpointManager as Lightning's ModelCheckpoint: which files stay (last N, best K by a
//! metric, min or max), names from the template, and recovery of a folder left by an earlier
//! run, stale temporary files and unindexed checkpoints included.

use pyrite::serialization::{load, Object};
use pyrite::train::{CheckpointManager, CheckpointOptions, Mode};
use std::path::{Path, PathBuf};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn ck(epoch: i64) -> Object {
    Object::from_pairs([("epoch", Object::from(epoch))])
}

fn by_loss(top_k: usize, last: usize) -> CheckpointOptions {
    CheckpointOptions {
        filename: "epoch={epoch:02}-val_loss={val_loss:.3f}.pt".into(),
        monitor: Some("val_loss".into()),
        mode: Mode::Min,
        save_top_k: top_k,
        keep_last: last,
    }
}

#[test]
fn keeps_the_best_k_and_the_last_n() {
    let dir = temp_dir("keep");
    let mut m = CheckpointManager::new(&dir, by_loss(2, 2)).unwrap();
    for (e, loss) in [(0, 0.9), (1, 0.4), (2, 0.6), (3, 0.3), (4, 0.8), (5, 0.7)] {
        m.save(&ck(e), e as u64, 100 * e as u64, &[("val_loss", loss), ("acc", 0.5)]).unwrap();
    }
    assert_eq!(
        files(&dir),
        [
            "checkpoints.json",
            "epoch=01-val_loss=0.400.pt",
            "epoch=03-val_loss=0.300.pt",
            "epoch=04-val_loss=0.800.pt",
            "epoch=05-val_loss=0.700.pt"
        ]
    );
    assert!(m.best_path().unwrap().ends_with("epoch=03-val_loss=0.300.pt"));
    assert_eq!(m.best_score(), Some(0.3));
    assert!(m.last_path().unwrap().ends_with("epoch=05-val_loss=0.700.pt"));
    assert_eq!(load(m.last_path().unwrap()).unwrap().get("epoch").and_then(Object::as_int), Some(5));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn max_mode_last_only_and_no_monitor() {
    let dir = temp_dir("max");
    let opts = CheckpointOptions {
        filename: "{epoch}-{acc:.2f}.pt".into(),
        monitor: Some("acc".into()),
        mode: Mode::Max,
        save_top_k: 1,
        keep_last: 1,
    };
    let mut m = CheckpointManager::new(&dir, opts).unwrap();
    for (e, acc) in [(0, 0.5), (1, 0.9), (2, 0.7)] {
        m.save(&ck(e), e as u64, 0, &[("acc", acc)]).unwrap();
    }
    assert_eq!(files(&dir), ["1-0.90.pt", "2-0.70.pt", "checkpoints.json"]);
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = temp_dir("last");
    let mut m =
        CheckpointManager::new(&dir, CheckpointOptions { keep_last: 3, ..Default::default() }).unwrap();
    for s in 0..5u64 {
        m.save(&ck(0), 0, s, &[]).unwrap();
    }
    assert_eq!(
        files(&dir),
        ["checkpoints.json", "epoch=0-step=2.pt", "epoch=0-step=3.pt", "epoch=0-step=4.pt"]
    );
    assert_eq!(m.best_path(), None);
    // The same name again replaces the file and counts as the newest.
    m.save(&ck(1), 0, 2, &[]).unwrap();
    assert!(m.last_path().unwrap().ends_with("epoch=0-step=2.pt"));
    assert_eq!(m.checkpoints().len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_metric_or_a_bad_template_is_an_error() {
    let dir = temp_dir("errors");
    let mut m = CheckpointManager::new(&dir, by_loss(1, 1)).unwrap();
    let e = m.save(&ck(0), 0, 0, &[("loss", 1.0)]).unwrap_err();
    assert!(e.to_string().contains("'val_loss' is not among the metrics"), "{e}");
    let bad = CheckpointOptions { filename: "{epoch:>3}.pt".into(), ..Default::default() };
    assert!(CheckpointManager::new(&dir, bad).is_err());
    let none = CheckpointOptions { save_top_k: 0, keep_last: 0, ..Default::default() };
    assert!(CheckpointManager::new(&dir, none).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_new_manager_recovers_the_folder_of_an_earlier_run() {
    let dir = temp_dir("recover");
    {
        let mut m = CheckpointManager::new(&dir, by_loss(1, 1)).unwrap();
        m.save(&ck(0), 0, 0, &[("val_loss", 0.5)]).unwrap();
        m.save(&ck(1), 1, 0, &[("val_loss", 0.7)]).unwrap();
    }
    // What a killed run can leave: a temporary file of a save cut short (another pid), and a
    // checkpoint renamed into place whose index entry was never written.
    std::fs::write(dir.join(".epoch=02-val_loss=0.100.pt.tmp-999999-0"), b"half a checkpoint").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    pyrite::save(&ck(2), dir.join("epoch=02-val_loss=0.100.pt")).unwrap();
    std::fs::write(dir.join("notes.txt"), b"not a checkpoint").unwrap();

    let m = CheckpointManager::new(&dir, by_loss(1, 1)).unwrap();
    // The unindexed checkpoint is the newest and the best (0.1, read back from its name).
    assert!(m.best_path().unwrap().ends_with("epoch=02-val_loss=0.100.pt"));
    assert!(m.last_path().unwrap().ends_with("epoch=02-val_loss=0.100.pt"));
    assert_eq!(m.best_score(), Some(0.1));
    assert_eq!(files(&dir), ["checkpoints.json", "epoch=02-val_loss=0.100.pt", "notes.txt"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn temporaries_of_a_killed_process_with_our_pid_are_removed() {
    // In a container the training process is often pid 1 every time: a killed run leaves
    // temporaries that carry the pid of the run that opens the folder next.
    let dir = temp_dir("same-pid");
    let mut m = CheckpointManager::new(&dir, by_loss(1, 1)).unwrap();
    m.save(&ck(0), 0, 0, &[("val_loss", 0.5)]).unwrap();
    drop(m);
    let pid = std::process::id();
    let stale = [
        format!(".epoch=01-val_loss=0.400.pt.tmp-{pid}-0"),
        format!(".epoch=01-val_loss=0.400.pt.tmp-{pid}-3-0123456789abcdef"),
        format!(".checkpoints.json.tmp-{pid}-1-fedcba9876543210"),
    ];
    // Temporaries of files that are not ours, and look-alikes, stay.
    let foreign = [format!(".notes.txt.tmp-{pid}-0"), "epoch=01-val_loss=0.400.pt.tmp-1-0".to_string()];
    for n in stale.iter().chain(&foreign) {
        std::fs::write(dir.join(n), vec![0u8; 1000]).unwrap();
    }
    let mut m = CheckpointManager::new(&dir, by_loss(1, 1)).unwrap();
    let mut want = vec!["checkpoints.json".to_string(), "epoch=00-val_loss=0.500.pt".to_string()];
    want.extend(foreign.iter().cloned());
    want.sort();
    assert_eq!(files(&dir), want);
    // And the next save works beside them.
    m.save(&ck(1), 1, 0, &[("val_loss", 0.4)]).unwrap();
    assert!(m.last_path().unwrap().ends_with("epoch=01-val_loss=0.400.pt"));
    std::fs::remove_dir_all(&dir).unwrap();
}
