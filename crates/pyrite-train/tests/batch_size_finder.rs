//! The batch-size finder as a specification: Lightning's power and binsearch searches, on a
//! closure and in the Trainer, against the CPU allocator's memory limit.
//!
//! The memory limit and the allocator's statistics are process-wide, and so is the global
//! generator: every test here takes the same lock, so they run one at a time.

use pyrite::data::{DataLoader, DataLoaderOptions, Sample, TensorDataset};
use pyrite::memory::{
    empty_cache, max_memory_allocated, memory_allocated, memory_reserved, reset_peak_memory_stats,
    set_memory_limit,
};
use pyrite::nn::{Linear, Module, ReLU, Sequential, StateDict};
use pyrite::optim::{Optimizer, SGDOptions, SGD};
use pyrite::prelude::*;
use pyrite::train::callbacks::BatchSizeFinder;
use pyrite::train::tuner::{scale_batch_size, BatchSizeMode, ScaleBatchSizeOptions, Tuner};
use pyrite::train::{
    Context, FitOptions, LightningModule, OptimizerConfig, StepOutput, Trainer, TrainerOptions,
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

fn oom() -> Error {
    Error::new(ErrorKind::OutOfMemory, "out of memory (pretend)")
}

/// A pretend step that fits up to `max` samples, recording every call.
fn pretend(max: usize, calls: &Mutex<Vec<usize>>) -> impl FnMut(usize) -> Result<()> + '_ {
    move |bs| {
        calls.lock().unwrap().push(bs);
        if bs > max {
            Err(oom())
        } else {
            Ok(())
        }
    }
}

fn sizes(calls: &Mutex<Vec<usize>>, steps: usize) -> Vec<usize> {
    let c = calls.lock().unwrap();
    let mut out: Vec<usize> = vec![];
    let mut i = 0;
    while i < c.len() {
        out.push(c[i]);
        // A trial is `steps` calls, or fewer when one fails.
        let mut j = i + 1;
        while j < c.len() && j - i < steps && c[j] == c[i] {
            j += 1;
        }
        i = j;
    }
    out
}

#[test]
fn power_doubles_until_out_of_memory_and_keeps_the_last_size_that_fitted() {
    let _s = serial();
    let calls = Mutex::new(vec![]);
    let found = scale_batch_size(pretend(100, &calls), ScaleBatchSizeOptions::default()).unwrap();
    assert_eq!(found, 64);
    // Three steps per size that fits, one for the size that fails.
    let c = calls.lock().unwrap().clone();
    let mut expected = vec![];
    for bs in [2, 4, 8, 16, 32, 64] {
        expected.extend([bs; 3]);
    }
    expected.push(128);
    assert_eq!(c, expected);
}

#[test]
fn power_halves_from_a_first_size_that_does_not_fit() {
    let _s = serial();
    let calls = Mutex::new(vec![]);
    let o = ScaleBatchSizeOptions { init_val: 64, steps_per_trial: 1, ..Default::default() };
    assert_eq!(scale_batch_size(pretend(20, &calls), o).unwrap(), 16);
    // 32 is known to fail: it is not tried again.
    assert_eq!(*calls.lock().unwrap(), vec![64, 32, 16]);
}

#[test]
fn binsearch_bisects_to_the_largest_size_that_fits_then_applies_the_margin() {
    let _s = serial();
    let calls = Mutex::new(vec![]);
    let o = ScaleBatchSizeOptions { mode: BatchSizeMode::BinSearch, margin: 0.0, ..Default::default() };
    assert_eq!(scale_batch_size(pretend(100, &calls), o).unwrap(), 100);
    assert_eq!(sizes(&calls, 3), vec![2, 4, 8, 16, 32, 64, 128, 96, 112, 104, 100, 102, 101]);
    // Lightning's default margin: 5 % off.
    let calls = Mutex::new(vec![]);
    let o = ScaleBatchSizeOptions { mode: "BinSearch".parse().unwrap(), ..Default::default() };
    assert_eq!(o.margin, 0.05);
    assert_eq!(scale_batch_size(pretend(100, &calls), o).unwrap(), 95);
    // A first size that fails: bisect down from it.
    let calls = Mutex::new(vec![]);
    let o = ScaleBatchSizeOptions {
        mode: BatchSizeMode::BinSearch,
        init_val: 64,
        steps_per_trial: 1,
        margin: 0.0,
        ..Default::default()
    };
    assert_eq!(scale_batch_size(pretend(5, &calls), o).unwrap(), 5);
    assert_eq!(*calls.lock().unwrap(), vec![64, 32, 16, 8, 4, 6, 5]);
}

