//! Training on a CUDA device gives the CPU's losses and weights: an MLP with cross-entropy,
//! trained by SGD with momentum and by Adam, and a CNN (convolution, batch norm, max pooling),
//! from the same initial weights. Runs on the
//! emulated device (pyrite-cuda-runtime's `emulator`), or on a real GPU with
//! `PYRITE_CUDA_TEST_ON_GPU=1` (`scripts/gpu_check.sh`).

use pyrite::nn::functional as F;
use pyrite::nn::{
    BatchNorm2d, Conv2d, ConvOptions, Flatten, Linear, MaxPool2d, Module, PoolOptions, ReLU, Sequential,
};
use pyrite::optim::{
    ASGDOptions, Adadelta, AdadeltaOptions, Adagrad, AdagradOptions, Adam, AdamOptions, Adamax,
    AdamaxOptions, NAdam, NAdamOptions, Optimizer, RAdam, RAdamOptions, RMSprop, RMSpropOptions, Rprop,
    RpropOptions, SGDOptions, ASGD, SGD,
};
use pyrite::{DType, Device, Result, Tensor};

fn device() -> Option<Device> {
    if std::env::var("PYRITE_CUDA_TEST_ON_GPU").as_deref() != Ok("1") {
        assert!(pyrite_cuda_runtime::emulator::enable());
    }
    if pyrite::cuda_is_available() {
        Some(Device::Cuda(0))
    } else {
        eprintln!("SKIPPED: no CUDA device");
        None
    }
}

fn mlp() -> Result<Sequential> {
    pyrite::manual_seed(0);
    Ok(Sequential::new().append(Linear::new(20, 32)?).append(ReLU::new()).append(Linear::new(32, 5)?))
}

fn cnn() -> Result<Sequential> {
    pyrite::manual_seed(0);
    Ok(Sequential::new()
        .append(Conv2d::new(1, 4, 3, ConvOptions::new().padding(1))?)
        .append(BatchNorm2d::new(4)?)
        .append(ReLU::new())
        .append(MaxPool2d::new(2, PoolOptions::new()))
        .append(Flatten::new())
        .append(Linear::new(4 * 4 * 4, 5)?))
}

/// Losses of `steps` steps and the final weights (on the host): the MLP on `[16, 20]` inputs,
/// or the CNN on `[16, 1, 8, 8]` images.
fn train(device: Device, adam: bool, steps: usize, conv: bool) -> Result<(Vec<f32>, Vec<Tensor>)> {
    let mut model = if conv { cnn()? } else { mlp()? };
    model.to_device(device)?;
    let mut opt: Box<dyn Optimizer> = if adam {
        Box::new(Adam::new(model.parameters(), AdamOptions { lr: 1e-2, ..Default::default() })?)
    } else {
        Box::new(SGD::new(model.parameters(), SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() })?)
    };
    let g = pyrite::Generator::new(1);
    let shape = if conv { vec![16, 1, 8, 8] } else { vec![16, 20] };
    let x = Tensor::randn_with(shape, DType::F32, Some(&g))?.to_device(device)?;
    let y = Tensor::randint(0, 5, [16], DType::I64)?.to_device(device)?;
    let mut losses = Vec::new();
    for _ in 0..steps {
        opt.zero_grad()?;
        let loss = F::cross_entropy(&model.call(&x)?, &y, &Default::default())?;
        loss.backward()?;
        opt.step()?;
        losses.push(loss.item::<f32>()?);
    }
    let weights = model.parameters().iter().map(|p| p.to_device(Device::Cpu)).collect::<Result<_>>()?;
    Ok((losses, weights))
}

