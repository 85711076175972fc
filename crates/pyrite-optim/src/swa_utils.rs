//! `torch.optim.swa_utils`: weight averaging. [`AveragedModel`] keeps a running average of a
//! model's parameters (Stochastic Weight Averaging by default, or an exponential moving
//! average with [`get_ema_multi_avg_fn`]); [`update_bn`] recomputes the BatchNorm statistics
//! of a model with one pass over the data; [`SWALR`] anneals each group's learning rate to a
//! fixed SWA rate.
//!
//! PyTorch's `AveragedModel(model)` deep-copies `model`. Pyrite modules are plain structs
//! without `Clone`, so [`AveragedModel::new`] takes the model and a function that builds a
//! fresh module of the same architecture; the model's parameters, buffers, `requires_grad`
//! flags and training modes are copied into it.
//!
//! ```
//! use pyrite::nn::{Linear, Module};
//! use pyrite::optim::swa_utils::{get_ema_multi_avg_fn, AveragedModel, AveragedModelOptions};
//! use pyrite::autograd::no_grad;
//! use pyrite::{DType, Tensor};
//!
//! let model = Linear::new(3, 2)?;
//! let swa = AveragedModel::new(&model, || Linear::new(3, 2), AveragedModelOptions::default())?;
//! let ema = AveragedModel::new(
//!     &model,
//!     || Linear::new(3, 2),
//!     AveragedModelOptions { multi_avg_fn: Some(get_ema_multi_avg_fn(0.9)?), ..Default::default() },
//! )?;
//! for step in 0..3 {
//!     {
//!         let _g = no_grad();
//!         model.weight.fill_(step as f64)?; // stands for an optimizer step
//!     }
//!     swa.update_parameters(&model)?;
//!     ema.update_parameters(&model)?;
//! }
//! // the mean of 0, 1, 2, and 0.9 * (0.9 * 0 + 0.1 * 1) + 0.1 * 2
//! assert!((swa.module.weight.to_vec2::<f32>()?[0][0] - 1.0).abs() < 1e-6);
//! assert!((ema.module.weight.to_vec2::<f32>()?[0][0] - 0.29).abs() < 1e-6);
//! assert_eq!(swa.n_averaged()?, 3);
//! let y = swa.call(&Tensor::ones([4, 3], DType::F32)?)?; // forward is the averaged module's
//! assert_eq!(y.dims(), &[4, 2]);
//! # Ok::<(), pyrite::Error>(())
//! ```

pub use crate::swa_utils_lr::{SWALROptions, SWALR};
use pyrite_core::autograd::no_grad;
use pyrite_core::{bail, DType, Result, Tensor};
use pyrite_nn::{
    BatchNorm1d, BatchNorm2d, BatchNorm3d, Buffer, Member, MemberMut, Module, ModuleBase, ModuleFields, Value,
};
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// An averaging function for one tensor: `avg_fn(averaged, current, num_averaged)` returns the
/// new average, which [`AveragedModel`] copies into the averaged tensor. `num_averaged` is the
/// number of models averaged so far (at least 1 when called).
pub type AvgFn = Arc<dyn Fn(&Tensor, &Tensor, i64) -> Result<Tensor> + Send + Sync>;

/// An averaging function for lists of tensors of one dtype, updating `averaged` in place:
/// `multi_avg_fn(averaged, current, num_averaged)`.
pub type MultiAvgFn = Arc<dyn Fn(&[Tensor], &[Tensor], i64) -> Result<()> + Send + Sync>;

/// A float as Python prints it (`0.9`, `2.0`, `inf`).
fn py_float(x: f64) -> String {
    if x.is_finite() && x == x.trunc() && x.abs() < 1e16 {
        format!("{x:.1}")
    } else if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        (if x > 0.0 { "inf" } else { "-inf" }).into()
    } else {
        format!("{x}")
    }
}

fn check_decay(decay: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&decay) {
        bail!(
            Value,
            "Invalid decay value {} provided. Please provide a value in [0,1] range.",
            py_float(decay)
        );
    }
    Ok(())
}

/// `decay * ema + (1 - decay) * current`, in the promoted dtype (float for integer tensors).
fn ema_value(ema: &Tensor, current: &Tensor, decay: f64) -> Result<Tensor> {
    ema.mul_scalar(decay)?.add(&current.mul_scalar(1.0 - decay)?)
}

