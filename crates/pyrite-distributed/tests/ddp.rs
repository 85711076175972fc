//! DistributedDataParallel under `mpirun -np 2`: each rank trains on its half of every global
//! batch (the DistributedSampler's share), and after 20 steps the parameters equal one
//! process trained on the whole batches, to 1e-6 in f64: SGD with momentum, Adam, `no_sync`
//! accumulation, an unused parameter, gradients as bucket views, many small buckets, and the
//! bf16 compression hook (to bf16's precision).
#![cfg(feature = "mpi")]

mod common;

use common::{mpirun, under_mpirun};
use pyrite::data::{DistributedSampler, DistributedSamplerOptions, Sampler};
use pyrite::nn::{self, Linear, Module, ModuleBase, Tanh};
use pyrite::optim::{Adam, AdamOptions, Optimizer, SGDOptions, SGD};
use pyrite::{DType, Tensor};
use pyrite_distributed::{self as dist, comm_hooks, DdpOptions, DistributedDataParallel};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);
const STEPS: usize = 20;
const GLOBAL_BATCH: usize = 16;

#[derive(nn::Module)]
struct Net {
    base: ModuleBase,
    fc1: Linear,
    act: Tanh,
    fc2: Linear,
    /// never used in forward
    spare: Linear,
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> pyrite::Result<Tensor> {
        self.fc2.call(&self.act.call(&self.fc1.call(x)?)?)
    }
}

fn net() -> Net {
    pyrite::manual_seed(7);
    let mut n = Net {
        base: ModuleBase::new(),
        fc1: Linear::new(6, 32).unwrap(),
        act: Tanh::new(),
        fc2: Linear::new(32, 3).unwrap(),
        spare: Linear::new(3, 3).unwrap(),
    };
    n.to_dtype(DType::F64).unwrap();
    n
}

/// The whole data set: STEPS global batches of inputs and targets.
fn data() -> (Tensor, Tensor) {
    pyrite::manual_seed(11);
    let x = Tensor::randn([STEPS * GLOBAL_BATCH, 6], DType::F64).unwrap();
    let y = Tensor::randn([STEPS * GLOBAL_BATCH, 3], DType::F64).unwrap();
    (x, y)
}

fn rows(t: &Tensor, idx: &[usize]) -> Tensor {
    let i = Tensor::from_vec(idx.iter().map(|&i| i as i64).collect::<Vec<_>>(), [idx.len()]).unwrap();
    t.index_select(0, &i).unwrap()
}

fn mse(out: &Tensor, y: &Tensor) -> Tensor {
    out.sub(y).unwrap().pow_scalar(2.0).unwrap().mean().unwrap()
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Case {
    Sgd,
    Adam,
    NoSync,
    BucketView,
    SmallBuckets,
    Bf16Hook,
}

fn optimizer(case: Case, params: Vec<Tensor>) -> Box<dyn Optimizer> {
    if case == Case::Adam {
        Box::new(Adam::new(params, AdamOptions { lr: 1e-2, ..Default::default() }).unwrap())
    } else {
        Box::new(SGD::new(params, SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() }).unwrap())
    }
}

/// One process on the whole batches.
fn reference(case: Case) -> Net {
    let model = net();
    let (x, y) = data();
    let mut opt = optimizer(case, model.parameters());
    for s in 0..STEPS {
        let idx: Vec<usize> = (s * GLOBAL_BATCH..(s + 1) * GLOBAL_BATCH).collect();
        opt.zero_grad().unwrap();
        mse(&model.call(&rows(&x, &idx)).unwrap(), &rows(&y, &idx)).backward().unwrap();
        opt.step().unwrap();
    }
    model
}

