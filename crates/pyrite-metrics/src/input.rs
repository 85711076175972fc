//! Reading and checking metric inputs: one pass over contiguous values, with torchmetrics'
//! error messages.

use pyrite_core::{bail, DType, Result, Tensor};

/// `_check_same_shape`.
pub(crate) fn check_same_shape(preds: &Tensor, target: &Tensor) -> Result<()> {
    if preds.dims() != target.dims() {
        bail!(
            Shape,
            "Predictions and targets are expected to have the same shape, but got {:?} and {:?}.",
            preds.dims(),
            target.dims()
        );
    }
    Ok(())
}

/// The values of a tensor as f64, in row-major order.
pub(crate) fn floats(t: &Tensor) -> Result<Vec<f64>> {
    if t.dtype() == DType::F64 {
        return t.to_vec::<f64>();
    }
    t.to_dtype(DType::F64)?.to_vec::<f64>()
}

/// Ground-truth labels: an integer or bool tensor.
pub(crate) fn labels(t: &Tensor, name: &str) -> Result<Vec<i64>> {
    if t.dtype().is_floating_point() {
        bail!(
            DType,
            "Expected argument `{name}` to be an int or long tensor with ground truth labels but got tensor with dtype {}",
            t.dtype()
        );
    }
    if t.dtype() == DType::I64 {
        return t.to_vec::<i64>();
    }
    t.to_dtype(DType::I64)?.to_vec::<i64>()
}

/// torchmetrics' `normalize_logits_if_needed(x, "sigmoid")`: probabilities are kept, anything
/// with a value outside [0, 1] is taken for logits and goes through a sigmoid (in its dtype).
pub(crate) fn sigmoid_if_logits(t: &Tensor) -> Result<Vec<f64>> {
    let v = floats(t)?;
    if v.iter().all(|x| (0.0..=1.0).contains(x)) {
        return Ok(v);
    }
    floats(&t.sigmoid()?)
}

/// `value` as the tensor's float dtype would hold it, so comparisons with a threshold
/// match PyTorch's (a Python float against a float32 tensor compares in float32).
pub(crate) fn as_dtype(value: f64, dtype: DType) -> Result<f64> {
    if dtype == DType::F64 || !dtype.is_floating_point() {
        return Ok(value);
    }
    Tensor::scalar(value)?.to_dtype(dtype)?.item::<f64>()
}

/// The sorted distinct values, for error messages.
pub(crate) fn unique(values: &[i64]) -> Vec<i64> {
    let mut u = values.to_vec();
    u.sort_unstable();
    u.dedup();
    u
}

/// Checks binary labels: every value is 0 or 1 (or `ignore_index`).
pub(crate) fn check_binary_target(target: &[i64], ignore_index: Option<i64>) -> Result<()> {
    if target.iter().any(|&t| t != 0 && t != 1 && Some(t) != ignore_index) {
        let expected = match ignore_index {
            None => "[0, 1]".to_string(),
            Some(i) => format!("[{i}]"),
        };
        bail!(
            Value,
            "Detected the following values in `target`: {:?} but expected only the following values {expected}.",
            unique(target)
        );
    }
    Ok(())
}

/// Checks binary label predictions (an integer `preds` tensor): every value is 0 or 1.
pub(crate) fn check_binary_preds(preds: &[i64]) -> Result<()> {
    if preds.iter().any(|&p| p != 0 && p != 1) {
        bail!(
            Value,
            "Detected the following values in `preds`: {:?} but expected only the following values [0,1] since \
             `preds` is a label tensor.",
            unique(preds)
        );
    }
    Ok(())
}

/// Checks class labels: every value is in `0..num_classes` (or `ignore_index`).
pub(crate) fn check_class_labels(
    values: &[i64],
    name: &str,
    num_classes: usize,
    ignore_index: Option<i64>,
) -> Result<()> {
    if values.iter().any(|&t| (t < 0 || t >= num_classes as i64) && Some(t) != ignore_index) {
        let bad: Vec<i64> = unique(values)
            .into_iter()
            .filter(|&t| (t < 0 || t >= num_classes as i64) && Some(t) != ignore_index)
            .collect();
        bail!(
            Index,
            "Detected the following values in `{name}`: {bad:?} outside the range of classes [0, {num_classes}){}.",
            match ignore_index {
                Some(i) => format!(" (ignore_index is {i})"),
                None => String::new(),
            }
        );
    }
    Ok(())
}

/// The (N, C, ...) / (N, ...) shape check of multiclass inputs: returns whether `preds` holds
/// scores per class (one more dim than `target`).
pub(crate) fn check_multiclass_shapes(preds: &Tensor, target: &Tensor, num_classes: usize) -> Result<bool> {
    if preds.rank() == target.rank() + 1 {
        if target.rank() == 0 {
            bail!(
                Shape,
                "Expected `preds` of shape (N, C, ...) and `target` of shape (N, ...), got a 0-d `target`"
            );
        }
        if !preds.dtype().is_floating_point() {
            bail!(
                DType,
                "If `preds` have one dimension more than `target`, `preds` should be a float tensor."
            );
        }
        if preds.dims()[1] != num_classes {
            bail!(
                Shape,
                "If `preds` have one dimension more than `target`, `preds.shape[1]` should be equal to number of \
                 classes."
            );
        }
        if preds.dims()[0] != target.dims()[0] || preds.dims()[2..] != target.dims()[1..] {
            bail!(
                Shape,
                "If `preds` have one dimension more than `target`, the shape of `preds` should be (N, C, ...), and \
                 the shape of `target` should be (N, ...)."
            );
        }
        Ok(true)
    } else if preds.rank() == target.rank() {
        if preds.dims() != target.dims() {
            bail!(
                Shape,
                "The `preds` and `target` should have the same shape, got `preds` with shape={:?} and `target` with \
                 shape={:?}.",
                preds.dims(),
                target.dims()
            );
        }
        Ok(false)
    } else {
        bail!(
            Shape,
            "Either `preds` and `target` both should have the (same) shape (N, ...), or `target` should be (N, ...) \
             and `preds` should be (N, C, ...)."
        );
    }
}

/// Class labels from `preds` of the same shape as `target`: integers, or floats truncated
/// (`.long()`).
pub(crate) fn pred_labels(preds: &Tensor) -> Result<Vec<i64>> {
    if preds.dtype().is_floating_point() {
        return Ok(floats(preds)?.into_iter().map(|v| v as i64).collect());
    }
    labels(preds, "preds")
}

/// Scores of shape (N, C, rest...) as rows of C, one per position (`movedim(1, -1).reshape(-1, C)`).
pub(crate) fn rows_by_class(scores: Vec<f64>, dims: &[usize]) -> Vec<f64> {
    let (n, c) = (dims[0], dims[1]);
    let rest: usize = dims[2..].iter().product();
    if rest == 1 {
        return scores;
    }
    let mut out = Vec::with_capacity(scores.len());
    for i in 0..n {
        for r in 0..rest {
            let base = i * c * rest + r;
            out.extend((0..c).map(|k| scores[base + k * rest]));
        }
    }
    out
}
