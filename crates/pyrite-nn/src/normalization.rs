//! Normalisation layers: BatchNorm1d/2d/3d and InstanceNorm1d/2d (running statistics as
//! buffers), LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm.

use crate::functional as F;
use crate::module::{py_bool, py_float, py_tuple, Module, ModuleBase};
use crate::parameter::{Buffer, Parameter};
use crate::state_dict::StateDict;
use pyrite_core::autograd::no_grad;
use pyrite_core::{bail, DType, Result, Tensor};
use std::sync::Arc;

/// PyTorch's keywords of the batch and instance norms.
#[derive(Clone, Copy, Debug)]
pub struct NormOptions {
    pub eps: f64,
    /// `None` is the cumulative moving average.
    pub momentum: Option<f64>,
    pub affine: bool,
    /// With `affine`, whether there is a bias (PyTorch 2.15's `bias=`).
    pub bias: bool,
    pub track_running_stats: bool,
}

impl NormOptions {
    /// BatchNorm's defaults: eps 1e-5, momentum 0.1, affine, tracking running stats.
    pub fn batch_norm() -> NormOptions {
        NormOptions { eps: 1e-5, momentum: Some(0.1), affine: true, bias: true, track_running_stats: true }
    }

    /// InstanceNorm's defaults: no affine parameters, no running stats.
    pub fn instance_norm() -> NormOptions {
        NormOptions { eps: 1e-5, momentum: Some(0.1), affine: false, bias: true, track_running_stats: false }
    }
}

/// The configuration shared by the batch and instance norms (the tensors live in the layer).
#[derive(Clone, Copy, Debug)]
pub struct NormConfig {
    pub num_features: usize,
    pub opts: NormOptions,
}

type NormMembers = (Option<Parameter>, Option<Parameter>, Option<Buffer>, Option<Buffer>, Option<Buffer>);

impl NormConfig {
    /// The parameters and buffers of a norm with this configuration, as PyTorch makes them.
    fn members(&self) -> Result<NormMembers> {
        let c = self.num_features;
        let (weight, bias) = if self.opts.affine {
            (
                Some(Parameter::new(Tensor::ones([c], DType::F32)?)?),
                if self.opts.bias { Some(Parameter::new(Tensor::zeros([c], DType::F32)?)?) } else { None },
            )
        } else {
            (None, None)
        };
        let (rm, rv, nbt) = if self.opts.track_running_stats {
            (
                Some(Buffer::new(Tensor::zeros([c], DType::F32)?)),
                Some(Buffer::new(Tensor::ones([c], DType::F32)?)),
                Some(Buffer::new(Tensor::scalar(0i64)?)),
            )
        } else {
            (None, None, None)
        };
        Ok((weight, bias, rm, rv, nbt))
    }

    /// The factor the running statistics move by this step (PyTorch's
    /// `exponential_average_factor`), counting the batch in `num_batches_tracked` when
    /// training.
    fn average_factor(&self, training: bool, num_batches_tracked: Option<&Buffer>) -> Result<f64> {
        let mut factor = self.opts.momentum.unwrap_or(0.0);
        if training
            && self.opts.track_running_stats
            && let Some(n) = num_batches_tracked
        {
            let _g = no_grad();
            n.add_(&Tensor::scalar(1i64)?)?;
            if self.opts.momentum.is_none() {
                factor = 1.0 / n.item::<i64>()? as f64;
            }
        }
        Ok(factor)
    }

    fn repr(&self) -> String {
        format!(
            "{}, eps={}, momentum={}, affine={}, bias={}, track_running_stats={}",
            self.num_features,
            py_float(self.opts.eps),
            self.opts.momentum.map_or("None".to_string(), py_float),
            py_bool(self.opts.affine),
            py_bool(self.opts.affine && self.opts.bias),
            py_bool(self.opts.track_running_stats)
        )
    }
}

/// Zeroes the running mean and count and sets the running variance to one
/// (`reset_running_stats()`).
fn reset_running_stats(rm: Option<&Buffer>, rv: Option<&Buffer>, nbt: Option<&Buffer>) -> Result<()> {
    let _g = no_grad();
    if let (Some(m), Some(v), Some(n)) = (rm, rv, nbt) {
        m.zero_()?;
        v.fill_(1.0)?;
        n.zero_()?;
    }
    Ok(())
}