/// Each rank on its DistributedSampler share of every global batch.
fn distributed(case: Case) -> DistributedDataParallel<Net> {
    let (r, n) = (dist::get_rank().unwrap(), dist::get_world_size().unwrap());
    let mut local = net();
    if r == 1 {
        // rank 1 starts elsewhere: construction broadcasts rank 0's parameters
        pyrite::manual_seed(99);
        local = Net { fc1: Linear::new(6, 32).unwrap(), ..local };
        local.to_dtype(DType::F64).unwrap();
    }
    let options = DdpOptions {
        find_unused_parameters: true,
        gradient_as_bucket_view: case == Case::BucketView,
        bucket_cap_mb: if case == Case::SmallBuckets { 0.0005 } else { 25.0 },
        first_bucket_cap_mb: if case == Case::SmallBuckets { 0.0001 } else { 1.0 },
        ..Default::default()
    };
    let model = DistributedDataParallel::new(local, options).unwrap();
    if case == Case::SmallBuckets {
        assert!(model.bucket_sizes().len() >= 3, "{:?}", model.bucket_parameter_names());
    }
    if case == Case::Bf16Hook {
        model.register_comm_hook(comm_hooks::bf16_compress_hook);
    }
    let (x, y) = data();
    let sampler = DistributedSampler::with_options(
        STEPS * GLOBAL_BATCH,
        DistributedSamplerOptions { num_replicas: n, rank: r, shuffle: false, ..Default::default() },
    )
    .unwrap();
    let mine = sampler.indices().unwrap();
    let local_batch = GLOBAL_BATCH / n;
    let mut opt = optimizer(case, model.parameters());
    for s in 0..STEPS {
        let idx = &mine[s * local_batch..(s + 1) * local_batch];
        opt.zero_grad().unwrap();
        if case == Case::NoSync {
            // the DistributedSampler interleaves ranks: this rank's half of each global micro-batch
            let (a, b) = idx.split_at(local_batch / 2);
            {
                let _local = model.no_sync();
                mse(&model.call(&rows(&x, a)).unwrap(), &rows(&y, a)).backward().unwrap();
            }
            mse(&model.call(&rows(&x, b)).unwrap(), &rows(&y, b)).backward().unwrap();
        } else {
            mse(&model.call(&rows(&x, idx)).unwrap(), &rows(&y, idx)).backward().unwrap();
        }
        opt.step().unwrap();
    }
    model
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    a.sub(b).unwrap().abs().unwrap().max().unwrap().item::<f64>().unwrap()
}

#[test]
fn ddp_equals_one_process_on_the_whole_batch() {
    let job = mpirun(2, "scenario_ddp_equivalence", &[], LIMIT);
    job.assert_ok();
    job.assert_printed("rank 0 Sgd max |diff|");
    job.assert_printed("rank 1 Bf16Hook max |diff|");
}

#[test]
#[ignore = "run under mpirun by ddp_equals_one_process_on_the_whole_batch"]
fn scenario_ddp_equivalence() {
    assert!(under_mpirun());
    dist::init_process_group("mpi", Default::default()).unwrap();
    let r = dist::get_rank().unwrap();
    for case in [Case::Sgd, Case::Adam, Case::NoSync, Case::BucketView, Case::SmallBuckets, Case::Bf16Hook] {
        // the no_sync micro-batches: the sampler interleaves, so a rank's first half of its
        // share is not the first global micro-batch; the reference takes the same split
        let want = if case == Case::NoSync { reference_interleaved_no_sync() } else { reference(case) };
        let got = distributed(case);
        let tol = if case == Case::Bf16Hook { 2e-2 } else { 1e-6 };
        let mut worst = 0f64;
        let got_params = got.module.named_parameters();
        for ((name, w), (_, g)) in want.named_parameters().iter().zip(&got_params) {
            if name.starts_with("spare") {
                // no rank used it: no gradient anywhere, untouched
                assert!(g.grad().is_none(), "{case:?}: {name} got a gradient");
                assert_eq!(max_diff(w, g), 0.0);
                continue;
            }
            let d = max_diff(w, g);
            assert!(d < tol, "{case:?}: {name} differs by {d}");
            worst = worst.max(d);
        }
        // every rank holds the same parameters
        for (name, p) in &got_params {
            let other = p.detach().deep_clone().unwrap();
            dist::broadcast(&other, 0).unwrap();
            assert_eq!(max_diff(p, &other), 0.0, "{case:?}: {name} differs between ranks");
        }
        if case != Case::Bf16Hook {
            assert!(worst > 0.0 || case == Case::Bf16Hook, "{case:?}: nothing was compared");
        }
        println!("rank {r} {case:?} max |diff| {worst:e}");
    }
}

