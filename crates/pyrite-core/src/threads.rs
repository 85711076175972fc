//! Intra-op threads: `set_num_threads` / `get_num_threads` like PyTorch's.
//!
//! The default is the number of cores, overridden by `PYRITE_NUM_THREADS` (or `OMP_NUM_THREADS`,
//! as PyTorch honours it). Kernels run their parallel parts on a dedicated rayon pool.

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::{Arc, RwLock};

static POOL: RwLock<Option<(usize, Arc<ThreadPool>)>> = RwLock::new(None);

fn default_threads() -> usize {
    for var in ["PYRITE_NUM_THREADS", "OMP_NUM_THREADS"] {
        if let Some(n) = std::env::var(var).ok().and_then(|s| s.trim().parse::<usize>().ok()) {
            if n > 0 {
                return n;
            }
        }
    }
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn build(n: usize) -> Arc<ThreadPool> {
    Arc::new(
        ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("pyrite-{i}"))
            .build()
            .expect("failed to start the intra-op thread pool"),
    )
}

/// Sets the number of threads used by parallel kernels (`torch.set_num_threads`); 0 means 1.
pub fn set_num_threads(n: usize) {
    let n = n.max(1);
    *POOL.write().unwrap_or_else(|e| e.into_inner()) = Some((n, build(n)));
}

/// The number of threads used by parallel kernels (`torch.get_num_threads`).
pub fn get_num_threads() -> usize {
    pool().0
}

pub(crate) fn pool() -> (usize, Arc<ThreadPool>) {
    if let Some((n, p)) = POOL.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return (*n, p.clone());
    }
    let mut w = POOL.write().unwrap_or_else(|e| e.into_inner());
    if w.is_none() {
        let n = default_threads();
        *w = Some((n, build(n)));
    }
    let (n, p) = w.as_ref().unwrap();
    (*n, p.clone())
}

/// Runs `f(start, end)` over `0..n` split into chunks across the pool when `n` is at least
/// `grain` elements per thread; inline otherwise.
///
/// The calling thread computes the first chunk itself (`in_place_scope`) instead of handing
/// everything to the pool and sleeping: waking a parked worker costs 20-60 us on the benchmark
/// VM, and this way only the other chunks wait for it.
pub(crate) fn parallel_for(n: usize, grain: usize, f: impl Fn(usize, usize) + Sync) {
    let threads = if n >= 2 * grain { get_num_threads().min(n / grain).max(1) } else { 1 };
    if threads <= 1 {
        f(0, n);
        return;
    }
    let (_, p) = pool();
    let chunk = n.div_ceil(threads);
    p.in_place_scope(|s| {
        for t in 1..threads {
            let f = &f;
            s.spawn(move |_| {
                let a = t * chunk;
                let b = ((t + 1) * chunk).min(n);
                if a < b {
                    f(a, b)
                }
            });
        }
        f(0, chunk.min(n));
    });
}
