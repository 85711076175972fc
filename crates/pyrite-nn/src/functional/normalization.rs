//! Normalisation: batch, layer, group, instance, RMS and local response norm.

use pyrite_core::autograd::no_grad;
use pyrite_core::{bail, DType, Result, Scalar, Tensor};

/// Statistics over `dims` (biased variance and mean, kept dims), from one pass of the core's
/// `var_mean` (under autograd it records the variance and the mean as two nodes).
fn var_mean(x: &Tensor, dims: &[isize]) -> Result<(Tensor, Tensor)> {
    x.var_mean(dims, 0.0, true)
}

/// `running = (1 - momentum) * running + momentum * batch`, in place (callers hold `no_grad`).
fn move_towards(running: &Tensor, batch: &Tensor, momentum: f64) -> Result<()> {
    running.copy_(&running.mul_scalar(1.0 - momentum)?.add(&batch.mul_scalar(momentum)?)?)?;
    Ok(())
}

/// The last `normalized_shape.len()` dims of `x` as negative dims, checking that `x` ends
/// with `normalized_shape` (PyTorch's message otherwise).
fn last_dims(x: &Tensor, normalized_shape: &[usize]) -> Result<Vec<isize>> {
    let k = normalized_shape.len();
    if k == 0 || x.rank() < k || x.dims()[x.rank() - k..] != *normalized_shape {
        bail!(
            Shape,
            "Given normalized_shape={:?}, expected input with shape [*, {}], but got input of size{:?}",
            normalized_shape,
            normalized_shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "),
            x.dims()
        );
    }
    Ok((1..=k as isize).map(|d| -d).collect())
}

