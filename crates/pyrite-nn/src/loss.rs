//! Loss layers (`nn.CrossEntropyLoss`, ...): each holds its options (class weights as buffers,
//! as PyTorch registers them) and calls its function in [`crate::functional`]. Call them with
//! `loss.call((&input, &target))` (a tuple of three for the margin, triplet and Gaussian
//! losses, of four for `CTCLoss`; see [`crate::call`]).
//!
//! ```
//! use pyrite::nn::{CrossEntropyLoss, Module};
//! use pyrite::Tensor;
//! let logits = Tensor::new([[2.0f32, 0.5, -1.0], [0.1, 0.2, 3.0]])?;
//! let target = Tensor::new([0i64, 2])?;
//! let loss = CrossEntropyLoss::new().label_smoothing(0.1).call((&logits, &target))?;
//! assert!(loss.item::<f32>()? > 0.0);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::functional::{self as F, CrossEntropyOptions, KlReduction, Reduction};
use crate::module::{plain_members, Module, ModuleBase};
use crate::parameter::Buffer;
use crate::value::Value;
use pyrite_core::{bail, Result, Tensor};

plain_members!(Reduction, KlReduction);

/// The tensors of a loss call: `n` of them.
fn args(input: &Value, n: usize, name: &str) -> Result<Vec<Tensor>> {
    let v: Vec<Tensor> = match input {
        Value::Tuple(v) | Value::List(v) => {
            v.iter().map(|x| x.as_tensor().cloned()).collect::<Result<_>>()?
        }
        Value::Tensor(t) => vec![t.clone()],
        other => bail!(Value, "{name} takes {n} tensors, got {}", other.kind()),
    };
    if v.len() != n {
        bail!(Value, "{name}.forward() takes {n} tensors, got {}", v.len());
    }
    Ok(v)
}

macro_rules! loss_module {
    ($($name:ident [$n:literal] { $($field:ident: $ty:ty = $default:expr),* } => |$s:ident, $x:ident| $body:expr, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            $(pub $field: $ty,)*
        }

        impl $name {
            /// With PyTorch's defaults.
            #[allow(clippy::new_without_default)]
            pub fn new() -> $name {
                $name { base: ModuleBase::new(), $($field: $default,)* }
            }
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                pub fn $field(mut self, v: $ty) -> $name {
                    self.$field = v;
                    self
                }
            )*
        }

        impl Module for $name {
            fn forward_value(&self, input: Value) -> Result<Value> {
                let $x = args(&input, $n, stringify!($name))?;
                let $s = self;
                Ok(Value::Tensor($body?))
            }
        }
    )*};
}

fn buf(b: &Option<Buffer>) -> Option<&Tensor> {
    b.as_ref().map(|b| b.tensor())
}

