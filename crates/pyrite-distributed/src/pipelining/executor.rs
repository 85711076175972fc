//! Running one stage's list of actions: forward and backward of micro-batches, with the
//! activations and gradients moved by a [`Transport`] and each computation timed.

use super::actions::Action;
use super::stage::PipelineStage;
use super::timeline::{ActionKind, Event, StageTimeline};
use super::transport::Transport;
use super::LossFn;
use pyrite_core::{autograd, bail, Result, Tensor};
use std::time::Instant;

/// What a stage is given for one step.
pub(crate) struct StageInputs<'a> {
    /// The micro-batches (stage 0 only).
    pub microbatches: Option<&'a [Tensor]>,
    /// The targets' micro-batches (last stage only).
    pub targets: Option<&'a [Tensor]>,
    pub loss_fn: &'a LossFn,
    /// Divide the gradients by the number of micro-batches at the end.
    pub scale_grads: bool,
}

/// What a stage leaves after a step.
pub(crate) struct StageOutcome {
    /// The unscaled loss of each micro-batch (last stage only), detached.
    pub losses: Vec<Tensor>,
    pub timeline: StageTimeline,
}

/// A forward's leftovers for its backward: the input (a leaf that collects the gradient to
/// send back, on every stage but the first) and the output (the loss on the last stage).
struct Saved {
    input: Tensor,
    output: Tensor,
}

/// Runs `actions` on `stage`; times are measured from `t0`.
pub(crate) fn run_stage(
    stage: &PipelineStage,
    actions: &[Action],
    inputs: &StageInputs<'_>,
    transport: &mut dyn Transport,
    t0: Instant,
) -> Result<StageOutcome> {
    let m = actions.len() / 2;
    let s = stage.stage_index();
    let mut saved: Vec<Option<Saved>> = (0..m).map(|_| None).collect();
    let mut losses: Vec<Option<Tensor>> = vec![None; m];
    let mut events = Vec::with_capacity(actions.len());
    for &Action { kind, microbatch: mb } in actions {
        match kind {
            ActionKind::Forward => {
                let input = if stage.is_first() {
                    match inputs.microbatches {
                        Some(x) => x[mb].clone(),
                        None => bail!(Value, "pipeline stage 0 needs the input batch"),
                    }
                } else {
                    transport.recv_activation(mb)?.requires_grad_(true)?
                };
                let start = t0.elapsed();
                let mut output = stage.module().call(&input)?;
                if stage.is_last() {
                    let target = match inputs.targets {
                        Some(t) => &t[mb],
                        None => {
                            bail!(Value, "the last pipeline stage ({s}) needs the target to compute the loss")
                        }
                    };
                    output = (inputs.loss_fn)(&output, target)?;
                    if output.numel() != 1 {
                        bail!(
                            Value,
                            "the pipeline's loss function must return a scalar, got a tensor of shape {:?}",
                            output.dims()
                        );
                    }
                    losses[mb] = Some(output.detach());
                }
                events.push(Event { microbatch: mb, kind, start, end: t0.elapsed() });
                if !stage.is_last() {
                    transport.send_activation(mb, &output)?;
                }
                saved[mb] = Some(Saved { input, output });
            }
            ActionKind::Backward => {
                let Some(Saved { input, output }) = saved[mb].take() else {
                    bail!(Value, "pipeline stage {s}: backward of micro-batch {mb} before its forward");
                };
                let grad = if stage.is_last() { None } else { Some(transport.recv_grad(mb, &output)?) };
                let start = t0.elapsed();
                if output.requires_grad() {
                    let seed: Vec<&Tensor> = grad.iter().collect();
                    autograd::backward(&[&output], grad.as_ref().map(|_| &seed[..]), None, false)?;
                }
                events.push(Event { microbatch: mb, kind, start, end: t0.elapsed() });
                if !stage.is_first() {
                    let g = match input.grad() {
                        Some(g) => g,
                        None => input.zeros_like()?,
                    };
                    transport.send_grad(mb, &g)?;
                }
            }
        }
    }
    transport.flush()?;
    if inputs.scale_grads && m > 1 {
        let _ng = autograd::no_grad();
        for p in stage.parameters() {
            if let Some(g) = p.grad() {
                g.div_scalar_(m as f64)?;
            }
        }
    }
    let losses = losses.into_iter().flatten().collect();
    Ok(StageOutcome { losses, timeline: StageTimeline { stage_index: s, span: t0.elapsed(), events } })
}
