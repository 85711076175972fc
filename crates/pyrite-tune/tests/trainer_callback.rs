//! A Trainer inside a trial: the callback reports each validation epoch with a checkpoint,
//! and a trial stopped by ASHA ends its fit cleanly.

use std::path::Path;
use std::sync::Arc;

use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample, Subset};
use pyrite::nn::{Linear, Module};
use pyrite::optim::{SGDOptions, SGD};
use pyrite::prelude::*;
use pyrite::train::{
    Context, FitOptions, LightningModule, OptimizerConfig, StepOutput, Trainer, TrainerOptions,
};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite_tune::integration::TuneReportCheckpointCallback;
use pyrite_tune::schedulers::{ASHAScheduler, AshaOptions};
use pyrite_tune::{loguniform, Mode, ParamSpace, RunConfig, TrialStatus, TuneConfig, Tuner};

struct Lit {
    net: Linear,
    lr: f64,
}

fn xy(batch: &Sample) -> Result<(&Tensor, &Tensor)> {
    Ok((batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?))
}

impl LightningModule for Lit {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, _i: usize, _ctx: &mut Context) -> Result<StepOutput> {
        let (x, y) = xy(batch)?;
        Ok(F::cross_entropy(&self.net.call(&x.flatten(1, -1)?)?, y, &Default::default())?.into())
    }
    fn validation_step(&mut self, batch: &Sample, _i: usize, ctx: &mut Context) -> Result<()> {
        let (x, y) = xy(batch)?;
        ctx.log("val_loss", F::cross_entropy(&self.net.call(&x.flatten(1, -1)?)?, y, &Default::default())?)
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        Ok(OptimizerConfig::new(SGD::new(
            self.net.parameters(),
            SGDOptions { lr: self.lr, ..Default::default() },
        )?))
    }
}

fn loader(n: usize, offset: usize) -> Result<DataLoader> {
    let d: Arc<dyn Dataset> = Arc::new(Digits::new(DigitsSplit::Train)?);
    DataLoader::new(
        Arc::new(Subset::new(d, (offset..offset + n).collect())),
        DataLoaderOptions { batch_size: Some(32), ..Default::default() },
    )
}

#[test]
fn the_callback_reports_each_validation_epoch_and_asha_stops_the_fit() {
    let dir = std::env::temp_dir().join(format!("pyrite_tune_trainer_cb_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.clone();
    let trainable = move |c: &pyrite_tune::Config, s: &mut pyrite_tune::Session| -> Result<()> {
        let mut lit = Lit { net: Linear::new(64, 10)?, lr: c.get("lr")? };
        let trial_root = root.join("runs").join(s.trial_id());
        let mut trainer = Trainer::new(TrainerOptions {
            max_epochs: Some(9),
            default_root_dir: trial_root,
            enable_progress_bar: false,
            enable_checkpointing: false,
            plot_curves: false,
            logger: Some(vec![]),
            callbacks: vec![Box::new(
                TuneReportCheckpointCallback::new(s.clone()).metrics([("loss", "val_loss")]),
            )],
            ..Default::default()
        })?;
        let (train, val) = (loader(128, 0)?, loader(64, 500)?);
        let ckpt = TuneReportCheckpointCallback::resume_path(s);
        trainer.fit(
            &mut lit,
            &train,
            FitOptions { val_dataloaders: Some(&val), ckpt_path: ckpt.map(pyrite::train::CkptPath::Path) },
        )
    };
    let grid = Tuner::new(
        trainable,
        ParamSpace::new().with("lr", loguniform(1e-4, 0.5)),
        TuneConfig {
            metric: Some("loss".into()),
            mode: Some(Mode::Min),
            num_samples: 6,
            max_concurrent_trials: Some(2),
            seed: Some(2),
            scheduler: Some(Box::new(
                ASHAScheduler::new(AshaOptions {
                    max_t: 9.0,
                    reduction_factor: 3.0,
                    seed: Some(0),
                    ..Default::default()
                })
                .unwrap(),
            )),
            ..Default::default()
        },
        RunConfig {
            name: Some("cb".into()),
            storage_path: Some(dir.clone()),
            verbose: Some(0),
            ..Default::default()
        },
    )
    .fit()
    .unwrap();
    assert!(grid.results().iter().all(|r| r.status == TrialStatus::Terminated), "{}", grid.table());
    let iters: Vec<u64> = grid.results().iter().map(|r| r.metrics.iteration()).collect();
    assert!(iters.iter().any(|&i| i < 9), "ASHA stopped no trial: {iters:?}");
    let best = grid.get_best_result(None, None).unwrap();
    assert_eq!(best.metrics.iteration(), 9, "{}", grid.table());
    // It learned: its last validation loss is below its first.
    let first = best.metrics_history[0].get("loss").unwrap();
    assert!(best.metrics.get("loss").unwrap() < first, "{}", grid.table());
    let cp = best.checkpoint.as_ref().unwrap();
    assert!(Path::new(cp.path()).join("checkpoint").is_file());
    // The checkpoint is the Trainer's own: it loads, at the epoch reported.
    let saved = pyrite::load(cp.path().join("checkpoint")).unwrap();
    assert_eq!(saved.get("epoch").unwrap().as_int(), Some(8));
    std::fs::remove_dir_all(dir).unwrap();
}
