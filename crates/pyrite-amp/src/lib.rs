//! `torch.amp` for Pyrite: mixed-precision training. [`autocast`] runs the ops that gain from
//! it in bfloat16 or float16 (it lives in `pyrite-core`, where ops choose their dtype, and is
//! re-exported here); [`GradScaler`] scales the loss so that small 16-bit gradients do not
//! flush to zero. [`CustomFwd`] and [`CustomBwd`] are `custom_fwd` / `custom_bwd` for custom
//! autograd Functions.

pub mod custom_function;
pub mod grad_scaler;

pub use custom_function::{CustomBwd, CustomFwd, CustomFwdOptions};
pub use grad_scaler::{GradScaler, GradScalerOptions, GradScalerStateDict};
pub use pyrite_core::autocast::{
    autocast, cast_policy, get_autocast_dtype, is_autocast_enabled, listed_ops, AutocastGuard,
    AutocastOptions, CastPolicy,
};
