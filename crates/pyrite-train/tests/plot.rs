//! `pyrite_train::plot` on the metrics of a real PyTorch Lightning run
//! (reference/gen_plot_run.py writes reference/data/plot_run.json: the CSVLogger's metrics,
//! torchmetrics' confusion matrix and Lightning's lr_find results).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pyrite_core::ErrorKind;
use pyrite_train::plot::{plot_confusion_matrix, plot_curves, plot_lr_finder};
use serde_json::Value;

fn lightning_run() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/plot_run.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn logged_series(run: &Value) -> BTreeMap<String, Vec<(u64, f64)>> {
    run["series"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, points)| {
            let points = points
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap()))
                .collect();
            (name.clone(), points)
        })
        .collect()
}

fn matrix(v: &Value) -> Vec<Vec<f64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|row| row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect()
}

/// A fresh output folder under Cargo's per-target temp dir (kept, so the images can be looked at).
fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plot").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The decoded PNG: (width, height, RGB pixels).
fn decode_png(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(file).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let pixels = buf[..info.buffer_size()].chunks(3).map(|p| [p[0], p[1], p[2]]).collect();
    (info.width, info.height, pixels)
}

fn distinct_colors(pixels: &[[u8; 3]]) -> usize {
    pixels.iter().collect::<BTreeSet<_>>().len()
}

fn count(pixels: &[[u8; 3]], rgb: [u8; 3]) -> usize {
    pixels.iter().filter(|p| **p == rgb).count()
}

/// Elements open and close in order (the SVG is well-formed XML as far as tags go) and the
/// document is one `<svg>` element.
fn assert_xml_ish(svg: &str) {
    let body = svg.trim_start();
    let body = if body.starts_with("<?xml") { &body[body.find("?>").unwrap() + 2..] } else { body };
    assert!(body.trim_start().starts_with("<svg"), "not an SVG document");
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find('<') {
        let end = start + rest[start..].find('>').expect("unterminated tag");
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name.trim()), "mismatched </{name}>");
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().unwrap());
        }
    }
    assert!(stack.is_empty(), "unclosed elements {stack:?}");
}

/// The texts of the SVG's `<text>` elements.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .map(|t| {
            let t = &t[t.find('>').unwrap() + 1..];
            t[..t.find("</text>").unwrap()].trim().to_string()
        })
        .collect()
}

const TRAIN_BLUE: [u8; 3] = [31, 119, 180];
const VAL_ORANGE: [u8; 3] = [255, 127, 14];
const SUGGESTION_RED: [u8; 3] = [214, 39, 40];

#[test]
fn lightning_run_curves_are_written_as_png_and_svg() {
    let run = lightning_run();
    let series = logged_series(&run);
    let dir = out_dir("lightning_curves");
    let (png, svg) = plot_curves(&series, &dir).unwrap();
    assert_eq!(png, dir.join("curves.png"));
    assert_eq!(svg, dir.join("curves.svg"));

    // loss, acc and learning-rate panels: a 2x2 grid of 720x420 panels.
    let (w, h, pixels) = decode_png(&png);
    assert_eq!((w, h), (1440, 840));
    assert!(distinct_colors(&pixels) > 50, "the image looks blank");
    assert!(count(&pixels, TRAIN_BLUE) > 200, "no training curve drawn");
    assert!(count(&pixels, VAL_ORANGE) > 200, "no validation curve drawn");

    let text = std::fs::read_to_string(&svg).unwrap();
    assert_xml_ish(&text);
    let texts = svg_texts(&text);
    for legend in [
        "train_loss_step",
        "train_loss_epoch",
        "val_loss",
        "train_acc_step",
        "train_acc_epoch",
        "val_acc",
        "lr-Adam",
    ] {
        assert!(texts.iter().any(|t| t == legend), "legend entry {legend} missing");
    }
    for title in ["loss", "acc", "learning rate", "step"] {
        assert!(texts.iter().any(|t| t == title), "label {title} missing");
    }
    assert!(!texts.iter().any(|t| t == "epoch"), "the epoch series is not a curve");
}