/// `averaged + (current - averaged) / (num_averaged + 1)` (true division: float for integer
/// tensors).
fn swa_value(averaged: &Tensor, current: &Tensor, num_averaged: i64) -> Result<Tensor> {
    averaged.add(&current.sub(averaged)?.div_scalar(num_averaged + 1)?)
}

/// `get_ema_avg_fn(decay)`: the exponential moving average of one tensor,
/// `decay * averaged + (1 - decay) * current`. A decay outside `[0, 1]` is an error.
///
/// ```
/// use pyrite::optim::swa_utils::get_ema_avg_fn;
/// use pyrite::Tensor;
/// let f = get_ema_avg_fn(0.75)?;
/// let y = f(&Tensor::new([4f32])?, &Tensor::new([8f32])?, 1)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![5.0]);
/// assert!(get_ema_avg_fn(1.5).is_err());
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn get_ema_avg_fn(decay: f64) -> Result<AvgFn> {
    check_decay(decay)?;
    Ok(Arc::new(move |ema: &Tensor, current: &Tensor, _n: i64| {
        let _g = no_grad();
        ema_value(ema, current, decay)
    }))
}

/// `get_swa_avg_fn()`: the running mean of one tensor,
/// `averaged + (current - averaged) / (num_averaged + 1)`. It is what [`AveragedModel`] uses
/// when given no averaging function (PyTorch's choice on the CPU).
///
/// ```
/// use pyrite::optim::swa_utils::get_swa_avg_fn;
/// use pyrite::Tensor;
/// let f = get_swa_avg_fn();
/// // the mean of 1, 2, 3 (averaged so far) and 6
/// assert_eq!(f(&Tensor::new([2f64])?, &Tensor::new([6f64])?, 3)?.to_vec::<f64>()?, vec![3.0]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn get_swa_avg_fn() -> AvgFn {
    Arc::new(|averaged: &Tensor, current: &Tensor, n: i64| {
        let _g = no_grad();
        swa_value(averaged, current, n)
    })
}

fn check_lists(op: &str, averaged: &[Tensor], current: &[Tensor]) -> Result<()> {
    if averaged.len() != current.len() {
        bail!(Value, "{op}: {} averaged tensors but {} current tensors", averaged.len(), current.len());
    }
    Ok(())
}

/// `get_ema_multi_avg_fn(decay)`: the exponential moving average of lists of tensors, in
/// place: `averaged = lerp(averaged, current, 1 - decay)` for floating-point tensors,
/// `averaged = decay * averaged + (1 - decay) * current` (truncated) for integer ones. A decay
/// outside `[0, 1]` is an error.
///
/// ```
/// use pyrite::optim::swa_utils::get_ema_multi_avg_fn;
/// use pyrite::Tensor;
/// let f = get_ema_multi_avg_fn(0.5)?;
/// let a = Tensor::new([0f32, 2.])?;
/// f(&[a.clone()], &[Tensor::new([4f32, 2.])?], 1)?;
/// assert_eq!(a.to_vec::<f32>()?, vec![2.0, 2.0]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn get_ema_multi_avg_fn(decay: f64) -> Result<MultiAvgFn> {
    check_decay(decay)?;
    Ok(Arc::new(move |averaged: &[Tensor], current: &[Tensor], _n: i64| {
        check_lists("ema_update", averaged, current)?;
        let _g = no_grad();
        for (a, c) in averaged.iter().zip(current) {
            if a.dtype().is_floating_point() {
                a.copy_(&a.lerp_scalar(c, 1.0 - decay)?)?;
            } else {
                a.copy_(&ema_value(a, c, decay)?)?;
            }
        }
        Ok(())
    }))
}

