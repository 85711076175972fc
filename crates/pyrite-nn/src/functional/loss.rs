//! Loss functions (`F.cross_entropy`, `F.mse_loss`, ...), with `reduction` none/mean/sum.
//! Cross-entropy is `log_softmax` then the NLL gather (the fused, stable form PyTorch uses).

use super::Reduction;
use pyrite_core::{bail, DType, Result, Scalar, Tensor};

fn check_same_shape(op: &str, input: &Tensor, target: &Tensor) -> Result<()> {
    if input.dims() != target.dims() {
        bail!(
            Shape,
            "{op}: Using a target size ({:?}) that is different to the input size ({:?}). This will likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            target.dims(),
            input.dims()
        );
    }
    Ok(())
}

fn check_float(op: &str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_floating_point() {
        bail!(DType, "{op}: expected a floating-point input, got {}", t.dtype());
    }
    Ok(())
}

/// Options of [`cross_entropy`] and [`nll_loss`] (PyTorch's keywords and defaults).
#[derive(Clone, Debug)]
pub struct CrossEntropyOptions {
    /// A weight per class.
    pub weight: Option<Tensor>,
    /// Targets equal to this index contribute nothing (class-index targets only).
    pub ignore_index: i64,
    pub reduction: Reduction,
    /// In [0, 1]: mixes the target with the uniform distribution.
    pub label_smoothing: f64,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
            label_smoothing: 0.0,
        }
    }
}

/// The class dim and the count of classes of an `[N, C, ...]` or unbatched `[C]` input.
fn classes(op: &str, input: &Tensor) -> Result<usize> {
    match input.rank() {
        0 => bail!(Shape, "{op}: input tensor should be 1D or more, got a 0-d tensor"),
        1 => Ok(input.dims()[0]),
        _ => Ok(input.dims()[1]),
    }
}

/// `F.nll_loss(log_probs, target, weight, ignore_index, reduction)`: `-weight[t] *
/// log_probs[t]` per element; the mean divides by the summed weights of the targets used.
/// Class indices are Long or Byte, shaped as `input` without the class dim (`[N]` for `[N, C]`,
/// `[N, d1, ...]` for `[N, C, d1, ...]`, 0-d for an unbatched `[C]`). Ignored targets get a
/// zero gradient, even when every target is ignored and the mean is `0 / 0 = NaN`.
pub fn nll_loss(input: &Tensor, target: &Tensor, opts: &CrossEntropyOptions) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::nll_loss", &[input, target]);
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("nll_loss", &[Some(input), Some(target)], |t| {
        let (input, target) = (t.at(0), t.at(1));
        nll_loss(input, target, opts)
    }) {
        return r;
    }
    check_float("nll_loss", input)?;
    if input.rank() == 0 {
        bail!(Value, "Expected 1 or more dimensions (got 0)");
    }
    let c = classes("nll_loss", input)?;
    let class_dim: isize = if input.rank() == 1 { 0 } else { 1 };
    if input.rank() > 1 && target.dims().first() != Some(&input.dims()[0]) {
        bail!(
            Value,
            "Expected input batch_size ({}) to match target batch_size ({}).",
            input.dims()[0],
            target.dims().first().copied().unwrap_or(0)
        );
    }
    if target.dtype() != DType::I64 && target.dtype() != DType::U8 {
        bail!(DType, "expected target dtype to be Long or Byte, but got {}", target.dtype().type_name());
    }
    let target = match input.rank() {
        1 => match target.rank() {
            0 => target.clone(),
            1 if target.dims()[0] == 1 => target.reshape(Vec::<usize>::new())?,
            1 => bail!(
                Value,
                "For 1D input, 1D target must have size 1, but got target size: {}",
                target.dims()[0]
            ),
            _ => bail!(Shape, "0D or 1D target tensor expected, multi-target not supported"),
        },
        2 => {
            if target.rank() != 1 {
                bail!(Shape, "0D or 1D target tensor expected, multi-target not supported");
            }
            target.clone()
        }
        4 => {
            if target.rank() != 3 {
                bail!(
                    Shape,
                    "only batches of spatial targets supported (3D tensors) but got targets of dimension: {}",
                    target.rank()
                );
            }
            let d = input.dims();
            if target.dims() != [d[0], d[2], d[3]] {
                bail!(Shape, "size mismatch (got input: {:?} , target: {:?}", d, target.dims());
            }
            target.clone()
        }
        _ => {
            let mut expected = input.dims().to_vec();
            expected.remove(1);
            if target.dims() != expected.as_slice() {
                bail!(Shape, "Expected target size {:?}, got {:?}", expected, target.dims());
            }
            target.clone()
        }
    };
    if let Some(w) = &opts.weight
        && (w.rank() != 1 || w.numel() != c)
    {
        bail!(Shape, "weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {:?}", w.dims());
    }
    let t = target.to_dtype(DType::I64)?;
    let ignored = t.eq_scalar(opts.ignore_index)?;
    for &v in &t.to_vec::<i64>()? {
        if v != opts.ignore_index && (v < 0 || v as usize >= c) {
            bail!(Index, "Target {v} is out of bounds.");
        }
    }
    let safe = t.masked_fill(&ignored, 0)?;
    // masked, so that ignored elements get a zero gradient whatever the divisor of the mean
    let picked = input
        .gather(class_dim, &safe.unsqueeze(class_dim)?)?
        .squeeze_dim(class_dim)?
        .masked_fill(&ignored, 0.0)?;
    let keep = ignored.logical_not()?.to_dtype(input.dtype())?;
    let w = match &opts.weight {
        Some(w) => w
            .detach()
            .to_dtype(input.dtype())?
            .index_select(0, &safe.reshape([-1isize])?)?
            .reshape(safe.dims())?
            .mul(&keep)?,
        None => keep,
    };
    let loss = picked.mul(&w)?.neg()?;
    match opts.reduction {
        Reduction::None => Ok(loss),
        Reduction::Sum => loss.sum(),
        Reduction::Mean => loss.sum()?.div(&w.sum()?),
    }
}

