//! The state behind the curve metrics (AUROC, average precision): torchmetrics'
//! `precision_recall_curve` update and compute, in its two modes.
//!
//! - Exact (`thresholds=None`): the (normalized) scores and the targets are kept as `Cat`
//!   states `preds` and `target`, and the curve has one point per distinct score.
//! - Binned (`thresholds=Some(n)`): `n` thresholds `linspace(0, 1, n)` and a summed count state
//!   `confmat` of shape `[n, 2, 2]` (binary) or `[n, C, 2, 2]` (multiclass), indexed
//!   `[threshold, (class,) target, pred]` where pred is `score >= threshold`.

use pyrite_core::{bail, DType, Result, Tensor};

use super::options::Average;
use crate::input::{self, check_binary_target, check_class_labels};
use crate::state::{MetricStates, Reduce};

/// The task of a curve metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CurveTask {
    Binary,
    Multiclass { num_classes: usize },
}

/// The accumulated inputs (or binned counts) of a curve metric.
#[derive(Debug, Clone)]
pub(crate) struct CurveState {
    pub task: CurveTask,
    /// `linspace(0, 1, n)` as float32 values, or `None` for the exact mode.
    pub thresholds: Option<Vec<f64>>,
    pub ignore_index: Option<i64>,
    pub states: MetricStates,
}

/// One class's curve data.
pub(crate) enum ClassCurve {
    /// `_binary_clf_curve`: cumulative false and true positives at each distinct score, from
    /// the highest down; `all_target_zero` is torchmetrics' `(target == 0).all()` on the raw
    /// targets.
    Exact { fps: Vec<f64>, tps: Vec<f64>, all_target_zero: bool },
    /// Counts per threshold (ascending thresholds).
    Binned { tp: Vec<f64>, fp: Vec<f64>, tn: Vec<f64>, fn_: Vec<f64> },
}

/// `torch.linspace(0, 1, n)` in float32, as torch computes it (from both ends).
fn linspace_f32(n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![0.0];
    }
    let step = 1.0f32 / (n - 1) as f32;
    let half = n / 2;
    (0..n)
        .map(|i| if i < half { step * i as f32 } else { 1.0f32 - step * (n - 1 - i) as f32 })
        .map(f64::from)
        .collect()
}

/// `normalize_logits_if_needed`: the values unchanged if all lie in [0, 1], otherwise a sigmoid
/// (per value) or a softmax (per row of `cols`), computed in `dtype`.
fn normalize(values: Vec<f64>, cols: usize, dtype: DType, softmax: bool) -> Result<Vec<f64>> {
    if values.iter().all(|x| (0.0..=1.0).contains(x)) {
        return Ok(values);
    }
    let rows = values.len() / cols.max(1);
    let t = Tensor::from_vec(values, [rows, cols])?.to_dtype(dtype)?;
    input::floats(&if softmax { t.softmax(1)? } else { t.sigmoid()? })
}

impl CurveState {
    pub fn new(task: CurveTask, thresholds: Option<usize>, ignore_index: Option<i64>) -> Result<Self> {
        let mut states = MetricStates::new();
        let thresholds = match thresholds {
            None => {
                let preds = match task {
                    CurveTask::Binary => Tensor::zeros([0], DType::F64)?,
                    CurveTask::Multiclass { num_classes } => Tensor::zeros([0, num_classes], DType::F64)?,
                };
                states.add_state("preds", preds, Reduce::Cat)?;
                states.add_state("target", Tensor::zeros([0], DType::I64)?, Reduce::Cat)?;
                None
            }
            Some(n) => {
                if n < 2 {
                    bail!(
                        Value,
                        "If argument `thresholds` is an integer, expected it to be larger than 1, but got {n}"
                    );
                }
                let shape = match task {
                    CurveTask::Binary => vec![n, 2, 2],
                    CurveTask::Multiclass { num_classes } => vec![n, num_classes, 2, 2],
                };
                states.add_state("confmat", Tensor::zeros(shape, DType::I64)?, Reduce::Sum)?;
                Some(linspace_f32(n))
            }
        };
        Ok(CurveState { task, thresholds, ignore_index, states })
    }

    /// The number of classes (1 for binary).
    fn classes(&self) -> usize {
        match self.task {
            CurveTask::Binary => 1,
            CurveTask::Multiclass { num_classes } => num_classes,
        }
    }

