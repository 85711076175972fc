//! `torch.profiler` for Pyrite: what ran, for how long, on which thread, with which shapes
//! and how much memory it took.
//!
//! [`profile`] starts a [`Profiler`]; while it records, every op entry point (`aten::addmm`,
//! `aten::conv2d`, ...), every backward node the autograd engine runs
//! (`autograd::engine::evaluate_function: AddmmBackward0` around `AddmmBackward0`), every
//! optimizer step (`Optimizer.step#Adam.step`), every batch a `DataLoader` yields
//! (`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`) and every
//! [`record_function`] range is recorded, on the thread that ran it. The result reads like
//! PyTorch's: [`Profile::key_averages`] and [`EventList::table`] print the same table,
//! [`Profile::export_chrome_trace`] writes the same Chrome trace (with forward-to-backward
//! "fwdbwd" arrows), [`schedule`] and [`tensorboard_trace_handler`] profile chosen steps of a
//! long run. [`Profile::export_flame_svg`] draws the ranges as a flame (icicle) chart.
//!
//! The recording itself lives in `pyrite_core::profiler_record`: with no profiler active,
//! each hook costs one relaxed atomic load.
//!
//! ```
//! use pyrite_profiler::{profile, record_function, ProfileOptions, TableOptions};
//! use pyrite_core::{DType, Tensor};
//! let x = Tensor::randn([8, 16], DType::F32)?;
//! let w = Tensor::randn([4, 16], DType::F32)?.requires_grad_(true)?;
//! let mut prof = profile(ProfileOptions { record_shapes: true, profile_memory: true, ..Default::default() })?;
//! {
//!     let _r = record_function("model_inference");
//!     x.linear(&w, None)?.sum()?.backward()?;
//! }
//! prof.stop()?;
//! let table = prof.key_averages(false).table(&TableOptions {
//!     sort_by: Some("cpu_time_total".into()),
//!     row_limit: 10,
//!     ..Default::default()
//! })?;
//! assert!(table.contains("model_inference") && table.contains("aten::linear"));
//! assert!(table.contains("autograd::engine::evaluate_function: SumBackward0"));
//! assert!(table.trim_end().lines().last().unwrap().starts_with("Self CPU time total: "));
//! let path = std::env::temp_dir().join(format!("pyrite-doc-trace-{}.json", std::process::id()));
//! prof.export_chrome_trace(&path)?;
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), pyrite_core::Error>(())
//! ```

mod events;
mod flame;
mod schedule;
mod trace;

pub use events::{format_memory, format_time, EventList, FunctionEvent, FunctionEventAvg, TableOptions};
pub use pyrite_core::profiler_record::{record_function, EventKind, Flow, OpGuard, ThreadInfo};
pub use schedule::{schedule, ProfilerAction, Schedule, ScheduleOptions};

use pyrite_core::profiler_record::{self as rec, RecordOptions};
use pyrite_core::{bail, Result};
use std::path::{Path, PathBuf};

/// What to record (PyTorch's `ProfilerActivity`, with its spelling).
#[allow(clippy::upper_case_acronyms)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProfilerActivity {
    /// Ops and ranges run on the CPU.
    CPU,
    /// What the GPUs ran: each kernel (cuBLAS calls included), copy and fill with its device
    /// time, the launch call that queued it (`cuLaunchKernel`) inside the op that made the
    /// call, and the op's `Self CUDA` / `CUDA total` times. Without a GPU, a warning and CPU
    /// activity only (as PyTorch's profiler).
    CUDA,
}

/// Called with each finished trace (PyTorch's `on_trace_ready`); an error is returned by the
/// [`Profiler::step`] or [`Profiler::stop`] that finished the trace.
pub type TraceHandler = Box<dyn FnMut(&Profile) -> Result<()>>;

/// The options of [`profile`], with PyTorch's defaults.
pub struct ProfileOptions {
    /// What to record; PyTorch's default: CPU, and CUDA when a GPU is available.
    pub activities: Vec<ProfilerActivity>,
    /// Record each op's input shapes and dtypes (`Input Dims` in the trace, the shapes column
    /// of `key_averages(true)`).
    pub record_shapes: bool,
    /// Record the memory each op allocates and frees (the memory columns of the table).
    pub profile_memory: bool,
    /// Which steps to record; `None` records from the start to [`Profiler::stop`].
    pub schedule: Option<Schedule>,
    /// Called with each finished trace.
    pub on_trace_ready: Option<TraceHandler>,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            activities: if pyrite_core::cuda_is_available() {
                vec![ProfilerActivity::CPU, ProfilerActivity::CUDA]
            } else {
                vec![ProfilerActivity::CPU]
            },
            record_shapes: false,
            profile_memory: false,
            schedule: None,
            on_trace_ready: None,
        }
    }
}

impl std::fmt::Debug for ProfileOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileOptions")
            .field("activities", &self.activities)
            .field("record_shapes", &self.record_shapes)
            .field("profile_memory", &self.profile_memory)
            .field("schedule", &self.schedule)
            .field("on_trace_ready", &self.on_trace_ready.is_some())
            .finish()
    }
}

