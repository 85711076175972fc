//! `.npy` files: against files numpy wrote (`reference/gen_npy.py`), round trips, and
//! malformed input (always an `Err`, never a panic).

use pyrite_core::{DType, ErrorKind, Tensor};
use serde_json::Value;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../reference/data/npy")
}

fn manifest() -> Value {
    let p = fixtures().join("manifest.json");
    let s = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (run reference/gen_npy.py)", p.display()));
    serde_json::from_str(&s).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
}

/// A fresh, empty directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite_npy_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn err_of<T>(r: pyrite_core::Result<T>) -> pyrite_core::Error {
    match r {
        Err(e) => e,
        Ok(_) => panic!("expected an error"),
    }
}

#[test]
fn loads_every_numpy_fixture() {
    let m = manifest();
    let cases = m["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for c in cases {
        let file = c["file"].as_str().unwrap();
        let t = Tensor::load_npy(fixtures().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let dtype = DType::from_name(c["dtype"].as_str().unwrap()).unwrap();
        let shape: Vec<usize> =
            c["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        assert_eq!(t.dtype(), dtype, "{file}");
        assert_eq!(t.dims(), &shape[..], "{file}");
        assert!(t.is_contiguous(), "{file}");
        assert_eq!(t.to_raw_bytes().unwrap(), hex(c["hex"].as_str().unwrap()), "{file}: elements differ");
    }
}

#[test]
fn writes_numpy_save_output_byte_for_byte() {
    let m = manifest();
    let mut checked = 0;
    for c in m["cases"].as_array().unwrap().iter().filter(|c| c["numpy_default"].as_bool().unwrap()) {
        let file = c["file"].as_str().unwrap();
        let numpy_bytes = std::fs::read(fixtures().join(file)).unwrap();
        let t = Tensor::read_npy(&numpy_bytes).unwrap();
        let mut ours = Vec::new();
        t.write_npy(&mut ours).unwrap();
        assert!(ours == numpy_bytes, "{file}: our bytes differ from numpy.save's");
        checked += 1;
    }
    assert!(checked >= 10);
}

#[test]
fn refuses_bad_numpy_files_with_clear_errors() {
    let m = manifest();
    for c in m["errors"].as_array().unwrap() {
        let file = c["file"].as_str().unwrap();
        let e = err_of(Tensor::load_npy(fixtures().join(file)));
        let want = c["contains"].as_str().unwrap();
        assert!(e.to_string().contains(want), "{file}: {e} (wanted '{want}')");
        assert!(e.to_string().contains(file), "{file}: the path is not in the message: {e}");
    }
}

#[test]
fn fortran_order_values_are_transposed_into_c_order() {
    let t = Tensor::load_npy(fixtures().join("f64_fortran_3x4.npy")).unwrap();
    // np.asfortranarray(np.arange(12.).reshape(3, 4))
    assert_eq!(
        t.to_vec2::<f64>().unwrap(),
        vec![vec![0., 1., 2., 3.], vec![4., 5., 6., 7.], vec![8., 9., 10., 11.]]
    );
    let b = Tensor::load_npy(fixtures().join("i64_bigendian_2x2.npy")).unwrap();
    assert_eq!(b.to_vec2::<i64>().unwrap(), vec![vec![1, -2], vec![3, 1 << 40]]);
}

#[test]
fn round_trips_every_dtype_and_shape() {
    let dir = scratch("roundtrip");
    let tensors = vec![
        Tensor::new([[1.5f32, -2.0, 3.25], [0.0, f32::INFINITY, -0.0]]).unwrap(),
        Tensor::new([1.0f64, f64::MIN_POSITIVE, -1e300]).unwrap(),
        Tensor::new([1i64, i64::MIN, i64::MAX]).unwrap(),
        Tensor::new([[1i32, -7], [8, 9]]).unwrap(),
        Tensor::new([0u8, 200, 255]).unwrap(),
        Tensor::new([true, false, true]).unwrap(),
        Tensor::new([1.0f32, 2.5, -0.125]).unwrap().to_dtype(DType::F16).unwrap(),
        Tensor::scalar(42i64).unwrap(),
        Tensor::zeros([0, 3], DType::F32).unwrap(),
        Tensor::zeros([2, 0, 5], DType::I32).unwrap(),
        Tensor::arange(0.0, 24.0, 1.0, DType::F64).unwrap().reshape([2, 3, 4]).unwrap(),
    ];
    for (i, t) in tensors.iter().enumerate() {
        let p = dir.join(format!("t{i}.npy"));
        t.save_npy(&p).unwrap();
        let back = Tensor::load_npy(&p).unwrap();
        assert_eq!((back.dims(), back.dtype()), (t.dims(), t.dtype()), "case {i}");
        assert_eq!(back.to_raw_bytes().unwrap(), t.to_raw_bytes().unwrap(), "case {i}");
        // and in memory
        let mut buf = Vec::new();
        t.write_npy(&mut buf).unwrap();
        assert_eq!(buf.len() % 64, t.numel() * t.element_size() % 64, "data starts 64-aligned");
        assert_eq!(Tensor::read_npy(&buf).unwrap().to_raw_bytes().unwrap(), t.to_raw_bytes().unwrap());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn non_contiguous_tensors_are_written_in_logical_order() {
    let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32).unwrap().reshape([2, 3]).unwrap().t().unwrap();
    assert!(!t.is_contiguous());
    let mut buf = Vec::new();
    t.write_npy(&mut buf).unwrap();
    let back = Tensor::read_npy(&buf).unwrap();
    assert_eq!(back.to_vec2::<f32>().unwrap(), vec![vec![0., 3.], vec![1., 4.], vec![2., 5.]]);
}

#[test]
fn bfloat16_is_refused_before_touching_the_disk() {
    let dir = scratch("bf16");
    let p = dir.join("x.npy");
    let t = Tensor::ones([2], DType::BF16).unwrap();
    let e = err_of(t.save_npy(&p));
    assert_eq!(e.kind(), ErrorKind::DType);
    assert!(e.to_string().contains("bfloat16 has no NumPy dtype"), "{e}");
    assert!(!p.exists());
    assert!(t.write_npy(Vec::new()).is_err());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no temp file left behind");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn save_replaces_atomically_and_leaves_no_temp_files() {
    let dir = scratch("atomic");
    let p = dir.join("w.npy");
    Tensor::new([1f32, 2.0]).unwrap().save_npy(&p).unwrap();
    Tensor::new([[3i64, 4, 5]]).unwrap().save_npy(&p).unwrap();
    assert_eq!(Tensor::load_npy(&p).unwrap().to_vec2::<i64>().unwrap(), vec![vec![3, 4, 5]]);
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("w.npy")]);
    // a directory that does not exist: an Io error, nothing created
    let e = err_of(Tensor::new([1f32]).unwrap().save_npy(dir.join("missing/x.npy")));
    assert_eq!(e.kind(), ErrorKind::Io);
    let e = err_of(Tensor::load_npy(dir.join("nope.npy")));
    assert_eq!(e.kind(), ErrorKind::Io);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_truncation_and_corruption_is_an_error_not_a_panic() {
    let mut good = Vec::new();
    Tensor::new([[1f32, 2.0, 3.0], [4.0, 5.0, 6.0]]).unwrap().write_npy(&mut good).unwrap();
    for n in 0..good.len() {
        assert!(Tensor::read_npy(&good[..n]).is_err(), "prefix of {n} bytes accepted");
    }
    // flip every header byte to a few values: must never panic (an Ok is fine if still valid)
    let header_end = good.len() - 24;
    for i in 0..header_end {
        for v in [0u8, b' ', b'\'', b'(', b')', b',', b'9', 0xff, b'}'] {
            let mut b = good.clone();
            b[i] = v;
            let _ = Tensor::read_npy(&b);
        }
    }
    // a header claiming a huge shape
    let mut h = Vec::new();
    let dict =
        b"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }";
    h.extend_from_slice(b"\x93NUMPY\x01\x00");
    h.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    h.extend_from_slice(dict);
    assert!(Tensor::read_npy(&h).is_err());
    // a header length pointing past the end
    let mut b = good.clone();
    b[8] = 0xff;
    b[9] = 0xff;
    assert!(Tensor::read_npy(&b).is_err());
}
