//! Autocast (`torch.autocast("cpu", dtype=...)`): inside a region, the ops that gain from a
//! lower precision (matrix products, convolutions, attention) run in bfloat16 or float16, the
//! ops that need range run in float32 (the losses, `prod`, `cdist`, `trace`), and every other op
//! runs in its inputs' dtype. The lists are PyTorch 2.15's CPU lists, measured in PyTorch
//! itself (`reference/gen_autocast_dtypes.py`); softmax and the norms are not forced to float32
//! on the CPU, unlike CUDA.
//!
//! The region is a guard, per thread, and nests: an inner `enabled: false` region turns autocast
//! off until it ends. Casts are ordinary differentiable ops, so backward runs in the dtypes the
//! forward chose and a float32 weight gets a float32 gradient. With `cache_enabled` (the
//! default), the lower-precision copy of a leaf that requires grad (a weight) is made once per
//! region and reused, as PyTorch's cast cache does.
//!
//! ```
//! use pyrite_core::autocast::{autocast, AutocastOptions};
//! use pyrite_core::{DType, Tensor};
//! let a = Tensor::randn([4, 8], DType::F32)?;
//! let w = Tensor::randn([8, 3], DType::F32)?.requires_grad_(true)?;
//! let y = {
//!     let _ac = autocast(AutocastOptions::default())?; // bfloat16 on the CPU
//!     let y = a.matmul(&w)?;
//!     assert_eq!(y.dtype(), DType::BF16);
//!     assert_eq!(y.exp()?.dtype(), DType::BF16); // other ops keep their inputs' dtype
//!     y
//! };
//! y.to_dtype(DType::F32)?.sum()?.backward()?;
//! assert_eq!(w.grad().unwrap().dtype(), DType::F32);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use crate::{bail, DType, Device, Result, Tensor};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// The options of [`autocast`], with PyTorch's defaults for the CPU.
#[derive(Clone, Debug)]
pub struct AutocastOptions {
    /// The device whose ops are cast (`device_type`; the CPU until a CUDA backend lands).
    pub device_type: Device,
    /// The lower precision: `BF16` (the CPU's default) or `F16`.
    pub dtype: DType,
    pub enabled: bool,
    /// Reuse the cast of a weight (a leaf that requires grad) within the region.
    pub cache_enabled: bool,
}

impl Default for AutocastOptions {
    fn default() -> Self {
        AutocastOptions { device_type: Device::Cpu, dtype: DType::BF16, enabled: true, cache_enabled: true }
    }
}

#[derive(Clone, Copy, Debug)]
struct State {
    enabled: bool,
    dtype: DType,
    cache: bool,
}

/// A weight's cast, by (tensor handle, storage offset, dtype): the source (kept to check that it
/// is still the same tensor at the same version) and its cast.
type CastCache = HashMap<(usize, usize, DType), (Tensor, Tensor)>;

thread_local! {
    static STATE: Cell<State> = const { Cell::new(State { enabled: false, dtype: DType::BF16, cache: true }) };
    /// How many enabled regions are open: the cast cache is cleared when the last one closes.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Casts of weights, by (storage, offset, dtype), while a region with the cache is open.
    static CACHE: RefCell<CastCache> = RefCell::new(HashMap::new());
}

/// Whether autocast is on for `device` on this thread (`torch.is_autocast_enabled`).
pub fn is_autocast_enabled(device: Device) -> bool {
    device == Device::Cpu && is_active()
}

/// The lower precision autocast uses on `device` (`torch.get_autocast_dtype`).
pub fn get_autocast_dtype(device: Device) -> DType {
    let _ = device;
    STATE.with(|s| s.get().dtype)
}

/// Restores the autocast state when dropped.
#[must_use = "autocast stays on only while the guard lives"]
#[derive(Debug)]
pub struct AutocastGuard {
    prev: State,
    counted: bool,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        STATE.with(|s| s.set(self.prev));
        if self.counted {
            let left = DEPTH.with(|d| {
                let n = d.get() - 1;
                d.set(n);
                n
            });
            if left == 0 {
                CACHE.with(|c| c.borrow_mut().clear());
            }
        }
    }
}

/// `torch.autocast(device_type, dtype, enabled, cache_enabled)`: autocast on (or off, with
/// `enabled: false`) until the guard is dropped. On the CPU the dtype must be bfloat16 or
/// float16; PyTorch warns and disables autocast for another one, Pyrite returns that error.
pub fn autocast(options: AutocastOptions) -> Result<AutocastGuard> {
    if options.device_type != Device::Cpu {
        bail!(Device, "autocast: device_type {} has no backend in this build", options.device_type);
    }
    if options.enabled && !matches!(options.dtype, DType::BF16 | DType::F16) {
        bail!(
            DType,
            "In CPU autocast, but the target dtype is not supported. CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently (got {}).",
            options.dtype
        );
    }
    let prev = STATE.with(|s| s.get());
    STATE.with(|s| {
        s.set(State { enabled: options.enabled, dtype: options.dtype, cache: options.cache_enabled })
    });
    if options.enabled {
        DEPTH.with(|d| d.set(d.get() + 1));
    }
    Ok(AutocastGuard { prev, counted: options.enabled })
}

