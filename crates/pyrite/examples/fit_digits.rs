//! The digits CNN of `train_digits`, trained by the Lightning-style [`Trainer`]: a
//! `LightningModule` says what a step is, and the Trainer runs the loop with a
//! `ModelCheckpoint` (best by validation loss, and `last.ckpt`), `EarlyStopping`, a
//! `LearningRateMonitor`, CSV and TensorBoard loggers, the progress bar and the curves plot.
//! Accuracy, F1 and the confusion matrix come from `pyrite::metrics` (torchmetrics), and the
//! test set's confusion matrix is drawn to `confusion_matrix.png`.
//!
//! ```text
//! cargo run --release -p pyrite --example fit_digits -- [--seed 0] [--epochs 20] [--lr 5e-3]
//!                                                      [--workers 2] [--root DIR] [--resume]
//!                                                      [--precision bf16-mixed]
//! ```
//!
//! `--resume` continues from `DIR/checkpoints/last.ckpt` exactly where it was left. The last
//! line reads like train_digits': `test accuracy 98.9% in 4.1 s`.

use clap::Parser;
use pyrite::data::{random_split, DataLoader, DataLoaderOptions, Dataset, Sample, SplitLength, Subset};
use pyrite::metrics::{
    Average, ConfusionMatrixOptions, Metric, MulticlassAccuracy, MulticlassConfusionMatrix,
    MulticlassF1Score, MulticlassOptions,
};
use pyrite::nn::{self, Conv2d, ConvOptions, Dropout, Linear, Module, ModuleBase, PoolOptions};
use pyrite::optim::lr_scheduler::{OneCycleLR, OneCycleLROptions};
use pyrite::optim::{Adam, AdamOptions};
use pyrite::prelude::*;
use pyrite::train::callbacks::{
    EarlyStopping, EarlyStoppingOptions, LearningRateMonitor, ModelCheckpoint, ModelCheckpointOptions,
};
use pyrite::train::loggers::{
    CSVLogger, CSVLoggerOptions, Logger, TensorBoardLogger, TensorBoardLoggerOptions,
};
use pyrite::train::{
    CkptPath, Context, EvalOptions, FitOptions, HParam, Interval, LightningModule, LrSchedulerConfig,
    OptimizerConfig, Scheduler, StepOutput, Trainer, TrainerOptions,
};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::vision::transforms::{RandomCrop, RandomCropOptions};
use pyrite::Generator;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Trains the digits CNN with the Trainer.
#[derive(Parser)]
struct Args {
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
    /// The run folder: logs, checkpoints and curves.
    #[arg(long, default_value = "target/fit_digits")]
    root: PathBuf,
    /// Resume from `ROOT/checkpoints/last.ckpt`.
    #[arg(long)]
    resume: bool,
    /// Lightning's precision: 32-true, bf16-mixed, bf16-true, ...
    #[arg(long, default_value = "32-true")]
    precision: String,
}

/// Two 3x3 convolutions, a 2x2 max-pool and two linear layers, with dropout.
#[derive(nn::Module)]
struct Net {
    base: ModuleBase,
    conv1: Conv2d,
    conv2: Conv2d,
    drop: Dropout,
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
            drop: Dropout::new(0.25)?,
            fc1: Linear::new(64 * 4 * 4, 128)?,
            fc2: Linear::new(128, 10)?,
        })
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.conv1.call(x)?.relu()?;
        let x = F::max_pool2d(&self.conv2.call(&x)?.relu()?, &[2], &PoolOptions::new())?;
        let x = self.drop.call(&x.flatten(1, -1)?)?;
        self.fc2.call(&self.drop.call(&self.fc1.call(&x)?.relu()?)?)
    }
}

/// The Lightning module: the net, its steps, its optimizer and its metrics.
struct LitDigits {
    net: Net,
    lr: f64,
    epochs: usize,
    steps_per_epoch: usize,
    train_acc: MulticlassAccuracy,
    val_acc: MulticlassAccuracy,
    test_acc: MulticlassAccuracy,
    test_f1: MulticlassF1Score,
    test_confmat: MulticlassConfusionMatrix,
}

impl LitDigits {
    fn new(lr: f64, epochs: usize, steps_per_epoch: usize) -> Result<LitDigits> {
        // The fraction of correct predictions (torchmetrics' default, "macro", averages the
        // per-class recalls instead).
        let micro = MulticlassOptions { average: Average::Micro, ..Default::default() };
        Ok(LitDigits {
            net: Net::new()?,
            lr,
            epochs,
            steps_per_epoch,
            train_acc: MulticlassAccuracy::new(10, micro)?,
            val_acc: MulticlassAccuracy::new(10, micro)?,
            test_acc: MulticlassAccuracy::new(10, micro)?,
            test_f1: MulticlassF1Score::new(10, MulticlassOptions::default())?,
            test_confmat: MulticlassConfusionMatrix::new(10, ConfusionMatrixOptions::default())?,
        })
    }
}

/// The logits, the targets and the loss of a batch.
fn step(net: &Net, batch: &Sample) -> Result<(Tensor, Tensor, Tensor)> {
    let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
    let logits = net.call(x)?;
    let loss = F::cross_entropy(&logits, y, &Default::default())?;
    Ok((logits, y.clone(), loss))
}

impl LightningModule for LitDigits {
    fn module(&self) -> &dyn Module {
        &self.net
    }

    fn module_mut(&mut self) -> Option<&mut dyn Module> {
        Some(&mut self.net)
    }

