//! An [`OptimizerStateDict`] to and from a pickled [`Object`], laid out exactly as
//! `torch.optim` writes `optimizer.state_dict()`, so that a file saved here loads into a PyTorch
//! optimizer with `load_state_dict` and the reverse:
//!
//! ```text
//! {'state': {0: {'step': tensor(3.), 'exp_avg': tensor(...), 'exp_avg_sq': tensor(...)}, ...},
//!  'param_groups': [{'lr': 0.001, 'betas': (0.9, 0.999), ..., 'fused': None,
//!                    'decoupled_weight_decay': False, 'params': [0, 1]}]}
//! ```
//!
//! What PyTorch does and this module reproduces:
//! - each group's keys come in the order of the optimizer's defaults in PyTorch ([`OPTIMIZER_LAYOUTS`]),
//!   then the keys schedulers add (`initial_lr`, ...), then `params`; the keys Pyrite has no use
//!   for (`foreach`, `capturable`, `differentiable`, `fused`) are written with PyTorch's default
//!   values;
//! - hyperparameters whose PyTorch default is the integer `0` (`weight_decay`, `momentum`,
//!   `dampening`, ...) are written as the int `0` when zero; `betas`, `etas` and `step_sizes`
//!   are tuples;
//! - the per-parameter `step` (and NAdam's `mu_product`, ASGD's `eta` and `mu`) are 0-d float32
//!   tensors; the state of each parameter lists its keys in PyTorch's order.
//!
//! Reading accepts what any recent PyTorch writes: `step` as a tensor, an int or a float,
//! missing optional keys, ints where floats are meant.

use crate::optimizer::{Hyper, Hypers, OptimizerStateDict, ParamState, SavedGroup, StateValue};
use pyrite_core::{bail, DType, Result, Tensor};
use pyrite_serialization::{Dict, Object};

/// The keys of each `torch.optim` optimizer's param groups, in the order PyTorch writes them
/// (without `params`, which comes last, and the keys schedulers add).
pub const OPTIMIZER_LAYOUTS: &[(&str, &[&str])] = &[
    (
        "SGD",
        &[
            "lr",
            "momentum",
            "dampening",
            "weight_decay",
            "nesterov",
            "maximize",
            "foreach",
            "differentiable",
            "fused",
        ],
    ),
    ("Adam", ADAM),
    ("AdamW", ADAM),
    (
        "RMSprop",
        &[
            "lr",
            "momentum",
            "alpha",
            "eps",
            "centered",
            "weight_decay",
            "capturable",
            "foreach",
            "maximize",
            "differentiable",
        ],
    ),
    (
        "Adagrad",
        &[
            "lr",
            "lr_decay",
            "eps",
            "weight_decay",
            "initial_accumulator_value",
            "foreach",
            "maximize",
            "differentiable",
            "fused",
        ],
    ),
    (
        "Adadelta",
        &["lr", "rho", "eps", "weight_decay", "maximize", "capturable", "foreach", "differentiable"],
    ),
    (
        "Adamax",
        &["lr", "betas", "eps", "weight_decay", "foreach", "maximize", "differentiable", "capturable"],
    ),
    (
        "NAdam",
        &[
            "lr",
            "betas",
            "eps",
            "weight_decay",
            "momentum_decay",
            "decoupled_weight_decay",
            "maximize",
            "foreach",
            "capturable",
            "differentiable",
        ],
    ),
    (
        "RAdam",
        &[
            "lr",
            "betas",
            "eps",
            "weight_decay",
            "maximize",
            "foreach",
            "capturable",
            "decoupled_weight_decay",
            "differentiable",
        ],
    ),
    (
        "ASGD",
        &[
            "lr",
            "lambd",
            "alpha",
            "t0",
            "weight_decay",
            "foreach",
            "maximize",
            "differentiable",
            "capturable",
        ],
    ),
    ("Rprop", &["lr", "etas", "step_sizes", "foreach", "maximize", "differentiable", "capturable"]),
    (
        "LBFGS",
        &[
            "lr",
            "max_iter",
            "max_eval",
            "tolerance_grad",
            "tolerance_change",
            "history_size",
            "line_search_fn",
            "maximize",
        ],
    ),
];

const ADAM: &[&str] = &[
    "lr",
    "betas",
    "eps",
    "weight_decay",
    "amsgrad",
    "maximize",
    "foreach",
    "capturable",
    "differentiable",
    "fused",
    "decoupled_weight_decay",
];

