//! CUDA tensors behave as CPU tensors: every op with a CUDA kernel gives the CPU's values
//! (the CPU ops are checked against PyTorch elsewhere), autograd runs on the device, memory is
//! accounted, and ops without a CUDA kernel are errors, not panics.
//!
//! Runs on the emulated device (host memory, kernels built by the host C++ compiler: see
//! pyrite-cuda-runtime's `emulator`), so `cargo test` checks the whole CUDA dispatch on any
//! machine; `scripts/gpu_check.sh` runs the same tests on a real GPU
//! (`PYRITE_CUDA_TEST_ON_GPU=1`).

use pyrite_core::{memory, DType, Device, ErrorKind, Result, Tensor};

const CUDA: Device = Device::Cuda(0);

/// The device, and a lock that makes the tests take turns: the memory counters are per device.
fn device() -> Option<(Device, std::sync::MutexGuard<'static, ()>)> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if std::env::var("PYRITE_CUDA_TEST_ON_GPU").as_deref() != Ok("1") {
        assert!(pyrite_cuda_runtime::emulator::enable(), "the emulated CUDA device could not be turned on");
    }
    if pyrite_core::cuda_is_available() {
        Some((CUDA, SERIAL.lock().unwrap_or_else(|e| e.into_inner())))
    } else {
        eprintln!("SKIPPED: no CUDA device");
        None
    }
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_device(Device::Cpu).unwrap().to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn assert_close(got: &Tensor, want: &Tensor, rtol: f64, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    for (i, (g, w)) in f64s(got).into_iter().zip(f64s(want)).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rtol * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: cuda {g}, cpu {w}");
    }
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    let g = pyrite_core::Generator::new(seed);
    Tensor::randn_with(shape.to_vec(), DType::F32, Some(&g)).unwrap()
}

#[test]
fn tensors_round_trip_between_host_and_device_in_every_dtype() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    for &dt in &DType::ALL {
        let x = randn(&[3, 4], 1).mul_scalar(3.0)?.to_dtype(dt)?;
        // A transposed (non-contiguous) view goes up as its values.
        let xt = x.transpose(0, 1)?;
        let d = xt.to_device(dev)?;
        assert_eq!(d.device(), dev);
        assert_eq!(d.dims(), &[4, 3]);
        let back = d.to_device(Device::Cpu)?;
        assert_eq!(back.to_raw_bytes()?, xt.contiguous()?.to_raw_bytes()?, "{dt}");
        // Reading values goes through the host.
        assert_eq!(d.to_raw_bytes()?, xt.contiguous()?.to_raw_bytes()?);
    }
    assert_eq!(Tensor::new([2.5f32])?.to_device(dev)?.item::<f64>()?, 2.5);
    let z = Tensor::zeros_on([2, 3], DType::I64, dev)?;
    assert_eq!(z.to_vec::<i64>()?, vec![0; 6]);
    assert_eq!(
        Tensor::full_on([2], 1.5, DType::BF16, dev)?.to_dtype(DType::F32)?.to_vec::<f32>()?,
        vec![1.5; 2]
    );
    assert_eq!(z.zeros_like()?.device(), dev, "_like follows the device");
    Ok(())
}

#[test]
fn arithmetic_and_comparisons_match_the_cpu_with_broadcasting_promotion_and_cpu_scalars() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let a = randn(&[4, 5], 2);
    let b = randn(&[5], 3);
    let i = Tensor::arange(-3.0, 2.0, 1.0, DType::I64)?; // [5], integers
    let (da, db, di) = (a.to_device(dev)?, b.to_device(dev)?, i.to_device(dev)?);
    type Bin = fn(&Tensor, &Tensor) -> Result<Tensor>;
    let ops: &[(&str, Bin)] = &[
        ("add", Tensor::add),
        ("sub", Tensor::sub),
        ("mul", Tensor::mul),
        ("div", Tensor::div),
        ("pow", Tensor::pow),
        ("maximum", Tensor::maximum),
        ("remainder", Tensor::remainder),
        ("atan2", Tensor::atan2),
        ("lt", Tensor::lt),
        ("eq", Tensor::eq),
    ];
    for (name, f) in ops {
        assert_close(&f(&da, &db)?, &f(&a, &b)?, 1e-5, name);
        // float [4, 5] with int64 [5]: promotes to float32.
        assert_close(&f(&da, &di)?, &f(&a, &i)?, 1e-5, &format!("{name} f32 with i64"));
        // Transposed operands.
        assert_close(&f(&da.transpose(0, 1)?, &da.transpose(0, 1)?)?, &f(&a.t()?, &a.t()?)?, 1e-5, name);
    }
    // int64 true division gives float32; floor division stays integer.
    assert_close(&di.div(&di.add_scalar(10)?)?, &i.div(&i.add_scalar(10)?)?, 1e-6, "int div");
    assert_close(&di.floor_divide_scalar(2)?, &i.floor_divide_scalar(2)?, 0.0, "int floor_divide");
    // CPU scalars join CUDA tensors, on either side.
    assert_close(&da.mul_scalar(2.5)?, &a.mul_scalar(2.5)?, 0.0, "mul_scalar");
    assert_close(&da.rsub_scalar(1.0)?, &a.rsub_scalar(1.0)?, 0.0, "rsub_scalar");
    assert_close(&da.gt_scalar(0.0)?, &a.gt_scalar(0.0)?, 0.0, "gt_scalar");
    // In place, through a view.
    let dc = da.deep_clone()?;
    dc.narrow(0, 1, 2)?.add_(&db)?;
    let c = a.deep_clone()?;
    c.narrow(0, 1, 2)?.add_(&b)?;
    assert_close(&dc, &c, 1e-6, "add_ on a view");
    // A CUDA tensor and a CPU tensor that is not a scalar do not mix.
    let e = da.add(&b).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Device);
    assert!(e.to_string().contains("Expected all tensors to be on the same device"), "{e}");
    Ok(())
}

