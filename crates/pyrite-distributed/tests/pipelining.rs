//! Pipeline parallelism on threads (no MPI): GPipe and 1F1B give the unsplit model's losses
//! and gradients (f64, to 1e-6; in fact to rounding), train as it does, fail with clear
//! errors, and GPipe's measured idle time matches (p - 1) / (m + p - 1).

use pyrite::autograd::{self, Function, FunctionCtx};
use pyrite::nn::{self, Linear, Module, ModuleBase, Parameter, Sequential, Tanh};
use pyrite::optim::{Optimizer, SGDOptions, SGD};
use pyrite::{DType, Tensor};
use pyrite_distributed::pipelining::{
    split_sequential, ActionKind, PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleOptions, StageOptions,
};
use std::time::Duration;

fn model(seed: u64) -> Sequential {
    pyrite::manual_seed(seed);
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

fn data(batch: usize) -> (Tensor, Tensor) {
    pyrite::manual_seed(3);
    (Tensor::randn([batch, 5], DType::F64).unwrap(), Tensor::randn([batch, 3], DType::F64).unwrap())
}

fn mse(out: &Tensor, y: &Tensor) -> pyrite::Result<Tensor> {
    out.sub(y)?.pow_scalar(2.0)?.mean()
}

fn grads(m: &dyn Module) -> Vec<(String, Vec<f64>)> {
    m.named_parameters().into_iter().map(|(n, p)| (n, p.grad().unwrap().to_vec::<f64>().unwrap())).collect()
}

fn assert_close(a: &[(String, Vec<f64>)], b: &[(String, Vec<f64>)], tol: f64) {
    assert_eq!(a.len(), b.len());
    for ((na, va), (nb, vb)) in a.iter().zip(b) {
        assert_eq!(na, nb);
        let d = va.iter().zip(vb).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        assert!(d < tol, "{na}: gradients differ by {d}");
    }
}

/// The unsplit model's loss and gradients on the whole batch.
fn reference(m: &Sequential, x: &Tensor, y: &Tensor) -> (f64, Vec<(String, Vec<f64>)>) {
    m.zero_grad().unwrap();
    let loss = mse(&m.call(x).unwrap(), y).unwrap();
    loss.backward().unwrap();
    let g = grads(m);
    m.zero_grad().unwrap();
    (loss.item::<f64>().unwrap(), g)
}

fn mean_loss(losses: &[Tensor]) -> f64 {
    losses.iter().map(|l| l.item::<f64>().unwrap()).sum::<f64>() / losses.len() as f64
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    GPipe,
    OneFOneB,
}

fn check_equivalence(kind: Kind, split: &[usize], batch: usize, m: usize) {
    let net = model(1);
    let (x, y) = data(batch);
    let (want_loss, want) = reference(&net, &x, &y);
    let stages = split_sequential(&net, split).unwrap();
    let losses = match kind {
        Kind::GPipe => {
            let mut s = ScheduleGPipe::new(stages, m, mse, ScheduleOptions::default()).unwrap();
            s.step(Some(&x), Some(&y)).unwrap()
        }
        Kind::OneFOneB => {
            let mut s = Schedule1F1B::new(stages, m, mse, ScheduleOptions::default()).unwrap();
            s.step(Some(&x), Some(&y)).unwrap()
        }
    };
    assert_eq!(losses.len(), m);
    assert!(
        (mean_loss(&losses) - want_loss).abs() < 1e-12,
        "{kind:?}: loss {} vs {want_loss}",
        mean_loss(&losses)
    );
    assert_close(&grads(&net), &want, 1e-10);
}

#[test]
fn gpipe_on_threads_gives_the_unsplit_gradients() {
    check_equivalence(Kind::GPipe, &[4], 12, 4);
    check_equivalence(Kind::GPipe, &[2, 4], 12, 3);
    check_equivalence(Kind::GPipe, &[2, 4, 6], 8, 8);
    check_equivalence(Kind::GPipe, &[3], 6, 1);
}

#[test]
fn one_f_one_b_on_threads_gives_the_unsplit_gradients() {
    check_equivalence(Kind::OneFOneB, &[4], 12, 4);
    check_equivalence(Kind::OneFOneB, &[2, 4], 12, 6);
    check_equivalence(Kind::OneFOneB, &[2, 4], 9, 3);
    check_equivalence(Kind::OneFOneB, &[1, 3, 5], 16, 8);
}

/// A few SGD steps with momentum: the pipelined model ends where the unsplit one does.
#[test]
fn training_with_a_pipeline_matches_training_unsplit() {
    let (plain, piped) = (model(5), model(5));
    let mut opt_a =
        SGD::new(plain.parameters(), SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() }).unwrap();
    let mut opt_b =
        SGD::new(piped.parameters(), SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() }).unwrap();
    let mut schedule =
        Schedule1F1B::new(split_sequential(&piped, &[2, 5]).unwrap(), 4, mse, ScheduleOptions::default())
            .unwrap();
    for step in 0..5 {
        pyrite::manual_seed(100 + step);
        let (x, y) = (Tensor::randn([8, 5], DType::F64).unwrap(), Tensor::randn([8, 3], DType::F64).unwrap());
        opt_a.zero_grad().unwrap();
        mse(&plain.call(&x).unwrap(), &y).unwrap().backward().unwrap();
        opt_a.step().unwrap();
        opt_b.zero_grad().unwrap();
        schedule.step(Some(&x), Some(&y)).unwrap();
        opt_b.step().unwrap();
    }
    for ((n, a), (_, b)) in plain.named_parameters().iter().zip(piped.named_parameters()) {
        let d = a.sub(&b).unwrap().abs().unwrap().max().unwrap().item::<f64>().unwrap();
        assert!(d < 1e-10, "{n} differs by {d}");
    }
}

