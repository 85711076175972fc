//! An emulated CUDA device for testing without a GPU, switched on before the first CUDA call by
//! [`enable`] or `PYRITE_CUDA_EMULATOR=1` (never by default): device memory is host memory, copies are `memcpy`, and
//! each kernel's CUDA source is compiled by the host C++ compiler against `emulator.h` (each
//! block's threads run as OS threads, `__syncthreads` is a barrier) and loaded as a shared
//! library. pyrite-core's CUDA dispatch then runs end to end on any machine, so its layouts,
//! dtypes and scalars are checked against the CPU ops; speed means nothing here.

use crate::kernels::KernelSpec;
use crate::{cuda_bail, Result};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The emulator's header: the CUDA launch model on host threads.
pub const HEADER: &str = include_str!("emulator.h");

static ON: OnceLock<bool> = OnceLock::new();

/// Whether the emulated device is on (`PYRITE_CUDA_EMULATOR=1`, or [`enable`]); decided at the
/// first CUDA call of the process.
pub fn active() -> bool {
    *ON.get_or_init(|| std::env::var("PYRITE_CUDA_EMULATOR").as_deref() == Ok("1"))
}

/// Turns the emulated device on for this process, before any CUDA call (tests do this).
/// Returns whether it is on: false when CUDA was already used without it.
pub fn enable() -> bool {
    *ON.get_or_init(|| true)
}

/// The emulated device's memory: 4 GiB of host memory at most.
pub const CAPACITY: u64 = 4 << 30;

/// Kernels compiled for the host, one shared library per kernel set.
pub struct HostKernels {
    lib: libloading::Library,
    synchronizing: std::collections::HashSet<String>,
}

type Launch = unsafe extern "C" fn(u32, u32, *const u8);

impl HostKernels {
    /// Compiles `specs` (any mix of parameter structs) into one shared library with the C++
    /// compiler (`$CXX`, default `g++`), or loads the library an earlier build of the same
    /// sources left in the temp folder's `pyrite-cuda-emulator-cache`.
    pub fn build(specs: &[KernelSpec]) -> Result<HostKernels> {
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
        let n = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("pyrite-cuda-emu-{}-{n}", std::process::id()));
        let mut by_params: std::collections::BTreeMap<&str, Vec<&KernelSpec>> = Default::default();
        for k in specs {
            by_params.entry(k.params).or_default().push(k);
        }
        let mut src = String::from("#include \"emulator.h\"\n");
        src.push_str(crate::kernels::PRELUDE);
        for (params, ks) in &by_params {
            src.push_str(ks[0].params_c);
            for k in ks {
                src.push_str(&k.body);
                let threads = k.body.contains("__syncthreads");
                src.push_str(&format!(
                    "extern \"C\" void launch_{n}(unsigned g, unsigned b, const void* p) {{ emu_launch<{params}>({n}, g, b, p, {threads}); }}\n",
                    n = k.name
                ));
            }
        }
        let io =
            |e: std::io::Error| crate::Error::new(crate::ErrorKind::Unavailable, format!("emulator: {e}"));
        // Built libraries are kept by a hash of their source, the header and the compiler, so
        // the processes of a test run (and later runs) build each kernel once.
        const FLAGS: [&str; 6] = ["-std=c++20", "-O1", "-shared", "-fPIC", "-w", "-lpthread"];
        let key = fnv1a(&[src.as_bytes(), HEADER.as_bytes(), cxx.as_bytes(), FLAGS.concat().as_bytes()]);
        let cache = std::env::temp_dir().join("pyrite-cuda-emulator-cache");
        let so = cache.join(format!("{key:016x}.so"));
        let synchronizing =
            specs.iter().filter(|k| k.body.contains("__syncthreads")).map(|k| k.name.clone()).collect();
        // SAFETY: the cached library was built from these exact sources; loading runs no user code.
        if let Ok(lib) = unsafe { libloading::Library::new(&so) } {
            return Ok(HostKernels { lib, synchronizing });
        }
        std::fs::create_dir_all(&dir).map_err(io)?;
        std::fs::create_dir_all(&cache).map_err(io)?;
        std::fs::write(dir.join("kernels.cpp"), src).map_err(io)?;
        // The header comes from the precompiled one's folder when there is one (parsing the
        // C++ headers it includes is most of a small kernel set's build), else from here.
        let include = match precompiled_header(&cxx, &FLAGS, &cache) {
            Some(d) => d,
            None => {
                std::fs::write(dir.join("emulator.h"), HEADER).map_err(io)?;
                dir.clone()
            }
        };
        let built = dir.join("kernels.so");
        let out = std::process::Command::new(&cxx)
            .args(&FLAGS[..5])
            .arg("-I")
            .arg(&include)
            .arg("-o")
            .arg(&built)
            .arg(dir.join("kernels.cpp"))
            .arg(FLAGS[5])
            .output()
            .map_err(|e| {
                crate::Error::new(crate::ErrorKind::Unavailable, format!("emulator: cannot run {cxx}: {e}"))
            })?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            cuda_bail!(
                Compile,
                "emulated kernels did not compile:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Into the cache in one rename, so another process never loads half a file.
        let placed = std::fs::rename(&built, &so).is_ok();
        let path = if placed { so } else { built };
        // SAFETY: the library was just built from our sources; loading runs no user code.
        let lib = unsafe { libloading::Library::new(&path) }
            .map_err(|e| crate::Error::new(crate::ErrorKind::Unavailable, format!("emulator: {e}")))?;
        // The loaded library stays mapped: the build folder can go now.
        let _ = std::fs::remove_dir_all(&dir);
        Ok(HostKernels { lib, synchronizing })
    }

