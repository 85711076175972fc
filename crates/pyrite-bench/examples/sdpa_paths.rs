//! `F::scaled_dot_product_attention` forward + backward on its two paths, the fused kernel
//! and the composed math ops, alternated in one process so that the machine's drift cancels:
//! per shape, the median times and the median (and quartiles) of the per-pair ratios
//! composed/fused (> 1: the fused kernel is faster). The numbers behind the choice of path in
//! `docs/ARCHITECTURE.md`.
//!
//! ```text
//! cargo run --release -p pyrite-bench --example sdpa_paths
//! ```
use pyrite::nn::attention::{sdpa_kernel, SdpBackend};
use pyrite::nn::functional::{self as F, SdpaOptions};
use pyrite::{DType, Tensor};
use std::time::Instant;

fn main() {
    pyrite::set_num_threads(2);
    let shapes = [
        (1usize, 1usize, 4usize, 8usize),
        (2, 2, 16, 16),
        (4, 4, 32, 32),
        (4, 4, 64, 32),
        (4, 4, 64, 64),
        (16, 4, 64, 64),
        (4, 4, 128, 32),
        (16, 4, 128, 64),
        (2, 4, 256, 64),
        (1, 8, 512, 64),
    ];
    for (b, h, l, e) in shapes {
        let q = Tensor::randn([b, h, l, e], DType::F32).unwrap().requires_grad_(true).unwrap();
        let g = Tensor::randn([b, h, l, e], DType::F32).unwrap();
        for causal in [false, true] {
            let run = |bk: SdpBackend| {
                let _k = sdpa_kernel(&[bk]);
                let t0 = Instant::now();
                let o = F::scaled_dot_product_attention(&q, &q, &q, &SdpaOptions::new().is_causal(causal))
                    .unwrap();
                o.backward_with(&g).unwrap();
                q.set_grad(None).unwrap();
                t0.elapsed().as_secs_f64() * 1e3
            };
            run(SdpBackend::FlashAttention);
            run(SdpBackend::Math);
            let reps = if l * l * b * h > 1 << 20 { 15 } else { 101 };
            let mut r = Vec::new();
            let (mut tf, mut tm) = (Vec::new(), Vec::new());
            for i in 0..reps {
                let (a, c) = if i % 2 == 0 {
                    let a = run(SdpBackend::FlashAttention);
                    (a, run(SdpBackend::Math))
                } else {
                    let c = run(SdpBackend::Math);
                    (run(SdpBackend::FlashAttention), c)
                };
                tf.push(a);
                tm.push(c);
                r.push(c / a);
            }
            for v in [&mut r, &mut tf, &mut tm] {
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            }
            let n = r.len();
            println!(
                "{b}x{h}x{l}x{e} causal={causal:<5}: fused {:8.3} ms, math {:8.3} ms; math/fused {:.2} [{:.2}, {:.2}]",
                tf[n / 2], tm[n / 2], r[n / 2], r[n / 4], r[3 * n / 4]
            );
        }
    }
}
