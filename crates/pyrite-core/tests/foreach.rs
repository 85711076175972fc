//! `ops::foreach::foreach_apply`, the multi-tensor in-place update optimizers step with.

use pyrite_core::ops::foreach::foreach_apply;
use pyrite_core::{DType, Tensor};

fn axpy(ts: &[&Tensor]) -> pyrite_core::Result<()> {
    foreach_apply::<f32>(ts, 2, 1, &|_, w, r| {
        for (p, g) in w[0].iter_mut().zip(r[0]) {
            *p += 2.0 * g;
        }
    })
}

#[test]
fn updates_every_group_in_place_and_bumps_versions() {
    let a = Tensor::zeros([3], DType::F32).unwrap();
    let b = Tensor::ones([70_000], DType::F32).unwrap(); // split into parallel chunks
    let (ga, gb) = (Tensor::new([1f32, 2., 3.]).unwrap(), Tensor::full([70_000], 0.5, DType::F32).unwrap());
    let (va, vb) = (a.version(), b.version());
    axpy(&[&a, &ga, &b, &gb]).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), [2., 4., 6.]);
    assert!(b.to_vec::<f32>().unwrap().iter().all(|&v| v == 2.0));
    assert!(a.version() > va && b.version() > vb);
    assert_eq!(ga.version(), 0, "read tensors are not written");
}

#[test]
fn reads_non_contiguous_tensors_in_row_major_order() {
    let p = Tensor::zeros([2, 3], DType::F32).unwrap();
    let g = Tensor::new([[1f32, 2.], [3., 4.], [5., 6.]]).unwrap().t().unwrap();
    axpy(&[&p, &g]).unwrap();
    assert_eq!(p.to_vec2::<f32>().unwrap(), [[2., 6., 10.], [4., 8., 12.]]);
}

#[test]
fn refuses_what_it_cannot_update_safely() {
    let p = Tensor::zeros([4], DType::F32).unwrap();
    let msg = |r: pyrite_core::Result<()>| r.unwrap_err().to_string();
    assert!(msg(axpy(&[&p, &Tensor::zeros([4], DType::F64).unwrap()])).contains("F32"));
    assert!(msg(axpy(&[&p, &Tensor::zeros([5], DType::F32).unwrap()])).contains("differ in size"));
    let strided = Tensor::zeros([4, 2], DType::F32).unwrap().t().unwrap();
    assert!(msg(axpy(&[&strided, &Tensor::zeros([2, 4], DType::F32).unwrap()])).contains("contiguous"));
    assert!(msg(axpy(&[&p, &p])).contains("shares memory"));
    let view = p.narrow(0, 0, 2).unwrap();
    let other = p.narrow(0, 2, 2).unwrap();
    assert!(msg(axpy(&[&view, &other])).contains("shares memory"));
    assert!(msg(axpy(&[&p])).contains("groups of 2"));
    assert_eq!(p.to_vec::<f32>().unwrap(), [0.0; 4], "a refused call writes nothing");
}