/// `y * weight + bias`, each of `weight` / `bias` (one value per channel, dim 1) optional.
fn channel_affine(y: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Result<Tensor> {
    let mut shape = vec![1isize; y.rank()];
    if y.rank() > 1 {
        shape[1] = -1;
    }
    let mut y = y;
    if let Some(w) = weight {
        y = y.mul(&w.reshape(shape.clone())?)?;
    }
    if let Some(b) = bias {
        y = y.add(&b.reshape(shape)?)?;
    }
    Ok(y)
}

/// Options of [`batch_norm`] (`F.batch_norm`'s keywords and defaults).
#[derive(Clone, Debug)]
pub struct BatchNormOptions {
    /// A scale per channel.
    pub weight: Option<Tensor>,
    /// A shift per channel.
    pub bias: Option<Tensor>,
    /// Normalise by the batch statistics (and update the running ones).
    pub training: bool,
    /// The running statistics' update factor.
    pub momentum: f64,
    pub eps: f64,
}

impl Default for BatchNormOptions {
    fn default() -> Self {
        BatchNormOptions { weight: None, bias: None, training: false, momentum: 0.1, eps: 1e-5 }
    }
}

/// `F.batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
/// momentum=0.1, eps=1e-5)`.
///
/// In training the batch statistics normalise `x` (over every dim but 1) and, when given,
/// the running statistics are updated in place under `no_grad`:
/// `running = (1 - momentum) * running + momentum * batch` with the unbiased batch variance.
/// A layer's `momentum = None` is the cumulative average (the layer increments
/// `num_batches_tracked` first and passes `momentum = 1 / num_batches_tracked`). In evaluation
/// the running statistics normalise.
pub fn batch_norm(
    x: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    opts: &BatchNormOptions,
) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::batch_norm", &[x]);
    let (weight, bias) = (opts.weight.as_ref(), opts.bias.as_ref());
    let (training, momentum, eps) = (opts.training, opts.momentum, opts.eps);
    if x.rank() < 2 {
        bail!(
            Shape,
            "batch_norm: expected an input with at least 2 dims (N, C, ...), got shape {}",
            x.shape()
        );
    }
    let c = x.dims()[1];
    let mut stat_shape = vec![1isize; x.rank()];
    stat_shape[1] = c as isize;
    let dims: Vec<isize> = (0..x.rank() as isize).filter(|&d| d != 1).collect();
    let per_channel = x.numel() / c.max(1);
    for (name, t) in
        [("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)]
    {
        if let Some(t) = t
            && t.numel() != c
        {
            bail!(Shape, "batch_norm: {name} should contain {c} elements not {}", t.numel());
        }
    }
    let running = match (running_mean, running_var) {
        (Some(m), Some(v)) if !training => Some((m, v)),
        _ => None,
    };
    let (mean, var) = if let Some((rm, rv)) = running {
        (rm.reshape(stat_shape.clone())?, rv.reshape(stat_shape.clone())?)
    } else {
        if per_channel <= 1 {
            bail!(
                Value,
                "Expected more than 1 value per channel when training, got input size {}",
                x.shape()
            );
        }
        let (v, m) = var_mean(x, &dims)?;
        if training && let (Some(rm), Some(rv)) = (running_mean, running_var) {
            let _g = no_grad();
            let n = per_channel as f64;
            let bm = m.detach().reshape([-1isize])?.to_dtype(rm.dtype())?;
            let bv = v.detach().reshape([-1isize])?.mul_scalar(n / (n - 1.0))?.to_dtype(rv.dtype())?;
            move_towards(rm, &bm, momentum)?;
            move_towards(rv, &bv, momentum)?;
        }
        (m, v)
    };
    channel_affine(x.sub(&mean)?.mul(&var.add_scalar(eps)?.rsqrt()?)?, weight, bias)
}

/// A sum of a tensor over the processes of a distributed job that autograd differentiates
/// (its backward is the same sum of the gradients): what synchronized batch norm needs from
/// `torch.distributed`. `pyrite::distributed` implements it over a process group.
pub trait CrossProcessSum: Send + Sync {
    /// The element-wise sum of `t` over every process (each passes a tensor of the same shape).
    fn sum(&self, t: &Tensor) -> Result<Tensor>;
    /// The number of processes.
    fn world_size(&self) -> usize;
}

/// Batch norm in training with statistics over the whole distributed batch (`SyncBatchNorm`'s
/// forward): the per-channel sums and counts of every process are added up with `sum`, then
/// the squared deviations from the global mean; `x` is normalised by the global mean and
/// biased variance, and the running statistics move towards the global mean and unbiased
/// variance. The gradient flows through both sums, so each process's input gradient accounts
/// for every process's loss, as in PyTorch. Processes may hold different batch sizes.
pub fn sync_batch_norm(
    x: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    opts: &BatchNormOptions,
    sum: &dyn CrossProcessSum,
) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::sync_batch_norm", &[x]);
    if x.rank() < 2 {
        bail!(Shape, "expected at least 2D input (got {}D input)", x.rank());
    }
    let c = x.dims()[1];
    let mut stat_shape = vec![1isize; x.rank()];
    stat_shape[1] = c as isize;
    let dims: Vec<isize> = (0..x.rank() as isize).filter(|&d| d != 1).collect();
    let local_count = (x.numel() / c.max(1)) as f64;
    // the per-channel sums with this process's count after them, summed over processes
    let count = Tensor::full([1], local_count, x.dtype())?;
    let totals = sum.sum(&Tensor::cat(&[x.sum_dims(&dims, false)?, count], 0)?)?;
    let n = totals.narrow(0, c as isize, 1)?.detach().item::<f64>()?;
    if n <= 1.0 {
        bail!(Value, "Expected more than 1 value per channel when training, got input size {}", x.shape());
    }
    let mean = totals.narrow(0, 0, c)?.div_scalar(n)?;
    let centered = x.sub(&mean.reshape(stat_shape.clone())?)?;
    let var = sum.sum(&centered.square()?.sum_dims(&dims, false)?)?.div_scalar(n)?;
    if let (Some(rm), Some(rv)) = (running_mean, running_var) {
        let _g = no_grad();
        let bm = mean.detach().to_dtype(rm.dtype())?;
        let bv = var.detach().mul_scalar(n / (n - 1.0))?.to_dtype(rv.dtype())?;
        move_towards(rm, &bm, opts.momentum)?;
        move_towards(rv, &bv, opts.momentum)?;
    }
    let y = centered.mul(&var.add_scalar(opts.eps)?.rsqrt()?.reshape(stat_shape)?)?;
    channel_affine(y, opts.weight.as_ref(), opts.bias.as_ref())
}

/// Options of [`layer_norm`] and [`group_norm`] (their keywords and defaults, the same for
/// both).
#[derive(Clone, Debug)]
pub struct LayerNormOptions {
    /// A scale (of `normalized_shape` for layer norm, one per channel for group norm).
    pub weight: Option<Tensor>,
    /// A shift, shaped as `weight`.
    pub bias: Option<Tensor>,
    pub eps: f64,
}

impl Default for LayerNormOptions {
    fn default() -> Self {
        LayerNormOptions { weight: None, bias: None, eps: 1e-5 }
    }
}

/// Autocast for a norm of [`LayerNormOptions`]: `x`, the weight and the bias cast together.
fn autocast_norm(
    op: &'static str,
    x: &Tensor,
    opts: &LayerNormOptions,
    run: impl FnOnce(&Tensor, &LayerNormOptions) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    pyrite_core::autocast::dispatch(op, &[Some(x), opts.weight.as_ref(), opts.bias.as_ref()], |t| {
        run(t.at(0), &LayerNormOptions { weight: t.opt(1).cloned(), bias: t.opt(2).cloned(), ..opts.clone() })
    })
}

/// `F.layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5)`: normalises over the
/// last `normalized_shape.len()` dims.
pub fn layer_norm(x: &Tensor, normalized_shape: &[usize], opts: &LayerNormOptions) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::layer_norm", &[x]);
    if let Some(r) = autocast_norm("layer_norm", x, opts, |x, opts| layer_norm(x, normalized_shape, opts)) {
        return r;
    }
    let (weight, bias, eps) = (opts.weight.as_ref(), opts.bias.as_ref(), opts.eps);
    let dims = last_dims(x, normalized_shape)?;
    // one fused pass per row when no gradient is needed (f32, contiguous)
    let n = normalized_shape.iter().product();
    if let Some(y) = pyrite_core::ops::norm::fused_layer_norm(x, n, weight, bias, eps)? {
        return Ok(y);
    }
    let (v, m) = var_mean(x, &dims)?;
    let mut y = x.sub(&m)?.mul(&v.add_scalar(eps)?.rsqrt()?)?;
    if let Some(w) = weight {
        y = y.mul(w)?;
    }
    if let Some(b) = bias {
        y = y.add(b)?;
    }
    Ok(y)
}

