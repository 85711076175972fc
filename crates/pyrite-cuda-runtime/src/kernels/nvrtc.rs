//! Compiling kernels with NVRTC and caching the loaded functions per device.

use super::KernelSpec;
use crate::driver::{context, driver_error};
use crate::stream::Stream;
use crate::{cuda_bail, Error, ErrorKind, Result};
use cudarc::driver::CudaFunction;
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Compiles `source` to PTX for `arch` (`"compute_90"`). Fails with the compiler's log when the
/// source does not compile, and with `Unavailable` when NVRTC cannot be opened.
pub fn compile_ptx(source: &str, arch: &str) -> Result<String> {
    if !crate::driver::nvrtc_is_available() {
        cuda_bail!(
            Unavailable,
            "NVRTC (libnvrtc.so.12) could not be opened: CUDA kernels cannot be compiled. Install the CUDA toolkit or the nvidia-cuda-nvrtc-cu12 wheel and put its lib folder on LD_LIBRARY_PATH"
        );
    }
    let opts = CompileOptions {
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".into(),
            "-default-device".into(),
            // No contraction of a * b + c into one rounding: the kernels round as the CPU
            // kernels do (random fills bit for bit).
            "--fmad=false".into(),
        ],
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(source, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(CompileError::CompileError { log, options, .. }) => Err(Error::new(
            ErrorKind::Compile,
            format!("kernel did not compile (options {options:?}):\n{}", log.to_string_lossy()),
        )),
        Err(e) => Err(Error::new(ErrorKind::Compile, format!("NVRTC failed: {e:?}"))),
    }
}

/// A kernel loaded on a device, ready to launch.
#[derive(Clone)]
pub struct CompiledKernel {
    function: Loaded,
    name: Arc<str>,
}

#[derive(Clone)]
enum Loaded {
    Cuda(Arc<CudaFunction>),
    Emulated(&'static crate::emulator::HostKernels, String),
}

impl CompiledKernel {
    /// Launches the kernel with `grid` blocks of `block` threads on `stream`, passing `params`
    /// by value as its one argument.
    ///
    /// # Safety
    /// `P` must be the `#[repr(C)]` twin of the kernel's parameter struct, and every device
    /// address in it must be valid for what the kernel reads and writes until the stream
    /// reaches the kernel.
    pub unsafe fn launch<P: Copy>(&self, grid: u32, block: u32, stream: &Stream, params: &P) -> Result<()> {
        let launch = crate::activity::Launch {
            kind: crate::activity::ActivityKind::Kernel,
            name: &self.name,
            api: "cuLaunchKernel",
            grid,
            block,
            bytes: 0,
        };
        // SAFETY: the caller's guarantees, passed on.
        crate::activity::record(launch, stream, || unsafe { self.launch_now(grid, block, stream, params) })
    }

    /// [`CompiledKernel::launch`] without the profiler's bracketing.
    ///
    /// # Safety
    /// As for [`CompiledKernel::launch`].
    unsafe fn launch_now<P: Copy>(&self, grid: u32, block: u32, stream: &Stream, params: &P) -> Result<()> {
        let function = match &self.function {
            Loaded::Cuda(f) => f,
            // SAFETY: as for the GPU; the addresses are host memory on the emulated device.
            Loaded::Emulated(lib, name) => {
                return unsafe { lib.launch(name, grid, block, params as *const P as *const u8) };
            }
        };
        let mut p = *params;
        let mut args = [&mut p as *mut P as *mut std::ffi::c_void];
        // SAFETY: the caller guarantees the parameter block; cuLaunchKernel copies it before
        // returning.
        unsafe {
            cudarc::driver::result::launch_kernel(
                function.cu_function(),
                (grid, 1, 1),
                (block, 1, 1),
                0,
                stream.cu_stream(),
                &mut args,
            )
        }
        .map_err(|e| driver_error("cuLaunchKernel", e))
    }
}

/// The kernels compiled so far, per device, by name: each is compiled once per process (the
/// first launch pays NVRTC's few tens of milliseconds).
#[derive(Default)]
pub struct KernelCache {
    loaded: Mutex<HashMap<(usize, String), CompiledKernel>>,
}

impl KernelCache {
    /// The process-wide cache.
    pub fn global() -> &'static KernelCache {
        static CACHE: OnceLock<KernelCache> = OnceLock::new();
        CACHE.get_or_init(KernelCache::default)
    }

    /// The kernel `spec` on `device`, compiling and loading it on first use.
    pub fn get(
        &self,
        device: usize,
        spec: impl FnOnce() -> KernelSpec,
        name: &str,
    ) -> Result<CompiledKernel> {
        if let Some(k) = self.loaded.lock().unwrap().get(&(device, name.to_string())) {
            return Ok(k.clone());
        }
        if crate::emulated() {
            let lib = crate::emulator::kernel(spec, name)?;
            let k =
                CompiledKernel { function: Loaded::Emulated(lib, name.to_string()), name: Arc::from(name) };
            self.loaded.lock().unwrap().insert((device, name.to_string()), k.clone());
            return Ok(k);
        }
        let spec = spec();
        debug_assert_eq!(spec.name, name);
        let ctx = context(device)?;
        let (major, minor) = ctx.compute_capability().map_err(|e| driver_error("cuDeviceGetAttribute", e))?;
        let ptx = compile_ptx(&spec.source(), &format!("compute_{major}{minor}"))?;
        let module = ctx.load_module(Ptx::from_src(ptx)).map_err(|e| driver_error("cuModuleLoadData", e))?;
        let function =
            module.load_function(&spec.name).map_err(|e| driver_error("cuModuleGetFunction", e))?;
        let k = CompiledKernel {
            function: Loaded::Cuda(Arc::new(function)),
            name: Arc::from(spec.name.as_str()),
        };
        self.loaded.lock().unwrap().insert((device, spec.name), k.clone());
        Ok(k)
    }
}
