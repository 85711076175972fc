//! The schedulers that cycle the lr (and, inversely, the momentum): `CyclicLR` and
//! `OneCycleLR`. With `cycle_momentum`, they set each group's `momentum`, or `betas[0]` for an
//! optimizer whose defaults have `betas` (Adam-like).

use super::{
    load_bool, load_f64, load_f64_list, load_i64, load_str, momentum_uses_beta1, set_momentum, LRScheduler,
    PerGroup, SchedulerBase, SchedulerStateDict, SchedulerValue,
};
use crate::optimizer::{Optimizer, ParamGroup};
use pyrite_core::{bail, Result};
use std::f64::consts::PI;
use std::sync::Arc;

/// How [`OneCycleLR`] and `SWALR` go from one value to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnealStrategy {
    /// Half a cosine (`"cos"`).
    Cos,
    /// A straight line (`"linear"`).
    Linear,
}

impl AnnealStrategy {
    /// PyTorch's name (`"cos"`, `"linear"`).
    pub fn name(self) -> &'static str {
        match self {
            AnnealStrategy::Cos => "cos",
            AnnealStrategy::Linear => "linear",
        }
    }

    /// The strategy named `name`.
    pub fn from_name(name: &str) -> Result<AnnealStrategy> {
        match name {
            "cos" => Ok(AnnealStrategy::Cos),
            "linear" => Ok(AnnealStrategy::Linear),
            _ => bail!(Value, "anneal_strategy must be one of 'cos' or 'linear', instead got {name}"),
        }
    }
}

/// [`CyclicLR`]'s policy for the amplitude of each cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CyclicMode {
    /// The same amplitude every cycle.
    Triangular,
    /// The amplitude halves every cycle.
    Triangular2,
    /// The amplitude is scaled by `gamma^iteration`.
    ExpRange,
}

impl CyclicMode {
    fn name(self) -> &'static str {
        match self {
            CyclicMode::Triangular => "triangular",
            CyclicMode::Triangular2 => "triangular2",
            CyclicMode::ExpRange => "exp_range",
        }
    }
    fn from_name(name: &str) -> Result<CyclicMode> {
        match name {
            "triangular" => Ok(CyclicMode::Triangular),
            "triangular2" => Ok(CyclicMode::Triangular2),
            "exp_range" => Ok(CyclicMode::ExpRange),
            _ => bail!(Value, "CyclicLR: mode {name} is unknown"),
        }
    }
}

/// What [`CyclicLR`]'s scale function is evaluated at: the cycle number or the iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleMode {
    Cycle,
    Iterations,
}

impl ScaleMode {
    fn name(self) -> &'static str {
        match self {
            ScaleMode::Cycle => "cycle",
            ScaleMode::Iterations => "iterations",
        }
    }
    fn from_name(name: &str) -> Result<ScaleMode> {
        match name {
            "cycle" => Ok(ScaleMode::Cycle),
            "iterations" => Ok(ScaleMode::Iterations),
            _ => bail!(Value, "CyclicLR: scale_mode {name} is unknown"),
        }
    }
}

/// A custom amplitude scale for [`CyclicLR`] (`scale_fn`), of the cycle number or the iteration.
pub type ScaleFn = Arc<dyn Fn(f64) -> f64 + Send + Sync>;

/// [`CyclicLR`]'s options, with PyTorch's defaults.
#[derive(Clone)]
pub struct CyclicLROptions {
    /// Iterations in the increasing half of a cycle.
    pub step_size_up: usize,
    /// Iterations in the decreasing half; `None` for `step_size_up`.
    pub step_size_down: Option<usize>,
    pub mode: CyclicMode,
    /// The base of [`CyclicMode::ExpRange`].
    pub gamma: f64,
    /// A custom scale, replacing the mode's; evaluated as `scale_mode` says.
    pub scale_fn: Option<ScaleFn>,
    pub scale_mode: ScaleMode,
    pub cycle_momentum: bool,
    pub base_momentum: PerGroup,
    pub max_momentum: PerGroup,
    pub last_epoch: i64,
}

impl Default for CyclicLROptions {
    fn default() -> Self {
        CyclicLROptions {
            step_size_up: 2000,
            step_size_down: None,
            mode: CyclicMode::Triangular,
            gamma: 1.0,
            scale_fn: None,
            scale_mode: ScaleMode::Cycle,
            cycle_momentum: true,
            base_momentum: PerGroup::All(0.8),
            max_momentum: PerGroup::All(0.9),
            last_epoch: -1,
        }
    }
}