/// One finished trace: the events recorded between a start and a stop of recording.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    events: Vec<FunctionEvent>,
    threads: Vec<ThreadInfo>,
    step_num: u64,
    record_shapes: bool,
    profile_memory: bool,
    /// Unix time, in nanoseconds, of the profiler clock's zero.
    base_unix_ns: u128,
}

impl Profile {
    fn collect(
        raw: Vec<rec::Event>,
        gpu: Vec<rec::GpuEvent>,
        threads: Vec<ThreadInfo>,
        step_num: u64,
        options: &RecordOptions,
    ) -> Profile {
        let since_base = rec::time_base().elapsed();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Profile {
            events: events::build(raw, gpu),
            threads,
            step_num,
            record_shapes: options.record_shapes,
            profile_memory: options.profile_memory,
            base_unix_ns: now.saturating_sub(since_base).as_nanos(),
        }
    }

    /// Every recorded range, by thread, start time and depth (PyTorch's `events()`).
    pub fn events(&self) -> &[FunctionEvent] {
        &self.events
    }

    /// The threads that recorded, with their names.
    pub fn threads(&self) -> &[ThreadInfo] {
        &self.threads
    }

    /// The profiler's step number when the trace was finished (`prof.step_num`).
    pub fn step_num(&self) -> u64 {
        self.step_num
    }

    /// `key_averages(group_by_input_shape)`: the events averaged per name (and per input
    /// shapes when `group_by_input_shape`).
    pub fn key_averages(&self, group_by_input_shape: bool) -> EventList {
        events::key_averages(&self.events, group_by_input_shape, self.profile_memory)
    }

    /// The Chrome Trace Event JSON of [`Profile::export_chrome_trace`].
    pub fn chrome_trace(&self) -> String {
        trace::chrome_trace(self).to_string()
    }

    /// `export_chrome_trace(path)`: writes the trace as Chrome Trace Event JSON
    /// (`{"traceEvents": [...]}`, times in microseconds), for `chrome://tracing`, Perfetto or
    /// TensorBoard. Written whole or not at all.
    pub fn export_chrome_trace(&self, path: impl AsRef<Path>) -> Result<()> {
        write_atomic(path.as_ref(), self.chrome_trace().as_bytes(), "export_chrome_trace")
    }

    /// The SVG of [`Profile::export_flame_svg`].
    pub fn flame_svg(&self) -> String {
        flame::flame_svg(self)
    }

    /// Writes a flame (icicle) chart of the trace as SVG: a band per thread, time from left
    /// to right, each range above the ranges it contains (hover for names and times).
    pub fn export_flame_svg(&self, path: impl AsRef<Path>) -> Result<()> {
        write_atomic(path.as_ref(), self.flame_svg().as_bytes(), "export_flame_svg")
    }
}

fn write_atomic(path: &Path, bytes: &[u8], what: &str) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if name.is_empty() {
        bail!(Value, "{what}: {} is not a file path", path.display());
    }
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let io = |e: std::io::Error| pyrite_core::err!(Io, "{what}: cannot write {}: {e}", path.display());
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// A running profiler (what `with torch.profiler.profile(...) as prof:` holds). Dropping it
/// stops it. It belongs to the thread that started it (it holds that thread's
/// `ProfilerStep#N` range), but records every thread.
pub struct Profiler {
    record: RecordOptions,
    schedule: Schedule,
    record_steps: bool,
    on_trace_ready: Option<TraceHandler>,
    step_num: u64,
    current: ProfilerAction,
    recording: bool,
    stopped: bool,
    step_range: Option<OpGuard>,
    last: Option<Profile>,
}

/// `torch.profiler.profile(...)`: starts profiling. Fails when another profiler is
/// recording.
pub fn profile(options: ProfileOptions) -> Result<Profiler> {
    let mut cuda = options.activities.contains(&ProfilerActivity::CUDA);
    if cuda && !pyrite_core::cuda_is_available() {
        eprintln!("warning: profile: ProfilerActivity::CUDA was asked for, but CUDA is not available: recording CPU activity only");
        cuda = false;
    }
    let record_steps = options.schedule.is_some();
    let schedule = options.schedule.unwrap_or_else(|| Schedule::from_fn(|_| ProfilerAction::Record));
    let current = schedule.action(0);
    let mut p = Profiler {
        record: RecordOptions {
            record_shapes: options.record_shapes,
            profile_memory: options.profile_memory,
            cuda,
        },
        schedule,
        record_steps,
        on_trace_ready: options.on_trace_ready,
        step_num: 0,
        current,
        recording: false,
        stopped: false,
        step_range: None,
        last: None,
    };
    p.transit(ProfilerAction::None, Some(current))?;
    p.open_step_range();
    Ok(p)
}

#[derive(Clone, Copy)]
enum Do {
    Start,
    Stop,
    Ready,
}

impl Profiler {
    fn open_step_range(&mut self) {
        if self.record_steps {
            self.step_range = Some(record_function(&format!("ProfilerStep#{}", self.step_num)));
        }
    }

