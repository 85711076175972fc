//! PyTorch's "Single-Machine Model Parallel" tutorial: ResNet-50 cut in two halves
//! (`conv1 .. layer2` and `layer3 .. fc`), first run as one model, then pipelined: the batch
//! is split into micro-batches of `split_size` images, and while the second half works on
//! one micro-batch the first half works on the next. Here each half is a stage on a thread
//! of this process (the tutorial's two GPUs), driven by `ScheduleGPipe`.
//!
//! Both train the same parameters on the same batch (64x64 images, batch 32, SGD), twice:
//! with one intra-op thread (each stage then has a core of its own, as each half had a GPU
//! of its own in the tutorial, against the single model on one core) and with the default
//! number of threads (the single model's ops use every core, and the stages share them).
//! The example prints steps/s for each, the speed-up, and the last pipelined step's
//! timeline.
//!
//! Run: `cargo run --release -p pyrite-distributed --example model_parallel_resnet50 [split_size] [steps] [split_at]`

use pyrite::nn::functional::{cross_entropy, CrossEntropyOptions};
use pyrite::nn::{Flatten, Module, Sequential};
use pyrite::optim::{Optimizer, SGDOptions, SGD};
use pyrite::vision::models::{resnet50, ResNet, ResNetOptions};
use pyrite::{DType, Result, Tensor};
use pyrite_distributed::pipelining::{split_sequential, ScheduleGPipe, ScheduleOptions, Timeline};
use std::time::Instant;

const BATCH: usize = 32;
const IMAGE: usize = 64;
const CLASSES: usize = 1000;
/// `layer3` starts the second half, as in the tutorial's `seq2` (the third argument changes
/// it: 7 starts it at `layer4`).
const SPLIT_AT: usize = 6;

/// torchvision's ResNet-50 as one `Sequential`, in forward order, so it can be cut.
fn resnet50_sequential() -> Result<Sequential> {
    let ResNet { conv1, bn1, relu, maxpool, layer1, layer2, layer3, layer4, avgpool, fc, .. } =
        resnet50(ResNetOptions { num_classes: CLASSES, ..Default::default() })?;
    Ok(Sequential::new()
        .append(conv1)
        .append(bn1)
        .append(relu)
        .append(maxpool)
        .append(layer1)
        .append(layer2)
        .append(layer3)
        .append(layer4)
        .append(avgpool)
        .append(Flatten::new())
        .append(fc))
}

fn loss_fn(out: &Tensor, labels: &Tensor) -> Result<Tensor> {
    cross_entropy(out, labels, &CrossEntropyOptions::default())
}

/// Steps per second of the single model and of the pipeline (one warm-up step, then
/// `steps` timed ones, alternating so that a change in the machine's load hits both), and the
/// pipeline's last timeline.
fn compare(
    model: &Sequential,
    split_at: usize,
    n_microbatches: usize,
    steps: usize,
) -> Result<(f64, f64, Timeline)> {
    let inputs = Tensor::randn([BATCH, 3, IMAGE, IMAGE], DType::F32)?;
    let labels = Tensor::randint(0, CLASSES as i64, [BATCH], DType::I64)?;
    let mut opt = SGD::new(model.parameters(), SGDOptions { lr: 0.001, ..Default::default() })?;
    let stages = split_sequential(model, &[split_at])?;
    let mut schedule = ScheduleGPipe::new(stages, n_microbatches, loss_fn, ScheduleOptions::default())?;
    let (mut single, mut piped) = (0.0, 0.0);
    for i in 0..=steps {
        let t = Instant::now();
        opt.zero_grad()?;
        loss_fn(&model.call(&inputs)?, &labels)?.backward()?;
        opt.step()?;
        let t_single = t.elapsed().as_secs_f64();
        let t = Instant::now();
        opt.zero_grad()?;
        schedule.step(Some(&inputs), Some(&labels))?;
        opt.step()?;
        if i > 0 {
            single += t_single;
            piped += t.elapsed().as_secs_f64();
        }
    }
    Ok((steps as f64 / single, steps as f64 / piped, schedule.timeline().clone()))
}

fn main() -> Result<()> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let split_size = args.first().copied().unwrap_or(8);
    let steps = args.get(1).copied().unwrap_or(2).max(1);
    let split_at = args.get(2).copied().unwrap_or(SPLIT_AT);
    if split_size == 0 || !BATCH.is_multiple_of(split_size) {
        pyrite::bail!(Value, "split_size must divide the batch of {BATCH}, got {split_size}");
    }
    let n_microbatches = BATCH / split_size;
    pyrite::manual_seed(0);
    let model = resnet50_sequential()?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!(
        "ResNet-50 ({} parameters), batch {BATCH} of {IMAGE}x{IMAGE} images, {cores} cores; \
         pipelined: 2 stages (layers 0..{split_at} | {split_at}..), split_size {split_size} ({n_microbatches} micro-batches), GPipe",
        model.num_parameters(true)
    );
    let default_threads = pyrite::get_num_threads();
    // As the tutorial's two GPUs: each half gets compute of its own (one core), against the
    // single model on one core. Then with every core for the single model's ops too.
    for threads in [1, default_threads] {
        pyrite::set_num_threads(threads);
        let (single, piped, timeline) = compare(&model, split_at, n_microbatches, steps)?;
        println!("\n{threads} intra-op thread(s):");
        println!("  single model: {single:6.3} steps/s");
        println!("  pipelined:    {piped:6.3} steps/s   speed-up {:.2}x", piped / single);
        println!(
            "  last pipelined step {:.0} ms, idle {:.1}% (GPipe with equal stages: {:.1}%)",
            timeline.span().as_secs_f64() * 1e3,
            100.0 * timeline.bubble_fraction(),
            100.0 / (n_microbatches + 1) as f64
        );
        print!("{timeline}");
        if default_threads == 1 {
            break;
        }
    }
    Ok(())
}
