//! One `call` for every module: PyTorch's `module(*args)`.
//!
//! A module of one tensor is called with [`Module::call`]`(&x)`. A module of several inputs
//! or outputs has an inherent `call` that takes its positional arguments as a tuple and
//! returns what its `forward` returns, typed:
//!
//! ```
//! use pyrite::nn::{Module, MSELoss, RnnOptions, LSTM};
//! use pyrite::{DType, Tensor};
//! let lstm = LSTM::new(4, 8, RnnOptions::default())?;
//! let x = Tensor::randn([5, 2, 4], DType::F32)?;
//! let (out, (h, c)) = lstm.call(&x)?; // zero initial state
//! let (out2, hidden) = lstm.call((&x, (&h, &c)))?; // `lstm(x, (h, c))`
//! assert_eq!((out.dims(), hidden.0.dims()), (&[5, 2, 8][..], &[1, 2, 8][..]));
//! let loss = MSELoss::new().call((&out2, &out))?; // `loss_fn(input, target)`
//! assert_eq!(loss.rank(), 0);
//! # Ok::<(), pyrite::Error>(())
//! ```
//!
//! The argument forms a module accepts are the [`Args`] implementations for it; each names
//! the call's output type, so a wrong form is a compile-time error. Every form goes through
//! the module's hooks exactly as [`Module::call_value`] does (hooks see the arguments as a
//! tuple of [`Value`]s), and through `forward_value` directly when no hook is registered. A
//! module behind `dyn Module` is called with `call_value` and its result unpacked with
//! [`Value::extract`].

use crate::module::Module;
use crate::utils::rnn::PackedSequence;
use crate::value::Value;
use pyrite_core::{bail, Result, Tensor};

/// A Rust value a call's output converts into ([`Value::extract`]): a tensor, an optional
/// tensor, a packed sequence, a [`Value`] itself, or a tuple of them.
pub trait FromValue: Sized {
    fn from_value(v: Value) -> Result<Self>;
}

impl FromValue for Value {
    fn from_value(v: Value) -> Result<Value> {
        Ok(v)
    }
}

impl FromValue for Tensor {
    fn from_value(v: Value) -> Result<Tensor> {
        v.into_tensor()
    }
}

impl FromValue for Option<Tensor> {
    fn from_value(v: Value) -> Result<Option<Tensor>> {
        match v {
            Value::None => Ok(None),
            other => other.into_tensor().map(Some),
        }
    }
}

impl FromValue for PackedSequence {
    fn from_value(v: Value) -> Result<PackedSequence> {
        PackedSequence::from_value(&v)
    }
}

fn tuple_items(v: Value, n: usize) -> Result<Vec<Value>> {
    match v {
        Value::Tuple(items) | Value::List(items) if items.len() == n => Ok(items),
        Value::Tuple(items) | Value::List(items) => {
            bail!(Value, "expected a tuple of {n} values, got one of {}", items.len())
        }
        other => bail!(Value, "expected a tuple of {n} values, got {}", other.kind()),
    }
}

impl<A: FromValue, B: FromValue> FromValue for (A, B) {
    fn from_value(v: Value) -> Result<(A, B)> {
        let mut it = tuple_items(v, 2)?.into_iter();
        let (a, b) = (it.next().unwrap_or_default(), it.next().unwrap_or_default());
        Ok((A::from_value(a)?, B::from_value(b)?))
    }
}

impl<A: FromValue, B: FromValue, C: FromValue> FromValue for (A, B, C) {
    fn from_value(v: Value) -> Result<(A, B, C)> {
        let mut it = tuple_items(v, 3)?.into_iter();
        let (a, b, c) =
            (it.next().unwrap_or_default(), it.next().unwrap_or_default(), it.next().unwrap_or_default());
        Ok((A::from_value(a)?, B::from_value(b)?, C::from_value(c)?))
    }
}

impl Value {
    /// This value as a Rust type: `let (out, (h, c)) = v.extract::<(Tensor, (Tensor,
    /// Tensor))>()?` (what a typed `call` does with a module's output).
    pub fn extract<T: FromValue>(self) -> Result<T> {
        T::from_value(self)
    }
}

/// The positional arguments module `M`'s `call` accepts in one form, and what the call
/// returns for them (`type Output`). Implemented by each module for its forms:
/// `(&Tensor, &Tensor)` for a loss, `&Tensor` and `(&Tensor, (&Tensor, &Tensor))` for an
/// LSTM, ...
pub trait Args<M: ?Sized>: Sized {
    type Output: FromValue;

    /// The arguments as the tuple `forward_value` and the hooks see.
    fn into_value(self) -> Value;

    /// The call without hooks. By default `forward_value` on [`Args::into_value`]; a module
    /// may override it to skip building the [`Value`].
    fn forward(self, module: &M) -> Result<Self::Output>
    where
        M: Module,
    {
        Self::Output::from_value(module.forward_value(self.into_value())?)
    }
}

