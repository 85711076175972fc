//! Process groups (`torch.distributed`'s `init_process_group`, `new_group` and the
//! collectives): the checks every rank makes on its own arguments, then the backend.

use crate::backend::{self, Backend, CommId};
use crate::op::{Op, OpKind, ReduceOp};
use crate::work::Work;
use pyrite_core::{bail, err, DType, Result, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// PyTorch's default collective timeout: 30 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// `TORCH_DISTRIBUTED_DEBUG`'s levels, read from `PYRITE_DISTRIBUTED_DEBUG` (or
/// `TORCH_DISTRIBUTED_DEBUG`) when a group is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum DebugLevel {
    /// No checks beyond the timeout (the default).
    #[default]
    Off,
    /// As `Off` for collectives; DDP says which parameters got no gradient.
    Info,
    /// Every collective checks that all ranks run the same op with the same shape, dtype,
    /// root and reduction, and fails naming the ranks that differ.
    Detail,
}

impl DebugLevel {
    /// The level the environment asks for.
    pub fn from_env() -> Result<DebugLevel> {
        let v =
            std::env::var("PYRITE_DISTRIBUTED_DEBUG").or_else(|_| std::env::var("TORCH_DISTRIBUTED_DEBUG"));
        match v.as_deref().map(|s| s.trim().to_ascii_uppercase()) {
            Err(_) => Ok(DebugLevel::Off),
            Ok(s) if s.is_empty() || s == "OFF" => Ok(DebugLevel::Off),
            Ok(s) if s == "INFO" => Ok(DebugLevel::Info),
            Ok(s) if s == "DETAIL" => Ok(DebugLevel::Detail),
            Ok(s) => bail!(
                Value,
                "PYRITE_DISTRIBUTED_DEBUG={s:?} is not a debug level: expected OFF, INFO or DETAIL"
            ),
        }
    }
}

/// Options of [`init_process_group`] (PyTorch's keyword arguments).
#[derive(Clone, Debug)]
pub struct InitOptions {
    /// How long any collective may wait for the other ranks before failing (default 30
    /// minutes, as in PyTorch).
    pub timeout: Duration,
    /// The world size the caller expects; `None` takes the backend's. MPI decides the world,
    /// so a value that differs from MPI's is an error.
    pub world_size: Option<usize>,
    /// This process's rank, checked against MPI's as `world_size` is.
    pub rank: Option<usize>,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions { timeout: DEFAULT_TIMEOUT, world_size: None, rank: None }
    }
}

/// A group of processes that run collectives together (`ProcessGroup`; the object
/// `torch.distributed.new_group` returns). Cloning shares the group.
///
/// Its methods are the asynchronous forms (`async_op=True`): each returns a [`Work`] to wait
/// on. The free functions of this crate ([`all_reduce`](crate::all_reduce), ...) are the
/// synchronous forms on the default group. Ranks given to a method (`src`, `dst`) are
/// global ranks, as in PyTorch.
#[derive(Clone)]
pub struct ProcessGroup(Arc<Group>);

struct Group {
    backend: Arc<dyn Backend>,
    /// `None` on ranks outside the group.
    comm: Option<CommId>,
    /// Global ranks by group rank.
    ranks: Vec<usize>,
    timeout: Duration,
    debug: DebugLevel,
    seq: AtomicU64,
}

static DEFAULT_GROUP: RwLock<Option<ProcessGroup>> = RwLock::new(None);

