//! In-flight out-of-memory recovery by micro-batches: a training step that runs out of memory
//! is not lost. Its partial graph is dropped, the batch is split into micro-batches (halving
//! until they fit), their gradients are accumulated with each micro-loss scaled by
//! `micro_size / batch_size`, and the optimizer steps once for the whole batch: for a loss
//! that is a mean over the batch, the same step as the whole batch would have taken (up to
//! rounding). The smaller micro-batch size is kept for the next batches, and a warning line
//! says so.
//!
//! For a hand-written loop, [`MicroBatching`]; in the Trainer, the
//! [`oom_recovery`](crate::TrainerOptions::oom_recovery) option.
//!
//! **What is not the same.** BatchNorm in training mode normalises each micro-batch with that
//! micro-batch's statistics, and updates its running statistics once per micro-batch (so
//! `num_batches_tracked` counts micro-batches, and the running mean and variance are a
//! momentum average over the micro-batches): the outputs, gradients and running statistics
//! differ from the whole batch's. So does anything else that couples the samples of a batch
//! (a loss that is a sum rather than a mean, or one normalised by something other than the
//! batch size), and random draws (Dropout masks are drawn per micro-batch, in another order).
//!
//! **Gradients.** A backward that runs out of memory half way has already added to some
//! parameters' `.grad`. When no parameter had a gradient before it (the usual case after
//! `zero_grad()`), those are simply cleared. When some had (a later micro-batch, or gradient
//! accumulation over batches), the micro-batch's gradients are computed apart
//! (`autograd::grad`) and added to `.grad` only once the backward succeeded: that costs one
//! more copy of the gradients while it runs, and `post_accumulate_grad` hooks do not run for
//! it.

use pyrite_core::{autograd, bail, Error, ErrorKind, Result, Tensor};
use pyrite_data::Sample;
use pyrite_optim::Optimizer;
use std::cell::Cell;

/// The options of micro-batch recovery (Pyrite's addition, no framework has it).
#[derive(Clone, Debug)]
pub struct OomRecovery {
    /// Micro-batches are not split below this size: an out-of-memory at it is returned
    /// (default 1).
    pub min_micro_batch_size: usize,
    /// Print a warning line each time the micro-batch size goes down (default true).
    pub verbose: bool,
}

impl Default for OomRecovery {
    fn default() -> Self {
        OomRecovery { min_micro_batch_size: 1, verbose: true }
    }
}

impl OomRecovery {
    pub fn check(&self) -> Result<()> {
        if self.min_micro_batch_size == 0 {
            bail!(Value, "OomRecovery: `min_micro_batch_size` must be at least 1, got 0");
        }
        Ok(())
    }
}

/// Runs the backward of one piece (the whole batch or a micro-batch) so that an
/// out-of-memory in it can be undone (see the module's docs).
pub struct Backward<'a> {
    params: &'a [Tensor],
    /// Whether the plain `backward()` ran (no gradient before it): undone by clearing.
    direct: Cell<Option<bool>>,
}

impl Backward<'_> {
    /// `loss.backward()`, into the parameters' `.grad`.
    pub fn run(&self, loss: &Tensor) -> Result<()> {
        let had = self.params.iter().any(|p| p.grad().is_some());
        self.direct.set(Some(!had));
        if !had {
            return loss.backward();
        }
        let used: Vec<&Tensor> = self.params.iter().filter(|p| p.requires_grad()).collect();
        let grads = autograd::grad(&[loss], &used, None, None, false, true)?;
        let _ng = autograd::no_grad();
        for (p, g) in used.into_iter().zip(grads) {
            let Some(g) = g else { continue };
            match p.grad() {
                Some(old) => {
                    old.add_(&g)?;
                }
                None => p.set_grad(Some(g.detach()))?,
            }
        }
        Ok(())
    }

    /// Undoes a backward that failed.
    fn undo(&self) -> Result<()> {
        if self.direct.get() == Some(true) {
            for p in self.params {
                p.set_grad(None)?;
            }
        }
        Ok(())
    }
}