/// The body of every typed `call`: the hooks (when any are registered) around `forward`, and
/// the module path on an error, as for [`Module::call_value`].
pub fn call<M: Module, A: Args<M>>(module: &M, args: A) -> Result<A::Output> {
    if crate::hooks::any_active(module.base()) {
        A::Output::from_value(module.call_value(args.into_value())?)
    } else {
        args.forward(module).map_err(|e| crate::module::in_module(module, e))
    }
}

/// Gives each listed module type the inherent `call` that takes its [`Args`].
macro_rules! typed_call {
    ($($m:ty),* $(,)?) => {$(
        impl $m {
            /// `module(*args)`: the positional arguments as a tuple (see [`crate::call`]),
            /// through the hooks; returns what `forward` returns.
            pub fn call<A: $crate::call::Args<Self>>(&self, args: A) -> pyrite_core::Result<A::Output> {
                $crate::call::call(self, args)
            }
        }
    )*};
}
pub(crate) use typed_call;

/// `impl Args<M> for <form>` with the given output and conversion, for each module type.
macro_rules! args {
    ($($m:ty),+ : $form:ty => $out:ty, |$a:pat_param| $value:expr) => {$(
        impl $crate::call::Args<$m> for $form {
            type Output = $out;
            fn into_value(self) -> $crate::value::Value {
                let $a = self;
                $value
            }
        }
    )+};
}
pub(crate) use args;

/// `Value::Tensor` of a borrowed tensor.
pub(crate) fn t(x: &Tensor) -> Value {
    Value::Tensor(x.clone())
}

/// `Value::None` or the tensor.
pub(crate) fn opt(x: Option<&Tensor>) -> Value {
    x.map_or(Value::None, t)
}

// The modules of two or three tensors and one tensor out.
args!(crate::Bilinear, crate::CosineSimilarity, crate::PairwiseDistance:
    (&Tensor, &Tensor) => Tensor, |(a, b)| Value::Tuple(vec![t(a), t(b)]));
typed_call!(crate::Bilinear, crate::CosineSimilarity, crate::PairwiseDistance);

// The losses: `(input, target)`, `(x1, x2, y)` / `(anchor, positive, negative)` /
// `(input, target, var)`, and CTC's `(log_probs, targets, input_lengths, target_lengths)`.
args!(crate::CrossEntropyLoss, crate::NLLLoss, crate::MSELoss, crate::L1Loss, crate::SmoothL1Loss,
    crate::HuberLoss, crate::BCELoss, crate::BCEWithLogitsLoss, crate::KLDivLoss, crate::HingeEmbeddingLoss,
    crate::SoftMarginLoss, crate::MultiLabelSoftMarginLoss, crate::MultiMarginLoss,
    crate::MultiLabelMarginLoss, crate::PoissonNLLLoss:
    (&Tensor, &Tensor) => Tensor, |(a, b)| Value::Tuple(vec![t(a), t(b)]));
args!(crate::CosineEmbeddingLoss, crate::MarginRankingLoss, crate::TripletMarginLoss, crate::GaussianNLLLoss:
    (&Tensor, &Tensor, &Tensor) => Tensor, |(a, b, c)| Value::Tuple(vec![t(a), t(b), t(c)]));
args!(crate::CTCLoss:
    (&Tensor, &Tensor, &Tensor, &Tensor) => Tensor, |(a, b, c, d)| Value::Tuple(vec![t(a), t(b), t(c), t(d)]));
typed_call!(
    crate::CrossEntropyLoss,
    crate::NLLLoss,
    crate::MSELoss,
    crate::L1Loss,
    crate::SmoothL1Loss,
    crate::HuberLoss,
    crate::BCELoss,
    crate::BCEWithLogitsLoss,
    crate::KLDivLoss,
    crate::HingeEmbeddingLoss,
    crate::SoftMarginLoss,
    crate::MultiLabelSoftMarginLoss,
    crate::MultiMarginLoss,
    crate::MultiLabelMarginLoss,
    crate::PoissonNLLLoss,
    crate::CosineEmbeddingLoss,
    crate::MarginRankingLoss,
    crate::TripletMarginLoss,
    crate::GaussianNLLLoss,
    crate::CTCLoss
);

// EmbeddingBag: `input`, `(input, offsets)` or `(input, offsets, per_sample_weights)`.
args!(crate::EmbeddingBag: &Tensor => Tensor, |x| t(x));
args!(crate::EmbeddingBag: (&Tensor, &Tensor) => Tensor, |(x, o)| Value::Tuple(vec![t(x), t(o)]));
args!(crate::EmbeddingBag: (&Tensor, Option<&Tensor>, Option<&Tensor>) => Tensor,
    |(x, o, w)| Value::Tuple(vec![t(x), opt(o), opt(w)]));
typed_call!(crate::EmbeddingBag);
