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
    assert_eq!(Device::parse("cuda:1").unwrap(), Device::Cuda(1));
    if pyrite_core::cuda_is_available() {
        return; // a GPU machine: pyrite-cuda's tests cover the device
    }
    let e = Device::Cuda(0).check_available().err().unwrap();
    // Without the `cuda` feature the build has no backend; with it, this machine has no driver.
    let m = e.message();
    assert!(
        m.contains("no CUDA backend") || m.contains("NVIDIA driver") || m.contains("no CUDA-capable device"),
        "{e}"
    );
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

/// Every `out=` form writes exactly what its op returns into the given tensor, and returns a
/// handle to it (PyTorch: `torch.sum(x, 1, out=o) is o`).
#[test]
fn every_out_form_writes_what_its_op_returns() -> Result<()> {
    let x = Tensor::new([[3f32, -1., 2.5], [0., 7., -4.]])?;
    let y = Tensor::new([[1f32, -1., 3.], [0., 8., -5.]])?;
    let v = Tensor::new([1f32, 2., 3.])?;
    let idx = Tensor::new([[1i64, 0, 1]])?;
    let cond = x.gt(&y)?;
    type Case<'a> =
        (&'a str, Box<dyn Fn(&Tensor) -> Result<Tensor> + 'a>, Box<dyn Fn() -> Result<Tensor> + 'a>);
    let cases: Vec<Case> = vec![
        ("sum", Box::new(|o| x.sum_dims_out(&[1], false, o)), Box::new(|| x.sum_dims(&[1], false))),
        ("nansum", Box::new(|o| x.nansum_dims_out(&[0], true, o)), Box::new(|| x.nansum_dims(&[0], true))),
        ("mean", Box::new(|o| x.mean_dims_out(&[-1], true, o)), Box::new(|| x.mean_dims(&[-1], true))),
        (
            "nanmean",
            Box::new(|o| x.nanmean_dims_out(&[0], false, o)),
            Box::new(|| x.nanmean_dims(&[0], false)),
        ),
        ("prod", Box::new(|o| x.prod_dims_out(&[0], false, o)), Box::new(|| x.prod_dims(&[0], false))),
        ("amax", Box::new(|o| x.amax_out(&[1], false, o)), Box::new(|| x.amax(&[1], false))),
        ("amin", Box::new(|o| x.amin_out(&[], false, o)), Box::new(|| x.amin(&[], false))),
        ("logsumexp", Box::new(|o| x.logsumexp_out(&[1], false, o)), Box::new(|| x.logsumexp(&[1], false))),
        ("all", Box::new(|o| x.all_dims_out(&[1], false, o)), Box::new(|| x.all_dims(&[1], false))),
        ("any", Box::new(|o| x.any_dims_out(&[0], false, o)), Box::new(|| x.any_dims(&[0], false))),
        ("var", Box::new(|o| x.var_dims_out(&[1], 1.0, false, o)), Box::new(|| x.var_dims(&[1], 1.0, false))),
        ("std", Box::new(|o| x.std_dims_out(&[0], 0.0, true, o)), Box::new(|| x.std_dims(&[0], 0.0, true))),
        ("norm", Box::new(|o| x.norm_out(3.0, &[1], false, o)), Box::new(|| x.norm(3.0, &[1], false))),
        ("argmax", Box::new(|o| x.argmax_out(Some(1), false, o)), Box::new(|| x.argmax(Some(1), false))),
        ("argmin", Box::new(|o| x.argmin_out(None, false, o)), Box::new(|| x.argmin(None, false))),
        ("cumsum", Box::new(|o| x.cumsum_out(1, o)), Box::new(|| x.cumsum(1))),
        ("cumprod", Box::new(|o| x.cumprod_out(0, o)), Box::new(|| x.cumprod(0))),
        ("softmax", Box::new(|o| x.softmax_out(1, o)), Box::new(|| x.softmax(1))),
        ("log_softmax", Box::new(|o| x.log_softmax_out(0, o)), Box::new(|| x.log_softmax(0))),
        ("dot", Box::new(|o| v.dot_out(&v, o)), Box::new(|| v.dot(&v))),
        ("mv", Box::new(|o| x.mv_out(&v, o)), Box::new(|| x.mv(&v))),
        ("outer", Box::new(|o| v.outer_out(&v, o)), Box::new(|| v.outer(&v))),
        (
            "index_select",
            Box::new(|o| x.index_select_out(1, &idx.flatten(0, -1)?, o)),
            Box::new(|| x.index_select(1, &idx.flatten(0, -1)?)),
        ),
        ("gather", Box::new(|o| x.gather_out(0, &idx, o)), Box::new(|| x.gather(0, &idx))),
        ("cat", Box::new(|o| Tensor::cat_out(&[&x, &y], 1, o)), Box::new(|| Tensor::cat(&[&x, &y], 1))),
        ("stack", Box::new(|o| Tensor::stack_out(&[&x, &y], 0, o)), Box::new(|| Tensor::stack(&[&x, &y], 0))),
        ("eq", Box::new(|o| x.eq_out(&y, o)), Box::new(|| x.eq(&y))),
        ("ne", Box::new(|o| x.ne_out(&v, o)), Box::new(|| x.ne(&v))),
        ("lt", Box::new(|o| x.lt_out(&y, o)), Box::new(|| x.lt(&y))),
        ("le", Box::new(|o| x.le_out(&y, o)), Box::new(|| x.le(&y))),
        ("gt", Box::new(|o| x.gt_out(&y, o)), Box::new(|| x.gt(&y))),
        ("ge", Box::new(|o| x.ge_out(&y, o)), Box::new(|| x.ge(&y))),
        ("logical_and", Box::new(|o| x.logical_and_out(&y, o)), Box::new(|| x.logical_and(&y))),
        ("logical_or", Box::new(|o| x.logical_or_out(&y, o)), Box::new(|| x.logical_or(&y))),
        ("logical_xor", Box::new(|o| x.logical_xor_out(&y, o)), Box::new(|| x.logical_xor(&y))),
        ("logical_not", Box::new(|o| x.logical_not_out(o)), Box::new(|| x.logical_not())),
        ("where", Box::new(|o| x.where_out(&cond, &y, o)), Box::new(|| x.where_(&cond, &y))),
        ("abs", Box::new(|o| x.abs_out(o)), Box::new(|| x.abs())),
        ("sign", Box::new(|o| x.sign_out(o)), Box::new(|| x.sign())),
        ("floor", Box::new(|o| x.floor_out(o)), Box::new(|| x.floor())),
        ("ceil", Box::new(|o| x.ceil_out(o)), Box::new(|| x.ceil())),
        ("round", Box::new(|o| x.round_out(o)), Box::new(|| x.round())),
        ("trunc", Box::new(|o| x.trunc_out(o)), Box::new(|| x.trunc())),
        ("neg", Box::new(|o| x.neg_out(o)), Box::new(|| x.neg())),
        ("frac", Box::new(|o| x.frac_out(o)), Box::new(|| x.frac())),
        ("sigmoid", Box::new(|o| x.sigmoid_out(o)), Box::new(|| x.sigmoid())),
        ("take", Box::new(|o| x.take_out(&idx, o)), Box::new(|| x.take(&idx))),
        ("scatter", Box::new(|o| x.scatter_out(0, &idx, &y, o)), Box::new(|| x.scatter(0, &idx, &y))),
        (
            "scatter_add",
            Box::new(|o| x.scatter_add_out(1, &idx, &y, o)),
            Box::new(|| x.scatter_add(1, &idx, &y)),
        ),
        (
            "index_add",
            Box::new(|o| x.index_add_out(0, &Tensor::new([1i64, 1])?, &y, 2, o)),
            Box::new(|| x.index_add(0, &Tensor::new([1i64, 1])?, &y, 2)),
        ),
        ("lerp", Box::new(|o| x.lerp_out(&y, &x.sigmoid()?, o)), Box::new(|| x.lerp(&y, &x.sigmoid()?))),
        (
            "nan_to_num",
            Box::new(|o| x.log()?.nan_to_num_out(0.0, Some(1.0), None, o)),
            Box::new(|| x.log()?.nan_to_num(0.0, Some(1.0), None)),
        ),
        ("square", Box::new(|o| x.square_out(o)), Box::new(|| x.square())),
    ];
    for (name, out_form, op) in &cases {
        let want = op()?;
        // A transposed (non-contiguous) out of the right shape is written through its strides.
        let out = if want.rank() == 2 {
            Tensor::full([want.dims()[1], want.dims()[0]], 9, want.dtype())?.t()?
        } else {
            Tensor::full(want.shape().clone(), 9, want.dtype())?
        };
        let r = out_form(&out)?;
        assert!(r.same_storage(&out), "{name}: the result is not `out`");
        assert!(out.eq(&want)?.all()?.item::<bool>()?, "{name}: {out} != {want}");
        let wrong = Tensor::zeros([want.numel() + 1], want.dtype())?;
        assert!(out_form(&wrong).is_err(), "{name}: an out of the wrong shape was accepted");
    }
    Ok(())
}

#[test]
fn out_forms_check_grad_dtype_and_aliasing_like_pytorch() -> Result<()> {
    let x = Tensor::new([[1f32, 2.], [3., 4.]])?;
    // out= does not record: an input that requires grad is an error (PyTorch's message)
    let w = x.deep_clone()?.requires_grad_(true)?;
    let e = w.sum_dims_out(&[0], false, &Tensor::zeros([2], DType::F32)?).unwrap_err();
    assert!(e.message().contains("functions with out=... arguments don't support automatic differentiation"));
    assert!(x.eq_out(&w, &Tensor::zeros([2, 2], DType::Bool)?).is_err());
    // results cast into wider outs, never from float to int; indices must be int64
    let o64 = Tensor::zeros([2], DType::F64)?;
    x.sum_dims_out(&[0], false, &o64)?;
    assert_eq!(o64.to_vec::<f64>()?, vec![4., 6.]);
    assert!(x.sum_dims_out(&[0], false, &Tensor::zeros([2], DType::I64)?).is_err());
    assert!(x.argmax_out(Some(0), false, &Tensor::zeros([2], DType::I32)?).is_err());
    // f32 softmax over the last dim is written straight into a contiguous out
    let s = Tensor::randn([3, 37], DType::F32)?;
    for log in [false, true] {
        let o = Tensor::full([3, 37], 7, DType::F32)?;
        let v0 = o.version();
        let want = if log { s.log_softmax(-1)? } else { s.softmax(1)? };
        let r = if log { s.log_softmax_out(1, &o)? } else { s.softmax_out(-1, &o)? };
        assert!(r.same_storage(&o) && o.version() > v0);
        assert!(o.eq(&want)?.all()?.item::<bool>()?);
    }
    // as in PyTorch, softmax and amax want their exact dtype; cumsum and cat cast
    assert!(x.softmax_out(1, &Tensor::zeros([2, 2], DType::F64)?).is_err());
    assert!(x.amax_out(&[0], false, &o64).is_err());
    x.cumsum_out(0, &Tensor::zeros([2, 2], DType::F64)?)?;
    Tensor::cat_out(&[&x], 0, &Tensor::zeros([2, 2], DType::F64)?)?;
    // an out that is also the input: computed first, then written
    let c = x.deep_clone()?;
    c.cumsum_out(1, &c)?;
    assert_eq!(c.to_vec2::<f32>()?, vec![vec![1., 3.], vec![3., 7.]]);
    let m = x.deep_clone()?;
    m.t()?.abs_out(&m)?; // reads through another layout of the same storage
    assert_eq!(m.to_vec2::<f32>()?, vec![vec![1., 3.], vec![2., 4.]]);
    // two outputs: values and indices, which must not share memory
    let (vals, inds) = (Tensor::zeros([2], DType::F32)?, Tensor::zeros([2], DType::I64)?);
    x.max_dim_out(1, false, &vals, &inds)?;
    assert_eq!((vals.to_vec::<f32>()?, inds.to_vec::<i64>()?), (vec![2., 4.], vec![1, 1]));
    let (vals, inds) = (Tensor::zeros([2, 1], DType::F32)?, Tensor::zeros([2, 1], DType::I64)?);
    x.topk_out(1, 1, false, true, &vals, &inds)?;
    assert_eq!((vals.to_vec::<f32>()?, inds.to_vec::<i64>()?), (vec![1., 3.], vec![0, 0]));
    let (vals, inds) = (Tensor::zeros([2, 2], DType::F32)?, Tensor::zeros([2, 2], DType::I64)?);
    x.neg()?.sort_out(1, false, &vals, &inds)?;
    assert_eq!(inds.to_vec2::<i64>()?, vec![vec![1, 0], vec![1, 0]]);
    x.min_dim_out(0, true, &vals.narrow(0, 0, 1)?, &inds.narrow(0, 0, 1)?)?;
    assert_eq!(vals.to_vec2::<f32>()?[0], vec![1., 2.]);
    let (vals, inds) = (Tensor::zeros([2, 2], DType::F32)?, Tensor::zeros([2, 2], DType::I64)?);
    x.neg()?.cummax_out(1, &vals, &inds)?;
    assert_eq!(
        (vals.to_vec2::<f32>()?, inds.to_vec2::<i64>()?),
        x.neg()?.cummax(1).map(|(v, i)| (v.to_vec2().unwrap(), i.to_vec2().unwrap()))?
    );
    x.cummin_out(0, &vals, &inds)?;
    assert_eq!(vals.to_vec2::<f32>()?, vec![vec![1., 2.], vec![1., 2.]]);
    let (vals, inds) = (Tensor::zeros([2], DType::F32)?, Tensor::zeros([2], DType::I64)?);
    x.kthvalue_out(2, 1, false, &vals, &inds)?;
    assert_eq!((vals.to_vec::<f32>()?, inds.to_vec::<i64>()?), (vec![2., 4.], vec![1, 1]));
    let shared = Tensor::zeros([2], DType::I64)?;
    assert!(x.max_dim_out(1, false, &shared, &shared).is_err());
    Ok(())
}

/// Two threads, each writing into the tensor the other reads from (PyTorch leaves such races to
/// the user; Pyrite's storage locks make them safe, and must never deadlock: every op that
/// holds two locks takes them in the same global order).
#[test]
fn threads_writing_into_each_others_sources_never_deadlock() {
    let a = Tensor::randn([64, 64], DType::F32).unwrap();
    let b = Tensor::randn([64, 64], DType::F32).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    for (x, y) in [(a.clone(), b.clone()), (b, a)] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let idx = Tensor::new([0i64, 5, 9]).unwrap();
            let rows = Tensor::new([[0i64; 64], [1; 64]]).unwrap();
            for _ in 0..3000 {
                x.index_add_(0, &idx, &y.narrow(0, 0, 3).unwrap(), 0.0).unwrap();
                x.scatter_(0, &rows, &y).unwrap();
                x.index_put_(&[Some(idx.clone())], &y.narrow(0, 0, 3).unwrap(), false).unwrap();
                y.exp_out(&x).unwrap();
                y.softmax_out(1, &x).unwrap();
                x.copy_(&y).unwrap();
                // readers of both, racing the other thread's writes
                Tensor::cat(&[&y, &x, &y], 0).unwrap();
                y.add(&x).unwrap();
            }
            tx.send(()).unwrap();
        });
    }
    for _ in 0..2 {
        rx.recv_timeout(std::time::Duration::from_secs(120)).expect("the two threads deadlocked");
    }
}

