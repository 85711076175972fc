//! Temporary: timings of the pieces of the transformer workload, interleaved.
use pyrite::nn::attention::{sdpa_kernel, SdpBackend};
use pyrite::nn::functional::{self as F, SdpaOptions};
use pyrite::{DType, Tensor};
use std::time::Instant;

fn time(name: &str, reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut ts = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        f();
        ts.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = ts[ts.len() / 2];
    println!("{name:<40} {med:8.3} ms (min {:.3})", ts[0]);
    med
}

fn main() {
    pyrite::set_num_threads(2);
    let r = 9;
    for round in 0..2 {
        println!("--- round {round}");
        let x = Tensor::randn([2048, 256], DType::F32).unwrap();
        for n in [768usize, 1024, 256] {
            let w = Tensor::randn([n, 256], DType::F32).unwrap();
            let wt = w.t().unwrap().contiguous().unwrap();
            time(&format!("linear x@w.t() n={n}"), r, || drop(x.linear(&w, None).unwrap()));
            time(&format!("matmul x@wt(rowmajor) n={n}"), r, || drop(x.matmul(&wt).unwrap()));
            let g = Tensor::randn([2048, n], DType::F32).unwrap();
            time(&format!("  bwd g@w n={n}"), r, || drop(g.matmul(&w).unwrap()));
            time(&format!("  bwd g.t()@x n={n}"), r, || drop(g.t().unwrap().matmul(&x).unwrap()));
        }
        let x2 = Tensor::randn([2048, 1024], DType::F32).unwrap();
        let w2 = Tensor::randn([256, 1024], DType::F32).unwrap();
        time("linear2 2048x1024 @ (256x1024).t()", r, || drop(x2.linear(&w2, None).unwrap()));
        let q = Tensor::randn([16, 4, 128, 64], DType::F32).unwrap().requires_grad_(true).unwrap();
        let k = Tensor::randn([16, 4, 128, 64], DType::F32).unwrap().requires_grad_(true).unwrap();
        let v = Tensor::randn([16, 4, 128, 64], DType::F32).unwrap().requires_grad_(true).unwrap();
        let g = Tensor::randn([16, 4, 128, 64], DType::F32).unwrap();
        for b in [SdpBackend::FlashAttention, SdpBackend::Math] {
            let _k = sdpa_kernel(&[b]);
            time(&format!("sdpa fwd {b:?}"), r, || {
                let _ng = pyrite::autograd::no_grad();
                drop(F::scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new()).unwrap())
            });
            time(&format!("sdpa fwd+bwd {b:?}"), r, || {
                let o = F::scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new()).unwrap();
                o.backward_with(&g).unwrap();
                for t in [&q, &k, &v] {
                    t.set_grad(None).unwrap();
                }
            });
            time(&format!("sdpa causal fwd+bwd {b:?}"), r, || {
                let o =
                    F::scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new().is_causal(true)).unwrap();
                o.backward_with(&g).unwrap();
                for t in [&q, &k, &v] {
                    t.set_grad(None).unwrap();
                }
            });
        }
        for (b, hh, l, e) in [
            (1usize, 1usize, 4usize, 8usize),
            (2, 2, 16, 16),
            (4, 4, 64, 32),
            (1, 8, 512, 64),
            (1, 2, 2048, 64),
        ] {
            let q = Tensor::randn([b, hh, l, e], DType::F32).unwrap().requires_grad_(true).unwrap();
            let g = Tensor::randn([b, hh, l, e], DType::F32).unwrap();
            for causal in [false, true] {
                let mut ms = Vec::new();
                for bk in [SdpBackend::FlashAttention, SdpBackend::Math] {
                    let _k = sdpa_kernel(&[bk]);
                    let reps = if l >= 512 { 5 } else { 200 };
                    ms.push(time(&format!("sdpa {b}x{hh}x{l}x{e} causal={causal} {bk:?}"), reps, || {
                        let o = F::scaled_dot_product_attention(
                            &q,
                            &q,
                            &q,
                            &SdpaOptions::new().is_causal(causal),
                        )
                        .unwrap();
                        o.backward_with(&g).unwrap();
                        q.set_grad(None).unwrap();
                    }));
                }
                println!("   math/fused = {:.2}", ms[1] / ms[0]);
            }
        }
        let h = Tensor::randn([16, 128, 256], DType::F32).unwrap().requires_grad_(true).unwrap();
        let lw = Tensor::ones([256], DType::F32).unwrap().requires_grad_(true).unwrap();
        let lb = Tensor::zeros([256], DType::F32).unwrap().requires_grad_(true).unwrap();
        let gh = Tensor::randn([16, 128, 256], DType::F32).unwrap();
        time("layer_norm fwd+bwd", r, || {
            let y = F::layer_norm(&h, &[256], Some(&lw), Some(&lb), 1e-5).unwrap();
            y.backward_with(&gh).unwrap();
            for t in [&h, &lw, &lb] {
                t.set_grad(None).unwrap();
            }
        });
        let hh = Tensor::randn([16, 128, 1024], DType::F32).unwrap().requires_grad_(true).unwrap();
        let g2 = Tensor::randn([16, 128, 1024], DType::F32).unwrap();
        time("relu fwd+bwd 2M", r, || {
            hh.relu().unwrap().backward_with(&g2).unwrap();
            hh.set_grad(None).unwrap();
        });
    }
}
