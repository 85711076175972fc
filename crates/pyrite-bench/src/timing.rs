//! Timing like the reference benchmark: warm-up calls, an inner loop calibrated so one repeat
//! lasts at least `min_time`, then the median of the repeats (plus the best and the spread).

use std::time::Instant;

/// Median seconds per call, and every repeat's seconds per call.
pub fn timeit(
    args: &crate::Args,
    warmup: usize,
    min_time: Option<f64>,
    mut f: impl FnMut(),
) -> (f64, Vec<f64>) {
    let min_time = min_time.unwrap_or(args.min_time);
    for _ in 0..warmup {
        f();
    }
    let mut inner: u64 = 1;
    loop {
        let t0 = Instant::now();
        for _ in 0..inner {
            f();
        }
        let dt = t0.elapsed().as_secs_f64();
        if dt >= min_time || inner >= 1 << 24 {
            break;
        }
        inner = (inner * 2).max((inner as f64 * min_time / dt.max(1e-9) * 1.1) as u64);
    }
    let mut times = Vec::with_capacity(args.repeats);
    for _ in 0..args.repeats {
        let t0 = Instant::now();
        for _ in 0..inner {
            f();
        }
        times.push(t0.elapsed().as_secs_f64() / inner as f64);
    }
    (median(&times), times)
}

/// The median of `v`.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The smallest of `v`.
pub fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

/// (max - min) / median: a rough noise indicator.
pub fn spread(v: &[f64]) -> f64 {
    let m = median(v);
    let mx = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    round((mx - min(v)) / m, 3)
}

/// Rounds to `d` decimals.
pub fn round(x: f64, d: i32) -> f64 {
    let p = 10f64.powi(d);
    (x * p).round() / p
}
