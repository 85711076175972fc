//! Specifications of tensor semantics that PyTorch users rely on: views share storage, in-place
//! ops are visible through every view and bump the version counter, errors instead of panics,
//! memory statistics, devices, threads and operator ergonomics.

use pyrite_core::{idx, memory, DType, Device, ErrorKind, Result, Scalar, Tensor};

fn t2x3() -> Tensor {
    Tensor::new([[0f32, 1., 2.], [3., 4., 5.]]).unwrap()
}

#[test]
fn views_share_storage_with_their_base() {
    let base = t2x3();
    for v in [
        base.view([3, 2]).unwrap(),
        base.reshape([6]).unwrap(),
        base.t().unwrap(),
        base.permute(&[1, 0]).unwrap(),
        base.narrow(1, 1, 2).unwrap(),
        base.select(0, 1).unwrap(),
        base.unsqueeze(0).unwrap(),
        base.unsqueeze(0).unwrap().squeeze().unwrap(),
        base.slice(1, None, None, 2).unwrap(),
        base.index(&idx![.., 1..]).unwrap(),
        base.diagonal(0, 0, 1).unwrap(),
        base.flatten(0, -1).unwrap(),
        base.unfold(1, 2, 1).unwrap(),
    ] {
        assert!(v.same_storage(&base));
    }
}

#[test]
fn in_place_writes_are_visible_through_every_view() {
    let base = t2x3();
    let col = base.select(1, 2).unwrap(); // base[:, 2]
    let tr = base.t().unwrap();
    col.mul_scalar_(10).unwrap();
    assert_eq!(base.to_vec::<f32>().unwrap(), vec![0., 1., 20., 3., 4., 50.]);
    assert_eq!(tr.to_vec2::<f32>().unwrap(), vec![vec![0., 3.], vec![1., 4.], vec![20., 50.]]);
    tr.narrow(0, 0, 1).unwrap().fill_(-1.0).unwrap(); // base[:, 0] = -1
    assert_eq!(base.to_vec::<f32>().unwrap(), vec![-1., 1., 20., -1., 4., 50.]);
}

#[test]
fn every_in_place_op_bumps_the_shared_version_counter() {
    let base = t2x3();
    let view = base.view([6]).unwrap();
    let v0 = base.version();
    view.add_scalar_(1).unwrap();
    assert_eq!(base.version(), v0 + 1);
    base.zero_().unwrap();
    base.copy_(&Tensor::new([1f32, 2., 3.]).unwrap()).unwrap();
    assert_eq!(view.version(), v0 + 3);
    // out-of-place ops do not touch the counter
    let _ = base.add(&base).unwrap();
    assert_eq!(base.version(), v0 + 3);
}

#[test]
fn in_place_with_aliased_operands_reads_before_writing() {
    // a.add_(a.flip-like view) must use the old values: PyTorch copies overlapping inputs.
    let a = Tensor::new([1f32, 2., 3., 4.]).unwrap();
    let rev = a.slice(0, Some(1), None, 1).unwrap(); // [2, 3, 4]
    let head = a.narrow(0, 0, 3).unwrap(); // [1, 2, 3]
    head.add_(&rev).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![3., 5., 7., 4.]);
    a.mul_(&a).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![9., 25., 49., 16.]);
}

#[test]
fn deep_clone_does_not_share() {
    let a = t2x3();
    let b = a.deep_clone().unwrap();
    assert!(!b.same_storage(&a));
    b.fill_(0).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![0., 1., 2., 3., 4., 5.]);
}

#[test]
fn view_follows_pytorch_stride_rules() {
    let a = Tensor::zeros([2, 3, 4], DType::F32).unwrap();
    // merging dims that are contiguous with each other works even on a permuted tensor
    let p = a.permute(&[1, 2, 0]).unwrap(); // [3, 4, 2], strides [4, 1, 12]
    assert_eq!(p.view([12, 2]).unwrap().stride(), &[1, 12]);
    let e = p.view([24]).err().unwrap();
    assert!(e.message().contains("view size is not compatible"), "{e}");
    // reshape copies when a view is impossible
    let r = p.reshape([24]).unwrap();
    assert!(!r.same_storage(&a));
    assert!(a.reshape([6, 4]).unwrap().same_storage(&a));
    let e = a.view([5, -1]).err().unwrap();
    assert_eq!(e.message(), "shape '[5, -1]' is invalid for input of size 24");
}

#[test]
fn expanded_tensors_cannot_be_written_in_place() {
    let a = Tensor::new([1f32, 2.]).unwrap().expand([3, 2]).unwrap();
    assert_eq!(a.stride(), &[0, 1]);
    let e = a.add_scalar_(1).err().unwrap();
    assert!(e.message().contains("more than one element of the written-to tensor"), "{e}");
}

