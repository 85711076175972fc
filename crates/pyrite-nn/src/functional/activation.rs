//! Activation functions (`F.relu`, `F.gelu`, ...), written with recorded core ops so that
//! their gradients (and higher-order ones) come from autograd. Branches are selected with
//! `where`, and branch values that could overflow are computed on clamped inputs, so the
//! unselected branch never puts an `inf * 0` into a gradient.

use pyrite_core::{bail, Result, Scalar, Tensor};

fn zeros(x: &Tensor) -> Result<Tensor> {
    x.zeros_like()
}

/// `F.relu`.
pub fn relu(x: &Tensor) -> Result<Tensor> {
    x.relu()
}

/// `F.relu6`: `min(max(0, x), 6)`.
pub fn relu6(x: &Tensor) -> Result<Tensor> {
    hardtanh(x, &HardtanhOptions { min_val: 0.0, max_val: 6.0 })
}

/// `F.leaky_relu(x, negative_slope)`.
pub fn leaky_relu(x: &Tensor, negative_slope: f64) -> Result<Tensor> {
    x.where_(&x.gt_scalar(0)?, &x.mul_scalar(negative_slope)?)
}

/// `F.prelu(x, weight)`: `weight` has 1 or C (channel dim 1) entries.
pub fn prelu(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    if let Some(r) =
        pyrite_core::autocast::dispatch("prelu", &[Some(x), Some(weight)], |t| prelu(t.at(0), t.at(1)))
    {
        return r;
    }
    let w = if weight.numel() == 1 || x.rank() < 2 {
        weight.reshape([-1isize])?
    } else {
        if weight.numel() != x.dims()[1] {
            bail!(
                Shape,
                "prelu: mismatch of parameter numbers and input channel size. Found parameter numbers = {} and channel size = {}.",
                weight.numel(),
                x.dims()[1]
            );
        }
        let mut shape = vec![1isize; x.rank()];
        shape[1] = -1;
        weight.reshape(shape)?
    };
    x.where_(&x.gt_scalar(0)?, &x.mul(&w)?)
}

/// `F.elu(x, alpha)`: `x` if `x > 0`, else `alpha * (exp(x) - 1)`.
pub fn elu(x: &Tensor, alpha: f64) -> Result<Tensor> {
    let neg = x.clamp(None, Some(Scalar::from(0.0)))?.expm1()?.mul_scalar(alpha)?;
    x.where_(&x.gt_scalar(0)?, &neg)
}

/// SELU's constants (Klambauer et al.), as PyTorch uses them.
pub const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
pub const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

/// `F.selu`: `scale * elu(x, alpha)` with the fixed constants.
pub fn selu(x: &Tensor) -> Result<Tensor> {
    elu(x, SELU_ALPHA)?.mul_scalar(SELU_SCALE)
}

/// `F.celu(x, alpha)`: `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
pub fn celu(x: &Tensor, alpha: f64) -> Result<Tensor> {
    if alpha == 0.0 {
        bail!(Value, "ZeroDivisionError from celu: alpha cannot be 0 for CELU");
    }
    let neg = x.clamp(None, Some(Scalar::from(0.0)))?.div_scalar(alpha)?.expm1()?.mul_scalar(alpha)?;
    x.where_(&x.gt_scalar(0)?, &neg)
}

/// `approximate=` of GELU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GeluApproximate {
    #[default]
    None,
    Tanh,
}

/// `F.gelu(x, approximate)`.
pub fn gelu(x: &Tensor, approximate: GeluApproximate) -> Result<Tensor> {
    x.gelu(approximate == GeluApproximate::Tanh)
}

/// `F.silu`: `x * sigmoid(x)`.
pub fn silu(x: &Tensor) -> Result<Tensor> {
    x.silu()
}

/// `F.mish`: `x * tanh(softplus(x))`.
pub fn mish(x: &Tensor) -> Result<Tensor> {
    x.mish()
}

/// `F.sigmoid`.
pub fn sigmoid(x: &Tensor) -> Result<Tensor> {
    x.sigmoid()
}

/// `F.tanh`.
pub fn tanh(x: &Tensor) -> Result<Tensor> {
    x.tanh()
}

/// `F.logsigmoid`: `-softplus(-x)`, stable for large `|x|`.
pub fn logsigmoid(x: &Tensor) -> Result<Tensor> {
    x.neg()?.softplus(1.0, 20.0)?.neg()
}

/// Options of [`hardtanh`] (`F.hardtanh`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HardtanhOptions {
    pub min_val: f64,
    pub max_val: f64,
}

impl Default for HardtanhOptions {
    fn default() -> Self {
        HardtanhOptions { min_val: -1.0, max_val: 1.0 }
    }
}

/// `F.hardtanh(x, min_val=-1.0, max_val=1.0)`: `x` clamped to `[min_val, max_val]`.
pub fn hardtanh(x: &Tensor, opts: &HardtanhOptions) -> Result<Tensor> {
    let HardtanhOptions { min_val, max_val } = *opts;
    if min_val > max_val {
        bail!(Value, "hardtanh: min_val cannot be greater than max_val");
    }
    x.clamp(Some(Scalar::from(min_val)), Some(Scalar::from(max_val)))
}

