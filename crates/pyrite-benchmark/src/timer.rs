//! `Timer` (`torch.utils.benchmark.Timer`): times a closure in blocks.

use crate::measurement::{Measurement, TaskSpec};
use pyrite_core::{bail, Result};
use std::time::Instant;

/// The options of [`Timer`], with PyTorch's defaults (`label`, `sub_label`, `description`,
/// `env`: for titles and tables; `num_threads` 1: the intra-op threads while timing).
#[derive(Clone, Debug)]
pub struct TimerOptions {
    /// What the setup closure does, for the rendering (PyTorch's `setup` code string).
    pub setup: String,
    pub label: Option<String>,
    pub sub_label: Option<String>,
    pub description: Option<String>,
    pub env: Option<String>,
    pub num_threads: usize,
}

impl Default for TimerOptions {
    fn default() -> Self {
        TimerOptions {
            setup: String::new(),
            label: None,
            sub_label: None,
            description: None,
            env: None,
            num_threads: 1,
        }
    }
}

/// The options of [`Timer::blocked_autorange`] (PyTorch's default `min_run_time` 0.2 s).
#[derive(Clone, Debug)]
pub struct BlockedAutorangeOptions {
    pub min_run_time: f64,
}

impl Default for BlockedAutorangeOptions {
    fn default() -> Self {
        BlockedAutorangeOptions { min_run_time: 0.2 }
    }
}

/// The options of [`Timer::adaptive_autorange`], with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct AdaptiveAutorangeOptions {
    /// Stop once the IQR is below this fraction of the median (default 0.1)...
    pub threshold: f64,
    /// ...and at least this much time was measured (default 0.01 s)...
    pub min_run_time: f64,
    /// ...or when this much was (default 10 s).
    pub max_run_time: f64,
}

impl Default for AdaptiveAutorangeOptions {
    fn default() -> Self {
        AdaptiveAutorangeOptions { threshold: 0.1, min_run_time: 0.01, max_run_time: 10.0 }
    }
}

/// Times a closure (PyTorch's `Timer(stmt, setup, ...)`; `stmt` names the closure in titles).
///
/// ```
/// use pyrite_benchmark::{BlockedAutorangeOptions, Timer, TimerOptions};
/// use pyrite_core::{DType, Tensor};
/// let x = Tensor::ones([64], DType::F32)?;
/// let mut timer = Timer::new("x.add(&x)", || x.add(&x).map(drop), TimerOptions::default());
/// let m = timer.blocked_autorange(BlockedAutorangeOptions { min_run_time: 0.01 })?;
/// assert!(m.median() > 0.0 && m.median() < 1e-3);
/// println!("{m}"); // x.add(&x) / Median: ... us / IQR: ... / N measurements, M runs per measurement, 1 thread
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub struct Timer<'a> {
    stmt: Box<dyn FnMut() -> Result<()> + 'a>,
    setup: Option<Box<dyn FnMut() -> Result<()> + 'a>>,
    spec: TaskSpec,
}

/// Sets the intra-op threads for a measurement and puts them back afterwards.
struct Threads(usize);

impl Threads {
    fn set(n: usize) -> Threads {
        let old = pyrite_core::get_num_threads();
        pyrite_core::set_num_threads(n);
        Threads(old)
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        pyrite_core::set_num_threads(self.0);
    }
}

