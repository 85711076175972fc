//! The NVML [`GpuSource`]: `libnvidia-ml.so.1` opened at run time (through `nvml-wrapper`, which
//! dlopens it), so that a build needs no CUDA toolkit and a machine without a driver just has
//! no GPU.

use pyrite_core::Result;

use crate::gputil::{Gpu, GpuSource};

/// GPUs from NVML, the library `nvidia-smi` itself reads (GPUtil runs `nvidia-smi`; here the
/// same figures come without a subprocess). NVML is opened once, on first use, and kept.
#[derive(Clone, Copy, Debug, Default)]
pub struct NvmlSource;

impl GpuSource for NvmlSource {
    fn gpus(&self) -> Result<Vec<Gpu>> {
        imp::gpus()
    }
}

/// One line on NVML: `NVML <version>, driver <version>: <n> GPU(s)` when it answers, or why
/// there is no GPU to show, e.g. `NVML not available: libnvidia-ml.so.1 not found (no NVIDIA
/// driver)`. Never panics.
pub fn nvml_status() -> String {
    match imp::state() {
        Ok(s) => format!("{}, driver {}: {} GPU(s)", s.version, s.driver, s.count),
        Err(reason) => reason,
    }
}

/// Why [`crate::gpus`] is empty: `None` when NVML answers and sees at least one GPU, else the
/// one-line reason (the library is missing, the driver is not loaded, no device, ...).
pub fn no_gpu_reason() -> Option<String> {
    match imp::state() {
        Ok(s) if s.count > 0 => None,
        Ok(s) => Some(format!("no NVIDIA GPU: NVML found no device (driver {})", s.driver)),
        Err(reason) => Some(format!("no NVIDIA GPU: {reason}")),
    }
}

struct State {
    version: String,
    driver: String,
    count: usize,
}

#[cfg(feature = "nvml")]
mod imp {
    use std::sync::OnceLock;

    use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
    use nvml_wrapper::error::NvmlError;
    use nvml_wrapper::Nvml;
    use pyrite_core::{Error, ErrorKind, Result};

    use super::State;
    use crate::gputil::{Gpu, GpuRecord};

    /// The first library name is NVML's own (the driver installs it); the unversioned one is a
    /// development symlink some setups only have.
    const LIBS: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

    fn nvml() -> std::result::Result<&'static Nvml, String> {
        static NVML: OnceLock<std::result::Result<Nvml, String>> = OnceLock::new();
        NVML.get_or_init(|| {
            let mut first_err = None;
            for lib in LIBS {
                match Nvml::builder().lib_path(std::ffi::OsStr::new(lib)).init() {
                    Ok(n) => return Ok(n),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            Err(reason(first_err.expect("at least one library name was tried")))
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    fn reason(e: NvmlError) -> String {
        let why = match e {
            NvmlError::LibloadingError(_) => format!("{} not found (no NVIDIA driver)", LIBS[0]),
            NvmlError::DriverNotLoaded => "the NVIDIA driver is not loaded".to_string(),
            NvmlError::NoPermission => "no permission to talk to the NVIDIA driver".to_string(),
            e => e.to_string(),
        };
        format!("NVML not available: {why}")
    }

    pub(super) fn state() -> std::result::Result<State, String> {
        let n = nvml()?;
        let version = n.sys_nvml_version().map(|v| format!("NVML {v}")).unwrap_or_else(|_| "NVML".into());
        let driver = n.sys_driver_version().unwrap_or_else(|_| "[N/A]".into());
        let count = n.device_count().map_err(|e| format!("NVML cannot count devices: {e}"))?;
        Ok(State { version, driver, count: count as usize })
    }

    /// `nvidia-smi`'s spelling of a value it cannot give.
    fn na(e: NvmlError) -> String {
        match e {
            NvmlError::NotSupported => "[Not Supported]".into(),
            _ => "[N/A]".into(),
        }
    }

    fn enabled(b: std::result::Result<bool, NvmlError>) -> String {
        match b {
            Ok(true) => "Enabled".into(),
            Ok(false) => "Disabled".into(),
            Err(e) => na(e),
        }
    }

    fn err(what: &str, e: NvmlError) -> Error {
        Error::new(ErrorKind::Device, format!("NVML: {what}: {e}"))
    }

    pub(super) fn gpus() -> Result<Vec<Gpu>> {
        let Ok(n) = nvml() else { return Ok(vec![]) };
        let count = n.device_count().map_err(|e| err("device count", e))?;
        let driver = n.sys_driver_version().unwrap_or_else(na);
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..count {
            let d = n.device_by_index(i).map_err(|e| err(&format!("device {i}"), e))?;
            // nvidia-smi reports whole MiB; NaN where the query fails, as GPUtil's safeFloatCast.
            let (total, used, free) = match d.memory_info() {
                Ok(m) => ((m.total >> 20) as f64, (m.used >> 20) as f64, (m.free >> 20) as f64),
                Err(_) => (f64::NAN, f64::NAN, f64::NAN),
            };
            out.push(Gpu::from(GpuRecord {
                id: i as usize,
                uuid: d.uuid().unwrap_or_else(na),
                name: d.name().unwrap_or_else(na),
                load: d.utilization_rates().map(|u| u.gpu as f64 / 100.0).unwrap_or(f64::NAN),
                memory_total: total,
                memory_used: used,
                memory_free: free,
                temperature: d.temperature(TemperatureSensor::Gpu).map(|t| t as f64).unwrap_or(f64::NAN),
                driver: driver.clone(),
                serial: d.serial().unwrap_or_else(na),
                display_mode: enabled(d.is_display_connected()),
                display_active: enabled(d.is_display_active()),
            }));
        }
        Ok(out)
    }
}

#[cfg(not(feature = "nvml"))]
mod imp {
    use super::State;
    use crate::gputil::Gpu;
    use pyrite_core::Result;

    pub(super) fn state() -> std::result::Result<State, String> {
        Err("NVML not available: pyrite-cuda was built without its `nvml` feature".into())
    }

    pub(super) fn gpus() -> Result<Vec<Gpu>> {
        Ok(vec![])
    }
}
