//! Aggregation metrics (torchmetrics' `MeanMetric`, `SumMetric`): a stream of values reduced to
//! their (weighted) mean or sum.
//!
//! They take values rather than `(preds, target)`: [`MeanMetric::update_value`],
//! [`MeanMetric::update_weighted`], [`SumMetric::update_value`]. Through the [`Metric`] trait
//! (for a [`MetricCollection`](crate::MetricCollection)), `update(preds, target)` reads `preds`
//! as the values and, for `MeanMetric`, `target` as their weights (broadcast to the values'
//! shape); `SumMetric` ignores `target`.

use pyrite_core::{bail, DType, Result, Tensor};

use crate::input::floats;
use crate::metric::Metric;
use crate::state::{MetricStates, Reduce};

/// What to do with NaN values (or NaN weights) (torchmetrics' `nan_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum NanStrategy {
    /// Fail on a NaN (`"error"`).
    Error,
    /// Drop NaN values, with a warning (`"warn"`, the default).
    #[default]
    Warn,
    /// Drop NaN values silently (`"ignore"`).
    Ignore,
    /// Keep NaN values, no check (`"disable"`).
    Disable,
    /// Replace NaN values with this value, their weight with 1 (a float `nan_strategy`).
    Replace(f64),
}

/// `_cast_and_nan_check_input`: the values and their weights after the NaN strategy.
fn nan_checked(values: Vec<f64>, weights: Vec<f64>, strategy: NanStrategy) -> Result<(Vec<f64>, Vec<f64>)> {
    if strategy == NanStrategy::Disable || !values.iter().chain(&weights).any(|v| v.is_nan()) {
        return Ok((values, weights));
    }
    match strategy {
        NanStrategy::Error => bail!(Value, "Encountered `nan` values in tensor"),
        NanStrategy::Replace(r) => Ok(values
            .into_iter()
            .zip(weights)
            .map(|(v, w)| if v.is_nan() || w.is_nan() { (r, 1.0) } else { (v, w) })
            .unzip()),
        _ => {
            if strategy == NanStrategy::Warn {
                pyrite_core::warnings::warn(
                    "pyrite_metrics",
                    "Encountered `nan` values in tensor. Will be removed.",
                );
            }
            Ok(values.into_iter().zip(weights).filter(|(v, w)| !v.is_nan() && !w.is_nan()).unzip())
        }
    }
}

fn scalar_state(states: &mut MetricStates, name: &'static str) {
    states
        .add_state(name, Tensor::zeros([], DType::F64).expect("a scalar zero"), Reduce::Sum)
        .expect("fresh state");
}

/// The weighted mean of every value seen: `sum(value * weight) / sum(weight)`, from summed
/// states `mean_value` and `weight` (float64).
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{MeanMetric, Metric, NanStrategy};
/// let mut mean = MeanMetric::new(NanStrategy::default());
/// mean.update_value(&Tensor::new([1.0f32, 2.0, 3.0])?)?;
/// mean.update_weighted(&Tensor::scalar(10.0f32)?, &Tensor::scalar(3.0f32)?)?;
/// assert_eq!(mean.compute()?.item::<f64>()?, 6.0);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MeanMetric {
    nan_strategy: NanStrategy,
    states: MetricStates,
}

impl MeanMetric {
    /// A new metric with its NaN strategy.
    pub fn new(nan_strategy: NanStrategy) -> Self {
        let mut states = MetricStates::new();
        scalar_state(&mut states, "mean_value");
        scalar_state(&mut states, "weight");
        MeanMetric { nan_strategy, states }
    }

    /// Adds values, each of weight 1.
    pub fn update_value(&mut self, value: &Tensor) -> Result<()> {
        let v = floats(value)?;
        let w = vec![1.0; v.len()];
        self.add(v, w)
    }

    /// Adds values with their weights; `weight` broadcasts to the shape of `value`.
    pub fn update_weighted(&mut self, value: &Tensor, weight: &Tensor) -> Result<()> {
        let w = floats(&weight.broadcast_to(value.dims())?)?;
        self.add(floats(value)?, w)
    }

    fn add(&mut self, v: Vec<f64>, w: Vec<f64>) -> Result<()> {
        let (v, w) = nan_checked(v, w, self.nan_strategy)?;
        self.states.count_update();
        if v.is_empty() {
            return Ok(());
        }
        let sum: f64 = v.iter().zip(&w).map(|(v, w)| v * w).sum();
        self.states.accumulate("mean_value", &Tensor::scalar(sum)?)?;
        self.states.accumulate("weight", &Tensor::scalar(w.iter().sum::<f64>())?)
    }
}

impl Metric for MeanMetric {
    fn name(&self) -> &'static str {
        "MeanMetric"
    }
    /// `preds` are the values and `target` their weights.
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        self.update_weighted(preds, target)
    }
    fn compute(&self) -> Result<Tensor> {
        self.states.warn_if_not_updated(self.name());
        let v = self.states.get("mean_value")?.item::<f64>()?;
        let w = self.states.get("weight")?.item::<f64>()?;
        Tensor::scalar((v / w) as f32)
    }
    fn metric_states(&self) -> &MetricStates {
        &self.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.states
    }
}

/// The sum of every value seen, a summed state `sum_value` (float64).
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{Metric, NanStrategy, SumMetric};
/// let mut sum = SumMetric::new(NanStrategy::default());
/// sum.update_value(&Tensor::new([1.0f32, 2.0, f32::NAN])?)?; // the NaN is dropped, with a warning
/// sum.update_value(&Tensor::scalar(4.0f32)?)?;
/// assert_eq!(sum.compute()?.item::<f64>()?, 7.0);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SumMetric {
    nan_strategy: NanStrategy,
    states: MetricStates,
}

impl SumMetric {
    /// A new metric with its NaN strategy.
    pub fn new(nan_strategy: NanStrategy) -> Self {
        let mut states = MetricStates::new();
        scalar_state(&mut states, "sum_value");
        SumMetric { nan_strategy, states }
    }

    /// Adds values.
    pub fn update_value(&mut self, value: &Tensor) -> Result<()> {
        let v = floats(value)?;
        let w = vec![1.0; v.len()];
        let (v, _) = nan_checked(v, w, self.nan_strategy)?;
        self.states.count_update();
        self.states.accumulate("sum_value", &Tensor::scalar(v.iter().sum::<f64>())?)
    }
}

impl Metric for SumMetric {
    fn name(&self) -> &'static str {
        "SumMetric"
    }
    /// `preds` are the values; `target` is not used.
    fn update(&mut self, preds: &Tensor, _target: &Tensor) -> Result<()> {
        self.update_value(preds)
    }
    fn compute(&self) -> Result<Tensor> {
        self.states.warn_if_not_updated(self.name());
        Tensor::scalar(self.states.get("sum_value")?.item::<f64>()? as f32)
    }
    fn metric_states(&self) -> &MetricStates {
        &self.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.states
    }
}
