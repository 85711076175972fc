//! [`PipelineStage`]: one piece of the model, with its place in the pipeline, and
//! [`split_sequential`], which cuts a `Sequential` into such pieces.

use crate::ProcessGroup;
use pyrite_core::{bail, Result, Tensor};
use pyrite_nn::{Module, Sequential};
use std::sync::Arc;

/// Options of [`PipelineStage::new`] (PyTorch's keyword arguments of `PipelineStage`).
#[derive(Clone, Debug, Default)]
pub struct StageOptions {
    /// The group whose ranks hold the stages when they run on several processes: stage `i` on
    /// the group's rank `i`. `None` is the default group. Unused when every stage is in this
    /// process.
    pub group: Option<ProcessGroup>,
}

/// `torch.distributed.pipelining.PipelineStage(submodule, stage_index, num_stages)`: stage
/// `stage_index` of a pipeline of `num_stages`, running `module`. Its input is the previous
/// stage's output (the micro-batch itself for stage 0); the last stage's output goes to the
/// loss function. Cloning shares the module.
#[derive(Clone)]
pub struct PipelineStage {
    module: Arc<dyn Module>,
    stage_index: usize,
    num_stages: usize,
    group: Option<ProcessGroup>,
}

impl PipelineStage {
    /// Stage `stage_index` (from 0) of `num_stages`, running `module`.
    pub fn new(
        module: impl Module,
        stage_index: usize,
        num_stages: usize,
        options: StageOptions,
    ) -> Result<PipelineStage> {
        PipelineStage::from_shared(Arc::new(module), stage_index, num_stages, options)
    }

    /// As [`PipelineStage::new`], for a module that is also held elsewhere (a slice of the
    /// whole model, say: the gradients land in the shared parameters).
    pub fn from_shared(
        module: Arc<dyn Module>,
        stage_index: usize,
        num_stages: usize,
        options: StageOptions,
    ) -> Result<PipelineStage> {
        if num_stages == 0 {
            bail!(Value, "PipelineStage: num_stages must be at least 1");
        }
        if stage_index >= num_stages {
            bail!(Value, "PipelineStage: stage_index {stage_index} is out of range for {num_stages} stages");
        }
        Ok(PipelineStage { module, stage_index, num_stages, group: options.group })
    }

    /// This stage's index, from 0.
    pub fn stage_index(&self) -> usize {
        self.stage_index
    }

    /// The number of stages in the pipeline.
    pub fn num_stages(&self) -> usize {
        self.num_stages
    }

    /// Whether this is stage 0 (it reads the micro-batches).
    pub fn is_first(&self) -> bool {
        self.stage_index == 0
    }

    /// Whether this is the last stage (its output goes to the loss function).
    pub fn is_last(&self) -> bool {
        self.stage_index + 1 == self.num_stages
    }

    /// The stage's module (`stage.submod`).
    pub fn module(&self) -> &dyn Module {
        &*self.module
    }

    pub(crate) fn group(&self) -> Option<&ProcessGroup> {
        self.group.as_ref()
    }

    /// The trainable parameters, whose gradients a schedule step accumulates.
    pub(crate) fn parameters(&self) -> Vec<Tensor> {
        self.module.parameters().into_iter().filter(|p| p.requires_grad()).collect()
    }
}

impl std::fmt::Debug for PipelineStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PipelineStage(stage_index={}, num_stages={})", self.stage_index, self.num_stages)
    }
}

/// Cuts `model` into `split_points.len() + 1` stages: each split point is the index of the
/// layer that begins the next stage (PyTorch's `SplitPoint.BEGINNING`), so `&[2, 4]` makes
/// stages of layers `0..2`, `2..4` and `4..`. The stages share the model's layers (as
/// `Sequential::slice` does), so their gradients are the model's and an optimizer over
/// `model.parameters()` steps them. The stages get default [`StageOptions`].
///
/// ```
/// use pyrite::nn::{Linear, Module, ReLU, Sequential};
/// use pyrite_distributed::pipelining::split_sequential;
/// let model = Sequential::new().append(Linear::new(4, 8)?).append(ReLU::new()).append(Linear::new(8, 2)?);
/// let stages = split_sequential(&model, &[2])?;
/// assert_eq!(stages.len(), 2);
/// assert_eq!((stages[1].stage_index(), stages[1].num_stages()), (1, 2));
/// assert!(stages[1].module().get_parameter("2.weight")?.is_same(&model.get_parameter("2.weight")?));
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn split_sequential(model: &Sequential, split_points: &[usize]) -> Result<Vec<PipelineStage>> {
    let n = model.len();
    let mut bounds = Vec::with_capacity(split_points.len() + 2);
    bounds.push(0);
    for &p in split_points {
        let last = *bounds.last().unwrap_or(&0);
        if p <= last || p >= n {
            bail!(
                Value,
                "split_sequential: split points must be increasing and inside the model's {n} layers (between 1 and {}), got {split_points:?}",
                n.saturating_sub(1)
            );
        }
        bounds.push(p);
    }
    bounds.push(n);
    if n == 0 {
        bail!(Value, "split_sequential: the model has no layers");
    }
    let num_stages = bounds.len() - 1;
    bounds
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let part: Arc<dyn Module> = Arc::new(model.slice(w[0]..w[1]));
            PipelineStage::from_shared(part, i, num_stages, StageOptions::default())
        })
        .collect()
}
