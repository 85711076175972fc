//! [`GradientAccumulationScheduler`]: changes gradient accumulation by epoch.

use crate::callback::Callback;
use crate::module::LightningModule;
use crate::trainer::Trainer;
use pyrite_core::{bail, Result};
use std::collections::BTreeMap;

/// Accumulates `factor` batches per optimizer step from each `epoch` of the schedule on
/// (`{epoch: factor}`, Lightning's `scheduling`); before the first listed epoch, 1.
pub struct GradientAccumulationScheduler {
    scheduling: BTreeMap<usize, usize>,
}

impl GradientAccumulationScheduler {
    pub fn new(
        scheduling: impl IntoIterator<Item = (usize, usize)>,
    ) -> Result<GradientAccumulationScheduler> {
        let scheduling: BTreeMap<usize, usize> = scheduling.into_iter().collect();
        if scheduling.is_empty() {
            bail!(Value, "Empty dict cannot be interpreted correct");
        }
        if let Some((e, f)) = scheduling.iter().find(|(_, f)| **f < 1) {
            bail!(
                Value,
                "Epoch {e} has an invalid accumulation factor {f}: accumulation factor should be an int > 0"
            );
        }
        Ok(GradientAccumulationScheduler { scheduling })
    }

    /// The factor for `epoch`.
    pub fn get_accumulate_grad_batches(&self, epoch: usize) -> usize {
        self.scheduling.range(..=epoch).next_back().map_or(1, |(_, f)| *f)
    }
}

impl Callback for GradientAccumulationScheduler {
    fn on_train_start(&mut self, trainer: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        if trainer.settings().accumulate_grad_batches != 1 {
            bail!(
                Value,
                "You set both `Trainer(accumulate_grad_batches={})` and are using the `GradientAccumulationScheduler` callback. Either remove `accumulate_grad_batches` from the Trainer or remove the callback.",
                trainer.settings().accumulate_grad_batches
            );
        }
        Ok(())
    }

    fn on_train_epoch_start(&mut self, trainer: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        let f = self.get_accumulate_grad_batches(trainer.current_epoch());
        trainer.set_accumulate_grad_batches(f)
    }
}
