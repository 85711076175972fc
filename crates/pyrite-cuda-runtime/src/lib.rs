//! Pyrite's CUDA runtime: what sits beneath pyrite-core's CUDA tensors, as c10/cuda sits
//! beneath ATen.
//!
//! - [`driver`]: the CUDA driver, NVRTC and cuBLAS opened at run time (a missing library or
//!   device is an [`Error`], never a panic), device queries and the current device.
//! - [`caching_allocator`]: PyTorch's caching allocator (small and large pools, block splitting,
//!   rounding, per-stream reuse, statistics, out-of-memory after freeing the cache), written over
//!   a [`caching_allocator::RawMemory`] so that its rules are tested without a GPU.
//! - [`memory`]: a caching allocator per device over `cuMemAlloc`, the [`memory::CudaBuffer`]
//!   storages own, copies and pinned host memory.
//! - [`stream`]: the current stream per device and thread, stream guards, events.
//! - [`activity`]: each kernel's, copy's and cuBLAS call's device time, for the profiler.
//! - [`kernels`]: the CUDA C sources of every kernel, generated per op and dtype, compiled with
//!   NVRTC at first use and cached.
//!
//! This crate knows nothing of tensors: pyrite-core's `cuda` feature puts its storages here and
//! launches its kernels with layouts it describes in plain numbers.

pub mod activity;
pub mod blas;
pub mod caching_allocator;
pub mod driver;
pub mod emulator;
mod error;
pub mod kernels;
pub mod memory;
pub mod stream;

pub use error::{Error, ErrorKind, Result};

/// Whether this process runs on the emulated device (`PYRITE_CUDA_EMULATOR=1` or
/// [`emulator::enable`]) instead of a GPU.
pub fn emulated() -> bool {
    emulator::active()
}