/// Options of [`rms_norm`] (`F.rms_norm`'s keywords and defaults).
#[derive(Clone, Debug, Default)]
pub struct RmsNormOptions {
    /// A scale of `normalized_shape`.
    pub weight: Option<Tensor>,
    /// `None`: the dtype's machine epsilon.
    pub eps: Option<f64>,
}

/// `F.rms_norm(x, normalized_shape, weight=None, eps=None)`: `x / sqrt(mean(x^2) + eps) *
/// weight` over the last dims; `eps = None` is the dtype's machine epsilon, as in PyTorch.
pub fn rms_norm(x: &Tensor, normalized_shape: &[usize], opts: &RmsNormOptions) -> Result<Tensor> {
    if let Some(r) = pyrite_core::autocast::dispatch("rms_norm", &[Some(x), opts.weight.as_ref()], |t| {
        rms_norm(t.at(0), normalized_shape, &RmsNormOptions { weight: t.opt(1).cloned(), eps: opts.eps })
    }) {
        return r;
    }
    let (weight, eps) = (opts.weight.as_ref(), opts.eps);
    let dims = last_dims(x, normalized_shape)?;
    let eps = eps.unwrap_or(match x.dtype() {
        DType::F64 => f64::EPSILON,
        DType::F16 => 0.000_976_562_5,
        DType::BF16 => 0.007_812_5,
        _ => f32::EPSILON as f64,
    });
    let y = x.mul(&x.square()?.mean_dims(&dims, true)?.add_scalar(eps)?.rsqrt()?)?;
    match weight {
        Some(w) => y.mul(w),
        None => Ok(y),
    }
}

/// `F.group_norm(x, num_groups, weight=None, bias=None, eps=1e-5)`: normalises each group of
/// channels of each sample.
pub fn group_norm(x: &Tensor, num_groups: usize, opts: &LayerNormOptions) -> Result<Tensor> {
    if let Some(r) = autocast_norm("group_norm", x, opts, |x, opts| group_norm(x, num_groups, opts)) {
        return r;
    }
    let (weight, bias, eps) = (opts.weight.as_ref(), opts.bias.as_ref(), opts.eps);
    if x.rank() < 2 {
        bail!(
            Shape,
            "group_norm: expected an input with at least 2 dims (N, C, ...), got shape {}",
            x.shape()
        );
    }
    let (n, c) = (x.dims()[0], x.dims()[1]);
    if num_groups == 0 || c % num_groups != 0 {
        bail!(
            Value,
            "Expected number of channels in input to be divisible by num_groups, but got input of shape {} and num_groups={num_groups}",
            x.shape()
        );
    }
    let g = x.reshape([n as isize, num_groups as isize, -1])?;
    let (v, m) = var_mean(&g, &[-1])?;
    let y = g.sub(&m)?.mul(&v.add_scalar(eps)?.rsqrt()?)?.reshape(x.dims())?;
    let mut shape = vec![1isize; x.rank()];
    shape[1] = c as isize;
    channel_affine(y, weight, bias)
}