/// `Case::NoSync`'s reference: the micro-batches are the two halves of each rank's share,
/// joined across ranks.
fn reference_interleaved_no_sync() -> Net {
    let model = net();
    let (x, y) = data();
    let n = 2;
    let shares: Vec<Vec<usize>> = (0..n)
        .map(|r| {
            DistributedSampler::with_options(
                STEPS * GLOBAL_BATCH,
                DistributedSamplerOptions { num_replicas: n, rank: r, shuffle: false, ..Default::default() },
            )
            .unwrap()
            .indices()
            .unwrap()
        })
        .collect();
    let local_batch = GLOBAL_BATCH / n;
    let mut opt = optimizer(Case::NoSync, model.parameters());
    for s in 0..STEPS {
        opt.zero_grad().unwrap();
        for half in 0..2 {
            let idx: Vec<usize> = shares
                .iter()
                .flat_map(|m| {
                    let share = &m[s * local_batch..(s + 1) * local_batch];
                    share[half * local_batch / 2..(half + 1) * local_batch / 2].to_vec()
                })
                .collect();
            mse(&model.call(&rows(&x, &idx)).unwrap(), &rows(&y, &idx)).backward().unwrap();
        }
        opt.step().unwrap();
    }
    model
}

#[test]
fn ddp_checks_models_and_unused_parameters() {
    let job = mpirun(2, "scenario_ddp_errors", &[], LIMIT);
    job.assert_ok();
}

#[test]
#[ignore = "run under mpirun by ddp_checks_models_and_unused_parameters"]
fn scenario_ddp_errors() {
    assert!(under_mpirun());
    dist::init_process_group("mpi", Default::default()).unwrap();
    let r = dist::get_rank().unwrap();
    // a different model on rank 1
    let lin = if r == 0 { Linear::new(4, 2).unwrap() } else { Linear::new(4, 3).unwrap() };
    let e = DistributedDataParallel::new(lin, DdpOptions::default()).err().unwrap();
    assert!(e.to_string().contains("DDP expects same model across all ranks"), "{e}");
    // an unused parameter without find_unused_parameters: the next forward says which
    let model = DistributedDataParallel::new(net(), DdpOptions::default()).unwrap();
    let names = model.bucket_parameter_names();
    assert_eq!(names.len(), 1, "one bucket of 3 KiB");
    assert_eq!(names[0][0], "spare.bias", "buckets fill in reverse parameter order");
    let (x, _) = data();
    let x = x.narrow(0, 0, 4).unwrap();
    model.call(&x).unwrap().sum().unwrap().backward().unwrap();
    let e = model.call(&x).err().unwrap();
    let msg = e.to_string();
    assert!(
        msg.contains("Expected to have finished reduction in the prior iteration before starting a new one."),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "Parameters which did not receive grad for rank {r}: spare.weight, spare.bias"
        )),
        "{msg}"
    );
    // state_dict keys carry the `module.` prefix
    let keys: Vec<String> = model.state_dict().unwrap().keys().map(|k| k.to_string()).collect();
    assert_eq!(keys[0], "module.fc1.weight");
    println!("rank {r} ok");
}

// ------------------------------------------------------------------------ SyncBatchNorm

#[derive(nn::Module)]
struct BnNet {
    base: ModuleBase,
    fc1: Linear,
    bn: nn::BatchNorm1d,
    act: Tanh,
    fc2: Linear,
}

impl Module for BnNet {
    fn forward(&self, x: &Tensor) -> pyrite::Result<Tensor> {
        self.fc2.call(&self.act.call(&self.bn.call(&self.fc1.call(x)?)?)?)
    }
}

fn bn_net() -> BnNet {
    pyrite::manual_seed(5);
    let mut n = BnNet {
        base: ModuleBase::new(),
        fc1: Linear::new(6, 16).unwrap(),
        bn: nn::BatchNorm1d::new(16).unwrap(),
        act: Tanh::new(),
        fc2: Linear::new(16, 3).unwrap(),
    };
    n.to_dtype(DType::F64).unwrap();
    n
}

