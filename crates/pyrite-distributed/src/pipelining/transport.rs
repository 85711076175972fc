//! How activations go forward and gradients backward between neighbouring stages: channels
//! between threads of one process, or point-to-point messages of a process group. The
//! schedule's code ([`super::executor`]) is the same over both.

use super::actions::ScheduleKind;
use crate::{ProcessGroup, Work};
use pyrite_core::{bail, err, DType, Result, Tensor};
use std::sync::mpsc::{Receiver, Sender};

/// A stage's links to its neighbours. Sends never block; receives wait.
pub(crate) trait Transport {
    /// Sends micro-batch `mb`'s output to the next stage.
    fn send_activation(&mut self, mb: usize, t: &Tensor) -> Result<()>;
    /// Receives micro-batch `mb`'s input from the previous stage.
    fn recv_activation(&mut self, mb: usize) -> Result<Tensor>;
    /// Sends the gradient of micro-batch `mb`'s input to the previous stage.
    fn send_grad(&mut self, mb: usize, t: &Tensor) -> Result<()>;
    /// Receives the gradient of micro-batch `mb`'s output (shaped as `output`) from the next
    /// stage.
    fn recv_grad(&mut self, mb: usize, output: &Tensor) -> Result<Tensor>;
    /// Waits until every send has left.
    fn flush(&mut self) -> Result<()>;
    /// Whether the last error came from a neighbour that stopped (so the neighbour's own
    /// error is the one to report).
    fn neighbour_failed(&self) -> bool {
        false
    }
}

// ----------------------------------------------------------------------------- threads

type Link = (usize, Tensor);

/// A stage on a thread: channels to the threads of its neighbours.
pub(crate) struct ChannelTransport {
    pub stage: usize,
    pub act_in: Option<Receiver<Link>>,
    pub act_out: Option<Sender<Link>>,
    pub grad_in: Option<Receiver<Link>>,
    pub grad_out: Option<Sender<Link>>,
    pub failed: bool,
}

impl ChannelTransport {
    /// One transport per stage, linked in a chain.
    pub(crate) fn chain(num_stages: usize) -> Vec<ChannelTransport> {
        let mut out: Vec<ChannelTransport> = (0..num_stages)
            .map(|stage| ChannelTransport {
                stage,
                act_in: None,
                act_out: None,
                grad_in: None,
                grad_out: None,
                failed: false,
            })
            .collect();
        for s in 1..num_stages {
            let (atx, arx) = std::sync::mpsc::channel();
            let (gtx, grx) = std::sync::mpsc::channel();
            out[s - 1].act_out = Some(atx);
            out[s].act_in = Some(arx);
            out[s].grad_out = Some(gtx);
            out[s - 1].grad_in = Some(grx);
        }
        out
    }

    fn send(&mut self, flow: Flow, mb: usize, t: &Tensor) -> Result<()> {
        let (to, what, tx) = match flow {
            Flow::Activation => (self.stage + 1, "activation", &self.act_out),
            Flow::Gradient => (self.stage.wrapping_sub(1), "gradient", &self.grad_out),
        };
        let tx =
            tx.as_ref().ok_or_else(|| err!(Value, "stage {} has no stage {to} to send to", self.stage))?;
        if tx.send((mb, t.detach())).is_err() {
            self.failed = true;
            bail!(
                Distributed,
                "pipeline stage {}: stage {to} stopped before it received the {what} of micro-batch {mb}",
                self.stage
            );
        }
        Ok(())
    }

    fn recv(&mut self, flow: Flow, mb: usize) -> Result<Tensor> {
        let (from, what, rx) = match flow {
            Flow::Activation => (self.stage.wrapping_sub(1), "activation", &self.act_in),
            Flow::Gradient => (self.stage + 1, "gradient", &self.grad_in),
        };
        let rx = rx
            .as_ref()
            .ok_or_else(|| err!(Value, "stage {} has no stage {from} to receive from", self.stage))?;
        match rx.recv() {
            Ok((got, t)) if got == mb => Ok(t),
            Ok((got, _)) => bail!(
                Distributed,
                "pipeline stage {}: expected the {what} of micro-batch {mb} from stage {from}, got micro-batch {got}",
                self.stage
            ),
            Err(_) => {
                self.failed = true;
                bail!(
                    Distributed,
                    "pipeline stage {}: stage {from} stopped before it sent the {what} of micro-batch {mb}",
                    self.stage
                )
            }
        }
    }
}

/// Which way a message goes: activations forward, gradients backward.
#[derive(Clone, Copy)]
enum Flow {
    Activation,
    Gradient,
}

