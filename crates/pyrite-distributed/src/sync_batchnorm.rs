//! Synchronized batch norm: batch statistics over every process of a group, through a sum
//! that autograd differentiates (`torch.distributed.nn.functional.all_reduce`).

use crate::{ProcessGroup, ReduceOp};
use pyrite_core::autograd::{self, Function, FunctionCtx};
use pyrite_core::{Result, Tensor};
use pyrite_nn::functional::CrossProcessSum;
use pyrite_nn::{BatchNorm1d, BatchNorm2d, BatchNorm3d, Module, SyncBatchNorm};
use std::sync::Arc;

/// The sum over a group's processes, differentiable: the gradient of each process's input is
/// the same sum of every process's output gradient.
struct AllReduceSum(ProcessGroup);

impl Function for AllReduceSum {
    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let out = inputs[0].deep_clone()?;
        self.0.all_reduce(&out, ReduceOp::Sum)?.wait()?;
        Ok(vec![out])
    }
    fn backward(&self, _ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let g = grads[0].detach().deep_clone()?;
        self.0.all_reduce(&g, ReduceOp::Sum)?.wait()?;
        Ok(vec![Some(g)])
    }
    fn name(&self) -> String {
        "AllReduceBackward".into()
    }
}

/// `torch.distributed.nn.functional.all_reduce(tensor, op=SUM, group)`: the sum of `tensor`
/// over the group's processes as a new tensor that autograd differentiates (the gradient is
/// all-reduced too).
pub fn all_reduce_differentiable(tensor: &Tensor, group: &ProcessGroup) -> Result<Tensor> {
    Ok(autograd::apply(AllReduceSum(group.clone()), &[tensor])?.remove(0))
}

/// A process group as batch norm's cross-process sum.
pub(crate) struct GroupSum(pub ProcessGroup);

impl CrossProcessSum for GroupSum {
    fn sum(&self, t: &Tensor) -> Result<Tensor> {
        all_reduce_differentiable(t, &self.0)
    }
    fn world_size(&self) -> usize {
        self.0.size()
    }
}

/// `SyncBatchNorm.convert_sync_batchnorm(module, process_group)`: makes every batch norm
/// layer of `module` (`BatchNorm1d/2d/3d`, and `SyncBatchNorm`) compute its training
/// statistics over the group's processes (`None`: the default group). Returns how many layers
/// it changed.
///
/// PyTorch replaces the layers with `SyncBatchNorm` modules; a Rust model's fields have fixed
/// types, so the layers stay and synchronize instead: the parameters, buffers, state_dict keys
/// and evaluation are unchanged, as after PyTorch's conversion.
pub fn convert_sync_batchnorm(module: &dyn Module, group: Option<&ProcessGroup>) -> Result<usize> {
    let group = match group {
        Some(g) => g.clone(),
        None => crate::default_group()?,
    };
    let sum: Arc<dyn CrossProcessSum> = Arc::new(GroupSum(group));
    let mut n = 0;
    for (_, m) in module.named_modules() {
        let any = m.as_any();
        if let Some(bn) = any.downcast_ref::<BatchNorm1d>() {
            bn.set_process_sum(Some(sum.clone()));
        } else if let Some(bn) = any.downcast_ref::<BatchNorm2d>() {
            bn.set_process_sum(Some(sum.clone()));
        } else if let Some(bn) = any.downcast_ref::<BatchNorm3d>() {
            bn.set_process_sum(Some(sum.clone()));
        } else if let Some(bn) = any.downcast_ref::<SyncBatchNorm>() {
            bn.set_process_sum(Some(sum.clone()));
        } else {
            continue;
        }
        n += 1;
    }
    Ok(n)
}
