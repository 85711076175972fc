//! Metric state: named tensors with the reduction that combines them across processes, like
//! torchmetrics' `add_state(name, default, dist_reduce_fx)`.
//!
//! A metric keeps sums and counts (or, for the exact curve metrics, the concatenated inputs), so
//! that two copies of a metric fed different batches can be [merged](MetricStates::merge) into
//! the metric of all the batches, and a distributed run can all-reduce each state by its
//! [`Reduce`].

use pyrite_core::{bail, Result, Tensor};

/// How a state is combined across copies of a metric (torchmetrics' `dist_reduce_fx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// Elementwise sum (`"sum"`): counts and sums.
    Sum,
    /// Elementwise mean (`"mean"`).
    Mean,
    /// Elementwise maximum (`"max"`).
    Max,
    /// Elementwise minimum (`"min"`).
    Min,
    /// Concatenation along dim 0 (`"cat"`): kept inputs, such as an exact AUROC's scores.
    Cat,
}

/// One state of a metric, as a snapshot: its name, its value and its reduction. A
/// [`Reduce::Cat`] state is given as the concatenation of everything it holds (dim 0).
#[derive(Debug, Clone)]
pub struct MetricState {
    /// The state's name (`"tp"`, `"sum_squared_error"`).
    pub name: &'static str,
    /// The value.
    pub value: Tensor,
    /// How copies of it combine.
    pub reduce: Reduce,
}

#[derive(Debug, Clone)]
enum Value {
    One(Tensor),
    /// The chunks of a `Cat` state, concatenated only when read.
    List(Vec<Tensor>),
}

#[derive(Debug, Clone)]
struct Entry {
    name: &'static str,
    reduce: Reduce,
    default: Tensor,
    value: Value,
}

/// The states of one metric and the number of updates it has seen (torchmetrics'
/// `_update_count`).
///
/// ```
/// use pyrite_core::{DType, Tensor};
/// use pyrite_metrics::{MetricStates, Reduce};
/// let mut a = MetricStates::new();
/// a.add_state("total", Tensor::zeros([], DType::I64)?, Reduce::Sum)?;
/// let mut b = a.clone();
/// a.accumulate("total", &Tensor::scalar(3i64)?)?;
/// b.accumulate("total", &Tensor::scalar(4i64)?)?;
/// a.merge(&b)?;
/// assert_eq!(a.get("total")?.item::<i64>()?, 7);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MetricStates {
    entries: Vec<Entry>,
    update_count: usize,
}

impl MetricStates {
    /// No states.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a state with its default value (`add_state`). A `Cat` state's default is its
    /// empty value (shape `[0, ...]`), which fixes its dtype and trailing dims.
    pub fn add_state(&mut self, name: &'static str, default: Tensor, reduce: Reduce) -> Result<()> {
        if self.entries.iter().any(|e| e.name == name) {
            bail!(Value, "state '{name}' already exists");
        }
        if reduce == Reduce::Cat && (default.rank() == 0 || default.dims()[0] != 0) {
            bail!(
                Value,
                "the default of a `cat` state must be empty along dim 0, got shape {}",
                default.shape()
            );
        }
        let value = match reduce {
            Reduce::Cat => Value::List(Vec::new()),
            _ => Value::One(default.clone()),
        };
        self.entries.push(Entry { name, reduce, default, value });
        Ok(())
    }

    fn entry(&self, name: &str) -> Result<&Entry> {
        match self.entries.iter().find(|e| e.name == name) {
            Some(e) => Ok(e),
            None => bail!(Value, "metric has no state named '{name}'"),
        }
    }

    fn entry_mut(&mut self, name: &str) -> Result<&mut Entry> {
        match self.entries.iter_mut().find(|e| e.name == name) {
            Some(e) => Ok(e),
            None => bail!(Value, "metric has no state named '{name}'"),
        }
    }

    /// The current value of a state (a `Cat` state concatenated along dim 0).
    pub fn get(&self, name: &str) -> Result<Tensor> {
        let e = self.entry(name)?;
        value_of(e)
    }

    /// Combines `batch` into a state by its reduction: adds it to a `Sum` state, appends it to a
    /// `Cat` state, and so on. Its shape must be the default's (for `Cat`: the trailing dims).
    pub fn accumulate(&mut self, name: &str, batch: &Tensor) -> Result<()> {
        let e = self.entry_mut(name)?;
        combine(e, batch)
    }

    /// Counts one update (called once by each `update`).
    pub fn count_update(&mut self) {
        self.update_count += 1;
    }