#[test]
fn unary_ops_and_casts_match_the_cpu() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let x = randn(&[6, 7], 4);
    let dx = x.to_device(dev)?;
    type Un = fn(&Tensor) -> Result<Tensor>;
    let ops: &[(&str, Un)] = &[
        ("exp", Tensor::exp),
        ("tanh", Tensor::tanh),
        ("sigmoid", Tensor::sigmoid),
        ("sin", Tensor::sin),
        ("erf", Tensor::erf),
        ("silu", Tensor::silu),
        ("abs", Tensor::abs),
        ("neg", Tensor::neg),
        ("relu", Tensor::relu),
    ];
    for (name, f) in ops {
        assert_close(&f(&dx)?, &f(&x)?, 2e-6, name);
        assert_close(&f(&dx.t()?)?, &f(&x.t()?)?, 2e-6, name);
    }
    // erfinv (which the host C++ library lacks: the emulator brings its own) on (-1, 1), its
    // ends and outside, in float32 and float64.
    let u = Tensor::new([-1.5f64, -1., -0.999, -0.5, -1e-9, 0., 0.3, 0.9, 0.99999, 1.])?;
    for dt in [DType::F32, DType::F64] {
        let u = u.to_dtype(dt)?;
        let tol = if dt == DType::F64 { 1e-13 } else { 2e-6 };
        assert_close(&u.to_device(dev)?.erfinv()?, &u.erfinv()?, tol, &format!("erfinv {dt}"));
    }
    let i = Tensor::arange(0.0, 5.0, 1.0, DType::I64)?;
    assert_close(&i.to_device(dev)?.exp()?, &i.exp()?, 1e-6, "exp of int64 promotes");
    for &dt in &DType::ALL {
        assert_close(
            &dx.mul_scalar(4.0)?.to_dtype(dt)?,
            &x.mul_scalar(4.0)?.to_dtype(dt)?,
            0.0,
            &format!("to {dt}"),
        );
    }
    Ok(())
}

#[test]
fn reductions_and_softmax_match_the_cpu() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let x = randn(&[3, 50, 7], 5);
    let dx = x.to_device(dev)?;
    assert_close(&dx.sum_dims(&[1], false)?, &x.sum_dims(&[1], false)?, 1e-5, "sum over 1");
    assert_close(&dx.sum_dims(&[0, 2], true)?, &x.sum_dims(&[0, 2], true)?, 1e-5, "sum over 0, 2");
    assert_close(&dx.sum()?, &x.sum()?, 1e-5, "sum");
    assert_close(&dx.mean_dims(&[-1], false)?, &x.mean_dims(&[-1], false)?, 1e-5, "mean");
    assert_close(&dx.amax(&[1], false)?, &x.amax(&[1], false)?, 0.0, "amax");
    assert_close(&dx.argmax(Some(1), false)?, &x.argmax(Some(1), false)?, 0.0, "argmax");
    let (v, i) = dx.max_dim(2, true)?;
    let (cv, ci) = x.max_dim(2, true)?;
    assert_close(&v, &cv, 0.0, "max values");
    assert_close(&i, &ci, 0.0, "max indices");
    let b = x.gt_scalar(0.0)?;
    assert_close(&b.to_device(dev)?.sum()?, &b.sum()?, 0.0, "sum of bool is int64");
    assert_close(&dx.softmax(-1)?, &x.softmax(-1)?, 1e-6, "softmax");
    assert_close(&dx.log_softmax(1)?, &x.log_softmax(1)?, 1e-5, "log_softmax over a middle dim");
    Ok(())
}

#[test]
fn matrix_products_match_the_cpu_in_every_layout() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let a = randn(&[2, 19, 23], 20);
    let b = randn(&[2, 23, 17], 21);
    let (da, db) = (a.to_device(dev)?, b.to_device(dev)?);
    assert_close(&da.bmm(&db)?, &a.bmm(&b)?, 1e-5, "bmm");
    // Transposed operands, as backward passes make them.
    let (at, bt) = (
        a.transpose(1, 2)?.contiguous()?.transpose(1, 2)?,
        b.transpose(1, 2)?.contiguous()?.transpose(1, 2)?,
    );
    assert_close(
        &at.to_device(dev)?.bmm(&bt.to_device(dev)?)?,
        &a.bmm(&b)?,
        1e-5,
        "bmm of transposed layouts",
    );
    let x = randn(&[7, 23], 22);
    let w = randn(&[5, 23], 23);
    let bias = randn(&[5], 24);
    let got = x.to_device(dev)?.linear(&w.to_device(dev)?, Some(&bias.to_device(dev)?))?;
    assert_close(&got, &x.linear(&w, Some(&bias))?, 1e-5, "linear");
    assert_close(
        &da.matmul(&db.narrow(0, 0, 1)?)?,
        &a.matmul(&b.narrow(0, 0, 1)?)?,
        1e-5,
        "broadcast matmul",
    );
    // Several batch dims, broadcast against three (attention's [batch, heads, rows, cols]),
    // with a transposed right operand and a bias.
    let (q, k) = (randn(&[2, 1, 4, 8], 25), randn(&[3, 5, 8], 26));
    let kt = k.transpose(-2, -1)?;
    let (dq, dkt) = (q.to_device(dev)?, kt.to_device(dev)?);
    assert_close(&dq.matmul(&dkt)?, &q.matmul(&kt)?, 1e-5, "4-D matmul");
    let c = randn(&[2, 3, 4, 5], 27);
    let got = c.to_device(dev)?.baddbmm(&dq.expand([2, 3, 4, 8])?, &dkt.expand([2, 3, 8, 5])?, 0.5, 2.0);
    // baddbmm wants 3-D operands on both devices.
    assert_eq!(
        got.is_err(),
        c.baddbmm(&q.expand([2, 3, 4, 8])?, &kt.expand([2, 3, 8, 5])?, 0.5, 2.0).is_err()
    );
    for dt in [DType::F64, DType::BF16, DType::F16] {
        let (a2, b2) = (a.to_dtype(dt)?, b.to_dtype(dt)?);
        let tol = if dt == DType::F64 { 1e-12 } else { 2e-2 };
        assert_close(&a2.to_device(dev)?.bmm(&b2.to_device(dev)?)?, &a2.bmm(&b2)?, tol, &format!("bmm {dt}"));
    }
    let e = Tensor::ones_on([2, 2], DType::I64, dev)?
        .matmul(&Tensor::ones_on([2, 2], DType::I64, dev)?)
        .unwrap_err();
    assert!(e.to_string().contains("\"addmm_cuda\" not implemented for 'Long'"), "{e}");
    Ok(())
}