loss_module! {
    CrossEntropyLoss [2] { weight: Option<Buffer> = None, ignore_index: i64 = -100, reduction: Reduction = Reduction::Mean, label_smoothing: f64 = 0.0 }
        => |s, x| F::cross_entropy(&x[0], &x[1], &CrossEntropyOptions {
            weight: buf(&s.weight).cloned(), ignore_index: s.ignore_index, reduction: s.reduction, label_smoothing: s.label_smoothing }),
        "`nn.CrossEntropyLoss`: log-softmax and NLL of class indices (or of class probabilities), with class weights, `ignore_index` and label smoothing.";
    NLLLoss [2] { weight: Option<Buffer> = None, ignore_index: i64 = -100, reduction: Reduction = Reduction::Mean }
        => |s, x| F::nll_loss(&x[0], &x[1], &CrossEntropyOptions {
            weight: buf(&s.weight).cloned(), ignore_index: s.ignore_index, reduction: s.reduction, label_smoothing: 0.0 }),
        "`nn.NLLLoss`: the negative log-likelihood of class indices given log-probabilities.";
    MSELoss [2] { reduction: Reduction = Reduction::Mean } => |s, x| F::mse_loss(&x[0], &x[1], s.reduction),
        "`nn.MSELoss`: mean squared error.";
    L1Loss [2] { reduction: Reduction = Reduction::Mean } => |s, x| F::l1_loss(&x[0], &x[1], s.reduction),
        "`nn.L1Loss`: mean absolute error.";
    SmoothL1Loss [2] { reduction: Reduction = Reduction::Mean, beta: f64 = 1.0 } => |s, x| F::smooth_l1_loss(&x[0], &x[1], &F::SmoothL1LossOptions { reduction: s.reduction, beta: s.beta }),
        "`nn.SmoothL1Loss(beta=1.0)`.";
    HuberLoss [2] { reduction: Reduction = Reduction::Mean, delta: f64 = 1.0 } => |s, x| F::huber_loss(&x[0], &x[1], &F::HuberLossOptions { reduction: s.reduction, delta: s.delta }),
        "`nn.HuberLoss(delta=1.0)`.";
    BCELoss [2] { weight: Option<Buffer> = None, reduction: Reduction = Reduction::Mean }
        => |s, x| F::binary_cross_entropy(&x[0], &x[1], &F::BinaryCrossEntropyOptions {
            weight: buf(&s.weight).cloned(), reduction: s.reduction }),
        "`nn.BCELoss`: binary cross-entropy of probabilities.";
    BCEWithLogitsLoss [2] { weight: Option<Buffer> = None, reduction: Reduction = Reduction::Mean, pos_weight: Option<Buffer> = None }
        => |s, x| F::binary_cross_entropy_with_logits(&x[0], &x[1], &F::BinaryCrossEntropyWithLogitsOptions {
            weight: buf(&s.weight).cloned(), reduction: s.reduction, pos_weight: buf(&s.pos_weight).cloned() }),
        "`nn.BCEWithLogitsLoss`: sigmoid and binary cross-entropy in one stable step, with `pos_weight`.";
    KLDivLoss [2] { reduction: KlReduction = KlReduction::Mean, log_target: bool = false }
        => |s, x| F::kl_div(&x[0], &x[1], &F::KlDivOptions { reduction: s.reduction, log_target: s.log_target }),
        "`nn.KLDivLoss`: KL divergence of log-probabilities from a target distribution (`batchmean` is the mathematically right mean).";
    CosineEmbeddingLoss [3] { margin: f64 = 0.0, reduction: Reduction = Reduction::Mean }
        => |s, x| F::cosine_embedding_loss(&x[0], &x[1], &x[2], &F::CosineEmbeddingLossOptions { margin: s.margin, reduction: s.reduction }),
        "`nn.CosineEmbeddingLoss`: called with `(x1, x2, y)`.";
    MarginRankingLoss [3] { margin: f64 = 0.0, reduction: Reduction = Reduction::Mean }
        => |s, x| F::margin_ranking_loss(&x[0], &x[1], &x[2], &F::MarginRankingLossOptions { margin: s.margin, reduction: s.reduction }),
        "`nn.MarginRankingLoss`: called with `(x1, x2, y)`.";
    TripletMarginLoss [3] { margin: f64 = 1.0, p: f64 = 2.0, eps: f64 = 1e-6, swap: bool = false, reduction: Reduction = Reduction::Mean }
        => |s, x| F::triplet_margin_loss(&x[0], &x[1], &x[2], &F::TripletMarginLossOptions {
            margin: s.margin, p: s.p, eps: s.eps, swap: s.swap, reduction: s.reduction }),
        "`nn.TripletMarginLoss`: called with `(anchor, positive, negative)`.";
    HingeEmbeddingLoss [2] { margin: f64 = 1.0, reduction: Reduction = Reduction::Mean }
        => |s, x| F::hinge_embedding_loss(&x[0], &x[1], &F::HingeEmbeddingLossOptions { margin: s.margin, reduction: s.reduction }),
        "`nn.HingeEmbeddingLoss`.";
    SoftMarginLoss [2] { reduction: Reduction = Reduction::Mean } => |s, x| F::soft_margin_loss(&x[0], &x[1], s.reduction),
        "`nn.SoftMarginLoss`: `log(1 + exp(-y x))`.";
    MultiLabelSoftMarginLoss [2] { weight: Option<Buffer> = None, reduction: Reduction = Reduction::Mean }
        => |s, x| F::multilabel_soft_margin_loss(&x[0], &x[1], &F::MultilabelSoftMarginLossOptions {
            weight: buf(&s.weight).cloned(), reduction: s.reduction }),
        "`nn.MultiLabelSoftMarginLoss`.";
    MultiMarginLoss [2] { p: u32 = 1, margin: f64 = 1.0, weight: Option<Buffer> = None, reduction: Reduction = Reduction::Mean }
        => |s, x| F::multi_margin_loss(&x[0], &x[1], &F::MultiMarginLossOptions {
            p: s.p, margin: s.margin, weight: buf(&s.weight).cloned(), reduction: s.reduction }),
        "`nn.MultiMarginLoss`: the multi-class hinge loss.";
    MultiLabelMarginLoss [2] { reduction: Reduction = Reduction::Mean } => |s, x| F::multilabel_margin_loss(&x[0], &x[1], s.reduction),
        "`nn.MultiLabelMarginLoss`.";
    PoissonNLLLoss [2] { log_input: bool = true, full: bool = false, eps: f64 = 1e-8, reduction: Reduction = Reduction::Mean }
        => |s, x| F::poisson_nll_loss(&x[0], &x[1], &F::PoissonNllLossOptions {
            log_input: s.log_input, full: s.full, eps: s.eps, reduction: s.reduction }),
        "`nn.PoissonNLLLoss`.";
    GaussianNLLLoss [3] { full: bool = false, eps: f64 = 1e-6, reduction: Reduction = Reduction::Mean }
        => |s, x| F::gaussian_nll_loss(&x[0], &x[1], &x[2], &F::GaussianNllLossOptions { full: s.full, eps: s.eps, reduction: s.reduction }),
        "`nn.GaussianNLLLoss`: called with `(input, target, var)`.";
    CTCLoss [4] { blank: i64 = 0, reduction: Reduction = Reduction::Mean, zero_infinity: bool = false }
        => |s, x| F::ctc_loss(&x[0], &x[1], &x[2], &x[3], &F::CtcLossOptions {
            blank: s.blank, reduction: s.reduction, zero_infinity: s.zero_infinity }),
        "`nn.CTCLoss`: called with `(log_probs [T, N, C], targets, input_lengths, target_lengths)`; targets padded `[N, S]` or concatenated 1-D.";
}
