//! The keyword arguments shared by the classification metrics of one task, with
//! torchmetrics' defaults.

use pyrite_core::{bail, Result};

/// How per-class (or per-label) scores are reduced (torchmetrics' `average`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Average {
    /// Sum the statistics over classes, then score (`"micro"`).
    Micro,
    /// Score each class, then take the unweighted mean (`"macro"`, the default).
    Macro,
    /// Score each class, then average weighted by support (`"weighted"`).
    Weighted,
    /// One score per class (`"none"` / `None`).
    None,
}

/// Options of the binary metrics (`BinaryAccuracy(threshold=0.5, ignore_index=None)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BinaryOptions {
    /// Probabilities above it are positive predictions (0.5).
    pub threshold: f64,
    /// A target value whose positions are left out (`None`).
    pub ignore_index: Option<i64>,
    /// The value of 0/0 in precision, recall and F-scores: 0 or 1 (0).
    pub zero_division: f64,
}

impl Default for BinaryOptions {
    fn default() -> Self {
        BinaryOptions { threshold: 0.5, ignore_index: None, zero_division: 0.0 }
    }
}

/// Options of the multiclass metrics (`MulticlassAccuracy(num_classes, average="macro", top_k=1,
/// ignore_index=None)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MulticlassOptions {
    /// The reduction over classes (`Macro`).
    pub average: Average,
    /// A prediction is correct when the target is among the `top_k` highest scores (1).
    pub top_k: usize,
    /// A target value whose positions are left out (`None`).
    pub ignore_index: Option<i64>,
    /// The value of 0/0 in precision, recall and F-scores: 0 or 1 (0).
    pub zero_division: f64,
}

impl Default for MulticlassOptions {
    fn default() -> Self {
        MulticlassOptions { average: Average::Macro, top_k: 1, ignore_index: None, zero_division: 0.0 }
    }
}

/// Options of the multilabel metrics (`MultilabelAccuracy(num_labels, threshold=0.5,
/// average="macro", ignore_index=None)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultilabelOptions {
    /// Probabilities above it are positive predictions (0.5).
    pub threshold: f64,
    /// The reduction over labels (`Macro`).
    pub average: Average,
    /// A target value whose positions are left out (`None`).
    pub ignore_index: Option<i64>,
    /// The value of 0/0 in precision, recall and F-scores: 0 or 1 (0).
    pub zero_division: f64,
}

impl Default for MultilabelOptions {
    fn default() -> Self {
        MultilabelOptions { threshold: 0.5, average: Average::Macro, ignore_index: None, zero_division: 0.0 }
    }
}

pub(crate) fn check_threshold(threshold: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&threshold) {
        bail!(Value, "Expected argument `threshold` to be a float in the [0,1] range, but got {threshold}.");
    }
    Ok(())
}

pub(crate) fn check_zero_division(z: f64) -> Result<()> {
    if z != 0.0 && z != 1.0 {
        bail!(Value, "Expected argument `zero_division` to be 0 or 1, but got {z}.");
    }
    Ok(())
}

pub(crate) fn check_num_classes(n: usize, what: &str) -> Result<()> {
    if n < 2 {
        bail!(Value, "Expected argument `{what}` to be an integer larger than 1, but got {n}");
    }
    Ok(())
}

/// Options of the binary curve metrics (`BinaryAUROC(thresholds=None, ignore_index=None)`,
/// `BinaryAveragePrecision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BinaryCurveOptions {
    /// `None` (the default): exact, the scores and targets are kept. `Some(n)`: `n` thresholds
    /// `linspace(0, 1, n)` and a constant-memory count state.
    pub thresholds: Option<usize>,
    /// A target value whose positions are left out (`None`).
    pub ignore_index: Option<i64>,
}

/// Options of the multiclass curve metrics (`MulticlassAUROC(num_classes, average="macro",
/// thresholds=None, ignore_index=None)`, `MulticlassAveragePrecision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MulticlassCurveOptions {
    /// `Macro` (the default), `Weighted` (by class support) or `None`; `Micro` is an error.
    pub average: Average,
    /// `None`: exact; `Some(n)`: `n` thresholds `linspace(0, 1, n)` (see [`BinaryCurveOptions`]).
    pub thresholds: Option<usize>,
    /// A target value whose positions are left out (`None`).
    pub ignore_index: Option<i64>,
}

impl Default for MulticlassCurveOptions {
    fn default() -> Self {
        MulticlassCurveOptions { average: Average::Macro, thresholds: None, ignore_index: None }
    }
}

pub(crate) fn check_curve_average(average: Average) -> Result<()> {
    if average == Average::Micro {
        bail!(Value, "Expected argument `average` to be one of Macro, Weighted or None, but got Micro");
    }
    Ok(())
}
