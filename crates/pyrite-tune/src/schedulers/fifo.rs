//! `tune.schedulers.FIFOScheduler`: every trial runs to its end, in the order created.

use pyrite_core::Result;

use super::{Controller, Decision, TrialScheduler};
use crate::trial::{Metrics, Mode};

/// Runs trials first come, first served, and never stops one early (the default scheduler).
#[derive(Clone, Debug, Default)]
pub struct FifoScheduler;

impl TrialScheduler for FifoScheduler {
    fn name(&self) -> String {
        "FIFOScheduler".into()
    }

    fn set_search_properties(&mut self, _metric: &str, _mode: Mode) -> Result<()> {
        Ok(())
    }

    fn on_trial_result(
        &mut self,
        _ctl: &mut dyn Controller,
        _trial: &str,
        _result: &mut Metrics,
    ) -> Decision {
        Decision::Continue
    }
}
