//! Pipeline parallelism under `mpirun`, one stage per rank: GPipe and 1F1B on 2 and 3 ranks
//! give each stage the unsplit model's gradients (f64, to 1e-6) and the last rank its losses;
//! a pipeline that does not fit the world, or ranks that build different schedules, are
//! errors that say so.
#![cfg(feature = "mpi")]

mod common;

use common::{mpirun, under_mpirun};
use pyrite::nn::{Linear, Module, Sequential, Tanh};
use pyrite::{DType, Tensor};
use pyrite_distributed::pipelining::{split_sequential, Schedule1F1B, ScheduleGPipe, ScheduleOptions};
use pyrite_distributed::{self as dist, InitOptions};
use std::collections::HashMap;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn init(timeout: Duration) -> (usize, usize) {
    assert!(under_mpirun(), "run by the test of the same name under mpirun");
    dist::init_process_group("mpi", InitOptions { timeout, ..Default::default() }).unwrap();
    (dist::get_rank().unwrap(), dist::get_world_size().unwrap())
}

fn model() -> Sequential {
    pyrite::manual_seed(1);
    let mut m = Sequential::new()
        .append(Linear::new(5, 16).unwrap())
        .append(Tanh::new())
        .append(Linear::new(16, 16).unwrap())
        .append(Tanh::new())
        .append(Linear::new(16, 8).unwrap())
        .append(Tanh::new())
        .append(Linear::new(8, 3).unwrap());
    m.to_dtype(DType::F64).unwrap();
    m
}

fn mse(out: &Tensor, y: &Tensor) -> pyrite::Result<Tensor> {
    out.sub(y)?.pow_scalar(2.0)?.mean()
}

/// The gradients by name; empty where there is none (`zero_grad` sets them to `None`).
fn grads(m: &dyn Module) -> HashMap<String, Vec<f64>> {
    let g = |p: &Tensor| p.grad().map(|g| g.to_vec::<f64>().unwrap()).unwrap_or_default();
    m.named_parameters().into_iter().map(|(n, p)| (n.clone(), g(&p))).collect()
}

// ------------------------------------------------------------------------ equivalence

#[test]
fn pipelines_on_2_ranks_give_the_unsplit_gradients() {
    mpirun(2, "scenario_equivalence", &[], LIMIT).assert_ok();
}

#[test]
fn pipelines_on_3_ranks_give_the_unsplit_gradients() {
    let job = mpirun(3, "scenario_equivalence", &[], LIMIT);
    job.assert_ok();
    job.assert_printed("rank 2: losses and gradients equal the unsplit model's");
}

#[test]
#[ignore = "run under mpirun by pipelines_on_{2,3}_ranks_give_the_unsplit_gradients"]
fn scenario_equivalence() {
    let (r, n) = init(Duration::from_secs(60));
    let split: &[usize] = if n == 2 { &[4] } else { &[2, 4] };
    let net = model();
    for (kind, m) in [("GPipe", 4), ("1F1B", 4), ("1F1B", 6), ("GPipe", 1)] {
        let stage = split_sequential(&net, split).unwrap().swap_remove(r);
        let names: Vec<String> = stage.module().named_parameters().into_iter().map(|(n, _)| n).collect();
        let (mut gpipe, mut one_f_one_b) = (None, None);
        if kind == "GPipe" {
            gpipe = Some(ScheduleGPipe::new(vec![stage], m, mse, ScheduleOptions::default()).unwrap());
        } else {
            one_f_one_b = Some(Schedule1F1B::new(vec![stage], m, mse, ScheduleOptions::default()).unwrap());
        }
        for step in 0..2u64 {
            pyrite::manual_seed(10 + step);
            let (x, y) =
                (Tensor::randn([12, 5], DType::F64).unwrap(), Tensor::randn([12, 3], DType::F64).unwrap());
            // the unsplit model on the whole batch, on every rank
            net.zero_grad().unwrap();
            let loss = mse(&net.call(&x).unwrap(), &y).unwrap();
            loss.backward().unwrap();
            let want = grads(&net);
            net.zero_grad().unwrap();
            // the pipeline: the input on rank 0, the target on the last rank
            let (input, target) = ((r == 0).then_some(&x), (r == n - 1).then_some(&y));
            let losses = match (&mut gpipe, &mut one_f_one_b) {
                (Some(s), _) => s.step(input, target).unwrap(),
                (_, Some(s)) => s.step(input, target).unwrap(),
                _ => unreachable!(),
            };
            if r == n - 1 {
                assert_eq!(losses.len(), m);
                let mean = losses.iter().map(|l| l.item::<f64>().unwrap()).sum::<f64>() / m as f64;
                let d = (mean - loss.item::<f64>().unwrap()).abs();
                assert!(d < 1e-12, "{kind} m={m}: mean loss differs by {d}");
            } else {
                assert!(losses.is_empty());
            }
            let got = grads(&net);
            for name in &names {
                assert_eq!(got[name].len(), want[name].len(), "rank {r}: {name} has no gradient");
                let d = got[name].iter().zip(&want[name]).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                assert!(d < 1e-6, "rank {r}, {kind} m={m}, step {step}: {name} differs by {d}");
            }
            // the stages of the other ranks left this rank's other parameters alone
            for (name, g) in &got {
                if !names.contains(name) {
                    assert!(g.is_empty(), "rank {r}: {name} got a gradient from another rank's stage");
                }
            }
            let t = match (&gpipe, &one_f_one_b) {
                (Some(s), _) => s.timeline().clone(),
                (_, Some(s)) => s.timeline().clone(),
                _ => unreachable!(),
            };
            assert_eq!(t.stages.len(), 1);
            assert_eq!(t.stages[0].stage_index, r);
            assert_eq!(t.stages[0].events.len(), 2 * m);
        }
    }
    dist::barrier().unwrap();
    println!("rank {r}: losses and gradients equal the unsplit model's");
}

