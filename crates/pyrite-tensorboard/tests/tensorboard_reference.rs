//! Pyrite's reader on Pyrite's event files reads what TensorBoard's own reader read from them:
//! reference/data/tensorboard_read.json, written by reference/check_tensorboard.py (which also
//! checked that TensorBoard reads the same from torch.utils.tensorboard's files).

#[path = "../examples/write_events.rs"]
mod write_events;

use pyrite_tensorboard::*;
use serde_json::{json, Map, Value as Json};

fn reference() -> Json {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/tensorboard_read.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn hparams_json(d: &HParamsPluginData) -> Json {
    let ty = |t: &HParamType| match t {
        HParamType::Unset => "DATA_TYPE_UNSET",
        HParamType::String => "DATA_TYPE_STRING",
        HParamType::Bool => "DATA_TYPE_BOOL",
        HParamType::Float64 => "DATA_TYPE_FLOAT64",
    };
    let val = |v: &HParamValue| match v {
        HParamValue::Number(x) => json!(x),
        HParamValue::Str(s) => json!(s),
        HParamValue::Bool(b) => json!(b),
    };
    match d {
        HParamsPluginData::Experiment { hparams, metrics } => {
            let mut infos: Vec<Json> =
                hparams.iter().map(|(n, t)| json!({"name": n, "type": ty(t)})).collect();
            infos.sort_by_key(|v| v["name"].as_str().unwrap().to_string());
            let mut tags = metrics.clone();
            tags.sort();
            let metrics: Vec<Json> = tags.iter().map(|t| json!({"name": {"tag": t}})).collect();
            json!({"experiment": {"hparam_infos": infos, "metric_infos": metrics}})
        }
        HParamsPluginData::SessionStart { hparams } => {
            let m: Map<String, Json> = hparams.iter().map(|(k, v)| (k.clone(), val(v))).collect();
            json!({"session_start_info": {"hparams": m}})
        }
        HParamsPluginData::SessionEnd { status } => {
            assert_eq!(*status, 1);
            json!({"session_end_info": {"status": "STATUS_SUCCESS"}})
        }
    }
}

/// Our reading of one run folder, in the JSON's layout.
fn read_run(dir: &std::path::Path) -> Json {
    let events = read_dir_events(dir).unwrap();
    assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
    let (mut scalars, mut hists, mut texts, mut images, mut hparams) =
        (Map::new(), Map::new(), Map::new(), Map::new(), Map::new());
    let push = |m: &mut Map<String, Json>, tag: &str, v: Json| {
        m.entry(tag.to_string()).or_insert_with(|| json!([])).as_array_mut().unwrap().push(v)
    };
    for (step, _, v) in values(&events) {
        if let Some(hp) = v.hparams() {
            hparams.insert(v.tag.clone(), hparams_json(&hp.unwrap()));
        } else if let Some(x) = v.scalar() {
            push(&mut scalars, &v.tag, json!([step, x as f64]));
        } else if let Some(h) = v.histogram() {
            push(
                &mut hists,
                &v.tag,
                json!({"step": step, "min": h.min, "max": h.max, "num": h.num, "sum": h.sum,
                       "sum_squares": h.sum_squares, "bucket_limit": h.bucket_limit, "bucket": h.bucket}),
            );
        } else if let Some(t) = v.text() {
            push(&mut texts, &v.tag, json!([step, t]));
        } else if let Some(im) = v.image() {
            let dec = png::Decoder::new(std::io::Cursor::new(&im.encoded_image_string));
            let mut r = dec.read_info().unwrap();
            let mut buf = vec![0; r.output_buffer_size().unwrap()];
            let info = r.next_frame(&mut buf).unwrap();
            buf.truncate(info.buffer_size());
            let c = info.color_type.samples();
            push(
                &mut images,
                &v.tag,
                json!({"step": step, "width": im.width, "height": im.height,
                       "shape": [info.height, info.width, c], "pixels": buf}),
            );
        }
    }
    let mut run = Map::new();
    for (k, m) in [
        ("scalars", scalars),
        ("histograms", hists),
        ("texts", texts),
        ("images", images),
        ("hparams", hparams),
    ] {
        if !m.is_empty() {
            run.insert(k.into(), Json::Object(m));
        }
    }
    Json::Object(run)
}

/// Equal JSON values, numbers to 1e-15 relative (serde_json's float parsing without
/// `float_roundtrip` may be one ulp off what Python wrote).
fn assert_same(got: &Json, want: &Json, at: &str) {
    match (got, want) {
        (Json::Object(a), Json::Object(b)) => {
            let (ka, kb): (Vec<_>, Vec<_>) = (a.keys().collect(), b.keys().collect());
            assert_eq!(ka, kb, "{at}: keys");
            for (k, v) in a {
                assert_same(v, &b[k], &format!("{at}/{k}"));
            }
        }
        (Json::Array(a), Json::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: length");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_same(x, y, &format!("{at}[{i}]"));
            }
        }
        (Json::Number(a), Json::Number(b)) => {
            let (x, y) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-15 * x.abs().max(y.abs()), "{at}: {x} != {y}");
        }
        _ => assert_eq!(got, want, "{at}"),
    }
}

#[test]
fn our_reader_reads_what_tensorboard_read() {
    let reference = reference();
    assert_eq!(
        reference["comparison_with_torch"]["identical"],
        json!(true),
        "TensorBoard read torch's files differently"
    );
    let dir = std::env::temp_dir().join(format!("pyrite-tb-reference-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    write_events::write_fixed(&dir).unwrap();
    let runs = reference["runs"].as_object().unwrap();
    let mut ours: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .chain([".".to_string()])
        .collect();
    ours.sort();
    let mut theirs: Vec<String> = runs.keys().cloned().collect();
    theirs.sort();
    assert_eq!(ours, theirs);
    for (name, expected) in runs {
        let got = read_run(&dir.join(name));
        assert_same(&got, expected, &format!("run {name}"));
    }
    std::fs::remove_dir_all(&dir).ok();
}
