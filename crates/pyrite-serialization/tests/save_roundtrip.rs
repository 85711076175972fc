//! Writing checkpoints: every value round-trips through `save` and `load`, views keep their
//! layout and shared storages stay shared, the archive has PyTorch's layout, and writes are
//! atomic.
//!
//! With `PYRITE_PT_OUT=<dir>` set, `files_for_pytorch` also leaves its files in `<dir>`;
//! `python3 reference/check_pt.py <dir>` then loads each with
//! `torch.load(weights_only=True)` and checks it (CI has no Python, so the read-back here is
//! the same check from Rust).

mod common;

use common::{temp_dir, tensors};
use pyrite_core::{DType, Device, Tensor};
use pyrite_serialization::zip::{ZipReader, DATA_ALIGNMENT};
use pyrite_serialization::{atomic_write, load, load_from_bytes, save, save_to_bytes, Dict, Object};

fn arange(n: usize, dtype: DType) -> Tensor {
    Tensor::arange(0.0, n as f64, 1.0, DType::F64).unwrap().to_dtype(dtype).unwrap()
}

/// The files `reference/check_pt.py` knows, by name.
fn pytorch_check_files() -> Vec<(&'static str, Object)> {
    // Every dtype: arange(6) - 2 shaped (2, 3) (bool: x % 2 == 1, uint8: arange(6) * 50).
    let signed = (arange(6, DType::F64) - 2.0).unwrap().reshape([2, 3]).unwrap();
    let mut dtypes = Dict::new();
    for d in DType::ALL {
        let t = match d {
            DType::Bool => Tensor::new([[false, true, false], [true, false, true]]).unwrap(),
            DType::U8 => Tensor::new([[0u8, 50, 100], [150, 200, 250]]).unwrap(),
            d => signed.to_dtype(d).unwrap(),
        };
        dtypes.insert(d.as_str(), t);
    }
    // Views of one storage, and a second storage viewed by an expand.
    let grid = arange(24, DType::F32).reshape([4, 6]).unwrap();
    let col = arange(3, DType::F32);
    let views = Object::from_pairs([
        ("base", Object::from(&grid)),
        ("transposed", grid.t().unwrap().into()),
        ("block", grid.narrow(0, 1, 2).unwrap().narrow(1, 2, 3).unwrap().into()),
        ("every_other_column", grid.slice(1, None, None, 2).unwrap().into()),
        ("row", grid.select(0, 2).unwrap().into()),
        ("expanded", col.unsqueeze(1).unwrap().expand([3, 4]).unwrap().into()),
        ("col", col.clone().into()),
    ]);
    // Plain values and containers.
    let mut int_keys = Dict::new();
    int_keys.insert(0, "zero");
    int_keys.insert(-5, "minus five");
    let mut odict = Dict::new();
    odict.insert("b", 1);
    odict.insert("a", 2);
    let nested = Object::from_pairs([
        ("int", Object::from(7)),
        ("big", Object::Int(-(1 << 40))),
        ("max", Object::Int(i64::MAX)),
        ("min", Object::Int(i64::MIN)),
        ("float", 0.25.into()),
        ("str", "h\u{e9}llo \u{2603}".into()),
        ("bytes", Object::Bytes(vec![0, 255, b'a'])),
        ("none", Object::None),
        ("true", true.into()),
        ("tuple", Object::Tuple(vec![1.into(), "a".into(), Object::Tuple(vec![2.5.into()]), 4.into()])),
        ("list", Object::List(vec![1.into(), Object::List(vec![2.into(), Object::List(vec![])])])),
        ("odict", Object::OrderedDict(odict)),
        ("int_keys", Object::Dict(int_keys)),
        ("tuple_key", Object::from_pairs([((1, "x"), "tuple key")])),
        ("set", Object::Set(vec![3.into(), 4.into()])),
        ("complex", Object::Complex(1.5, -2.0)),
        ("dtype", DType::BF16.into()),
        ("device", Device::Cpu.into()),
        ("empty_dict", Object::Dict(Dict::new())),
    ]);
    // A module state_dict with _metadata, as nn.Linear(3, 2).state_dict() has.
    let w = (arange(6, DType::F32) * 0.5).unwrap().reshape([2, 3]).unwrap();
    let b = Tensor::new([0.25f32, -0.5]).unwrap();
    let mut sd = Object::from_named_tensors([("weight", w), ("bias", b)]);
    let meta = Object::OrderedDict([("", Object::from_pairs([("version", 1)]))].into_iter().collect());
    sd.as_dict_mut().unwrap().metadata = Some(Box::new(meta));
    // 0-d, empty, requires_grad.
    let misc = Object::from_pairs([
        ("scalar", Object::from(Tensor::scalar(3.5f64).unwrap())),
        ("empty", Tensor::zeros([0, 3], DType::F32).unwrap().into()),
        ("leaf", Tensor::new([1f32, -1.]).unwrap().requires_grad_(true).unwrap().into()),
    ]);
    // Identity: one tensor twice (in a list, and again in a second list) is one object; a
    // second view of its storage is a second tensor.
    let t = arange(4, DType::F32);
    let identity = Object::from_pairs([
        ("same", Object::List(vec![Object::from(&t), Object::from(&t)])),
        ("views", Object::List(vec![Object::from(&t), t.narrow(0, 1, 2).unwrap().into()])),
    ]);
    vec![
        ("dtypes", Object::Dict(dtypes)),
        ("views", views),
        ("nested", nested),
        ("state_dict", sd),
        ("misc", misc),
        ("identity", identity),
    ]
}

