//! Mean absolute error (torchmetrics' `MeanAbsoluteError`).

use pyrite_core::{DType, Result, Tensor};

use super::pairs;
use crate::metric::Metric;
use crate::state::{MetricStates, Reduce};

/// `sum(|preds - target|) / n` over every element seen. States: `sum_abs_error` (float64) and
/// `total` (int64), both summed.
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{MeanAbsoluteError, Metric};
/// let mut mae = MeanAbsoluteError::new();
/// mae.update(&Tensor::new([2.5f32, 0.0, 2.0, 8.0])?, &Tensor::new([3.0f32, -0.5, 2.0, 7.0])?)?;
/// assert_eq!(mae.compute()?.item::<f64>()?, 0.5);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MeanAbsoluteError {
    states: MetricStates,
}

impl Default for MeanAbsoluteError {
    fn default() -> Self {
        Self::new()
    }
}

impl MeanAbsoluteError {
    /// A new metric.
    pub fn new() -> Self {
        let mut states = MetricStates::new();
        let zero = |d| Tensor::zeros([], d).expect("a scalar zero");
        states.add_state("sum_abs_error", zero(DType::F64), Reduce::Sum).expect("fresh state");
        states.add_state("total", zero(DType::I64), Reduce::Sum).expect("fresh state");
        MeanAbsoluteError { states }
    }
}

impl Metric for MeanAbsoluteError {
    fn name(&self) -> &'static str {
        "MeanAbsoluteError"
    }
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        let (p, t) = pairs(preds, target)?;
        let sae: f64 = p.iter().zip(&t).map(|(p, t)| (p - t).abs()).sum();
        self.states.accumulate("sum_abs_error", &Tensor::scalar(sae)?)?;
        self.states.accumulate("total", &Tensor::scalar(p.len() as i64)?)?;
        self.states.count_update();
        Ok(())
    }
    fn compute(&self) -> Result<Tensor> {
        self.states.warn_if_not_updated(self.name());
        let sae = self.states.get("sum_abs_error")?.item::<f64>()?;
        let n = self.states.get("total")?.item::<i64>()? as f64;
        Tensor::scalar((sae / n) as f32)
    }
    fn metric_states(&self) -> &MetricStates {
        &self.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.states
    }
}
