//! `default_collate` and `Sample`, specified by PyTorch's `default_collate`.

use std::collections::BTreeMap;

use pyrite::data::{default_collate, Sample};
use pyrite::{DType, ErrorKind, Tensor};

#[test]
fn tensors_stack_along_a_new_first_dim() {
    let a = Tensor::new([1f32, 2.]).unwrap();
    let b = Tensor::new([3f32, 4.]).unwrap();
    let out = default_collate(vec![a.into(), b.into()]).unwrap().into_tensor().unwrap();
    assert_eq!(out.dims(), &[2, 2]);
    assert_eq!(out.to_vec2::<f32>().unwrap(), vec![vec![1., 2.], vec![3., 4.]]);
}

#[test]
fn ragged_tensors_are_an_error_naming_the_shapes() {
    let e = default_collate(vec![
        Tensor::zeros([2], DType::F32).unwrap().into(),
        Tensor::zeros([3], DType::F32).unwrap().into(),
    ])
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
    // PyTorch: "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"
    assert!(e.message().starts_with("stack expects each tensor to be equal size"), "{}", e.message());
    assert!(e.message().contains("at entry 0") && e.message().contains("at entry 1"), "{}", e.message());
}

#[test]
fn numbers_and_bools_become_tensors() {
    let i = default_collate(vec![1i64.into(), 2i64.into()]).unwrap().into_tensor().unwrap();
    assert_eq!(i.dtype(), DType::I64);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 2]);
    let f = default_collate(vec![1.5f64.into(), 2.0f64.into()]).unwrap().into_tensor().unwrap();
    assert_eq!(f.dtype(), DType::F64, "python floats collate to float64");
    assert_eq!(f.to_vec::<f64>().unwrap(), vec![1.5, 2.0]);
    let b = default_collate(vec![true.into(), false.into()]).unwrap().into_tensor().unwrap();
    assert_eq!(b.dtype(), DType::Bool);
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, false]);
}

#[test]
fn strings_become_a_list() {
    let s = default_collate(vec!["a".into(), "b".into()]).unwrap();
    let l = s.as_list().unwrap();
    assert_eq!(l.iter().map(|x| x.as_str().unwrap()).collect::<Vec<_>>(), vec!["a", "b"]);
}

#[test]
fn nested_tuples_collate_column_by_column() {
    let x = |v: f32| Tensor::new([v, v]).unwrap();
    let batch: Vec<Sample> = (0..3).map(|i| Sample::from((x(i as f32), (i as i64, "s")))).collect();
    let out = default_collate(batch).unwrap();
    let cols = out.as_tuple().unwrap();
    assert_eq!(cols.len(), 2);
    assert_eq!(cols[0].as_tensor().unwrap().dims(), &[3, 2]);
    let inner = cols[1].as_tuple().unwrap();
    assert_eq!(inner[0].as_tensor().unwrap().to_vec::<i64>().unwrap(), vec![0, 1, 2]);
    assert_eq!(inner[1].as_list().unwrap().len(), 3);
}

#[test]
fn lists_stay_lists() {
    let out = default_collate(vec![vec![1i64, 2].into(), vec![3i64, 4].into()]).unwrap();
    let cols = out.as_list().unwrap();
    assert_eq!(cols[0].as_tensor().unwrap().to_vec::<i64>().unwrap(), vec![1, 3]);
    assert_eq!(cols[1].as_tensor().unwrap().to_vec::<i64>().unwrap(), vec![2, 4]);
}

#[test]
fn maps_collate_per_key() {
    let m = |a: i64, b: &str, x: f32| {
        let mut m = BTreeMap::new();
        m.insert("a".to_string(), Sample::from(a));
        m.insert("b".to_string(), Sample::from(b));
        m.insert("x".to_string(), Sample::from(Tensor::new([[x]]).unwrap()));
        Sample::Map(m)
    };
    let out = default_collate(vec![m(1, "x", 0.5), m(2, "y", 1.5)]).unwrap();
    let map = out.as_map().unwrap();
    assert_eq!(map["a"].as_tensor().unwrap().to_vec::<i64>().unwrap(), vec![1, 2]);
    assert_eq!(map["b"].as_list().unwrap()[1].as_str().unwrap(), "y");
    assert_eq!(map["x"].as_tensor().unwrap().dims(), &[2, 1, 1]);

    let mut missing = BTreeMap::new();
    missing.insert("b".to_string(), Sample::from("z"));
    assert!(default_collate(vec![m(1, "x", 0.5), Sample::Map(missing)]).is_err());
}

#[test]
fn uneven_tuples_and_mixed_kinds_are_errors() {
    let e = default_collate(vec![(1i64, 2i64).into(), Sample::Tuple(vec![1i64.into()])]).unwrap_err();
    assert_eq!(e.message(), "each element in list of batch should be of equal size");
    let e = default_collate(vec![1i64.into(), 1.5f64.into()]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(default_collate(vec![]).is_err());
}

#[test]
fn sample_accessors_report_what_they_found() {
    let s = Sample::from(3usize);
    assert_eq!(s.as_int().unwrap(), 3);
    let e = s.as_tensor().unwrap_err();
    assert_eq!(e.message(), "Sample: expected a Tensor, but got a sample of kind int");
    assert!(Sample::from(1.0f32).as_float().is_ok());
    assert!(Sample::from(1i32).as_float().is_err());
    assert_eq!(Sample::from((1i64, 2i64, 3i64)).as_tuple().unwrap().len(), 3);
    assert_eq!(Sample::from(vec![1i64]).item(1).unwrap_err().kind(), ErrorKind::Index);
}

#[test]
fn a_batch_unpacks_into_a_tuple_of_tensors() -> pyrite::Result<()> {
    let x = Tensor::new([[1f32, 2.], [3., 4.]])?;
    let y = Tensor::new([0i64, 1])?;
    let batch = Sample::Tuple(vec![x.clone().into(), y.clone().into()]);
    // Python's `x, y = batch`
    let (xb, yb): (Tensor, Tensor) = batch.clone().try_into()?;
    assert_eq!(xb.to_vec2::<f32>()?, x.to_vec2::<f32>()?);
    assert_eq!(yb.to_vec::<i64>()?, vec![0, 1]);
    let (_, _, w): (Tensor, Tensor, Tensor) =
        Sample::List(vec![x.clone().into(), y.clone().into(), x.into()]).try_into()?;
    assert_eq!(w.dims(), &[2, 2]);
    // another arity, a non-tensor item, or not a tuple at all: Python's messages
    let e = <(Tensor, Tensor, Tensor)>::try_from(batch.clone()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.message().contains("not enough values to unpack (expected 3, got 2)"), "{e}");
    let three = Sample::Tuple(vec![y.clone().into(), y.clone().into(), y.clone().into()]);
    let e = <(Tensor, Tensor)>::try_from(three).unwrap_err();
    assert!(e.message().contains("too many values to unpack (expected 2)"), "{e}");
    let e = <(Tensor, Tensor)>::try_from(Sample::Tuple(vec![y.clone().into(), Sample::Int(3)])).unwrap_err();
    assert!(e.message().contains("item 1") && e.message().contains("int"), "{e}");
    let e = <(Tensor, Tensor)>::try_from(Sample::Tensor(y)).unwrap_err();
    assert!(e.message().contains("kind Tensor"), "{e}");
    Ok(())
}