/// `F.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)`.
/// As in PyTorch, a `target` of `input`'s shape holds class probabilities (it must be
/// floating-point); any other shape holds class indices (Long or Byte, `input`'s shape without
/// the class dim).
pub fn cross_entropy(input: &Tensor, target: &Tensor, opts: &CrossEntropyOptions) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::cross_entropy_loss", &[input, target]);
    // Autocast's float32 list.
    if let Some(r) =
        pyrite_core::autocast::dispatch("cross_entropy_loss", &[Some(input), Some(target)], |t| {
            let (input, target) = (t.at(0), t.at(1));
            {
                cross_entropy(input, target, opts)
            }
        })
    {
        return r;
    }
    check_float("cross_entropy", input)?;
    if !(0.0..=1.0).contains(&opts.label_smoothing) {
        bail!(Value, "label_smoothing must be between 0.0 and 1.0. Got: {}", opts.label_smoothing);
    }
    let c = classes("cross_entropy", input)?;
    let class_dim: isize = if input.rank() == 1 { 0 } else { 1 };
    let wshape = |w: &Tensor| -> Result<Tensor> {
        let mut s = vec![1isize; input.rank()];
        s[class_dim as usize] = c as isize;
        w.detach().to_dtype(input.dtype())?.reshape(s)
    };
    if input.dims() == target.dims() {
        // class probabilities
        if !target.dtype().is_floating_point() {
            bail!(
                DType,
                "Expected floating point type for target with class probabilities, got {}",
                target.dtype().type_name()
            );
        }
        let logp = input.log_softmax(class_dim)?;
        let eps = opts.label_smoothing;
        let t = if eps > 0.0 {
            target.mul_scalar(1.0 - eps)?.add_scalar(eps / c as f64)?
        } else {
            target.clone()
        };
        let mut prod = logp.mul(&t)?;
        if let Some(w) = &opts.weight {
            prod = prod.mul(&wshape(w)?)?;
        }
        let loss = prod.sum_dims(&[class_dim], false)?.neg()?;
        return match opts.reduction {
            Reduction::None => Ok(loss),
            Reduction::Sum => loss.sum(),
            Reduction::Mean => {
                let n = if input.rank() == 1 { 1 } else { input.numel() / c.max(1) };
                loss.sum()?.div_scalar(n as f64)
            }
        };
    }
    let logp = input.log_softmax(class_dim)?;
    let nll = nll_loss(&logp, target, &CrossEntropyOptions { label_smoothing: 0.0, ..opts.clone() })?;
    let eps = opts.label_smoothing;
    if eps == 0.0 {
        return Ok(nll);
    }
    let mut smooth = match &opts.weight {
        Some(w) => logp.mul(&wshape(w)?)?.sum_dims(&[class_dim], false)?.neg()?,
        None => logp.sum_dims(&[class_dim], false)?.neg()?,
    };
    let t = target.to_dtype(DType::I64)?.reshape(smooth.dims())?;
    let ignored = t.eq_scalar(opts.ignore_index)?;
    smooth = smooth.masked_fill(&ignored, 0.0)?;
    let ret = match opts.reduction {
        Reduction::None => smooth,
        Reduction::Sum => smooth.sum()?,
        Reduction::Mean => match &opts.weight {
            Some(w) => {
                let keep = ignored.logical_not()?;
                let used = t.masked_select(&keep)?;
                smooth.sum()?.div(&w.detach().to_dtype(input.dtype())?.index_select(0, &used)?.sum()?)?
            }
            None => smooth.sum()?.div(&ignored.logical_not()?.to_dtype(input.dtype())?.sum()?)?,
        },
    };
    nll.mul_scalar(1.0 - eps)?.add(&ret.mul_scalar(eps / c as f64)?)
}

/// `F.mse_loss(input, target, reduction)`.
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::mse_loss", &[input, target]);
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("mse_loss", &[Some(input), Some(target)], |t| {
        let (input, target) = (t.at(0), t.at(1));
        {
            mse_loss(input, target, reduction)
        }
    }) {
        return r;
    }
    check_same_shape("mse_loss", input, target)?;
    reduction.apply(input.sub(target)?.square()?)
}

/// `F.l1_loss(input, target, reduction)`.
pub fn l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("l1_loss", &[Some(input), Some(target)], |t| {
        let (input, target) = (t.at(0), t.at(1));
        {
            l1_loss(input, target, reduction)
        }
    }) {
        return r;
    }
    check_same_shape("l1_loss", input, target)?;
    reduction.apply(input.sub(target)?.abs()?)
}

/// Options of [`smooth_l1_loss`] (`F.smooth_l1_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothL1LossOptions {
    pub reduction: Reduction,
    /// Where the loss turns from quadratic to linear (`0` is L1).
    pub beta: f64,
}

impl Default for SmoothL1LossOptions {
    fn default() -> Self {
        SmoothL1LossOptions { reduction: Reduction::Mean, beta: 1.0 }
    }
}

/// `F.smooth_l1_loss(input, target, reduction='mean', beta=1.0)`: `0.5 d^2 / beta` below
/// `beta`, else `|d| - 0.5 beta` (`beta = 0` is L1).
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor, opts: &SmoothL1LossOptions) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("smooth_l1_loss", &[Some(input), Some(target)], |t| {
        let (input, target) = (t.at(0), t.at(1));
        {
            smooth_l1_loss(input, target, opts)
        }
    }) {
        return r;
    }
    let SmoothL1LossOptions { reduction, beta } = *opts;
    check_same_shape("smooth_l1_loss", input, target)?;
    if beta < 0.0 {
        bail!(Value, "smooth_l1_loss does not support negative values for beta.");
    }
    let d = input.sub(target)?.abs()?;
    if beta == 0.0 {
        return reduction.apply(d);
    }
    let quad = d.square()?.mul_scalar(0.5 / beta)?;
    reduction.apply(quad.where_(&d.lt_scalar(beta)?, &d.sub_scalar(0.5 * beta)?)?)
}

/// Options of [`huber_loss`] (`F.huber_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HuberLossOptions {
    pub reduction: Reduction,
    /// Where the loss turns from quadratic to linear (positive).
    pub delta: f64,
}

impl Default for HuberLossOptions {
    fn default() -> Self {
        HuberLossOptions { reduction: Reduction::Mean, delta: 1.0 }
    }
}

/// `F.huber_loss(input, target, reduction='mean', delta=1.0)`: `0.5 d^2` below `delta`, else
/// `delta (|d| - 0.5 delta)`.
pub fn huber_loss(input: &Tensor, target: &Tensor, opts: &HuberLossOptions) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("huber_loss", &[Some(input), Some(target)], |t| {
        let (input, target) = (t.at(0), t.at(1));
        huber_loss(input, target, opts)
    }) {
        return r;
    }
    let HuberLossOptions { reduction, delta } = *opts;
    check_same_shape("huber_loss", input, target)?;
    if delta <= 0.0 {
        bail!(Value, "huber_loss does not support non-positive values for delta.");
    }
    let d = input.sub(target)?.abs()?;
    let quad = d.square()?.mul_scalar(0.5)?;
    let lin = d.sub_scalar(0.5 * delta)?.mul_scalar(delta)?;
    reduction.apply(quad.where_(&d.lt_scalar(delta)?, &lin)?)
}

