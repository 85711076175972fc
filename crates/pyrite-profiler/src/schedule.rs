//! `torch.profiler.schedule` and `ProfilerAction`.

use pyrite_core::{bail, Result};
use std::sync::Arc;

/// What the profiler does during a step (PyTorch's `ProfilerAction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProfilerAction {
    /// Not recording.
    None,
    /// Getting ready; nothing is kept (PyTorch records and drops; we record nothing).
    Warmup,
    /// Recording.
    Record,
    /// Recording; the trace is handed to `on_trace_ready` when the step ends.
    RecordAndSave,
}

impl ProfilerAction {
    /// PyTorch's name (`RECORD_AND_SAVE`).
    pub fn name(self) -> &'static str {
        match self {
            ProfilerAction::None => "NONE",
            ProfilerAction::Warmup => "WARMUP",
            ProfilerAction::Record => "RECORD",
            ProfilerAction::RecordAndSave => "RECORD_AND_SAVE",
        }
    }
}

/// The parameters of [`schedule`], as in `torch.profiler.schedule(wait=, warmup=, active=,
/// repeat=0, skip_first=0, skip_first_wait=0)`. PyTorch has no defaults for `wait`,
/// `warmup` and `active`; ours (0, 0, 1) record every step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleOptions {
    /// Steps not recorded at the start of each cycle.
    pub wait: u64,
    /// Steps of warm-up before recording.
    pub warmup: u64,
    /// Steps recorded per cycle (at least 1); the trace is ready after the last one.
    pub active: u64,
    /// Number of cycles; 0 repeats until the profiler stops.
    pub repeat: u64,
    /// Steps skipped once, before the first cycle.
    pub skip_first: u64,
    /// Nonzero: the first cycle skips its `wait` steps.
    pub skip_first_wait: u64,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions { wait: 0, warmup: 0, active: 1, repeat: 0, skip_first: 0, skip_first_wait: 0 }
    }
}

/// A function from step number to [`ProfilerAction`] (the profiler's `schedule` argument).
#[derive(Clone)]
pub struct Schedule {
    f: Arc<dyn Fn(u64) -> ProfilerAction + Send + Sync>,
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schedule")
    }
}

impl Schedule {
    /// A schedule from any function of the step number.
    pub fn from_fn(f: impl Fn(u64) -> ProfilerAction + Send + Sync + 'static) -> Schedule {
        Schedule { f: Arc::new(f) }
    }

    /// The action for step `step`.
    pub fn action(&self, step: u64) -> ProfilerAction {
        (self.f)(step)
    }
}

/// `torch.profiler.schedule(...)`: skip `skip_first` steps, then cycles of `wait` idle steps,
/// `warmup` steps and `active` recorded steps (the last one `RecordAndSave`), `repeat` times
/// (0: forever). Fails for `active == 0`, as PyTorch does.
///
/// ```
/// use pyrite_profiler::{schedule, ProfilerAction, ScheduleOptions};
/// let s = schedule(ScheduleOptions { wait: 1, warmup: 1, active: 2, repeat: 1, ..Default::default() })?;
/// let actions: Vec<ProfilerAction> = (0..5).map(|i| s.action(i)).collect();
/// use ProfilerAction::*;
/// assert_eq!(actions, [None, Warmup, Record, RecordAndSave, None]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn schedule(options: ScheduleOptions) -> Result<Schedule> {
    let ScheduleOptions { wait, warmup, active, repeat, skip_first, skip_first_wait } = options;
    if active == 0 {
        bail!(
            Value,
            "Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), skip_first={skip_first} (need >= 0)."
        );
    }
    Ok(Schedule::from_fn(move |step| {
        if step < skip_first {
            return ProfilerAction::None;
        }
        let mut step = step - skip_first;
        if skip_first_wait != 0 {
            step += wait;
        }
        let num_steps = wait + warmup + active;
        if repeat > 0 && step / num_steps >= repeat {
            return ProfilerAction::None;
        }
        let mod_step = step % num_steps;
        if mod_step < wait {
            ProfilerAction::None
        } else if mod_step < wait + warmup {
            ProfilerAction::Warmup
        } else if mod_step < num_steps - 1 {
            ProfilerAction::Record
        } else {
            ProfilerAction::RecordAndSave
        }
    }))
}
