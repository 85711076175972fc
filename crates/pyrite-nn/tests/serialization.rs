//! A state_dict round-trips through a safetensors file in every dtype; a bad file is an error,
//! and a failed save leaves the existing file as it was.

use pyrite::nn::{load_safetensors, save_safetensors, state_dict::StateDict};
use pyrite::{DType, Tensor};

fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-serialization-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn every_dtype_round_trips() {
    let mut sd = StateDict::new();
    let base = Tensor::new([[1.5f32, -2.0, 3.25], [0.0, 7.0, -0.5]]).unwrap();
    for (i, d) in
        [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool]
            .into_iter()
            .enumerate()
    {
        sd.insert(format!("layer{i}.weight"), base.abs().unwrap().to_dtype(d).unwrap());
    }
    sd.insert("scalar", Tensor::scalar(3.0f64).unwrap());
    sd.insert("strided", base.t().unwrap()); // saved contiguous
    let path = dir().join("all.safetensors");
    save_safetensors(&sd, &path).unwrap();
    let back = load_safetensors(&path).unwrap();
    assert_eq!(back.len(), sd.len());
    for (k, t) in sd.iter() {
        let b = back.get(k).unwrap();
        assert_eq!((b.dtype(), b.dims()), (t.dtype(), t.dims()), "{k}");
        assert_eq!(b.to_raw_bytes().unwrap(), t.contiguous().unwrap().to_raw_bytes().unwrap(), "{k}");
    }
}

#[test]
fn bad_files_are_errors_and_failed_saves_keep_the_old_file() {
    let d = dir();
    let junk = d.join("junk.safetensors");
    std::fs::write(&junk, b"not a safetensors file").unwrap();
    assert!(load_safetensors(&junk).unwrap_err().to_string().contains("not a valid safetensors file"));
    assert!(load_safetensors(d.join("missing.safetensors")).is_err());

    let good = d.join("good.safetensors");
    let mut sd = StateDict::new();
    sd.insert("w", Tensor::ones([2], DType::F32).unwrap());
    save_safetensors(&sd, &good).unwrap();
    let before = std::fs::read(&good).unwrap();
    // saving onto a path whose parent is a file fails before anything is replaced
    assert!(save_safetensors(&sd, good.join("child.safetensors")).is_err());
    assert_eq!(std::fs::read(&good).unwrap(), before);
}