/// `CyclicLR`: the lr goes up and down between `base_lr` and `max_lr`, one cycle every
/// `step_size_up + step_size_down` steps (step it after every batch); with `cycle_momentum`
/// the momentum goes the other way between `max_momentum` and `base_momentum`.
///
/// ```
/// use pyrite::optim::lr_scheduler::{CyclicLR, CyclicLROptions, LRScheduler};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// let w = pyrite::Tensor::new([1.0f64])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() })?;
/// let options = CyclicLROptions { step_size_up: 4, ..Default::default() };
/// let mut sched = CyclicLR::new(&mut opt, 0.01, 0.05, options)?;
/// for _ in 0..4 {
///     opt.step()?;
///     sched.step(&mut opt)?;
/// }
/// // The top of the cycle: the highest lr and the lowest momentum.
/// assert!((opt.param_groups()[0].lr - 0.05).abs() < 1e-12);
/// assert!((opt.param_groups()[0].f64("momentum")? - 0.8).abs() < 1e-12);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct CyclicLR {
    base: SchedulerBase,
    max_lrs: Vec<f64>,
    total_size: f64,
    step_ratio: f64,
    mode: CyclicMode,
    gamma: f64,
    scale_fn: Option<ScaleFn>,
    scale_mode: ScaleMode,
    cycle_momentum: bool,
    use_beta1: bool,
    base_momentums: Vec<f64>,
    max_momentums: Vec<f64>,
}

impl CyclicLR {
    pub fn new(
        opt: &mut dyn Optimizer,
        base_lr: impl Into<PerGroup>,
        max_lr: impl Into<PerGroup>,
        options: CyclicLROptions,
    ) -> Result<CyclicLR> {
        let n = opt.param_groups().len();
        let base_lrs = base_lr.into().expand("CyclicLR", "base_lr", n)?;
        let max_lrs = max_lr.into().expand("CyclicLR", "max_lr", n)?;
        let up = options.step_size_up as f64;
        let down = options.step_size_down.map_or(up, |d| d as f64);
        let total_size = up + down;
        if total_size == 0.0 {
            bail!(Value, "CyclicLR: step_size_up + step_size_down must be positive");
        }
        let scale_mode = match (&options.scale_fn, options.mode) {
            (Some(_), _) => options.scale_mode,
            (None, CyclicMode::ExpRange) => ScaleMode::Iterations,
            (None, _) => ScaleMode::Cycle,
        };
        let (mut use_beta1, mut base_momentums, mut max_momentums) = (false, Vec::new(), Vec::new());
        if options.cycle_momentum {
            use_beta1 = momentum_uses_beta1(opt, "CyclicLR")?;
            base_momentums = options.base_momentum.expand("CyclicLR", "base_momentum", n)?;
            max_momentums = options.max_momentum.expand("CyclicLR", "max_momentum", n)?;
        }
        if options.last_epoch == -1 {
            for (g, lr) in opt.param_groups_mut().iter_mut().zip(&base_lrs) {
                g.lr = *lr;
            }
            if options.cycle_momentum {
                for (i, g) in opt.param_groups_mut().iter_mut().enumerate() {
                    set_momentum(g, use_beta1, max_momentums[i])?;
                    g.set("max_momentum", max_momentums[i]);
                    g.set("base_momentum", base_momentums[i]);
                }
            }
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = CyclicLR {
            base,
            max_lrs,
            total_size,
            step_ratio: up / total_size,
            mode: options.mode,
            gamma: options.gamma,
            scale_fn: options.scale_fn,
            scale_mode,
            cycle_momentum: options.cycle_momentum,
            use_beta1,
            base_momentums,
            max_momentums,
        };
        s.initial_step(opt)?;
        s.base.base_lrs = base_lrs;
        Ok(s)
    }

    fn scale(&self, x: f64) -> f64 {
        match (&self.scale_fn, self.mode) {
            (Some(f), _) => f(x),
            (None, CyclicMode::Triangular) => 1.0,
            (None, CyclicMode::Triangular2) => 1.0 / 2f64.powf(x - 1.0),
            (None, CyclicMode::ExpRange) => self.gamma.powf(x),
        }
    }
}

impl LRScheduler for CyclicLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let e = self.base.last_epoch as f64;
        let cycle = (1.0 + e / self.total_size).floor();
        let x = 1.0 + e / self.total_size - cycle;
        let scale_factor =
            if x <= self.step_ratio { x / self.step_ratio } else { (x - 1.0) / (self.step_ratio - 1.0) };
        let scale = self.scale(match self.scale_mode {
            ScaleMode::Cycle => cycle,
            ScaleMode::Iterations => e,
        });
        let lrs = self
            .base
            .base_lrs
            .iter()
            .zip(&self.max_lrs)
            .map(|(b, m)| b + (m - b) * scale_factor * scale)
            .collect();
        if self.cycle_momentum {
            for (i, g) in groups.iter_mut().enumerate() {
                let (b, m) = (self.base_momentums[i], self.max_momentums[i]);
                set_momentum(g, self.use_beta1, m - (m - b) * scale_factor * scale)?;
            }
        }
        Ok(lrs)
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("max_lrs".into(), self.max_lrs.as_slice().into());
        sd.insert("total_size".into(), self.total_size.into());
        sd.insert("step_ratio".into(), self.step_ratio.into());
        sd.insert("mode".into(), self.mode.name().into());
        sd.insert("gamma".into(), self.gamma.into());
        sd.insert("scale_mode".into(), self.scale_mode.name().into());
        sd.insert("cycle_momentum".into(), self.cycle_momentum.into());
        if self.cycle_momentum {
            sd.insert("use_beta1".into(), self.use_beta1.into());
            sd.insert("base_momentums".into(), self.base_momentums.as_slice().into());
            sd.insert("max_momentums".into(), self.max_momentums.as_slice().into());
        }
        sd.insert("_scale_fn_custom".into(), SchedulerValue::None);
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_f64_list(sd, "max_lrs", &mut self.max_lrs)?;
        load_f64(sd, "total_size", &mut self.total_size)?;
        load_f64(sd, "step_ratio", &mut self.step_ratio)?;
        if let Some(m) = load_str(sd, "mode")? {
            self.mode = CyclicMode::from_name(m)?;
        }
        load_f64(sd, "gamma", &mut self.gamma)?;
        if let Some(m) = load_str(sd, "scale_mode")? {
            self.scale_mode = ScaleMode::from_name(m)?;
        }
        if self.scale_fn.is_none() {
            self.scale_mode =
                if self.mode == CyclicMode::ExpRange { ScaleMode::Iterations } else { ScaleMode::Cycle };
        }
        load_bool(sd, "cycle_momentum", &mut self.cycle_momentum)?;
        load_bool(sd, "use_beta1", &mut self.use_beta1)?;
        load_f64_list(sd, "base_momentums", &mut self.base_momentums)?;
        load_f64_list(sd, "max_momentums", &mut self.max_momentums)?;
        let n = self.max_lrs.len();
        if self.cycle_momentum && (self.base_momentums.len() != n || self.max_momentums.len() != n) {
            bail!(Value, "CyclicLR: the state_dict's momenta do not have one value per param group");
        }
        Ok(())
    }
}

