//! `ReduceLROnPlateau`: lowers the lr when a metric stops improving.

use super::{
    group_lrs, load_f64, load_f64_list, load_i64, load_str, PerGroup, SchedulerBase, SchedulerStateDict,
    SchedulerValue,
};
use crate::optimizer::{Optimizer, ParamGroup};
use pyrite_core::{bail, Result};

/// Whether a lower ([`PlateauMode::Min`], a loss) or higher ([`PlateauMode::Max`], an
/// accuracy) metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlateauMode {
    Min,
    Max,
}

/// How the `threshold` of [`ReduceLROnPlateau`] is measured: relative to the best value
/// (`best * (1 ∓ threshold)`) or absolute (`best ∓ threshold`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThresholdMode {
    Rel,
    Abs,
}

/// [`ReduceLROnPlateau`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct ReduceLROnPlateauOptions {
    pub mode: PlateauMode,
    /// The lr is multiplied by `factor` (< 1) on a plateau.
    pub factor: f64,
    /// How many epochs without improvement are tolerated before lowering the lr.
    pub patience: usize,
    /// The least change that counts as an improvement.
    pub threshold: f64,
    pub threshold_mode: ThresholdMode,
    /// Epochs to wait after a reduction before counting bad epochs again.
    pub cooldown: usize,
    /// A lower bound on the lr, for all groups or per group.
    pub min_lr: PerGroup,
    /// Reductions smaller than `eps` are skipped.
    pub eps: f64,
}

impl Default for ReduceLROnPlateauOptions {
    fn default() -> Self {
        ReduceLROnPlateauOptions {
            mode: PlateauMode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_mode: ThresholdMode::Rel,
            cooldown: 0,
            min_lr: PerGroup::All(0.0),
            eps: 1e-8,
        }
    }
}

/// `ReduceLROnPlateau`: multiplies the lr by `factor` when the metric given to
/// [`ReduceLROnPlateau::step`] has not improved for `patience` epochs.
///
/// It is built as every scheduler is, from `&mut optimizer` and its options, but it steps with
/// the metric (PyTorch's `scheduler.step(val_loss)`), so it is not an [`LRScheduler`](super::LRScheduler): its
/// `step` without a metric does not exist, rather than failing when called.
///
/// ```
/// use pyrite::optim::lr_scheduler::{ReduceLROnPlateau, ReduceLROnPlateauOptions};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// let w = pyrite::Tensor::new([1.0f64])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 0.1, ..Default::default() })?;
/// let options = ReduceLROnPlateauOptions { patience: 2, factor: 0.5, ..Default::default() };
/// let mut sched = ReduceLROnPlateau::new(&mut opt, options)?;
/// for val_loss in [1.0, 0.9, 0.9, 0.9, 0.9] {
///     opt.step()?;
///     sched.step(&mut opt, val_loss)?;
/// }
/// // Three epochs without improvement (more than the patience of 2): the lr halves.
/// assert_eq!(sched.get_last_lr(), [0.05]);
/// # Ok::<(), pyrite::Error>(())
/// ```
///
/// Stepping it without a metric, or treating it as an [`LRScheduler`](super::LRScheduler) (a child of a
/// [`SequentialLR`](super::SequentialLR), say), does not compile:
///
/// ```compile_fail
/// use pyrite::optim::lr_scheduler::{LRScheduler, ReduceLROnPlateau};
/// fn epoch_scheduler(_: &mut dyn LRScheduler) {}
/// fn check(plateau: &mut ReduceLROnPlateau) {
///     epoch_scheduler(plateau);
/// }
/// ```
pub struct ReduceLROnPlateau {
    base: SchedulerBase,
    factor: f64,
    /// The scalar `min_lr`, used again if groups are added; `None` when given per group.
    default_min_lr: Option<f64>,
    min_lrs: Vec<f64>,
    patience: i64,
    cooldown: i64,
    eps: f64,
    mode: PlateauMode,
    threshold: f64,
    threshold_mode: ThresholdMode,
    best: f64,
    cooldown_counter: i64,
    num_bad_epochs: i64,
}