#[test]
fn sync_batchnorm_equals_batchnorm_on_the_whole_batch() {
    let job = mpirun(2, "scenario_sync_batchnorm", &[], LIMIT);
    job.assert_ok();
    job.assert_printed("rank 1 SyncBatchNorm max |diff|");
}

#[test]
#[ignore = "run under mpirun by sync_batchnorm_equals_batchnorm_on_the_whole_batch"]
fn scenario_sync_batchnorm() {
    assert!(under_mpirun());
    dist::init_process_group("mpi", Default::default()).unwrap();
    let (r, n) = (dist::get_rank().unwrap(), dist::get_world_size().unwrap());
    let (x, y) = data();
    // one process, plain BatchNorm on the whole batches
    let want = bn_net();
    let mut opt = optimizer(Case::Sgd, want.parameters());
    for s in 0..STEPS {
        let idx: Vec<usize> = (s * GLOBAL_BATCH..(s + 1) * GLOBAL_BATCH).collect();
        opt.zero_grad().unwrap();
        mse(&want.call(&rows(&x, &idx)).unwrap(), &rows(&y, &idx)).backward().unwrap();
        opt.step().unwrap();
    }
    // each rank on its half, the batch norm synchronized
    let local = bn_net();
    assert_eq!(dist::convert_sync_batchnorm(&local, None).unwrap(), 1);
    let model = DistributedDataParallel::new(local, DdpOptions::default()).unwrap();
    let sampler = DistributedSampler::with_options(
        STEPS * GLOBAL_BATCH,
        DistributedSamplerOptions { num_replicas: n, rank: r, shuffle: false, ..Default::default() },
    )
    .unwrap();
    let mine = sampler.indices().unwrap();
    let lb = GLOBAL_BATCH / n;
    let mut opt = optimizer(Case::Sgd, model.parameters());
    for s in 0..STEPS {
        let idx = &mine[s * lb..(s + 1) * lb];
        opt.zero_grad().unwrap();
        mse(&model.call(&rows(&x, idx)).unwrap(), &rows(&y, idx)).backward().unwrap();
        opt.step().unwrap();
    }
    let mut worst = 0f64;
    let want_sd = want.state_dict().unwrap();
    let got_sd = model.module.state_dict().unwrap();
    for (k, w) in want_sd.iter() {
        let g = got_sd.iter().find(|(k2, _)| *k2 == k).unwrap().1;
        let d = max_diff(&w.to_dtype(DType::F64).unwrap(), &g.to_dtype(DType::F64).unwrap());
        assert!(d < 1e-6, "{k} differs by {d}");
        worst = worst.max(d);
    }
    assert!(worst > 0.0);
    // evaluation uses the running statistics, with no communication
    model.eval();
    want.eval();
    let a = want.call(&x.narrow(0, 0, 4).unwrap()).unwrap();
    let b = model.call(&x.narrow(0, 0, 4).unwrap()).unwrap();
    assert!(max_diff(&a, &b) < 1e-6);
    // a SyncBatchNorm layer built directly uses the default group
    let sbn = nn::SyncBatchNorm::new(3).unwrap();
    let xin = Tensor::from_vec(vec![r as f32 * 2.0; 6], [2, 3]).unwrap();
    let out = sbn.call(&xin).unwrap();
    // the global batch is {0, 0, 2, 2} per channel: mean 1, variance 1
    let o: Vec<f32> = out.flatten(0, -1).unwrap().to_vec().unwrap();
    let want_o = if r == 0 { -1.0 } else { 1.0 };
    assert!(o.iter().all(|v| (v - want_o).abs() < 1e-3), "{o:?}");
    println!("rank {r} SyncBatchNorm max |diff| {worst:e}");
}

// ----------------------------------------------------------------------------- overlap

#[test]
fn bucket_all_reduces_run_during_backward() {
    let job = mpirun(2, "scenario_overlap", &[], LIMIT);
    job.assert_ok();
    job.assert_printed("rank 0 all-reduces started during backward");
}

