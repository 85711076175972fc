//! Confusion matrices (torchmetrics' `BinaryConfusionMatrix`, `MulticlassConfusionMatrix`,
//! `MultilabelConfusionMatrix` and the `ConfusionMatrix(task=...)` wrapper), kept as a summed
//! count state `confmat`, rows the target and columns the prediction.

use pyrite_core::{DType, Result, Tensor};

use super::options::{check_num_classes, check_threshold};
use super::stat_scores::{binary_preds, check_multilabel_shapes, multiclass_labels};
use crate::input::{self, check_binary_target, check_same_shape};
use crate::metric::Metric;
use crate::state::{MetricStates, Reduce};

/// How a confusion matrix is normalized (torchmetrics' `normalize`). 0/0 cells become 0, with a
/// warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Normalize {
    /// Counts, as an int64 tensor (`None` / `"none"`, the default).
    #[default]
    None,
    /// Each row (target class) sums to 1 (`"true"`).
    True,
    /// Each column (predicted class) sums to 1 (`"pred"`).
    Pred,
    /// The whole matrix sums to 1 (`"all"`).
    All,
}

/// Options of the confusion matrices (`threshold` is for binary and multilabel predictions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfusionMatrixOptions {
    /// Probabilities above it are positive predictions (0.5).
    pub threshold: f64,
    /// A target value whose positions are left out (`None`).
    pub ignore_index: Option<i64>,
    /// The normalization (`Normalize::None`).
    pub normalize: Normalize,
}

impl Default for ConfusionMatrixOptions {
    fn default() -> Self {
        ConfusionMatrixOptions { threshold: 0.5, ignore_index: None, normalize: Normalize::None }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Task {
    Binary,
    Multiclass(usize),
    Multilabel(usize),
}

/// The confusion matrix of one task.
#[derive(Debug, Clone)]
struct Confmat {
    task: Task,
    options: ConfusionMatrixOptions,
    states: MetricStates,
}

impl Confmat {
    fn new(task: Task, options: ConfusionMatrixOptions) -> Result<Self> {
        let shape = match task {
            Task::Binary => vec![2, 2],
            Task::Multiclass(c) => {
                check_num_classes(c, "num_classes")?;
                vec![c, c]
            }
            Task::Multilabel(l) => {
                check_num_classes(l, "num_labels")?;
                vec![l, 2, 2]
            }
        };
        if !matches!(task, Task::Multiclass(_)) {
            check_threshold(options.threshold)?;
        }
        let mut states = MetricStates::new();
        states.add_state("confmat", Tensor::zeros(shape, DType::I64)?, Reduce::Sum)?;
        Ok(Confmat { task, options, states })
    }

    fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
        let ignore = self.options.ignore_index;
        let shape = self.states.get("confmat")?.dims().to_vec();
        let mut cm = vec![0i64; shape.iter().product()];
        match self.task {
            Task::Binary => {
                check_same_shape(preds, target)?;
                let t = input::labels(target, "target")?;
                check_binary_target(&t, ignore)?;
                let p = binary_preds(preds, self.options.threshold)?;
                for (&p, &t) in p.iter().zip(&t) {
                    if Some(t) != ignore {
                        cm[t as usize * 2 + p as usize] += 1;
                    }
                }
            }
            Task::Multiclass(c) => {
                let (p, t) = multiclass_labels(preds, target, c, 1, ignore)?;
                for (&p, &t) in p.iter().zip(&t) {
                    if Some(t) != ignore {
                        cm[t as usize * c + p as usize] += 1;
                    }
                }
            }
            Task::Multilabel(l) => {
                check_multilabel_shapes(preds, target, l)?;
                let t = input::labels(target, "target")?;
                check_binary_target(&t, ignore)?;
                let p = binary_preds(preds, self.options.threshold)?;
                let rest: usize = preds.dims()[2..].iter().product();
                for (i, (&p, &t)) in p.iter().zip(&t).enumerate() {
                    if Some(t) != ignore {
                        let label = (i / rest) % l;
                        cm[(label * 2 + t as usize) * 2 + p as usize] += 1;
                    }
                }
            }
        }
        self.states.accumulate("confmat", &Tensor::from_vec(cm, shape)?)?;
        self.states.count_update();
        Ok(())
    }

    /// `_confusion_matrix_reduce`.
    fn compute(&self) -> Result<Tensor> {
        let confmat = self.states.get("confmat")?;
        if self.options.normalize == Normalize::None {
            return Ok(confmat);
        }
        let dims = confmat.dims().to_vec();
        let n = dims[dims.len() - 1];
        let cm = input::floats(&confmat)?;
        let mut out = vec![0f32; cm.len()];
        let mut nans = 0;
        for (m, block) in cm.chunks(n * n).enumerate() {
            for i in 0..n {
                for j in 0..n {
                    let denom: f64 = match self.options.normalize {
                        Normalize::True => (0..n).map(|k| block[i * n + k]).sum(),
                        Normalize::Pred => (0..n).map(|k| block[k * n + j]).sum(),
                        _ => block.iter().sum(),
                    };
                    let v = (block[i * n + j] as f32) / (denom as f32);
                    out[m * n * n + i * n + j] = if v.is_nan() {
                        nans += 1;
                        0.0
                    } else {
                        v
                    };
                }
            }
        }
        if nans > 0 {
            pyrite_core::warnings::warn(
                "pyrite_metrics",
                &format!("{nans} NaN values found in confusion matrix have been replaced with zeros."),
            );
        }
        Tensor::from_vec(out, dims)
    }
}

macro_rules! confmat_metric {
    ($(#[$doc:meta])* $name:ident, $task:ident $(, $n:ident)?) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            inner: Confmat,
        }
        impl $name {
            /// A new confusion matrix; errors for options out of range.
            pub fn new($($n: usize,)? options: ConfusionMatrixOptions) -> Result<Self> {
                Ok(Self { inner: Confmat::new(Task::$task$(($n))?, options)? })
            }
        }
        impl Metric for $name {
            fn name(&self) -> &'static str {
                stringify!($name)
            }
            fn update(&mut self, preds: &Tensor, target: &Tensor) -> Result<()> {
                self.inner.update(preds, target)
            }
            fn compute(&self) -> Result<Tensor> {
                self.inner.states.warn_if_not_updated(stringify!($name));
                self.inner.compute()
            }
            fn metric_states(&self) -> &MetricStates {
                &self.inner.states
            }
            fn metric_states_mut(&mut self) -> &mut MetricStates {
                &mut self.inner.states
            }
        }
    };
}

