//! Every kernel pyrite-core can launch compiles to PTX with NVRTC. NVRTC needs no GPU (CI
//! opens the `nvidia-cuda-nvrtc-cu12` wheel's library), so a kernel that does not compile fails
//! here. Without NVRTC the test says so and is skipped, unless `PYRITE_REQUIRE_NVRTC=1`.

use pyrite_cuda_runtime::driver::nvrtc_is_available;
use pyrite_cuda_runtime::kernels::{all_kernels, compile_ptx, KernelSpec};
use std::collections::{BTreeMap, HashSet};

#[test]
fn every_kernel_compiles_to_ptx() {
    if !nvrtc_is_available() {
        assert!(
            std::env::var("PYRITE_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "PYRITE_REQUIRE_NVRTC=1 but libnvrtc.so.12 could not be opened (LD_LIBRARY_PATH?)"
        );
        eprintln!("SKIPPED: NVRTC (libnvrtc.so.12) not found; kernels were not compiled");
        return;
    }
    let kernels = all_kernels();
    let mut names = HashSet::new();
    for k in &kernels {
        assert!(names.insert(k.name.clone()), "two kernels are named {}", k.name);
    }
    // One program per parameter struct and chunk: NVRTC's start-up cost is paid a few times,
    // not once per kernel.
    let mut families: BTreeMap<&str, Vec<&KernelSpec>> = BTreeMap::new();
    for k in &kernels {
        families.entry(k.params).or_default().push(k);
    }
    let mut compiled = 0;
    for (params, ks) in families {
        for chunk in ks.chunks(200) {
            let src = KernelSpec::source_of_many(chunk);
            let ptx = compile_ptx(&src, "compute_80").unwrap_or_else(|e| panic!("{params} kernels: {e}"));
            for k in chunk {
                assert!(ptx.contains(&format!(".entry {}(", k.name)), "{} missing from the PTX", k.name);
            }
            compiled += chunk.len();
        }
    }
    eprintln!("compiled {compiled} kernels to PTX");
    assert!(compiled > 500, "only {compiled} kernels");
}

#[test]
fn a_kernel_that_does_not_compile_is_an_error_with_the_log() {
    if !nvrtc_is_available() {
        eprintln!("SKIPPED: NVRTC not found");
        return;
    }
    let e = compile_ptx("extern \"C\" __global__ void k() { undefined_thing(); }", "compute_80").unwrap_err();
    assert_eq!(e.kind, pyrite_cuda_runtime::ErrorKind::Compile);
    assert!(e.message.contains("undefined_thing"), "{e}");
}