    /// How many updates the states have seen since the last reset.
    pub fn update_count(&self) -> usize {
        self.update_count
    }

    /// Puts every state back to its default and the update count to zero.
    pub fn reset(&mut self) {
        for e in &mut self.entries {
            e.value = match e.reduce {
                Reduce::Cat => Value::List(Vec::new()),
                _ => Value::One(e.default.clone()),
            };
        }
        self.update_count = 0;
    }

    /// A snapshot of every state, in registration order.
    pub fn snapshot(&self) -> Result<Vec<MetricState>> {
        self.entries
            .iter()
            .map(|e| Ok(MetricState { name: e.name, value: value_of(e)?, reduce: e.reduce }))
            .collect()
    }

    /// Replaces the states' values with `states` (for example after an all-reduce). Every state
    /// must be given once, with its shape (for `Cat`: its trailing dims) and dtype.
    pub fn load(&mut self, states: &[MetricState]) -> Result<()> {
        if states.len() != self.entries.len() {
            bail!(Value, "expected {} states, got {}", self.entries.len(), states.len());
        }
        let mut values = Vec::with_capacity(states.len());
        for e in &self.entries {
            let Some(s) = states.iter().find(|s| s.name == e.name) else {
                bail!(Value, "state '{}' is missing", e.name);
            };
            check_fits(e, &s.value)?;
            values.push(match e.reduce {
                Reduce::Cat => Value::List(vec![s.value.clone()]),
                _ => Value::One(s.value.clone()),
            });
        }
        for (e, v) in self.entries.iter_mut().zip(values) {
            e.value = v;
        }
        Ok(())
    }

    /// Combines another copy's states into these by each state's reduction (`Cat`: these
    /// first, then `other`'s), and adds its update count.
    pub fn merge(&mut self, other: &MetricStates) -> Result<()> {
        let names: Vec<_> = self.entries.iter().map(|e| e.name).collect();
        let theirs: Vec<_> = other.entries.iter().map(|e| e.name).collect();
        if names != theirs {
            bail!(Value, "cannot merge metric states {theirs:?} into {names:?}");
        }
        for (e, o) in self.entries.iter_mut().zip(&other.entries) {
            match &o.value {
                Value::List(chunks) => {
                    for c in chunks {
                        combine(e, c)?;
                    }
                }
                Value::One(t) => combine(e, t)?,
            }
        }
        self.update_count += other.update_count;
        Ok(())
    }

    /// Warns as torchmetrics does when `compute` runs before any `update`.
    pub(crate) fn warn_if_not_updated(&self, metric: &str) {
        if self.update_count == 0 {
            pyrite_core::warnings::warn(
                "pyrite_metrics",
                &format!(
                    "The ``compute`` method of metric {metric} was called before the ``update`` method which may \
                     lead to errors, as metric states have not yet been updated."
                ),
            );
        }
    }
}

fn value_of(e: &Entry) -> Result<Tensor> {
    match &e.value {
        Value::One(t) => Ok(t.clone()),
        Value::List(chunks) if chunks.is_empty() => Ok(e.default.clone()),
        Value::List(chunks) if chunks.len() == 1 => Ok(chunks[0].clone()),
        Value::List(chunks) => Tensor::cat(chunks, 0),
    }
}

fn check_fits(e: &Entry, t: &Tensor) -> Result<()> {
    if t.dtype() != e.default.dtype() {
        bail!(DType, "state '{}' has dtype {}, got {}", e.name, e.default.dtype(), t.dtype());
    }
    let fits = match e.reduce {
        Reduce::Cat => t.rank() == e.default.rank() && t.dims()[1..] == e.default.dims()[1..],
        _ => t.dims() == e.default.dims(),
    };
    if !fits {
        bail!(Shape, "state '{}' has shape {}, got {}", e.name, e.default.shape(), t.shape());
    }
    Ok(())
}

fn combine(e: &mut Entry, batch: &Tensor) -> Result<()> {
    check_fits(e, batch)?;
    match (&mut e.value, e.reduce) {
        (Value::List(chunks), _) => chunks.push(batch.clone()),
        (Value::One(t), Reduce::Sum) => *t = t.add(batch)?,
        (Value::One(t), Reduce::Mean) => *t = t.add(batch)?.div_scalar(2.0)?.to_dtype(e.default.dtype())?,
        (Value::One(t), Reduce::Max) => *t = t.maximum(batch)?,
        (Value::One(t), Reduce::Min) => *t = t.minimum(batch)?,
        (Value::One(t), Reduce::Cat) => *t = Tensor::cat(&[t.clone(), batch.clone()], 0)?,
    }
    Ok(())
}
