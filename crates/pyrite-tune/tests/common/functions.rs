//! The standard test functions of the TPE comparison (the same definitions as
//! reference/gen_tune_tpe.py).

use std::f64::consts::PI;

/// Branin on x1 in [-5, 10], x2 in [0, 15]; minimum 0.397887.
pub fn branin(x: &[f64]) -> f64 {
    let (x1, x2) = (x[0], x[1]);
    let b = 5.1 / (4.0 * PI * PI);
    let c = 5.0 / PI;
    let t = 1.0 / (8.0 * PI);
    (x2 - b * x1 * x1 + c * x1 - 6.0).powi(2) + 10.0 * (1.0 - t) * x1.cos() + 10.0
}

/// Hartmann-6 on the unit cube; minimum -3.32237.
pub fn hartmann6(x: &[f64]) -> f64 {
    const ALPHA: [f64; 4] = [1.0, 1.2, 3.0, 3.2];
    const A: [[f64; 6]; 4] = [
        [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
        [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
        [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
        [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
    ];
    const P: [[f64; 6]; 4] = [
        [1312.0, 1696.0, 5569.0, 124.0, 8283.0, 5886.0],
        [2329.0, 4135.0, 8307.0, 3736.0, 1004.0, 9991.0],
        [2348.0, 1451.0, 3522.0, 2883.0, 3047.0, 6650.0],
        [4047.0, 8828.0, 8732.0, 5743.0, 1091.0, 381.0],
    ];
    -(0..4)
        .map(|i| ALPHA[i] * (-(0..6).map(|j| A[i][j] * (x[j] - P[i][j] * 1e-4).powi(2)).sum::<f64>()).exp())
        .sum::<f64>()
}

/// Rosenbrock in `x.len()` dimensions, each in [-5, 10]; minimum 0.
pub fn rosenbrock(x: &[f64]) -> f64 {
    x.windows(2).map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2)).sum()
}
