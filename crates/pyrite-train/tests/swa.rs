//! StochasticWeightAveraging through the Trainer, against Lightning's callback
//! (reference/gen_swa_callback.py writes reference/data/swa_callback.json): the learning rates
//! of every step (the scheduler swapped for SWALR), the averaged weights at the end, the
//! BatchNorm statistics recomputed in the extra forward-only epoch, and exact resume.

use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample, TensorDataset};
use pyrite::nn::{BatchNorm1d, Linear, Module, Sequential};
use pyrite::optim::lr_scheduler::{AnnealStrategy, StepLR, StepLROptions};
use pyrite::optim::{SGDOptions, SGD};
use pyrite::prelude::*;
use pyrite::train::callbacks::{
    ModelCheckpoint, ModelCheckpointOptions, StochasticWeightAveraging, StochasticWeightAveragingOptions,
    SwaEpochStart,
};
use pyrite::train::{
    Callback, CkptPath, Context, FitOptions, LightningModule, LrSchedulerConfig, OptimizerConfig, Scheduler,
    StepOutput, Trainer, TrainerOptions,
};
use serde_json::Value as Json;
use std::sync::{Arc, Mutex};

fn reference() -> Json {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/swa_callback.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn matrix(v: &Json) -> Tensor {
    let rows: Vec<Vec<f64>> = serde_json::from_value(v.clone()).unwrap();
    let (n, d) = (rows.len(), rows[0].len());
    Tensor::from_slice(&rows.concat(), [n, d]).unwrap()
}

struct Lit {
    net: Sequential,
}

impl Lit {
    fn new(r: &Json, bn: bool) -> Lit {
        let fc = Linear::new(3, 1).unwrap();
        let mut net = Sequential::new();
        if bn {
            net.push(BatchNorm1d::new(3).unwrap());
        }
        net.push(fc);
        net.to_dtype(DType::F64).unwrap();
        let sd = net.state_dict().unwrap();
        let last = if bn { "1" } else { "0" };
        let _g = pyrite::autograd::no_grad();
        sd.get(&format!("{last}.weight")).unwrap().copy_(&matrix(&r["w0"])).unwrap();
        let b0: Vec<f64> = serde_json::from_value(r["b0"].clone()).unwrap();
        sd.get(&format!("{last}.bias")).unwrap().copy_(&Tensor::from_slice(&b0, [1]).unwrap()).unwrap();
        Lit { net }
    }
}

impl LightningModule for Lit {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, _idx: usize, _ctx: &mut Context) -> Result<StepOutput> {
        let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
        Ok(F::mse_loss(&self.net.call(x)?, y, Default::default())?.into())
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        let mut opt =
            SGD::new(self.net.parameters(), SGDOptions { lr: 0.1, momentum: 0.5, ..Default::default() })?;
        let sched = StepLR::new(&mut opt, 1, StepLROptions { gamma: 0.9, ..Default::default() })?;
        Ok(OptimizerConfig::new(opt).with_scheduler(LrSchedulerConfig::new(Scheduler::lr(sched))))
    }
}

/// Records the learning rate of every training step (as the reference's `training_step` does).
struct LrLog(Arc<Mutex<Vec<f64>>>);

impl Callback for LrLog {
    fn on_train_batch_start(
        &mut self,
        t: &mut Trainer,
        _m: &mut dyn LightningModule,
        _b: &Sample,
        _i: usize,
    ) -> Result<()> {
        self.0.lock().unwrap().push(t.optimizer().unwrap().param_groups()[0].f64("lr")?);
        Ok(())
    }
}

/// Fails at the start of a training batch when `global_step` reaches `step`.
struct CrashAt(usize);

impl Callback for CrashAt {
    fn on_train_batch_start(
        &mut self,
        t: &mut Trainer,
        _m: &mut dyn LightningModule,
        _b: &Sample,
        _i: usize,
    ) -> Result<()> {
        if t.global_step() == self.0 {
            return Err(pyrite::Error::new(pyrite::ErrorKind::Io, "simulated crash"));
        }
        Ok(())
    }
}