#[test]
fn learning_rate_spanning_decades_gets_a_log_axis() {
    let run = lightning_run();
    let lr: BTreeMap<String, Vec<(u64, f64)>> =
        logged_series(&run).into_iter().filter(|(k, _)| k.starts_with("lr")).collect();
    // OneCycleLR ends at max_lr / (div_factor * final_div_factor) = 1.2e-8.
    let (_, svg) = plot_curves(&lr, &out_dir("lr_log")).unwrap();
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    for decade in ["1e-8", "1e-7", "1e-6", "1e-5", "1e-4"] {
        assert!(texts.iter().any(|t| t == decade), "log tick {decade} missing from {texts:?}");
    }

    // Within one decade the axis stays linear.
    let flat = BTreeMap::from([("lr-SGD".to_string(), vec![(0, 0.1), (100, 0.05), (200, 0.02)])]);
    let (_, svg) = plot_curves(&flat, &out_dir("lr_linear")).unwrap();
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(texts.iter().any(|t| t == "0.06"), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("e-")), "{texts:?}");
}

#[test]
fn non_finite_points_are_skipped_and_a_single_point_is_a_marker() {
    let series = BTreeMap::from([
        (
            "train_loss_step".to_string(),
            vec![
                (0, 1.0),
                (1, f64::NAN),
                (2, 0.8),
                (3, f64::INFINITY),
                (4, 0.7),
                (5, 0.6),
                (6, f64::NEG_INFINITY),
            ],
        ),
        ("val_loss".to_string(), vec![(5, 0.65)]),
    ]);
    let dir = out_dir("non_finite");
    let (png, svg) = plot_curves(&series, &dir).unwrap();
    let (w, h, pixels) = decode_png(&png);
    assert_eq!((w, h), (720, 420));
    assert!(count(&pixels, VAL_ORANGE) > 20, "the single validation point is not drawn");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(!text.contains("NaN") && !text.contains("inf"), "a non-finite value reached the SVG");
    assert_xml_ish(&text);
}

#[test]
fn many_panels_fill_two_columns() {
    let series: BTreeMap<String, Vec<(u64, f64)>> = ["loss", "acc", "f1", "precision", "recall"]
        .iter()
        .map(|q| (format!("val_{q}"), (0..5).map(|e| (e * 10, 0.5 + e as f64 / 10.0)).collect()))
        .collect();
    let (png, _) = plot_curves(&series, &out_dir("five_panels")).unwrap();
    let (w, h, _) = decode_png(&png);
    assert_eq!((w, h), (1440, 3 * 420));
}

#[test]
fn nothing_to_plot_is_an_error() {
    let dir = out_dir("empty");
    let e = plot_curves(&BTreeMap::new(), &dir).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("no logged metrics to plot"), "{e}");

    let only_epoch = BTreeMap::from([("epoch".to_string(), vec![(0, 0.0), (10, 1.0)])]);
    assert!(plot_curves(&only_epoch, &dir).is_err());
    let only_nan = BTreeMap::from([("val_loss".to_string(), vec![(0, f64::NAN)])]);
    assert!(plot_curves(&only_nan, &dir).is_err());
    assert!(!dir.exists(), "an error must not leave files behind");
}

#[test]
fn an_unwritable_folder_is_an_io_error_naming_it() {
    let base = out_dir("unwritable");
    std::fs::create_dir_all(&base).unwrap();
    let file = base.join("a_file");
    std::fs::write(&file, b"not a folder").unwrap();
    let dir = file.join("plots");
    let series = BTreeMap::from([("val_loss".to_string(), vec![(0, 1.0), (1, 0.5)])]);

    let e = plot_curves(&series, &dir).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains(&dir.display().to_string()), "{e}");

    let e = plot_confusion_matrix(&[vec![1.0]], None, &dir.join("cm")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    let e = plot_lr_finder(&[1e-3, 1e-2], &[1.0, 0.5], None, &dir.join("lr")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains(&dir.display().to_string()), "{e}");
}

