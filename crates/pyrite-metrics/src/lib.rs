//! # pyrite-metrics
//!
//! torchmetrics in Rust: metrics accumulated over batches with [`Metric::update`], read with
//! [`Metric::compute`], and per batch with [`Metric::forward`]; state kept as named tensors
//! with their reduction ([`MetricStates`]) so copies can be merged or all-reduced.
//!
//! ```
//! use pyrite_core::Tensor;
//! use pyrite_metrics::{Metric, MulticlassAccuracy, MulticlassOptions};
//! let mut acc = MulticlassAccuracy::new(3, MulticlassOptions::default())?;
//! let logits = Tensor::new([[2.0f32, 0.1, 0.3], [0.2, 0.1, 3.0], [0.5, 2.0, 0.1]])?;
//! acc.update(&logits, &Tensor::new([0i64, 2, 2])?)?;
//! // Per class recall 1, -, 0.5 (class 1 never occurs but is predicted: it counts as 0):
//! assert!((acc.compute()?.item::<f64>()? - 0.5).abs() < 1e-6);
//! # Ok::<(), pyrite_core::Error>(())
//! ```
//!
//! - Classification: accuracy, precision, recall, F1 / F-beta, confusion matrix (binary,
//!   multiclass, multilabel); AUROC and average precision (binary, multiclass; exact or binned).
//! - Regression: [`MeanSquaredError`], [`MeanAbsoluteError`], [`R2Score`].
//! - Aggregation: [`MeanMetric`], [`SumMetric`].
//! - [`MetricCollection`]: named metrics updated together.
//!
//! Only `multidim_average="global"` is supported: extra dims are flattened into the batch.

pub mod aggregation;
pub mod classification;
pub mod collection;
mod input;
pub mod metric;
pub mod regression;
pub mod state;

pub use aggregation::{MeanMetric, NanStrategy, SumMetric};
pub use classification::accuracy::{Accuracy, BinaryAccuracy, MulticlassAccuracy, MultilabelAccuracy};
pub use classification::auroc::{BinaryAUROC, MulticlassAUROC, AUROC};
pub use classification::average_precision::{
    AveragePrecision, BinaryAveragePrecision, MulticlassAveragePrecision,
};
pub use classification::confusion_matrix::{
    BinaryConfusionMatrix, ConfusionMatrix, ConfusionMatrixOptions, MulticlassConfusionMatrix,
    MultilabelConfusionMatrix, Normalize,
};
pub use classification::f_beta::{
    BinaryF1Score, BinaryFBetaScore, F1Score, FBetaScore, MulticlassF1Score, MulticlassFBetaScore,
    MultilabelF1Score, MultilabelFBetaScore,
};
pub use classification::options::{
    Average, BinaryCurveOptions, BinaryOptions, MulticlassCurveOptions, MulticlassOptions, MultilabelOptions,
};
pub use classification::precision_recall::{
    BinaryPrecision, BinaryRecall, MulticlassPrecision, MulticlassRecall, MultilabelPrecision,
    MultilabelRecall, Precision, Recall,
};
pub use collection::MetricCollection;
pub use metric::Metric;
pub use regression::mean_absolute_error::MeanAbsoluteError;
pub use regression::mean_squared_error::{MeanSquaredError, MeanSquaredErrorOptions};
pub use regression::r2::R2Score;
pub use state::{MetricState, MetricStates, Reduce};