fn loader(r: &Json) -> DataLoader {
    let ds: Arc<dyn Dataset> = Arc::new(TensorDataset::new(vec![matrix(&r["x"]), matrix(&r["y"])]).unwrap());
    DataLoader::new(ds, DataLoaderOptions { batch_size: Some(4), ..Default::default() }).unwrap()
}

fn swa(case: &Json) -> StochasticWeightAveraging {
    let start = match case["swa_epoch_start"].as_u64() {
        Some(e) => SwaEpochStart::Epoch(e as usize),
        None => SwaEpochStart::Fraction(case["swa_epoch_start"].as_f64().unwrap()),
    };
    let annealing_strategy =
        if case["annealing_strategy"] == "cos" { AnnealStrategy::Cos } else { AnnealStrategy::Linear };
    StochasticWeightAveraging::new(
        0.02,
        StochasticWeightAveragingOptions {
            swa_epoch_start: start,
            annealing_epochs: case["annealing_epochs"].as_u64().unwrap() as usize,
            annealing_strategy,
            ..Default::default()
        },
    )
    .unwrap()
}

fn options(callbacks: Vec<Box<dyn Callback>>, checkpointing: bool) -> TrainerOptions {
    TrainerOptions {
        max_epochs: Some(6),
        callbacks,
        logger: Some(vec![]),
        enable_checkpointing: checkpointing,
        enable_progress_bar: false,
        plot_curves: false,
        ..Default::default()
    }
}

