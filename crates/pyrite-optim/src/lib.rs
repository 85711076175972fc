//! # pyrite-optim
//!
//! `torch.optim` for Pyrite: the [`Optimizer`] base with parameter groups, state, step hooks
//! and PyTorch-shaped state_dicts; PyTorch's optimizers, each in its own file with its
//! update written as one fused kernel over every parameter; the LR schedulers
//! ([`lr_scheduler`]) and weight averaging ([`swa_utils`]).

pub mod foreach;
pub mod optimizer;
pub mod sgd;
pub mod swa_utils;

pub use optimizer::{
    Hyper, Hypers, HookHandle, Optimizer, OptimizerBase, OptimizerStateDict, ParamGroup, ParamState, SavedGroup,
    StateValue,
};
pub use sgd::{SGDOptions, SGD};

/// Builds a [`Hypers`] map: `hypers!["lr" => 1e-3, "betas" => (0.9, 0.999)]`.
#[macro_export]
macro_rules! hypers {
    ($($k:expr => $v:expr),* $(,)?) => {{
        let mut m = $crate::Hypers::new();
        $( m.insert($k.to_string(), $crate::Hyper::from($v)); )*
        m
    }};
}
