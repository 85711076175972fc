//! A scheduler's [`SchedulerStateDict`] to and from a pickled [`Object`], laid out as
//! `scheduler.state_dict()` is in PyTorch, so that `torch.load(f, weights_only=True)` gives a dict
//! that PyTorch's `scheduler.load_state_dict` accepts, and the reverse.
//!
//! PyTorch's state_dict is the scheduler's `__dict__` without the optimizer: the keys come in
//! the order its constructor sets them ([`SCHEDULER_LAYOUTS`]), `MultiStepLR`'s `milestones` is a
//! `collections.Counter` of int milestones, `OneCycleLR`'s last phase ends at an int step, and
//! `ReduceLROnPlateau`'s default `min_lrs` are the int `0`.

use super::{SchedulerStateDict, SchedulerValue};
use pyrite_core::{bail, Result};
use pyrite_serialization::{Dict, Object};

const BASE: [&str; 6] =
    ["base_lrs", "last_epoch", "_step_count", "_is_initial", "_get_lr_called_within_step", "_last_lr"];

macro_rules! layout {
    ($($k:literal),* ; base) => {
        &[$($k,)* BASE[0], BASE[1], BASE[2], BASE[3], BASE[4], BASE[5]]
    };
}

/// The keys of each PyTorch scheduler's state_dict in PyTorch's order. A state_dict is written
/// in the order of the layout that shares the most keys with it; keys of no layout come last.
pub const SCHEDULER_LAYOUTS: &[(&str, &[&str])] = &[
    ("StepLR", layout!("step_size", "gamma"; base)),
    ("MultiStepLR", layout!("milestones", "gamma"; base)),
    ("ExponentialLR", layout!("gamma"; base)),
    ("ConstantLR", layout!("factor", "total_iters"; base)),
    ("LinearLR", layout!("start_factor", "end_factor", "total_iters"; base)),
    ("PolynomialLR", layout!("total_iters", "power"; base)),
    ("CosineAnnealingLR", layout!("T_max", "eta_min"; base)),
    ("CosineAnnealingWarmRestarts", layout!("T_0", "T_i", "T_mult", "eta_min", "T_cur"; base)),
    (
        "OneCycleLR",
        layout!("total_steps", "_schedule_phases", "_anneal_func_type", "cycle_momentum", "use_beta1"; base),
    ),
    (
        "CyclicLR",
        &[
            "max_lrs",
            "total_size",
            "step_ratio",
            "mode",
            "gamma",
            "scale_mode",
            "cycle_momentum",
            "use_beta1",
            "base_momentums",
            "max_momentums",
            "base_lrs",
            "last_epoch",
            "_step_count",
            "_is_initial",
            "_get_lr_called_within_step",
            "_last_lr",
            "_scale_fn_custom",
        ],
    ),
    (
        "ReduceLROnPlateau",
        &[
            "factor",
            "default_min_lr",
            "min_lrs",
            "patience",
            "cooldown",
            "eps",
            "last_epoch",
            "_last_lr",
            "mode_worse",
            "mode",
            "threshold",
            "threshold_mode",
            "best",
            "cooldown_counter",
            "num_bad_epochs",
        ],
    ),
    ("SequentialLR", &["_schedulers", "_milestones", "last_epoch", "_last_lr"]),
    ("OneCycleLR phase", &["end_step", "start_lr", "end_lr", "start_momentum", "end_momentum"]),
];

/// Conversions of a scheduler's state_dict to and from a pickled [`Object`] (an extension of
/// [`SchedulerStateDict`], which is a map type: bring the trait into scope to call them).
///
/// ```
/// use pyrite::optim::lr_scheduler::{LRScheduler, SchedulerStateDict, SchedulerStateObject, StepLR, StepLROptions};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// use pyrite::serialization::Object;
/// let w = pyrite::Tensor::new([1.0f32])?.requires_grad_(true)?;
/// let mut opt = SGD::new(vec![w], SGDOptions { lr: 0.1, ..Default::default() })?;
/// let sched = StepLR::new(&mut opt, 3, StepLROptions { gamma: 0.5, ..Default::default() })?;
/// let obj = sched.state_dict().to_object()?;
/// let keys: Vec<_> = obj.as_dict().unwrap().keys().take(3).cloned().collect();
/// assert_eq!(keys, [Object::from("step_size"), Object::from("gamma"), Object::from("base_lrs")]);
/// let back = SchedulerStateDict::from_object(&obj)?;
/// assert_eq!(back, sched.state_dict());
/// # Ok::<(), pyrite::Error>(())
/// ```
pub trait SchedulerStateObject: Sized {
    /// The state_dict as `torch.save(scheduler.state_dict(), path)` pickles it.
    fn to_object(&self) -> Result<Object>;
    /// A state_dict from what `torch.load` returns for one; errors name the first value
    /// Pyrite's schedulers cannot hold (a tensor, a function).
    fn from_object(obj: &Object) -> Result<Self>;
}

