//! Cosine annealing: `CosineAnnealingLR` and `CosineAnnealingWarmRestarts` (SGDR).

use super::{group_lrs, load_f64, load_i64, py_mod, LRScheduler, SchedulerBase, SchedulerStateDict};
use crate::optimizer::{Optimizer, ParamGroup};
use pyrite_core::{bail, Result};
use std::f64::consts::PI;

/// [`CosineAnnealingLR`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct CosineAnnealingLROptions {
    pub eta_min: f64,
    pub last_epoch: i64,
}

impl Default for CosineAnnealingLROptions {
    fn default() -> Self {
        CosineAnnealingLROptions { eta_min: 0.0, last_epoch: -1 }
    }
}

/// `CosineAnnealingLR`: the lr follows half a cosine from its initial value down to `eta_min`
/// over `T_max` epochs, then back up over the next `T_max`, and so on.
///
/// ```
/// use pyrite::optim::lr_scheduler::{CosineAnnealingLR, LRScheduler};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// let w = pyrite::Tensor::new([1.0f64])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 0.1, ..Default::default() })?;
/// let mut sched = CosineAnnealingLR::new(&mut opt, 10, Default::default())?;
/// for _ in 0..10 {
///     opt.step()?;
///     sched.step(&mut opt)?;
/// }
/// assert!(sched.get_last_lr()[0].abs() < 1e-15);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct CosineAnnealingLR {
    base: SchedulerBase,
    t_max: i64,
    eta_min: f64,
}

impl CosineAnnealingLR {
    pub fn new(
        opt: &mut dyn Optimizer,
        t_max: usize,
        options: CosineAnnealingLROptions,
    ) -> Result<CosineAnnealingLR> {
        if t_max == 0 {
            bail!(Value, "CosineAnnealingLR: T_max must be a positive integer, got 0");
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = CosineAnnealingLR { base, t_max: t_max as i64, eta_min: options.eta_min };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for CosineAnnealingLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let (e, t, eta) = (self.base.last_epoch, self.t_max as f64, self.eta_min);
        let bases = &self.base.base_lrs;
        if self.base.is_initial() {
            return Ok(group_lrs(groups));
        }
        if self.base.step_count == 1 && e > 0 {
            return Ok(bases
                .iter()
                .map(|b| eta + (b - eta) * (1.0 + (e as f64 * PI / t).cos()) / 2.0)
                .collect());
        }
        if py_mod(e - 1 - self.t_max, 2 * self.t_max) == 0 {
            let c = (PI / t).cos();
            return Ok(bases
                .iter()
                .zip(groups.iter())
                .map(|(b, g)| g.lr + (b - eta) * (1.0 - c) / 2.0)
                .collect());
        }
        let ratio = (1.0 + (PI * e as f64 / t).cos()) / (1.0 + (PI * (e - 1) as f64 / t).cos());
        Ok(groups.iter().map(|g| ratio * (g.lr - eta) + eta).collect())
    }
    fn closed_form_lr(&self) -> Option<Vec<f64>> {
        let (e, t, eta) = (self.base.last_epoch as f64, self.t_max as f64, self.eta_min);
        Some(self.base.base_lrs.iter().map(|b| eta + (b - eta) * (1.0 + (PI * e / t).cos()) / 2.0).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("T_max".into(), self.t_max.into());
        sd.insert("eta_min".into(), self.eta_min.into());
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_i64(sd, "T_max", &mut self.t_max)?;
        if self.t_max <= 0 {
            bail!(Value, "CosineAnnealingLR: T_max must be a positive integer, got {}", self.t_max);
        }
        load_f64(sd, "eta_min", &mut self.eta_min)
    }
}

/// [`CosineAnnealingWarmRestarts`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct CosineAnnealingWarmRestartsOptions {
    /// The factor by which each period is longer than the previous one.
    pub t_mult: usize,
    pub eta_min: f64,
    pub last_epoch: i64,
}

impl Default for CosineAnnealingWarmRestartsOptions {
    fn default() -> Self {
        CosineAnnealingWarmRestartsOptions { t_mult: 1, eta_min: 0.0, last_epoch: -1 }
    }
}

/// `CosineAnnealingWarmRestarts` (SGDR): cosine annealing from the initial lr to `eta_min`
/// over `T_0` epochs, then a restart at the initial lr with a period `T_mult` times longer.
pub struct CosineAnnealingWarmRestarts {
    base: SchedulerBase,
    t_0: i64,
    t_i: i64,
    t_mult: i64,
    eta_min: f64,
    t_cur: i64,
}

impl CosineAnnealingWarmRestarts {
    pub fn new(
        opt: &mut dyn Optimizer,
        t_0: usize,
        options: CosineAnnealingWarmRestartsOptions,
    ) -> Result<CosineAnnealingWarmRestarts> {
        if t_0 == 0 {
            bail!(Value, "CosineAnnealingWarmRestarts: Expected positive integer T_0, but got {t_0}");
        }
        if options.t_mult < 1 {
            bail!(
                Value,
                "CosineAnnealingWarmRestarts: Expected integer T_mult >= 1, but got {}",
                options.t_mult
            );
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let (t_0, t_mult) = (t_0 as i64, options.t_mult as i64);
        let mut s = CosineAnnealingWarmRestarts {
            base,
            t_0,
            t_i: t_0,
            t_mult,
            eta_min: options.eta_min,
            t_cur: options.last_epoch,
        };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for CosineAnnealingWarmRestarts {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, _groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let (t_cur, t_i, eta) = (self.t_cur as f64, self.t_i as f64, self.eta_min);
        Ok(self
            .base
            .base_lrs
            .iter()
            .map(|b| eta + (b - eta) * (1.0 + (PI * t_cur / t_i).cos()) / 2.0)
            .collect())
    }

    /// Advances `T_cur` and restarts when it reaches the period; unlike the other schedulers
    /// it does not count steps (so it never warns about the step order, as in PyTorch).
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let epoch = if self.base.last_epoch < 0 {
            self.t_i = self.t_0;
            self.t_cur = 0;
            0
        } else {
            self.t_cur += 1;
            if self.t_cur >= self.t_i {
                self.t_cur = py_mod(self.t_cur, self.t_i);
                self.t_i *= self.t_mult;
            }
            self.base.last_epoch + 1
        };
        self.base.last_epoch = epoch;
        let groups = opt.param_groups_mut();
        self.base.check_groups(groups)?;
        let lrs = self.get_lr(groups)?;
        self.base.apply(groups, lrs)
    }

    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("T_0".into(), self.t_0.into());
        sd.insert("T_i".into(), self.t_i.into());
        sd.insert("T_mult".into(), self.t_mult.into());
        sd.insert("eta_min".into(), self.eta_min.into());
        sd.insert("T_cur".into(), self.t_cur.into());
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_i64(sd, "T_0", &mut self.t_0)?;
        load_i64(sd, "T_i", &mut self.t_i)?;
        load_i64(sd, "T_mult", &mut self.t_mult)?;
        load_f64(sd, "eta_min", &mut self.eta_min)?;
        load_i64(sd, "T_cur", &mut self.t_cur)?;
        if self.t_0 <= 0 || self.t_i <= 0 || self.t_mult < 1 {
            bail!(
                Value,
                "CosineAnnealingWarmRestarts: bad periods in state_dict (T_0 {}, T_i {}, T_mult {})",
                self.t_0,
                self.t_i,
                self.t_mult
            );
        }
        Ok(())
    }
}