/// Options of [`binary_cross_entropy`] (`F.binary_cross_entropy`'s keywords and defaults).
#[derive(Clone, Debug, Default)]
pub struct BinaryCrossEntropyOptions {
    /// A weight per element (broadcast to the input).
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
}

/// `F.binary_cross_entropy(probs, target, weight=None, reduction='mean')`: log terms clamped
/// at -100, as PyTorch does, with PyTorch's gradient `(x - t) / max(x (1 - x), 1e-12)` (finite
/// at 0 and 1). Input and target must lie in [0, 1].
pub fn binary_cross_entropy(
    input: &Tensor,
    target: &Tensor,
    opts: &BinaryCrossEntropyOptions,
) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) =
        pyrite_core::autocast::dispatch("binary_cross_entropy", &[Some(input), Some(target)], |t| {
            let (input, target) = (t.at(0), t.at(1));
            {
                binary_cross_entropy(input, target, opts)
            }
        })
    {
        return r;
    }
    let (weight, reduction) = (opts.weight.as_ref(), opts.reduction);
    check_float("binary_cross_entropy", input)?;
    if input.dims() != target.dims() {
        bail!(
            Value,
            "Using a target size ({:?}) that is different to the input size ({:?}) is deprecated. Please ensure they have the same size.",
            target.dims(),
            input.dims()
        );
    }
    for (t, what) in [(input, "input"), (target, "target")] {
        if t.to_dtype(DType::F64)?.to_vec::<f64>()?.iter().any(|v| !(0.0..=1.0).contains(v)) {
            bail!(Value, "all elements of {what} should be between 0 and 1");
        }
    }
    let t = target.to_dtype(input.dtype())?;
    let mut loss = pyrite_core::autograd::apply(BinaryCrossEntropy, &[input, &t])?.remove(0);
    if let Some(w) = weight {
        loss = loss.mul(&w.to_dtype(input.dtype())?)?;
    }
    reduction.apply(loss)
}

/// The elementwise binary cross-entropy of probabilities `x` and targets `t`, with the
/// gradients of PyTorch's `binary_cross_entropy_backward` (`x`) and
/// `binary_cross_entropy_target_backward` (`t`: `-logit(x)`).
struct BinaryCrossEntropy;

impl pyrite_core::autograd::Function for BinaryCrossEntropy {
    fn forward(
        &self,
        ctx: &mut pyrite_core::autograd::FunctionCtx,
        inputs: &[&Tensor],
    ) -> Result<Vec<Tensor>> {
        let (x, t) = (inputs[0], inputs[1]);
        ctx.save_for_backward(&[x, t]);
        let lo = Some(Scalar::from(-100.0));
        let log_p = x.log()?.clamp(lo, None)?;
        let log_1mp = x.neg()?.log1p()?.clamp(lo, None)?;
        // (t - 1) log(1 - x) - t log(x)
        Ok(vec![t.sub_scalar(1.0)?.mul(&log_1mp)?.sub(&t.mul(&log_p)?)?])
    }

    fn backward(
        &self,
        ctx: &pyrite_core::autograd::FunctionCtx,
        grads: &[Tensor],
    ) -> Result<Vec<Option<Tensor>>> {
        let (x, t) = (&ctx.saved_tensors()[0], &ctx.saved_tensors()[1]);
        let g = &grads[0];
        let gx = if ctx.needs_input_grad(0) {
            let denom = x.neg()?.add_scalar(1.0)?.mul(x)?.clamp(Some(Scalar::from(1e-12)), None)?;
            Some(g.mul(&x.sub(t)?)?.div(&denom)?)
        } else {
            None
        };
        let gt =
            if ctx.needs_input_grad(1) { Some(g.mul(&x.neg()?.log1p()?.sub(&x.log()?)?)?) } else { None };
        Ok(vec![gx, gt])
    }

    fn name(&self) -> String {
        "BinaryCrossEntropyBackward0".into()
    }
}

/// Options of [`binary_cross_entropy_with_logits`] (its keywords and defaults).
#[derive(Clone, Debug, Default)]
pub struct BinaryCrossEntropyWithLogitsOptions {
    /// A weight per element (broadcast to the input).
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
    /// A weight of the positive examples per class (broadcast along the last dim).
    pub pos_weight: Option<Tensor>,
}

/// `F.binary_cross_entropy_with_logits(logits, target, weight=None, reduction='mean',
/// pos_weight=None)`: `-(pos_weight t log s(x) + (1 - t) log(1 - s(x)))`, computed stably with
/// `logsigmoid`.
pub fn binary_cross_entropy_with_logits(
    input: &Tensor,
    target: &Tensor,
    opts: &BinaryCrossEntropyWithLogitsOptions,
) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch(
        "binary_cross_entropy_with_logits",
        &[Some(input), Some(target)],
        |t| {
            let (input, target) = (t.at(0), t.at(1));
            {
                binary_cross_entropy_with_logits(input, target, opts)
            }
        },
    ) {
        return r;
    }
    let (weight, reduction, pos_weight) = (opts.weight.as_ref(), opts.reduction, opts.pos_weight.as_ref());
    check_float("binary_cross_entropy_with_logits", input)?;
    if input.dims() != target.dims() {
        bail!(Value, "Target size ({:?}) must be the same as input size ({:?})", target.dims(), input.dims());
    }
    let t = target.to_dtype(input.dtype())?;
    let log_s = super::logsigmoid(input)?;
    let log_1ms = super::logsigmoid(&input.neg()?)?;
    let pos = match pos_weight {
        Some(pw) => t.mul(pw)?,
        None => t.clone(),
    };
    let mut loss = pos.mul(&log_s)?.add(&t.neg()?.add_scalar(1.0)?.mul(&log_1ms)?)?.neg()?;
    if let Some(w) = weight {
        loss = loss.mul(w)?;
    }
    reduction.apply(loss)
}

/// `reduction=` of KL divergence, with PyTorch's `batchmean` (sum divided by the batch size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KlReduction {
    None,
    #[default]
    Mean,
    Sum,
    BatchMean,
}