/// `torch.distributed.init_process_group(backend)`: joins this process to the job and makes
/// the default group of all processes. `backend` is `"mpi"` (run the program with
/// `mpirun -np N`, or `srun` on Slurm); MPI tells each process its rank and the world size.
/// Checks them against the launcher's variables ([`crate::env::launch_env`]): a job started by
/// `torchrun` or by `srun` without MPI support gives every process a world of its own, which
/// is an error here rather than N separate trainings.
pub fn init_process_group(backend: &str, options: InitOptions) -> Result<()> {
    if is_initialized() {
        bail!(Value, "trying to initialize the default process group twice!");
    }
    let debug = DebugLevel::from_env()?;
    let b = backend::open(backend)?;
    let (rank, size) = (b.rank(), b.size());
    if let Some(env) = crate::env::launch_env()?
        && (env.world_size != size || env.rank != rank)
    {
        bail!(
            Distributed,
            "the launcher ({:?}) says this is rank {} of {}, but {} sees rank {rank} of {size}: {}",
            env.launcher,
            env.rank,
            env.world_size,
            b.name(),
            if size == 1 {
                "the processes were not started as one MPI job (torchrun, or srun without --mpi=pmix); start them with mpirun -np N or srun --mpi=pmix"
            } else {
                "start every process with the same launcher"
            }
        );
    }
    if let Some(w) = options.world_size
        && w != size
    {
        bail!(Value, "init_process_group: world_size={w}, but the {} world has {size} processes", b.name());
    }
    if let Some(r) = options.rank
        && r != rank
    {
        bail!(Value, "init_process_group: rank={r}, but {} says this process is rank {rank}", b.name());
    }
    let group = ProcessGroup(Arc::new(Group {
        backend: b,
        comm: Some(0),
        ranks: (0..size).collect(),
        timeout: options.timeout,
        debug,
        seq: AtomicU64::new(0),
    }));
    pyrite_nn::normalization::set_default_process_sum(Some(Arc::new(crate::sync_batchnorm::GroupSum(
        group.clone(),
    ))));
    *DEFAULT_GROUP.write().unwrap_or_else(|e| e.into_inner()) = Some(group);
    Ok(())
}

/// `destroy_process_group()`: forgets the default group (MPI stays up until the process
/// exits, so [`init_process_group`] may be called again).
pub fn destroy_process_group() {
    pyrite_nn::normalization::set_default_process_sum(None);
    DEFAULT_GROUP.write().unwrap_or_else(|e| e.into_inner()).take();
}

/// `is_initialized()`: whether the default group exists.
pub fn is_initialized() -> bool {
    DEFAULT_GROUP.read().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// `is_available()`: always true (the API is there; which backends are is
/// [`crate::is_mpi_available`]).
pub fn is_available() -> bool {
    true
}

/// The default group (`group.WORLD`).
pub fn default_group() -> Result<ProcessGroup> {
    DEFAULT_GROUP.read().unwrap_or_else(|e| e.into_inner()).clone().ok_or_else(|| {
        err!(
            Value,
            "Default process group has not been initialized, please make sure to call init_process_group."
        )
    })
}

/// `get_rank()`: this process's rank in the default group.
pub fn get_rank() -> Result<usize> {
    Ok(default_group()?.0.backend.rank())
}

/// `get_world_size()`: the number of processes in the default group.
pub fn get_world_size() -> Result<usize> {
    Ok(default_group()?.size())
}

/// `get_backend()`: the default group's backend (`"mpi"`).
pub fn get_backend() -> Result<&'static str> {
    Ok(default_group()?.0.backend.name())
}

/// `new_group(ranks)`: a group of some of the processes (global ranks, in the order that
/// gives their group ranks; `None` is all of them). Every process must call it, in the same
/// order as the other `new_group` calls, members or not; on a non-member the group's
/// operations are errors. `timeout` defaults to the default group's.
pub fn new_group(ranks: Option<&[usize]>, timeout: Option<Duration>) -> Result<ProcessGroup> {
    let world = default_group()?;
    let size = world.size();
    let ranks: Vec<usize> = match ranks {
        Some(r) => r.to_vec(),
        None => (0..size).collect(),
    };
    if ranks.is_empty() {
        bail!(Value, "new_group: the list of ranks is empty");
    }
    for (i, &r) in ranks.iter().enumerate() {
        if r >= size {
            bail!(Value, "new_group: rank {r} is not a rank of the world of {size} processes");
        }
        if ranks[..i].contains(&r) {
            bail!(Value, "new_group: rank {r} is listed twice");
        }
    }
    let timeout = timeout.unwrap_or(world.0.timeout);
    let comm = world.0.backend.new_comm(&ranks, timeout)?;
    Ok(ProcessGroup(Arc::new(Group {
        backend: world.0.backend.clone(),
        comm,
        ranks,
        timeout,
        debug: world.0.debug,
        seq: AtomicU64::new(0),
    })))
}

fn same_meta(a: &Tensor, b: &Tensor, what: &str) -> Result<()> {
    if a.dtype() != b.dtype() {
        bail!(DType, "{what}: tensors must all have the same dtype, got {} and {}", a.dtype(), b.dtype());
    }
    Ok(())
}

