//! The Trainer, as a specification: Lightning's hook order, its logging reduction rules,
//! exact resume from a checkpoint taken anywhere in the loop, and clear errors for bad input.

use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample, Subset, TensorDataset};
use pyrite::nn::{self, Dropout, Linear, Module, ModuleBase};
use pyrite::optim::lr_scheduler::{StepLR, StepLROptions};
use pyrite::optim::{Adam, AdamOptions, SGDOptions, SGD};
use pyrite::prelude::*;
use pyrite::train::callbacks::{
    EarlyStopping, EarlyStoppingOptions, ModelCheckpoint, ModelCheckpointOptions,
};
use pyrite::train::loggers::{CSVLogger, CSVLoggerOptions, Logger};
use pyrite::train::{
    Callback, CkptPath, Context, FitOptions, LightningModule, LogOptions, LrSchedulerConfig, OptimizerConfig,
    Scheduler, StepOutput, Trainer, TrainerOptions,
};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::Generator;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The global generator is shared by the tests' threads: they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-trainer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

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

/// A digits classifier that records what the Trainer calls and the losses it sees.
struct Lit {
    net: Mlp,
    events: Arc<Mutex<Vec<String>>>,
    losses: Arc<Mutex<Vec<f32>>>,
    record_hooks: bool,
}

impl Lit {
    fn new() -> Result<Lit> {
        Ok(Lit {
            net: Mlp {
                base: ModuleBase::new(),
                fc1: Linear::new(64, 32)?,
                drop: Dropout::new(0.3)?,
                fc2: Linear::new(32, 10)?,
            },
            events: Default::default(),
            losses: Default::default(),
            record_hooks: false,
        })
    }
    fn ev(&self, s: &str) {
        if self.record_hooks {
            self.events.lock().unwrap().push(format!("module.{s}"));
        }
    }
}

fn xy(batch: &Sample) -> Result<(&Tensor, &Tensor)> {
    Ok((batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?))
}

impl LightningModule for Lit {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, batch_idx: usize, ctx: &mut Context) -> Result<StepOutput> {
        self.ev(&format!("training_step({batch_idx})"));
        let (x, y) = xy(batch)?;
        let loss = F::cross_entropy(&self.net.call(x)?, y, &Default::default())?;
        self.losses.lock().unwrap().push(loss.item::<f32>()?);
        ctx.log_with(
            "train_loss",
            &loss,
            &LogOptions { on_step: Some(true), on_epoch: Some(true), prog_bar: true, ..Default::default() },
        )?;
        Ok(loss.into())
    }
    fn validation_step(&mut self, batch: &Sample, batch_idx: usize, ctx: &mut Context) -> Result<()> {
        self.ev(&format!("validation_step({batch_idx})"));
        let (x, y) = xy(batch)?;
        let logits = self.net.call(x)?;
        ctx.log("val_loss", F::cross_entropy(&logits, y, &Default::default())?)?;
        let acc = logits.argmax(Some(1), false)?.eq(y)?.to_dtype(DType::F64)?.mean()?;
        ctx.log_prog_bar("val_acc", acc)
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        self.ev("configure_optimizers");
        let mut opt = Adam::new(self.net.parameters(), AdamOptions { lr: 1e-2, ..Default::default() })?;
        let sched = StepLR::new(&mut opt, 4, StepLROptions { gamma: 0.5, ..Default::default() })?;
        let cfg = LrSchedulerConfig {
            interval: pyrite::train::Interval::Step,
            ..LrSchedulerConfig::new(Scheduler::lr(sched))
        };
        Ok(OptimizerConfig::new(opt).with_scheduler(cfg))
    }
    fn on_fit_start(&mut self, _ctx: &mut Context) -> Result<()> {
        self.ev("on_fit_start");
        Ok(())
    }
    fn on_train_epoch_start(&mut self, _ctx: &mut Context) -> Result<()> {
        self.ev("on_train_epoch_start");
        Ok(())
    }
    fn on_train_epoch_end(&mut self, _ctx: &mut Context) -> Result<()> {
        self.ev("on_train_epoch_end");
        Ok(())
    }
    fn on_validation_epoch_end(&mut self, _ctx: &mut Context) -> Result<()> {
        self.ev("on_validation_epoch_end");
        Ok(())
    }
    fn on_before_backward(&mut self, _loss: &Tensor) -> Result<()> {
        self.ev("on_before_backward");
        Ok(())
    }
    fn on_after_backward(&mut self) -> Result<()> {
        self.ev("on_after_backward");
        Ok(())
    }
}