#[test]
fn indexing_matches_the_cpu_values_and_gradients() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let x = randn(&[4, 6], 30);
    let dx = x.to_device(dev)?;
    let idx = Tensor::new([[0i64, 5, 2], [1, 1, 4], [3, 0, 0], [5, 2, 1]])?;
    assert_close(&dx.gather(1, &idx.to_device(dev)?)?, &x.gather(1, &idx)?, 0.0, "gather");
    // The index may stay on the host.
    assert_close(&dx.gather(1, &idx)?, &x.gather(1, &idx)?, 0.0, "gather with a host index");
    let sel = Tensor::new([3i64, 0, 3, 1])?;
    assert_close(&dx.index_select(0, &sel)?, &x.index_select(0, &sel)?, 0.0, "index_select");
    assert_close(
        &dx.t()?.index_select(1, &sel)?,
        &x.t()?.index_select(1, &sel)?,
        0.0,
        "index_select of a view",
    );
    let src = randn(&[4, 3], 31);
    assert_close(
        &dx.scatter_add(1, &idx.to_device(dev)?, &src.to_device(dev)?)?,
        &x.scatter_add(1, &idx, &src)?,
        1e-6,
        "scatter_add with repeated indices",
    );
    // Half precisions add in float32 on the device, rounded once (the CPU rounds each add).
    for dt in [DType::F16, DType::BF16] {
        let (h, hs) = (x.to_dtype(dt)?, src.to_dtype(dt)?);
        let got = h.to_device(dev)?.scatter_add(1, &idx.to_device(dev)?, &hs.to_device(dev)?)?;
        assert_close(&got, &h.scatter_add(1, &idx, &hs)?, 1e-2, &format!("scatter_add {dt}"));
    }
    let rows = randn(&[4, 6], 32);
    assert_close(
        &dx.index_add(0, &sel, &rows.to_device(dev)?, 2.0)?,
        &x.index_add(0, &sel, &rows, 2.0)?,
        1e-6,
        "index_add",
    );
    // Backward of gather and index_select: scatter_add and index_add into zeros on the device.
    let grads = |d: Device| -> Result<Tensor> {
        let w = x.to_device(d)?.requires_grad_(true)?;
        w.gather(1, &idx.to_device(d)?)?
            .sum()?
            .add(&w.index_select(0, &sel.to_device(d)?)?.square()?.sum()?)?
            .backward()?;
        Ok(w.grad().unwrap())
    };
    assert_close(&grads(dev)?, &grads(Device::Cpu)?, 1e-5, "gradients");
    // index_put: two index tensors, a broadcast value, repeated positions accumulated, a
    // non-contiguous destination, and a boolean mask; the gradient of the values too.
    let (r, c) = (Tensor::new([0i64, 2, 2, 3])?, Tensor::new([1i64, 4, 4, 0])?);
    let vals = randn(&[4], 33);
    for accumulate in [false, true] {
        let idx = [Some(r.clone()), Some(c.clone())];
        let idx_d = [Some(r.to_device(dev)?), Some(c.to_device(dev)?)];
        let v = if accumulate { vals.clone() } else { Tensor::new([1f32, 2., 2., 3.])? };
        let got = dx.index_put(&idx_d, &v.to_device(dev)?, accumulate)?;
        assert_close(&got, &x.index_put(&idx, &v, accumulate)?, 1e-6, &format!("index_put {accumulate}"));
    }
    let both = [Some(r.to_device(dev)?), Some(c.to_device(dev)?)];
    assert_close(
        &dx.index_tensor(&both)?,
        &x.index_tensor(&[Some(r.clone()), Some(c.clone())])?,
        0.0,
        "x[r, c]",
    );
    let xt = x.transpose(0, 1)?; // [6, 4], not contiguous
    let (rt, ct) = (Tensor::new([5i64, 1])?, Tensor::new([3i64, 0])?);
    assert_close(
        &xt.to_device(dev)?.index_tensor(&[Some(rt.clone()), Some(ct.clone())])?,
        &xt.index_tensor(&[Some(rt), Some(ct)])?,
        0.0,
        "x.t()[r, c]",
    );
    let rows_idx = [Some(Tensor::new([5i64, 0])?)];
    let row = Tensor::new([7f32, 8., 9., 10.])?;
    let got = xt.to_device(dev)?.index_put(
        &[Some(Tensor::new([5i64, 0])?.to_device(dev)?)],
        &row.to_device(dev)?,
        false,
    )?;
    assert_close(&got, &xt.index_put(&rows_idx, &row, false)?, 0.0, "index_put into a transposed view");
    let mask = x.gt_scalar(0.5)?;
    let got = dx.index_put(&[Some(mask.to_device(dev)?)], &Tensor::new(-1f32)?.to_device(dev)?, false)?;
    assert_close(&got, &x.index_put(&[Some(mask)], &Tensor::new(-1f32)?, false)?, 0.0, "index_put by mask");
    let vgrad = |d: Device| -> Result<Tensor> {
        let v = vals.to_device(d)?.requires_grad_(true)?;
        let idx = [Some(r.to_device(d)?), Some(c.to_device(d)?)];
        x.to_device(d)?.index_put(&idx, &v, true)?.square()?.sum()?.backward()?;
        Ok(v.grad().unwrap())
    };
    assert_close(&vgrad(dev)?, &vgrad(Device::Cpu)?, 1e-5, "index_put: the values' gradient");
    // take and masked_select, with their gradients.
    let flat_idx = Tensor::new([[0i64, -1], [7, 7]])?;
    let m = Tensor::new([true, false, true, true, false, false])?; // broadcast over the rows
                                                                   // (From a detached copy: `x.to_device(Cpu)` is `x` itself, which `grads` above made
                                                                   // require grad.)
    let picks = |d: Device| -> Result<(Tensor, Tensor, Tensor)> {
        let w = x.detach().to_device(d)?.requires_grad_(true)?;
        let a = w.take(&flat_idx.to_device(d)?)?;
        let b = w.masked_select(&m.to_device(d)?)?;
        a.square()?.sum()?.add(&b.mul_scalar(3.0)?.sum()?)?.backward()?;
        Ok((a, b, w.grad().expect("a gradient")))
    };
    let (g, c) = (picks(dev)?, picks(Device::Cpu)?);
    assert_close(&g.0, &c.0, 0.0, "take");
    assert_close(&g.1, &c.1, 0.0, "masked_select");
    assert_close(&g.2, &c.2, 1e-6, "take and masked_select: gradients");
    let cols = Tensor::new([4i64, -1, 0])?;
    let filled = |d: Device| -> Result<(Tensor, Tensor)> {
        let w = x.detach().to_device(d)?.requires_grad_(true)?;
        let y = w.index_fill(1, &cols.to_device(d)?, -2.5)?;
        y.mul_scalar(3.0)?.sum()?.backward()?;
        Ok((y, w.grad().expect("a gradient")))
    };
    let (fg, fc) = (filled(dev)?, filled(Device::Cpu)?);
    assert_close(&fg.0, &fc.0, 0.0, "index_fill");
    assert_close(&fg.1, &fc.1, 0.0, "index_fill: gradient");
    Ok(())
}

