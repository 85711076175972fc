//! The profiler's recording path (what `pyrite::profiler` collects; PyTorch's `RecordFunction`).
//!
//! Ops open a range at entry with [`op`] (`aten::addmm`), user code with [`record_function`];
//! the range ends when the returned [`OpGuard`] is dropped, so ranges nest like the calls do
//! (`aten::linear` holds `aten::t` and `aten::addmm`). The autograd engine opens
//! `autograd::engine::evaluate_function: AddmmBackward0` around each backward node and the
//! node's own range (`AddmmBackward0`) inside it; the forward op that recorded the node and
//! that range share the node's sequence number (PyTorch's "fwdbwd" flow).
//!
//! When no profiler is active every hook is one relaxed atomic load and a branch; the rest
//! is out of line and `#[cold]` (as in [`crate::memory_history`]). When active, each thread
//! keeps its open ranges on a thread-local stack and appends finished ones to its own
//! buffer (registered once per thread, so that [`stop`] can collect the buffers of every
//! thread, including threads that have exited). With `profile_memory`, the allocator adds
//! the bytes it hands out (and takes back) to the innermost open range of the calling thread.
//!
//! ```
//! use pyrite_core::profiler_record::{self, RecordOptions};
//! use pyrite_core::{DType, Tensor};
//! let a = Tensor::ones([2, 2], DType::F32)?;
//! profiler_record::start(RecordOptions { record_shapes: true, ..Default::default() })?;
//! {
//!     let _r = profiler_record::record_function("my block");
//!     a.add(&a)?;
//! }
//! let events = profiler_record::stop();
//! let add = events.iter().find(|e| e.name == "aten::add").unwrap();
//! let block = events.iter().find(|e| e.name == "my block").unwrap();
//! assert_eq!(add.parent, Some(block.id));
//! assert_eq!(add.input_shapes, vec![vec![2, 2], vec![2, 2]]);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use crate::{bail, Result, Tensor};
use std::borrow::Cow;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Bit of [`STATE`]: ranges are recorded.
const ON: u8 = 1;
/// Bit of [`STATE`]: input shapes and dtypes are recorded.
const SHAPES: u8 = 2;

/// What is recorded now (0: nothing). Read relaxed by every hook.
static STATE: AtomicU8 = AtomicU8::new(0);
/// The recording session (incremented at every [`start`]): events of an older session that
/// end after it are dropped.
static SESSION: AtomicU64 = AtomicU64::new(0);
/// Ids of ranges, unique in the process (0 is never used).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Every thread's buffer, registered when the thread first records.
static BUFFERS: Mutex<Vec<Arc<Mutex<ThreadBuffer>>>> = Mutex::new(Vec::new());
/// Serializes [`start`] and [`stop`].
static CONTROL: Mutex<()> = Mutex::new(());

/// What kind of range an event is (the `cat` of the Chrome trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// An op (`aten::add`) or an autograd engine range: PyTorch's `cpu_op`.
    Op,
    /// A [`record_function`] range: PyTorch's `user_annotation`.
    UserAnnotation,
    /// A CUDA launch call on the CPU (`cuLaunchKernel`, `cuMemcpyHtoDAsync`): PyTorch's
    /// `cuda_runtime`. Made by the profiler from [`GpuEvent`]s, as are the three below.
    CudaRuntime,
    /// A kernel on a GPU (`kernel`).
    Kernel,
    /// A copy on a GPU (`gpu_memcpy`).
    GpuMemcpy,
    /// A fill on a GPU (`gpu_memset`).
    GpuMemset,
}

impl EventKind {
    /// The Chrome trace's `cat`.
    pub fn category(self) -> &'static str {
        match self {
            EventKind::Op => "cpu_op",
            EventKind::UserAnnotation => "user_annotation",
            EventKind::CudaRuntime => "cuda_runtime",
            EventKind::Kernel => "kernel",
            EventKind::GpuMemcpy => "gpu_memcpy",
            EventKind::GpuMemset => "gpu_memset",
        }
    }

    /// Whether the event ran on a GPU (its times are device times).
    pub fn on_device(self) -> bool {
        matches!(self, EventKind::Kernel | EventKind::GpuMemcpy | EventKind::GpuMemset)
    }
}

/// The role of an event in a forward-to-backward link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// The forward op that recorded the autograd node with this sequence number.
    Forward(u64),
    /// The backward node's own range (`AddmmBackward0`), for the node with this number.
    Backward(u64),
    /// The engine's `evaluate_function` range around it (carries the number, no arrow).
    Evaluate(u64),
}

impl Flow {
    /// The autograd node's sequence number.
    pub fn sequence_nr(self) -> u64 {
        match self {
            Flow::Forward(s) | Flow::Backward(s) | Flow::Evaluate(s) => s,
        }
    }
}