/// Keys LR schedulers add to the groups, in the order PyTorch's `OneCycleLR` adds them.
const SCHEDULER_KEYS: &[&str] = &["initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"];

/// Keys of a parameter's state, in the order PyTorch's optimizers create them.
const STATE_KEYS: &[&str] = &[
    "step",
    "mu_product",
    "eta",
    "mu",
    "exp_avg",
    "exp_avg_sq",
    "max_exp_avg_sq",
    "exp_inf",
    "square_avg",
    "acc_delta",
    "momentum_buffer",
    "grad_avg",
    "sum",
    "ax",
    "prev",
    "step_size",
    "func_evals",
    "n_iter",
    "al",
    "d",
    "t",
    "old_dirs",
    "old_stps",
    "ro",
    "H_diag",
    "prev_flat_grad",
    "prev_loss",
];

/// State entries PyTorch keeps as 0-d float32 tensors (Pyrite keeps them as floats).
const SCALAR_TENSOR_KEYS: &[&str] = &["step", "mu_product", "eta", "mu"];

/// State entries shaped like their parameter: loading checks their shapes.
pub(crate) const PARAM_SHAPED_KEYS: &[&str] = &[
    "exp_avg",
    "exp_avg_sq",
    "max_exp_avg_sq",
    "exp_inf",
    "square_avg",
    "acc_delta",
    "momentum_buffer",
    "grad_avg",
    "sum",
    "ax",
    "prev",
    "step_size",
];

/// Hyperparameters whose PyTorch default is the integer 0: written as `0`, not `0.0`.
const INT_ZERO_KEYS: &[&str] =
    &["momentum", "dampening", "weight_decay", "lr_decay", "initial_accumulator_value"];

/// The value PyTorch gives a group key Pyrite does not keep.
fn torch_default(key: &str) -> Object {
    match key {
        "capturable" | "differentiable" | "maximize" | "decoupled_weight_decay" | "nesterov" | "amsgrad" => {
            Object::Bool(false)
        }
        _ => Object::None, // foreach, fused, line_search_fn
    }
}

fn layout_of(name: &str) -> Option<&'static [&'static str]> {
    OPTIMIZER_LAYOUTS.iter().find(|(n, _)| *n == name).map(|(_, keys)| *keys)
}

/// Order of `keys` by position in `order`; unknown keys after, in their given order.
fn ordered<'a>(keys: impl Iterator<Item = &'a String>, order: &[&str]) -> Vec<&'a String> {
    let mut keys: Vec<&String> = keys.collect();
    keys.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(order.len()));
    keys
}

fn hyper_to_object(key: &str, v: &Hyper) -> Object {
    let num = |x: f64| {
        if x.fract() == 0.0 && key == "step_sizes" && x.abs() < 1e15 {
            Object::Int(x as i64)
        } else {
            Object::Float(x)
        }
    };
    match v {
        Hyper::Float(x) if *x == 0.0 && INT_ZERO_KEYS.contains(&key) => Object::Int(0),
        Hyper::Float(x) => Object::Float(*x),
        Hyper::Int(i) => Object::Int(*i),
        Hyper::Bool(b) => Object::Bool(*b),
        Hyper::Pair(a, b) => Object::Tuple(vec![num(*a), num(*b)]),
        Hyper::Str(s) => Object::Str(s.clone()),
        Hyper::None => Object::None,
    }
}

fn hyper_from_object(key: &str, v: &Object) -> Result<Hyper> {
    Ok(match v {
        Object::Float(x) => Hyper::Float(*x),
        Object::Int(i) => Hyper::Int(*i),
        Object::Bool(b) => Hyper::Bool(*b),
        Object::Str(s) => Hyper::Str(s.clone()),
        Object::None => Hyper::None,
        Object::Tuple(items) | Object::List(items) if items.len() == 2 => {
            match (items[0].as_float(), items[1].as_float()) {
                (Some(a), Some(b)) => Hyper::Pair(a, b),
                _ => bail!(
                    Value,
                    "optimizer state_dict: param group '{key}' should be a pair of numbers, got {v:?}"
                ),
            }
        }
        Object::Tensor(t) if t.numel() == 1 => Hyper::Float(scalar(t)?),
        other => bail!(
            Value,
            "optimizer state_dict: param group '{key}' is a {}, which Pyrite's optimizers do not use",
            other.type_name()
        ),
    })
}

