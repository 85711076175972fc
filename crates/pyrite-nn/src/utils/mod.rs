//! `torch.nn.utils`: gradient clipping ([`clip_grad_norm_`], [`clip_grad_value_`], and the
//! split API [`get_total_norm`] + [`clip_grads_with_norm_`]) and the flat-vector view of a
//! model's parameters ([`parameters_to_vector`], [`vector_to_parameters`]). Variable-length
//! sequences for the recurrent layers (`PackedSequence`, `pad_sequence`, ...) are in [`rnn`];
//! activation checkpointing (`torch.utils.checkpoint`) is in [`checkpoint`].
//!
//! Each function takes a slice of tensors, as `module.parameters()` returns them (`&[Tensor]`,
//! `&[&Tensor]` or `&[Parameter]` all work), and changes gradients or parameters in place under
//! `no_grad`, as PyTorch does.
//!
//! ```
//! use pyrite::nn::utils::{clip_grad_norm_, ClipGradNormOptions};
//! use pyrite::nn::{Linear, Module};
//! use pyrite::{DType, Tensor};
//!
//! let net = Linear::new(4, 2)?;
//! net.call(&Tensor::ones([8, 4], DType::F32)?)?.sum()?.mul_scalar(100.0)?.backward()?;
//! let total = clip_grad_norm_(&net.parameters(), 1.0, ClipGradNormOptions::default())?;
//! assert!(total.item::<f32>()? > 1.0);
//! // the gradients now have a total 2-norm of (about) 1
//! let grads: Vec<Tensor> = net.parameters().iter().filter_map(|p| p.grad()).collect();
//! let after = pyrite::nn::utils::get_total_norm(&grads, 2.0, false)?;
//! assert!((after.item::<f32>()? - 1.0).abs() < 1e-4);
//! # Ok::<(), pyrite::Error>(())
//! ```

pub mod checkpoint;
pub mod rnn;

use crate::module::py_float;
use pyrite_core::autograd::no_grad;
use pyrite_core::{bail, promote_types, DType, Result, Scalar, Tensor};

/// The keywords of [`clip_grad_norm_`] besides `max_norm` (PyTorch's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClipGradNormOptions {
    /// The p of the p-norm; `f64::INFINITY` for the max norm. Default 2.
    pub norm_type: f64,
    /// Fail when the total norm is `nan` or `inf` instead of scaling by it. Default `false`.
    pub error_if_nonfinite: bool,
    /// PyTorch's choice of kernel; accepted and ignored (Pyrite has one CPU path, with the
    /// same results).
    pub foreach: Option<bool>,
}

impl Default for ClipGradNormOptions {
    fn default() -> Self {
        ClipGradNormOptions { norm_type: 2.0, error_if_nonfinite: false, foreach: None }
    }
}

impl ClipGradNormOptions {
    /// The defaults with another `norm_type`.
    pub fn norm_type(norm_type: f64) -> Self {
        ClipGradNormOptions { norm_type, ..Default::default() }
    }
}

/// The gradients of the parameters that have one, in order.
fn grads_of<T: AsRef<Tensor>>(parameters: &[T]) -> Vec<Tensor> {
    parameters.iter().filter_map(|p| p.as_ref().grad()).collect()
}

