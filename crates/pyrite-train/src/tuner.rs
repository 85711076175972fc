//! The batch-size finder (Lightning's `Tuner.scale_batch_size` and `BatchSizeFinder`): the
//! largest batch size whose training steps fit in memory, found by trying steps at growing
//! batch sizes until one runs out of memory.
//!
//! Two ways in:
//!
//! - [`scale_batch_size`] on a plain closure that runs one training step at a given batch
//!   size, for a hand-written loop;
//! - the [`BatchSizeFinder`](crate::callbacks::BatchSizeFinder) callback, or
//!   [`Tuner::scale_batch_size`], which run `steps_per_trial` real training steps of the
//!   module per trial, put the model, the optimizer and the random generator back as they
//!   were, and train on with the batch size found.
//!
//! An out-of-memory error ([`ErrorKind::OutOfMemory`]) means "does not fit"; any other error
//! stops the search and is returned. On CPU, an out-of-memory is what the allocator's memory
//! limit gives (`pyrite::memory::set_memory_limit`).
//!
//! ## The search, as Lightning's
//!
//! - `power`: start at `init_val` and double after each trial that fits; the first trial that
//!   runs out of memory ends the search with the last size that fitted. When the first trial
//!   already fails, the size is halved until one fits.
//! - `binsearch`: double the same way until a trial fails, then bisect between the last size
//!   that fitted and the first that failed, until they are 1 apart; the result is then reduced
//!   by `margin` (5 % by default; Lightning applies it in this mode only).
//! - The growth stops at `max_val` (8192) and once a batch size that fitted reaches the
//!   dataset's length; at most `max_trials` trials run.
//!
//! Checked against Lightning 2.6.6 itself (`reference/gen_batch_size_finder.py`): where
//! Lightning returns a size that fitted, Pyrite tries the same sizes and returns the same one.
//! Where Pyrite differs from Lightning on purpose: the result is always a size whose
//! trial fitted (Lightning may return `max_val`, or a halved or bisected size, untried), or
//! a size below it in binsearch's margin; a size known to fail is not tried again;
//! `max_trials` counts every trial in both modes (Lightning's binsearch counts only those
//! that fit), so at most `max_trials * steps_per_trial` steps run; when no size fits (batch
//! size 1 runs out of memory, or every trial did) the out-of-memory error is returned
//! instead of a size; and Lightning's dataset-length check of the size before a failed trial
//! is left out (with it, a size at or past the dataset's length that fails is retried).

use crate::callback::Callback;
use crate::callbacks::BatchSizeFinder;
use crate::module::LightningModule;
use crate::trainer::{FitOptions, Trainer};
use pyrite_core::{bail, Error, ErrorKind, Result};
use pyrite_data::DataLoader;
use std::str::FromStr;

/// How the batch size grows between trials (Lightning's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BatchSizeMode {
    /// `"power"`: double until a trial runs out of memory; keep the last that fitted.
    #[default]
    Power,
    /// `"binsearch"`: double until a trial runs out of memory, then bisect between the last
    /// size that fitted and the first that failed.
    BinSearch,
}

impl BatchSizeMode {
    /// Lightning's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchSizeMode::Power => "power",
            BatchSizeMode::BinSearch => "binsearch",
        }
    }
}

impl FromStr for BatchSizeMode {
    type Err = Error;
    /// `"power"` or `"binsearch"`, in any case, as Lightning's `mode.lower()`.
    fn from_str(s: &str) -> Result<BatchSizeMode> {
        match s.to_lowercase().as_str() {
            "power" => Ok(BatchSizeMode::Power),
            "binsearch" => Ok(BatchSizeMode::BinSearch),
            _ => bail!(Value, "`mode` should be either of ('power', 'binsearch'), got '{s}'"),
        }
    }
}

/// The batch-size finder's options, with Lightning's names and defaults.
#[derive(Clone, Debug)]
pub struct ScaleBatchSizeOptions {
    /// How the size grows (default [`BatchSizeMode::Power`]).
    pub mode: BatchSizeMode,
    /// Training steps per batch size (default 3): one step may fit where the next, with the
    /// optimizer's state made, does not.
    pub steps_per_trial: usize,
    /// The first batch size tried (default 2).
    pub init_val: usize,
    /// At most this many trials (default 25).
    pub max_trials: usize,
    /// The name the module takes the batch size under
    /// ([`LightningModule::set_batch_size`]; default `"batch_size"`). Only the Trainer uses it.
    pub batch_arg_name: String,
    /// In binsearch mode, the result is reduced by this fraction, as a safety buffer
    /// (default 0.05; in `[0, 1)`). Power mode's result is already at most half of a size
    /// that failed, and is not reduced (as in Lightning).
    pub margin: f64,
    /// The batch size does not grow past this (default 8192).
    pub max_val: usize,
    /// The number of samples: the size stops growing once a size that fitted reaches it
    /// (Lightning's check against the dataset's length). `None`: no such limit for
    /// [`scale_batch_size`]; the Trainer's finder then uses its training dataset's length.
    pub dataset_len: Option<usize>,
}