impl ReduceLROnPlateau {
    pub fn new(opt: &mut dyn Optimizer, options: ReduceLROnPlateauOptions) -> Result<ReduceLROnPlateau> {
        if options.factor >= 1.0 {
            bail!(Value, "ReduceLROnPlateau: Factor should be < 1.0.");
        }
        let groups = opt.param_groups();
        let (default_min_lr, min_lrs) = match &options.min_lr {
            PerGroup::All(v) => (Some(*v), vec![*v; groups.len()]),
            PerGroup::Each(l) if l.len() == groups.len() => (None, l.clone()),
            PerGroup::Each(l) => {
                bail!(Value, "ReduceLROnPlateau: expected {} min_lrs, got {}", groups.len(), l.len())
            }
        };
        let mut s = ReduceLROnPlateau {
            base: SchedulerBase::plain(0, group_lrs(groups)),
            factor: options.factor,
            default_min_lr,
            min_lrs,
            patience: options.patience as i64,
            cooldown: options.cooldown as i64,
            eps: options.eps,
            mode: options.mode,
            threshold: options.threshold,
            threshold_mode: options.threshold_mode,
            best: 0.0,
            cooldown_counter: 0,
            num_bad_epochs: 0,
        };
        s.reset();
        Ok(s)
    }

    /// The worst possible metric: `inf` for `Min`, `-inf` for `Max`.
    fn mode_worse(&self) -> f64 {
        match self.mode {
            PlateauMode::Min => f64::INFINITY,
            PlateauMode::Max => f64::NEG_INFINITY,
        }
    }

    fn reset(&mut self) {
        self.best = self.mode_worse();
        self.cooldown_counter = 0;
        self.num_bad_epochs = 0;
    }

    fn is_better(&self, a: f64, best: f64) -> bool {
        match (self.mode, self.threshold_mode) {
            (PlateauMode::Min, ThresholdMode::Rel) => a < best * (1.0 - self.threshold),
            (PlateauMode::Min, ThresholdMode::Abs) => a < best - self.threshold,
            (PlateauMode::Max, ThresholdMode::Rel) => a > best * (self.threshold + 1.0),
            (PlateauMode::Max, ThresholdMode::Abs) => a > best + self.threshold,
        }
    }

    /// `scheduler.step(metrics)`: one epoch with this value of the metric (the validation
    /// loss, say).
    pub fn step(&mut self, opt: &mut dyn Optimizer, metric: f64) -> Result<()> {
        self.base.last_epoch += 1;
        if self.is_better(metric, self.best) {
            self.best = metric;
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.patience {
            self.reduce_lr(opt.param_groups_mut())?;
            self.cooldown_counter = self.cooldown;
            self.num_bad_epochs = 0;
        }
        self.base.last_lr = group_lrs(opt.param_groups());
        Ok(())
    }

    fn reduce_lr(&mut self, groups: &mut [ParamGroup]) -> Result<()> {
        if groups.len() != self.min_lrs.len() {
            match self.default_min_lr {
                Some(v) => self.min_lrs = vec![v; groups.len()],
                None => bail!(
                    Value,
                    "ReduceLROnPlateau: The number of param groups in the `optimizer` ({}) differs from when `ReduceLROnPlateau` \
                     was initialized ({}), usually due to a new param group being added to the optimizer. Please modify the \
                     `min_lrs` field to match the length of the `optimizer` param groups.",
                    groups.len(),
                    self.min_lrs.len()
                ),
            }
        }
        for (g, min_lr) in groups.iter_mut().zip(&self.min_lrs) {
            let old_lr = g.lr;
            let reduced = old_lr * self.factor;
            let new_lr = if *min_lr > reduced { *min_lr } else { reduced };
            if old_lr - new_lr > self.eps {
                g.lr = new_lr;
            }
        }
        Ok(())
    }
}

impl ReduceLROnPlateau {
    /// The lrs after the last step (`get_last_lr()`).
    pub fn get_last_lr(&self) -> &[f64] {
        &self.base.last_lr
    }

