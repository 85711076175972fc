//! Timing a layer two ways: the hand-written `run_benchmark(num_iters, profile)` loop that
//! training scripts carry around (warm up, synchronize, time a fixed number of calls,
//! synchronize, divide; optionally under the profiler), and `utils::benchmark::Timer`, which
//! does the same in one call and also picks the block size, repeats the blocks and reports
//! the median and its spread.
//!
//! ```text
//! cargo run --release -p pyrite --example run_benchmark -- [--iters 200] [--profile]
//! ```
//!
//! The layer is `layer_norm(gelu(linear(x)) + residual)` on a `64 x 512` batch. Both figures
//! print side by side; they agree to within the run-to-run noise (a few percent on a shared
//! machine). With `--profile` the hand-written loop runs under `pyrite::profiler` and prints
//! its `key_averages` table.

use pyrite::nn::functional as F;
use pyrite::nn::{Linear, Module};
use pyrite::profiler::{profile, ProfileOptions, TableOptions};
use pyrite::utils::benchmark::{BlockedAutorangeOptions, Timer, TimerOptions};
use pyrite::{device, DType, Result, Tensor};
use std::time::Instant;

/// The layer under test: a linear layer, GELU, the residual, LayerNorm.
fn layer(fc: &Linear, x: &Tensor, residual: &Tensor) -> Result<Tensor> {
    let h = F::gelu(&fc.call(x)?, Default::default())?;
    F::layer_norm(&h.add(residual)?, &[512], &Default::default())
}

/// The pattern as scripts write it by hand: seconds per call of `layer` over `num_iters`
/// calls, after a warm-up, with the device synchronized around the timed loop.
fn run_benchmark(num_iters: usize, profile_it: bool, fc: &Linear, x: &Tensor, r: &Tensor) -> Result<f64> {
    for _ in 0..10 {
        layer(fc, x, r)?;
    }
    device::synchronize();
    let mut prof = if profile_it { Some(profile(ProfileOptions::default())?) } else { None };
    let t0 = Instant::now();
    for _ in 0..num_iters {
        layer(fc, x, r)?;
    }
    device::synchronize();
    let per_call = t0.elapsed().as_secs_f64() / num_iters as f64;
    if let Some(p) = prof.as_mut() {
        p.stop()?;
        let opts =
            TableOptions { sort_by: Some("cpu_time_total".into()), row_limit: 8, ..Default::default() };
        println!("{}", p.key_averages(false).table(&opts)?);
    }
    Ok(per_call)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let iters = args
        .iter()
        .position(|a| a == "--iters")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let profile_it = args.iter().any(|a| a == "--profile");
    pyrite::manual_seed(0);
    let fc = Linear::new(512, 512)?;
    let x = Tensor::randn([64, 512], DType::F32)?;
    let r = Tensor::randn([64, 512], DType::F32)?;
    let _nograd = pyrite::autograd::no_grad();

    let by_hand = run_benchmark(iters, profile_it, &fc, &x, &r)?;

    // The same figure with the Timer: one call, and it chooses the block size itself.
    let mut timer = Timer::new(
        "layer(x, residual)",
        || layer(&fc, &x, &r).map(drop),
        TimerOptions { num_threads: pyrite::get_num_threads(), ..Default::default() },
    );
    let m = timer.blocked_autorange(BlockedAutorangeOptions::default())?;
    println!("{m}");
    println!(
        "run_benchmark: {:.1} us per call over {iters} calls; Timer: {:.1} us (median of {} blocks); ratio {:.3}",
        by_hand * 1e6,
        m.median() * 1e6,
        m.times().len(),
        by_hand / m.median()
    );
    Ok(())
}
