//! A memory limit on the CPU makes out-of-memory real and testable: past the limit an
//! allocation frees the cache and retries, then fails with PyTorch's kind of message; after
//! the error nothing leaks, and training goes on.
//!
//! The allocator is global, so the tests take turns.

use pyrite_core::{memory, DType, Device, ErrorKind, Tensor};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn stat(key: &str) -> u64 {
    memory::memory_stats(Device::Cpu).unwrap()[key]
}

fn allocated() -> u64 {
    memory::memory_allocated(Device::Cpu).unwrap()
}

/// A lifted limit, whatever the test did.
struct Unlimit;
impl Drop for Unlimit {
    fn drop(&mut self) {
        memory::set_memory_limit(None, Device::Cpu).unwrap();
    }
}

#[test]
fn an_allocation_past_the_limit_is_an_out_of_memory_error_with_the_figures() {
    let _s = serial();
    let _u = Unlimit;
    memory::empty_cache();
    let keep = Tensor::zeros([256 * 1024], DType::F32).unwrap(); // 1 MiB held by a tensor
    let base = memory::memory_reserved(Device::Cpu).unwrap();
    memory::set_memory_limit(Some(base + (2 << 20)), Device::Cpu).unwrap();
    assert_eq!(memory::memory_limit(Device::Cpu).unwrap(), Some(base + (2 << 20)));
    let ooms = stat("num_ooms");
    let small = Tensor::zeros([256 * 1024], DType::F32).unwrap(); // fits: 1 MiB of 2
    let e = Tensor::zeros([1024 * 1024], DType::F32).unwrap_err(); // 4 MiB does not
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let msg = e.to_string();
    assert!(msg.contains("CPU out of memory. Tried to allocate 4.00 MiB"), "{msg}");
    assert!(msg.contains("memory limit is") && msg.contains("allocated by tensors"), "{msg}");
    assert!(msg.contains("reserved by Pyrite's cache but unallocated"), "{msg}");
    assert!(msg.contains("memory_summary()"), "{msg}");
    assert_eq!(stat("num_ooms"), ooms + 1);
    drop((keep, small));
}

#[test]
fn past_the_limit_the_cache_is_freed_and_the_allocation_retried() {
    let _s = serial();
    let _u = Unlimit;
    memory::empty_cache();
    let base = memory::memory_reserved(Device::Cpu).unwrap();
    // 3 MiB of buffers go to the cache when dropped.
    drop((0..3).map(|_| Tensor::zeros([256 * 1024], DType::F32).unwrap()).collect::<Vec<_>>());
    assert!(memory::memory_reserved(Device::Cpu).unwrap() >= base + (3 << 20));
    memory::set_memory_limit(Some(base + (5 << 20)), Device::Cpu).unwrap();
    let retries = stat("num_alloc_retries");
    // 4 MiB: more than the limit leaves beside the cache, less than the limit.
    let t = Tensor::zeros([1024 * 1024], DType::F32).unwrap();
    assert_eq!(stat("num_alloc_retries"), retries + 1);
    assert!(memory::memory_reserved(Device::Cpu).unwrap() <= base + (5 << 20));
    drop(t);
}

#[test]
fn out_of_memory_in_the_middle_of_a_backward_leaks_nothing_and_training_goes_on() {
    let _s = serial();
    let _u = Unlimit;
    let w: Vec<Tensor> = (0..6)
        .map(|i| {
            Tensor::full([256, 256], 0.01 * (i + 1) as f32, DType::F32).unwrap().requires_grad_(true).unwrap()
        })
        .collect();
    let step = |batch: usize| -> pyrite_core::Result<Tensor> {
        let mut h = Tensor::ones([batch, 256], DType::F32)?;
        for wi in &w {
            h = h.matmul(wi)?.tanh()?;
        }
        h.sum()
    };
    memory::empty_cache();
    let baseline = allocated();
    // What a forward holds, and what its backward needs on top.
    let loss = step(512).unwrap();
    let after_forward = allocated();
    memory::reset_peak_memory_stats(Device::Cpu).unwrap();
    loss.backward().unwrap();
    let backward_peak = memory::max_memory_allocated(Device::Cpu).unwrap();
    drop(loss);
    for wi in &w {
        wi.set_grad(None).unwrap();
    }
    memory::empty_cache();
    assert!(backward_peak > after_forward);

    // The limit lets the forward run, not its backward.
    let limit = after_forward + (backward_peak - after_forward) / 3;
    memory::set_memory_limit(Some(limit), Device::Cpu).unwrap();
    let loss = step(512).unwrap();
    let e = loss.backward().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    drop(loss); // the graph and everything it saved
    for wi in &w {
        wi.set_grad(None).unwrap();
    }
    assert_eq!(allocated(), baseline, "nothing leaked");

    // A smaller batch trains under the same limit, and its gradients are those of an
    // unlimited run.
    let loss = step(128).unwrap();
    loss.backward().unwrap();
    let limited: Vec<Vec<f32>> = w.iter().map(|wi| wi.grad().unwrap().to_vec().unwrap()).collect();
    memory::set_memory_limit(None, Device::Cpu).unwrap();
    for wi in &w {
        wi.set_grad(None).unwrap();
    }
    step(128).unwrap().backward().unwrap();
    let free: Vec<Vec<f32>> = w.iter().map(|wi| wi.grad().unwrap().to_vec().unwrap()).collect();
    assert_eq!(limited, free);
}

#[test]
fn the_fraction_is_of_physical_memory_and_checked() {
    let _s = serial();
    let _u = Unlimit;
    let total = memory::physical_memory().unwrap();
    assert!(total > 1 << 28);
    memory::set_per_process_memory_fraction(0.5, Device::Cpu).unwrap();
    assert_eq!(memory::memory_limit(Device::Cpu).unwrap(), Some(total / 2));
    let e = memory::set_per_process_memory_fraction(1.5, Device::Cpu).unwrap_err().to_string();
    assert!(e.contains("Invalid fraction value: 1.5. Allowed range: 0~1"), "{e}");
    assert!(memory::set_memory_limit(Some(1), Device::Cuda(0)).is_err());
}
