//! The true/false positive/negative counts behind accuracy, precision, recall and the
//! F-scores (torchmetrics' `StatScores`), kept as summed states `tp`, `fp`, `tn`, `fn`.

use pyrite_core::{bail, DType, Result, Tensor};

use super::options::{check_num_classes, check_threshold, check_zero_division, Average};
use super::options::{BinaryOptions, MulticlassOptions, MultilabelOptions};
use crate::input::{self, check_binary_preds, check_binary_target, check_class_labels, check_same_shape};
use crate::state::{MetricStates, Reduce};

/// The classification task and its task-specific options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StatTask {
    Binary { threshold: f64 },
    Multiclass { num_classes: usize, top_k: usize },
    Multilabel { num_labels: usize, threshold: f64 },
}

/// What is scored from the counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StatKind {
    Accuracy,
    Precision,
    Recall,
    FBeta(f64),
}

/// The counts of one metric with its options.
#[derive(Debug, Clone)]
pub(crate) struct StatScores {
    pub task: StatTask,
    pub kind: StatKind,
    pub average: Average,
    pub ignore_index: Option<i64>,
    pub zero_division: f64,
    pub states: MetricStates,
}

const STATS: [&str; 4] = ["tp", "fp", "tn", "fn"];

impl StatScores {
    fn with_states(
        task: StatTask,
        kind: StatKind,
        average: Average,
        ignore_index: Option<i64>,
        zero_division: f64,
    ) -> Result<Self> {
        check_zero_division(zero_division)?;
        if let StatKind::FBeta(beta) = kind
            && (beta.is_nan() || beta <= 0.0)
        {
            bail!(Value, "Expected argument `beta` to be a float larger than 0, but got {beta}.");
        }
        let shape: Vec<usize> = match task {
            StatTask::Binary { .. } => vec![],
            StatTask::Multiclass { top_k: 1, .. } if average == Average::Micro => vec![1],
            StatTask::Multiclass { num_classes, .. } => vec![num_classes],
            StatTask::Multilabel { num_labels, .. } => vec![num_labels],
        };
        let mut states = MetricStates::new();
        for name in STATS {
            states.add_state(name, Tensor::zeros(shape.clone(), DType::I64)?, Reduce::Sum)?;
        }
        Ok(StatScores { task, kind, average, ignore_index, zero_division, states })
    }

    pub fn binary(o: BinaryOptions, kind: StatKind) -> Result<Self> {
        check_threshold(o.threshold)?;
        Self::with_states(
            StatTask::Binary { threshold: o.threshold },
            kind,
            Average::Micro,
            o.ignore_index,
            o.zero_division,
        )
    }

    pub fn multiclass(num_classes: usize, o: MulticlassOptions, kind: StatKind) -> Result<Self> {
        check_num_classes(num_classes, "num_classes")?;
        if o.top_k < 1 {
            bail!(
                Value,
                "Expected argument `top_k` to be an integer larger than or equal to 1, but got {}",
                o.top_k
            );
        }
        if o.top_k > num_classes {
            bail!(
                Value,
                "Expected argument `top_k` to be smaller or equal to `num_classes` but got {} and {num_classes}",
                o.top_k
            );
        }
        let task = StatTask::Multiclass { num_classes, top_k: o.top_k };
        Self::with_states(task, kind, o.average, o.ignore_index, o.zero_division)
    }

    pub fn multilabel(num_labels: usize, o: MultilabelOptions, kind: StatKind) -> Result<Self> {
        check_num_classes(num_labels, "num_labels")?;
        check_threshold(o.threshold)?;
        let task = StatTask::Multilabel { num_labels, threshold: o.threshold };
        Self::with_states(task, kind, o.average, o.ignore_index, o.zero_division)
    }

