//! DistributedDataParallel workloads, as reference/bench/ddp.py runs PyTorch's on gloo: each
//! starts its own MPI job (`mpirun -np 2` of this binary, `--threads` per rank) and reports
//! rank 0's figures.
//!
//! - `ddp_mlp_big` / `ddp_cnn`: the `mlp_big` and `cnn` training steps (Adam lr 1e-3) with the
//!   same global batch (128 / 64) split over the ranks, the model in DDP. 3 warm-up steps, then
//!   `--repeats` rounds of a fixed number of steps between barriers; `steps_per_s` is global
//!   steps per second (median round).
//! - `ddp_allreduce`: all_reduce of a 100 MB float32 tensor between the ranks.

use crate::timing::{median, min, round};
use crate::Args;
use pyrite::distributed::{self as dist, DdpOptions, DistributedDataParallel, ReduceOp};
use pyrite::nn::functional as F;
use pyrite::nn::Module;
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::{DType, Tensor};
use serde_json::{json, Map, Value};
use std::time::Instant;

const NPROC: usize = 2;

pub fn ddp_mlp_big(args: &Args) -> Map<String, Value> {
    job("ddp_mlp_big", args)
}

pub fn ddp_cnn(args: &Args) -> Map<String, Value> {
    job("ddp_cnn", args)
}

pub fn ddp_allreduce(args: &Args) -> Map<String, Value> {
    job("ddp_allreduce", args)
}

/// Under a launcher: this rank's part. Otherwise: starts the job and returns rank 0's record.
fn job(name: &str, args: &Args) -> Map<String, Value> {
    if dist::env::launch_env().ok().flatten().is_some() {
        return worker(name, args);
    }
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new("mpirun");
    if is_root() {
        cmd.arg("--allow-run-as-root");
    }
    cmd.args(["--oversubscribe", "--bind-to", "none", "-np", &NPROC.to_string()]).arg(exe).args([
        "--only",
        name,
        "--threads",
        &args.threads.to_string(),
        "--repeats",
        &args.repeats.to_string(),
    ]);
    let out = cmd.output().unwrap_or_else(|e| panic!("mpirun: {e} (install OpenMPI)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        if let Ok(Value::Object(rec)) = serde_json::from_str::<Value>(line)
            && let Some(Value::Object(res)) = rec.get("results")
        {
            return res.clone();
        }
    }
    panic!("the {name} job gave no result:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

fn worker(name: &str, args: &Args) -> Map<String, Value> {
    if !dist::is_initialized() {
        dist::init_process_group("mpi", Default::default()).unwrap();
    }
    let (rank, world) = (dist::get_rank().unwrap(), dist::get_world_size().unwrap());
    let mut res = Map::new();
    res.insert("ranks".into(), json!(world));
    res.insert("threads_per_rank".into(), json!(args.threads));
    res.insert("backend".into(), json!("mpi"));
    if name == "ddp_allreduce" {
        let t = Tensor::ones([25_000_000], DType::F32).unwrap();
        dist::all_reduce(&t, ReduceOp::Sum).unwrap();
        let mut times = Vec::new();
        for _ in 0..args.repeats {
            dist::barrier().unwrap();
            let t0 = Instant::now();
            dist::all_reduce(&t, ReduceOp::Sum).unwrap();
            times.push(t0.elapsed().as_secs_f64());
        }
        let med = median(&times);
        res.insert("bytes".into(), json!(100_000_000));
        res.insert("allreduce_100mb_ms".into(), json!(round(med * 1e3, 2)));
        res.insert("allreduce_gbs".into(), json!(round(0.1 / med, 3)));
    } else {
        pyrite::manual_seed(0);
        let (bs, shape, steps): (usize, Vec<usize>, usize) =
            if name == "ddp_mlp_big" { (128, vec![784], 20) } else { (64, vec![1, 28, 28], 10) };
        let model: Box<dyn Module> = if name == "ddp_mlp_big" {
            Box::new(DistributedDataParallel::new(crate::models::big_mlp(), DdpOptions::default()).unwrap())
        } else {
            Box::new(DistributedDataParallel::new(crate::models::small_cnn(), DdpOptions::default()).unwrap())
        };
        let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 1e-3, ..Default::default() }).unwrap();
        let local = bs / world;
        pyrite::manual_seed(1 + rank as u64);
        let mut xs = vec![local];
        xs.extend(&shape);
        let x = Tensor::randn(xs, DType::F32).unwrap();
        let y = Tensor::randint(0, 10, [local], DType::I64).unwrap();
        let ce = Default::default();
        let mut step = || {
            opt.zero_grad().unwrap();
            F::cross_entropy(&model.call(&x).unwrap(), &y, &ce).unwrap().backward().unwrap();
            opt.step().unwrap();
        };
        for _ in 0..3 {
            step();
        }
        let mut times = Vec::new();
        for _ in 0..args.repeats {
            dist::barrier().unwrap();
            let t0 = Instant::now();
            for _ in 0..steps {
                step();
            }
            times.push(t0.elapsed().as_secs_f64() / steps as f64);
        }
        let med = median(&times);
        res.insert("global_batch".into(), json!(bs));
        res.insert("steps_per_s".into(), json!(round(1.0 / med, 2)));
        res.insert("steps_per_s_best".into(), json!(round(1.0 / min(&times), 2)));
        res.insert("ms_per_step".into(), json!(round(med * 1e3, 3)));
    }
    if rank != 0 {
        // only rank 0's record is printed: the other ranks stop here
        dist::barrier().unwrap();
        dist::destroy_process_group();
        std::process::exit(0);
    }
    dist::barrier().unwrap();
    res
}