/// PyTorch's `_NormBase._load_from_state_dict`: a state_dict without `num_batches_tracked`
/// (saved before PyTorch added the counter; PyTorch fills it in when the dict's `_metadata`
/// has no version for the layer, and Pyrite's state_dicts never carry one) loads strictly, the
/// counter keeping its current value (0 in a fresh layer).
fn fill_num_batches_tracked(
    track_running_stats: bool,
    num_batches_tracked: Option<&Buffer>,
    sd: &mut StateDict,
    prefix: &str,
) -> Result<()> {
    let key = format!("{prefix}num_batches_tracked");
    if !track_running_stats || sd.contains_key(&key) {
        return Ok(());
    }
    let current = match num_batches_tracked {
        Some(n) => n.item::<i64>()?,
        None => 0,
    };
    sd.insert(key, Tensor::scalar(current)?);
    Ok(())
}

/// A batch norm's momentum set through `&self` (`set_momentum_override`); `None` while unset.
#[derive(Default)]
struct MomentumOverride(std::sync::Mutex<Option<Option<f64>>>);

impl MomentumOverride {
    fn get(&self) -> Option<Option<f64>> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn replace(&self, m: Option<Option<f64>>) -> Option<Option<f64>> {
        std::mem::replace(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()), m)
    }
}

/// Where a batch norm takes its cross-process sum from: set on the layer
/// (`set_process_sum`, what `convert_sync_batchnorm` does), else, for `SyncBatchNorm`, the
/// default one that `init_process_group` installs.
#[derive(Default)]
struct SyncSlot(std::sync::RwLock<Option<Arc<dyn F::CrossProcessSum>>>);

impl SyncSlot {
    fn get(&self) -> Option<Arc<dyn F::CrossProcessSum>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    fn set(&self, s: Option<Arc<dyn F::CrossProcessSum>>) -> Option<Arc<dyn F::CrossProcessSum>> {
        std::mem::replace(&mut *self.0.write().unwrap_or_else(|e| e.into_inner()), s)
    }
}

static DEFAULT_PROCESS_SUM: std::sync::RwLock<Option<Arc<dyn F::CrossProcessSum>>> =
    std::sync::RwLock::new(None);

/// Installs (or, with `None`, removes) the cross-process sum `SyncBatchNorm` layers use when
/// none is set on them: `pyrite::distributed::init_process_group` installs the default
/// group's, `destroy_process_group` removes it.
pub fn set_default_process_sum(sum: Option<Arc<dyn F::CrossProcessSum>>) {
    *DEFAULT_PROCESS_SUM.write().unwrap_or_else(|e| e.into_inner()) = sum;
}

fn default_process_sum() -> Option<Arc<dyn F::CrossProcessSum>> {
    DEFAULT_PROCESS_SUM.read().unwrap_or_else(|e| e.into_inner()).clone()
}

