//! [`LearningRateMonitor`]: logs the learning rate (Lightning's `LearningRateMonitor`).

use crate::callback::Callback;
use crate::module::{Interval, LightningModule};
use crate::trainer::Trainer;
use pyrite_core::Result;
use std::collections::BTreeMap;

/// [`LearningRateMonitor`]'s options, with Lightning's defaults.
#[derive(Clone, Debug, Default)]
pub struct LearningRateMonitorOptions {
    /// Log every step or every epoch; `None` (default): at the scheduler's interval.
    pub logging_interval: Option<Interval>,
    /// Also log the momentum (`betas[0]` for Adam-like optimizers).
    pub log_momentum: bool,
    pub log_weight_decay: bool,
}

/// Logs `lr-<Optimizer>` (or the scheduler config's `name`; `/pg1`, `/pg2`, ... for several
/// parameter groups) to the loggers.
#[derive(Default)]
pub struct LearningRateMonitor {
    options: LearningRateMonitorOptions,
}

impl LearningRateMonitor {
    pub fn new(options: LearningRateMonitorOptions) -> LearningRateMonitor {
        LearningRateMonitor { options }
    }

    fn stats(&self, trainer: &Trainer, interval: Option<Interval>) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        let Some(opt) = trainer.optimizer() else { return out };
        let (sched_interval, sched_name) = match trainer.lr_scheduler_info() {
            Some((i, n)) => (Some(i), n),
            None => (None, None),
        };
        if let (Some(want), Some(have)) = (interval, sched_interval)
            && want != have
        {
            return out;
        }
        let name = sched_name.unwrap_or_else(|| format!("lr-{}", opt.base().name()));
        let groups = opt.param_groups();
        for (i, g) in groups.iter().enumerate() {
            let n = if groups.len() > 1 { format!("{name}/pg{}", i + 1) } else { name.clone() };
            if let Ok(lr) = g.f64("lr") {
                out.insert(n.clone(), lr);
            }
            if self.options.log_momentum {
                let m = g.pair("betas").map(|b| b.0).or_else(|_| g.f64("momentum"));
                if let Ok(m) = m {
                    out.insert(format!("{n}-momentum"), m);
                }
            }
            if self.options.log_weight_decay
                && let Ok(w) = g.f64("weight_decay")
            {
                out.insert(format!("{n}-weight_decay"), w);
            }
        }
        out
    }
}

impl Callback for LearningRateMonitor {
    fn on_train_batch_start(
        &mut self,
        trainer: &mut Trainer,
        _m: &mut dyn LightningModule,
        _b: &pyrite_data::Sample,
        _i: usize,
    ) -> Result<()> {
        if !trainer.should_update_logs() || self.options.logging_interval == Some(Interval::Epoch) {
            return Ok(());
        }
        let interval = if self.options.logging_interval.is_none() { Some(Interval::Step) } else { None };
        let stats = self.stats(trainer, interval);
        let step = trainer.batches_that_stepped() as u64;
        trainer.log_metrics(&stats, step)
    }

    fn on_train_epoch_start(&mut self, trainer: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        if self.options.logging_interval == Some(Interval::Step) {
            return Ok(());
        }
        let interval = if self.options.logging_interval.is_none() { Some(Interval::Epoch) } else { None };
        let stats = self.stats(trainer, interval);
        let step = trainer.batches_that_stepped() as u64;
        trainer.log_metrics(&stats, step)
    }
}