#[test]
fn cat_stack_where_and_random_fills_match_the_cpu() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let a = randn(&[2, 3], 40);
    let b = Tensor::arange(0.0, 9.0, 1.0, DType::I64)?.reshape([3, 3])?;
    let (da, db) = (a.to_device(dev)?, b.to_device(dev)?);
    assert_close(&Tensor::cat(&[&da, &db], 0)?, &Tensor::cat(&[&a, &b], 0)?, 0.0, "cat promotes");
    assert_close(
        &Tensor::cat(&[&da.t()?, &da.t()?], 1)?,
        &Tensor::cat(&[&a.t()?, &a.t()?], 1)?,
        0.0,
        "cat of views",
    );
    assert_close(&Tensor::stack(&[&da, &da], 1)?, &Tensor::stack(&[&a, &a], 1)?, 0.0, "stack");
    let c = a.gt_scalar(0.0)?;
    let y = randn(&[2, 3], 41);
    assert_close(&da.where_(&c.to_device(dev)?, &y.to_device(dev)?)?, &a.where_(&c, &y)?, 0.0, "where");
    // A seeded generator gives the CPU's values on the device.
    let (g1, g2) = (pyrite_core::Generator::new(5), pyrite_core::Generator::new(5));
    let host = Tensor::zeros([4, 5], DType::F32)?;
    host.uniform_(-1.0, 1.0, Some(&g1))?;
    let on_dev = Tensor::zeros_on([4, 5], DType::F32, dev)?;
    on_dev.uniform_(-1.0, 1.0, Some(&g2))?;
    assert_close(&on_dev, &host, 0.0, "uniform_");
    Ok(())
}

#[test]
fn gradients_flow_on_the_device_and_back_to_host_leaves() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let run = |device: Device| -> Result<(Tensor, Tensor)> {
        let w = randn(&[4, 3], 6).requires_grad_(true)?;
        let x = randn(&[5, 3], 7).to_device(device)?;
        // A leaf on the host, used on the device: its gradient comes back through to_device.
        let wd = w.to_device(device)?;
        let h = x.unsqueeze(1)?.mul(&wd.unsqueeze(0)?)?.sum_dims(&[2], false)?; // [5, 4]
        let h = h.add(&x.matmul(&wd.t()?)?)?; // and through a matrix product
        let y = h.tanh()?.mul_scalar(2.0)?.add(&h.exp()?.mul_scalar(0.1)?)?;
        let loss = y.softmax(1)?.mul(&y)?.mean()?;
        loss.backward()?;
        Ok((loss.to_device(Device::Cpu)?, w.grad().expect("a gradient for w")))
    };
    let (l_cpu, g_cpu) = run(Device::Cpu)?;
    let (l_gpu, g_gpu) = run(dev)?;
    assert_close(&l_gpu, &l_cpu, 1e-5, "loss");
    assert_eq!(g_gpu.device(), Device::Cpu);
    assert_close(&g_gpu, &g_cpu, 1e-4, "grad");
    Ok(())
}

#[test]
fn device_memory_is_accounted_and_out_of_memory_is_an_error() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let before = memory::memory_allocated(dev)?;
    let t = Tensor::zeros_on([1000, 1000], DType::F32, dev)?;
    assert_eq!(memory::memory_allocated(dev)? - before, 4_000_256, "rounded to 512 bytes as PyTorch");
    assert!(memory::memory_reserved(dev)? >= memory::memory_allocated(dev)?);
    assert!(memory::memory_summary(dev)?.contains("cuda:0"));
    drop(t);
    assert_eq!(memory::memory_allocated(dev)?, before);
    memory::set_memory_limit(Some(memory::memory_reserved(dev)? + (64 << 20)), dev)?;
    let e = Tensor::zeros_on([256 << 20], DType::F32, dev).unwrap_err();
    memory::set_memory_limit(None, dev)?;
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert!(e.to_string().contains("CUDA out of memory. Tried to allocate 1024.00 MiB"), "{e}");
    assert!(memory::memory_stats(dev)?["num_ooms"] >= 1);
    Ok(())
}

#[test]
fn ops_without_a_cuda_kernel_are_errors_and_printing_works() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let x = randn(&[3, 3], 8).to_device(dev)?;
    let e = x.unique(true, false, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotImplemented, "{e}");
    assert!(e.to_string().contains("'CUDA' backend"), "{e}");
    let s = format!("{}", Tensor::new([1.5f32, -2.0])?.to_device(dev)?);
    assert_eq!(s, "tensor([ 1.5000, -2.0000], device='cuda:0')");
    Ok(())
}

