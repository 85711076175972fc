//! `tune.search.ConcurrencyLimiter`: at most `max_concurrent` of a searcher's trials live at
//! once (a model-based searcher learns more from finished trials than from many running ones).

use std::collections::BTreeSet;

use pyrite_core::{Error, ErrorKind, Result};

use super::{SearchProperties, Searcher, Suggestion};
use crate::trial::Metrics;

/// Wraps a searcher and answers [`Suggestion::Wait`] while `max_concurrent` of its trials are
/// live.
pub struct ConcurrencyLimiter {
    inner: Box<dyn Searcher>,
    max_concurrent: usize,
    live: BTreeSet<String>,
}

impl ConcurrencyLimiter {
    /// Limits `searcher` to `max_concurrent` live trials (at least 1).
    pub fn new(searcher: impl Searcher + 'static, max_concurrent: usize) -> Result<ConcurrencyLimiter> {
        if max_concurrent == 0 {
            return Err(Error::new(
                ErrorKind::Value,
                "ConcurrencyLimiter: max_concurrent must be at least 1",
            ));
        }
        Ok(ConcurrencyLimiter { inner: Box::new(searcher), max_concurrent, live: BTreeSet::new() })
    }
}

impl Searcher for ConcurrencyLimiter {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn set_search_properties(&mut self, props: &SearchProperties<'_>) -> Result<()> {
        self.inner.set_search_properties(props)
    }

    fn suggest(&mut self, trial_id: &str) -> Result<Suggestion> {
        if self.live.len() >= self.max_concurrent {
            return Ok(Suggestion::Wait);
        }
        let s = self.inner.suggest(trial_id)?;
        if let Suggestion::Config(_) = s {
            self.live.insert(trial_id.to_string());
        }
        Ok(s)
    }

    fn on_trial_result(&mut self, trial_id: &str, result: &Metrics) {
        self.inner.on_trial_result(trial_id, result)
    }

    fn on_trial_complete(&mut self, trial_id: &str, result: Option<&Metrics>, error: bool) {
        if self.live.remove(trial_id) {
            self.inner.on_trial_complete(trial_id, result, error)
        }
    }

    fn on_pause(&mut self, trial_id: &str) {
        self.inner.on_pause(trial_id)
    }

    fn on_unpause(&mut self, trial_id: &str) {
        self.inner.on_unpause(trial_id)
    }

    fn handles_num_samples(&self) -> bool {
        self.inner.handles_num_samples()
    }
}
