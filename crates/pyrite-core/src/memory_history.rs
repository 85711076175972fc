//! Memory history: where the memory went (`torch.cuda.memory._record_memory_history`,
//! `_snapshot`, `_dump_snapshot`).
//!
//! While recording, the allocators (the CPU's, and each GPU's caching allocator through
//! `storage::CudaStorage`) report every tensor allocation and free with its device, size and
//! time; each allocation carries what was known when it was made — the op that made it, the
//! module it ran in (`features.3.conv`) — and a [`Category`] that says what the memory is
//! for: parameters, gradients, optimizer state, activations saved for backward, or
//! temporaries. Categories change as the program goes on (an op's output becomes an
//! activation when a backward formula saves it), and each change is a `tag` entry in the
//! trace, so the bytes of every category are known at every point of the trace.
//!
//! Who says what:
//! - the autograd recorder names an op's outputs after the op (`Mul` for `MulBackward0`) and
//!   tags the tensors a node saves as activations, with the node's name;
//! - the engine names what a backward formula allocates after its node, and tags a leaf's
//!   accumulated gradient as a gradient (`fc.weight.grad` when the leaf has a name);
//! - `pyrite-nn`'s `Module::call` says which module runs, and names the parameters and
//!   buffers of the module it is called on (`features.0.weight`);
//! - an optimizer's `step` tags its state (`fc.weight: exp_avg`);
//! - [`scope`] names what a region of user code allocates (PyTorch's `record_function`).
//!
//! Allocations made before recording started are counted as [`Category::Unknown`] until
//! something tags them. Recording off costs one relaxed atomic load per allocation and free.
//!
//! ```
//! use pyrite_core::memory::{self, Category, HistoryOptions};
//! use pyrite_core::{DType, Tensor};
//! memory::record_memory_history(HistoryOptions::default())?;
//! let w = Tensor::randn([64, 64], DType::F32)?.requires_grad_(true)?; // a parameter
//! let x = Tensor::randn([8, 64], DType::F32)?;
//! let loss = x.matmul(&w)?.tanh()?.sum()?; // tanh's output is saved for backward
//! loss.backward()?;
//! let snap = memory::memory_snapshot()?;
//! memory::record_memory_history(HistoryOptions { enabled: false, ..Default::default() })?;
//! let live = |c: Category| snap.blocks.iter().filter(|b| b.category == c).count();
//! assert_eq!(live(Category::Parameter), 1);
//! assert_eq!(live(Category::Gradient), 1); // w.grad
//! assert!(snap.trace.iter().any(|e| e.category == Category::Activation && &*e.name == "TanhBackward0"));
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use crate::{bail, Device, Result, Tensor};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// What a piece of memory is for (the categories of PyTorch's memory profiler).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// A module's parameters and buffers, and any leaf that requires grad.
    Parameter,
    /// A leaf's accumulated `.grad`.
    Gradient,
    /// An optimizer's per-parameter state (`exp_avg`, `momentum_buffer`, ...).
    OptimizerState,
    /// A tensor a backward formula saved: it lives until the backward pass.
    Activation,
    /// Everything else an op made: outputs not saved, intermediates, gradients in flight.
    Temporary,
    /// Allocated before recording started and never tagged since.
    Unknown,
}

impl Category {
    /// Every category, in the order the page stacks them (bottom first).
    pub const ALL: [Category; 6] = [
        Category::Parameter,
        Category::OptimizerState,
        Category::Gradient,
        Category::Activation,
        Category::Temporary,
        Category::Unknown,
    ];

    /// The name used in the JSON and on the page (`optimizer_state`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Category::Parameter => "parameter",
            Category::Gradient => "gradient",
            Category::OptimizerState => "optimizer_state",
            Category::Activation => "activation",
            Category::Temporary => "temporary",
            Category::Unknown => "unknown",
        }
    }

    pub(crate) fn index(self) -> usize {
        Category::ALL.iter().position(|&c| c == self).unwrap()
    }
}

