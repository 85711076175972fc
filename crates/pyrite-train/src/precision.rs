//! The Trainer's `precision` (Lightning's precision plugins): full f32, mixed precision under
//! autocast, or the whole model in a 16-bit type.
//!
//! - `"32-true"` (`"32"`, the default): nothing changes.
//! - `"bf16-mixed"` (`"bf16"`): every `training_step`, `validation_step`, `test_step` and
//!   `predict_step` runs under [`pyrite_core::autocast`] with bf16 (Lightning's
//!   `MixedPrecision`). Weights, gradients and the optimizer stay f32; products run in bf16
//!   on the AVX512-BF16 kernel where the CPU has it.
//! - `"16-mixed"` (`"16"`): on a GPU ([`crate::accelerator`]), steps run under CUDA autocast
//!   with f16 and the loss is scaled by a [`pyrite_amp::GradScaler`] (unscaled before the
//!   `on_before_optimizer_step` hooks and gradient clipping; a step whose gradients overflow
//!   is skipped), whose state checkpoints keep under `MixedPrecision`, as Lightning's
//!   `MixedPrecision` plugin. fp16 autocast needs a GPU, so on the CPU Lightning warns and
//!   trains in `"bf16-mixed"`; so does Pyrite.
//! - `"bf16-true"` / `"16-true"`: the module's floating-point parameters and buffers are
//!   converted to the type before the optimizers are built (Lightning's `HalfPrecision`), and
//!   the floating-point tensors of every batch are converted on their way into a step. The
//!   module must hand itself over ([`crate::LightningModule::module_mut`]). `validate`,
//!   `test` and `predict` run so; `fit` stops at the optimizers, which update f32 and f64
//!   parameters only (a clear error, not a silent f32 run).
//! - `"64-true"` (`"64"`): the same in f64.
//!
//! ```
//! use pyrite_train::precision::Precision;
//! assert_eq!("bf16".parse::<Precision>()?, Precision::Bf16Mixed);
//! assert_eq!(Precision::Bf16Mixed.as_str(), "bf16-mixed");
//! assert!("bf17".parse::<Precision>().is_err());
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use pyrite_core::{autocast, bail, DType, Device, Error, Result};
use pyrite_data::Sample;

/// `Trainer(precision=...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    /// `"32-true"`: f32 throughout.
    #[default]
    F32True,
    /// `"64-true"`: the module and the batches in f64.
    F64True,
    /// `"bf16-mixed"`: steps under bf16 autocast, f32 weights.
    Bf16Mixed,
    /// `"16-mixed"`: fp16 autocast; on the CPU, `"bf16-mixed"` with a warning (as Lightning).
    F16Mixed,
    /// `"bf16-true"`: the module and the batches in bf16.
    Bf16True,
    /// `"16-true"`: the module and the batches in f16.
    F16True,
}

impl Precision {
    /// Lightning's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::F32True => "32-true",
            Precision::F64True => "64-true",
            Precision::Bf16Mixed => "bf16-mixed",
            Precision::F16Mixed => "16-mixed",
            Precision::Bf16True => "bf16-true",
            Precision::F16True => "16-true",
        }
    }

    /// What the Trainer does on the CPU: `"16-mixed"` becomes `"bf16-mixed"` with Lightning's
    /// warning.
    pub(crate) fn on_cpu(self) -> Precision {
        if self == Precision::F16Mixed {
            eprintln!(
                "warning: You passed `Trainer(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'` instead."
            );
            return Precision::Bf16Mixed;
        }
        self
    }

    /// The autocast dtype of a mixed precision.
    fn autocast_dtype(self) -> Option<DType> {
        match self {
            Precision::Bf16Mixed => Some(DType::BF16),
            Precision::F16Mixed => Some(DType::F16),
            _ => None,
        }
    }

    /// The dtype of the module and its inputs for a `*-true` precision other than f32.
    pub(crate) fn module_dtype(self) -> Option<DType> {
        match self {
            Precision::F64True => Some(DType::F64),
            Precision::Bf16True => Some(DType::BF16),
            Precision::F16True => Some(DType::F16),
            _ => None,
        }
    }

    /// The context a step runs in: an autocast region for a mixed precision, of the device's
    /// type.
    pub(crate) fn forward_context(self, device: Device) -> Result<Option<autocast::AutocastGuard>> {
        match self.autocast_dtype() {
            Some(dtype) => Ok(Some(autocast::autocast(autocast::AutocastOptions {
                device_type: device,
                dtype: Some(dtype),
                ..Default::default()
            })?)),
            None => Ok(None),
        }
    }

    /// The batch as a step sees it: floating-point tensors converted for a `*-true` precision
    /// (Lightning's `convert_input`), else the batch itself.
    pub(crate) fn convert_input(self, batch: &Sample) -> Result<Option<Sample>> {
        match self.module_dtype() {
            Some(dtype) => Ok(Some(convert_sample(batch, dtype)?)),
            None => Ok(None),
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = Error;

    /// Lightning's names and their short aliases (`"32"`, `"64"`, `"16"`, `"bf16"`).
    fn from_str(s: &str) -> Result<Precision> {
        Ok(match s {
            "32-true" | "32" => Precision::F32True,
            "64-true" | "64" => Precision::F64True,
            "bf16-mixed" | "bf16" => Precision::Bf16Mixed,
            "16-mixed" | "16" => Precision::F16Mixed,
            "bf16-true" => Precision::Bf16True,
            "16-true" => Precision::F16True,
            _ => bail!(
                Value,
                "Precision {s:?} is invalid. Allowed precision values: ('transformer-engine', 'transformer-engine-float16', '16-true', '16-mixed', 'bf16-true', 'bf16-mixed', '32-true', '64-true', 64, 32, 16, '64', '32', '16', 'bf16') (the transformer-engine ones need a GPU)"
            ),
        })
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn convert_sample(s: &Sample, dtype: DType) -> Result<Sample> {
    s.map_tensors(&mut |t| if t.dtype().is_floating_point() { t.to_dtype(dtype) } else { Ok(t.clone()) })
}
