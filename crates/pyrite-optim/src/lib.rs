//! # pyrite-optim
//!
//! `torch.optim` for Pyrite: the [`Optimizer`] base with parameter groups, state, step hooks
//! and PyTorch-shaped state_dicts; PyTorch's optimizers, each in its own file with its
//! update written as one fused kernel over every parameter; the LR schedulers
//! ([`lr_scheduler`]) and weight averaging ([`swa_utils`]).

pub mod adadelta;
pub mod adagrad;
pub mod adam;
pub mod adamax;
pub mod asgd;
pub mod foreach;
pub mod lbfgs;
pub mod lr_scheduler;
pub mod nadam;
pub mod optimizer;
pub mod optimizer_object;
pub mod radam;
pub mod rmsprop;
pub mod rprop;
pub mod sgd;
pub mod swa_utils;
mod swa_utils_lr;

pub use adadelta::{Adadelta, AdadeltaOptions};
pub use adagrad::{Adagrad, AdagradOptions};
pub use adam::{Adam, AdamOptions, AdamW};
pub use adamax::{Adamax, AdamaxOptions};
pub use asgd::{ASGDOptions, ASGD};
pub use lbfgs::{LBFGSOptions, LBFGS};
pub use nadam::{NAdam, NAdamOptions};
pub use optimizer::{
    AsDynOptimizer, HookHandle, Hyper, Hypers, Optimizer, OptimizerBase, OptimizerStateDict, ParamGroup,
    ParamState, SavedGroup, StateValue,
};
pub use radam::{RAdam, RAdamOptions};
pub use rmsprop::{RMSprop, RMSpropOptions};
pub use rprop::{Rprop, RpropOptions};
pub use sgd::{SGDOptions, SGD};

/// The two accessors every optimizer's `impl Optimizer` starts with (its `base` field).
#[macro_export]
#[doc(hidden)]
macro_rules! base_accessors {
    () => {
        fn base(&self) -> &$crate::OptimizerBase {
            &self.base
        }
        fn base_mut(&mut self) -> &mut $crate::OptimizerBase {
            &mut self.base
        }
    };
}

/// Builds a [`Hypers`] map: `hypers!["lr" => 1e-3, "betas" => (0.9, 0.999)]`.
#[macro_export]
macro_rules! hypers {
    ($($k:expr => $v:expr),* $(,)?) => {{
        let mut m = $crate::Hypers::new();
        $( m.insert($k.to_string(), $crate::Hyper::from($v)); )*
        m
    }};
}
