//! Saved tensors are released as soon as the graph is consumed, so memory does not grow across
//! training steps. (Its own test binary: the allocator's counters are process-wide.)

use pyrite_core::{DType, Result, Tensor};

#[test]
fn saved_tensors_are_released_after_backward() -> Result<()> {
    // The graph's saved tensors go away with the backward pass: memory does not grow across
    // training steps.
    let w = Tensor::randn([256, 256], DType::F32)?.requires_grad_(true)?;
    let x = Tensor::randn([64, 256], DType::F32)?;
    let step = || -> Result<()> {
        let y = x.matmul(&w)?.relu()?.sum()?;
        y.backward()
    };
    step()?;
    let before = pyrite_core::memory::memory_allocated(pyrite_core::Device::Cpu)?;
    for _ in 0..20 {
        step()?;
    }
    let after = pyrite_core::memory::memory_allocated(pyrite_core::Device::Cpu)?;
    assert!(after <= before + 4096, "memory grew from {before} to {after} bytes");
    Ok(())
}
