//! The Trainer's `accelerator` (Lightning's accelerators): where the module and the batches
//! live.
//!
//! - `"auto"` (the default): a CUDA GPU when one is available, else the CPU (Lightning's
//!   `"auto"`).
//! - `"cpu"`: the CPU.
//! - `"gpu"` / `"cuda"`: `cuda:0` (Lightning's `devices=1`); an error when CUDA is not
//!   available, as Lightning's `MisconfigurationException`. With the `ddp` strategy each
//!   process takes the device of its local rank.
//!
//! On a GPU the Trainer moves the module's parameters and buffers to the device before
//! `configure_optimizers` (the module must hand itself over with
//! [`crate::LightningModule::module_mut`], unless it is already there), moves the floating-point
//! and integer tensors of every batch to the device on their way into a step (Lightning's
//! `batch_to_device`), and moves the module back to the CPU when `fit`, `validate`, `test` or
//! `predict` ends (Lightning's `teardown`). `"16-mixed"` then runs under CUDA autocast with
//! f16 and scales the loss with a [`pyrite_amp::GradScaler`], whose state the checkpoints keep.
//!
//! ```
//! use pyrite_train::accelerator::Accelerator;
//! assert_eq!("gpu".parse::<Accelerator>()?, Accelerator::Cuda);
//! assert_eq!("cpu".parse::<Accelerator>()?.device()?, pyrite_core::Device::Cpu);
//! assert!("tpu".parse::<Accelerator>().is_err());
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use pyrite_core::{bail, Device, Error, Result};

/// `Trainer(accelerator=...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Accelerator {
    /// `"auto"`: CUDA when available, else the CPU.
    #[default]
    Auto,
    /// `"cpu"`.
    Cpu,
    /// `"gpu"` / `"cuda"`: a CUDA device.
    Cuda,
}

impl Accelerator {
    /// Lightning's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Accelerator::Auto => "auto",
            Accelerator::Cpu => "cpu",
            Accelerator::Cuda => "cuda",
        }
    }

    /// The device a one-process run uses: the CPU, or `cuda:0` (Lightning's `devices=1`).
    pub fn device(self) -> Result<Device> {
        self.device_for_local_rank(None)
    }

    /// The device of a process: with `local_rank` (the `ddp` strategy), the CUDA device
    /// `local_rank % device_count`, as each of Lightning's processes takes its own GPU.
    pub fn device_for_local_rank(self, local_rank: Option<usize>) -> Result<Device> {
        let cuda = match self {
            Accelerator::Cpu => false,
            Accelerator::Auto => pyrite_core::cuda_is_available(),
            Accelerator::Cuda => {
                if let Err(e) = Device::Cuda(0).check_available() {
                    bail!(
                        Value,
                        "CUDAAccelerator can not run on your system since the accelerator is not available ({e}). The following accelerator(s) is available and can be passed into `accelerator` argument of `Trainer`: ['cpu']."
                    );
                }
                true
            }
        };
        if !cuda {
            return Ok(Device::Cpu);
        }
        Ok(Device::Cuda(local_rank.unwrap_or(0) % pyrite_core::cuda_device_count().max(1)))
    }
}

impl std::str::FromStr for Accelerator {
    type Err = Error;

    /// Lightning's names: `"auto"`, `"cpu"`, `"gpu"`, `"cuda"`.
    fn from_str(s: &str) -> Result<Accelerator> {
        Ok(match s {
            "auto" => Accelerator::Auto,
            "cpu" => Accelerator::Cpu,
            "gpu" | "cuda" => Accelerator::Cuda,
            _ => bail!(
                Value,
                "You selected an invalid accelerator name: `accelerator={s:?}`. Available names are: auto, cpu, cuda, gpu (Lightning's mps, tpu and hpu have no Pyrite backend)."
            ),
        })
    }
}

impl std::fmt::Display for Accelerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
