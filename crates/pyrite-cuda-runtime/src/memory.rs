//! Device memory: one [`CachingAllocator`] per device drawing on `cuMemAlloc`, the
//! [`CudaBuffer`] a storage owns, copies between host and device, and pinned host memory.

use crate::caching_allocator::{Allocation, CachingAllocator, RawMemory};
use crate::driver::{context, device_count, driver_error};
use crate::stream::{current_stream, Stream};
use crate::{cuda_bail, Result};
use cudarc::driver::result as cu;
use std::sync::OnceLock;

/// `cuMemAlloc` / `cuMemFree` / `cuMemGetInfo` on one device.
struct DeviceMemory {
    device: usize,
}

impl RawMemory for DeviceMemory {
    fn malloc(&self, bytes: usize) -> Option<u64> {
        context(self.device).ok()?;
        // SAFETY: the device's context is current; the pointer is freed once, by `free`.
        unsafe { cu::malloc_sync(bytes) }.ok()
    }
    fn free(&self, ptr: u64) {
        if context(self.device).is_ok() {
            // SAFETY: `ptr` came from `malloc` above and the allocator frees it once. Work
            // queued on it has finished: cuMemFree synchronizes the device.
            let _ = unsafe { cu::free_sync(ptr) };
        }
    }
    fn mem_get_info(&self) -> (u64, u64) {
        match context(self.device)
            .and_then(|_| cu::mem_get_info().map_err(|e| driver_error("cuMemGetInfo", e)))
        {
            Ok((f, t)) => (f as u64, t as u64),
            Err(_) => (0, 0),
        }
    }
}

/// The owners of host memory that queued asynchronous copies still read, each with the event
/// after its copy.
static HOLDS: std::sync::Mutex<Vec<(crate::stream::Event, Box<dyn std::any::Any + Send>)>> =
    std::sync::Mutex::new(Vec::new());

/// Lets go of the host memory of the asynchronous copies that are done (called at each new
/// one and by [`crate::driver::synchronize`]).
pub fn release_finished_holds() {
    let done: Vec<_> = {
        let mut holds = HOLDS.lock().unwrap_or_else(|e| e.into_inner());
        let (done, pending) =
            std::mem::take(&mut *holds).into_iter().partition(|(e, _)| e.query().unwrap_or(true));
        *holds = pending;
        done
    };
    // Dropped outside the lock: an owner's drop may free memory, which may come back here.
    drop(done);
}

/// How many asynchronous copies may still be reading host memory.
pub fn pending_host_copies() -> usize {
    HOLDS.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// The caching allocator of `device`, made on first use.
pub fn allocator(device: usize) -> Result<&'static CachingAllocator> {
    crate::driver::check_device(device)?;
    static ALLOCATORS: OnceLock<Vec<CachingAllocator>> = OnceLock::new();
    let all = ALLOCATORS.get_or_init(|| {
        (0..device_count())
            .map(|d| {
                if crate::emulated() {
                    return CachingAllocator::new(d, Box::new(crate::emulator::HostMemory));
                }
                CachingAllocator::new(d, Box::new(DeviceMemory { device: d }))
            })
            .collect()
    });
    Ok(&all[device])
}

/// (free, total) bytes as the device's memory source reports them.
pub(crate) fn raw_mem_get_info(device: usize) -> (u64, u64) {
    if crate::emulated() {
        return crate::emulator::HostMemory.mem_get_info();
    }
    DeviceMemory { device }.mem_get_info()
}

/// Device memory owned by one storage: a block of the device's caching allocator, returned to
/// the cache when dropped (and reusable at once by work queued later on the same stream, as in
/// PyTorch).
#[derive(Debug)]
pub struct CudaBuffer {
    allocation: Option<Allocation>,
    device: usize,
    bytes: usize,
}

