//! The CPU caching allocator and PyTorch's memory-statistics API.
//!
//! Freed tensor buffers go back to a per-size-class free list instead of to the OS, so the next
//! tensor of a similar size reuses memory whose pages are already mapped (no page faults). This
//! is what PyTorch's CUDA caching allocator does; on the CPU it makes allocating ops several
//! times faster for large tensors. [`empty_cache`] hands the cached buffers back to the OS.
//!
//! ```
//! use pyrite_core::{memory, Device, Tensor};
//! let before = memory::memory_allocated(Device::Cpu).unwrap();
//! let t = Tensor::zeros([1024], pyrite_core::DType::F32).unwrap();
//! assert!(memory::memory_allocated(Device::Cpu).unwrap() >= before + 4096);
//! drop(t);
//! assert!(memory::memory_reserved(Device::Cpu).unwrap() >= memory::memory_allocated(Device::Cpu).unwrap());
//! ```

use crate::{bail, Device, Result};
use std::alloc::{alloc, alloc_zeroed, dealloc, Layout as AllocLayout};
use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Alignment of every buffer: a cache line, and enough for AVX-512 loads.
pub const ALIGN: usize = 64;
/// Buffers of at least this size are aligned to it and, on Linux, backed by transparent huge
/// pages where the system allows them (`madvise`; see [`huge_pages`]).
pub const HUGE_PAGE: usize = 2 << 20;

/// Whether buffers of [`HUGE_PAGE`] bytes or more ask for transparent huge pages: on Linux,
/// unless `PYRITE_THP=0`. One 2 MiB page replaces 512 small ones: a fresh buffer takes 512
/// times fewer page faults, and strided walks over big matrices (a matrix product reads
/// rows a page or more apart) miss the TLB far less. PyTorch offers the same behind
/// `THP_MEM_ALLOC_ENABLE=1`.
pub fn huge_pages() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| cfg!(target_os = "linux") && crate::env_switch("PYRITE_THP"))
}

/// The allocation layout of a buffer of capacity `cap` (the same for its allocation and its
/// release, since [`huge_pages`] never changes within a process).
fn layout_of(cap: usize) -> Option<AllocLayout> {
    let align = if cap >= HUGE_PAGE && huge_pages() { HUGE_PAGE } else { ALIGN };
    AllocLayout::from_size_align(cap, align).ok()
}

/// Allocates `layout`: huge buffers uninitialised and advised to use huge pages before their
/// first touch, the others zeroed (calloc maps fresh pages lazily, so zeroing is free).
///
/// # Safety
/// `layout` has a non-zero size.
unsafe fn allocate(layout: AllocLayout) -> *mut u8 {
    unsafe {
        if layout.align() < HUGE_PAGE {
            return alloc_zeroed(layout);
        }
        let p = alloc(layout);
        #[cfg(target_os = "linux")]
        if !p.is_null() {
            // Advice only: where the system refuses huge pages the buffer simply keeps small ones.
            libc::madvise(p as *mut libc::c_void, layout.size(), libc::MADV_HUGEPAGE);
        }
        p
    }
}
const SMALL_LIMIT: usize = 4096;
const N_CLASSES: usize = 64 + 8 * 52 + 1;

/// The size class a request of `bytes` is rounded up to: multiples of 64 bytes up to 4 KiB,
/// then eight classes per power of two (at most 12.5% waste).
fn class_of(bytes: usize) -> (usize, usize) {
    if bytes <= SMALL_LIMIT {
        let c = bytes.div_ceil(ALIGN).max(1);
        return (c, c * ALIGN);
    }
    let e = usize::BITS - 1 - (bytes - 1).leading_zeros(); // 2^e < bytes <= 2^(e+1)
    let step = 1usize << (e - 3);
    let cap = bytes.div_ceil(step) * step;
    let sub = cap / step - 8; // 1..=8
    let idx = 64 + (e as usize - 12) * 8 + sub;
    (idx.min(N_CLASSES - 1), cap)
}

