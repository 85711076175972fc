//! The CUDA driver, opened at run time, and the devices it sees.
//!
//! Every library is probed before cudarc touches it (cudarc panics when a library it loads is
//! missing), so a machine without a driver or a GPU gets `Err`s and `is_available() == false`.
//! Each device gets its primary context on first use; the current device is per thread, as
//! `torch.cuda.set_device` makes it.

use crate::{cuda_bail, Error, ErrorKind, Result};
use cudarc::driver::{result as cu, sys, CudaContext, DriverError};
use std::cell::Cell;
use std::sync::{Arc, OnceLock};

/// The outcome of opening the driver once per process: the device count, or why not.
fn driver() -> Result<usize> {
    static DRIVER: OnceLock<Result<usize>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            if crate::emulated() {
                return Ok(1);
            }
            // SAFETY: probing only tries to dlopen the candidate names.
            if !unsafe { sys::is_culib_present() } {
                cuda_bail!(
                    Unavailable,
                    "Found no NVIDIA driver on your system (libcuda.so could not be opened). Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx"
                );
            }
            cu::init().map_err(|e| driver_error("cuInit", e))?;
            let n = cu::device::get_count().map_err(|e| driver_error("cuDeviceGetCount", e))?;
            Ok(n.max(0) as usize)
        })
        .clone()
}

/// A driver error as PyTorch words it (`CUDA error: out of memory`), naming the call.
pub(crate) fn driver_error(call: &str, e: DriverError) -> Error {
    let kind = match e.0 {
        sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        sys::cudaError_enum::CUDA_ERROR_NO_DEVICE | sys::cudaError_enum::CUDA_ERROR_INVALID_DEVICE => {
            ErrorKind::Unavailable
        }
        _ => ErrorKind::Driver,
    };
    let text =
        e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    Error::new(kind, format!("CUDA error: {text} ({call}, {:?})", e.0))
}

/// `torch.cuda.is_available()`: a driver loads and sees at least one device.
pub fn is_available() -> bool {
    driver().is_ok_and(|n| n > 0)
}

/// `torch.cuda.device_count()`: 0 without a driver.
pub fn device_count() -> usize {
    driver().unwrap_or(0)
}

/// Why CUDA is not available (`None` when it is): the message a request for a device gives.
pub fn unavailable_reason() -> Option<String> {
    match driver() {
        Err(e) => Some(e.message),
        Ok(0) => Some("CUDA driver found, but no CUDA-capable device is detected".into()),
        Ok(_) => None,
    }
}

