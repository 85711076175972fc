//! `torch.nn.init`: fills a tensor in place under `no_grad`, with PyTorch's formulas for the
//! bounds and standard deviations. Every function takes an optional [`Generator`] (`None`: the
//! global one).
//!
//! ```
//! use pyrite::nn::init;
//! use pyrite::{DType, Tensor};
//! let w = Tensor::empty([64, 32], DType::F32)?;
//! init::kaiming_uniform_(&w, 0.0, init::FanMode::FanIn, init::Nonlinearity::LeakyRelu, None)?;
//! let bound = (6.0f32 / 32.0).sqrt(); // gain sqrt(2) * sqrt(3 / fan_in)
//! assert!(w.abs()?.max()?.item::<f32>()? <= bound);
//! # Ok::<(), pyrite::Error>(())
//! ```
//!
//! [`no_init_weights`] turns every function here into a no-op on the current thread while its
//! guard lives, for building a model whose weights a checkpoint is about to overwrite.

use pyrite_core::autograd::no_grad;
use pyrite_core::{bail, DType, Generator, Result, Tensor};
use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static SKIP_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// While it lives, every initialiser of this module (`uniform_`, `normal_`, `constant_`,
/// `zeros_`, `kaiming_uniform_`, ...) does nothing on this thread: Hugging Face's
/// `no_init_weights()` context manager (PyTorch's `torch.nn.utils.skip_init` builds on the
/// meta device for the same purpose). Layers built meanwhile keep the unspecified contents
/// of [`Tensor::empty`] (or what they fill without this module, such as `LayerNorm`'s ones
/// and zeros) until something overwrites them, typically `load_state_dict`. Guards nest;
/// dropping the last one turns initialisation back on.
///
/// ```
/// use pyrite::nn::{init, Linear, Module};
/// use pyrite::{DType, Tensor};
/// pyrite::manual_seed(7);
/// let fc = {
///     let _skip = init::no_init_weights();
///     Linear::new(4, 2)? // no random draws: the weights are left for the checkpoint
/// };
/// let next = Tensor::randn([3], DType::F32)?;
/// pyrite::manual_seed(7);
/// assert_eq!(next.to_vec::<f32>()?, Tensor::randn([3], DType::F32)?.to_vec::<f32>()?);
/// fc.load_state_dict(&Linear::new(4, 2)?.state_dict()?, true)?;
/// # Ok::<(), pyrite::Error>(())
/// ```
#[must_use = "initialisation is skipped only while the guard lives"]
pub struct NoInitWeights {
    _not_send: PhantomData<*const ()>,
}

/// Starts skipping initialisation on this thread (see [`NoInitWeights`]).
pub fn no_init_weights() -> NoInitWeights {
    SKIP_DEPTH.with(|d| d.set(d.get() + 1));
    NoInitWeights { _not_send: PhantomData }
}

impl Drop for NoInitWeights {
    fn drop(&mut self) {
        SKIP_DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Whether a [`no_init_weights`] guard is alive on this thread.
pub fn init_weights_skipped() -> bool {
    SKIP_DEPTH.with(|d| d.get() > 0)
}

/// The non-linearity a gain is computed for (`nonlinearity=` of `calculate_gain`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nonlinearity {
    Linear,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    Sigmoid,
    Tanh,
    Relu,
    /// with `param` as the negative slope (default 0.01)
    LeakyRelu,
    Selu,
}

/// `mode=` of the Kaiming initialisers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FanMode {
    FanIn,
    FanOut,
}

/// `calculate_gain(nonlinearity, param)`: the recommended gain (`param` is LeakyReLU's
/// negative slope; `None` means 0.01).
pub fn calculate_gain(nonlinearity: Nonlinearity, param: Option<f64>) -> f64 {
    use Nonlinearity::*;
    match nonlinearity {
        Linear | Conv1d | Conv2d | Conv3d | ConvTranspose1d | ConvTranspose2d | ConvTranspose3d | Sigmoid => {
            1.0
        }
        Tanh => 5.0 / 3.0,
        Relu => 2f64.sqrt(),
        LeakyRelu => {
            let s = param.unwrap_or(0.01);
            (2.0 / (1.0 + s * s)).sqrt()
        }
        Selu => 3.0 / 4.0,
    }
}

