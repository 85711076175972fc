//! PyTorch's CUDA caching allocator (`c10/cuda/CUDACachingAllocator.cpp`, the `Native`
//! backend's `DeviceCachingAllocator`) as pure logic over a [`RawMemory`], so that every rule is
//! tested without a GPU.
//!
//! # Design
//!
//! Device memory is obtained from [`RawMemory::malloc`] (`cudaMalloc`) in *segments* and never
//! given back on [`CachingAllocator::free`]: a freed block goes into a cache and serves later
//! requests. Every request is first rounded by [`round_size`] (to a multiple of 512 bytes,
//! `kMinBlockSize`). Requests of at most 1 MiB (`kSmallSize`) are served from the *small pool*,
//! larger ones from the *large pool*; the pools never share memory. When no cached block fits, a
//! new segment of [`allocation_size`] bytes is allocated (`get_allocation_size`): 2 MiB
//! (`kSmallBuffer`) for small requests, 20 MiB (`kLargeBuffer`) for requests below 10 MiB
//! (`kMinLargeAlloc`), and the request rounded up to 2 MiB (`kRoundLarge`) beyond.
//!
//! Each segment is a doubly linked list of *blocks* (PyTorch's `Block` with its `prev`/`next`).
//! Blocks live in an arena (a `Vec` indexed by block ids) so that the links are plain indices.
//! The free blocks of each pool are kept in a `BTreeMap` ordered by `(stream, size, ptr)`
//! (`BlockComparatorSize`), so the best fit for a request is the first entry at or after
//! `(stream, size, 0)` whose stream is the request's (`get_free_block`): a block is only reused
//! by the stream that allocated its segment. The block found is split when the rest is worth
//! keeping (`should_split`): in the small pool whenever at least 512 bytes remain, in the large
//! pool only when more than 1 MiB remains (a smaller rest stays inside the allocation, whose
//! [`Allocation::size`] is then larger than the rounded request). On free, a block merges with
//! free neighbours in its segment (`free_block`, `try_merge_blocks`), so a segment whose blocks
//! are all free is one free block again.
//!
//! [`CachingAllocator::malloc`] follows PyTorch's order exactly: search the pool
//! (`get_free_block`); else allocate a segment (`alloc_block`); else, when a `max_split_size` is
//! configured, free just enough oversize cached segments and try again
//! (`release_available_cached_blocks`); else free every whole cached segment
//! (`release_cached_blocks`, also what [`CachingAllocator::empty_cache`] does) and try a last
//! time, counting a retry (`num_alloc_retries`); else fail with PyTorch's "CUDA out of memory"
//! message ([`ErrorKind::OutOfMemory`], `num_ooms`). A segment counts against the cap set by
//! [`CachingAllocator::set_memory_fraction`] or [`CachingAllocator::set_memory_limit`]
//! (`allowed_memory_maximum`): an allocation that would push the reserved bytes past it fails
//! as if the device were full.
//!
//! With a `max_split_size` (PyTorch's `PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb`, unlimited by
//! default; see [`CachingAllocator::with_max_split_size`]), blocks of at least that size serve
//! only requests of at least that size, whole (never split), and only when less than 20 MiB
//! larger than the request.
//!
//! [`CachingAllocator::memory_stats`] reports PyTorch's statistics under the keys of
//! `torch.cuda.memory_stats()`, and [`CachingAllocator::snapshot`] the segments of
//! `torch.cuda.memory_snapshot()`. All state sits behind one mutex, held across the calls into
//! [`RawMemory`] as PyTorch does by default (`release_lock_on_cudamalloc:False`).
//!
//! # Example
//!
//! ```
//! use pyrite_cuda_runtime::caching_allocator::{CachingAllocator, RawMemory};
//! use std::collections::HashMap;
//! use std::sync::Mutex;
//!
//! /// A pretend 64 MiB device: the address and size of everything it handed out.
//! struct Fake(Mutex<HashMap<u64, usize>>);
//! impl RawMemory for Fake {
//!     fn malloc(&self, bytes: usize) -> Option<u64> {
//!         let mut live = self.0.lock().unwrap();
//!         if live.values().sum::<usize>() + bytes > 64 << 20 {
//!             return None;
//!         }
//!         let ptr = live.iter().map(|(p, n)| p + *n as u64).max().unwrap_or(0x1000_0000);
//!         live.insert(ptr, bytes);
//!         Some(ptr)
//!     }
//!     fn free(&self, ptr: u64) {
//!         self.0.lock().unwrap().remove(&ptr);
//!     }
//!     fn mem_get_info(&self) -> (u64, u64) {
//!         let used = self.0.lock().unwrap().values().sum::<usize>() as u64;
//!         ((64 << 20) - used, 64 << 20)
//!     }
//! }
//!
//! let cache = CachingAllocator::new(0, Box::new(Fake(Mutex::new(HashMap::new()))));
//! let a = cache.malloc(1000, 0).unwrap(); // rounded to 1024 bytes in a new 2 MiB segment
//! assert_eq!(a.size, 1024);
//! let b = cache.malloc(1000, 0).unwrap(); // same segment, right after `a`
//! assert_eq!(b.ptr, a.ptr + 1024);
//! let ptr = a.ptr;
//! cache.free(a);
//! let c = cache.malloc(700, 0).unwrap(); // a cache hit: `a`'s block again
//! assert_eq!(c.ptr, ptr);
//! let stats = cache.memory_stats();
//! assert_eq!(stats["segment.all.current"], 1);
//! assert_eq!(stats["allocated_bytes.all.current"], 2048);
//! assert_eq!(stats["requested_bytes.all.current"], 1700);
//! assert_eq!(stats["reserved_bytes.all.current"], 2 << 20);
//! cache.free(b);
//! cache.free(c);
//! cache.empty_cache(); // the segment is whole and free again: back to the device
//! assert_eq!(cache.memory_stats()["reserved_bytes.all.current"], 0);
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::{Error, ErrorKind, Result};

/// All sizes are rounded up to a multiple of this (`kMinBlockSize`, 512 bytes).
pub const MIN_BLOCK_SIZE: usize = 512;
/// The largest request served by the small pool (`kSmallSize`, 1 MiB).
pub const SMALL_SIZE: usize = 1 << 20;
/// The segment size of the small pool (`kSmallBuffer`, 2 MiB).
pub const SMALL_BUFFER: usize = 2 << 20;
/// The segment size for large requests below [`MIN_LARGE_ALLOC`] (`kLargeBuffer`, 20 MiB).
pub const LARGE_BUFFER: usize = 20 << 20;
/// Large requests from this size on get a segment of their own size (`kMinLargeAlloc`, 10 MiB).
pub const MIN_LARGE_ALLOC: usize = 10 << 20;
/// Such segments are rounded up to a multiple of this (`kRoundLarge`, 2 MiB).
pub const ROUND_LARGE: usize = 2 << 20;
/// Requests of this size or more fail at once (PyTorch's `one_exa_bytes`, 2^60).
const ONE_EXA_BYTES: u64 = 1 << 60;

/// A stream's identity (the allocator only compares them).
pub type StreamId = u64;

/// The device memory the cache draws from: `cudaMalloc`/`cudaFree`/`cudaMemGetInfo` on a GPU, a
/// fake in tests.
pub trait RawMemory: Send + Sync {
    /// Allocates `bytes`; `None` when the device is out of memory. A returned address is never 0
    /// (0 is the null allocation's).
    fn malloc(&self, bytes: usize) -> Option<u64>;
    /// Frees what `malloc` returned.
    fn free(&self, ptr: u64);
    /// (free, total) bytes of the device.
    fn mem_get_info(&self) -> (u64, u64);
}

/// A live allocation handed out by [`CachingAllocator::malloc`]. It is not `Clone`: giving it
/// back to [`CachingAllocator::free`] consumes it, so it cannot be freed twice.
///
/// ```compile_fail
/// use pyrite_cuda_runtime::caching_allocator::Allocation;
/// fn twice(a: &Allocation) -> Allocation {
///     a.clone()
/// }
/// ```
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an Allocation that is not given back to `free` stays allocated"]
pub struct Allocation {
    /// The device address (0 for the null allocation of zero bytes).
    pub ptr: u64,
    /// The size of the block handed out: the rounded request, or more when the rest of a large
    /// block was too small to split off.
    pub size: usize,
    /// The bytes asked for.
    pub requested: usize,
    /// The stream it was allocated on; its block is only reused by this stream.
    pub stream: StreamId,
    /// The block's index in the owner's arena ([`NULL_BLOCK`] for the null allocation).
    block: BlockId,
    /// The id of the allocator that handed it out.
    owner: u64,
}

/// One segment of `torch.cuda.memory_snapshot()`: a single [`RawMemory::malloc`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentSnapshot {
    /// The segment's device address.
    pub address: u64,
    /// Its size in bytes (the sum of its blocks' sizes).
    pub total_size: usize,
    /// The stream that allocated it.
    pub stream: StreamId,
    /// Whether it belongs to the small pool (PyTorch's `segment_type` "small"; else "large").
    pub is_small: bool,
    /// The bytes of its allocated blocks.
    pub allocated_size: usize,
    /// The bytes of its active blocks (here the allocated ones: there are no pending stream
    /// uses).
    pub active_size: usize,
    /// Its blocks in address order.
    pub blocks: Vec<BlockSnapshot>,
}

/// One block of a [`SegmentSnapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSnapshot {
    /// The block's device address.
    pub address: u64,
    /// Its size in bytes.
    pub size: usize,
    /// The bytes requested for it when allocated (0 when inactive).
    pub requested_size: usize,
    /// Whether it is allocated (state "active_allocated"; else "inactive").
    pub allocated: bool,
}

/// PyTorch's `format_size`: up to 1024 bytes as "N bytes", then "x.xx KiB" up to 1 MiB,
/// "x.xx MiB" up to 1 GiB and "x.xx GiB" beyond.
pub fn format_size(bytes: u64) -> String {
    if bytes <= 1024 {
        format!("{bytes} bytes")
    } else if bytes <= 1 << 20 {
        format!("{:.2} KiB", bytes as f64 / 1024.0)
    } else if bytes <= 1 << 30 {
        format!("{:.2} MiB", bytes as f64 / 1048576.0)
    } else {
        format!("{:.2} GiB", bytes as f64 / 1073741824.0)
    }
}

