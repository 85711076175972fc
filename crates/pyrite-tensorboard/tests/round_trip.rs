//! Writes every kind of summary with `SummaryWriter` and reads it back with the reader.

use pyrite_core::{DType, Tensor};
use pyrite_tensorboard::*;
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-tb-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    d
}

#[test]
fn scalars_round_trip() {
    let dir = tmp("scalars");
    let mut w = SummaryWriter::new(&dir).unwrap();
    for step in 0..25u64 {
        w.add_scalar("loss", 1.0 / (step as f64 + 1.0), step).unwrap();
    }
    w.add_scalar_with("zero", 0.0, Some(7), Some(1234.5)).unwrap();
    w.close().unwrap();
    let files = event_files(&dir).unwrap();
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("events.out.tfevents."), "{name}");
    assert!(name.contains(&format!(".{}.", std::process::id())), "{name}");
    let events = read_events(&files[0]).unwrap();
    assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
    assert!(events[0].wall_time > 1.5e9);
    let s = scalars(&events);
    assert_eq!(s.len(), 26);
    for (i, (step, tag, v)) in s[..25].iter().enumerate() {
        assert_eq!((*step, tag.as_str()), (i as i64, "loss"));
        assert_eq!(*v, (1.0 / (i as f64 + 1.0)) as f32);
    }
    assert_eq!(s[25], (7, "zero".to_string(), 0.0));
    assert_eq!(events.last().unwrap().wall_time, 1234.5);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn every_kind_round_trips() {
    let dir = tmp("kinds");
    let mut w = SummaryWriter::new(&dir).unwrap();
    let vals: Vec<f64> = (0..100).map(|i| (i as f64 - 50.0) / 10.0).collect();
    w.add_histogram("h", &vals, 3).unwrap();
    w.add_histogram("ht", &Tensor::new([1f32, 2., 2., 3.]).unwrap(), 4).unwrap();
    w.add_text("note", "hello *world*", 5).unwrap();
    let img = Tensor::from_vec((0..2 * 3 * 3).map(|i| i as u8 * 10).collect::<Vec<u8>>(), [3, 2, 3]).unwrap();
    w.add_image("img", &img, 6).unwrap();
    w.add_image_with("gray", &Tensor::ones([4, 5], DType::F32).unwrap(), 7, "HW").unwrap();
    w.write_hparams(
        &[("lr", HParamValue::from(0.1)), ("opt", "adam".into()), ("flag", true.into())],
        vec!["acc".into()],
        Some(8),
    )
    .unwrap();
    w.add_scalars("run", &[("a", 1.0), ("b", 2.0)], 9).unwrap();
    w.add_hparams_with(&[("lr", 0.5)], &[("hp/acc", 0.75)], Some("hp_run"), None).unwrap();
    w.close().unwrap();

    let events = read_events(w.file_path()).unwrap();
    let vs = values(&events);
    let find =
        |tag: &str| vs.iter().find(|(_, _, v)| v.tag == tag).copied().unwrap_or_else(|| panic!("{tag}"));

    let (step, _, h) = find("h");
    assert_eq!(step, 3);
    let h = h.histogram().unwrap();
    assert_eq!((h.min, h.max, h.num), (-5.0, 4.9, 100.0));
    assert_eq!(h.bucket.iter().sum::<f64>(), 100.0);
    assert_eq!(h.bucket.len(), h.bucket_limit.len());
    assert_eq!(h.bucket[0], 0.0);
    let h = find("ht").2.histogram().unwrap();
    assert_eq!((h.sum, h.sum_squares), (8.0, 18.0));

    let (step, _, t) = find("note/text_summary");
    assert_eq!(step, 5);
    assert_eq!(t.text().as_deref(), Some("hello *world*"));
    assert_eq!(t.plugin.as_ref().unwrap().plugin_name, "text");

    let im = find("img").2.image().unwrap();
    assert_eq!((im.height, im.width, im.colorspace), (2, 3, 3));
    let dec = png::Decoder::new(std::io::Cursor::new(&im.encoded_image_string));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    r.next_frame(&mut buf).unwrap();
    // CHW -> HWC: pixel (0, 0) is channels 0, 6, 12 -> values 0, 60, 120.
    assert_eq!(&buf[..3], &[0, 60, 120]);
    let g = find("gray").2.image().unwrap();
    assert_eq!((g.height, g.width, g.colorspace), (4, 5, 3));

    let exp = find("_hparams_/experiment").2.hparams().unwrap().unwrap();
    assert_eq!(
        exp,
        HParamsPluginData::Experiment {
            hparams: vec![
                ("lr".into(), HParamType::Float64),
                ("opt".into(), HParamType::String),
                ("flag".into(), HParamType::Float64)
            ],
            metrics: vec!["acc".into()]
        }
    );
    let ssi = find("_hparams_/session_start_info").2.hparams().unwrap().unwrap();
    assert_eq!(
        ssi,
        HParamsPluginData::SessionStart {
            hparams: vec![
                ("lr".into(), HParamValue::Number(0.1)),
                ("opt".into(), HParamValue::Str("adam".into())),
                ("flag".into(), HParamValue::Number(1.0))
            ]
        }
    );
    let sei = find("_hparams_/session_end_info").2.hparams().unwrap().unwrap();
    assert_eq!(sei, HParamsPluginData::SessionEnd { status: 1 });

    // add_scalars: one folder per value, the main tag as tag.
    for (sub, v) in [("run_a", 1.0), ("run_b", 2.0)] {
        let ev = read_dir_events(dir.join(sub)).unwrap();
        assert_eq!(scalars(&ev), [(9, "run".to_string(), v)]);
    }
    // add_hparams: a sub-run with the hparams and the metric as a scalar.
    let ev = read_dir_events(dir.join("hp_run")).unwrap();
    assert_eq!(scalars(&ev), [(0, "hp/acc".to_string(), 0.75)]);
    assert_eq!(values(&ev).len(), 4);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn purge_step_and_default_log_dir() {
    let dir = tmp("purge");
    let mut w = SummaryWriter::with_options(SummaryWriterOptions {
        log_dir: Some(dir.clone()),
        purge_step: Some(5),
        ..Default::default()
    })
    .unwrap();
    w.add_scalar("x", 1.0, 5).unwrap();
    w.close().unwrap();
    let ev = read_dir_events(&dir).unwrap();
    assert_eq!(ev[1].step, 5);
    assert_eq!(ev[1].file_version.as_deref(), Some("brain.Event:2"));
    assert_eq!((ev[2].step, ev[2].session_log), (5, Some(SESSION_LOG_START)));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn errors_not_panics() {
    // An unwritable log_dir: a file where a folder should be.
    let dir = tmp("unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("file");
    std::fs::write(&file, b"x").unwrap();
    let e = SummaryWriter::new(file.join("sub")).err().unwrap();
    assert!(e.to_string().contains(&file.join("sub").display().to_string()), "{e}");

    // Truncated and corrupted files are errors.
    let mut w = SummaryWriter::new(dir.join("run")).unwrap();
    w.add_scalar("a", 1.0, 1).unwrap();
    w.add_histogram("h", &[1.0, 2.0], 1).unwrap();
    w.close().unwrap();
    let path = w.file_path().to_path_buf();
    let bytes = std::fs::read(&path).unwrap();
    assert!(read_events(&path).is_ok());
    for cut in [1, 11, 20, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert!(read_events(&path).is_err(), "cut {cut}");
    }
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 10] ^= 0xff;
    std::fs::write(&path, &bad).unwrap();
    assert!(read_events(&path).unwrap_err().to_string().contains("CRC"));
    assert!(read_events(dir.join("missing")).is_err());

    // Empty or non-finite histograms, bad images: errors.
    let mut w = SummaryWriter::new(dir.join("run2")).unwrap();
    assert!(w.add_histogram("h", &[0f64; 0], 0).is_err());
    assert!(w.add_histogram("h", &[f64::NAN], 0).is_err());
    assert!(w.add_image("i", &Tensor::ones([2, 2, 2], DType::F32).unwrap(), 0).is_err());
    assert!(w.add_image("i", &Tensor::ones([2, 2], DType::F32).unwrap(), 0).is_err());
    w.close().unwrap();
    assert!(w.add_scalar("late", 1.0, 0).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn nothing_written_until_the_queue_fills_or_flush() {
    let dir = tmp("queue");
    let mut w = SummaryWriter::new(&dir).unwrap();
    let path = w.file_path().to_path_buf();
    let n0 = read_events(&path).unwrap().len();
    assert_eq!(n0, 1);
    for i in 0..10 {
        w.add_scalar("a", i as f64, i).unwrap();
    }
    assert_eq!(read_events(&path).unwrap().len(), 1, "max_queue=10 holds ten events");
    w.add_scalar("a", 10.0, 10).unwrap();
    assert_eq!(read_events(&path).unwrap().len(), 12);
    w.add_scalar("a", 11.0, 11).unwrap();
    w.flush().unwrap();
    assert_eq!(read_events(&path).unwrap().len(), 13);
    drop(w);
    std::fs::remove_dir_all(&dir).ok();
}
