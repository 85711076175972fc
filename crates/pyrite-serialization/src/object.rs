//! [`Object`]: the Python values a checkpoint holds, and [`Dict`], an insertion-ordered map
//! with keys of any hashable kind (Python's `dict` and `collections.OrderedDict`).

use pyrite_core::{bail, DType, Device, Error, Result, Tensor};
use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

/// A Python value as `torch.save` stores it and `torch.load(weights_only=True)` returns it.
///
/// Checkpoints are nested containers of tensors and plain values: a module `state_dict()` is
/// an [`Object::OrderedDict`] of tensors, an optimizer `state_dict()` is a [`Object::Dict`]
/// like `{"state": {0: {...}, 1: {...}}, "param_groups": [...]}` (note the int keys).
///
/// Python types map as follows; loading then saving keeps every value and its type, except
/// where noted:
///
/// | Python | `Object` |
/// |---|---|
/// | `None`, `bool`, `int`, `float`, `complex`, `str` | `None`, `Bool`, `Int` (fits in i64), `Float`, `Complex`, `Str` |
/// | `bytes`, `bytearray` | `Bytes` (a bytearray comes back as bytes) |
/// | `torch.Tensor`, `nn.Parameter` | `Tensor` (a Parameter is a tensor that requires grad) |
/// | `torch.dtype`, `torch.device` | `DType`, `Device` (only the dtypes and devices Pyrite has) |
/// | `tuple`, `torch.Size` | `Tuple` (a Size comes back as a tuple) |
/// | `list` | `List` |
/// | `set`, `frozenset` | `Set` (a frozenset comes back as a set) |
/// | `dict`, `collections.OrderedDict`, `collections.Counter` | `Dict`, `OrderedDict`, `Counter` |
///
/// Equality is structural, with tensors equal only when they are the same tensor handle
/// ([`Tensor::is_same`]): the way Python compares tensors used as dict keys.
///
/// ```
/// use pyrite_serialization::{Dict, Object};
/// use pyrite_core::Tensor;
/// let mut state = Dict::new();
/// state.insert(0, Object::from_pairs([("step", Object::from(Tensor::scalar(2f32)?))]));
/// let sd = Object::from_pairs([("state", Object::Dict(state)), ("param_groups", Object::List(vec![]))]);
/// let step = sd.get("state").and_then(|s| s.get(0)).and_then(|p| p.get("step"));
/// assert_eq!(step.and_then(Object::as_tensor).unwrap().item::<f32>()?, 2.0);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub enum Object {
    /// `None`
    None,
    /// `True` / `False`
    Bool(bool),
    /// An `int` that fits in 64 bits.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `complex`: real and imaginary parts.
    Complex(f64, f64),
    /// A `str`.
    Str(String),
    /// `bytes` (or a `bytearray`).
    Bytes(Vec<u8>),
    /// A `torch.Tensor` (or an `nn.Parameter`: then it requires grad).
    Tensor(Tensor),
    /// A `torch.dtype` such as `torch.float16`.
    DType(DType),
    /// A `torch.device` such as `torch.device("cpu")`.
    Device(Device),
    /// A `tuple` (or a `torch.Size`).
    Tuple(Vec<Object>),
    /// A `list`.
    List(Vec<Object>),
    /// A `set` (or `frozenset`), in the file's order.
    Set(Vec<Object>),
    /// A `dict`.
    Dict(Dict),
    /// A `collections.OrderedDict`, such as a module's `state_dict()`.
    OrderedDict(Dict),
    /// A `collections.Counter`: a dict of counts (`MultiStepLR`'s `milestones`).
    Counter(Dict),
    /// A placeholder for an object of a class outside the weights-only allowlist (an instance
    /// of `__main__.Foo`, Lightning's `AttributeDict`), made only when loading with
    /// [`crate::LoadOptions::skip_unsupported`]: the global it names, nothing of its content.
    /// It cannot be saved.
    Unsupported {
        /// The class or function the file names, `module.name`.
        global: String,
    },
}