    /// Runs kernel `name` over `grid` blocks of `block` threads (32 for kernels that
    /// synchronize: each thread is an OS thread; the kernels read the size from `blockDim`).
    ///
    /// # Safety
    /// `params` must point to the kernel's parameter struct, and every address in it must be
    /// valid host memory for what the kernel touches.
    pub unsafe fn launch(&self, name: &str, grid: u32, block: u32, params: *const u8) -> Result<()> {
        // SAFETY: `launch_<name>` has the `Launch` signature (generated in `build`).
        let f: libloading::Symbol<Launch> = unsafe { self.lib.get(format!("launch_{name}").as_bytes()) }
            .map_err(|e| crate::Error::new(crate::ErrorKind::Driver, format!("emulator: {e}")))?;
        // GEMM's tiles need their 256 threads; other synchronizing kernels take any size.
        // One launch at a time in the process: the emulation's block state (grid and block
        // sizes, the barrier, `__shared__` arrays) is global, as a GPU's is per block.
        static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let block = if self.synchronizing.contains(name) && !name.starts_with("gemm_") {
            block.min(32)
        } else {
            block
        };
        // SAFETY: the caller guarantees the parameter block.
        unsafe { f(grid, block, params) };
        Ok(())
    }
}

/// FNV-1a over `parts`: a hash that stays the same across builds and processes.
/// The folder of `emulator.h` and its precompiled form `emulator.h.gch` (which the compiler
/// takes instead of the header when the flags match, and ignores otherwise), built once per
/// header, compiler and flags into the cache; `None` when the compiler cannot precompile it.
fn precompiled_header(cxx: &str, flags: &[&str], cache: &std::path::Path) -> Option<std::path::PathBuf> {
    let key = fnv1a(&[HEADER.as_bytes(), cxx.as_bytes(), flags.concat().as_bytes()]);
    let done = cache.join(format!("header-{key:016x}"));
    if done.join("emulator.h.gch").exists() {
        return Some(done);
    }
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = cache.join(format!("header-{key:016x}.{}-{n}", std::process::id()));
    std::fs::create_dir_all(&tmp).ok()?;
    std::fs::write(tmp.join("emulator.h"), HEADER).ok()?;
    // The code-generation flags of the kernels' build (all but `-shared` and the library).
    let ok = std::process::Command::new(cxx)
        .args(flags.iter().filter(|f| !matches!(**f, "-shared" | "-lpthread")))
        .args(["-x", "c++-header", "-o"])
        .arg(tmp.join("emulator.h.gch"))
        .arg(tmp.join("emulator.h"))
        .output()
        .is_ok_and(|o| o.status.success());
    // One rename makes it visible whole; a process that lost the race uses the winner's.
    let placed = ok && (std::fs::rename(&tmp, &done).is_ok() || done.join("emulator.h.gch").exists());
    let _ = std::fs::remove_dir_all(&tmp);
    placed.then_some(done)
}

fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h = (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The process's emulated kernels, by name, compiled on first use.
pub(crate) fn kernel(spec: impl FnOnce() -> KernelSpec, name: &str) -> Result<&'static HostKernels> {
    static LOADED: OnceLock<Mutex<HashMap<String, &'static HostKernels>>> = OnceLock::new();
    let map = LOADED.get_or_init(Default::default);
    if let Some(k) = map.lock().unwrap().get(name) {
        return Ok(k);
    }
    let k: &'static HostKernels = Box::leak(Box::new(HostKernels::build(&[spec()])?));
    map.lock().unwrap().insert(name.to_string(), k);
    Ok(k)
}

/// Host memory standing in for device memory.
pub(crate) struct HostMemory;

const ALIGN: usize = 512;

impl crate::caching_allocator::RawMemory for HostMemory {
    fn malloc(&self, bytes: usize) -> Option<u64> {
        let used: u64 = SIZES.lock().unwrap().values().map(|&b| b as u64).sum();
        if used + bytes as u64 > CAPACITY {
            return None;
        }
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), ALIGN).ok()?;
        // SAFETY: a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return None;
        }
        SIZES.lock().unwrap().insert(p as u64, bytes.max(1));
        Some(p as u64)
    }
    fn free(&self, ptr: u64) {
        if let Some(bytes) = SIZES.lock().unwrap().remove(&ptr) {
            // SAFETY: allocated above with this layout.
            unsafe {
                std::alloc::dealloc(
                    ptr as *mut u8,
                    std::alloc::Layout::from_size_align_unchecked(bytes, ALIGN),
                )
            };
        }
    }
    fn mem_get_info(&self) -> (u64, u64) {
        let used: u64 = SIZES.lock().unwrap().values().map(|&b| b as u64).sum();
        (CAPACITY.saturating_sub(used), CAPACITY)
    }
}

static SIZES: Mutex<std::collections::BTreeMap<u64, usize>> = Mutex::new(std::collections::BTreeMap::new());
