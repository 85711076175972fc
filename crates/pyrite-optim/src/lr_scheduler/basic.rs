//! The schedulers with a simple rule: `LambdaLR`, `MultiplicativeLR`, `StepLR`, `MultiStepLR`,
//! `ConstantLR`, `LinearLR`, `ExponentialLR` and `PolynomialLR`.

use super::{
    group_lrs, load_f64, load_i64, py_mod, LRScheduler, SchedulerBase, SchedulerOptions, SchedulerStateDict,
    SchedulerValue,
};
use crate::optimizer::{Optimizer, ParamGroup};
use pyrite_core::{bail, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A function of the epoch (`lr_lambda`).
pub type LrLambda = Arc<dyn Fn(i64) -> f64 + Send + Sync>;

fn check_lambdas(who: &str, lambdas: &[LrLambda], n_groups: usize) -> Result<()> {
    if lambdas.len() != n_groups {
        bail!(Value, "{who}: Expected {n_groups} lr_lambdas, but got {}", lambdas.len());
    }
    Ok(())
}

/// Functions are not saved: `lr_lambdas` is a list of `None`, as PyTorch saves plain functions.
fn save_lambdas(sd: &mut SchedulerStateDict, n: usize) {
    sd.insert("lr_lambdas".into(), SchedulerValue::List(vec![SchedulerValue::None; n]));
}

/// `LambdaLR`: each group's lr is its initial lr times `lr_lambda(epoch)`.
///
/// ```
/// use pyrite::optim::lr_scheduler::{LRScheduler, LambdaLR, SchedulerOptions};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// let w = pyrite::Tensor::new([1.0f64])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 1.0, ..Default::default() })?;
/// let mut sched = LambdaLR::new(&mut opt, |epoch| 1.0 / (1 + epoch) as f64, SchedulerOptions::default())?;
/// opt.step()?;
/// sched.step(&mut opt)?;
/// assert_eq!(sched.get_last_lr(), [0.5]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct LambdaLR {
    base: SchedulerBase,
    lr_lambdas: Vec<LrLambda>,
}

impl LambdaLR {
    /// One function for every group.
    pub fn new(
        opt: &mut dyn Optimizer,
        lr_lambda: impl Fn(i64) -> f64 + Send + Sync + 'static,
        options: SchedulerOptions,
    ) -> Result<LambdaLR> {
        let f: LrLambda = Arc::new(lr_lambda);
        let n = opt.param_groups().len();
        LambdaLR::with_lambdas(opt, vec![f; n], options)
    }

    /// One function per group.
    pub fn with_lambdas(
        opt: &mut dyn Optimizer,
        lr_lambdas: Vec<LrLambda>,
        options: SchedulerOptions,
    ) -> Result<LambdaLR> {
        check_lambdas("LambdaLR", &lr_lambdas, opt.param_groups().len())?;
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = LambdaLR { base, lr_lambdas };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for LambdaLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, _groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        Ok(self.base.base_lrs.iter().zip(&self.lr_lambdas).map(|(b, f)| b * f(e)).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        save_lambdas(sd, self.lr_lambdas.len());
    }
}

/// `MultiplicativeLR`: each step multiplies each group's lr by `lr_lambda(epoch)`.
pub struct MultiplicativeLR {
    base: SchedulerBase,
    lr_lambdas: Vec<LrLambda>,
}

impl MultiplicativeLR {
    /// One function for every group.
    pub fn new(
        opt: &mut dyn Optimizer,
        lr_lambda: impl Fn(i64) -> f64 + Send + Sync + 'static,
        options: SchedulerOptions,
    ) -> Result<MultiplicativeLR> {
        let f: LrLambda = Arc::new(lr_lambda);
        let n = opt.param_groups().len();
        MultiplicativeLR::with_lambdas(opt, vec![f; n], options)
    }

