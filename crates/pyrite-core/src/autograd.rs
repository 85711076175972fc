//! Where autograd plugs in. The engine is the next milestone; the tensor already carries a
//! slot for its per-tensor state (`requires_grad`, `grad`, `grad_fn`), and every storage has a
//! version counter bumped by in-place writes ([`crate::Tensor::version`]).

/// Per-tensor autograd state, allocated only for tensors that take part in autograd.
#[derive(Default)]
pub struct AutogradMeta {
    /// Whether gradients flow to this tensor.
    pub requires_grad: bool,
}