    /// `last_epoch`: how many times it stepped.
    pub fn last_epoch(&self) -> i64 {
        self.base.last_epoch
    }

    /// `state_dict()`: every field but the optimizer, with PyTorch's keys.
    pub fn state_dict(&self) -> SchedulerStateDict {
        let mut sd = SchedulerStateDict::new();
        sd.insert("factor".into(), self.factor.into());
        sd.insert("default_min_lr".into(), self.default_min_lr.into());
        sd.insert("min_lrs".into(), self.min_lrs.as_slice().into());
        sd.insert("patience".into(), self.patience.into());
        sd.insert("cooldown".into(), self.cooldown.into());
        sd.insert("eps".into(), self.eps.into());
        sd.insert("last_epoch".into(), self.base.last_epoch.into());
        sd.insert("_last_lr".into(), self.base.last_lr.as_slice().into());
        sd.insert("mode_worse".into(), self.mode_worse().into());
        let mode = match self.mode {
            PlateauMode::Min => "min",
            PlateauMode::Max => "max",
        };
        sd.insert("mode".into(), mode.into());
        sd.insert("threshold".into(), self.threshold.into());
        let threshold_mode = match self.threshold_mode {
            ThresholdMode::Rel => "rel",
            ThresholdMode::Abs => "abs",
        };
        sd.insert("threshold_mode".into(), threshold_mode.into());
        sd.insert("best".into(), self.best.into());
        sd.insert("cooldown_counter".into(), self.cooldown_counter.into());
        sd.insert("num_bad_epochs".into(), self.num_bad_epochs.into());
        sd
    }

    /// `load_state_dict(sd)`: the fields present in `sd` replace the scheduler's.
    pub fn load_state_dict(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        if let Some(m) = load_str(sd, "mode")? {
            self.mode = match m {
                "min" => PlateauMode::Min,
                "max" => PlateauMode::Max,
                _ => bail!(Value, "ReduceLROnPlateau: mode {m} is unknown!"),
            };
        }
        if let Some(m) = load_str(sd, "threshold_mode")? {
            self.threshold_mode = match m {
                "rel" => ThresholdMode::Rel,
                "abs" => ThresholdMode::Abs,
                _ => bail!(Value, "ReduceLROnPlateau: threshold mode {m} is unknown!"),
            };
        }
        load_f64(sd, "factor", &mut self.factor)?;
        match sd.get("default_min_lr") {
            Some(SchedulerValue::None) => self.default_min_lr = None,
            Some(v) => {
                self.default_min_lr = Some(v.as_f64().ok_or_else(|| {
                    pyrite_core::Error::new(
                        pyrite_core::ErrorKind::Value,
                        format!("ReduceLROnPlateau: 'default_min_lr' should be a float or None, got {v:?}"),
                    )
                })?)
            }
            None => {}
        }
        load_f64_list(sd, "min_lrs", &mut self.min_lrs)?;
        load_i64(sd, "patience", &mut self.patience)?;
        load_i64(sd, "cooldown", &mut self.cooldown)?;
        load_f64(sd, "eps", &mut self.eps)?;
        load_i64(sd, "last_epoch", &mut self.base.last_epoch)?;
        load_f64_list(sd, "_last_lr", &mut self.base.last_lr)?;
        load_f64(sd, "threshold", &mut self.threshold)?;
        load_f64(sd, "best", &mut self.best)?;
        load_i64(sd, "cooldown_counter", &mut self.cooldown_counter)?;
        load_i64(sd, "num_bad_epochs", &mut self.num_bad_epochs)
    }
}