/// PyTorch's `round_size`: the request rounded up to a multiple of [`MIN_BLOCK_SIZE`], at least
/// 512 bytes (`roundup_power2_divisions` is not supported: it is off by default). Sizes within
/// 511 bytes of `usize::MAX` saturate; [`CachingAllocator::malloc`] refuses 1 EB and more first.
pub fn round_size(bytes: usize) -> usize {
    if bytes < MIN_BLOCK_SIZE {
        MIN_BLOCK_SIZE
    } else {
        bytes.div_ceil(MIN_BLOCK_SIZE).saturating_mul(MIN_BLOCK_SIZE)
    }
}

/// PyTorch's `get_allocation_size`: the size of the segment allocated for a request of
/// `rounded` bytes (a [`round_size`] result) when no cached block fits.
pub fn allocation_size(rounded: usize) -> usize {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        rounded.div_ceil(ROUND_LARGE).saturating_mul(ROUND_LARGE)
    }
}

/// Python's `repr` of a float, for error messages worded as PyTorch's Python layer words them.
fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    let s = format!("{x:?}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// An index into the block arena.
type BlockId = usize;
/// The block id of the null allocation.
const NULL_BLOCK: BlockId = usize::MAX;
/// A free block's place in its pool: PyTorch's `BlockComparatorSize` order.
type FreeKey = (StreamId, usize, u64);

/// Gives every allocator an id, so that an [`Allocation`] cannot be freed by another one.
static NEXT_ALLOCATOR_ID: AtomicU64 = AtomicU64::new(1);

/// PyTorch's `Block`: a piece of a segment, allocated or free.
#[derive(Debug)]
struct Block {
    ptr: u64,
    size: usize,
    /// The bytes requested by the allocation using it (0 when free).
    requested: usize,
    stream: StreamId,
    /// The pool: small (true) or large.
    small: bool,
    allocated: bool,
    /// The neighbours in the segment.
    prev: Option<BlockId>,
    next: Option<BlockId>,
}

impl Block {
    fn is_split(&self) -> bool {
        self.prev.is_some() || self.next.is_some()
    }

    fn key(&self) -> FreeKey {
        (self.stream, self.size, self.ptr)
    }
}

/// PyTorch's `Stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stat {
    current: u64,
    peak: u64,
    allocated: u64,
    freed: u64,
}

impl Stat {
    fn increase(&mut self, amount: u64) {
        self.current += amount;
        self.peak = self.peak.max(self.current);
        self.allocated += amount;
    }

    fn decrease(&mut self, amount: u64) {
        debug_assert!(self.current >= amount, "negative tracked stat in the caching allocator");
        self.current = self.current.saturating_sub(amount);
        self.freed += amount;
    }

    fn reset_accumulated(&mut self) {
        self.allocated = 0;
        self.freed = 0;
    }

    fn reset_peak(&mut self) {
        self.peak = self.current;
    }
}

/// PyTorch's `StatType`s: the index of a [`StatArray`] entry.
const AGGREGATE: usize = 0;
const SMALL_POOL: usize = 1;
const LARGE_POOL: usize = 2;
/// The names of the entries in `memory_stats`.
const STAT_TYPE_NAMES: [&str; 3] = ["all", "small_pool", "large_pool"];

/// PyTorch's `StatArray`: all, small pool, large pool.
type StatArray = [Stat; 3];

/// The stat types a block of the given pool counts in (`get_stat_types_for_pool`).
fn stat_types(small: bool) -> [usize; 2] {
    [AGGREGATE, if small { SMALL_POOL } else { LARGE_POOL }]
}

/// PyTorch's `DeviceStats`.
#[derive(Clone, Debug, Default)]
struct DeviceStats {
    /// Allocations handed out.
    allocation: StatArray,
    /// Segments obtained from the device.
    segment: StatArray,
    /// Active blocks (allocated; there are no pending stream uses here).
    active: StatArray,
    /// Free blocks inside split segments (they cannot be given back to the device).
    inactive_split: StatArray,
    allocated_bytes: StatArray,
    reserved_bytes: StatArray,
    active_bytes: StatArray,
    inactive_split_bytes: StatArray,
    /// The unrounded bytes asked for.
    requested_bytes: StatArray,
    num_alloc_retries: u64,
    num_ooms: u64,
    oversize_allocations: Stat,
    oversize_segments: Stat,
    num_sync_all_streams: u64,
    num_device_alloc: u64,
    num_device_free: u64,
}

impl DeviceStats {
    /// Every stat array with its `memory_stats` name.
    fn arrays_mut(&mut self) -> [&mut StatArray; 9] {
        [
            &mut self.allocation,
            &mut self.segment,
            &mut self.active,
            &mut self.inactive_split,
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.active_bytes,
            &mut self.inactive_split_bytes,
            &mut self.requested_bytes,
        ]
    }

    fn arrays(&self) -> [(&'static str, &StatArray); 9] {
        [
            ("allocation", &self.allocation),
            ("segment", &self.segment),
            ("active", &self.active),
            ("inactive_split", &self.inactive_split),
            ("allocated_bytes", &self.allocated_bytes),
            ("reserved_bytes", &self.reserved_bytes),
            ("active_bytes", &self.active_bytes),
            ("inactive_split_bytes", &self.inactive_split_bytes),
            ("requested_bytes", &self.requested_bytes),
        ]
    }
}

/// The state behind the allocator's mutex: PyTorch's `DeviceCachingAllocator` members.
#[derive(Debug)]
struct Inner {
    /// Every block, live or not (`None` slots are reused through `vacant`).
    arena: Vec<Option<Block>>,
    vacant: Vec<BlockId>,
    /// The free blocks of the small pool (`small_blocks`) and of the large pool
    /// (`large_blocks`).
    small_free: BTreeMap<FreeKey, BlockId>,
    large_free: BTreeMap<FreeKey, BlockId>,
    stats: DeviceStats,
    /// The bytes of all segments (`total_allocated_memory`).
    total_allocated_memory: u64,
    /// The cap on `total_allocated_memory` (`allowed_memory_maximum` when `set_fraction`).
    allowed_memory_maximum: Option<u64>,
    /// Blocks of this size or more are never split (`usize::MAX`: unlimited).
    max_split_size: usize,
}

impl Inner {
    fn block(&self, id: BlockId) -> &Block {
        self.arena[id].as_ref().expect("a live block")
    }

    fn block_mut(&mut self, id: BlockId) -> &mut Block {
        self.arena[id].as_mut().expect("a live block")
    }

    fn new_block(&mut self, block: Block) -> BlockId {
        match self.vacant.pop() {
            Some(id) => {
                self.arena[id] = Some(block);
                id
            }
            None => {
                self.arena.push(Some(block));
                self.arena.len() - 1
            }
        }
    }

    fn delete_block(&mut self, id: BlockId) -> Block {
        let block = self.arena[id].take().expect("a live block");
        self.vacant.push(id);
        block
    }

    fn pool(&self, small: bool) -> &BTreeMap<FreeKey, BlockId> {
        if small {
            &self.small_free
        } else {
            &self.large_free
        }
    }

    fn pool_mut(&mut self, small: bool) -> &mut BTreeMap<FreeKey, BlockId> {
        if small {
            &mut self.small_free
        } else {
            &mut self.large_free
        }
    }

    /// Puts a free block into its pool (`insert_into_blocks`).
    fn insert_free(&mut self, id: BlockId) {
        let block = self.block(id);
        let (key, small) = (block.key(), block.small);
        let previous = self.pool_mut(small).insert(key, id);
        debug_assert!(previous.is_none(), "a block was cached twice");
    }

    fn remove_free(&mut self, id: BlockId) {
        let block = self.block(id);
        let (key, small) = (block.key(), block.small);
        let removed = self.pool_mut(small).remove(&key);
        debug_assert_eq!(removed, Some(id), "a free block was missing from its pool");
    }

    /// Applies `f` to the stat of each type a block of the pool counts in.
    fn for_each_stat(&mut self, small: bool, mut f: impl FnMut(&mut DeviceStats, usize)) {
        for t in stat_types(small) {
            f(&mut self.stats, t);
        }
    }

    /// The best-fitting cached block for `size` bytes on `stream`, taken out of its pool
    /// (`get_free_block`).
    fn get_free_block(&mut self, stream: StreamId, size: usize, small: bool) -> Option<BlockId> {
        let (&key, &id) = self.pool(small).range((stream, size, 0)..).next()?;
        if key.0 != stream {
            return None;
        }
        let max_split = self.max_split_size;
        // Do not return an oversized block for a smaller request.
        if size < max_split && key.1 >= max_split {
            return None;
        }
        // An oversized block may serve a request only up to kLargeBuffer smaller than itself.
        if size >= max_split && key.1 >= size.saturating_add(LARGE_BUFFER) {
            return None;
        }
        self.pool_mut(small).remove(&key);
        Some(id)
    }

    /// Allocates a new segment of `alloc_size` bytes (`alloc_block`); `None` when the device
    /// or the memory cap refuses.
    fn alloc_block(
        &mut self,
        raw: &dyn RawMemory,
        stream: StreamId,
        alloc_size: usize,
        small: bool,
        is_retry: bool,
    ) -> Option<BlockId> {
        if is_retry {
            self.stats.num_alloc_retries += 1;
        }
        if let Some(max) = self.allowed_memory_maximum
            && self.total_allocated_memory + alloc_size as u64 > max
        {
            return None;
        }
        let ptr = raw.malloc(alloc_size)?;
        self.total_allocated_memory += alloc_size as u64;
        let id = self.new_block(Block {
            ptr,
            size: alloc_size,
            requested: 0,
            stream,
            small,
            allocated: false,
            prev: None,
            next: None,
        });
        self.for_each_stat(small, |s, t| {
            s.segment[t].increase(1);
            s.reserved_bytes[t].increase(alloc_size as u64);
        });
        if alloc_size >= self.max_split_size {
            self.stats.oversize_segments.increase(1);
        }
        self.stats.num_device_alloc += 1;
        Some(id)
    }