/// `_calculate_fan_in_and_fan_out`: for a weight `[out, in, *kernel]`, `(in * k, out * k)`.
pub fn calculate_fan_in_and_fan_out(t: &Tensor) -> Result<(usize, usize)> {
    if t.rank() < 2 {
        bail!(Value, "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
    }
    let field: usize = t.dims()[2..].iter().product();
    Ok((t.dims()[1] * field, t.dims()[0] * field))
}

fn fan(t: &Tensor, mode: FanMode) -> Result<usize> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(t)?;
    Ok(match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    })
}

/// `uniform_(t, a, b)`.
pub fn uniform_(t: &Tensor, a: f64, b: f64, generator: Option<&Generator>) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    let _g = no_grad();
    t.uniform_(a, b, generator).map(drop)
}

/// `normal_(t, mean, std)`.
pub fn normal_(t: &Tensor, mean: f64, std: f64, generator: Option<&Generator>) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    let _g = no_grad();
    t.normal_(mean, std, generator).map(drop)
}

/// `constant_(t, val)`.
pub fn constant_(t: &Tensor, val: f64) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    let _g = no_grad();
    t.fill_(val).map(drop)
}

/// `ones_(t)`.
pub fn ones_(t: &Tensor) -> Result<()> {
    constant_(t, 1.0)
}

/// `zeros_(t)`.
pub fn zeros_(t: &Tensor) -> Result<()> {
    constant_(t, 0.0)
}

/// `eye_(t)`: the identity in a 2-D tensor.
pub fn eye_(t: &Tensor) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    if t.rank() != 2 {
        bail!(Value, "Only tensors with 2 dimensions are supported");
    }
    let _g = no_grad();
    let (r, c) = (t.dims()[0], t.dims()[1]);
    t.copy_(&Tensor::eye(r, c, t.dtype())?).map(drop)
}

/// `dirac_(t, groups)`: a convolution weight `[out, in, *k]` that passes each of the first
/// `min(out/groups, in)` input channels of each group through unchanged.
pub fn dirac_(t: &Tensor, groups: usize) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    let d = t.rank();
    if !(3..=5).contains(&d) {
        bail!(Value, "Only tensors with 3, 4, or 5 dimensions are supported");
    }
    if groups == 0 || !t.dims()[0].is_multiple_of(groups) {
        bail!(Value, "dim 0 must be divisible by groups");
    }
    let out_per_group = t.dims()[0] / groups;
    let min_dim = out_per_group.min(t.dims()[1]);
    let mut v = vec![0f64; t.numel()];
    let strides = pyrite_core::Shape::from(t.dims()).contiguous_strides();
    for g in 0..groups {
        for i in 0..min_dim {
            let mut off = (g * out_per_group + i) * strides[0] + i * strides[1];
            for k in 2..d {
                off += (t.dims()[k] / 2) * strides[k];
            }
            v[off] = 1.0;
        }
    }
    let _g = no_grad();
    t.copy_(&Tensor::from_vec(v, t.dims())?).map(drop)
}

/// `xavier_uniform_(t, gain)`: `U(-a, a)` with `a = gain * sqrt(6 / (fan_in + fan_out))`.
pub fn xavier_uniform_(t: &Tensor, gain: f64, generator: Option<&Generator>) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    let (fi, fo) = calculate_fan_in_and_fan_out(t)?;
    let a = gain * (6.0 / (fi + fo) as f64).sqrt();
    uniform_(t, -a, a, generator)
}

/// `xavier_normal_(t, gain)`: `N(0, std)` with `std = gain * sqrt(2 / (fan_in + fan_out))`.
pub fn xavier_normal_(t: &Tensor, gain: f64, generator: Option<&Generator>) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    let (fi, fo) = calculate_fan_in_and_fan_out(t)?;
    normal_(t, 0.0, gain * (2.0 / (fi + fo) as f64).sqrt(), generator)
}

/// `kaiming_uniform_(t, a, mode, nonlinearity)`: `U(-b, b)` with
/// `b = gain * sqrt(3 / fan)`; `a` is LeakyReLU's negative slope.
pub fn kaiming_uniform_(
    t: &Tensor,
    a: f64,
    mode: FanMode,
    nonlinearity: Nonlinearity,
    generator: Option<&Generator>,
) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    if t.numel() == 0 {
        return Ok(()); // PyTorch warns "Initializing zero-element tensors is a no-op"
    }
    let std = calculate_gain(nonlinearity, Some(a)) / (fan(t, mode)? as f64).sqrt();
    let bound = 3f64.sqrt() * std;
    uniform_(t, -bound, bound, generator)
}

