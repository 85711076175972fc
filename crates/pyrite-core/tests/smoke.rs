use pyrite_core::{DType, Tensor};

#[test]
fn basic_pipeline() {
    let a = Tensor::new([[1f32, 2., 3.], [4., 5., 6.]]).unwrap();
    let b = Tensor::new([10f32, 20., 30.]).unwrap();
    let c = (&a + &b).unwrap();
    assert_eq!(c.to_vec2::<f32>().unwrap(), vec![vec![11., 22., 33.], vec![14., 25., 36.]]);
    let t = a.t().unwrap();
    assert!(!t.is_contiguous());
    let d = (&t * 2.0).unwrap();
    assert_eq!(d.to_vec2::<f32>().unwrap(), vec![vec![2., 8.], vec![4., 10.], vec![6., 12.]]);
    let e = t.exp().unwrap();
    assert!((e.to_vec::<f32>().unwrap()[1] - 4f32.exp()).abs() < 1e-4);
    let i = Tensor::new([1i64, 2, 3]).unwrap();
    assert_eq!(i.div(&i).unwrap().dtype(), DType::F32);
    a.narrow(1, 0, 1).unwrap().fill_(0.0).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![0., 2., 3., 0., 5., 6.]);
    assert!(a.version() > 0);
}
