//! An out-of-memory error can strike at any allocation of a training step: in the forward, in
//! the backward, in the optimizer's step. Wherever it strikes, nothing leaks (the allocator's
//! statistics and the process's RSS come back to where they were), and the same step run again
//! without the limit gives the parameters of a step that never failed.
//!
//! The limit is swept from just above what the model holds to what the whole step needs, so
//! every few allocations of the step is the one that fails. A failure in the optimizer's first
//! step, while it creates its state, is the subtle one: the step counts of the parameters it
//! had reached must not advance (`Optimizer::step` puts the state back). One test in its own
//! binary: the statistics are process-wide.

use pyrite::memory::{empty_cache, memory_allocated, memory_reserved, set_memory_limit};
use pyrite::nn::{CrossEntropyLoss, Linear, Module, ReLU, Sequential, StateDict};
use pyrite::optim::{Adam, AdamOptions, Optimizer, SGDOptions, SGD};
use pyrite::{manual_seed, DType, Device, ErrorKind, Result, Tensor};

/// Where a step failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Forward,
    Backward,
    Step,
}

fn model() -> Sequential {
    manual_seed(7);
    let mut m = Sequential::new();
    m.push(Linear::new(256, 512).unwrap());
    m.push(ReLU::new());
    m.push(Linear::new(512, 512).unwrap());
    m.push(ReLU::new());
    m.push(Linear::new(512, 10).unwrap());
    m
}

fn optimizer(kind: &str, params: Vec<Tensor>) -> Box<dyn Optimizer> {
    match kind {
        "adam" => Box::new(Adam::new(params, AdamOptions { lr: 1e-2, ..Default::default() }).unwrap()),
        _ => Box::new(SGD::new(params, SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() }).unwrap()),
    }
}

/// One training step; on failure, the phase it failed in.
fn step(
    m: &Sequential,
    opt: &mut dyn Optimizer,
    x: &Tensor,
    y: &Tensor,
) -> std::result::Result<(), (Phase, pyrite::Error)> {
    opt.zero_grad().unwrap();
    let loss: Result<Tensor> = m.call(x).and_then(|out| CrossEntropyLoss::new().call((&out, y)));
    let loss = loss.map_err(|e| (Phase::Forward, e))?;
    loss.backward().map_err(|e| (Phase::Backward, e))?;
    drop(loss);
    opt.step().map_err(|e| (Phase::Step, e))
}

fn weights(m: &Sequential) -> Vec<Vec<f32>> {
    m.parameters().iter().map(|p| p.flatten(0, -1).unwrap().to_vec::<f32>().unwrap()).collect()
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// The sweep for one optimizer: returns the phases the failures fell in.
fn sweep(kind: &str, x: &Tensor, y: &Tensor) -> Vec<Phase> {
    let start: StateDict = model().state_dict().unwrap();
    let load = |m: &Sequential| {
        m.load_state_dict(&start, true).unwrap();
    };
    // The reference: two steps that never failed (the second uses the optimizer's state).
    let reference = {
        let m = model();
        load(&m);
        let mut opt = optimizer(kind, m.parameters());
        step(&m, opt.as_mut(), x, y).unwrap();
        step(&m, opt.as_mut(), x, y).unwrap();
        weights(&m)
    };
    // What one step needs above what is held before it, with an empty cache.
    empty_cache();
    let (need, held) = {
        let m = model();
        load(&m);
        let mut opt = optimizer(kind, m.parameters());
        empty_cache();
        let before = memory_reserved(Device::Cpu).unwrap();
        step(&m, opt.as_mut(), x, y).unwrap();
        let peak = pyrite::memory::max_memory_reserved(Device::Cpu).unwrap();
        (peak.saturating_sub(before), before)
    };
    assert!(need > 1 << 20, "the step needs {need} bytes");
    let rss0 = rss_bytes();
    let mut phases = Vec::new();
    let trials = 48;
    for i in 0..trials {
        empty_cache();
        let at_start = memory_allocated(Device::Cpu).unwrap();
        let m = model();
        load(&m);
        let mut opt = optimizer(kind, m.parameters());
        empty_cache();
        let allocated_before = memory_allocated(Device::Cpu).unwrap();
        let reserved_before = memory_reserved(Device::Cpu).unwrap();
        assert!(
            reserved_before <= held + (1 << 20),
            "trial {i}: {reserved_before} reserved before, {held} at the start"
        );
        set_memory_limit(Some(reserved_before + need * i / trials), Device::Cpu).unwrap();
        let r = step(&m, opt.as_mut(), x, y);
        set_memory_limit(None, Device::Cpu).unwrap();
        match &r {
            Ok(()) => {}
            Err((phase, e)) => {
                assert_eq!(e.kind(), ErrorKind::OutOfMemory, "trial {i} ({phase:?}): {e}");
                phases.push(*phase);
                // Nothing of the failed step is still allocated but the gradients it had
                // accumulated and the optimizer state it had made (both are the model's).
                let extra: u64 = m.parameters().iter().filter_map(|p| p.grad()).map(|g| held_bytes(&g)).sum();
                let now = memory_allocated(Device::Cpu).unwrap();
                assert!(
                    now <= allocated_before + extra + state_bytes(opt.as_ref(), &m),
                    "trial {i} ({phase:?}): {now} allocated after the failure, {allocated_before} before"
                );
            }
        }
        // The same step again, and a second one, without the limit: the parameters of the run
        // that never failed.
        if let Err((phase, e)) = step(&m, opt.as_mut(), x, y) {
            panic!("trial {i}: the retried step failed in {phase:?}: {e}");
        }
        if r.is_ok() {
            // The trial's step succeeded: this was the reference's second step already.
            assert!(weights(&m) == reference, "trial {i}: two successful steps differ from the reference");
        } else {
            step(&m, opt.as_mut(), x, y).unwrap();
            assert!(
                weights(&m) == reference,
                "trial {i}: a step retried after {:?} differs from the reference",
                phases.last()
            );
        }
        drop((m, opt));
        empty_cache();
        // Everything of the trial is gone: the statistics and the RSS are back where they were.
        assert_eq!(memory_allocated(Device::Cpu).unwrap(), at_start, "trial {i}");
        let rss = rss_bytes();
        assert!(rss < rss0 + (16 << 20), "trial {i}: RSS {rss} against {rss0} at the start");
    }
    phases
}

/// At most what the allocator holds for a tensor: its bytes rounded up to a size class (at
/// most an eighth more, at least 64 bytes).
fn held_bytes(t: &Tensor) -> u64 {
    let b = t.numel() as u64 * 4;
    b + b / 8 + 64
}

fn state_bytes(opt: &dyn Optimizer, m: &Sequential) -> u64 {
    let mut n = 0;
    for p in m.parameters() {
        if let Some(st) = opt.state(&p) {
            for v in st.values() {
                if let pyrite::optim::StateValue::Tensor(t) = v {
                    n += held_bytes(t);
                }
            }
        }
    }
    n
}

#[test]
fn an_out_of_memory_error_anywhere_in_a_training_step_leaks_nothing_and_the_step_can_be_retried() {
    manual_seed(1);
    let x = Tensor::randn([128, 256], DType::F32).unwrap();
    let y = Tensor::randint(0, 10, [128], DType::I64).unwrap();
    for kind in ["adam", "sgd"] {
        let phases = sweep(kind, &x, &y);
        println!("{kind}: failures by phase {phases:?}");
        for phase in [Phase::Forward, Phase::Backward, Phase::Step] {
            assert!(phases.contains(&phase), "{kind}: no trial failed in {phase:?}: {phases:?}");
        }
    }
}
