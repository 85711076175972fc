//! Collation (`torch.utils.data.default_collate`): merging a list of samples into a batch.

use std::collections::BTreeMap;

use pyrite_core::{bail, Result, Tensor};

use crate::sample::Sample;

/// Merges a batch of samples into one (`torch.utils.data.default_collate`):
///
/// - tensors are stacked along a new dim 0 (they must have the same shape);
/// - ints become an int64 tensor, floats a float64 tensor, bools a bool tensor;
/// - strings become a list of strings;
/// - tuples (lists) of the same length become a tuple (list) of the collated columns;
/// - dicts become a dict of the collated values, with the keys of the first element.
///
/// Every element must have the same kind as the first. An empty batch is an error.
///
/// (PyTorch returns a list for a batch of plain tuples, for backwards compatibility; here a
/// batch of tuples collates to a tuple, so `(x, y)` samples give an `(xs, ys)` batch.)
pub fn default_collate(batch: Vec<Sample>) -> Result<Sample> {
    let Some(first) = batch.first() else {
        bail!(Value, "default_collate: the batch is empty");
    };
    let kind = first.kind();
    if let Some((i, s)) = batch.iter().enumerate().find(|(_, s)| s.kind() != kind) {
        bail!(
            Value,
            "default_collate: batch elements must all be of the same kind, but element 0 is of kind {kind} and element {i} of kind {}",
            s.kind()
        );
    }
    let n = batch.len();
    match first {
        Sample::Tensor(_) => {
            let ts: Vec<Tensor> = batch.into_iter().map(Sample::into_tensor).collect::<Result<_>>()?;
            Ok(Sample::Tensor(Tensor::stack(&ts, 0)?))
        }
        Sample::Int(_) => {
            let v: Vec<i64> = batch.iter().map(Sample::as_int).collect::<Result<_>>()?;
            Ok(Sample::Tensor(Tensor::from_vec(v, n)?))
        }
        Sample::Float(_) => {
            let v: Vec<f64> = batch.iter().map(Sample::as_float).collect::<Result<_>>()?;
            Ok(Sample::Tensor(Tensor::from_vec(v, n)?))
        }
        Sample::Bool(_) => {
            let v: Vec<bool> = batch.iter().map(Sample::as_bool).collect::<Result<_>>()?;
            Ok(Sample::Tensor(Tensor::from_vec(v, n)?))
        }
        Sample::Str(_) => Ok(Sample::List(batch)),
        Sample::Tuple(_) => {
            let rows = batch.into_iter().map(Sample::into_tuple).collect::<Result<Vec<_>>>()?;
            Ok(Sample::Tuple(collate_columns(rows)?))
        }
        Sample::List(_) => {
            let rows = batch.into_iter().map(Sample::into_list).collect::<Result<Vec<_>>>()?;
            Ok(Sample::List(collate_columns(rows)?))
        }
        Sample::Map(_) => {
            let mut maps = batch.into_iter().map(Sample::into_map).collect::<Result<Vec<_>>>()?;
            let keys: Vec<String> = maps[0].keys().cloned().collect();
            let mut out = BTreeMap::new();
            for key in keys {
                let mut column = Vec::with_capacity(n);
                for (i, m) in maps.iter_mut().enumerate() {
                    match m.remove(&key) {
                        Some(v) => column.push(v),
                        None => {
                            bail!(Index, "default_collate: key '{key}' is missing from batch element {i}")
                        }
                    }
                }
                out.insert(key, default_collate(column)?);
            }
            Ok(Sample::Map(out))
        }
    }
}

/// Transposes equal-length rows into columns and collates each column.
fn collate_columns(rows: Vec<Vec<Sample>>) -> Result<Vec<Sample>> {
    let width = rows[0].len();
    if rows.iter().any(|r| r.len() != width) {
        bail!(Value, "each element in list of batch should be of equal size");
    }
    let mut columns: Vec<Vec<Sample>> = (0..width).map(|_| Vec::with_capacity(rows.len())).collect();
    for row in rows {
        for (c, v) in columns.iter_mut().zip(row) {
            c.push(v);
        }
    }
    columns.into_iter().map(default_collate).collect()
}