/// One finished range.
#[derive(Clone, Debug)]
pub struct Event {
    /// `aten::addmm`, `AddmmBackward0`, a [`record_function`] label.
    pub name: Cow<'static, str>,
    pub kind: EventKind,
    /// Unique in the process.
    pub id: u64,
    /// The range this one ran inside, on the same thread.
    pub parent: Option<u64>,
    /// The OS thread id (`gettid` on Linux).
    pub tid: u64,
    /// Nanoseconds since [`time_base`].
    pub start_ns: u64,
    pub dur_ns: u64,
    /// With `record_shapes`: each tensor input's sizes and PyTorch type name (`float`).
    pub input_shapes: Vec<Vec<usize>>,
    pub input_types: Vec<&'static str>,
    /// With `profile_memory`: bytes allocated minus bytes freed while this range was the
    /// innermost one on its thread (PyTorch's self CPU memory).
    pub self_memory: i64,
    /// A forward/backward link, if any.
    pub flow: Option<Flow>,
}

/// A thread's name as PyTorch's trace writes it, by tid.
#[derive(Clone, Debug)]
pub struct ThreadInfo {
    pub tid: u64,
    pub name: String,
}

/// What to record (the recording part of `torch.profiler.profile`'s options).
#[derive(Clone, Debug, Default)]
pub struct RecordOptions {
    /// Record each op's input shapes and dtypes.
    pub record_shapes: bool,
    /// Attribute tensor allocations and frees to the innermost open range.
    pub profile_memory: bool,
    /// Record the GPUs' work too (`ProfilerActivity::CUDA`): read it with
    /// [`take_gpu_events`] after [`stop`].
    pub cuda: bool,
}

/// What ran on a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuEventKind {
    /// A kernel (cuBLAS calls included).
    Kernel,
    /// A copy to, from or within a device.
    Memcpy,
    /// A fill.
    Memset,
}

/// One piece of work a GPU ran while recording, on the profiler clock (nanoseconds since
/// [`time_base`]), with the launch call that queued it.
#[derive(Clone, Debug)]
pub struct GpuEvent {
    pub kind: GpuEventKind,
    /// The kernel's name, `cublasGemmStridedBatchedEx`, or `Memcpy HtoD (Pageable -> Device)`.
    pub name: String,
    pub device: usize,
    pub stream: u64,
    /// Ties the launch call to the work (PyTorch's `correlation`).
    pub correlation: u64,
    /// The OS thread of the launch call.
    pub tid: u64,
    /// The launch call (`cuLaunchKernel`, `cuMemcpyHtoDAsync`) and its CPU time.
    pub api: &'static str,
    pub api_start_ns: u64,
    pub api_dur_ns: u64,
    /// The device's time.
    pub start_ns: u64,
    pub dur_ns: u64,
    /// A kernel's blocks and threads per block (0 when unknown, as for cuBLAS).
    pub grid: u32,
    pub block: u32,
    /// Bytes a copy or fill moved.
    pub bytes: u64,
}

/// The GPU work recorded by the last [`start`] with `cuda` (waits for it to finish); empty
/// without a CUDA backend.
pub fn take_gpu_events() -> Result<Vec<GpuEvent>> {
    #[cfg(feature = "cuda")]
    {
        use pyrite_cuda_runtime::activity::{self, ActivityKind};
        let ns = |i: Instant| i.saturating_duration_since(base()).as_nanos() as u64;
        let acts = activity::stop().map_err(|e| crate::Error::new(crate::ErrorKind::Device, e.message))?;
        Ok(acts
            .into_iter()
            .map(|a| GpuEvent {
                kind: match a.kind {
                    ActivityKind::Kernel => GpuEventKind::Kernel,
                    ActivityKind::Memcpy => GpuEventKind::Memcpy,
                    ActivityKind::Memset => GpuEventKind::Memset,
                },
                name: a.name,
                device: a.device,
                stream: a.stream,
                correlation: a.correlation,
                tid: a.tid,
                api: a.api,
                api_start_ns: ns(a.api_start),
                api_dur_ns: a.api_end.saturating_duration_since(a.api_start).as_nanos() as u64,
                start_ns: ns(a.start),
                dur_ns: a.end.saturating_duration_since(a.start).as_nanos() as u64,
                grid: a.grid,
                block: a.block,
                bytes: a.bytes,
            })
            .collect())
    }
    #[cfg(not(feature = "cuda"))]
    Ok(Vec::new())
}

struct ThreadBuffer {
    tid: u64,
    name: String,
    session: u64,
    events: Vec<Event>,
}

struct Open {
    id: u64,
    session: u64,
    name: Cow<'static, str>,
    kind: EventKind,
    start: Instant,
    input_shapes: Vec<Vec<usize>>,
    input_types: Vec<&'static str>,
    memory: i64,
    flow: Option<Flow>,
}