    /// Gives a whole free segment back to the device (`release_block`).
    fn release_block(&mut self, raw: &dyn RawMemory, id: BlockId) {
        let block = self.block(id);
        debug_assert!(!block.allocated && !block.is_split(), "only whole free segments are released");
        let (ptr, size, small) = (block.ptr, block.size, block.small);
        raw.free(ptr);
        self.stats.num_device_free += 1;
        self.total_allocated_memory -= size as u64;
        self.for_each_stat(small, |s, t| {
            s.segment[t].decrease(1);
            s.reserved_bytes[t].decrease(size as u64);
        });
        if size >= self.max_split_size {
            self.stats.oversize_segments.decrease(1);
        }
        self.remove_free(id);
        self.delete_block(id);
    }

    /// Gives every whole free segment of a pool back to the device (`release_blocks`).
    fn release_blocks(&mut self, raw: &dyn RawMemory, small: bool) {
        let whole: Vec<BlockId> =
            self.pool(small).values().copied().filter(|&id| !self.block(id).is_split()).collect();
        for id in whole {
            self.release_block(raw, id);
        }
    }

    /// `release_cached_blocks`: PyTorch first synchronizes the outstanding stream-use events
    /// (`synchronize_and_free_events`, counted in `num_sync_all_streams`; there are none here),
    /// then releases the whole free segments of both pools.
    fn release_cached_blocks(&mut self, raw: &dyn RawMemory) {
        self.stats.num_sync_all_streams += 1;
        self.release_blocks(raw, false);
        self.release_blocks(raw, true);
    }

    /// `release_available_cached_blocks`: with a `max_split_size`, frees the smallest oversize
    /// cached segment of the stream large enough for the request, else the largest ones until
    /// they add up to it. Only whole segments are freed (oversize blocks always are).
    fn release_available_cached_blocks(
        &mut self,
        raw: &dyn RawMemory,
        stream: StreamId,
        size: usize,
        small: bool,
    ) -> bool {
        let max_split = self.max_split_size;
        if max_split == usize::MAX {
            return false;
        }
        let target = size.max(max_split);
        let whole = |inner: &Inner, id: BlockId| !inner.block(id).is_split();
        let single = self
            .pool(small)
            .range((stream, target, 0)..)
            .take_while(|(key, _)| key.0 == stream)
            .map(|(_, &id)| id)
            .find(|&id| whole(self, id));
        if let Some(id) = single {
            self.release_block(raw, id);
            return true;
        }
        // No single block is large enough: free oversize blocks, starting with the largest.
        let largest: Vec<(usize, BlockId)> = self
            .pool(small)
            .range(..(stream, target, 0))
            .rev()
            .take_while(|(key, _)| key.0 == stream && key.1 >= max_split)
            .filter(|&(_, &id)| whole(self, id))
            .map(|(key, &id)| (key.1, id))
            .collect();
        let mut released = 0;
        for (block_size, id) in largest {
            if released >= target {
                break;
            }
            released += block_size;
            self.release_block(raw, id);
        }
        released >= target
    }

    /// Whether the rest of `block` after `size` bytes becomes a block of its own
    /// (`should_split`).
    fn should_split(&self, block: &Block, size: usize) -> bool {
        let remaining = block.size - size;
        if block.small {
            remaining >= MIN_BLOCK_SIZE
        } else {
            size < self.max_split_size && remaining > SMALL_SIZE
        }
    }

    /// Hands out `size` bytes of the block `id` (out of its pool), splitting off the rest when
    /// it is worth keeping (`alloc_found_block`). Returns the allocated block.
    fn alloc_found_block(&mut self, id: BlockId, size: usize, requested: usize, stream: StreamId) -> BlockId {
        let block = self.block(id);
        let (small, already_split) = (block.small, block.is_split());
        let allocated = if self.should_split(block, size) {
            // [prev] -> [new: size bytes] -> [remaining] -> [next]
            let (ptr, prev) = (block.ptr, block.prev);
            let new = self.new_block(Block {
                ptr,
                size,
                requested: 0,
                stream,
                small,
                allocated: false,
                prev,
                next: Some(id),
            });
            if let Some(p) = prev {
                self.block_mut(p).next = Some(new);
            }
            let remaining = self.block_mut(id);
            remaining.prev = Some(new);
            remaining.ptr += size as u64;
            remaining.size -= size;
            let remaining_size = remaining.size as u64;
            self.insert_free(id);
            if already_split {
                // An already-split inactive block is being shrunk by `size` bytes.
                self.for_each_stat(small, |s, t| s.inactive_split_bytes[t].decrease(size as u64));
            } else {
                // A new split inactive block is being created from an unsplit one.
                self.for_each_stat(small, |s, t| {
                    s.inactive_split_bytes[t].increase(remaining_size);
                    s.inactive_split[t].increase(1);
                });
            }
            new
        } else {
            if already_split {
                // An already-split block is becoming active.
                let block_size = block.size as u64;
                self.for_each_stat(small, |s, t| {
                    s.inactive_split_bytes[t].decrease(block_size);
                    s.inactive_split[t].decrease(1);
                });
            }
            id
        };
        let block = self.block_mut(allocated);
        block.allocated = true;
        block.requested = requested;
        let block_size = block.size;
        self.for_each_stat(small, |s, t| {
            s.allocation[t].increase(1);
            s.allocated_bytes[t].increase(block_size as u64);
            s.active[t].increase(1);
            s.active_bytes[t].increase(block_size as u64);
            s.requested_bytes[t].increase(requested as u64);
        });
        if block_size >= self.max_split_size {
            self.stats.oversize_allocations.increase(1);
        }
        allocated
    }

    /// Frees an allocated block (`DeviceCachingAllocator::free`).
    fn free(&mut self, id: BlockId) {
        let block = self.block_mut(id);
        block.allocated = false;
        let (size, small) = (block.size, block.small);
        self.for_each_stat(small, |s, t| {
            s.allocation[t].decrease(1);
            s.allocated_bytes[t].decrease(size as u64);
        });
        if size >= self.max_split_size {
            self.stats.oversize_allocations.decrease(1);
        }
        self.free_block(id);
    }

    /// Moves a block into its pool, merged with its free neighbours (`free_block`).
    fn free_block(&mut self, id: BlockId) {
        let block = self.block(id);
        let (original_size, requested, small) = (block.size, block.requested, block.small);
        let (prev, next) = (block.prev, block.next);
        let mut net_inactive_split_blocks: i64 = 0;
        let mut net_inactive_split_size: i64 = 0;
        for candidate in [prev, next] {
            let subsumed = self.try_merge_blocks(id, candidate);
            if subsumed > 0 {
                net_inactive_split_blocks -= 1;
                net_inactive_split_size -= subsumed as i64;
            }
        }
        let block = self.block_mut(id);
        block.requested = 0;
        let (is_split, size) = (block.is_split(), block.size);
        self.insert_free(id);
        if is_split {
            net_inactive_split_blocks += 1;
            net_inactive_split_size += size as i64;
        }
        self.for_each_stat(small, |s, t| {
            match net_inactive_split_blocks.signum() {
                1 => s.inactive_split[t].increase(net_inactive_split_blocks as u64),
                -1 => s.inactive_split[t].decrease(net_inactive_split_blocks.unsigned_abs()),
                _ => {}
            }
            match net_inactive_split_size.signum() {
                1 => s.inactive_split_bytes[t].increase(net_inactive_split_size as u64),
                -1 => s.inactive_split_bytes[t].decrease(net_inactive_split_size.unsigned_abs()),
                _ => {}
            }
            s.active[t].decrease(1);
            s.active_bytes[t].decrease(original_size as u64);
            s.requested_bytes[t].decrease(requested as u64);
        });
    }

    /// Merges the free block `src` (a neighbour of `dst`) into `dst`; returns the bytes
    /// subsumed, 0 when `src` is absent or allocated (`try_merge_blocks`).
    fn try_merge_blocks(&mut self, dst: BlockId, src: Option<BlockId>) -> usize {
        let Some(src) = src else { return 0 };
        if self.block(src).allocated {
            return 0;
        }
        self.remove_free(src);
        let src_block = self.delete_block(src);
        let dst_block = self.block_mut(dst);
        if dst_block.prev == Some(src) {
            // [src dst]
            dst_block.ptr = src_block.ptr;
            dst_block.prev = src_block.prev;
            if let Some(p) = src_block.prev {
                self.block_mut(p).next = Some(dst);
            }
        } else {
            // [dst src]
            dst_block.next = src_block.next;
            if let Some(n) = src_block.next {
                self.block_mut(n).prev = Some(dst);
            }
        }
        self.block_mut(dst).size += src_block.size;
        src_block.size
    }

    /// The ids of the first blocks of all segments.
    fn segment_heads(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.arena
            .iter()
            .enumerate()
            .filter_map(|(id, b)| b.as_ref().filter(|b| b.prev.is_none()).map(|_| id))
    }
}

/// PyTorch's CUDA caching allocator for one device, over a [`RawMemory`]. It is `Send + Sync`:
/// every method locks one internal mutex.
pub struct CachingAllocator {
    device: usize,
    /// Matches the [`Allocation`]s handed out by this allocator.
    id: u64,
    raw: Box<dyn RawMemory>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for CachingAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachingAllocator").field("device", &self.device).finish_non_exhaustive()
    }
}

impl CachingAllocator {
    /// An empty cache for device `device` drawing from `raw`, with PyTorch's default
    /// configuration (no `max_split_size`, no memory cap).
    pub fn new(device: usize, raw: Box<dyn RawMemory>) -> CachingAllocator {
        CachingAllocator {
            device,
            id: NEXT_ALLOCATOR_ID.fetch_add(1, Ordering::Relaxed),
            raw,
            inner: Mutex::new(Inner {
                arena: Vec::new(),
                vacant: Vec::new(),
                small_free: BTreeMap::new(),
                large_free: BTreeMap::new(),
                stats: DeviceStats::default(),
                total_allocated_memory: 0,
                allowed_memory_maximum: None,
                max_split_size: usize::MAX,
            }),
        }
    }

    /// Like [`CachingAllocator::new`], with PyTorch's `max_split_size_mb` option in bytes: blocks
    /// of at least this size are never split, never serve smaller requests, and serve larger
    /// ones only within 20 MiB of their size (`None`: unlimited, the default). Fails with
    /// [`ErrorKind::Value`] below 20 MiB, as PyTorch's option must be at least 20 (MB).
    pub fn with_max_split_size(
        device: usize,
        raw: Box<dyn RawMemory>,
        max_split_size: Option<usize>,
    ) -> Result<CachingAllocator> {
        let allocator = CachingAllocator::new(device, raw);
        if let Some(bytes) = max_split_size {
            if bytes < LARGE_BUFFER {
                crate::cuda_bail!(
                    Value,
                    "CachingAllocator option max_split_size_mb too small, must be >= {}",
                    LARGE_BUFFER >> 20
                );
            }
            allocator.lock().max_split_size = bytes;
        }
        Ok(allocator)
    }

