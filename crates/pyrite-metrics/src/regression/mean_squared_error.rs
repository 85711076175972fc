//! Mean squared error (torchmetrics' `MeanSquaredError`).

use pyrite_core::{DType, Result, Tensor};

use super::pairs;
use crate::metric::Metric;
use crate::state::{MetricStates, Reduce};

/// Options of [`MeanSquaredError`] (`MeanSquaredError(squared=True)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeanSquaredErrorOptions {
    /// `true` (the default): the mean squared error; `false`: its square root (RMSE).
    pub squared: bool,
}

impl Default for MeanSquaredErrorOptions {
    fn default() -> Self {
        MeanSquaredErrorOptions { squared: true }
    }
}

/// `sum((preds - target)^2) / n` over every element seen, or its root with `squared: false`.
/// States: `sum_squared_error` (float64) and `total` (int64), both summed.
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{MeanSquaredError, MeanSquaredErrorOptions, Metric};
/// let mut mse = MeanSquaredError::new(MeanSquaredErrorOptions::default());
/// mse.update(&Tensor::new([2.5f32, 5.0, 4.0, 8.0])?, &Tensor::new([3.0f32, 5.0, 2.5, 7.0])?)?;
/// assert_eq!(mse.compute()?.item::<f64>()?, 0.875);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MeanSquaredError {
    squared: bool,
    states: MetricStates,
}

impl MeanSquaredError {
    /// A new metric.
    pub fn new(options: MeanSquaredErrorOptions) -> Self {
        let mut states = MetricStates::new();
        let zero = |d| Tensor::zeros([], d).expect("a scalar zero");
        states.add_state("sum_squared_error", zero(DType::F64), Reduce::Sum).expect("fresh state");
        states.add_state("total", zero(DType::I64), Reduce::Sum).expect("fresh state");
        MeanSquaredError { squared: options.squared, states }
    }
}

impl Metric for MeanSquaredError {
    fn name(&self) -> &'static str {
        "MeanSquaredError"
    }
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        let (p, t) = pairs(preds, target)?;
        let sse: f64 = p.iter().zip(&t).map(|(p, t)| (p - t) * (p - t)).sum();
        self.states.accumulate("sum_squared_error", &Tensor::scalar(sse)?)?;
        self.states.accumulate("total", &Tensor::scalar(p.len() as i64)?)?;
        self.states.count_update();
        Ok(())
    }
    fn compute(&self) -> Result<Tensor> {
        self.states.warn_if_not_updated(self.name());
        let sse = self.states.get("sum_squared_error")?.item::<f64>()?;
        let n = self.states.get("total")?.item::<i64>()? as f64;
        let mse = sse / n;
        Tensor::scalar((if self.squared { mse } else { mse.sqrt() }) as f32)
    }
    fn metric_states(&self) -> &MetricStates {
        &self.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.states
    }
}