#[derive(Default, Clone, Copy)]
struct Stat {
    current: u64,
    peak: u64,
    allocated: u64,
    freed: u64,
}

impl Stat {
    fn add(&mut self, n: u64) {
        self.current += n;
        self.allocated += n;
        self.peak = self.peak.max(self.current);
    }
    fn sub(&mut self, n: u64) {
        self.current -= n;
        self.freed += n;
    }
}

struct State {
    free: Vec<Vec<usize>>,
    allocated_bytes: Stat,
    reserved_bytes: Stat,
    allocation: Stat,
    segment: Stat,
    cached_bytes: u64,
    cache_limit: u64,
    num_ooms: u64,
    num_alloc_retries: u64,
    cache_hits: u64,
    /// The most bytes the allocator may reserve (`set_memory_limit`); `None`: no limit.
    memory_limit: Option<u64>,
}

/// The allocator's state behind a small spin lock: critical sections are a few dozen
/// instructions, and releasing is a plain store (a `Mutex` release is a read-modify-write),
/// which matters on the path of every tensor allocation.
struct SpinLock {
    locked: AtomicBool,
    state: UnsafeCell<Option<State>>,
}

// SAFETY: `state` is only reached through `SpinGuard`, which holds `locked`.
unsafe impl Sync for SpinLock {}

struct SpinGuard(&'static SpinLock);

impl std::ops::Deref for SpinGuard {
    type Target = Option<State>;
    fn deref(&self) -> &Option<State> {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.0.state.get() }
    }
}
impl std::ops::DerefMut for SpinGuard {
    fn deref_mut(&mut self) -> &mut Option<State> {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.0.state.get() }
    }
}
impl Drop for SpinGuard {
    fn drop(&mut self) {
        self.0.locked.store(false, Ordering::Release);
    }
}

static STATE: SpinLock = SpinLock { locked: AtomicBool::new(false), state: UnsafeCell::new(None) };

fn lock() -> SpinGuard {
    let mut spins = 0u32;
    while STATE.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    SpinGuard(&STATE)
}

fn state() -> SpinGuard {
    let mut g = lock();
    if g.is_none() {
        let limit = std::env::var("PYRITE_CPU_CACHE_LIMIT_MB")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(|mb| mb << 20)
            .unwrap_or(4 << 30);
        *g = Some(State {
            free: vec![Vec::new(); N_CLASSES],
            allocated_bytes: Stat::default(),
            reserved_bytes: Stat::default(),
            allocation: Stat::default(),
            segment: Stat::default(),
            cached_bytes: 0,
            cache_limit: limit,
            num_ooms: 0,
            num_alloc_retries: 0,
            cache_hits: 0,
            memory_limit: std::env::var("PYRITE_CPU_MEMORY_LIMIT_MB")
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .map(|mb| mb << 20),
        });
    }
    g
}

/// An aligned host buffer from the caching allocator; returned to it on drop. Fresh memory is
/// zeroed by the OS (lazily, page by page); reused memory holds what was last written.
pub struct CpuBuffer {
    ptr: NonNull<u8>,
    bytes: usize,
    cap: usize,
    class: usize,
    /// Page-locked for fast copies to a GPU ([`crate::Tensor::pin_memory`]); unregistered
    /// before the memory goes back to the cache.
    #[cfg(feature = "cuda")]
    pinned: Option<pyrite_cuda_runtime::memory::HostRegistration>,
}

// SAFETY: the buffer is plain memory owned by this value; access is synchronised by the
// `RwLock` in `StorageCell`.
unsafe impl Send for CpuBuffer {}
unsafe impl Sync for CpuBuffer {}