    /// The device index this allocator serves (it names the GPU in out-of-memory messages).
    pub fn device(&self) -> usize {
        self.device
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic under the lock (a bad `free`) leaves the state consistent: it happens before
        // any change.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Allocates `bytes` for use on `stream`: a cached block when one fits, else a new segment,
    /// else after freeing the cache; else an [`ErrorKind::OutOfMemory`] error with PyTorch's
    /// message. Zero bytes gives a null allocation (ptr 0) that costs nothing, as PyTorch.
    pub fn malloc(&self, bytes: usize, stream: StreamId) -> Result<Allocation> {
        if bytes == 0 {
            return Ok(Allocation {
                ptr: 0,
                size: 0,
                requested: 0,
                stream,
                block: NULL_BLOCK,
                owner: self.id,
            });
        }
        if bytes as u64 >= ONE_EXA_BYTES {
            crate::cuda_bail!(OutOfMemory, "CUDA out of memory. Tried to allocate more than 1EB memory.");
        }
        let raw = &*self.raw;
        let mut inner = self.lock();
        let size = round_size(bytes);
        let small = size <= SMALL_SIZE;
        let alloc_size = allocation_size(size);
        let mut found = inner.get_free_block(stream, size, small);
        if found.is_none() {
            found = inner.alloc_block(raw, stream, alloc_size, small, false);
        }
        if found.is_none() && inner.release_available_cached_blocks(raw, stream, size, small) {
            found = inner.alloc_block(raw, stream, alloc_size, small, false);
        }
        if found.is_none() {
            inner.release_cached_blocks(raw);
            found = inner.alloc_block(raw, stream, alloc_size, small, true);
        }
        let Some(id) = found else {
            let (device_free, device_total) = raw.mem_get_info();
            inner.stats.num_ooms += 1;
            let allowed_info = inner
                .allowed_memory_maximum
                .map(|max| format!("{} allowed; ", format_size(max)))
                .unwrap_or_default();
            let allocated = inner.stats.allocated_bytes[AGGREGATE].current;
            let reserved = inner.stats.reserved_bytes[AGGREGATE].current;
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!(
                    "CUDA out of memory. Tried to allocate {}. GPU {} has a total capacity of {} of which {} \
                     is free. {}Of the allocated memory {} is allocated by PyTorch, and {} is reserved by \
                     PyTorch but unallocated. If reserved but unallocated memory is large try setting \
                     PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See \
                     documentation for Memory Management  \
                     (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
                    format_size(alloc_size as u64),
                    self.device,
                    format_size(device_total),
                    format_size(device_free),
                    allowed_info,
                    format_size(allocated),
                    format_size(reserved - allocated),
                ),
            ));
        };
        let id = inner.alloc_found_block(id, size, bytes, stream);
        let block = inner.block(id);
        Ok(Allocation {
            ptr: block.ptr,
            size: block.size,
            requested: bytes,
            stream,
            block: id,
            owner: self.id,
        })
    }

    /// Gives an allocation back to the cache (never to the device: see
    /// [`CachingAllocator::empty_cache`]). Freeing the null allocation does nothing.
    ///
    /// # Panics
    ///
    /// When `allocation` was handed out by another allocator ("invalid device pointer", as
    /// PyTorch).
    pub fn free(&self, allocation: Allocation) {
        if allocation.block == NULL_BLOCK {
            return;
        }
        assert!(
            allocation.owner == self.id,
            "invalid device pointer: {:#x} (allocated by another caching allocator)",
            allocation.ptr
        );
        let mut inner = self.lock();
        let valid = inner
            .arena
            .get(allocation.block)
            .and_then(Option::as_ref)
            .is_some_and(|b| b.allocated && b.ptr == allocation.ptr);
        assert!(valid, "invalid device pointer: {:#x}", allocation.ptr);
        inner.free(allocation.block);
    }

    /// Gives every cached segment that is wholly free back to the device
    /// (`torch.cuda.empty_cache`). A segment with a live block stays, free parts included.
    pub fn empty_cache(&self) {
        self.lock().release_cached_blocks(&*self.raw);
    }

    /// `torch.cuda.set_per_process_memory_fraction`: caps the reserved bytes at `fraction` of
    /// the device's total memory. An error ([`ErrorKind::Value`], PyTorch's message) outside
    /// 0..=1.
    pub fn set_memory_fraction(&self, fraction: f64) -> Result<()> {
        if !(0.0..=1.0).contains(&fraction) {
            crate::cuda_bail!(Value, "Invalid fraction value: {}. Allowed range: 0~1", py_float(fraction));
        }
        let (_, total) = self.raw.mem_get_info();
        self.set_memory_limit(Some((fraction * total as f64) as u64));
        Ok(())
    }

    /// An absolute cap on reserved bytes (None lifts it); the fraction sets the same cap. A new
    /// segment that would push the reserved bytes past it fails as if the device were full,
    /// after freeing the cache, and the out-of-memory message names the cap ("N allowed").
    pub fn set_memory_limit(&self, bytes: Option<u64>) {
        self.lock().allowed_memory_maximum = bytes;
    }

    /// The cap on reserved bytes, if any.
    pub fn memory_limit(&self) -> Option<u64> {
        self.lock().allowed_memory_maximum
    }

    /// `torch.cuda.memory_stats()`: for each of `allocation`, `segment`, `active`,
    /// `inactive_split`, `allocated_bytes`, `reserved_bytes`, `active_bytes`,
    /// `inactive_split_bytes` and `requested_bytes`, and each of `all`, `small_pool` and
    /// `large_pool`, the keys `<stat>.<pool>.current`, `.peak`, `.allocated` and `.freed`; the
    /// same four for `oversize_allocations` and `oversize_segments`; and `num_alloc_retries`,
    /// `num_ooms`, `num_sync_all_streams` (each emptying of the cache, where PyTorch
    /// synchronizes), `num_device_alloc`, `num_device_free` and `max_split_size`. An unlimited
    /// `max_split_size` is `u64::MAX`, the bits of the -1 PyTorch reports.
    pub fn memory_stats(&self) -> BTreeMap<String, u64> {
        let inner = self.lock();
        let stats = &inner.stats;
        let mut out = BTreeMap::new();
        let mut put = |name: String, stat: &Stat| {
            out.insert(format!("{name}.current"), stat.current);
            out.insert(format!("{name}.peak"), stat.peak);
            out.insert(format!("{name}.allocated"), stat.allocated);
            out.insert(format!("{name}.freed"), stat.freed);
        };
        for (name, array) in stats.arrays() {
            for (pool, stat) in STAT_TYPE_NAMES.iter().zip(array) {
                put(format!("{name}.{pool}"), stat);
            }
        }
        put("oversize_allocations".into(), &stats.oversize_allocations);
        put("oversize_segments".into(), &stats.oversize_segments);
        let max_split_size =
            if inner.max_split_size == usize::MAX { u64::MAX } else { inner.max_split_size as u64 };
        for (key, value) in [
            ("num_alloc_retries", stats.num_alloc_retries),
            ("num_ooms", stats.num_ooms),
            ("num_sync_all_streams", stats.num_sync_all_streams),
            ("num_device_alloc", stats.num_device_alloc),
            ("num_device_free", stats.num_device_free),
            ("max_split_size", max_split_size),
        ] {
            out.insert(key.to_string(), value);
        }
        out
    }

    /// `torch.cuda.reset_peak_memory_stats`: every peak becomes the current value.
    pub fn reset_peak_memory_stats(&self) {
        let mut inner = self.lock();
        let stats = &mut inner.stats;
        for array in stats.arrays_mut() {
            array.iter_mut().for_each(Stat::reset_peak);
        }
        stats.oversize_allocations.reset_peak();
        stats.oversize_segments.reset_peak();
    }

    /// `torch.cuda.reset_accumulated_memory_stats`: zeroes every `.allocated` and `.freed` and
    /// the `num_*` counters.
    pub fn reset_accumulated_memory_stats(&self) {
        let mut inner = self.lock();
        let stats = &mut inner.stats;
        for array in stats.arrays_mut() {
            array.iter_mut().for_each(Stat::reset_accumulated);
        }
        stats.num_alloc_retries = 0;
        stats.num_ooms = 0;
        stats.num_sync_all_streams = 0;
        stats.num_device_alloc = 0;
        stats.num_device_free = 0;
        stats.oversize_allocations.reset_accumulated();
        stats.oversize_segments.reset_accumulated();
    }

    /// `torch.cuda.memory_snapshot()`'s segments, in address order, each with its blocks.
    pub fn snapshot(&self) -> Vec<SegmentSnapshot> {
        let inner = self.lock();
        let mut segments: Vec<SegmentSnapshot> = inner
            .segment_heads()
            .map(|head| {
                let first = inner.block(head);
                let mut segment = SegmentSnapshot {
                    address: first.ptr,
                    total_size: 0,
                    stream: first.stream,
                    is_small: first.small,
                    allocated_size: 0,
                    active_size: 0,
                    blocks: Vec::new(),
                };
                let mut cursor = Some(head);
                while let Some(id) = cursor {
                    let block = inner.block(id);
                    segment.total_size += block.size;
                    if block.allocated {
                        segment.allocated_size += block.size;
                        segment.active_size += block.size;
                    }
                    segment.blocks.push(BlockSnapshot {
                        address: block.ptr,
                        size: block.size,
                        requested_size: block.requested,
                        allocated: block.allocated,
                    });
                    cursor = block.next;
                }
                segment
            })
            .collect();
        segments.sort_by_key(|s| s.address);
        segments
    }
}