    /// Checks and formats a batch, then adds it to the state.
    pub fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        if !preds.dtype().is_floating_point() {
            bail!(
                DType,
                "Expected argument `preds` to be an floating tensor with probability/logit scores, but got tensor \
                 with dtype {}",
                preds.dtype()
            );
        }
        let t = input::labels(target, "target")?;
        let c = self.classes();
        let (scores, t) = match self.task {
            CurveTask::Binary => {
                input::check_same_shape(preds, target)?;
                check_binary_target(&t, self.ignore_index)?;
                let keep: Vec<bool> = t.iter().map(|&v| Some(v) != self.ignore_index).collect();
                let p: Vec<f64> = input::floats(preds)?
                    .into_iter()
                    .zip(&keep)
                    .filter(|&(_, &k)| k)
                    .map(|(v, _)| v)
                    .collect();
                let t: Vec<i64> = t.into_iter().zip(&keep).filter(|&(_, &k)| k).map(|(v, _)| v).collect();
                (normalize(p, 1, preds.dtype(), false)?, t)
            }
            CurveTask::Multiclass { num_classes } => {
                if preds.rank() != target.rank() + 1 || target.rank() == 0 {
                    bail!(
                        Shape,
                        "Expected `preds` to have one more dimension than `target` but got {} and {}",
                        preds.rank(),
                        target.rank()
                    );
                }
                if preds.dims()[1] != num_classes {
                    bail!(
                        Shape,
                        "Expected `preds.shape[1]={}` to be equal to the number of classes but got {num_classes}.",
                        preds.dims()[1]
                    );
                }
                if preds.dims()[0] != target.dims()[0] || preds.dims()[2..] != target.dims()[1..] {
                    bail!(
                        Shape,
                        "Expected the shape of `preds` should be (N, C, ...) and the shape of `target` should be (N, \
                         ...) but got {:?} and {:?}",
                        preds.dims(),
                        target.dims()
                    );
                }
                check_class_labels(&t, "target", num_classes, self.ignore_index)?;
                let rows = input::rows_by_class(input::floats(preds)?, preds.dims());
                let mut p = Vec::with_capacity(rows.len());
                let mut kept = Vec::with_capacity(t.len());
                for (row, &label) in rows.chunks(num_classes).zip(&t) {
                    if Some(label) != self.ignore_index {
                        p.extend_from_slice(row);
                        kept.push(label);
                    }
                }
                (normalize(p, num_classes, preds.dtype(), true)?, kept)
            }
        };
        match &self.thresholds {
            None => {
                let n = t.len();
                let p = match self.task {
                    CurveTask::Binary => Tensor::from_vec(scores, [n])?,
                    CurveTask::Multiclass { num_classes } => Tensor::from_vec(scores, [n, num_classes])?,
                };
                self.states.accumulate("preds", &p)?;
                self.states.accumulate("target", &Tensor::from_vec(t, [n])?)?;
            }
            Some(thr) => {
                let nt = thr.len();
                // confmat[threshold][class][target][pred]
                let mut cm = vec![0i64; nt * c * 4];
                for (row, &label) in scores.chunks(c).zip(&t) {
                    for (k, &s) in row.iter().enumerate() {
                        let positive = match self.task {
                            CurveTask::Binary => label == 1,
                            CurveTask::Multiclass { .. } => label == k as i64,
                        } as usize;
                        for (j, &th) in thr.iter().enumerate() {
                            let pred = (s >= th) as usize;
                            cm[((j * c + k) * 2 + positive) * 2 + pred] += 1;
                        }
                    }
                }
                let shape = self.states.get("confmat")?.dims().to_vec();
                self.states.accumulate("confmat", &Tensor::from_vec(cm, shape)?)?;
            }
        }
        self.states.count_update();
        Ok(())
    }

    /// The curve data of each class (one for binary).
    pub fn curves(&self) -> Result<Vec<ClassCurve>> {
        let c = self.classes();
        match &self.thresholds {
            None => {
                let preds = input::floats(&self.states.get("preds")?)?;
                let target = input::labels(&self.states.get("target")?, "target")?;
                let all_target_zero = target.iter().all(|&t| t == 0);
                Ok((0..c)
                    .map(|k| {
                        let scores: Vec<f64> = preds.iter().skip(k).step_by(c).copied().collect();
                        let pos_label = if self.task == CurveTask::Binary { 1 } else { k as i64 };
                        let (fps, tps) = binary_clf_curve(&scores, &target, pos_label);
                        ClassCurve::Exact { fps, tps, all_target_zero }
                    })
                    .collect())
            }
            Some(thr) => {
                let cm = input::floats(&self.states.get("confmat")?)?;
                let at = |j: usize, k: usize, t: usize, p: usize| cm[((j * c + k) * 2 + t) * 2 + p];
                Ok((0..c)
                    .map(|k| {
                        let col = |t, p| (0..thr.len()).map(|j| at(j, k, t, p)).collect::<Vec<f64>>();
                        ClassCurve::Binned { tp: col(1, 1), fp: col(0, 1), tn: col(0, 0), fn_: col(1, 0) }
                    })
                    .collect())
            }
        }
    }

    /// The support of each class: its number of targets (torchmetrics' weights of
    /// `average="weighted"`).
    pub fn support(&self) -> Result<Vec<f64>> {
        let c = self.classes();
        match &self.thresholds {
            None => {
                let target = input::labels(&self.states.get("target")?, "target")?;
                let mut w = vec![0.0; c];
                for t in target {
                    if t >= 0 && (t as usize) < c {
                        w[t as usize] += 1.0;
                    }
                }
                Ok(w)
            }
            Some(_) => {
                let cm = input::floats(&self.states.get("confmat")?)?;
                Ok((0..c).map(|k| cm[(k * 2 + 1) * 2] + cm[(k * 2 + 1) * 2 + 1]).collect())
            }
        }
    }
}