impl Default for ScaleBatchSizeOptions {
    fn default() -> Self {
        ScaleBatchSizeOptions {
            mode: BatchSizeMode::Power,
            steps_per_trial: 3,
            init_val: 2,
            max_trials: 25,
            batch_arg_name: "batch_size".into(),
            margin: 0.05,
            max_val: 8192,
            dataset_len: None,
        }
    }
}

impl ScaleBatchSizeOptions {
    /// Checks the options (every bad value is an error naming it).
    pub fn check(&self) -> Result<()> {
        if self.steps_per_trial == 0 {
            bail!(Value, "scale_batch_size: `steps_per_trial` must be at least 1, got 0");
        }
        if self.init_val == 0 {
            bail!(Value, "scale_batch_size: `init_val` must be at least 1, got 0");
        }
        if self.max_trials == 0 {
            bail!(Value, "scale_batch_size: `max_trials` must be at least 1, got 0");
        }
        if !(0.0..1.0).contains(&self.margin) {
            bail!(Value, "scale_batch_size: `margin` should be between 0 and 1, got {}", self.margin);
        }
        if self.max_val == 0 {
            bail!(Value, "scale_batch_size: `max_val` must be at least 1, got 0");
        }
        if self.init_val > self.max_val {
            bail!(
                Value,
                "scale_batch_size: `init_val` ({}) is greater than `max_val` ({})",
                self.init_val,
                self.max_val
            );
        }
        if self.dataset_len == Some(0) {
            bail!(Value, "scale_batch_size: the dataset is empty (`dataset_len` 0)");
        }
        Ok(())
    }
}

/// One trial of the search: a batch size and whether its steps fitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trial {
    pub batch_size: usize,
    pub fits: bool,
}

/// The search itself, on a function that runs one whole trial and says whether it fitted
/// (`Ok(false)`: out of memory). Returns the size found (margin applied) and the trials.
pub(crate) fn search(
    trial: &mut dyn FnMut(usize) -> Result<bool>,
    o: &ScaleBatchSizeOptions,
) -> Result<(usize, Vec<Trial>)> {
    o.check()?;
    let mut trials: Vec<Trial> = Vec::new();
    let mut run = |size: usize, trials: &mut Vec<Trial>| -> Result<bool> {
        let fits = trial(size)?;
        if !fits {
            // Lightning's `garbage_collection_cuda()` after an OOM.
            pyrite_core::memory::empty_cache();
        }
        trials.push(Trial { batch_size: size, fits });
        Ok(fits)
    };
    // Whether a size that fitted may still grow; prints why not.
    let may_grow = |size: usize| -> bool {
        if let Some(n) = o.dataset_len.filter(|&n| size >= n) {
            eprintln!("The batch size {size} is greater or equal than the length of your dataset: {n}.");
            return false;
        }
        if size >= o.max_val {
            eprintln!("Reached the maximum batch size limit of {}. Stopping search.", o.max_val);
            return false;
        }
        true
    };
    let doubled = |size: usize| -> usize {
        let next = size.saturating_mul(2);
        if next > o.max_val {
            eprintln!("Batch size {next} exceeds max_val limit {}, capping at {}", o.max_val, o.max_val);
            o.max_val
        } else {
            next
        }
    };
    let mut size = o.init_val;
    // The last size that fitted, the smallest that failed.
    let mut low: Option<usize> = None;
    let mut high: Option<usize> = None;
    for _ in 0..o.max_trials {
        let fits = run(size, &mut trials)?;
        if fits {
            low = Some(size);
            let next = match (o.mode, high) {
                (BatchSizeMode::BinSearch, Some(h)) => {
                    if h - size <= 1 {
                        break;
                    }
                    (h + size) / 2
                }
                _ => {
                    if !may_grow(size) {
                        break;
                    }
                    let next = doubled(size);
                    // Power mode never tries again a size that failed.
                    if high.is_some_and(|h| next >= h) {
                        break;
                    }
                    next
                }
            };
            eprintln!("Batch size {size} succeeded, trying batch size {next}");
            size = next;
        } else {
            high = Some(size);
            if let (BatchSizeMode::Power, Some(l)) = (o.mode, low) {
                // Lightning: "If we fail in power mode, half the size and return".
                eprintln!("Batch size {size} failed, trying batch size {l}");
                break;
            }
            let l = low.unwrap_or(0);
            if size - l <= 1 {
                break;
            }
            let next = match o.mode {
                BatchSizeMode::Power => size / 2,
                BatchSizeMode::BinSearch => (size + l) / 2,
            };
            eprintln!("Batch size {size} failed, trying batch size {next}");
            size = next;
        }
    }
    let Some(mut found) = low else {
        let smallest = trials.iter().map(|t| t.batch_size).min().unwrap_or(o.init_val);
        return Err(Error::new(
            ErrorKind::OutOfMemory,
            format!(
                "scale_batch_size: no batch size fits in memory: {} trial(s) ran out of memory, down to batch size {smallest}",
                trials.len()
            ),
        ));
    };
    if o.mode == BatchSizeMode::BinSearch && o.margin > 0.0 {
        let reduced = ((found as f64 * (1.0 - o.margin)) as usize).max(1);
        if reduced != found {
            eprintln!(
                "Applying margin of {:.1}%, reducing batch size from {found} to {reduced}",
                o.margin * 100.0
            );
            found = reduced;
        }
    }
    Ok((found, trials))
}