/// Autocast off while the op it wraps runs (PyTorch redispatches below the autocast key).
fn suspend() -> AutocastGuard {
    let prev = STATE.with(|s| s.get());
    STATE.with(|s| s.set(State { enabled: false, ..prev }));
    AutocastGuard { prev, counted: false }
}

/// Whether autocast casts `t`: a floating tensor other than float64.
/// For an op of the float32 list that is not a plain function of tensors: `t` cast to
/// float32, and a guard that keeps autocast off while the op runs.
pub(crate) fn fp32_input(t: &Tensor) -> Result<(Tensor, AutocastGuard)> {
    let x = cast(t, DType::F32, false)?;
    Ok((x, suspend()))
}

fn eligible(t: &Tensor) -> bool {
    t.dtype().is_floating_point() && t.dtype() != DType::F64
}

fn cast(t: &Tensor, dtype: DType, cache: bool) -> Result<Tensor> {
    if !eligible(t) || t.dtype() == dtype {
        return Ok(t.clone());
    }
    // PyTorch caches the casts of leaves that require grad: the weights.
    if cache && t.is_leaf() && t.requires_grad() {
        let key = (t.handle_id(), t.storage_offset(), dtype);
        if let Some(hit) = CACHE.with(|c| {
            c.borrow()
                .get(&key)
                .filter(|(src, _)| src.is_same(t) && src.version() == t.version())
                .map(|(_, v)| v.clone())
        }) {
            return Ok(hit);
        }
        let v = t.to_dtype(dtype)?;
        CACHE.with(|c| c.borrow_mut().insert(key, (t.clone(), v.clone())));
        return Ok(v);
    }
    t.to_dtype(dtype)
}

/// Runs an op of the lower-precision list: its floating inputs (`None`: an absent optional
/// input) cast to the autocast dtype, then `op` with autocast off.
pub fn lower_precision_op(
    inputs: &[Option<&Tensor>],
    op: impl FnOnce(&[Option<Tensor>]) -> Result<Tensor>,
) -> Result<Tensor> {
    let s = STATE.with(|s| s.get());
    let cast_inputs = inputs
        .iter()
        .map(|t| t.map(|t| cast(t, s.dtype, s.cache)).transpose())
        .collect::<Result<Vec<_>>>()?;
    let _off = suspend();
    op(&cast_inputs)
}

/// Runs an op of the float32 list: its lower-precision floating inputs cast to float32, then
/// `op` with autocast off.
pub fn fp32_op(
    inputs: &[Option<&Tensor>],
    op: impl FnOnce(&[Option<Tensor>]) -> Result<Tensor>,
) -> Result<Tensor> {
    let cast_inputs = inputs
        .iter()
        .map(|t| t.map(|t| cast(t, DType::F32, false)).transpose())
        .collect::<Result<Vec<_>>>()?;
    let _off = suspend();
    op(&cast_inputs)
}

/// [`lower_precision_op`] for two inputs.
pub fn lower2(a: &Tensor, b: &Tensor, op: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>) -> Result<Tensor> {
    lower_precision_op(&[Some(a), Some(b)], |t| op(t[0].as_ref().unwrap(), t[1].as_ref().unwrap()))
}

/// [`lower_precision_op`] for three inputs, the last optional (a bias).
pub fn lower3(
    a: &Tensor,
    b: &Tensor,
    c: Option<&Tensor>,
    op: impl FnOnce(&Tensor, &Tensor, Option<&Tensor>) -> Result<Tensor>,
) -> Result<Tensor> {
    lower_precision_op(&[Some(a), Some(b), c], |t| {
        op(t[0].as_ref().unwrap(), t[1].as_ref().unwrap(), t[2].as_ref())
    })
}

/// [`fp32_op`] for two inputs.
pub fn fp32_2(a: &Tensor, b: &Tensor, op: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>) -> Result<Tensor> {
    fp32_op(&[Some(a), Some(b)], |t| op(t[0].as_ref().unwrap(), t[1].as_ref().unwrap()))
}

/// Whether autocast is on on this thread: the check every op of a list starts with.
#[inline]
pub fn is_active() -> bool {
    STATE.with(|s| s.get().enabled)
}
