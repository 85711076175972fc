//! Checkpoints in a hand-written loop: train an MLP on the digits with a `CheckpointManager`
//! (the last checkpoint and the best two by validation loss) and `EarlyStopping`; stop
//! part-way through an epoch as if killed; then resume from the last checkpoint alone and
//! finish. The resumed run continues exactly where the first one stopped.
//!
//! ```text
//! cargo run --release -p pyrite --example checkpoint_resume -- [--out DIR]
//! ```

use pyrite::data::{DataLoader, DataLoaderOptions, DataLoaderState, Dataset};
use pyrite::nn::{self, Dropout, Linear, Module, ModuleBase, StateDict};
use pyrite::optim::lr_scheduler::{
    LRScheduler, SchedulerStateDict, SchedulerStateObject, StepLR, StepLROptions,
};
use pyrite::optim::{Adam, AdamOptions, Optimizer, OptimizerStateDict};
use pyrite::prelude::*;
use pyrite::serialization::{load, Object};
use pyrite::train::{CheckpointManager, CheckpointOptions, EarlyStopping, EarlyStoppingOptions, Mode};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::vision::transforms::{RandomCrop, RandomCropOptions};
use pyrite::Generator;
use std::path::PathBuf;
use std::sync::Arc;

const EPOCHS: usize = 6;

#[derive(nn::Module)]
struct Mlp {
    base: ModuleBase,
    fc1: Linear,
    drop: Dropout,
    fc2: Linear,
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.fc1.call(&x.flatten(1, -1)?)?.relu()?;
        self.fc2.call(&self.drop.call(&h)?)
    }
}

struct Run {
    model: Mlp,
    opt: Adam,
    sched: StepLR,
    loader: DataLoader,
    manager: CheckpointManager,
    stopper: EarlyStopping,
    val: (Tensor, Tensor),
}

fn build(out: &PathBuf) -> Result<Run> {
    pyrite::manual_seed(0);
    let shift =
        RandomCrop::with_options(8, RandomCropOptions { padding: Some(vec![1]), ..Default::default() });
    let train: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?.with_transform(shift));
    let loader = DataLoader::new(
        train,
        DataLoaderOptions {
            batch_size: Some(64),
            shuffle: true,
            num_workers: 2,
            persistent_workers: true,
            generator: Some(Arc::new(Generator::new(0))),
            ..Default::default()
        },
    )?;
    let model = Mlp {
        base: ModuleBase::new(),
        fc1: Linear::new(64, 64)?,
        drop: Dropout::new(0.2)?,
        fc2: Linear::new(64, 10)?,
    };
    let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 5e-3, ..Default::default() })?;
    let sched = StepLR::new(&mut opt, 2, StepLROptions { gamma: 0.5, ..Default::default() })?;
    let manager = CheckpointManager::new(
        out,
        CheckpointOptions {
            filename: "epoch={epoch:02}-step={step}-val_loss={val_loss:.4f}.pt".into(),
            monitor: Some("val_loss".into()),
            mode: Mode::Min,
            save_top_k: 2,
            keep_last: 1,
        },
    )?;
    let stopper = EarlyStopping::new(EarlyStoppingOptions {
        patience: 2,
        restore_best_weights: true,
        ..Default::default()
    })?;
    Ok(Run { model, opt, sched, loader, manager, stopper, val: Digits::new(DigitsSplit::Test)?.tensors()? })
}

fn val_loss(run: &Run) -> Result<f64> {
    run.model.eval();
    let _g = pyrite::autograd::no_grad();
    let loss = F::cross_entropy(&run.model.call(&run.val.0)?, &run.val.1, &Default::default())?;
    run.model.train();
    Ok(loss.item::<f32>()? as f64)
}

/// The full checkpoint: PyTorch's tutorial keys, the RNG state and the loader's position.
fn checkpoint(run: &Run, epoch: usize, step: usize, loss: f64) -> Result<Object> {
    Ok(Object::from_pairs([
        ("epoch", Object::from(epoch as i64)),
        ("step", Object::from(step as i64)),
        ("model_state_dict", run.model.state_dict()?.to_object()),
        ("optimizer_state_dict", run.opt.state_dict().to_object()?),
        ("scheduler_state_dict", run.sched.state_dict().to_object()?),
        ("loss", Object::Float(loss)),
        ("rng_state", Object::from(pyrite::get_rng_state())),
        ("dataloader", run.loader.state_dict().to_object()),
    ]))
}