macro_rules! batch_norm_layer {
    ($($name:ident, $ranks:expr, $always_sync:expr, $desc:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(num_features)`: batch normalisation of ", $desc, " input; in training it normalises with the batch statistics and updates the running ones, in evaluation it uses the running ones.")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            #[module(skip)]
            pub config: NormConfig,
            pub weight: Option<Parameter>,
            pub bias: Option<Parameter>,
            pub running_mean: Option<Buffer>,
            pub running_var: Option<Buffer>,
            pub num_batches_tracked: Option<Buffer>,
            #[module(skip)]
            momentum_override: MomentumOverride,
            #[module(skip)]
            sync: SyncSlot,
        }

        impl $name {
            /// With PyTorch's defaults (eps 1e-5, momentum 0.1, affine, running stats).
            pub fn new(num_features: usize) -> Result<$name> {
                $name::with_options(num_features, NormOptions::batch_norm())
            }

            pub fn with_options(num_features: usize, opts: NormOptions) -> Result<$name> {
                let config = NormConfig { num_features, opts };
                let (weight, bias, running_mean, running_var, num_batches_tracked) = config.members()?;
                Ok($name {
                    base: ModuleBase::new(),
                    config,
                    weight,
                    bias,
                    running_mean,
                    running_var,
                    num_batches_tracked,
                    momentum_override: MomentumOverride::default(),
                    sync: SyncSlot::default(),
                })
            }

            /// `reset_running_stats()`.
            pub fn reset_running_stats(&self) -> Result<()> {
                reset_running_stats(self.running_mean.as_ref(), self.running_var.as_ref(), self.num_batches_tracked.as_ref())
            }

            /// The momentum in effect: the override while one is set, else `config.opts.momentum`.
            pub fn momentum(&self) -> Option<f64> {
                self.momentum_override.get().unwrap_or(self.config.opts.momentum)
            }

            /// `module.momentum = momentum` through a shared reference, until cleared with
            /// `None`: `Some(None)` is the cumulative average, `Some(Some(m))` momentum `m`.
            /// Returns the previous override. `swa_utils::update_bn` uses it on the layers of a
            /// model it borrows.
            pub fn set_momentum_override(&self, momentum: Option<Option<f64>>) -> Option<Option<f64>> {
                self.momentum_override.replace(momentum)
            }

            /// Makes training-mode forwards use statistics summed over processes by `sum`
            /// (`None`: this process's batch alone, or for `SyncBatchNorm` the default
            /// group's). Returns the previous one. `pyrite::distributed::convert_sync_batchnorm`
            /// sets it on every batch norm of a model.
            pub fn set_process_sum(&self, sum: Option<Arc<dyn F::CrossProcessSum>>) -> Option<Arc<dyn F::CrossProcessSum>> {
                self.sync.set(sum)
            }

            /// The cross-process sum training uses, if any.
            fn process_sum(&self) -> Option<Arc<dyn F::CrossProcessSum>> {
                self.sync.get().or_else(|| if $always_sync { default_process_sum() } else { None })
            }

            fn effective_config(&self) -> NormConfig {
                let mut c = self.config;
                c.opts.momentum = self.momentum();
                c
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                if !$ranks.contains(&x.rank()) {
                    let want: Vec<String> = $ranks.iter().map(|r: &usize| format!("{r}D")).collect();
                    bail!(Shape, "expected {} input (got {}D input)", want.join(" or "), x.rank());
                }
                let training = self.is_training();
                let config = self.effective_config();
                let opts = &config.opts;
                let factor = config.average_factor(training, self.num_batches_tracked.as_ref())?;
                let use_running = !training || opts.track_running_stats;
                let (rm, rv) = if use_running {
                    (self.running_mean.as_deref(), self.running_var.as_deref())
                } else {
                    (None, None)
                };
                let bn_training = training || (self.running_mean.is_none() && self.running_var.is_none());
                let bn = F::BatchNormOptions {
                    weight: self.weight.as_deref().cloned(),
                    bias: self.bias.as_deref().cloned(),
                    training: bn_training,
                    momentum: factor,
                    eps: opts.eps,
                };
                if bn_training {
                    match self.process_sum() {
                        Some(sum) if sum.world_size() > 1 => return F::sync_batch_norm(x, rm, rv, &bn, &*sum),
                        None if $always_sync => bail!(
                            Value,
                            "Default process group has not been initialized, please make sure to call init_process_group."
                        ),
                        _ => {}
                    }
                }
                F::batch_norm(x, rm, rv, &bn)
            }

            fn extra_repr(&self) -> String {
                self.effective_config().repr()
            }

            fn upgrade_state_dict(&self, sd: &mut StateDict, prefix: &str) -> Result<()> {
                fill_num_batches_tracked(self.config.opts.track_running_stats, self.num_batches_tracked.as_ref(), sd, prefix)
            }
        }
    )*};
}

batch_norm_layer! {
    BatchNorm1d, [2usize, 3], false, "2-D `[N, C]` or 3-D `[N, C, L]`";
    BatchNorm2d, [4usize], false, "4-D `[N, C, H, W]`";
    BatchNorm3d, [5usize], false, "5-D `[N, C, D, H, W]`";
    SyncBatchNorm, [2usize, 3, 4, 5], true, "any `[N, C, ...]` (2-D to 5-D) input, with statistics over every process of the default group (or the one `set_process_sum` gives),";
}

macro_rules! instance_norm_layer {
    ($($name:ident, $rank:expr;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(num_features)`: normalises each channel of each sample over its spatial dims (batched or unbatched input).")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            #[module(skip)]
            pub config: NormConfig,
            pub weight: Option<Parameter>,
            pub bias: Option<Parameter>,
            pub running_mean: Option<Buffer>,
            pub running_var: Option<Buffer>,
            pub num_batches_tracked: Option<Buffer>,
        }

        impl $name {
            /// With PyTorch's defaults (no affine parameters, no running stats).
            pub fn new(num_features: usize) -> Result<$name> {
                $name::with_options(num_features, NormOptions::instance_norm())
            }

            pub fn with_options(num_features: usize, opts: NormOptions) -> Result<$name> {
                let config = NormConfig { num_features, opts };
                let (weight, bias, running_mean, running_var, num_batches_tracked) = config.members()?;
                Ok($name { base: ModuleBase::new(), config, weight, bias, running_mean, running_var, num_batches_tracked })
            }

            /// `reset_running_stats()`.
            pub fn reset_running_stats(&self) -> Result<()> {
                reset_running_stats(self.running_mean.as_ref(), self.running_var.as_ref(), self.num_batches_tracked.as_ref())
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let r = x.rank();
                if r != $rank && r != $rank + 1 {
                    bail!(Shape, "expected {}D or {}D input (got {}D input)", $rank, $rank + 1, r);
                }
                let unbatched = r == $rank;
                let x = if unbatched { x.unsqueeze(0)? } else { x.clone() };
                let training = self.is_training();
                let opts = &self.config.opts;
                let factor = self.config.average_factor(training, self.num_batches_tracked.as_ref())?;
                let use_input_stats = training || !opts.track_running_stats;
                let track = opts.track_running_stats;
                let y = F::instance_norm(&x, &F::InstanceNormOptions {
                    running_mean: if track { self.running_mean.as_deref().cloned() } else { None },
                    running_var: if track { self.running_var.as_deref().cloned() } else { None },
                    weight: self.weight.as_deref().cloned(),
                    bias: self.bias.as_deref().cloned(),
                    use_input_stats,
                    momentum: factor,
                    eps: opts.eps,
                })?;
                if unbatched { y.squeeze_dim(0) } else { Ok(y) }
            }

            fn extra_repr(&self) -> String {
                self.config.repr()
            }

            fn upgrade_state_dict(&self, sd: &mut StateDict, prefix: &str) -> Result<()> {
                fill_num_batches_tracked(self.config.opts.track_running_stats, self.num_batches_tracked.as_ref(), sd, prefix)
            }
        }
    )*};
}

