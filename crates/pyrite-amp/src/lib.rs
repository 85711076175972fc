//! `torch.amp` for Pyrite: mixed-precision training. Today it holds [`GradScaler`], the loss
//! scaling that keeps small 16-bit gradients from flushing to zero; autocast joins it next.

pub mod grad_scaler;

pub use grad_scaler::{GradScaler, GradScalerOptions, GradScalerStateDict};