fn scalar(t: &Tensor) -> Result<f64> {
    t.to_dtype(DType::F64)?.reshape(&[] as &[isize])?.item::<f64>()
}

fn state_value_to_object(key: &str, v: &StateValue) -> Result<Object> {
    Ok(match v {
        StateValue::Float(x) if SCALAR_TENSOR_KEYS.contains(&key) => {
            Object::Tensor(Tensor::scalar(*x as f32)?)
        }
        StateValue::Int(i) if SCALAR_TENSOR_KEYS.contains(&key) => Object::Tensor(Tensor::scalar(*i as f32)?),
        StateValue::Float(x) => Object::Float(*x),
        StateValue::Int(i) => Object::Int(*i),
        StateValue::Tensor(t) => Object::Tensor(t.detach()),
        StateValue::TensorList(l) => Object::List(l.iter().map(|t| Object::Tensor(t.detach())).collect()),
        StateValue::None => Object::None,
    })
}

fn state_value_from_object(key: &str, v: &Object) -> Result<StateValue> {
    Ok(match v {
        Object::Tensor(t) if SCALAR_TENSOR_KEYS.contains(&key) && t.numel() == 1 => {
            StateValue::Float(scalar(t)?)
        }
        Object::Int(i) if SCALAR_TENSOR_KEYS.contains(&key) => StateValue::Float(*i as f64),
        Object::Tensor(t) => StateValue::Tensor(t.detach()),
        Object::Float(x) => StateValue::Float(*x),
        Object::Int(i) => StateValue::Int(*i),
        Object::None => StateValue::None,
        // LBFGS's histories; its `al` is padded with None after the entries in use.
        Object::List(items) | Object::Tuple(items) => StateValue::TensorList(
            items
                .iter()
                .map_while(|o| match o {
                    Object::None => None,
                    o => Some(o),
                })
                .map(|o| match o {
                    Object::Tensor(t) => Ok(t.detach()),
                    o => bail!(
                        Value,
                        "optimizer state_dict: '{key}' should hold tensors, got a {}",
                        o.type_name()
                    ),
                })
                .collect::<Result<_>>()?,
        ),
        other => bail!(
            Value,
            "optimizer state_dict: state entry '{key}' is a {}, which Pyrite's optimizers do not use",
            other.type_name()
        ),
    })
}

impl OptimizerStateDict {
    /// The state_dict as `torch.save(optimizer.state_dict(), path)` pickles it, laid out as the
    /// PyTorch optimizer named by [`OptimizerStateDict::optimizer`] writes it (see the module
    /// docs). The state's tensors are shared, not copied.
    ///
    /// ```
    /// use pyrite::nn::{Linear, Module};
    /// use pyrite::optim::{Adam, AdamOptions, Optimizer, OptimizerStateDict};
    /// use pyrite::serialization::Object;
    /// let model = Linear::new(3, 1)?;
    /// let mut opt = Adam::new(model.parameters(), AdamOptions::default())?;
    /// model.forward(&pyrite::Tensor::ones([2, 3], pyrite::DType::F32)?)?.sum()?.backward()?;
    /// opt.step()?;
    /// let obj = opt.state_dict().to_object()?;
    /// let group = &obj.get("param_groups").unwrap().as_slice().unwrap()[0];
    /// assert_eq!(group.get("betas"), Some(&Object::from((0.9, 0.999)))); // a tuple
    /// assert_eq!(group.get("weight_decay"), Some(&Object::Int(0))); // PyTorch's int default
    /// assert_eq!(group.get("params"), Some(&Object::from(vec![0, 1])));
    /// let step = obj.get("state").and_then(|s| s.get(0)).and_then(|s| s.get("step")).unwrap();
    /// assert_eq!(step.as_tensor().unwrap().dims(), &[] as &[usize]); // a 0-d float32 tensor
    /// let back = OptimizerStateDict::from_object(&obj)?;
    /// opt.load_state_dict(&back)?;
    /// # Ok::<(), pyrite::Error>(())
    /// ```
    pub fn to_object(&self) -> Result<Object> {
        let layout = self.optimizer.as_deref().and_then(layout_of).unwrap_or(&["lr"]);
        let mut state = Dict::new();
        for (index, st) in &self.state {
            state.insert(Object::Int(*index as i64), param_state_to_object(st)?);
        }
        let mut groups = Vec::with_capacity(self.param_groups.len());
        for g in &self.param_groups {
            let mut d = Dict::new();
            for &key in layout {
                let v = g.options.get(key).map_or_else(|| torch_default(key), |v| hyper_to_object(key, v));
                d.insert(key, v);
            }
            let rest = g.options.keys().filter(|k| !layout.contains(&k.as_str()));
            for key in ordered(rest, SCHEDULER_KEYS) {
                d.insert(key.as_str(), hyper_to_object(key, &g.options[key]));
            }
            d.insert("params", Object::List(g.params.iter().map(|&i| Object::Int(i as i64)).collect()));
            groups.push(Object::Dict(d));
        }
        Ok(Object::from_pairs([("state", Object::Dict(state)), ("param_groups", Object::List(groups))]))
    }

