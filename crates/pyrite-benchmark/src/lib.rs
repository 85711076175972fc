//! `torch.utils.benchmark` for Pyrite: a [`Timer`] that runs a closure in blocks long enough
//! to hide the timer's own cost and returns a [`Measurement`] with PyTorch's statistics
//! (median, IQR, significant figures, the variance warnings) and PyTorch's text rendering.

mod measurement;
mod timer;

pub use measurement::{select_unit, trim_sigfig, Measurement, TaskSpec};
pub use timer::{AdaptiveAutorangeOptions, BlockedAutorangeOptions, Timer, TimerOptions};