impl CudaBuffer {
    /// `bytes` of uninitialized memory on `device`, for use on the current stream.
    pub fn new(device: usize, bytes: usize) -> Result<CudaBuffer> {
        let stream = current_stream(device)?;
        let a = allocator(device)?.malloc(bytes, stream.id())?;
        Ok(CudaBuffer { allocation: Some(a), device, bytes })
    }
    /// The device ordinal.
    pub fn device(&self) -> usize {
        self.device
    }
    /// Bytes requested.
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }
    /// The device address of byte 0 (0 for an empty buffer).
    pub fn ptr(&self) -> u64 {
        self.allocation.as_ref().map_or(0, |a| a.ptr)
    }
    /// The block's rounded size in the allocator.
    pub fn capacity(&self) -> usize {
        self.allocation.as_ref().map_or(0, |a| a.size)
    }

    /// Copies `src` into bytes `offset..` on `stream`; returns when the host memory may be
    /// reused (pageable memory is staged by the driver).
    pub fn copy_from_host(&self, offset: usize, src: &[u8], stream: &Stream) -> Result<()> {
        self.check_range("copy_from_host", offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let launch = crate::activity::Launch {
            kind: crate::activity::ActivityKind::Memcpy,
            name: "Memcpy HtoD (Pageable -> Device)",
            api: "cuMemcpyHtoDAsync",
            grid: 0,
            block: 0,
            bytes: src.len() as u64,
        };
        crate::activity::record(launch, stream, || {
            if crate::emulated() {
                // SAFETY: the range lies inside this buffer, which is host memory here.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr(),
                        (self.ptr() + offset as u64) as *mut u8,
                        src.len(),
                    )
                };
                return Ok(());
            }
            let _ctx = context(self.device)?;
            // SAFETY: the range lies inside this buffer; the driver copies pageable memory before
            // returning.
            unsafe { cu::memcpy_htod_async(self.ptr() + offset as u64, src, stream.cu_stream()) }
                .map_err(|e| driver_error("cuMemcpyHtoDAsync", e))
        })?;
        stream.synchronize()
    }

    /// Queues a copy of the `len` bytes at `src` into bytes `offset..` on `stream` and returns
    /// at once (`non_blocking=True` from pinned memory: the copy overlaps with what the host
    /// does next). `hold`, the owner of the host memory, is kept until the stream has done the
    /// copy ([`release_finished_holds`]); the emulated device copies at once.
    ///
    /// # Safety
    /// `src..src + len` must be page-locked host memory that stays valid while `hold` lives;
    /// writes to it before the copy is done race with the copy (as in PyTorch).
    pub unsafe fn copy_from_host_async(
        &self,
        offset: usize,
        src: *const u8,
        len: usize,
        stream: &Stream,
        hold: Box<dyn std::any::Any + Send>,
    ) -> Result<()> {
        self.check_range("copy_from_host_async", offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the caller guarantees `len` readable bytes at `src` while `hold` lives.
        let bytes = unsafe { std::slice::from_raw_parts(src, len) };
        let launch = crate::activity::Launch {
            kind: crate::activity::ActivityKind::Memcpy,
            name: "Memcpy HtoD (Pinned -> Device)",
            api: "cuMemcpyHtoDAsync",
            grid: 0,
            block: 0,
            bytes: len as u64,
        };
        crate::activity::record(launch, stream, || {
            if crate::emulated() {
                // SAFETY: the range lies inside this buffer, which is host memory here.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        (self.ptr() + offset as u64) as *mut u8,
                        len,
                    )
                };
                return Ok(());
            }
            let _ctx = context(self.device)?;
            // SAFETY: the range lies inside this buffer; the host memory is page-locked and
            // outlives the copy (held below until the stream passes it).
            unsafe { cu::memcpy_htod_async(self.ptr() + offset as u64, bytes, stream.cu_stream()) }
                .map_err(|e| driver_error("cuMemcpyHtoDAsync", e))
        })?;
        if crate::emulated() {
            return Ok(());
        }
        let done = crate::stream::Event::new(self.device, false)?;
        done.record(stream)?;
        release_finished_holds();
        HOLDS.lock().unwrap_or_else(|e| e.into_inner()).push((done, hold));
        Ok(())
    }

    /// Copies bytes `offset..offset + dst.len()` into `dst`, waiting for the work queued on
    /// `stream` first (`tensor.cpu()` blocks).
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8], stream: &Stream) -> Result<()> {
        self.check_range("copy_to_host", offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        let launch = crate::activity::Launch {
            kind: crate::activity::ActivityKind::Memcpy,
            name: "Memcpy DtoH (Device -> Pageable)",
            api: "cuMemcpyDtoHAsync",
            grid: 0,
            block: 0,
            bytes: dst.len() as u64,
        };
        crate::activity::record(launch, stream, || {
            if crate::emulated() {
                // SAFETY: the range lies inside this buffer, which is host memory here.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (self.ptr() + offset as u64) as *const u8,
                        dst.as_mut_ptr(),
                        dst.len(),
                    )
                };
                return Ok(());
            }
            let _ctx = context(self.device)?;
            // SAFETY: the range lies inside this buffer; `dst` outlives the copy because we wait.
            unsafe { cu::memcpy_dtoh_async(dst, self.ptr() + offset as u64, stream.cu_stream()) }
                .map_err(|e| driver_error("cuMemcpyDtoHAsync", e))
        })?;
        stream.synchronize()
    }

    /// Queues a copy of `bytes` from `src` (at `src_offset`) into this buffer at `offset`.
    pub fn copy_from_device(
        &self,
        offset: usize,
        src: &CudaBuffer,
        src_offset: usize,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.check_range("copy_from_device", offset, bytes)?;
        src.check_range("copy_from_device", src_offset, bytes)?;
        if bytes == 0 {
            return Ok(());
        }
        let launch = crate::activity::Launch {
            kind: crate::activity::ActivityKind::Memcpy,
            name: "Memcpy DtoD (Device -> Device)",
            api: "cuMemcpyDtoDAsync",
            grid: 0,
            block: 0,
            bytes: bytes as u64,
        };
        crate::activity::record(launch, stream, || {
            if crate::emulated() {
                // SAFETY: both ranges lie inside live host buffers.
                unsafe {
                    std::ptr::copy(
                        (src.ptr() + src_offset as u64) as *const u8,
                        (self.ptr() + offset as u64) as *mut u8,
                        bytes,
                    )
                };
                return Ok(());
            }
            let _ctx = context(self.device)?;
            // SAFETY: both ranges lie inside live buffers; the copy is stream-ordered with the
            // kernels that use them. Across devices, unified addressing makes the copy a peer copy.
            unsafe {
                cu::memcpy_dtod_async(
                    self.ptr() + offset as u64,
                    src.ptr() + src_offset as u64,
                    bytes,
                    stream.cu_stream(),
                )
            }
            .map_err(|e| driver_error("cuMemcpyDtoDAsync", e))
        })
    }

    /// Queues a fill of every byte with `value` (zeros: `torch.zeros`).
    pub fn fill_bytes(&self, value: u8, stream: &Stream) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        let launch = crate::activity::Launch {
            kind: crate::activity::ActivityKind::Memset,
            name: "Memset (Device)",
            api: "cuMemsetD8Async",
            grid: 0,
            block: 0,
            bytes: self.bytes as u64,
        };
        crate::activity::record(launch, stream, || {
            if crate::emulated() {
                // SAFETY: the whole range belongs to this host buffer.
                unsafe { std::ptr::write_bytes(self.ptr() as *mut u8, value, self.bytes) };
                return Ok(());
            }
            let _ctx = context(self.device)?;
            // SAFETY: the whole range belongs to this buffer.
            unsafe { cu::memset_d8_async(self.ptr(), value, self.bytes, stream.cu_stream()) }
                .map_err(|e| driver_error("cuMemsetD8Async", e))
        })
    }

    fn check_range(&self, what: &str, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.bytes) {
            cuda_bail!(
                Value,
                "{what}: bytes {offset}..{} outside a buffer of {} bytes",
                offset + len,
                self.bytes
            );
        }
        Ok(())
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if let Some(a) = self.allocation.take()
            && let Ok(alloc) = allocator(self.device)
        {
            alloc.free(a);
        }
    }
}