/// Runs `steps_per_trial` steps at one size; `Ok(false)` when one runs out of memory.
pub(crate) fn run_trial(
    step: &mut dyn FnMut(usize) -> Result<()>,
    batch_size: usize,
    steps_per_trial: usize,
) -> Result<bool> {
    for _ in 0..steps_per_trial {
        match step(batch_size) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::OutOfMemory => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The largest batch size whose steps fit in memory, for a hand-written loop
/// (Lightning's `Tuner.scale_batch_size` on a closure).
///
/// `step(batch_size)` runs ONE training step (forward, backward, optimizer step) on a batch
/// of that size; the finder calls it `steps_per_trial` times per size, at most
/// `max_trials * steps_per_trial` times in all. An [`ErrorKind::OutOfMemory`] error means the
/// size does not fit; any other error is returned at once. When even batch size 1 (or every
/// size tried) runs out of memory, the result is an out-of-memory error.
///
/// The closure's steps change the model: put it back afterwards (Lightning restores a
/// checkpoint; the [`BatchSizeFinder`] callback does that for the Trainer).
///
/// ```
/// use pyrite::memory::{set_memory_limit, memory_allocated};
/// use pyrite::train::tuner::{scale_batch_size, BatchSizeMode, ScaleBatchSizeOptions};
/// use pyrite::{Device, Error, ErrorKind};
/// // A pretend step that needs 1 KiB per sample, with 100 KiB free.
/// let mut step = |batch_size: usize| -> pyrite::Result<()> {
///     if batch_size * 1024 > 100 * 1024 {
///         return Err(Error::new(ErrorKind::OutOfMemory, "out of memory"));
///     }
///     Ok(())
/// };
/// let power = scale_batch_size(&mut step, ScaleBatchSizeOptions::default())?;
/// assert_eq!(power, 64);
/// let o = ScaleBatchSizeOptions { mode: BatchSizeMode::BinSearch, margin: 0.0, ..Default::default() };
/// assert_eq!(scale_batch_size(&mut step, o)?, 100);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn scale_batch_size<F: FnMut(usize) -> Result<()>>(
    mut step: F,
    options: ScaleBatchSizeOptions,
) -> Result<usize> {
    let steps = options.steps_per_trial;
    let mut trial = |bs: usize| run_trial(&mut step, bs, steps);
    let (found, _) = search(&mut trial, &options)?;
    eprintln!("Finished batch size finder, will continue with full run using batch size {found}");
    Ok(found)
}

/// Lightning's `Tuner`: tunes a Trainer's hyperparameters before training.
pub struct Tuner<'a> {
    trainer: &'a mut Trainer,
}

impl<'a> Tuner<'a> {
    pub fn new(trainer: &'a mut Trainer) -> Tuner<'a> {
        Tuner { trainer }
    }

    /// Finds the largest batch size whose training steps fit (`tuner.scale_batch_size(model,
    /// train_dataloaders, mode=..., ...)`): runs `fit` with a [`BatchSizeFinder`] that stops
    /// it once the size is found. The model, optimizer and generator are put back; the
    /// module is told the size ([`LightningModule::set_batch_size`]); the size is returned.
    /// Train with it by building the loader again with this `batch_size`, or add the
    /// [`BatchSizeFinder`] callback to the Trainer to find it and train in one `fit`.
    pub fn scale_batch_size(
        &mut self,
        module: &mut dyn LightningModule,
        train_dataloaders: &DataLoader,
        options: ScaleBatchSizeOptions,
    ) -> Result<usize> {
        if self.trainer.callback::<BatchSizeFinder>().is_some() {
            bail!(
                Value,
                "Trainer is already configured with a `BatchSizeFinder` callback. Please remove it if you want to use the Tuner."
            );
        }
        let mut finder = BatchSizeFinder::new(options)?;
        finder.early_exit = true;
        self.trainer.push_front_callback(Box::new(finder));
        let r = self.trainer.fit(module, train_dataloaders, FitOptions::default());
        let finder = self.trainer.remove_callback::<BatchSizeFinder>();
        r?;
        let found = finder.as_ref().and_then(|f| {
            let f: &dyn Callback = f.as_ref();
            f.as_any().downcast_ref::<BatchSizeFinder>().and_then(BatchSizeFinder::optimal_batch_size)
        });
        match found {
            Some(n) => Ok(n),
            None => {
                bail!(Value, "scale_batch_size: the batch size finder did not run (fast_dev_run is set?)")
            }
        }
    }
}