/// The tests on the device take turns: the runs draw from the global generator, and the
/// profiler and memory history see the work of every thread.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn check(adam: bool, conv: bool) -> Result<()> {
    let _serial = serial();
    let Some(dev) = device() else { return Ok(()) };
    pyrite::manual_seed(7);
    let (l_cpu, w_cpu) = train(Device::Cpu, adam, 4, conv)?;
    pyrite::manual_seed(7);
    let (l_gpu, w_gpu) = train(dev, adam, 4, conv)?;
    for (a, b) in l_gpu.iter().zip(&l_cpu) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "losses: cuda {l_gpu:?}, cpu {l_cpu:?}");
    }
    assert!(l_cpu[3] < l_cpu[0], "it learns: {l_cpu:?}");
    for (a, b) in w_gpu.iter().zip(&w_cpu) {
        let d = a.sub(b)?.abs()?.amax(&[], false)?.item::<f32>()?;
        assert!(d < 1e-4, "weights differ by {d}");
    }
    Ok(())
}

#[test]
fn sgd_with_momentum_trains_an_mlp_on_cuda_as_on_the_cpu() -> Result<()> {
    check(false, false)
}

#[test]
fn adam_trains_an_mlp_on_cuda_as_on_the_cpu() -> Result<()> {
    check(true, false)
}

#[test]
fn a_cnn_with_batch_norm_and_pooling_trains_on_cuda_as_on_the_cpu() -> Result<()> {
    // SGD: the convolution's bias before batch norm has a gradient of rounding noise only,
    // which Adam would scale up to full steps of either sign.
    check(false, true)
}

