//! # pyrite-train
//!
//! Training with Lightning's ergonomics (`pyrite::train`): a [`Trainer`] that runs a
//! [`LightningModule`]'s steps with callbacks ([`callbacks`]), loggers ([`loggers`]),
//! checkpoints and exact resume; and the pieces for a hand-written loop:
//! [`CheckpointManager`] keeps the last N checkpoints and the best K by a monitored metric in a
//! folder, and [`EarlyStopping`] stops training when a metric stops improving, as Keras's
//! `EarlyStopping` does (the Trainer's callback of that name is
//! [`callbacks::EarlyStopping`], with Lightning's semantics).
//!
//! A checkpoint itself is a plain [`Object`](pyrite_serialization::Object) dict as in PyTorch's
//! tutorials (`epoch`, `model_state_dict`, `optimizer_state_dict`, ...), written atomically by
//! [`pyrite_serialization::save`].

pub mod accelerator;
pub mod callback;
pub mod callbacks;
pub mod checkpoint;
pub mod early_stopping;
pub mod filename;
pub mod loggers;
pub mod module;
pub mod oom;
pub mod plot;
pub mod precision;
pub mod results;
pub mod seed;
pub mod strategy;
pub mod trainer;
pub mod tuner;

pub use accelerator::Accelerator;
pub use callback::Callback;
pub use checkpoint::{CheckpointManager, CheckpointOptions, SavedCheckpoint};
pub use early_stopping::{EarlyStopping, EarlyStoppingOptions};
pub use filename::{format_filename, FieldValue};
pub use module::{
    Flow, HParam, Interval, LightningModule, LrSchedulerConfig, OptimizerConfig, Scheduler, StepOutput,
};
pub use oom::{MicroBatching, OomRecovery};
pub use precision::Precision;
pub use results::{Context, LogOptions, LogValue, ReduceFx, Stage};
pub use seed::seed_everything;
pub use strategy::{DdpStrategy, Strategy};
pub use trainer::{CkptPath, EvalOptions, FitOptions, GradientClipAlgorithm, Limit, Trainer, TrainerOptions};

/// Whether a monitored metric improves downwards (a loss) or upwards (an accuracy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Lower is better (`mode="min"`).
    #[default]
    Min,
    /// Higher is better (`mode="max"`).
    Max,
}
