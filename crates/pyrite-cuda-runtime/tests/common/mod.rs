//! The kernel tests run the CUDA sources on the host through the runtime's emulator
//! (`src/emulator.h`), so the kernels' arithmetic and indexing are checked against
//! pyrite-core's CPU ops without a GPU.

use pyrite_cuda_runtime::emulator::HostKernels;
use pyrite_cuda_runtime::kernels::{KernelSpec, BLOCK};

pub struct Emulator(HostKernels);

impl Emulator {
    /// Compiles `specs` into one library; `None` (with a note) without a C++ compiler, which
    /// fails the test on CI.
    pub fn build(_tag: &str, specs: &[KernelSpec]) -> Option<Emulator> {
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
        if std::process::Command::new(&cxx).arg("--version").output().is_err() {
            assert!(std::env::var("CI").is_err(), "no C++ compiler ({cxx}) for the kernel emulator");
            eprintln!("SKIPPED: no C++ compiler ({cxx}) to emulate the kernels");
            return None;
        }
        Some(Emulator(HostKernels::build(specs).unwrap()))
    }

    /// Launches `name` over `grid` blocks.
    pub fn launch<P: Copy>(&self, name: &str, grid: u32, params: &P) {
        // SAFETY: the tests pass the kernel's parameter struct with host addresses.
        unsafe { self.0.launch(name, grid, BLOCK, params as *const P as *const u8) }.unwrap();
    }
}
