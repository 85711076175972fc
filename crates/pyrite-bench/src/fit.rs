//! The `fit_digits` workload: the digits CNN of `crates/pyrite/examples/fit_digits.rs` trained
//! by `pyrite::train::Trainer`, paired with `reference/bench/fit_digits.py` (PyTorch Lightning).
//!
//! Both sides: the vendored digits' 1437 training images split 90/10 (`random_split`, seed 0)
//! into 1294 to train on, shifted by up to a pixel (`RandomCrop(8, padding=1)`), and 143 to
//! validate on; batches of 64, shuffled, loaded in the main thread (`num_workers=0`), 256 for
//! validation; Adam with a OneCycle schedule stepped every batch (peak lr 5e-3); `EPOCHS`
//! epochs. The Trainer logs `train_loss` every step (written every `log_every_n_steps` = 50),
//! validates once per epoch (`val_loss`, `val_acc`) after the default sanity check of 2
//! batches, keeps the best checkpoint by `val_loss` and `last.ckpt` (`ModelCheckpoint`) in a
//! temporary folder, and logs to CSV; no progress bar, no model summary, no curves plot.
//!
//! - `samples_per_s`: training samples per second over `trainer.fit` (the Trainer, the module
//!   and the loaders are built before the clock starts);
//! - `plain_loop_samples_per_s`: the same training as a hand-written loop: the same model,
//!   optimizer, schedule and epochs, a validation pass per epoch and a checkpoint per epoch
//!   (model, optimizer and scheduler states, `pyrite::save`), with the same files as the
//!   Trainer's: `last.ckpt` every epoch and the best one when `val_loss` improves.
//!
//! The two run alternately, `--repeats` times each after a warm-up of each, every run from the
//! same seed; `trainer_over_plain` is the median of the per-pair ratios.

use crate::timing::{median, min, round, spread};
use crate::Args;
use pyrite::data::{random_split, DataLoader, DataLoaderOptions, Dataset, Sample, SplitLength, Subset};
use pyrite::nn::{self, Conv2d, ConvOptions, Dropout, Linear, Module, ModuleBase, PoolOptions};
use pyrite::optim::lr_scheduler::{LRScheduler, OneCycleLR, OneCycleLROptions, SchedulerStateObject};
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::prelude::*;
use pyrite::serialization::{Dict, Object};
use pyrite::train::callbacks::{ModelCheckpoint, ModelCheckpointOptions};
use pyrite::train::loggers::{CSVLogger, CSVLoggerOptions};
use pyrite::train::{
    Context, FitOptions, Interval, LightningModule, LrSchedulerConfig, OptimizerConfig, Scheduler,
    StepOutput, Trainer, TrainerOptions,
};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::vision::transforms::{RandomCrop, RandomCropOptions};
use pyrite::Generator;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

const EPOCHS: usize = 2;
const BATCH: usize = 64;
const LR: f64 = 5e-3;
const SEED: u64 = 0;

/// Two 3x3 convolutions, a 2x2 max-pool and two linear layers, with dropout (fit_digits').
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

fn xy(batch: &Sample) -> Result<(&Tensor, &Tensor)> {
    Ok((batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?))
}

fn optimizer(net: &Net, steps_per_epoch: usize) -> Result<(Adam, OneCycleLR)> {
    let mut opt = Adam::new(net.parameters(), AdamOptions { lr: LR, ..Default::default() })?;
    let sched = OneCycleLR::new(
        &mut opt,
        LR,
        OneCycleLROptions {
            epochs: Some(EPOCHS),
            steps_per_epoch: Some(steps_per_epoch),
            ..Default::default()
        },
    )?;
    Ok((opt, sched))
}

struct LitDigits {
    net: Net,
    steps_per_epoch: usize,
}

impl LightningModule for LitDigits {
    fn module(&self) -> &dyn Module {
        &self.net
    }

    fn module_mut(&mut self) -> Option<&mut dyn Module> {
        Some(&mut self.net)
    }

    fn training_step(&mut self, batch: &Sample, _batch_idx: usize, ctx: &mut Context) -> Result<StepOutput> {
        let (x, y) = xy(batch)?;
        let loss = F::cross_entropy(&self.net.call(x)?, y, &Default::default())?;
        ctx.log("train_loss", &loss)?;
        Ok(loss.into())
    }