instance_norm_layer! {
    InstanceNorm1d, 2usize;
    InstanceNorm2d, 3usize;
    InstanceNorm3d, 4usize;
}

/// `nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True)`.
#[derive(crate::Module)]
pub struct LayerNorm {
    base: ModuleBase,
    pub weight: Option<Parameter>,
    pub bias: Option<Parameter>,
    pub normalized_shape: Vec<usize>,
    pub eps: f64,
}

impl LayerNorm {
    /// Over the last dims `normalized_shape`, with a weight and a bias.
    pub fn new(normalized_shape: &[usize]) -> Result<LayerNorm> {
        LayerNorm::with_options(normalized_shape, 1e-5, true, true)
    }

    pub fn with_options(
        normalized_shape: &[usize],
        eps: f64,
        elementwise_affine: bool,
        bias: bool,
    ) -> Result<LayerNorm> {
        let (w, b) = if elementwise_affine {
            (
                Some(Parameter::new(Tensor::ones(normalized_shape, DType::F32)?)?),
                if bias { Some(Parameter::new(Tensor::zeros(normalized_shape, DType::F32)?)?) } else { None },
            )
        } else {
            (None, None)
        };
        Ok(LayerNorm {
            base: ModuleBase::new(),
            weight: w,
            bias: b,
            normalized_shape: normalized_shape.to_vec(),
            eps,
        })
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let opts = F::LayerNormOptions {
            weight: self.weight.as_deref().cloned(),
            bias: self.bias.as_deref().cloned(),
            eps: self.eps,
        };
        F::layer_norm(x, &self.normalized_shape, &opts)
    }