impl Object {
    /// Python's name for this value's type (`"dict"`, `"Tensor"`, ...), for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Object::None => "NoneType",
            Object::Bool(_) => "bool",
            Object::Int(_) => "int",
            Object::Float(_) => "float",
            Object::Complex(..) => "complex",
            Object::Str(_) => "str",
            Object::Bytes(_) => "bytes",
            Object::Tensor(_) => "Tensor",
            Object::DType(_) => "torch.dtype",
            Object::Device(_) => "torch.device",
            Object::Tuple(_) => "tuple",
            Object::List(_) => "list",
            Object::Set(_) => "set",
            Object::Dict(_) => "dict",
            Object::OrderedDict(_) => "OrderedDict",
            Object::Counter(_) => "Counter",
            Object::Unsupported { .. } => "unsupported object",
        }
    }

    /// A `dict` from key-value pairs, in their order.
    pub fn from_pairs<K: Into<Object>, V: Into<Object>>(pairs: impl IntoIterator<Item = (K, V)>) -> Object {
        Object::Dict(pairs.into_iter().collect())
    }

    /// An `OrderedDict` of named tensors: what a module's `state_dict()` is in PyTorch.
    /// Accepts `(name, tensor)` pairs by value or by reference, e.g. a Pyrite `StateDict`'s
    /// `iter()`.
    pub fn from_named_tensors<K: Into<String>, T: Borrow<Tensor>>(
        tensors: impl IntoIterator<Item = (K, T)>,
    ) -> Object {
        Object::OrderedDict(
            tensors
                .into_iter()
                .map(|(k, t)| (Object::Str(k.into()), Object::Tensor(t.borrow().clone())))
                .collect(),
        )
    }

    /// The `(name, tensor)` pairs of a dict whose keys are all strings and whose values are
    /// all tensors (a module state_dict), in order; an error names the first entry that is not.
    /// Collect them into a Pyrite `StateDict` to load a module.
    pub fn to_named_tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let Some(d) = self.as_dict() else {
            bail!(Value, "expected a dict of tensors (a state_dict), got {}", self.type_name());
        };
        d.iter()
            .map(|(k, v)| match (k, v) {
                (Object::Str(k), Object::Tensor(t)) => Ok((k.clone(), t.clone())),
                (Object::Str(k), v) => {
                    bail!(Value, "state_dict entry '{k}' is a {}, not a Tensor", v.type_name())
                }
                (k, _) => bail!(Value, "state_dict key {k:?} is a {}, not a str", k.type_name()),
            })
            .collect()
    }

    /// The tensor, for `Tensor`.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Object::Tensor(t) => Some(t),
            _ => None,
        }
    }
    /// The value, for `Int`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Object::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// The value as a float, for `Float` and `Int` (Python accepts `lr=1` where a float is meant).
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Object::Float(f) => Some(*f),
            Object::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    /// The value, for `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Object::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// The text, for `Str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Object::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The bytes, for `Bytes`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Object::Bytes(b) => Some(b),
            _ => None,
        }
    }
    /// The items, for `List`, `Tuple` and `Set`.
    pub fn as_slice(&self) -> Option<&[Object]> {
        match self {
            Object::List(v) | Object::Tuple(v) | Object::Set(v) => Some(v),
            _ => None,
        }
    }
    /// The items, mutably, for `List`, `Tuple` and `Set`.
    pub fn as_vec_mut(&mut self) -> Option<&mut Vec<Object>> {
        match self {
            Object::List(v) | Object::Tuple(v) | Object::Set(v) => Some(v),
            _ => None,
        }
    }
    /// The map, for `Dict`, `OrderedDict` and `Counter`.
    pub fn as_dict(&self) -> Option<&Dict> {
        match self {
            Object::Dict(d) | Object::OrderedDict(d) | Object::Counter(d) => Some(d),
            _ => None,
        }
    }
    /// The map, mutably, for `Dict`, `OrderedDict` and `Counter`.
    pub fn as_dict_mut(&mut self) -> Option<&mut Dict> {
        match self {
            Object::Dict(d) | Object::OrderedDict(d) | Object::Counter(d) => Some(d),
            _ => None,
        }
    }
    /// `self[key]` for a `Dict` or `OrderedDict`; `None` for a missing key or another type.
    pub fn get(&self, key: impl Into<Object>) -> Option<&Object> {
        self.as_dict()?.get(key)
    }
    /// Every [`Object::Unsupported`] placeholder inside this value, as `(path, global)` pairs
    /// in order; a path joins dict keys and list indices with `/` (`"callbacks/MyCallback/cfg"`,
    /// `""` for the value itself).
    ///
    /// ```
    /// use pyrite_serialization::Object;
    /// let ckpt = Object::from_pairs([
    ///     ("epoch", Object::from(3)),
    ///     ("hyper_parameters", Object::Unsupported { global: "__main__.Config".into() }),
    /// ]);
    /// assert_eq!(ckpt.unsupported(), [("hyper_parameters".to_string(), "__main__.Config".to_string())]);
    /// ```
    pub fn unsupported(&self) -> Vec<(String, String)> {
        fn walk(o: &Object, path: &str, out: &mut Vec<(String, String)>) {
            let join = |k: String| if path.is_empty() { k } else { format!("{path}/{k}") };
            match o {
                Object::Unsupported { global } => out.push((path.to_string(), global.clone())),
                Object::List(v) | Object::Tuple(v) | Object::Set(v) => {
                    for (i, x) in v.iter().enumerate() {
                        walk(x, &join(i.to_string()), out);
                    }
                }
                Object::Dict(d) | Object::OrderedDict(d) | Object::Counter(d) => {
                    for (k, x) in d.iter() {
                        let k = match k {
                            Object::Str(s) => s.clone(),
                            Object::Int(i) => i.to_string(),
                            k => format!("{k:?}"),
                        };
                        walk(x, &join(k), out);
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(self, "", &mut out);
        out
    }

    /// True for `None`.
    pub fn is_none(&self) -> bool {
        matches!(self, Object::None)
    }
}

// -------------------------------------------------------------------------------- equality

/// A budget of work for hashing and comparing values: one unit per value visited. Loading
/// charges the dict keys it hashes and compares to the file's budget; the public API never
/// runs out. When it runs out, comparisons answer "not equal" and hashes are partial, and the
/// caller must check [`Work::exhausted`].
pub(crate) struct Work {
    left: u64,
    exhausted: bool,
}

impl Work {
    pub(crate) fn new(units: u64) -> Work {
        Work { left: units, exhausted: false }
    }
    fn unlimited() -> Work {
        Work::new(u64::MAX)
    }
    fn spend(&mut self, n: u64) -> bool {
        match self.left.checked_sub(n) {
            Some(l) if !self.exhausted => {
                self.left = l;
                true
            }
            _ => {
                self.exhausted = true;
                false
            }
        }
    }
    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted
    }
    pub(crate) fn left(&self) -> u64 {
        self.left
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        eq_in(self, other, &mut Work::unlimited())
    }
}

/// Sets up to this size are compared element by element; larger ones through hashes.
const SMALL_SET: usize = 32;

/// `a == b`, spending `w`.
fn eq_in(a: &Object, b: &Object, w: &mut Work) -> bool {
    use Object::*;
    if !w.spend(1) {
        return false;
    }
    match (a, b) {
        (None, None) => true,
        (Bool(a), Bool(b)) => a == b,
        (Int(a), Int(b)) => a == b,
        (Float(a), Float(b)) => a == b,
        (Complex(a, b), Complex(c, d)) => a == c && b == d,
        (Str(a), Str(b)) => a == b,
        (Bytes(a), Bytes(b)) => a == b,
        (Tensor(a), Tensor(b)) => a.is_same(b),
        (DType(a), DType(b)) => a == b,
        (Device(a), Device(b)) => a == b,
        (Tuple(a), Tuple(b)) | (List(a), List(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| eq_in(x, y, w))
        }
        (Set(a), Set(b)) => set_eq(a, b, w),
        (Dict(a), Dict(b)) | (Counter(a), Counter(b)) => a.eq_unordered(b, w),
        (Unsupported { global: a }, Unsupported { global: b }) => a == b,
        (OrderedDict(a), OrderedDict(b)) => {
            a.len() == b.len()
                && a.entries.iter().zip(&b.entries).all(|((k, v), (l, u))| eq_in(k, l, w) && eq_in(v, u, w))
        }
        _ => false,
    }
}

/// Python's set equality: every element of each is in the other (duplicates, which a Python
/// set cannot have, do not count).
fn set_eq(a: &[Object], b: &[Object], w: &mut Work) -> bool {
    if a.len() <= SMALL_SET && b.len() <= SMALL_SET {
        let within = |x: &Object, s: &[Object], w: &mut Work| s.iter().any(|y| eq_in(x, y, w));
        return a.iter().all(|x| within(x, b, w)) && b.iter().all(|y| within(y, a, w));
    }
    // An element holding a NaN equals nothing, so such a set equals no set.
    if a.iter().chain(b).any(|x| has_nan(x, w)) {
        return false;
    }
    let bucket = |s: &[Object], w: &mut Work| {
        let mut m: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, x) in s.iter().enumerate() {
            m.entry(hash_in(x, w)).or_default().push(i);
        }
        m
    };
    let within = |x: &Object, s: &[Object], m: &HashMap<u64, Vec<usize>>, w: &mut Work| {
        let h = hash_in(x, w);
        m.get(&h).is_some_and(|c| c.iter().any(|&i| eq_in(x, &s[i], w)))
    };
    let (ma, mb) = (bucket(a, w), bucket(b, w));
    a.iter().all(|x| within(x, b, &mb, w)) && b.iter().all(|y| within(y, a, &ma, w))
}

/// True when `o` holds a NaN anywhere (a float or complex part): such a value equals
/// nothing, itself included, so a dict never needs to look for it.
fn has_nan(o: &Object, w: &mut Work) -> bool {
    if !w.spend(1) {
        return false;
    }
    match o {
        Object::Float(f) => f.is_nan(),
        Object::Complex(a, b) => a.is_nan() || b.is_nan(),
        Object::Tuple(v) | Object::List(v) | Object::Set(v) => v.iter().any(|x| has_nan(x, w)),
        Object::Dict(d) | Object::OrderedDict(d) | Object::Counter(d) => {
            d.entries.iter().any(|(k, v)| has_nan(k, w) || has_nan(v, w))
        }
        _ => false,
    }
}

/// A value's hash, consistent with `PartialEq` (floats hash by value with -0.0 as 0.0;
/// tensors by handle; containers by content: sets as the set of their elements' hashes,
/// dicts as the sorted hashes of their entries, so that order does not count), spending `w`.
fn hash_in(o: &Object, w: &mut Work) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if !w.spend(1) {
        return 0;
    }
    std::mem::discriminant(o).hash(&mut h);
    match o {
        Object::None => {}
        Object::Bool(b) => b.hash(&mut h),
        Object::Int(i) => i.hash(&mut h),
        Object::Float(f) => (f + 0.0).to_bits().hash(&mut h),
        Object::Complex(a, b) => {
            (a + 0.0).to_bits().hash(&mut h);
            (b + 0.0).to_bits().hash(&mut h);
        }
        Object::Str(s) => s.hash(&mut h),
        Object::Bytes(b) => b.hash(&mut h),
        Object::Tensor(t) => t.handle_id().hash(&mut h),
        Object::DType(d) => d.hash(&mut h),
        Object::Device(d) => d.hash(&mut h),
        Object::Tuple(v) | Object::List(v) => {
            v.len().hash(&mut h);
            for x in v {
                hash_in(x, w).hash(&mut h);
            }
        }
        Object::Set(v) => {
            let mut hs: Vec<u64> = v.iter().map(|x| hash_in(x, w)).collect();
            hs.sort_unstable();
            hs.dedup();
            hs.hash(&mut h);
        }
        Object::Dict(d) | Object::Counter(d) => {
            let mut hs: Vec<(u64, u64)> =
                d.entries.iter().map(|(k, v)| (hash_in(k, w), hash_in(v, w))).collect();
            hs.sort_unstable();
            hs.hash(&mut h);
        }
        Object::OrderedDict(d) => {
            d.len().hash(&mut h);
            for (k, v) in &d.entries {
                hash_in(k, w).hash(&mut h);
                hash_in(v, w).hash(&mut h);
            }
        }
        Object::Unsupported { global } => global.hash(&mut h),
    }
    h.finish()
}

