//! Times the convolutional part of the benchmark CNN (conv 1->32 3x3 pad 1, relu, max_pool 2,
//! conv 32->64 3x3 pad 1, relu, max_pool 2, on a batch of 64 1x28x28 f32 images): forward and
//! backward (gradients of both weights and biases, the images need none), and each conv pass
//! alone. Compare with `scripts/bench_conv.py` (PyTorch, same threads).
//!
//! Run: `cargo run --release -p pyrite-core --example conv_bench -- [threads] [iters]`

use pyrite_core::autograd;
use pyrite_core::ops::conv::conv;
use pyrite_core::ops::pool::max_pool;
use pyrite_core::{DType, Result, Tensor};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..5 {
        f()?;
    }
    let mut t = Vec::new();
    for _ in 0..iters {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(t))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args.get(1).map_or(2, |s| s.parse().unwrap());
    let iters: usize = args.get(2).map_or(30, |s| s.parse().unwrap());
    pyrite_core::set_num_threads(threads);
    let x = Tensor::randn([64, 1, 28, 28], DType::F32)?;
    let w1 = Tensor::randn([32, 1, 3, 3], DType::F32)?.mul_scalar(0.3)?.requires_grad_(true)?;
    let b1 = Tensor::zeros([32], DType::F32)?.requires_grad_(true)?;
    let w2 = Tensor::randn([64, 32, 3, 3], DType::F32)?.mul_scalar(0.06)?.requires_grad_(true)?;
    let b2 = Tensor::zeros([64], DType::F32)?.requires_grad_(true)?;
    let g = Tensor::randn([64, 64, 7, 7], DType::F32)?;
    let forward = || -> Result<Tensor> {
        let h = conv(&x, &w1, Some(&b1), &[1], &[1], &[1], 1)?.relu()?;
        let h = max_pool(&h, &[2], &[], &[0], &[1], false)?.0;
        let h = conv(&h, &w2, Some(&b2), &[1], &[1], &[1], 1)?.relu()?;
        Ok(max_pool(&h, &[2], &[], &[0], &[1], false)?.0)
    };
    let fwd_bwd = time(iters, || {
        let y = forward()?;
        let gr = autograd::grad(&[&y], &[&w1, &b1, &w2, &b2], Some(&[&g]), None, false, false)?;
        assert_eq!(gr.len(), 4);
        Ok(())
    })?;
    let fwd = time(iters, || {
        let _g = autograd::no_grad();
        forward().map(drop)
    })?;
    // The second conv's passes alone.
    let h = Tensor::randn([64, 32, 14, 14], DType::F32)?;
    let hl = h.requires_grad_(true)?;
    let g2 = Tensor::randn([64, 64, 14, 14], DType::F32)?;
    let c2_fwd = time(iters, || {
        let _g = autograd::no_grad();
        conv(&h, &w2, Some(&b2), &[1], &[1], &[1], 1).map(drop)
    })?;
    let c2_all = time(iters, || {
        let y = conv(&hl, &w2, Some(&b2), &[1], &[1], &[1], 1)?;
        autograd::grad(&[&y], &[&hl, &w2, &b2], Some(&[&g2]), None, false, false).map(drop)
    })?;
    // Each forward step alone (no grad).
    let _ng = autograd::no_grad();
    let a1 = conv(&x, &w1, Some(&b1), &[1], &[1], &[1], 1)?;
    let r1 = a1.relu()?;
    let p1 = max_pool(&r1, &[2], &[], &[0], &[1], false)?.0;
    let a2 = conv(&p1, &w2, Some(&b2), &[1], &[1], &[1], 1)?.relu()?;
    let steps = [
        ("conv1 forward", time(iters, || conv(&x, &w1, Some(&b1), &[1], &[1], &[1], 1).map(drop))?),
        ("relu1", time(iters, || a1.relu().map(drop))?),
        ("max_pool1", time(iters, || max_pool(&r1, &[2], &[], &[0], &[1], false).map(drop))?),
        ("conv2 forward", time(iters, || conv(&p1, &w2, Some(&b2), &[1], &[1], &[1], 1).map(drop))?),
        ("max_pool2", time(iters, || max_pool(&a2, &[2], &[], &[0], &[1], false).map(drop))?),
    ];
    drop(_ng);
    for (n, t) in steps {
        println!("  step {n:<30} {t:8.3} ms");
    }
    println!("threads {threads}");
    println!("cnn convs+pools forward+backward: {fwd_bwd:8.3} ms");
    println!("cnn convs+pools forward (no grad): {fwd:8.3} ms");
    println!("conv2 forward:                     {c2_fwd:8.3} ms");
    println!("conv2 forward+backward (x, w, b):  {c2_all:8.3} ms");
    Ok(())
}