fn check_p2p_tag(tag: i32) -> Result<()> {
    if !(0..=32767).contains(&tag) {
        bail!(Value, "tag {tag} is out of range: MPI guarantees tags 0 to 32767");
    }
    Ok(())
}

impl ProcessGroup {
    /// The number of processes in the group (`get_world_size(group)`).
    pub fn size(&self) -> usize {
        self.0.ranks.len()
    }

    /// This process's rank in the group (`get_rank(group)`); `None` outside it.
    pub fn rank(&self) -> Option<usize> {
        self.0.comm?;
        let me = self.0.backend.rank();
        self.0.ranks.iter().position(|&r| r == me)
    }

    /// The group's members, as global ranks in group-rank order (`get_process_group_ranks`).
    pub fn ranks(&self) -> &[usize] {
        &self.0.ranks
    }

    /// The collective timeout.
    pub fn timeout(&self) -> Duration {
        self.0.timeout
    }

    /// The debug level the group checks at.
    pub fn debug_level(&self) -> DebugLevel {
        self.0.debug
    }

    /// The group rank of global rank `global` (`get_group_rank`).
    pub fn group_rank(&self, global: usize) -> Result<usize> {
        match self.0.ranks.iter().position(|&r| r == global) {
            Some(r) => Ok(r),
            None => bail!(Value, "The global rank {global} is not part of the group {:?}", self.0.ranks),
        }
    }

    /// Checks a list of one tensor per rank, each of `like`'s shape and dtype.
    fn per_rank_list(&self, list: &[Tensor], like: &Tensor, op: &str, arg: &str) -> Result<()> {
        if list.len() != self.size() {
            bail!(Value, "{op}: {arg} must have one tensor per rank ({}), got {}", self.size(), list.len());
        }
        for t in list {
            same_meta(t, like, op)?;
            if t.dims() != like.dims() {
                bail!(
                    Shape,
                    "{op}: every tensor of {arg} must have the shape {:?}, got {:?}",
                    like.dims(),
                    t.dims()
                );
            }
        }
        Ok(())
    }

    /// The `{op}_list` of a gather or scatter: given on the root (the `role` rank) alone, as
    /// PyTorch requires, one tensor per rank there.
    fn root_list(
        &self,
        list: Option<&[Tensor]>,
        is_root: bool,
        like: &Tensor,
        op: &str,
        role: &str,
    ) -> Result<Vec<Tensor>> {
        let arg = format!("{op}_list");
        match (list, is_root) {
            (Some(list), true) => {
                self.per_rank_list(list, like, op, &arg)?;
                Ok(list.to_vec())
            }
            (None, true) => bail!(Value, "{op}: Argument ``{arg}`` must be specified on {role} rank."),
            (Some(_), false) => {
                bail!(Value, "{op}: Argument ``{arg}`` must NOT be specified on non-{role} ranks.")
            }
            (None, false) => Ok(Vec::new()),
        }
    }

    fn comm(&self, what: &str) -> Result<CommId> {
        match self.0.comm {
            Some(c) => Ok(c),
            None => bail!(
                Value,
                "{what}: rank {} is not a member of this group (ranks {:?})",
                self.0.backend.rank(),
                self.0.ranks
            ),
        }
    }

    /// Submits `kind`: a world of one finishes here (every collective is then a copy or
    /// nothing), anything else goes to the backend.
    fn submit(&self, kind: OpKind) -> Result<Work> {
        let comm = self.comm(&kind.op_type().to_ascii_lowercase())?;
        let seq = self.0.seq.fetch_add(1, Ordering::Relaxed);
        let what = format!("{}(SeqNum={seq})", kind.op_type());
        if self.size() == 1 && kind.is_collective() {
            return Ok(Work::finished(what, run_alone(kind)));
        }
        let work = Work::pending(what);
        let op = Op { kind, seq, timeout: self.0.timeout, check: self.0.debug == DebugLevel::Detail };
        self.0.backend.submit(comm, op, work.clone());
        Ok(work)
    }