struct Local {
    buffer: Arc<Mutex<ThreadBuffer>>,
    tid: u64,
    stack: Vec<Open>,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// The instant event times count from (fixed for the process).
pub fn time_base() -> Instant {
    base()
}

/// Nanoseconds since [`time_base`] now.
pub fn now_ns() -> u64 {
    base().elapsed().as_nanos() as u64
}

fn os_tid() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        (unsafe { libc::syscall(libc::SYS_gettid) }) as u64
    }
    #[cfg(not(target_os = "linux"))]
    {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
}

/// Whether a profiler is recording.
#[inline(always)]
pub fn is_active() -> bool {
    STATE.load(Ordering::Relaxed) & ON != 0
}

/// Starts recording ranges on every thread. Fails if recording is already on (one profiler
/// at a time, as in PyTorch).
pub fn start(options: RecordOptions) -> Result<()> {
    let _c = CONTROL.lock().unwrap_or_else(|e| e.into_inner());
    if is_active() {
        bail!(Value, "Can't profile: another profiler is already running");
    }
    base();
    SESSION.fetch_add(1, Ordering::SeqCst);
    let mut state = ON;
    if options.record_shapes {
        state |= SHAPES;
    }
    STATE.store(state, Ordering::SeqCst);
    crate::alloc::set_alloc_hook(crate::alloc::HOOK_PROFILER, options.profile_memory);
    #[cfg(feature = "cuda")]
    if options.cuda {
        pyrite_cuda_runtime::activity::start();
    }
    Ok(())
}

/// Stops recording and returns every event recorded since [`start`], on all threads, in
/// no particular order (ranges still open are not included).
pub fn stop() -> Vec<Event> {
    stop_with_threads().0
}

/// [`stop`], with the names of the threads that recorded.
pub fn stop_with_threads() -> (Vec<Event>, Vec<ThreadInfo>) {
    let _c = CONTROL.lock().unwrap_or_else(|e| e.into_inner());
    STATE.store(0, Ordering::SeqCst);
    crate::alloc::set_alloc_hook(crate::alloc::HOOK_PROFILER, false);
    let session = SESSION.load(Ordering::SeqCst);
    let buffers = BUFFERS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut events = Vec::new();
    let mut threads = Vec::new();
    for b in buffers {
        let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
        if b.session == session && !b.events.is_empty() {
            threads.push(ThreadInfo { tid: b.tid, name: b.name.clone() });
            events.append(&mut b.events);
        }
        b.events = Vec::new();
    }
    (events, threads)
}

/// Ends a range when dropped (see [`op`], [`record_function`]).
#[must_use = "the range ends when the guard is dropped"]
pub struct OpGuard {
    /// The open range's id, 0 when nothing was recorded.
    id: u64,
    /// Ranges belong to their thread.
    _not_send: PhantomData<*const ()>,
}

impl OpGuard {
    const NONE: OpGuard = OpGuard { id: 0, _not_send: PhantomData };
}

impl Drop for OpGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.id != 0 {
            close(self.id);
        }
    }
}

/// Opens a range for op `name` (`"aten::addmm"`) on `inputs`. One relaxed load when no
/// profiler is active.
#[inline(always)]
pub fn op(name: &'static str, inputs: &[&Tensor]) -> OpGuard {
    if STATE.load(Ordering::Relaxed) & ON == 0 {
        return OpGuard::NONE;
    }
    open(Cow::Borrowed(name), EventKind::Op, inputs, None)
}

/// Runs `f` inside a range for op `name`: the out-of-line half of [`profiled!`] for the
/// hottest ops, whose fast path then holds no guard at all.
#[cold]
#[inline(never)]
pub(crate) fn run_profiled<R>(name: &'static str, inputs: &[&Tensor], f: impl FnOnce() -> R) -> R {
    let _g = open(Cow::Borrowed(name), EventKind::Op, inputs, None);
    f()
}

/// `profiled!("aten::add", [a, b], expr)`: `expr`, recorded as op `aten::add` when a
/// profiler is active. When none is, one relaxed load and a branch, and no guard.
macro_rules! profiled {
    ($name:expr, [$($t:expr),*], $body:expr) => {
        if $crate::profiler_record::is_active() {
            $crate::profiler_record::run_profiled($name, &[$($t),*], || $body)
        } else {
            $body
        }
    };
}
pub(crate) use profiled;

/// PyTorch's `torch.profiler.record_function(label)`: a user range named `label` until the
/// guard is dropped. Nothing is recorded (and nothing allocated) when no profiler is active.
#[inline(always)]
pub fn record_function(label: &str) -> OpGuard {
    if STATE.load(Ordering::Relaxed) & ON == 0 {
        return OpGuard::NONE;
    }
    open(Cow::Owned(label.to_owned()), EventKind::UserAnnotation, &[], None)
}