impl SchedulerStateObject for SchedulerStateDict {
    fn to_object(&self) -> Result<Object> {
        dict_to_object(self)
    }

    fn from_object(obj: &Object) -> Result<SchedulerStateDict> {
        match value_from_object("state_dict", obj)? {
            SchedulerValue::Dict(d) => Ok(d),
            _ => bail!(Value, "scheduler state_dict: expected a dict, got a {}", obj.type_name()),
        }
    }
}

/// The layout sharing the most keys with `sd`.
fn best_layout(sd: &SchedulerStateDict) -> &'static [&'static str] {
    SCHEDULER_LAYOUTS
        .iter()
        .map(|(_, keys)| *keys)
        .max_by_key(|keys| keys.iter().filter(|k| sd.contains_key(**k)).count())
        .unwrap_or(&[])
}

fn dict_to_object(sd: &SchedulerStateDict) -> Result<Object> {
    let layout = best_layout(sd);
    let mut keys: Vec<&String> = sd.keys().collect();
    keys.sort_by_key(|k| layout.iter().position(|o| o == k).unwrap_or(layout.len()));
    let mut d = Dict::new();
    for key in keys {
        let v = &sd[key];
        let obj = match (key.as_str(), v) {
            ("milestones", SchedulerValue::Dict(counter)) => {
                let mut c = Dict::new();
                for (m, n) in counter {
                    let m: i64 = m
                        .parse()
                        .map_err(|_| pyrite_core::err!(Value, "MultiStepLR: bad milestone '{m}'"))?;
                    c.insert(Object::Int(m), value_to_object(n)?);
                }
                Object::Counter(c)
            }
            ("_schedule_phases", SchedulerValue::List(phases)) => {
                let mut out = phases.iter().map(value_to_object).collect::<Result<Vec<_>>>()?;
                // PyTorch's last phase ends at `total_steps - 1`, an int.
                if let Some(Object::Dict(last)) = out.last_mut()
                    && let Some(end) = last.get_mut("end_step")
                    && let Object::Float(x) = *end
                    && x.fract() == 0.0
                    && x.abs() < 9.0e15
                {
                    *end = Object::Int(x as i64);
                }
                Object::List(out)
            }
            ("default_min_lr", SchedulerValue::Float(x)) if *x == 0.0 => Object::Int(0),
            ("min_lrs", SchedulerValue::List(l)) => Object::List(
                l.iter()
                    .map(|x| match x {
                        SchedulerValue::Float(z) if *z == 0.0 => Ok(Object::Int(0)),
                        x => value_to_object(x),
                    })
                    .collect::<Result<_>>()?,
            ),
            _ => value_to_object(v)?,
        };
        d.insert(key.as_str(), obj);
    }
    Ok(Object::Dict(d))
}

fn value_to_object(v: &SchedulerValue) -> Result<Object> {
    Ok(match v {
        SchedulerValue::None => Object::None,
        SchedulerValue::Bool(b) => Object::Bool(*b),
        SchedulerValue::Int(i) => Object::Int(*i),
        SchedulerValue::Float(x) => Object::Float(*x),
        SchedulerValue::Str(s) => Object::Str(s.clone()),
        SchedulerValue::List(l) => Object::List(l.iter().map(value_to_object).collect::<Result<_>>()?),
        SchedulerValue::Dict(d) => dict_to_object(d)?,
    })
}

fn value_from_object(key: &str, o: &Object) -> Result<SchedulerValue> {
    Ok(match o {
        Object::None => SchedulerValue::None,
        Object::Bool(b) => SchedulerValue::Bool(*b),
        Object::Int(i) => SchedulerValue::Int(*i),
        Object::Float(x) => SchedulerValue::Float(*x),
        Object::Str(s) => SchedulerValue::Str(s.clone()),
        Object::List(l) | Object::Tuple(l) => {
            SchedulerValue::List(l.iter().map(|x| value_from_object(key, x)).collect::<Result<_>>()?)
        }
        Object::Dict(d) | Object::OrderedDict(d) | Object::Counter(d) => {
            let mut out = SchedulerStateDict::new();
            for (k, v) in d.iter() {
                let k = match k {
                    Object::Str(s) => s.clone(),
                    Object::Int(i) => i.to_string(),
                    k => bail!(Value, "scheduler state_dict: '{key}' has a key of type {}", k.type_name()),
                };
                let v = value_from_object(&k, v)?;
                out.insert(k, v);
            }
            SchedulerValue::Dict(out)
        }
        other => bail!(
            Value,
            "scheduler state_dict: '{key}' is a {}, which Pyrite's schedulers cannot hold",
            other.type_name()
        ),
    })
}