/// Options of [`kl_div`] (`F.kl_div`'s keywords and defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KlDivOptions {
    /// `'mean'` (PyTorch's default) averages over every element; `'batchmean'` divides the sum
    /// by the batch size, which is the true KL divergence.
    pub reduction: KlReduction,
    /// `target` holds log-probabilities too.
    pub log_target: bool,
}

/// `F.kl_div(input, target, reduction='mean', log_target=False)`: `input` holds
/// log-probabilities; `target` probabilities (or log-probabilities with `log_target`).
pub fn kl_div(input: &Tensor, target: &Tensor, opts: &KlDivOptions) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("kl_div", &[Some(input), Some(target)], |t| {
        let (input, target) = (t.at(0), t.at(1));
        kl_div(input, target, opts)
    }) {
        return r;
    }
    let KlDivOptions { reduction, log_target } = *opts;
    let loss = if log_target {
        target.exp()?.mul(&target.sub(input)?)?
    } else {
        // xlogy(t, t) - t * input, with 0 log 0 = 0
        let t = target.to_dtype(input.dtype())?;
        let safe = t.where_(&t.gt_scalar(0)?, &t.ones_like()?)?;
        t.mul(&safe.log()?)?.sub(&t.mul(input)?)?
    };
    match reduction {
        KlReduction::None => Ok(loss),
        KlReduction::Mean => loss.mean(),
        KlReduction::Sum => loss.sum(),
        KlReduction::BatchMean => {
            let n = if input.rank() == 0 { 1 } else { input.dims()[0] };
            loss.sum()?.div_scalar(n as f64)
        }
    }
}

/// Options of [`cosine_embedding_loss`] (`F.cosine_embedding_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CosineEmbeddingLossOptions {
    /// Should lie in [-1, 1]; 0 to 0.5 is suggested.
    pub margin: f64,
    pub reduction: Reduction,
}

/// `F.cosine_embedding_loss(x1, x2, y, margin=0.0, reduction='mean')`: `1 - cos` for `y = 1`,
/// `max(0, cos - margin)` for `y = -1`.
pub fn cosine_embedding_loss(
    x1: &Tensor,
    x2: &Tensor,
    y: &Tensor,
    opts: &CosineEmbeddingLossOptions,
) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) =
        pyrite_core::autocast::dispatch("cosine_embedding_loss", &[Some(x1), Some(x2), Some(y)], |t| {
            cosine_embedding_loss(t.at(0), t.at(1), t.at(2), opts)
        })
    {
        return r;
    }
    let CosineEmbeddingLossOptions { margin, reduction } = *opts;
    if x1.dims() != x2.dims() || x1.rank() == 0 || x1.rank() > 2 {
        bail!(
            Shape,
            "cosine_embedding_loss: 1D or 2D inputs of equal shape expected, got {:?} and {:?}",
            x1.dims(),
            x2.dims()
        );
    }
    let dim = x1.rank() as isize - 1;
    const EPS: f64 = 1e-12;
    let prod = x1.mul(x2)?.sum_dims(&[dim], false)?;
    let m1 = x1.square()?.sum_dims(&[dim], false)?.add_scalar(EPS)?;
    let m2 = x2.square()?.sum_dims(&[dim], false)?.add_scalar(EPS)?;
    let cos = prod.div(&m1.mul(&m2)?.sqrt()?)?;
    let y = y.to_dtype(x1.dtype())?;
    let zeros = cos.zeros_like()?;
    let pos = cos.neg()?.add_scalar(1.0)?;
    let neg = cos.sub_scalar(margin)?.clamp(Some(Scalar::from(0.0)), None)?;
    let loss = pos.where_(&y.eq_scalar(1)?, &neg.where_(&y.eq_scalar(-1)?, &zeros)?)?;
    reduction.apply(loss)
}

/// Options of [`margin_ranking_loss`] (`F.margin_ranking_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MarginRankingLossOptions {
    pub margin: f64,
    pub reduction: Reduction,
}

/// `F.margin_ranking_loss(x1, x2, y, margin=0.0, reduction='mean')`:
/// `max(0, -y (x1 - x2) + margin)`.
pub fn margin_ranking_loss(
    x1: &Tensor,
    x2: &Tensor,
    y: &Tensor,
    opts: &MarginRankingLossOptions,
) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) =
        pyrite_core::autocast::dispatch("margin_ranking_loss", &[Some(x1), Some(x2), Some(y)], |t| {
            margin_ranking_loss(t.at(0), t.at(1), t.at(2), opts)
        })
    {
        return r;
    }
    let MarginRankingLossOptions { margin, reduction } = *opts;
    let loss = y
        .to_dtype(x1.dtype())?
        .neg()?
        .mul(&x1.sub(x2)?)?
        .add_scalar(margin)?
        .clamp(Some(Scalar::from(0.0)), None)?;
    reduction.apply(loss)
}

/// Options of [`triplet_margin_loss`] (`F.triplet_margin_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TripletMarginLossOptions {
    pub margin: f64,
    /// The norm degree of the pairwise distance.
    pub p: f64,
    /// Added to the differences before the norm.
    pub eps: f64,
    /// Uses the smaller of the anchor-negative and positive-negative distances.
    pub swap: bool,
    pub reduction: Reduction,
}

impl Default for TripletMarginLossOptions {
    fn default() -> Self {
        TripletMarginLossOptions { margin: 1.0, p: 2.0, eps: 1e-6, swap: false, reduction: Reduction::Mean }
    }
}

/// `F.triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
/// reduction='mean')`: `max(0, d(a, p) - d(a, n) + margin)`.
pub fn triplet_margin_loss(
    anchor: &Tensor,
    positive: &Tensor,
    negative: &Tensor,
    opts: &TripletMarginLossOptions,
) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch(
        "triplet_margin_loss",
        &[Some(anchor), Some(positive), Some(negative)],
        |t| triplet_margin_loss(t.at(0), t.at(1), t.at(2), opts),
    ) {
        return r;
    }
    let TripletMarginLossOptions { margin, p, eps, swap, reduction } = *opts;
    let dist = super::PairwiseDistanceOptions { p, eps, keepdim: false };
    let d_ap = super::pairwise_distance(anchor, positive, &dist)?;
    let mut d_an = super::pairwise_distance(anchor, negative, &dist)?;
    if swap {
        let d_pn = super::pairwise_distance(positive, negative, &dist)?;
        d_an = d_an.minimum(&d_pn)?;
    }
    reduction.apply(d_ap.sub(&d_an)?.add_scalar(margin)?.clamp(Some(Scalar::from(0.0)), None)?)
}