    /// PyTorch's `_transit_action`: what happens between two actions (`None`: the stop).
    fn transit(&mut self, prev: ProfilerAction, cur: Option<ProfilerAction>) -> Result<()> {
        use ProfilerAction::*;
        let todo: &[Do] = match (prev, cur) {
            (None, Some(None | Warmup)) => &[],
            (None, Some(Record | RecordAndSave)) => &[Do::Start],
            (Warmup, Some(None)) => &[Do::Start, Do::Stop], // "Incorrect schedule" in PyTorch
            (Warmup, Some(Warmup)) => &[],
            (Warmup, Some(Record | RecordAndSave)) => &[Do::Start],
            (Record, Some(None | Warmup)) => &[Do::Stop], // "Incorrect schedule" in PyTorch
            (Record, Some(Record | RecordAndSave)) => &[],
            (RecordAndSave, Some(None | Warmup)) => &[Do::Stop, Do::Ready],
            (RecordAndSave, Some(Record | RecordAndSave)) => &[Do::Stop, Do::Ready, Do::Start],
            (None, Option::None) => &[],
            (Warmup, Option::None) => &[Do::Start, Do::Stop],
            (Record | RecordAndSave, Option::None) => &[Do::Stop, Do::Ready],
        };
        for &d in todo {
            match d {
                Do::Start => {
                    rec::start(self.record.clone())?;
                    self.recording = true;
                }
                Do::Stop => {
                    if self.recording {
                        self.recording = false;
                        let (raw, threads) = rec::stop_with_threads();
                        let gpu = if self.record.cuda { rec::take_gpu_events()? } else { Vec::new() };
                        self.last = Some(Profile::collect(raw, gpu, threads, self.step_num, &self.record));
                    }
                }
                Do::Ready => {
                    if let (Some(f), Some(p)) = (self.on_trace_ready.as_mut(), self.last.as_ref()) {
                        f(p)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// `prof.step()`: the next step starts. With a schedule, starts or finishes traces as it
    /// says (a finished trace goes to `on_trace_ready`).
    pub fn step(&mut self) -> Result<()> {
        if self.stopped {
            bail!(Value, "Profiler.step: the profiler was stopped");
        }
        self.step_range = None;
        let prev = self.current;
        self.step_num += 1;
        self.current = self.schedule.action(self.step_num);
        self.transit(prev, Some(self.current))?;
        self.open_step_range();
        Ok(())
    }

    /// `prof.stop()`: stops recording; the last trace goes to `on_trace_ready`. Stopping twice
    /// does nothing.
    pub fn stop(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        self.step_range = None;
        self.transit(self.current, None)
    }

    /// The current step number (`prof.step_num`).
    pub fn step_num(&self) -> u64 {
        self.step_num
    }

    /// The last finished trace, if any.
    pub fn profile(&self) -> Option<&Profile> {
        self.last.as_ref()
    }

    fn last_or_empty(&self) -> Profile {
        self.last.clone().unwrap_or_default()
    }

    /// `prof.events()` of the last finished trace (empty before one is finished).
    pub fn events(&self) -> &[FunctionEvent] {
        self.last.as_ref().map_or(&[], |p| p.events())
    }

    /// `prof.key_averages(group_by_input_shape)` of the last finished trace.
    pub fn key_averages(&self, group_by_input_shape: bool) -> EventList {
        match &self.last {
            Some(p) => p.key_averages(group_by_input_shape),
            None => EventList { events: Vec::new(), profile_memory: self.record.profile_memory },
        }
    }

    /// `prof.export_chrome_trace(path)` of the last finished trace. Fails when there is none.
    pub fn export_chrome_trace(&self, path: impl AsRef<Path>) -> Result<()> {
        match &self.last {
            Some(p) => p.export_chrome_trace(path),
            None => bail!(Value, "export_chrome_trace: no trace was recorded (stop the profiler first)"),
        }
    }

    /// [`Profile::export_flame_svg`] of the last finished trace (an empty chart when none).
    pub fn export_flame_svg(&self, path: impl AsRef<Path>) -> Result<()> {
        self.last_or_empty().export_flame_svg(path)
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// `torch.profiler.tensorboard_trace_handler(dir_name, worker_name)`: an `on_trace_ready`
/// that writes each trace to `dir_name/{worker_name}.{time_ns}.pt.trace.json`, where TensorBoard's
/// profiler plugin finds it. `worker_name` defaults to `{hostname}_{pid}`. The directory is
/// created when missing; failing to create or write it is an error of the step that finished
/// the trace.
pub fn tensorboard_trace_handler(dir_name: impl Into<PathBuf>, worker_name: Option<&str>) -> TraceHandler {
    let dir = dir_name.into();
    let worker =
        worker_name.map(str::to_owned).unwrap_or_else(|| format!("{}_{}", hostname(), std::process::id()));
    Box::new(move |p: &Profile| {
        std::fs::create_dir_all(&dir).map_err(|e| {
            pyrite_core::err!(Io, "tensorboard_trace_handler: cannot create {}: {e}", dir.display())
        })?;
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        p.export_chrome_trace(dir.join(format!("{worker}.{ns}.pt.trace.json")))
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