/// [`OneCycleLR`]'s options, with PyTorch's defaults. Give `total_steps`, or `epochs` and
/// `steps_per_epoch`.
#[derive(Clone, Debug)]
pub struct OneCycleLROptions {
    pub total_steps: Option<usize>,
    pub epochs: Option<usize>,
    pub steps_per_epoch: Option<usize>,
    /// The fraction of the cycle spent increasing the lr.
    pub pct_start: f64,
    pub anneal_strategy: AnnealStrategy,
    pub cycle_momentum: bool,
    pub base_momentum: PerGroup,
    pub max_momentum: PerGroup,
    /// The initial lr is `max_lr / div_factor`.
    pub div_factor: f64,
    /// The final lr is `initial_lr / final_div_factor`.
    pub final_div_factor: f64,
    /// A third phase that anneals from the initial lr to the final one (fast.ai's schedule has
    /// two).
    pub three_phase: bool,
    pub last_epoch: i64,
}

impl Default for OneCycleLROptions {
    fn default() -> Self {
        OneCycleLROptions {
            total_steps: None,
            epochs: None,
            steps_per_epoch: None,
            pct_start: 0.3,
            anneal_strategy: AnnealStrategy::Cos,
            cycle_momentum: true,
            base_momentum: PerGroup::All(0.85),
            max_momentum: PerGroup::All(0.95),
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
            last_epoch: -1,
        }
    }
}

/// One phase of [`OneCycleLR`]: it ends at `end_step` and anneals between the group values
/// named by the keys (`initial_lr`, `max_lr`, `min_lr`, `max_momentum`, `base_momentum`).
#[derive(Clone, Debug, PartialEq)]
struct Phase {
    end_step: f64,
    start_lr: String,
    end_lr: String,
    start_momentum: String,
    end_momentum: String,
}

impl Phase {
    fn new(end_step: f64, keys: [&str; 4]) -> Phase {
        let [start_lr, end_lr, start_momentum, end_momentum] = keys.map(str::to_string);
        Phase { end_step, start_lr, end_lr, start_momentum, end_momentum }
    }