/// Options of [`hinge_embedding_loss`] (`F.hinge_embedding_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HingeEmbeddingLossOptions {
    pub margin: f64,
    pub reduction: Reduction,
}

impl Default for HingeEmbeddingLossOptions {
    fn default() -> Self {
        HingeEmbeddingLossOptions { margin: 1.0, reduction: Reduction::Mean }
    }
}

/// `F.hinge_embedding_loss(x, y, margin=1.0, reduction='mean')`: `x` for `y = 1`,
/// `max(0, margin - x)` for `y = -1`.
pub fn hinge_embedding_loss(x: &Tensor, y: &Tensor, opts: &HingeEmbeddingLossOptions) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("hinge_embedding_loss", &[Some(x), Some(y)], |t| {
        let (x, y) = (t.at(0), t.at(1));
        hinge_embedding_loss(x, y, opts)
    }) {
        return r;
    }
    let HingeEmbeddingLossOptions { margin, reduction } = *opts;
    let y = y.to_dtype(x.dtype())?;
    let zeros = x.zeros_like()?;
    let margin_clamp = x.neg()?.add_scalar(margin)?.clamp(Some(Scalar::from(0.0)), None)?;
    let out_margin = margin_clamp.where_(&y.eq_scalar(-1)?, &zeros)?;
    let out_self = x.where_(&y.eq_scalar(1)?, &zeros)?;
    reduction.apply(out_margin.add(&out_self)?)
}

/// `F.soft_margin_loss(x, y, reduction)`: `log(1 + exp(-y x))`.
pub fn soft_margin_loss(x: &Tensor, y: &Tensor, reduction: Reduction) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("soft_margin_loss", &[Some(x), Some(y)], |t| {
        let (x, y) = (t.at(0), t.at(1));
        soft_margin_loss(x, y, reduction)
    }) {
        return r;
    }
    check_same_shape("soft_margin_loss", x, y)?;
    let z = y.to_dtype(x.dtype())?.neg()?.mul(x)?;
    reduction.apply(z.softplus(1.0, f64::INFINITY)?)
}

/// Options of [`multilabel_soft_margin_loss`] (its keywords and defaults).
#[derive(Clone, Debug, Default)]
pub struct MultilabelSoftMarginLossOptions {
    /// A weight per class.
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
}

/// `F.multilabel_soft_margin_loss(x, y, weight=None, reduction='mean')`: the mean over
/// classes of the per-class binary cross-entropy with logits.
pub fn multilabel_soft_margin_loss(
    x: &Tensor,
    y: &Tensor,
    opts: &MultilabelSoftMarginLossOptions,
) -> Result<Tensor> {
    let (weight, reduction) = (opts.weight.as_ref(), opts.reduction);
    check_same_shape("multilabel_soft_margin_loss", x, y)?;
    let y = y.to_dtype(x.dtype())?;
    let mut loss = y
        .mul(&super::logsigmoid(x)?)?
        .add(&y.neg()?.add_scalar(1.0)?.mul(&super::logsigmoid(&x.neg()?)?)?)?
        .neg()?;
    if let Some(w) = weight {
        loss = loss.mul(w)?;
    }
    let c = x.dims().last().copied().unwrap_or(1).max(1);
    let loss = loss.sum_dims(&[-1], false)?.div_scalar(c as f64)?;
    reduction.apply(loss)
}

/// Options of [`multi_margin_loss`] (`F.multi_margin_loss`'s keywords and defaults).
#[derive(Clone, Debug)]
pub struct MultiMarginLossOptions {
    /// 1 or 2.
    pub p: u32,
    pub margin: f64,
    /// A weight per class.
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
}

impl Default for MultiMarginLossOptions {
    fn default() -> Self {
        MultiMarginLossOptions { p: 1, margin: 1.0, weight: None, reduction: Reduction::Mean }
    }
}

/// `F.multi_margin_loss(x, y, p=1, margin=1.0, weight=None, reduction='mean')`: the
/// multi-class hinge loss `sum_{i != y} max(0, margin - x[y] + x[i])^p / C` (weighted by
/// `weight[y]`).
pub fn multi_margin_loss(x: &Tensor, y: &Tensor, opts: &MultiMarginLossOptions) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("multi_margin_loss", &[Some(x), Some(y)], |t| {
        let (x, y) = (t.at(0), t.at(1));
        multi_margin_loss(x, y, opts)
    }) {
        return r;
    }
    let (p, margin, weight, reduction) = (opts.p, opts.margin, opts.weight.as_ref(), opts.reduction);
    if p != 1 && p != 2 {
        bail!(Value, "only p == 1 and p == 2 supported");
    }
    let x2 = if x.rank() == 1 { x.unsqueeze(0)? } else { x.clone() };
    if x2.rank() != 2 {
        bail!(Shape, "multi_margin_loss: expected 1D or 2D input, got shape {}", x.shape());
    }
    let c = x2.dims()[1];
    let y2 = y.to_dtype(DType::I64)?.reshape([-1isize])?;
    if y2.numel() != x2.dims()[0] {
        bail!(Shape, "inconsistent target size: {:?} for input of size: {:?}", y.dims(), x.dims());
    }
    for &v in &y2.to_vec::<i64>()? {
        if v < 0 || v as usize >= c {
            bail!(Index, "target out of range");
        }
    }
    let xy = x2.gather(1, &y2.unsqueeze(1)?)?;
    let mut z = x2.sub(&xy)?.add_scalar(margin)?.clamp(Some(Scalar::from(0.0)), None)?;
    if p == 2 {
        z = z.square()?;
    }
    if let Some(w) = weight {
        z = z.mul(&w.to_dtype(x.dtype())?.index_select(0, &y2)?.unsqueeze(1)?)?;
    }
    // the target's own class does not count
    let not_target = y2.unsqueeze(1)?.one_hot(Some(c))?.squeeze_dim(1)?.eq_scalar(0)?.to_dtype(x.dtype())?;
    let mut loss = z.mul(&not_target)?.sum_dims(&[1], false)?.div_scalar(c as f64)?;
    if x.rank() == 1 {
        loss = loss.squeeze_dim(0)?;
    }
    reduction.apply(loss)
}