/// What a trace entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A tensor buffer was allocated (PyTorch's `alloc`).
    Alloc,
    /// A tensor buffer was freed (PyTorch's `free_completed`).
    Free,
    /// A live buffer changed category (ours).
    Tag,
    /// An allocation failed: out of memory (PyTorch's `oom`); `size` is the request.
    Oom,
}

impl Action {
    /// The name in the JSON (PyTorch's trace names where PyTorch has one).
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::Free => "free_completed",
            Action::Tag => "tag",
            Action::Oom => "oom",
        }
    }
}

/// One entry of the trace.
#[derive(Clone, Debug)]
pub struct TraceEntry {
    pub action: Action,
    /// Where the memory is (the CPU, or a GPU).
    pub device: Device,
    /// The buffer's address (0 for an `Oom`).
    pub addr: usize,
    /// The buffer's size in bytes (what `memory_allocated` counts), or the failed request.
    pub size: u64,
    /// Microseconds since recording started.
    pub time_us: u64,
    /// The category after this entry (for a free: the one it had).
    pub category: Category,
    /// For a `Tag`: the category before.
    pub previous: Category,
    /// The op that made the buffer (`Mul`, `AddmmBackward0`, a [`scope`] label), or "".
    pub op: Arc<str>,
    /// The module that was running when it was made (`features.3.conv`), or "".
    pub module: Arc<str>,
    /// What the buffer is: a parameter's name, `fc.weight.grad`, `fc.weight: exp_avg`, or
    /// for an activation the backward node that saved it (`TanhBackward0`).
    pub name: Arc<str>,
}

/// A live allocation.
#[derive(Clone, Debug)]
pub struct Block {
    pub device: Device,
    pub addr: usize,
    pub size: u64,
    pub category: Category,
    pub op: Arc<str>,
    pub module: Arc<str>,
    pub name: Arc<str>,
    /// When it was allocated, in microseconds since recording started.
    pub time_us: u64,
}

/// What [`memory_snapshot`] returns: the trace and the live allocations of one device.
#[derive(Clone, Debug, Default)]
pub struct MemorySnapshot {
    /// The device whose memory this is.
    pub device: Device,
    /// The trace, oldest first (the last `max_entries` entries).
    pub trace: Vec<TraceEntry>,
    /// Bytes per category (in [`Category::ALL`]'s order) before the first entry of `trace`:
    /// what was allocated before recording started, plus the effect of dropped entries.
    pub baseline: [u64; 6],
    /// The allocations live now that recording saw being made or tagged.
    pub blocks: Vec<Block>,
    /// How many old entries were dropped to keep `max_entries`.
    pub dropped_entries: u64,
    /// `memory_allocated` and `memory_reserved` when the snapshot was taken.
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
}

/// The options of [`record_memory_history`], with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct HistoryOptions {
    /// `true` starts (or goes on) recording, `false` stops (PyTorch's `enabled=None`). The
    /// trace recorded so far stays readable after a stop; starting again begins a new one.
    pub enabled: bool,
    /// Keep only the newest `max_entries` trace entries (default: all).
    pub max_entries: usize,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions { enabled: true, max_entries: usize::MAX }
    }
}

struct Live {
    size: u64,
    category: Category,
    op: Arc<str>,
    module: Arc<str>,
    name: Arc<str>,
    time_us: u64,
    /// Sequence number of its `Alloc` entry (to rename it in place while it is in the trace).
    seq: u64,
}

struct History {
    start: Instant,
    max_entries: usize,
    trace: VecDeque<TraceEntry>,
    /// Sequence number of `trace[0]`.
    first_seq: u64,
    /// Per device: bytes per category before the first entry of `trace`.
    baseline: HashMap<Device, [i64; 6]>,
    dropped: u64,
    live: HashMap<(Device, usize), Live>,
}