impl CpuBuffer {
    /// A buffer for `shape` elements of `elem_size` bytes; a shape whose byte size overflows
    /// is an error, as in PyTorch ("Storage size calculation overflowed").
    pub fn for_shape(shape: &crate::Shape, elem_size: usize) -> Result<CpuBuffer> {
        let bytes = shape.checked_numel().and_then(|n| n.checked_mul(elem_size));
        match bytes {
            Some(b) => CpuBuffer::new(b),
            None => bail!(OutOfMemory, "Storage size calculation overflowed with sizes={shape}"),
        }
    }

    /// A buffer for `n` elements of `elem_size` bytes; a byte size that overflows is an error.
    /// Every output buffer is sized through this or [`CpuBuffer::for_shape`], never by an
    /// unchecked product (a wrapped size would make a tensor larger than its storage).
    pub fn for_elems(n: usize, elem_size: usize) -> Result<CpuBuffer> {
        match n.checked_mul(elem_size) {
            Some(b) => CpuBuffer::new(b),
            None => {
                bail!(OutOfMemory, "Storage size calculation overflowed: {n} elements of {elem_size} bytes")
            }
        }
    }

    /// Whether the buffer is page-locked ([`CpuBuffer::pin`]).
    pub fn is_pinned(&self) -> bool {
        #[cfg(feature = "cuda")]
        return self.pinned.is_some();
        #[cfg(not(feature = "cuda"))]
        false
    }

