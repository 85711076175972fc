//! `torch.distributed` for Pyrite: one training job over several processes, on one machine or
//! many, through MPI.
//!
//! - [`init_process_group`] joins a process to the job (`"mpi"`: start the program with
//!   `mpirun -np N`, or `srun` on a Slurm cluster); [`get_rank`], [`get_world_size`],
//!   [`new_group`] as in PyTorch.
//! - Collectives on tensors of every dtype, contiguous or not: [`all_reduce`] (with
//!   [`ReduceOp`] SUM, AVG, PRODUCT, MIN, MAX), [`broadcast`], [`reduce`], [`all_gather`],
//!   [`all_gather_into_tensor`], [`reduce_scatter_tensor`], [`gather`], [`scatter`],
//!   [`all_to_all_single`], [`barrier`], point-to-point [`send`] / [`recv`], and
//!   [`broadcast_object_list`] / [`all_gather_object`] for small values. The free functions
//!   wait for the result; a [`ProcessGroup`]'s methods are the asynchronous forms and return a
//!   [`Work`].
//! - Nothing hangs: every operation has a timeout (30 minutes by default, as in PyTorch;
//!   [`InitOptions::timeout`]) after which the ranks that did arrive get an error naming the
//!   ranks that did not; with `PYRITE_DISTRIBUTED_DEBUG=DETAIL` every collective also checks
//!   that all ranks run the same op with the same shape and dtype, and fails naming them if
//!   not. A rank that exits with an error, or panics, aborts the whole MPI job.
//! - [`pipelining`]: pipeline parallelism (`torch.distributed.pipelining`): a model cut into
//!   stages, GPipe and 1F1B schedules over micro-batches, the stages on the ranks of an MPI
//!   job or on threads of one process.
//!
//! The MPI backend is the cargo feature `mpi` (rsmpi over OpenMPI or MPICH); without it
//! everything compiles and [`init_process_group`] says how to enable it.
//! [`env::launch_env`] reads the launcher's variables (mpirun's, Slurm's, torchrun's).

extern crate self as pyrite;

mod backend;
pub mod comm_hooks;
mod ddp;
pub mod env;
pub mod launch;
mod metrics;
mod object;
mod op;
pub mod pipelining;
mod process_group;
mod reducer;
mod sync_batchnorm;
mod work;

// The paths `#[derive(Module)]` generates (`::pyrite::nn::...`, `::pyrite::Result`) resolve
// inside this crate too, as in pyrite-nn.
mod nn {
    pub use pyrite_nn::*;
}
use pyrite_core::Result;

pub use ddp::{DdpOptions, DistributedDataParallel, GradientSync, NoSync};
pub use pyrite_nn::SyncBatchNorm;
pub use sync_batchnorm::{all_reduce_differentiable, convert_sync_batchnorm};

pub use backend::is_mpi_available;
pub use metrics::{compute_synced, sync_metric};
pub use object::{all_gather_object, broadcast_object_list};
pub use op::ReduceOp;
pub use process_group::{
    all_gather, all_gather_into_tensor, all_reduce, all_to_all_single, barrier, broadcast, default_group,
    destroy_process_group, gather, get_backend, get_rank, get_world_size, init_process_group, irecv,
    is_available, is_initialized, isend, new_group, recv, reduce, reduce_scatter_tensor, scatter, send,
    DebugLevel, InitOptions, ProcessGroup, DEFAULT_TIMEOUT,
};
pub use work::Work;
