//! Who started this process: the launcher's environment variables.
//!
//! Each launcher tells a process its place in the job through its own variables: `mpirun`
//! (OpenMPI's `OMPI_COMM_WORLD_*`, MPICH and Intel MPI's `PMI_*`), Slurm's `srun`
//! (`SLURM_PROCID`, ...) and `torchrun` (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, ...). The MPI
//! backend takes the rank and world from MPI itself; these are read to check that they agree
//! (a job started by `torchrun` or by `srun` without MPI support gives every process an MPI
//! world of its own), to pick a device by the local rank, and for the Trainer to know whether
//! it runs under a launcher at all.

use pyrite_core::{bail, Result};

/// The launcher a [`LaunchEnv`] was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// OpenMPI's `mpirun` / `mpiexec` (`OMPI_COMM_WORLD_RANK`, ...).
    OpenMpi,
    /// MPICH's or Intel MPI's Hydra launcher (`PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`).
    Pmi,
    /// Slurm's `srun` (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`).
    Slurm,
    /// PyTorch's `torchrun` / `torch.distributed.launch` (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`).
    Torchrun,
}

/// This process's place in a job, as its launcher describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Which launcher's variables these are.
    pub launcher: Launcher,
    /// The global rank, in `0..world_size`.
    pub rank: usize,
    /// The number of processes in the job.
    pub world_size: usize,
    /// The rank among the processes on this machine.
    pub local_rank: usize,
    /// The number of processes on this machine (`None` where the launcher does not say).
    pub local_world_size: Option<usize>,
}

/// The launcher's description of this process, read from the environment; `None` when no
/// launcher's variables are set (a plain `cargo run`). MPI launchers come first, then Slurm,
/// then torchrun, so that `srun` starting an MPI job or `mpirun` inside an allocation reads
/// the innermost launcher.
///
/// ```
/// use pyrite_distributed::env::{launch_env_from, Launcher};
/// let vars = [("RANK", "1"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "2")];
/// let env = launch_env_from(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))?.unwrap();
/// assert_eq!((env.launcher, env.rank, env.world_size, env.local_rank), (Launcher::Torchrun, 1, 4, 1));
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn launch_env() -> Result<Option<LaunchEnv>> {
    launch_env_from(|k| std::env::var(k).ok())
}

/// [`launch_env`] over any source of variables (for tests, and for reading another
/// process's environment).
pub fn launch_env_from(var: impl Fn(&str) -> Option<String>) -> Result<Option<LaunchEnv>> {
    let num = |name: &str| -> Result<Option<usize>> {
        match var(name) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) => Ok(Some(n)),
                Err(_) => bail!(Value, "the environment variable {name}={v:?} is not a non-negative integer"),
            },
        }
    };
    // (launcher, rank, world size, local rank, local world size)
    let sets: [(Launcher, &str, &str, &str, &str); 4] = [
        (
            Launcher::OpenMpi,
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ),
        (Launcher::Pmi, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
        (Launcher::Slurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
        (Launcher::Torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ];
    for (launcher, rank_var, size_var, local_var, local_size_var) in sets {
        let Some(rank) = num(rank_var)? else { continue };
        let world_size = match num(size_var)? {
            Some(n) => n,
            None if launcher == Launcher::Slurm => match num("SLURM_NPROCS")? {
                Some(n) => n,
                None => bail!(
                    Value,
                    "SLURM_PROCID is set but SLURM_NTASKS is not: start the job with srun --ntasks"
                ),
            },
            None => bail!(Value, "{rank_var} is set but {size_var} is not"),
        };
        if world_size == 0 || rank >= world_size {
            bail!(Value, "{rank_var}={rank} is not a rank of a world of {size_var}={world_size} processes");
        }
        let local_rank = num(local_var)?.unwrap_or(0);
        let mut local_world_size = num(local_size_var)?;
        if launcher == Launcher::Slurm && local_world_size.is_none() {
            // SLURM_TASKS_PER_NODE reads like "2(x3),1": this node's count is not said; the
            // first node's is the usual figure for a homogeneous job.
            local_world_size = var("SLURM_TASKS_PER_NODE")
                .and_then(|v| v.split(['(', ',']).next().and_then(|n| n.trim().parse().ok()));
        }
        return Ok(Some(LaunchEnv { launcher, rank, world_size, local_rank, local_world_size }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Option<LaunchEnv>> {
        launch_env_from(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn no_launcher_is_none() {
        assert_eq!(read(&[("HOME", "/root")]).unwrap(), None);
    }

    #[test]
    fn openmpi_variables() {
        let e = read(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            // mpirun inside a Slurm allocation: the MPI launcher's view wins
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            e,
            LaunchEnv {
                launcher: Launcher::OpenMpi,
                rank: 3,
                world_size: 4,
                local_rank: 1,
                local_world_size: Some(2)
            }
        );
    }

    #[test]
    fn slurm_variables() {
        let e = read(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_TASKS_PER_NODE", "4(x2)"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            e,
            LaunchEnv {
                launcher: Launcher::Slurm,
                rank: 5,
                world_size: 8,
                local_rank: 1,
                local_world_size: Some(4)
            }
        );
        let e = read(&[("SLURM_PROCID", "0"), ("SLURM_NPROCS", "2")]).unwrap().unwrap();
        assert_eq!((e.rank, e.world_size, e.local_rank), (0, 2, 0));
    }

    #[test]
    fn torchrun_and_pmi_variables() {
        let e = read(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "2")])
            .unwrap()
            .unwrap();
        assert_eq!(e.launcher, Launcher::Torchrun);
        assert_eq!(e.local_world_size, Some(2));
        let e = read(&[("PMI_RANK", "1"), ("PMI_SIZE", "2"), ("MPI_LOCALRANKID", "1")]).unwrap().unwrap();
        assert_eq!((e.launcher, e.rank, e.local_rank, e.local_world_size), (Launcher::Pmi, 1, 1, None));
    }

    #[test]
    fn bad_values_are_errors() {
        let e = read(&[("RANK", "two"), ("WORLD_SIZE", "2")]).unwrap_err();
        assert!(e.to_string().contains("RANK=\"two\" is not a non-negative integer"), "{e}");
        let e = read(&[("RANK", "2"), ("WORLD_SIZE", "2")]).unwrap_err();
        assert!(e.to_string().contains("RANK=2 is not a rank of a world of WORLD_SIZE=2"), "{e}");
        let e = read(&[("RANK", "0")]).unwrap_err();
        assert!(e.to_string().contains("RANK is set but WORLD_SIZE is not"), "{e}");
    }
}
