//! What a tuner callback changes while it trains on trial (the weights, the optimizer's state,
//! the global generator), saved before and put back after, as Lightning does with the
//! temporary checkpoint of its learning-rate and batch-size finders.

use crate::module::LightningModule;
use crate::trainer::Trainer;
use pyrite_core::Result;
use pyrite_nn::StateDict;
use pyrite_optim::OptimizerStateDict;

pub(crate) struct TunerSnapshot {
    weights: StateDict,
    rng: pyrite_core::Tensor,
    optimizer: OptimizerStateDict,
}

impl TunerSnapshot {
    /// Deep copies of the module's state_dict and the optimizer's state, and the generator.
    pub(crate) fn take(trainer: &Trainer, module: &dyn LightningModule) -> Result<TunerSnapshot> {
        let mut weights = StateDict::new();
        for (k, t) in module.module().state_dict()?.iter() {
            weights.insert(k, t.detach().deep_clone()?);
        }
        Ok(TunerSnapshot {
            weights,
            rng: pyrite_core::get_rng_state(),
            optimizer: trainer.optimizer().expect("configured").state_dict().deep_clone()?,
        })
    }

    /// Loads the weights, the generator and the optimizer's state back.
    pub(crate) fn restore(&self, trainer: &mut Trainer, module: &mut dyn LightningModule) -> Result<()> {
        module.module().load_state_dict(&self.weights, true)?;
        pyrite_core::set_rng_state(&self.rng)?;
        trainer.optimizer_mut().expect("configured").load_state_dict(&self.optimizer)
    }
}
