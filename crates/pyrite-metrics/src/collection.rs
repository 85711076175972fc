//! [`MetricCollection`]: named metrics fed the same batches (torchmetrics' `MetricCollection`).

use std::collections::BTreeMap;

use pyrite_core::{bail, Error, Result, Tensor};

use crate::metric::Metric;

/// Metrics updated together, each under a name, with an optional prefix and postfix put on the
/// names of the computed values (`MetricCollection(..., prefix="val_")`).
///
/// ```
/// use pyrite_core::Tensor;
/// use pyrite_metrics::{MetricCollection, MulticlassAccuracy, MulticlassOptions, MulticlassF1Score};
/// let mut metrics = MetricCollection::new()
///     .with("acc", MulticlassAccuracy::new(3, MulticlassOptions::default())?)?
///     .with("f1", MulticlassF1Score::new(3, MulticlassOptions::default())?)?
///     .prefix("val_");
/// metrics.update(&Tensor::new([0i64, 2, 1, 2])?, &Tensor::new([0i64, 2, 2, 2])?)?;
/// let values = metrics.compute()?;
/// assert_eq!(values.keys().collect::<Vec<_>>(), ["val_acc", "val_f1"]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Default)]
pub struct MetricCollection {
    metrics: Vec<(String, Box<dyn Metric>)>,
    prefix: String,
    postfix: String,
}

impl MetricCollection {
    /// No metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a metric under `name`; errors for a name already taken.
    pub fn with(mut self, name: impl Into<String>, metric: impl Metric + 'static) -> Result<Self> {
        self.add(name, Box::new(metric))?;
        Ok(self)
    }

    /// Adds a boxed metric under `name`; errors for a name already taken.
    pub fn add(&mut self, name: impl Into<String>, metric: Box<dyn Metric>) -> Result<()> {
        let name = name.into();
        if self.metrics.iter().any(|(n, _)| *n == name) {
            bail!(Value, "MetricCollection already has a metric named '{name}'");
        }
        self.metrics.push((name, metric));
        Ok(())
    }

    /// Puts `prefix` before every name of the computed values.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Puts `postfix` after every name of the computed values.
    pub fn postfix(mut self, postfix: impl Into<String>) -> Self {
        self.postfix = postfix.into();
        self
    }

    /// The metric under `name` (without prefix).
    pub fn get(&self, name: &str) -> Option<&dyn Metric> {
        self.metrics.iter().find(|(n, _)| n == name).map(|(_, m)| m.as_ref())
    }

    /// The metric under `name`, to change it.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut (dyn Metric + 'static)> {
        self.metrics.iter_mut().find(|(n, _)| n == name).map(|(_, m)| m.as_mut())
    }

    /// The names of the metrics, in insertion order (without prefix).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.metrics.iter().map(|(n, _)| n.as_str())
    }

    /// The number of metrics.
    pub fn len(&self) -> usize {
        self.metrics.len()
    }

    /// Whether there are no metrics.
    pub fn is_empty(&self) -> bool {
        self.metrics.is_empty()
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}{}", self.prefix, self.postfix)
    }

    /// Updates every metric with the batch. If one fails, the metrics before it have been
    /// updated already and the error names the failing metric.
    pub fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        for (name, m) in &mut self.metrics {
            m.update(preds, target).map_err(|e| in_metric(name, e))?;
        }
        Ok(())
    }

    /// Every metric's value, by prefixed name.
    pub fn compute(&self) -> Result<BTreeMap<String, Tensor>> {
        self.metrics.iter().map(|(name, m)| Ok((self.key(name), m.compute()?))).collect()
    }

    /// Every metric's value on this batch alone, while accumulating it (`forward`).
    pub fn forward(&mut self, preds: &Tensor, target: &Tensor) -> Result<BTreeMap<String, Tensor>> {
        let mut out = BTreeMap::new();
        for i in 0..self.metrics.len() {
            let key = self.key(&self.metrics[i].0);
            let (name, m) = &mut self.metrics[i];
            let v = m.forward(preds, target).map_err(|e| in_metric(name, e))?;
            out.insert(key, v);
        }
        Ok(out)
    }

    /// Resets every metric.
    pub fn reset(&mut self) {
        for (_, m) in &mut self.metrics {
            m.reset();
        }
    }
}

/// The error with the name of the metric that raised it, of the same kind.
fn in_metric(name: &str, e: Error) -> Error {
    Error::new(e.kind(), format!("metric '{name}': {}", e.message()))
}

impl std::fmt::Debug for MetricCollection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricCollection")
            .field("metrics", &self.metrics.iter().map(|(n, m)| (n.as_str(), m.name())).collect::<Vec<_>>())
            .field("prefix", &self.prefix)
            .field("postfix", &self.postfix)
            .finish()
    }
}