// ------------------------------------------------------------------------------------- Dict

/// An insertion-ordered map from [`Object`] keys to values: Python's `dict` (which keeps
/// insertion order) and the payload of `collections.OrderedDict`.
///
/// Keys may be any value (strings and ints in practice; tuples too); lookups hash them.
/// Inserting an existing key replaces its value in place, as in Python.
///
/// A module's `state_dict()` in PyTorch carries a `_metadata` attribute (each submodule's
/// version, used by `load_state_dict`); it is kept in [`Dict::metadata`] when loading and
/// written back when saving.
///
/// ```
/// use pyrite_serialization::{Dict, Object};
/// let mut d = Dict::new();
/// d.insert("b", 1);
/// d.insert(0, "zero");
/// d.insert("b", 2);
/// assert_eq!(d.get("b"), Some(&Object::Int(2)));
/// assert_eq!(d.keys().cloned().collect::<Vec<_>>(), vec![Object::from("b"), Object::from(0)]);
/// ```
#[derive(Clone, Default)]
pub struct Dict {
    entries: Vec<(Object, Object)>,
    /// Hash of a key -> indices of the entries with that hash.
    index: HashMap<u64, Vec<usize>>,
    /// PyTorch's `state_dict._metadata` (an `OrderedDict` of per-module dicts such as
    /// `{"version": 1}`), when this dict is a module state_dict that had one.
    pub metadata: Option<Box<Object>>,
}