/// The engine's two ranges around backward node `name` with sequence number `seq`.
pub(crate) struct BackwardRanges {
    _node: OpGuard,
    _evaluate: OpGuard,
}

#[cold]
#[inline(never)]
pub(crate) fn backward_ranges(name: &str, seq: u64, grads: &[&Tensor]) -> BackwardRanges {
    let name = if name == "AccumulateGrad" { "torch::autograd::AccumulateGrad" } else { name };
    let evaluate = open(
        Cow::Owned(format!("autograd::engine::evaluate_function: {name}")),
        EventKind::Op,
        &[],
        Some(Flow::Evaluate(seq)),
    );
    let node = open(Cow::Owned(name.to_owned()), EventKind::Op, grads, Some(Flow::Backward(seq)));
    BackwardRanges { _node: node, _evaluate: evaluate }
}

/// The autograd recorder made node `seq` inside the innermost open range: that range is the
/// node's forward op.
#[cold]
#[inline(never)]
pub(crate) fn note_forward(seq: u64) {
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && let Some(top) = l.as_mut().and_then(|l| l.stack.last_mut())
            && top.flow.is_none()
        {
            top.flow = Some(Flow::Forward(seq));
        }
    });
}

fn new_local() -> Local {
    let tid = os_tid();
    let name = std::thread::current().name().unwrap_or("").to_owned();
    let buffer = Arc::new(Mutex::new(ThreadBuffer { tid, name, session: 0, events: Vec::new() }));
    BUFFERS.lock().unwrap_or_else(|e| e.into_inner()).push(buffer.clone());
    Local { buffer, tid, stack: Vec::new() }
}

#[cold]
#[inline(never)]
fn open(name: Cow<'static, str>, kind: EventKind, inputs: &[&Tensor], flow: Option<Flow>) -> OpGuard {
    let shapes = STATE.load(Ordering::Relaxed) & SHAPES != 0;
    let (input_shapes, input_types) = if shapes {
        (
            inputs.iter().map(|t| t.dims().to_vec()).collect(),
            inputs.iter().map(|t| t.dtype().cpp_name()).collect(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let session = SESSION.load(Ordering::Relaxed);
    let pushed = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else { return false };
        let l = l.get_or_insert_with(new_local);
        l.stack.push(Open {
            id,
            session,
            name,
            kind,
            start: Instant::now(),
            input_shapes,
            input_types,
            memory: 0,
            flow,
        });
        true
    });
    if pushed == Ok(true) {
        OpGuard { id, _not_send: PhantomData }
    } else {
        OpGuard::NONE
    }
}

#[cold]
#[inline(never)]
fn close(id: u64) {
    let end = Instant::now();
    let _ = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else { return };
        let Some(l) = l.as_mut() else { return };
        // Normally the top of the stack; a guard dropped out of order is found below it.
        let Some(pos) = l.stack.iter().rposition(|o| o.id == id) else { return };
        let o = l.stack.remove(pos);
        let parent = pos.checked_sub(1).map(|p| l.stack[p].id);
        let base = base();
        let start_ns = o.start.saturating_duration_since(base).as_nanos() as u64;
        let dur_ns = end.saturating_duration_since(o.start).as_nanos() as u64;
        let event = Event {
            name: o.name,
            kind: o.kind,
            id,
            parent,
            tid: l.tid,
            start_ns,
            dur_ns,
            input_shapes: o.input_shapes,
            input_types: o.input_types,
            self_memory: o.memory,
            flow: o.flow,
        };
        let mut b = l.buffer.lock().unwrap_or_else(|e| e.into_inner());
        if b.session != o.session {
            if b.session > o.session {
                return; // a range from an older profile, ended after a new one started
            }
            b.session = o.session;
            b.events.clear();
        }
        b.events.push(event);
    });
}

/// Records a finished op range on the calling thread that began at `start` and ends now,
/// for work that does not nest like calls (a communication thread's event loop runs several
/// operations at once: `mpi:all_reduce` spans from when the thread started it to its
/// completion). Nothing happens when no profiler is active.
pub fn record_span(name: &str, start: Instant, inputs: &[&Tensor]) {
    if STATE.load(Ordering::Relaxed) & ON == 0 {
        return;
    }
    let g = open(Cow::Owned(name.to_owned()), EventKind::Op, inputs, None);
    if g.id == 0 {
        return;
    }
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && let Some(o) = l.as_mut().and_then(|l| l.stack.last_mut())
            && o.id == g.id
        {
            o.start = start;
        }
    });
    drop(g);
}

/// The allocator handed out (positive) or took back (negative) `bytes` on this thread.
pub(crate) fn on_memory(bytes: i64) {
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && let Some(top) = l.as_mut().and_then(|l| l.stack.last_mut())
        {
            top.memory += bytes;
        }
    });
}