/// Conveniences PyTorch code uses everywhere: `new_*`, `*_as`, a number on the left of an
/// operator, in-place ops with `alpha`.
#[test]
fn pytorch_conveniences_port_literally() {
    let x = Tensor::new([[1f64, 2.], [3., 4.]]).unwrap();
    let z = x.new_zeros([3]).unwrap();
    assert_eq!((z.dims(), z.dtype()), (&[3usize][..], DType::F64));
    assert_eq!(x.new_ones([1]).unwrap().to_vec::<f64>().unwrap(), vec![1.0]);
    assert_eq!(x.new_full([2], -1).unwrap().to_vec::<f64>().unwrap(), vec![-1.0, -1.0]);
    assert_eq!(x.new_empty([0, 2]).unwrap().dims(), &[0, 2]);

    let flat = Tensor::arange(0.0, 4.0, 1.0, DType::F32).unwrap();
    assert_eq!(flat.view_as(&x).unwrap().dims(), &[2, 2]);
    assert_eq!(flat.reshape_as(&x).unwrap().dims(), &[2, 2]);
    assert_eq!(flat.type_as(&x).unwrap().dtype(), DType::F64);

    // 2.0 * x, 1.0 - x, 1.0 / x, 3.0 + x
    assert_eq!((2.0 * &x).unwrap().to_vec2::<f64>().unwrap(), vec![vec![2., 4.], vec![6., 8.]]);
    assert_eq!((1.0 - &x).unwrap().to_vec::<f64>().unwrap(), vec![0., -1., -2., -3.]);
    assert_eq!((1.0 / x.clone()).unwrap().to_vec::<f64>().unwrap(), vec![1., 0.5, 1. / 3., 0.25]);
    assert_eq!((3.0 + &x).unwrap().to_vec::<f64>().unwrap(), vec![4., 5., 6., 7.]);

    // x.add_(y, alpha=2), x.sub_(y, alpha=0.5), torch.sub(x, y, alpha=3)
    let y = Tensor::ones([2, 2], DType::F64).unwrap();
    let a = x.deep_clone().unwrap();
    a.add_alpha_(&y, 2).unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap(), vec![3., 4., 5., 6.]);
    a.sub_alpha_(&y, 0.5).unwrap();
    assert_eq!(a.to_vec::<f64>().unwrap(), vec![2.5, 3.5, 4.5, 5.5]);
    assert_eq!(x.sub_alpha(&y, 3).unwrap().to_vec::<f64>().unwrap(), vec![-2., -1., 0., 1.]);
}