/// Stages given as separate modules (no Sequential to split), with a summed loss and
/// `scale_grads: false`.
#[test]
fn explicit_stage_modules_and_a_summed_loss() {
    let net = model(2);
    let (x, y) = data(6);
    let sum_loss = |out: &Tensor, y: &Tensor| out.sub(y)?.pow_scalar(2.0)?.sum();
    net.zero_grad().unwrap();
    sum_loss(&net.call(&x).unwrap(), &y).unwrap().backward().unwrap();
    let want = grads(&net);
    net.zero_grad().unwrap();
    let stages = vec![
        PipelineStage::new(net.slice(0..3), 0, 2, StageOptions::default()).unwrap(),
        PipelineStage::new(net.slice(3..7), 1, 2, StageOptions::default()).unwrap(),
    ];
    let mut s = ScheduleGPipe::new(stages, 3, sum_loss, ScheduleOptions { scale_grads: false }).unwrap();
    s.step(Some(&x), Some(&y)).unwrap();
    assert_close(&grads(&net), &want, 1e-10);
}

fn err_of<T: std::fmt::Debug>(r: pyrite::Result<T>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn errors_say_what_is_wrong() {
    let net = model(1);
    let (x, y) = data(12);
    let stages = || split_sequential(&net, &[2, 4]).unwrap();
    let o = ScheduleOptions::default;
    // n_microbatches must divide the batch
    let mut s = ScheduleGPipe::new(stages(), 5, mse, o()).unwrap();
    let e = err_of(s.step(Some(&x), Some(&y)));
    assert!(e.contains("n_microbatches=5 does not divide") && e.contains("12"), "{e}");
    // the input and the target are needed
    let mut s = ScheduleGPipe::new(stages(), 2, mse, o()).unwrap();
    assert!(err_of(s.step(Some(&x), None)).contains("needs the target"));
    assert!(err_of(s.step(None, Some(&y))).contains("needs the input"));
    // 1F1B needs at least as many micro-batches as stages
    let e = err_of(Schedule1F1B::new(stages(), 2, mse, o()));
    assert!(
        e.contains("Number of microbatches (2) must be greater than or equal to the number of stages (3)"),
        "{e}"
    );
    assert!(err_of(ScheduleGPipe::new(stages(), 0, mse, o())).contains("at least 1"));
    // some but not all stages, without a process group
    let e = err_of(ScheduleGPipe::new(stages()[..2].to_vec(), 2, mse, o()));
    assert!(e.contains("give all 3 stages") && e.contains("got 2"), "{e}");
    let e = err_of(ScheduleGPipe::new(vec![stages()[1].clone()], 2, mse, o()));
    assert!(e.contains("init_process_group"), "{e}");
    // a stage twice, stages of different pipelines, no stage
    let mut twice = stages();
    twice[2] = twice[1].clone();
    assert!(err_of(ScheduleGPipe::new(twice, 2, mse, o())).contains("stage 1 is given twice"));
    let mut mixed = stages();
    mixed.push(split_sequential(&net, &[3]).unwrap().remove(0));
    assert!(err_of(ScheduleGPipe::new(mixed, 2, mse, o())).contains("disagree on the number of stages"));
    assert!(err_of(ScheduleGPipe::new(vec![], 2, mse, o())).contains("no stage"));
    // bad split points and stage indices
    assert!(err_of(split_sequential(&net, &[4, 2])).contains("increasing"));
    assert!(err_of(split_sequential(&net, &[7])).contains("inside the model's 7 layers"));
    assert!(err_of(PipelineStage::new(Tanh::new(), 3, 3, StageOptions::default())).contains("out of range"));
    // a loss that is not a scalar
    let mut s = ScheduleGPipe::new(stages(), 2, |o: &Tensor, y: &Tensor| o.sub(y), o()).unwrap();
    assert!(err_of(s.step(Some(&x), Some(&y))).contains("must return a scalar"));
    // an error inside a stage is reported as itself, not as its neighbours' lost messages
    let bad = vec![
        PipelineStage::new(net.slice(0..2), 0, 2, StageOptions::default()).unwrap(),
        PipelineStage::new(Linear::new(7, 3).unwrap(), 1, 2, StageOptions::default()).unwrap(),
    ];
    let mut s = Schedule1F1B::new(bad, 2, mse, o()).unwrap();
    let e = err_of(s.step(Some(&x), Some(&y)));
    assert!(!e.contains("stopped"), "{e}");
    // under no_grad
    let mut s = ScheduleGPipe::new(stages(), 2, mse, o()).unwrap();
    let _ng = autograd::no_grad();
    assert!(err_of(s.step(Some(&x), Some(&y))).contains("requires gradients to be enabled"));
}

// ---------------------------------------------------------------------- idle time

/// `x * w`, sleeping `d` in forward and again in backward: a stage of fixed cost that needs
/// no CPU, so the timing holds on a loaded machine.
struct SleepFn(Duration);

impl Function for SleepFn {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> pyrite::Result<Vec<Tensor>> {
        std::thread::sleep(self.0);
        ctx.save_for_backward(&[inputs[0], inputs[1]]);
        Ok(vec![inputs[0].mul(inputs[1])?])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> pyrite::Result<Vec<Option<Tensor>>> {
        std::thread::sleep(self.0);
        let (x, w) = (&ctx.saved_tensors()[0], &ctx.saved_tensors()[1]);
        Ok(vec![Some(g[0].mul(w)?), Some(g[0].mul(x)?.sum()?.reshape(w.dims())?)])
    }
}

#[derive(nn::Module)]
struct Sleepy {
    base: ModuleBase,
    w: Parameter,
    #[module(skip)]
    d: Duration,
}

impl Module for Sleepy {
    fn forward(&self, x: &Tensor) -> pyrite::Result<Tensor> {
        Ok(autograd::apply(SleepFn(self.d), &[x, &self.w])?.remove(0))
    }
}

fn sleepy_stages(p: usize, d: Duration) -> Vec<PipelineStage> {
    (0..p)
        .map(|i| {
            let m = Sleepy {
                base: ModuleBase::new(),
                w: Parameter::new(Tensor::ones([1], DType::F64).unwrap()).unwrap(),
                d,
            };
            PipelineStage::new(m, i, p, StageOptions::default()).unwrap()
        })
        .collect()
}

#[test]
fn gpipe_idle_time_matches_theory() {
    let d = Duration::from_millis(15);
    for (p, m) in [(2, 4), (3, 3), (4, 6)] {
        let theory = (p - 1) as f64 / (m + p - 1) as f64;
        let mut s = ScheduleGPipe::new(sleepy_stages(p, d), m, mse, ScheduleOptions::default()).unwrap();
        let x = Tensor::ones([m, 1], DType::F64).unwrap();
        // the best of a few steps: a loaded machine only ever adds delays
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            s.step(Some(&x), Some(&x)).unwrap();
            let t = s.timeline();
            assert_eq!(t.stages.len(), p);
            for st in &t.stages {
                assert_eq!(st.events.len(), 2 * m);
                assert_eq!(st.events.iter().filter(|e| e.kind == ActionKind::Forward).count(), m);
                for e in &st.events {
                    assert!(e.end - e.start >= d);
                }
            }
            best = best.min((t.bubble_fraction() - theory).abs());
        }
        println!("p={p} m={m}: theory {theory:.3}\n{}", s.timeline());
        assert!(
            best < 0.05,
            "p={p} m={m}: measured {:.3}, theory {theory:.3}",
            s.timeline().bubble_fraction()
        );
    }
}

/// 1F1B has GPipe's bubble with equal stages, and finishes in about (m + p - 1)(f + b).
#[test]
fn one_f_one_b_idle_time_matches_gpipe() {
    let d = Duration::from_millis(15);
    let (p, m) = (3, 6);
    let theory = (p - 1) as f64 / (m + p - 1) as f64;
    let mut s = Schedule1F1B::new(sleepy_stages(p, d), m, mse, ScheduleOptions::default()).unwrap();
    let x = Tensor::ones([m, 1], DType::F64).unwrap();
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        s.step(Some(&x), Some(&x)).unwrap();
        best = best.min((s.timeline().bubble_fraction() - theory).abs());
    }
    println!("{}", s.timeline());
    assert!(best < 0.05, "measured {:.3}, theory {theory:.3}", s.timeline().bubble_fraction());
}