/// `_binary_clf_curve`: sorts by score (highest first) and returns the cumulative false and true
/// positives at the last index of each distinct score.
fn binary_clf_curve(scores: &[f64], target: &[i64], pos_label: i64) -> (Vec<f64>, Vec<f64>) {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut fps, mut tps) = (Vec::new(), Vec::new());
    let (mut fp, mut tp) = (0.0, 0.0);
    for (i, &o) in order.iter().enumerate() {
        if target[o] == pos_label {
            tp += 1.0;
        } else {
            fp += 1.0;
        }
        let last = i + 1 == order.len() || scores[order[i + 1]] != scores[o];
        if last {
            fps.push(fp);
            tps.push(tp);
        }
    }
    (fps, tps)
}

/// `_safe_divide`.
fn safe_div(num: f64, denom: f64, zero_division: f64) -> f64 {
    if denom == 0.0 {
        zero_division
    } else {
        num / denom
    }
}

/// `torch.trapz(y, x)`.
fn trapz(y: &[f64], x: &[f64]) -> f64 {
    (1..x.len()).map(|i| (x[i] - x[i - 1]) * (y[i] + y[i - 1]) / 2.0).sum()
}

/// The area under one class's ROC curve (`_binary_roc_compute` and `_auc_compute_without_check`).
pub(crate) fn auroc(curve: &ClassCurve) -> f64 {
    match curve {
        ClassCurve::Exact { fps, tps, .. } => {
            let fps: Vec<f64> = std::iter::once(0.0).chain(fps.iter().copied()).collect();
            let tps: Vec<f64> = std::iter::once(0.0).chain(tps.iter().copied()).collect();
            let (lf, lt) = (fps[fps.len() - 1], tps[tps.len() - 1]);
            if lf <= 0.0 {
                pyrite_core::warnings::warn(
                    "pyrite_metrics",
                    "No negative samples in targets, false positive value should be meaningless. Returning zero \
                     tensor in false positive score",
                );
            }
            if lt <= 0.0 {
                pyrite_core::warnings::warn(
                    "pyrite_metrics",
                    "No positive samples in targets, true positive value should be meaningless. Returning zero \
                     tensor in true positive score",
                );
            }
            let fpr: Vec<f64> = fps.iter().map(|&f| if lf <= 0.0 { 0.0 } else { f / lf }).collect();
            let tpr: Vec<f64> = tps.iter().map(|&t| if lt <= 0.0 { 0.0 } else { t / lt }).collect();
            trapz(&tpr, &fpr)
        }
        ClassCurve::Binned { tp, fp, tn, fn_ } => {
            let n = tp.len();
            let tpr: Vec<f64> = (0..n).rev().map(|j| safe_div(tp[j], tp[j] + fn_[j], 0.0)).collect();
            let fpr: Vec<f64> = (0..n).rev().map(|j| safe_div(fp[j], fp[j] + tn[j], 0.0)).collect();
            trapz(&tpr, &fpr)
        }
    }
}

