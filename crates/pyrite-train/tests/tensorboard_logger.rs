//! The TensorBoardLogger under a real `Trainer::fit`: the event file, read back with
//! pyrite-tensorboard's reader, holds the logged scalars at the Trainer's steps, the hparams
//! plugin's summaries with `hp_metric`, and histograms of the weights and their gradients.

use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample, TensorDataset};
use pyrite::nn::{Linear, Module};
use pyrite::optim::{SGDOptions, SGD};
use pyrite::prelude::*;
use pyrite::train::loggers::{Logger, TensorBoardLogger, TensorBoardLoggerOptions};
use pyrite::train::{
    Context, HParam, LightningModule, LogOptions, OptimizerConfig, StepOutput, Trainer, TrainerOptions,
};
use pyrite::utils::tensorboard::{read_dir_events, scalars, values, HParamValue, HParamsPluginData};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The global generator is shared by the tests' threads: they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pyrite-tblogger-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

struct Reg {
    net: Linear,
    losses: Arc<Mutex<Vec<f32>>>,
}

impl LightningModule for Reg {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, _i: usize, ctx: &mut Context) -> Result<StepOutput> {
        let x = batch.item(0)?.as_tensor()?;
        let y = batch.item(1)?.as_tensor()?;
        let loss = F::mse_loss(&self.net.call(x)?, y, Default::default())?;
        self.losses.lock().unwrap().push(loss.item::<f32>()?);
        ctx.log_with(
            "train_loss",
            &loss,
            &LogOptions { on_step: Some(true), on_epoch: Some(true), ..Default::default() },
        )?;
        Ok(loss.into())
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        Ok(OptimizerConfig::new(SGD::new(
            self.net.parameters(),
            SGDOptions { lr: 0.05, ..Default::default() },
        )?))
    }
    fn hparams(&self) -> Vec<(String, HParam)> {
        vec![("lr".into(), HParam::Float(0.05)), ("optimizer".into(), HParam::Str("sgd".into()))]
    }
}

fn loader() -> DataLoader {
    let x = Tensor::randn([16, 3], DType::F32).unwrap();
    let y = x.sum_dims(&[1], true).unwrap();
    let ds: Arc<dyn Dataset> = Arc::new(TensorDataset::new(vec![x, y]).unwrap());
    DataLoader::new(ds, DataLoaderOptions { batch_size: Some(4), ..Default::default() }).unwrap()
}