impl Transport for ChannelTransport {
    fn send_activation(&mut self, mb: usize, t: &Tensor) -> Result<()> {
        self.send(Flow::Activation, mb, t)
    }
    fn recv_activation(&mut self, mb: usize) -> Result<Tensor> {
        self.recv(Flow::Activation, mb)
    }
    fn send_grad(&mut self, mb: usize, t: &Tensor) -> Result<()> {
        self.send(Flow::Gradient, mb, t)
    }
    fn recv_grad(&mut self, mb: usize, _output: &Tensor) -> Result<Tensor> {
        self.recv(Flow::Gradient, mb)
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn neighbour_failed(&self) -> bool {
        self.failed
    }
}

// ------------------------------------------------------------------------ process group

/// Tags of the pipeline's messages (MPI guarantees tags up to 32767).
const TAG_META: i32 = 32_000;
const TAG_ACTIVATION: i32 = 32_001;
const TAG_GRAD: i32 = 32_002;
/// The metadata message: magic, micro-batch, n_microbatches, schedule, dtype, ndim, dims.
const META_LEN: usize = 6 + MAX_DIMS;
const MAX_DIMS: usize = 10;
const MAGIC: i64 = 0x5059_5049_5045; // "PYPIPE"

/// A stage on a rank of a process group: its neighbours are the ranks that hold stages
/// `stage - 1` and `stage + 1`. Each activation is preceded by a small metadata message
/// (shape, dtype, and the micro-batch and schedule, to catch ranks that run different
/// schedules), so the receiver can allocate it; a gradient has the shape of the output it
/// is for, which the receiver holds.
pub(crate) struct GroupTransport {
    pub group: ProcessGroup,
    pub stage: usize,
    /// Global ranks of the neighbours.
    pub prev: Option<usize>,
    pub next: Option<usize>,
    pub n_microbatches: usize,
    pub kind: ScheduleKind,
    pub pending: Vec<Work>,
}

fn kind_code(kind: ScheduleKind) -> i64 {
    match kind {
        ScheduleKind::GPipe => 1,
        ScheduleKind::OneFOneB => 2,
    }
}

impl GroupTransport {
    fn peer(&self, p: Option<usize>, which: &str) -> Result<usize> {
        p.ok_or_else(|| err!(Value, "pipeline stage {} has no {which} stage", self.stage))
    }
}

impl Transport for GroupTransport {
    fn send_activation(&mut self, mb: usize, t: &Tensor) -> Result<()> {
        let dst = self.peer(self.next, "next")?;
        if t.dims().len() > MAX_DIMS {
            bail!(Shape, "pipelining: an activation has {} dimensions, more than {MAX_DIMS}", t.dims().len());
        }
        let mut meta = vec![0i64; META_LEN];
        meta[0] = MAGIC;
        meta[1] = mb as i64;
        meta[2] = self.n_microbatches as i64;
        meta[3] = kind_code(self.kind);
        meta[4] = DType::ALL.iter().position(|&d| d == t.dtype()).unwrap_or(0) as i64;
        meta[5] = t.dims().len() as i64;
        for (i, &d) in t.dims().iter().enumerate() {
            meta[6 + i] = d as i64;
        }
        let meta = Tensor::from_vec(meta, [META_LEN])?;
        self.pending.push(self.group.isend(&meta, dst, TAG_META)?);
        self.pending.push(self.group.isend(&t.detach(), dst, TAG_ACTIVATION)?);
        Ok(())
    }

    fn recv_activation(&mut self, mb: usize) -> Result<Tensor> {
        let src = self.peer(self.prev, "previous")?;
        let meta = Tensor::zeros([META_LEN], DType::I64)?;
        self.group.irecv(&meta, Some(src), TAG_META)?.wait()?;
        let meta: Vec<i64> = meta.to_vec()?;
        let me = self.stage;
        if meta[0] != MAGIC {
            bail!(Distributed, "pipeline stage {me}: rank {src} sent a message that is not a pipeline activation on the pipeline's tag {TAG_META}");
        }
        let (m, kind) = (self.n_microbatches as i64, kind_code(self.kind));
        if meta[2] != m || meta[3] != kind {
            let name = |k: i64| if k == 1 { "ScheduleGPipe" } else { "Schedule1F1B" };
            bail!(
                Value,
                "pipeline stage {me} runs {} with n_microbatches={m}, but stage {} (rank {src}) runs {} with n_microbatches={}: every rank must build the same schedule",
                name(kind),
                me - 1,
                name(meta[3]),
                meta[2]
            );
        }
        if meta[1] != mb as i64 {
            bail!(Distributed, "pipeline stage {me}: expected the activation of micro-batch {mb} from rank {src}, got micro-batch {}", meta[1]);
        }
        let dtype = *DType::ALL.get(meta[4] as usize).unwrap_or(&DType::F32);
        let ndim = (meta[5].max(0) as usize).min(MAX_DIMS);
        let dims: Vec<usize> = meta[6..6 + ndim].iter().map(|&d| d as usize).collect();
        let t = Tensor::zeros(dims, dtype)?;
        self.group.irecv(&t, Some(src), TAG_ACTIVATION)?.wait()?;
        Ok(t)
    }

    fn send_grad(&mut self, _mb: usize, t: &Tensor) -> Result<()> {
        let dst = self.peer(self.prev, "previous")?;
        self.pending.push(self.group.isend(&t.detach(), dst, TAG_GRAD)?);
        Ok(())
    }

    fn recv_grad(&mut self, _mb: usize, output: &Tensor) -> Result<Tensor> {
        let src = self.peer(self.next, "next")?;
        let t = Tensor::zeros(output.dims(), output.dtype())?;
        self.group.irecv(&t, Some(src), TAG_GRAD)?.wait()?;
        Ok(t)
    }

    fn flush(&mut self) -> Result<()> {
        for w in self.pending.drain(..) {
            w.wait()?;
        }
        Ok(())
    }
}
