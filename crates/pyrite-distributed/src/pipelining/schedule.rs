//! The schedules: [`ScheduleGPipe`] and [`Schedule1F1B`]. Both split the batch into
//! micro-batches and run each stage's list of actions ([`super::actions`]) over a transport:
//! a thread per stage when this process holds every stage, or this rank's stage over the
//! process group.

use super::actions::{stage_actions, ScheduleKind};
use super::executor::{run_stage, StageInputs, StageOutcome};
use super::stage::PipelineStage;
use super::timeline::Timeline;
use super::transport::{ChannelTransport, GroupTransport, Transport as _};
use super::LossFn;
use crate::ProcessGroup;
use pyrite_core::{autograd, bail, err, Result, Tensor};
use std::sync::Arc;
use std::time::Instant;

/// Options of the schedules (PyTorch's keyword arguments).
#[derive(Clone, Debug)]
pub struct ScheduleOptions {
    /// Divide the accumulated gradients by `n_microbatches` after the backwards (true), as
    /// PyTorch does: with a loss function that averages over its micro-batch, the gradients
    /// are then those of the mean loss over the whole batch. False suits a summed loss.
    pub scale_grads: bool,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions { scale_grads: true }
    }
}

/// Where the stages run.
enum Placement {
    /// Every stage in this process, each on a thread.
    Threads,
    /// This process's one stage, on its rank of the group; the others on the other ranks.
    Group(ProcessGroup),
}

/// What the two schedules share: everything but the order of the actions.
struct Pipeline {
    kind: ScheduleKind,
    /// This process's stages, by index.
    stages: Vec<PipelineStage>,
    num_stages: usize,
    n_microbatches: usize,
    loss_fn: LossFn,
    options: ScheduleOptions,
    placement: Placement,
    timeline: Timeline,
}

impl Pipeline {
    fn new(
        kind: ScheduleKind,
        mut stages: Vec<PipelineStage>,
        n_microbatches: usize,
        loss_fn: LossFn,
        options: ScheduleOptions,
    ) -> Result<Pipeline> {
        let name = kind.name();
        let Some(first) = stages.first() else {
            bail!(Value, "{name}: no stage given");
        };
        let p = first.num_stages();
        if let Some(s) = stages.iter().find(|s| s.num_stages() != p) {
            bail!(Value, "{name}: the stages disagree on the number of stages ({p} and {})", s.num_stages());
        }
        stages.sort_by_key(|s| s.stage_index());
        if let Some(w) = stages.windows(2).find(|w| w[0].stage_index() == w[1].stage_index()) {
            bail!(Value, "{name}: stage {} is given twice", w[0].stage_index());
        }
        if n_microbatches == 0 {
            bail!(Value, "{name}: n_microbatches must be at least 1");
        }
        if kind == ScheduleKind::OneFOneB && n_microbatches < p {
            bail!(
                Value,
                "{name}: Number of microbatches ({n_microbatches}) must be greater than or equal to the number of stages ({p})."
            );
        }
        let placement = if stages.len() == p {
            Placement::Threads
        } else if stages.len() == 1 {
            let stage = &stages[0];
            let group = match stage.group() {
                Some(g) => g.clone(),
                None => crate::default_group().map_err(|_| {
                    err!(
                        Value,
                        "{name}: this process holds 1 of the {p} stages, so the others must be on the other ranks of a process group, \
                         but the default process group has not been initialized (call init_process_group), or give all {p} stages to run them on threads here"
                    )
                })?,
            };
            if group.size() != p {
                bail!(
                    Value,
                    "{name}: the pipeline has {p} stages but the process group has {} ranks: run one stage on each rank",
                    group.size()
                );
            }
            let Some(rank) = group.rank() else {
                bail!(Value, "{name}: this process is not a member of the stage's process group");
            };
            if rank != stage.stage_index() {
                bail!(
                    Value,
                    "{name}: stage {} must run on rank {} of the process group, but this process is rank {rank}",
                    stage.stage_index(),
                    stage.stage_index()
                );
            }
            Placement::Group(group)
        } else {
            bail!(
                Value,
                "{name}: give all {p} stages (to run them on threads in this process) or the one stage of this rank, got {}",
                stages.len()
            );
        };
        Ok(Pipeline {
            kind,
            stages,
            num_stages: p,
            n_microbatches,
            loss_fn,
            options,
            placement,
            timeline: Timeline::default(),
        })
    }

