//! Out of memory, solved, on the digits: every remedy of the usual advice as a tool.
//!
//! 1. A memory limit makes the CPU behave like a small GPU: a training step at a batch size
//!    that does not fit fails with `OutOfMemory`, and `memory_summary()` says where the memory
//!    is.
//! 2. The memory history of that failed step, written as JSON and as a page
//!    (`<out>/oom_snapshot.html`: memory over time by category, the largest tensors at the
//!    peak, the out-of-memory marked in red).
//! 3. The batch-size finder (`scale_batch_size`, Lightning's power mode) finds the largest
//!    batch that fits under the limit; the model and optimizer are put back afterwards.
//! 4. Training at the batch size that did not fit, with in-flight recovery: each batch is
//!    split into micro-batches whose gradients are accumulated, so every optimizer step is
//!    still the step of the whole batch.
//!
//! ```text
//! cargo run --release -p pyrite --example oom_digits -- [--limit-mb 40] [--batch-size 1024]
//!                                                      [--epochs 30] [--seed 0] [--out DIR]
//! ```
//!
//! The last line is a summary a script can read: `test accuracy 98.9% at batch size 1024 in micro-batches of 256 in 5.2 s`.

use clap::Parser;
use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample};
use pyrite::memory::{self, HistoryOptions};
use pyrite::nn::{self, Conv2d, ConvOptions, Linear, Module, ModuleBase, PoolOptions};
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::prelude::*;
use pyrite::train::oom::{MicroBatching, OomRecovery};
use pyrite::train::tuner::{scale_batch_size, ScaleBatchSizeOptions};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::ErrorKind;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Out-of-memory troubleshooting on the vendored digits.
#[derive(Parser)]
struct Args {
    /// Memory the training may use on top of what the model and the data already hold (MiB).
    #[arg(long, default_value_t = 40)]
    limit_mb: u64,
    /// The batch size to train at (too large for the limit, on purpose).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where the memory snapshot goes.
    #[arg(long, default_value = "target/oom_digits")]
    out: PathBuf,
}

/// Two 3x3 convolutions, a 2x2 max-pool and two linear layers.
#[derive(nn::Module)]
struct Net {
    base: ModuleBase,
    conv1: Conv2d,
    conv2: Conv2d,
    fc1: Linear,
    fc2: Linear,
}

impl Net {
    fn new() -> Result<Net> {
        let same = || ConvOptions::new().padding(1);
        Ok(Net {
            base: ModuleBase::new(),
            conv1: Conv2d::new(1, 32, 3, same())?,
            conv2: Conv2d::new(32, 64, 3, same())?,
            fc1: Linear::new(64 * 4 * 4, 128)?,
            fc2: Linear::new(128, 10)?,
        })
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.conv1.call(x)?.relu()?;
        let x = F::max_pool2d(&self.conv2.call(&x)?.relu()?, &[2], &PoolOptions::new())?;
        self.fc2.call(&self.fc1.call(&x.flatten(1, -1)?)?.relu()?)
    }
}

/// A whole split as two tensors: images `(N, 1, 8, 8)` and labels `(N,)`.
fn load(split: DigitsSplit) -> Result<(Tensor, Tensor)> {
    let set = Arc::new(Digits::new(split)?);
    let n = set.len();
    let loader = DataLoader::new(set, DataLoaderOptions { batch_size: Some(n), ..Default::default() })?;
    let batch = loader.iter()?.next().expect("one batch")?;
    Ok((batch.item(0)?.as_tensor()?.clone(), batch.item(1)?.as_tensor()?.clone()))
}

fn loss_of(net: &Net, batch: &Sample) -> Result<Tensor> {
    let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
    F::cross_entropy(&net.call(x)?, y, &Default::default())
}

