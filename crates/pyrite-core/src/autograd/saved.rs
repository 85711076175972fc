//! Tensors a node keeps for its backward formula, with the version they had when saved.
//!
//! As in PyTorch, a saved tensor that is modified in place before the backward pass makes the
//! backward fail instead of silently computing a wrong gradient; the check uses the version
//! counter of the tensor's storage, which every in-place write bumps.

use super::graph::Node;
use crate::{err, Error, Result, Tensor};
use std::sync::Arc;

/// A tensor saved for backward.
pub(crate) struct SavedTensor {
    /// An input: the tensor itself. An output of the owning node: an alias without autograd
    /// state (holding the tensor itself would make a cycle through its `grad_fn`).
    data: Tensor,
    version: u64,
    /// `Some(i)` when this is output `i` of the owning node.
    output_nr: Option<usize>,
}

impl SavedTensor {
    /// Saves an input of the op being recorded.
    pub fn input(t: &Tensor) -> SavedTensor {
        SavedTensor { data: t.clone(), version: t.version(), output_nr: None }
    }

    /// Saves output `i` of the op being recorded.
    pub fn output(t: &Tensor, i: usize) -> SavedTensor {
        SavedTensor { data: t.detach(), version: t.version(), output_nr: Some(i) }
    }

    /// The tensor as saved (without the version check).
    pub fn data(&self) -> &Tensor {
        &self.data
    }

    /// The tensor, or PyTorch's error if it was modified in place since it was saved. A saved
    /// output comes back attached to `node`, so that a backward with `create_graph`
    /// differentiates through it.
    pub fn unpack(&self, node: &Arc<Node>) -> Result<Tensor> {
        let now = self.data.version();
        if now != self.version {
            let what = match self.output_nr {
                Some(i) => format!(", which is output {i} of {},", node.name),
                None => match self.data.grad_fn() {
                    Some(f) => format!(", which is output {} of {},", self.data.output_nr(), f.name()),
                    None => String::new(),
                },
            };
            return Err(err!(
                Autograd,
                "one of the variables needed for gradient computation has been modified by an inplace operation: [{} {:?}]{what} is at version {now}; expected version {} instead. Hint: the backtrace further above shows the operation that failed to compute its gradient. The variable in question was changed in there or anywhere later. Good luck!",
                format!("torch.{}Tensor", self.data.dtype().type_name()),
                self.data.dims(),
                self.version
            ));
        }
        Ok(match self.output_nr {
            Some(i) if super::is_grad_enabled() => self.data.attach(node.clone(), i),
            _ => self.data.clone(),
        })
    }
}

/// The error for a saved tensor read after its graph was freed.
pub(crate) fn freed_error() -> Error {
    err!(
        Autograd,
        "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward."
    )
}
