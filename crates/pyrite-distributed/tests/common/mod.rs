//! Running a test's scenarios under `mpirun`.
//!
//! A scenario is an `#[ignore]`d test of the same binary; [`mpirun`] starts `np` copies of
//! the binary with `--ignored --exact <scenario>` under `mpirun --oversubscribe`, waits with a
//! watchdog (a hung job is killed and fails the test), and returns what they printed. One
//! job runs at a time.

#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_JOB_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What a job printed and how it ended.
pub struct Job {
    pub success: bool,
    pub code: Option<i32>,
    pub output: String,
    pub elapsed: Duration,
}

impl Job {
    /// Panics with the output unless every rank ran to success.
    pub fn assert_ok(&self) {
        assert!(
            self.success,
            "the MPI job failed ({:?}) after {:?}:\n{}",
            self.code, self.elapsed, self.output
        );
    }
    /// Panics unless the output contains `s`.
    pub fn assert_printed(&self, s: &str) {
        assert!(self.output.contains(s), "expected {s:?} in the job's output:\n{}", self.output);
    }
}

/// Whether a scenario runs inside an MPI job (scenarios do nothing useful outside one).
pub fn under_mpirun() -> bool {
    std::env::var("OMPI_COMM_WORLD_SIZE").is_ok() || std::env::var("PMI_SIZE").is_ok()
}

/// Runs `scenario` of this test binary on `np` ranks, with extra environment variables, and
/// kills the job after `limit`.
pub fn mpirun(np: usize, scenario: &str, env: &[(&str, &str)], limit: Duration) -> Job {
    let _one = ONE_JOB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new("mpirun");
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    cmd.args(["--oversubscribe", "--bind-to", "none", "-np", &np.to_string()]);
    cmd.arg(exe).args(["--ignored", "--exact", scenario, "--nocapture", "--test-threads=1"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.env("RUST_BACKTRACE", "0");
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("mpirun (OpenMPI's openmpi-bin) must be installed for the MPI tests");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let output = format!("{}{}", t_out.join().unwrap(), t_err.join().unwrap());
    match status {
        None => panic!("the MPI job {scenario} did not finish within {limit:?} (killed):\n{output}"),
        Some(s) => Job { success: s.success(), code: s.code(), output, elapsed },
    }
}
