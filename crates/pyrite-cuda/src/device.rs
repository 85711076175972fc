//! `torch.cuda`'s device, stream and event API. In a build with the `cuda` feature these drive
//! the GPUs through pyrite-cuda-runtime; without it (or without a driver or a GPU)
//! [`is_available`] is false, [`device_count`] is 0 and the rest return errors that say why.

use pyrite_core::Result;
#[cfg(not(feature = "cuda"))]
use pyrite_core::{Error, ErrorKind};

#[cfg(feature = "cuda")]
use pyrite_cuda_runtime as rt;

#[cfg(not(feature = "cuda"))]
fn off<T>() -> Result<T> {
    Err(Error::new(
        ErrorKind::Device,
        "this build of Pyrite has no CUDA backend: build with the `cuda` feature",
    ))
}

/// `torch.cuda.is_available()`.
pub fn is_available() -> bool {
    pyrite_core::cuda_is_available()
}

/// `torch.cuda.device_count()`: 0 without a driver or without the `cuda` feature.
pub fn device_count() -> usize {
    pyrite_core::cuda_device_count()
}

/// Why CUDA is not available, or `None` when it is.
pub fn unavailable_reason() -> Option<String> {
    #[cfg(feature = "cuda")]
    return rt::driver::unavailable_reason();
    #[cfg(not(feature = "cuda"))]
    Some("this build of Pyrite has no CUDA backend: build with the `cuda` feature".into())
}

/// `torch.cuda.current_device()`.
pub fn current_device() -> usize {
    #[cfg(feature = "cuda")]
    return rt::driver::current_device();
    #[cfg(not(feature = "cuda"))]
    0
}

/// `torch.cuda.set_device(device)`.
pub fn set_device(device: usize) -> Result<()> {
    #[cfg(feature = "cuda")]
    return Ok(rt::driver::set_device(device)?);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        off()
    }
}

/// `torch.cuda.get_device_name(device)`.
pub fn get_device_name(device: usize) -> Result<String> {
    #[cfg(feature = "cuda")]
    return Ok(rt::driver::get_device_name(device)?);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        off()
    }
}

/// `torch.cuda.get_device_capability(device)`.
pub fn get_device_capability(device: usize) -> Result<(i32, i32)> {
    #[cfg(feature = "cuda")]
    return Ok(rt::driver::get_device_capability(device)?);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        off()
    }
}

#[cfg(feature = "cuda")]
pub use rt::driver::DeviceProperties;

/// `torch.cuda.get_device_properties(device)`.
#[cfg(feature = "cuda")]
pub fn get_device_properties(device: usize) -> Result<DeviceProperties> {
    Ok(rt::driver::get_device_properties(device)?)
}

/// `torch.cuda.mem_get_info(device)`: (free, total) bytes.
pub fn mem_get_info(device: usize) -> Result<(u64, u64)> {
    #[cfg(feature = "cuda")]
    return Ok(rt::driver::mem_get_info(device)?);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        off()
    }
}

/// `torch.cuda.synchronize()`: waits for the work queued on every GPU.
pub fn synchronize() {
    pyrite_core::device::synchronize()
}

/// `torch.cuda.empty_cache()`.
pub fn empty_cache() {
    pyrite_core::memory::empty_cache()
}

#[cfg(feature = "cuda")]
pub use rt::stream::{current_stream, Event, Stream, StreamGuard};

/// `with torch.cuda.stream(s):` — `s` is the current stream of its device until the guard
/// drops.
#[cfg(feature = "cuda")]
pub fn stream(s: &Stream) -> StreamGuard {
    StreamGuard::new(s)
}
