//! A test-only fault-injection hook for crash tests: with the environment variable
//! [`ABORT_AT_VAR`] set to `N`, the process aborts (as abruptly as a `SIGKILL`: no destructor,
//! no flush) at the `N`-th [`fault_point`] it reaches. Unset, a fault point costs one atomic
//! load. The points lie between the steps of [`crate::atomic_write`] and of the checkpoint
//! manager in `pyrite-train`, so a test can kill a process at every step in turn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable that arms the hook: the 1-based number of the fault point to
/// abort at.
pub const ABORT_AT_VAR: &str = "PYRITE_TEST_ABORT_AT";

/// A step boundary that crash tests can kill the process at (see the module docs); `label`
/// names the step just finished and is printed to stderr before aborting.
pub fn fault_point(label: &str) {
    static ABORT_AT: OnceLock<u64> = OnceLock::new();
    static REACHED: AtomicU64 = AtomicU64::new(0);
    let at = *ABORT_AT
        .get_or_init(|| std::env::var(ABORT_AT_VAR).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0));
    if at == 0 {
        return;
    }
    let n = REACHED.fetch_add(1, Ordering::SeqCst) + 1;
    if n == at {
        eprintln!("{ABORT_AT_VAR}: aborting at fault point {n}: {label}");
        std::process::abort();
    }
}
