//! The order of every callback and module hook, against Lightning's own Trainer:
//! reference/gen_hook_order.py runs the same configurations through `pytorch_lightning` with
//! recording hooks and writes reference/data/hook_order.json.

use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample, TensorDataset};
use pyrite::nn::{Linear, Module};
use pyrite::optim::{Optimizer, SGDOptions, SGD};
use pyrite::prelude::*;
use pyrite::train::{
    Callback, Context, EvalOptions, FitOptions, Flow, LightningModule, Limit, OptimizerConfig, Stage,
    StepOutput, Trainer, TrainerOptions,
};
use serde_json::Value as Json;
use std::sync::{Arc, Mutex};

type Events = Arc<Mutex<Vec<String>>>;

struct Recorder(Events);

impl Recorder {
    fn push(&self, s: impl Into<String>) {
        self.0.lock().unwrap().push(s.into());
    }
}

macro_rules! plain_hooks {
    ($($hook:ident),*) => {
        $(fn $hook(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
            self.push(stringify!($hook));
            Ok(())
        })*
    };
}

macro_rules! batch_hooks {
    ($($hook:ident),*) => {
        $(fn $hook(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule, _b: &Sample, i: usize) -> Result<()> {
            self.push(format!("{}({i})", stringify!($hook)));
            Ok(())
        })*
    };
}

impl Callback for Recorder {
    plain_hooks!(
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
        on_test_start,
        on_test_end,
        on_test_epoch_start,
        on_test_epoch_end,
        on_before_zero_grad,
        on_after_backward,
        on_before_optimizer_step
    );
    batch_hooks!(
        on_train_batch_start,
        on_validation_batch_start,
        on_validation_batch_end,
        on_test_batch_start,
        on_test_batch_end
    );
    fn setup(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule, _s: Stage) -> Result<()> {
        self.push("setup");
        Ok(())
    }
    fn teardown(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule, _s: Stage) -> Result<()> {
        self.push("teardown");
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
        self.push(format!("on_train_batch_end({i})"));
        Ok(())
    }
    fn on_before_backward(
        &mut self,
        _t: &mut Trainer,
        _m: &mut dyn LightningModule,
        _l: &Tensor,
    ) -> Result<()> {
        self.push("on_before_backward");
        Ok(())
    }
}

struct Lit {
    net: Linear,
    events: Events,
}

impl Lit {
    fn ev(&self, s: impl std::fmt::Display) {
        self.events.lock().unwrap().push(format!("module.{s}"));
    }
    fn loss(&self, batch: &Sample) -> Result<Tensor> {
        let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
        F::cross_entropy(&self.net.call(x)?, y, &Default::default())
    }
}

macro_rules! module_hooks {
    ($($hook:ident),*) => {
        $(fn $hook(&mut self, _ctx: &mut Context) -> Result<()> {
            self.ev(stringify!($hook));
            Ok(())
        })*
    };
}

impl LightningModule for Lit {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, i: usize, _ctx: &mut Context) -> Result<StepOutput> {
        self.ev(format!("training_step({i})"));
        Ok(self.loss(batch)?.into())
    }
    fn validation_step(&mut self, batch: &Sample, i: usize, ctx: &mut Context) -> Result<()> {
        self.ev(format!("validation_step({i})"));
        ctx.log("val_loss", self.loss(batch)?)
    }
    fn test_step(&mut self, _batch: &Sample, i: usize, _ctx: &mut Context) -> Result<()> {
        self.ev(format!("test_step({i})"));
        Ok(())
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        self.ev("configure_optimizers");
        Ok(OptimizerConfig::new(SGD::new(
            self.net.parameters(),
            SGDOptions { lr: 0.1, ..Default::default() },
        )?))
    }
    module_hooks!(
        on_fit_start,
        on_fit_end,
        on_train_start,
        on_train_end,
        on_train_epoch_start,
        on_train_epoch_end,
        on_validation_epoch_start,
        on_validation_epoch_end,
        on_test_epoch_start,
        on_test_epoch_end
    );
    fn on_train_batch_start(&mut self, _b: &Sample, i: usize, _ctx: &mut Context) -> Result<Flow> {
        self.ev(format!("on_train_batch_start({i})"));
        Ok(Flow::Continue)
    }
    fn on_train_batch_end(
        &mut self,
        _o: &StepOutput,
        _b: &Sample,
        i: usize,
        _ctx: &mut Context,
    ) -> Result<()> {
        self.ev(format!("on_train_batch_end({i})"));
        Ok(())
    }
    fn on_before_zero_grad(&mut self, _o: &dyn Optimizer) -> Result<()> {
        self.ev("on_before_zero_grad");
        Ok(())
    }
    fn on_before_backward(&mut self, _l: &Tensor) -> Result<()> {
        self.ev("on_before_backward");
        Ok(())
    }
    fn on_after_backward(&mut self) -> Result<()> {
        self.ev("on_after_backward");
        Ok(())
    }
    fn on_before_optimizer_step(&mut self, _o: &dyn Optimizer) -> Result<()> {
        self.ev("on_before_optimizer_step");
        Ok(())
    }
}

fn loader(n: usize) -> DataLoader {
    let x = Tensor::randn([n, 4], DType::F32).unwrap();
    let y = Tensor::from_slice(&(0..n as i64).map(|i| i % 2).collect::<Vec<_>>(), [n]).unwrap();
    let ds: Arc<dyn Dataset> = Arc::new(TensorDataset::new(vec![x, y]).unwrap());
    DataLoader::new(ds, DataLoaderOptions { batch_size: Some(4), ..Default::default() }).unwrap()
}

#[test]
fn hooks_run_in_the_order_lightnings_trainer_calls_them() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/hook_order.json");
    let reference: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let configs = reference["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 3);
    for cfg in configs {
        let events: Events = Default::default();
        let int = |k: &str| cfg.get(k).and_then(Json::as_u64).map(|v| v as usize);
        let mut options = TrainerOptions {
            max_epochs: int("max_epochs"),
            num_sanity_val_steps: int("num_sanity_val_steps").unwrap() as i64,
            accumulate_grad_batches: int("accumulate_grad_batches").unwrap_or(1),
            callbacks: vec![Box::new(Recorder(events.clone()))],
            enable_progress_bar: false,
            enable_checkpointing: false,
            plot_curves: false,
            logger: Some(vec![]),
            ..Default::default()
        };
        if let Some(n) = int("val_check_interval") {
            options.val_check_interval = Limit::Batches(n);
        }
        let mut trainer = Trainer::new(options).unwrap();
        let mut lit = Lit { net: Linear::new(4, 2).unwrap(), events: events.clone() };
        let (train, val) = (loader(int("train").unwrap()), loader(int("val").unwrap()));
        trainer
            .fit(&mut lit, &train, FitOptions { val_dataloaders: Some(&val), ..Default::default() })
            .unwrap();
        if int("test").unwrap() > 0 {
            trainer.test(&mut lit, &loader(int("test").unwrap()), EvalOptions::default()).unwrap();
        }
        let got = events.lock().unwrap().clone();
        let want: Vec<String> = serde_json::from_value(cfg["events"].clone()).unwrap();
        if got != want {
            let first = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
            panic!(
                "{}: hooks differ from Lightning's at event {first}:\n  got  {:?}\n  want {:?}",
                cfg["name"],
                &got[first.saturating_sub(3)..(first + 5).min(got.len())],
                &want[first.saturating_sub(3)..(first + 5).min(want.len())],
            );
        }
    }
}