static RECORDING: AtomicBool = AtomicBool::new(false);
static HISTORY: Mutex<Option<History>> = Mutex::new(None);

thread_local! {
    static SCOPES: RefCell<Scopes> = const { RefCell::new(Scopes { ops: Vec::new(), modules: Vec::new() }) };
}

struct Scopes {
    ops: Vec<Arc<str>>,
    modules: Vec<Arc<str>>,
}

fn empty() -> Arc<str> {
    static E: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    E.get_or_init(|| Arc::from("")).clone()
}

fn history() -> MutexGuard<'static, Option<History>> {
    HISTORY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether memory history is being recorded.
#[inline]
pub fn is_recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// `torch.cuda.memory._record_memory_history`: starts or stops recording every allocation and
/// free of tensor memory, on the CPU and on every GPU (see the module docs for what each entry
/// says; [`memory_snapshot_of`] reads one device's).
pub fn record_memory_history(options: HistoryOptions) -> Result<()> {
    if options.max_entries == 0 {
        bail!(Value, "record_memory_history: max_entries must be positive");
    }
    let mut h = history();
    if !options.enabled {
        RECORDING.store(false, Ordering::SeqCst);
        crate::alloc::set_alloc_hook(crate::alloc::HOOK_HISTORY, false);
        return Ok(());
    }
    if RECORDING.load(Ordering::SeqCst) {
        if let Some(h) = h.as_mut() {
            h.max_entries = options.max_entries;
            h.trim();
        }
        return Ok(());
    }
    let mut baseline = HashMap::new();
    let devices = std::iter::once(Device::Cpu).chain((0..crate::cuda_device_count()).map(Device::Cuda));
    for d in devices {
        let mut b = [0i64; 6];
        // A GPU nothing ran on yet has nothing allocated (and is not woken up to say so).
        b[Category::Unknown.index()] = crate::alloc::memory_allocated(d).unwrap_or(0) as i64;
        baseline.insert(d, b);
    }
    *h = Some(History {
        start: Instant::now(),
        max_entries: options.max_entries,
        trace: VecDeque::new(),
        first_seq: 0,
        baseline,
        dropped: 0,
        live: HashMap::new(),
    });
    RECORDING.store(true, Ordering::SeqCst);
    crate::alloc::set_alloc_hook(crate::alloc::HOOK_HISTORY, true);
    Ok(())
}

/// The trace recorded so far and the live allocations of the CPU's memory (see
/// [`memory_snapshot_of`] for a GPU's).
pub fn memory_snapshot() -> Result<MemorySnapshot> {
    memory_snapshot_of(Device::Cpu)
}

/// `torch.cuda.memory._snapshot(device)`: the trace recorded so far and the live allocations
/// of `device`'s memory (recording covers every device at once).
pub fn memory_snapshot_of(device: Device) -> Result<MemorySnapshot> {
    device.check_available()?;
    let allocated_bytes = crate::alloc::memory_allocated(device)?;
    let reserved_bytes = crate::alloc::memory_reserved(device)?;
    let h = history();
    let Some(h) = h.as_ref() else {
        return Ok(MemorySnapshot { device, allocated_bytes, reserved_bytes, ..Default::default() });
    };
    let mut blocks: Vec<Block> = h
        .live
        .iter()
        .filter(|((d, _), _)| *d == device)
        .map(|(&(device, addr), l)| Block {
            device,
            addr,
            size: l.size,
            category: l.category,
            op: l.op.clone(),
            module: l.module.clone(),
            name: l.name.clone(),
            time_us: l.time_us,
        })
        .collect();
    blocks.sort_by_key(|b| (b.time_us, b.addr));
    Ok(MemorySnapshot {
        device,
        trace: h.trace.iter().filter(|e| e.device == device).cloned().collect(),
        baseline: h.baseline.get(&device).copied().unwrap_or_default().map(|b| b.max(0) as u64),
        blocks,
        dropped_entries: h.dropped,
        allocated_bytes,
        reserved_bytes,
    })
}