/// `F.multilabel_margin_loss(x, y, reduction)`: `y` lists target classes per row, ended by
/// the first `-1`; `sum_{j in targets, i not in targets} max(0, 1 - (x[j] - x[i])) / C`.
pub fn multilabel_margin_loss(x: &Tensor, y: &Tensor, reduction: Reduction) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("multilabel_margin_loss", &[Some(x), Some(y)], |t| {
        let (x, y) = (t.at(0), t.at(1));
        multilabel_margin_loss(x, y, reduction)
    }) {
        return r;
    }
    check_same_shape("multilabel_margin_loss", x, y)?;
    if x.rank() != 1 && x.rank() != 2 {
        bail!(Shape, "multilabel_margin_loss: Expected non-empty vector or matrix with optional 0-dim batch size, but got: {:?}", x.dims());
    }
    let x2 = if x.rank() == 1 { x.unsqueeze(0)? } else { x.clone() };
    let (n, c) = (x2.dims()[0], x2.dims()[1]);
    let yv = y.to_dtype(DType::I64)?.reshape([n as isize, c as isize])?.to_vec2::<i64>()?;
    let mut rows = Vec::with_capacity(n);
    for (r, targets) in yv.iter().enumerate() {
        let ts: Vec<i64> = targets.iter().copied().take_while(|&t| t >= 0).collect();
        if ts.iter().any(|&t| t as usize >= c) {
            bail!(Index, "multilabel_margin_loss: target index out of range");
        }
        let is_target: Vec<bool> = (0..c).map(|i| ts.contains(&(i as i64))).collect();
        let row = x2.select(0, r as isize)?;
        let mut acc = Tensor::zeros([], x.dtype())?;
        for &j in &ts {
            let xj = row.select(0, j as isize)?;
            let others: Vec<i64> = (0..c as i64).filter(|&i| !is_target[i as usize]).collect();
            if others.is_empty() {
                continue;
            }
            let xi = row.index_select(0, &Tensor::from_vec(others.clone(), [others.len()])?)?;
            let m = xi.sub(&xj)?.add_scalar(1.0)?.clamp(Some(Scalar::from(0.0)), None)?.sum()?;
            acc = acc.add(&m)?;
        }
        rows.push(acc.div_scalar(c as f64)?);
    }
    let mut loss = Tensor::stack(&rows, 0)?;
    if x.rank() == 1 {
        loss = loss.squeeze_dim(0)?;
    }
    reduction.apply(loss)
}

/// Options of [`poisson_nll_loss`] (`F.poisson_nll_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoissonNllLossOptions {
    /// `input` is the log of the rate: the loss is `exp(input) - target * input`; otherwise
    /// `input - target * log(input + eps)`.
    pub log_input: bool,
    /// Adds Stirling's approximation of `log(target!)`.
    pub full: bool,
    /// Keeps `log(input + eps)` finite when `log_input` is false.
    pub eps: f64,
    pub reduction: Reduction,
}

impl Default for PoissonNllLossOptions {
    fn default() -> Self {
        PoissonNllLossOptions { log_input: true, full: false, eps: 1e-8, reduction: Reduction::Mean }
    }
}

/// `F.poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction='mean')`.
pub fn poisson_nll_loss(input: &Tensor, target: &Tensor, opts: &PoissonNllLossOptions) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch("poisson_nll_loss", &[Some(input), Some(target)], |t| {
        let (input, target) = (t.at(0), t.at(1));
        {
            poisson_nll_loss(input, target, opts)
        }
    }) {
        return r;
    }
    let PoissonNllLossOptions { log_input, full, eps, reduction } = *opts;
    let t = target.to_dtype(input.dtype())?;
    let mut loss = if log_input {
        input.exp()?.sub(&t.mul(input)?)?
    } else {
        input.sub(&t.mul(&input.add_scalar(eps)?.log()?)?)?
    };
    if full {
        // Stirling's term t log t - t + 0.5 log(2 pi t), for t > 1
        let safe = t.where_(&t.gt_scalar(1)?, &t.ones_like()?)?;
        let stirling = safe
            .mul(&safe.log()?)?
            .sub(&safe)?
            .add(&safe.mul_scalar(2.0 * std::f64::consts::PI)?.log()?.mul_scalar(0.5)?)?;
        loss = loss.add(&stirling.where_(&t.gt_scalar(1)?, &t.zeros_like()?)?)?;
    }
    reduction.apply(loss)
}

/// `x.clamp(min=lo)`, with the gradient passed through unchanged (PyTorch's
/// `x = x.clone(); with torch.no_grad(): x.clamp_(min=lo)`).
struct ClampNoGrad(f64);

impl pyrite_core::autograd::Function for ClampNoGrad {
    fn forward(&self, _: &mut pyrite_core::autograd::FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![inputs[0].clamp(Some(Scalar::from(self.0)), None)?])
    }

    fn backward(
        &self,
        _: &pyrite_core::autograd::FunctionCtx,
        grads: &[Tensor],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(grads[0].clone())])
    }

    fn name(&self) -> String {
        "CloneBackward0".into()
    }
}

/// Options of [`gaussian_nll_loss`] (`F.gaussian_nll_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GaussianNllLossOptions {
    /// Adds the constant `0.5 log(2 pi)`.
    pub full: bool,
    /// The variance is clamped below at this value.
    pub eps: f64,
    pub reduction: Reduction,
}

impl Default for GaussianNllLossOptions {
    fn default() -> Self {
        GaussianNllLossOptions { full: false, eps: 1e-6, reduction: Reduction::Mean }
    }
}

/// `F.gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction='mean')`:
/// `0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps))`, plus `0.5 log(2 pi)` with
/// `full`. `var` may have one fewer dim or a last dim of 1 (one variance per sample), as in
/// PyTorch. As in PyTorch, the clamp does not cut the gradient: `var` gets the gradient at the
/// clamped value, as if it had not been clamped. Negative variances are an error.
pub fn gaussian_nll_loss(
    input: &Tensor,
    target: &Tensor,
    var: &Tensor,
    opts: &GaussianNllLossOptions,
) -> Result<Tensor> {
    let GaussianNllLossOptions { full, eps, reduction } = *opts;
    let var = if var.dims() != input.dims() {
        if input.rank() == var.rank() + 1 && input.dims()[..var.rank()] == *var.dims() {
            var.unsqueeze(-1)?
        } else if input.rank() == var.rank()
            && var.dims().last() == Some(&1)
            && input.dims()[..input.rank() - 1] == var.dims()[..var.rank() - 1]
        {
            var.clone()
        } else {
            bail!(Value, "var is of incorrect size");
        }
    } else {
        var.clone()
    };
    if var.to_dtype(DType::F64)?.to_vec::<f64>()?.iter().any(|&v| v < 0.0) {
        bail!(Value, "var has negative entry/entries");
    }
    // PyTorch clamps a clone of var in place under no_grad: the gradient is computed at the
    // clamped value and passed to var as if there were no clamp
    let v = pyrite_core::autograd::apply(ClampNoGrad(eps), &[&var])?.remove(0);
    let mut loss = v.log()?.add(&input.sub(target)?.square()?.div(&v)?)?.mul_scalar(0.5)?;
    if full {
        loss = loss.add_scalar(0.5 * (2.0 * std::f64::consts::PI).ln())?;
    }
    reduction.apply(loss)
}