    /// An optimizer state_dict from what `torch.load` returns for one: `state` keyed by
    /// parameter index and `param_groups` with `params` as indices. The PyTorch optimizer that
    /// wrote it is recognised by its group keys (see [`OptimizerStateDict::optimizer`]). Errors
    /// name the part of the dict that is not an optimizer state_dict.
    pub fn from_object(obj: &Object) -> Result<OptimizerStateDict> {
        let what = "optimizer state_dict";
        let Some(d) = obj.as_dict() else {
            bail!(
                Value,
                "{what}: expected a dict with 'state' and 'param_groups', got a {}",
                obj.type_name()
            );
        };
        let (Some(state), Some(groups)) = (d.get("state"), d.get("param_groups")) else {
            bail!(Value, "{what}: expected the keys 'state' and 'param_groups'");
        };
        let (Some(state), Some(groups)) = (state.as_dict(), groups.as_slice()) else {
            bail!(Value, "{what}: 'state' should be a dict and 'param_groups' a list");
        };
        let mut sd = OptimizerStateDict::default();
        for (k, v) in state.iter() {
            let Some(index) = k.as_int().filter(|i| *i >= 0) else {
                bail!(Value, "{what}: state keys should be parameter indices (ints), got {k:?}");
            };
            let Some(entries) = v.as_dict() else {
                bail!(Value, "{what}: state[{index}] should be a dict, got a {}", v.type_name());
            };
            let mut st = ParamState::new();
            for (key, value) in entries.iter() {
                let Some(key) = key.as_str() else {
                    bail!(Value, "{what}: state[{index}] has a non-string key {key:?}");
                };
                st.insert(key.to_string(), state_value_from_object(key, value)?);
            }
            sd.state.insert(index as usize, st);
        }
        for (i, g) in groups.iter().enumerate() {
            let Some(g) = g.as_dict() else {
                bail!(Value, "{what}: param_groups[{i}] should be a dict, got a {}", g.type_name());
            };
            let mut saved = SavedGroup { params: Vec::new(), options: Hypers::new() };
            for (key, value) in g.iter() {
                let Some(key) = key.as_str() else {
                    bail!(Value, "{what}: param_groups[{i}] has a non-string key {key:?}");
                };
                if key == "params" {
                    let ints = value.as_slice().and_then(|l| {
                        l.iter().map(|p| p.as_int().filter(|x| *x >= 0).map(|x| x as usize)).collect()
                    });
                    let Some(ints) = ints else {
                        bail!(
                            Value,
                            "{what}: param_groups[{i}]['params'] should be a list of parameter indices"
                        );
                    };
                    saved.params = ints;
                } else {
                    saved.options.insert(key.to_string(), hyper_from_object(key, value)?);
                }
            }
            if !g.contains_key("params") {
                bail!(Value, "{what}: param_groups[{i}] has no 'params'");
            }
            sd.param_groups.push(saved);
        }
        sd.optimizer = sd.param_groups.first().and_then(|g| recognise(&g.options)).map(str::to_string);
        Ok(sd)
    }
}

/// The PyTorch optimizer whose group keys are exactly `options`' keys (scheduler keys aside).
fn recognise(options: &Hypers) -> Option<&'static str> {
    let own = options.keys().filter(|k| !SCHEDULER_KEYS.contains(&k.as_str())).count();
    OPTIMIZER_LAYOUTS
        .iter()
        .find(|(_, keys)| keys.len() == own && keys.iter().all(|k| options.contains_key(*k)))
        .map(|(name, _)| *name)
}

fn param_state_to_object(st: &ParamState) -> Result<Object> {
    let mut d = Dict::new();
    for key in ordered(st.keys(), STATE_KEYS) {
        d.insert(key.as_str(), state_value_to_object(key, &st[key])?);
    }
    Ok(Object::Dict(d))
}
