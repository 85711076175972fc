//! Schedulers made of schedulers: `SequentialLR` (one after the other, switching at
//! milestones) and `ChainedScheduler` (all of them every step, their factors multiplying).

use super::{
    group_lrs, load_f64_list, load_i64, LRScheduler, SchedulerBase, SchedulerOptions, SchedulerStateDict,
    SchedulerValue,
};
use crate::optimizer::{Optimizer, ParamGroup};
use pyrite_core::{bail, Result};

fn check_children(who: &str, schedulers: &[Box<dyn LRScheduler>], n_groups: usize) -> Result<()> {
    if schedulers.is_empty() {
        match who {
            "SequentialLR" => {
                bail!(Value, "SequentialLR expects at least one scheduler, but got no scheduler.")
            }
            _ => bail!(Value, "{who} expects at least one scheduler to be chained, but got no scheduler."),
        }
    }
    for (i, s) in schedulers.iter().enumerate() {
        let n = s.get_last_lr().len();
        if n != n_groups {
            bail!(Value, "{who} expects all schedulers to belong to the same optimizer, but the scheduler at index {i} has {n} param groups and the optimizer {n_groups}");
        }
    }
    Ok(())
}

/// The schedulers of a [`SequentialLR`] or a [`ChainedScheduler`] (PyTorch's `schedulers`
/// list): a tuple of schedulers of any types, `(warmup, cosine)`, or a
/// `Vec<Box<dyn LRScheduler>>` when their number is known only at run time.
/// [`ReduceLROnPlateau`](super::ReduceLROnPlateau) is not an [`LRScheduler`], so it cannot be
/// one of them (PyTorch refuses it at run time).
pub trait IntoSchedulers {
    fn into_schedulers(self) -> Vec<Box<dyn LRScheduler>>;
}

impl IntoSchedulers for Vec<Box<dyn LRScheduler>> {
    fn into_schedulers(self) -> Vec<Box<dyn LRScheduler>> {
        self
    }
}

macro_rules! tuple_schedulers {
    ($($s:ident),+) => {
        impl<$($s: LRScheduler + 'static),+> IntoSchedulers for ($($s,)+) {
            #[allow(non_snake_case)]
            fn into_schedulers(self) -> Vec<Box<dyn LRScheduler>> {
                let ($($s,)+) = self;
                vec![$(Box::new($s) as Box<dyn LRScheduler>),+]
            }
        }
    };
}

tuple_schedulers!(A);
tuple_schedulers!(A, B);
tuple_schedulers!(A, B, C);
tuple_schedulers!(A, B, C, D);
tuple_schedulers!(A, B, C, D, E);
tuple_schedulers!(A, B, C, D, E, F);
tuple_schedulers!(A, B, C, D, E, F, G);
tuple_schedulers!(A, B, C, D, E, F, G, H);

fn save_children(sd: &mut SchedulerStateDict, schedulers: &[Box<dyn LRScheduler>]) {
    let children = schedulers.iter().map(|s| SchedulerValue::Dict(s.state_dict())).collect();
    sd.insert("_schedulers".into(), SchedulerValue::List(children));
}

fn load_children(who: &str, sd: &SchedulerStateDict, schedulers: &mut [Box<dyn LRScheduler>]) -> Result<()> {
    match sd.get("_schedulers") {
        Some(SchedulerValue::List(l)) => {
            if l.len() > schedulers.len() {
                bail!(
                    Value,
                    "{who}: the state_dict has {} schedulers, this one {}",
                    l.len(),
                    schedulers.len()
                );
            }
            for (s, v) in schedulers.iter_mut().zip(l) {
                match v {
                    SchedulerValue::Dict(d) => s.load_state_dict(d)?,
                    _ => bail!(Value, "{who}: each of '_schedulers' should be a state_dict, got {v:?}"),
                }
            }
            Ok(())
        }
        Some(v) => bail!(Value, "{who}: '_schedulers' should be a list of state_dicts, got {v:?}"),
        None => Ok(()),
    }
}