    fn extra_repr(&self) -> String {
        format!(
            "{}, eps={}, elementwise_affine={}, bias={}",
            py_tuple(&self.normalized_shape),
            py_float(self.eps),
            py_bool(self.weight.is_some()),
            py_bool(self.bias.is_some())
        )
    }
}

/// `nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True)`.
#[derive(crate::Module)]
pub struct RMSNorm {
    base: ModuleBase,
    pub weight: Option<Parameter>,
    pub normalized_shape: Vec<usize>,
    pub eps: Option<f64>,
}

impl RMSNorm {
    pub fn new(normalized_shape: &[usize], eps: Option<f64>, elementwise_affine: bool) -> Result<RMSNorm> {
        let w = if elementwise_affine {
            Some(Parameter::new(Tensor::ones(normalized_shape, DType::F32)?)?)
        } else {
            None
        };
        Ok(RMSNorm { base: ModuleBase::new(), weight: w, normalized_shape: normalized_shape.to_vec(), eps })
    }
}

impl Module for RMSNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::rms_norm(
            x,
            &self.normalized_shape,
            &F::RmsNormOptions { weight: self.weight.as_deref().cloned(), eps: self.eps },
        )
    }

    fn extra_repr(&self) -> String {
        format!(
            "{}, eps={}, elementwise_affine={}",
            py_tuple(&self.normalized_shape),
            self.eps.map_or("None".to_string(), py_float),
            py_bool(self.weight.is_some())
        )
    }
}

/// `nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)`.
#[derive(crate::Module)]
pub struct GroupNorm {
    base: ModuleBase,
    pub weight: Option<Parameter>,
    pub bias: Option<Parameter>,
    pub num_groups: usize,
    pub num_channels: usize,
    pub eps: f64,
}

impl GroupNorm {
    pub fn new(num_groups: usize, num_channels: usize) -> Result<GroupNorm> {
        GroupNorm::with_options(num_groups, num_channels, 1e-5, true)
    }

    pub fn with_options(num_groups: usize, num_channels: usize, eps: f64, affine: bool) -> Result<GroupNorm> {
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            bail!(Value, "num_channels must be divisible by num_groups");
        }
        let (w, b) = if affine {
            (
                Some(Parameter::new(Tensor::ones([num_channels], DType::F32)?)?),
                Some(Parameter::new(Tensor::zeros([num_channels], DType::F32)?)?),
            )
        } else {
            (None, None)
        };
        Ok(GroupNorm { base: ModuleBase::new(), weight: w, bias: b, num_groups, num_channels, eps })
    }
}

impl Module for GroupNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.rank() < 2 || x.dims()[1] != self.num_channels {
            bail!(
                Shape,
                "GroupNorm: expected input of shape [N, {}, *], got {}",
                self.num_channels,
                x.shape()
            );
        }
        let opts = F::LayerNormOptions {
            weight: self.weight.as_deref().cloned(),
            bias: self.bias.as_deref().cloned(),
            eps: self.eps,
        };
        F::group_norm(x, self.num_groups, &opts)
    }

    fn extra_repr(&self) -> String {
        format!(
            "{}, {}, eps={}, affine={}, bias={}",
            self.num_groups,
            self.num_channels,
            py_float(self.eps),
            py_bool(self.weight.is_some()),
            py_bool(self.bias.is_some())
        )
    }
}

/// `nn.LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0)`.
#[derive(crate::Module)]
pub struct LocalResponseNorm {
    base: ModuleBase,
    pub size: usize,
    pub alpha: f64,
    pub beta: f64,
    pub k: f64,
}

impl LocalResponseNorm {
    pub fn new(size: usize) -> LocalResponseNorm {
        LocalResponseNorm { base: ModuleBase::new(), size, alpha: 1e-4, beta: 0.75, k: 1.0 }
    }
}

impl Module for LocalResponseNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::local_response_norm(
            x,
            self.size,
            &F::LocalResponseNormOptions { alpha: self.alpha, beta: self.beta, k: self.k },
        )
    }

    fn extra_repr(&self) -> String {
        format!(
            "{}, alpha={}, beta={}, k={}",
            self.size,
            py_float(self.alpha),
            py_float(self.beta),
            py_float(self.k)
        )
    }
}