#[test]
fn lightning_defaults() {
    let o = ScaleBatchSizeOptions::default();
    assert_eq!(o.mode, BatchSizeMode::Power);
    assert_eq!((o.steps_per_trial, o.init_val, o.max_trials, o.max_val), (3, 2, 25, 8192));
    assert_eq!(o.batch_arg_name, "batch_size");
    assert_eq!(o.margin, 0.05);
    assert_eq!(o.dataset_len, None);
}

#[test]
fn at_most_max_trials_times_steps_per_trial_steps() {
    let _s = serial();
    for mode in [BatchSizeMode::Power, BatchSizeMode::BinSearch] {
        for (max, max_trials, steps) in [(usize::MAX, 5, 3), (1000, 4, 2), (100, 8, 3), (37, 25, 4)] {
            let calls = Mutex::new(vec![]);
            let o = ScaleBatchSizeOptions { mode, max_trials, steps_per_trial: steps, ..Default::default() };
            let found = scale_batch_size(pretend(max, &calls), o).unwrap();
            let n = calls.lock().unwrap().len();
            assert!(n <= max_trials * steps, "{mode:?} max {max}: {n} steps for {max_trials} x {steps}");
            assert!(found <= max);
        }
    }
    // Everything fits: exactly max_trials trials, and the last size tried is the result.
    let calls = Mutex::new(vec![]);
    let o = ScaleBatchSizeOptions { max_trials: 5, ..Default::default() };
    assert_eq!(scale_batch_size(pretend(usize::MAX, &calls), o).unwrap(), 32);
    assert_eq!(calls.lock().unwrap().len(), 15);
}

#[test]
fn growth_stops_at_max_val_and_at_the_dataset_length() {
    let _s = serial();
    let calls = Mutex::new(vec![]);
    let o = ScaleBatchSizeOptions { init_val: 3, max_val: 40, steps_per_trial: 1, ..Default::default() };
    assert_eq!(scale_batch_size(pretend(usize::MAX, &calls), o).unwrap(), 40);
    assert_eq!(*calls.lock().unwrap(), vec![3, 6, 12, 24, 40]);
    // Lightning: a size that fitted at or past the dataset's length ends the growth.
    let calls = Mutex::new(vec![]);
    let o = ScaleBatchSizeOptions { dataset_len: Some(50), steps_per_trial: 1, ..Default::default() };
    assert_eq!(scale_batch_size(pretend(usize::MAX, &calls), o).unwrap(), 64);
    assert_eq!(*calls.lock().unwrap(), vec![2, 4, 8, 16, 32, 64]);
}

