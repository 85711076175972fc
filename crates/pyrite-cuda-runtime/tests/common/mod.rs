//! The host emulator: compiles kernel sources with the machine's C++ compiler against
//! `emulator.h` and runs them on host memory, so the kernels' arithmetic and indexing are
//! checked against pyrite-core's CPU ops without a GPU.
#![allow(dead_code)]

use pyrite_cuda_runtime::kernels::{KernelSpec, BLOCK};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub struct Emulator {
    lib: libloading::Library,
    synchronizing: std::collections::HashSet<String>,
    _dir: PathBuf,
}

type Launch = unsafe extern "C" fn(u32, u32, *const u8);

impl Emulator {
    /// Compiles `specs` (any mix of parameter structs) into one shared library. `None` (with a
    /// note) when there is no C++ compiler.
    pub fn build(tag: &str, specs: &[KernelSpec]) -> Option<Emulator> {
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
        if std::process::Command::new(&cxx).arg("--version").output().is_err() {
            assert!(std::env::var("CI").is_err(), "no C++ compiler ({cxx}) for the kernel emulator");
            eprintln!("SKIPPED: no C++ compiler ({cxx}) to emulate the kernels");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("pyrite-cuda-emu-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut by_params: BTreeMap<&str, Vec<&KernelSpec>> = BTreeMap::new();
        for k in specs {
            by_params.entry(k.params).or_default().push(k);
        }
        let mut src = String::from("#include \"emulator.h\"\n");
        src.push_str(pyrite_cuda_runtime::kernels::PRELUDE);
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
        let cu = dir.join("kernels.cpp");
        std::fs::write(&cu, src).unwrap();
        std::fs::write(dir.join("emulator.h"), include_str!("emulator.h")).unwrap();
        let so = dir.join("kernels.so");
        let out = std::process::Command::new(&cxx)
            .args(["-std=c++20", "-O1", "-shared", "-fPIC", "-w", "-o"])
            .arg(&so)
            .arg(&cu)
            .arg("-lpthread")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "emulated kernels did not compile:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // SAFETY: the library is ours, just built; its initializers only set statics.
        let lib = unsafe { libloading::Library::new(&so) }.unwrap();
        let synchronizing =
            specs.iter().filter(|k| k.body.contains("__syncthreads")).map(|k| k.name.clone()).collect();
        Some(Emulator { lib, synchronizing, _dir: dir })
    }

    /// Launches `name` over `grid` blocks. Kernels that synchronize run their blocks with 32
    /// threads (each an OS thread; the kernels read the block size from `blockDim`), the others
    /// with [`BLOCK`].
    pub fn launch<P: Copy>(&self, name: &str, grid: u32, params: &P) {
        // SAFETY: `launch_<name>` takes (grid, block, params) and copies the params block of the
        // kernel's struct, which `P` mirrors.
        unsafe {
            let f: libloading::Symbol<Launch> = self.lib.get(format!("launch_{name}").as_bytes()).unwrap();
            let block = if self.synchronizing.contains(name) { 32 } else { BLOCK };
            f(grid, block, params as *const P as *const u8);
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}
