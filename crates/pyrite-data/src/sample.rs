//! [`Sample`]: the dynamically typed value a dataset returns and a collate function receives
//! and returns, standing in for the Python objects (tensors, numbers, strings, tuples, lists,
//! dicts) that flow through PyTorch's `torch.utils.data`.

use std::collections::BTreeMap;

use pyrite_core::{bail, Result, Tensor};

/// A collatable value (what a dataset returns and `collate_fn` receives/returns).
///
/// Build one with `.into()` from a tensor, a number, a bool, a string, a 2- or 3-tuple of such
/// values, or a `Vec` of them (a [`Sample::List`]); read it back with the accessors
/// ([`Sample::as_tensor`], [`Sample::as_int`], [`Sample::as_tuple`], ...), which return an
/// error naming what was found instead of panicking.
#[derive(Clone, Debug)]
pub enum Sample {
    /// A tensor (`torch.Tensor`).
    Tensor(Tensor),
    /// An integer (Python `int`); collates to an int64 tensor.
    Int(i64),
    /// A float (Python `float`); collates to a float64 tensor.
    Float(f64),
    /// A bool; collates to a bool tensor.
    Bool(bool),
    /// A string; collates to a list of strings.
    Str(String),
    /// A tuple; collates column by column into a tuple.
    Tuple(Vec<Sample>),
    /// A list; collates column by column into a list.
    List(Vec<Sample>),
    /// A dict with string keys; collates key by key into a dict.
    Map(BTreeMap<String, Sample>),
}

impl Sample {
    /// The same structure with every tensor replaced by `f` of it (PyTorch's tree maps over a
    /// batch: `pin_memory`, moving a batch to a device, converting its dtype).
    pub fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Sample> {
        Ok(match self {
            Sample::Tensor(t) => Sample::Tensor(f(t)?),
            Sample::Tuple(v) => Sample::Tuple(v.iter().map(|x| x.map_tensors(f)).collect::<Result<_>>()?),
            Sample::List(v) => Sample::List(v.iter().map(|x| x.map_tensors(f)).collect::<Result<_>>()?),
            Sample::Map(m) => {
                Sample::Map(m.iter().map(|(k, x)| Ok((k.clone(), x.map_tensors(f)?))).collect::<Result<_>>()?)
            }
            other => other.clone(),
        })
    }

    /// The variant's name as PyTorch users know it: `"Tensor"`, `"int"`, `"float"`, `"bool"`,
    /// `"str"`, `"tuple"`, `"list"` or `"dict"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Sample::Tensor(_) => "Tensor",
            Sample::Int(_) => "int",
            Sample::Float(_) => "float",
            Sample::Bool(_) => "bool",
            Sample::Str(_) => "str",
            Sample::Tuple(_) => "tuple",
            Sample::List(_) => "list",
            Sample::Map(_) => "dict",
        }
    }

    fn expected<T>(&self, what: &str) -> Result<T> {
        bail!(Value, "Sample: expected {what}, but got a sample of kind {}", self.kind())
    }

    /// The tensor, or an error if this is not a [`Sample::Tensor`].
    pub fn as_tensor(&self) -> Result<&Tensor> {
        match self {
            Sample::Tensor(t) => Ok(t),
            s => s.expected("a Tensor"),
        }
    }

    /// The tensor, by value, or an error if this is not a [`Sample::Tensor`].
    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            Sample::Tensor(t) => Ok(t),
            s => s.expected("a Tensor"),
        }
    }

    /// The integer, or an error if this is not a [`Sample::Int`].
    pub fn as_int(&self) -> Result<i64> {
        match self {
            Sample::Int(v) => Ok(*v),
            s => s.expected("an int"),
        }
    }

    /// The float, or an error if this is not a [`Sample::Float`] (an int is not converted).
    pub fn as_float(&self) -> Result<f64> {
        match self {
            Sample::Float(v) => Ok(*v),
            s => s.expected("a float"),
        }
    }

    /// The bool, or an error if this is not a [`Sample::Bool`].
    pub fn as_bool(&self) -> Result<bool> {
        match self {
            Sample::Bool(v) => Ok(*v),
            s => s.expected("a bool"),
        }
    }

    /// The string, or an error if this is not a [`Sample::Str`].
    pub fn as_str(&self) -> Result<&str> {
        match self {
            Sample::Str(v) => Ok(v),
            s => s.expected("a str"),
        }
    }

    /// The tuple's items, or an error if this is not a [`Sample::Tuple`].
    pub fn as_tuple(&self) -> Result<&[Sample]> {
        match self {
            Sample::Tuple(v) => Ok(v),
            s => s.expected("a tuple"),
        }
    }

    /// The tuple's items, by value, or an error if this is not a [`Sample::Tuple`].
    pub fn into_tuple(self) -> Result<Vec<Sample>> {
        match self {
            Sample::Tuple(v) => Ok(v),
            s => s.expected("a tuple"),
        }
    }

    /// The list's items, or an error if this is not a [`Sample::List`].
    pub fn as_list(&self) -> Result<&[Sample]> {
        match self {
            Sample::List(v) => Ok(v),
            s => s.expected("a list"),
        }
    }

    /// The list's items, by value, or an error if this is not a [`Sample::List`].
    pub fn into_list(self) -> Result<Vec<Sample>> {
        match self {
            Sample::List(v) => Ok(v),
            s => s.expected("a list"),
        }
    }

    /// The dict, or an error if this is not a [`Sample::Map`].
    pub fn as_map(&self) -> Result<&BTreeMap<String, Sample>> {
        match self {
            Sample::Map(v) => Ok(v),
            s => s.expected("a dict"),
        }
    }

    /// The dict, by value, or an error if this is not a [`Sample::Map`].
    pub fn into_map(self) -> Result<BTreeMap<String, Sample>> {
        match self {
            Sample::Map(v) => Ok(v),
            s => s.expected("a dict"),
        }
    }

    /// Item `index` of a tuple or list (`sample[index]`); an Index error past the end.
    pub fn item(&self, index: usize) -> Result<&Sample> {
        let items = match self {
            Sample::Tuple(v) | Sample::List(v) => v,
            s => return s.expected("a tuple or a list"),
        };
        match items.get(index) {
            Some(s) => Ok(s),
            None => bail!(Index, "{} index {index} out of range (length {})", self.kind(), items.len()),
        }
    }

    /// The value under `key` of a dict (`sample[key]`); an Index error (Python's `KeyError`)
    /// when the key is missing.
    pub fn key(&self, key: &str) -> Result<&Sample> {
        match self.as_map()?.get(key) {
            Some(s) => Ok(s),
            None => bail!(Index, "KeyError: '{key}'"),
        }
    }
}