    /// Counts a batch: per class (per label; one for binary) `[tp, fp, tn, fn]`.
    pub fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        let counts = match self.task {
            StatTask::Binary { threshold } => binary_counts(preds, target, threshold, self.ignore_index)?,
            StatTask::Multiclass { num_classes, top_k } => {
                multiclass_counts(preds, target, num_classes, top_k, self.ignore_index)?
            }
            StatTask::Multilabel { num_labels, threshold } => {
                multilabel_counts(preds, target, num_labels, threshold, self.ignore_index)?
            }
        };
        let shape = self.states.get("tp")?.dims().to_vec();
        for (name, mut v) in STATS.into_iter().zip(counts) {
            if shape.iter().product::<usize>() != v.len() {
                v = vec![v.iter().sum()];
            }
            self.states.accumulate(name, &Tensor::from_vec(v, shape.clone())?)?;
        }
        self.states.count_update();
        Ok(())
    }

    /// The summed counts as f64, per class.
    pub fn counts(&self) -> Result<[Vec<f64>; 4]> {
        let read = |n: &str| -> Result<Vec<f64>> { input::floats(&self.states.get(n)?) };
        Ok([read("tp")?, read("fp")?, read("tn")?, read("fn")?])
    }

    /// The metric's value from the counts, as torchmetrics' `_accuracy_reduce`,
    /// `_precision_recall_reduce` and `_fbeta_reduce` give it (float32).
    pub fn compute(&self) -> Result<Tensor> {
        let [tp, fp, tn, fn_] = self.counts()?;
        let (average, multilabel, top_k) = match self.task {
            StatTask::Binary { .. } => (None, false, 1),
            StatTask::Multiclass { top_k, .. } => (Some(self.average), false, top_k),
            StatTask::Multilabel { .. } => (Some(self.average), true, 1),
        };
        let zd = self.zero_division;
        // The per-class score, for the counts at index i of (tp, fp, tn, fn).
        let score = |tp: f64, fp: f64, tn: f64, fn_: f64| -> f64 {
            match self.kind {
                StatKind::Accuracy if multilabel || average.is_none() => {
                    safe_div(tp + tn, tp + tn + fp + fn_, 0.0)
                }
                StatKind::Accuracy => safe_div(tp, tp + fn_, 0.0),
                StatKind::Precision => safe_div(tp, tp + fp, zd),
                StatKind::Recall => safe_div(tp, tp + fn_, zd),
                StatKind::FBeta(beta) => {
                    let b2 = beta * beta;
                    safe_div((1.0 + b2) * tp, (1.0 + b2) * tp + b2 * fn_ + fp, zd)
                }
            }
        };
        let out = match average {
            None => vec![score(tp[0], fp[0], tn[0], fn_[0])],
            Some(Average::Micro) => {
                let s = |v: &[f64]| v.iter().sum::<f64>();
                vec![score(s(&tp), s(&fp), s(&tn), s(&fn_))]
            }
            Some(avg) => {
                let scores: Vec<f64> = (0..tp.len()).map(|i| score(tp[i], fp[i], tn[i], fn_[i])).collect();
                if avg == Average::None {
                    return Tensor::from_vec(
                        scores.iter().map(|&v| v as f32).collect::<Vec<_>>(),
                        [scores.len()],
                    );
                }
                // torchmetrics' top_k only changes the weights of accuracy, precision and recall.
                let top_k = if matches!(self.kind, StatKind::FBeta(_)) { 1 } else { top_k };
                let weights: Vec<f64> = (0..tp.len())
                    .map(|i| match avg {
                        Average::Weighted => tp[i] + fn_[i],
                        _ if multilabel => 1.0,
                        _ if top_k == 1 && tp[i] + fp[i] + fn_[i] == 0.0 => 0.0,
                        _ if top_k != 1 && tp[i] + fn_[i] == 0.0 => 0.0,
                        _ => 1.0,
                    })
                    .collect();
                let total: f64 = weights.iter().sum();
                vec![(0..tp.len()).map(|i| safe_div(weights[i] * scores[i], total, 0.0)).sum()]
            }
        };
        Tensor::scalar(out[0] as f32)
    }
}

/// `_safe_divide`: `num / denom`, or `zero_division` where `denom` is 0.
pub(crate) fn safe_div(num: f64, denom: f64, zero_division: f64) -> f64 {
    if denom != 0.0 {
        num / denom
    } else {
        zero_division
    }
}