/// `torch.nn.utils.get_total_norm(tensors, norm_type, error_if_nonfinite)`: the `norm_type`-norm
/// of all `tensors` viewed as one vector, computed as PyTorch does: the norm of each tensor
/// (in its dtype), then the norm of those norms (in their promoted dtype). No tensors give
/// `tensor(0.)`.
///
/// ```
/// use pyrite::nn::utils::get_total_norm;
/// use pyrite::Tensor;
/// let a = Tensor::new([3f32, 0.])?;
/// let b = Tensor::new([[4f32]])?;
/// assert_eq!(get_total_norm(&[&a, &b], 2.0, false)?.item::<f32>()?, 5.0);
/// assert_eq!(get_total_norm(&[&a, &b], f64::INFINITY, false)?.item::<f32>()?, 4.0);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn get_total_norm<T: AsRef<Tensor>>(
    tensors: &[T],
    norm_type: f64,
    error_if_nonfinite: bool,
) -> Result<Tensor> {
    let _g = no_grad();
    if tensors.is_empty() {
        return Tensor::scalar(0f32);
    }
    // PyTorch groups the tensors by dtype (in order of first appearance) and lists the norms
    // group by group; the order only changes the last bits of the total.
    let mut groups: Vec<(DType, Vec<&Tensor>)> = Vec::new();
    for t in tensors {
        let t = t.as_ref();
        match groups.iter_mut().find(|(d, _)| *d == t.dtype()) {
            Some((_, g)) => g.push(t),
            None => groups.push((t.dtype(), vec![t])),
        }
    }
    let mut norms = Vec::with_capacity(tensors.len());
    for (_, group) in &groups {
        for t in group {
            norms.push(t.vector_norm(norm_type, &[], false)?);
        }
    }
    let dtype = norms.iter().skip(1).fold(norms[0].dtype(), |a, n| promote_types(a, n.dtype()));
    let norms = norms.iter().map(|n| n.to_dtype(dtype)).collect::<Result<Vec<_>>>()?;
    let total = Tensor::stack(&norms, 0)?.vector_norm(norm_type, &[], false)?;
    if error_if_nonfinite {
        let v = total.to_dtype(DType::F64)?.item::<f64>()?;
        if !v.is_finite() {
            bail!(
                Value,
                "The total norm of order {} for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`",
                py_float(norm_type)
            );
        }
    }
    Ok(total)
}

/// `torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total_norm)`: multiplies every
/// gradient in place by `min(max_norm / (total_norm + 1e-6), 1)`. Parameters without a
/// gradient are skipped. `total_norm` is a one-element tensor, as [`get_total_norm`] returns.
///
/// ```
/// use pyrite::nn::utils::{clip_grads_with_norm_, get_total_norm};
/// use pyrite::Tensor;
/// let p = Tensor::new([1f32, 1.])?.requires_grad_(true)?;
/// p.set_grad(Some(Tensor::new([3f32, 4.])?))?;
/// let total = get_total_norm(&[p.grad().unwrap()], 2.0, false)?;
/// clip_grads_with_norm_(&[&p], 1.0, &total)?;
/// let g = p.grad().unwrap().to_vec::<f32>()?;
/// assert!((g[0] - 0.6).abs() < 1e-6 && (g[1] - 0.8).abs() < 1e-6);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn clip_grads_with_norm_<T: AsRef<Tensor>>(
    parameters: &[T],
    max_norm: f64,
    total_norm: &Tensor,
) -> Result<()> {
    let _g = no_grad();
    let grads = grads_of(parameters);
    if grads.is_empty() {
        return Ok(());
    }
    if total_norm.numel() != 1 {
        bail!(
            Shape,
            "clip_grads_with_norm_: total_norm must be a one-element tensor, got shape {:?}",
            total_norm.dims()
        );
    }
    // clip_coef = max_norm / (total_norm + 1e-6), clamped to 1, in total_norm's dtype
    let coef = total_norm
        .add_scalar(1e-6)?
        .reciprocal()?
        .mul_scalar(max_norm)?
        .clamp(None, Some(Scalar::Float(1.0)))?
        .reshape(Vec::<usize>::new())?;
    for g in &grads {
        g.mul_(&coef)?;
    }
    Ok(())
}

/// `torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)`:
/// scales the gradients in place so that their total norm (all gradients viewed as one
/// vector) is at most `max_norm`, and returns the total norm before clipping (a 0-d tensor).
///
/// The gradients are always multiplied by `min(max_norm / (total + 1e-6), 1)`, as PyTorch
/// does (a factor of exactly 1 when the norm is small enough). Parameters without a gradient
/// are skipped; with none, the result is `tensor(0.)`. With `error_if_nonfinite`, a `nan` or
/// `inf` total norm is an error and no gradient changes.
///
/// ```
/// use pyrite::nn::utils::{clip_grad_norm_, ClipGradNormOptions};
/// use pyrite::Tensor;
/// let p = Tensor::zeros([2], pyrite::DType::F64)?.requires_grad_(true)?;
/// p.set_grad(Some(Tensor::new([-6f64, 8.])?))?;
/// let total = clip_grad_norm_(&[&p], 5.0, ClipGradNormOptions::default())?;
/// assert_eq!(total.item::<f64>()?, 10.0);
/// let g = p.grad().unwrap().to_vec::<f64>()?;
/// assert!((g[0] + 3.0).abs() < 1e-6 && (g[1] - 4.0).abs() < 1e-6);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn clip_grad_norm_<T: AsRef<Tensor>>(
    parameters: &[T],
    max_norm: f64,
    opts: ClipGradNormOptions,
) -> Result<Tensor> {
    let grads = grads_of(parameters);
    let total = get_total_norm(&grads, opts.norm_type, opts.error_if_nonfinite)?;
    clip_grads_with_norm_(parameters, max_norm, &total)?;
    Ok(total)
}