#[test]
fn cuda_tensors_save_with_their_location_and_load_back_or_mapped() -> Result<()> {
    let _serial = serial();
    let Some(dev) = device() else { return Ok(()) };
    let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?.to_device(dev)?;
    let dir = std::env::temp_dir().join(format!("pyrite-cuda-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    pyrite::serialization::safetensors::save_file([("w", &t.t()?)], dir.join("w.safetensors"), None)?;
    let back = pyrite::serialization::safetensors::load_file(dir.join("w.safetensors"))?;
    assert_eq!(back[0].1.to_vec::<f32>()?, t.t()?.to_device(Device::Cpu)?.contiguous()?.to_vec::<f32>()?);
    // A .pt file records the device: loading puts the tensors back there (two views of one
    // storage share it again), or where map_location says.
    let obj = pyrite::serialization::Object::List(vec![t.clone().into(), t.narrow(1, 1, 2)?.into()]);
    pyrite::save(&obj, dir.join("w.pt"))?;
    let back = pyrite::load(dir.join("w.pt"))?;
    let pyrite::serialization::Object::List(items) = back else { panic!("a list") };
    let (a, b) = (Tensor::try_from(items[0].clone())?, Tensor::try_from(items[1].clone())?);
    assert_eq!((a.device(), a.to_vec::<f32>()?), (dev, vec![0., 1., 2., 3., 4., 5.]));
    assert!(a.untyped_storage().is_same(&b.untyped_storage()), "the views share one storage");
    assert_eq!(b.to_vec::<f32>()?, vec![1., 2., 4., 5.]);
    let opts = pyrite::serialization::LoadOptions { map_location: Some(Device::Cpu), ..Default::default() };
    let mapped = pyrite::serialization::load_with(dir.join("w.pt"), opts)?;
    let pyrite::serialization::Object::List(items) = mapped else { panic!("a list") };
    let a = Tensor::try_from(items[0].clone())?;
    assert_eq!((a.device(), a.to_vec::<f32>()?), (Device::Cpu, vec![0., 1., 2., 3., 4., 5.]));
    // And a CPU checkpoint onto the GPU.
    pyrite::save(&pyrite::serialization::Object::from(a.clone()), dir.join("c.pt"))?;
    let opts = pyrite::serialization::LoadOptions { map_location: Some(dev), ..Default::default() };
    let up = Tensor::try_from(pyrite::serialization::load_with(dir.join("c.pt"), opts)?)?;
    assert_eq!((up.device(), up.to_vec::<f32>()?), (dev, vec![0., 1., 2., 3., 4., 5.]));
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

#[test]
fn the_optimizers_cuda_updates_compile_to_ptx() {
    use pyrite_cuda_runtime::kernels::{compile_ptx, foreach::foreach, CType};
    if !pyrite_cuda_runtime::driver::nvrtc_is_available() {
        assert!(
            std::env::var("PYRITE_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "PYRITE_REQUIRE_NVRTC=1 but libnvrtc.so.12 could not be opened (LD_LIBRARY_PATH?)"
        );
        eprintln!("SKIPPED: NVRTC (libnvrtc.so.12) not found; kernels were not compiled");
        return;
    }
    let mut specs = Vec::new();
    for (k, arities) in pyrite::optim::foreach::device_kernels() {
        for &arity in arities {
            for t in [CType::F32, CType::F64] {
                specs.push(foreach(k.name, k.body, t, arity).unwrap());
            }
        }
    }
    let refs: Vec<_> = specs.iter().collect();
    let ptx = compile_ptx(&pyrite_cuda_runtime::kernels::KernelSpec::source_of_many(&refs), "compute_80")
        .unwrap_or_else(|e| panic!("{e}"));
    for k in &specs {
        assert!(ptx.contains(&format!(".entry {}(", k.name)), "{} missing from the PTX", k.name);
    }
}

#[test]
fn every_option_of_the_device_updates_matches_the_cpu() -> Result<()> {
    let _serial = serial();
    let Some(dev) = device() else { return Ok(()) };
    type Make = fn(Tensor) -> Result<Box<dyn Optimizer>>;
    let configs: &[(&str, Make)] = &[
        ("adam amsgrad, L2 decay, maximize", |p| {
            let o = AdamOptions {
                lr: 0.1,
                amsgrad: true,
                weight_decay: 0.1,
                maximize: true,
                ..Default::default()
            };
            Ok(Box::new(Adam::new(vec![p], o)?))
        }),
        ("adamw", |p| {
            Ok(Box::new(pyrite::optim::AdamW::new(vec![p], AdamOptions { lr: 0.1, ..AdamOptions::adamw() })?))
        }),
        ("sgd nesterov with decay", |p| {
            let o = SGDOptions {
                lr: 0.1,
                momentum: 0.9,
                nesterov: true,
                weight_decay: 0.01,
                ..Default::default()
            };
            Ok(Box::new(SGD::new(vec![p], o)?))
        }),
        ("sgd dampening", |p| {
            let o = SGDOptions { lr: 0.1, momentum: 0.5, dampening: 0.3, ..Default::default() };
            Ok(Box::new(SGD::new(vec![p], o)?))
        }),
        ("plain sgd", |p| Ok(Box::new(SGD::new(vec![p], SGDOptions { lr: 0.1, ..Default::default() })?))),
        ("rmsprop centered with momentum, decay, maximize", |p| {
            let o = RMSpropOptions {
                lr: 0.01,
                momentum: 0.9,
                centered: true,
                weight_decay: 0.1,
                maximize: true,
                ..Default::default()
            };
            Ok(Box::new(RMSprop::new(vec![p], o)?))
        }),
        ("rmsprop centered", |p| {
            Ok(Box::new(RMSprop::new(vec![p], RMSpropOptions { centered: true, ..Default::default() })?))
        }),
        ("rmsprop with momentum", |p| {
            Ok(Box::new(RMSprop::new(vec![p], RMSpropOptions { momentum: 0.5, ..Default::default() })?))
        }),
        ("plain rmsprop", |p| Ok(Box::new(RMSprop::new(vec![p], RMSpropOptions::default())?))),
        ("adagrad with lr decay, decay, maximize", |p| {
            let o = AdagradOptions {
                lr: 0.1,
                lr_decay: 0.01,
                weight_decay: 0.1,
                initial_accumulator_value: 0.5,
                maximize: true,
                ..Default::default()
            };
            Ok(Box::new(Adagrad::new(vec![p], o)?))
        }),
        ("adadelta with decay, maximize", |p| {
            let o = AdadeltaOptions { lr: 0.5, weight_decay: 0.1, maximize: true, ..Default::default() };
            Ok(Box::new(Adadelta::new(vec![p], o)?))
        }),
        ("adamax with decay", |p| {
            Ok(Box::new(Adamax::new(
                vec![p],
                AdamaxOptions { lr: 0.1, weight_decay: 0.1, ..Default::default() },
            )?))
        }),
        ("nadam with decoupled decay", |p| {
            let o = NAdamOptions {
                lr: 0.1,
                weight_decay: 0.1,
                decoupled_weight_decay: true,
                ..Default::default()
            };
            Ok(Box::new(NAdam::new(vec![p], o)?))
        }),
        ("nadam with L2 decay, maximize", |p| {
            let o = NAdamOptions { lr: 0.1, weight_decay: 0.1, maximize: true, ..Default::default() };
            Ok(Box::new(NAdam::new(vec![p], o)?))
        }),
        ("asgd with decay, maximize", |p| {
            let o = ASGDOptions { lr: 0.1, weight_decay: 0.1, t0: 2.0, maximize: true, ..Default::default() };
            Ok(Box::new(ASGD::new(vec![p], o)?))
        }),
        ("rprop", |p| Ok(Box::new(Rprop::new(vec![p], RpropOptions { lr: 0.1, ..Default::default() })?))),
        ("radam (rectified from step 6)", |p| {
            Ok(Box::new(RAdam::new(
                vec![p],
                RAdamOptions { lr: 0.1, weight_decay: 0.1, ..Default::default() },
            )?))
        }),
    ];
    let g = pyrite::Generator::new(3);
    let p0 = Tensor::randn_with([7, 3], DType::F64, Some(&g))?;
    let w = Tensor::randn_with([7, 3], DType::F64, Some(&g))?;
    for (name, make) in configs {
        let mut out = Vec::new();
        for d in [Device::Cpu, dev] {
            let p = p0.deep_clone()?.to_device(d)?.requires_grad_(true)?;
            let mut opt = make(p.clone())?;
            // Seven steps: RAdam rectifies from the sixth.
            for k in 0..7 {
                opt.zero_grad()?;
                p.mul(&w.to_device(d)?)?.square()?.sum()?.backward()?;
                if d.is_cuda() && k == 0 {
                    // The step runs as one device kernel, not on host copies.
                    use pyrite::profiler::{profile, EventKind, ProfileOptions, ProfilerActivity};
                    let mut prof = profile(ProfileOptions {
                        activities: vec![ProfilerActivity::CPU, ProfilerActivity::CUDA],
                        ..Default::default()
                    })?;
                    opt.step()?;
                    prof.stop()?;
                    let kernels: Vec<&str> = prof
                        .events()
                        .iter()
                        .filter(|e| e.kind == EventKind::Kernel && e.name.starts_with("foreach_"))
                        .map(|e| e.name.as_str())
                        .collect();
                    assert_eq!(kernels.len(), 1, "{name}: {kernels:?}");
                    assert!(
                        !prof.events().iter().any(|e| e.name.starts_with("Memcpy DtoH")),
                        "{name}: no host copies"
                    );
                } else {
                    opt.step()?;
                }
            }
            out.push(p.to_device(Device::Cpu)?);
        }
        let diff = out[0].sub(&out[1])?.abs()?.amax(&[], false)?.item::<f64>()?;
        assert!(diff < 1e-12, "{name}: the device update differs by {diff}");
        assert!(out[0].sub(&p0)?.abs()?.amax(&[], false)?.item::<f64>()? > 1e-3, "{name}: it moved");
    }
    Ok(())
}

#[test]
fn grid_sample_on_the_device_gives_the_cpus_values_and_gradients() -> Result<()> {
    let _serial = serial();
    let Some(dev) = device() else { return Ok(()) };
    let g = pyrite::Generator::new(5);
    let x = Tensor::randn_with([2, 3, 5, 6], DType::F64, Some(&g))?;
    // Some sample points outside [-1, 1], for the padding modes.
    let grid = Tensor::randn_with([2, 4, 4, 2], DType::F64, Some(&g))?.mul_scalar(0.8)?;
    for mode in [F::GridSampleMode::Bilinear, F::GridSampleMode::Nearest] {
        for padding_mode in
            [F::GridSamplePadding::Zeros, F::GridSamplePadding::Border, F::GridSamplePadding::Reflection]
        {
            let opts = F::GridSampleOptions { mode, padding_mode, align_corners: false };
            let mut got = Vec::new();
            for d in [Device::Cpu, dev] {
                let xd = x.to_device(d)?.detach().requires_grad_(true)?;
                let y = F::grid_sample(&xd, &grid.to_device(d)?, &opts)?;
                y.square()?.sum()?.backward()?;
                got.push((y.to_device(Device::Cpu)?, xd.grad().unwrap().to_device(Device::Cpu)?));
            }
            for (i, what) in ["values", "input gradient"].iter().enumerate() {
                let (a, b) = if i == 0 { (&got[0].0, &got[1].0) } else { (&got[0].1, &got[1].1) };
                let diff = a.sub(b)?.abs()?.amax(&[], false)?.item::<f64>()?;
                assert!(diff < 1e-12, "{mode:?} {padding_mode:?}: {what} differ by {diff}");
            }
        }
    }
    Ok(())
}

#[test]
fn pinned_memory_is_a_page_locked_copy_and_the_loader_pins_its_batches() -> Result<()> {
    use pyrite::data::{DataLoader, DataLoaderOptions, TensorDataset};
    let _serial = serial();
    let Some(dev) = device() else { return Ok(()) };
    let x = Tensor::randn([64, 3], DType::F32)?;
    let p = x.pin_memory()?;
    assert!(p.is_pinned() && !x.is_pinned());
    assert_eq!(p.to_vec2::<f32>()?, x.to_vec2::<f32>()?);
    assert_eq!(p.to_device(dev)?.to_device(Device::Cpu)?.to_vec2::<f32>()?, x.to_vec2::<f32>()?);
    // Pinning a pinned tensor is the tensor itself; a view of one is pinned too.
    assert!(p.pin_memory()?.is_same(&p) && p.narrow(0, 1, 2)?.is_pinned());
    // The memory is unregistered before the allocator hands it out again.
    drop(p);
    assert!(!Tensor::zeros([64, 3], DType::F32)?.is_pinned());
    let e = x.to_device(dev)?.pin_memory().unwrap_err();
    assert!(
        e.to_string().contains("cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned"),
        "{e}"
    );

    let ds = std::sync::Arc::new(TensorDataset::new(vec![
        x.clone(),
        Tensor::arange(0.0, 64.0, 1.0, DType::I64)?,
    ])?);
    for (pin_memory, num_workers) in [(true, 0), (true, 2), (false, 2)] {
        let opts = DataLoaderOptions { batch_size: Some(16), pin_memory, num_workers, ..Default::default() };
        let mut n = 0;
        for batch in DataLoader::new(ds.clone(), opts)?.iter()? {
            let (xb, yb): (Tensor, Tensor) = batch?.try_into()?;
            let what = format!("pin_memory={pin_memory}, {num_workers} workers");
            assert_eq!((xb.is_pinned(), yb.is_pinned()), (pin_memory, pin_memory), "{what}");
            n += 1;
        }
        assert_eq!(n, 4);
    }
    Ok(())
}

/// `profile` with `ProfilerActivity::CUDA`: each kernel and copy is recorded with its device
/// time, tied by its correlation id to the launch call, which sits inside the op that made
/// it; the op's `Self CUDA` time is its kernels' time; the table gets PyTorch's CUDA columns
/// and the Chrome trace the GPU's events and `ac2g` arrows.
#[test]
fn the_profiler_records_each_kernel_with_its_launch_inside_the_op_that_made_it() -> Result<()> {
    use pyrite::profiler::{profile, EventKind, ProfileOptions, ProfilerActivity, TableOptions};
    let _serial = serial();
    let Some(dev) = device() else { return Ok(()) };
    let x = Tensor::randn([64, 64], DType::F32)?;
    let on_device = x.to_device(dev)?;
    on_device.add(&on_device)?.relu()?; // the kernels are compiled before profiling
    let mut prof = profile(ProfileOptions {
        activities: vec![ProfilerActivity::CPU, ProfilerActivity::CUDA],
        ..Default::default()
    })?;
    let y = x.to_device(dev)?.add(&on_device)?.relu()?.to_device(Device::Cpu)?;
    prof.stop()?;
    assert_eq!(y.dims(), [64, 64]);
    let events = prof.events();
    let launch_of = |e: &pyrite::profiler::FunctionEvent| {
        events
            .iter()
            .find(|c| c.kind == EventKind::CudaRuntime && c.correlation == e.correlation)
            .expect("every piece of GPU work has its launch call")
    };
    let kernels: Vec<_> = events.iter().filter(|e| e.kind == EventKind::Kernel).collect();
    assert_eq!(kernels.len(), 2, "add and relu: {:?}", kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    for k in &kernels {
        assert_eq!((k.device, k.cpu_time_total_ns), (Some(0), 0));
        assert!(k.device_time_total_ns > 0 && k.grid > 0 && k.block > 0, "{k:?}");
        let call = launch_of(k);
        assert_eq!(call.name, "cuLaunchKernel");
        let op = events.iter().find(|e| Some(e.id) == call.parent).expect("the call is inside an op");
        assert!(op.name == "aten::add" || op.name == "aten::relu", "{}", op.name);
        assert_eq!(op.self_device_time_total_ns, k.device_time_total_ns, "{} ran one kernel", op.name);
    }
    let copies: Vec<_> = events.iter().filter(|e| e.kind == EventKind::GpuMemcpy).collect();
    assert_eq!(copies.len(), 2, "one copy there, one back: {copies:?}");
    assert!(copies[0].name.starts_with("Memcpy HtoD") && copies[1].name.starts_with("Memcpy DtoH"));
    for c in &copies {
        assert_eq!(c.bytes, 64 * 64 * 4);
        assert!(launch_of(c).name.starts_with("cuMemcpy"));
    }

    let table = prof
        .key_averages(false)
        .table(&TableOptions { sort_by: Some("self_cuda_time_total".into()), ..Default::default() })?;
    for column in ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"] {
        assert!(table.contains(column), "{table}");
    }
    // The total is the GPU work's own time (each kernel once, not again in its op).
    let gpu_us: f64 =
        events.iter().filter(|e| e.kind.on_device()).map(|e| e.device_time_total_ns as f64 / 1e3).sum();
    let footer = format!("Self CUDA time total: {}", pyrite::profiler::format_time(gpu_us));
    assert_eq!(table.trim_end().lines().last().unwrap(), footer, "{table}");

    let trace: serde_json::Value =
        serde_json::from_str(&prof.profile().expect("a trace").chrome_trace()).expect("JSON");
    let of = |cat: &str, ph: &str| {
        trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == cat && e["ph"] == ph).count()
    };
    assert_eq!(of("kernel", "X"), 2);
    assert_eq!(of("gpu_memcpy", "X"), 2);
    assert_eq!(of("cuda_runtime", "X"), 4);
    assert_eq!((of("ac2g", "s"), of("ac2g", "f")), (4, 4));
    Ok(())
}

/// Memory history covers a GPU's memory too: a training step on the device leaves its
/// parameters, gradients and optimizer state tagged and named in that device's snapshot,
/// its activations in the trace, and the CPU's snapshot holds none of it.
#[test]
fn memory_history_records_the_gpus_memory_by_category() -> Result<()> {
    use pyrite::memory::{self, Category, HistoryOptions};
    let _serial = serial();
    let Some(dev) = device() else { return Ok(()) };
    let mut model = mlp()?;
    model.to_device(dev)?;
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    memory::record_memory_history(HistoryOptions::default())?;
    let run = (|| -> Result<_> {
        let x = Tensor::randn([16, 20], DType::F32)?.to_device(dev)?;
        let y = Tensor::randint(0, 5, [16], DType::I64)?.to_device(dev)?;
        let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 1e-2, ..Default::default() })?;
        let loss = F::cross_entropy(&model.call(&x)?, &y, &Default::default())?;
        loss.backward()?;
        opt.step()?;
        Ok((memory::memory_snapshot_of(dev)?, memory::memory_snapshot()?))
    })();
    memory::record_memory_history(HistoryOptions { enabled: false, ..Default::default() })?;
    let (gpu, cpu) = run?;
    assert_eq!((gpu.device, cpu.device), (dev, Device::Cpu));
    assert!(gpu.trace.iter().all(|e| e.device == dev) && cpu.trace.iter().all(|e| e.device == Device::Cpu));
    let live = |category: Category, name: &str| {
        gpu.blocks.iter().any(|b| b.device == dev && b.category == category && &*b.name == name)
    };
    for n in &names {
        assert!(live(Category::Parameter, n), "{n} on the GPU: {:?}", gpu.blocks);
        assert!(live(Category::Gradient, &format!("{n}.grad")), "{n}.grad");
        assert!(live(Category::OptimizerState, &format!("{n}: exp_avg")), "{n}: exp_avg");
        assert!(!cpu.blocks.iter().any(|b| &*b.name == n.as_str()), "{n} is not CPU memory");
    }
    assert!(gpu.trace.iter().any(|e| e.category == Category::Activation), "activations saved for backward");
    // The device allocator's allocations and frees are in the trace, each free of a block
    // the trace saw allocated with the same size.
    let allocs: Vec<_> = gpu.trace.iter().filter(|e| e.action == memory::Action::Alloc).collect();
    let frees: Vec<_> = gpu.trace.iter().filter(|e| e.action == memory::Action::Free).collect();
    assert!(allocs.len() >= 10 && !frees.is_empty(), "{} allocs, {} frees", allocs.len(), frees.len());
    for f in &frees {
        assert!(allocs.iter().any(|a| a.addr == f.addr && a.size == f.size), "{f:?}");
    }
    assert!(gpu.to_json().starts_with("{\"device\": \"cuda:0\", "));
    let live_bytes: u64 = gpu.blocks.iter().map(|b| b.size).sum();
    assert!(live_bytes > 0 && live_bytes <= gpu.allocated_bytes, "{live_bytes} of {}", gpu.allocated_bytes);
    Ok(())
}

/// `to(ToOptions { non_blocking: true, .. })`: from pinned memory the copy is queued and the
/// call returns, the source's memory kept until the copy is done (the source tensor may be
/// dropped at once); from pageable memory, and back to the CPU, it completes before it
/// returns. Values are the same every way, and a dtype change rides along.
#[test]
fn non_blocking_copies_from_pinned_memory_keep_their_source_until_done() -> Result<()> {
    use pyrite::ToOptions;
    let _serial = serial();
    let Some(dev) = device() else { return Ok(()) };
    let x = Tensor::randn([256, 33], DType::F32)?;
    let want = x.to_vec::<f32>()?;
    let pinned = x.pin_memory()?;
    let to_gpu = ToOptions { device: Some(dev), non_blocking: true, ..Default::default() };
    let on_device = pinned.to(to_gpu)?;
    drop(pinned); // the copy may still be reading it: its memory is held, not freed
    let from_pageable = x.to(to_gpu)?;
    let back =
        on_device.to(ToOptions { device: Some(Device::Cpu), non_blocking: true, ..Default::default() })?;
    assert_eq!(back.device(), Device::Cpu);
    assert_eq!(back.to_vec::<f32>()?, want, "a CPU tensor is complete when it is returned");
    assert_eq!(from_pageable.to_vec::<f32>()?, want);
    pyrite_cuda_runtime::driver::synchronize(0).expect("synchronize");
    assert_eq!(pyrite_cuda_runtime::memory::pending_host_copies(), 0, "synchronize releases the holds");
    let as_f64 = x.to(ToOptions { dtype: Some(DType::F64), ..to_gpu })?;
    assert_eq!((as_f64.device(), as_f64.dtype()), (dev, DType::F64));
    assert_eq!(as_f64.to_vec::<f64>()?, want.iter().map(|&v| v as f64).collect::<Vec<_>>());
    // Nothing to do gives the tensor itself, unless `copy`.
    assert!(on_device.to(ToOptions { device: Some(dev), ..Default::default() })?.same_storage(&on_device));
    assert!(!on_device.to(ToOptions { copy: true, ..Default::default() })?.same_storage(&on_device));
    Ok(())
}
