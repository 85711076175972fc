//! `torch.utils.benchmark` for Pyrite: a [`Timer`] that runs a closure in blocks long enough
//! to hide the timer's own cost and returns a [`Measurement`] with PyTorch's statistics
//! (median, IQR, significant figures, the variance warnings) and PyTorch's text rendering;
//! [`Compare`] lays many measurements out as PyTorch's tables.

mod compare;
mod measurement;
mod timer;

pub use compare::Compare;
pub use measurement::{select_unit, trim_sigfig, Measurement, TaskSpec};
pub use timer::{AdaptiveAutorangeOptions, BlockedAutorangeOptions, Timer, TimerOptions};
