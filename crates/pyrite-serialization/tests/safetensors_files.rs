//! safetensors files both ways: files written by Hugging Face's `safetensors.torch`
//! (reference/gen_safetensors.py) load with their values, dtypes, shapes and metadata;
//! files written here load back identically and parse with the `safetensors` crate; bad
//! files are refused with an error.

mod formats_common;

use formats_common::{data_dir, dtype_named, from_hex};
use pyrite_core::{DType, Tensor};
use pyrite_serialization::safetensors::{
    load, load_file, load_file_with_metadata, load_with_metadata, save, save_file,
};
use std::collections::BTreeMap;

fn dir() -> std::path::PathBuf {
    data_dir("safetensors")
}

fn manifest() -> serde_json::Value {
    formats_common::manifest("safetensors")
}

#[test]
fn files_written_by_safetensors_torch_load_bit_for_bit() {
    let m = manifest();
    let mut n = 0;
    for case in m["cases"].as_array().unwrap() {
        let file = dir().join(case["file"].as_str().unwrap());
        let (tensors, meta) = load_file_with_metadata(&file).unwrap();
        let want_meta: BTreeMap<String, String> = serde_json::from_value(case["metadata"].clone()).unwrap();
        assert_eq!(meta, want_meta, "{}", file.display());
        let want = case["tensors"].as_array().unwrap();
        assert_eq!(tensors.len(), want.len());
        for ((name, t), w) in tensors.iter().zip(want) {
            assert_eq!(name, w["name"].as_str().unwrap(), "sorted by name");
            assert_eq!(t.dtype(), dtype_named(w["dtype"].as_str().unwrap()), "{name}");
            let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
            assert_eq!(t.dims(), shape.as_slice(), "{name}");
            assert_eq!(t.to_raw_bytes().unwrap(), from_hex(w["hex"].as_str().unwrap()), "{name}");
            n += 1;
        }
        // The same bytes in memory load the same.
        let again = load(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(again.len(), tensors.len());
    }
    assert_eq!(n, 18);
}

#[test]
fn bad_files_are_refused_with_an_error() {
    let m = manifest();
    let errors = m["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 7);
    for e in errors {
        let file = dir().join(e["file"].as_str().unwrap());
        let msg = load_file(&file).unwrap_err().to_string();
        assert!(msg.contains(e["contains"].as_str().unwrap()), "{}: {msg}", file.display());
        assert!(msg.contains(file.file_name().unwrap().to_str().unwrap()), "names the file: {msg}");
    }
    let e = load_file(dir().join("missing.safetensors")).unwrap_err().to_string();
    assert!(e.contains("cannot open"), "{e}");
}

fn every_dtype() -> Vec<(String, Tensor)> {
    let base = Tensor::arange(-3.0, 9.0, 1.0, DType::F32).unwrap().reshape([3, 4]).unwrap();
    let mut out = Vec::new();
    for d in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool]
    {
        let t = if d == DType::U8 { base.abs().unwrap().to_dtype(d) } else { base.to_dtype(d) }.unwrap();
        out.push((format!("t_{d}"), t));
    }
    out.push(("scalar".into(), Tensor::scalar(2.5f64).unwrap()));
    out.push(("empty".into(), Tensor::zeros([0, 3], DType::F32).unwrap()));
    out.push(("transposed".into(), base.t().unwrap())); // written as its contiguous values
    out.push(("odd_f16".into(), Tensor::ones([3], DType::F16).unwrap())); // 6 bytes, then 4-byte data
    out
}

#[test]
fn pyrite_files_round_trip_and_parse_with_the_safetensors_crate() {
    let tensors = every_dtype();
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let meta = BTreeMap::from([
        ("format".to_string(), "pt".to_string()),
        ("q\"uote".to_string(), "ü\n".to_string()),
    ]);
    let bytes = save(refs.iter().copied(), Some(&meta)).unwrap();
    if let Ok(keep) = std::env::var("PYRITE_KEEP_SAFETENSORS") {
        std::fs::write(keep, &bytes).unwrap(); // for checking with safetensors.torch by hand
    }
    let (back, back_meta) = load_with_metadata(&bytes).unwrap();
    assert_eq!(back_meta, meta);
    let mut want = tensors.clone();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(back.len(), want.len());
    for ((n1, a), (n2, b)) in back.iter().zip(&want) {
        assert_eq!(n1, n2);
        assert_eq!((a.dtype(), a.dims()), (b.dtype(), b.dims()), "{n1}");
        assert_eq!(a.to_raw_bytes().unwrap(), b.to_raw_bytes().unwrap(), "{n1}");
        assert!(a.is_contiguous());
    }
    // The reference implementation reads it too, and every tensor starts on a multiple of its
    // element size.
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(st.len(), tensors.len());
    let (n, m) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    assert_eq!((8 + n) % 8, 0);
    for (name, info) in m.tensors() {
        let esize = back.iter().find(|(k, _)| *k == name).unwrap().1.dtype().size_in_bytes();
        assert_eq!(info.data_offsets.0 % esize, 0, "{name}");
    }
    assert_eq!(m.metadata().as_ref().unwrap()["format"], "pt");
    // Without metadata there is no __metadata__ entry.
    let bytes = save(refs.iter().copied(), None).unwrap();
    assert!(!String::from_utf8_lossy(&bytes[..200]).contains("__metadata__"));
    assert!(load_with_metadata(&bytes).unwrap().1.is_empty());
}

#[test]
fn files_round_trip_on_disk_in_parallel_for_large_files() {
    let d = formats_common::temp_dir("st-disk");
    let path = d.join("big.safetensors");
    // 16 MiB in 9 tensors: above the parallel threshold.
    pyrite_core::manual_seed(0);
    let tensors: Vec<(String, Tensor)> = (0..9)
        .map(|i| (format!("layer{i}.weight"), Tensor::randn([512, 64 * (i + 1)], DType::F32).unwrap()))
        .collect();
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    save_file(refs.iter().copied(), &path, None).unwrap();
    pyrite_core::set_num_threads(2);
    let back = load_file(&path).unwrap();
    for ((n1, a), (n2, b)) in back.iter().zip(&tensors) {
        assert_eq!(n1, n2);
        assert_eq!(a.to_raw_bytes().unwrap(), b.to_raw_bytes().unwrap());
    }
    // Writing over an existing file replaces it; no temporary files are left behind.
    save_file([("x", &tensors[0].1)], &path, None).unwrap();
    assert_eq!(load_file(&path).unwrap().len(), 1);
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn bad_names_and_dtypes_are_errors() {
    let t = Tensor::ones([2], DType::F32).unwrap();
    let e = save([("a", &t), ("a", &t)], None).unwrap_err().to_string();
    assert!(e.contains("duplicate tensor name 'a'"), "{e}");
    let e = save([("__metadata__", &t)], None).unwrap_err().to_string();
    assert!(e.contains("reserved"), "{e}");
    // A hostile header: a dtype Pyrite lacks, named in the error.
    let header = br#"{"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}"#;
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header);
    b.extend_from_slice(&[0, 0]);
    let e = load(&b).unwrap_err().to_string();
    assert!(e.contains("'a'") && e.contains("F8_E4M3"), "{e}");
}

#[test]
fn torch_load_of_a_safetensors_file_names_the_reader_to_use() {
    let path = data_dir("safetensors").join("with_metadata.safetensors");
    let e = pyrite_serialization::load(&path).unwrap_err().to_string();
    assert!(e.contains("looks like a safetensors file"), "{e}");
    // A function that exists: this crate's reader (and pyrite-nn's StateDict wrapper).
    assert!(e.contains("pyrite::serialization::safetensors::load_file"), "{e}");
    let named = pyrite_serialization::safetensors::load_file(&path).unwrap();
    assert!(!named.is_empty());
}
