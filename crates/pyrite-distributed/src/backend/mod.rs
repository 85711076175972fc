//! Backends: the engines that move tensors between processes. MPI is the one for CPUs (a
//! cargo feature, `mpi`); NCCL joins with the CUDA backend.
//!
//! A backend runs the operations a [`crate::ProcessGroup`] submits, in submission order per
//! communicator, in the background, and completes each one's [`Work`] within its timeout.

use crate::op::Op;
use crate::work::Work;
use pyrite_core::{bail, Result};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "mpi")]
mod mpi;

/// A communicator of a backend: the world is 0.
pub(crate) type CommId = usize;

/// An engine for collectives.
pub(crate) trait Backend: Send + Sync {
    /// The backend's name (`"mpi"`).
    fn name(&self) -> &'static str;
    /// This process's rank in the world.
    fn rank(&self) -> usize;
    /// The number of processes in the world.
    fn size(&self) -> usize;
    /// A communicator over `ranks` (world ranks, in group-rank order), made by every rank of
    /// the world together; `None` on the ranks outside it.
    fn new_comm(&self, ranks: &[usize], timeout: Duration) -> Result<Option<CommId>>;
    /// Runs `op` on `comm` in the background and completes `work` with its result.
    fn submit(&self, comm: CommId, op: Op, work: Work);
}

/// The backend named `name` (`"mpi"`), starting it on first use. MPI can start once per
/// process, so a second process group reuses it.
pub(crate) fn open(name: &str) -> Result<Arc<dyn Backend>> {
    match name.to_ascii_lowercase().as_str() {
        "mpi" => open_mpi(),
        "gloo" => bail!(
            Distributed,
            "Pyrite has no gloo backend: use backend \"mpi\" (OpenMPI or MPICH), which runs the same \
             collectives on CPUs and starts under mpirun or srun"
        ),
        "nccl" => bail!(
            Distributed,
            "the NCCL backend needs Pyrite's CUDA backend, which is not built yet: use backend \"mpi\" on CPUs"
        ),
        other => bail!(Distributed, "Invalid backend: '{other}' (Pyrite's backends: mpi)"),
    }
}

#[cfg(feature = "mpi")]
fn open_mpi() -> Result<Arc<dyn Backend>> {
    mpi::MpiBackend::get().map(|b| b as Arc<dyn Backend>)
}

#[cfg(not(feature = "mpi"))]
fn open_mpi() -> Result<Arc<dyn Backend>> {
    bail!(
        Distributed,
        "Pyrite was built without MPI: enable the `mpi` feature (`cargo build --features pyrite/mpi`, or \
         `pyrite-distributed/mpi`), with OpenMPI installed (Debian: apt install libopenmpi-dev openmpi-bin \
         libclang-dev), and start the program with mpirun -np N"
    )
}

/// Whether this build has the MPI backend (`torch.distributed.is_mpi_available()`).
pub fn is_mpi_available() -> bool {
    cfg!(feature = "mpi")
}
