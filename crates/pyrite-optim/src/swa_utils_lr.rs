//! `torch.optim.swa_utils.SWALR`: the learning-rate schedule of stochastic weight averaging,
//! which anneals each group's lr to a constant `swa_lr` and holds it there.

use crate::lr_scheduler::{
    load_i64, load_str, AnnealStrategy, LRScheduler, PerGroup, SchedulerBase, SchedulerStateDict,
};
use crate::optimizer::{Optimizer, ParamGroup};
use pyrite_core::Result;
use std::f64::consts::PI;

/// [`SWALR`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct SWALROptions {
    /// Epochs over which the lr goes from its value to `swa_lr`.
    pub anneal_epochs: usize,
    pub anneal_strategy: AnnealStrategy,
    pub last_epoch: i64,
}

impl Default for SWALROptions {
    fn default() -> Self {
        SWALROptions { anneal_epochs: 10, anneal_strategy: AnnealStrategy::Cos, last_epoch: -1 }
    }
}

/// `SWALR`: anneals each group's lr towards its `swa_lr` (stored in the group as `swa_lr`) over
/// `anneal_epochs` epochs, by a cosine or a straight line, then keeps it there.
///
/// ```
/// use pyrite::optim::lr_scheduler::LRScheduler;
/// use pyrite::optim::swa_utils::{SWALR, SWALROptions};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// let w = pyrite::Tensor::new([1.0f64])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 0.1, ..Default::default() })?;
/// let mut swa_sched = SWALR::new(&mut opt, 0.05, SWALROptions { anneal_epochs: 5, ..Default::default() })?;
/// for _ in 0..5 {
///     opt.step()?;
///     swa_sched.step(&mut opt)?;
/// }
/// assert!((swa_sched.get_last_lr()[0] - 0.05).abs() < 1e-15);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct SWALR {
    base: SchedulerBase,
    anneal_epochs: i64,
    anneal_strategy: AnnealStrategy,
}

impl SWALR {
    pub fn new(opt: &mut dyn Optimizer, swa_lr: impl Into<PerGroup>, options: SWALROptions) -> Result<SWALR> {
        let n = opt.param_groups().len();
        let swa_lrs = swa_lr.into().expand("SWALR", "swa_lr", n)?;
        for (g, v) in opt.param_groups_mut().iter_mut().zip(&swa_lrs) {
            g.set("swa_lr", *v);
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = SWALR {
            base,
            anneal_epochs: options.anneal_epochs as i64,
            anneal_strategy: options.anneal_strategy,
        };
        s.initial_step(opt)?;
        Ok(s)
    }

    fn anneal(&self, t: f64) -> f64 {
        match self.anneal_strategy {
            AnnealStrategy::Cos => (1.0 - (PI * t).cos()) / 2.0,
            AnnealStrategy::Linear => t,
        }
    }
}

impl LRScheduler for SWALR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }

    /// Recovers the lr the schedule started from (the groups' lr may have been changed by
    /// another scheduler since) and moves it `alpha` of the way to `swa_lr`.
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let mut step = self.base.step_count - 1;
        if self.anneal_epochs == 0 {
            step = step.max(1);
        }
        let span = self.anneal_epochs.max(1) as f64;
        let prev_alpha = self.anneal(((step - 1) as f64 / span).clamp(0.0, 1.0));
        let alpha = self.anneal((step as f64 / span).clamp(0.0, 1.0));
        let mut lrs = Vec::with_capacity(groups.len());
        for g in groups.iter() {
            let swa_lr = g.f64("swa_lr")?;
            let prev_lr =
                if prev_alpha == 1.0 { swa_lr } else { (g.lr - prev_alpha * swa_lr) / (1.0 - prev_alpha) };
            lrs.push(swa_lr * alpha + prev_lr * (1.0 - alpha));
        }
        Ok(lrs)
    }

    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("_anneal_strategy".into(), self.anneal_strategy.name().into());
        sd.insert("anneal_epochs".into(), self.anneal_epochs.into());
    }

    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        if let Some(name) = load_str(sd, "_anneal_strategy")? {
            self.anneal_strategy = AnnealStrategy::from_name(name)?;
        }
        load_i64(sd, "anneal_epochs", &mut self.anneal_epochs)?;
        if self.anneal_epochs < 0 {
            pyrite_core::bail!(
                Value,
                "SWALR: anneal_epochs must be equal or greater than 0, got {}",
                self.anneal_epochs
            );
        }
        Ok(())
    }
}