impl Drop for CachingAllocator {
    /// Gives the wholly free cached segments back to the device; segments holding live
    /// allocations stay with the device (those allocations can no longer be freed).
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        inner.release_cached_blocks(&*self.raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Arc;

    const MIB: usize = 1 << 20;

    /// The fake device's bookkeeping.
    #[derive(Debug, Default)]
    struct FakeState {
        capacity: u64,
        next_address: u64,
        /// Address -> size of each outstanding allocation.
        outstanding: HashMap<u64, usize>,
        used: u64,
        mallocs: usize,
        frees: usize,
        /// Refuse every malloc (a device taken by another process).
        refuse: bool,
    }

    /// A device of `capacity` bytes: addresses from a bump counter aligned to 512 bytes.
    #[derive(Clone, Debug)]
    struct FakeMemory(Arc<Mutex<FakeState>>);

    impl FakeMemory {
        fn new(capacity: usize) -> FakeMemory {
            FakeMemory(Arc::new(Mutex::new(FakeState {
                capacity: capacity as u64,
                next_address: 0x7f00_0000_0000,
                ..FakeState::default()
            })))
        }

        fn state(&self) -> MutexGuard<'_, FakeState> {
            self.0.lock().unwrap()
        }

        fn mallocs(&self) -> usize {
            self.state().mallocs
        }

        fn frees(&self) -> usize {
            self.state().frees
        }

        fn used(&self) -> u64 {
            self.state().used
        }
    }

    impl RawMemory for FakeMemory {
        fn malloc(&self, bytes: usize) -> Option<u64> {
            let mut s = self.state();
            if s.refuse || s.used + bytes as u64 > s.capacity {
                return None;
            }
            let ptr = s.next_address;
            s.next_address += (bytes as u64).div_ceil(512) * 512;
            s.used += bytes as u64;
            s.mallocs += 1;
            s.outstanding.insert(ptr, bytes);
            Some(ptr)
        }

        fn free(&self, ptr: u64) {
            let mut s = self.state();
            let bytes = s.outstanding.remove(&ptr).expect("freeing what the fake did not allocate");
            s.used -= bytes as u64;
            s.frees += 1;
        }

        fn mem_get_info(&self) -> (u64, u64) {
            let s = self.state();
            (s.capacity - s.used, s.capacity)
        }
    }

    fn allocator(capacity: usize) -> (CachingAllocator, FakeMemory) {
        let fake = FakeMemory::new(capacity);
        (CachingAllocator::new(0, Box::new(fake.clone())), fake)
    }

    /// `[current, peak, allocated, freed]` of a stat such as "allocated_bytes.all".
    fn stat(a: &CachingAllocator, name: &str) -> [u64; 4] {
        let s = a.memory_stats();
        ["current", "peak", "allocated", "freed"].map(|f| s[&format!("{name}.{f}")])
    }

    fn counter(a: &CachingAllocator, name: &str) -> u64 {
        a.memory_stats()[name]
    }

    // ---- sizes ----

    #[test]
    fn round_size_rounds_up_to_a_multiple_of_512_bytes() {
        assert_eq!(round_size(0), 512);
        assert_eq!(round_size(1), 512);
        assert_eq!(round_size(512), 512);
        assert_eq!(round_size(513), 1024);
        assert_eq!(round_size(MIB + 1), MIB + 512);
    }

    #[test]
    fn small_requests_get_2_mib_segments_up_to_10_mib_20_mib_beyond_that_2_mib_multiples() {
        assert_eq!(allocation_size(round_size(1)), 2 * MIB);
        assert_eq!(allocation_size(round_size(MIB)), 2 * MIB);
        assert_eq!(allocation_size(round_size(MIB + 1)), 20 * MIB);
        assert_eq!(allocation_size(round_size(10 * MIB - 512)), 20 * MIB);
        assert_eq!(allocation_size(round_size(10 * MIB - 1)), 10 * MIB, "rounding comes first");
        assert_eq!(allocation_size(round_size(10 * MIB)), 10 * MIB);
        assert_eq!(allocation_size(round_size(10 * MIB + 1)), 12 * MIB);
        assert_eq!(allocation_size(round_size(25 * MIB)), 26 * MIB);
    }

    #[test]
    fn format_size_words_bytes_as_pytorch() {
        assert_eq!(format_size(0), "0 bytes");
        assert_eq!(format_size(1024), "1024 bytes");
        assert_eq!(format_size(1025), "1.00 KiB");
        assert_eq!(format_size(1536), "1.50 KiB");
        assert_eq!(format_size(1 << 20), "1024.00 KiB");
        assert_eq!(format_size((1 << 20) + 1), "1.00 MiB");
        assert_eq!(format_size(20 << 20), "20.00 MiB");
        assert_eq!(format_size(1 << 30), "1024.00 MiB");
        assert_eq!(format_size(3 << 29), "1.50 GiB");
        assert_eq!(format_size(80 << 30), "80.00 GiB");
    }

    // ---- reuse and splitting ----

    #[test]
    fn zero_bytes_gives_a_null_allocation_that_costs_nothing() {
        let (a, fake) = allocator(64 * MIB);
        let null = a.malloc(0, 3).unwrap();
        assert_eq!((null.ptr, null.size, null.requested, null.stream), (0, 0, 0, 3));
        a.free(null);
        assert_eq!(fake.mallocs(), 0);
        assert_eq!(stat(&a, "allocation.all"), [0; 4]);
    }

    #[test]
    fn small_allocations_share_one_2_mib_segment() {
        let (a, fake) = allocator(64 * MIB);
        let x = a.malloc(1, 0).unwrap();
        let y = a.malloc(1000, 0).unwrap();
        assert_eq!((x.size, y.size), (512, 1024));
        assert_eq!(y.ptr, x.ptr + 512, "the second is split off the same segment");
        assert_eq!(fake.mallocs(), 1);
        assert_eq!(fake.used(), 2 * MIB as u64);
        a.free(x);
        a.free(y);
    }

    #[test]
    fn freeing_every_block_of_a_segment_merges_it_back_into_one_free_block() {
        let (a, _fake) = allocator(64 * MIB);
        let x = a.malloc(1000, 0).unwrap();
        let y = a.malloc(1000, 0).unwrap();
        assert_eq!(a.snapshot()[0].blocks.len(), 3);
        a.free(x);
        assert_eq!(a.snapshot()[0].blocks.len(), 3, "x's block cannot merge with allocated y");
        a.free(y);
        let segments = a.snapshot();
        assert_eq!(segments.len(), 1);
        assert_eq!(
            segments[0].blocks,
            [BlockSnapshot {
                address: segments[0].address,
                size: 2 * MIB,
                requested_size: 0,
                allocated: false
            }]
        );
        assert_eq!(stat(&a, "inactive_split.all")[0], 0);
        assert_eq!(stat(&a, "inactive_split_bytes.all")[0], 0);
    }

    #[test]
    fn a_freed_block_is_reused_for_the_same_size_without_a_device_malloc() {
        let (a, fake) = allocator(64 * MIB);
        let x = a.malloc(3000, 0).unwrap();
        let ptr = x.ptr;
        a.free(x);
        let again = a.malloc(3000, 0).unwrap();
        assert_eq!(again.ptr, ptr);
        assert_eq!(fake.mallocs(), 1);
        assert_eq!(counter(&a, "num_device_alloc"), 1);
        a.free(again);
    }

    #[test]
    fn best_fit_takes_the_smallest_free_block_that_fits() {
        let (a, fake) = allocator(256 * MIB);
        let big = a.malloc(30 * MIB, 0).unwrap();
        let small = a.malloc(14 * MIB, 0).unwrap();
        let (big_ptr, small_ptr) = (big.ptr, small.ptr);
        a.free(big);
        a.free(small);
        let x = a.malloc(12 * MIB, 0).unwrap();
        assert_eq!(x.ptr, small_ptr, "the 14 MiB block is the best fit for 12 MiB");
        let y = a.malloc(16 * MIB, 0).unwrap();
        assert_eq!(y.ptr, big_ptr);
        assert_eq!(fake.mallocs(), 2);
        a.free(x);
        a.free(y);
    }

    #[test]
    fn large_pool_does_not_split_when_at_most_1_mib_would_remain() {
        let (a, fake) = allocator(256 * MIB);
        let x = a.malloc(12 * MIB, 0).unwrap();
        let ptr = x.ptr;
        a.free(x);
        let y = a.malloc(11 * MIB, 0).unwrap();
        assert_eq!((y.ptr, y.size, y.requested), (ptr, 12 * MIB, 11 * MIB), "the 1 MiB rest stays inside");
        assert_eq!(a.snapshot()[0].blocks.len(), 1);
        assert_eq!(stat(&a, "allocated_bytes.all")[0], 12 * MIB as u64);
        assert_eq!(stat(&a, "requested_bytes.all")[0], 11 * MIB as u64);
        a.free(y);
        assert_eq!(fake.mallocs(), 1);
    }

    #[test]
    fn large_pool_splits_when_more_than_1_mib_would_remain() {
        let (a, _fake) = allocator(256 * MIB);
        let x = a.malloc(12 * MIB, 0).unwrap();
        a.free(x);
        let y = a.malloc(11 * MIB - 512, 0).unwrap();
        assert_eq!(y.size, 11 * MIB - 512);
        let blocks = &a.snapshot()[0].blocks;
        assert_eq!(blocks.iter().map(|b| b.size).collect::<Vec<_>>(), [11 * MIB - 512, MIB + 512]);
        a.free(y);
    }

    #[test]
    fn small_pool_splits_whenever_at_least_512_bytes_remain() {
        let (a, _fake) = allocator(64 * MIB);
        let x = a.malloc(MIB, 0).unwrap();
        let y = a.malloc(MIB - 512, 0).unwrap();
        assert!(a.snapshot()[0].is_small);
        let sizes: Vec<usize> = a.snapshot()[0].blocks.iter().map(|b| b.size).collect();
        assert_eq!(sizes, [MIB, MIB - 512, 512], "a 512-byte rest is split off");
        let z = a.malloc(1, 0).unwrap();
        assert_eq!(z.ptr, y.ptr + y.size as u64);
        assert_eq!(a.snapshot()[0].blocks.len(), 3, "z took the whole 512-byte rest");
        for b in [x, y, z] {
            a.free(b);
        }
    }

    #[test]
    fn requests_between_1_and_10_mib_carve_a_shared_20_mib_segment() {
        let (a, fake) = allocator(256 * MIB);
        let x = a.malloc(3 * MIB, 0).unwrap();
        let y = a.malloc(5 * MIB, 0).unwrap();
        let z = a.malloc(13 * MIB, 0).unwrap(); // the 12 MiB rest is too small: a 14 MiB segment
        assert_eq!(y.ptr, x.ptr + 3 * MIB as u64);
        assert_eq!(fake.mallocs(), 2);
        let segments = a.snapshot();
        assert_eq!(segments.iter().map(|s| s.total_size).collect::<Vec<_>>(), [20 * MIB, 14 * MIB]);
        assert!(!segments[0].is_small);
        for b in [x, y, z] {
            a.free(b);
        }
    }