/// Page-locked host memory (`cuMemHostAlloc`): copies from it to the device run at full
/// bandwidth and can overlap with kernels (`pin_memory`, `non_blocking=True`).
pub struct PinnedBuffer {
    ptr: *mut u8,
    bytes: usize,
    /// Allocated by the driver (else, on the emulated device, by Rust's allocator).
    driver: bool,
}

// SAFETY: the buffer is plain host memory owned by this value.
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared access only reads.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// `bytes` of pinned host memory, zeroed.
    pub fn new(bytes: usize) -> Result<PinnedBuffer> {
        if crate::emulated() {
            let v = vec![0u8; bytes].into_boxed_slice();
            return Ok(PinnedBuffer { ptr: Box::into_raw(v) as *mut u8, bytes, driver: false });
        }
        let _ctx = context(crate::driver::current_device())?;
        let ptr = if bytes == 0 {
            std::ptr::null_mut()
        } else {
            // SAFETY: a plain allocation, freed in Drop.
            unsafe { cu::malloc_host(bytes, 0) }.map_err(|e| driver_error("cuMemHostAlloc", e))? as *mut u8
        };
        if !ptr.is_null() {
            // SAFETY: `bytes` bytes were just allocated at `ptr`.
            unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        }
        Ok(PinnedBuffer { ptr, bytes, driver: true })
    }
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: `bytes` initialized bytes live at `ptr` while self does.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }
    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.ptr.is_null() {
            return &mut [];
        }
        // SAFETY: as above, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if !self.driver {
            // SAFETY: made from a boxed slice of `bytes` bytes in `new`.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.bytes)) });
        } else if !self.ptr.is_null() {
            // SAFETY: allocated by cuMemHostAlloc in `new`, freed once.
            let _ = unsafe { cu::free_host(self.ptr as *mut std::ffi::c_void) };
        }
    }
}