#[test]
fn composed_reductions_scans_flips_and_triangles_match_the_cpu() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    let x = randn(&[3, 5, 4], 20);
    // A NaN and an infinity to skip or keep, in a copy.
    let xn = x.deep_clone()?;
    xn.narrow(1, 2, 1)?.narrow(2, 1, 1)?.fill_(f64::NAN)?;
    xn.narrow(0, 1, 1)?.narrow(1, 0, 1)?.narrow(2, 3, 1)?.fill_(f64::INFINITY)?;
    let (d, dn) = (x.to_device(dev)?, xn.to_device(dev)?);
    for dims in [&[][..], &[1], &[0, 2]] {
        let w = format!("over {dims:?}");
        assert_close(
            &d.var_dims(dims, 1.0, false)?,
            &x.var_dims(dims, 1.0, false)?,
            1e-5,
            &format!("var {w}"),
        );
        let (s, m) = d.std_mean(dims, 0.0, true)?;
        let (cs, cm) = x.std_mean(dims, 0.0, true)?;
        assert_close(&s, &cs, 1e-5, &format!("std {w}"));
        assert_close(&m, &cm, 1e-5, &format!("mean of std_mean {w}"));
        for ord in [0.0, 1.0, 2.0, 3.0, f64::INFINITY, f64::NEG_INFINITY] {
            assert_close(
                &d.norm(ord, dims, false)?,
                &x.norm(ord, dims, false)?,
                1e-5,
                &format!("norm {ord} {w}"),
            );
        }
        assert_close(&d.logsumexp(dims, true)?, &x.logsumexp(dims, true)?, 1e-5, &format!("logsumexp {w}"));
        assert_close(
            &dn.nansum_dims(dims, false)?,
            &xn.nansum_dims(dims, false)?,
            1e-5,
            &format!("nansum {w}"),
        );
        assert_close(
            &dn.nanmean_dims(dims, false)?,
            &xn.nanmean_dims(dims, false)?,
            1e-5,
            &format!("nanmean {w}"),
        );
        assert_close(
            &d.gt_scalar(0.0)?.count_nonzero(dims)?,
            &x.gt_scalar(0.0)?.count_nonzero(dims)?,
            0.0,
            &w,
        );
    }
    let pos = x.gt_scalar(-1.0)?;
    for dims in [&[][..], &[1], &[0, 2]] {
        let dp = pos.to_device(dev)?;
        assert_close(&dp.all_dims(dims, false)?, &pos.all_dims(dims, false)?, 0.0, &format!("all {dims:?}"));
        assert_close(&dp.any_dims(dims, true)?, &pos.any_dims(dims, true)?, 0.0, &format!("any {dims:?}"));
    }
    assert_close(
        &pos.to_dtype(DType::U8)?.to_device(dev)?.all()?,
        &pos.to_dtype(DType::U8)?.all()?,
        0.0,
        "all of u8",
    );
    // Rows of -inf give -inf; the gradient of var reaches the device input.
    let ninf = Tensor::full([2, 3], f64::NEG_INFINITY, DType::F32)?;
    assert_close(
        &ninf.to_device(dev)?.logsumexp(&[1], false)?,
        &ninf.logsumexp(&[1], false)?,
        0.0,
        "-inf rows",
    );
    let leaf = d.deep_clone()?.requires_grad_(true)?;
    leaf.var_dims(&[1], 1.0, false)?.sum()?.backward()?;
    let cleaf = x.deep_clone()?.requires_grad_(true)?;
    cleaf.var_dims(&[1], 1.0, false)?.sum()?.backward()?;
    assert_close(&leaf.grad().unwrap(), &cleaf.grad().unwrap(), 1e-5, "var backward");
    // Scans along every dim, in every dtype family; ties and NaN in cummax as on the CPU.
    let ints = x.mul_scalar(2.0)?.round()?.to_dtype(DType::I32)?;
    for dim in 0..3isize {
        assert_close(&d.cumsum(dim)?, &x.cumsum(dim)?, 1e-5, &format!("cumsum {dim}"));
        assert_close(&d.cumprod(dim)?, &x.cumprod(dim)?, 1e-5, &format!("cumprod {dim}"));
        assert_close(
            &ints.to_device(dev)?.cumsum(dim)?,
            &ints.cumsum(dim)?,
            0.0,
            &format!("int cumsum {dim}"),
        );
        for (name, (gv, gi), (cv, ci)) in [
            ("cummax", ints.to_device(dev)?.cummax(dim)?, ints.cummax(dim)?),
            ("cummin", dn.cummin(dim)?, xn.cummin(dim)?),
        ] {
            assert_close(&gv, &cv, 0.0, &format!("{name} {dim} values"));
            assert_close(&gi, &ci, 0.0, &format!("{name} {dim} indices"));
        }
    }
    // A line longer than a block's threads times one: chunks and their prefixes.
    let long = randn(&[2, 3001], 21);
    assert_close(&long.to_device(dev)?.cumsum(1)?, &long.cumsum(1)?, 1e-4, "long cumsum");
    let (gv, gi) = long.round()?.to_device(dev)?.cummax(1)?;
    let (cv, ci) = long.round()?.cummax(1)?;
    assert_close(&gv, &cv, 0.0, "long cummax");
    assert_close(&gi, &ci, 0.0, "long cummax indices");
    assert_close(&d.cumsum(1)?.sum()?.to_device(Device::Cpu)?, &x.cumsum(1)?.sum()?, 1e-5, "cumsum sum");
    // Sorts are stable (ties in index order, NaN last ascending), along any dim, with rows
    // of any length (padded to a power of two inside); topk is the sorted prefix.
    let r = x.mul_scalar(2.0)?.round()?;
    for (t, name) in [(&r, "ties"), (&xn, "NaN"), (&long, "long rows")] {
        let dt = t.to_device(dev)?;
        for dim in 0..t.rank() as isize {
            for desc in [false, true] {
                let ((gv, gi), (cv, ci)) = (dt.sort(dim, desc)?, t.sort(dim, desc)?);
                assert_close(&gv, &cv, 0.0, &format!("sort {name} {dim} {desc}"));
                assert_close(&gi, &ci, 0.0, &format!("sort indices {name} {dim} {desc}"));
            }
            let k = t.dims()[dim as usize].min(3);
            for largest in [true, false] {
                let ((gv, gi), (cv, ci)) = (dt.topk(k, dim, largest, true)?, t.topk(k, dim, largest, true)?);
                assert_close(&gv, &cv, 0.0, &format!("topk {name} {dim} {largest}"));
                assert_close(&gi, &ci, 0.0, &format!("topk indices {name} {dim} {largest}"));
            }
            for keepdim in [false, true] {
                let ((gv, gi), (cv, ci)) = (dt.kthvalue(k, dim, keepdim)?, t.kthvalue(k, dim, keepdim)?);
                assert_close(&gv, &cv, 0.0, &format!("kthvalue {name} {dim}"));
                assert_close(&gi, &ci, 0.0, &format!("kthvalue indices {name} {dim}"));
            }
        }
    }
    let s = d.deep_clone()?.requires_grad_(true)?;
    s.sort(1, true)?.0.narrow(1, 0, 2)?.sum()?.backward()?;
    let cs = x.deep_clone()?.requires_grad_(true)?;
    cs.sort(1, true)?.0.narrow(1, 0, 2)?.sum()?.backward()?;
    assert_close(&s.grad().unwrap(), &cs.grad().unwrap(), 0.0, "sort backward");
    // nonzero, flips, triangles, lerp and nan_to_num.
    let m = x.gt_scalar(0.3)?;
    assert_close(&m.to_device(dev)?.nonzero()?, &m.nonzero()?, 0.0, "nonzero");
    assert_close(
        &x.lt_scalar(-9.0)?.to_device(dev)?.nonzero()?,
        &x.lt_scalar(-9.0)?.nonzero()?,
        0.0,
        "no nonzero",
    );
    for dims in [&[0isize][..], &[1, 2], &[-1]] {
        assert_close(&d.flip(dims)?, &x.flip(dims)?, 0.0, &format!("flip {dims:?}"));
        let v = x.transpose(0, 2)?;
        assert_close(
            &d.transpose(0, 2)?.flip(dims)?,
            &v.flip(dims)?,
            0.0,
            &format!("flip of a view {dims:?}"),
        );
    }
    for k in [-1isize, 0, 2] {
        assert_close(&d.tril(k)?, &x.tril(k)?, 0.0, &format!("tril {k}"));
        assert_close(&d.triu(k)?, &x.triu(k)?, 0.0, &format!("triu {k}"));
    }
    let wgt = randn(&[5, 4], 22).sigmoid()?.mul_scalar(1.5)?;
    let y = randn(&[3, 5, 4], 23);
    assert_close(&d.lerp(&y.to_device(dev)?, &wgt.to_device(dev)?)?, &x.lerp(&y, &wgt)?, 1e-6, "lerp");
    for dt in [DType::F32, DType::F16] {
        let v = xn.to_dtype(dt)?;
        let vd = v.to_device(dev)?;
        assert_close(&vd.nan_to_num(0.0, None, None)?, &v.nan_to_num(0.0, None, None)?, 0.0, "nan_to_num");
        assert_close(
            &vd.nan_to_num(1.0, Some(2.0), Some(-3.0))?,
            &v.nan_to_num(1.0, Some(2.0), Some(-3.0))?,
            0.0,
            "nan_to_num",
        );
    }
    Ok(())
}