/// `get_swa_multi_avg_fn()`: the running mean of lists of tensors, in place:
/// `averaged = lerp(averaged, current, 1 / (num_averaged + 1))` for floating-point tensors,
/// with PyTorch's weight (`1 / (num_averaged + 1)` rounded to f32, as PyTorch computes it).
/// Integer tensors get `averaged + (current - averaged) / (num_averaged + 1)`, truncated
/// (PyTorch 2.15 raises for them: integer `addcdiv` is no longer supported).
///
/// ```
/// use pyrite::optim::swa_utils::get_swa_multi_avg_fn;
/// use pyrite::Tensor;
/// let f = get_swa_multi_avg_fn();
/// let a = Tensor::new([1f32])?;
/// f(&[a.clone()], &[Tensor::new([3f32])?], 1)?;
/// assert_eq!(a.to_vec::<f32>()?, vec![2.0]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn get_swa_multi_avg_fn() -> MultiAvgFn {
    Arc::new(|averaged: &[Tensor], current: &[Tensor], n: i64| {
        check_lists("swa_update", averaged, current)?;
        let _g = no_grad();
        let weight = (1.0f32 / (n + 1) as f32) as f64;
        for (a, c) in averaged.iter().zip(current) {
            if a.dtype().is_floating_point() {
                a.copy_(&a.lerp_scalar(c, weight)?)?;
            } else {
                a.copy_(&swa_value(a, c, n)?)?;
            }
        }
        Ok(())
    })
}

/// [`AveragedModel`]'s keywords (PyTorch's `avg_fn`, `multi_avg_fn`, `use_buffers`). At most
/// one of the two functions may be given; with neither, the average is the equally weighted
/// running mean (SWA).
#[derive(Clone, Default)]
pub struct AveragedModelOptions {
    /// Averages one tensor at a time (see [`AvgFn`]).
    pub avg_fn: Option<AvgFn>,
    /// Averages the tensors of one dtype at a time, in place (see [`MultiAvgFn`]).
    pub multi_avg_fn: Option<MultiAvgFn>,
    /// Average the buffers (BatchNorm's running statistics) with the parameters. When
    /// `false`, the averaged module's buffers are copied from the model at each update.
    pub use_buffers: bool,
}

impl fmt::Debug for AveragedModelOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AveragedModelOptions")
            .field("avg_fn", &self.avg_fn.as_ref().map(|_| "<fn>"))
            .field("multi_avg_fn", &self.multi_avg_fn.as_ref().map(|_| "<fn>"))
            .field("use_buffers", &self.use_buffers)
            .finish()
    }
}

/// `torch.optim.swa_utils.AveragedModel`: a module holding a running average of another
/// model's parameters (and, with `use_buffers`, buffers), for Stochastic Weight Averaging and
/// exponential moving averages.
///
/// It is a module itself: `forward` runs the averaged module, its `state_dict` holds
/// `n_averaged` (the number of models averaged, an int64 buffer) and the averaged module's
/// entries under `module.`, as in PyTorch. The first [`AveragedModel::update_parameters`]
/// copies the model; the next ones average with the averaging function.
///
/// See the [module documentation](self) for an example.
pub struct AveragedModel<M: Module> {
    base: ModuleBase,
    /// The averaged copy of the model (PyTorch's `averaged.module`).
    pub module: M,
    n_averaged: Buffer,
    avg_fn: Option<AvgFn>,
    multi_avg_fn: Option<MultiAvgFn>,
    use_buffers: bool,
}

impl<M: Module> AveragedModel<M> {
    /// `AveragedModel(model, avg_fn=..., multi_avg_fn=..., use_buffers=...)`: `make_copy`
    /// builds a module of `model`'s architecture (its initial values do not matter), and
    /// `model`'s parameters, buffers, `requires_grad` flags and training modes are copied into
    /// it (PyTorch's `deepcopy(model)`). The copy must have the same parameter and buffer
    /// names, shapes and dtypes (convert it in `make_copy`, e.g. `to_dtype(DType::F64)`, when
    /// the model was converted).
    pub fn new(model: &M, make_copy: impl FnOnce() -> Result<M>, opts: AveragedModelOptions) -> Result<Self> {
        let copy = make_copy()?;
        copy_module(model, &copy)?;
        Self::from_module(copy, opts)
    }

    /// An averaged model around `module` as it is (no copy is made): use it when the copy was
    /// made another way. Until the first [`AveragedModel::update_parameters`], `forward` uses
    /// `module`'s own values.
    pub fn from_module(module: M, opts: AveragedModelOptions) -> Result<Self> {
        if opts.avg_fn.is_some() && opts.multi_avg_fn.is_some() {
            bail!(Value, "AveragedModel: Only one of avg_fn and multi_avg_fn should be provided");
        }
        Ok(AveragedModel {
            base: ModuleBase::new(),
            module,
            n_averaged: Buffer::new(Tensor::scalar(0i64)?),
            avg_fn: opts.avg_fn,
            multi_avg_fn: opts.multi_avg_fn,
            use_buffers: opts.use_buffers,
        })
    }

