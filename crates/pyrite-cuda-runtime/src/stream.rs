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
    raw: Arc<CudaStream>,
    device: usize,
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
        let raw = context(device)?.new_stream().map_err(|e| driver_error("cuStreamCreate", e))?;
        Ok(Stream { raw, device })
    }
    /// The device's default stream (`torch.cuda.default_stream`).
    pub fn default_stream(device: usize) -> Result<Stream> {
        Ok(Stream { raw: context(device)?.default_stream(), device })
    }
    /// The device.
    pub fn device(&self) -> usize {
        self.device
    }
    /// The handle's address: the allocator's key for per-stream reuse (`cuda_stream`).
    pub fn id(&self) -> u64 {
        self.raw.cu_stream() as u64
    }
    /// cudarc's stream.
    pub fn raw(&self) -> &Arc<CudaStream> {
        &self.raw
    }
    /// Waits until all work queued on the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.raw.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e))
    }
    /// Whether all work queued so far is done (`stream.query()`).
    pub fn query(&self) -> Result<bool> {
        let _ctx = context(self.device)?;
        // SAFETY: the stream handle is alive while self is.
        match unsafe { sys::cuStreamQuery(self.raw.cu_stream()) } {
            sys::cudaError_enum::CUDA_SUCCESS => Ok(true),
            sys::cudaError_enum::CUDA_ERROR_NOT_READY => Ok(false),
            e => Err(driver_error("cuStreamQuery", cudarc::driver::DriverError(e))),
        }
    }
    /// Makes later work on this stream wait for `event` (`stream.wait_event`).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.raw.wait(&event.raw).map_err(|e| driver_error("cuStreamWaitEvent", e))
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
    raw: CudaEvent,
    timing: bool,
}

impl Event {
    /// A new event on `device`; `enable_timing` as in PyTorch (off by default there).
    pub fn new(device: usize, enable_timing: bool) -> Result<Event> {
        let flags = if enable_timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        let raw = context(device)?.new_event(Some(flags)).map_err(|e| driver_error("cuEventCreate", e))?;
        Ok(Event { raw, timing: enable_timing })
    }
    /// Records the event at the current end of `stream` (`event.record(stream)`).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.raw.record(&stream.raw).map_err(|e| driver_error("cuEventRecord", e))
    }
    /// Waits until the work before the event is done.
    pub fn synchronize(&self) -> Result<()> {
        self.raw.synchronize().map_err(|e| driver_error("cuEventSynchronize", e))
    }
    /// Whether the work before the event is done.
    pub fn query(&self) -> Result<bool> {
        self.raw.try_is_complete().map_err(|e| driver_error("cuEventQuery", e))
    }
    /// Milliseconds between this event and `end` (`start.elapsed_time(end)`); both must have
    /// been made with timing enabled and have completed.
    pub fn elapsed_time(&self, end: &Event) -> Result<f32> {
        if !self.timing || !end.timing {
            crate::cuda_bail!(Value, "Both events must be created with argument 'enable_timing=True'.");
        }
        self.raw.elapsed_ms(&end.raw).map_err(|e| driver_error("cuEventElapsedTime", e))
    }
}

/// `cudaProfilerStart()`: starts the range an external profiler (Nsight Systems with
/// `--capture-range=cudaProfilerApi`) records.
pub fn profiler_start() -> Result<()> {
    let _ctx = context(crate::driver::current_device())?;
    // SAFETY: no arguments; the context is current.
    unsafe { sys::cuProfilerStart() }.result().map_err(|e| driver_error("cuProfilerStart", e))
}

/// `cudaProfilerStop()`.
pub fn profiler_stop() -> Result<()> {
    let _ctx = context(crate::driver::current_device())?;
    // SAFETY: as above.
    unsafe { sys::cuProfilerStop() }.result().map_err(|e| driver_error("cuProfilerStop", e))
}