impl From<Tensor> for Sample {
    fn from(t: Tensor) -> Self {
        Sample::Tensor(t)
    }
}

impl From<&Tensor> for Sample {
    fn from(t: &Tensor) -> Self {
        Sample::Tensor(t.clone())
    }
}

impl From<i64> for Sample {
    fn from(v: i64) -> Self {
        Sample::Int(v)
    }
}

impl From<i32> for Sample {
    fn from(v: i32) -> Self {
        Sample::Int(v as i64)
    }
}

impl From<usize> for Sample {
    /// An index or a label: a [`Sample::Int`] (values past `i64::MAX` saturate).
    fn from(v: usize) -> Self {
        Sample::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<f64> for Sample {
    fn from(v: f64) -> Self {
        Sample::Float(v)
    }
}

impl From<f32> for Sample {
    fn from(v: f32) -> Self {
        Sample::Float(v as f64)
    }
}

impl From<bool> for Sample {
    fn from(v: bool) -> Self {
        Sample::Bool(v)
    }
}

impl From<String> for Sample {
    fn from(v: String) -> Self {
        Sample::Str(v)
    }
}

impl From<&str> for Sample {
    fn from(v: &str) -> Self {
        Sample::Str(v.to_string())
    }
}

impl<A: Into<Sample>, B: Into<Sample>> From<(A, B)> for Sample {
    fn from((a, b): (A, B)) -> Self {
        Sample::Tuple(vec![a.into(), b.into()])
    }
}

impl<A: Into<Sample>, B: Into<Sample>, C: Into<Sample>> From<(A, B, C)> for Sample {
    fn from((a, b, c): (A, B, C)) -> Self {
        Sample::Tuple(vec![a.into(), b.into(), c.into()])
    }
}

impl<T: Into<Sample>> From<Vec<T>> for Sample {
    /// A [`Sample::List`] of the items.
    fn from(v: Vec<T>) -> Self {
        Sample::List(v.into_iter().map(Into::into).collect())
    }
}

impl From<BTreeMap<String, Sample>> for Sample {
    fn from(m: BTreeMap<String, Sample>) -> Self {
        Sample::Map(m)
    }
}

/// The tensors of a tuple (or list) of exactly `N` tensors, as Python's `x, y = batch`
/// unpacks; the error says which arity or which item was wrong.
fn tensors<const N: usize>(s: Sample) -> Result<[Tensor; N]> {
    let kind = s.kind();
    let items = match s {
        Sample::Tuple(v) | Sample::List(v) => v,
        s => bail!(Value, "cannot unpack a sample of kind {} into {N} tensors: expected a tuple", s.kind()),
    };
    if items.len() != N {
        let k = items.len();
        if k < N {
            bail!(Value, "not enough values to unpack (expected {N}, got {k}): the {kind} has {k} items");
        }
        bail!(Value, "too many values to unpack (expected {N}): the {kind} has {k} items");
    }
    let mut out = Vec::with_capacity(N);
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Sample::Tensor(t) => out.push(t),
            other => bail!(
                Value,
                "cannot unpack item {i} of the {kind} into a Tensor: it is of kind {}",
                other.kind()
            ),
        }
    }
    <[Tensor; N]>::try_from(out)
        .map_err(|v| pyrite_core::err!(Value, "expected {N} tensors to unpack, got {}", v.len()))
}

impl TryFrom<Sample> for (Tensor, Tensor) {
    type Error = pyrite_core::Error;
    /// A batch (or sample) of two tensors, unpacked: `let (x, y): (Tensor, Tensor) = batch?.try_into()?;`
    /// (Python's `x, y = batch`). A tuple or list of another length, or an item that is not a
    /// tensor, is an error naming it.
    fn try_from(s: Sample) -> Result<Self> {
        let [a, b] = tensors::<2>(s)?;
        Ok((a, b))
    }
}

impl TryFrom<Sample> for (Tensor, Tensor, Tensor) {
    type Error = pyrite_core::Error;
    /// A batch (or sample) of three tensors, unpacked:
    /// `let (x, y, w): (Tensor, Tensor, Tensor) = batch?.try_into()?;`.
    fn try_from(s: Sample) -> Result<Self> {
        let [a, b, c] = tensors::<3>(s)?;
        Ok((a, b, c))
    }
}
