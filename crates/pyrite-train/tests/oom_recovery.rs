//! In-flight out-of-memory recovery by micro-batches, as a specification: a batch that does
//! not fit is trained in micro-batches with one optimizer step per batch, and for a model
//! without BatchNorm the run equals one that never ran out of memory; an out-of-memory even
//! at micro-batch size 1 is returned; nothing of a failed attempt stays allocated.
//!
//! The memory limit, the allocator's statistics and the global generator are process-wide:
//! every test here takes the same lock, so they run one at a time.

use pyrite::data::{DataLoader, DataLoaderOptions, Sample, TensorDataset};
use pyrite::memory::{
    empty_cache, max_memory_allocated, memory_allocated, memory_reserved, reset_peak_memory_stats,
    set_memory_limit,
};
use pyrite::nn::{BatchNorm1d, Linear, Module, ReLU, Sequential};
use pyrite::optim::{Optimizer, SGDOptions, SGD};
use pyrite::prelude::*;
use pyrite::train::oom::{MicroBatching, OomRecovery};
use pyrite::train::{
    Callback, Context, FitOptions, LightningModule, LogOptions, OptimizerConfig, StepOutput, Trainer,
    TrainerOptions,
};
use pyrite::{manual_seed, Device, Error, ErrorKind};
use std::sync::{Arc, Mutex};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes the memory limit off when a test ends, even when it fails.
struct NoLimitAfter;
impl Drop for NoLimitAfter {
    fn drop(&mut self) {
        set_memory_limit(None, Device::Cpu).unwrap();
    }
}

const IN: usize = 32;
const HIDDEN: usize = 1024;
const BATCH: usize = 256;

/// Wide and shallow: a step's memory is mostly activations, which grow with the batch.
fn mlp(batch_norm: bool) -> Sequential {
    manual_seed(3);
    let mut m = Sequential::new();
    m.push(Linear::new(IN, HIDDEN).unwrap());
    if batch_norm {
        m.push(BatchNorm1d::new(HIDDEN).unwrap());
    }
    m.push(ReLU::new());
    m.push(Linear::new(HIDDEN, 1).unwrap());
    m.to_dtype(DType::F64).unwrap();
    m
}

fn sgd(m: &Sequential) -> SGD {
    SGD::new(m.parameters(), SGDOptions { lr: 0.05, momentum: 0.9, ..Default::default() }).unwrap()
}

fn data(n: usize) -> (Tensor, Tensor) {
    manual_seed(11);
    let x = Tensor::randn([n, IN], DType::F64).unwrap();
    let y = Tensor::randn([n, 1], DType::F64).unwrap();
    (x, y)
}

fn batch(x: &Tensor, y: &Tensor, i: usize) -> Sample {
    let start = (i * BATCH) as isize;
    (x.narrow(0, start, BATCH).unwrap(), y.narrow(0, start, BATCH).unwrap()).into()
}

fn mse(m: &Sequential, b: &Sample) -> Result<Tensor> {
    let (x, y) = (b.item(0)?.as_tensor()?, b.item(1)?.as_tensor()?);
    F::mse_loss(&m.call(x)?, y, Default::default())
}