#[test]
#[ignore = "run under mpirun by bucket_all_reduces_run_during_backward"]
fn scenario_overlap() {
    use pyrite_core::profiler_record::{self, RecordOptions};
    assert!(under_mpirun());
    dist::init_process_group("mpi", Default::default()).unwrap();
    let r = dist::get_rank().unwrap();
    pyrite::manual_seed(3);
    let mut seq = nn::Sequential::new();
    for _ in 0..6 {
        seq.push(Linear::new(256, 256).unwrap());
        seq.push(Tanh::new());
    }
    // 257 KiB per layer: a bucket per layer or so
    let options = DdpOptions { bucket_cap_mb: 0.25, first_bucket_cap_mb: 0.25, ..Default::default() };
    let model = DistributedDataParallel::new(seq, options).unwrap();
    let buckets = model.bucket_sizes().len();
    assert!(buckets >= 5, "{buckets} buckets");
    let x = Tensor::randn([512, 256], DType::F32).unwrap();
    let step = || {
        model.zero_grad().unwrap();
        model.call(&x).unwrap().square().unwrap().mean().unwrap().backward().unwrap();
    };
    step(); // warm up
    profiler_record::start(RecordOptions::default()).unwrap();
    step();
    let events = profiler_record::stop();
    let main_tid = events.iter().find(|e| e.name.starts_with("autograd::engine")).unwrap().tid;
    let backward: Vec<_> =
        events.iter().filter(|e| e.tid == main_tid && e.name.starts_with("autograd::engine")).collect();
    let b0 = backward.iter().map(|e| e.start_ns).min().unwrap();
    let b1 = backward.iter().map(|e| e.start_ns + e.dur_ns).max().unwrap();
    let mut comms: Vec<_> = events.iter().filter(|e| e.name == "mpi:all_reduce").collect();
    comms.sort_by_key(|e| e.start_ns);
    assert_eq!(comms.len(), buckets, "one all-reduce per bucket");
    assert!(comms.iter().all(|e| e.tid != main_tid), "the all-reduces run on the MPI thread");
    let started_during = comms.iter().filter(|e| e.start_ns < b1).count();
    let finished_during = comms.iter().filter(|e| e.start_ns + e.dur_ns < b1).count();
    let ms = |ns: u64| ns as f64 / 1e6;
    for e in &comms {
        println!(
            "rank {r} all_reduce {:.2}..{:.2} ms (backward 0..{:.2} ms)",
            ms(e.start_ns.saturating_sub(b0)),
            ms(e.start_ns + e.dur_ns - b0),
            ms(b1 - b0)
        );
    }
    // The hooks hand each bucket to the MPI thread as soon as it is full: the first long
    // before backward ends, on the training thread.
    let mut launches: Vec<_> =
        events.iter().filter(|e| e.name == "DistributedDataParallel.launch_bucket").collect();
    launches.sort_by_key(|e| e.start_ns);
    assert_eq!(launches.len(), buckets);
    assert!(launches.iter().all(|e| e.tid == main_tid));
    assert!(
        launches[0].start_ns - b0 < (b1 - b0) / 2,
        "the first bucket went out only at the end of backward"
    );
    // The MPI thread starts the first all-reduce during backward. How many finish before it
    // ends depends on free cores and on the slower rank (collectives run one at a time, and on 2
    // cores both ranks' backward and MPI threads share them), so that is printed, not asserted.
    assert!(started_during >= 1, "no all-reduce started during backward");
    println!("rank {r} all-reduces started during backward: {started_during} of {buckets}, finished during it: {finished_during}");
}

// ------------------------------------------------------- two machines, in network namespaces

/// DDP's equivalence test across two network namespaces (two hosts, TCP only), through
/// `scripts/netns_mpirun.sh`. Needs root and iproute2: runs when `PYRITE_TEST_NETNS=1` (CI
/// sets it), and says it did not run otherwise.
#[test]
fn ddp_across_two_network_namespaces() {
    if std::env::var("PYRITE_TEST_NETNS").as_deref() != Ok("1") {
        eprintln!("not run: set PYRITE_TEST_NETNS=1 (as root, with iproute2) to run DDP across two network namespaces");
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/netns_mpirun.sh");
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(script)
        .arg("2")
        .arg(exe)
        .args(["--ignored", "--exact", "scenario_ddp_equivalence", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("rank 1 Bf16Hook max |diff|") && text.contains("rank 0 Sgd max |diff|"), "{text}");
}