impl Dict {
    /// An empty dict.
    pub fn new() -> Dict {
        Dict::default()
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where `key` is (its entry index, if present) and its hash, or no hash when it can never
    /// be found (it holds a NaN): such keys are not indexed, so that many of them cost no
    /// comparisons.
    fn locate(&self, key: &Object, w: &mut Work) -> (Option<usize>, Option<u64>) {
        if has_nan(key, w) {
            return (None, None);
        }
        let h = hash_in(key, w);
        let found =
            self.index.get(&h).and_then(|c| c.iter().copied().find(|&i| eq_in(&self.entries[i].0, key, w)));
        (found, Some(h))
    }

    fn find(&self, key: &Object) -> Option<usize> {
        self.locate(key, &mut Work::unlimited()).0
    }

    /// `d[key] = value`: replaces the value of an existing key (keeping its position) and
    /// returns the old one, or appends a new entry.
    pub fn insert(&mut self, key: impl Into<Object>, value: impl Into<Object>) -> Option<Object> {
        self.insert_within(key.into(), value.into(), &mut Work::unlimited())
    }

    /// [`Dict::insert`], spending `w` on hashing and comparing the key (the caller checks
    /// [`Work::exhausted`]).
    pub(crate) fn insert_within(&mut self, key: Object, value: Object, w: &mut Work) -> Option<Object> {
        let (found, hash) = self.locate(&key, w);
        if let Some(i) = found {
            return Some(std::mem::replace(&mut self.entries[i].1, value));
        }
        if let Some(h) = hash {
            self.index.entry(h).or_default().push(self.entries.len());
        }
        self.entries.push((key, value));
        None
    }
    /// `d.get(key)`.
    pub fn get(&self, key: impl Into<Object>) -> Option<&Object> {
        self.find(&key.into()).map(|i| &self.entries[i].1)
    }
    /// The value of `key`, mutably.
    pub fn get_mut(&mut self, key: impl Into<Object>) -> Option<&mut Object> {
        let i = self.find(&key.into())?;
        Some(&mut self.entries[i].1)
    }
    /// `key in d`.
    pub fn contains_key(&self, key: impl Into<Object>) -> bool {
        self.find(&key.into()).is_some()
    }
    /// `d.pop(key)`: removes an entry, keeping the order of the others.
    pub fn remove(&mut self, key: impl Into<Object>) -> Option<Object> {
        let i = self.find(&key.into())?;
        let (_, v) = self.entries.remove(i);
        self.reindex();
        Some(v)
    }
    fn reindex(&mut self) {
        self.index.clear();
        let w = &mut Work::unlimited();
        for (i, (k, _)) in self.entries.iter().enumerate() {
            if !has_nan(k, w) {
                self.index.entry(hash_in(k, w)).or_default().push(i);
            }
        }
    }
    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&Object, &Object)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
    /// The entries in order, values mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Object, &mut Object)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }
    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &Object> {
        self.entries.iter().map(|(k, _)| k)
    }
    /// The values in order.
    pub fn values(&self) -> impl Iterator<Item = &Object> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Python's dict equality: the same keys with equal values, in any order.
    fn eq_unordered(&self, other: &Dict, w: &mut Work) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(k, v)| other.locate(k, w).0.is_some_and(|i| eq_in(&other.entries[i].1, v, w)))
    }
}

