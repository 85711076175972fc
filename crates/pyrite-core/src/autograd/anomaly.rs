//! Anomaly detection (`torch.autograd.detect_anomaly`): while on, every recorded op keeps a
//! backtrace of where it was called, and a backward formula that produces NaN fails with the
//! node's name and that backtrace.
//!
//! ```
//! use pyrite_core::{autograd, Tensor};
//! let _a = autograd::detect_anomaly();
//! let x = Tensor::new([0f64])?.requires_grad_(true)?;
//! let y = x.sqrt()?.mul_scalar(0.0)?.sum()?; // d sqrt(x)/dx at 0 is inf, times 0 is NaN
//! let err = y.backward().unwrap_err();
//! assert!(err.to_string().contains("SqrtBackward0"));
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

static ANOMALY: AtomicUsize = AtomicUsize::new(0);

/// Whether anomaly mode is on (`torch.is_anomaly_enabled()`).
pub fn is_anomaly_enabled() -> bool {
    ANOMALY.load(Ordering::Relaxed) > 0
}

/// Turns anomaly mode on until the guard drops (for the whole process, as PyTorch's
/// `detect_anomaly` does). It slows recording down: use it to debug, not to train.
pub fn detect_anomaly() -> AnomalyGuard {
    ANOMALY.fetch_add(1, Ordering::Relaxed);
    AnomalyGuard(())
}

/// Ends anomaly mode when dropped (see [`detect_anomaly`]).
#[must_use = "anomaly mode ends as soon as the guard is dropped"]
pub struct AnomalyGuard(());

impl Drop for AnomalyGuard {
    fn drop(&mut self) {
        ANOMALY.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The call site of the op being recorded, when anomaly mode is on.
pub(crate) fn trace() -> Option<String> {
    is_anomaly_enabled().then(|| std::backtrace::Backtrace::force_capture().to_string())
}