    /// One function per group.
    pub fn with_lambdas(
        opt: &mut dyn Optimizer,
        lr_lambdas: Vec<LrLambda>,
        options: SchedulerOptions,
    ) -> Result<MultiplicativeLR> {
        check_lambdas("MultiplicativeLR", &lr_lambdas, opt.param_groups().len())?;
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = MultiplicativeLR { base, lr_lambdas };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for MultiplicativeLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        if self.base.is_initial() {
            return Ok(group_lrs(groups));
        }
        let e = self.base.last_epoch;
        Ok(groups.iter().zip(&self.lr_lambdas).map(|(g, f)| g.lr * f(e)).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        save_lambdas(sd, self.lr_lambdas.len());
    }
}

/// [`StepLR`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct StepLROptions {
    pub gamma: f64,
    pub last_epoch: i64,
}

impl Default for StepLROptions {
    fn default() -> Self {
        StepLROptions { gamma: 0.1, last_epoch: -1 }
    }
}

/// `StepLR`: multiplies the lr by `gamma` every `step_size` epochs.
pub struct StepLR {
    base: SchedulerBase,
    step_size: i64,
    gamma: f64,
}

impl StepLR {
    pub fn new(opt: &mut dyn Optimizer, step_size: usize, options: StepLROptions) -> Result<StepLR> {
        if step_size == 0 {
            bail!(Value, "StepLR: step_size must be a positive integer, got 0");
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = StepLR { base, step_size: step_size as i64, gamma: options.gamma };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for StepLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        if e == 0 || py_mod(e, self.step_size) != 0 {
            return Ok(group_lrs(groups));
        }
        Ok(groups.iter().map(|g| g.lr * self.gamma).collect())
    }
    fn closed_form_lr(&self) -> Option<Vec<f64>> {
        let k = self.base.last_epoch.div_euclid(self.step_size) as f64;
        Some(self.base.base_lrs.iter().map(|b| b * self.gamma.powf(k)).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("step_size".into(), self.step_size.into());
        sd.insert("gamma".into(), self.gamma.into());
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_i64(sd, "step_size", &mut self.step_size)?;
        if self.step_size <= 0 {
            bail!(Value, "StepLR: step_size must be a positive integer, got {}", self.step_size);
        }
        load_f64(sd, "gamma", &mut self.gamma)
    }
}

/// [`MultiStepLR`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct MultiStepLROptions {
    pub gamma: f64,
    pub last_epoch: i64,
}

impl Default for MultiStepLROptions {
    fn default() -> Self {
        MultiStepLROptions { gamma: 0.1, last_epoch: -1 }
    }
}

/// `MultiStepLR`: multiplies the lr by `gamma` at each milestone (by `gamma^k` at a milestone
/// listed `k` times).
pub struct MultiStepLR {
    base: SchedulerBase,
    /// Each milestone with how many times it was given (PyTorch's `Counter`).
    milestones: BTreeMap<i64, i64>,
    gamma: f64,
}

impl MultiStepLR {
    pub fn new(
        opt: &mut dyn Optimizer,
        milestones: &[i64],
        options: MultiStepLROptions,
    ) -> Result<MultiStepLR> {
        let mut counter = BTreeMap::new();
        for m in milestones {
            *counter.entry(*m).or_insert(0) += 1;
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = MultiStepLR { base, milestones: counter, gamma: options.gamma };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for MultiStepLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        match self.milestones.get(&self.base.last_epoch) {
            None => Ok(group_lrs(groups)),
            Some(&count) => Ok(groups.iter().map(|g| g.lr * self.gamma.powf(count as f64)).collect()),
        }
    }
    fn closed_form_lr(&self) -> Option<Vec<f64>> {
        let passed: i64 = self.milestones.range(..=self.base.last_epoch).map(|(_, c)| c).sum();
        Some(self.base.base_lrs.iter().map(|b| b * self.gamma.powf(passed as f64)).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        let counter = self.milestones.iter().map(|(m, c)| (m.to_string(), SchedulerValue::Int(*c))).collect();
        sd.insert("milestones".into(), SchedulerValue::Dict(counter));
        sd.insert("gamma".into(), self.gamma.into());
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        match sd.get("milestones") {
            Some(SchedulerValue::Dict(d)) => {
                let mut counter = BTreeMap::new();
                for (k, v) in d {
                    let m: i64 = k.parse().map_err(|_| {
                        pyrite_core::Error::new(
                            pyrite_core::ErrorKind::Value,
                            format!("MultiStepLR: bad milestone '{k}' in state_dict"),
                        )
                    })?;
                    let c = v.as_i64().ok_or_else(|| {
                        pyrite_core::Error::new(
                            pyrite_core::ErrorKind::Value,
                            format!("MultiStepLR: bad count for milestone {k}: {v:?}"),
                        )
                    })?;
                    counter.insert(m, c);
                }
                self.milestones = counter;
            }
            Some(v) => bail!(Value, "MultiStepLR: 'milestones' should be a dict of counts, got {v:?}"),
            None => {}
        }
        load_f64(sd, "gamma", &mut self.gamma)
    }
}

/// [`ConstantLR`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct ConstantLROptions {
    pub factor: f64,
    pub total_iters: usize,
    pub last_epoch: i64,
}

impl Default for ConstantLROptions {
    fn default() -> Self {
        ConstantLROptions { factor: 1.0 / 3.0, total_iters: 5, last_epoch: -1 }
    }
}

/// `ConstantLR`: the lr times `factor` for the first `total_iters` epochs, then the lr.
pub struct ConstantLR {
    base: SchedulerBase,
    factor: f64,
    total_iters: i64,
}

impl ConstantLR {
    pub fn new(opt: &mut dyn Optimizer, options: ConstantLROptions) -> Result<ConstantLR> {
        if !(0.0..=1.0).contains(&options.factor) {
            bail!(Value, "ConstantLR: Constant multiplicative factor expected to be between 0 and 1.");
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = ConstantLR { base, factor: options.factor, total_iters: options.total_iters as i64 };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for ConstantLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        if e == 0 {
            return Ok(groups.iter().map(|g| g.lr * self.factor).collect());
        }
        if e != self.total_iters {
            return Ok(group_lrs(groups));
        }
        if self.factor == 0.0 {
            bail!(Value, "ConstantLR: float division by zero (factor is 0)");
        }
        let undo = 1.0 / self.factor;
        Ok(groups.iter().map(|g| g.lr * undo).collect())
    }
    fn closed_form_lr(&self) -> Option<Vec<f64>> {
        let done = (self.base.last_epoch >= self.total_iters) as i64 as f64;
        Some(self.base.base_lrs.iter().map(|b| b * (self.factor + done * (1.0 - self.factor))).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("factor".into(), self.factor.into());
        sd.insert("total_iters".into(), self.total_iters.into());
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_f64(sd, "factor", &mut self.factor)?;
        load_i64(sd, "total_iters", &mut self.total_iters)
    }
}

/// [`LinearLR`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct LinearLROptions {
    pub start_factor: f64,
    pub end_factor: f64,
    pub total_iters: usize,
    pub last_epoch: i64,
}

impl Default for LinearLROptions {
    fn default() -> Self {
        LinearLROptions { start_factor: 1.0 / 3.0, end_factor: 1.0, total_iters: 5, last_epoch: -1 }
    }
}

/// `LinearLR`: the lr times a factor going linearly from `start_factor` to `end_factor` over
/// `total_iters` epochs (a warmup, typically).
pub struct LinearLR {
    base: SchedulerBase,
    start_factor: f64,
    end_factor: f64,
    total_iters: i64,
}

impl LinearLR {
    pub fn new(opt: &mut dyn Optimizer, options: LinearLROptions) -> Result<LinearLR> {
        if options.start_factor > 1.0 || options.start_factor <= 0.0 {
            bail!(Value, "LinearLR: Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
        }
        if options.end_factor > 1.0 || options.end_factor < 0.0 {
            bail!(Value, "LinearLR: Ending multiplicative factor expected to be between 0 and 1.");
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = LinearLR {
            base,
            start_factor: options.start_factor,
            end_factor: options.end_factor,
            total_iters: options.total_iters as i64,
        };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for LinearLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        if e == 0 {
            return Ok(groups.iter().map(|g| g.lr * self.start_factor).collect());
        }
        if self.base.is_initial() || e > self.total_iters {
            return Ok(group_lrs(groups));
        }
        let (s, t) = (self.start_factor, self.end_factor);
        let factor = 1.0 + (t - s) / (self.total_iters as f64 * s + (e - 1) as f64 * (t - s));
        Ok(groups.iter().map(|g| g.lr * factor).collect())
    }
    fn closed_form_lr(&self) -> Option<Vec<f64>> {
        let (s, t) = (self.start_factor, self.end_factor);
        let done = self.total_iters.min(self.base.last_epoch) as f64;
        Some(self.base.base_lrs.iter().map(|b| b * (s + (t - s) * done / self.total_iters as f64)).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("start_factor".into(), self.start_factor.into());
        sd.insert("end_factor".into(), self.end_factor.into());
        sd.insert("total_iters".into(), self.total_iters.into());
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_f64(sd, "start_factor", &mut self.start_factor)?;
        load_f64(sd, "end_factor", &mut self.end_factor)?;
        load_i64(sd, "total_iters", &mut self.total_iters)
    }
}

/// `ExponentialLR`: multiplies the lr by `gamma` every epoch.
pub struct ExponentialLR {
    base: SchedulerBase,
    gamma: f64,
}

impl ExponentialLR {
    pub fn new(opt: &mut dyn Optimizer, gamma: f64, options: SchedulerOptions) -> Result<ExponentialLR> {
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = ExponentialLR { base, gamma };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for ExponentialLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        if self.base.is_initial() {
            return Ok(group_lrs(groups));
        }
        Ok(groups.iter().map(|g| g.lr * self.gamma).collect())
    }
    fn closed_form_lr(&self) -> Option<Vec<f64>> {
        let e = self.base.last_epoch as f64;
        Some(self.base.base_lrs.iter().map(|b| b * self.gamma.powf(e)).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("gamma".into(), self.gamma.into());
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_f64(sd, "gamma", &mut self.gamma)
    }
}

/// [`PolynomialLR`]'s options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct PolynomialLROptions {
    pub total_iters: usize,
    pub power: f64,
    pub last_epoch: i64,
}

impl Default for PolynomialLROptions {
    fn default() -> Self {
        PolynomialLROptions { total_iters: 5, power: 1.0, last_epoch: -1 }
    }
}

/// `PolynomialLR`: the lr times `(1 - epoch / total_iters)^power`, reaching 0 at
/// `total_iters`.
pub struct PolynomialLR {
    base: SchedulerBase,
    total_iters: i64,
    power: f64,
}

impl PolynomialLR {
    pub fn new(opt: &mut dyn Optimizer, options: PolynomialLROptions) -> Result<PolynomialLR> {
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = PolynomialLR { base, total_iters: options.total_iters as i64, power: options.power };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for PolynomialLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        if self.base.is_initial() || e > self.total_iters {
            return Ok(group_lrs(groups));
        }
        let n = self.total_iters as f64;
        let decay = ((1.0 - e as f64 / n) / (1.0 - (e - 1) as f64 / n)).powf(self.power);
        Ok(groups.iter().map(|g| g.lr * decay).collect())
    }
    fn closed_form_lr(&self) -> Option<Vec<f64>> {
        let done = self.total_iters.min(self.base.last_epoch) as f64;
        let n = self.total_iters as f64;
        Some(self.base.base_lrs.iter().map(|b| b * (1.0 - done / n).powf(self.power)).collect())
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("total_iters".into(), self.total_iters.into());
        sd.insert("power".into(), self.power.into());
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_i64(sd, "total_iters", &mut self.total_iters)?;
        load_f64(sd, "power", &mut self.power)
    }
}
