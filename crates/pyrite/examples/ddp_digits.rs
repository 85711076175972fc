//! `train_digits` with DistributedDataParallel: the same CNN, data and recipe, trained by
//! several processes of an MPI job, each on its DistributedSampler share of every batch, with
//! gradients averaged across processes during backward.
//!
//! ```text
//! cargo run --release -p pyrite --features mpi --example ddp_digits -- [--nprocs 2] [--seed 0]
//!     [--epochs 20] [--batch-size 64] [--lr 5e-3] [--workers 1] [--threads 1] [--out DIR]
//! ```
//!
//! Run plainly, it starts itself again under `mpirun -np NPROCS`; under a launcher (`mpirun`,
//! `srun`) it is one of the job's processes. `--batch-size` is the global batch (each of N
//! processes takes batch/N). Rank 0 prints, saves the best model and evaluates; the last line
//! reads like train_digits': `test accuracy 98.9% in 4.2 s`.

use clap::Parser;
use pyrite::data::{
    random_split, DataLoader, DataLoaderOptions, Dataset, DistributedSampler, DistributedSamplerOptions,
    Sample, SplitLength,
};
use pyrite::distributed::{self as dist, DdpOptions, DistributedDataParallel, ReduceOp};
use pyrite::nn::{self, save_safetensors, Module};
use pyrite::optim::lr_scheduler::{LRScheduler, OneCycleLR, OneCycleLROptions};
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::prelude::*;
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::vision::transforms::{RandomCrop, RandomCropOptions};
use pyrite::Generator;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Trains the digits CNN with DistributedDataParallel over an MPI job.
#[derive(Parser)]
struct Args {
    /// Processes to start when not run under a launcher.
    #[arg(long, default_value_t = 2)]
    nprocs: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    /// The global batch size, split evenly over the processes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    #[arg(long, default_value_t = 5e-3)]
    lr: f64,
    /// DataLoader worker threads per process.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Compute threads per process.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long, default_value = "target/ddp_digits")]
    out: PathBuf,
}

#[path = "common/digits_cnn.rs"]
mod digits_cnn;
use digits_cnn::{evaluate, Net};

fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    pyrite::set_num_threads(args.threads);
    dist::init_process_group("mpi", Default::default())?;
    let (rank, world) = (dist::get_rank()?, dist::get_world_size()?);
    let lead = rank == 0;
    if !(args.batch_size as usize).is_multiple_of(world) {
        return Err(pyrite::Error::new(
            pyrite::ErrorKind::Value,
            format!("--batch-size {} is not divisible by the {world} processes", args.batch_size),
        ));
    }
    pyrite::manual_seed(args.seed);
    let split_gen = Generator::new(args.seed);
    let shift =
        RandomCrop::with_options(8, RandomCropOptions { padding: Some(vec![1]), ..Default::default() });
    let full_train: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?.with_transform(shift));
    let plain_train: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?);
    let parts = random_split(
        full_train.clone(),
        &[SplitLength::Fraction(0.9), SplitLength::Fraction(0.1)],
        Some(&split_gen),
    )?;
    let (train_idx, val_idx) = (parts[0].indices().to_vec(), parts[1].indices().to_vec());
    let train_set = Arc::new(pyrite::data::Subset::new(full_train, train_idx));
    let val_set = Arc::new(pyrite::data::Subset::new(plain_train, val_idx));
    let test_set: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Test)?);

    // this process's share of every epoch
    let sampler = Arc::new(DistributedSampler::with_options(
        train_set.len(),
        DistributedSamplerOptions { num_replicas: world, rank, seed: args.seed, ..Default::default() },
    )?);
    let train_loader = DataLoader::new(
        train_set.clone(),
        DataLoaderOptions {
            batch_size: Some(args.batch_size as usize / world),
            sampler: Some(sampler.clone()),
            num_workers: args.workers,
            persistent_workers: args.workers > 0,
            generator: Some(Arc::new(Generator::new(args.seed + rank as u64))),
            ..Default::default()
        },
    )?;
    let eval_opts = || DataLoaderOptions { batch_size: Some(256), ..Default::default() };
    let val_loader = DataLoader::new(val_set.clone(), eval_opts())?;
    let test_loader = DataLoader::new(test_set.clone(), eval_opts())?;

    // every rank builds the model; DDP broadcasts rank 0's weights
    let model = DistributedDataParallel::new(Net::new()?, DdpOptions::default())?;
    let mut opt = Adam::new(model.parameters(), AdamOptions { lr: args.lr, ..Default::default() })?;
    let mut sched = OneCycleLR::new(
        &mut opt,
        args.lr,
        OneCycleLROptions {
            epochs: Some(args.epochs as usize),
            steps_per_epoch: Some(train_loader.len()),
            ..Default::default()
        },
    )?;
    if lead {
        println!(
            "digits: {} train / {} validation / {} test images; {} parameters; {world} processes x {} threads, {} images per process per step",
            train_set.len(),
            val_set.len(),
            test_set.len(),
            model.parameters().iter().map(|p| p.numel()).sum::<usize>(),
            args.threads,
            args.batch_size as usize / world
        );
        std::fs::create_dir_all(&args.out)?;
    }
    let best_path = args.out.join("best.safetensors");
    let mut best = (f64::INFINITY, 0usize);
    for epoch in 1..=args.epochs as usize {
        sampler.set_epoch(epoch as u64);
        model.train();
        let t0 = Instant::now();
        // loss sum, correct, seen: summed over the processes at the end of the epoch
        let (mut loss_sum, mut correct, mut seen) = (0.0f64, 0i64, 0usize);
        for batch in train_loader.iter()? {
            let batch: Sample = batch?;
            let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
            opt.zero_grad()?;
            let logits = model.call(x)?;
            let loss = F::cross_entropy(&logits, y, &Default::default())?;
            loss.backward()?;
            opt.step()?;
            sched.step(&mut opt)?;
            let n = y.dims()[0];
            loss_sum += loss.item::<f32>()? as f64 * n as f64;
            correct += logits.argmax(Some(1), false)?.eq(y)?.to_dtype(DType::I64)?.sum()?.item::<i64>()?;
            seen += n;
        }
        let totals = Tensor::new([loss_sum, correct as f64, seen as f64])?;
        dist::all_reduce(&totals, ReduceOp::Sum)?;
        let t: Vec<f64> = totals.to_vec()?;
        // every replica holds the same weights: each evaluates, all agree on the best epoch
        let (val_loss, val_acc) = evaluate(&model.module, &val_loader)?;
        let mark = if val_loss < best.0 {
            best = (val_loss, epoch);
            if lead {
                save_safetensors(&model.module.state_dict()?, &best_path)?;
            }
            "  (best: saved)"
        } else {
            ""
        };
        if lead {
            println!(
                "epoch {epoch:>2}: train loss {:.4} acc {:.2}% | validation loss {:.4} acc {:.2}% | {:.1}s{mark}",
                t[0] / t[2],
                100.0 * t[1] / t[2],
                val_loss,
                100.0 * val_acc,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    dist::barrier()?;
    if lead {
        let best_model = Net::new()?;
        best_model.load_state_dict(&nn::load_safetensors(&best_path)?, true)?;
        let (test_loss, test_acc) = evaluate(&best_model, &test_loader)?;
        println!(
            "best model: epoch {} (validation loss {:.4}), saved to {}; test loss {:.4}",
            best.1,
            best.0,
            best_path.display(),
            test_loss
        );
        println!("test accuracy {:.1}% in {:.1} s", 100.0 * test_acc, start.elapsed().as_secs_f64());
    }
    dist::destroy_process_group();
    Ok(())
}

fn main() {
    let args = Args::parse();
    match dist::launch::relaunch_under_mpirun(args.nprocs) {
        Ok(Some(status)) => std::process::exit(status.code().unwrap_or(1)),
        Ok(None) => {}
        Err(e) => {
            eprintln!("ddp_digits: {e}");
            std::process::exit(1);
        }
    }
    if let Err(e) = run(&args) {
        eprintln!("ddp_digits: {e}");
        std::process::exit(1);
    }
}
