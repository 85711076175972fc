//! Temporary: paired timing of x @ w.t() with and without the column-major detour.
use pyrite::{DType, Tensor};
use std::time::Instant;

fn main() {
    pyrite::set_num_threads(2);
    for (m, kk, n) in [
        (128usize, 1024usize, 1024usize),
        (256, 1024, 1024),
        (512, 1024, 1024),
        (1024, 1024, 1024),
        (2048, 1024, 1024),
        (512, 256, 768),
        (256, 256, 768),
        (128, 256, 768),
        (64, 784, 1024),
        (128, 784, 1024),
    ] {
        let x = Tensor::randn([m, kk], DType::F32).unwrap();
        let w = Tensor::randn([n, kk], DType::F32).unwrap();
        let b = Tensor::randn([n], DType::F32).unwrap();
        let mut ratios = Vec::new();
        let (mut t_on, mut t_off) = (Vec::new(), Vec::new());
        for i in 0..40 {
            for on in [i % 2 == 0, i % 2 != 0] {
                // SAFETY: single-threaded at this point (the pool's workers do not read the env)
                unsafe { std::env::set_var("PYRITE_VIA_CM", if on { "1" } else { "0" }) };
                let t0 = Instant::now();
                drop(x.linear(&w, Some(&b)).unwrap());
                let dt = t0.elapsed().as_secs_f64() * 1e3;
                if on {
                    t_on.push(dt)
                } else {
                    t_off.push(dt)
                }
            }
            let (a, c) = (t_on.last().unwrap(), t_off.last().unwrap());
            ratios.push(c / a);
        }
        ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
        t_on.sort_by(|a, b| a.partial_cmp(b).unwrap());
        t_off.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "{m}x{kk} @ ({n}x{kk}).t(): via {:.2} ms, direct {:.2} ms (medians); direct/via median {:.2} [q1 {:.2}, q3 {:.2}]",
            t_on[20], t_off[20], ratios[20], ratios[10], ratios[30]
        );
    }
}
