//! Devices. [`Device::Cpu`] works today; [`Device::Cuda`] is part of the type so that code can
//! name it, and every request for it returns a clear error until a CUDA backend lands.

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
            Device::Cuda(i) => bail!(
                Device,
                "device cuda:{i} requested, but this build of Pyrite has no CUDA backend (torch.cuda.is_available() would be False)"
            ),
        }
    }
}

/// `torch.cuda.is_available()`: false until a CUDA backend lands.
pub fn cuda_is_available() -> bool {
    false
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
/// on them is done. The CPU runs ops to completion before they return, so there is nothing to
/// wait for until a CUDA backend lands; timers call it before reading the clock.
pub fn synchronize() {}

/// `torch.cuda.profiler.start()` (`cudaProfilerStart`): starts the range an external CUDA
/// profiler (Nsight Systems' `--capture-range=cudaProfilerApi`) records. Without a CUDA
/// backend there is nothing to start, and it returns `Ok(())`.
pub fn cuda_profiler_start() -> crate::Result<()> {
    Ok(())
}

/// `torch.cuda.profiler.stop()` (`cudaProfilerStop`); `Ok(())` without a CUDA backend.
pub fn cuda_profiler_stop() -> crate::Result<()> {
    Ok(())
}
