//! Draws of the random transforms, all from [`transform_generator`](super::transform_generator).

use pyrite_core::{DType, Generator, Result, Tensor};

/// One uniform number in `[a, b)`.
pub(crate) fn uniform(generator: Option<&Generator>, a: f64, b: f64) -> Result<f64> {
    let u = Tensor::rand_with([1], DType::F64, generator)?.item::<f64>()?;
    Ok(a + (b - a) * u)
}

/// One integer in `[low, high)`.
pub(crate) fn randint(generator: Option<&Generator>, low: i64, high: i64) -> Result<i64> {
    Tensor::randint_with(low, high, [1], DType::I64, generator)?.item::<i64>()
}
