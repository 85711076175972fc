//! Autocast (`torch.autocast(device_type, dtype=...)`): inside a region, the ops that gain from
//! a lower precision (matrix products, convolutions, attention) run in bfloat16 or float16, the
//! ops that need range run in float32 (the losses, `prod`, ...), and every other op runs in its
//! inputs' dtype. Each device type has its own state and its own lists, as in PyTorch: an op
//! follows the autocast of its inputs' device (CUDA when any input is on a GPU), and casts only
//! the floating inputs on that device.
//!
//! - The CPU lists are PyTorch 2.15's, measured in PyTorch itself
//!   (`reference/gen_autocast_dtypes.py`); softmax and the norms are not forced to float32 there.
//! - The CUDA lists are PyTorch 2.15's `AT_FORALL_*` lists, read from the `autocast_mode.h` its
//!   wheel ships (`reference/gen_autocast_cuda_lists.py`): matrix products and convolutions in
//!   float16 (the CUDA default), pointwise `exp`/`log`/`pow`..., the norms and the losses in
//!   float32, `softmax`/`sum`/`cumsum`... with a float32 result, and `addcmul`/`cat`-like ops in
//!   the widest input dtype. `binary_cross_entropy` is an error there (use the logits form).
//!
//! The region is a guard, per thread and device type, and nests: an inner `enabled: false`
//! region turns autocast off until it ends. Casts are ordinary differentiable ops, so backward runs in the dtypes the
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

/// The options of [`autocast`], with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct AutocastOptions {
    /// The device type whose ops are cast (`device_type`; any `Cuda(i)` means all GPUs, as
    /// `"cuda"` does in PyTorch).
    pub device_type: Device,
    /// The lower precision; `None` keeps the device's current one ([`get_autocast_dtype`]:
    /// bfloat16 on the CPU and float16 on CUDA unless a region set another).
    pub dtype: Option<DType>,
    pub enabled: bool,
    /// Reuse the cast of a weight (a leaf that requires grad) within the region.
    pub cache_enabled: bool,
}

impl Default for AutocastOptions {
    fn default() -> Self {
        AutocastOptions { device_type: Device::Cpu, dtype: None, enabled: true, cache_enabled: true }
    }
}

/// How autocast treats an op's floating inputs (PyTorch's `CastPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastPolicy {
    /// Every eligible input in the lower precision (`lower_precision_fp`).
    LowerPrecisionFp,
    /// Every eligible input in float32 (`fp32`).
    Fp32,
    /// A float32 result when the first input is eligible (`fp32_set_opt_dtype` and
    /// `fp32_append_dtype`: PyTorch passes `dtype=torch.float32`; Pyrite computes on the first
    /// input cast to float32, which is the same arithmetic).
    Fp32SetOptDtype,
    /// Every eligible input in the widest dtype among them (`promote`).
    Promote,
}

impl CastPolicy {
    /// Every policy, in the order PyTorch declares them.
    pub const ALL: [CastPolicy; 4] =
        [CastPolicy::LowerPrecisionFp, CastPolicy::Fp32, CastPolicy::Fp32SetOptDtype, CastPolicy::Promote];
}

/// The CPU lists (PyTorch 2.15's `AutocastCPU` registrations), as far as Pyrite has the ops.
#[rustfmt::skip]
const CPU_LOWER: &[&str] = &[
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "bmm", "mm", "baddbmm", "addmm", "linear", "matmul", "prelu", "scaled_dot_product_attention",
];
#[rustfmt::skip]
const CPU_FP32: &[&str] = &[
    "avg_pool3d", "binary_cross_entropy", "grid_sampler", "prod", "max_pool3d", "adaptive_avg_pool3d",
    "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "mse_loss", "cosine_embedding_loss", "nll_loss", "hinge_embedding_loss",
    "poisson_nll_loss", "smooth_l1_loss", "cross_entropy_loss", "l1_loss", "huber_loss",
    "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "ctc_loss",
    "kl_div", "multilabel_margin_loss", "binary_cross_entropy_with_logits",
];

/// The CUDA lists (PyTorch 2.15's `AT_FORALL_*` lists for `AutocastCUDA`), as far as Pyrite
/// routes the ops; `crates/pyrite/tests/cuda_autocast.rs` checks them against
/// `reference/data/autocast_cuda_lists.json` and names the listed ops left out.
#[rustfmt::skip]
const CUDA_LOWER: &[&str] = &[
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "prelu", "addmm", "matmul", "einsum", "mm", "mv", "linear", "baddbmm", "bmm",
    "scaled_dot_product_attention", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
];
#[rustfmt::skip]
const CUDA_FP32: &[&str] = &[
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "rms_norm",
    "group_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "logsumexp", "upsample_nearest1d",
    "_upsample_nearest_exact1d", "upsample_nearest2d", "_upsample_nearest_exact2d",
    "upsample_nearest3d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "upsample_trilinear3d", "upsample_bicubic2d",
];
/// With `norm`, PyTorch's one `fp32_append_dtype` op (the same arithmetic).
#[rustfmt::skip]
const CUDA_FP32_SET_OPT_DTYPE: &[&str] =
    &["prod", "softmax", "log_softmax", "cumprod", "cumsum", "sum", "norm"];
