//! [`Timer`]: tracks training time and stops at a limit (Lightning's `Timer`, what
//! `max_time` adds).

use crate::callback::Callback;
use crate::module::{Interval, LightningModule};
use crate::results::dict_of;
use crate::trainer::Trainer;
use pyrite_core::Result;
use pyrite_serialization::Object;
use std::time::{Duration, Instant};

/// [`Timer`]'s options, with Lightning's defaults.
#[derive(Clone, Debug)]
pub struct TimerOptions {
    /// Stop training after this long (default: never).
    pub duration: Option<Duration>,
    /// Check after every step (default) or every epoch.
    pub interval: Interval,
    pub verbose: bool,
}

impl Default for TimerOptions {
    fn default() -> Self {
        TimerOptions { duration: None, interval: Interval::Step, verbose: true }
    }
}

/// Measures the time spent training (carried over a resume through its state) and signals
/// the Trainer to stop once `duration` has passed.
pub struct Timer {
    options: TimerOptions,
    start: Option<Instant>,
    offset: Duration,
    stopped: Option<Duration>,
}

impl Timer {
    pub fn new(options: TimerOptions) -> Timer {
        Timer { options, start: None, offset: Duration::ZERO, stopped: None }
    }

    /// Training time so far (including the time before a resume).
    pub fn time_elapsed(&self) -> Duration {
        match (self.stopped, self.start) {
            (Some(d), _) => d,
            (None, Some(s)) => self.offset + s.elapsed(),
            (None, None) => self.offset,
        }
    }

    /// Time left before `duration`.
    pub fn time_remaining(&self) -> Option<Duration> {
        self.options.duration.map(|d| d.saturating_sub(self.time_elapsed()))
    }

    fn check(&mut self, trainer: &mut Trainer) {
        let Some(d) = self.options.duration else { return };
        if self.time_elapsed() >= d && !trainer.should_stop() {
            trainer.set_should_stop(true);
            if self.options.verbose {
                eprintln!(
                    "Time limit reached. Elapsed time is {:.1?}. Signaling Trainer to stop.",
                    self.time_elapsed()
                );
            }
        }
    }
}

impl Callback for Timer {
    fn on_train_start(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        self.start = Some(Instant::now());
        self.stopped = None;
        Ok(())
    }
    fn on_train_end(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        self.stopped = Some(self.time_elapsed());
        Ok(())
    }
    fn on_train_batch_end(
        &mut self,
        trainer: &mut Trainer,
        _m: &mut dyn LightningModule,
        _o: &crate::StepOutput,
        _b: &pyrite_data::Sample,
        _i: usize,
    ) -> Result<()> {
        if self.options.interval == Interval::Step {
            self.check(trainer);
        }
        Ok(())
    }
    fn on_train_epoch_end(&mut self, trainer: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        if self.options.interval == Interval::Epoch {
            self.check(trainer);
        }
        Ok(())
    }
    fn state_dict(&self) -> Object {
        dict_of(vec![(
            "time_elapsed",
            dict_of(vec![("train", Object::Float(self.time_elapsed().as_secs_f64()))]),
        )])
    }
    fn load_state_dict(&mut self, state: &Object) -> Result<()> {
        if let Some(s) = state.get("time_elapsed").and_then(|t| t.get("train")).and_then(Object::as_float) {
            self.offset = Duration::from_secs_f64(s.max(0.0));
        }
        Ok(())
    }
}