    /// The number of models averaged so far (the `n_averaged` buffer).
    pub fn n_averaged(&self) -> Result<i64> {
        self.n_averaged.item::<i64>()
    }

    /// Whether buffers are averaged with the parameters.
    pub fn use_buffers(&self) -> bool {
        self.use_buffers
    }

    /// The averaged module, by value.
    pub fn into_inner(self) -> M {
        self.module
    }

    /// `update_parameters(model)`: folds `model`'s current parameters (and buffers, with
    /// `use_buffers`) into the average. The first call copies them. Without `use_buffers`,
    /// the averaged module's buffers are copied from `model` at every call. `model` must have
    /// the averaged module's parameters and buffers (same count and shapes), or nothing changes
    /// and the call is an error.
    pub fn update_parameters(&self, model: &dyn Module) -> Result<()> {
        let _g = no_grad();
        let named = |m: &dyn Module| {
            let mut v = m.named_parameters();
            if self.use_buffers {
                v.extend(m.named_buffers());
            }
            v
        };
        let mine = named(&self.module);
        let theirs = named(model);
        check_match("parameters", &mine, &theirs)?;
        let (my_buffers, their_buffers) = (self.module.named_buffers(), model.named_buffers());
        if !self.use_buffers {
            check_match("buffers", &my_buffers, &their_buffers)?;
        }
        let averaged: Vec<Tensor> = mine.into_iter().map(|(_, t)| t).collect();
        let current: Vec<Tensor> = theirs.into_iter().map(|(_, t)| t.detach()).collect();
        let n = self.n_averaged()?;
        if n == 0 {
            for (a, c) in averaged.iter().zip(&current) {
                a.copy_(c)?;
            }
        } else if let Some(f) = &self.avg_fn {
            for (a, c) in averaged.iter().zip(&current) {
                a.copy_(&f(a, c, n)?)?;
            }
        } else if let Some(f) = &self.multi_avg_fn {
            // one call per dtype, as PyTorch groups the tensors
            let mut groups: Vec<(DType, Vec<Tensor>, Vec<Tensor>)> = Vec::new();
            for (a, c) in averaged.iter().zip(&current) {
                match groups.iter_mut().find(|(d, _, _)| *d == a.dtype()) {
                    Some((_, av, cv)) => {
                        av.push(a.clone());
                        cv.push(c.clone());
                    }
                    None => groups.push((a.dtype(), vec![a.clone()], vec![c.clone()])),
                }
            }
            for (_, av, cv) in &groups {
                f(av, cv, n)?;
            }
        } else {
            for (a, c) in averaged.iter().zip(&current) {
                a.copy_(&swa_value(a, c, n)?)?;
            }
        }
        if !self.use_buffers {
            for ((_, a), (_, c)) in my_buffers.iter().zip(&their_buffers) {
                a.copy_(&c.detach())?;
            }
        }
        self.n_averaged.add_(&Tensor::scalar(1i64)?)?;
        Ok(())
    }
}

/// The averaged module's tensors and the model's must pair up, by count and shape.
fn check_match(what: &str, mine: &[(String, Tensor)], theirs: &[(String, Tensor)]) -> Result<()> {
    if mine.len() != theirs.len() {
        bail!(
            Value,
            "AveragedModel.update_parameters: the averaged module has {} {what} but the model has {}",
            mine.len(),
            theirs.len()
        );
    }
    for ((na, a), (nb, b)) in mine.iter().zip(theirs) {
        if a.dims() != b.dims() {
            bail!(
                Shape,
                "AveragedModel.update_parameters: {what} '{na}' of the averaged module has shape {:?} but the model's '{nb}' has shape {:?}",
                a.dims(),
                b.dims()
            );
        }
    }
    Ok(())
}