/// `torch.cuda.memory._dump_snapshot(path)` for the CPU's memory: writes [`memory_snapshot`]
/// as JSON to `path` and a self-contained page showing it (see [`MemorySnapshot::to_html`])
/// beside it, with the extension `.html`. Returns the page's path. Both are written whole or
/// not at all.
pub fn dump_snapshot(path: impl AsRef<std::path::Path>) -> Result<std::path::PathBuf> {
    dump_snapshot_of(path, Device::Cpu)
}

/// [`dump_snapshot`] of `device`'s memory (a GPU's: `torch.cuda.memory._dump_snapshot`).
pub fn dump_snapshot_of(path: impl AsRef<std::path::Path>, device: Device) -> Result<std::path::PathBuf> {
    let path = path.as_ref();
    let snap = memory_snapshot_of(device)?;
    let html = path.with_extension("html");
    if html == path {
        bail!(
            Value,
            "dump_snapshot: {} is where the page goes; name the JSON file otherwise",
            path.display()
        );
    }
    write_atomic(path, snap.to_json().as_bytes())?;
    write_atomic(&html, snap.to_html().as_bytes())?;
    Ok(html)
}

fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let io = |e: std::io::Error| crate::err!(Io, "dump_snapshot: cannot write {}: {e}", path.display());
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// A region whose allocations are named `label` (PyTorch's `record_function`): the op name
/// of what is allocated while the guard lives, innermost scope first. Costs nothing when
/// history is not being recorded.
///
/// ```
/// use pyrite_core::memory;
/// let _s = memory::scope("data augmentation");
/// ```
pub fn scope(label: &str) -> ScopeGuard {
    if !is_recording() {
        return ScopeGuard { kind: ScopeKind::None };
    }
    push_op(Arc::from(label))
}

pub(crate) fn push_op(label: Arc<str>) -> ScopeGuard {
    SCOPES.with(|s| s.borrow_mut().ops.push(label));
    ScopeGuard { kind: ScopeKind::Op }
}

/// Says that the module at `path` (`features.3.conv`) runs until the guard is dropped: what
/// it allocates is attributed to it. Called by `pyrite-nn`'s `Module::call` while recording.
pub fn module_scope(path: Arc<str>) -> ScopeGuard {
    SCOPES.with(|s| s.borrow_mut().modules.push(path));
    ScopeGuard { kind: ScopeKind::Module }
}

/// The path of the innermost module running on this thread ("" outside modules).
pub fn current_module() -> Arc<str> {
    SCOPES.with(|s| s.borrow().modules.last().cloned()).unwrap_or_else(empty)
}

enum ScopeKind {
    None,
    Op,
    Module,
}

/// Ends a [`scope`] or [`module_scope`] when dropped.
#[must_use = "the scope ends when the guard is dropped"]
pub struct ScopeGuard {
    kind: ScopeKind,
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        match self.kind {
            ScopeKind::None => {}
            ScopeKind::Op => SCOPES.with(|s| {
                s.borrow_mut().ops.pop();
            }),
            ScopeKind::Module => SCOPES.with(|s| {
                s.borrow_mut().modules.pop();
            }),
        }
    }
}

impl History {
    fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    fn push(&mut self, e: TraceEntry) {
        self.trace.push_back(e);
        self.trim();
    }

    /// Drops the oldest entries past `max_entries`, folding them into the baseline.
    fn trim(&mut self) {
        while self.trace.len() > self.max_entries {
            let e = self.trace.pop_front().unwrap();
            self.first_seq += 1;
            self.dropped += 1;
            apply(self.baseline.entry(e.device).or_default(), &e);
        }
    }

    fn next_seq(&self) -> u64 {
        self.first_seq + self.trace.len() as u64
    }
}