    /// Page-locks the buffer for fast copies to a GPU (`cuMemHostRegister`); an error without
    /// a CUDA device.
    pub fn pin(&mut self) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            if self.pinned.is_none() {
                // SAFETY: the buffer's `cap` bytes live until `drop`, which unregisters first.
                let r = unsafe {
                    pyrite_cuda_runtime::memory::HostRegistration::new(self.ptr.as_ptr(), self.cap)
                };
                self.pinned = Some(r.map_err(|e| crate::Error::new(crate::ErrorKind::Device, e.message))?);
            }
            Ok(())
        }
        #[cfg(not(feature = "cuda"))]
        bail!(Device, "Cannot access accelerator device when none is available.")
    }

    /// Allocates `bytes` bytes (uninitialised), reusing a cached buffer when one fits.
    /// Fails (recoverably) when the system is out of memory.
    pub fn new(bytes: usize) -> Result<CpuBuffer> {
        if bytes > isize::MAX as usize {
            bail!(OutOfMemory, "CPU out of memory: tried to allocate {}", fmt_bytes(bytes as u64));
        }
        if bytes == 0 {
            return Ok(CpuBuffer {
                ptr: NonNull::<u64>::dangling().cast(),
                bytes: 0,
                cap: 0,
                class: 0,
                #[cfg(feature = "cuda")]
                pinned: None,
            });
        }
        let (class, cap) = class_of(bytes);
        {
            let mut g = state();
            let s = g.as_mut().unwrap();
            if let Some(addr) = s.free[class].pop() {
                s.cached_bytes -= cap as u64;
                s.allocated_bytes.add(cap as u64);
                s.allocation.add(1);
                s.cache_hits += 1;
                drop(g);
                let hooks = ALLOC_HOOKS.load(Ordering::Relaxed);
                if hooks != 0 {
                    on_alloc_hooks(hooks, addr, cap, bytes);
                }
                // SAFETY: addr came from a successful `alloc` of this class.
                return Ok(CpuBuffer {
                    ptr: unsafe { NonNull::new_unchecked(addr as *mut u8) },
                    bytes,
                    cap,
                    class,
                    #[cfg(feature = "cuda")]
                    pinned: None,
                });
            }
        }
        let layout = layout_of(cap)
            .ok_or_else(|| crate::err!(OutOfMemory, "CPU out of memory: cannot allocate {bytes} bytes"))?;
        // Within the memory limit, the bytes are reserved before the allocation, so threads
        // allocating at once cannot pass it together. Past it, the cache is freed and the
        // check made again, as PyTorch's allocator does (`num_alloc_retries`).
        let mut retried = false;
        loop {
            let mut g = state();
            let s = g.as_mut().unwrap();
            let fits = s.memory_limit.is_none_or(|l| s.reserved_bytes.current + cap as u64 <= l);
            if fits {
                s.reserved_bytes.add(cap as u64);
                break;
            }
            if retried || s.cached_bytes == 0 {
                s.num_ooms += 1;
                let limit = s.memory_limit.unwrap_or(0);
                let msg = format!(
                    "CPU out of memory. Tried to allocate {}. The process's memory limit is {} (set_memory_limit / set_per_process_memory_fraction), of which {} is free. Of the limit, {} is allocated by tensors, and {} is reserved by Pyrite's cache but unallocated. memory_summary() shows where the memory is.",
                    fmt_bytes(cap as u64),
                    fmt_bytes(limit),
                    fmt_bytes(limit.saturating_sub(s.reserved_bytes.current)),
                    fmt_bytes(s.allocated_bytes.current),
                    fmt_bytes(s.cached_bytes)
                );
                drop(g);
                if crate::memory_history::is_recording() {
                    crate::memory_history::on_oom(Device::Cpu, cap as u64);
                }
                return Err(crate::Error::new(crate::ErrorKind::OutOfMemory, msg));
            }
            s.num_alloc_retries += 1;
            retried = true;
            drop(g);
            empty_cache();
        }
        // SAFETY: cap > 0.
        let mut ptr = unsafe { allocate(layout) };
        if ptr.is_null() {
            // Free the cache and try once more, as PyTorch's allocator does.
            state().as_mut().unwrap().num_alloc_retries += 1;
            empty_cache();
            ptr = unsafe { allocate(layout) };
        }
        let mut g = state();
        let s = g.as_mut().unwrap();
        if ptr.is_null() {
            s.num_ooms += 1;
            s.reserved_bytes.current -= cap as u64; // the reservation made above, undone
            bail!(
                OutOfMemory,
                "CPU out of memory: tried to allocate {} ({} allocated by Pyrite, {} reserved)",
                fmt_bytes(cap as u64),
                fmt_bytes(s.allocated_bytes.current),
                fmt_bytes(s.reserved_bytes.current)
            );
        }
        s.allocated_bytes.add(cap as u64);
        s.allocation.add(1);
        s.segment.add(1);
        drop(g);
        let hooks = ALLOC_HOOKS.load(Ordering::Relaxed);
        if hooks != 0 {
            on_alloc_hooks(hooks, ptr as usize, cap, bytes);
        }
        // SAFETY: checked non-null above.
        Ok(CpuBuffer {
            ptr: unsafe { NonNull::new_unchecked(ptr) },
            bytes,
            cap,
            class,
            #[cfg(feature = "cuda")]
            pinned: None,
        })
    }

    /// Requested size in bytes.
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes held from the allocator: the request rounded up to its size class (what
    /// `memory_allocated` counts).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Raw pointer to the first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Raw mutable pointer to the first byte.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The buffer as elements of `T`. The caller must have initialised them (every constructor
    /// in this crate writes a buffer fully before it is read).
    pub fn as_slice<T: crate::Element>(&self) -> &[T] {
        // SAFETY: aligned to 64; length in whole elements; contents written by their creator.
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr() as *const T, self.bytes / std::mem::size_of::<T>())
        }
    }

    /// The buffer as mutable elements of `T`.
    pub fn as_mut_slice<T: crate::Element>(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` gives exclusive access.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr() as *mut T, self.bytes / std::mem::size_of::<T>())
        }
    }
}

/// Who watches allocations and frees: [`HOOK_HISTORY`] (memory history) and
/// [`HOOK_PROFILER`] (the profiler's `profile_memory`). One relaxed load per allocation and
/// free when nobody does.
static ALLOC_HOOKS: AtomicU8 = AtomicU8::new(0);
pub(crate) const HOOK_HISTORY: u8 = 1;
pub(crate) const HOOK_PROFILER: u8 = 2;

/// Turns a watcher of allocations on or off.
pub(crate) fn set_alloc_hook(bit: u8, on: bool) {
    if on {
        ALLOC_HOOKS.fetch_or(bit, Ordering::SeqCst);
    } else {
        ALLOC_HOOKS.fetch_and(!bit, Ordering::SeqCst);
    }
}

#[cold]
#[inline(never)]
fn on_alloc_hooks(hooks: u8, addr: usize, cap: usize, bytes: usize) {
    if hooks & HOOK_HISTORY != 0 && crate::memory_history::is_recording() {
        crate::memory_history::on_alloc(Device::Cpu, addr, cap as u64);
    }
    if hooks & HOOK_PROFILER != 0 {
        crate::profiler_record::on_memory(bytes as i64);
    }
}

#[cold]
#[inline(never)]
fn on_free_hooks(hooks: u8, addr: usize, cap: usize, bytes: usize) {
    if hooks & HOOK_HISTORY != 0 && crate::memory_history::is_recording() {
        crate::memory_history::on_free(Device::Cpu, addr, cap as u64);
    }
    if hooks & HOOK_PROFILER != 0 {
        crate::profiler_record::on_memory(-(bytes as i64));
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        #[cfg(feature = "cuda")]
        drop(self.pinned.take());
        if self.cap == 0 {
            return;
        }
        // Recorded before the buffer can be handed out again, so that a free is never
        // recorded after the next allocation of the same address.
        let hooks = ALLOC_HOOKS.load(Ordering::Relaxed);
        if hooks != 0 {
            on_free_hooks(hooks, self.ptr.as_ptr() as usize, self.cap, self.bytes);
        }
        let mut g = state();
        let s = g.as_mut().unwrap();
        s.allocated_bytes.sub(self.cap as u64);
        s.allocation.sub(1);
        if s.cached_bytes + self.cap as u64 <= s.cache_limit && self.class < N_CLASSES - 1 {
            s.cached_bytes += self.cap as u64;
            s.free[self.class].push(self.ptr.as_ptr() as usize);
        } else {
            s.reserved_bytes.sub(self.cap as u64);
            s.segment.sub(1);
            drop(g);
            // SAFETY: allocated with this layout in `new` (it was valid there).
            unsafe { dealloc(self.ptr.as_ptr(), layout_of(self.cap).unwrap_unchecked()) };
        }
    }
}

/// The CUDA caching allocator of `device`, when `device` is a GPU of a `cuda` build.
#[cfg(feature = "cuda")]
fn cuda_allocator(
    device: Device,
) -> Result<Option<&'static pyrite_cuda_runtime::caching_allocator::CachingAllocator>> {
    match device {
        Device::Cpu => Ok(None),
        Device::Cuda(i) => {
            device.check_available()?;
            pyrite_cuda_runtime::memory::allocator(i)
                .map(Some)
                .map_err(|e| crate::Error::new(crate::ErrorKind::Device, e.message))
        }
    }
}

/// Answers a memory query from the CUDA allocator when `device` is a GPU.
macro_rules! on_cuda {
    ($device:expr, |$a:ident| $body:expr) => {
        #[cfg(feature = "cuda")]
        if let Some($a) = cuda_allocator($device)? {
            return Ok($body);
        }
    };
}

fn check_cpu(device: Device, what: &str) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda(i) => bail!(Device, "{what}: no CUDA backend in this build (device cuda:{i})"),
    }
}

/// A `Vec` with room for `n` items whose count comes from user input (a sample count, a
/// permutation length, the per-position tables an op builds beside its output: pooling
/// windows, interpolation plans, gather indices): an allocation that fails returns
/// `OutOfMemory` naming `op` instead of aborting the process as `Vec::with_capacity` would.
///
/// ```
/// use pyrite_core::alloc::try_with_capacity;
/// let v: Vec<u64> = try_with_capacity(16, "example").unwrap();
/// assert!(v.capacity() >= 16);
/// assert!(try_with_capacity::<u64>(usize::MAX / 4, "example").is_err());
/// ```
pub fn try_with_capacity<T>(n: usize, op: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        bail!(
            OutOfMemory,
            "{op}: CPU out of memory: tried to allocate {}",
            fmt_bytes((n as u128 * std::mem::size_of::<T>() as u128).min(u64::MAX as u128) as u64)
        );
    }
    Ok(v)
}

