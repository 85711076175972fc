//! [`Parameter`] and [`Buffer`]: the tensors a module owns and registers. A parameter is a
//! leaf that requires grad (`nn.Parameter`); a buffer is state that is not trained (BatchNorm's
//! running statistics, `register_buffer`), saved in the state_dict unless non-persistent.
//! Both dereference to their [`Tensor`], so `self.weight.matmul(..)` and `&self.weight` work
//! as tensors do.

use pyrite_core::{Result, Tensor};
use std::ops::Deref;

/// A trainable tensor of a module (`nn.Parameter`): a leaf that requires grad (unless
/// frozen with `requires_grad_(false)`).
///
/// ```
/// use pyrite::nn::Parameter;
/// use pyrite::{DType, Tensor};
/// let w = Parameter::new(Tensor::zeros([2, 3], DType::F32)?)?;
/// assert!(w.requires_grad() && w.is_leaf());
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Parameter(Tensor);

impl Parameter {
    /// Wraps `t` (detached from any graph) as a leaf that requires grad.
    pub fn new(t: Tensor) -> Result<Parameter> {
        Parameter::with_requires_grad(t, true)
    }

    /// `nn.Parameter(t, requires_grad=...)`.
    pub fn with_requires_grad(t: Tensor, requires_grad: bool) -> Result<Parameter> {
        let t = if t.is_leaf() && t.grad_fn().is_none() { t } else { t.detach() };
        Ok(Parameter(t.requires_grad_(requires_grad)?))
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.0
    }

    /// Replaces the tensor (used by `to_dtype` and `load_state_dict(assign)`).
    pub(crate) fn set(&mut self, t: Tensor) {
        self.0 = t;
    }
}

impl Deref for Parameter {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        &self.0
    }
}

impl AsRef<Tensor> for Parameter {
    fn as_ref(&self) -> &Tensor {
        &self.0
    }
}

/// A tensor a module keeps but does not train (`register_buffer`): saved in the state_dict
/// when `persistent`.
#[derive(Clone, Debug)]
pub struct Buffer {
    tensor: Tensor,
    persistent: bool,
}

impl Buffer {
    /// A persistent buffer (part of the state_dict).
    pub fn new(t: Tensor) -> Buffer {
        Buffer { tensor: t, persistent: true }
    }

    /// A buffer that is not saved in the state_dict (`persistent=False`).
    pub fn non_persistent(t: Tensor) -> Buffer {
        Buffer { tensor: t, persistent: false }
    }

    /// Whether the state_dict holds it.
    pub fn persistent(&self) -> bool {
        self.persistent
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// Replaces the tensor (a module updating its state out of place, `to_dtype`).
    pub fn set(&mut self, t: Tensor) {
        self.tensor = t;
    }
}

impl Deref for Buffer {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        &self.tensor
    }
}

impl AsRef<Tensor> for Buffer {
    fn as_ref(&self) -> &Tensor {
        &self.tensor
    }
}