/// Adds an entry's effect to per-category byte counts.
pub(crate) fn apply(totals: &mut [i64; 6], e: &TraceEntry) {
    let s = e.size as i64;
    match e.action {
        Action::Alloc => totals[e.category.index()] += s,
        Action::Free => totals[e.category.index()] -= s,
        Action::Tag => {
            totals[e.previous.index()] -= s;
            totals[e.category.index()] += s;
        }
        Action::Oom => {}
    }
}

/// Called by the allocators after they hand out `size` bytes at `addr` on `device`.
#[cold]
#[inline(never)]
pub(crate) fn on_alloc(device: Device, addr: usize, size: u64) {
    let (op, module) = SCOPES.with(|s| {
        let s = s.borrow();
        (s.ops.last().cloned().unwrap_or_else(empty), s.modules.last().cloned().unwrap_or_else(empty))
    });
    let mut g = history();
    let Some(h) = g.as_mut() else { return };
    if !is_recording() {
        return;
    }
    let time_us = h.now();
    let seq = h.next_seq();
    let name = empty();
    h.live.insert(
        (device, addr),
        Live {
            size,
            category: Category::Temporary,
            op: op.clone(),
            module: module.clone(),
            name: name.clone(),
            time_us,
            seq,
        },
    );
    h.push(TraceEntry {
        action: Action::Alloc,
        device,
        addr,
        size,
        time_us,
        category: Category::Temporary,
        previous: Category::Temporary,
        op,
        module,
        name,
    });
}

/// Called by the allocators before they take back the `size` bytes at `addr` on `device`.
#[cold]
#[inline(never)]
pub(crate) fn on_free(device: Device, addr: usize, size: u64) {
    let mut g = history();
    let Some(h) = g.as_mut() else { return };
    if !is_recording() {
        return;
    }
    let time_us = h.now();
    let e = match h.live.remove(&(device, addr)) {
        Some(l) => TraceEntry {
            action: Action::Free,
            device,
            addr,
            size: l.size,
            time_us,
            category: l.category,
            previous: l.category,
            op: l.op,
            module: l.module,
            name: l.name,
        },
        None => TraceEntry {
            action: Action::Free,
            device,
            addr,
            size,
            time_us,
            category: Category::Unknown,
            previous: Category::Unknown,
            op: empty(),
            module: empty(),
            name: empty(),
        },
    };
    h.push(e);
}

/// Called by the allocators when an allocation of `size` bytes on `device` fails.
#[cold]
#[inline(never)]
pub(crate) fn on_oom(device: Device, size: u64) {
    let module = current_module();
    let mut g = history();
    let Some(h) = g.as_mut() else { return };
    let time_us = h.now();
    let op = SCOPES.with(|s| s.borrow().ops.last().cloned()).unwrap_or_else(empty);
    h.push(TraceEntry {
        action: Action::Oom,
        device,
        addr: 0,
        size,
        time_us,
        category: Category::Temporary,
        previous: Category::Temporary,
        op,
        module,
        name: empty(),
    });
}

/// The device, address and capacity of a tensor's buffer, or `None` when its storage is
/// locked for writing right now (then nothing is tagged) or empty.
fn buffer_of(t: &Tensor) -> Option<((Device, usize), u64)> {
    let cell = t.storage();
    let s = cell.try_read()?;
    match &*s {
        crate::storage::Storage::Cpu(b) => {
            (b.capacity() > 0).then(|| ((Device::Cpu, b.as_ptr() as usize), b.capacity() as u64))
        }
        #[cfg(feature = "cuda")]
        crate::storage::Storage::Cuda(b) => {
            (b.capacity() > 0).then(|| ((Device::Cuda(b.device()), b.ptr() as usize), b.capacity() as u64))
        }
    }
}

/// Whether tagging a buffer of category `have` as `want` changes it: parameters, gradients
/// and optimizer state are said by whoever owns them; an activation or a name for the op only
/// labels memory that nobody has claimed yet.
fn overrides(have: Category, want: Category) -> bool {
    match want {
        Category::Activation => matches!(have, Category::Temporary | Category::Unknown),
        Category::OptimizerState => have != Category::Parameter,
        _ => true,
    }
}