/// A scratch vector of `n` copies of `value` (see [`try_with_capacity`]).
pub(crate) fn try_vec<T: Clone>(n: usize, value: T, op: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(n, op)?;
    v.resize(n, value);
    Ok(v)
}

/// Bytes currently held by live tensors on `device` (`torch.cuda.memory_allocated`).
pub fn memory_allocated(device: Device) -> Result<u64> {
    on_cuda!(device, |a| a.memory_stats()["allocated_bytes.all.current"]);
    check_cpu(device, "memory_allocated")?;
    Ok(state().as_ref().unwrap().allocated_bytes.current)
}

/// Bytes held by the allocator: live tensors plus the cache (`memory_reserved`).
pub fn memory_reserved(device: Device) -> Result<u64> {
    on_cuda!(device, |a| a.memory_stats()["reserved_bytes.all.current"]);
    check_cpu(device, "memory_reserved")?;
    Ok(state().as_ref().unwrap().reserved_bytes.current)
}

/// Peak of [`memory_allocated`] since start or the last [`reset_peak_memory_stats`].
pub fn max_memory_allocated(device: Device) -> Result<u64> {
    on_cuda!(device, |a| a.memory_stats()["allocated_bytes.all.peak"]);
    check_cpu(device, "max_memory_allocated")?;
    Ok(state().as_ref().unwrap().allocated_bytes.peak)
}