/// `f` on CPU leaves and on their CUDA copies: the values and every input's gradient agree.
fn same_with_grads(
    what: &str,
    ins: &[&Tensor],
    rtol: f64,
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
) -> Result<()> {
    let dev = CUDA;
    let cpu: Vec<Tensor> = ins.iter().map(|t| t.deep_clone()?.requires_grad_(true)).collect::<Result<_>>()?;
    let gpu: Vec<Tensor> =
        ins.iter().map(|t| t.to_device(dev)?.requires_grad_(true)).collect::<Result<_>>()?;
    let (yc, yg) = (f(&cpu)?, f(&gpu)?);
    assert_eq!(yg.device(), dev, "{what}: left the device");
    assert_close(&yg, &yc, rtol, what);
    // A fixed, non-uniform output gradient.
    let w = randn(yc.dims(), 99);
    yc.mul(&w)?.sum()?.backward()?;
    yg.mul(&w.to_device(dev)?)?.sum()?.backward()?;
    for (k, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
        assert_close(&g.grad().unwrap(), &c.grad().unwrap(), rtol, &format!("{what}: gradient of input {k}"));
    }
    Ok(())
}

#[test]
fn convolutions_and_pooling_match_the_cpu_with_gradients() -> Result<()> {
    let Some((_dev, _serial)) = device() else { return Ok(()) };
    use pyrite_core::ops::conv::{conv, conv_transpose};
    use pyrite_core::ops::pool::{adaptive_avg_pool, adaptive_max_pool, avg_pool, max_pool};
    // (input, weight, stride, padding, dilation, groups): 1-d, 2-d and 3-d, strided, padded,
    // dilated, grouped.
    type Case<'a> = (&'a [usize], &'a [usize], &'a [usize], &'a [usize], &'a [usize], usize);
    let cases: &[Case] = &[
        (&[2, 3, 11], &[4, 3, 3], &[2], &[1], &[1], 1),
        (&[2, 4, 7, 6], &[6, 2, 3, 3], &[1, 2], &[1, 0], &[2, 1], 2),
        (&[1, 2, 5, 5], &[3, 2, 1, 1], &[1], &[0], &[1], 1),
        (&[1, 2, 4, 5, 3], &[2, 2, 2, 3, 2], &[1], &[1], &[1], 1),
    ];
    for (i, &(xs, ws, st, pd, dl, gr)) in cases.iter().enumerate() {
        let (x, w, b) = (randn(xs, 30 + i as u64), randn(ws, 40 + i as u64), randn(&[ws[0]], 50 + i as u64));
        same_with_grads(&format!("conv case {i}"), &[&x, &w, &b], 1e-4, |t| {
            conv(&t[0], &t[1], Some(&t[2]), st, pd, dl, gr)
        })?;
        // The transposed convolution maps the output shape back: run it on a conv output.
        let y = conv(&x, &w, None, st, pd, dl, gr)?;
        let wt = randn(&[ws[0], ws[1], ws[2..].iter().product::<usize>()], 60 + i as u64).reshape(
            std::iter::once(ws[0])
                .chain(std::iter::once(ws[1]))
                .chain(ws[2..].iter().copied())
                .collect::<Vec<_>>(),
        )?;
        same_with_grads(&format!("conv_transpose case {i}"), &[&y, &wt], 1e-4, |t| {
            conv_transpose(&t[0], &t[1], None, st, pd, &[0], dl, gr)
        })?;
    }
    // Half precision runs natively (cuBLAS computes in f32).
    let (x, w) = (randn(&[2, 3, 6, 6], 70), randn(&[4, 3, 3, 3], 71));
    let want = conv(&x, &w, None, &[1], &[1], &[1], 1)?;
    let got = conv(
        &x.to_dtype(DType::BF16)?.to_device(CUDA)?,
        &w.to_dtype(DType::BF16)?.to_device(CUDA)?,
        None,
        &[1],
        &[1],
        &[1],
        1,
    )?;
    assert_eq!(got.dtype(), DType::BF16);
    assert_close(&got.to_dtype(DType::F32)?, &want, 3e-2, "bf16 conv");
    // Pooling: fixed windows with stride, padding, dilation and ceil_mode; adaptive windows.
    let x = randn(&[2, 3, 9, 8], 72);
    same_with_grads("max_pool", &[&x], 1e-6, |t| {
        Ok(max_pool(&t[0], &[3, 2], &[2, 2], &[1, 1], &[1, 2], true)?.0)
    })?;
    let (_, ci) = max_pool(&x, &[2], &[], &[0], &[1], false)?;
    let (_, gi) = max_pool(&x.to_device(CUDA)?, &[2], &[], &[0], &[1], false)?;
    assert_close(&gi, &ci, 0.0, "max_pool indices");
    same_with_grads("avg_pool", &[&x], 1e-5, |t| {
        avg_pool(&t[0], &[3, 3], &[2, 1], &[1, 1], true, true, None)
    })?;
    same_with_grads("avg_pool without padding counts", &[&x], 1e-5, |t| {
        avg_pool(&t[0], &[3, 2], &[2, 2], &[1, 1], false, false, None)
    })?;
    same_with_grads("avg_pool divisor", &[&x], 1e-5, |t| {
        avg_pool(&t[0], &[2, 2], &[], &[0], false, true, Some(3))
    })?;
    same_with_grads("adaptive_avg_pool", &[&x], 1e-5, |t| adaptive_avg_pool(&t[0], &[4, 3]))?;
    same_with_grads("adaptive_max_pool", &[&x], 1e-6, |t| Ok(adaptive_max_pool(&t[0], &[2, 5])?.0))?;
    let x1 = randn(&[2, 2, 13], 73);
    same_with_grads("max_pool1d", &[&x1], 1e-6, |t| Ok(max_pool(&t[0], &[3], &[2], &[1], &[1], false)?.0))?;
    // max_unpool puts the maxima back (overlapping windows write one of their equal values).
    use pyrite_core::ops::pool::max_unpool;
    let (v, i) = max_pool(&x, &[2, 2], &[], &[0], &[1], false)?;
    let (gv, gi) = (v.to_device(CUDA)?, i.to_device(CUDA)?);
    assert_close(&max_unpool(&gv, &gi, &[9, 8])?, &max_unpool(&v, &i, &[9, 8])?, 0.0, "max_unpool");
    same_with_grads("max_unpool", &[&v], 0.0, |t| {
        let i = if t[0].device().is_cuda() { gi.clone() } else { i.clone() };
        max_unpool(&t[0], &i, &[9, 8])
    })?;
    let bad = i.mul_scalar(100)?.to_device(CUDA)?;
    let e = max_unpool(&gv, &bad, &[9, 8]).unwrap_err();
    assert!(e.to_string().contains("Found an invalid max index"), "{e}");
    // scatter_ writes (a tensor source and a value).
    let idx = Tensor::new([[2i64, 0, 1], [0, 2, 1]])?;
    let src = randn(&[2, 3], 75);
    let (t, g) = (Tensor::zeros([3, 3], DType::F32)?, Tensor::zeros_on([3, 3], DType::F32, CUDA)?);
    t.scatter_(0, &idx, &src)?;
    g.scatter_(0, &idx.to_device(CUDA)?, &src.to_device(CUDA)?)?;
    assert_close(&g, &t, 0.0, "scatter_");
    t.scatter_value_(1, &idx, 7.5)?;
    g.scatter_value_(1, &idx.to_device(CUDA)?, 7.5)?;
    assert_close(&g, &t, 0.0, "scatter_value_");
    let x3 = randn(&[1, 2, 4, 5, 6], 74);
    same_with_grads("avg_pool3d", &[&x3], 1e-5, |t| avg_pool(&t[0], &[2], &[], &[0], false, true, None))?;
    Ok(())
}