/// `SequentialLR`: runs `schedulers[0]` until `milestones[0]`, then `schedulers[1]` (restarted
/// from its epoch 0) until `milestones[1]`, and so on. Build the schedulers on the same
/// optimizer first and give them as a tuple (see [`IntoSchedulers`]).
///
/// ```
/// use pyrite::optim::lr_scheduler::{CosineAnnealingLR, LRScheduler, LinearLR, LinearLROptions, SequentialLR};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// let w = pyrite::Tensor::new([1.0f64])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 0.1, ..Default::default() })?;
/// // Five epochs of linear warmup, then cosine annealing.
/// let warmup = LinearLR::new(&mut opt, LinearLROptions { start_factor: 0.2, total_iters: 5, ..Default::default() })?;
/// let cosine = CosineAnnealingLR::new(&mut opt, 95, Default::default())?;
/// let mut sched = SequentialLR::new(&mut opt, (warmup, cosine), &[5], Default::default())?;
/// assert!((sched.get_last_lr()[0] - 0.02).abs() < 1e-15);
/// for _ in 0..5 {
///     opt.step()?;
///     sched.step(&mut opt)?;
/// }
/// assert!((sched.get_last_lr()[0] - 0.1).abs() < 1e-15);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct SequentialLR {
    base: SchedulerBase,
    schedulers: Vec<Box<dyn LRScheduler>>,
    milestones: Vec<i64>,
}

impl SequentialLR {
    pub fn new(
        opt: &mut dyn Optimizer,
        schedulers: impl IntoSchedulers,
        milestones: &[i64],
        options: SchedulerOptions,
    ) -> Result<SequentialLR> {
        let mut schedulers = schedulers.into_schedulers();
        check_children("SequentialLR", &schedulers, opt.param_groups().len())?;
        if milestones.len() + 1 != schedulers.len() {
            bail!(
                Value,
                "Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone \
                 points, but got number of schedulers {} and the number of milestones to be equal to {}",
                schedulers.len(),
                milestones.len()
            );
        }
        for g in opt.param_groups_mut() {
            g.lr = g.f64("initial_lr")?;
        }
        for s in schedulers.iter_mut() {
            s.undo_epoch();
        }
        let idx = milestones.partition_point(|m| *m <= 0);
        schedulers[idx].initial_step(opt)?;
        let last_lr = schedulers[idx].get_last_lr().to_vec();
        Ok(SequentialLR {
            base: SchedulerBase::plain(options.last_epoch + 1, last_lr),
            schedulers,
            milestones: milestones.to_vec(),
        })
    }

    /// The schedulers, in order.
    pub fn schedulers(&self) -> &[Box<dyn LRScheduler>] {
        &self.schedulers
    }
}

impl LRScheduler for SequentialLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, _groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        bail!(NotImplemented, "SequentialLR has no get_lr of its own, so it cannot be restarted at a milestone of an outer SequentialLR")
    }

    /// PyTorch's `_update_lr` falls back on `get_lr`, which a combination does not have.
    fn update_lr(&mut self, opt: &mut dyn Optimizer, _epoch: Option<i64>) -> Result<()> {
        self.get_lr(opt.param_groups_mut()).map(|_| ())
    }

    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.base.last_epoch += 1;
        let epoch = self.base.last_epoch;
        let idx = self.milestones.partition_point(|m| *m <= epoch);
        let s = &mut self.schedulers[idx];
        if idx > 0 && self.milestones[idx - 1] == epoch {
            s.update_lr(opt, Some(0))?;
        } else {
            s.step(opt)?;
        }
        self.base.last_lr = s.get_last_lr().to_vec();
        Ok(())
    }

    fn undo_epoch(&mut self) {
        for s in self.schedulers.iter_mut() {
            s.undo_epoch();
        }
    }

    fn state_dict(&self) -> SchedulerStateDict {
        let mut sd = SchedulerStateDict::new();
        sd.insert(
            "_milestones".into(),
            SchedulerValue::List(self.milestones.iter().map(|m| SchedulerValue::Int(*m)).collect()),
        );
        sd.insert("last_epoch".into(), self.base.last_epoch.into());
        sd.insert("_last_lr".into(), self.base.last_lr.as_slice().into());
        save_children(&mut sd, &self.schedulers);
        sd
    }

    fn load_state_dict(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        match sd.get("_milestones") {
            Some(SchedulerValue::List(l)) => {
                let ms = l.iter().map(SchedulerValue::as_i64).collect::<Option<Vec<_>>>();
                match ms {
                    Some(ms) if ms.len() + 1 == self.schedulers.len() => self.milestones = ms,
                    _ => bail!(
                        Value,
                        "SequentialLR: '_milestones' should be {} integers, got {l:?}",
                        self.schedulers.len() - 1
                    ),
                }
            }
            Some(v) => bail!(Value, "SequentialLR: '_milestones' should be a list of integers, got {v:?}"),
            None => {}
        }
        load_i64(sd, "last_epoch", &mut self.base.last_epoch)?;
        load_f64_list(sd, "_last_lr", &mut self.base.last_lr)?;
        load_children("SequentialLR", sd, &mut self.schedulers)
    }
}