/// Micro-batch recovery for a hand-written loop: forward and backward of a whole batch, split
/// into micro-batches when it runs out of memory.
///
/// ```
/// use pyrite::data::Sample;
/// use pyrite::nn::{Linear, Module};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// use pyrite::prelude::*;
/// use pyrite::train::oom::{MicroBatching, OomRecovery};
/// let net = Linear::new(4, 1)?;
/// let mut opt = SGD::new(net.parameters(), SGDOptions { lr: 0.1, ..Default::default() })?;
/// let mut micro = MicroBatching::new(net.parameters(), OomRecovery::default())?;
/// let batch: Sample = (Tensor::randn([32, 4], DType::F32)?, Tensor::randn([32, 1], DType::F32)?).into();
/// // One optimizer step for the batch, however it had to be split.
/// let loss = micro.step(&mut opt, &batch, |b: &Sample| {
///     let (x, y) = (b.item(0)?.as_tensor()?, b.item(1)?.as_tensor()?);
///     F::mse_loss(&net.call(x)?, y, Default::default())
/// })?;
/// assert!(loss.is_finite());
/// assert_eq!(micro.micro_batch_size(), None); // it fitted whole
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct MicroBatching {
    options: OomRecovery,
    params: Vec<Tensor>,
    micro: Option<usize>,
    splits: usize,
}

impl MicroBatching {
    /// Recovery for a model with these parameters (those the optimizer updates).
    pub fn new(params: Vec<Tensor>, options: OomRecovery) -> Result<MicroBatching> {
        options.check()?;
        Ok(MicroBatching { options, params, micro: None, splits: 0 })
    }

    pub fn options(&self) -> &OomRecovery {
        &self.options
    }

    /// The micro-batch size in use since the last out-of-memory; `None`: whole batches.
    pub fn micro_batch_size(&self) -> Option<usize> {
        self.micro
    }

    /// How many times an out-of-memory made the micro-batches smaller.
    pub fn num_splits(&self) -> usize {
        self.splits
    }