const CUDA_PROMOTE: &[&str] = &["atan2", "bilinear", "dot", "grid_sampler", "index_put", "scatter_add"];

/// PyTorch's message for the op its CUDA autocast refuses.
const BCE_BANNED: &str = "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\nMany models use a sigmoid layer right before the binary cross entropy layer.\nIn this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.";

/// The policy of op `op` (PyTorch's aten name) under `device`'s autocast; `None`: the op runs
/// in its inputs' dtypes there.
pub fn cast_policy(device: Device, op: &str) -> Option<CastPolicy> {
    CastPolicy::ALL.into_iter().find(|&p| listed_ops(device, p).contains(&op))
}

/// The ops on `device`'s lists with `policy`, in list order.
pub fn listed_ops(device: Device, policy: CastPolicy) -> &'static [&'static str] {
    match (device, policy) {
        (Device::Cpu, CastPolicy::LowerPrecisionFp) => CPU_LOWER,
        (Device::Cpu, CastPolicy::Fp32) => CPU_FP32,
        (Device::Cpu, _) => &[],
        (Device::Cuda(_), CastPolicy::LowerPrecisionFp) => CUDA_LOWER,
        (Device::Cuda(_), CastPolicy::Fp32) => CUDA_FP32,
        (Device::Cuda(_), CastPolicy::Fp32SetOptDtype) => CUDA_FP32_SET_OPT_DTYPE,
        (Device::Cuda(_), CastPolicy::Promote) => CUDA_PROMOTE,
    }
}

/// One device type's autocast state.
#[derive(Clone, Copy, Debug)]
struct State {
    enabled: bool,
    dtype: DType,
}

/// The states of the CPU and CUDA, and the cache flag (one for all, as in PyTorch).
#[derive(Clone, Copy, Debug)]
struct States {
    devices: [State; 2],
    cache: bool,
}

/// A weight's cast, by (tensor handle, storage offset, dtype): the source (kept to check that it
/// is still the same tensor at the same version) and its cast.
type CastCache = HashMap<(usize, usize, DType), (Tensor, Tensor)>;

thread_local! {
    static STATE: Cell<States> = const {
        Cell::new(States {
            devices: [State { enabled: false, dtype: DType::BF16 }, State { enabled: false, dtype: DType::F16 }],
            cache: true,
        })
    };
    /// How many enabled regions are open: the cast cache is cleared when the last one closes.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Casts of weights, by (storage, offset, dtype), while a region with the cache is open.
    static CACHE: RefCell<CastCache> = RefCell::new(HashMap::new());
}

fn slot(device: Device) -> usize {
    match device {
        Device::Cpu => 0,
        Device::Cuda(_) => 1,
    }
}

/// Whether autocast is on for `device`'s type on this thread (`torch.is_autocast_enabled`).
pub fn is_autocast_enabled(device: Device) -> bool {
    STATE.with(|s| s.get().devices[slot(device)].enabled)
}

/// The lower precision autocast uses on `device`'s type (`torch.get_autocast_dtype`).
pub fn get_autocast_dtype(device: Device) -> DType {
    STATE.with(|s| s.get().devices[slot(device)].dtype)
}