/// Peak of [`memory_reserved`].
pub fn max_memory_reserved(device: Device) -> Result<u64> {
    on_cuda!(device, |a| a.memory_stats()["reserved_bytes.all.peak"]);
    check_cpu(device, "max_memory_reserved")?;
    Ok(state().as_ref().unwrap().reserved_bytes.peak)
}

/// Resets the peaks to the current values (`reset_peak_memory_stats`).
pub fn reset_peak_memory_stats(device: Device) -> Result<()> {
    on_cuda!(device, |a| a.reset_peak_memory_stats());
    check_cpu(device, "reset_peak_memory_stats")?;
    let mut g = state();
    let s = g.as_mut().unwrap();
    for st in [&mut s.allocated_bytes, &mut s.reserved_bytes, &mut s.allocation, &mut s.segment] {
        st.peak = st.current;
    }
    Ok(())
}

/// Returns every cached (unused) buffer to the OS, and, in a `cuda` build, every GPU's cached
/// segments to the driver (`torch.cuda.empty_cache`).
pub fn empty_cache() {
    #[cfg(feature = "cuda")]
    if pyrite_cuda_runtime::driver::is_available() {
        for d in 0..pyrite_cuda_runtime::driver::device_count() {
            if let Ok(a) = pyrite_cuda_runtime::memory::allocator(d) {
                a.empty_cache();
            }
        }
    }
    let mut freed = Vec::new();
    {
        let mut g = state();
        let s = g.as_mut().unwrap();
        for (class, list) in s.free.iter_mut().enumerate() {
            for addr in list.drain(..) {
                freed.push((addr, class));
            }
        }
        let mut total = 0u64;
        for &(_, class) in &freed {
            total += class_cap(class) as u64;
        }
        s.cached_bytes -= total;
        s.reserved_bytes.sub(total);
        s.segment.sub(freed.len() as u64);
    }
    for (addr, class) in freed {
        // SAFETY: each cached buffer was allocated with the layout of its class capacity.
        unsafe { dealloc(addr as *mut u8, layout_of(class_cap(class)).unwrap_unchecked()) };
    }
}