#[test]
fn random_fills_on_the_device_draw_the_cpus_stream() -> Result<()> {
    let Some((dev, _serial)) = device() else { return Ok(()) };
    type Fill = fn(&Tensor, &pyrite_core::Generator) -> Result<()>;
    let fills: &[(&str, Fill, &[DType], f64)] = &[
        (
            "uniform_",
            |t, g| t.uniform_(-2.0, 3.0, Some(g)).map(|_| ()),
            &[DType::F32, DType::F64, DType::F16, DType::BF16],
            0.0,
        ),
        (
            "normal_",
            |t, g| t.normal_(1.0, 2.0, Some(g)).map(|_| ()),
            &[DType::F32, DType::F64, DType::BF16],
            1e-5,
        ),
        (
            "bernoulli_",
            |t, g| t.bernoulli_(0.3, Some(g)).map(|_| ()),
            &[DType::F32, DType::Bool, DType::I64],
            0.0,
        ),
        (
            "random_ small",
            |t, g| t.random_(-5, Some(7), Some(g)).map(|_| ()),
            &[DType::I64, DType::I32, DType::F32],
            0.0,
        ),
        ("random_ 64-bit", |t, g| t.random_(i64::MIN, None, Some(g)).map(|_| ()), &[DType::I64], 0.0),
    ];
    for (name, fill, dtypes, rtol) in fills {
        for &dt in *dtypes {
            let (gc, gd) = (pyrite_core::Generator::new(11), pyrite_core::Generator::new(11));
            // 1001 elements: a last block only partly used; a transposed view too.
            let (c, d) = (Tensor::zeros([7, 143], dt)?, Tensor::zeros_on([7, 143], dt, dev)?);
            fill(&c, &gc)?;
            fill(&d, &gd)?;
            assert_close(&d, &c, *rtol, &format!("{name} {dt}"));
            assert_eq!(gc.get_offset(), gd.get_offset(), "{name}: the same blocks were used");
            let (ct, dtt) = (Tensor::zeros([5, 6], dt)?.t()?, Tensor::zeros_on([5, 6], dt, dev)?.t()?);
            fill(&ct, &gc)?;
            fill(&dtt, &gd)?;
            assert_close(&dtt, &ct, *rtol, &format!("{name} {dt} transposed"));
        }
    }
    // Dropout's mask and rand_like follow the global generator the same way.
    pyrite_core::manual_seed(5);
    let c = Tensor::zeros([64], DType::F32)?.rand_like()?;
    pyrite_core::manual_seed(5);
    let d = Tensor::zeros_on([64], DType::F32, dev)?.rand_like()?;
    assert_close(&d, &c, 0.0, "rand_like");
    Ok(())
}