#[test]
fn bad_input_returns_errors_not_panics() {
    let a = t2x3();
    let cases: Vec<(Result<Tensor>, ErrorKind)> = vec![
        (a.add(&Tensor::zeros([4], DType::F32).unwrap()), ErrorKind::Shape),
        (a.sum_dim_err_probe(), ErrorKind::Index),
        (a.select(0, 2), ErrorKind::Index),
        (a.narrow(1, 2, 2), ErrorKind::Index),
        (a.permute(&[0]), ErrorKind::Shape),
        (a.transpose(0, 2), ErrorKind::Index),
        (a.view([7]), ErrorKind::Shape),
        (Tensor::from_vec(vec![1f32, 2.], [3]), ErrorKind::Shape),
        (Tensor::new(vec![vec![1f32], vec![2., 3.]]), ErrorKind::Value),
        (a.to_device(Device::Cuda(0)), ErrorKind::Device),
        (Tensor::new([true]).unwrap().neg(), ErrorKind::DType),
        (
            Tensor::new([1i64])
                .unwrap()
                .div_mode(&Tensor::new([0i64]).unwrap(), pyrite_core::RoundingMode::Floor),
            ErrorKind::Value,
        ),
        (
            Tensor::new([1i64, 2]).unwrap().add_(&Tensor::new([0.5f32, 1.]).unwrap()).cloned(),
            ErrorKind::DType,
        ),
        (a.clamp(None, None), ErrorKind::Value),
        (Tensor::arange(0.0, 1.0, 0.0, DType::F32), ErrorKind::Value),
    ];
    for (i, (r, kind)) in cases.into_iter().enumerate() {
        match r {
            Ok(t) => panic!("case {i}: expected an error, got a tensor of shape {:?}", t.dims()),
            Err(e) => assert_eq!(e.kind(), kind, "case {i}: {e}"),
        }
    }
    assert!(a
        .item::<f32>()
        .err()
        .unwrap()
        .message()
        .contains("a Tensor with 6 elements cannot be converted to Scalar"));
    assert!(a.to_vec::<i64>().is_err());
    assert!(a.size(2).is_err());
}

trait Probe {
    fn sum_dim_err_probe(&self) -> Result<Tensor>;
}
impl Probe for Tensor {
    /// A dim out of range, through the shared `wrap_dim` every op uses.
    fn sum_dim_err_probe(&self) -> Result<Tensor> {
        self.unsqueeze(5)
    }
}

