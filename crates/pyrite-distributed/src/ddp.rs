//! `torch.nn.parallel.DistributedDataParallel`: one replica of the model per process, with
//! gradients averaged across processes during backward (see [`crate::reducer`] for how).

use crate::comm_hooks::{BucketFuture, CommHook, GradBucket};
use crate::reducer::{Reducer, ReducerConfig};
use crate::ProcessGroup;
use pyrite_core::{autograd, bail, DType, Result, Tensor};
use pyrite_nn::{Module, ModuleBase, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Options of [`DistributedDataParallel`] (PyTorch's keyword arguments and defaults).
#[derive(Clone)]
pub struct DdpOptions {
    /// The group to average over; `None` is the default group.
    pub process_group: Option<ProcessGroup>,
    /// The size of a gradient bucket in MiB (25).
    pub bucket_cap_mb: f64,
    /// The size of the first bucket in MiB (1; PyTorch's `dist._DEFAULT_FIRST_BUCKET_BYTES`).
    pub first_bucket_cap_mb: f64,
    /// Search forward's output graph for parameters it does not use, and reduce without them
    /// (false).
    pub find_unused_parameters: bool,
    /// Broadcast the buffers (BatchNorm's running statistics) from rank 0 before each forward
    /// (true).
    pub broadcast_buffers: bool,
    /// Make each `.grad` a view of its bucket, saving a copy and the memory of a second set of
    /// gradients (false).
    pub gradient_as_bucket_view: bool,
    /// The graph is the same every iteration: the unused parameters are found once (false).
    pub static_graph: bool,
    /// Broadcast rank 0's parameters and buffers at construction (true).
    pub init_sync: bool,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            process_group: None,
            bucket_cap_mb: 25.0,
            first_bucket_cap_mb: 1.0,
            find_unused_parameters: false,
            broadcast_buffers: true,
            gradient_as_bucket_view: false,
            static_graph: false,
            init_sync: true,
        }
    }
}

/// `DistributedDataParallel(module)`: wraps a model so that each process trains it on its
/// share of every batch and all end each step with the same averaged gradients, as PyTorch's
/// DDP does: rank 0's parameters and buffers are broadcast at construction, gradients are
/// all-reduced in buckets that start while backward is still running, and buffers are
/// broadcast before each forward.
///
/// The model is the child `module`, so its `state_dict` keys start with `module.` as in
/// PyTorch (save `ddp.module.state_dict()` for a plain model's keys).
///
/// ```no_run
/// use pyrite::nn::{Linear, Module};
/// use pyrite::optim::{Optimizer, SGD, SGDOptions};
/// use pyrite::{DType, Tensor};
/// use pyrite_distributed::{self as dist, DdpOptions, DistributedDataParallel};
/// dist::init_process_group("mpi", Default::default())?; // mpirun -np 2 ...
/// let model = DistributedDataParallel::new(Linear::new(4, 2)?, DdpOptions::default())?;
/// let mut opt = SGD::new(model.parameters(), SGDOptions { lr: 0.1, ..Default::default() })?;
/// let x = Tensor::randn([8, 4], DType::F32)?; // this rank's half of the batch
/// model.call(&x)?.pow_scalar(2.0)?.mean()?.backward()?; // gradients averaged over the ranks
/// opt.step()?;
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(pyrite_nn::Module)]
#[module(name = "DistributedDataParallel")]
pub struct DistributedDataParallel<M: Module> {
    base: ModuleBase,
    /// The wrapped model.
    pub module: M,
    #[module(skip)]
    inner: Inner,
}

struct Inner {
    sync: GradientSync,
    /// False inside [`DistributedDataParallel::no_sync`].
    enabled: Arc<AtomicBool>,
}

impl<M: Module> DistributedDataParallel<M> {
    /// Wraps `module`: checks that every rank has the same parameters (names, shapes, dtypes),
    /// broadcasts rank 0's parameters and buffers, and sets up the gradient buckets.
    pub fn new(module: M, options: DdpOptions) -> Result<DistributedDataParallel<M>> {
        let sync = GradientSync::new(&module, &options)?;
        Ok(DistributedDataParallel {
            base: ModuleBase::new(),
            module,
            inner: Inner { sync, enabled: Arc::new(AtomicBool::new(true)) },
        })
    }

    /// `ddp.no_sync()`: while the guard lives, backward passes accumulate gradients locally
    /// without communicating; the first backward after it averages everything accumulated.
    ///
    /// ```no_run
    /// # use pyrite::nn::{Linear, Module};
    /// # use pyrite::{DType, Tensor};
    /// # use pyrite_distributed::{DdpOptions, DistributedDataParallel};
    /// # let model = DistributedDataParallel::new(Linear::new(4, 2)?, DdpOptions::default())?;
    /// # let micro: Vec<Tensor> = vec![Tensor::randn([2, 4], DType::F32)?; 4];
    /// for (k, x) in micro.iter().enumerate() {
    ///     if k + 1 < micro.len() {
    ///         let _skip = model.no_sync();
    ///         model.call(x)?.sum()?.backward()?; // local accumulation
    ///     } else {
    ///         model.call(x)?.sum()?.backward()?; // averages the sum of all four
    ///     }
    /// }
    /// # Ok::<(), pyrite::Error>(())
    /// ```
    pub fn no_sync(&self) -> NoSync {
        let previous = self.inner.enabled.swap(false, Ordering::SeqCst);
        NoSync { flag: self.inner.enabled.clone(), previous }
    }

