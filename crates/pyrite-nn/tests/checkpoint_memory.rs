//! The memory that activation checkpointing saves, measured with the allocator's statistics
//! (`pyrite::memory`: `memory_allocated`, `max_memory_allocated`, `reset_peak_memory_stats`).
//! One test in its own binary: the statistics are process-wide, so nothing else may allocate
//! while it measures.
//!
//! Theory, for `L` blocks (Linear, ReLU) on a batch of activations of `A` bytes each: the
//! plain training step keeps about `2 L A` of activations alive at the end of the forward
//! (each Linear's output, saved by the ReLU, and each ReLU's output, saved by the next
//! Linear). With `checkpoint_sequential(segments = s)` only the input of each of the first
//! `s - 1` segments is kept, plus the last segment's activations, and in backward one segment
//! at a time is recomputed: about `(s - 1) A + 2 (L / s) A`. For L = 16, s = 4: 32 A plain
//! against about 11 A, a third (plus, in both, the gradients being accumulated).

use pyrite::memory::{max_memory_allocated, memory_allocated, reset_peak_memory_stats};
use pyrite::nn::{Linear, Module, ReLU, Sequential};
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
    // 16 blocks of width 512 on a batch of 1024 (f32): an activation is 2 MiB, a weight 1 MiB,
    // so activations dominate the gradients, as in the models checkpointing is for.
    let (depth, width, batch) = (16, 512, 1024);
    manual_seed(0);
    let mut model = Sequential::new();
    for _ in 0..depth {
        model.push(Linear::new(width, width).unwrap());
        model.push(ReLU::new());
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