#[test]
fn confusion_matrix_of_counts_is_annotated_with_integers() {
    let run = lightning_run();
    let counts = matrix(&run["confusion_matrix"]);
    let names: Vec<String> =
        run["class_names"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
    let dir = out_dir("confusion");
    let (png, svg) = plot_confusion_matrix(&counts, Some(&names), &dir.join("confusion_matrix")).unwrap();
    assert_eq!(png, dir.join("confusion_matrix.png"));
    assert_eq!(svg, dir.join("confusion_matrix.svg"));

    let (w, h, pixels) = decode_png(&png);
    assert!(w >= 400 && h >= 400, "{w}x{h}");
    assert!(distinct_colors(&pixels) > 50, "the image looks blank");
    assert!(count(&pixels, [247, 251, 255]) + count(&pixels, [8, 48, 107]) > 0, "no colour scale ends");

    let text = std::fs::read_to_string(&svg).unwrap();
    assert_xml_ish(&text);
    let texts = svg_texts(&text);
    for label in ["Confusion matrix", "Predicted label", "True label"] {
        assert!(texts.iter().any(|t| t == label), "{label} missing");
    }
    for name in &names {
        // once for the row, once for the column
        assert_eq!(texts.iter().filter(|t| *t == name).count(), 2, "class name {name}");
    }
    for v in counts.iter().flatten() {
        assert!(texts.iter().any(|t| *t == format!("{v:.0}")), "cell {v} missing");
    }
    assert!(!texts.iter().any(|t| t.contains(".00")), "counts are written as integers");
}

#[test]
fn normalized_confusion_matrix_shows_two_decimals() {
    let run = lightning_run();
    let fractions = matrix(&run["confusion_matrix_normalized"]);
    let dir = out_dir("confusion_normalized");
    // The extension may be given; both files are written either way.
    let (png, svg) = plot_confusion_matrix(&fractions, None, &dir.join("cm.svg")).unwrap();
    assert_eq!((png.clone(), svg.clone()), (dir.join("cm.png"), dir.join("cm.svg")));
    assert!(png.exists() && svg.exists());
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    for v in fractions.iter().flatten() {
        assert!(texts.iter().any(|t| *t == format!("{v:.2}")), "cell {v:.2} missing");
    }
    for i in 0..fractions.len() {
        assert!(texts.iter().any(|t| *t == i.to_string()), "default class name {i}");
    }
}

#[test]
fn a_large_confusion_matrix_with_long_names_still_renders() {
    let n = 20;
    let m: Vec<Vec<f64>> =
        (0..n).map(|i| (0..n).map(|j| if i == j { 900.0 } else { ((i * j) % 7) as f64 }).collect()).collect();
    let names: Vec<String> = (0..n).map(|i| format!("class_number_{i}")).collect();
    let (png, svg) =
        plot_confusion_matrix(&m, Some(&names), &out_dir("confusion_large").join("cm.png")).unwrap();
    let (w, h, _) = decode_png(&png);
    assert!(w > 500 && h > 500);
    assert_xml_ish(&std::fs::read_to_string(svg).unwrap());
}

#[test]
fn bad_confusion_matrices_are_errors() {
    let path = out_dir("confusion_errors").join("cm");
    let e =
        plot_confusion_matrix(&[vec![1.0, 2.0], vec![3.0, 4.0], vec![5.0, 6.0]], None, &path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("square"), "{e}");
    let e = plot_confusion_matrix(&[vec![1.0, 2.0], vec![3.0]], None, &path).unwrap_err();
    assert!(e.to_string().contains("row 1 has 1 values"), "{e}");
    assert!(plot_confusion_matrix(&[], None, &path).is_err());
    let names = vec!["a".to_string()];
    let e = plot_confusion_matrix(&[vec![1.0, 2.0], vec![3.0, 4.0]], Some(&names), &path).unwrap_err();
    assert!(e.to_string().contains("1 class names for a 2x2 matrix"), "{e}");
    assert!(!path.with_extension("png").exists());
}

#[test]
fn lr_finder_marks_lightnings_suggestion() {
    let run = lightning_run();
    let lrs = floats(&run["lr_find"]["lr"]);
    let losses = floats(&run["lr_find"]["loss"]);
    let idx = run["lr_find"]["suggestion"].as_u64().unwrap() as usize;
    let suggested = run["lr_find"]["suggested_lr"].as_f64().unwrap();
    assert_eq!(lrs[idx], suggested);

    let dir = out_dir("lr_finder");
    let (png, svg) = plot_lr_finder(&lrs, &losses, Some(idx), &dir.join("lr_find.png")).unwrap();
    assert_eq!(svg, dir.join("lr_find.svg"));
    let (w, h, pixels) = decode_png(&png);
    assert_eq!((w, h), (800, 520));
    assert!(count(&pixels, TRAIN_BLUE) > 200, "no loss curve");
    assert!(count(&pixels, SUGGESTION_RED) > 50, "no suggestion marker");

    let text = std::fs::read_to_string(&svg).unwrap();
    assert_xml_ish(&text);
    let texts = svg_texts(&text);
    for label in
        ["Learning rate", "Loss", "Learning rate finder", "suggested lr = 5.5e-5", "1e-6", "1e-3", "1"]
    {
        assert!(texts.iter().any(|t| t == label), "{label} missing from {texts:?}");
    }

    // Without a suggestion there is no marker.
    let (png, _) = plot_lr_finder(&lrs, &losses, None, &dir.join("no_suggestion")).unwrap();
    assert_eq!(count(&decode_png(&png).2, SUGGESTION_RED), 0);
}

#[test]
fn bad_lr_finder_input_is_an_error() {
    let path = out_dir("lr_finder_errors").join("lr");
    let e = plot_lr_finder(&[1e-4, 1e-3], &[1.0], None, &path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("same length, got 2 and 1"), "{e}");
    let e = plot_lr_finder(&[1e-4, 1e-3], &[1.0, 0.9], Some(2), &path).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    let e = plot_lr_finder(&[0.0, 1e-3], &[1.0, 0.9], None, &path).unwrap_err();
    assert!(e.to_string().contains("positive"), "{e}");
    assert!(plot_lr_finder(&[], &[], None, &path).is_err());
    assert!(plot_lr_finder(&[1e-3], &[f64::NAN], None, &path).is_err());
}

/// A typical run: 10 series of 500 points. Run with
/// `cargo test --release -p pyrite-train --test plot -- --ignored --nocapture`.
#[test]
#[ignore = "timing; run in a release build"]
fn typical_run_render_time() {
    let mut series = BTreeMap::new();
    for (i, name) in
        ["train_loss_step", "train_acc_step", "train_f1_step", "train_precision_step", "train_recall_step"]
            .iter()
            .enumerate()
    {
        series.insert(
            name.to_string(),
            (0..500)
                .map(|s| {
                    (
                        s * 10,
                        (i as f64 + 1.0) / (1.0 + s as f64 / 50.0) + 0.05 * ((s * 7919) % 13) as f64 / 13.0,
                    )
                })
                .collect::<Vec<_>>(),
        );
        let val = name.replace("train_", "val_").replace("_step", "");
        series.insert(val, (0..500).map(|s| (s * 10, (i as f64 + 1.2) / (1.0 + s as f64 / 50.0))).collect());
    }
    let dir = out_dir("timing");
    plot_curves(&series, &dir).unwrap(); // warm-up (font registration)
    let runs = 5;
    let start = std::time::Instant::now();
    for _ in 0..runs {
        plot_curves(&series, &dir).unwrap();
    }
    let per_run = start.elapsed().as_secs_f64() / runs as f64;
    println!("plot_curves, 10 series x 500 points, PNG + SVG: {:.1} ms", per_run * 1e3);
}