    /// `all_reduce(tensor, op, group, async_op=True)`: every rank's `tensor` becomes the
    /// reduction of all of them.
    pub fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<Work> {
        if op == ReduceOp::Avg && !tensor.dtype().is_floating_point() {
            bail!(DType, "all_reduce: ReduceOp.AVG needs a floating-point tensor, got {}", tensor.dtype());
        }
        self.submit(OpKind::AllReduce { tensor: tensor.clone(), op })
    }

    /// `broadcast(tensor, src)`: every rank's `tensor` becomes rank `src`'s.
    pub fn broadcast(&self, tensor: &Tensor, src: usize) -> Result<Work> {
        let root = self.group_rank(src)?;
        self.submit(OpKind::Broadcast { tensor: tensor.clone(), root })
    }

    /// `reduce(tensor, dst, op)`: rank `dst`'s `tensor` becomes the reduction; the others'
    /// are left as they were.
    pub fn reduce(&self, tensor: &Tensor, dst: usize, op: ReduceOp) -> Result<Work> {
        let root = self.group_rank(dst)?;
        if op == ReduceOp::Avg && !tensor.dtype().is_floating_point() {
            bail!(DType, "reduce: ReduceOp.AVG needs a floating-point tensor, got {}", tensor.dtype());
        }
        self.submit(OpKind::Reduce { tensor: tensor.clone(), root, op })
    }

    /// `all_gather(tensor_list, tensor)`: `outputs[i]` becomes rank `i`'s `input` (one output
    /// per rank, each the input's shape and dtype).
    pub fn all_gather(&self, outputs: &[Tensor], input: &Tensor) -> Result<Work> {
        self.per_rank_list(outputs, input, "all_gather", "tensor_list")?;
        self.submit(OpKind::AllGather { input: input.clone(), outputs: outputs.to_vec() })
    }

    /// `all_gather_into_tensor(output, input)`: `output` (world size times the input's
    /// elements, e.g. stacked or concatenated along dim 0) receives every rank's `input` in
    /// rank order.
    pub fn all_gather_into_tensor(&self, output: &Tensor, input: &Tensor) -> Result<Work> {
        same_meta(output, input, "all_gather_into_tensor")?;
        if output.numel() != input.numel() * self.size() {
            bail!(
                Value,
                "output tensor size must be equal to world_size times input tensor size: output {:?}, input {:?}, world size {}",
                output.dims(),
                input.dims(),
                self.size()
            );
        }
        self.submit(OpKind::AllGather { input: input.clone(), outputs: vec![output.clone()] })
    }

    /// `gather(tensor, gather_list, dst)`: on rank `dst`, `gather_list[i]` becomes rank `i`'s
    /// `input`; the other ranks pass `None`.
    pub fn gather(&self, input: &Tensor, gather_list: Option<&[Tensor]>, dst: usize) -> Result<Work> {
        let root = self.group_rank(dst)?;
        let me = self.rank();
        let outputs = self.root_list(gather_list, me == Some(root), input, "gather", "destination")?;
        self.submit(OpKind::Gather { input: input.clone(), outputs, root })
    }

    /// `scatter(tensor, scatter_list, src)`: rank `i`'s `output` becomes rank `src`'s
    /// `scatter_list[i]`; the other ranks pass `None`.
    pub fn scatter(&self, output: &Tensor, scatter_list: Option<&[Tensor]>, src: usize) -> Result<Work> {
        let root = self.group_rank(src)?;
        let me = self.rank();
        let inputs = self.root_list(scatter_list, me == Some(root), output, "scatter", "source")?;
        self.submit(OpKind::Scatter { output: output.clone(), inputs, root })
    }

    /// `reduce_scatter_tensor(output, input, op)`: `input` holds world-size equal chunks;
    /// rank `i`'s `output` becomes the reduction of every rank's chunk `i`.
    pub fn reduce_scatter_tensor(&self, output: &Tensor, input: &Tensor, op: ReduceOp) -> Result<Work> {
        same_meta(output, input, "reduce_scatter_tensor")?;
        if input.numel() != output.numel() * self.size() {
            bail!(
                Value,
                "input tensor must be the same size as output size times world size: input {:?}, output {:?}, world size {}",
                input.dims(),
                output.dims(),
                self.size()
            );
        }
        if op == ReduceOp::Avg && !input.dtype().is_floating_point() {
            bail!(
                DType,
                "reduce_scatter_tensor: ReduceOp.AVG needs a floating-point tensor, got {}",
                input.dtype()
            );
        }
        self.submit(OpKind::ReduceScatter { output: output.clone(), input: input.clone(), op })
    }

