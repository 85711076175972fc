//! [`Callback`]: code the [`Trainer`](crate::Trainer) runs at fixed points of the loop, with
//! Lightning's hook names and order (`lightning.pytorch.callbacks.Callback`).
//!
//! Order within `fit` (each callback hook runs for every callback in the order given, then
//! the module's hook of the same name):
//!
//! ```text
//! setup("fit")
//! configure_optimizers            (module)
//! on_fit_start
//! on_sanity_check_start           num_sanity_val_steps validation batches
//!   [validation loop]
//! on_sanity_check_end
//! on_train_start
//! for each epoch:
//!   on_train_epoch_start
//!   for each batch:
//!     on_train_batch_start
//!     training_step               (module)
//!     on_before_zero_grad         first batch of an accumulation window
//!     on_before_backward
//!     [backward]
//!     on_after_backward
//!     on_before_optimizer_step    last batch of an accumulation window
//!     [gradient clipping, optimizer step, "step" schedulers]
//!     on_train_batch_end
//!     [validation loop]           when val_check_interval says so:
//!       on_validation_start, on_validation_epoch_start,
//!       (on_validation_batch_start, validation_step, on_validation_batch_end)*,
//!       on_validation_epoch_end, on_validation_end
//!   on_train_epoch_end            monitoring callbacks (checkpoints, early stopping) after
//!                                 the module's hook, so they see what it logged
//!   ["epoch" schedulers]
//! on_train_end
//! on_fit_end
//! teardown("fit")
//! ```
//!
//! [`ModelCheckpoint`](crate::callbacks::ModelCheckpoint)s run after every other callback of
//! the same hook, as Lightning reorders them.
//!
//! A callback's [`state_dict`](Callback::state_dict) is saved in every checkpoint under its
//! [`state_key`](Callback::state_key) and given back to
//! [`load_state_dict`](Callback::load_state_dict) when training resumes from it.

use crate::module::{LightningModule, StepOutput};
use crate::results::Stage;
use crate::trainer::Trainer;
use pyrite_core::{Error, Result, Tensor};
use pyrite_data::Sample;
use pyrite_serialization::Object;
use std::any::Any;

/// Every callback can be seen as `Any` (to find a built-in one by type); there is nothing to
/// implement.
pub trait AsAny: Any {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A Lightning callback: every hook does nothing unless overridden. Hooks get the Trainer
/// (counters, metrics, the optimizer, `should_stop`, `save_checkpoint`) and the module.
///
/// ```
/// use pyrite::train::{Callback, LightningModule, Trainer};
/// /// Counts the training batches.
/// #[derive(Default)]
/// struct CountBatches { n: usize }
/// impl Callback for CountBatches {
///     fn on_train_batch_end(&mut self, _t: &mut Trainer, _m: &mut dyn LightningModule,
///         _out: &pyrite::train::StepOutput, _b: &pyrite::data::Sample, _i: usize) -> pyrite::Result<()> {
///         self.n += 1;
///         Ok(())
///     }
/// }
/// ```
#[allow(unused_variables)]
pub trait Callback: AsAny {
    /// The key of this callback's state in a checkpoint; by default the type's name. Two
    /// callbacks of the same type need different keys (as Lightning's key their options).
    fn state_key(&self) -> String {
        let full = std::any::type_name::<Self>();
        full.rsplit("::").next().unwrap_or(full).to_string()
    }

    /// Whether this callback monitors a metric (checkpointing, early stopping): its
    /// `on_train_epoch_end` then runs after the module's.
    fn is_monitoring(&self) -> bool {
        false
    }

    fn setup(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule, stage: Stage) -> Result<()> {
        Ok(())
    }
    fn teardown(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        stage: Stage,
    ) -> Result<()> {
        Ok(())
    }
    fn on_fit_start(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_fit_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_sanity_check_start(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
    ) -> Result<()> {
        Ok(())
    }
    fn on_sanity_check_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_train_start(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_train_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_train_epoch_start(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
    ) -> Result<()> {
        Ok(())
    }
    fn on_train_epoch_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_train_batch_start(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        batch: &Sample,
        batch_idx: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn on_train_batch_end(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        outputs: &StepOutput,
        batch: &Sample,
        batch_idx: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn on_validation_start(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_validation_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_validation_epoch_start(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
    ) -> Result<()> {
        Ok(())
    }
    fn on_validation_epoch_end(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
    ) -> Result<()> {
        Ok(())
    }
    fn on_validation_batch_start(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        batch: &Sample,
        batch_idx: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn on_validation_batch_end(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        batch: &Sample,
        batch_idx: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn on_test_start(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_test_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_test_epoch_start(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_test_epoch_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_test_batch_start(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        batch: &Sample,
        batch_idx: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn on_test_batch_end(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        batch: &Sample,
        batch_idx: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn on_predict_start(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_predict_end(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_before_zero_grad(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    fn on_before_backward(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        loss: &Tensor,
    ) -> Result<()> {
        Ok(())
    }
    fn on_after_backward(&mut self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        Ok(())
    }
    /// Before `optimizer.step()`, after the gradients of the accumulation window are in
    /// (`trainer.optimizer()` is the optimizer).
    fn on_before_optimizer_step(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
    ) -> Result<()> {
        Ok(())
    }
    /// Called when a checkpoint is being saved, to add to it.
    fn on_save_checkpoint(&mut self, checkpoint: &mut Object) -> Result<()> {
        Ok(())
    }
    /// Called when a checkpoint is loaded, after the states are restored.
    fn on_load_checkpoint(&mut self, checkpoint: &Object) -> Result<()> {
        Ok(())
    }
    /// Called when `fit` (or another stage) ends with an error.
    fn on_exception(
        &mut self,
        trainer: &mut Trainer,
        module: &mut dyn LightningModule,
        error: &Error,
    ) -> Result<()> {
        Ok(())
    }
    /// The state saved in checkpoints (default: none).
    fn state_dict(&self) -> Object {
        Object::Dict(Default::default())
    }
    /// Restores [`state_dict`](Callback::state_dict)'s state.
    fn load_state_dict(&mut self, state: &Object) -> Result<()> {
        Ok(())
    }
}
