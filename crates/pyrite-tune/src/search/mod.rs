//! Search algorithms (`tune.search`): where the next trial's config comes from.
//!
//! A searcher is told the metric, the mode and the space, then asked for a config per new
//! trial (`suggest`), and hears every result and every trial's end. Searchers are
//! deterministic given their seed and the events they were shown, which is what lets an
//! experiment be resumed by replaying its log (see `storage`).

mod basic_variant;
mod bohb;
mod concurrency_limiter;
pub mod tpe;

pub use basic_variant::{BasicVariantGenerator, BasicVariantOptions};
pub use bohb::{BohbOptions, BohbSearch, HYPERBAND_BUDGET};
pub use concurrency_limiter::ConcurrencyLimiter;
pub use tpe::{TpeOptions, TpeSearch};

use pyrite_core::Result;

use crate::config::Config;
use crate::space::ParamSpace;
use crate::trial::{Metrics, Mode};

/// What a searcher answers when asked for a new trial.
#[derive(Clone, Debug, PartialEq)]
pub enum Suggestion {
    /// Start a trial with this config.
    Config(Config),
    /// Nothing now; ask again when a trial has finished (Ray's `None`).
    Wait,
    /// No more trials (Ray's `Searcher.FINISHED`).
    Finished,
}

/// What the tuner tells a searcher before the first suggestion.
#[derive(Clone, Debug)]
pub struct SearchProperties<'a> {
    /// The metric to optimize.
    pub metric: &'a str,
    /// Its direction.
    pub mode: Mode,
    /// The search space (`Tuner::new`'s `param_space`).
    pub space: &'a ParamSpace,
    /// `TuneConfig::num_samples` (`None`: unlimited).
    pub num_samples: Option<usize>,
}

/// A search algorithm (Ray's `Searcher`).
pub trait Searcher: Send {
    /// A short name for tables and logs (`"TPE"`).
    fn name(&self) -> String;

    /// Takes the metric, mode and space; an error if the space has a domain this searcher
    /// cannot search.
    fn set_search_properties(&mut self, props: &SearchProperties<'_>) -> Result<()>;

    /// The config for a new trial `trial_id`.
    fn suggest(&mut self, trial_id: &str) -> Result<Suggestion>;

    /// An intermediate result of a live trial.
    fn on_trial_result(&mut self, _trial_id: &str, _result: &Metrics) {}

    /// A trial ended: with its last result, or with an error.
    fn on_trial_complete(&mut self, _trial_id: &str, _result: Option<&Metrics>, _error: bool) {}

    /// The scheduler paused a trial (HyperBandForBOHB).
    fn on_pause(&mut self, _trial_id: &str) {}

    /// A paused trial will run again.
    fn on_unpause(&mut self, _trial_id: &str) {}

    /// Whether this searcher counts trials itself (the tuner then does not stop at
    /// `num_samples`): only the basic variant generator does, to repeat the grid.
    fn handles_num_samples(&self) -> bool {
        false
    }
}
