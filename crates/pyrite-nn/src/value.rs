//! [`Value`]: what a module call takes and returns, and what hooks see. PyTorch passes Python
//! objects; a module's inputs and outputs are tensors, tuples and lists of them, `None`,
//! numbers and strings (an LSTM returns `(output, (h, c))`, attention takes an optional mask).
//! The same shapes of data make up a `.pt` checkpoint.

use pyrite_core::{bail, Result, Tensor};

/// A module's input or output: a tensor, a tuple/list/dict of values, a number, a string or
/// `None`.
///
/// ```
/// use pyrite::nn::Value;
/// use pyrite::{DType, Tensor};
/// let x = Tensor::zeros([2], DType::F32)?;
/// let v = Value::from((x.clone(), Value::None));
/// assert_eq!(v.tensors().len(), 1);
/// assert!(v.get(0)?.as_tensor()?.is_same(&x));
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub enum Value {
    #[default]
    None,
    Tensor(Tensor),
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<Value>),
    List(Vec<Value>),
    /// Keys in insertion order.
    Dict(Vec<(String, Value)>),
}

impl Value {
    /// The kind, as PyTorch's error messages name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Tensor(_) => "Tensor",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
        }
    }

    /// The tensor this value is; an error for anything else.
    pub fn as_tensor(&self) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => bail!(Value, "expected a Tensor, got {}", other.kind()),
        }
    }

    /// [`Value::as_tensor`], by value.
    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => bail!(Value, "expected a Tensor, got {}", other.kind()),
        }
    }

    /// Element `i` of a tuple or list.
    pub fn get(&self, i: usize) -> Result<&Value> {
        match self {
            Value::Tuple(v) | Value::List(v) => match v.get(i) {
                Some(x) => Ok(x),
                None => bail!(Index, "{} index {i} out of range (length {})", self.kind(), v.len()),
            },
            other => bail!(Value, "expected a tuple or list, got {}", other.kind()),
        }
    }

    /// The elements of a tuple or list (a single value is a one-element list).
    pub fn into_vec(self) -> Vec<Value> {
        match self {
            Value::Tuple(v) | Value::List(v) => v,
            other => vec![other],
        }
    }

    /// Every tensor inside, depth first, in order.
    pub fn tensors(&self) -> Vec<&Tensor> {
        let mut out = Vec::new();
        self.walk(&mut |t| out.push(t));
        out
    }

    fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Tensor)) {
        match self {
            Value::Tensor(t) => f(t),
            Value::Tuple(v) | Value::List(v) => v.iter().for_each(|x| x.walk(f)),
            Value::Dict(v) => v.iter().for_each(|(_, x)| x.walk(f)),
            _ => {}
        }
    }

    /// The same structure with every tensor replaced by `f(tensor)`, depth first, in order.
    pub fn map_tensors(self, f: &mut dyn FnMut(Tensor) -> Result<Tensor>) -> Result<Value> {
        Ok(match self {
            Value::Tensor(t) => Value::Tensor(f(t)?),
            Value::Tuple(v) => Value::Tuple(v.into_iter().map(|x| x.map_tensors(f)).collect::<Result<_>>()?),
            Value::List(v) => Value::List(v.into_iter().map(|x| x.map_tensors(f)).collect::<Result<_>>()?),
            Value::Dict(v) => {
                Value::Dict(v.into_iter().map(|(k, x)| Ok((k, x.map_tensors(f)?))).collect::<Result<_>>()?)
            }
            other => other,
        })
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Tensor(t)
    }
}
impl From<&Tensor> for Value {
    fn from(t: &Tensor) -> Value {
        Value::Tensor(t.clone())
    }
}
impl From<Option<Tensor>> for Value {
    fn from(t: Option<Tensor>) -> Value {
        t.map_or(Value::None, Value::Tensor)
    }
}
impl From<Vec<Tensor>> for Value {
    fn from(v: Vec<Tensor>) -> Value {
        Value::List(v.into_iter().map(Value::Tensor).collect())
    }
}
impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Float(x)
    }
}
impl From<i64> for Value {
    fn from(x: i64) -> Value {
        Value::Int(x)
    }
}
impl From<bool> for Value {
    fn from(x: bool) -> Value {
        Value::Bool(x)
    }
}
impl From<&str> for Value {
    fn from(x: &str) -> Value {
        Value::Str(x.to_string())
    }
}
impl<A: Into<Value>, B: Into<Value>> From<(A, B)> for Value {
    fn from((a, b): (A, B)) -> Value {
        Value::Tuple(vec![a.into(), b.into()])
    }
}
impl<A: Into<Value>, B: Into<Value>, C: Into<Value>> From<(A, B, C)> for Value {
    fn from((a, b, c): (A, B, C)) -> Value {
        Value::Tuple(vec![a.into(), b.into(), c.into()])
    }
}
