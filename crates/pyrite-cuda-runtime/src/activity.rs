//! GPU activity for the profiler: when and for how long each kernel, cuBLAS call and copy ran
//! on its device (what CUPTI's activity records give PyTorch's profiler through Kineto).
//!
//! While [`start`]ed, every launch is bracketed by two timing events on its stream, and the
//! launching thread, the CPU time of the launch call and the kernel's geometry are noted.
//! [`stop`] waits for the devices, reads each pair of events, and places the device times on
//! the host clock through one base event per device (recorded on an idle stream at a known
//! host instant). Each record carries a correlation id that ties the launch call on the CPU to
//! its work on the GPU (the trace's `ac2g` arrows). With recording off a launch pays one
//! relaxed atomic load.

use crate::stream::{Event, Stream};
use crate::Result;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What ran on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActivityKind {
    /// A kernel (PyTorch's `kernel` category).
    Kernel,
    /// A copy to, from or within the device (`gpu_memcpy`).
    Memcpy,
    /// A fill (`gpu_memset`).
    Memset,
}

/// One piece of GPU work, on the host clock.
#[derive(Clone, Debug)]
pub struct Activity {
    pub kind: ActivityKind,
    /// The kernel's name (`add_f32_f32`, `cublasGemmEx`), or `Memcpy HtoD (Pageable -> Device)`.
    pub name: String,
    pub device: usize,
    /// The stream's id ([`Stream::id`]).
    pub stream: u64,
    /// Ties the launch call to this work (unique in the process).
    pub correlation: u64,
    /// The OS thread that launched it (`gettid`).
    pub tid: u64,
    /// The launch call on the CPU (`cuLaunchKernel`): its name, start and end.
    pub api: &'static str,
    pub api_start: Instant,
    pub api_end: Instant,
    /// When the device ran it.
    pub start: Instant,
    pub end: Instant,
    /// Blocks and threads per block of a kernel (0 for copies).
    pub grid: u32,
    pub block: u32,
    /// Bytes moved by a copy or fill (0 for kernels).
    pub bytes: u64,
}

struct Pending {
    kind: ActivityKind,
    name: String,
    device: usize,
    stream: u64,
    correlation: u64,
    tid: u64,
    api: &'static str,
    api_start: Instant,
    api_end: Instant,
    grid: u32,
    block: u32,
    bytes: u64,
    events: (Event, Event),
}

static ON: AtomicBool = AtomicBool::new(false);
static NEXT: AtomicU64 = AtomicU64::new(1);
static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());
/// Per device: an event and the host instant at which the device reached it.
static BASES: Mutex<Option<HashMap<usize, (Event, Instant)>>> = Mutex::new(None);

/// Whether GPU activity is being recorded.
#[inline(always)]
pub fn is_recording() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Starts recording (dropping whatever an earlier session left unread).
pub fn start() {
    lock(&PENDING).clear();
    *lock(&BASES) = Some(HashMap::new());
    ON.store(true, Ordering::SeqCst);
}

/// Stops recording and returns what ran, in launch order. Waits for the work recorded to
/// finish.
pub fn stop() -> Result<Vec<Activity>> {
    ON.store(false, Ordering::SeqCst);
    let pending = std::mem::take(&mut *lock(&PENDING));
    let bases = lock(&BASES).take().unwrap_or_default();
    let mut out = Vec::with_capacity(pending.len());
    for p in pending {
        let (start_ev, end_ev) = &p.events;
        end_ev.synchronize()?;
        let Some((base, at)) = bases.get(&p.device) else { continue };
        let offset = base.elapsed_time(start_ev)?.max(0.0);
        let dur = start_ev.elapsed_time(end_ev)?.max(0.0);
        let start = *at + Duration::from_secs_f64(offset as f64 / 1e3);
        out.push(Activity {
            kind: p.kind,
            name: p.name,
            device: p.device,
            stream: p.stream,
            correlation: p.correlation,
            tid: p.tid,
            api: p.api,
            api_start: p.api_start,
            api_end: p.api_end,
            start,
            end: start + Duration::from_secs_f64(dur as f64 / 1e3),
            grid: p.grid,
            block: p.block,
            bytes: p.bytes,
        });
    }
    Ok(out)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn os_tid() -> u64 {
    // SAFETY: gettid has no preconditions.
    (unsafe { libc::syscall(libc::SYS_gettid) }) as u64
}

/// What a recorded launch is: its kind, name, geometry and bytes.
pub(crate) struct Launch<'a> {
    pub kind: ActivityKind,
    pub name: &'a str,
    pub api: &'static str,
    pub grid: u32,
    pub block: u32,
    pub bytes: u64,
}

/// Runs `f` (which queues work on `stream`), bracketed by timing events while recording.
pub(crate) fn record<R>(launch: Launch<'_>, stream: &Stream, f: impl FnOnce() -> Result<R>) -> Result<R> {
    if !is_recording() {
        return f();
    }
    let device = stream.device();
    {
        let mut bases = lock(&BASES);
        if let Some(map) = bases.as_mut()
            && !map.contains_key(&device)
        {
            stream.synchronize()?;
            let base = Event::new(device, true)?;
            base.record(stream)?;
            base.synchronize()?;
            map.insert(device, (base, Instant::now()));
        }
    }
    let (start_ev, end_ev) = (Event::new(device, true)?, Event::new(device, true)?);
    let api_start = Instant::now();
    start_ev.record(stream)?;
    let r = f()?;
    end_ev.record(stream)?;
    let api_end = Instant::now();
    lock(&PENDING).push(Pending {
        kind: launch.kind,
        name: launch.name.to_string(),
        device,
        stream: stream.id(),
        correlation: NEXT.fetch_add(1, Ordering::Relaxed),
        tid: os_tid(),
        api: launch.api,
        api_start,
        api_end,
        grid: launch.grid,
        block: launch.block,
        bytes: launch.bytes,
        events: (start_ev, end_ev),
    });
    Ok(r)
}