confmat_metric!(
    /// The `[2, 2]` binary confusion matrix `[[tn, fp], [fn, tp]]`.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// use pyrite_metrics::{BinaryConfusionMatrix, ConfusionMatrixOptions, Metric};
    /// let mut cm = BinaryConfusionMatrix::new(ConfusionMatrixOptions::default())?;
    /// cm.update(&Tensor::new([0.35f32, 0.85, 0.48, 0.01])?, &Tensor::new([1i64, 1, 0, 0])?)?;
    /// assert_eq!(cm.compute()?.to_vec2::<i64>()?, vec![vec![2, 0], vec![1, 1]]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    BinaryConfusionMatrix, Binary
);
confmat_metric!(
    /// The `[C, C]` multiclass confusion matrix (row: target, column: prediction), from labels
    /// or `(N, C, ...)` scores (argmax).
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// use pyrite_metrics::{ConfusionMatrixOptions, Metric, MulticlassConfusionMatrix, Normalize};
    /// let opts = ConfusionMatrixOptions { normalize: Normalize::True, ..Default::default() };
    /// let mut cm = MulticlassConfusionMatrix::new(3, opts)?;
    /// cm.update(&Tensor::new([2i64, 1, 0, 1])?, &Tensor::new([2i64, 1, 0, 0])?)?;
    /// // Class 0 occurs twice, predicted once as 0 and once as 1.
    /// assert_eq!(cm.compute()?.to_vec2::<f32>()?[0], vec![0.5, 0.5, 0.0]);
    /// # Ok::<(), pyrite_core::Error>(())
    /// ```
    MulticlassConfusionMatrix, Multiclass, num_classes
);
confmat_metric!(
    /// One `[2, 2]` confusion matrix per label: `[L, 2, 2]`.
    MultilabelConfusionMatrix, Multilabel, num_labels
);

/// torchmetrics' `ConfusionMatrix(task=...)`: picks the task-specific metric.
pub struct ConfusionMatrix;

impl ConfusionMatrix {
    /// `ConfusionMatrix(task="binary", ...)`.
    pub fn binary(options: ConfusionMatrixOptions) -> Result<BinaryConfusionMatrix> {
        BinaryConfusionMatrix::new(options)
    }
    /// `ConfusionMatrix(task="multiclass", num_classes=..., ...)`.
    pub fn multiclass(
        num_classes: usize,
        options: ConfusionMatrixOptions,
    ) -> Result<MulticlassConfusionMatrix> {
        MulticlassConfusionMatrix::new(num_classes, options)
    }
    /// `ConfusionMatrix(task="multilabel", num_labels=..., ...)`.
    pub fn multilabel(
        num_labels: usize,
        options: ConfusionMatrixOptions,
    ) -> Result<MultilabelConfusionMatrix> {
        MultilabelConfusionMatrix::new(num_labels, options)
    }
}