/// Options of [`ctc_loss`] (`F.ctc_loss`'s keywords and defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtcLossOptions {
    /// The blank label's class index.
    pub blank: i64,
    pub reduction: Reduction,
    /// Infinite losses (and their gradients) become 0.
    pub zero_infinity: bool,
}

/// `F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction='mean',
/// zero_infinity=False)`: the connectionist temporal classification loss, `-log p(target | input)`
/// summed over every alignment, by the forward-backward recursion in log space (accumulated
/// in f64).
///
/// - `log_probs`: `[T, N, C]` log-probabilities (`[T, C]` unbatched).
/// - `targets`: padded `[N, S]`, or the `N` targets concatenated into one 1-D tensor.
/// - `input_lengths`, `target_lengths`: `[N]` integers.
///
/// `reduction` mean divides each sample's loss by its target length (at least 1), then takes
/// the batch mean. An infeasible target (too long for its input) has loss `inf` and a NaN
/// gradient, unless `zero_infinity` makes both 0. As in PyTorch, the gradient with respect to
/// `log_probs` is the one with respect to the logits assuming `log_probs = log_softmax(logits)`
/// (the true derivative plus `g_n exp(log_probs)`), which is the true one after `log_softmax`.
pub fn ctc_loss(
    log_probs: &Tensor,
    targets: &Tensor,
    input_lengths: &Tensor,
    target_lengths: &Tensor,
    opts: &CtcLossOptions,
) -> Result<Tensor> {
    // Autocast's float32 list.
    if let Some(r) = pyrite_core::autocast::dispatch(
        "ctc_loss",
        &[Some(log_probs), Some(targets), Some(input_lengths), Some(target_lengths)],
        |t| ctc_loss(t.at(0), t.at(1), t.at(2), t.at(3), opts),
    ) {
        return r;
    }
    let CtcLossOptions { blank, reduction, zero_infinity } = *opts;
    check_float("ctc_loss", log_probs)?;
    let batched = log_probs.rank() == 3;
    let lp = match log_probs.rank() {
        3 => log_probs.clone(),
        2 => log_probs.unsqueeze(1)?,
        r => bail!(Shape, "ctc_loss: log_probs must be 3-D (T, N, C) or 2-D (T, C), got {r}-D"),
    };
    if targets.dtype().is_floating_point() || targets.dtype() == DType::Bool {
        bail!(
            DType,
            "ctc_loss: targets must hold integer class indices, got {}",
            targets.dtype().type_name()
        );
    }
    let (t_max, n, c) = (lp.dims()[0], lp.dims()[1], lp.dims()[2]);
    if blank < 0 || blank as usize >= c {
        bail!(Value, "blank must be in label range");
    }
    let lengths = |t: &Tensor, what: &str| -> Result<Vec<i64>> {
        if t.dtype().is_floating_point() {
            bail!(DType, "ctc_loss: {what} must be integers, got {}", t.dtype().type_name());
        }
        let v = t.to_dtype(DType::I64)?.reshape([-1isize])?.to_vec::<i64>()?;
        if v.len() != n {
            bail!(Value, "{what} must be of size batch_size");
        }
        Ok(v)
    };
    let il = lengths(input_lengths, "input_lengths")?;
    let tl = lengths(target_lengths, "target_lengths")?;
    const WHILE: &str = "(while checking arguments for ctc_loss_allocate_outputs)";
    for &l in &tl {
        if l < 0 {
            bail!(Value, "Expected target_lengths to have value at least 0, but got value {l} {WHILE}");
        }
    }
    let tv = targets.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()?;
    // the start of each sample's target in `tv`
    let offsets: Vec<usize> = match targets.rank() {
        1 => {
            let total: i64 = tl.iter().sum();
            if targets.dims()[0] as i64 != total {
                bail!(
                    Shape,
                    "Expected tensor to have size {total} at dimension 0, but got size {} for argument #2 'targets' {WHILE}",
                    targets.dims()[0]
                );
            }
            tl.iter()
                .scan(0usize, |pos, &l| {
                    let o = *pos;
                    *pos += l as usize;
                    Some(o)
                })
                .collect()
        }
        2 => {
            if targets.dims()[0] != n {
                bail!(
                    Shape,
                    "Expected tensor to have size {n} at dimension 0, but got size {} for argument #2 'targets' {WHILE}",
                    targets.dims()[0]
                );
            }
            let s = targets.dims()[1];
            let max_len = tl.iter().copied().max().unwrap_or(0);
            if (s as i64) < max_len {
                bail!(
                    Shape,
                    "Expected tensor to have size at least {max_len} at dimension 1, but got size {s} for argument #2 'targets' {WHILE}"
                );
            }
            (0..n).map(|b| b * s).collect()
        }
        r => bail!(Shape, "ctc_loss: targets must be 1-D (concatenated) or 2-D (N, S), got {r}-D"),
    };
    for &l in &il {
        if l < 0 {
            bail!(Value, "Expected input_lengths to have value at least 0, but got value {l} {WHILE}");
        }
        if l as usize > t_max {
            bail!(Value, "Expected input_lengths to have value at most {t_max}, but got value {l} {WHILE}");
        }
    }
    let mut labels = Vec::with_capacity(n);
    for b in 0..n {
        let lab = tv[offsets[b]..offsets[b] + tl[b] as usize].to_vec();
        if let Some(&bad) = lab.iter().find(|&&v| v < 0 || v as usize >= c) {
            bail!(Index, "ctc_loss: target {bad} is out of bounds for {c} classes");
        }
        labels.push(lab);
    }
    let f = CtcLoss { labels, input_lengths: il, blank: blank as usize, zero_infinity };
    let nll = pyrite_core::autograd::apply(f, &[&lp])?.remove(0);
    match reduction {
        Reduction::None if batched => Ok(nll),
        Reduction::None => nll.squeeze_dim(0),
        Reduction::Sum => nll.sum(),
        Reduction::Mean => {
            let len: Vec<f64> = tl.iter().map(|&l| l.max(1) as f64).collect();
            let len = Tensor::from_vec(len, [n])?.to_dtype(nll.dtype())?.to_device(nll.device())?;
            nll.div(&len)?.mean()
        }
    }
}