/// Thresholded binary predictions: probabilities (logits go through a sigmoid) above
/// `threshold`, or 0/1 labels.
pub(crate) fn binary_preds(preds: &Tensor, threshold: f64) -> Result<Vec<bool>> {
    if preds.dtype().is_floating_point() {
        let thr = input::as_dtype(threshold, preds.dtype())?;
        Ok(input::sigmoid_if_logits(preds)?.into_iter().map(|p| p > thr).collect())
    } else {
        let p = input::labels(preds, "preds")?;
        check_binary_preds(&p)?;
        Ok(p.into_iter().map(|v| v == 1).collect())
    }
}

fn binary_counts(
    preds: &Tensor,
    target: &Tensor,
    threshold: f64,
    ignore: Option<i64>,
) -> Result<[Vec<i64>; 4]> {
    check_same_shape(preds, target)?;
    let t = input::labels(target, "target")?;
    check_binary_target(&t, ignore)?;
    let p = binary_preds(preds, threshold)?;
    let mut c = [0i64; 4];
    for (&p, &t) in p.iter().zip(&t) {
        if Some(t) == ignore || !(t == 0 || t == 1) {
            continue;
        }
        let i = match (p, t == 1) {
            (true, true) => 0,
            (true, false) => 1,
            (false, false) => 2,
            (false, true) => 3,
        };
        c[i] += 1;
    }
    Ok(c.map(|v| vec![v]))
}

/// The predicted class per position of a multiclass batch, with the targets: the argmax of
/// the scores, or with `top_k > 1` the target when it is among the `top_k` highest scores
/// (torchmetrics' `_refine_preds_oh`) and the argmax otherwise.
pub(crate) fn multiclass_labels(
    preds: &Tensor,
    target: &Tensor,
    num_classes: usize,
    top_k: usize,
    ignore: Option<i64>,
) -> Result<(Vec<i64>, Vec<i64>)> {
    let scores = input::check_multiclass_shapes(preds, target, num_classes)?;
    let t = input::labels(target, "target")?;
    check_class_labels(&t, "target", num_classes, ignore)?;
    let p = if scores {
        let rows = input::rows_by_class(input::floats(preds)?, preds.dims());
        rows.chunks(num_classes.max(1))
            .zip(&t)
            .map(|(row, &t)| {
                let mut best = 0;
                for (k, &v) in row.iter().enumerate() {
                    if v > row[best] || (v.is_nan() && !row[best].is_nan()) {
                        best = k;
                    }
                }
                if top_k > 1 && t >= 0 && (t as usize) < num_classes {
                    let vt = row[t as usize];
                    if row.iter().filter(|&&v| v > vt).count() < top_k {
                        return t;
                    }
                }
                best as i64
            })
            .collect()
    } else {
        if top_k > 1 {
            bail!(
                Value,
                "`top_k` = {top_k} needs `preds` with a score per class, of shape (N, C, ...), not labels"
            );
        }
        let p = input::pred_labels(preds)?;
        check_class_labels(&p, "preds", num_classes, None)?;
        p
    };
    Ok((p, t))
}

fn multiclass_counts(
    preds: &Tensor,
    target: &Tensor,
    num_classes: usize,
    top_k: usize,
    ignore: Option<i64>,
) -> Result<[Vec<i64>; 4]> {
    let (p, t) = multiclass_labels(preds, target, num_classes, top_k, ignore)?;
    let (mut tp, mut fp, mut fn_) =
        (vec![0i64; num_classes], vec![0i64; num_classes], vec![0i64; num_classes]);
    let mut n = 0i64;
    for (&p, &t) in p.iter().zip(&t) {
        if Some(t) == ignore {
            continue;
        }
        n += 1;
        if p == t {
            tp[t as usize] += 1;
        } else {
            fp[p as usize] += 1;
            fn_[t as usize] += 1;
        }
    }
    let tn = (0..num_classes).map(|c| n - tp[c] - fp[c] - fn_[c]).collect();
    Ok([tp, fp, tn, fn_])
}