    /// Forward and backward of `batch` (`loss_fn` gives the mean loss of a batch or
    /// micro-batch), the gradients added to the parameters' `.grad`; returns the batch's loss
    /// (the micro-losses' mean weighted by their sizes). Call the optimizer's `zero_grad`
    /// before and `step` after, or use [`MicroBatching::step`].
    pub fn backward(
        &mut self,
        batch: &Sample,
        mut loss_fn: impl FnMut(&Sample) -> Result<Tensor>,
    ) -> Result<f64> {
        let mut piece = |b: &Sample, _n: usize, frac: f64, bw: &Backward<'_>| -> Result<f64> {
            let loss = loss_fn(b)?;
            let value = loss.detach().to_dtype(pyrite_core::DType::F64)?.flatten(0, -1)?.to_vec::<f64>()?;
            if value.len() != 1 {
                bail!(Value, "MicroBatching: the loss must be a scalar, got {} elements", value.len());
            }
            let scaled = if frac < 1.0 { (&loss * frac)? } else { loss };
            bw.run(&scaled)?;
            Ok(value[0])
        };
        let pieces = self.run(batch, &mut piece)?;
        let total: usize = pieces.iter().map(|p| p.1).sum();
        Ok(pieces.iter().map(|(v, n)| v * *n as f64).sum::<f64>() / total.max(1) as f64)
    }

    /// `zero_grad()`, [`backward`](MicroBatching::backward), and one `optimizer.step()` for
    /// the whole batch. Returns the batch's loss.
    pub fn step(
        &mut self,
        optimizer: &mut dyn Optimizer,
        batch: &Sample,
        loss_fn: impl FnMut(&Sample) -> Result<Tensor>,
    ) -> Result<f64> {
        optimizer.zero_grad()?;
        let loss = self.backward(batch, loss_fn)?;
        optimizer.step()?;
        Ok(loss)
    }

    /// Runs `piece(micro_batch, size, size / batch_size, backward)` over the batch, whole or
    /// in micro-batches, splitting further on out-of-memory. `piece` must leave nothing of a
    /// failed attempt behind but the parameters' gradients (which are undone here). Returns
    /// each piece's result and size.
    pub(crate) fn run<T>(
        &mut self,
        batch: &Sample,
        piece: &mut dyn FnMut(&Sample, usize, f64, &Backward<'_>) -> Result<T>,
    ) -> Result<Vec<(T, usize)>> {
        let Some(total) = batch_size(batch) else {
            // Nothing to split: the batch as it is.
            let bw = Backward { params: &self.params, direct: Cell::new(None) };
            return Ok(vec![(piece(batch, 1, 1.0, &bw)?, 1)]);
        };
        let mut out = Vec::new();
        let mut start = 0usize;
        while start < total {
            let size = self.micro.unwrap_or(total).min(total);
            let n = size.min(total - start);
            let part = if n == total { batch.clone() } else { slice(batch, start, n, total)? };
            let bw = Backward { params: &self.params, direct: Cell::new(None) };
            match piece(&part, n, n as f64 / total as f64, &bw) {
                Ok(t) => {
                    out.push((t, n));
                    start += n;
                }
                Err(e) if e.kind() == ErrorKind::OutOfMemory => {
                    drop(part);
                    bw.undo()?;
                    if n <= self.options.min_micro_batch_size {
                        return Err(Error::new(
                            ErrorKind::OutOfMemory,
                            format!("{e} (OOM recovery: even a micro-batch of {n} samples does not fit)"),
                        ));
                    }
                    let smaller = n.div_ceil(2).max(self.options.min_micro_batch_size);
                    self.micro = Some(smaller);
                    self.splits += 1;
                    pyrite_core::memory::empty_cache();
                    if self.options.verbose {
                        eprintln!(
                            "warning: out of memory on {n} samples of a batch of {total}: going on in micro-batches of {smaller} (gradients accumulated, one optimizer step per batch)"
                        );
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// The batch size: the first dimension of the batch's first tensor.
fn batch_size(batch: &Sample) -> Option<usize> {
    match batch {
        Sample::Tensor(t) => t.dims().first().copied(),
        Sample::Tuple(v) | Sample::List(v) => v.iter().find_map(batch_size),
        Sample::Map(m) => m.values().find_map(batch_size),
        _ => None,
    }
}

/// Samples `start..start + n` of a batch of `total`: tensors are cut along their first
/// dimension, a list of `total` plain values (collated strings) is cut too, other values are
/// given whole.
fn slice(s: &Sample, start: usize, n: usize, total: usize) -> Result<Sample> {
    let plain =
        |x: &Sample| matches!(x, Sample::Str(_) | Sample::Int(_) | Sample::Float(_) | Sample::Bool(_));
    Ok(match s {
        Sample::Tensor(t) if t.dims().is_empty() => s.clone(),
        Sample::Tensor(t) => {
            if t.dims()[0] != total {
                bail!(
                    Value,
                    "OOM recovery: cannot split a batch of {total} holding a tensor of shape {:?} (its first dimension is not the batch)",
                    t.dims()
                );
            }
            Sample::Tensor(t.narrow(0, start as isize, n)?)
        }
        Sample::List(v) if v.len() == total && v.iter().all(plain) => {
            Sample::List(v[start..start + n].to_vec())
        }
        Sample::List(v) => Sample::List(v.iter().map(|x| slice(x, start, n, total)).collect::<Result<_>>()?),
        Sample::Tuple(v) => {
            Sample::Tuple(v.iter().map(|x| slice(x, start, n, total)).collect::<Result<_>>()?)
        }
        Sample::Map(m) => Sample::Map(
            m.iter().map(|(k, x)| Ok((k.clone(), slice(x, start, n, total)?))).collect::<Result<_>>()?,
        ),
        other => other.clone(),
    })
}
