//! Trial schedulers (`tune.schedulers`): whether a reporting trial goes on, pauses or stops,
//! and which waiting trial runs next.
//!
//! A scheduler sees the experiment through a [`Controller`] (the trials' statuses, and calls
//! that stop, pause or resume other trials), so the same code runs inside the tuner and
//! against a recorded trace in a test.

mod asha;
mod fifo;
mod hyperband;
mod median_pruner;
mod median_stopping;
mod pbt;

pub use asha::{ASHAScheduler, AshaOptions, AsyncHyperBandScheduler};
pub use fifo::FifoScheduler;
pub use hyperband::{HyperBandOptions, HyperBandScheduler};
pub use median_pruner::{MedianPruner, PercentilePruner, PercentilePrunerOptions};
pub use median_stopping::{MedianStoppingOptions, MedianStoppingRule};
pub use pbt::{Exploit, Mutation, PbtOptions, PopulationBasedTraining};

use pyrite_core::{Error, ErrorKind, Result};

use crate::config::Config;
use crate::trial::{Metrics, Mode, TrialStatus};

/// A scheduler's answer to a result (Ray's `TrialScheduler.CONTINUE` / `PAUSE` / `STOP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Decision {
    /// Keep training.
    Continue,
    /// Checkpoint and yield; the trial is resumed later from its checkpoint.
    Pause,
    /// The trial is finished.
    Stop,
}

impl Decision {
    /// `"CONTINUE"`, `"PAUSE"` or `"STOP"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Continue => "CONTINUE",
            Decision::Pause => "PAUSE",
            Decision::Stop => "STOP",
        }
    }
}

/// The experiment as a scheduler sees and steers it (Ray's `TuneController`).
pub trait Controller {
    /// Every trial so far, in creation order, with its status.
    fn trials(&self) -> Vec<(String, TrialStatus)>;
    /// One trial's status.
    fn status(&self, trial: &str) -> Option<TrialStatus>;
    /// Ends another trial (it is TERMINATED once stopped).
    fn stop_trial(&mut self, trial: &str);
    /// Pauses another, running trial at its next report.
    fn pause_trial(&mut self, trial: &str);
    /// Makes a paused trial pending again, to be resumed from its checkpoint.
    fn unpause_trial(&mut self, trial: &str);
    /// Tells the searcher a trial paused (HyperBandForBOHB's `searcher.on_pause`).
    fn searcher_on_pause(&mut self, _trial: &str) {}
    /// Tells the searcher a paused trial will run again.
    fn searcher_on_unpause(&mut self, _trial: &str) {}
    /// A trial's current config.
    fn config(&self, _trial: &str) -> Option<Config> {
        None
    }
    /// Whether a trial has a checkpoint to copy.
    fn has_checkpoint(&self, _trial: &str) -> bool {
        false
    }
    /// PBT's exploit: `trial` continues from `from`'s latest checkpoint with `config`.
    fn exploit(&mut self, _trial: &str, _from: &str, _config: Config) {}
}

/// A trial scheduler (Ray's `TrialScheduler`).
pub trait TrialScheduler: Send {
    /// A short name for tables and logs.
    fn name(&self) -> String;

    /// Fills in the metric and mode from `TuneConfig` where the scheduler was built without
    /// them; an error where both name one and they differ.
    fn set_search_properties(&mut self, metric: &str, mode: Mode) -> Result<()>;

    /// A new trial.
    fn on_trial_add(&mut self, _ctl: &mut dyn Controller, _trial: &str) {}

    /// A result of a running trial: continue, pause or stop it. A scheduler may annotate the
    /// result (HyperBandForBOHB adds the bracket's budget for the searcher).
    fn on_trial_result(&mut self, ctl: &mut dyn Controller, trial: &str, result: &mut Metrics) -> Decision;

    /// A trial ended by itself (its trainable returned or a stop condition was met).
    fn on_trial_complete(&mut self, _ctl: &mut dyn Controller, _trial: &str, _result: &Metrics) {}

    /// A trial failed for good.
    fn on_trial_error(&mut self, _ctl: &mut dyn Controller, _trial: &str) {}

    /// A trial was stopped from outside the scheduler.
    fn on_trial_remove(&mut self, _ctl: &mut dyn Controller, _trial: &str) {}

    /// Counts the calls of `choose_trial_to_run` that changed the scheduler's state (0 for
    /// schedulers whose choice changes nothing). The tuner logs those calls, so that a replay
    /// of the log makes them too.
    fn state_version(&self) -> u64 {
        0
    }

    /// The next trial to run among the pending and paused ones (first pending, then first
    /// paused, in creation order, like Ray's FIFO).
    fn choose_trial_to_run(&mut self, ctl: &mut dyn Controller) -> Option<String> {
        let trials = ctl.trials();
        trials
            .iter()
            .find(|(_, s)| *s == TrialStatus::Pending)
            .or_else(|| trials.iter().find(|(_, s)| *s == TrialStatus::Paused))
            .map(|(id, _)| id.clone())
    }
}

/// Resolves a scheduler's own metric/mode against the tuner's (Ray refuses two different
/// ones; we say which).
pub(crate) fn resolve_property<T: PartialEq + Clone + std::fmt::Debug>(
    scheduler: &str,
    what: &str,
    own: &mut Option<T>,
    tuner: T,
) -> Result<()> {
    match own {
        Some(v) if *v != tuner => Err(Error::new(
            ErrorKind::Value,
            format!(
                "{scheduler} was built with {what} {v:?} but the TuneConfig says {tuner:?}; set it in one place"
            ),
        )),
        _ => {
            *own = Some(tuner);
            Ok(())
        }
    }
}