/// Fails with PyTorch's message unless `device` names a device this process can use.
pub fn check_device(device: usize) -> Result<()> {
    let n = driver()?;
    if n == 0 {
        cuda_bail!(Unavailable, "CUDA driver found, but no CUDA-capable device is detected");
    }
    if device >= n {
        cuda_bail!(
            Unavailable,
            "CUDA error: invalid device ordinal: device cuda:{device} requested, but this machine has {n} CUDA device{}",
            if n == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

/// The emulated device's name.
pub const EMULATOR_NAME: &str = "Pyrite CUDA emulator (host)";

/// The primary context of `device`, made current on this thread.
pub fn context(device: usize) -> Result<Arc<CudaContext>> {
    check_device(device)?;
    static CONTEXTS: OnceLock<Vec<OnceLock<Arc<CudaContext>>>> = OnceLock::new();
    let slots = CONTEXTS.get_or_init(|| (0..device_count()).map(|_| OnceLock::new()).collect());
    let ctx = match slots[device].get() {
        Some(c) => c.clone(),
        None => {
            let c = CudaContext::new(device).map_err(|e| driver_error("cuDevicePrimaryCtxRetain", e))?;
            slots[device].get_or_init(|| c).clone()
        }
    };
    ctx.bind_to_thread().map_err(|e| driver_error("cuCtxSetCurrent", e))?;
    Ok(ctx)
}

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// `torch.cuda.set_device(device)`: the device that `"cuda"` without an index means on this
/// thread.
pub fn set_device(device: usize) -> Result<()> {
    check_device(device)?;
    CURRENT.with(|c| c.set(device));
    Ok(())
}

/// `torch.cuda.current_device()`.
pub fn current_device() -> usize {
    CURRENT.with(Cell::get)
}

/// `torch.cuda.get_device_properties(device)`'s fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// `name`, as `nvidia-smi` shows it.
    pub name: String,
    /// Compute capability, `major`.
    pub major: i32,
    /// Compute capability, `minor`.
    pub minor: i32,
    /// `total_memory` in bytes.
    pub total_memory: u64,
    /// `multi_processor_count`.
    pub multi_processor_count: i32,
    /// `max_threads_per_multi_processor`.
    pub max_threads_per_multi_processor: i32,
    /// `warp_size`.
    pub warp_size: i32,
    /// `L2_cache_size` in bytes.
    pub l2_cache_size: i32,
    /// Shared memory a block may opt into, in bytes (`shared_memory_per_block_optin`).
    pub shared_memory_per_block_optin: i32,
    /// `is_integrated`.
    pub is_integrated: bool,
    /// `uuid` as `GPU-xxxxxxxx-xxxx-...`.
    pub uuid: String,
}

/// `torch.cuda.get_device_properties(device)`.
pub fn get_device_properties(device: usize) -> Result<DeviceProperties> {
    if crate::emulated() {
        check_device(device)?;
        return Ok(DeviceProperties {
            name: EMULATOR_NAME.into(),
            major: 8,
            minor: 0,
            total_memory: 4 << 30,
            multi_processor_count: 1,
            max_threads_per_multi_processor: 2048,
            warp_size: 32,
            l2_cache_size: 0,
            shared_memory_per_block_optin: 48 << 10,
            is_integrated: true,
            uuid: "GPU-00000000-0000-0000-0000-000000000000".into(),
        });
    }
    let ctx = context(device)?;
    let attr =
        |a: sys::CUdevice_attribute| ctx.attribute(a).map_err(|e| driver_error("cuDeviceGetAttribute", e));
    use sys::CUdevice_attribute::*;
    let (major, minor) = (
        attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    let uuid = ctx.uuid().map_err(|e| driver_error("cuDeviceGetUuid", e))?;
    let b: Vec<u8> = uuid.bytes.iter().map(|&x| x as u8).collect();
    let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    Ok(DeviceProperties {
        name: ctx.name().map_err(|e| driver_error("cuDeviceGetName", e))?,
        major,
        minor,
        total_memory: ctx.total_mem().map_err(|e| driver_error("cuDeviceTotalMem", e))? as u64,
        multi_processor_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_threads_per_multi_processor: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        warp_size: attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        l2_cache_size: attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        shared_memory_per_block_optin: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        is_integrated: attr(CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0,
        uuid: format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16)),
    })
}

/// `torch.cuda.get_device_name(device)`.
pub fn get_device_name(device: usize) -> Result<String> {
    if crate::emulated() {
        check_device(device)?;
        return Ok(EMULATOR_NAME.into());
    }
    context(device)?.name().map_err(|e| driver_error("cuDeviceGetName", e))
}

/// `torch.cuda.get_device_capability(device)`.
pub fn get_device_capability(device: usize) -> Result<(i32, i32)> {
    if crate::emulated() {
        check_device(device)?;
        return Ok((8, 0));
    }
    context(device)?.compute_capability().map_err(|e| driver_error("cuDeviceGetAttribute", e))
}

/// `torch.cuda.mem_get_info(device)`: (free, total) bytes.
pub fn mem_get_info(device: usize) -> Result<(u64, u64)> {
    if crate::emulated() {
        check_device(device)?;
        return Ok(crate::memory::raw_mem_get_info(device));
    }
    let _ctx = context(device)?;
    let (f, t) = cu::mem_get_info().map_err(|e| driver_error("cuMemGetInfo", e))?;
    Ok((f as u64, t as u64))
}

/// `torch.cuda.synchronize(device)`: waits for all work queued on the device.
pub fn synchronize(device: usize) -> Result<()> {
    if crate::emulated() {
        return check_device(device);
    }
    context(device)?.synchronize().map_err(|e| driver_error("cuCtxSynchronize", e))?;
    crate::memory::release_finished_holds();
    Ok(())
}

/// Whether NVRTC (the run-time CUDA C compiler, `libnvrtc.so.12`) can be opened: kernels are
/// compiled with it, so it is needed with a GPU and is enough, without one, to compile every
/// kernel to PTX.
pub fn nvrtc_is_available() -> bool {
    // SAFETY: probing only tries to dlopen the candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Whether cuBLAS and cuBLASLt can be opened (matmul needs them).
pub fn cublas_is_available() -> bool {
    // SAFETY: probing only tries to dlopen the candidate names.
    unsafe { cudarc::cublas::sys::is_culib_present() && cudarc::cublaslt::sys::is_culib_present() }
}
