//! The Trainer's `ddp` strategy under `mpirun -np 2`: the same parameters as one process on
//! the whole batches, the epoch metrics averaged over the ranks, and rank 0 alone logging and
//! checkpointing.
#![cfg(feature = "mpi")]

mod common;

use common::{mpirun, under_mpirun};
use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample, TensorDataset};
use pyrite::nn::{Linear, Module};
use pyrite::optim::{SGDOptions, SGD};
use pyrite::train::{
    Context, FitOptions, LightningModule, LogOptions, OptimizerConfig, StepOutput, Strategy, Trainer,
    TrainerOptions,
};
use pyrite::{DType, Result, Tensor};
use std::sync::Arc;
use std::time::Duration;

struct Lit {
    net: Linear,
}

impl LightningModule for Lit {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn training_step(&mut self, batch: &Sample, _idx: usize, ctx: &mut Context) -> Result<StepOutput> {
        let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
        let loss = self.net.call(x)?.sub(y)?.square()?.mean()?;
        ctx.log_with(
            "train_loss",
            &loss,
            &LogOptions { on_step: Some(false), on_epoch: Some(true), ..Default::default() },
        )?;
        Ok(loss.into())
    }
    fn test_step(&mut self, batch: &Sample, _idx: usize, ctx: &mut Context) -> Result<()> {
        let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
        ctx.log("test_loss", self.net.call(x)?.sub(y)?.square()?.mean()?)
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        Ok(OptimizerConfig::new(SGD::new(
            self.net.parameters(),
            SGDOptions { lr: 0.05, momentum: 0.9, ..Default::default() },
        )?))
    }
}

fn lit() -> Lit {
    pyrite::manual_seed(2);
    let mut net = Linear::new(5, 2).unwrap();
    net.to_dtype(DType::F64).unwrap();
    Lit { net }
}

fn loader(batch: usize) -> DataLoader {
    pyrite::manual_seed(9);
    let x = Tensor::randn([64, 5], DType::F64).unwrap();
    let y = Tensor::randn([64, 2], DType::F64).unwrap();
    let ds: Arc<dyn Dataset> = Arc::new(TensorDataset::new(vec![x, y]).unwrap());
    DataLoader::new(ds, DataLoaderOptions { batch_size: Some(batch), ..Default::default() }).unwrap()
}

fn options(root: &str, strategy: Strategy) -> TrainerOptions {
    TrainerOptions {
        max_epochs: Some(3),
        enable_progress_bar: false,
        plot_curves: false,
        default_root_dir: root.into(),
        strategy,
        ..Default::default()
    }
}

#[test]
fn trainer_ddp_equals_one_process() {
    let job = mpirun(2, "scenario_trainer_ddp", &[], Duration::from_secs(120));
    job.assert_ok();
    job.assert_printed("rank 0 trainer ddp ok");
    job.assert_printed("rank 1 trainer ddp ok");
}

#[test]
#[ignore = "run under mpirun by trainer_ddp_equals_one_process"]
fn scenario_trainer_ddp() {
    assert!(under_mpirun());
    let root = std::env::temp_dir().join(format!("pyrite_trainer_ddp_{}", std::process::id()));
    let rank = std::env::var("OMPI_COMM_WORLD_RANK").unwrap();
    // one process on batches of 16 (this rank alone, no strategy)
    let mut want = lit();
    let mut single = Trainer::new(options(root.join("single").to_str().unwrap(), Strategy::Auto)).unwrap();
    single.fit(&mut want, &loader(16), FitOptions::default()).unwrap();
    // two processes on batches of 8: the DistributedSampler splits each 16 in two
    let shared_root = std::env::temp_dir().join("pyrite_trainer_ddp_shared");
    let mut got = lit();
    if rank == "1" {
        // rank 1 starts elsewhere: the strategy broadcasts rank 0's parameters
        pyrite::manual_seed(77);
        got.net = Linear::new(5, 2).unwrap();
        got.net.to_dtype(DType::F64).unwrap();
    }
    let mut trainer = Trainer::new(options(shared_root.to_str().unwrap(), Strategy::ddp(2))).unwrap();
    trainer.fit(&mut got, &loader(8), FitOptions::default()).unwrap();
    assert_eq!(trainer.world_size(), 2);
    assert_eq!(trainer.global_rank().to_string(), rank);
    for ((name, w), (_, g)) in want.net.named_parameters().iter().zip(got.net.named_parameters()) {
        let d = w.sub(&g).unwrap().abs().unwrap().max().unwrap().item::<f64>().unwrap();
        assert!(d < 1e-10, "{name} differs by {d}");
    }
    // the epoch's train loss is the mean over both ranks' batches, the same on every rank
    let loss = trainer.callback_metrics()["train_loss"];
    let all = pyrite_distributed::all_gather_object(&loss).unwrap();
    assert_eq!(all[0], all[1]);
    // rank 0 logs and checkpoints; rank 1 does neither
    if trainer.is_global_zero() {
        assert!(!trainer.loggers().is_empty());
        assert!(trainer.checkpoint_callback().is_some());
    } else {
        assert!(trainer.loggers().is_empty());
        assert!(trainer.checkpoint_callback().is_none());
    }
    // test(ckpt_path=last) on every rank: rank 0 holds the checkpoint callback and says which
    let results = trainer
        .test(
            &mut got,
            &loader(16),
            pyrite::train::EvalOptions { ckpt_path: Some(pyrite::train::CkptPath::Last), verbose: false },
        )
        .unwrap();
    let all = pyrite_distributed::all_gather_object(&results["test_loss"]).unwrap();
    assert_eq!(all[0], all[1]);
    pyrite_distributed::barrier().unwrap();
    println!("rank {rank} trainer ddp ok");
}