#[test]
fn out_of_memory_even_at_batch_size_one_is_the_error() {
    let _s = serial();
    for mode in [BatchSizeMode::Power, BatchSizeMode::BinSearch] {
        let calls = Mutex::new(vec![]);
        let o = ScaleBatchSizeOptions { mode, init_val: 8, ..Default::default() };
        let e = scale_batch_size(pretend(0, &calls), o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
        assert_eq!(*calls.lock().unwrap(), vec![8, 4, 2, 1], "{mode:?}");
    }
}

#[test]
fn errors_other_than_out_of_memory_are_returned_at_once() {
    let _s = serial();
    let mut calls = 0;
    let e = scale_batch_size(
        |bs| {
            calls += 1;
            if bs >= 16 {
                pyrite::bail!(Value, "bad batch of {bs}");
            }
            Ok(())
        },
        ScaleBatchSizeOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("bad batch of 16"), "{e}");
    assert_eq!(calls, 3 * 3 + 1);
}

#[test]
fn bad_options_are_errors() {
    let ok = |_bs: usize| -> Result<()> { Ok(()) };
    let bad = [
        ScaleBatchSizeOptions { steps_per_trial: 0, ..Default::default() },
        ScaleBatchSizeOptions { init_val: 0, ..Default::default() },
        ScaleBatchSizeOptions { max_trials: 0, ..Default::default() },
        ScaleBatchSizeOptions { margin: 1.0, ..Default::default() },
        ScaleBatchSizeOptions { margin: -0.1, ..Default::default() },
        ScaleBatchSizeOptions { margin: f64::NAN, ..Default::default() },
        ScaleBatchSizeOptions { max_val: 0, ..Default::default() },
        ScaleBatchSizeOptions { init_val: 16, max_val: 8, ..Default::default() },
        ScaleBatchSizeOptions { dataset_len: Some(0), ..Default::default() },
    ];
    for o in bad {
        let e = scale_batch_size(ok, o.clone()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Value, "{o:?}: {e}");
        assert!(BatchSizeFinder::new(o).is_err());
    }
    let e = "doubling".parse::<BatchSizeMode>().unwrap_err();
    assert!(e.to_string().contains("power") && e.to_string().contains("binsearch"), "{e}");
}

// ----- a real model against the memory limit -----

const IN: usize = 64;
const HIDDEN: usize = 384;

fn mlp() -> Sequential {
    manual_seed(3);
    let mut m = Sequential::new();
    m.push(Linear::new(IN, HIDDEN).unwrap());
    m.push(ReLU::new());
    m.push(Linear::new(HIDDEN, HIDDEN).unwrap());
    m.push(ReLU::new());
    m.push(Linear::new(HIDDEN, 10).unwrap());
    m.to_dtype(DType::F64).unwrap();
    m
}

fn sgd(m: &Sequential) -> SGD {
    SGD::new(m.parameters(), SGDOptions { lr: 0.01, momentum: 0.9, ..Default::default() }).unwrap()
}

fn data(n: usize) -> (Tensor, Tensor) {
    manual_seed(11);
    (Tensor::randn([n, IN], DType::F64).unwrap(), Tensor::randn([n, 10], DType::F64).unwrap())
}

/// One training step on the first `bs` samples.
fn step(m: &Sequential, opt: &mut SGD, x: &Tensor, y: &Tensor, bs: usize) -> Result<()> {
    opt.zero_grad()?;
    let (xb, yb) = (x.narrow(0, 0, bs)?, y.narrow(0, 0, bs)?);
    let loss = F::mse_loss(&m.call(&xb)?, &yb, Default::default())?;
    loss.backward()?;
    drop(loss);
    opt.step()
}

/// What a step at `bs` needs above what is held before it: its peak of live bytes (past the
/// limit, the allocator empties its cache before it fails, so the cache does not count).
fn need(m: &Sequential, opt: &mut SGD, x: &Tensor, y: &Tensor, bs: usize) -> u64 {
    opt.zero_grad().unwrap();
    empty_cache();
    let before = memory_allocated(Device::Cpu).unwrap();
    reset_peak_memory_stats(Device::Cpu).unwrap();
    step(m, opt, x, y, bs).unwrap();
    opt.zero_grad().unwrap();
    max_memory_allocated(Device::Cpu).unwrap() - before
}

/// The bytes of the model's parameters.
fn param_bytes(m: &Sequential) -> u64 {
    m.parameters().iter().map(|p| (p.numel() * 8) as u64).sum()
}

/// Sets the memory limit at what is held now plus `budget`, at the start of `fit`.
struct LimitAtFitStart(u64);
impl pyrite::train::Callback for LimitAtFitStart {
    fn on_fit_start(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        empty_cache();
        set_memory_limit(Some(memory_reserved(Device::Cpu)? + self.0), Device::Cpu)
    }
}

fn fits(m: &Sequential, opt: &mut SGD, x: &Tensor, y: &Tensor, bs: usize) -> bool {
    match step(m, opt, x, y, bs) {
        Ok(()) => true,
        Err(e) if e.kind() == ErrorKind::OutOfMemory => false,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn on_a_real_model_the_size_found_fits_and_the_next_does_not() {
    let _s = serial();
    let _nolimit = NoLimitAfter;
    let (x, y) = data(1024);
    let m = mlp();
    let mut opt = sgd(&m);
    // The optimizer's momentum exists before the budget is measured.
    step(&m, &mut opt, &x, &y, 2).unwrap();
    let (n64, n128) = (need(&m, &mut opt, &x, &y, 64), need(&m, &mut opt, &x, &y, 128));
    assert!(n128 > n64 + (1 << 19), "a step's memory grows with the batch: {n64} at 64, {n128} at 128");
    opt.zero_grad().unwrap();
    empty_cache();
    let held = memory_reserved(Device::Cpu).unwrap();
    set_memory_limit(Some(held + (n64 + n128) / 2), Device::Cpu).unwrap();

    let power =
        scale_batch_size(|bs| step(&m, &mut opt, &x, &y, bs), ScaleBatchSizeOptions::default()).unwrap();
    assert_eq!(power, 64);
    assert!(fits(&m, &mut opt, &x, &y, power));
    assert!(!fits(&m, &mut opt, &x, &y, 2 * power));

    let o = ScaleBatchSizeOptions { mode: BatchSizeMode::BinSearch, margin: 0.0, ..Default::default() };
    let bin = scale_batch_size(|bs| step(&m, &mut opt, &x, &y, bs), o).unwrap();
    assert!(bin > 64 && bin < 128, "binsearch found {bin}");
    assert!(fits(&m, &mut opt, &x, &y, bin));
    assert!(!fits(&m, &mut opt, &x, &y, bin + 1), "{bin} + 1 fits too");
    // With Lightning's margin: 5 % below.
    let margined = scale_batch_size(
        |bs| step(&m, &mut opt, &x, &y, bs),
        ScaleBatchSizeOptions { mode: BatchSizeMode::BinSearch, ..Default::default() },
    )
    .unwrap();
    assert_eq!(margined, (bin as f64 * 0.95) as usize);
}

// ----- the Trainer's BatchSizeFinder -----

struct Regression {
    net: Sequential,
    /// The batch size of every `training_step`.
    seen: Arc<Mutex<Vec<usize>>>,
    /// What `set_batch_size` was given.
    told: Option<(String, usize)>,
    /// `training_step` fails with a value error at this batch size or more.
    fail_at: Option<usize>,
}

impl Regression {
    fn new() -> Regression {
        Regression { net: mlp(), seen: Default::default(), told: None, fail_at: None }
    }
}

impl LightningModule for Regression {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, _i: usize, ctx: &mut Context) -> Result<StepOutput> {
        let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
        let bs = x.dims()[0];
        self.seen.lock().unwrap().push(bs);
        if self.fail_at.is_some_and(|f| bs >= f) {
            pyrite::bail!(Value, "training_step: a batch of {bs} is not allowed");
        }
        let loss = F::mse_loss(&self.net.call(x)?, y, Default::default())?;
        ctx.log("train_loss", &loss)?;
        Ok(loss.into())
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        Ok(OptimizerConfig::new(sgd(&self.net)))
    }
    fn set_batch_size(&mut self, name: &str, batch_size: usize) -> Result<bool> {
        self.told = Some((name.to_string(), batch_size));
        Ok(true)
    }
}

fn trainer(callbacks: Vec<Box<dyn pyrite::train::Callback>>) -> Trainer {
    Trainer::new(TrainerOptions {
        max_epochs: Some(1),
        num_sanity_val_steps: 0,
        enable_progress_bar: false,
        enable_checkpointing: false,
        plot_curves: false,
        logger: Some(vec![]),
        default_root_dir: std::env::temp_dir(),
        callbacks,
        ..Default::default()
    })
    .unwrap()
}

fn loader(x: &Tensor, y: &Tensor, batch_size: usize, seed: u64) -> DataLoader {
    let ds = Arc::new(TensorDataset::new(vec![x.clone(), y.clone()]).unwrap());
    DataLoader::new(
        ds,
        DataLoaderOptions {
            batch_size: Some(batch_size),
            shuffle: true,
            generator: Some(Arc::new(pyrite::Generator::new(seed))),
            ..Default::default()
        },
    )
    .unwrap()
}

fn state(m: &dyn Module) -> Vec<(String, Vec<f64>)> {
    let sd: StateDict = m.state_dict().unwrap();
    sd.iter().map(|(k, t)| (k.to_string(), t.flatten(0, -1).unwrap().to_vec::<f64>().unwrap())).collect()
}

#[test]
fn the_tuner_counts_its_steps_restores_everything_and_tells_the_module() {
    let _s = serial();
    let (x, y) = data(256);
    let mut module = Regression::new();
    let before = state(&module.net);
    manual_seed(5);
    let rng = pyrite::get_rng_state();
    let mut t = trainer(vec![]);
    let o = ScaleBatchSizeOptions { max_trials: 3, steps_per_trial: 2, ..Default::default() };
    let found = Tuner::new(&mut t).scale_batch_size(&mut module, &loader(&x, &y, 4, 1), o).unwrap();
    assert_eq!(found, 8);
    // Two steps at each of 2, 4 and 8; then the Tuner stops the fit.
    assert_eq!(*module.seen.lock().unwrap(), vec![2, 2, 4, 4, 8, 8]);
    assert_eq!(module.told, Some(("batch_size".to_string(), 8)));
    assert!(state(&module.net) == before, "the weights are put back");
    assert!(t.optimizer().unwrap().state_dict().state.is_empty(), "the optimizer's state is put back");
    assert!(module.net.parameters().iter().all(|p| p.grad().is_none()), "no gradients are left");
    assert_eq!(
        pyrite::get_rng_state().to_vec::<u8>().unwrap(),
        rng.to_vec::<u8>().unwrap(),
        "the generator is put back"
    );
    assert_eq!(t.global_step(), 0);
    assert!(t.callback::<BatchSizeFinder>().is_none(), "the Tuner takes its finder out");
}

#[test]
fn fit_with_the_finder_equals_fit_at_the_size_found_under_the_memory_limit() {
    let _s = serial();
    let _nolimit = NoLimitAfter;
    let (x, y) = data(512);
    // Budget: between what a step needs at 64 and at 128, plus what the Trainer holds
    // besides the model: the momentum (made by the first step) and the finder's copy of the
    // weights.
    let budget = {
        let m = mlp();
        let mut opt = sgd(&m);
        step(&m, &mut opt, &x, &y, 2).unwrap();
        (need(&m, &mut opt, &x, &y, 64) + need(&m, &mut opt, &x, &y, 128)) / 2 + 2 * param_bytes(&m)
    };
    for mode in [BatchSizeMode::Power, BatchSizeMode::BinSearch] {
        let mut module = Regression::new();
        let train = loader(&x, &y, 4, 9);
        let finder =
            BatchSizeFinder::new(ScaleBatchSizeOptions { mode, margin: 0.0, ..Default::default() }).unwrap();
        let mut t = trainer(vec![Box::new(LimitAtFitStart(budget)), Box::new(finder)]);
        t.fit(&mut module, &train, FitOptions::default()).unwrap();
        set_memory_limit(None, Device::Cpu).unwrap();
        let f = t.callback::<BatchSizeFinder>().unwrap();
        let found = f.optimal_batch_size().unwrap();
        let trials = f.trials().to_vec();
        match mode {
            BatchSizeMode::Power => {
                assert_eq!(found, 64);
                assert!(trials.iter().any(|t| t.batch_size == 128 && !t.fits), "{trials:?}");
            }
            BatchSizeMode::BinSearch => {
                assert!(found > 64 && found < 128, "{trials:?}");
                assert!(trials.iter().any(|t| t.batch_size == found + 1 && !t.fits), "{trials:?}");
            }
        }
        // Every size tried up to the result fitted, every larger one failed.
        for tr in &trials {
            assert_eq!(tr.fits, tr.batch_size <= found, "{trials:?}");
        }
        let steps: usize = module.seen.lock().unwrap().len();
        // The epoch trained on batches of the size found (the last one partial).
        let seen = module.seen.lock().unwrap().clone();
        let epoch = &seen[seen.len() - 512_usize.div_ceil(found)..];
        assert!(epoch[..epoch.len() - 1].iter().all(|&b| b == found), "{epoch:?}");
        assert!(steps - epoch.len() <= 25 * 3);
        assert_eq!(module.told, Some(("batch_size".to_string(), found)));

        // The same fit without the finder, at the size found, from the same start.
        let mut plain = Regression::new();
        let mut t2 = trainer(vec![]);
        t2.fit(&mut plain, &loader(&x, &y, found, 9), FitOptions::default()).unwrap();
        assert!(state(&module.net) == state(&plain.net), "{mode:?}: the finder left a trace");
        assert_eq!(t.global_step(), t2.global_step());
    }
}

#[test]
fn a_training_error_stops_the_finder_and_fit_with_the_model_put_back() {
    let _s = serial();
    let (x, y) = data(128);
    let mut module = Regression::new();
    module.fail_at = Some(16);
    let before = state(&module.net);
    let mut t = trainer(vec![Box::new(BatchSizeFinder::new(Default::default()).unwrap())]);
    let e = t.fit(&mut module, &loader(&x, &y, 4, 1), FitOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("a batch of 16"), "{e}");
    assert!(state(&module.net) == before, "the weights are put back");
    assert_eq!(*module.seen.lock().unwrap(), vec![2, 2, 2, 4, 4, 4, 8, 8, 8, 16]);
}

#[test]
fn the_finder_needs_a_loader_with_a_batch_size() {
    let _s = serial();
    let (x, y) = data(32);
    let ds = Arc::new(TensorDataset::new(vec![x, y]).unwrap());
    let unbatched =
        DataLoader::new(ds, DataLoaderOptions { batch_size: None, ..Default::default() }).unwrap();
    let mut module = Regression::new();
    let mut t = trainer(vec![]);
    let e = Tuner::new(&mut t).scale_batch_size(&mut module, &unbatched, Default::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("batch_size"), "{e}");
}

/// Lightning's own searches (reference/gen_batch_size_finder.py, Lightning 2.6.6, writes
/// reference/data/batch_size_finder.json): for each mode and limit, the sizes its trials ran
/// and the size it returned. Where Lightning returns a size whose trial fitted (or, in
/// binsearch, that size less the margin), Pyrite tries the same sizes in the same order and
/// returns the same size. Where Lightning returns a size it never tried or one that failed
/// or tried a size twice (its known quirks: `max_val`, a doubled size or a size past `max_val`
/// returned untried; 1 returned untried when binsearch's first trial fails; a size that failed
/// tried again after power mode halved below it), Pyrite returns the largest size that fitted
/// (less the margin in binsearch): those cases are listed here.
#[test]
fn the_searches_follow_lightnings_own() {
    let _s = serial();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/batch_size_finder.json");
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut differs = vec![];
    for c in data["cases"].as_array().unwrap() {
        let get = |k: &str| c[k].as_u64().map(|v| v as usize);
        let fits = get("fits_up_to").unwrap();
        let mode: BatchSizeMode = c["mode"].as_str().unwrap().parse().unwrap();
        let mut options = ScaleBatchSizeOptions {
            mode,
            init_val: get("init_val").unwrap(),
            max_trials: get("max_trials").unwrap(),
            steps_per_trial: get("steps_per_trial").unwrap(),
            ..Default::default()
        };
        if let Some(m) = c["margin"].as_f64() {
            options.margin = m;
        }
        if let Some(v) = get("max_val") {
            options.max_val = v;
        }
        let steps = options.steps_per_trial;
        let margin = options.margin;
        let lightning_tried: Vec<usize> =
            c["tried"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
        let lightning_found = get("found").unwrap();
        let calls = Mutex::new(vec![]);
        let found = scale_batch_size(pretend(fits, &calls), options).unwrap();
        let tried = sizes(&calls, steps);
        // Pyrite always returns a size whose trial fitted, or that size less the margin.
        let best_fit = tried.iter().copied().filter(|&s| s <= fits).max().unwrap();
        let with_margin = if mode == BatchSizeMode::BinSearch {
            ((best_fit as f64 * (1.0 - margin)) as usize).max(1)
        } else {
            best_fit
        };
        assert_eq!(found, with_margin, "{c}: tried {tried:?}");
        let lightning_best = lightning_tried.iter().copied().filter(|&s| s <= fits).max();
        // Lightning's answer is sound when it is the largest size that fitted (less the margin
        // in binsearch) and no size was tried twice.
        let lightning_sound =
            lightning_best.is_some_and(|b| {
                let expected =
                    if mode == BatchSizeMode::BinSearch { (b as f64 * (1.0 - margin)) as usize } else { b };
                expected == lightning_found
            }) && lightning_tried.iter().all(|s| lightning_tried.iter().filter(|&t| t == s).count() == 1);
        if lightning_sound {
            assert_eq!((&tried, found), (&lightning_tried, lightning_found), "{c}");
        } else {
            differs.push((c["mode"].as_str().unwrap().to_string(), fits, lightning_found, found));
        }
    }
    // The cases where Lightning's answer is not a size that fitted (mode, limit, Lightning's
    // answer, Pyrite's).
    assert_eq!(
        differs,
        [
            // Lightning tries 2 again after 1 fitted.
            ("power".to_string(), 1, 1, 1),
            // Lightning stops doubling at 4096 and returns max_val, 8192, untried (it fails).
            ("power".to_string(), 5000, 8192, 4096),
            // Lightning returns 1 untried.
            ("binsearch".to_string(), 1, 1, 1),
            // Lightning returns 8192 less the margin untried; Pyrite bisects 4096..8192.
            ("binsearch".to_string(), 5000, 7782, 4750),
            // max_val 1000: Lightning returns 1000 less the margin without trying 1000.
            ("binsearch".to_string(), 100000, 950, 950),
            // max_val 1000: Lightning returns 1024, past max_val, untried.
            ("power".to_string(), 100000, 1024, 1000),
        ]
    );
}
