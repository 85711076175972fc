//! Classification metrics, one type per task as in torchmetrics (`BinaryAccuracy`,
//! `MulticlassAccuracy`, `MultilabelAccuracy`, ...), with the `Accuracy::multiclass(...)`-style
//! constructors of torchmetrics' `Accuracy(task=...)` wrappers.

pub(crate) mod curve;
pub(crate) mod stat_scores;

pub mod accuracy;
pub mod auroc;
pub mod average_precision;
pub mod confusion_matrix;
pub mod f_beta;
pub mod options;
pub mod precision_recall;