/// Trains from `epoch`; saves every 10 steps and at each epoch's end; `kill_at` stops the
/// run (without any goodbye) after that step.
fn train(run: &mut Run, first_epoch: usize, mut step: usize, kill_at: Option<usize>) -> Result<()> {
    run.model.train();
    for epoch in first_epoch..EPOCHS {
        let mut last = 0.0;
        for batch in run.loader.iter()? {
            let batch = batch?;
            let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
            run.opt.zero_grad()?;
            let loss = F::cross_entropy(&run.model.call(x)?, y, &Default::default())?;
            loss.backward()?;
            run.opt.step()?;
            step += 1;
            last = loss.item::<f32>()? as f64;
            if step.is_multiple_of(10) {
                let v = val_loss(run)?;
                run.manager.save(
                    &checkpoint(run, epoch, step, last)?,
                    epoch as u64,
                    step as u64,
                    &[("val_loss", v)],
                )?;
            }
            if kill_at == Some(step) {
                println!("stopped at step {step} (epoch {epoch}, mid-epoch)");
                return Ok(());
            }
        }
        run.sched.step(&mut run.opt)?;
        let v = val_loss(run)?;
        let path = run.manager.save(
            &checkpoint(run, epoch, step, last)?,
            epoch as u64,
            step as u64,
            &[("val_loss", v)],
        )?;
        println!("epoch {epoch}: train loss {last:.4}, val loss {v:.4}, saved {}", path.display());
        if run.stopper.step(v, &run.model)? {
            println!(
                "early stopping at epoch {epoch}; best val loss {:.4}",
                run.stopper.best_score().unwrap_or(f64::NAN)
            );
            break;
        }
    }
    println!(
        "best checkpoint: {}",
        run.manager.best_path().map(|p| p.display().to_string()).unwrap_or_default()
    );
    Ok(())
}

/// Trains, stops mid-epoch as if killed, and resumes exactly from the last checkpoint.
#[derive(clap::Parser)]
struct Args {
    /// The checkpoint folder (default: `pyrite-checkpoint-resume` in the temporary folder).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = <Args as clap::Parser>::parse();
    let out = args.out.unwrap_or_else(|| std::env::temp_dir().join("pyrite-checkpoint-resume"));
    let _ = std::fs::remove_dir_all(&out);
    let mut run = build(&out)?;
    train(&mut run, 0, 0, Some(35))?;
    drop(run); // as if the process had been killed

    let mut run = build(&out)?;
    let last = run.manager.last_path().expect("a checkpoint").to_path_buf();
    let ck = load(&last)?;
    let get = |k: &str| {
        ck.get(k).ok_or_else(|| pyrite::Error::new(pyrite::ErrorKind::Value, format!("missing {k}")))
    };
    run.model.load_state_dict(&StateDict::from_object(get("model_state_dict")?)?, true)?;
    run.opt.load_state_dict(&OptimizerStateDict::from_object(get("optimizer_state_dict")?)?)?;
    run.sched.load_state_dict(&SchedulerStateDict::from_object(get("scheduler_state_dict")?)?)?;
    pyrite::set_rng_state(get("rng_state")?.as_tensor().expect("a uint8 tensor"))?;
    let position = DataLoaderState::from_object(get("dataloader")?)?;
    run.loader.load_state_dict(&position)?;
    let epoch = get("epoch")?.as_int().unwrap_or(0) as usize;
    let step = get("step")?.as_int().unwrap_or(0) as usize;
    println!(
        "resuming from {} (epoch {epoch}, step {step}, {} batches of it done)",
        last.display(),
        position.batches_yielded
    );
    let first = if position.mid_epoch { epoch } else { epoch + 1 };
    train(&mut run, first, step, None)
}
