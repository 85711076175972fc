//! Binding a module call's [`Value`] to named arguments, the way Python binds
//! `forward(*args, **kwargs)`: one tensor is the first argument, a tuple or list gives them by
//! position, a dict by keyword. Missing ones are `None`.

use pyrite_core::{bail, Result, Tensor};
use pyrite_nn::Value;

/// The arguments of `op(names...)` that `input` gives, in the order of `names`.
pub(crate) fn bind(input: Value, op: &str, names: &[&str]) -> Result<Vec<Value>> {
    let mut out = vec![Value::None; names.len()];
    match input {
        Value::Tuple(v) | Value::List(v) => {
            if v.len() > names.len() {
                bail!(
                    Value,
                    "{op}() takes {} positional arguments ({}) but {} were given",
                    names.len(),
                    names.join(", "),
                    v.len()
                );
            }
            for (slot, x) in out.iter_mut().zip(v) {
                *slot = x;
            }
        }
        Value::Dict(kv) => {
            for (k, x) in kv {
                match names.iter().position(|n| *n == k) {
                    Some(i) => out[i] = x,
                    None => bail!(Value, "{op}() got an unexpected keyword argument '{k}'"),
                }
            }
        }
        Value::None => {}
        other => out[0] = other,
    }
    Ok(out)
}

/// An optional tensor argument.
pub(crate) fn tensor(v: Value, op: &str, name: &str) -> Result<Option<Tensor>> {
    match v {
        Value::None => Ok(None),
        Value::Tensor(t) => Ok(Some(t)),
        other => bail!(Value, "{op}(): argument '{name}' must be a Tensor or None, not {}", other.kind()),
    }
}

/// A required tensor argument.
pub(crate) fn required_tensor(v: Value, op: &str, name: &str) -> Result<Tensor> {
    match tensor(v, op, name)? {
        Some(t) => Ok(t),
        None => bail!(Value, "{op}() missing required argument: '{name}'"),
    }
}

/// A boolean flag (`None` is false).
pub(crate) fn flag(v: Value, op: &str, name: &str) -> Result<bool> {
    match v {
        Value::None => Ok(false),
        Value::Bool(b) => Ok(b),
        other => bail!(Value, "{op}(): argument '{name}' must be a bool, not {}", other.kind()),
    }
}

/// A call with a tensor and an optional second tensor: `module(a, b)`.
pub(crate) fn pair(a: &Tensor, b: Option<&Tensor>) -> Value {
    Value::Tuple(vec![Value::Tensor(a.clone()), b.cloned().into()])
}
