//! # pyrite-train
//!
//! Helpers for hand-written training loops (`pyrite::train`): [`CheckpointManager`] keeps the
//! last N checkpoints and the best K by a monitored metric in a folder, as PyTorch Lightning's
//! `ModelCheckpoint` does, and [`EarlyStopping`] stops training when a metric stops improving,
//! as Keras's `EarlyStopping` does (restoring the best weights if asked).
//!
//! A checkpoint itself is a plain [`Object`](pyrite_serialization::Object) dict as in PyTorch's
//! tutorials (`epoch`, `model_state_dict`, `optimizer_state_dict`, ...), written atomically by
//! [`pyrite_serialization::save`].

pub mod checkpoint;
pub mod early_stopping;
pub mod filename;
pub mod plot;

pub use checkpoint::{CheckpointManager, CheckpointOptions, SavedCheckpoint};
pub use early_stopping::{EarlyStopping, EarlyStoppingOptions};
pub use filename::{format_filename, FieldValue};

/// Whether a monitored metric improves downwards (a loss) or upwards (an accuracy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Lower is better (`mode="min"`).
    #[default]
    Min,
    /// Higher is better (`mode="max"`).
    Max,
}
