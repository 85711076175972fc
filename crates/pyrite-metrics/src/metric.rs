//! The [`Metric`] trait: torchmetrics' `Metric` for metrics fed `(preds, target)`.

use pyrite_core::{Result, Tensor};

use crate::state::{MetricState, MetricStates};

/// A metric accumulated over batches (torchmetrics' `Metric`): [`update`](Metric::update) adds
/// a batch to the state, [`compute`](Metric::compute) gives the value over everything seen,
/// [`forward`](Metric::forward) gives the value of one batch while also accumulating it.
///
/// The state is a set of named tensors with their [`Reduce`](crate::Reduce)
/// ([`states`](Metric::states)), so copies of a metric in different processes can be
/// all-reduced and [loaded](Metric::load_states) back, or [merged](Metric::merge_states).
/// The trait is object safe: a [`MetricCollection`](crate::MetricCollection) holds
/// `Box<dyn Metric>`.
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{BinaryAccuracy, BinaryOptions, Metric};
/// let mut acc = BinaryAccuracy::new(BinaryOptions::default())?;
/// let batch = acc.forward(&Tensor::new([0.9f32, 0.2, 0.7])?, &Tensor::new([1i64, 0, 0])?)?;
/// assert!((batch.item::<f64>()? - 2.0 / 3.0).abs() < 1e-6);
/// acc.update(&Tensor::new([0.1f32])?, &Tensor::new([0i64])?)?;
/// assert_eq!(acc.compute()?.item::<f64>()?, 0.75);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub trait Metric {
    /// The metric's type name (`"BinaryAccuracy"`), used in warnings.
    fn name(&self) -> &'static str;

    /// Adds a batch to the state.
    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()>;

    /// The value over every batch since the last reset. Before any update it warns, as
    /// torchmetrics does, and computes from the default state.
    fn compute(&self) -> Result<Tensor>;

    /// The states, read-only.
    fn metric_states(&self) -> &MetricStates;

    /// The states, to change them.
    fn metric_states_mut(&mut self) -> &mut MetricStates;

    /// Forgets every batch.
    fn reset(&mut self) {
        self.metric_states_mut().reset();
    }

    /// torchmetrics' `forward` (`metric(preds, target)`): the value on this batch alone, while
    /// the batch is also accumulated into the global state. On error the state is unchanged.
    fn forward(&mut self, preds: &Tensor, target: &Tensor) -> Result<Tensor> {
        let global = self.metric_states().clone();
        self.metric_states_mut().reset();
        let batch_value = self.update(preds, target).and_then(|()| self.compute());
        let batch = std::mem::replace(self.metric_states_mut(), global);
        let value = batch_value?;
        self.metric_states_mut().merge(&batch)?;
        Ok(value)
    }

    /// A snapshot of the states, each with its reduction (for an all-reduce).
    fn states(&self) -> Result<Vec<MetricState>> {
        self.metric_states().snapshot()
    }

    /// Replaces the states' values (after an all-reduce, or to restore a snapshot).
    fn load_states(&mut self, states: &[MetricState]) -> Result<()> {
        self.metric_states_mut().load(states)
    }

    /// Combines the states of another copy of this metric into this one, by each state's
    /// reduction (`merge_state` in torchmetrics).
    fn merge_states(&mut self, other: &MetricStates) -> Result<()> {
        self.metric_states_mut().merge(other)
    }

    /// The number of updates since the last reset.
    fn update_count(&self) -> usize {
        self.metric_states().update_count()
    }
}
