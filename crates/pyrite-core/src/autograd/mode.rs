//! Grad mode: whether new ops are recorded for autograd, per thread, as in PyTorch.
//!
//! The guards ([`no_grad`], [`enable_grad`], [`set_grad_enabled`], [`inference_mode`]) set
//! the mode for the current thread and restore the previous one when dropped, so they nest.
//!
//! ```
//! use pyrite_core::{autograd, DType, Tensor};
//! let w = Tensor::ones([2], DType::F32)?.requires_grad_(true)?;
//! {
//!     let _g = autograd::no_grad();
//!     assert!(!w.mul_scalar(2.0)?.requires_grad());
//!     let _inner = autograd::enable_grad();
//!     assert!(w.mul_scalar(2.0)?.requires_grad());
//! }
//! assert!(w.mul_scalar(2.0)?.requires_grad());
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
    static INFERENCE: Cell<bool> = const { Cell::new(false) };
}

/// Whether ops on this thread record the graph (`torch.is_grad_enabled()`).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Whether this thread is inside [`inference_mode`] (`torch.is_inference_mode_enabled()`).
pub fn is_inference_mode_enabled() -> bool {
    INFERENCE.with(|g| g.get())
}

/// Restores the previous grad mode (and inference mode) when dropped.
#[must_use = "the mode reverts as soon as the guard is dropped; bind it with `let _g = ...`"]
pub struct GradModeGuard {
    prev_grad: bool,
    prev_inference: bool,
    // Guards restore thread-local state, so they must be dropped on the thread that made them.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl GradModeGuard {
    fn set(grad: bool, inference: bool) -> GradModeGuard {
        let prev_grad = GRAD_ENABLED.with(|g| g.replace(grad));
        let prev_inference = INFERENCE.with(|g| g.replace(inference));
        GradModeGuard { prev_grad, prev_inference, _not_send: std::marker::PhantomData }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.prev_grad));
        INFERENCE.with(|g| g.set(self.prev_inference));
    }
}

/// `with torch.no_grad():` — ops are not recorded until the guard drops.
pub fn no_grad() -> GradModeGuard {
    GradModeGuard::set(false, is_inference_mode_enabled())
}

/// `with torch.enable_grad():` — turns recording back on inside a [`no_grad`] block.
/// It does not leave [`inference_mode`], as in PyTorch.
pub fn enable_grad() -> GradModeGuard {
    let inference = is_inference_mode_enabled();
    GradModeGuard::set(!inference, inference)
}

/// `torch.set_grad_enabled(mode)` as a scoped guard.
pub fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let inference = is_inference_mode_enabled();
    GradModeGuard::set(enabled && !inference, inference)
}

/// `with torch.inference_mode():` — like [`no_grad`], and stronger: [`enable_grad`] inside
/// does not turn recording back on. Tensors made inside are inference tensors
/// ([`Tensor::is_inference`](crate::Tensor::is_inference)): outside inference mode they cannot be
/// saved for backward nor updated in place (clone one to get a normal tensor), as in PyTorch.
pub fn inference_mode() -> GradModeGuard {
    GradModeGuard::set(false, true)
}