fn flat(m: &dyn Module) -> Vec<f64> {
    let sd = m.state_dict().unwrap();
    sd.iter()
        .flat_map(|(_, t)| t.to_dtype(DType::F64).unwrap().flatten(0, -1).unwrap().to_vec::<f64>().unwrap())
        .collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

fn param_bytes(m: &Sequential) -> u64 {
    m.parameters().iter().map(|p| (p.numel() * 8) as u64).sum()
}

/// The peak of live bytes a whole step at `bs` adds (gradients included, momentum held).
fn need(x: &Tensor, y: &Tensor, bs: usize) -> u64 {
    let m = mlp(false);
    let mut opt = sgd(&m);
    let b: Sample = (x.narrow(0, 0, bs).unwrap(), y.narrow(0, 0, bs).unwrap()).into();
    opt.zero_grad().unwrap();
    mse(&m, &b).unwrap().backward().unwrap();
    opt.step().unwrap();
    opt.zero_grad().unwrap();
    empty_cache();
    let before = memory_allocated(Device::Cpu).unwrap();
    reset_peak_memory_stats(Device::Cpu).unwrap();
    mse(&m, &b).unwrap().backward().unwrap();
    opt.step().unwrap();
    let peak = max_memory_allocated(Device::Cpu).unwrap() - before;
    opt.zero_grad().unwrap();
    peak
}

/// A budget in which a quarter batch fits and half a batch does not, with room for what a
/// recovering step holds besides: the momentum and a second copy of the gradients (later
/// micro-batches compute theirs apart before adding them).
fn budget(x: &Tensor, y: &Tensor) -> u64 {
    let (q, h) = (need(x, y, BATCH / 4), need(x, y, BATCH / 2));
    assert!(
        h > q + (1 << 20),
        "a step's memory grows with the batch: {q} at {}, {h} at {}",
        BATCH / 4,
        BATCH / 2
    );
    let p = param_bytes(&mlp(false));
    (q + h) / 2 + 2 * p
}

#[test]
fn a_plain_loop_that_runs_out_of_memory_trains_on_in_micro_batches_and_equals_an_unlimited_run() {
    let _s = serial();
    let _nolimit = NoLimitAfter;
    let (x, y) = data(4 * BATCH);
    let steps = 8;
    // The reference: whole batches, no limit.
    let (reference, ref_losses) = {
        let m = mlp(false);
        let mut opt = sgd(&m);
        let mut losses = vec![];
        for s in 0..steps {
            opt.zero_grad().unwrap();
            let loss = mse(&m, &batch(&x, &y, s % 4)).unwrap();
            losses.push(loss.item::<f64>().unwrap());
            loss.backward().unwrap();
            opt.step().unwrap();
        }
        (flat(&m), losses)
    };
    let budget = budget(&x, &y);
    let m = mlp(false);
    let mut opt = sgd(&m);
    let mut micro = MicroBatching::new(m.parameters(), OomRecovery::default()).unwrap();
    empty_cache();
    set_memory_limit(Some(memory_reserved(Device::Cpu).unwrap() + budget), Device::Cpu).unwrap();
    // Without recovery, a whole batch does not fit.
    let e = (|| -> Result<()> {
        opt.zero_grad()?;
        mse(&m, &batch(&x, &y, 0))?.backward()
    })()
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    opt.zero_grad().unwrap();
    let mut levels = vec![];
    let mut losses = vec![];
    for s in 0..steps {
        let before = memory_allocated(Device::Cpu).unwrap();
        let loss = micro.step(&mut opt, &batch(&x, &y, s % 4), |b: &Sample| mse(&m, b)).unwrap();
        losses.push(loss);
        let after = memory_allocated(Device::Cpu).unwrap();
        levels.push((before, after));
    }
    set_memory_limit(None, Device::Cpu).unwrap();
    let n = micro.micro_batch_size().expect("the batch was split");
    assert!(n <= BATCH / 2, "micro-batches of {n}");
    assert!(micro.num_splits() >= 1);
    // The same parameters and losses as the run that never ran out of memory.
    let d = max_diff(&flat(&m), &reference);
    assert!(d < 1e-6, "parameters differ by {d}");
    assert!(max_diff(&losses, &ref_losses) < 1e-9, "{losses:?} vs {ref_losses:?}");
    // Nothing of a failed attempt stays: after the first step, the model, its gradients and
    // the momentum only; from then on every step ends where it started.
    let p = param_bytes(&m);
    assert!(levels[0].1 <= levels[0].0 + 2 * p + (64 << 10), "{levels:?}");
    for (before, after) in &levels[1..] {
        assert_eq!(before, after, "{levels:?}");
    }
}

#[test]
fn out_of_memory_even_at_micro_batch_size_one_is_returned() {
    let _s = serial();
    let _nolimit = NoLimitAfter;
    let (x, y) = data(BATCH);
    let m = mlp(false);
    let mut opt = sgd(&m);
    let mut micro =
        MicroBatching::new(m.parameters(), OomRecovery { verbose: false, ..Default::default() }).unwrap();
    empty_cache();
    let before = memory_allocated(Device::Cpu).unwrap();
    set_memory_limit(Some(memory_reserved(Device::Cpu).unwrap() + 1024), Device::Cpu).unwrap();
    let e = micro.step(&mut opt, &batch(&x, &y, 0), |b: &Sample| mse(&m, b)).unwrap_err();
    set_memory_limit(None, Device::Cpu).unwrap();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(e.to_string().contains("micro-batch of 1 sample"), "{e}");
    // 256, 128, ..., 1: eight splits, then the error.
    assert_eq!(micro.num_splits(), 8);
    assert_eq!(micro.micro_batch_size(), Some(1));
    assert!(m.parameters().iter().all(|p| p.grad().is_none()));
    assert_eq!(memory_allocated(Device::Cpu).unwrap(), before);
    // A floor above 1 stops there.
    let mut micro =
        MicroBatching::new(m.parameters(), OomRecovery { min_micro_batch_size: 32, verbose: false }).unwrap();
    let mut calls = vec![];
    let e = micro
        .backward(&batch(&x, &y, 0), |b: &Sample| {
            calls.push(b.item(0)?.as_tensor()?.dims()[0]);
            Err(Error::new(ErrorKind::OutOfMemory, "pretend"))
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    assert_eq!(calls, vec![256, 128, 64, 32]);
}

#[test]
fn other_errors_and_bad_options() {
    let _s = serial();
    let m = mlp(false);
    assert_eq!(
        MicroBatching::new(m.parameters(), OomRecovery { min_micro_batch_size: 0, ..Default::default() })
            .err()
            .map(|e| e.kind()),
        Some(ErrorKind::Value)
    );
    assert!(Trainer::new(TrainerOptions {
        oom_recovery: Some(OomRecovery { min_micro_batch_size: 0, ..Default::default() }),
        ..Default::default()
    })
    .is_err());
    let (x, y) = data(BATCH);
    let mut micro = MicroBatching::new(m.parameters(), OomRecovery::default()).unwrap();
    let mut calls = 0;
    let e = micro
        .backward(&batch(&x, &y, 0), |_b: &Sample| {
            calls += 1;
            Err(Error::new(ErrorKind::Shape, "not an OOM"))
        })
        .unwrap_err();
    assert_eq!((e.kind(), calls), (ErrorKind::Shape, 1));
    assert_eq!(micro.micro_batch_size(), None);
    // A tensor whose first dimension is not the batch cannot be split.
    let odd: Sample = (x.clone(), Tensor::zeros([3, 1], DType::F64).unwrap()).into();
    let e = micro
        .backward(&odd, |b: &Sample| {
            if b.item(0)?.as_tensor()?.dims()[0] == BATCH {
                return Err(Error::new(ErrorKind::OutOfMemory, "pretend"));
            }
            Tensor::zeros([], DType::F64)
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value, "{e}");
}

/// Runs `steps` steps with whole batches, or with micro-batches forced by an out-of-memory
/// raised after the forward of any piece larger than `fits` (as a backward that runs out of
/// memory would). Returns the model.
fn run_forced(batch_norm: bool, steps: usize, fits: Option<usize>) -> Sequential {
    let (x, y) = data(4 * BATCH);
    let m = mlp(batch_norm);
    let mut opt = sgd(&m);
    let mut micro =
        MicroBatching::new(m.parameters(), OomRecovery { verbose: false, ..Default::default() }).unwrap();
    for s in 0..steps {
        micro
            .step(&mut opt, &batch(&x, &y, s % 4), |b: &Sample| {
                let loss = mse(&m, b)?;
                let n = b.item(0)?.as_tensor()?.dims()[0];
                if fits.is_some_and(|f| n > f) {
                    return Err(Error::new(ErrorKind::OutOfMemory, "pretend"));
                }
                Ok(loss)
            })
            .unwrap();
    }
    m
}

#[test]
fn with_batch_norm_the_statistics_are_the_micro_batches() {
    let _s = serial();
    let steps = 6;
    let whole = run_forced(true, steps, None);
    let split = run_forced(true, steps, Some(BATCH / 4));
    let buffers = |m: &Sequential| -> Vec<(String, Vec<f64>)> {
        m.state_dict()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.contains("running") || k.contains("num_batches"))
            .map(|(k, t)| {
                (
                    k.to_string(),
                    t.to_dtype(DType::F64).unwrap().flatten(0, -1).unwrap().to_vec::<f64>().unwrap(),
                )
            })
            .collect()
    };
    let (bw, bs) = (buffers(&whole), buffers(&split));
    let tracked =
        |b: &[(String, Vec<f64>)]| b.iter().find(|(k, _)| k.ends_with("num_batches_tracked")).unwrap().1[0];
    // One update per forward: the whole batches; for the split run the two failed attempts of
    // the first step (256 and 128, whose forward ran), then four micro-batches per step.
    assert_eq!(tracked(&bw), steps as f64);
    assert_eq!(tracked(&bs), (2 + 4 * steps) as f64);
    // The running statistics and the weights differ: each micro-batch was normalised with
    // its own mean and variance.
    let mean =
        |b: &[(String, Vec<f64>)]| b.iter().find(|(k, _)| k.ends_with("running_mean")).unwrap().1.clone();
    assert!(max_diff(&mean(&bw), &mean(&bs)) > 1e-4);
    let weights = |m: &Sequential| -> Vec<f64> {
        m.parameters().iter().flat_map(|p| p.flatten(0, -1).unwrap().to_vec::<f64>().unwrap()).collect()
    };
    assert!(max_diff(&weights(&whole), &weights(&split)) > 1e-6);
    // In eval mode (running statistics), the outputs differ too.
    whole.eval();
    split.eval();
    let (x, _) = data(8);
    let d = max_diff(
        &whole.call(&x).unwrap().flatten(0, -1).unwrap().to_vec::<f64>().unwrap(),
        &split.call(&x).unwrap().flatten(0, -1).unwrap().to_vec::<f64>().unwrap(),
    );
    assert!(d > 1e-6, "outputs differ by {d}");
    // Without BatchNorm the same forced split gives the whole-batch weights.
    let d =
        max_diff(&flat(&run_forced(false, steps, None)), &flat(&run_forced(false, steps, Some(BATCH / 4))));
    assert!(d < 1e-12, "without BatchNorm: {d}");
}

// ----- the Trainer's `oom_recovery` -----

struct Regression {
    net: Sequential,
    seen: Arc<Mutex<Vec<usize>>>,
}

impl LightningModule for Regression {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, _i: usize, ctx: &mut Context) -> Result<StepOutput> {
        self.seen.lock().unwrap().push(batch.item(0)?.as_tensor()?.dims()[0]);
        let loss = mse(&self.net, batch)?;
        ctx.log_with(
            "train_loss",
            &loss,
            &LogOptions { on_step: Some(true), on_epoch: Some(true), ..Default::default() },
        )?;
        Ok(loss.into())
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        Ok(OptimizerConfig::new(sgd(&self.net)))
    }
}

/// Sets the memory limit at what is held now plus a budget, at the start of `fit`.
struct LimitAtFitStart(u64);
impl Callback for LimitAtFitStart {
    fn on_fit_start(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        empty_cache();
        set_memory_limit(Some(memory_reserved(Device::Cpu)? + self.0), Device::Cpu)
    }
}

fn trainer(oom_recovery: Option<OomRecovery>, limit: Option<u64>) -> Trainer {
    let callbacks: Vec<Box<dyn Callback>> = match limit {
        Some(b) => vec![Box::new(LimitAtFitStart(b))],
        None => vec![],
    };
    Trainer::new(TrainerOptions {
        max_epochs: Some(2),
        num_sanity_val_steps: 0,
        enable_progress_bar: false,
        enable_checkpointing: false,
        plot_curves: false,
        logger: Some(vec![]),
        log_every_n_steps: 1,
        default_root_dir: std::env::temp_dir(),
        oom_recovery,
        callbacks,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn the_trainer_recovers_in_micro_batches_and_equals_an_unlimited_run() {
    let _s = serial();
    let _nolimit = NoLimitAfter;
    let (x, y) = data(4 * BATCH);
    let loader = || {
        let ds = Arc::new(TensorDataset::new(vec![x.clone(), y.clone()]).unwrap());
        DataLoader::new(ds, DataLoaderOptions { batch_size: Some(BATCH), ..Default::default() }).unwrap()
    };
    let budget = budget(&x, &y);
    let fit = |t: &mut Trainer| -> (Result<()>, Regression) {
        let mut module = Regression { net: mlp(false), seen: Default::default() };
        let r = t.fit(&mut module, &loader(), FitOptions::default());
        set_memory_limit(None, Device::Cpu).unwrap();
        (r, module)
    };
    let mut plain = trainer(None, None);
    let (r, reference) = fit(&mut plain);
    r.unwrap();
    // Under the limit, without recovery, fit fails...
    let (r, _) = fit(&mut trainer(None, Some(budget)));
    assert_eq!(r.unwrap_err().kind(), ErrorKind::OutOfMemory);
    // ...and with it, fit trains on.
    let mut t = trainer(Some(OomRecovery::default()), Some(budget));
    let (r, recovered) = fit(&mut t);
    r.unwrap();
    let d = max_diff(&flat(&recovered.net), &flat(&reference.net));
    assert!(d < 1e-6, "parameters differ by {d}");
    assert_eq!(t.global_step(), plain.global_step());
    assert_eq!(t.global_step(), 8);
    let n = t.callback_metrics()["micro_batch_size"] as usize;
    assert!(n <= BATCH / 2 && BATCH.is_multiple_of(n), "micro-batches of {n}");
    // The first batch: the whole batch and the halves failed; then micro-batches of n.
    let seen = recovered.seen.lock().unwrap().clone();
    assert_eq!(seen[0], BATCH);
    assert_eq!(seen.iter().filter(|&&b| b == n).count(), 8 * BATCH / n, "{seen:?}");
    // What was logged is the batch's: the step values are the micro-batches' mean, the epoch
    // value the mean over the epoch, and the history has a micro_batch_size curve.
    for name in ["train_loss_step", "train_loss_epoch"] {
        let (a, b) = (t.callback_metrics()[name], plain.callback_metrics()[name]);
        assert!((a - b).abs() < 1e-9, "{name}: {a} vs {b}");
    }
    let (ha, hb) = (&t.history()["train_loss_step"], &plain.history()["train_loss_step"]);
    assert_eq!(ha.len(), hb.len());
    for (a, b) in ha.iter().zip(hb) {
        assert_eq!(a.0, b.0);
        assert!((a.1 - b.1).abs() < 1e-9, "{ha:?} vs {hb:?}");
    }
    assert!(t.history()["micro_batch_size"].iter().all(|p| p.1 == n as f64));
}