/// Checks multilabel shapes: (N, L, ...) for both.
pub(crate) fn check_multilabel_shapes(preds: &Tensor, target: &Tensor, num_labels: usize) -> Result<()> {
    check_same_shape(preds, target)?;
    if preds.rank() < 2 || preds.dims()[1] != num_labels {
        bail!(
            Shape,
            "Expected both `target.shape[1]` and `preds.shape[1]` to be equal to the number of labels but got {} and \
             expected {num_labels}",
            preds.dims().get(1).map_or("no dim 1".to_string(), |d| d.to_string())
        );
    }
    Ok(())
}

fn multilabel_counts(
    preds: &Tensor,
    target: &Tensor,
    num_labels: usize,
    threshold: f64,
    ignore: Option<i64>,
) -> Result<[Vec<i64>; 4]> {
    check_multilabel_shapes(preds, target, num_labels)?;
    let t = input::labels(target, "target")?;
    check_binary_target(&t, ignore)?;
    let p = binary_preds(preds, threshold)?;
    let rest: usize = preds.dims()[2..].iter().product();
    let mut c =
        [vec![0i64; num_labels], vec![0i64; num_labels], vec![0i64; num_labels], vec![0i64; num_labels]];
    for (i, (&p, &t)) in p.iter().zip(&t).enumerate() {
        if Some(t) == ignore {
            continue;
        }
        let l = (i / rest) % num_labels;
        let k = match (p, t == 1) {
            (true, true) => 0,
            (true, false) => 1,
            (false, false) => 2,
            (false, true) => 3,
        };
        c[k][l] += 1;
    }
    Ok(c)
}

/// Defines a task-specific metric over [`StatScores`]: the struct, its constructor and its
/// `Metric` impl.
macro_rules! stat_metric {
    ($(#[$doc:meta])* $name:ident, binary, $kind:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            inner: $crate::classification::stat_scores::StatScores,
        }
        impl $name {
            /// A new metric with the given options; errors for options out of range.
            pub fn new(options: $crate::BinaryOptions) -> pyrite_core::Result<Self> {
                Ok(Self { inner: $crate::classification::stat_scores::StatScores::binary(options, $kind)? })
            }
        }
        $crate::classification::stat_scores::stat_metric!(@impl $name);
    };
    ($(#[$doc:meta])* $name:ident, multiclass, $kind:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            inner: $crate::classification::stat_scores::StatScores,
        }
        impl $name {
            /// A new metric over `num_classes` classes; errors for options out of range.
            pub fn new(num_classes: usize, options: $crate::MulticlassOptions) -> pyrite_core::Result<Self> {
                Ok(Self { inner: $crate::classification::stat_scores::StatScores::multiclass(num_classes, options, $kind)? })
            }
        }
        $crate::classification::stat_scores::stat_metric!(@impl $name);
    };
    ($(#[$doc:meta])* $name:ident, multilabel, $kind:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            inner: $crate::classification::stat_scores::StatScores,
        }
        impl $name {
            /// A new metric over `num_labels` labels; errors for options out of range.
            pub fn new(num_labels: usize, options: $crate::MultilabelOptions) -> pyrite_core::Result<Self> {
                Ok(Self { inner: $crate::classification::stat_scores::StatScores::multilabel(num_labels, options, $kind)? })
            }
        }
        $crate::classification::stat_scores::stat_metric!(@impl $name);
    };
    (@impl $name:ident) => {
        impl $crate::Metric for $name {
            fn name(&self) -> &'static str {
                stringify!($name)
            }
            fn update(&mut self, preds: &pyrite_core::Tensor, target: &pyrite_core::Tensor) -> pyrite_core::Result<()> {
                self.inner.update(preds, target)
            }
            fn compute(&self) -> pyrite_core::Result<pyrite_core::Tensor> {
                self.inner.states.warn_if_not_updated(stringify!($name));
                self.inner.compute()
            }
            fn metric_states(&self) -> &$crate::MetricStates {
                &self.inner.states
            }
            fn metric_states_mut(&mut self) -> &mut $crate::MetricStates {
                &mut self.inner.states
            }
        }
    };
}
pub(crate) use stat_metric;