/// Restores the autocast state when dropped.
#[must_use = "autocast stays on only while the guard lives"]
#[derive(Debug)]
pub struct AutocastGuard {
    prev: States,
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
/// `enabled: false`) for `device_type` until the guard is dropped. On the CPU the dtype must be
/// bfloat16 or float16, and CUDA must be there for a CUDA region: PyTorch warns and disables
/// autocast in those cases, Pyrite returns the error.
pub fn autocast(options: AutocastOptions) -> Result<AutocastGuard> {
    let device = options.device_type;
    let dtype = options.dtype.unwrap_or_else(|| get_autocast_dtype(device));
    match device {
        Device::Cpu => {
            if options.enabled && !matches!(dtype, DType::BF16 | DType::F16) {
                bail!(
                    DType,
                    "In CPU autocast, but the target dtype is not supported. CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently (got {}).",
                    dtype
                );
            }
        }
        Device::Cuda(_) => {
            if options.enabled && !crate::device::cuda_is_available() {
                bail!(Device, "User provided device_type of 'cuda', but CUDA is not available");
            }
        }
    }
    let prev = STATE.with(|s| s.get());
    let mut next = prev;
    next.devices[slot(device)] = State { enabled: options.enabled, dtype };
    next.cache = options.cache_enabled;
    STATE.with(|s| s.set(next));
    if options.enabled {
        DEPTH.with(|d| d.set(d.get() + 1));
    }
    Ok(AutocastGuard { prev, counted: options.enabled })
}

/// Autocast off on every device while the op it wraps runs (PyTorch redispatches below the
/// autocast keys).
fn suspend() -> AutocastGuard {
    let prev = STATE.with(|s| s.get());
    let mut off = prev;
    for d in &mut off.devices {
        d.enabled = false;
    }
    STATE.with(|s| s.set(off));
    AutocastGuard { prev, counted: false }
}

/// Whether `device`'s autocast casts `t`: a floating tensor other than float64 on that device
/// type (PyTorch's `is_eligible`).
fn eligible(t: &Tensor, device: Device) -> bool {
    t.device().is_cuda() == device.is_cuda() && t.dtype().is_floating_point() && t.dtype() != DType::F64
}

fn cast(t: &Tensor, dtype: DType, cache: bool) -> Result<Tensor> {
    if t.dtype() == dtype {
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

/// An op's inputs after autocast's casts, in the order they were given.
pub struct Cast(Vec<Option<Tensor>>);

impl Cast {
    /// Input `i`, which was given.
    pub fn at(&self, i: usize) -> &Tensor {
        self.0[i].as_ref().expect("autocast: input given as None")
    }

    /// Input `i`, or `None` where none was given (an absent optional input).
    pub fn opt(&self, i: usize) -> Option<&Tensor> {
        self.0[i].as_ref()
    }
}

/// The entry of every op on autocast's lists, named by PyTorch's aten name: when autocast is
/// on for the device of `inputs` (`None`: an absent optional input) and `op` is on that
/// device's list, casts the eligible inputs as the list says and returns `Some` of `run` on
/// them with autocast off; otherwise `None`, and the op goes on as usual.
///
/// ```
/// use pyrite_core::autocast::{autocast, dispatch, AutocastOptions};
/// use pyrite_core::{DType, Result, Tensor};
/// fn my_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
///     if let Some(r) = dispatch("matmul", &[Some(a), Some(b)], |t| my_matmul(t.at(0), t.at(1))) {
///         return r;
///     }
///     a.matmul(b)
/// }
/// let a = Tensor::ones([2, 2], DType::F32)?;
/// let _ac = autocast(AutocastOptions::default())?;
/// assert_eq!(my_matmul(&a, &a)?.dtype(), DType::BF16);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[inline]
pub fn dispatch<R>(
    op: &'static str,
    inputs: &[Option<&Tensor>],
    run: impl FnOnce(&Cast) -> Result<R>,
) -> Option<Result<R>> {
    if !is_active() {
        return None;
    }
    match cast_inputs(op, inputs)? {
        Ok(cast) => {
            let _off = suspend();
            Some(run(&cast))
        }
        Err(e) => Some(Err(e)),
    }
}

/// The inputs of `op` cast for the autocast of their device; `None` when that autocast is off
/// or `op` is not on its lists.
#[cold]
fn cast_inputs(op: &'static str, inputs: &[Option<&Tensor>]) -> Option<Result<Cast>> {
    let device =
        if inputs.iter().flatten().any(|t| t.device().is_cuda()) { Device::Cuda(0) } else { Device::Cpu };
    let states = STATE.with(|s| s.get());
    let state = states.devices[slot(device)];
    if !state.enabled {
        return None;
    }
    if device.is_cuda() && op == "binary_cross_entropy" {
        return Some(Err(crate::Error::new(crate::ErrorKind::DType, BCE_BANNED)));
    }
    let policy = cast_policy(device, op)?;
    let to = |t: &Tensor, dtype: DType| -> Result<Tensor> {
        // PyTorch caches only the casts to the lower precision.
        if eligible(t, device) {
            cast(t, dtype, states.cache && dtype == state.dtype)
        } else {
            Ok(t.clone())
        }
    };
    Some((|| {
        let cast: Vec<Option<Tensor>> = match policy {
            CastPolicy::LowerPrecisionFp => {
                inputs.iter().map(|t| t.map(|t| to(t, state.dtype)).transpose()).collect::<Result<_>>()?
            }
            CastPolicy::Fp32 => {
                inputs.iter().map(|t| t.map(|t| to(t, DType::F32)).transpose()).collect::<Result<_>>()?
            }
            CastPolicy::Fp32SetOptDtype => {
                let mut v: Vec<Option<Tensor>> = inputs.iter().map(|t| t.cloned()).collect();
                if let Some(Some(first)) = inputs.first()
                    && eligible(first, device)
                {
                    v[0] = Some(first.to_dtype(DType::F32)?);
                }
                v
            }
            CastPolicy::Promote => {
                let mut widest = state.dtype;
                for t in inputs.iter().flatten().filter(|t| eligible(t, device)) {
                    widest = match (widest, t.dtype()) {
                        (DType::F32, _) | (_, DType::F32) => DType::F32,
                        (a, b) if a == b => a,
                        _ => bail!(DType, "Unexpected floating ScalarType in at::autocast::prioritize"),
                    };
                }
                inputs.iter().map(|t| t.map(|t| to(t, widest)).transpose()).collect::<Result<_>>()?
            }
        };
        Ok(Cast(cast))
    })())
}

/// Whether autocast is on for some device on this thread: the check [`dispatch`] starts with.
#[inline]
pub fn is_active() -> bool {
    STATE.with(|s| {
        let s = s.get();
        s.devices[0].enabled || s.devices[1].enabled
    })
}
