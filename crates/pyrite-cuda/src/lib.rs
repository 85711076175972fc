//! # pyrite-cuda
//!
//! Pyrite's CUDA layer: `torch.cuda`'s device, stream and event API ([`is_available`],
//! [`device_count`], [`set_device`], [`get_device_properties`], `Stream`, `Event`, ... with the
//! `cuda` feature), and GPU status as [GPUtil](https://github.com/anderskm/gputil)
//! gives it: [`gpus`] (`GPUtil.getGPUs`), [`get_available`], [`get_first_available`] and
//! [`show_utilization`], with GPUtil's fields, defaults and rules, read from NVML
//! (`libnvidia-ml.so.1`, opened at run time by the default `nvml` feature: no CUDA toolkit or
//! driver is needed to build). The `pyrite-smi` binary prints the table with Pyrite's own
//! allocator figures.
//!
//! Without a driver there is simply no GPU: [`gpus`] is `Ok(vec![])` and [`no_gpu_reason`] says
//! why in one line. The rules run on any [`GpuSource`], so they work on synthetic GPUs too:
//!
//! ```
//! use pyrite_cuda::{get_available_from, utilization_table, default_columns};
//! use pyrite_cuda::{GetAvailableOptions, Gpu, GpuRecord, Order};
//!
//! // On this machine, maybe no GPU at all: that is Ok, with a reason.
//! let found = pyrite_cuda::gpus()?;
//! if found.is_empty() {
//!     println!("{}", pyrite_cuda::no_gpu_reason().unwrap());
//! }
//!
//! let gpu = |id, load, used| Gpu::from(GpuRecord {
//!     id, load, memory_total: 1000.0, memory_used: used, memory_free: 1000.0 - used,
//!     ..Default::default()
//! });
//! let gpus = vec![gpu(0, 0.9, 100.0), gpu(1, 0.2, 300.0), gpu(2, 0.1, 400.0)];
//! // GPU 0 is too busy (load >= 0.5); the others ranked by load.
//! let opts = GetAvailableOptions { order: Order::Load, limit: 4, ..Default::default() };
//! assert_eq!(get_available_from(&gpus, &opts)?, vec![2, 1]);
//! assert_eq!(
//!     utilization_table(&gpus, &default_columns()),
//!     "| ID | GPU | MEM |\n\
//!      ------------------\n\
//!      |  0 | 90% | 10% |\n\
//!      |  1 | 20% | 30% |\n\
//!      |  2 | 10% | 40% |\n"
//! );
//! # Ok::<(), pyrite_core::Error>(())
//! ```

mod device;
mod gputil;
mod nvml;

pub use device::*;

pub use gputil::{
    all_columns, availability, available_ids, default_columns, get_available_from, get_first_available_from,
    show_utilization_from, smi_columns, utilization_table, Attr, Column, GetAvailableOptions,
    GetFirstAvailableOptions, Gpu, GpuRecord, GpuSource, Order,
};
pub use nvml::{no_gpu_reason, nvml_status, NvmlSource};

use pyrite_core::Result;

/// GPUtil's `getGPUs()`: every NVIDIA GPU NVML sees, in device order. `Ok(vec![])` without a
/// driver (see [`no_gpu_reason`]); an error only when NVML answers and then fails.
pub fn gpus() -> Result<Vec<Gpu>> {
    NvmlSource.gpus()
}

/// GPUtil's `getAvailable(order, limit, maxLoad, maxMemory, memoryFree, includeNan,
/// excludeID, excludeUUID)`: the ids of the available GPUs (see [`availability`] for the
/// rule), ranked by `opts.order`, at most `opts.limit`.
pub fn get_available(opts: &GetAvailableOptions) -> Result<Vec<usize>> {
    get_available_from(&NvmlSource, opts)
}

/// GPUtil's `getFirstAvailable`: the id of one available GPU, after up to `opts.attempts`
/// looks; an error when there is none.
pub fn get_first_available(opts: &GetFirstAvailableOptions) -> Result<usize> {
    get_first_available_from(&NvmlSource, opts)
}

/// GPUtil's `showUtilization(all)`: prints the table of [`default_columns`] (or, with `all`,
/// [`all_columns`]) and returns it.
pub fn show_utilization(all: bool) -> Result<String> {
    show_utilization_from(&NvmlSource, all)
}

/// Pyrite's own allocator figures for `device` in one line, as `pyrite-smi` prints them:
/// `Pyrite cpu allocator: allocated 1.00 MiB, reserved 2.00 MiB, peak allocated ..., peak reserved ...`
/// (`torch.cuda.memory_allocated`, `memory_reserved` and their peaks; see
/// `pyrite_core::memory`).
pub fn allocator_line(device: pyrite_core::Device) -> Result<String> {
    use pyrite_core::memory::{max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved};
    Ok(format!(
        "Pyrite {device} allocator: allocated {}, reserved {}, peak allocated {}, peak reserved {}",
        fmt_bytes(memory_allocated(device)?),
        fmt_bytes(memory_reserved(device)?),
        fmt_bytes(max_memory_allocated(device)?),
        fmt_bytes(max_memory_reserved(device)?),
    ))
}

/// `1536` -> `1.50 KiB`, as `memory_summary` writes sizes.
fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}
