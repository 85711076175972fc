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
//! // Per class recall 1, -, 0.5 (class 1 never occurs nor is predicted): macro 0.75.
//! assert_eq!(acc.compute()?.item::<f64>()?, 0.75);
//! # Ok::<(), pyrite_core::Error>(())
//! ```
//!
//! Only `multidim_average="global"` is supported: extra dims are flattened into the batch.

pub mod classification;
mod input;
pub mod metric;
pub mod state;

pub use classification::accuracy::{Accuracy, BinaryAccuracy, MulticlassAccuracy, MultilabelAccuracy};
pub use classification::f_beta::{
    BinaryF1Score, BinaryFBetaScore, F1Score, FBetaScore, MulticlassF1Score, MulticlassFBetaScore,
    MultilabelF1Score, MultilabelFBetaScore,
};
pub use classification::options::{Average, BinaryOptions, MulticlassOptions, MultilabelOptions};
pub use classification::precision_recall::{
    BinaryPrecision, BinaryRecall, MulticlassPrecision, MulticlassRecall, MultilabelPrecision, MultilabelRecall,
    Precision, Recall,
};
pub use metric::Metric;
pub use state::{MetricState, MetricStates, Reduce};