    /// `all_to_all_single(output, input, output_split_sizes, input_split_sizes)`: `input` is
    /// split along dim 0 (equally, or by `input_split_sizes`), piece `i` goes to rank `i`, and
    /// `output` receives the pieces from every rank in rank order (by `output_split_sizes`).
    pub fn all_to_all_single(
        &self,
        output: &Tensor,
        input: &Tensor,
        output_split_sizes: Option<&[usize]>,
        input_split_sizes: Option<&[usize]>,
    ) -> Result<Work> {
        same_meta(output, input, "all_to_all_single")?;
        let n = self.size();
        let row = |t: &Tensor| -> usize { t.dims().iter().skip(1).product::<usize>() };
        let counts = |t: &Tensor, splits: Option<&[usize]>, which: &str| -> Result<Vec<usize>> {
            let rows = t.dims().first().copied().unwrap_or(1);
            match splits {
                None => {
                    if rows % n != 0 {
                        bail!(Value, "all_to_all_single: the {which}'s dim 0 ({rows}) is not divisible by the world size {n}");
                    }
                    Ok(vec![rows / n * row(t); n])
                }
                Some(s) => {
                    if s.len() != n {
                        bail!(
                            Value,
                            "all_to_all_single: {which}_split_sizes needs one size per rank ({n}), got {}",
                            s.len()
                        );
                    }
                    if s.iter().sum::<usize>() != rows {
                        bail!(
                            Value,
                            "all_to_all_single: {which}_split_sizes {s:?} do not add up to dim 0 ({rows})"
                        );
                    }
                    Ok(s.iter().map(|k| k * row(t)).collect())
                }
            }
        };
        let send_counts = counts(input, input_split_sizes, "input")?;
        let recv_counts = counts(output, output_split_sizes, "output")?;
        self.submit(OpKind::AllToAll {
            output: output.clone(),
            input: input.clone(),
            send_counts,
            recv_counts,
        })
    }

    /// `barrier()`: returns when every rank of the group has called it.
    pub fn barrier(&self) -> Result<Work> {
        self.submit(OpKind::Barrier)
    }

    /// `isend(tensor, dst, tag)`: sends `tensor` to rank `dst`.
    pub fn isend(&self, tensor: &Tensor, dst: usize, tag: i32) -> Result<Work> {
        check_p2p_tag(tag)?;
        let peer = self.group_rank(dst)?;
        if Some(peer) == self.rank() {
            bail!(Value, "Invalid destination rank: destination rank should not be the same as the rank of the current process.");
        }
        self.submit(OpKind::Send { tensor: tensor.clone(), peer, tag })
    }

    /// `irecv(tensor, src, tag)`: receives into `tensor` from rank `src` (`None`: any rank;
    /// the work's [`Work::source_rank`] says which). The message must have `tensor`'s size.
    pub fn irecv(&self, tensor: &Tensor, src: Option<usize>, tag: i32) -> Result<Work> {
        check_p2p_tag(tag)?;
        let peer = src.map(|s| self.group_rank(s)).transpose()?;
        if peer.is_some() && peer == self.rank() {
            bail!(
                Value,
                "Invalid source rank: source rank should not be the same as the rank of the current process."
            );
        }
        self.submit(OpKind::Recv { tensor: tensor.clone(), peer, tag })
    }
}

/// A collective in a world of one.
fn run_alone(kind: OpKind) -> Result<()> {
    let _ng = pyrite_core::autograd::no_grad();
    match kind {
        OpKind::AllGather { input, outputs } | OpKind::Gather { input, outputs, .. } => {
            if let Some(o) = outputs.first() {
                o.detach().copy_(&input.reshape(o.dims())?)?;
            }
            Ok(())
        }
        OpKind::Scatter { output, inputs, .. } => {
            output.detach().copy_(&inputs[0])?;
            Ok(())
        }
        OpKind::ReduceScatter { output, input, .. } | OpKind::AllToAll { output, input, .. } => {
            output.detach().copy_(&input.reshape(output.dims())?)?;
            Ok(())
        }
        _ => Ok(()),
    }
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ProcessGroup(backend={}, ranks={:?}, rank={:?})",
            self.0.backend.name(),
            self.0.ranks,
            self.rank()
        )
    }
}