/// Host memory page-locked in place (`cuMemHostRegister`): how `Tensor::pin_memory` pins a
/// buffer of the CPU allocator. Dropping it unregisters the memory, which must outlive it.
pub struct HostRegistration {
    ptr: usize,
    /// Registered with the driver (else the emulated device, whose memory is all host memory).
    driver: bool,
}

impl HostRegistration {
    /// Page-locks the `bytes` bytes at `ptr` for every context (`CU_MEMHOSTREGISTER_PORTABLE`).
    ///
    /// # Safety
    /// `ptr..ptr + bytes` is live host memory that outlives the registration.
    pub unsafe fn new(ptr: *mut u8, bytes: usize) -> Result<HostRegistration> {
        if crate::emulated() || bytes == 0 {
            return Ok(HostRegistration { ptr: ptr as usize, driver: false });
        }
        let _ctx = context(crate::driver::current_device())?;
        // SAFETY: the caller guarantees the range.
        let r = unsafe {
            cudarc::driver::sys::cuMemHostRegister_v2(
                ptr as *mut std::ffi::c_void,
                bytes,
                cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        };
        r.result().map_err(|e| driver_error("cuMemHostRegister", e))?;
        Ok(HostRegistration { ptr: ptr as usize, driver: true })
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        if self.driver {
            // SAFETY: registered in `new`, unregistered once.
            let _ = unsafe { cudarc::driver::sys::cuMemHostUnregister(self.ptr as *mut std::ffi::c_void) };
        }
    }
}
