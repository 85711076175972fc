//! # pyrite-core
//!
//! The tensor core of Pyrite: runtime dtypes ([`DType`]), devices ([`Device`]), strided
//! storage shared by views, CPU kernels, a caching allocator with PyTorch's memory API
//! ([`memory`]), and seeded random numbers. The `pyrite` crate re-exports all of it.
//!
//! ```
//! use pyrite_core::{DType, Tensor};
//! let x = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
//! let y = (&x * 2.0)?.relu()?;
//! assert_eq!(y.dims(), &[2, 3]);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

// Kernels spell out constants to full precision and compare bools as numbers, as PyTorch does.
#![allow(clippy::excessive_precision, clippy::bool_comparison, clippy::approx_constant)]
// Kernels rebind raw-pointer wrappers inside closures on purpose (so the closure captures the
// Send wrapper, not the raw pointer), and NaN-aware comparisons are written as `!(a < b)`.
#![allow(clippy::redundant_locals, clippy::neg_cmp_op_on_partial_ord, clippy::too_many_arguments)]
#![allow(clippy::manual_checked_ops, clippy::redundant_closure, clippy::needless_borrow)]

/// A feature switch read from the environment: on unless the variable is `0`.
pub(crate) fn env_switch(name: &str) -> bool {
    std::env::var(name).map_or(true, |v| v.trim() != "0")
}

pub mod alloc;
pub mod autocast;
pub mod autograd;
mod create;
mod cuda;
pub mod device;
pub mod display;
pub mod dtype;
pub mod error;
pub mod layout;
pub mod memory_history;
mod memory_viz;
pub mod npy;
pub mod ops;
pub mod profiler_record;
pub mod random;
pub mod shape;
mod simd;
pub mod storage;
mod stream;
mod strided;
mod tensor;
pub mod threads;
pub(crate) mod view;
pub mod warnings;

pub use half;

/// `torch.backends.cpu`: which of the CPU kernels this machine runs.
pub mod backends {
    /// The CPU's kernels.
    pub mod cpu {
        /// The widest vector instruction set the kernels use here, in PyTorch's words:
        /// `"AVX512"`, `"AVX2"` or `"DEFAULT"` (`torch.backends.cpu.get_cpu_capability()`).
        pub fn get_cpu_capability() -> &'static str {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512f") {
                    return "AVX512";
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    return "AVX2";
                }
            }
            "DEFAULT"
        }

        /// Whether bf16 products (matmul, linear, conv, attention) run on the AVX512-BF16
        /// kernel: the CPU has the instructions, `PYRITE_BF16_KERNEL=0` is not set, and
        /// [`set_bf16_kernel_enabled`] has not turned it off. Otherwise bf16 operands are
        /// converted to f32 and multiplied there (the same values up to the order of the
        /// f32 additions).
        pub fn bf16_kernel_available() -> bool {
            crate::ops::bf16gemm::available()
        }

        /// Turns the AVX512-BF16 kernel off (or back on) for the whole process.
        pub fn set_bf16_kernel_enabled(on: bool) {
            crate::ops::bf16gemm::set_enabled(on)
        }
    }

    static F32_MATMUL_PRECISION: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

    /// `torch.set_float32_matmul_precision`: `"highest"` (the default: f32 products in f32),
    /// `"high"` or `"medium"` (CUDA f32 products may use TF32 tensor cores). The CPU kernels
    /// always compute in f32.
    ///
    /// ```
    /// use pyrite_core::backends::{get_float32_matmul_precision, set_float32_matmul_precision};
    /// set_float32_matmul_precision("high")?;
    /// assert_eq!(get_float32_matmul_precision(), "high");
    /// assert!(set_float32_matmul_precision("fast").is_err());
    /// set_float32_matmul_precision("highest")?;
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    pub fn set_float32_matmul_precision(precision: &str) -> crate::Result<()> {
        let v = match precision {
            "highest" => 0,
            "high" => 1,
            "medium" => 2,
            _ => crate::bail!(
                Value,
                "Invalid precision: expected one of 'highest', 'high' or 'medium', but got '{precision}'"
            ),
        };
        F32_MATMUL_PRECISION.store(v, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// `torch.get_float32_matmul_precision()`.
    pub fn get_float32_matmul_precision() -> &'static str {
        ["highest", "high", "medium"]
            [F32_MATMUL_PRECISION.load(std::sync::atomic::Ordering::Relaxed) as usize]
    }

    /// `torch.backends.cuda.matmul.allow_tf32`: whether CUDA f32 products may use TF32.
    pub fn cuda_matmul_allow_tf32() -> bool {
        F32_MATMUL_PRECISION.load(std::sync::atomic::Ordering::Relaxed) != 0
    }
}

pub use device::{cuda_device_count, cuda_is_available, Device};
pub use dtype::{get_default_dtype, promote_types, set_default_dtype, DType, Element, FloatElement, Scalar};
pub use error::{Error, ErrorKind, ModuleFrame, Result};
pub use ops::binary::{result_type, BinaryOp, RoundingMode};
pub use ops::cast::ToOptions;
pub use ops::einsum::einsum;
pub use random::{
    default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state, Generator,
};
pub use shape::{broadcast_shapes, Shape};
pub use storage::UntypedStorage;
pub use tensor::{NdArray, Tensor};
pub use threads::{get_num_threads, set_num_threads};
pub use view::{TensorIndex, ViewShape};

/// PyTorch's memory-statistics API (`torch.cuda.memory_allocated` and friends), per device.
pub mod memory {
    pub use crate::alloc::{
        empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated, memory_limit,
        memory_reserved, memory_stats, memory_summary, physical_memory, reset_peak_memory_stats,
        set_cache_limit, set_memory_limit, set_per_process_memory_fraction,
    };
    pub use crate::memory_history::{
        dump_snapshot, dump_snapshot_of, memory_snapshot, memory_snapshot_of, record_memory_history, scope,
        Action, Block, Category, HistoryOptions, MemorySnapshot, ScopeGuard, TraceEntry,
    };
}
