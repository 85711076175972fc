//! The built-in callbacks (Lightning's `lightning.pytorch.callbacks`).

mod batch_size_finder;
mod early_stopping;
mod grad_accum;
mod lr_finder;
mod lr_monitor;
mod model_checkpoint;
mod progress;
mod stochastic_weight_avg;
mod timer;
mod tuner_snapshot;

pub use batch_size_finder::BatchSizeFinder;
pub use early_stopping::{EarlyStopping, EarlyStoppingOptions};
pub use grad_accum::GradientAccumulationScheduler;
pub use lr_finder::{LearningRateFinder, LrFinderMode, LrFinderOptions, LrFinderResult};
pub use lr_monitor::{LearningRateMonitor, LearningRateMonitorOptions};
pub use model_checkpoint::{ModelCheckpoint, ModelCheckpointOptions};
pub use progress::ProgressBar;
pub use stochastic_weight_avg::{StochasticWeightAveraging, StochasticWeightAveragingOptions, SwaEpochStart};
pub use timer::{Timer, TimerOptions};
