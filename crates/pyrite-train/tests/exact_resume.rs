//! Exact resume, the core promise of a checkpoint: a run on the digits (an MLP with Dropout,
//! shuffling, RandomCrop augmentation, Adam, StepLR) that saves a full checkpoint mid-epoch,
//! has everything dropped, and is rebuilt from the file alone, gives the same losses and final
//! parameters bit for bit as the uninterrupted run, for 0, 1 and 2 DataLoader workers
//! (persistent when there are workers).

use pyrite::data::{DataLoader, DataLoaderOptions, DataLoaderState, Dataset, Subset};
use pyrite::nn::{self, Dropout, Linear, Module, ModuleBase, StateDict};
use pyrite::optim::lr_scheduler::{
    LRScheduler, SchedulerStateDict, SchedulerStateObject, StepLR, StepLROptions,
};
use pyrite::optim::{Adam, AdamOptions, Optimizer, OptimizerStateDict};
use pyrite::prelude::*;
use pyrite::serialization::{load, save, Object};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::vision::transforms::{RandomCrop, RandomCropOptions};
use pyrite::Generator;
use std::path::Path;
use std::sync::Arc;

const SAMPLES: usize = 80; // 5 batches of 16 per epoch
const EPOCHS: usize = 3;

#[derive(nn::Module)]
struct Mlp {
    base: ModuleBase,
    fc1: Linear,
    drop: Dropout,
    fc2: Linear,
}

impl Mlp {
    fn new() -> Result<Mlp> {
        Ok(Mlp {
            base: ModuleBase::new(),
            fc1: Linear::new(64, 32)?,
            drop: Dropout::new(0.3)?,
            fc2: Linear::new(32, 10)?,
        })
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.fc1.call(&x.flatten(1, -1)?)?.relu()?;
        self.fc2.call(&self.drop.call(&h)?)
    }
}

/// Everything a run holds; built the same way for a fresh run and a resumed one.
struct Run {
    model: Mlp,
    opt: Adam,
    sched: StepLR,
    loader: DataLoader,
}

fn build(workers: usize) -> Result<Run> {
    pyrite::manual_seed(0);
    let shift =
        RandomCrop::with_options(8, RandomCropOptions { padding: Some(vec![1]), ..Default::default() });
    let digits: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?.with_transform(shift));
    let subset = Arc::new(Subset::new(digits, (0..SAMPLES).collect()));
    let loader = DataLoader::new(
        subset,
        DataLoaderOptions {
            batch_size: Some(16),
            shuffle: true,
            num_workers: workers,
            persistent_workers: workers > 0,
            generator: Some(Arc::new(Generator::new(7))),
            ..Default::default()
        },
    )?;
    let model = Mlp::new()?;
    let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 1e-2, ..Default::default() })?;
    let sched = StepLR::new(&mut opt, 4, StepLROptions { gamma: 0.5, ..Default::default() })?;
    Ok(Run { model, opt, sched, loader })
}

/// Trains from (`epoch`, as the loader stands) to the end, or until `stop_after` steps in all
/// (then saves a checkpoint to `save_to`). Returns the losses of the steps it ran.
fn train(
    run: &mut Run,
    start_epoch: usize,
    mut step: usize,
    stop: Option<(usize, &Path)>,
) -> Result<Vec<f32>> {
    let mut losses = vec![];
    run.model.train();
    for epoch in start_epoch..EPOCHS {
        for batch in run.loader.iter()? {
            let batch = batch?;
            let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
            run.opt.zero_grad()?;
            let loss = F::cross_entropy(&run.model.call(x)?, y, &Default::default())?;
            loss.backward()?;
            run.opt.step()?;
            run.sched.step(&mut run.opt)?;
            let value = loss.item::<f32>()?;
            losses.push(value);
            step += 1;
            if let Some((at, path)) = stop
                && step == at
            {
                save(&checkpoint(run, epoch, step, value)?, path)?;
                return Ok(losses);
            }
        }
    }
    Ok(losses)
}

/// The checkpoint dict of PyTorch's tutorials, plus the RNG state and the loader's position.
fn checkpoint(run: &Run, epoch: usize, step: usize, loss: f32) -> Result<Object> {
    Ok(Object::from_pairs([
        ("epoch", Object::from(epoch as i64)),
        ("step", Object::from(step as i64)),
        ("model_state_dict", run.model.state_dict()?.to_object()),
        ("optimizer_state_dict", run.opt.state_dict().to_object()?),
        ("scheduler_state_dict", run.sched.state_dict().to_object()?),
        ("loss", Object::Float(loss as f64)),
        ("rng_state", Object::from(pyrite::get_rng_state())),
        ("dataloader", run.loader.state_dict().to_object()),
    ]))
}

/// Rebuilds a run from the checkpoint file alone; returns it with its epoch and step.
fn resume(workers: usize, path: &Path) -> Result<(Run, usize, usize)> {
    let mut run = build(workers)?;
    pyrite::manual_seed(12345); // the resumed process's global state does not matter
    let ck = load(path)?;
    let get = |k: &str| {
        ck.get(k).ok_or_else(|| pyrite::Error::new(pyrite::ErrorKind::Value, format!("missing {k}")))
    };
    run.model.load_state_dict(&StateDict::from_object(get("model_state_dict")?)?, true)?;
    run.opt.load_state_dict(&OptimizerStateDict::from_object(get("optimizer_state_dict")?)?)?;
    run.sched.load_state_dict(&SchedulerStateDict::from_object(get("scheduler_state_dict")?)?)?;
    pyrite::set_rng_state(get("rng_state")?.as_tensor().expect("a tensor"))?;
    run.loader.load_state_dict(&DataLoaderState::from_object(get("dataloader")?)?)?;
    let epoch = get("epoch")?.as_int().expect("an int") as usize;
    let step = get("step")?.as_int().expect("an int") as usize;
    Ok((run, epoch, step))
}

fn params(run: &Run) -> Vec<Vec<u32>> {
    run.model
        .parameters()
        .iter()
        .map(|p| p.flatten(0, -1).unwrap().to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect())
        .collect()
}

#[test]
fn a_resumed_run_equals_the_uninterrupted_one_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("pyrite-exact-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for workers in [0, 1, 2] {
        let mut full = build(workers).unwrap();
        let full_losses = train(&mut full, 0, 0, None).unwrap();
        assert_eq!(full_losses.len(), EPOCHS * SAMPLES / 16);
        let full_params = params(&full);
        drop(full);
        // Mid-epoch (step 7: epoch 1, batch 2), in the first epoch, and at an epoch's end.
        for stop_at in [7, 3, 10] {
            let path = dir.join(format!("w{workers}-s{stop_at}.pt"));
            let mut first = build(workers).unwrap();
            let mut losses = train(&mut first, 0, 0, Some((stop_at, &path))).unwrap();
            drop(first);
            let (mut resumed, epoch, step) = resume(workers, &path).unwrap();
            let start = if resumed.loader.state_dict().mid_epoch { epoch } else { epoch + 1 };
            losses.extend(train(&mut resumed, start, step, None).unwrap());
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&losses), bits(&full_losses), "{workers} workers, stopped at step {stop_at}");
            assert!(
                params(&resumed) == full_params,
                "{workers} workers, stopped at step {stop_at}: parameters differ"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
