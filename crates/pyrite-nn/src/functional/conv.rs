//! Convolution and pooling as functions (`F.conv2d`, `F.max_pool2d`, ...): the core's
//! `ops::conv` and `ops::pool`, with the layers' argument handling.

use crate::pooling::PoolOptions;
use pyrite_core::{bail, Result, Tensor};

pub use crate::conv::{conv, conv_transpose};
pub use pyrite_core::ops::pool::{adaptive_avg_pool, adaptive_max_pool, max_unpool};

fn check_rank(x: &Tensor, spatial: usize, op: &str) -> Result<()> {
    if x.rank() != spatial + 2 {
        bail!(Shape, "{op}: expected a {}D input [N, C, *spatial], got {:?}", spatial + 2, x.dims());
    }
    Ok(())
}

/// `F.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode)` on `[N, C, H, W]`:
/// the pooled values (use [`max_pool`] for the indices too).
pub fn max_pool2d(x: &Tensor, kernel_size: &[usize], opts: &PoolOptions) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::max_pool2d", &[x]);
    check_rank(x, 2, "max_pool2d")?;
    Ok(max_pool(x, kernel_size, opts)?.0)
}

/// `F.max_pool1d/2d/3d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
/// return_indices=True)` on batched `[N, C, *spatial]` (one to three spatial dims, from its
/// rank): the pooled values and their flat indices into the input plane (the core's
/// [`pyrite_core::ops::pool::max_pool`]). `opts.return_indices` is ignored: both always come
/// back.
pub fn max_pool(x: &Tensor, kernel_size: &[usize], opts: &PoolOptions) -> Result<(Tensor, Tensor)> {
    let stride = opts.stride.clone().unwrap_or_default();
    pyrite_core::ops::pool::max_pool(
        x,
        kernel_size,
        &stride,
        opts.padding_or_default(),
        opts.dilation_or_default(),
        opts.ceil_mode,
    )
}

/// `F.avg_pool1d/2d/3d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
/// count_include_pad=True, divisor_override=None)` on batched `[N, C, *spatial]` (the core's
/// [`pyrite_core::ops::pool::avg_pool`]).
pub fn avg_pool(x: &Tensor, kernel_size: &[usize], opts: &PoolOptions) -> Result<Tensor> {
    let stride = opts.stride.clone().unwrap_or_default();
    pyrite_core::ops::pool::avg_pool(
        x,
        kernel_size,
        &stride,
        opts.padding_or_default(),
        opts.ceil_mode,
        opts.count_include_pad.unwrap_or(true),
        opts.divisor_override,
    )
}

/// `F.avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
/// divisor_override)` on `[N, C, H, W]`.
pub fn avg_pool2d(x: &Tensor, kernel_size: &[usize], opts: &PoolOptions) -> Result<Tensor> {
    check_rank(x, 2, "avg_pool2d")?;
    avg_pool(x, kernel_size, opts)
}
