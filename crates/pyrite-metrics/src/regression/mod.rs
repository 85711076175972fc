//! Regression metrics: [`MeanSquaredError`](mean_squared_error::MeanSquaredError),
//! [`MeanAbsoluteError`](mean_absolute_error::MeanAbsoluteError) and
//! [`R2Score`](r2::R2Score), kept as float64 sums and an int64 count.

pub mod mean_absolute_error;
pub mod mean_squared_error;
pub mod r2;

use pyrite_core::{Result, Tensor};

use crate::input::{check_same_shape, floats};

/// The values of `preds` and `target` after the shape check.
pub(crate) fn pairs(preds: &Tensor, target: &Tensor) -> Result<(Vec<f64>, Vec<f64>)> {
    check_same_shape(preds, target)?;
    Ok((floats(preds)?, floats(target)?))
}