    fn validation_step(&mut self, batch: &Sample, _batch_idx: usize, ctx: &mut Context) -> Result<()> {
        let (x, y) = xy(batch)?;
        let logits = self.net.call(x)?;
        let loss = F::cross_entropy(&logits, y, &Default::default())?;
        let acc = logits.argmax(Some(1), false)?.eq(y)?.to_dtype(DType::F32)?.mean()?;
        ctx.log("val_loss", loss)?;
        ctx.log("val_acc", acc)
    }

    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        let (opt, sched) = optimizer(&self.net, self.steps_per_epoch)?;
        let cfg =
            LrSchedulerConfig { interval: Interval::Step, ..LrSchedulerConfig::new(Scheduler::lr(sched)) };
        Ok(OptimizerConfig::new(opt).with_scheduler(cfg))
    }
}

/// The train and validation sets of fit_digits: 1294 augmented images and 143 plain ones.
fn datasets() -> Result<(Arc<dyn Dataset>, Arc<dyn Dataset>)> {
    let shift =
        RandomCrop::with_options(8, RandomCropOptions { padding: Some(vec![1]), ..Default::default() });
    let full_train: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?.with_transform(shift));
    let plain_train: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?);
    let parts = random_split(
        full_train.clone(),
        &[SplitLength::Fraction(0.9), SplitLength::Fraction(0.1)],
        Some(&Generator::new(SEED)),
    )?;
    Ok((
        Arc::new(Subset::new(full_train, parts[0].indices().to_vec())),
        Arc::new(Subset::new(plain_train, parts[1].indices().to_vec())),
    ))
}

/// Fresh loaders (the shuffling generator from the seed), so that every run does the same.
fn loaders(train: &Arc<dyn Dataset>, val: &Arc<dyn Dataset>) -> Result<(DataLoader, DataLoader)> {
    let train = DataLoader::new(
        train.clone(),
        DataLoaderOptions {
            batch_size: Some(BATCH),
            shuffle: true,
            generator: Some(Arc::new(Generator::new(SEED))),
            ..Default::default()
        },
    )?;
    let val =
        DataLoader::new(val.clone(), DataLoaderOptions { batch_size: Some(256), ..Default::default() })?;
    Ok((train, val))
}

/// One `trainer.fit` into `dir`: its seconds.
fn fit_trainer(train_set: &Arc<dyn Dataset>, val_set: &Arc<dyn Dataset>, dir: &Path) -> Result<f64> {
    pyrite::train::seed_everything(SEED);
    let (train, val) = loaders(train_set, val_set)?;
    let mut lit = LitDigits { net: Net::new()?, steps_per_epoch: train.len() };
    let checkpoint = ModelCheckpoint::new(ModelCheckpointOptions {
        dirpath: Some(dir.join("checkpoints")),
        monitor: Some("val_loss".into()),
        save_last: true,
        ..Default::default()
    })?;
    let csv = CSVLogger::new(dir, CSVLoggerOptions::default())?;
    let mut trainer = Trainer::new(TrainerOptions {
        // the CPU workload, as its Lightning side (`accelerator="cpu"`)
        accelerator: pyrite::train::Accelerator::Cpu,
        max_epochs: Some(EPOCHS),
        default_root_dir: dir.to_path_buf(),
        enable_progress_bar: false,
        plot_curves: false,
        callbacks: vec![Box::new(checkpoint)],
        logger: Some(vec![Box::new(csv)]),
        ..Default::default()
    })?;
    let t0 = Instant::now();
    trainer.fit(&mut lit, &train, FitOptions { val_dataloaders: Some(&val), ckpt_path: None })?;
    let t = t0.elapsed().as_secs_f64();
    if trainer.current_epoch() != EPOCHS
        || trainer.checkpoint_callback().and_then(|c| c.best_model_path()).is_none()
    {
        return Err(pyrite::Error::new(pyrite::ErrorKind::Value, "fit_digits: the fit did not complete"));
    }
    Ok(t)
}

/// Validation loss and accuracy without gradients.
fn evaluate(net: &Net, val: &DataLoader) -> Result<(f64, f64)> {
    net.eval();
    let _g = pyrite::autograd::no_grad();
    let (mut loss, mut acc, mut n) = (0.0, 0.0, 0usize);
    for batch in val.iter()? {
        let batch = batch?;
        let (x, y) = xy(&batch)?;
        let logits = net.call(x)?;
        let b = y.dims()[0];
        loss += F::cross_entropy(&logits, y, &Default::default())?.item::<f32>()? as f64 * b as f64;
        acc += logits.argmax(Some(1), false)?.eq(y)?.to_dtype(DType::F32)?.mean()?.item::<f32>()? as f64
            * b as f64;
        n += b;
    }
    net.train();
    Ok((loss / n as f64, acc / n as f64))
}