/// `ChainedScheduler`: steps every scheduler at each step, so their effects compose (a
/// constant warmup factor times an exponential decay, say). Build the schedulers on the same
/// optimizer first and give them as a tuple (see [`IntoSchedulers`]).
///
/// ```
/// use pyrite::optim::lr_scheduler::{ChainedScheduler, ConstantLR, ConstantLROptions, ExponentialLR, LRScheduler};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// let w = pyrite::Tensor::new([1.0f64])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 1.0, ..Default::default() })?;
/// // A factor of 0.5 for two epochs, times a decay of 0.9 per epoch.
/// let warmup = ConstantLR::new(&mut opt, ConstantLROptions { factor: 0.5, total_iters: 2, ..Default::default() })?;
/// let decay = ExponentialLR::new(&mut opt, 0.9, Default::default())?;
/// let mut sched = ChainedScheduler::new(&mut opt, (warmup, decay))?;
/// let mut seen = vec![sched.get_last_lr()[0]];
/// for _ in 0..3 {
///     opt.step()?;
///     sched.step(&mut opt)?;
///     seen.push(sched.get_last_lr()[0]);
/// }
/// let want = [0.5, 0.45, 0.81, 0.729];
/// assert!(seen.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{seen:?}");
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct ChainedScheduler {
    base: SchedulerBase,
    schedulers: Vec<Box<dyn LRScheduler>>,
}

impl ChainedScheduler {
    pub fn new(opt: &mut dyn Optimizer, schedulers: impl IntoSchedulers) -> Result<ChainedScheduler> {
        let schedulers = schedulers.into_schedulers();
        check_children("ChainedScheduler", &schedulers, opt.param_groups().len())?;
        Ok(ChainedScheduler { base: SchedulerBase::plain(0, group_lrs(opt.param_groups())), schedulers })
    }

    /// The schedulers, in order.
    pub fn schedulers(&self) -> &[Box<dyn LRScheduler>] {
        &self.schedulers
    }
}

impl LRScheduler for ChainedScheduler {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, _groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        bail!(NotImplemented, "ChainedScheduler has no get_lr of its own, so it cannot be restarted at a milestone of a SequentialLR")
    }

    /// PyTorch's `_update_lr` falls back on `get_lr`, which a combination does not have.
    fn update_lr(&mut self, opt: &mut dyn Optimizer, _epoch: Option<i64>) -> Result<()> {
        self.get_lr(opt.param_groups_mut()).map(|_| ())
    }

    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        for s in self.schedulers.iter_mut() {
            s.step(opt)?;
        }
        self.base.last_lr = group_lrs(opt.param_groups());
        Ok(())
    }

    /// The last epoch of the last scheduler (a chain has no epoch count of its own).
    fn last_epoch(&self) -> i64 {
        self.schedulers.last().map_or(0, |s| s.last_epoch())
    }

    fn undo_epoch(&mut self) {
        for s in self.schedulers.iter_mut() {
            s.undo_epoch();
        }
    }

    fn state_dict(&self) -> SchedulerStateDict {
        let mut sd = SchedulerStateDict::new();
        sd.insert("_last_lr".into(), self.base.last_lr.as_slice().into());
        save_children(&mut sd, &self.schedulers);
        sd
    }

    fn load_state_dict(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_f64_list(sd, "_last_lr", &mut self.base.last_lr)?;
        load_children("ChainedScheduler", sd, &mut self.schedulers)
    }
}