#[test]
fn files_for_pytorch() {
    let dir = match std::env::var_os("PYRITE_PT_OUT") {
        Some(d) => std::path::PathBuf::from(d),
        None => temp_dir("for-pytorch"),
    };
    std::fs::create_dir_all(&dir).unwrap();
    for (name, obj) in pytorch_check_files() {
        let path = dir.join(format!("{name}.pt"));
        save(&obj, &path).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.type_name(), obj.type_name(), "{name}");
        // Same tensors at the same paths, with the same layout and values.
        let (a, b) = (tensors(&obj), tensors(&back));
        assert_eq!(a.len(), b.len(), "{name}");
        for ((pa, ta), (pb, tb)) in a.iter().zip(&b) {
            assert_eq!(pa, pb);
            assert_eq!(
                (ta.dtype(), ta.dims(), ta.stride()),
                (tb.dtype(), tb.dims(), tb.stride()),
                "{name}/{pa}"
            );
            assert_eq!(ta.storage_offset(), tb.storage_offset(), "{name}/{pa}");
            assert_eq!(ta.requires_grad(), tb.requires_grad(), "{name}/{pa}");
            assert_eq!(ta.to_raw_bytes().unwrap(), tb.to_raw_bytes().unwrap(), "{name}/{pa}");
            assert_eq!(ta.untyped_storage().nbytes(), tb.untyped_storage().nbytes(), "{name}/{pa}");
        }
        // Storage sharing is the same relation before and after.
        for i in 0..a.len() {
            for j in 0..a.len() {
                assert_eq!(
                    a[i].1.same_storage(&a[j].1),
                    b[i].1.same_storage(&b[j].1),
                    "{name}: {} vs {}",
                    a[i].0,
                    a[j].0
                );
            }
        }
        if name == "nested" {
            // Tensors aside, the values compare equal (dict order, int keys, types and all).
            assert_eq!(back, obj);
        }
        if name == "state_dict" {
            let meta = back.as_dict().unwrap().metadata.as_deref().unwrap();
            assert_eq!(meta.get("").and_then(|m| m.get("version")), Some(&Object::Int(1)));
        }
    }
    if std::env::var_os("PYRITE_PT_OUT").is_none() {
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn a_tensor_saved_twice_loads_as_one_tensor() {
    let t = arange(4, DType::F32);
    let view = t.narrow(0, 1, 2).unwrap();
    let obj = Object::List(vec![Object::from(&t), Object::from(&t), Object::from(&view)]);
    let bytes = save_to_bytes(&obj).unwrap();
    // data.pkl rebuilds two tensors (t once, then a memo reference to it; the view), both on
    // storage "0": its persistent id is written once per rebuilt tensor.
    let pkl = ZipReader::new(std::io::Cursor::new(&bytes)).unwrap().read("archive/data.pkl").unwrap();
    let key = b"X\x01\x00\x00\x000";
    assert_eq!(pkl.windows(key.len()).filter(|w| w == key).count(), 2);
    let back = load_from_bytes(&bytes).unwrap();
    let l: Vec<&Tensor> = back.as_slice().unwrap().iter().map(|o| o.as_tensor().unwrap()).collect();
    assert!(l[0].is_same(l[1]), "[t, t] loads as one tensor");
    assert!(!l[0].is_same(l[2]) && l[0].same_storage(l[2]), "two views of one storage stay two tensors");
    assert_eq!(l[2].to_vec::<f32>().unwrap(), [1., 2.]);
    // And it saves back the same way.
    let again = save_to_bytes(&back).unwrap();
    let pkl2 = ZipReader::new(std::io::Cursor::new(&again)).unwrap().read("archive/data.pkl").unwrap();
    assert_eq!(pkl2, pkl);
}

#[test]
fn the_archive_has_pytorchs_records_in_pytorchs_order_aligned_to_64_bytes() {
    let x = arange(10, DType::F32);
    let y = arange(3, DType::I64);
    let obj = Object::List(vec![x.clone().into(), x.narrow(0, 2, 5).unwrap().into(), y.into()]);
    let bytes = save_to_bytes(&obj).unwrap();
    let mut z = ZipReader::new(std::io::Cursor::new(bytes.clone())).unwrap();
    let names: Vec<String> = z.names().map(String::from).collect();
    assert_eq!(
        names,
        [
            "archive/data.pkl",
            "archive/.format_version",
            "archive/.storage_alignment",
            "archive/byteorder",
            "archive/data/0",
            "archive/data/1",
            "archive/version",
            "archive/.data/serialization_id"
        ]
    );
    assert_eq!(z.read("archive/byteorder").unwrap(), b"little");
    assert_eq!(z.read("archive/version").unwrap(), b"3\n");
    assert_eq!(z.read("archive/.storage_alignment").unwrap(), b"64");
    assert_eq!(z.read("archive/.data/serialization_id").unwrap().len(), 40);
    // The shared storage is written once, whole; the storages hold raw little-endian elements.
    assert_eq!(z.read("archive/data/0").unwrap(), x.to_raw_bytes().unwrap());
    assert_eq!(z.size("archive/data/1"), Some(24));
    // Each record's data starts on a 64-byte boundary: find it after its local header.
    for name in &names {
        let data = z.read(name).unwrap();
        let at = find_local_data(&bytes, name);
        assert_eq!(at as u64 % DATA_ALIGNMENT, 0, "{name}");
        assert_eq!(&bytes[at..at + data.len()], &data[..], "{name}");
    }
}

/// Where the data of entry `name` starts, from its local header.
fn find_local_data(zip: &[u8], name: &str) -> usize {
    let mut at = 0;
    loop {
        assert_eq!(&zip[at..at + 4], b"PK\x03\x04");
        let size = u32::from_le_bytes(zip[at + 18..at + 22].try_into().unwrap()) as usize;
        let n = u16::from_le_bytes([zip[at + 26], zip[at + 27]]) as usize;
        let e = u16::from_le_bytes([zip[at + 28], zip[at + 29]]) as usize;
        let data = at + 30 + n + e;
        if &zip[at + 30..at + 30 + n] == name.as_bytes() {
            return data;
        }
        at = data + size;
    }
}

#[test]
fn unusual_layouts_round_trip() {
    // A view with an offset past an empty dim, a 0-stride expand of a scalar, a permuted 4-d view.
    let base = arange(24, DType::F64).reshape([2, 3, 4]).unwrap();
    let permuted = base.permute(&[2, 0, 1]).unwrap().unsqueeze(0).unwrap();
    let scalar_expand = Tensor::scalar(5i32).unwrap().expand([2, 2]).unwrap();
    let empty_view = base.narrow(2, 3, 0).unwrap();
    let obj =
        Object::List(vec![permuted.clone().into(), scalar_expand.clone().into(), empty_view.clone().into()]);
    let back = load_from_bytes(&save_to_bytes(&obj).unwrap()).unwrap();
    let got = tensors(&back);
    for ((_, want), (_, got)) in tensors(&obj).iter().zip(&got) {
        assert_eq!(
            (got.dims(), got.stride(), got.storage_offset()),
            (want.dims(), want.stride(), want.storage_offset())
        );
        assert_eq!(got.to_raw_bytes().unwrap(), want.to_raw_bytes().unwrap());
    }
    assert!(got[0].1.same_storage(&got[2].1));
}

#[test]
fn saving_replaces_a_file_atomically_and_cleans_up_on_failure() {
    let dir = temp_dir("atomic");
    let path = dir.join("ckpt.pt");
    save(&Object::from(1), &path).unwrap();
    save(&Object::from(2), &path).unwrap();
    assert_eq!(load(&path).unwrap(), Object::Int(2));
    // A writer that fails half-way leaves the old file and no temporary behind.
    let err = atomic_write(&path, |w| {
        w.write_all(b"partial")?;
        Err(pyrite_core::Error::new(pyrite_core::ErrorKind::Io, "disk full"))
    });
    assert!(err.unwrap_err().to_string().contains("disk full"));
    assert_eq!(load(&path).unwrap(), Object::Int(2));
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("ckpt.pt")]);
    // Too deep to pickle: an error before anything is written.
    let mut deep = Object::None;
    for _ in 0..1100 {
        deep = Object::List(vec![deep]);
    }
    assert!(save(&deep, &path).unwrap_err().to_string().contains("deep"));
    assert_eq!(load(&path).unwrap(), Object::Int(2));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn integers_of_every_width_round_trip() {
    let ints: Vec<Object> = [
        0,
        1,
        255,
        256,
        65535,
        65536,
        -1,
        -128,
        -129,
        i32::MAX as i64,
        i32::MIN as i64,
        1 << 31,
        -(1 << 31) - 1,
        1 << 40,
        i64::MAX,
        i64::MIN,
    ]
    .into_iter()
    .map(Object::Int)
    .collect();
    let floats: Vec<Object> =
        [0.0, -0.0, 1.5, f64::INFINITY, f64::MIN_POSITIVE, 1e300].into_iter().map(Object::Float).collect();
    let obj = Object::Tuple(vec![Object::List(ints), Object::List(floats)]);
    assert_eq!(load_from_bytes(&save_to_bytes(&obj).unwrap()).unwrap(), obj);
    let nan = load_from_bytes(&save_to_bytes(&Object::Float(f64::NAN)).unwrap()).unwrap();
    assert!(nan.as_float().unwrap().is_nan());
}
