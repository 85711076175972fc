//! The coefficient of determination (torchmetrics' `R2Score`, one output, `adjusted=0`).

use pyrite_core::{bail, DType, Result, Tensor};

use super::pairs;
use crate::metric::Metric;
use crate::state::{MetricStates, Reduce};

/// `1 - rss / tss` with `rss = sum((target - preds)^2)` and `tss = sum((target - mean)^2)`,
/// from summed states `sum_squared_obs`, `sum_obs`, `residual` (float64) and `total` (int64).
/// As in torchmetrics, a residual and a total sum of squares both near 0 (`atol=1e-4`) give 1,
/// a constant target with a residual gives 0, and fewer than two samples is an error.
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{Metric, R2Score};
/// let mut r2 = R2Score::new();
/// r2.update(&Tensor::new([2.5f32, 0.0, 2.0, 8.0])?, &Tensor::new([3.0f32, -0.5, 2.0, 7.0])?)?;
/// assert!((r2.compute()?.item::<f64>()? - 0.948_608_1).abs() < 1e-6);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct R2Score {
    states: MetricStates,
}

impl Default for R2Score {
    fn default() -> Self {
        Self::new()
    }
}

const SUMS: [&str; 3] = ["sum_squared_obs", "sum_obs", "residual"];

impl R2Score {
    /// A new metric.
    pub fn new() -> Self {
        let mut states = MetricStates::new();
        for name in SUMS {
            states.add_state(name, Tensor::zeros([], DType::F64).expect("zero"), Reduce::Sum).expect("fresh");
        }
        states.add_state("total", Tensor::zeros([], DType::I64).expect("zero"), Reduce::Sum).expect("fresh");
        R2Score { states }
    }
}

/// `torch.isclose(x, 0, atol=1e-4)`.
fn near_zero(x: f64) -> bool {
    x.abs() <= 1e-4
}

impl Metric for R2Score {
    fn name(&self) -> &'static str {
        "R2Score"
    }
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        if preds.rank() > 1 && preds.dims()[1..].iter().product::<usize>() != 1 {
            bail!(
                Shape,
                "Expected argument `preds` of shape (N,) for one output (num_outputs > 1 is not supported), got {:?}",
                preds.dims()
            );
        }
        let (p, t) = pairs(preds, target)?;
        let sums = [
            t.iter().map(|t| t * t).sum::<f64>(),
            t.iter().sum::<f64>(),
            p.iter().zip(&t).map(|(p, t)| (t - p) * (t - p)).sum::<f64>(),
        ];
        for (name, v) in SUMS.into_iter().zip(sums) {
            self.states.accumulate(name, &Tensor::scalar(v)?)?;
        }
        self.states.accumulate("total", &Tensor::scalar(t.len() as i64)?)?;
        self.states.count_update();
        Ok(())
    }
    fn compute(&self) -> Result<Tensor> {
        self.states.warn_if_not_updated(self.name());
        let get = |n: &str| -> Result<f64> { self.states.get(n)?.item::<f64>() };
        let n = get("total")?;
        if n < 2.0 {
            bail!(Value, "Needs at least two samples to calculate r2 score.");
        }
        let (sum_sq, sum, rss) = (get("sum_squared_obs")?, get("sum_obs")?, get("residual")?);
        let tss = sum_sq - sum * (sum / n);
        let score = match (near_zero(rss), near_zero(tss)) {
            (false, false) => 1.0 - rss / tss,
            (false, true) => 0.0,
            (true, _) => 1.0,
        };
        Tensor::scalar(score as f32)
    }
    fn metric_states(&self) -> &MetricStates {
        &self.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.states
    }
}