    /// `ddp.register_comm_hook(state, hook)`: what to do with each full bucket (the state is
    /// what the closure captures; the group is passed in). See [`crate::comm_hooks`].
    pub fn register_comm_hook(
        &self,
        hook: impl Fn(&ProcessGroup, &GradBucket) -> Result<BucketFuture> + Send + Sync + 'static,
    ) {
        self.inner.sync.register_comm_hook(hook)
    }

    /// The process group gradients are averaged over.
    pub fn process_group(&self) -> &ProcessGroup {
        self.inner.sync.process_group()
    }

    /// The gradient buckets, as lists of parameter names in bucket order (the first bucket
    /// is reduced first).
    pub fn bucket_parameter_names(&self) -> Vec<Vec<String>> {
        self.inner.sync.bucket_parameter_names()
    }

    /// Each bucket's size in bytes.
    pub fn bucket_sizes(&self) -> Vec<usize> {
        self.inner.sync.bucket_sizes()
    }
}

impl<M: Module> Module for DistributedDataParallel<M> {
    fn forward_value(&self, input: Value) -> Result<Value> {
        self.inner.sync.before_forward()?;
        let out = self.module.call_value(input)?;
        if autograd::is_grad_enabled() && self.inner.enabled.load(Ordering::SeqCst) {
            self.inner.sync.prepare_for_backward(&out.tensors())?;
        } else {
            self.inner.sync.skip_backward();
        }
        Ok(out)
    }
}

/// DistributedDataParallel's machinery for a module held elsewhere (the form a training loop
/// that owns the model uses): construction checks the ranks' models and broadcasts rank 0's
/// parameters and buffers; [`GradientSync::before_forward`] and
/// [`GradientSync::prepare_for_backward`] around each forward make the next backward average
/// the gradients in buckets, exactly as [`DistributedDataParallel`] does.
///
/// ```no_run
/// use pyrite::nn::{Linear, Module};
/// use pyrite::{DType, Tensor};
/// use pyrite_distributed::{DdpOptions, GradientSync};
/// pyrite_distributed::init_process_group("mpi", Default::default())?;
/// let model = Linear::new(4, 2)?;
/// let sync = GradientSync::new(&model, &DdpOptions::default())?;
/// sync.before_forward()?;
/// let loss = model.call(&Tensor::randn([8, 4], DType::F32)?)?.sum()?;
/// sync.prepare_for_backward(&[&loss])?;
/// loss.backward()?; // gradients averaged over the ranks
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct GradientSync {
    group: ProcessGroup,
    reducer: Arc<Reducer>,
    buffers: Vec<Tensor>,
    broadcast_buffers: bool,
    /// Whether the next forward broadcasts buffers (not after one whose backward did not
    /// reduce, as in PyTorch).
    forward_sync: AtomicBool,
}

impl GradientSync {
    /// Sets up gradient averaging for `module`'s parameters that require grad.
    pub fn new(module: &dyn Module, options: &DdpOptions) -> Result<GradientSync> {
        let group = match options.process_group.clone() {
            Some(g) => g,
            None => crate::default_group()?,
        };
        if group.rank().is_none() {
            bail!(Value, "DistributedDataParallel: this rank is not a member of the process group");
        }
        if !(options.bucket_cap_mb > 0.0 && options.first_bucket_cap_mb > 0.0) {
            bail!(Value, "DistributedDataParallel: bucket sizes must be positive");
        }
        verify_same_model(&group, module)?;
        let buffers = module.buffers();
        if options.init_sync {
            let mut states: Vec<Tensor> = module.parameters();
            states.extend(buffers.iter().cloned());
            broadcast_coalesced(&group, &states, group.ranks()[0])?;
        }
        let named: Vec<(String, Tensor)> =
            module.named_parameters().into_iter().filter(|(_, p)| p.requires_grad()).collect();
        if named.is_empty() {
            bail!(Value, "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient.");
        }
        let mib = |mb: f64| (mb * 1024.0 * 1024.0) as usize;
        let reducer = Reducer::new(
            group.clone(),
            named,
            ReducerConfig {
                first_bucket_cap: mib(options.first_bucket_cap_mb),
                bucket_cap: mib(options.bucket_cap_mb),
                find_unused_parameters: options.find_unused_parameters,
                gradient_as_bucket_view: options.gradient_as_bucket_view,
                static_graph: options.static_graph,
            },
        )?;
        Ok(GradientSync {
            group,
            reducer,
            buffers,
            broadcast_buffers: options.broadcast_buffers,
            forward_sync: AtomicBool::new(true),
        })
    }