    fn to_value(&self) -> SchedulerValue {
        let mut d = SchedulerStateDict::new();
        d.insert("end_step".into(), self.end_step.into());
        d.insert("start_lr".into(), self.start_lr.as_str().into());
        d.insert("end_lr".into(), self.end_lr.as_str().into());
        d.insert("start_momentum".into(), self.start_momentum.as_str().into());
        d.insert("end_momentum".into(), self.end_momentum.as_str().into());
        SchedulerValue::Dict(d)
    }

    fn from_value(v: &SchedulerValue) -> Result<Phase> {
        let SchedulerValue::Dict(d) = v else {
            bail!(Value, "OneCycleLR: a schedule phase should be a dict, got {v:?}")
        };
        let mut p = Phase::new(0.0, ["", "", "", ""]);
        load_f64(d, "end_step", &mut p.end_step)?;
        for (key, field) in [
            ("start_lr", &mut p.start_lr),
            ("end_lr", &mut p.end_lr),
            ("start_momentum", &mut p.start_momentum),
            ("end_momentum", &mut p.end_momentum),
        ] {
            *field = load_str(d, key)?.unwrap_or_default().to_string();
        }
        Ok(p)
    }
}

fn anneal(strategy: AnnealStrategy, start: f64, end: f64, pct: f64) -> f64 {
    match strategy {
        AnnealStrategy::Cos => end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0),
        AnnealStrategy::Linear => (end - start) * pct + start,
    }
}

/// `OneCycleLR`: the 1cycle policy. The lr rises from `max_lr / div_factor` to `max_lr` over
/// the first `pct_start` of `total_steps`, then falls to `initial_lr / final_div_factor`; the
/// momentum moves the other way. Step it after every batch, `total_steps` times at most.
///
/// ```
/// use pyrite::optim::lr_scheduler::{LRScheduler, OneCycleLR, OneCycleLROptions};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// let w = pyrite::Tensor::new([1.0f64])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() })?;
/// let options = OneCycleLROptions { total_steps: Some(100), ..Default::default() };
/// let mut sched = OneCycleLR::new(&mut opt, 0.5, options)?;
/// assert!((sched.get_last_lr()[0] - 0.5 / 25.0).abs() < 1e-15);
/// for _ in 0..29 {
///     opt.step()?;
///     sched.step(&mut opt)?;
/// }
/// assert!((sched.get_last_lr()[0] - 0.5).abs() < 1e-15);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct OneCycleLR {
    base: SchedulerBase,
    total_steps: i64,
    phases: Vec<Phase>,
    anneal_strategy: AnnealStrategy,
    cycle_momentum: bool,
    use_beta1: bool,
}

impl OneCycleLR {
    pub fn new(
        opt: &mut dyn Optimizer,
        max_lr: impl Into<PerGroup>,
        options: OneCycleLROptions,
    ) -> Result<OneCycleLR> {
        let total_steps = match (options.total_steps, options.epochs, options.steps_per_epoch) {
            (Some(0), _, _) => bail!(Value, "OneCycleLR: Expected positive integer total_steps, but got 0"),
            (Some(t), _, _) => t,
            (None, Some(0), Some(_)) => {
                bail!(Value, "OneCycleLR: Expected positive integer epochs, but got 0")
            }
            (None, Some(_), Some(0)) => {
                bail!(Value, "OneCycleLR: Expected positive integer steps_per_epoch, but got 0")
            }
            (None, Some(e), Some(s)) => e * s,
            _ => {
                bail!(Value, "OneCycleLR: You must define either total_steps OR (epochs AND steps_per_epoch)")
            }
        };
        let (pct, n_steps) = (options.pct_start, total_steps as f64);
        let phases = if options.three_phase {
            vec![
                Phase::new(pct * n_steps - 1.0, ["initial_lr", "max_lr", "max_momentum", "base_momentum"]),
                Phase::new(
                    2.0 * pct * n_steps - 2.0,
                    ["max_lr", "initial_lr", "base_momentum", "max_momentum"],
                ),
                Phase::new(n_steps - 1.0, ["initial_lr", "min_lr", "max_momentum", "max_momentum"]),
            ]
        } else {
            vec![
                Phase::new(pct * n_steps - 1.0, ["initial_lr", "max_lr", "max_momentum", "base_momentum"]),
                Phase::new(n_steps - 1.0, ["max_lr", "min_lr", "base_momentum", "max_momentum"]),
            ]
        };
        if !(0.0..=1.0).contains(&pct) {
            bail!(Value, "OneCycleLR: Expected float between 0 and 1 pct_start, but got {pct}");
        }
        let n = opt.param_groups().len();
        let max_lrs = max_lr.into().expand("OneCycleLR", "max_lr", n)?;
        let (mut use_beta1, mut momenta) = (false, None);
        if options.cycle_momentum {
            use_beta1 = momentum_uses_beta1(opt, "OneCycleLR")?;
            let max_m = options.max_momentum.expand("OneCycleLR", "max_momentum", n)?;
            let base_m = options.base_momentum.expand("OneCycleLR", "base_momentum", n)?;
            momenta = Some((max_m, base_m));
        }
        if options.last_epoch == -1 {
            for (g, max_lr) in opt.param_groups_mut().iter_mut().zip(&max_lrs) {
                let initial_lr = max_lr / options.div_factor;
                g.set("initial_lr", initial_lr);
                g.set("max_lr", *max_lr);
                g.set("min_lr", initial_lr / options.final_div_factor);
            }
            if let Some((max_m, base_m)) = &momenta {
                for (i, g) in opt.param_groups_mut().iter_mut().enumerate() {
                    set_momentum(g, use_beta1, max_m[i])?;
                    g.set("max_momentum", max_m[i]);
                    g.set("base_momentum", base_m[i]);
                }
            }
        }
        let base = SchedulerBase::new(opt, options.last_epoch)?;
        let mut s = OneCycleLR {
            base,
            total_steps: total_steps as i64,
            phases,
            anneal_strategy: options.anneal_strategy,
            cycle_momentum: options.cycle_momentum,
            use_beta1,
        };
        s.initial_step(opt)?;
        Ok(s)
    }
}