/// Says that `t`'s memory is `category`, named `name` (the module docs list who calls this).
/// Does nothing unless history is being recorded.
pub fn tag(t: &Tensor, category: Category, name: &str) {
    if !is_recording() {
        return;
    }
    let Some((key, cap)) = buffer_of(t) else { return };
    let (device, addr) = key;
    let mut g = history();
    let Some(h) = g.as_mut() else { return };
    let time_us = h.now();
    let (previous, size, op, module) = match h.live.get_mut(&key) {
        Some(l) => {
            // An empty name keeps the one the memory has.
            if !overrides(l.category, category)
                || (l.category == category && (name.is_empty() || &*l.name == name))
            {
                return;
            }
            let prev = l.category;
            l.category = category;
            if !name.is_empty() {
                l.name = Arc::from(name);
            }
            (prev, l.size, l.op.clone(), l.module.clone())
        }
        None => {
            let name: Arc<str> = Arc::from(name);
            let seq = h.next_seq();
            h.live
                .insert(key, Live { size: cap, category, op: empty(), module: empty(), name, time_us, seq });
            (Category::Unknown, cap, empty(), empty())
        }
    };
    let name = h.live[&key].name.clone();
    h.push(TraceEntry {
        action: Action::Tag,
        device,
        addr,
        size,
        time_us,
        category,
        previous,
        op,
        module,
        name,
    });
}

/// Names the op that made `t` (the autograd recorder calls this with the forward op's name)
/// unless it has a name already. Renames the allocation's entry in place: no new entry.
pub(crate) fn name_op(t: &Tensor, op: &str) {
    if !is_recording() {
        return;
    }
    let Some((key, _)) = buffer_of(t) else { return };
    let mut g = history();
    let Some(h) = g.as_mut() else { return };
    let Some(l) = h.live.get_mut(&key) else { return };
    // The first op to claim a fresh buffer made it; a view recorded later shares the buffer
    // and does not rename it, nor does an op inside a named scope.
    if !l.op.is_empty() {
        return;
    }
    let op: Arc<str> = Arc::from(op);
    l.op = op.clone();
    let seq = l.seq;
    if seq >= h.first_seq
        && let Some(e) = h.trace.get_mut((seq - h.first_seq) as usize)
        && (e.device, e.addr) == key
        && e.action == Action::Alloc
    {
        e.op = op;
    }
}

/// The name tagged on `t`'s memory, if any ("" when none), for naming what derives from it
/// (a gradient after its parameter).
pub fn name_of(t: &Tensor) -> Arc<str> {
    if !is_recording() {
        return empty();
    }
    let Some((key, _)) = buffer_of(t) else { return empty() };
    let g = history();
    g.as_ref().and_then(|h| h.live.get(&key)).map(|l| l.name.clone()).unwrap_or_else(empty)
}

/// The forward op a backward node stands for: `MulBackward0` -> `Mul`.
pub(crate) fn forward_op_name(node: &str) -> &str {
    match node.find("Backward") {
        Some(i) if i > 0 => &node[..i],
        _ => node,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_names() {
        assert_eq!(forward_op_name("MulBackward0"), "Mul");
        assert_eq!(forward_op_name("ConvolutionBackward0"), "Convolution");
        assert_eq!(forward_op_name("CheckpointFunctionBackward"), "CheckpointFunction");
        assert_eq!(forward_op_name("Backward"), "Backward");
    }

    #[test]
    fn categories_only_claim_unclaimed_memory_as_activations() {
        assert!(overrides(Category::Temporary, Category::Activation));
        assert!(!overrides(Category::Parameter, Category::Activation));
        assert!(!overrides(Category::Gradient, Category::Activation));
        assert!(!overrides(Category::Parameter, Category::OptimizerState));
        assert!(overrides(Category::Temporary, Category::Gradient));
    }
}
