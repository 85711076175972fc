//! Streams and events: a current stream per device and thread (`torch.cuda.current_stream`),
//! the [`StreamGuard`] that `with torch.cuda.stream(s):` becomes, and timing events.

use crate::driver::{context, driver_error};
use crate::Result;
use cudarc::driver::{sys, CudaEvent, CudaStream};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// A CUDA stream of one device (`torch.cuda.Stream`). Cloning shares it.
#[derive(Clone)]
pub struct Stream {
    raw: Raw,
    device: usize,
}

#[derive(Clone)]
enum Raw {
    Cuda(Arc<CudaStream>),
    /// The emulated device runs work as it is queued; streams only have identities.
    Emulated(u64),
}

fn next_emulated_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<torch.cuda.Stream device=cuda:{} cuda_stream={:#x}>", self.device, self.id())
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id() && self.device == other.device
    }
}

impl Stream {
    /// A new stream on `device` (`torch.cuda.Stream(device)`).
    pub fn new(device: usize) -> Result<Stream> {
        if crate::emulated() {
            crate::driver::check_device(device)?;
            return Ok(Stream { raw: Raw::Emulated(next_emulated_id()), device });
        }
        let raw = context(device)?.new_stream().map_err(|e| driver_error("cuStreamCreate", e))?;
        Ok(Stream { raw: Raw::Cuda(raw), device })
    }
    /// The device's default stream (`torch.cuda.default_stream`).
    pub fn default_stream(device: usize) -> Result<Stream> {
        if crate::emulated() {
            crate::driver::check_device(device)?;
            return Ok(Stream { raw: Raw::Emulated(0), device });
        }
        Ok(Stream { raw: Raw::Cuda(context(device)?.default_stream()), device })
    }
    /// The device.
    pub fn device(&self) -> usize {
        self.device
    }
    /// The handle's address: the allocator's key for per-stream reuse (`cuda_stream`).
    pub fn id(&self) -> u64 {
        match &self.raw {
            Raw::Cuda(s) => s.cu_stream() as u64,
            Raw::Emulated(id) => *id,
        }
    }
    /// cudarc's stream (`None` on the emulated device).
    pub fn cuda(&self) -> Option<&Arc<CudaStream>> {
        match &self.raw {
            Raw::Cuda(s) => Some(s),
            Raw::Emulated(_) => None,
        }
    }
    /// The raw `CUstream` (null for the emulated device).
    pub fn cu_stream(&self) -> sys::CUstream {
        self.cuda().map_or(std::ptr::null_mut(), |s| s.cu_stream())
    }
    /// Waits until all work queued on the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        match &self.raw {
            Raw::Cuda(s) => s.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e)),
            Raw::Emulated(_) => Ok(()),
        }
    }
    /// Whether all work queued so far is done (`stream.query()`).
    pub fn query(&self) -> Result<bool> {
        let Some(raw) = self.cuda() else { return Ok(true) };
        let _ctx = context(self.device)?;
        // SAFETY: the stream handle is alive while self is.
        match unsafe { sys::cuStreamQuery(raw.cu_stream()) } {
            sys::cudaError_enum::CUDA_SUCCESS => Ok(true),
            sys::cudaError_enum::CUDA_ERROR_NOT_READY => Ok(false),
            e => Err(driver_error("cuStreamQuery", cudarc::driver::DriverError(e))),
        }
    }
    /// Makes later work on this stream wait for `event` (`stream.wait_event`).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        match (&self.raw, &event.raw) {
            (Raw::Cuda(s), EventRaw::Cuda(e)) => s.wait(e).map_err(|e| driver_error("cuStreamWaitEvent", e)),
            _ => Ok(()),
        }
    }
    /// Makes later work on this stream wait for the work queued so far on `other`
    /// (`stream.wait_stream`).
    pub fn wait_stream(&self, other: &Stream) -> Result<()> {
        let e = Event::new(other.device, false)?;
        e.record(other)?;
        self.wait_event(&e)
    }
}

thread_local! {
    static CURRENT: RefCell<HashMap<usize, Stream>> = RefCell::new(HashMap::new());
}

/// `torch.cuda.current_stream(device)`: the stream this thread queues work on (the default
/// stream unless a [`StreamGuard`] says otherwise).
pub fn current_stream(device: usize) -> Result<Stream> {
    if let Some(s) = CURRENT.with(|c| c.borrow().get(&device).cloned()) {
        return Ok(s);
    }
    let s = Stream::default_stream(device)?;
    CURRENT.with(|c| c.borrow_mut().insert(device, s.clone()));
    Ok(s)
}

