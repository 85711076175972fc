//! Accuracy (torchmetrics' `BinaryAccuracy`, `MulticlassAccuracy`, `MultilabelAccuracy` and the
//! `Accuracy(task=...)` wrapper).

use pyrite_core::Result;

use super::options::{BinaryOptions, MulticlassOptions, MultilabelOptions};
use super::stat_scores::{stat_metric, StatKind};

stat_metric!(
    /// Binary accuracy: `(tp + tn) / (tp + tn + fp + fn)` over thresholded probabilities
    /// (logits are put through a sigmoid) or 0/1 labels.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// use pyrite_metrics::{BinaryAccuracy, BinaryOptions, Metric};
    /// let mut acc = BinaryAccuracy::new(BinaryOptions::default())?;
    /// acc.update(&Tensor::new([0.11f32, 0.22, 0.84, 0.73, 0.33, 0.92])?, &Tensor::new([0i64, 1, 0, 1, 0, 1])?)?;
    /// assert!((acc.compute()?.item::<f64>()? - 2.0 / 3.0).abs() < 1e-6);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    BinaryAccuracy, binary, StatKind::Accuracy
);

stat_metric!(
    /// Multiclass accuracy from scores of shape `(N, C, ...)` (argmax, or `top_k`) or labels
    /// of shape `(N, ...)`; `average` macro by default (the mean of per-class recall over the
    /// classes that occur).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// use pyrite_metrics::{Average, Metric, MulticlassAccuracy, MulticlassOptions};
    /// let mut acc = MulticlassAccuracy::new(3, MulticlassOptions { average: Average::Micro, ..Default::default() })?;
    /// acc.update(&Tensor::new([2i64, 1, 0, 1])?, &Tensor::new([2i64, 1, 0, 0])?)?;
    /// assert_eq!(acc.compute()?.item::<f64>()?, 0.75);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    MulticlassAccuracy, multiclass, StatKind::Accuracy
);

stat_metric!(
    /// Multilabel accuracy over `(N, L, ...)` probabilities, logits or 0/1 labels: per label
    /// `(tp + tn) / total`, averaged (macro by default).
    MultilabelAccuracy, multilabel, StatKind::Accuracy
);

/// torchmetrics' `Accuracy(task=...)`: picks the task-specific metric.
///
/// ```
/// use pyrite_metrics::{Accuracy, MulticlassOptions};
/// let acc = Accuracy::multiclass(10, MulticlassOptions { top_k: 2, ..Default::default() })?;
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub struct Accuracy;

impl Accuracy {
    /// `Accuracy(task="binary", ...)`.
    pub fn binary(options: BinaryOptions) -> Result<BinaryAccuracy> {
        BinaryAccuracy::new(options)
    }
    /// `Accuracy(task="multiclass", num_classes=..., ...)`.
    pub fn multiclass(num_classes: usize, options: MulticlassOptions) -> Result<MulticlassAccuracy> {
        MulticlassAccuracy::new(num_classes, options)
    }
    /// `Accuracy(task="multilabel", num_labels=..., ...)`.
    pub fn multilabel(num_labels: usize, options: MultilabelOptions) -> Result<MultilabelAccuracy> {
        MultilabelAccuracy::new(num_labels, options)
    }
}