/// `kaiming_normal_(t, a, mode, nonlinearity)`: `N(0, gain / sqrt(fan))`.
pub fn kaiming_normal_(
    t: &Tensor,
    a: f64,
    mode: FanMode,
    nonlinearity: Nonlinearity,
    generator: Option<&Generator>,
) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    if t.numel() == 0 {
        return Ok(());
    }
    let std = calculate_gain(nonlinearity, Some(a)) / (fan(t, mode)? as f64).sqrt();
    normal_(t, 0.0, std, generator)
}

/// `trunc_normal_(t, mean, std, a, b)`: normal values redrawn into `[a, b]`, by the inverse
/// CDF as PyTorch does.
pub fn trunc_normal_(
    t: &Tensor,
    mean: f64,
    std: f64,
    a: f64,
    b: f64,
    generator: Option<&Generator>,
) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    let cdf = |x: f64| (1.0 + libm_erf(x / 2f64.sqrt())) / 2.0;
    let (l, u) = (cdf((a - mean) / std), cdf((b - mean) / std));
    let _g = no_grad();
    let v = Tensor::empty(t.dims(), DType::F64)?;
    v.uniform_(2.0 * l - 1.0, 2.0 * u - 1.0, generator)?;
    let v =
        v.erfinv()?.mul_scalar(std * 2f64.sqrt())?.add_scalar(mean)?.clamp(Some(a.into()), Some(b.into()))?;
    t.copy_(&v).map(drop)
}

/// `erf(x)`, through the core's erf on a one-element tensor.
fn libm_erf(x: f64) -> f64 {
    Tensor::scalar(x).and_then(|t| t.erf()).and_then(|t| t.item::<f64>()).unwrap_or(f64::NAN)
}

/// `orthogonal_(t, gain)`: a (semi-)orthogonal matrix (rows x prod(other dims)), from the QR
/// decomposition of a normal matrix with the signs of R's diagonal, as PyTorch does.
pub fn orthogonal_(t: &Tensor, gain: f64, generator: Option<&Generator>) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    if t.rank() < 2 {
        bail!(Value, "Only tensors with 2 or more dimensions are supported");
    }
    if t.numel() == 0 {
        return Ok(());
    }
    let rows = t.dims()[0];
    let cols = t.numel() / rows;
    let flat = Tensor::randn_with([rows, cols], DType::F64, generator)?;
    // QR of the tall matrix (transpose when wide), by modified Gram-Schmidt.
    let (m, n, a) = if rows < cols { (cols, rows, flat.t()?.contiguous()?) } else { (rows, cols, flat) };
    // Gram-Schmidt leaves R's diagonal positive, which is the sign convention PyTorch applies
    let mut q = a.to_vec2::<f64>()?; // m x n, columns orthonormalised in place
    for j in 0..n {
        for k in 0..j {
            let dot: f64 = (0..m).map(|i| q[i][k] * q[i][j]).sum();
            for row in q.iter_mut() {
                row[j] -= dot * row[k];
            }
        }
        let norm = (0..m).map(|i| q[i][j] * q[i][j]).sum::<f64>().sqrt();
        if norm > 0.0 {
            for row in q.iter_mut() {
                row[j] /= norm;
            }
        }
    }
    let mut out = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = q[i][j] * gain;
        }
    }
    let mut qt = Tensor::from_vec(out, [m, n])?;
    if rows < cols {
        qt = qt.t()?.contiguous()?;
    }
    let _g = no_grad();
    t.copy_(&qt.reshape(t.dims())?).map(drop)
}

/// `sparse_(t, sparsity, std)`: a 2-D tensor with `N(0, std)` entries and, in each column, a
/// fraction `sparsity` of zeros.
pub fn sparse_(t: &Tensor, sparsity: f64, std: f64, generator: Option<&Generator>) -> Result<()> {
    if init_weights_skipped() {
        return Ok(());
    }
    if t.rank() != 2 {
        bail!(Value, "Only tensors with 2 dimensions are supported");
    }
    let (rows, cols) = (t.dims()[0], t.dims()[1]);
    let zeros = (sparsity * rows as f64).ceil() as usize;
    let _g = no_grad();
    let v = Tensor::empty([rows, cols], DType::F64)?;
    v.normal_(0.0, std, generator)?;
    let mut vals = v.to_vec::<f64>()?;
    for c in 0..cols {
        let perm = Tensor::randperm_with(rows, generator)?.to_vec::<i64>()?;
        for &r in &perm[..zeros.min(rows)] {
            vals[r as usize * cols + c] = 0.0;
        }
    }
    t.copy_(&Tensor::from_vec(vals, [rows, cols])?).map(drop)
}