/// The same training as a hand-written loop into `dir`: its seconds.
fn fit_plain(train_set: &Arc<dyn Dataset>, val_set: &Arc<dyn Dataset>, dir: &Path) -> Result<f64> {
    pyrite::train::seed_everything(SEED);
    let (train, val) = loaders(train_set, val_set)?;
    let net = Net::new()?;
    let (mut opt, mut sched) = optimizer(&net, train.len())?;
    std::fs::create_dir_all(dir).map_err(|e| pyrite::Error::new(pyrite::ErrorKind::Io, e.to_string()))?;
    let t0 = Instant::now();
    let ce = Default::default();
    let mut best = f64::INFINITY;
    let mut best_path: Option<PathBuf> = None;
    let mut step = 0usize;
    for epoch in 0..EPOCHS {
        net.train();
        let mut loss_sum = 0.0;
        for batch in train.iter()? {
            let batch = batch?;
            let (x, y) = xy(&batch)?;
            let loss = F::cross_entropy(&net.call(x)?, y, &ce)?;
            opt.zero_grad()?;
            loss.backward()?;
            opt.step()?;
            sched.step(&mut opt)?;
            loss_sum += loss.item::<f32>()? as f64;
            step += 1;
        }
        let (val_loss, val_acc) = evaluate(&net, &val)?;
        let mut ck = Dict::new();
        ck.insert("epoch", Object::Int(epoch as i64));
        ck.insert("global_step", Object::Int(step as i64));
        ck.insert("model_state_dict", net.state_dict()?.to_object());
        ck.insert("optimizer_state_dict", opt.state_dict().to_object()?);
        ck.insert("lr_scheduler", sched.state_dict().to_object()?);
        ck.insert("train_loss", Object::Float(loss_sum / train.len() as f64));
        ck.insert("val_loss", Object::Float(val_loss));
        ck.insert("val_acc", Object::Float(val_acc));
        let ck = Object::Dict(ck);
        if val_loss < best {
            best = val_loss;
            let path = dir.join(format!("epoch={epoch}-step={step}.ckpt"));
            pyrite::save(&ck, &path)?;
            if let Some(old) = best_path.replace(path) {
                std::fs::remove_file(old).ok();
            }
        }
        pyrite::save(&ck, dir.join("last.ckpt"))?;
    }
    Ok(t0.elapsed().as_secs_f64())
}

pub fn fit_digits(args: &Args) -> Map<String, Value> {
    let (train_set, val_set) = datasets().expect("digits");
    let n = train_set.len();
    let root = std::env::temp_dir().join(format!("pyrite-bench-fit-digits-{}", std::process::id()));
    let mut run = 0;
    let mut fresh = || {
        run += 1;
        let d = root.join(format!("run{run}"));
        std::fs::remove_dir_all(&d).ok();
        d
    };
    // Warm-up: one of each.
    fit_trainer(&train_set, &val_set, &fresh()).expect("fit");
    fit_plain(&train_set, &val_set, &fresh()).expect("plain loop");
    let (mut tt, mut tp, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.repeats {
        let a = fit_trainer(&train_set, &val_set, &fresh()).expect("fit");
        let b = fit_plain(&train_set, &val_set, &fresh()).expect("plain loop");
        tt.push(a);
        tp.push(b);
        ratios.push(b / a);
    }
    std::fs::remove_dir_all(&root).ok();
    let samples = (EPOCHS * n) as f64;
    let steps = EPOCHS * n.div_ceil(BATCH);
    let mut res = Map::new();
    res.insert("train_samples".into(), json!(n));
    res.insert("val_samples".into(), json!(val_set.len()));
    res.insert("epochs".into(), json!(EPOCHS));
    res.insert("steps".into(), json!(steps));
    res.insert("fit_time_s".into(), json!(round(median(&tt), 4)));
    res.insert("samples_per_s".into(), json!(round(samples / median(&tt), 1)));
    res.insert("samples_per_s_best".into(), json!(round(samples / min(&tt), 1)));
    res.insert("us_per_step".into(), json!(round(median(&tt) / steps as f64 * 1e6, 1)));
    res.insert("spread".into(), json!(spread(&tt)));
    res.insert("plain_loop_time_s".into(), json!(round(median(&tp), 4)));
    res.insert("plain_loop_samples_per_s".into(), json!(round(samples / median(&tp), 1)));
    res.insert("plain_loop_samples_per_s_best".into(), json!(round(samples / min(&tp), 1)));
    res.insert("plain_loop_spread".into(), json!(spread(&tp)));
    res.insert("trainer_over_plain".into(), json!(round(median(&ratios), 4)));
    res.insert("optimizer".into(), json!("pyrite::optim::Adam + OneCycleLR(max_lr=5e-3), per step"));
    res
}