/// Copies `src`'s parameters, buffers, `requires_grad` flags and training modes into `dst`,
/// which must have the same names, shapes and dtypes.
fn copy_module(src: &dyn Module, dst: &dyn Module) -> Result<()> {
    let pairs = |kind: &str, s: Vec<(String, Tensor)>, d: Vec<(String, Tensor)>| -> Result<_> {
        if s.len() != d.len() || s.iter().zip(&d).any(|((a, _), (b, _))| a != b) {
            let names =
                |v: &[(String, Tensor)]| v.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
            bail!(
                Value,
                "AveragedModel: the copy made by make_copy does not have the model's {kind}: model [{}], copy [{}]",
                names(&s),
                names(&d)
            );
        }
        for ((n, a), (_, b)) in s.iter().zip(&d) {
            if a.dims() != b.dims() || a.dtype() != b.dtype() {
                bail!(
                    Value,
                    "AveragedModel: {kind} '{n}' is {} {:?} in the model but {} {:?} in the copy made by make_copy (convert the copy in make_copy, e.g. with to_dtype)",
                    a.dtype(),
                    a.dims(),
                    b.dtype(),
                    b.dims()
                );
            }
        }
        Ok(s.into_iter().zip(d).map(|((_, a), (_, b))| (a, b)).collect::<Vec<_>>())
    };
    let params = pairs("parameters", src.named_parameters(), dst.named_parameters())?;
    let buffers = pairs("buffers", src.named_buffers(), dst.named_buffers())?;
    let (sm, dm) = (src.named_modules(), dst.named_modules());
    if sm.len() != dm.len() {
        bail!(
            Value,
            "AveragedModel: the copy made by make_copy has {} modules, the model {}",
            dm.len(),
            sm.len()
        );
    }
    {
        let _g = no_grad();
        for (a, b) in params.iter().chain(&buffers) {
            b.copy_(a)?;
        }
    }
    for (a, b) in &params {
        b.requires_grad_(a.requires_grad())?;
    }
    // named_modules is depth first, parents before children: each module ends with its own flag
    for ((_, a), (_, b)) in sm.iter().zip(&dm) {
        b.set_training(a.is_training());
    }
    Ok(())
}

impl<M: Module> ModuleFields for AveragedModel<M> {
    fn base(&self) -> &ModuleBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut ModuleBase {
        &mut self.base
    }
    fn type_name(&self) -> &str {
        "AveragedModel"
    }
    fn visit_members<'a>(&'a self, f: &mut dyn FnMut(Member<'a, '_>)) {
        f(Member::Module("module", &self.module));
        f(Member::Buffer("n_averaged", Some(&self.n_averaged)));
        pyrite_nn::Members::visit_members(&self.base, "", f);
    }
    fn visit_members_mut(&mut self, f: &mut dyn FnMut(MemberMut<'_, '_>) -> Result<()>) -> Result<()> {
        f(MemberMut::Module("module", &mut self.module))?;
        f(MemberMut::Buffer("n_averaged", &mut self.n_averaged))?;
        pyrite_nn::Members::visit_members_mut(&mut self.base, "", f)
    }
    fn as_module(&self) -> &dyn Module {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<M: Module> Module for AveragedModel<M> {
    /// The averaged module's forward (with its hooks).
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.module.call(input)
    }

    fn forward_value(&self, input: Value) -> Result<Value> {
        self.module.call_value(input)
    }
}

impl<M: Module> fmt::Display for AveragedModel<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}

/// What [`update_bn`] takes from each batch: the tensor to run the model on (PyTorch: the
/// batch, or its first element when it is a list or tuple).
pub trait BatchInput {
    fn batch_input(&self) -> Result<&Tensor>;
}

impl BatchInput for Tensor {
    fn batch_input(&self) -> Result<&Tensor> {
        Ok(self)
    }
}

impl<T: BatchInput + ?Sized> BatchInput for &T {
    fn batch_input(&self) -> Result<&Tensor> {
        (**self).batch_input()
    }
}

impl<B> BatchInput for (Tensor, B) {
    fn batch_input(&self) -> Result<&Tensor> {
        Ok(&self.0)
    }
}

impl BatchInput for Vec<Tensor> {
    fn batch_input(&self) -> Result<&Tensor> {
        match self.first() {
            Some(t) => Ok(t),
            None => bail!(Value, "update_bn: a batch is an empty list"),
        }
    }
}

impl BatchInput for Value {
    fn batch_input(&self) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            Value::Tuple(v) | Value::List(v) => match v.first() {
                Some(Value::Tensor(t)) => Ok(t),
                _ => bail!(Value, "update_bn: a batch's first element must be a tensor"),
            },
            other => bail!(Value, "update_bn: a batch must be a tensor, list or tuple, got {}", other.kind()),
        }
    }
}