fn digits(n: usize, offset: usize) -> Result<Arc<dyn Dataset>> {
    let d: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?);
    Ok(Arc::new(Subset::new(d, (offset..offset + n).collect())))
}

fn loader(n: usize, offset: usize, shuffle: bool, workers: usize) -> Result<DataLoader> {
    DataLoader::new(
        digits(n, offset)?,
        DataLoaderOptions {
            batch_size: Some(16),
            shuffle,
            num_workers: workers,
            persistent_workers: workers > 0,
            generator: shuffle.then(|| Arc::new(Generator::new(7))),
            ..Default::default()
        },
    )
}

/// Records every callback hook.
struct Recorder(Arc<Mutex<Vec<String>>>);

macro_rules! rec {
    ($($hook:ident),*) => {
        $(fn $hook(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
            self.0.lock().unwrap().push(stringify!($hook).to_string());
            Ok(())
        })*
    };
}

impl Callback for Recorder {
    rec!(
        on_fit_start,
        on_fit_end,
        on_sanity_check_start,
        on_sanity_check_end,
        on_train_start,
        on_train_end,
        on_train_epoch_start,
        on_train_epoch_end,
        on_validation_start,
        on_validation_end,
        on_validation_epoch_start,
        on_validation_epoch_end,
        on_before_zero_grad,
        on_after_backward,
        on_before_optimizer_step
    );
    fn on_train_batch_start(
        &mut self,
        _t: &mut Trainer,
        _m: &mut dyn LightningModule,
        _b: &Sample,
        i: usize,
    ) -> Result<()> {
        self.0.lock().unwrap().push(format!("on_train_batch_start({i})"));
        Ok(())
    }
    fn on_train_batch_end(
        &mut self,
        _t: &mut Trainer,
        _m: &mut dyn LightningModule,
        _o: &StepOutput,
        _b: &Sample,
        i: usize,
    ) -> Result<()> {
        self.0.lock().unwrap().push(format!("on_train_batch_end({i})"));
        Ok(())
    }
    fn on_before_backward(
        &mut self,
        _t: &mut Trainer,
        _m: &mut dyn LightningModule,
        _l: &Tensor,
    ) -> Result<()> {
        self.0.lock().unwrap().push("on_before_backward".into());
        Ok(())
    }
}

fn quiet(root: &Path) -> TrainerOptions {
    TrainerOptions {
        default_root_dir: root.to_path_buf(),
        enable_progress_bar: false,
        enable_checkpointing: false,
        plot_curves: false,
        logger: Some(vec![]),
        ..Default::default()
    }
}

