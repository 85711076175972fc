//! DDP communication hooks (`torch.distributed.algorithms.ddp_comm_hooks`): what a
//! [`crate::DistributedDataParallel`] does with a bucket of gradients once it is full.
//!
//! A hook takes the process group and a [`GradBucket`] and returns a [`BucketFuture`] whose
//! value is the bucket's reduced gradients (averaged over the ranks). The default hook is
//! [`allreduce_hook`]; [`fp16_compress_hook`] and [`bf16_compress_hook`] halve the bytes
//! moved by sending 16-bit gradients.

use crate::{ProcessGroup, ReduceOp, Work};
use pyrite_core::{autograd, DType, Result, Tensor};
use std::sync::Arc;

/// A bucket of gradients, as a communication hook sees it (`dist.GradBucket`).
pub struct GradBucket {
    /// The bucket's index (0 is the first to fill, holding the last parameters).
    pub index: usize,
    /// The gradients of the bucket's parameters, flattened one after another.
    pub buffer: Tensor,
    /// The bucket's parameters, in the order their gradients sit in `buffer`.
    pub parameters: Vec<Tensor>,
}

impl GradBucket {
    /// `bucket.is_last()`: the last bucket of the iteration to be reduced.
    pub fn is_last(&self, num_buckets: usize) -> bool {
        self.index + 1 == num_buckets
    }
}

/// The result of a communication hook: the reduced bucket once the work it waits on is done
/// (`torch.futures.Future[Tensor]`).
pub struct BucketFuture {
    work: Option<Work>,
    then: Box<dyn FnOnce() -> Result<Tensor> + Send>,
}

impl BucketFuture {
    /// A future that waits for `work`, then computes its value with `then` (a
    /// decompression, say).
    pub fn new(work: Work, then: impl FnOnce() -> Result<Tensor> + Send + 'static) -> BucketFuture {
        BucketFuture { work: Some(work), then: Box::new(then) }
    }

    /// A future whose value is already known.
    pub fn ready(value: Tensor) -> BucketFuture {
        BucketFuture { work: None, then: Box::new(move || Ok(value)) }
    }

    /// Waits for the work and returns the value.
    pub fn wait(self) -> Result<Tensor> {
        if let Some(w) = &self.work {
            w.wait()?;
        }
        (self.then)()
    }
}

/// A communication hook: `hook(process_group, bucket)`.
pub type CommHook = Arc<dyn Fn(&ProcessGroup, &GradBucket) -> Result<BucketFuture> + Send + Sync>;

/// `default_hooks.allreduce_hook`: the bucket averaged over the ranks (DDP's behaviour
/// without a hook). PyTorch divides by the world size before summing; here the sum is divided
/// afterwards, on the communication thread, which keeps the division off the training thread
/// (the same result for a power-of-two world; otherwise they may differ in the last bit).
pub fn allreduce_hook(group: &ProcessGroup, bucket: &GradBucket) -> Result<BucketFuture> {
    let buffer = bucket.buffer.clone();
    let work = group.all_reduce(&buffer, ReduceOp::Avg)?;
    Ok(BucketFuture::new(work, move || Ok(buffer)))
}

fn compress_hook(group: &ProcessGroup, bucket: &GradBucket, dtype: DType) -> Result<BucketFuture> {
    let _ng = autograd::no_grad();
    let compressed = bucket.buffer.to_dtype(dtype)?;
    compressed.div_scalar_(group.size() as f64)?;
    let work = group.all_reduce(&compressed, ReduceOp::Sum)?;
    let buffer = bucket.buffer.clone();
    Ok(BucketFuture::new(work, move || {
        let _ng = autograd::no_grad();
        buffer.copy_(&compressed)?;
        Ok(buffer)
    }))
}

/// `default_hooks.fp16_compress_hook`: casts the bucket to float16, divides by the world
/// size, all-reduces, and casts back into the bucket.
pub fn fp16_compress_hook(group: &ProcessGroup, bucket: &GradBucket) -> Result<BucketFuture> {
    compress_hook(group, bucket, DType::F16)
}

/// `default_hooks.bf16_compress_hook`: as [`fp16_compress_hook`] with bfloat16.
pub fn bf16_compress_hook(group: &ProcessGroup, bucket: &GradBucket) -> Result<BucketFuture> {
    compress_hook(group, bucket, DType::BF16)
}