/// `F.hardsigmoid`: `relu6(x + 3) / 6`.
pub fn hardsigmoid(x: &Tensor) -> Result<Tensor> {
    x.div_scalar(6.0)?.add_scalar(0.5)?.clamp(Some(Scalar::from(0.0)), Some(Scalar::from(1.0)))
}

/// `F.hardswish`: `x * relu6(x + 3) / 6`.
pub fn hardswish(x: &Tensor) -> Result<Tensor> {
    x.mul(&hardsigmoid(x)?)
}

/// Options of [`softplus`] (`F.softplus`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftplusOptions {
    pub beta: f64,
    /// Above `beta x = threshold` the result is `x`.
    pub threshold: f64,
}

impl Default for SoftplusOptions {
    fn default() -> Self {
        SoftplusOptions { beta: 1.0, threshold: 20.0 }
    }
}

/// `F.softplus(x, beta=1.0, threshold=20.0)`: `log(1 + exp(beta x)) / beta`, linear above
/// `threshold`.
pub fn softplus(x: &Tensor, opts: &SoftplusOptions) -> Result<Tensor> {
    x.softplus(opts.beta, opts.threshold)
}

/// `F.softsign`: `x / (1 + |x|)`.
pub fn softsign(x: &Tensor) -> Result<Tensor> {
    x.div(&x.abs()?.add_scalar(1.0)?)
}

/// `F.softshrink(x, lambd)`: `x - lambd` above `lambd`, `x + lambd` below `-lambd`, else 0.
pub fn softshrink(x: &Tensor, lambd: f64) -> Result<Tensor> {
    if lambd < 0.0 {
        bail!(Value, "lambda must be greater or equal to 0, but found to be {lambd}.");
    }
    let z = zeros(x)?;
    let lower = x.add_scalar(lambd)?.where_(&x.lt_scalar(-lambd)?, &z)?;
    x.sub_scalar(lambd)?.where_(&x.gt_scalar(lambd)?, &lower)
}

/// `F.hardshrink(x, lambd)`: `x` where `|x| > lambd`, else 0.
pub fn hardshrink(x: &Tensor, lambd: f64) -> Result<Tensor> {
    x.where_(&x.abs()?.gt_scalar(lambd)?, &zeros(x)?)
}

/// `F.tanhshrink`: `x - tanh(x)`.
pub fn tanhshrink(x: &Tensor) -> Result<Tensor> {
    x.sub(&x.tanh()?)
}

/// `F.threshold(x, threshold, value)`: `x` where `x > threshold`, else `value`.
pub fn threshold(x: &Tensor, threshold: f64, value: f64) -> Result<Tensor> {
    x.where_(&x.gt_scalar(threshold)?, &x.full_like(value)?)
}

/// `F.glu(x, dim)`: the first half times the sigmoid of the second half along `dim`.
pub fn glu(x: &Tensor, dim: isize) -> Result<Tensor> {
    let n = x.size(dim)?;
    if n % 2 != 0 {
        bail!(Value, "glu: Halving dimension must be even, but dimension {dim} is size {n}");
    }
    let a = x.narrow(dim, 0, n / 2)?;
    let b = x.narrow(dim, (n / 2) as isize, n / 2)?;
    a.mul(&b.sigmoid()?)
}

/// `F.softmax(x, dim)`.
pub fn softmax(x: &Tensor, dim: isize) -> Result<Tensor> {
    x.softmax(dim)
}

/// `F.log_softmax(x, dim)`.
pub fn log_softmax(x: &Tensor, dim: isize) -> Result<Tensor> {
    x.log_softmax(dim)
}

/// `F.softmin(x, dim)`: `softmax(-x, dim)`.
pub fn softmin(x: &Tensor, dim: isize) -> Result<Tensor> {
    x.neg()?.softmax(dim)
}

/// Options of [`rrelu`] (`F.rrelu`'s keywords and defaults, with the generator of the slopes).
#[derive(Clone, Copy, Debug)]
pub struct RreluOptions<'a> {
    pub lower: f64,
    pub upper: f64,
    /// Random slopes (otherwise their mean).
    pub training: bool,
    /// Draws the slopes (`None`: the default generator).
    pub generator: Option<&'a pyrite_core::Generator>,
}

impl Default for RreluOptions<'_> {
    fn default() -> Self {
        RreluOptions { lower: 1.0 / 8.0, upper: 1.0 / 3.0, training: false, generator: None }
    }
}

/// `F.rrelu(x, lower=1/8, upper=1/3, training=False)`: in training, each negative element is
/// scaled by a slope drawn uniformly from `[lower, upper]`; in evaluation by their mean.
pub fn rrelu(x: &Tensor, opts: &RreluOptions) -> Result<Tensor> {
    let RreluOptions { lower, upper, training, generator } = *opts;
    if !training {
        return leaky_relu(x, (lower + upper) / 2.0);
    }
    let slope = Tensor::empty(x.dims(), x.dtype())?;
    slope.uniform_(lower, upper, generator)?;
    x.where_(&x.gt_scalar(0)?, &x.mul(&slope)?)
}

/// `nn.Softmax2d`'s computation: softmax over the channels (dim -3) of a `[C, H, W]` or
/// `[N, C, H, W]` input.
pub fn softmax2d(x: &Tensor) -> Result<Tensor> {
    if x.rank() != 3 && x.rank() != 4 {
        bail!(Shape, "Softmax2d: expected input to be 3D or 4D, got {}D instead", x.rank());
    }
    x.softmax(-3)
}
