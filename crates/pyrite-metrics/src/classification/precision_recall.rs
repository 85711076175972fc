//! Precision and recall (torchmetrics' `BinaryPrecision`, `MulticlassRecall`, ... and the
//! `Precision(task=...)` / `Recall(task=...)` wrappers).

use pyrite_core::Result;

use super::options::{BinaryOptions, MulticlassOptions, MultilabelOptions};
use super::stat_scores::{stat_metric, StatKind};

stat_metric!(
    /// Binary precision: `tp / (tp + fp)` (`zero_division` where nothing is predicted positive).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// use pyrite_metrics::{BinaryOptions, BinaryPrecision, Metric};
    /// let mut p = BinaryPrecision::new(BinaryOptions::default())?;
    /// p.update(&Tensor::new([0i64, 1, 1, 1])?, &Tensor::new([0i64, 1, 0, 1])?)?;
    /// assert!((p.compute()?.item::<f64>()? - 2.0 / 3.0).abs() < 1e-6);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    BinaryPrecision, binary, StatKind::Precision
);
stat_metric!(
    /// Multiclass precision, per class `tp / (tp + fp)`, averaged (macro by default).
    MulticlassPrecision, multiclass, StatKind::Precision
);
stat_metric!(
    /// Multilabel precision, per label `tp / (tp + fp)`, averaged (macro by default).
    MultilabelPrecision, multilabel, StatKind::Precision
);
stat_metric!(
    /// Binary recall: `tp / (tp + fn)`.
    BinaryRecall, binary, StatKind::Recall
);
stat_metric!(
    /// Multiclass recall, per class `tp / (tp + fn)`, averaged (macro by default).
    MulticlassRecall, multiclass, StatKind::Recall
);
stat_metric!(
    /// Multilabel recall, per label `tp / (tp + fn)`, averaged (macro by default).
    MultilabelRecall, multilabel, StatKind::Recall
);

/// torchmetrics' `Precision(task=...)`: picks the task-specific metric.
pub struct Precision;

impl Precision {
    /// `Precision(task="binary", ...)`.
    pub fn binary(options: BinaryOptions) -> Result<BinaryPrecision> {
        BinaryPrecision::new(options)
    }
    /// `Precision(task="multiclass", num_classes=..., ...)`.
    pub fn multiclass(num_classes: usize, options: MulticlassOptions) -> Result<MulticlassPrecision> {
        MulticlassPrecision::new(num_classes, options)
    }
    /// `Precision(task="multilabel", num_labels=..., ...)`.
    pub fn multilabel(num_labels: usize, options: MultilabelOptions) -> Result<MultilabelPrecision> {
        MultilabelPrecision::new(num_labels, options)
    }
}

/// torchmetrics' `Recall(task=...)`: picks the task-specific metric.
pub struct Recall;

impl Recall {
    /// `Recall(task="binary", ...)`.
    pub fn binary(options: BinaryOptions) -> Result<BinaryRecall> {
        BinaryRecall::new(options)
    }
    /// `Recall(task="multiclass", num_classes=..., ...)`.
    pub fn multiclass(num_classes: usize, options: MulticlassOptions) -> Result<MulticlassRecall> {
        MulticlassRecall::new(num_classes, options)
    }
    /// `Recall(task="multilabel", num_labels=..., ...)`.
    pub fn multilabel(num_labels: usize, options: MultilabelOptions) -> Result<MultilabelRecall> {
        MultilabelRecall::new(num_labels, options)
    }
}