/// The CTC negative log-likelihood of each sample, `[N]`, with PyTorch's backward.
struct CtcLoss {
    labels: Vec<Vec<i64>>,
    input_lengths: Vec<i64>,
    blank: usize,
    zero_infinity: bool,
}

/// `log(exp(a) + exp(b))`, exact when either is `-inf`.
fn log_add(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let m = a.max(b);
    m + (-(a - b).abs()).exp().ln_1p()
}

impl CtcLoss {
    /// Sample `b`'s negative log-likelihood and, with `grad`, the gradient of it with respect
    /// to `lp[.., b, ..]` as PyTorch's `ctc_loss_backward` computes it, `[T][C]` row-major
    /// (0 past the input length).
    fn sample(
        &self,
        lp: &[f64],
        dims: (usize, usize, usize),
        b: usize,
        grad: bool,
    ) -> (f64, Option<Vec<f64>>) {
        let (t_max, n, c) = dims;
        let at = |t: usize, k: usize| lp[(t * n + b) * c + k];
        let input_len = self.input_lengths[b] as usize;
        let lab = &self.labels[b];
        let s_len = 2 * lab.len() + 1;
        // the extended target: blank, l1, blank, l2, ..., blank
        let ext = |s: usize| if s & 1 == 0 { self.blank } else { lab[s / 2] as usize };
        let ninf = f64::NEG_INFINITY;
        if input_len == 0 {
            let nll = if lab.is_empty() { 0.0 } else { f64::INFINITY };
            return (nll, grad.then(|| vec![0.0; t_max * c]));
        }
        let mut alpha = vec![ninf; input_len * s_len];
        alpha[0] = at(0, self.blank);
        if s_len > 1 {
            alpha[1] = at(0, ext(1));
        }
        for t in 1..input_len {
            for s in 0..s_len {
                let mut a = alpha[(t - 1) * s_len + s];
                if s > 0 {
                    a = log_add(a, alpha[(t - 1) * s_len + s - 1]);
                }
                if s > 1 && ext(s - 2) != ext(s) {
                    a = log_add(a, alpha[(t - 1) * s_len + s - 2]);
                }
                alpha[t * s_len + s] = if a == ninf { ninf } else { a + at(t, ext(s)) };
            }
        }
        let last = (input_len - 1) * s_len;
        let mut ll = alpha[last + s_len - 1];
        if s_len > 1 {
            ll = log_add(ll, alpha[last + s_len - 2]);
        }
        let nll = -ll;
        if !grad {
            return (nll, None);
        }
        let mut g = vec![0.0; t_max * c];
        if self.zero_infinity && nll == f64::INFINITY {
            return (nll, Some(g));
        }
        let mut beta = vec![ninf; input_len * s_len];
        beta[last + s_len - 1] = at(input_len - 1, self.blank);
        if s_len > 1 {
            beta[last + s_len - 2] = at(input_len - 1, ext(s_len - 2));
        }
        for t in (0..input_len - 1).rev() {
            for s in 0..s_len {
                let mut v = beta[(t + 1) * s_len + s];
                if s + 1 < s_len {
                    v = log_add(v, beta[(t + 1) * s_len + s + 1]);
                }
                if s + 2 < s_len && ext(s + 2) != ext(s) {
                    v = log_add(v, beta[(t + 1) * s_len + s + 2]);
                }
                beta[t * s_len + s] = if v == ninf { ninf } else { v + at(t, ext(s)) };
            }
        }
        let mut lcab = vec![ninf; c];
        for t in 0..input_len {
            lcab.iter_mut().for_each(|v| *v = ninf);
            for s in 0..s_len {
                let k = ext(s);
                lcab[k] = log_add(lcab[k], alpha[t * s_len + s] + beta[t * s_len + s]);
            }
            for k in 0..c {
                let l = at(t, k);
                g[t * c + k] = l.exp() - (lcab[k] + nll - l).exp();
            }
        }
        (nll, Some(g))
    }
}

impl pyrite_core::autograd::Function for CtcLoss {
    fn forward(
        &self,
        ctx: &mut pyrite_core::autograd::FunctionCtx,
        inputs: &[&Tensor],
    ) -> Result<Vec<Tensor>> {
        let lp_t = inputs[0];
        let dims = (lp_t.dims()[0], lp_t.dims()[1], lp_t.dims()[2]);
        let (t_max, n, c) = dims;
        let lp = lp_t.to_dtype(DType::F64)?.contiguous()?.to_vec::<f64>()?;
        let want_grad = ctx.needs_input_grad(0);
        let mut nll = vec![0.0; n];
        let mut grad = if want_grad { vec![0.0; t_max * n * c] } else { Vec::new() };
        for (b, out) in nll.iter_mut().enumerate() {
            let (v, g) = self.sample(&lp, dims, b, want_grad);
            *out = if self.zero_infinity && v == f64::INFINITY { 0.0 } else { v };
            if let Some(g) = g {
                for t in 0..t_max {
                    grad[(t * n + b) * c..(t * n + b + 1) * c].copy_from_slice(&g[t * c..(t + 1) * c]);
                }
            }
        }
        if want_grad {
            let grad =
                Tensor::from_vec(grad, [t_max, n, c])?.to_dtype(lp_t.dtype())?.to_device(lp_t.device())?;
            ctx.save_value("grad", grad);
        }
        Ok(vec![Tensor::from_vec(nll, [n])?.to_dtype(lp_t.dtype())?.to_device(lp_t.device())?])
    }

    fn backward(
        &self,
        ctx: &pyrite_core::autograd::FunctionCtx,
        grad_outputs: &[Tensor],
    ) -> Result<Vec<Option<Tensor>>> {
        let g: &Tensor = ctx.value("grad")?;
        let n = g.dims()[1] as isize;
        Ok(vec![Some(g.mul(&grad_outputs[0].reshape([1, n, 1])?)?)])
    }

    fn name(&self) -> String {
        "CtcLossBackward0".into()
    }
}