    fn training_step(&mut self, batch: &Sample, _batch_idx: usize, ctx: &mut Context) -> Result<StepOutput> {
        let (logits, y, loss) = step(&self.net, batch)?;
        let both = pyrite::train::LogOptions {
            on_step: Some(true),
            on_epoch: Some(true),
            prog_bar: true,
            ..Default::default()
        };
        ctx.log_with("train_loss", &loss, &both)?;
        self.train_acc.update(&logits.detach(), &y)?;
        Ok(loss.into())
    }

    fn on_train_epoch_end(&mut self, ctx: &mut Context) -> Result<()> {
        ctx.log("train_acc", self.train_acc.compute()?)?;
        self.train_acc.reset();
        Ok(())
    }

    fn validation_step(&mut self, batch: &Sample, _batch_idx: usize, ctx: &mut Context) -> Result<()> {
        let (logits, y, loss) = step(&self.net, batch)?;
        self.val_acc.update(&logits, &y)?;
        ctx.log_prog_bar("val_loss", loss)
    }

    fn on_validation_epoch_end(&mut self, ctx: &mut Context) -> Result<()> {
        ctx.log_prog_bar("val_acc", self.val_acc.compute()?)?;
        self.val_acc.reset();
        Ok(())
    }

    fn test_step(&mut self, batch: &Sample, _batch_idx: usize, ctx: &mut Context) -> Result<()> {
        let (logits, y, loss) = step(&self.net, batch)?;
        self.test_acc.update(&logits, &y)?;
        self.test_f1.update(&logits, &y)?;
        self.test_confmat.update(&logits, &y)?;
        ctx.log("test_loss", loss)
    }

    fn on_test_epoch_end(&mut self, ctx: &mut Context) -> Result<()> {
        ctx.log("test_acc", self.test_acc.compute()?)?;
        ctx.log("test_f1", self.test_f1.compute()?)
    }

    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        let mut opt = Adam::new(self.net.parameters(), AdamOptions { lr: self.lr, ..Default::default() })?;
        let sched = OneCycleLR::new(
            &mut opt,
            self.lr,
            OneCycleLROptions {
                epochs: Some(self.epochs),
                steps_per_epoch: Some(self.steps_per_epoch),
                ..Default::default()
            },
        )?;
        let cfg =
            LrSchedulerConfig { interval: Interval::Step, ..LrSchedulerConfig::new(Scheduler::lr(sched)) };
        Ok(OptimizerConfig::new(opt).with_scheduler(cfg))
    }

    fn hparams(&self) -> Vec<(String, HParam)> {
        vec![("lr".into(), self.lr.into()), ("epochs".into(), self.epochs.into())]
    }
}

fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    pyrite::train::seed_everything(args.seed);
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
    let train_set = Arc::new(Subset::new(full_train, parts[0].indices().to_vec()));
    let val_set = Arc::new(Subset::new(plain_train, parts[1].indices().to_vec()));
    let test_set: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Test)?);
    let train = DataLoader::new(
        train_set,
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
    let val = DataLoader::new(val_set, eval_opts())?;
    let test = DataLoader::new(test_set, eval_opts())?;

    let mut lit = LitDigits::new(args.lr, args.epochs as usize, train.len())?;
    let checkpoint = ModelCheckpoint::new(ModelCheckpointOptions {
        dirpath: Some(args.root.join("checkpoints")),
        filename: Some("{epoch:02}-{val_loss:.4f}".into()),
        monitor: Some("val_loss".into()),
        save_last: true,
        ..Default::default()
    })?;
    let stopper = EarlyStopping::new("val_loss", EarlyStoppingOptions { patience: 5, ..Default::default() })?;
    let csv = CSVLogger::new(&args.root, CSVLoggerOptions::default())?;
    // The same version folder as the CSV logger's: `tensorboard --logdir ROOT` shows the run.
    let tb_options = TensorBoardLoggerOptions { version: Some(csv.version()), ..Default::default() };
    let tensorboard = TensorBoardLogger::new(&args.root, tb_options)?;
    let mut trainer = Trainer::new(TrainerOptions {
        max_epochs: Some(args.epochs as usize),
        default_root_dir: args.root.clone(),
        log_every_n_steps: 5,
        precision: args.precision.parse()?,
        callbacks: vec![Box::new(checkpoint), Box::new(stopper), Box::new(LearningRateMonitor::default())],
        logger: Some(vec![Box::new(csv), Box::new(tensorboard)]),
        ..Default::default()
    })?;
    let ckpt_path = args.resume.then_some(CkptPath::Last);
    trainer.fit(&mut lit, &train, FitOptions { val_dataloaders: Some(&val), ckpt_path })?;
    let best = trainer.checkpoint_callback().and_then(|c| c.best_model_path().map(|p| p.to_path_buf()));
    println!(
        "fit: {} epochs, {} steps; best checkpoint {}; logs in {}",
        trainer.current_epoch(),
        trainer.global_step(),
        best.as_ref().map_or("none".into(), |p| p.display().to_string()),
        trainer.log_dir().display()
    );
    let results =
        trainer.test(&mut lit, &test, EvalOptions { ckpt_path: Some(CkptPath::Best), verbose: false })?;
    let confmat = lit.test_confmat.compute()?.to_dtype(DType::F64)?.to_vec2::<f64>()?;
    let names: Vec<String> = (0..10).map(|d| d.to_string()).collect();
    let (png, _svg) = pyrite::train::plot::plot_confusion_matrix(
        &confmat,
        Some(&names),
        &trainer.log_dir().join("confusion_matrix"),
    )?;
    println!(
        "test loss {:.4}, macro F1 {:.4}; confusion matrix in {}",
        results["test_loss"],
        results["test_f1"],
        png.display()
    );
    println!("test accuracy {:.1}% in {:.1} s", 100.0 * results["test_acc"], start.elapsed().as_secs_f64());
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("fit_digits: {e}");
        std::process::exit(1);
    }
}
