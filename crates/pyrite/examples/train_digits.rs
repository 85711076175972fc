//! The main job: trains a small CNN on the vendored digits (8x8 images of handwritten digits,
//! 10 classes) as a PyTorch user would: a 2-worker DataLoader with random augmentation, Adam with
//! a OneCycle learning-rate schedule, a progress bar per epoch, a validation pass per epoch, the
//! best model saved as safetensors, and a final test accuracy.
//!
//! ```text
//! cargo run --release --example train_digits -- [--seed 0] [--epochs 20] [--batch-size 64]
//!                                                [--lr 5e-3] [--workers 2] [--out DIR]
//! ```
//!
//! The same seed gives the same numbers, whatever `--workers` is. The last line is a summary a
//! script can read: `test accuracy 98.6% in 6.1 s`.

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use pyrite::data::{random_split, DataLoader, DataLoaderOptions, Dataset, Sample, SplitLength};
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

/// Trains a small CNN on the vendored digits.
#[derive(Parser)]
struct Args {
    /// Seeds the model, the split, the shuffling and the augmentation.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// The peak learning rate of the OneCycle schedule.
    #[arg(long, default_value_t = 5e-3)]
    lr: f64,
    /// DataLoader worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Where the best model is saved.
    #[arg(long, default_value = "target/train_digits")]
    out: PathBuf,
}

#[path = "common/digits_cnn.rs"]
mod digits_cnn;
use digits_cnn::{evaluate, Net};

fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    pyrite::manual_seed(args.seed);
    let split_gen = Generator::new(args.seed);
    // Random augmentation: shift by up to one pixel each way (torchvision's RandomCrop(8,
    // padding=1)); it draws from the sample's generator, so every worker count agrees.
    let shift =
        RandomCrop::with_options(8, RandomCropOptions { padding: Some(vec![1]), ..Default::default() });
    let full_train: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?.with_transform(shift));
    let plain_train: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?);
    // 90% to train on (augmented), 10% to validate on (not augmented): the same indices.
    let parts = random_split(
        full_train.clone(),
        &[SplitLength::Fraction(0.9), SplitLength::Fraction(0.1)],
        Some(&split_gen),
    )?;
    let (train_idx, val_idx) = (parts[0].indices().to_vec(), parts[1].indices().to_vec());
    let train_set = Arc::new(pyrite::data::Subset::new(full_train, train_idx));
    let val_set = Arc::new(pyrite::data::Subset::new(plain_train, val_idx));
    let test_set: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Test)?);

    let train_loader = DataLoader::new(
        train_set.clone(),
        DataLoaderOptions {
            batch_size: Some(args.batch_size as usize),
            shuffle: true,
            num_workers: args.workers,
            persistent_workers: args.workers > 0,
            generator: Some(Arc::new(Generator::new(args.seed))),
            ..Default::default()
        },
    )?;
    let eval_opts = || DataLoaderOptions { batch_size: Some(256), ..Default::default() };
    let val_loader = DataLoader::new(val_set.clone(), eval_opts())?;
    let test_loader = DataLoader::new(test_set.clone(), eval_opts())?;

    let model = Net::new()?;
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
    println!(
        "digits: {} train / {} validation / {} test images; {} parameters; {} workers",
        train_set.len(),
        val_set.len(),
        test_set.len(),
        model.parameters().iter().map(|p| p.numel()).sum::<usize>(),
        args.workers
    );

    std::fs::create_dir_all(&args.out).map_err(|e| {
        pyrite::Error::new(pyrite::ErrorKind::Io, format!("creating {}: {e}", args.out.display()))
    })?;
    let best_path = args.out.join("best.safetensors");
    let mut best = (f64::INFINITY, 0usize);
    let style = ProgressStyle::with_template("epoch {prefix:>2} [{bar:30}] {pos}/{len} {msg}")
        .expect("a valid template")
        .progress_chars("=> ");
    for epoch in 1..=args.epochs as usize {
        model.train();
        let bar = ProgressBar::new(train_loader.len() as u64)
            .with_style(style.clone())
            .with_prefix(epoch.to_string());
        let t0 = Instant::now();
        let (mut loss_sum, mut seen, mut correct) = (0.0, 0usize, 0i64);
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
            bar.set_message(format!(
                "loss {:.4}  {:.0} samples/s",
                loss_sum / seen as f64,
                seen as f64 / t0.elapsed().as_secs_f64()
            ));
            bar.inc(1);
        }
        bar.finish_and_clear();
        let (val_loss, val_acc) = evaluate(&model, &val_loader)?;
        // The best model is the one with the lowest validation loss (on 143 images, accuracy
        // moves in steps of 0.7% and ties often).
        let mark = if val_loss < best.0 {
            best = (val_loss, epoch);
            save_safetensors(&model.state_dict()?, &best_path)?;
            "  (best: saved)"
        } else {
            ""
        };
        println!(
            "epoch {epoch:>2}: train loss {:.4} acc {:.2}% | validation loss {:.4} acc {:.2}% | {:.1}s{mark}",
            loss_sum / seen as f64,
            100.0 * correct as f64 / seen as f64,
            val_loss,
            100.0 * val_acc,
            t0.elapsed().as_secs_f64()
        );
    }

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
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("train_digits: {e}");
        std::process::exit(1);
    }
}
