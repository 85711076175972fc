//! `torch.distributed.pipelining`: pipeline parallelism. The model is cut into stages that
//! run one after the other on different workers; the batch is cut into micro-batches that
//! flow through the stages, so that the stages work at the same time on different
//! micro-batches.
//!
//! - [`PipelineStage`]: a stage's module with its index and the number of stages;
//!   [`split_sequential`] cuts a `Sequential` at given layers.
//! - [`ScheduleGPipe`] (fill-drain) and [`Schedule1F1B`] (one forward, one backward):
//!   `step(input, target)` runs one global batch, accumulates the gradients into the
//!   stages' parameters (equal to the unsplit model's with a mean loss, see
//!   [`ScheduleOptions::scale_grads`]) and returns the micro-batches' losses.
//! - Two placements, one schedule code: give a schedule **every stage** and each runs on a
//!   thread of this process, with channels between them; give it **this rank's stage** and
//!   the others run on the other ranks of an MPI job, activations going forward and
//!   gradients backward by `isend`/`irecv` (each activation preceded by a small message
//!   with its shape and dtype).
//! - [`Timeline`]: when each stage computed what in the last step, its idle time and
//!   [`Timeline::bubble_fraction`].
//!
//! On threads:
//!
//! ```
//! use pyrite::nn::{Linear, Module, Sequential, Tanh};
//! use pyrite::{DType, Tensor};
//! use pyrite_distributed::pipelining::{split_sequential, ScheduleGPipe, ScheduleOptions};
//! let model = Sequential::new().append(Linear::new(4, 8)?).append(Tanh::new()).append(Linear::new(8, 1)?);
//! let stages = split_sequential(&model, &[2])?; // layers 0..2 and 2..3
//! let mse = |out: &Tensor, y: &Tensor| out.sub(y)?.pow_scalar(2.0)?.mean();
//! let mut schedule = ScheduleGPipe::new(stages, 4, mse, ScheduleOptions::default())?;
//! let (x, y) = (Tensor::randn([16, 4], DType::F32)?, Tensor::randn([16, 1], DType::F32)?);
//! let losses = schedule.step(Some(&x), Some(&y))?; // 4 micro-batches of 4
//! assert_eq!(losses.len(), 4);
//! assert!(model.get_parameter("0.weight")?.grad().is_some());
//! println!("{}", schedule.timeline());
//! # Ok::<(), pyrite::Error>(())
//! ```
//!
//! Under `mpirun -np 2`, one stage per rank:
//!
//! ```no_run
//! # use pyrite::nn::{Linear, Module, Sequential, Tanh};
//! # use pyrite::{DType, Tensor};
//! use pyrite_distributed::{self as dist, pipelining::{split_sequential, Schedule1F1B, ScheduleOptions}};
//! dist::init_process_group("mpi", Default::default())?;
//! let rank = dist::get_rank()?;
//! # let model = Sequential::new().append(Linear::new(4, 8)?).append(Tanh::new()).append(Linear::new(8, 1)?);
//! let mine = split_sequential(&model, &[2])?.swap_remove(rank);
//! let mse = |out: &Tensor, y: &Tensor| out.sub(y)?.pow_scalar(2.0)?.mean();
//! let mut schedule = Schedule1F1B::new(vec![mine], 4, mse, ScheduleOptions::default())?;
//! let (x, y) = (Tensor::randn([16, 4], DType::F32)?, Tensor::randn([16, 1], DType::F32)?);
//! let losses = if rank == 0 { schedule.step(Some(&x), None)? } else { schedule.step(None, Some(&y))? };
//! // rank 1 has the 4 losses; each rank has its stage's gradients
//! # Ok::<(), pyrite::Error>(())
//! ```
//!
//! The stage threads start with the default autograd modes: a caller's `no_grad` is an error
//! (as in PyTorch) and autocast is not carried into them.

mod actions;
mod executor;
mod schedule;
mod stage;
mod timeline;
mod transport;

use pyrite_core::{Result, Tensor};
use std::sync::Arc;

pub use schedule::{Schedule1F1B, ScheduleGPipe, ScheduleOptions};
pub use stage::{split_sequential, PipelineStage, StageOptions};
pub use timeline::{ActionKind, Event, StageTimeline, Timeline};

/// The loss function of a schedule: `loss_fn(output, target)` for one micro-batch.
pub(crate) type LossFn = Arc<dyn Fn(&Tensor, &Tensor) -> Result<Tensor> + Send + Sync>;