impl LRScheduler for OneCycleLR {
    fn base(&self) -> &SchedulerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut SchedulerBase {
        &mut self.base
    }
    fn get_lr(&mut self, groups: &mut [ParamGroup]) -> Result<Vec<f64>> {
        let step_num = self.base.last_epoch;
        if step_num > self.total_steps {
            bail!(
                Value,
                "OneCycleLR: Tried to step {step_num} times. The specified number of total steps is {}",
                self.total_steps
            );
        }
        let step = step_num as f64;
        let last = self.phases.len() - 1;
        let mut lrs = Vec::with_capacity(groups.len());
        for g in groups.iter_mut() {
            let mut start_step = 0.0;
            for (i, phase) in self.phases.iter().enumerate() {
                if step <= phase.end_step || i == last {
                    let pct = (step - start_step) / (phase.end_step - start_step);
                    lrs.push(anneal(
                        self.anneal_strategy,
                        g.f64(&phase.start_lr)?,
                        g.f64(&phase.end_lr)?,
                        pct,
                    ));
                    if self.cycle_momentum {
                        let m = anneal(
                            self.anneal_strategy,
                            g.f64(&phase.start_momentum)?,
                            g.f64(&phase.end_momentum)?,
                            pct,
                        );
                        set_momentum(g, self.use_beta1, m)?;
                    }
                    break;
                }
                start_step = phase.end_step;
            }
        }
        Ok(lrs)
    }
    fn save_fields(&self, sd: &mut SchedulerStateDict) {
        sd.insert("total_steps".into(), self.total_steps.into());
        sd.insert(
            "_schedule_phases".into(),
            SchedulerValue::List(self.phases.iter().map(Phase::to_value).collect()),
        );
        sd.insert("_anneal_func_type".into(), self.anneal_strategy.name().into());
        sd.insert("cycle_momentum".into(), self.cycle_momentum.into());
        if self.cycle_momentum {
            sd.insert("use_beta1".into(), self.use_beta1.into());
        }
    }
    fn load_fields(&mut self, sd: &SchedulerStateDict) -> Result<()> {
        load_i64(sd, "total_steps", &mut self.total_steps)?;
        match sd.get("_schedule_phases") {
            Some(SchedulerValue::List(l)) if !l.is_empty() => {
                self.phases = l.iter().map(Phase::from_value).collect::<Result<_>>()?
            }
            Some(v) => {
                bail!(Value, "OneCycleLR: '_schedule_phases' should be a non-empty list of phases, got {v:?}")
            }
            None => {}
        }
        if let Some(name) = load_str(sd, "_anneal_func_type")? {
            self.anneal_strategy = AnnealStrategy::from_name(name)?;
        }
        load_bool(sd, "cycle_momentum", &mut self.cycle_momentum)?;
        load_bool(sd, "use_beta1", &mut self.use_beta1)
    }
}