/// `torch.nn.utils.clip_grad_value_(parameters, clip_value)`: clamps every gradient in place
/// to `[-clip_value, clip_value]`. Parameters without a gradient are skipped.
///
/// ```
/// use pyrite::nn::utils::clip_grad_value_;
/// use pyrite::Tensor;
/// let p = Tensor::new([0f32, 0., 0.])?.requires_grad_(true)?;
/// p.set_grad(Some(Tensor::new([-2f32, 0.5, 3.])?))?;
/// clip_grad_value_(&[&p], 1.0)?;
/// assert_eq!(p.grad().unwrap().to_vec::<f32>()?, vec![-1., 0.5, 1.]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn clip_grad_value_<T: AsRef<Tensor>>(parameters: &[T], clip_value: f64) -> Result<()> {
    let _g = no_grad();
    for g in grads_of(parameters) {
        g.clamp_(Some(Scalar::Float(-clip_value)), Some(Scalar::Float(clip_value)))?;
    }
    Ok(())
}

/// `torch.nn.utils.parameters_to_vector(parameters)`: every parameter flattened and
/// concatenated into one 1-D tensor (a new tensor, part of the autograd graph; mixed dtypes
/// promote as in `torch.cat`). No parameters is an error, as in PyTorch.
///
/// ```
/// use pyrite::nn::utils::parameters_to_vector;
/// use pyrite::nn::{Linear, Module};
/// let net = Linear::new(3, 2)?;
/// let v = parameters_to_vector(&net.parameters())?;
/// assert_eq!(v.dims(), &[8]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn parameters_to_vector<T: AsRef<Tensor>>(parameters: &[T]) -> Result<Tensor> {
    if parameters.is_empty() {
        bail!(Value, "parameters_to_vector: torch.cat(): expected a non-empty list of Tensors");
    }
    let flat = parameters.iter().map(|p| p.as_ref().reshape([-1isize])).collect::<Result<Vec<_>>>()?;
    Tensor::cat(&flat, 0)
}

/// `torch.nn.utils.vector_to_parameters(vec, parameters)`: copies consecutive slices of the
/// 1-D `vec` into the parameters, in place under `no_grad` (each parameter keeps its dtype and
/// storage; PyTorch instead makes each parameter a view of `vec`). As in PyTorch, elements of
/// `vec` past the parameters' total size are ignored; a `vec` too short is an error, and then
/// no parameter changes.
///
/// ```
/// use pyrite::nn::utils::{parameters_to_vector, vector_to_parameters};
/// use pyrite::nn::{Linear, Module};
/// let net = Linear::new(3, 2)?;
/// let v = parameters_to_vector(&net.parameters())?.detach().mul_scalar(2.0)?;
/// vector_to_parameters(&v, &net.parameters())?;
/// assert!(parameters_to_vector(&net.parameters())?.allclose(&v, 0.0, 0.0, false)?);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn vector_to_parameters<T: AsRef<Tensor>>(vec: &Tensor, parameters: &[T]) -> Result<()> {
    if vec.rank() != 1 {
        bail!(Shape, "vector_to_parameters: expected a 1-D vector, got a tensor of shape {:?}", vec.dims());
    }
    let len = vec.dims()[0];
    let mut pointer = 0usize;
    let mut slices = Vec::with_capacity(parameters.len());
    for p in parameters {
        let p = p.as_ref();
        let n = p.numel();
        let avail = len.saturating_sub(pointer).min(n);
        if avail != n {
            bail!(
                Shape,
                "vector_to_parameters: shape '{:?}' is invalid for input of size {avail} (the vector has {len} elements, the parameters need at least {})",
                p.dims(),
                pointer + n
            );
        }
        slices.push((p, vec.narrow(0, pointer as isize, n)?.reshape(p.dims())?));
        pointer += n;
    }
    let _g = no_grad();
    for (p, s) in slices {
        p.copy_(&s)?;
    }
    Ok(())
}