/// One plain training step on the first `n` samples (repeated when `n` is larger).
fn plain_step(net: &Net, opt: &mut Adam, x: &Tensor, y: &Tensor, n: usize) -> Result<()> {
    let idx: Vec<i64> = (0..n).map(|i| (i % x.dims()[0]) as i64).collect();
    let idx = Tensor::from_vec(idx, [n])?;
    let batch: Sample = (x.index_select(0, &idx)?, y.index_select(0, &idx)?).into();
    opt.zero_grad()?;
    loss_of(net, &batch)?.backward()?;
    opt.step()
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    pyrite::manual_seed(args.seed);
    let (x, y) = load(DigitsSplit::Train)?;
    let (test_x, test_y) = load(DigitsSplit::Test)?;
    let net = Net::new()?;
    let mut opt = Adam::new(net.parameters(), AdamOptions { lr: 1e-2, ..Default::default() })?;
    let batch_size = args.batch_size as usize;

    // 1. A limit: what the model and data hold now, plus --limit-mb.
    memory::empty_cache();
    let limit = memory::memory_reserved(Device::Cpu)? + (args.limit_mb << 20);
    memory::set_memory_limit(Some(limit), Device::Cpu)?;
    println!("memory limit: {} ({} for training)", mib(limit), mib(args.limit_mb << 20));

    // 2. A step at the full batch size, with the memory history recorded.
    memory::record_memory_history(HistoryOptions::default())?;
    let err = match plain_step(&net, &mut opt, &x, &y, batch_size) {
        Ok(()) => {
            println!("a batch of {batch_size} fits under the limit: raise --batch-size or lower --limit-mb");
            None
        }
        Err(e) if e.kind() == ErrorKind::OutOfMemory => Some(e),
        Err(e) => return Err(e),
    };
    std::fs::create_dir_all(&args.out)?;
    let page = memory::dump_snapshot(args.out.join("oom_snapshot.json"))?;
    memory::record_memory_history(HistoryOptions { enabled: false, ..Default::default() })?;
    if let Some(e) = err {
        println!("\na training step at batch size {batch_size} failed:\n  {e}\n");
        print!("{}", memory::memory_summary(Device::Cpu)?);
        println!("memory history of the failed step: {}\n", page.display());
    }

    // 3. The largest batch that fits, found by trying steps (the state is put back after).
    let saved_model: Vec<Tensor> =
        net.parameters().iter().map(|p| p.detach().deep_clone()).collect::<Result<_>>()?;
    let saved_opt = opt.state_dict().deep_clone()?;
    let found = scale_batch_size(
        |n| plain_step(&net, &mut opt, &x, &y, n),
        ScaleBatchSizeOptions { dataset_len: Some(x.dims()[0]), ..Default::default() },
    )?;
    {
        let _g = pyrite::autograd::no_grad();
        for (p, saved) in net.parameters().iter().zip(&saved_model) {
            p.copy_(saved)?;
        }
    }
    opt.load_state_dict(&saved_opt)?;
    println!("the batch-size finder: the largest batch that fits is {found}\n");

    // 4. Train at the batch size that did not fit, recovering in micro-batches.
    let mut micro = MicroBatching::new(net.parameters(), OomRecovery::default())?;
    let n = x.dims()[0];
    memory::reset_peak_memory_stats(Device::Cpu)?;
    for epoch in 0..args.epochs {
        net.train();
        let perm = Tensor::randperm(n)?;
        let (mut total, mut seen) = (0.0, 0usize);
        let mut s = 0;
        while s < n {
            let m = batch_size.min(n - s);
            let idx = perm.narrow(0, s as isize, m)?;
            let batch: Sample = (x.index_select(0, &idx)?, y.index_select(0, &idx)?).into();
            total += micro.step(&mut opt, &batch, |b| loss_of(&net, b))? * m as f64;
            seen += m;
            s += m;
        }
        if epoch == 0 || (epoch + 1) % 10 == 0 || epoch + 1 == args.epochs {
            let size = micro
                .micro_batch_size()
                .map_or("whole batches".to_string(), |m| format!("micro-batches of {m}"));
            println!("epoch {:>3}: train loss {:.4} ({size})", epoch + 1, total / seen as f64);
        }
    }
    memory::set_memory_limit(None, Device::Cpu)?;

    net.eval();
    let _g = pyrite::autograd::no_grad();
    let pred = net.call(&test_x)?.argmax(Some(1), false)?;
    let correct = pred.eq(&test_y)?.to_dtype(DType::I64)?.sum()?.item::<i64>()?;
    let acc = 100.0 * correct as f64 / test_y.dims()[0] as f64;
    println!(
        "peak while training {} under a limit of {}; {} out-of-memory errors in all",
        mib(memory::max_memory_allocated(Device::Cpu)?),
        mib(limit),
        memory::memory_stats(Device::Cpu)?["num_ooms"]
    );
    println!(
        "test accuracy {acc:.1}% at batch size {batch_size} in micro-batches of {} in {:.1} s",
        micro.micro_batch_size().unwrap_or(batch_size),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("oom_digits: {e}");
        std::process::exit(1);
    }
}