    /// Before a forward: the previous reducing backward must have finished (else PyTorch's
    /// error naming the parameters that got no gradient), and rank 0's buffers are broadcast
    /// (`broadcast_buffers`).
    pub fn before_forward(&self) -> Result<()> {
        self.reducer.check_previous_iteration()?;
        if self.broadcast_buffers && self.forward_sync.load(Ordering::SeqCst) && !self.buffers.is_empty() {
            broadcast_coalesced(&self.group, &self.buffers, self.group.ranks()[0])?;
        }
        Ok(())
    }

    /// After a forward whose backward should average the gradients: `outputs` are searched
    /// for unused parameters when `find_unused_parameters` is on.
    pub fn prepare_for_backward(&self, outputs: &[&Tensor]) -> Result<()> {
        self.forward_sync.store(true, Ordering::SeqCst);
        self.reducer.prepare_for_backward(outputs)
    }

    /// After a forward whose backward accumulates locally (`no_sync`, or no grad).
    pub fn skip_backward(&self) {
        self.forward_sync.store(false, Ordering::SeqCst);
    }

    /// See [`DistributedDataParallel::register_comm_hook`].
    pub fn register_comm_hook(
        &self,
        hook: impl Fn(&ProcessGroup, &GradBucket) -> Result<BucketFuture> + Send + Sync + 'static,
    ) {
        let hook: CommHook = Arc::new(hook);
        self.reducer.set_hook(hook);
    }

    /// The process group gradients are averaged over.
    pub fn process_group(&self) -> &ProcessGroup {
        &self.group
    }

    /// See [`DistributedDataParallel::bucket_parameter_names`].
    pub fn bucket_parameter_names(&self) -> Vec<Vec<String>> {
        self.reducer.bucket_names()
    }

    /// See [`DistributedDataParallel::bucket_sizes`].
    pub fn bucket_sizes(&self) -> Vec<usize> {
        self.reducer.bucket_sizes_bytes()
    }
}

/// The guard [`DistributedDataParallel::no_sync`] returns.
pub struct NoSync {
    flag: Arc<AtomicBool>,
    previous: bool,
}

impl Drop for NoSync {
    fn drop(&mut self) {
        self.flag.store(self.previous, Ordering::SeqCst);
    }
}

/// `_verify_param_shape_across_processes`: every rank's model has rank 0's parameters.
fn verify_same_model(group: &ProcessGroup, module: &dyn Module) -> Result<()> {
    let mine: Vec<(String, Vec<usize>, String)> = module
        .named_parameters()
        .into_iter()
        .map(|(n, p)| (n, p.dims().to_vec(), p.dtype().to_string()))
        .collect();
    let all = group.all_gather_object(&mine)?;
    let me = group.rank().unwrap_or(0);
    for (r, theirs) in all.iter().enumerate() {
        if theirs.len() != mine.len() {
            bail!(
                Value,
                "DDP expects same model across all ranks, but Rank {me} has {} params, while rank {} has inconsistent {} params.",
                mine.len(),
                group.ranks()[r],
                theirs.len()
            );
        }
        for (a, b) in mine.iter().zip(theirs) {
            if a != b {
                bail!(
                    Value,
                    "DDP expects same model across all ranks, but Rank {me} has parameter {} of shape {:?} and dtype {}, while rank {} has {} of shape {:?} and dtype {}.",
                    a.0,
                    a.1,
                    a.2,
                    group.ranks()[r],
                    b.0,
                    b.1,
                    b.2
                );
            }
        }
    }
    Ok(())
}

/// Broadcasts `tensors` from global rank `src`, one flat message per dtype
/// (`_broadcast_coalesced`).
pub(crate) fn broadcast_coalesced(group: &ProcessGroup, tensors: &[Tensor], src: usize) -> Result<()> {
    if group.size() == 1 || tensors.is_empty() {
        return Ok(());
    }
    let mut dtypes: Vec<DType> = Vec::new();
    for t in tensors {
        if !dtypes.contains(&t.dtype()) {
            dtypes.push(t.dtype());
        }
    }
    let _ng = autograd::no_grad();
    for d in dtypes {
        let these: Vec<&Tensor> = tensors.iter().filter(|t| t.dtype() == d).collect();
        let flat: Vec<Tensor> =
            these.iter().map(|t| t.detach().reshape([t.numel()])).collect::<Result<_>>()?;
        let all = Tensor::cat(&flat, 0)?;
        group.broadcast(&all, src)?.wait()?;
        let mut off = 0;
        for t in these {
            let n = t.numel();
            t.detach().copy_(&all.narrow(0, off as isize, n)?.reshape(t.dims())?)?;
            off += n;
        }
    }
    Ok(())
}