/// Options of [`instance_norm`] (`F.instance_norm`'s keywords and defaults).
#[derive(Clone, Debug)]
pub struct InstanceNormOptions {
    /// Running statistics per channel, updated in place when `use_input_stats`.
    pub running_mean: Option<Tensor>,
    pub running_var: Option<Tensor>,
    /// A scale per channel.
    pub weight: Option<Tensor>,
    /// A shift per channel.
    pub bias: Option<Tensor>,
    /// Normalise by each sample's statistics (otherwise by the running ones).
    pub use_input_stats: bool,
    /// The running statistics' update factor.
    pub momentum: f64,
    pub eps: f64,
}

impl Default for InstanceNormOptions {
    fn default() -> Self {
        InstanceNormOptions {
            running_mean: None,
            running_var: None,
            weight: None,
            bias: None,
            use_input_stats: true,
            momentum: 0.1,
            eps: 1e-5,
        }
    }
}

/// `F.instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
/// use_input_stats=True, momentum=0.1, eps=1e-5)`: batch norm of each sample on its own
/// (statistics over the spatial dims).
pub fn instance_norm(x: &Tensor, opts: &InstanceNormOptions) -> Result<Tensor> {
    let (running_mean, running_var) = (opts.running_mean.as_ref(), opts.running_var.as_ref());
    let (weight, bias) = (opts.weight.as_ref(), opts.bias.as_ref());
    let (use_input_stats, momentum, eps) = (opts.use_input_stats, opts.momentum, opts.eps);
    if x.rank() < 3 {
        bail!(
            Shape,
            "instance_norm: expected an input with at least 3 dims (N, C, *spatial), got shape {}",
            x.shape()
        );
    }
    let (n, c) = (x.dims()[0], x.dims()[1]);
    let spatial: Vec<isize> = (2..x.rank() as isize).collect();
    let mut shape = vec![1isize; x.rank()];
    shape[1] = c as isize;
    let y = if use_input_stats {
        let (v, m) = var_mean(x, &spatial)?;
        if let (Some(rm), Some(rv)) = (running_mean, running_var) {
            let _g = no_grad();
            let k = (x.numel() / (n * c).max(1)) as f64;
            let bm = m.detach().mean_dims(&[0], false)?.reshape([-1isize])?;
            let bv = v.detach().mul_scalar(k / (k - 1.0))?.mean_dims(&[0], false)?.reshape([-1isize])?;
            move_towards(rm, &bm, momentum)?;
            move_towards(rv, &bv, momentum)?;
        }
        x.sub(&m)?.mul(&v.add_scalar(eps)?.rsqrt()?)?
    } else {
        let (Some(rm), Some(rv)) = (running_mean, running_var) else {
            bail!(Value, "Expected running_mean and running_var to be defined when use_input_stats is false");
        };
        x.sub(&rm.reshape(shape.clone())?)?.mul(&rv.reshape(shape.clone())?.add_scalar(eps)?.rsqrt()?)?
    };
    channel_affine(y, weight, bias)
}

/// Options of [`local_response_norm`] (`F.local_response_norm`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalResponseNormOptions {
    pub alpha: f64,
    pub beta: f64,
    pub k: f64,
}

impl Default for LocalResponseNormOptions {
    fn default() -> Self {
        LocalResponseNormOptions { alpha: 1e-4, beta: 0.75, k: 1.0 }
    }
}

/// `F.local_response_norm(x, size, alpha=1e-4, beta=0.75, k=1.0)`: `x / (k + alpha/n * sum of
/// squares over n neighbouring channels)^beta`.
pub fn local_response_norm(x: &Tensor, size: usize, opts: &LocalResponseNormOptions) -> Result<Tensor> {
    let LocalResponseNormOptions { alpha, beta, k } = *opts;
    if x.rank() < 3 {
        bail!(Shape, "Expected 3D or higher dimensionality input (got {} dimensions)", x.rank());
    }
    if x.numel() == 0 {
        return Ok(x.clone());
    }
    let c = x.dims()[1];
    let sq = x.square()?;
    // zero-pad the channel dim by size/2 before and (size-1)/2 after, then sum windows of `size`
    let (before, after) = (size / 2, (size - 1) / 2);
    let mut zshape = x.dims().to_vec();
    zshape[1] = before;
    let zb = Tensor::zeros(zshape.clone(), x.dtype())?;
    zshape[1] = after;
    let za = Tensor::zeros(zshape, x.dtype())?;
    let padded = Tensor::cat(&[&zb, &sq, &za], 1)?;
    let mut acc = padded.narrow(1, 0, c)?;
    for s in 1..size {
        acc = acc.add(&padded.narrow(1, s as isize, c)?)?;
    }
    let div = acc.mul_scalar(alpha / size as f64)?.add_scalar(k)?.pow_scalar(Scalar::from(beta))?;
    x.div(&div)
}