fn state(lit: &Lit) -> Vec<(String, Vec<f64>)> {
    let sd = lit.net.state_dict().unwrap();
    sd.iter()
        .map(|(k, t)| {
            (k.to_string(), t.to_dtype(DType::F64).unwrap().flatten(0, -1).unwrap().to_vec().unwrap())
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * (1.0 + b.abs())
}

#[test]
fn swa_matches_lightning_lrs_weights_and_batch_norm_statistics() {
    let r = reference();
    let data = loader(&r);
    for case in r["cases"].as_array().unwrap() {
        let bn = case["bn"].as_bool().unwrap();
        let mut lit = Lit::new(&r, bn);
        let lrs = Arc::new(Mutex::new(vec![]));
        let mut trainer =
            Trainer::new(options(vec![Box::new(swa(case)), Box::new(LrLog(lrs.clone()))], false)).unwrap();
        trainer.fit(&mut lit, &data, FitOptions::default()).unwrap();

        let want: Vec<f64> = serde_json::from_value(case["lrs"].clone()).unwrap();
        let got = lrs.lock().unwrap().clone();
        assert_eq!(got.len(), want.len(), "{case}: a step per batch, and the BatchNorm epoch's");
        assert!(got.iter().zip(&want).all(|(a, b)| close(*a, *b)), "{case}: lrs {got:?}");
        let swa = trainer.callback::<StochasticWeightAveraging>().unwrap();
        assert_eq!(swa.n_averaged(), case["n_averaged"].as_i64().unwrap());
        // Lightning counts an optimizer step (without gradients) in the BatchNorm epoch; the
        // Trainer takes none there.
        assert_eq!(trainer.global_step(), 18);
        // The module ends with the averaged weights and, with BatchNorm, the statistics of one
        // pass over the data. (Lightning's module ends one stale-gradient SGD step away from
        // the average when there is BatchNorm, against its own comment that the epoch takes no
        // optimizer step: see the reference script. We compare with its average.)
        for (k, v) in state(&lit) {
            let src = if case["average"].get(&k).is_some() { "average" } else { "state" };
            let want: Vec<f64> = serde_json::from_value(case[src][&k].clone()).unwrap();
            assert!(v.iter().zip(&want).all(|(a, b)| close(*a, *b)), "{case}: {k}: {v:?} vs {want:?}");
        }
    }
}

#[test]
fn swa_resumes_exactly_from_a_checkpoint_taken_while_averaging() {
    let r = reference();
    let data = loader(&r);
    let case = &r["cases"][2]; // BatchNorm: averaging from epoch 3 (0-based), then the BN epoch
    let root = std::env::temp_dir().join(format!("pyrite-swa-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let ckpt = || -> Box<dyn Callback> {
        Box::new(
            ModelCheckpoint::new(ModelCheckpointOptions {
                dirpath: Some(root.clone()),
                save_last: true,
                every_n_train_steps: Some(1),
                ..Default::default()
            })
            .unwrap(),
        )
    };
    let run = |crash: Option<usize>, resume: bool| {
        let mut lit = Lit::new(&r, true);
        let lrs = Arc::new(Mutex::new(vec![]));
        let mut callbacks: Vec<Box<dyn Callback>> =
            vec![Box::new(swa(case)), Box::new(LrLog(lrs.clone())), ckpt()];
        if let Some(s) = crash {
            callbacks.push(Box::new(CrashAt(s)));
        }
        let mut trainer = Trainer::new(options(callbacks, true)).unwrap();
        let res = trainer.fit(
            &mut lit,
            &data,
            FitOptions { ckpt_path: resume.then_some(CkptPath::Last), ..Default::default() },
        );
        let lrs = lrs.lock().unwrap().clone();
        (res, lrs, state(&lit))
    };
    let (res, full_lrs, full_state) = run(None, false);
    res.unwrap();
    // Step 13: epoch 4's second batch, with SWALR in charge and two parameter sets averaged.
    let (res, mut lrs, _) = run(Some(13), false);
    assert!(res.unwrap_err().to_string().contains("simulated crash"));
    lrs.pop(); // the crashed batch's, which the resumed run trains
    let saved = pyrite::load(root.join("last.ckpt")).unwrap();
    let cb = saved.get("callbacks").unwrap().as_dict().unwrap();
    let swa_state = cb.iter().find(|(k, _)| k.as_str() == Some("StochasticWeightAveraging")).unwrap().1;
    assert_eq!(swa_state.get("n_averaged").unwrap().as_int(), Some(2));
    assert!(!swa_state.get("scheduler_state").unwrap().is_none(), "SWALR's state is the callback's");
    assert_eq!(saved.get("lr_schedulers").unwrap().as_slice().map(|s| s.len()), Some(0));
    let (res, more, resumed) = run(None, true);
    res.unwrap();
    lrs.extend(more);
    assert_eq!(lrs, full_lrs);
    assert_eq!(resumed, full_state, "resumed bit for bit");
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn swa_options_are_checked() {
    let bad = |o: StochasticWeightAveragingOptions| {
        StochasticWeightAveraging::new(0.1, o).err().unwrap().to_string()
    };
    assert!(bad(StochasticWeightAveragingOptions {
        swa_epoch_start: SwaEpochStart::Epoch(0),
        ..Default::default()
    })
    .contains("swa_epoch_start should be a >0 integer or a float between 0 and 1"));
    assert!(bad(StochasticWeightAveragingOptions { swa_epoch_start: 1.5.into(), ..Default::default() })
        .contains("swa_epoch_start"));
    let e = StochasticWeightAveraging::new(vec![0.1, -0.1], Default::default()).err().unwrap().to_string();
    assert!(e.contains("positive"), "{e}");
    // A fraction needs an epoch limit.
    let r = reference();
    let mut lit = Lit::new(&r, false);
    let mut trainer = Trainer::new(TrainerOptions {
        max_epochs: None,
        max_steps: Some(5),
        ..options(vec![Box::new(StochasticWeightAveraging::new(0.1, Default::default()).unwrap())], false)
    })
    .unwrap();
    let e = trainer.fit(&mut lit, &loader(&r), FitOptions::default()).err().unwrap().to_string();
    assert!(e.contains("`swa_epoch_start` as a float is not supported"), "{e}");
}