#[test]
fn hooks_run_in_lightnings_documented_order() {
    let _serial = serial();
    let root = tmp("order");
    pyrite::manual_seed(0);
    let mut lit = Lit::new().unwrap();
    lit.record_hooks = true;
    let events = lit.events.clone();
    let mut trainer = Trainer::new(TrainerOptions {
        max_epochs: Some(1),
        num_sanity_val_steps: 1,
        callbacks: vec![Box::new(Recorder(events.clone()))],
        ..quiet(&root)
    })
    .unwrap();
    let (train, val) = (loader(32, 0, false, 0).unwrap(), loader(16, 100, false, 0).unwrap());
    trainer.fit(&mut lit, &train, FitOptions { val_dataloaders: Some(&val), ..Default::default() }).unwrap();
    let got = events.lock().unwrap().clone();
    let batch = |i: usize| {
        vec![
            format!("on_train_batch_start({i})"),
            format!("module.training_step({i})"),
            "on_before_zero_grad".into(),
            "on_before_backward".into(),
            "module.on_before_backward".into(),
            "on_after_backward".into(),
            "module.on_after_backward".into(),
            "on_before_optimizer_step".into(),
            format!("on_train_batch_end({i})"),
        ]
    };
    let validation = |n: usize| {
        let mut v: Vec<String> = vec!["on_validation_start".into(), "on_validation_epoch_start".into()];
        v.extend((0..n).map(|i| format!("module.validation_step({i})")));
        v.extend([
            "on_validation_epoch_end".into(),
            "module.on_validation_epoch_end".into(),
            "on_validation_end".into(),
        ]);
        v
    };
    let mut want: Vec<String> =
        vec!["module.configure_optimizers".into(), "on_fit_start".into(), "module.on_fit_start".into()];
    want.push("on_sanity_check_start".into());
    want.extend(validation(1));
    want.extend([
        "on_sanity_check_end".into(),
        "on_train_start".into(),
        "on_train_epoch_start".into(),
        "module.on_train_epoch_start".into(),
    ]);
    want.extend(batch(0));
    want.extend(batch(1));
    want.extend(validation(1));
    want.extend([
        "on_train_epoch_end".into(),
        "module.on_train_epoch_end".into(),
        "on_train_end".into(),
        "on_fit_end".into(),
    ]);
    assert_eq!(got, want);
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn epoch_values_are_means_weighted_by_batch_size_and_forked_names_reach_the_logger() {
    let _serial = serial();
    let root = tmp("logging");
    pyrite::manual_seed(0);
    let mut lit = Lit::new().unwrap();
    let losses = lit.losses.clone();
    let csv = CSVLogger::new(&root, CSVLoggerOptions::default()).unwrap();
    let log_dir = csv.log_dir();
    let mut trainer = Trainer::new(TrainerOptions {
        max_epochs: Some(2),
        log_every_n_steps: 1,
        num_sanity_val_steps: 0,
        logger: Some(vec![Box::new(csv)]),
        ..quiet(&root)
    })
    .unwrap();
    // 40 samples in batches of 16: 16, 16 and 8.
    let (train, val) = (loader(40, 0, false, 0).unwrap(), loader(20, 200, false, 0).unwrap());
    trainer.fit(&mut lit, &train, FitOptions { val_dataloaders: Some(&val), ..Default::default() }).unwrap();
    let l = losses.lock().unwrap().clone();
    assert_eq!(l.len(), 6);
    let epoch1 = (l[3] as f64 * 16.0 + l[4] as f64 * 16.0 + l[5] as f64 * 8.0) / 40.0;
    let m = trainer.callback_metrics();
    assert!((m["train_loss_epoch"] - epoch1).abs() < 1e-12, "{} vs {epoch1}", m["train_loss_epoch"]);
    assert_eq!(m["train_loss_step"], l[5] as f64);
    assert!(m.contains_key("val_loss") && m.contains_key("val_acc"));
    assert_eq!(trainer.global_step(), 6);
    assert_eq!(trainer.current_epoch(), 2);
    // Lightning's metrics.csv: sorted columns, a row per log call, step = optimizer steps.
    let text = std::fs::read_to_string(log_dir.join("metrics.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), "epoch,step,train_loss_epoch,train_loss_step,val_acc,val_loss");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 6 step rows, 2 validation rows, 2 train-epoch rows.
    assert_eq!(rows.len(), 10);
    assert_eq!(rows[0][..2], ["0", "0"]);
    assert_eq!(rows[0][3].parse::<f32>().unwrap(), l[0]);
    let epoch_rows: Vec<&Vec<&str>> = rows.iter().filter(|r| !r[2].is_empty()).collect();
    assert_eq!(epoch_rows.len(), 2);
    assert_eq!(epoch_rows[1][..2], ["1", "5"]); // logged at the last step of the epoch
    assert!((epoch_rows[1][2].parse::<f64>().unwrap() - epoch1).abs() < 1e-12);
    std::fs::remove_dir_all(&root).ok();
}

/// Fails the run when it reaches a point, as a crash would (after the checkpoint of the
/// previous point was written).
struct CrashAt {
    step: Option<usize>,
    epoch_start: Option<usize>,
}

impl Callback for CrashAt {
    fn on_train_batch_start(
        &mut self,
        t: &mut Trainer,
        _m: &mut dyn LightningModule,
        _b: &Sample,
        _i: usize,
    ) -> Result<()> {
        if self.step == Some(t.global_step()) {
            return Err(pyrite::Error::new(pyrite::ErrorKind::Io, "simulated crash"));
        }
        Ok(())
    }
    fn on_train_epoch_start(&mut self, t: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        if self.epoch_start == Some(t.current_epoch()) {
            return Err(pyrite::Error::new(pyrite::ErrorKind::Io, "simulated crash"));
        }
        Ok(())
    }
}

fn params(lit: &Lit) -> Vec<Vec<u32>> {
    lit.net
        .parameters()
        .iter()
        .map(|p| p.flatten(0, -1).unwrap().to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect())
        .collect()
}

fn resume_options(root: &Path, ckpt: ModelCheckpointOptions, crash: Option<CrashAt>) -> TrainerOptions {
    let mut callbacks: Vec<Box<dyn Callback>> = vec![
        Box::new(
            EarlyStopping::new("val_loss", EarlyStoppingOptions { patience: 10, ..Default::default() })
                .unwrap(),
        ),
        Box::new(ModelCheckpoint::new(ckpt).unwrap()),
    ];
    if let Some(c) = crash {
        callbacks.push(Box::new(c));
    }
    TrainerOptions {
        max_epochs: Some(3),
        num_sanity_val_steps: 1,
        val_check_interval: pyrite::train::Limit::Batches(2),
        callbacks,
        enable_checkpointing: true,
        ..quiet(root)
    }
}

#[test]
fn fit_resumed_from_last_ckpt_equals_the_uninterrupted_run_bit_for_bit() {
    let _serial = serial();
    let root = tmp("resume");
    for workers in [0, 2] {
        let run = |crash: Option<CrashAt>,
                   ckpt: ModelCheckpointOptions,
                   resume: bool|
         -> (Result<()>, Vec<f32>, Vec<Vec<u32>>) {
            pyrite::manual_seed(0);
            let mut lit = Lit::new().unwrap();
            let losses = lit.losses.clone();
            let train = loader(80, 0, true, workers).unwrap(); // 5 batches per epoch
            let val = loader(32, 300, false, 0).unwrap();
            let mut trainer = Trainer::new(resume_options(&root, ckpt, crash)).unwrap();
            pyrite::manual_seed(4242); // a resumed process's global state does not matter
            let r = trainer.fit(
                &mut lit,
                &train,
                FitOptions { val_dataloaders: Some(&val), ckpt_path: resume.then_some(CkptPath::Last) },
            );
            let l = losses.lock().unwrap().clone();
            (r, l, params(&lit))
        };
        let every_step = |dir: &str| ModelCheckpointOptions {
            dirpath: Some(root.join(format!("{dir}-{workers}"))),
            save_last: true,
            every_n_train_steps: Some(1),
            ..Default::default()
        };
        let (r, full_losses, full_params) = run(None, every_step("full"), false);
        r.unwrap();
        assert_eq!(full_losses.len(), 15);
        // Crashes: mid-epoch right after a validation (step 4: batch 3 of epoch 0 validated at
        // batch index 3), mid-epoch without one (step 7), after an epoch's last batch (step 10).
        for crash_step in [4, 7, 10] {
            let dir = format!("crash{crash_step}");
            let (r, mut losses, _) =
                run(Some(CrashAt { step: Some(crash_step), epoch_start: None }), every_step(&dir), false);
            assert!(r.unwrap_err().to_string().contains("simulated crash"));
            assert_eq!(losses.len(), crash_step);
            let (r, more, p) = run(None, every_step(&dir), true);
            r.unwrap();
            losses.extend(more);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&losses), bits(&full_losses), "{workers} workers, crash at step {crash_step}");
            assert!(p == full_params, "{workers} workers, crash at step {crash_step}: parameters differ");
        }
        // A checkpoint taken at an epoch's end (the default: every epoch, after validation).
        let per_epoch = |dir: &str| ModelCheckpointOptions {
            dirpath: Some(root.join(format!("{dir}-{workers}"))),
            save_last: true,
            save_on_train_epoch_end: Some(true),
            ..Default::default()
        };
        let (r, mut losses, _) =
            run(Some(CrashAt { step: None, epoch_start: Some(2) }), per_epoch("epoch"), false);
        assert!(r.is_err());
        let saved = pyrite::load(root.join(format!("epoch-{workers}/last.ckpt"))).unwrap();
        assert_eq!(saved.get("loops").unwrap().get("resume_point").unwrap().as_str(), Some("epoch_end"));
        assert_eq!(saved.get("global_step").unwrap().as_int(), Some(10));
        let (r, more, p) = run(None, per_epoch("epoch"), true);
        r.unwrap();
        losses.extend(more);
        assert_eq!(losses, full_losses, "{workers} workers, resumed from an epoch's end");
        assert!(p == full_params);
    }
    std::fs::remove_dir_all(&root).ok();
}

/// A module whose training step can be made to misbehave.
struct Bad {
    net: Linear,
    kind: &'static str,
}

impl LightningModule for Bad {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, _i: usize, ctx: &mut Context) -> Result<StepOutput> {
        let x = batch.item(0)?.as_tensor()?;
        let out = self.net.call(x)?;
        Ok(match self.kind {
            "non-scalar" => out.into(),
            "no-graph" => out.sum()?.detach().into(),
            "nan" => (out.sum()? * f64::NAN)?.into(),
            _ => {
                ctx.log("loss", &out.sum()?)?;
                out.sum()?.into()
            }
        })
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        Ok(OptimizerConfig::new(SGD::new(
            self.net.parameters(),
            SGDOptions { lr: 0.1, ..Default::default() },
        )?))
    }
}