fn class_cap(class: usize) -> usize {
    if class <= 64 {
        return class * ALIGN;
    }
    let e = (class - 65) / 8 + 12;
    let sub = (class - 65) % 8 + 1;
    let step = 1usize << (e - 3);
    (8 + sub) * step
}

/// Sets the most bytes the CPU cache may hold in unused buffers (default 4 GiB, or the
/// `PYRITE_CPU_CACHE_LIMIT_MB` environment variable). Excess buffers go back to the OS.
pub fn set_cache_limit(bytes: u64) {
    state().as_mut().unwrap().cache_limit = bytes;
}

/// Limits the bytes the allocator may reserve on `device` (live tensors plus its cache) to
/// `bytes`; `None` lifts the limit. Past it, an allocation first frees the cache and retries,
/// then fails with `OutOfMemory` (counted in `num_ooms`), so out-of-memory handling can be
/// tested on any machine. The `PYRITE_CPU_MEMORY_LIMIT_MB` environment variable sets it at
/// start. Memory already reserved is not taken back.
///
/// ```
/// use pyrite_core::{memory, DType, Device, ErrorKind, Tensor};
/// memory::set_memory_limit(Some(memory::memory_reserved(Device::Cpu)? + (1 << 20)), Device::Cpu)?;
/// let e = Tensor::zeros([1 << 20], DType::F32).unwrap_err(); // 4 MiB past a 1 MiB headroom
/// assert_eq!(e.kind(), ErrorKind::OutOfMemory);
/// assert!(e.to_string().contains("Tried to allocate 4.00 MiB"), "{e}");
/// memory::set_memory_limit(None, Device::Cpu)?;
/// assert!(Tensor::zeros([1 << 20], DType::F32).is_ok());
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn set_memory_limit(bytes: Option<u64>, device: Device) -> Result<()> {
    on_cuda!(device, |a| a.set_memory_limit(bytes));
    check_cpu(device, "set_memory_limit")?;
    state().as_mut().unwrap().memory_limit = bytes;
    Ok(())
}

/// The limit set by [`set_memory_limit`] or [`set_per_process_memory_fraction`], in bytes.
pub fn memory_limit(device: Device) -> Result<Option<u64>> {
    on_cuda!(device, |a| a.memory_limit());
    check_cpu(device, "memory_limit")?;
    Ok(state().as_ref().unwrap().memory_limit)
}

/// `torch.cuda.set_per_process_memory_fraction(fraction, device)`: limits the allocator to
/// `fraction` of the device's memory (on the CPU, of the physical memory, `MemTotal`).
pub fn set_per_process_memory_fraction(fraction: f64, device: Device) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Some(a) = cuda_allocator(device)? {
        return a
            .set_memory_fraction(fraction)
            .map_err(|e| crate::Error::new(crate::ErrorKind::Value, e.message));
    }
    check_cpu(device, "set_per_process_memory_fraction")?;
    if !(0.0..=1.0).contains(&fraction) {
        bail!(Value, "Invalid fraction value: {fraction}. Allowed range: 0~1");
    }
    let total = physical_memory()?;
    set_memory_limit(Some((total as f64 * fraction) as u64), device)
}

/// The machine's physical memory in bytes.
pub fn physical_memory() -> Result<u64> {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages <= 0 || page <= 0 {
        bail!(Io, "cannot read the physical memory size (sysconf)");
    }
    Ok(pages as u64 * page as u64)
}