    /// Splits `t` along dim 0 into the micro-batches.
    fn split(&self, t: Option<&Tensor>, what: &str, who: &str) -> Result<Vec<Tensor>> {
        let name = self.kind.name();
        let Some(t) = t else {
            bail!(Value, "{name}.step: the {who} needs the {what}");
        };
        let m = self.n_microbatches;
        let batch = match t.dims().first() {
            Some(&b) => b,
            None => bail!(Value, "{name}.step: the {what} is a scalar; it needs a batch dimension to split"),
        };
        if !batch.is_multiple_of(m) {
            bail!(
                Value,
                "{name}.step: n_microbatches={m} does not divide the {what}'s batch size {batch} (dim 0)"
            );
        }
        t.chunk(m, 0)
    }

    fn step(&mut self, input: Option<&Tensor>, target: Option<&Tensor>) -> Result<Vec<Tensor>> {
        let name = self.kind.name();
        if !autograd::is_grad_enabled() {
            bail!(
                Autograd,
                "{name}.step() requires gradients to be enabled for backward computation; it should not be used under no_grad()"
            );
        }
        let holds_first = self.stages[0].is_first();
        let holds_last = self.stages[self.stages.len() - 1].is_last();
        let microbatches = if holds_first { Some(self.split(input, "input", "first stage")?) } else { None };
        let targets = if holds_last { Some(self.split(target, "target", "last stage")?) } else { None };
        let inputs = StageInputs {
            microbatches: microbatches.as_deref(),
            targets: targets.as_deref(),
            loss_fn: &self.loss_fn,
            scale_grads: self.options.scale_grads,
        };
        let (p, m, kind) = (self.num_stages, self.n_microbatches, self.kind);
        let t0 = Instant::now();
        let outcomes = match &self.placement {
            Placement::Threads => {
                let outcomes = run_on_threads(&self.stages, kind, m, &inputs, t0)?;
                let span = t0.elapsed();
                outcomes
                    .into_iter()
                    .map(|mut o| {
                        o.timeline.span = span;
                        o
                    })
                    .collect()
            }
            Placement::Group(group) => {
                let stage = &self.stages[0];
                let s = stage.stage_index();
                let global = |i: usize| group.ranks()[i];
                let mut transport = GroupTransport {
                    group: group.clone(),
                    stage: s,
                    prev: (s > 0).then(|| global(s - 1)),
                    next: (s + 1 < p).then(|| global(s + 1)),
                    n_microbatches: m,
                    kind,
                    pending: Vec::new(),
                };
                let actions = stage_actions(kind, s, p, m);
                vec![run_stage(stage, &actions, &inputs, &mut transport, t0)?]
            }
        };
        let mut losses = Vec::new();
        let mut timeline = Timeline::default();
        for o in outcomes {
            if !o.losses.is_empty() {
                losses = o.losses;
            }
            timeline.stages.push(o.timeline);
        }
        self.timeline = timeline;
        Ok(losses)
    }
}

/// Runs every stage on a thread of its own, linked by channels; the first error that is not
/// a consequence of another stage's failure is the step's error.
fn run_on_threads(
    stages: &[PipelineStage],
    kind: ScheduleKind,
    m: usize,
    inputs: &StageInputs<'_>,
    t0: Instant,
) -> Result<Vec<StageOutcome>> {
    let p = stages.len();
    let results: Vec<(Result<StageOutcome>, bool)> = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(p);
        for (stage, mut transport) in stages.iter().zip(ChannelTransport::chain(p)) {
            let actions = stage_actions(kind, stage.stage_index(), p, m);
            let spawned = std::thread::Builder::new()
                .name(format!("pipeline-stage-{}", stage.stage_index()))
                .spawn_scoped(scope, move || {
                    let r = run_stage(stage, &actions, inputs, &mut transport, t0);
                    let neighbour_failed = transport.neighbour_failed();
                    (r, neighbour_failed)
                });
            handles.push(spawned);
        }
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| match h {
                Err(e) => {
                    (Err(err!(Distributed, "could not start the thread of pipeline stage {i}: {e}")), false)
                }
                Ok(h) => h.join().unwrap_or_else(|panic| {
                    let msg = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("a panic");
                    (Err(err!(Distributed, "pipeline stage {i} panicked: {msg}")), false)
                }),
            })
            .collect()
    });
    let mut outcomes = Vec::with_capacity(p);
    let mut first_err: Option<(pyrite_core::Error, bool)> = None;
    for (r, neighbour_failed) in results {
        match r {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                let replace = match &first_err {
                    None => true,
                    Some((_, was_neighbour)) => *was_neighbour && !neighbour_failed,
                };
                if replace {
                    first_err = Some((e, neighbour_failed));
                }
            }
        }
    }
    match first_err {
        Some((e, _)) => Err(e),
        None => Ok(outcomes),
    }
}

