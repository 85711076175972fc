//! Devices: [`Device::Cpu`], and [`Device::Cuda`] when Pyrite is built with the `cuda` feature
//! and a driver and a GPU are found at run time (every request for it otherwise returns an
//! error that says which is missing).

use crate::{bail, Result};
use std::fmt;

/// Where a tensor's storage lives (`torch.device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// Host memory.
    #[default]
    Cpu,
    /// A CUDA GPU, by ordinal.
    Cuda(usize),
}

impl Device {
    /// Parses `"cpu"`, `"cuda"`, `"cuda:1"`.
    pub fn parse(s: &str) -> Result<Device> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(i)) => Ok(Device::Cuda(i)),
                _ => bail!(Value, "Expected one of cpu, cuda device type at start of device string: {s}"),
            },
        }
    }

    /// True for CUDA devices.
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// Fails unless this device has a backend in this build.
    pub fn check_available(self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(i) => bail!(
                Device,
                "device cuda:{i} requested, but this build of Pyrite has no CUDA backend (build with the `cuda` feature; torch.cuda.is_available() would be False)"
            ),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => pyrite_cuda_runtime::driver::check_device(i).map_err(|e| {
                crate::Error::new(crate::ErrorKind::Device, format!("device cuda:{i} requested, but {}", e.message))
            }),
        }
    }
}

impl Device {
    /// Fails unless this device's tensors can run the CPU kernel of an op that the CUDA backend
    /// does not cover yet (PyTorch's "Could not run ... with arguments from the 'CUDA'
    /// backend").
    pub fn check_cpu_kernel(self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(i) => {
                if std::env::var_os("PYRITE_DEBUG_CUDA_DISPATCH").is_some() {
                    eprintln!("{}", std::backtrace::Backtrace::force_capture());
                }
                bail!(
                NotImplemented,
                "Could not run this op with arguments from the 'CUDA' backend (tensor on cuda:{i}): Pyrite has no CUDA kernel for it yet. Move the tensors to the CPU with .to_device(Device::Cpu) for this op"
            )
            }
        }
    }
}

/// `torch.cuda.is_available()`: a `cuda` build that finds a driver and a GPU.
pub fn cuda_is_available() -> bool {
    #[cfg(feature = "cuda")]
    return pyrite_cuda_runtime::driver::is_available();
    #[cfg(not(feature = "cuda"))]
    false
}

/// `torch.cuda.device_count()`: 0 without the `cuda` feature, a driver or a GPU.
pub fn cuda_device_count() -> usize {
    #[cfg(feature = "cuda")]
    return pyrite_cuda_runtime::driver::device_count();
    #[cfg(not(feature = "cuda"))]
    0
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

/// `torch.cuda.synchronize()` for every device this build drives: waits until the work queued
/// on them is done (the CPU runs ops to completion before they return). Timers call it before
/// reading the clock.
pub fn synchronize() {
    #[cfg(feature = "cuda")]
    if pyrite_cuda_runtime::driver::is_available() {
        for d in 0..pyrite_cuda_runtime::driver::device_count() {
            let _ = pyrite_cuda_runtime::driver::synchronize(d);
        }
    }
}

/// `torch.cuda.profiler.start()` (`cudaProfilerStart`): starts the range an external CUDA
/// profiler (Nsight Systems' `--capture-range=cudaProfilerApi`) records. Without a CUDA
/// backend (or without a GPU) there is nothing to start, and it returns `Ok(())`.
pub fn cuda_profiler_start() -> crate::Result<()> {
    #[cfg(feature = "cuda")]
    if cuda_is_available() {
        return pyrite_cuda_runtime::stream::profiler_start()
            .map_err(|e| crate::Error::new(crate::ErrorKind::Device, e.message));
    }
    Ok(())
}

/// `torch.cuda.profiler.stop()` (`cudaProfilerStop`); `Ok(())` without a CUDA backend.
pub fn cuda_profiler_stop() -> crate::Result<()> {
    #[cfg(feature = "cuda")]
    if cuda_is_available() {
        return pyrite_cuda_runtime::stream::profiler_stop()
            .map_err(|e| crate::Error::new(crate::ErrorKind::Device, e.message));
    }
    Ok(())
}