impl<'a> Timer<'a> {
    /// A timer of `stmt` (called `name` in titles).
    pub fn new(name: &str, stmt: impl FnMut() -> Result<()> + 'a, options: TimerOptions) -> Timer<'a> {
        Timer {
            stmt: Box::new(stmt),
            setup: None,
            spec: TaskSpec {
                stmt: name.to_string(),
                setup: options.setup,
                label: options.label,
                sub_label: options.sub_label,
                description: options.description,
                env: options.env,
                num_threads: options.num_threads.max(1),
            },
        }
    }

    /// Runs `setup` once before each measurement (PyTorch's `setup`).
    pub fn with_setup(mut self, setup: impl FnMut() -> Result<()> + 'a) -> Timer<'a> {
        self.setup = Some(Box::new(setup));
        self
    }

    pub fn task_spec(&self) -> &TaskSpec {
        &self.spec
    }

    fn run_setup(&mut self) -> Result<()> {
        match &mut self.setup {
            Some(s) => s(),
            None => Ok(()),
        }
    }

    /// Seconds for `number` calls (at least 1 ns, as PyTorch's `_timeit`). The device is
    /// synchronized before the clock is read (a no-op on the CPU).
    fn time(&mut self, number: usize) -> Result<f64> {
        pyrite_core::device::synchronize();
        let t0 = Instant::now();
        for _ in 0..number {
            (self.stmt)()?;
        }
        pyrite_core::device::synchronize();
        Ok(t0.elapsed().as_secs_f64().max(1e-9))
    }

    /// `timeit(number)`: after a warm-up of `number / 100` calls (at least 2), one block of
    /// `number` calls (PyTorch's default is a million: pass what suits the statement).
    pub fn timeit(&mut self, number: usize) -> Result<Measurement> {
        if number == 0 {
            bail!(Value, "timeit: number must be at least 1");
        }
        let _t = Threads::set(self.spec.num_threads);
        self.run_setup()?;
        self.time((number / 100).max(2))?;
        let t = self.time(number)?;
        Ok(Measurement::new(number, vec![t], self.spec.clone()))
    }

    /// `repeat(repeat, number)`: `repeat` blocks of `number` calls, as Python's
    /// `timeit.Timer.repeat` (PyTorch's Timer raises NotImplementedError here and points to
    /// `blocked_autorange`; Pyrite offers timeit's meaning). Seconds per block.
    pub fn repeat(&mut self, repeat: usize, number: usize) -> Result<Vec<f64>> {
        let _t = Threads::set(self.spec.num_threads);
        self.run_setup()?;
        (0..repeat).map(|_| self.time(number)).collect()
    }

    /// `autorange()`: as Python's `timeit.Timer.autorange`, the first of 1, 2, 5, 10, 20, 50,
    /// ... calls that takes at least 0.2 s; returns (calls, seconds). (PyTorch's Timer raises
    /// NotImplementedError here.)
    pub fn autorange(&mut self) -> Result<(usize, f64)> {
        let _t = Threads::set(self.spec.num_threads);
        self.run_setup()?;
        let mut i = 1usize;
        loop {
            for j in [1, 2, 5] {
                let number = i * j;
                let t = self.time(number)?;
                if t >= 0.2 {
                    return Ok((number, t));
                }
            }
            i *= 10;
        }
    }

    /// PyTorch's block size: grows by 10 until the timer's own cost is under 0.01% of a block
    /// and a block takes at least `min_run_time / 1000`, or a block takes `min_run_time`.
    fn estimate_block_size(&mut self, min_run_time: f64) -> Result<usize> {
        let mut overheads = (0..5).map(|_| self.time(0)).collect::<Result<Vec<f64>>>()?;
        overheads.sort_by(f64::total_cmp);
        let overhead = overheads[2];
        let mut number = 1usize;
        loop {
            let t = self.time(number)?;
            if (overhead / t <= 1e-4 && t >= min_run_time / 1000.0)
                || t > min_run_time
                || number * 10 > 2147483647
            {
                return Ok(number);
            }
            number *= 10;
        }
    }

    /// `blocked_autorange(min_run_time)`: picks a block size that hides the timer's cost, then
    /// times blocks until `min_run_time` seconds were measured. The usual way to time.
    pub fn blocked_autorange(&mut self, options: BlockedAutorangeOptions) -> Result<Measurement> {
        if options.min_run_time.is_nan() || options.min_run_time < 0.0 {
            bail!(Value, "blocked_autorange: min_run_time must be a non-negative number of seconds");
        }
        let _t = Threads::set(self.spec.num_threads);
        self.run_setup()?;
        let number = self.estimate_block_size(options.min_run_time)?;
        let mut times = Vec::new();
        let mut total = 0.0;
        while total < options.min_run_time || times.is_empty() {
            let t = self.time(number)?;
            times.push(t);
            total += t;
        }
        Ok(Measurement::new(number, times, self.spec.clone()))
    }

    /// `adaptive_autorange(threshold, min_run_time, max_run_time)`: as `blocked_autorange`,
    /// but times blocks until their IQR is below `threshold` of the median (after more than
    /// three blocks and `min_run_time` seconds), or `max_run_time` seconds were spent.
    pub fn adaptive_autorange(&mut self, options: AdaptiveAutorangeOptions) -> Result<Measurement> {
        let _t = Threads::set(self.spec.num_threads);
        self.run_setup()?;
        let number = self.estimate_block_size(0.05)?;
        let mut times = Vec::new();
        let mut total = 0.0;
        loop {
            let t = self.time(number)?;
            times.push(t);
            total += t;
            let can_stop = times.len() > 3
                && Measurement::new(number, times.clone(), self.spec.clone())
                    .meets_confidence(options.threshold);
            if (total >= options.min_run_time && can_stop) || total > options.max_run_time {
                break;
            }
        }
        Ok(Measurement::new(number, times, self.spec.clone()))
    }
}