macro_rules! schedule {
    ($(#[$doc:meta])* $name:ident, $kind:expr) => {
        $(#[$doc])*
        pub struct $name(Pipeline);

        impl $name {
            /// Builds the schedule over `stages`: every stage of the pipeline (each then runs
            /// on a thread of this process), or this rank's one stage (the others are on the
            /// other ranks of the stage's process group, stage `i` on rank `i`). Each step
            /// splits the batch into `n_microbatches` along dim 0; `loss_fn(output, target)`
            /// gives the last stage's loss for a micro-batch.
            pub fn new(
                stages: Vec<PipelineStage>,
                n_microbatches: usize,
                loss_fn: impl Fn(&Tensor, &Tensor) -> Result<Tensor> + Send + Sync + 'static,
                options: ScheduleOptions,
            ) -> Result<$name> {
                Ok($name(Pipeline::new($kind, stages, n_microbatches, Arc::new(loss_fn), options)?))
            }

            /// `schedule.step(input, target=target)`: one training step on a whole batch.
            /// The process that holds stage 0 passes the `input`, the one that holds the last
            /// stage the `target` (on threads, one process passes both); others pass `None`.
            /// Each micro-batch runs forward and backward through the stages in this
            /// schedule's order, adding its gradients to the stages' parameters (so an
            /// optimizer step may follow; zero the gradients before, since with
            /// `scale_grads` the whole `.grad` is divided, as in PyTorch).
            ///
            /// Returns each micro-batch's loss (detached, unscaled) where the last stage is,
            /// and nothing elsewhere.
            pub fn step(&mut self, input: Option<&Tensor>, target: Option<&Tensor>) -> Result<Vec<Tensor>> {
                self.0.step(input, target)
            }

            /// When each stage of this process computed what during the last step.
            pub fn timeline(&self) -> &Timeline {
                &self.0.timeline
            }

            /// The number of micro-batches a step splits the batch into.
            pub fn n_microbatches(&self) -> usize {
                self.0.n_microbatches
            }

            /// The stages this process holds.
            pub fn stages(&self) -> &[PipelineStage] {
                &self.0.stages
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "{}(num_stages={}, n_microbatches={}, stages here={:?})",
                    stringify!($name),
                    self.0.num_stages,
                    self.0.n_microbatches,
                    self.0.stages.iter().map(|s| s.stage_index()).collect::<Vec<_>>()
                )
            }
        }
    };
}

schedule!(
    /// `torch.distributed.pipelining.ScheduleGPipe`: fill-drain. Every stage runs the
    /// forwards of all micro-batches, then their backwards. Simple, but every stage keeps
    /// the activations of all `m` micro-batches, and with `p` stages of equal cost each is
    /// idle `(p - 1) / (m + p - 1)` of the step.
    ScheduleGPipe,
    ScheduleKind::GPipe
);

schedule!(
    /// `torch.distributed.pipelining.Schedule1F1B`: after filling the pipeline, each stage
    /// alternates one backward and one forward, so stage `s` holds the activations of at
    /// most `p - s` micro-batches (GPipe: all `m`); the idle time is GPipe's. Needs at least
    /// as many micro-batches as stages, as in PyTorch.
    Schedule1F1B,
    ScheduleKind::OneFOneB
);