    #[test]
    fn a_block_freed_on_one_stream_is_reused_only_on_that_stream() {
        let (a, fake) = allocator(64 * MIB);
        let x = a.malloc(4096, 1).unwrap();
        let ptr = x.ptr;
        a.free(x);
        let other = a.malloc(4096, 2).unwrap();
        assert_ne!(other.ptr, ptr);
        assert_eq!(fake.mallocs(), 2, "stream 2 needs a segment of its own");
        let same = a.malloc(4096, 1).unwrap();
        assert_eq!(same.ptr, ptr);
        assert_eq!(fake.mallocs(), 2);
        let streams: Vec<StreamId> = a.snapshot().iter().map(|s| s.stream).collect();
        assert_eq!(streams, [1, 2]);
        a.free(other);
        a.free(same);
    }

    // ---- giving memory back ----

    #[test]
    fn empty_cache_frees_only_whole_free_segments() {
        let (a, fake) = allocator(256 * MIB);
        let live_small = a.malloc(100, 0).unwrap();
        let dead_small = a.malloc(100, 7).unwrap(); // its own segment: another stream
        let live_large = a.malloc(3 * MIB, 0).unwrap(); // 3 MiB of a 20 MiB segment
        let dead_large = a.malloc(12 * MIB, 7).unwrap();
        a.free(dead_small);
        a.free(dead_large);
        assert_eq!(stat(&a, "reserved_bytes.all")[0], (2 + 2 + 20 + 12) as u64 * MIB as u64);
        a.empty_cache();
        assert_eq!(fake.frees(), 2);
        assert_eq!(stat(&a, "reserved_bytes.all")[0], 22 * MIB as u64);
        assert_eq!(
            stat(&a, "reserved_bytes.small_pool"),
            [2 * MIB as u64, 4 * MIB as u64, 4 * MIB as u64, 2 * MIB as u64]
        );
        assert_eq!(stat(&a, "segment.all"), [2, 4, 4, 2]);
        assert_eq!(fake.used(), 22 * MIB as u64);
        assert_eq!(counter(&a, "num_device_free"), 2);
        assert_eq!(counter(&a, "num_sync_all_streams"), 1);
        assert_eq!(stat(&a, "inactive_split_bytes.large_pool")[0], 17 * MIB as u64, "the free part stays");
        a.free(live_small);
        a.free(live_large);
        a.empty_cache();
        assert_eq!(fake.used(), 0);
        assert!(a.snapshot().is_empty());
    }

    #[test]
    fn dropping_the_allocator_gives_its_cached_segments_back() {
        let (a, fake) = allocator(64 * MIB);
        let x = a.malloc(5 * MIB, 0).unwrap();
        a.free(x);
        assert_eq!(fake.used(), 20 * MIB as u64);
        drop(a);
        assert_eq!(fake.used(), 0);
    }

    // ---- out of memory ----

    #[test]
    fn malloc_frees_the_cache_and_retries_when_the_device_is_full() {
        let (a, fake) = allocator(64 * MIB);
        let x = a.malloc(40 * MIB, 0).unwrap();
        a.free(x);
        let y = a.malloc(50 * MIB, 0).unwrap(); // 40 MiB cached + 50 MiB > 64 MiB
        assert_eq!(y.size, 50 * MIB);
        assert_eq!(counter(&a, "num_alloc_retries"), 1);
        assert_eq!(counter(&a, "num_ooms"), 0);
        assert_eq!((fake.mallocs(), fake.frees()), (2, 1));
        assert_eq!(stat(&a, "reserved_bytes.all")[0], 50 * MIB as u64);
        a.free(y);
    }

    #[test]
    fn out_of_memory_after_the_retry_fails_with_pytorchs_message() {
        let (a, fake) = allocator(40 * MIB);
        let big = a.malloc(30 * MIB, 0).unwrap();
        let small = a.malloc(1000, 0).unwrap();
        let e = a.malloc(4 * MIB, 0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfMemory);
        assert_eq!(
            e.message,
            "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 40.00 MiB of which \
             8.00 MiB is free. Of the allocated memory 30.00 MiB is allocated by PyTorch, and 2.00 MiB is \
             reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting \
             PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for \
             Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        );
        assert_eq!(counter(&a, "num_ooms"), 1);
        assert_eq!(counter(&a, "num_alloc_retries"), 1, "the cache was emptied and the malloc retried");
        let e = a.malloc(12 * MIB, 0).unwrap_err();
        assert!(e
            .message
            .contains("CUDA out of memory. Tried to allocate 12.00 MiB. GPU 0 has a total capacity of"));
        assert!(e.message.contains("is reserved by PyTorch but unallocated"));
        assert_eq!(counter(&a, "num_ooms"), 2);
        a.free(big);
        a.free(small);
        assert_eq!(fake.frees(), 0, "failing never freed a live segment");
    }

    #[test]
    fn an_oom_names_the_device_of_the_allocator() {
        let fake = FakeMemory::new(64 * MIB);
        fake.state().refuse = true;
        let a = CachingAllocator::new(3, Box::new(fake));
        assert_eq!(a.device(), 3);
        let e = a.malloc(100, 0).unwrap_err();
        assert!(
            e.message.starts_with("CUDA out of memory. Tried to allocate 2.00 MiB. GPU 3 has"),
            "{}",
            e.message
        );
    }

    #[test]
    fn an_exabyte_or_more_fails_without_touching_the_device() {
        let (a, fake) = allocator(64 * MIB);
        let e = a.malloc(1 << 60, 0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfMemory);
        assert_eq!(e.message, "CUDA out of memory. Tried to allocate more than 1EB memory.");
        assert_eq!(fake.mallocs(), 0);
        assert_eq!(counter(&a, "num_ooms"), 0);
    }

    // ---- memory fraction and limit ----

    #[test]
    fn memory_fraction_caps_reserved_memory_and_names_the_cap() {
        let (a, _fake) = allocator(64 * MIB);
        a.set_memory_fraction(0.5).unwrap();
        assert_eq!(a.memory_limit(), Some(32 * MIB as u64));
        let x = a.malloc(12 * MIB, 0).unwrap();
        let y = a.malloc(12 * MIB, 0).unwrap();
        let e = a.malloc(12 * MIB, 0).unwrap_err(); // 36 MiB reserved > 32 MiB
        assert_eq!(e.kind, ErrorKind::OutOfMemory);
        assert!(
            e.message.contains(
                "GPU 0 has a total capacity of 64.00 MiB of which 40.00 MiB is free. 32.00 MiB allowed; Of the \
                 allocated memory 24.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but \
                 unallocated."
            ),
            "{}",
            e.message
        );
        // A cached segment is given back to make room under the cap.
        a.free(x);
        let z = a.malloc(14 * MIB, 0).unwrap(); // 12 cached + 12 + 14 > 32: the cache goes first
        assert_eq!(stat(&a, "reserved_bytes.all")[0], 26 * MIB as u64);
        a.free(y);
        a.free(z);
    }

    #[test]
    fn memory_fraction_outside_0_to_1_is_a_value_error() {
        let (a, _fake) = allocator(64 * MIB);
        let e = a.set_memory_fraction(1.5).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Value);
        assert_eq!(e.message, "Invalid fraction value: 1.5. Allowed range: 0~1");
        assert_eq!(
            a.set_memory_fraction(-2.0).unwrap_err().message,
            "Invalid fraction value: -2.0. Allowed range: 0~1"
        );
        assert_eq!(a.set_memory_fraction(f64::NAN).unwrap_err().kind, ErrorKind::Value);
        assert_eq!(a.memory_limit(), None);
        a.set_memory_fraction(0.0).unwrap();
        assert_eq!(a.memory_limit(), Some(0));
        a.set_memory_fraction(1.0).unwrap();
        assert_eq!(a.memory_limit(), Some(64 * MIB as u64));
    }

    #[test]
    fn memory_limit_is_an_absolute_cap_that_none_lifts() {
        let (a, _fake) = allocator(64 * MIB);
        a.set_memory_limit(Some(4 * MIB as u64));
        let x = a.malloc(100, 0).unwrap();
        let e = a.malloc(3 * MIB, 0).unwrap_err();
        assert!(e.message.contains("4.00 MiB allowed; "));
        a.set_memory_limit(None);
        assert_eq!(a.memory_limit(), None);
        let y = a.malloc(3 * MIB, 0).unwrap();
        a.free(x);
        a.free(y);
    }

