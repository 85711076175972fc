//! F1 and F-beta scores (torchmetrics' `BinaryF1Score`, `MulticlassFBetaScore`, ... and the
//! `F1Score(task=...)` / `FBetaScore(task=...)` wrappers).

use pyrite_core::Result;

use super::options::{BinaryOptions, MulticlassOptions, MultilabelOptions};
use super::stat_scores::{stat_metric, StatKind, StatScores};

stat_metric!(
    /// Binary F1: `2 tp / (2 tp + fn + fp)`.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// use pyrite_metrics::{BinaryF1Score, BinaryOptions, Metric};
    /// let mut f1 = BinaryF1Score::new(BinaryOptions::default())?;
    /// f1.update(&Tensor::new([0i64, 0, 1, 1, 0, 1])?, &Tensor::new([0i64, 1, 0, 1, 0, 1])?)?;
    /// assert!((f1.compute()?.item::<f64>()? - 2.0 / 3.0).abs() < 1e-6);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    BinaryF1Score, binary, StatKind::FBeta(1.0)
);
stat_metric!(
    /// Multiclass F1, per class, averaged (macro by default).
    MulticlassF1Score, multiclass, StatKind::FBeta(1.0)
);
stat_metric!(
    /// Multilabel F1, per label, averaged (macro by default).
    MultilabelF1Score, multilabel, StatKind::FBeta(1.0)
);

macro_rules! fbeta_metric {
    ($(#[$doc:meta])* $name:ident, $ctor:ident, $opts:ty $(, $n:ident)?) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            inner: StatScores,
        }
        impl $name {
            /// A new metric weighting recall `beta` times as much as precision; errors for
            /// `beta <= 0` and options out of range.
            pub fn new(beta: f64, $($n: usize,)? options: $opts) -> Result<Self> {
                Ok(Self { inner: StatScores::$ctor($($n,)? options, StatKind::FBeta(beta))? })
            }
        }
        stat_metric!(@impl $name);
    };
}

fbeta_metric!(
    /// Binary F-beta: `(1 + β²) tp / ((1 + β²) tp + β² fn + fp)`.
    BinaryFBetaScore, binary, BinaryOptions
);
fbeta_metric!(
    /// Multiclass F-beta, per class, averaged (macro by default).
    MulticlassFBetaScore, multiclass, MulticlassOptions, num_classes
);
fbeta_metric!(
    /// Multilabel F-beta, per label, averaged (macro by default).
    MultilabelFBetaScore, multilabel, MultilabelOptions, num_labels
);

/// torchmetrics' `F1Score(task=...)`: picks the task-specific metric.
pub struct F1Score;

impl F1Score {
    /// `F1Score(task="binary", ...)`.
    pub fn binary(options: BinaryOptions) -> Result<BinaryF1Score> {
        BinaryF1Score::new(options)
    }
    /// `F1Score(task="multiclass", num_classes=..., ...)`.
    pub fn multiclass(num_classes: usize, options: MulticlassOptions) -> Result<MulticlassF1Score> {
        MulticlassF1Score::new(num_classes, options)
    }
    /// `F1Score(task="multilabel", num_labels=..., ...)`.
    pub fn multilabel(num_labels: usize, options: MultilabelOptions) -> Result<MultilabelF1Score> {
        MultilabelF1Score::new(num_labels, options)
    }
}

/// torchmetrics' `FBetaScore(task=..., beta=...)`: picks the task-specific metric.
pub struct FBetaScore;

impl FBetaScore {
    /// `FBetaScore(task="binary", beta=...)`.
    pub fn binary(beta: f64, options: BinaryOptions) -> Result<BinaryFBetaScore> {
        BinaryFBetaScore::new(beta, options)
    }
    /// `FBetaScore(task="multiclass", beta=..., num_classes=...)`.
    pub fn multiclass(
        beta: f64,
        num_classes: usize,
        options: MulticlassOptions,
    ) -> Result<MulticlassFBetaScore> {
        MulticlassFBetaScore::new(beta, num_classes, options)
    }
    /// `FBetaScore(task="multilabel", beta=..., num_labels=...)`.
    pub fn multilabel(
        beta: f64,
        num_labels: usize,
        options: MultilabelOptions,
    ) -> Result<MultilabelFBetaScore> {
        MultilabelFBetaScore::new(beta, num_labels, options)
    }
}
