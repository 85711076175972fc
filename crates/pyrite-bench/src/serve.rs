//! `pyrite-bench --serve`: single calls timed on request, for `scripts/bench_paired.py`.
//!
//! Separate runs of the two benchmarks are minutes apart, and on a shared VM the speed of a
//! core drifts by 10-30% over a few seconds. Here the script times one batch of PyTorch calls,
//! then asks this process for one batch of the same call, and so on, alternating: each pair
//! of batches is a fraction of a second apart, so both sides see the same machine.
//!
//! Protocol: one request per line on stdin, one reply per line on stdout.
//!
//! ```text
//! matmul N THREADS CALLS   ->  seconds for CALLS calls of (N x N) @ (N x N), f32
//! quit                     ->  (exits)
//! ```
//!
//! Inputs are made once per (op, size), from `manual_seed(0)`, and kept. An unknown request
//! is answered with a line starting with `error:`.

use pyrite::{DType, Tensor};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Instant;

/// Serves requests until stdin closes or `quit` arrives.
pub fn serve() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut inputs: HashMap<(String, usize), (Tensor, Tensor)> = HashMap::new();
    let mut threads = 0;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["quit"] => break,
            ["matmul", n, t, calls] => match (n.parse::<usize>(), t.parse::<usize>(), calls.parse::<u64>()) {
                (Ok(n), Ok(t), Ok(calls)) => {
                    if t != threads {
                        pyrite::set_num_threads(t);
                        threads = t;
                    }
                    let (a, b) = inputs.entry(("matmul".into(), n)).or_insert_with(|| {
                        pyrite::manual_seed(0);
                        let a = Tensor::randn([n, n], DType::F32).expect("input");
                        (a, Tensor::randn([n, n], DType::F32).expect("input"))
                    });
                    let t0 = Instant::now();
                    for _ in 0..calls {
                        drop(std::hint::black_box(a.matmul(b).expect("matmul")));
                    }
                    format!("{:e}", t0.elapsed().as_secs_f64())
                }
                _ => format!("error: bad numbers in '{line}'"),
            },
            _ => format!("error: unknown request '{line}'"),
        };
        if writeln!(out, "{reply}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
}