fn tiny_loader() -> DataLoader {
    let x = Tensor::ones([8, 2], DType::F32).unwrap();
    let ds: Arc<dyn Dataset> = Arc::new(TensorDataset::new(vec![x.clone(), x]).unwrap());
    DataLoader::new(ds, DataLoaderOptions { batch_size: Some(4), ..Default::default() }).unwrap()
}

#[test]
fn bad_input_is_a_clear_error() {
    let _serial = serial();
    let root = tmp("bad");
    let fit_err = |kind: &'static str, opts: TrainerOptions| {
        let mut m = Bad { net: Linear::new(2, 1).unwrap(), kind };
        let mut t = Trainer::new(TrainerOptions { max_epochs: Some(1), ..opts }).unwrap();
        t.fit(&mut m, &tiny_loader(), FitOptions::default()).unwrap_err().to_string()
    };
    assert!(fit_err("non-scalar", quiet(&root)).contains("the loss must be a scalar"));
    assert!(fit_err("no-graph", quiet(&root)).contains("does not require grad"));
    let e = fit_err("nan", TrainerOptions { detect_anomaly: true, ..quiet(&root) });
    assert!(e.contains("non-finite loss (NaN) at epoch 0, batch 0 (global step 0)"), "{e}");
    // A monitor that was never logged.
    let es = EarlyStopping::new("val_loss", Default::default()).unwrap();
    let e = fit_err("ok", TrainerOptions { callbacks: vec![Box::new(es)], ..quiet(&root) });
    assert!(
        e.contains("Early stopping conditioned on metric `val_loss` which is not available")
            && e.contains("`loss`"),
        "{e}"
    );
    // A checkpoint of another model.
    let path = root.join("other.ckpt");
    {
        let mut m = Bad { net: Linear::new(2, 1).unwrap(), kind: "ok" };
        let mut t = Trainer::new(TrainerOptions { max_epochs: Some(1), ..quiet(&root) }).unwrap();
        t.fit(&mut m, &tiny_loader(), FitOptions::default()).unwrap();
        t.save_checkpoint(&path, &mut m).unwrap();
    }
    let mut m = Bad { net: Linear::new(2, 3).unwrap(), kind: "ok" };
    let mut t = Trainer::new(TrainerOptions { max_epochs: Some(2), ..quiet(&root) }).unwrap();
    let wide = {
        let x = Tensor::ones([8, 2], DType::F32).unwrap();
        let ds: Arc<dyn Dataset> = Arc::new(TensorDataset::new(vec![x.clone(), x]).unwrap());
        DataLoader::new(ds, DataLoaderOptions { batch_size: Some(4), ..Default::default() }).unwrap()
    };
    let e = t
        .fit(
            &mut m,
            &wide,
            FitOptions { ckpt_path: Some(CkptPath::Path(path.clone())), ..Default::default() },
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not fit this model") && e.contains("weight"), "{e}");
    // An unwritable log folder.
    let file = root.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let e = CSVLogger::new(file.join("logs"), CSVLoggerOptions::default()).err().unwrap().to_string();
    assert!(e.contains("cannot create the log folder") && e.contains("a-file"), "{e}");
    std::fs::remove_dir_all(&root).ok();
}
