//! The reductions that the CPU runs as fused folds (var, norm, logsumexp, all/any, the NaN
//! skipping ones), composed on a CUDA tensor from the backend's elementwise kernels and its
//! sum/mean/max/min reductions. PyTorch's CUDA kernels fuse some of these; the values are the
//! same up to rounding. Half-precision inputs are computed in float32, as PyTorch accumulates
//! them, and converted back.
//!
//! Callers pause autograd and record the backward themselves.

use crate::cuda::{reduce, Reduction};
use crate::{DType, Result, Tensor};

/// `x` reduced over the dims of `mask` by `r`.
fn by(x: &Tensor, mask: &[bool], keepdim: bool, r: Reduction) -> Result<Tensor> {
    Ok(reduce(x, mask, keepdim, r)?.0)
}

/// The number of elements each output element reduces.
fn count(x: &Tensor, mask: &[bool]) -> usize {
    x.dims().iter().zip(mask).filter(|&(_, &m)| m).map(|(&d, _)| d).product()
}

/// `x` in the dtype its reduction computes in (float32 for the half types) and back.
fn widened(x: &Tensor) -> Result<(Tensor, impl Fn(Tensor) -> Result<Tensor>)> {
    let dt = x.dtype();
    let wide = matches!(dt, DType::F16 | DType::BF16);
    let x = if wide { x.to_dtype(DType::F32)? } else { x.clone() };
    Ok((x, move |y: Tensor| if wide { y.to_dtype(dt) } else { Ok(y) }))
}

/// `(var or std, mean)` with `correction`, in two passes (the mean, then the squared
/// deviations).
pub(crate) fn var(
    x: &Tensor,
    mask: &[bool],
    keepdim: bool,
    correction: f64,
    sqrt: bool,
) -> Result<(Tensor, Tensor)> {
    let (w, back) = widened(x)?;
    let mean = by(&w, mask, true, Reduction::Mean)?;
    let d = w.sub(&mean)?;
    let denom = (count(x, mask) as f64 - correction).max(0.0);
    let v = by(&d.mul(&d)?, mask, keepdim, Reduction::Sum)?.div_scalar(denom)?;
    let v = if sqrt { v.sqrt()? } else { v };
    let mean = if keepdim { mean } else { by(&w, mask, false, Reduction::Mean)? };
    Ok((back(v)?, back(mean)?))
}

/// The vector `ord`-norm.
pub(crate) fn norm(x: &Tensor, mask: &[bool], keepdim: bool, ord: f64) -> Result<Tensor> {
    let (w, back) = widened(x)?;
    let a = w.abs()?;
    let y = if ord == 0.0 {
        by(&a.ne_scalar(0.0)?.to_dtype(w.dtype())?, mask, keepdim, Reduction::Sum)?
    } else if ord == 1.0 {
        by(&a, mask, keepdim, Reduction::Sum)?
    } else if ord == 2.0 {
        by(&a.mul(&a)?, mask, keepdim, Reduction::Sum)?.sqrt()?
    } else if ord == f64::INFINITY {
        by(&a, mask, keepdim, Reduction::Max)?
    } else if ord == f64::NEG_INFINITY {
        by(&a, mask, keepdim, Reduction::Min)?
    } else {
        by(&a.pow_scalar(ord)?, mask, keepdim, Reduction::Sum)?.pow_scalar(1.0 / ord)?
    };
    back(y)
}

/// `log(sum(exp(x)))`, stably: the maximum is taken out first (0 where it is infinite, so
/// rows of `-inf` give `-inf` and rows holding `inf` give `inf`).
pub(crate) fn logsumexp(x: &Tensor, mask: &[bool], keepdim: bool) -> Result<Tensor> {
    let (w, back) = widened(x)?;
    if count(x, mask) == 0 {
        let shape: Vec<usize> = (0..x.rank())
            .filter_map(|d| if mask[d] { keepdim.then_some(1) } else { Some(x.dims()[d]) })
            .collect();
        return Tensor::full_on(shape, f64::NEG_INFINITY, x.dtype(), x.device());
    }
    let m = by(&w, mask, true, Reduction::Max)?;
    let m = m.masked_fill(&m.isinf()?, 0.0)?;
    let y = by(&w.sub(&m)?.exp()?, mask, true, Reduction::Sum)?.log()?.add(&m)?;
    let y = if keepdim {
        y
    } else {
        let dims: Vec<usize> = (0..x.rank()).filter(|&d| !mask[d]).map(|d| x.dims()[d]).collect();
        y.reshape(dims)?
    };
    back(y)
}

/// `all` / `any`: bool, or uint8 for a uint8 input.
pub(crate) fn all_any(x: &Tensor, mask: &[bool], keepdim: bool, is_all: bool) -> Result<Tensor> {
    let nonzero = by(&x.ne_scalar(0.0)?.to_dtype(DType::I64)?, mask, keepdim, Reduction::Sum)?;
    let y = if is_all { nonzero.eq_scalar(count(x, mask) as f64)? } else { nonzero.gt_scalar(0.0)? };
    if x.dtype() == DType::U8 {
        y.to_dtype(DType::U8)
    } else {
        Ok(y)
    }
}

/// `count_nonzero`: int64.
pub(crate) fn count_nonzero(x: &Tensor, mask: &[bool]) -> Result<Tensor> {
    by(&x.ne_scalar(0.0)?.to_dtype(DType::I64)?, mask, false, Reduction::Sum)
}

/// `nansum` (`mean` false) or `nanmean`: NaNs count as absent.
pub(crate) fn nan_skipping(x: &Tensor, mask: &[bool], keepdim: bool, mean: bool) -> Result<Tensor> {
    if !x.dtype().is_floating_point() {
        return by(x, mask, keepdim, if mean { Reduction::Mean } else { Reduction::Sum });
    }
    let (w, back) = widened(x)?;
    let nan = w.isnan()?;
    let s = by(&w.masked_fill(&nan, 0.0)?, mask, keepdim, Reduction::Sum)?;
    if !mean {
        return back(s);
    }
    let n = by(&nan.logical_not()?.to_dtype(w.dtype())?, mask, keepdim, Reduction::Sum)?;
    back(s.div(&n)?)
}