/// PyTorch's `memory_stats`: a flat map with keys such as `allocated_bytes.all.current`.
pub fn memory_stats(device: Device) -> Result<BTreeMap<String, u64>> {
    on_cuda!(device, |a| a.memory_stats());
    check_cpu(device, "memory_stats")?;
    let g = state();
    let s = g.as_ref().unwrap();
    let mut m = BTreeMap::new();
    for (name, st) in [
        ("allocated_bytes", s.allocated_bytes),
        ("reserved_bytes", s.reserved_bytes),
        ("allocation", s.allocation),
        ("segment", s.segment),
    ] {
        m.insert(format!("{name}.all.current"), st.current);
        m.insert(format!("{name}.all.peak"), st.peak);
        m.insert(format!("{name}.all.allocated"), st.allocated);
        m.insert(format!("{name}.all.freed"), st.freed);
    }
    m.insert("inactive_split_bytes.all.current".into(), s.cached_bytes);
    m.insert("num_ooms".into(), s.num_ooms);
    m.insert("num_alloc_retries".into(), s.num_alloc_retries);
    m.insert("cache_hits".into(), s.cache_hits);
    Ok(m)
}

fn fmt_bytes(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", U[i])
    }
}

/// A human-readable table of [`memory_stats`] (`torch.cuda.memory_summary`).
pub fn memory_summary(device: Device) -> Result<String> {
    let m = memory_stats(device)?;
    let mut out = String::new();
    out.push_str(&format!("|{:=<75}|\n", ""));
    out.push_str(&format!("| {:<73} |\n", format!("Pyrite memory summary, device: {device}")));
    out.push_str(&format!("|{:-<75}|\n", ""));
    out.push_str(&format!(
        "| {:<24}| {:>11} | {:>11} | {:>11} | {:>8} |\n",
        "Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"
    ));
    out.push_str(&format!("|{:-<75}|\n", ""));
    for (label, key, bytes) in [
        ("Allocated memory", "allocated_bytes", true),
        ("Reserved memory", "reserved_bytes", true),
        ("Allocations", "allocation", false),
        ("Segments", "segment", false),
    ] {
        let f = |k: &str| {
            let v = m[&format!("{key}.all.{k}")];
            if bytes {
                fmt_bytes(v)
            } else {
                v.to_string()
            }
        };
        out.push_str(&format!(
            "| {:<24}| {:>11} | {:>11} | {:>11} | {:>8} |\n",
            label,
            f("current"),
            f("peak"),
            f("allocated"),
            f("freed")
        ));
    }
    out.push_str(&format!("|{:-<75}|\n", ""));
    out.push_str(&format!(
        "| {:<73} |\n",
        format!(
            "cached (free) bytes: {}, OOMs: {}",
            fmt_bytes(m["inactive_split_bytes.all.current"]),
            m["num_ooms"]
        )
    ));
    out.push_str(&format!("|{:=<75}|\n", ""));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_and_invert() {
        for bytes in [1, 63, 64, 65, 4096, 4097, 5000, 1 << 20, (1 << 20) + 1, 64 << 20, 100_000_000] {
            let (c, cap) = class_of(bytes);
            assert!(cap >= bytes && (cap - bytes) as f64 <= 0.125 * bytes as f64 + 64.0, "{bytes} -> {cap}");
            assert_eq!(class_cap(c), cap, "class {c} of {bytes}");
        }
    }

    #[test]
    fn huge_buffers_are_aligned_to_a_huge_page_and_usable_whole() {
        let bytes = (3 << 20) + 12;
        let mut b = CpuBuffer::new(bytes).unwrap();
        if huge_pages() {
            assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0);
        } else {
            assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        }
        for (i, x) in b.as_mut_slice::<i32>().iter_mut().enumerate() {
            *x = i as i32;
        }
        let s = b.as_slice::<i32>();
        assert_eq!((s.len(), s[0], s[s.len() - 1]), (bytes / 4, 0, (bytes / 4 - 1) as i32));
        drop(b);
        // Released through the cache and to the OS with the layout it was allocated with.
        empty_cache();
        let c = CpuBuffer::new(bytes).unwrap();
        assert!(!c.as_ptr().is_null());
    }
}
