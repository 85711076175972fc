//! Loading checkpoints written by PyTorch 2.15's `torch.save` (reference/gen_pt.py): every
//! tensor's dtype, shape, strides, storage offset, requires_grad and values, which tensors
//! share a storage, the plain values around them, and the files that must be refused.

mod common;

use common::{fixture, tensors};
use pyrite_core::{DType, Device, Tensor};
use pyrite_serialization::{load, Object};
use serde_json::Value as J;
use std::collections::HashMap;

fn manifest() -> J {
    serde_json::from_slice(&std::fs::read(fixture("manifest.json")).unwrap()).unwrap()
}

fn dtype_named(s: &str) -> DType {
    DType::ALL.into_iter().find(|d| d.as_str() == s).unwrap_or_else(|| panic!("dtype {s}"))
}

fn usizes(v: &J) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

fn load_fixture(stem: &str) -> Object {
    load(fixture(&format!("{stem}.pt"))).unwrap_or_else(|e| panic!("loading {stem}.pt: {e}"))
}

#[test]
fn every_tensor_matches_pytorch_in_layout_values_and_storage_sharing() {
    let m = manifest();
    let expected_bytes = std::fs::read(fixture("expected.safetensors")).unwrap();
    let expected = safetensors::SafeTensors::deserialize(&expected_bytes).unwrap();
    let mut checked = 0;
    for (stem, entries) in m["files"].as_object().unwrap() {
        let obj = load_fixture(stem);
        let got = tensors(&obj);
        let entries = entries.as_object().unwrap();
        let mut names: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
        names.sort();
        let mut want_names: Vec<&str> = entries.keys().map(String::as_str).collect();
        want_names.sort();
        assert_eq!(names, want_names, "{stem}: tensor paths");
        // group number in the manifest -> a tensor of that group
        let mut group_rep: HashMap<u64, Tensor> = HashMap::new();
        for (path, t) in &got {
            let e = &entries[path];
            let what = format!("{stem}/{path}");
            assert_eq!(t.dtype(), dtype_named(e["dtype"].as_str().unwrap()), "{what}: dtype");
            assert_eq!(t.dims(), usizes(&e["size"]).as_slice(), "{what}: size");
            assert_eq!(t.stride(), usizes(&e["stride"]).as_slice(), "{what}: stride");
            assert_eq!(t.storage_offset() as u64, e["offset"].as_u64().unwrap(), "{what}: offset");
            assert_eq!(t.requires_grad(), e["requires_grad"].as_bool().unwrap(), "{what}: requires_grad");
            assert_eq!(
                t.untyped_storage().nbytes() as u64,
                e["storage_nbytes"].as_u64().unwrap(),
                "{what}: nbytes"
            );
            let want = expected.tensor(&what).unwrap();
            assert_eq!(want.shape(), t.dims(), "{what}: expected shape");
            assert_eq!(t.to_raw_bytes().unwrap(), want.data(), "{what}: values");
            let group = e["storage_group"].as_u64().unwrap();
            match group_rep.get(&group) {
                Some(rep) => assert!(t.same_storage(rep), "{what}: should share its storage"),
                None => {
                    for other in group_rep.values() {
                        assert!(!t.same_storage(other), "{what}: should have a storage of its own");
                    }
                    group_rep.insert(group, t.clone());
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 44, "tensors checked");
}

#[test]
fn shared_storage_stays_shared_for_in_place_updates() {
    let obj = load_fixture("views");
    let base = obj.get("base").and_then(Object::as_tensor).unwrap();
    let block = obj.get("block").and_then(Object::as_tensor).unwrap();
    // block = base[1:3, 2:5]; writing through base shows through block.
    base.fill_(0.0).unwrap();
    assert!(block.to_vec::<f32>().unwrap().iter().all(|&x| x == 0.0));
}

#[test]
fn plain_values_keep_their_python_types() {
    let o = load_fixture("nested");
    let d = o.as_dict().expect("a dict");
    assert!(matches!(o, Object::Dict(_)));
    assert_eq!(d.get("int"), Some(&Object::Int(7)));
    assert_eq!(d.get("neg"), Some(&Object::Int(-3)));
    assert_eq!(d.get("big"), Some(&Object::Int(1 << 40)));
    assert_eq!(d.get("float"), Some(&Object::Float(0.25)));
    assert_eq!(d.get("str").and_then(Object::as_str), Some("h\u{e9}llo \u{2603}"));
    assert_eq!(d.get("bytes").and_then(Object::as_bytes), Some(&b"\x00\xffab"[..]));
    assert_eq!(d.get("none"), Some(&Object::None));
    assert_eq!(d.get("true"), Some(&Object::Bool(true)));
    assert_eq!(d.get("false"), Some(&Object::Bool(false)));
    assert_eq!(
        d.get("tuple"),
        Some(&Object::Tuple(vec![1.into(), "a".into(), Object::Tuple(vec![2.5.into()])]))
    );
    assert_eq!(
        d.get("list"),
        Some(&Object::List(vec![
            1.into(),
            Object::List(vec![2.into(), Object::List(vec![3.into(), Object::List(vec![])])])
        ]))
    );
    let odict = d.get("odict").unwrap();
    assert!(matches!(odict, Object::OrderedDict(_)));
    assert_eq!(
        odict.as_dict().unwrap().keys().cloned().collect::<Vec<_>>(),
        vec![Object::from("b"), Object::from("a")]
    );
    let ik = d.get("int_keys").unwrap();
    assert_eq!(ik.get(0).and_then(Object::as_str), Some("zero"));
    assert_eq!(ik.get(1).and_then(Object::as_str), Some("one"));
    assert_eq!(ik.get(-5).and_then(Object::as_str), Some("minus five"));
    assert_eq!(ik.get("0"), None, "int keys are not strings");
    let tk = d.get("tuple_key").unwrap();
    assert_eq!(tk.get((1, "x")).and_then(Object::as_str), Some("tuple key"));
    assert_eq!(d.get("set"), Some(&Object::Set(vec![3.into()])));
    assert_eq!(d.get("complex"), Some(&Object::Complex(1.5, -2.0)));
    assert_eq!(d.get("dtype"), Some(&Object::DType(DType::F16)));
    assert_eq!(d.get("device"), Some(&Object::Device(Device::Cpu)));
    assert_eq!(d.get("size"), Some(&Object::Tuple(vec![2.into(), 3.into()])));
    // [shared, (shared, {"again": shared})]: one tensor object, pickled once and memoized.
    let ts = tensors(d.get("tensors").unwrap());
    assert_eq!(ts.len(), 3);
    assert!(ts[0].1.is_same(&ts[1].1) && ts[0].1.is_same(&ts[2].1));
}

#[test]
fn a_module_state_dict_is_an_ordered_dict_with_metadata() {
    let sd = load_fixture("sequential_state_dict");
    let Object::OrderedDict(d) = &sd else { panic!("expected an OrderedDict, got {}", sd.type_name()) };
    let keys: Vec<&str> = d.keys().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "0.weight",
            "0.bias",
            "2.weight",
            "2.bias",
            "2.running_mean",
            "2.running_var",
            "2.num_batches_tracked",
            "3.weight",
            "3.bias"
        ]
    );
    let named = sd.to_named_tensors().unwrap();
    assert_eq!(named[6].1.dtype(), DType::I64);
    assert_eq!(named[6].1.item::<i64>().unwrap(), 1);
    // _metadata: {"": {"version": 1}, "0": ..., "2": {"version": 2}, ...}
    let meta = d.metadata.as_deref().expect("_metadata kept");
    assert!(matches!(meta, Object::OrderedDict(_)));
    assert_eq!(meta.get("").and_then(|m| m.get("version")), Some(&Object::Int(1)));
    assert_eq!(meta.get("2").and_then(|m| m.get("version")), Some(&Object::Int(2)));
    assert_eq!(meta.as_dict().unwrap().len(), 5);
}

#[test]
fn an_adam_state_dict_has_int_keys_and_a_tensor_step() {
    let sd = load_fixture("adam_state_dict");
    assert!(matches!(sd, Object::Dict(_)));
    let state = sd.get("state").unwrap();
    for p in 0..2 {
        let s = state.get(p).unwrap_or_else(|| panic!("state[{p}]"));
        let step = s.get("step").and_then(Object::as_tensor).unwrap();
        assert_eq!((step.rank(), step.dtype()), (0, DType::F32));
        assert_eq!(step.item::<f32>().unwrap(), 2.0);
        assert!(s.get("exp_avg").and_then(Object::as_tensor).is_some());
        assert!(s.get("exp_avg_sq").and_then(Object::as_tensor).is_some());
    }
    let groups = sd.get("param_groups").and_then(Object::as_slice).unwrap();
    assert_eq!(groups.len(), 1);
    let g = &groups[0];
    assert_eq!(g.get("lr").and_then(Object::as_float), Some(0.01));
    assert_eq!(g.get("betas"), Some(&Object::Tuple(vec![0.9.into(), 0.999.into()])));
    assert_eq!(g.get("eps").and_then(Object::as_float), Some(1e-8));
    assert_eq!(g.get("amsgrad"), Some(&Object::Bool(false)));
    assert_eq!(g.get("foreach"), Some(&Object::None));
    assert_eq!(g.get("params"), Some(&Object::List(vec![0.into(), 1.into()])));
}

#[test]
fn parameters_load_as_tensors_that_require_grad() {
    let o = load_fixture("parameter");
    let p = o.get("param").and_then(Object::as_tensor).unwrap();
    assert!(p.requires_grad() && p.is_leaf());
    let frozen = o.get("frozen").and_then(Object::as_tensor).unwrap();
    assert!(!frozen.requires_grad());
    assert_eq!(frozen.dtype(), DType::F64);
}

#[test]
fn protocol_4_pickles_load_too() {
    let o = load_fixture("protocol4");
    assert_eq!(o.get("n"), Some(&Object::Int(3)));
    assert_eq!(o.get("name").and_then(Object::as_str), Some("p4"));
}

#[test]
fn refused_files_say_what_they_are() {
    let m = manifest();
    let errors = m["errors"].as_object().unwrap();
    assert_eq!(errors.len(), 5);
    for (stem, part) in errors {
        let e = load(fixture(&format!("{stem}.pt"))).expect_err(stem).to_string();
        assert!(e.contains(part.as_str().unwrap()), "{stem}: {e}");
    }
    let e = load(fixture("malicious_reduce.pt")).unwrap_err().to_string();
    assert!(e.contains("posix.system") && e.contains("Weights only load failed"), "{e}");
    let e = load(fixture("legacy.pt")).unwrap_err().to_string();
    assert!(e.contains("pre-1.6"), "{e}");
    let e = load(fixture("expected.safetensors")).unwrap_err().to_string();
    assert!(e.contains("safetensors"), "{e}");
    assert!(load(fixture("missing.pt")).unwrap_err().to_string().contains("cannot open"));
}
