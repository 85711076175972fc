//! This machine has no NVIDIA driver (CI and the dev box): no GPU is Ok(empty), with a reason,
//! and `pyrite-smi` says so in one line and exits 0. On a machine with a GPU these tests check
//! the other branch instead.

use pyrite_core::Device;

#[test]
fn gpus_without_driver_is_ok_empty_with_a_reason() {
    let gpus = pyrite_cuda::gpus().expect("gpus() never fails for a missing driver");
    let reason = pyrite_cuda::no_gpu_reason();
    if gpus.is_empty() {
        let reason = reason.expect("no GPU comes with a reason");
        assert!(reason.starts_with("no NVIDIA GPU: "), "{reason}");
        assert!(!reason.contains('\n'));
        if cfg!(feature = "nvml") && std::env::var_os("PYRITE_EXPECT_GPU").is_none() {
            println!("{reason}");
        }
        assert!(pyrite_cuda::get_available(&Default::default()).unwrap().is_empty());
        assert!(pyrite_cuda::get_first_available(&Default::default()).is_err());
        assert_eq!(pyrite_cuda::show_utilization(false).unwrap(), "| ID | GPU | MEM |\n------------------\n");
    } else {
        assert!(reason.is_none());
        assert!(pyrite_cuda::nvml_status().contains("GPU(s)"));
        for (i, g) in gpus.iter().enumerate() {
            assert_eq!(g.id, i);
            assert!(g.memory_total > 0.0 && g.memory_used + g.memory_free <= g.memory_total + 1.0, "{g:?}");
            assert!(g.load.is_nan() || (0.0..=1.0).contains(&g.load));
        }
    }
}

#[cfg(feature = "nvml")]
#[test]
fn reason_names_the_library_when_it_is_missing() {
    if pyrite_cuda::gpus().unwrap().is_empty() && !std::path::Path::new("/proc/driver/nvidia").exists() {
        assert_eq!(
            pyrite_cuda::nvml_status(),
            "NVML not available: libnvidia-ml.so.1 not found (no NVIDIA driver)"
        );
    }
}

#[test]
fn allocator_line_reads_pyrite_core() {
    let line = pyrite_cuda::allocator_line(Device::Cpu).unwrap();
    assert!(line.starts_with("Pyrite cpu allocator: allocated "), "{line}");
    assert!(line.contains(", peak reserved "));
}

#[cfg(feature = "cli")]
#[test]
fn pyrite_smi_runs_and_exits_0() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pyrite-smi")).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    if pyrite_cuda::gpus().unwrap().is_empty() {
        assert_eq!(lines.len(), 2, "{stdout}");
        assert_eq!(lines[0], format!("pyrite-smi: {}", pyrite_cuda::no_gpu_reason().unwrap()));
        assert!(lines[0].starts_with("pyrite-smi: no NVIDIA GPU: "));
    } else {
        assert!(lines[1].starts_with("| ID | GPU | MEM |"), "{stdout}");
    }
    assert!(lines.last().unwrap().starts_with("Pyrite cpu allocator: "), "{stdout}");
    let all = std::process::Command::new(env!("CARGO_BIN_EXE_pyrite-smi")).arg("--all").output().unwrap();
    assert_eq!(all.status.code(), Some(0));
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_pyrite-smi")).arg("--bogus").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn cuda_tensors_without_a_driver_are_errors_that_say_why() {
    if pyrite_cuda::is_available() {
        return; // a GPU machine: tests/tensors.rs covers it
    }
    use pyrite_core::{memory, DType, ErrorKind, Tensor};
    let cuda = Device::Cuda(0);
    assert_eq!(pyrite_cuda::device_count(), 0);
    let reason = pyrite_cuda::unavailable_reason().expect("a reason");
    let e = Tensor::ones([2], DType::F32).unwrap().to_device(cuda).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Device);
    assert!(e.to_string().starts_with("device cuda:0 requested, but "), "{e}");
    // The reason names what is missing: the `cuda` feature, or the driver.
    assert!(
        reason.contains("no CUDA backend")
            || reason.contains("NVIDIA driver")
            || reason.contains("no CUDA-capable device"),
        "{reason}"
    );
    assert!(Tensor::zeros_on([2], DType::F32, cuda).is_err());
    assert!(memory::memory_allocated(cuda).is_err());
    assert!(pyrite_cuda::set_device(0).is_err());
    assert!(pyrite_cuda::get_device_name(0).is_err());
    // Synchronizing and the profiler range are no-ops without a GPU, as in PyTorch's CPU builds.
    pyrite_cuda::synchronize();
    assert!(pyrite_core::device::cuda_profiler_start().is_ok());
    // A CUDA autocast region needs CUDA (PyTorch warns and disables it; Pyrite says so), unless
    // it turns autocast off.
    use pyrite_core::autocast::{autocast, AutocastOptions};
    let e = autocast(AutocastOptions { device_type: cuda, ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("User provided device_type of 'cuda', but CUDA is not available"), "{e}");
    assert!(autocast(AutocastOptions { device_type: cuda, enabled: false, ..Default::default() }).is_ok());
    // Pinned memory is for copies to a GPU: PyTorch's error without one.
    let e = Tensor::ones([2], DType::F32).unwrap().pin_memory().unwrap_err();
    assert_eq!(e.to_string(), "Cannot access accelerator device when none is available.");
}