// ------------------------------------------------------------------------------ errors

#[test]
fn a_pipeline_that_does_not_fit_the_world_is_an_error() {
    let job = mpirun(2, "scenario_errors", &[], LIMIT);
    job.assert_ok();
    job.assert_printed("rank 1 saw every error");
}

#[test]
#[ignore = "run under mpirun by a_pipeline_that_does_not_fit_the_world_is_an_error"]
fn scenario_errors() {
    let (r, _) = init(Duration::from_secs(60));
    let net = model();
    let o = ScheduleOptions::default;
    // three stages on two ranks
    let stage = split_sequential(&net, &[2, 4]).unwrap().swap_remove(r);
    let e = ScheduleGPipe::new(vec![stage], 2, mse, o()).unwrap_err().to_string();
    assert!(e.contains("the pipeline has 3 stages but the process group has 2 ranks"), "{e}");
    // a stage on the wrong rank
    let stage = split_sequential(&net, &[4]).unwrap().swap_remove(1 - r);
    let e = Schedule1F1B::new(vec![stage], 2, mse, o()).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "stage {} must run on rank {} of the process group, but this process is rank {r}",
            1 - r,
            1 - r
        )),
        "{e}"
    );
    // a batch the micro-batches do not divide: each rank finds it before sending anything
    let stage = split_sequential(&net, &[4]).unwrap().swap_remove(r);
    let mut s = ScheduleGPipe::new(vec![stage], 4, mse, o()).unwrap();
    let (x, y) = (Tensor::randn([6, 5], DType::F64).unwrap(), Tensor::randn([6, 3], DType::F64).unwrap());
    let (input, target) = ((r == 0).then_some(&x), (r == 1).then_some(&y));
    let e = s.step(input, target).unwrap_err().to_string();
    assert!(e.contains("n_microbatches=4 does not divide"), "{e}");
    // the last rank needs the target
    if r == 1 {
        let e = s.step(None, None).unwrap_err().to_string();
        assert!(e.contains("needs the target"), "{e}");
    }
    // and then a good step still works
    let (x, y) = (Tensor::randn([8, 5], DType::F64).unwrap(), Tensor::randn([8, 3], DType::F64).unwrap());
    let (input, target) = ((r == 0).then_some(&x), (r == 1).then_some(&y));
    let losses = s.step(input, target).unwrap();
    assert_eq!(losses.len(), if r == 1 { 4 } else { 0 });
    dist::barrier().unwrap();
    println!("rank {r} saw every error");
}

#[test]
fn ranks_that_build_different_schedules_get_an_error() {
    let job = mpirun(2, "scenario_different_schedules", &[], LIMIT);
    job.assert_printed("rank 1 saw the schedule mismatch");
    // rank 1 ends with the error, which aborts the job: rank 0 does not wait out its timeout
    job.assert_printed("[rank 1] pyrite.distributed: exiting with status 1; aborting the MPI job");
    assert!(!job.success);
    assert!(job.elapsed < Duration::from_secs(30), "{:?}", job.elapsed);
}

#[test]
#[ignore = "run under mpirun by ranks_that_build_different_schedules_get_an_error"]
fn scenario_different_schedules() {
    let (r, _) = init(Duration::from_secs(60));
    let net = model();
    let stage = split_sequential(&net, &[4]).unwrap().swap_remove(r);
    let m = if r == 0 { 2 } else { 4 };
    let mut s = ScheduleGPipe::new(vec![stage], m, mse, ScheduleOptions::default()).unwrap();
    let (x, y) = (Tensor::randn([8, 5], DType::F64).unwrap(), Tensor::randn([8, 3], DType::F64).unwrap());
    let (input, target) = ((r == 0).then_some(&x), (r == 1).then_some(&y));
    let e = s.step(input, target).map(|_| ()).unwrap_err().to_string();
    if r == 1 {
        assert!(
            e.contains("pipeline stage 1 runs ScheduleGPipe with n_microbatches=4, but stage 0 (rank 0) runs ScheduleGPipe with n_microbatches=2"),
            "{e}"
        );
        println!("rank 1 saw the schedule mismatch");
        // as `main` returning the error would
        std::process::exit(1);
    }
    panic!("rank 0 waits for gradients until the job is aborted, got {e}");
}