// ------------------------------------------------------------- the default group's forms

/// `all_reduce(tensor, op)` on the default group, waiting for the result.
///
/// ```no_run
/// use pyrite_distributed as dist;
/// use pyrite_core::Tensor;
/// dist::init_process_group("mpi", Default::default())?; // under mpirun -np 2
/// let t = Tensor::new([dist::get_rank()? as f32 + 1.0])?;
/// dist::all_reduce(&t, dist::ReduceOp::Sum)?;
/// assert_eq!(t.to_vec::<f32>()?, vec![3.0]);
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn all_reduce(tensor: &Tensor, op: ReduceOp) -> Result<()> {
    default_group()?.all_reduce(tensor, op)?.wait()
}

/// `broadcast(tensor, src)` on the default group.
pub fn broadcast(tensor: &Tensor, src: usize) -> Result<()> {
    default_group()?.broadcast(tensor, src)?.wait()
}

/// `reduce(tensor, dst, op)` on the default group.
pub fn reduce(tensor: &Tensor, dst: usize, op: ReduceOp) -> Result<()> {
    default_group()?.reduce(tensor, dst, op)?.wait()
}

/// `all_gather(tensor_list, tensor)` on the default group.
pub fn all_gather(outputs: &[Tensor], input: &Tensor) -> Result<()> {
    default_group()?.all_gather(outputs, input)?.wait()
}

/// `all_gather_into_tensor(output, input)` on the default group.
pub fn all_gather_into_tensor(output: &Tensor, input: &Tensor) -> Result<()> {
    default_group()?.all_gather_into_tensor(output, input)?.wait()
}

/// `gather(tensor, gather_list, dst)` on the default group.
pub fn gather(input: &Tensor, gather_list: Option<&[Tensor]>, dst: usize) -> Result<()> {
    default_group()?.gather(input, gather_list, dst)?.wait()
}

/// `scatter(tensor, scatter_list, src)` on the default group.
pub fn scatter(output: &Tensor, scatter_list: Option<&[Tensor]>, src: usize) -> Result<()> {
    default_group()?.scatter(output, scatter_list, src)?.wait()
}

/// `reduce_scatter_tensor(output, input, op)` on the default group.
pub fn reduce_scatter_tensor(output: &Tensor, input: &Tensor, op: ReduceOp) -> Result<()> {
    default_group()?.reduce_scatter_tensor(output, input, op)?.wait()
}

/// `all_to_all_single(output, input, output_split_sizes, input_split_sizes)` on the default
/// group.
pub fn all_to_all_single(
    output: &Tensor,
    input: &Tensor,
    output_split_sizes: Option<&[usize]>,
    input_split_sizes: Option<&[usize]>,
) -> Result<()> {
    default_group()?.all_to_all_single(output, input, output_split_sizes, input_split_sizes)?.wait()
}

/// `barrier()` on the default group.
pub fn barrier() -> Result<()> {
    default_group()?.barrier()?.wait()
}

/// `send(tensor, dst, tag)`: sends and waits until the message is on its way.
pub fn send(tensor: &Tensor, dst: usize, tag: i32) -> Result<()> {
    default_group()?.isend(tensor, dst, tag)?.wait()
}

/// `recv(tensor, src, tag)`: receives into `tensor`; returns the sender's rank.
pub fn recv(tensor: &Tensor, src: Option<usize>, tag: i32) -> Result<usize> {
    let w = default_group()?.irecv(tensor, src, tag)?;
    w.wait()?;
    Ok(w.source_rank().unwrap_or(0))
}

/// `isend(tensor, dst, tag)` on the default group.
pub fn isend(tensor: &Tensor, dst: usize, tag: i32) -> Result<Work> {
    default_group()?.isend(tensor, dst, tag)
}

/// `irecv(tensor, src, tag)` on the default group.
pub fn irecv(tensor: &Tensor, src: Option<usize>, tag: i32) -> Result<Work> {
    default_group()?.irecv(tensor, src, tag)
}

/// The dtype check shared by the object collectives.
pub(crate) fn u8_tensor(bytes: &[u8]) -> Result<Tensor> {
    Tensor::from_raw_bytes(bytes, [bytes.len()], DType::U8)
}
