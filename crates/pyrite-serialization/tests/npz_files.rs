//! `.npz` files both ways: `np.savez` (stored) and `np.savez_compressed` (deflated) files
//! written by numpy (reference/gen_npz.py) load with their keys, order, dtypes, shapes and
//! values; files written here load back identically; bad files are refused with an error.

mod formats_common;

use formats_common::{data_dir, dtype_named, from_hex, manifest};
use pyrite_core::{DType, Tensor};
use pyrite_serialization::npz;
use pyrite_serialization::zip::ZipReader;

#[test]
fn files_written_by_numpy_load_bit_for_bit() {
    let m = manifest("npz");
    let mut n = 0;
    let mut methods = Vec::new();
    for case in m["cases"].as_array().unwrap() {
        let file = data_dir("npz").join(case["file"].as_str().unwrap());
        methods.extend(case["zip_methods"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()));
        let arrays = npz::load(&file).unwrap();
        let want = case["arrays"].as_array().unwrap();
        assert_eq!(arrays.len(), want.len(), "{}", file.display());
        for ((key, t), w) in arrays.iter().zip(want) {
            assert_eq!(key, w["key"].as_str().unwrap(), "in the archive's order");
            assert_eq!(t.dtype(), dtype_named(w["dtype"].as_str().unwrap()), "{key}");
            let shape: Vec<usize> = serde_json::from_value(w["shape"].clone()).unwrap();
            assert_eq!(t.dims(), shape.as_slice(), "{key}");
            assert!(t.is_contiguous(), "{key}");
            assert_eq!(t.to_raw_bytes().unwrap(), from_hex(w["hex"].as_str().unwrap()), "{key}");
            n += 1;
        }
    }
    assert_eq!(n, 24, "12 arrays in each of the two files");
    methods.sort();
    methods.dedup();
    assert_eq!(methods, [0, 8], "stored and deflated members are both covered");
}

#[test]
fn bad_files_are_refused_with_an_error() {
    let m = manifest("npz");
    let errors = m["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 5);
    for e in errors {
        let file = data_dir("npz").join(e["file"].as_str().unwrap());
        let msg = npz::load(&file).unwrap_err().to_string();
        assert!(msg.contains(e["contains"].as_str().unwrap()), "{}: {msg}", file.display());
    }
}

fn every_dtype() -> Vec<(String, Tensor)> {
    let base = Tensor::arange(-3.0, 9.0, 1.0, DType::F32).unwrap().reshape([3, 4]).unwrap();
    let mut out = Vec::new();
    for d in [DType::F32, DType::F64, DType::F16, DType::I64, DType::I32, DType::U8, DType::Bool] {
        let t = if d == DType::U8 { base.abs().unwrap().to_dtype(d) } else { base.to_dtype(d) }.unwrap();
        out.push((format!("t_{d}"), t));
    }
    out.push(("scalar".into(), Tensor::scalar(2.5f64).unwrap()));
    out.push(("empty".into(), Tensor::zeros([0, 3], DType::I64).unwrap()));
    out.push(("transposed".into(), base.t().unwrap()));
    out
}

#[test]
fn pyrite_files_round_trip_with_numpys_member_layout() {
    let tensors = every_dtype();
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let bytes = npz::savez_to_bytes(refs.iter().copied()).unwrap();
    let back = npz::load_from_bytes(&bytes).unwrap();
    assert_eq!(back.len(), tensors.len());
    for ((n1, a), (n2, b)) in back.iter().zip(&tensors) {
        assert_eq!(n1, n2, "in the order given");
        assert_eq!((a.dtype(), a.dims()), (b.dtype(), b.dims()), "{n1}");
        assert_eq!(a.to_raw_bytes().unwrap(), b.to_raw_bytes().unwrap(), "{n1}");
    }
    // Each member is `<name>.npy` holding exactly what numpy.save writes (Tensor::write_npy).
    let mut zip = ZipReader::new(std::io::Cursor::new(&bytes)).unwrap();
    for (name, t) in &tensors {
        let mut npy = Vec::new();
        t.write_npy(&mut npy).unwrap();
        assert_eq!(zip.read(&format!("{name}.npy")).unwrap(), npy);
    }
    // On disk, atomically; an env var keeps a copy for checking with numpy by hand.
    let d = formats_common::temp_dir("npz-disk");
    let path = d.join("pyrite.npz");
    npz::savez(&path, refs.iter().copied()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    if let Ok(keep) = std::env::var("PYRITE_KEEP_NPZ") {
        std::fs::copy(&path, keep).unwrap();
    }
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn bad_inputs_to_savez_are_errors() {
    let t = Tensor::ones([2], DType::F32).unwrap();
    let e = npz::savez_to_bytes([("a", &t), ("a", &t)]).unwrap_err().to_string();
    assert!(e.contains("duplicate array name 'a'"), "{e}");
    let bf = Tensor::ones([2], DType::BF16).unwrap();
    let e = npz::savez_to_bytes([("w", &bf)]).unwrap_err().to_string();
    assert!(e.contains("'w'") && e.contains("bfloat16"), "{e}");
}

#[test]
fn a_deflated_member_claiming_a_huge_size_is_refused_before_inflating() {
    let file = std::fs::read(data_dir("npz").join("savez_compressed.npz")).unwrap();
    // Make the first central-directory entry claim 3 GiB uncompressed.
    let cd = (0..file.len() - 4).find(|&i| file[i..i + 4] == *b"PK\x01\x02").unwrap();
    let mut m = file.clone();
    m[cd + 24..cd + 28].copy_from_slice(&0xC000_0000u32.to_le_bytes());
    let e = npz::load_from_bytes(&m).unwrap_err().to_string();
    assert!(e.contains("more than deflate can expand to"), "{e}");
    // A size a little too large is caught by the inflater's limit or the size check.
    let mut m = file.clone();
    let size = u32::from_le_bytes(m[cd + 24..cd + 28].try_into().unwrap());
    m[cd + 24..cd + 28].copy_from_slice(&(size + 1).to_le_bytes());
    assert!(npz::load_from_bytes(&m).is_err());
}