/// One class's average precision, `-sum((r[i+1] - r[i]) * p[i])` over its precision-recall
/// curve (`_binary_precision_recall_curve_compute`). `replace_nan` zeroes NaN precision and
/// recall as the binary metric (and the binned multiclass one) do; the exact multiclass metric
/// leaves them, so an absent class scores NaN there and is dropped from the average.
pub(crate) fn average_precision(curve: &ClassCurve, replace_nan: bool) -> f64 {
    let (mut precision, mut recall) = match curve {
        ClassCurve::Exact { fps, tps, all_target_zero } => {
            let last = tps.last().copied().unwrap_or(0.0);
            let mut p: Vec<f64> = fps.iter().zip(tps).map(|(f, t)| t / (t + f)).rev().collect();
            let mut r: Vec<f64> =
                tps.iter().map(|t| if *all_target_zero { 1.0 } else { t / last }).rev().collect();
            if *all_target_zero {
                pyrite_core::warnings::warn(
                    "pyrite_metrics",
                    "No positive samples found in target, recall is undefined. Setting recall to one for all \
                     thresholds.",
                );
            }
            p.push(1.0);
            r.push(0.0);
            (p, r)
        }
        ClassCurve::Binned { tp, fp, fn_, .. } => {
            let n = tp.len();
            let mut p: Vec<f64> = (0..n).map(|j| safe_div(tp[j], tp[j] + fp[j], f64::NAN)).collect();
            let mut r: Vec<f64> = (0..n).map(|j| safe_div(tp[j], tp[j] + fn_[j], f64::NAN)).collect();
            p.push(1.0);
            r.push(0.0);
            (p, r)
        }
    };
    if replace_nan || matches!(curve, ClassCurve::Binned { .. }) {
        for v in precision.iter_mut().chain(recall.iter_mut()) {
            if v.is_nan() {
                *v = 0.0;
            }
        }
    }
    -(1..recall.len()).map(|i| (recall[i] - recall[i - 1]) * precision[i - 1]).sum::<f64>()
}

/// `_reduce_auroc` / `_reduce_average_precision`: per-class scores reduced by `average`,
/// leaving out NaN scores (with a warning).
pub(crate) fn reduce(scores: Vec<f64>, average: Average, support: &[f64], what: &str) -> Result<Tensor> {
    let n = scores.len();
    if average == Average::None {
        return Tensor::from_vec(scores.into_iter().map(|v| v as f32).collect::<Vec<_>>(), [n]);
    }
    if scores.iter().any(|v| v.is_nan()) {
        pyrite_core::warnings::warn(
            "pyrite_metrics",
            &format!("{what} score for one or more classes was `nan`. Ignoring these classes in {average:?}-average"),
        );
    }
    let keep: Vec<usize> = (0..n).filter(|&i| !scores[i].is_nan()).collect();
    let value = match average {
        Average::Macro => keep.iter().map(|&i| scores[i]).sum::<f64>() / keep.len() as f64,
        Average::Weighted => {
            let total: f64 = keep.iter().map(|&i| support[i]).sum();
            keep.iter().map(|&i| scores[i] * safe_div(support[i], total, 0.0)).sum()
        }
        _ => bail!(Value, "average {average:?} is not supported here: expected Macro, Weighted or None"),
    };
    Tensor::scalar(value as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_matches_torch_float32() {
        // torch.linspace(0, 1, 5): computed from both ends.
        assert_eq!(linspace_f32(5), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        let t = linspace_f32(7);
        assert_eq!(t[6], 1.0);
        assert_eq!(t[1], f64::from(1.0f32 / 6.0));
    }

    #[test]
    fn clf_curve_groups_ties() {
        let (fps, tps) = binary_clf_curve(&[0.9, 0.5, 0.5, 0.1], &[1, 0, 1, 0], 1);
        assert_eq!(fps, vec![0.0, 1.0, 2.0]);
        assert_eq!(tps, vec![1.0, 2.0, 2.0]);
    }
}
