//! The memory that activation checkpointing saves, measured with the allocator's statistics
//! (`pyrite::memory`: `memory_allocated`, `max_memory_allocated`, `reset_peak_memory_stats`).
//! One test in its own binary: the statistics are process-wide, so nothing else may allocate
//! while it measures.
//!
//! Theory, for `L` blocks (Linear, ReLU, Dropout) on activations of `A` bytes each: the plain
//! training step holds about `3 L A` at the end of the forward (each ReLU's output, saved by
//! the Dropout, and each Dropout's mask and output, the output saved by the next Linear). With
//! `checkpoint_sequential(segments = s)` only the input of each checkpointed segment is kept,
//! plus the last segment's activations, and backward recomputes one segment at a time: about
//! `(s - 1) A + 3 (L / s) A`. For L = 16, s = 4: 48 A plain against about 15 A, under a third;
//! both also hold the gradients in flight and the weights' gradients. The shapes make an
//! activation (4096 x 128 f32 = 2 MiB) much larger than a weight (64 KiB), as in the models
//! checkpointing is for: with wide layers on a small batch the weights' gradients, which
//! checkpointing does not touch, would dominate the peak.
//!
//! Measured (`cargo test -p pyrite-nn --test checkpoint_memory -- --nocapture`): plain
//! 100.5 MiB, checkpointed 36.8 MiB (37%).

use pyrite::memory::{max_memory_allocated, memory_allocated, reset_peak_memory_stats};
use pyrite::nn::{Dropout, Linear, Module, ReLU, Sequential};
use pyrite::utils::checkpoint::{checkpoint_sequential, CheckpointOptions};
use pyrite::{manual_seed, DType, Device, Tensor};

/// Peak bytes above the starting point during one forward + backward.
fn peak_of_step(model: &Sequential, x: &Tensor, segments: Option<usize>) -> u64 {
    for p in model.parameters() {
        p.set_grad(None).unwrap();
    }
    let base = memory_allocated(Device::Cpu).unwrap();
    reset_peak_memory_stats(Device::Cpu).unwrap();
    {
        let y = match segments {
            None => model.call(x).unwrap(),
            Some(s) => checkpoint_sequential(model, s, x, CheckpointOptions::default()).unwrap(),
        };
        y.sum().unwrap().backward().unwrap();
    }
    max_memory_allocated(Device::Cpu).unwrap() - base
}

#[test]
fn checkpoint_sequential_lowers_the_peak_memory_of_a_training_step() {
    // 16 blocks of width 128 on a batch of 4096 (f32): an activation is 2 MiB, a weight 64 KiB.
    let (depth, width, batch) = (16, 128, 4096);
    manual_seed(0);
    let mut model = Sequential::new();
    for _ in 0..depth {
        model.push(Linear::new(width, width).unwrap());
        model.push(ReLU::new());
        model.push(Dropout::new(0.1).unwrap());
    }
    let x = Tensor::randn([batch, width], DType::F32).unwrap();
    let _ = peak_of_step(&model, &x, None); // warm up (thread pools, caches)
    let plain = peak_of_step(&model, &x, None);
    let ckpt = peak_of_step(&model, &x, Some(4));
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "peak above the parameters: plain {:.1} MiB, checkpoint_sequential(segments=4) {:.1} MiB ({:.0}%)",
        mib(plain),
        mib(ckpt),
        100.0 * ckpt as f64 / plain as f64
    );
    assert!((ckpt as f64) < 0.6 * plain as f64, "plain {plain} B, checkpointed {ckpt} B");
}