impl std::fmt::Debug for Dict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl PartialEq for Dict {
    /// Order-sensitive, as for `OrderedDict`; `metadata` is not compared.
    fn eq(&self, other: &Dict) -> bool {
        self.entries == other.entries
    }
}

impl<K: Into<Object>, V: Into<Object>> FromIterator<(K, V)> for Dict {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Dict {
        let mut d = Dict::new();
        for (k, v) in iter {
            d.insert(k, v);
        }
        d
    }
}

impl IntoIterator for Dict {
    type Item = (Object, Object);
    type IntoIter = std::vec::IntoIter<(Object, Object)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

// -------------------------------------------------------------------------------- From impls

macro_rules! from_scalar {
    ($($t:ty => $v:ident as $as:ty),* $(,)?) => {$(
        impl From<$t> for Object {
            fn from(x: $t) -> Object {
                Object::$v(x as $as)
            }
        }
    )*};
}
from_scalar!(bool => Bool as bool, i64 => Int as i64, i32 => Int as i64, u32 => Int as i64, u8 => Int as i64,
    f64 => Float as f64, f32 => Float as f64);

impl From<&str> for Object {
    fn from(s: &str) -> Object {
        Object::Str(s.to_string())
    }
}
impl From<String> for Object {
    fn from(s: String) -> Object {
        Object::Str(s)
    }
}
impl From<&String> for Object {
    fn from(s: &String) -> Object {
        Object::Str(s.clone())
    }
}
impl From<Tensor> for Object {
    fn from(t: Tensor) -> Object {
        Object::Tensor(t)
    }
}
impl From<&Tensor> for Object {
    fn from(t: &Tensor) -> Object {
        Object::Tensor(t.clone())
    }
}
impl From<DType> for Object {
    fn from(d: DType) -> Object {
        Object::DType(d)
    }
}
impl From<Device> for Object {
    fn from(d: Device) -> Object {
        Object::Device(d)
    }
}
impl From<Dict> for Object {
    fn from(d: Dict) -> Object {
        Object::Dict(d)
    }
}
impl From<&Object> for Object {
    fn from(o: &Object) -> Object {
        o.clone()
    }
}
impl<T: Into<Object>> From<Option<T>> for Object {
    /// `None` for `None`, else the value.
    fn from(o: Option<T>) -> Object {
        o.map_or(Object::None, Into::into)
    }
}
impl<T: Into<Object>> From<Vec<T>> for Object {
    /// A `list`.
    fn from(v: Vec<T>) -> Object {
        Object::List(v.into_iter().map(Into::into).collect())
    }
}
impl<A: Into<Object>, B: Into<Object>> From<(A, B)> for Object {
    /// A 2-tuple.
    fn from((a, b): (A, B)) -> Object {
        Object::Tuple(vec![a.into(), b.into()])
    }
}
impl<K: Into<Object>, V: Into<Object>> From<BTreeMap<K, V>> for Object {
    /// A `dict` in the map's (sorted) order.
    fn from(m: BTreeMap<K, V>) -> Object {
        Object::Dict(m.into_iter().collect())
    }
}
impl<K: Into<Object>, V: Into<Object>, S> From<HashMap<K, V, S>> for Object {
    /// A `dict` in the map's iteration order (unspecified).
    fn from(m: HashMap<K, V, S>) -> Object {
        Object::Dict(m.into_iter().collect())
    }
}

macro_rules! try_from_object {
    ($($t:ty: $what:literal, |$o:ident| $pat:pat => $val:expr),* $(,)?) => {$(
        impl TryFrom<Object> for $t {
            type Error = Error;
            fn try_from($o: Object) -> Result<$t> {
                match $o {
                    $pat => Ok($val),
                    other => bail!(Value, "expected {}, got {}", $what, other.type_name()),
                }
            }
        }
    )*};
}
try_from_object!(
    Tensor: "a Tensor", |o| Object::Tensor(t) => t,
    i64: "an int", |o| Object::Int(i) => i,
    f64: "a float", |o| Object::Float(f) => f,
    bool: "a bool", |o| Object::Bool(b) => b,
    String: "a str", |o| Object::Str(s) => s,
    Dict: "a dict", |o| Object::Dict(d) | Object::OrderedDict(d) => d,
    Vec<Object>: "a list or tuple", |o| Object::List(v) | Object::Tuple(v) => v,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_alike_and_nan_keys_are_never_compared() {
        let set = |v: &[i64]| Object::Set(v.iter().map(|&i| Object::Int(i)).collect());
        let big: Vec<i64> = (0..100).collect();
        let big_rev: Vec<i64> = (0..100).rev().collect();
        for (a, b) in [(set(&[1, 2]), set(&[2, 1, 1])), (set(&big), set(&big_rev))] {
            assert_eq!(a, b);
            let w = &mut Work::unlimited();
            assert_eq!(hash_in(&a, w), hash_in(&b, w));
        }
        assert_ne!(set(&[1, 2]), set(&[1, 2, 3]));
        assert_ne!(set(&[1, 1, 2]), set(&[1, 2, 3])); // same length, one-way containment
        let mut d = Dict::new();
        d.insert(set(&[1, 2]), 1);
        d.insert(set(&[2, 1]), 2);
        d.insert(Object::Float(f64::NAN), 3);
        d.insert(Object::Float(f64::NAN), 4);
        assert_eq!(d.len(), 3);
        assert_eq!(d.get(set(&[1, 2])), Some(&Object::Int(2)));
        // NaN keys are not indexed: no bucket grows with them.
        assert_eq!(d.index.values().map(Vec::len).sum::<usize>(), 1);
    }

    #[test]
    fn hashing_and_comparing_keys_spend_the_work_given() {
        let key = Object::Tuple((0..1000).map(Object::Int).collect());
        let mut d = Dict::new();
        let mut w = Work::new(5000);
        d.insert_within(key.clone(), Object::None, &mut w);
        assert!(!w.exhausted());
        let spent_first = 5000 - w.left();
        assert!(spent_first > 1000, "{spent_first}");
        // The same key again: hashed and compared with the one there.
        d.insert_within(key.clone(), Object::Int(1), &mut w);
        assert!(5000 - w.left() > 2 * spent_first, "{}", w.left());
        let mut w = Work::new(100);
        d.insert_within(key, Object::Int(2), &mut w);
        assert!(w.exhausted());
    }
}
