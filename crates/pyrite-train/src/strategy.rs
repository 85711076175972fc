//! Strategies (Lightning's `Trainer(strategy=...)`): how `fit` spreads over processes.
//!
//! `Strategy::Ddp` is Lightning's `"ddp"` on MPI: the program runs as `devices` processes of
//! an MPI job (started by `mpirun` or `srun`, or, when run plainly, by `fit` itself through
//! `mpirun -np devices`: the starting process then exits with the job's status, as
//! Lightning's launcher re-runs the script), each on its DistributedSampler share of every
//! epoch, with gradients averaged in buckets during backward (`pyrite::distributed`'s
//! `GradientSync`, DistributedDataParallel's machinery). Rank 0 alone logs, draws curves and
//! writes checkpoints; epoch-level metrics are averaged over the ranks before callbacks see
//! them, so that every rank makes the same decisions (early stopping, best checkpoint).

use crate::results::Metrics;
use pyrite_core::{bail, Result};
use pyrite_data::{DataLoader, DataLoaderOptions, DistributedSampler, DistributedSamplerOptions};
use pyrite_distributed::{self as dist, DdpOptions, GradientSync};
use pyrite_nn::Module;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How `fit` runs (Lightning's `strategy`).
#[derive(Clone, Default)]
pub enum Strategy {
    /// One process (Lightning's `"auto"` on one device).
    #[default]
    Auto,
    /// Distributed data parallel over `devices` processes (Lightning's `"ddp"`).
    Ddp(DdpStrategy),
}

/// Lightning's `DDPStrategy`: the number of processes and DDP's options.
#[derive(Clone)]
pub struct DdpStrategy {
    /// Processes to start when the program runs without a launcher (Lightning's `devices`);
    /// under a launcher the job's size must match.
    pub devices: usize,
    /// DistributedDataParallel's options (`find_unused_parameters`, `bucket_cap_mb`, ...).
    pub options: DdpOptions,
}

impl Default for DdpStrategy {
    fn default() -> Self {
        DdpStrategy { devices: 2, options: DdpOptions::default() }
    }
}

impl Strategy {
    /// `strategy="ddp", devices=n`.
    pub fn ddp(devices: usize) -> Strategy {
        Strategy::Ddp(DdpStrategy { devices, ..Default::default() })
    }
}

/// A running `ddp` fit's state.
pub(crate) struct Distributed {
    pub sync: GradientSync,
    pub sampler: Arc<DistributedSampler>,
    pub rank: usize,
    pub world: usize,
}

/// Starts the job (or joins it) and prepares `module` and the training loader; `None` for
/// one process.
pub(crate) fn setup(
    strategy: &Strategy,
    module: &dyn Module,
    train: &DataLoader,
) -> Result<Option<(Distributed, DataLoader)>> {
    let Strategy::Ddp(ddp) = strategy else { return Ok(None) };
    if let Some(status) = dist::launch::relaunch_under_mpirun(ddp.devices)? {
        std::process::exit(status.code().unwrap_or(1));
    }
    if !dist::is_initialized() {
        dist::init_process_group("mpi", Default::default())?;
    }
    let (rank, world) = (dist::get_rank()?, dist::get_world_size()?);
    if world != ddp.devices {
        bail!(
            Value,
            "strategy ddp with devices={} runs in a job of {world} processes: start it with mpirun -np {} (or run it plainly and let fit start the job)",
            ddp.devices,
            ddp.devices
        );
    }
    let sync = GradientSync::new(module, &ddp.options)?;
    // Lightning's use_distributed_sampler: this rank's share, shuffled as the loader was
    let o = train.options();
    if o.batch_sampler.is_some() {
        bail!(Value, "strategy ddp replaces the training loader's sampler with a DistributedSampler; a batch_sampler cannot be replaced");
    }
    let sampler = Arc::new(DistributedSampler::with_options(
        train.dataset().len(),
        DistributedSamplerOptions {
            num_replicas: world,
            rank,
            shuffle: o.shuffle || o.sampler.is_some(),
            ..Default::default()
        },
    )?);
    let loader = DataLoader::new(
        train.dataset().clone(),
        DataLoaderOptions { shuffle: false, sampler: Some(sampler.clone()), ..o.clone() },
    )?;
    Ok(Some((Distributed { sync, sampler, rank, world }, loader)))
}

impl Distributed {
    /// Every rank's epoch-level values averaged over the ranks (keys every rank logged).
    pub fn sync_metrics(&self, m: Metrics) -> Result<Metrics> {
        Ok(Metrics {
            log: mean_over_ranks(&m.log)?,
            callback: mean_over_ranks(&m.callback)?,
            pbar: mean_over_ranks(&m.pbar)?,
        })
    }
}

/// The values of `map` averaged over the ranks, for the keys every rank has.
fn mean_over_ranks(map: &BTreeMap<String, f64>) -> Result<BTreeMap<String, f64>> {
    let all = dist::all_gather_object(map)?;
    let mut out = BTreeMap::new();
    for k in map.keys() {
        let vals: Vec<f64> = all.iter().filter_map(|r| r.get(k).copied()).collect();
        if vals.len() == all.len() {
            out.insert(k.clone(), vals.iter().sum::<f64>() / vals.len() as f64);
        }
    }
    Ok(out)
}