#[test]
fn every_op_on_cuda_tensors_returns_a_result_without_panicking() {
    let Some((dev, _serial)) = device() else { return };
    let x = randn(&[3, 4], 9).to_device(dev).unwrap();
    let y = randn(&[3, 4], 10).to_device(dev).unwrap();
    let m = randn(&[4, 2], 11).to_device(dev).unwrap();
    let idx = Tensor::new([0i64, 2, 1]).unwrap().to_device(dev).unwrap();
    let mask = x.gt_scalar(0.0).unwrap();
    let img = randn(&[1, 2, 5, 5], 12).to_device(dev).unwrap();
    let wconv = randn(&[3, 2, 3, 3], 13).to_device(dev).unwrap();
    type Op<'a> = (&'a str, Box<dyn Fn() -> Result<Tensor> + 'a>);
    let ops: Vec<Op> = vec![
        ("matmul", Box::new(|| x.matmul(&m))),
        ("bmm", Box::new(|| x.unsqueeze(0)?.bmm(&m.unsqueeze(0)?))),
        ("linear", Box::new(|| x.linear(&m.t()?, None))),
        ("cumsum", Box::new(|| x.cumsum(1))),
        ("sort", Box::new(|| Ok(x.sort(1, false)?.0))),
        ("topk", Box::new(|| Ok(x.topk(2, 1, true, true)?.0))),
        ("index_select", Box::new(|| x.index_select(0, &idx))),
        ("gather", Box::new(|| x.gather(1, &idx.unsqueeze(1)?.expand([3, 4])?.contiguous()?))),
        ("scatter_add", Box::new(|| x.scatter_add(0, &idx.unsqueeze(1)?.expand([3, 4])?.contiguous()?, &y))),
        ("cat", Box::new(|| Tensor::cat(&[&x, &y], 0))),
        ("stack", Box::new(|| Tensor::stack(&[&x, &y], 0))),
        ("flip", Box::new(|| x.flip(&[0]))),
        ("roll", Box::new(|| x.roll(&[1], &[1]))),
        ("repeat", Box::new(|| x.repeat(&[2, 1]))),
        ("tril", Box::new(|| x.tril(0))),
        ("where", Box::new(|| x.where_(&mask, &y))),
        ("masked_fill", Box::new(|| x.masked_fill(&mask, 0.0))),
        ("clamp", Box::new(|| x.clamp(Some((-0.5).into()), Some(0.5.into())))),
        ("clamp_", Box::new(|| Ok(x.deep_clone()?.clamp_(Some(0.0.into()), None)?.clone()))),
        ("fill_", Box::new(|| Ok(x.deep_clone()?.fill_(3.0)?.clone()))),
        ("zero_", Box::new(|| Ok(x.deep_clone()?.zero_()?.clone()))),
        ("uniform_", Box::new(|| Ok(x.deep_clone()?.uniform_(0.0, 1.0, None)?.clone()))),
        ("normal_", Box::new(|| Ok(x.deep_clone()?.normal_(0.0, 1.0, None)?.clone()))),
        ("rand_like", Box::new(|| x.rand_like())),
        ("dropout-like mask", Box::new(|| x.rand_like()?.lt_scalar(0.5))),
        ("var", Box::new(|| x.var())),
        ("std", Box::new(|| x.std())),
        ("norm", Box::new(|| x.norm(2.0, &[1], false))),
        ("logsumexp", Box::new(|| x.logsumexp(&[1], false))),
        ("all", Box::new(|| mask.all())),
        ("any", Box::new(|| mask.any())),
        ("nonzero", Box::new(|| mask.nonzero())),
        ("nansum", Box::new(|| x.nansum())),
        ("prod", Box::new(|| x.prod())),
        ("max", Box::new(|| x.max())),
        ("min", Box::new(|| x.min())),
        ("square", Box::new(|| x.square())),
        ("softplus", Box::new(|| x.softplus(1.0, 20.0))),
        ("lerp", Box::new(|| x.lerp(&y, &y))),
        ("nan_to_num", Box::new(|| x.nan_to_num(0.0, None, None))),
        ("one_hot", Box::new(|| idx.one_hot(Some(3)))),
        ("isnan", Box::new(|| x.isnan())),
        ("logical_not", Box::new(|| mask.logical_not())),
        ("mish", Box::new(|| x.mish())),
        ("gelu", Box::new(|| x.gelu(false))),
        ("gelu tanh", Box::new(|| x.gelu(true))),
        ("chunk", Box::new(|| Ok(x.chunk(2, 1)?.remove(0)))),
        ("unbind", Box::new(|| Ok(x.unbind(0)?.remove(0)))),
        (
            "conv2d",
            Box::new(|| pyrite_core::ops::conv::conv(&img, &wconv, None, &[1, 1], &[1, 1], &[1, 1], 1)),
        ),
        (
            "max_pool2d",
            Box::new(|| {
                Ok(pyrite_core::ops::pool::max_pool(&img, &[2, 2], &[2, 2], &[0, 0], &[1, 1], false)?.0)
            }),
        ),
        (
            "avg_pool2d",
            Box::new(|| pyrite_core::ops::pool::avg_pool(&img, &[2, 2], &[2, 2], &[0, 0], false, true, None)),
        ),
        (
            "layer_norm",
            Box::new(|| {
                Ok(pyrite_core::ops::norm::fused_layer_norm(&x, 4, None, None, 1e-5)?.unwrap_or(x.clone()))
            }),
        ),
        (
            "embedding-like",
            Box::new(|| m.t()?.contiguous()?.index_select(0, &idx.clamp(None, Some(1.into()))?)),
        ),
        ("pow_scalar", Box::new(|| x.pow_scalar(2.0))),
        ("contiguous of a view", Box::new(|| x.t()?.contiguous())),
        ("reshape of a view", Box::new(|| x.t()?.reshape([12]))),
        ("dtype round trip", Box::new(|| x.to_dtype(DType::F16)?.to_dtype(DType::F32))),
        ("einsum", Box::new(|| pyrite_core::einsum("ij,jk->ik", &[&x, &m]))),
        ("x[r, c]", Box::new(|| x.index_tensor(&[Some(idx.clone()), Some(idx.clone())]))),
        (
            "index_put",
            Box::new(|| {
                x.index_put(
                    &[Some(idx.clone()), Some(idx.clone())],
                    &y.flatten(0, -1)?.narrow(0, 0, 3)?,
                    true,
                )
            }),
        ),
        ("unique", Box::new(|| Ok(idx.unique(true, false, false)?.0))),
        (
            "scatter_reduce amax",
            Box::new(|| {
                x.scatter_reduce(0, &idx.unsqueeze(1)?.expand([3, 4])?.contiguous()?, &y, "amax", true)
            }),
        ),
        ("kthvalue", Box::new(|| Ok(x.kthvalue(2, 1, false)?.0))),
        ("masked_select", Box::new(|| x.masked_select(&mask))),
        ("cummax", Box::new(|| Ok(x.cummax(1)?.0))),
        ("argsort", Box::new(|| x.argsort(1, false))),
        ("repeat_interleave", Box::new(|| x.repeat_interleave(2, Some(0)))),
        ("index_fill", Box::new(|| x.index_fill(0, &idx, 1.0))),
        ("masked_scatter", Box::new(|| x.masked_scatter(&mask, &y))),
        ("outer", Box::new(|| x.flatten(0, -1)?.outer(&y.flatten(0, -1)?))),
        ("searchsorted", Box::new(|| x.sort(1, false)?.0.searchsorted(&y, false, false, None))),
        ("take", Box::new(|| x.take(&idx))),
        ("triu", Box::new(|| x.triu(0))),
        (
            "display",
            Box::new(|| {
                let text = format!("{x} {x:?}");
                assert!(!text.is_empty());
                Ok(x.clone())
            }),
        ),
    ];
    let (mut no_kernel, mut problems) = (Vec::new(), Vec::new());
    for (name, f) in &ops {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Err(_) => problems.push(format!("{name} panicked")),
            Ok(Ok(t)) if t.device() != dev => problems.push(format!("{name} left the device")),
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == ErrorKind::NotImplemented => no_kernel.push(*name),
            Ok(Err(e)) => problems.push(format!("{name}: only a missing kernel may fail here, got {e}")),
        }
    }
    eprintln!("ops without a CUDA kernel yet: {no_kernel:?}");
    assert!(problems.is_empty(), "on CUDA tensors:\n{}", problems.join("\n"));
}
