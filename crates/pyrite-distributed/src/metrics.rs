//! Metrics over every process (torchmetrics' `dist_sync_on_step` / `sync_on_compute`): each
//! state of a [`Metric`] combined across a group by its own reduction.

use crate::{ProcessGroup, ReduceOp};
use pyrite_core::{DType, Result, Tensor};
use pyrite_metrics::{Metric, MetricState, Reduce};

/// Combines `metric`'s states over the group's processes (`None`: the default group), each by
/// its reduction: sums, means, maxima and minima are all-reduced, concatenated states are
/// gathered in rank order. Afterwards every process holds the states of all the batches.
pub fn sync_metric(metric: &mut dyn Metric, group: Option<&ProcessGroup>) -> Result<()> {
    let group = match group {
        Some(g) => g.clone(),
        None => crate::default_group()?,
    };
    let states = metric.states()?;
    let mut synced = Vec::with_capacity(states.len());
    for s in states {
        let value = match s.reduce {
            Reduce::Cat => gather_rows(&group, &s.value)?,
            r => {
                let v = s.value.deep_clone()?;
                let op = match r {
                    Reduce::Sum => ReduceOp::Sum,
                    Reduce::Max => ReduceOp::Max,
                    Reduce::Min => ReduceOp::Min,
                    _ => ReduceOp::Avg,
                };
                // integer means go through f64 (AVG needs a floating-point tensor)
                if op == ReduceOp::Avg && !v.dtype().is_floating_point() {
                    let f = v.to_dtype(DType::F64)?;
                    group.all_reduce(&f, op)?.wait()?;
                    f.to_dtype(v.dtype())?
                } else {
                    group.all_reduce(&v, op)?.wait()?;
                    v
                }
            }
        };
        synced.push(MetricState { name: s.name, value, reduce: s.reduce });
    }
    metric.load_states(&synced)
}

/// torchmetrics' `compute()` in a distributed run: the value over every process's batches,
/// leaving this process's own states as they were (`sync` then `unsync`).
///
/// ```no_run
/// use pyrite_core::Tensor;
/// use pyrite_distributed as dist;
/// use pyrite_metrics::{BinaryAccuracy, Metric};
/// dist::init_process_group("mpi", Default::default())?;
/// let mut acc = BinaryAccuracy::new(Default::default())?;
/// acc.update(&Tensor::new([0.9f32, 0.1])?, &Tensor::new([1i64, 1])?)?; // this rank's batch
/// let all = dist::compute_synced(&mut acc, None)?; // accuracy over every rank's batches
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn compute_synced(metric: &mut dyn Metric, group: Option<&ProcessGroup>) -> Result<Tensor> {
    let local = metric.states()?;
    sync_metric(metric, group)?;
    let value = metric.compute();
    metric.load_states(&local)?;
    value
}

/// Every rank's `t` (any number of rows) concatenated along dim 0 in rank order.
fn gather_rows(group: &ProcessGroup, t: &Tensor) -> Result<Tensor> {
    let n = group.size();
    let t = if t.rank() == 0 { t.reshape([1])? } else { t.clone() };
    let rows = Tensor::from_vec(vec![t.dims()[0] as i64], [1])?;
    let all_rows = Tensor::zeros([n], DType::I64)?;
    group.all_gather_into_tensor(&all_rows, &rows)?.wait()?;
    let all_rows: Vec<i64> = all_rows.to_vec()?;
    let max = *all_rows.iter().max().unwrap_or(&0) as usize;
    let mut shape = t.dims().to_vec();
    shape[0] = max;
    let padded = Tensor::zeros(shape.clone(), t.dtype())?;
    if t.dims()[0] > 0 {
        padded.narrow(0, 0, t.dims()[0])?.copy_(&t)?;
    }
    shape[0] = max * n;
    let gathered = Tensor::zeros(shape, t.dtype())?;
    group.all_gather_into_tensor(&gathered, &padded)?.wait()?;
    let pieces: Vec<Tensor> = (0..n)
        .map(|r| gathered.narrow(0, (r * max) as isize, all_rows[r] as usize))
        .collect::<Result<_>>()?;
    Tensor::cat(&pieces, 0)
}