/// A BatchNorm layer (1d, 2d or 3d) found in a model, as [`update_bn`] finds them:
/// `model.modules().into_iter().filter_map(AnyBatchNorm::of)`.
#[derive(Clone, Copy)]
pub enum AnyBatchNorm<'a> {
    B1(&'a BatchNorm1d),
    B2(&'a BatchNorm2d),
    B3(&'a BatchNorm3d),
}

impl<'a> AnyBatchNorm<'a> {
    /// The layer, if `m` is a BatchNorm layer.
    pub fn of(m: &'a dyn Module) -> Option<AnyBatchNorm<'a>> {
        let a = m.as_any();
        if let Some(b) = a.downcast_ref::<BatchNorm1d>() {
            Some(AnyBatchNorm::B1(b))
        } else if let Some(b) = a.downcast_ref::<BatchNorm2d>() {
            Some(AnyBatchNorm::B2(b))
        } else {
            a.downcast_ref::<BatchNorm3d>().map(AnyBatchNorm::B3)
        }
    }
    /// `reset_running_stats()`.
    pub fn reset_running_stats(self) -> Result<()> {
        match self {
            AnyBatchNorm::B1(b) => b.reset_running_stats(),
            AnyBatchNorm::B2(b) => b.reset_running_stats(),
            AnyBatchNorm::B3(b) => b.reset_running_stats(),
        }
    }
    /// See `BatchNorm1d::set_momentum_override`; returns the previous override.
    pub fn set_momentum_override(self, m: Option<Option<f64>>) -> Option<Option<f64>> {
        match self {
            AnyBatchNorm::B1(b) => b.set_momentum_override(m),
            AnyBatchNorm::B2(b) => b.set_momentum_override(m),
            AnyBatchNorm::B3(b) => b.set_momentum_override(m),
        }
    }
}

/// `torch.optim.swa_utils.update_bn(loader, model)`: recomputes the running statistics of
/// every BatchNorm layer of `model` with one pass over `loader`: the statistics are reset,
/// each layer's momentum is set to `None` (a cumulative average over the batches), the
/// batches run through the model in training mode (under `no_grad`), then the momenta and
/// the model's training mode (`model.train(was_training)`) are restored, also when a batch
/// fails. A model without BatchNorm layers is left alone and the loader is not read.
///
/// Each batch is a tensor, or a pair or list whose first element is the input
/// ([`BatchInput`]).
///
/// ```
/// use pyrite::nn::{BatchNorm1d, Module};
/// use pyrite::optim::swa_utils::update_bn;
/// use pyrite::Tensor;
///
/// let bn = BatchNorm1d::new(2)?;
/// bn.eval();
/// let loader = vec![Tensor::new([[1f32, 10.], [3., 30.]])?, Tensor::new([[5f32, 50.], [7., 70.]])?];
/// update_bn(&loader, &bn)?;
/// // the mean of the two batch means, whatever the momentum
/// let mean = bn.running_mean.as_ref().unwrap().to_vec::<f32>()?;
/// assert!((mean[0] - 4.0).abs() < 1e-6 && (mean[1] - 40.0).abs() < 1e-5);
/// assert!(!bn.is_training() && bn.momentum() == Some(0.1));
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn update_bn<I, M>(loader: I, model: &M) -> Result<()>
where
    I: IntoIterator,
    I::Item: BatchInput,
    M: Module + ?Sized,
{
    let bns: Vec<AnyBatchNorm<'_>> = model.modules().into_iter().filter_map(AnyBatchNorm::of).collect();
    if bns.is_empty() {
        return Ok(());
    }
    let _g = no_grad();
    for bn in &bns {
        bn.reset_running_stats()?;
    }
    let was_training = model.is_training();
    model.train();
    let saved: Vec<_> = bns.iter().map(|bn| bn.set_momentum_override(Some(None))).collect();
    let run = || -> Result<()> {
        for batch in loader {
            model.call(batch.batch_input()?)?;
        }
        Ok(())
    };
    let result = run();
    for (bn, m) in bns.iter().zip(saved) {
        bn.set_momentum_override(m);
    }
    model.set_training(was_training);
    result
}