#[test]
fn fit_writes_scalars_hparams_and_histograms() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = tmp("fit");
    pyrite::manual_seed(0);
    let losses = Arc::new(Mutex::new(vec![]));
    let mut module = Reg { net: Linear::new(3, 1).unwrap(), losses: losses.clone() };
    let tb = TensorBoardLogger::new(&root, TensorBoardLoggerOptions::default()).unwrap();
    let log_dir = tb.log_dir();
    assert_eq!(log_dir, root.join("lightning_logs").join("version_0"));
    let mut trainer = Trainer::new(TrainerOptions {
        default_root_dir: root.clone(),
        max_epochs: Some(2),
        log_every_n_steps: 1,
        enable_progress_bar: false,
        enable_checkpointing: false,
        plot_curves: false,
        logger: Some(vec![Box::new(tb)]),
        ..Default::default()
    })
    .unwrap();
    trainer.fit(&mut module, &loader(), Default::default()).unwrap();
    let losses = losses.lock().unwrap().clone();
    assert_eq!(losses.len(), 8);

    let events = read_dir_events(&log_dir).unwrap();
    assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
    let s = scalars(&events);
    let series = |tag: &str| -> Vec<(i64, f32)> {
        s.iter().filter(|(_, t, _)| t == tag).map(|(st, _, v)| (*st, *v)).collect()
    };
    // Step metrics at every optimizer step (0-based, as Lightning's), the loss of that step.
    let step: Vec<(i64, f32)> = losses.iter().enumerate().map(|(i, l)| (i as i64, *l)).collect();
    assert_eq!(series("train_loss_step"), step);
    // Epoch metrics at the last step of each epoch; `epoch` with every log call (Lightning's).
    let epoch = series("train_loss_epoch");
    assert_eq!(epoch.iter().map(|p| p.0).collect::<Vec<_>>(), [3, 7]);
    let mean1 = losses[4..].iter().map(|&l| l as f64).sum::<f64>() / 4.0;
    assert!((epoch[1].1 as f64 - mean1).abs() < 1e-6);
    let epochs =
        [(0, 0.0), (1, 0.0), (2, 0.0), (3, 0.0), (3, 0.0), (4, 1.0), (5, 1.0), (6, 1.0), (7, 1.0), (7, 1.0)];
    assert_eq!(series("epoch"), epochs);
    assert_eq!(series("hp_metric"), [(0, -1.0)]);

    // The hparams plugin's summaries.
    let vs = values(&events);
    let hp: Vec<HParamsPluginData> =
        vs.iter().filter_map(|(_, _, v)| v.hparams()).map(|r| r.unwrap()).collect();
    assert_eq!(hp.len(), 3);
    assert!(matches!(&hp[0], HParamsPluginData::Experiment { metrics, .. } if metrics == &["hp_metric"]));
    assert_eq!(
        hp[1],
        HParamsPluginData::SessionStart {
            hparams: vec![
                ("lr".into(), HParamValue::Number(0.05)),
                ("optimizer".into(), HParamValue::Str("sgd".into()))
            ]
        }
    );
    assert_eq!(hp[2], HParamsPluginData::SessionEnd { status: 1 });

    // Histograms of the weights and gradients at each epoch's end (global steps 4 and 8).
    for tag in ["weight", "bias", "weight/grad", "bias/grad"] {
        let steps: Vec<i64> =
            vs.iter().filter(|(_, _, v)| v.tag == tag && v.histogram().is_some()).map(|p| p.0).collect();
        assert_eq!(steps, [4, 8], "{tag}");
    }
    let last_w = vs.iter().rev().find(|(_, _, v)| v.tag == "weight").unwrap().2.histogram().unwrap();
    assert_eq!(last_w.num, 3.0);
    let weight = module.net.named_parameters().into_iter().find(|(n, _)| n == "weight").unwrap().1;
    let w: Vec<f64> = weight.detach().to_dtype(DType::F64).unwrap().to_vec().unwrap();
    assert!((last_w.sum - w.iter().sum::<f64>()).abs() < 1e-12);

    // hparams.yaml as the CSVLogger writes it.
    let yaml = std::fs::read_to_string(log_dir.join("hparams.yaml")).unwrap();
    assert_eq!(yaml, "lr: 0.05\noptimizer: sgd\n");
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn options_versions_prefix_and_errors() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = tmp("opts");
    let a = TensorBoardLogger::new(&root, TensorBoardLoggerOptions::default()).unwrap();
    let b = TensorBoardLogger::new(&root, TensorBoardLoggerOptions::default()).unwrap();
    assert_eq!((a.version(), b.version()), ("version_0".to_string(), "version_1".to_string()));
    let mut c = TensorBoardLogger::new(
        &root,
        TensorBoardLoggerOptions {
            name: "exp".into(),
            version: Some("run7".into()),
            prefix: "train".into(),
            sub_dir: Some("tb".into()),
            default_hp_metric: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(c.log_dir(), root.join("exp").join("run7").join("tb"));
    c.log_metrics(&[("loss".to_string(), 2.0)].into(), 5).unwrap();
    c.log_hyperparams(&[("lr".into(), HParam::Float(0.1))]).unwrap();
    c.finalize("success").unwrap();
    // After finalize, a new event file (as torch's writer after close).
    c.log_metrics(&[("loss".to_string(), 1.0)].into(), 6).unwrap();
    c.finalize("success").unwrap();
    let events = read_dir_events(c.log_dir()).unwrap();
    // No hp_metric and no hparams summaries without default_hp_metric (Lightning's behaviour).
    assert_eq!(scalars(&events), [(5, "train-loss".to_string(), 2.0), (6, "train-loss".to_string(), 1.0)]);
    assert!(values(&events).iter().all(|(_, _, v)| v.hparams().is_none()));
    assert_eq!(std::fs::read_to_string(root.join("exp/run7/hparams.yaml")).unwrap(), "lr: 0.1\n");

    // An unwritable save_dir: an error naming the path.
    let file = root.join("a_file");
    std::fs::write(&file, b"x").unwrap();
    let e = TensorBoardLogger::new(&file, TensorBoardLoggerOptions::default()).err().unwrap();
    assert!(e.to_string().contains(&file.display().to_string()), "{e}");
    std::fs::remove_dir_all(&root).ok();
}
