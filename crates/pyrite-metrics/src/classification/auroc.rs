//! The area under the ROC curve (torchmetrics' `BinaryAUROC`, `MulticlassAUROC` and the
//! `AUROC(task=...)` wrapper).

use pyrite_core::{Result, Tensor};

use super::curve::{auroc, reduce, CurveState, CurveTask};
use super::options::{
    check_curve_average, check_num_classes, Average, BinaryCurveOptions, MulticlassCurveOptions,
};
use crate::metric::Metric;
use crate::state::MetricStates;

/// Binary AUROC from probabilities or logits (a sigmoid is applied when a value lies outside
/// [0, 1]) and 0/1 targets. Tied scores make one point of the curve. No positive (or no
/// negative) target gives 0 with a warning, as torchmetrics does.
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{BinaryAUROC, BinaryCurveOptions, Metric};
/// let mut auroc = BinaryAUROC::new(BinaryCurveOptions::default())?;
/// auroc.update(&Tensor::new([0.1f32, 0.4, 0.35, 0.8])?, &Tensor::new([0i64, 0, 1, 1])?)?;
/// assert_eq!(auroc.compute()?.item::<f64>()?, 0.75);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct BinaryAUROC {
    curve: CurveState,
}

impl BinaryAUROC {
    /// A new metric; errors for `thresholds: Some(n)` with `n < 2`.
    pub fn new(options: BinaryCurveOptions) -> Result<Self> {
        Ok(BinaryAUROC {
            curve: CurveState::new(CurveTask::Binary, options.thresholds, options.ignore_index)?,
        })
    }
}

impl Metric for BinaryAUROC {
    fn name(&self) -> &'static str {
        "BinaryAUROC"
    }
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        self.curve.update(preds, target)
    }
    fn compute(&self) -> Result<Tensor> {
        self.curve.states.warn_if_not_updated(self.name());
        let curves = self.curve.curves()?;
        Tensor::scalar(auroc(&curves[0]) as f32)
    }
    fn metric_states(&self) -> &MetricStates {
        &self.curve.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.curve.states
    }
}

/// Multiclass AUROC, one class against the rest, from `(N, C, ...)` scores (a softmax over
/// dim 1 is applied when a value lies outside [0, 1]) and `(N, ...)` class targets; averaged
/// by `average` (macro: a class absent from the targets counts with AUROC 0).
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{Metric, MulticlassAUROC, MulticlassCurveOptions};
/// let mut auroc = MulticlassAUROC::new(3, MulticlassCurveOptions::default())?;
/// let scores = Tensor::new([[0.8f32, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])?;
/// auroc.update(&scores, &Tensor::new([0i64, 2, 2, 1])?)?;
/// assert!((auroc.compute()?.item::<f64>()? - 0.805_555_6).abs() < 1e-6);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MulticlassAUROC {
    curve: CurveState,
    average: Average,
}

impl MulticlassAUROC {
    /// A new metric over `num_classes` classes; errors for fewer than 2 classes, `Micro`, or
    /// `thresholds: Some(n)` with `n < 2`.
    pub fn new(num_classes: usize, options: MulticlassCurveOptions) -> Result<Self> {
        check_num_classes(num_classes, "num_classes")?;
        check_curve_average(options.average)?;
        let curve =
            CurveState::new(CurveTask::Multiclass { num_classes }, options.thresholds, options.ignore_index)?;
        Ok(MulticlassAUROC { curve, average: options.average })
    }
}

impl Metric for MulticlassAUROC {
    fn name(&self) -> &'static str {
        "MulticlassAUROC"
    }
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        self.curve.update(preds, target)
    }
    fn compute(&self) -> Result<Tensor> {
        self.curve.states.warn_if_not_updated(self.name());
        let scores = self.curve.curves()?.iter().map(auroc).collect();
        reduce(scores, self.average, &self.curve.support()?, "AUROC")
    }
    fn metric_states(&self) -> &MetricStates {
        &self.curve.states
    }
    fn metric_states_mut(&mut self) -> &mut MetricStates {
        &mut self.curve.states
    }
}

/// torchmetrics' `AUROC(task=...)`: picks the task-specific metric.
pub struct AUROC;

impl AUROC {
    /// `AUROC(task="binary", ...)`.
    pub fn binary(options: BinaryCurveOptions) -> Result<BinaryAUROC> {
        BinaryAUROC::new(options)
    }
    /// `AUROC(task="multiclass", num_classes=..., ...)`.
    pub fn multiclass(num_classes: usize, options: MulticlassCurveOptions) -> Result<MulticlassAUROC> {
        MulticlassAUROC::new(num_classes, options)
    }
}