    #[test]
    fn python_float_repr_matches_for_error_messages() {
        assert_eq!(py_float(1.5), "1.5");
        assert_eq!(py_float(2.0), "2.0");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(-1e-5), "-1e-05");
        assert_eq!(py_float(f64::INFINITY), "inf");
        assert_eq!(py_float(f64::NAN), "nan");
    }

    // ---- statistics ----

    #[test]
    fn stats_follow_a_scripted_sequence_exactly() {
        let (a, _fake) = allocator(256 * MIB);
        let x = a.malloc(1000, 0).unwrap(); // 1024 B of a new 2 MiB small segment
        let y = a.malloc(3 * MIB, 0).unwrap(); // 3 MiB of a new 20 MiB large segment
        let z = a.malloc(12 * MIB, 0).unwrap(); // 12 MiB of its 17 MiB rest: a cache hit
        let w = a.malloc(600_000, 0).unwrap(); // 600064 B of the small segment's rest
        assert_eq!(z.ptr, y.ptr + 3 * MIB as u64);
        assert_eq!(w.ptr, x.ptr + 1024);
        a.free(x); // the small segment's front is free, but cannot merge with w
        a.free(z); // merges with the 5 MiB rest
        a.free(y); // merges with the 17 MiB: the large segment is whole again
        let m = MIB as u64;
        assert_eq!(stat(&a, "allocation.all"), [1, 4, 4, 3]);
        assert_eq!(stat(&a, "allocation.small_pool"), [1, 2, 2, 1]);
        assert_eq!(stat(&a, "allocation.large_pool"), [0, 2, 2, 2]);
        assert_eq!(stat(&a, "active.all"), stat(&a, "allocation.all"));
        assert_eq!(stat(&a, "segment.all"), [2, 2, 2, 0]);
        assert_eq!(stat(&a, "segment.small_pool"), [1, 1, 1, 0]);
        assert_eq!(stat(&a, "segment.large_pool"), [1, 1, 1, 0]);
        assert_eq!(stat(&a, "allocated_bytes.all"), [600064, 16329728, 16329728, 15729664]);
        assert_eq!(stat(&a, "allocated_bytes.small_pool"), [600064, 601088, 601088, 1024]);
        assert_eq!(stat(&a, "allocated_bytes.large_pool"), [0, 15 * m, 15 * m, 15 * m]);
        for pool in ["all", "small_pool", "large_pool"] {
            assert_eq!(
                stat(&a, &format!("active_bytes.{pool}")),
                stat(&a, &format!("allocated_bytes.{pool}"))
            );
        }
        assert_eq!(stat(&a, "reserved_bytes.all"), [22 * m, 22 * m, 22 * m, 0]);
        assert_eq!(stat(&a, "reserved_bytes.small_pool"), [2 * m, 2 * m, 2 * m, 0]);
        assert_eq!(stat(&a, "reserved_bytes.large_pool"), [20 * m, 20 * m, 20 * m, 0]);
        assert_eq!(stat(&a, "requested_bytes.all"), [600000, 16329640, 16329640, 15729640]);
        assert_eq!(stat(&a, "requested_bytes.small_pool"), [600000, 601000, 601000, 1000]);
        assert_eq!(stat(&a, "requested_bytes.large_pool"), [0, 15 * m, 15 * m, 15 * m]);
        assert_eq!(stat(&a, "inactive_split.all"), [2, 3, 3, 1]);
        assert_eq!(stat(&a, "inactive_split.small_pool"), [2, 2, 2, 0]);
        assert_eq!(stat(&a, "inactive_split.large_pool"), [0, 1, 1, 1]);
        assert_eq!(stat(&a, "inactive_split_bytes.all"), [1497088, 19921920, 32505856, 31008768]);
        assert_eq!(stat(&a, "inactive_split_bytes.small_pool"), [1497088, 2096128, 2097152, 600064]);
        assert_eq!(stat(&a, "inactive_split_bytes.large_pool"), [0, 17 * m, 29 * m, 29 * m]);
        assert_eq!(counter(&a, "num_device_alloc"), 2);
        assert_eq!(counter(&a, "num_device_free"), 0);
        assert_eq!(counter(&a, "num_alloc_retries"), 0);
        assert_eq!(counter(&a, "num_ooms"), 0);
        assert_eq!(counter(&a, "num_sync_all_streams"), 0);

        a.empty_cache(); // the large segment goes; the small one holds w
        assert_eq!(stat(&a, "reserved_bytes.all"), [2 * m, 22 * m, 22 * m, 20 * m]);
        assert_eq!(stat(&a, "segment.large_pool"), [0, 1, 1, 1]);
        assert_eq!(counter(&a, "num_device_free"), 1);
        assert_eq!(counter(&a, "num_sync_all_streams"), 1);

        a.reset_peak_memory_stats();
        assert_eq!(stat(&a, "allocated_bytes.all"), [600064, 600064, 16329728, 15729664]);
        assert_eq!(stat(&a, "reserved_bytes.all"), [2 * m, 2 * m, 22 * m, 20 * m]);
        assert_eq!(stat(&a, "inactive_split.all"), [2, 2, 3, 1]);

        a.reset_accumulated_memory_stats();
        assert_eq!(stat(&a, "allocated_bytes.all"), [600064, 600064, 0, 0]);
        assert_eq!(stat(&a, "segment.all"), [1, 1, 0, 0]);
        for key in ["num_device_alloc", "num_device_free", "num_sync_all_streams"] {
            assert_eq!(counter(&a, key), 0, "{key}");
        }
        a.free(w);
        assert_eq!(stat(&a, "allocated_bytes.all"), [0, 600064, 0, 600064]);
        assert_eq!(stat(&a, "inactive_split.all"), [0, 2, 0, 2]);
    }

    #[test]
    fn memory_stats_has_pytorchs_keys_and_reports_unlimited_max_split_size_as_minus_one() {
        let (a, _fake) = allocator(64 * MIB);
        let stats = a.memory_stats();
        assert_eq!(stats.len(), 9 * 3 * 4 + 2 * 4 + 6);
        for key in [
            "allocation.all.current",
            "segment.small_pool.peak",
            "active.large_pool.allocated",
            "inactive_split.all.freed",
            "allocated_bytes.all.current",
            "reserved_bytes.large_pool.current",
            "active_bytes.small_pool.freed",
            "inactive_split_bytes.all.peak",
            "requested_bytes.all.current",
            "oversize_allocations.current",
            "oversize_segments.freed",
            "num_alloc_retries",
            "num_ooms",
            "num_sync_all_streams",
            "num_device_alloc",
            "num_device_free",
        ] {
            assert_eq!(stats[key], 0, "{key}");
        }
        assert_eq!(stats["max_split_size"], u64::MAX);
        assert_eq!(stats["max_split_size"] as i64, -1);
    }

    #[test]
    fn snapshot_lists_segments_and_blocks_consistent_with_stats() {
        let (a, _fake) = allocator(256 * MIB);
        let x = a.malloc(1000, 0).unwrap();
        let y = a.malloc(600_000, 0).unwrap();
        let z = a.malloc(3 * MIB, 5).unwrap();
        a.free(x);
        let segments = a.snapshot();
        assert_eq!(segments.len(), 2);
        let small = &segments[0];
        assert!(small.is_small);
        assert_eq!(
            (small.stream, small.total_size, small.allocated_size, small.active_size),
            (0, 2 * MIB, 600064, 600064)
        );
        assert_eq!(
            small.blocks,
            [
                BlockSnapshot { address: small.address, size: 1024, requested_size: 0, allocated: false },
                BlockSnapshot { address: y.ptr, size: 600064, requested_size: 600_000, allocated: true },
                BlockSnapshot {
                    address: y.ptr + 600064,
                    size: 2 * MIB - 1024 - 600064,
                    requested_size: 0,
                    allocated: false
                },
            ]
        );
        let large = &segments[1];
        assert!(!large.is_small);
        assert_eq!(
            (large.address, large.stream, large.total_size, large.allocated_size),
            (z.ptr, 5, 20 * MIB, 3 * MIB)
        );
        assert_eq!(large.blocks.len(), 2);
        let reserved: usize = segments.iter().map(|s| s.total_size).sum();
        let allocated: usize = segments.iter().map(|s| s.allocated_size).sum();
        assert_eq!(stat(&a, "reserved_bytes.all")[0], reserved as u64);
        assert_eq!(stat(&a, "allocated_bytes.all")[0], allocated as u64);
        let inactive_split: Vec<&BlockSnapshot> =
            segments.iter().flat_map(|s| &s.blocks).filter(|b| !b.allocated).collect();
        assert_eq!(stat(&a, "inactive_split.all")[0], inactive_split.len() as u64);
        assert_eq!(
            stat(&a, "inactive_split_bytes.all")[0],
            inactive_split.iter().map(|b| b.size as u64).sum::<u64>()
        );
        a.free(y);
        a.free(z);
    }

    // ---- max_split_size ----

    fn split_limited(capacity: usize, max_split: usize) -> (CachingAllocator, FakeMemory) {
        let fake = FakeMemory::new(capacity);
        (CachingAllocator::with_max_split_size(0, Box::new(fake.clone()), Some(max_split)).unwrap(), fake)
    }

    #[test]
    fn max_split_size_must_be_at_least_20_mib() {
        let e = CachingAllocator::with_max_split_size(0, Box::new(FakeMemory::new(MIB)), Some(20 * MIB - 1))
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Value);
        assert_eq!(e.message, "CachingAllocator option max_split_size_mb too small, must be >= 20");
        assert!(
            CachingAllocator::with_max_split_size(0, Box::new(FakeMemory::new(MIB)), Some(20 * MIB)).is_ok()
        );
        let a = CachingAllocator::with_max_split_size(0, Box::new(FakeMemory::new(MIB)), None).unwrap();
        assert_eq!(a.memory_stats()["max_split_size"], u64::MAX);
    }

    #[test]
    fn oversize_blocks_are_neither_split_nor_reused_for_smaller_requests() {
        let (a, fake) = split_limited(512 * MIB, 32 * MIB);
        assert_eq!(a.memory_stats()["max_split_size"], 32 * MIB as u64);
        let x = a.malloc(40 * MIB, 0).unwrap();
        assert_eq!(stat(&a, "oversize_allocations"), [1, 1, 1, 0]);
        assert_eq!(stat(&a, "oversize_segments"), [1, 1, 1, 0]);
        a.free(x);
        assert_eq!(stat(&a, "oversize_allocations"), [0, 1, 1, 1]);
        let y = a.malloc(12 * MIB, 0).unwrap(); // below max_split: the 40 MiB block is not for it
        assert_eq!(fake.mallocs(), 2);
        let z = a.malloc(21 * MIB, 0).unwrap(); // below max_split too: a 22 MiB segment
        assert_eq!(fake.mallocs(), 3);
        a.free(z);
        let z = a.malloc(34 * MIB, 0).unwrap(); // within 20 MiB: taken whole, unsplit
        assert_eq!((z.size, z.requested), (40 * MIB, 34 * MIB));
        assert_eq!(fake.mallocs(), 3);
        a.free(y);
        a.free(z);
    }

    #[test]
    fn with_max_split_size_an_oom_first_frees_the_smallest_oversize_block_that_suffices() {
        let (a, fake) = split_limited(110 * MIB, 30 * MIB);
        let x = a.malloc(60 * MIB, 0).unwrap();
        let y = a.malloc(32 * MIB, 0).unwrap();
        let keep = a.malloc(12 * MIB, 0).unwrap();
        a.free(x);
        a.free(y);
        // 60 MiB is more than 20 MiB too big to serve 35 MiB, and 104 + 36 MiB does not fit.
        let z = a.malloc(35 * MIB, 0).unwrap();
        assert_eq!(z.size, 36 * MIB);
        assert_eq!(counter(&a, "num_alloc_retries"), 0, "release_available_cached_blocks sufficed");
        assert_eq!(fake.frees(), 1);
        assert_eq!(
            stat(&a, "reserved_bytes.all")[0],
            (32 + 12 + 36) as u64 * MIB as u64,
            "32 MiB stays cached"
        );
        a.free(z);
        a.free(keep);
    }

    #[test]
    fn with_max_split_size_an_oom_frees_the_largest_oversize_blocks_until_they_suffice() {
        let (a, fake) = split_limited(100 * MIB, 30 * MIB);
        let x = a.malloc(40 * MIB, 0).unwrap();
        let y = a.malloc(34 * MIB, 0).unwrap();
        let keep = a.malloc(12 * MIB, 0).unwrap();
        a.free(x);
        a.free(y);
        let z = a.malloc(64 * MIB, 0).unwrap(); // 86 + 64 MiB does not fit; 40 MiB alone is too little
        assert_eq!(counter(&a, "num_alloc_retries"), 0, "release_available_cached_blocks sufficed");
        assert_eq!(fake.frees(), 2);
        assert_eq!(stat(&a, "oversize_segments")[0], 1);
        a.free(z);
        a.free(keep);
    }

    // ---- ownership, threads, invariants ----

    #[test]
    #[should_panic(expected = "invalid device pointer")]
    fn freeing_an_allocation_of_another_allocator_panics() {
        let (a, _fa) = allocator(64 * MIB);
        let (b, _fb) = allocator(64 * MIB);
        let x = a.malloc(100, 0).unwrap();
        b.free(x);
    }

    #[test]
    fn the_allocator_is_send_and_sync_and_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CachingAllocator>();
        assert_send_sync::<Allocation>();
        let (a, _fake) = allocator(1 << 30);
        let a = Arc::new(a);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let a = Arc::clone(&a);
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    for i in 0..300 {
                        held.push(a.malloc((i * 40_009 + t * 7) % (3 * MIB) + 1, t as StreamId).unwrap());
                        if i % 3 == 0 {
                            a.free(held.swap_remove(i % held.len()));
                        }
                    }
                    held.into_iter().for_each(|x| a.free(x));
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        a.lock().check_invariants();
        assert_eq!(stat(&a, "allocated_bytes.all")[0], 0);
        assert_eq!(stat(&a, "allocation.all")[2], 1200);
    }

    /// Recomputes everything `Inner` keeps incrementally and checks the block lists.
    impl Inner {
        fn check_invariants(&self) {
            let mut free_blocks = 0;
            // [allocation, allocated_bytes, requested_bytes, segment, reserved_bytes,
            //  inactive_split, inactive_split_bytes] per stat type.
            let mut expected = [[0u64; 7]; 3];
            for (id, block) in self.arena.iter().enumerate() {
                let Some(block) = block else { continue };
                assert!(block.size >= MIN_BLOCK_SIZE && block.size % MIN_BLOCK_SIZE == 0);
                if let Some(p) = block.prev {
                    assert_eq!(self.block(p).next, Some(id));
                }
                if let Some(n) = block.next {
                    let next = self.block(n);
                    assert_eq!(next.prev, Some(id));
                    assert_eq!(block.ptr + block.size as u64, next.ptr, "blocks tile their segment");
                    assert_eq!((next.stream, next.small), (block.stream, block.small));
                    assert!(block.allocated || next.allocated, "free neighbours were not merged");
                }
                for t in stat_types(block.small) {
                    let e = &mut expected[t];
                    if block.allocated {
                        e[0] += 1;
                        e[1] += block.size as u64;
                        e[2] += block.requested as u64;
                    } else if block.is_split() {
                        e[5] += 1;
                        e[6] += block.size as u64;
                    }
                    if block.prev.is_none() {
                        let mut segment_size = 0;
                        let mut cursor = Some(id);
                        while let Some(c) = cursor {
                            segment_size += self.block(c).size as u64;
                            cursor = self.block(c).next;
                        }
                        e[3] += 1;
                        e[4] += segment_size;
                    }
                }
                if !block.allocated {
                    free_blocks += 1;
                    assert_eq!(self.pool(block.small).get(&block.key()), Some(&id), "free block not cached");
                }
            }
            assert_eq!(free_blocks, self.small_free.len() + self.large_free.len());
            let s = &self.stats;
            for (t, e) in expected.iter().enumerate() {
                let actual = [
                    s.allocation[t].current,
                    s.allocated_bytes[t].current,
                    s.requested_bytes[t].current,
                    s.segment[t].current,
                    s.reserved_bytes[t].current,
                    s.inactive_split[t].current,
                    s.inactive_split_bytes[t].current,
                ];
                assert_eq!(&actual, e, "stat type {t}");
                assert_eq!(s.active[t].current, s.allocation[t].current);
                assert_eq!(s.active_bytes[t].current, s.allocated_bytes[t].current);
            }
            assert_eq!(self.total_allocated_memory, s.reserved_bytes[AGGREGATE].current);
        }
    }

    /// A xorshift64 generator: reproducible randomness without dependencies.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Checks what the public API and the fake device show against the live allocations.
    fn check_consistency(a: &CachingAllocator, fake: &FakeMemory, live: &[Allocation]) {
        let segments = a.snapshot();
        for s in &segments {
            assert_eq!(s.total_size, s.blocks.iter().map(|b| b.size).sum::<usize>());
            assert_eq!(s.blocks[0].address, s.address);
            for pair in s.blocks.windows(2) {
                assert_eq!(pair[0].address + pair[0].size as u64, pair[1].address);
            }
        }
        let mut sorted: Vec<&Allocation> = live.iter().collect();
        sorted.sort_by_key(|x| x.ptr);
        for pair in sorted.windows(2) {
            assert!(pair[0].ptr + pair[0].size as u64 <= pair[1].ptr, "live allocations overlap");
        }
        for x in live {
            let segment = segments
                .iter()
                .find(|s| s.address <= x.ptr && x.ptr + x.size as u64 <= s.address + s.total_size as u64)
                .expect("a live allocation outside every segment");
            assert_eq!(segment.stream, x.stream);
            let block =
                BlockSnapshot { address: x.ptr, size: x.size, requested_size: x.requested, allocated: true };
            assert!(segment.blocks.contains(&block));
        }
        let allocated: usize = live.iter().map(|x| x.size).sum();
        let requested: usize = live.iter().map(|x| x.requested).sum();
        let reserved: usize = segments.iter().map(|s| s.total_size).sum();
        assert_eq!(stat(a, "allocated_bytes.all")[0], allocated as u64);
        assert_eq!(stat(a, "requested_bytes.all")[0], requested as u64);
        assert_eq!(stat(a, "allocation.all")[0], live.len() as u64);
        assert_eq!(stat(a, "reserved_bytes.all")[0], reserved as u64);
        assert_eq!(fake.used(), reserved as u64);
        let mut device: Vec<(u64, usize)> = fake.state().outstanding.iter().map(|(&p, &n)| (p, n)).collect();
        device.sort();
        let cached: Vec<(u64, usize)> = segments.iter().map(|s| (s.address, s.total_size)).collect();
        assert_eq!(device, cached, "segments are exactly what the device handed out");
        a.lock().check_invariants();
    }

    /// Runs a few thousand random mallocs (1 B ..= 30 MiB, two streams), frees in random order
    /// and occasional `empty_cache`s, checking everything after each; then frees everything.
    fn run_random_operations(a: &CachingAllocator, fake: &FakeMemory, seed: u64) -> (u64, usize) {
        let mut rng = XorShift(seed);
        let mut live: Vec<Allocation> = Vec::new();
        let (mut ooms, mut hits) = (0, 0);
        for _ in 0..4000 {
            let op = rng.below(100);
            if op < 52 {
                let bytes = match rng.below(10) {
                    0..=4 => {
                        let bits = 1 + rng.below(20);
                        1 + rng.below(1 << bits) // 1 B ..= 1 MiB, spread over the powers of two
                    }
                    5..=7 => MIB + 1 + rng.below(9 * MIB), // the 20 MiB segments' range
                    _ => 10 * MIB + rng.below(20 * MIB),   // own segments, up to 30 MiB
                };
                let stream = rng.below(2) as StreamId;
                let mallocs = fake.mallocs();
                match a.malloc(bytes, stream) {
                    Ok(x) => {
                        assert!(x.size >= round_size(bytes));
                        assert_eq!((x.requested, x.stream), (bytes, stream));
                        hits += usize::from(fake.mallocs() == mallocs);
                        live.push(x);
                    }
                    Err(e) => {
                        assert_eq!(e.kind, ErrorKind::OutOfMemory);
                        ooms += 1;
                    }
                }
            } else if op < 98 {
                if !live.is_empty() {
                    let i = rng.below(live.len());
                    a.free(live.swap_remove(i));
                }
            } else {
                a.empty_cache();
            }
            check_consistency(a, fake, &live);
        }
        assert_eq!(counter(a, "num_ooms"), ooms);
        for x in live.drain(..) {
            a.free(x);
        }
        a.empty_cache();
        check_consistency(a, fake, &live);
        assert_eq!(fake.used(), 0);
        assert!(fake.state().outstanding.is_empty());
        assert_eq!(fake.mallocs(), fake.frees());
        assert!(a.snapshot().is_empty());
        for (key, value) in a.memory_stats() {
            if key.ends_with(".current") {
                assert_eq!(value, 0, "{key}");
            }
        }
        (ooms, hits)
    }

    #[test]
    fn random_operations_keep_every_invariant() {
        for seed in [0x2545_f491_4f6c_dd1d, 7, 0xdead_beef] {
            let (a, fake) = allocator(256 * MIB);
            let (ooms, hits) = run_random_operations(&a, &fake, seed);
            assert!(ooms > 0 && hits > 1000, "the run exercised OOMs ({ooms}) and cache hits ({hits})");
        }
    }

    #[test]
    fn random_operations_keep_every_invariant_with_max_split_size_and_a_memory_cap() {
        let (a, fake) = split_limited(512 * MIB, 24 * MIB);
        a.set_memory_limit(Some(200 * MIB as u64));
        let (ooms, hits) = run_random_operations(&a, &fake, 0x9e37_79b9_7f4a_7c15);
        assert!(ooms > 0 && hits > 1000, "the run exercised OOMs ({ooms}) and cache hits ({hits})");
        assert!(fake.state().mallocs > 0);
    }
}
