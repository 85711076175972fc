//! Average precision, the area under the precision-recall curve (torchmetrics'
//! `BinaryAveragePrecision`, `MulticlassAveragePrecision` and the `AveragePrecision(task=...)`
//! wrapper).

use pyrite_core::{Result, Tensor};

use super::curve::{average_precision, reduce, CurveState, CurveTask};
use super::options::{
    check_curve_average, check_num_classes, Average, BinaryCurveOptions, MulticlassCurveOptions,
};
use crate::metric::Metric;
use crate::state::MetricStates;

/// Binary average precision `sum_n (R_n - R_{n-1}) P_n` from probabilities or logits (a
/// sigmoid is applied when a value lies outside [0, 1]) and 0/1 targets. Tied scores make one
/// point of the curve.
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{BinaryAveragePrecision, BinaryCurveOptions, Metric};
/// let mut ap = BinaryAveragePrecision::new(BinaryCurveOptions::default())?;
/// ap.update(&Tensor::new([0.1f32, 0.4, 0.35, 0.8])?, &Tensor::new([0i64, 0, 1, 1])?)?;
/// assert!((ap.compute()?.item::<f64>()? - 0.833_333_3).abs() < 1e-6);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct BinaryAveragePrecision {
    curve: CurveState,
}

impl BinaryAveragePrecision {
    /// A new metric; errors for `thresholds: Some(n)` with `n < 2`.
    pub fn new(options: BinaryCurveOptions) -> Result<Self> {
        Ok(BinaryAveragePrecision {
            curve: CurveState::new(CurveTask::Binary, options.thresholds, options.ignore_index)?,
        })
    }
}

impl Metric for BinaryAveragePrecision {
    fn name(&self) -> &'static str {
        "BinaryAveragePrecision"
    }
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        self.curve.update(preds, target)
    }
    fn compute(&self) -> Result<Tensor> {
        self.curve.states.warn_if_not_updated(self.name());
        let curves = self.curve.curves()?;
        Tensor::scalar(average_precision(&curves[0], true) as f32)
    }
    fn metric_states(&self) -> &MetricStates {
        &self.curve.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.curve.states
    }
}

/// Multiclass average precision, one class against the rest, from `(N, C, ...)` scores (a
/// softmax over dim 1 is applied when a value lies outside [0, 1]) and `(N, ...)` class
/// targets; averaged by `average`. In the exact mode a class absent from the targets scores NaN
/// and is left out of the average (with a warning); binned, it scores 0, as in torchmetrics.
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{Metric, MulticlassAveragePrecision, MulticlassCurveOptions};
/// let mut ap = MulticlassAveragePrecision::new(3, MulticlassCurveOptions::default())?;
/// let scores = Tensor::new([[0.8f32, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])?;
/// ap.update(&scores, &Tensor::new([0i64, 2, 2, 1])?)?;
/// assert!((ap.compute()?.item::<f64>()? - 0.75).abs() < 1e-6);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MulticlassAveragePrecision {
    curve: CurveState,
    average: Average,
}

impl MulticlassAveragePrecision {
    /// A new metric over `num_classes` classes; errors for fewer than 2 classes, `Micro`, or
    /// `thresholds: Some(n)` with `n < 2`.
    pub fn new(num_classes: usize, options: MulticlassCurveOptions) -> Result<Self> {
        check_num_classes(num_classes, "num_classes")?;
        check_curve_average(options.average)?;
        let curve =
            CurveState::new(CurveTask::Multiclass { num_classes }, options.thresholds, options.ignore_index)?;
        Ok(MulticlassAveragePrecision { curve, average: options.average })
    }
}

impl Metric for MulticlassAveragePrecision {
    fn name(&self) -> &'static str {
        "MulticlassAveragePrecision"
    }
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        self.curve.update(preds, target)
    }
    fn compute(&self) -> Result<Tensor> {
        self.curve.states.warn_if_not_updated(self.name());
        let scores = self.curve.curves()?.iter().map(|c| average_precision(c, false)).collect();
        reduce(scores, self.average, &self.curve.support()?, "Average precision")
    }
    fn metric_states(&self) -> &MetricStates {
        &self.curve.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.curve.states
    }
}

/// torchmetrics' `AveragePrecision(task=...)`: picks the task-specific metric.
pub struct AveragePrecision;

impl AveragePrecision {
    /// `AveragePrecision(task="binary", ...)`.
    pub fn binary(options: BinaryCurveOptions) -> Result<BinaryAveragePrecision> {
        BinaryAveragePrecision::new(options)
    }
    /// `AveragePrecision(task="multiclass", num_classes=..., ...)`.
    pub fn multiclass(
        num_classes: usize,
        options: MulticlassCurveOptions,
    ) -> Result<MulticlassAveragePrecision> {
        MulticlassAveragePrecision::new(num_classes, options)
    }
}
