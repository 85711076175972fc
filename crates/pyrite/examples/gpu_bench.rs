//! Pyrite's side of the GPU benchmark (PyTorch's: `reference/bench/gpu.py`; both run by
//! `scripts/gpu_check.sh`): the same workloads and metric names on cuda:0, each loop timed
//! between `synchronize()` calls, the median of `--repeats` rounds printed as one JSON record.
//!
//! ```text
//! cargo run --release -p pyrite --features cuda --example gpu_bench -- [--repeats 7]
//! ```

use pyrite::nn::functional as F;
use pyrite::nn::{Linear, Module, ReLU, Sequential};
use pyrite::optim::{Optimizer, SGDOptions, SGD};
use pyrite::{DType, Device, Result, Tensor};
use std::time::Instant;

/// Median seconds per call of `f` (loops of at least 0.1 s, `repeats` rounds).
fn timed(repeats: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    pyrite::device::synchronize();
    let mut inner = 1usize;
    loop {
        let t = Instant::now();
        for _ in 0..inner {
            f()?;
        }
        pyrite::device::synchronize();
        let dt = t.elapsed().as_secs_f64();
        if dt >= 0.1 || inner >= 1 << 20 {
            break;
        }
        inner = (inner * 2).max((inner as f64 * 0.11 / dt.max(1e-9)) as usize);
    }
    let mut times = Vec::new();
    for _ in 0..repeats {
        let t = Instant::now();
        for _ in 0..inner {
            f()?;
        }
        pyrite::device::synchronize();
        times.push(t.elapsed().as_secs_f64() / inner as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let repeats = args
        .iter()
        .position(|a| a == "--repeats")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let dev = Device::Cuda(0);
    dev.check_available()?;
    let mut r: Vec<(String, String)> = Vec::new();
    r.push(("device".into(), format!("{:?}", pyrite::cuda::get_device_name(0)?)));
    let n = 4096usize;
    for (name, dt, precision) in
        [("f32", DType::F32, "highest"), ("tf32", DType::F32, "high"), ("bf16", DType::BF16, "highest")]
    {
        pyrite::backends::set_float32_matmul_precision(precision)?;
        let a = Tensor::randn([n, n], DType::F32)?.to_dtype(dt)?.to_device(dev)?;
        let b = Tensor::randn([n, n], DType::F32)?.to_dtype(dt)?.to_device(dev)?;
        let s = timed(repeats, || a.matmul(&b).map(drop))?;
        r.push((format!("matmul_{name}_tflops"), format!("{:.4}", 2.0 * (n as f64).powi(3) / s / 1e12)));
    }
    pyrite::backends::set_float32_matmul_precision("highest")?;
    let x = Tensor::randn([16 << 20], DType::F32)?.to_device(dev)?;
    let y = Tensor::randn([16 << 20], DType::F32)?.to_device(dev)?;
    let s = timed(repeats, || x.add(&y).map(drop))?;
    r.push(("add_gbps".into(), format!("{:.4}", 3.0 * 4.0 * x.numel() as f64 / s / 1e9)));
    let sm = Tensor::randn([4096, 4096], DType::F32)?.to_device(dev)?;
    let s = timed(repeats, || sm.softmax(-1).map(drop))?;
    r.push(("softmax_gbps".into(), format!("{:.4}", 2.0 * 4.0 * sm.numel() as f64 / s / 1e9)));
    let one = Tensor::ones_on([1], DType::F32, dev)?;
    let s = timed(repeats, || one.add(&one).map(drop))?;
    r.push(("add1_us".into(), format!("{:.4}", s * 1e6)));
    let mut model = Sequential::new()
        .append(Linear::new(1024, 4096)?)
        .append(ReLU::new())
        .append(Linear::new(4096, 1024)?);
    model.to_device(dev)?;
    let mut opt = SGD::new(model.parameters(), SGDOptions { lr: 1e-3, ..Default::default() })?;
    let xin = Tensor::randn([256, 1024], DType::F32)?.to_device(dev)?;
    let target = Tensor::randn([256, 1024], DType::F32)?.to_device(dev)?;
    let s = timed(repeats, || {
        opt.zero_grad()?;
        F::mse_loss(&model.call(&xin)?, &target, Default::default())?.backward()?;
        opt.step()
    })?;
    r.push(("mlp_step_ms".into(), format!("{:.4}", s * 1e3)));
    let fields: Vec<String> = r.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
    println!("{{{}}}", fields.join(", "));
    Ok(())
}
