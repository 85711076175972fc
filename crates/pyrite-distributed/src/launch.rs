//! Starting a program as an MPI job from inside itself, as Lightning's `ddp` strategy starts
//! its processes: run it plainly, and it runs itself again under `mpirun`.

use pyrite_core::{bail, Result};
use std::process::{Command, ExitStatus};

/// Runs this program again as an MPI job of `nprocs` processes (`mpirun -np nprocs
/// --oversubscribe --bind-to none`, plus `--allow-run-as-root` as root, with the same
/// arguments), unless it already runs under a launcher (mpirun, srun, torchrun: see
/// [`crate::env::launch_env`]). Returns the job's exit status when it started one (the
/// caller exits with it), `None` when this process is one of the job's processes and should
/// go on.
///
/// ```no_run
/// if let Some(status) = pyrite_distributed::launch::relaunch_under_mpirun(2)? {
///     std::process::exit(status.code().unwrap_or(1));
/// }
/// pyrite_distributed::init_process_group("mpi", Default::default())?;
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn relaunch_under_mpirun(nprocs: usize) -> Result<Option<ExitStatus>> {
    if crate::env::launch_env()?.is_some() {
        return Ok(None);
    }
    if nprocs == 0 {
        bail!(Value, "relaunch_under_mpirun: nprocs must be at least 1");
    }
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new("mpirun");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    cmd.args(["--oversubscribe", "--bind-to", "none", "-np", &nprocs.to_string()]);
    cmd.arg(exe).args(std::env::args_os().skip(1));
    match cmd.status() {
        Ok(status) => Ok(Some(status)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            Distributed,
            "mpirun was not found: install OpenMPI (Debian: apt install openmpi-bin), or start the program \
             with your own launcher (mpirun -np N, srun)"
        ),
        Err(e) => bail!(Distributed, "could not start mpirun: {e}"),
    }
}