/// `with torch.cuda.stream(s):` — makes `s` the current stream of its device on this thread
/// until dropped.
pub struct StreamGuard {
    device: usize,
    previous: Option<Stream>,
}

impl StreamGuard {
    /// Makes `stream` current.
    pub fn new(stream: &Stream) -> StreamGuard {
        let previous = CURRENT.with(|c| c.borrow_mut().insert(stream.device, stream.clone()));
        StreamGuard { device: stream.device, previous }
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| {
            let mut m = c.borrow_mut();
            match self.previous.take() {
                Some(p) => m.insert(self.device, p),
                None => m.remove(&self.device),
            };
        });
    }
}

/// A CUDA event (`torch.cuda.Event`): marks a point in a stream, for waiting and timing.
pub struct Event {
    raw: EventRaw,
    timing: bool,
}

enum EventRaw {
    Cuda(CudaEvent),
    /// On the emulated device an event records the host clock.
    Emulated(std::sync::Mutex<Option<std::time::Instant>>),
}

impl Event {
    /// A new event on `device`; `enable_timing` as in PyTorch (off by default there).
    pub fn new(device: usize, enable_timing: bool) -> Result<Event> {
        let flags = if enable_timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        if crate::emulated() {
            crate::driver::check_device(device)?;
            return Ok(Event { raw: EventRaw::Emulated(std::sync::Mutex::new(None)), timing: enable_timing });
        }
        let raw = context(device)?.new_event(Some(flags)).map_err(|e| driver_error("cuEventCreate", e))?;
        Ok(Event { raw: EventRaw::Cuda(raw), timing: enable_timing })
    }
    /// Records the event at the current end of `stream` (`event.record(stream)`).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        match (&self.raw, &stream.raw) {
            (EventRaw::Cuda(e), Raw::Cuda(s)) => e.record(s).map_err(|e| driver_error("cuEventRecord", e)),
            (EventRaw::Emulated(t), _) => {
                *t.lock().unwrap() = Some(std::time::Instant::now());
                Ok(())
            }
            _ => crate::cuda_bail!(Value, "event and stream belong to different kinds of device"),
        }
    }
    /// Waits until the work before the event is done.
    pub fn synchronize(&self) -> Result<()> {
        match &self.raw {
            EventRaw::Cuda(e) => e.synchronize().map_err(|e| driver_error("cuEventSynchronize", e)),
            EventRaw::Emulated(_) => Ok(()),
        }
    }
    /// Whether the work before the event is done.
    pub fn query(&self) -> Result<bool> {
        match &self.raw {
            EventRaw::Cuda(e) => e.try_is_complete().map_err(|e| driver_error("cuEventQuery", e)),
            EventRaw::Emulated(_) => Ok(true),
        }
    }
    /// Milliseconds between this event and `end` (`start.elapsed_time(end)`); both must have
    /// been made with timing enabled and have completed.
    pub fn elapsed_time(&self, end: &Event) -> Result<f32> {
        if !self.timing || !end.timing {
            crate::cuda_bail!(Value, "Both events must be created with argument 'enable_timing=True'.");
        }
        match (&self.raw, &end.raw) {
            (EventRaw::Cuda(a), EventRaw::Cuda(b)) => {
                a.elapsed_ms(b).map_err(|e| driver_error("cuEventElapsedTime", e))
            }
            (EventRaw::Emulated(a), EventRaw::Emulated(b)) => {
                match (*a.lock().unwrap(), *b.lock().unwrap()) {
                    (Some(a), Some(b)) => Ok(b.saturating_duration_since(a).as_secs_f32() * 1000.0),
                    _ => {
                        crate::cuda_bail!(Value, "CUDA error: device not ready (an event was never recorded)")
                    }
                }
            }
            _ => crate::cuda_bail!(Value, "events of different kinds of device"),
        }
    }
}

/// `cudaProfilerStart()`: starts the range an external profiler (Nsight Systems with
/// `--capture-range=cudaProfilerApi`) records.
pub fn profiler_start() -> Result<()> {
    if crate::emulated() {
        return Ok(());
    }
    let _ctx = context(crate::driver::current_device())?;
    // SAFETY: no arguments; the context is current.
    unsafe { sys::cuProfilerStart() }.result().map_err(|e| driver_error("cuProfilerStart", e))
}

/// `cudaProfilerStop()`.
pub fn profiler_stop() -> Result<()> {
    if crate::emulated() {
        return Ok(());
    }
    let _ctx = context(crate::driver::current_device())?;
    // SAFETY: as above.
    unsafe { sys::cuProfilerStop() }.result().map_err(|e| driver_error("cuProfilerStop", e))
}