#[test]
fn dimension_errors_read_like_pytorch() {
    let e = t2x3().transpose(0, 2).err().unwrap();
    assert_eq!(e.message(), "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
    let e = t2x3().add(&Tensor::zeros([4], DType::F32).unwrap()).err().unwrap();
    assert_eq!(
        e.message(),
        "add: The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
    );
}

#[test]
fn operators_chain_on_tensors_references_and_results() -> Result<()> {
    let a = Tensor::new([1f64, 2.])?;
    let b = Tensor::new([3f64, 4.])?;
    let c = Tensor::new([10f64])?;
    let r = (&a * &b + &c)?;
    assert_eq!(r.to_vec::<f64>()?, vec![13., 18.]);
    let r = ((&a - 1.0)? / 2.0 - &b)?;
    assert_eq!(r.to_vec::<f64>()?, vec![-3., -3.5]);
    let r = (-(a.clone() + b.clone())?)?;
    assert_eq!(r.to_vec::<f64>()?, vec![-4., -6.]);
    Ok(())
}

#[test]
fn type_promotion_follows_pytorch() -> Result<()> {
    let i = Tensor::new([1i64, 2])?;
    assert_eq!(i.add_scalar(1.5)?.dtype(), DType::F32); // int tensor + float scalar -> default float
    assert_eq!(i.add_scalar(1)?.dtype(), DType::I64);
    let h = Tensor::new([half::f16::from_f32(1.0)])?;
    assert_eq!(h.add_scalar(1.5)?.dtype(), DType::F16); // float tensor keeps its dtype
    assert_eq!(h.add(&Tensor::new(2.0f64)?)?.dtype(), DType::F16); // 0-d f64 does not promote
    assert_eq!(h.add(&Tensor::new([2.0f64])?)?.dtype(), DType::F64);
    assert_eq!(Tensor::new([true])?.add_scalar(1)?.dtype(), DType::I64);
    assert_eq!(i.div(&i)?.dtype(), DType::F32);
    Ok(())
}

#[test]
fn scalars_from_rust_numbers() {
    assert_eq!(Scalar::from(2), Scalar::Int(2));
    assert_eq!(Scalar::from(2.5f32), Scalar::Float(2.5));
    assert_eq!(Scalar::from(true), Scalar::Bool(true));
}

#[test]
fn nested_arrays_vecs_and_scalars_build_tensors() -> Result<()> {
    assert_eq!(Tensor::new([[1u8, 2], [3, 4], [5, 6]])?.dims(), &[3, 2]);
    assert_eq!(Tensor::new(vec![vec![vec![1i32; 4]; 3]; 2])?.dims(), &[2, 3, 4]);
    assert_eq!(Tensor::new(&[1f32, 2., 3.][..])?.dims(), &[3]);
    assert_eq!(Tensor::new(7i64)?.rank(), 0);
    assert_eq!(Tensor::new(Vec::<f32>::new())?.dims(), &[0]);
    Ok(())
}

#[test]
fn caching_allocator_reuses_freed_buffers_and_reports_stats() {
    let dev = Device::Cpu;
    let n = 1 << 20; // 4 MiB of f32
    let a = Tensor::zeros([n], DType::F32).unwrap();
    let allocated = memory::memory_allocated(dev).unwrap();
    assert!(allocated >= 4 << 20);
    drop(a);
    let after_free = memory::memory_allocated(dev).unwrap();
    let reserved = memory::memory_reserved(dev).unwrap();
    assert!(reserved >= after_free + (4 << 20), "the freed buffer stays reserved in the cache");
    let hits = memory::memory_stats(dev).unwrap()["cache_hits"];
    let b = Tensor::ones([n], DType::F32).unwrap();
    assert!(memory::memory_stats(dev).unwrap()["cache_hits"] > hits, "a same-size request reuses it");
    assert!(memory::max_memory_allocated(dev).unwrap() >= allocated);
    drop(b);
    memory::reset_peak_memory_stats(dev).unwrap();
    assert!(
        memory::max_memory_allocated(dev).unwrap() <= memory::memory_allocated(dev).unwrap() + (64 << 20)
    );
    memory::empty_cache();
    assert!(memory::memory_summary(dev).unwrap().contains("Allocated memory"));
    assert!(memory::memory_allocated(Device::Cuda(0)).is_err());
}

#[test]
fn cuda_is_named_but_unavailable() {
    assert!(!pyrite_core::cuda_is_available());
    assert_eq!(Device::parse("cuda:1").unwrap(), Device::Cuda(1));
    let e = Device::Cuda(0).check_available().err().unwrap();
    assert!(e.message().contains("no CUDA backend"), "{e}");
    assert!(Device::parse("tpu").is_err());
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let n = 300_000;
    let x = Tensor::arange(0.0, n as f64, 1.0, DType::F32).unwrap().mul_scalar(0.001).unwrap();
    let run = || x.exp().unwrap().mul(&x.sin().unwrap()).unwrap().to_vec::<f32>().unwrap();
    pyrite_core::set_num_threads(1);
    let one = run();
    pyrite_core::set_num_threads(2);
    assert_eq!(pyrite_core::get_num_threads(), 2);
    assert_eq!(run(), one);
}

#[test]
fn out_forms_write_into_existing_tensors() -> Result<()> {
    let a = Tensor::new([1f32, 2., 3.])?;
    let out = Tensor::zeros([3], DType::F32)?;
    let r = a.add_out(&a, &out)?;
    assert!(r.same_storage(&out));
    assert_eq!(out.to_vec::<f32>()?, vec![2., 4., 6.]);
    a.exp_out(&out)?;
    assert!((out.to_vec::<f32>()?[0] - std::f32::consts::E).abs() < 1e-6);
    assert!(a.add_out(&a, &Tensor::zeros([4], DType::F32)?).is_err());
    // an int out cannot hold a float result
    assert!(a.add_out(&a, &Tensor::zeros([3], DType::I64)?).is_err());
    // a wider out receives the cast result
    let o64 = Tensor::zeros([3], DType::F64)?;
    a.mul_out(&a, &o64)?;
    assert_eq!(o64.to_vec::<f64>()?, vec![1., 4., 9.]);
    Ok(())
}

/// Outputs of 32 MiB and more are written with streaming stores; they must hold exactly what
/// the ordinary path computes, at any offset (a narrowed output starts mid cache line).
#[test]
fn large_outputs_hold_the_same_values_as_small_ones() -> Result<()> {
    let n = 9 << 20; // 36 MiB of f32
    let a = Tensor::randn([n], DType::F32)?;
    let b = Tensor::randn([n], DType::F32)?;
    let check = |big: &Tensor, f: &dyn Fn(&Tensor, &Tensor) -> Result<Tensor>| -> Result<()> {
        // The same op on 1000-element pieces stays on the ordinary path.
        for start in [0usize, 3, n / 2 + 5, n - 1000] {
            let small = f(&a.narrow(0, start as isize, 1000)?, &b.narrow(0, start as isize, 1000)?)?;
            let (got, want) = (big.narrow(0, start as isize, 1000)?.to_vec::<f32>()?, small.to_vec::<f32>()?);
            let differ = got.iter().zip(&want).filter(|(g, w)| g.to_bits() != w.to_bits()).count();
            assert_eq!(differ, 0, "{differ} of 1000 elements differ from offset {start}");
        }
        Ok(())
    };
    check(&a.add(&b)?, &|x, y| x.add(y))?;
    check(&a.mul_scalar(3.0)?, &|x, _| x.mul_scalar(3.0))?;
    check(&a.exp()?, &|x, _| x.exp())?;
    let out = Tensor::zeros([n + 1], DType::F32)?;
    let out = out.narrow(0, 1, n)?; // starts 4 bytes into a cache line
    a.mul_out(&b, &out)?;
    check(&out, &|x, y| x.mul(y))?;
    a.exp_out(&out)?;
    check(&out, &|x, _| x.exp())?;
    Ok(())
}
