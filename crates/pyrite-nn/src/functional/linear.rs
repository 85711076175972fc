//! Linear maps, dropout, embeddings, padding, distances and reshuffles.

use pyrite_core::autograd::{self, Function, FunctionCtx};
use pyrite_core::{bail, DType, Generator, Result, Scalar, Tensor};

/// `F.linear(x, weight, bias)`: `x @ weight.T + bias`, weight `[out, in]` as in PyTorch.
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    // Autocast's lower-precision list.
    if let Some(r) = pyrite_core::autocast::dispatch("linear", &[Some(x), Some(weight), bias], |t| {
        linear(t.at(0), t.at(1), t.opt(2))
    }) {
        return r;
    }
    if weight.rank() != 2 {
        bail!(Shape, "linear: weight must be 2-D [out_features, in_features], got shape {}", weight.shape());
    }
    let in_features = weight.dims()[1];
    if x.rank() == 0 || x.dims()[x.rank() - 1] != in_features {
        bail!(
            Shape,
            "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
            if x.rank() == 0 { 1 } else { x.numel() / x.dims()[x.rank() - 1].max(1) },
            x.dims().last().copied().unwrap_or(1),
            in_features,
            weight.dims()[0]
        );
    }
    if x.rank() == 2 {
        return x.linear(weight, bias);
    }
    if x.rank() > 2 && x.is_contiguous() {
        // One 2-D product with the bias fused: its backward computes the weight gradient as
        // one product over every row, where a batched matmul would sum per-batch products.
        let mut out = x.dims().to_vec();
        *out.last_mut().unwrap() = weight.dims()[0];
        let rows: usize = x.dims()[..x.rank() - 1].iter().product();
        return x.reshape([rows, in_features])?.linear(weight, bias)?.reshape(out);
    }
    let wt = weight.t()?;
    match bias {
        Some(b) => x.matmul(&wt)?.add(b),
        None => x.matmul(&wt),
    }
}

/// `F.bilinear(x1, x2, weight, bias)`: `y[.., o] = x1 W[o] x2 + b[o]`, weight `[out, in1, in2]`.
pub fn bilinear(x1: &Tensor, x2: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    // Autocast's promote list (CUDA).
    if let Some(r) =
        pyrite_core::autocast::dispatch("bilinear", &[Some(x1), Some(x2), Some(weight), bias], |t| {
            bilinear(t.at(0), t.at(1), t.at(2), t.opt(3))
        })
    {
        return r;
    }
    if weight.rank() != 3 {
        bail!(Shape, "bilinear(): weight must be 3-dimensional, got shape {}", weight.shape());
    }
    let (i1, i2) = (weight.dims()[1], weight.dims()[2]);
    if x1.dims().last() != Some(&i1)
        || x2.dims().last() != Some(&i2)
        || x1.dims()[..x1.rank() - 1] != x2.dims()[..x2.rank() - 1]
    {
        bail!(
            Shape,
            "bilinear(): input sizes do not match the weight: input1 {}, input2 {}, weight {}",
            x1.shape(),
            x2.shape(),
            weight.shape()
        );
    }
    let y = pyrite_core::einsum("...i,oij,...j->...o", &[x1, weight, x2])?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

fn check_p(p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        bail!(Value, "dropout probability has to be between 0 and 1, but got {p}");
    }
    Ok(())
}

/// A mask of shape `shape` with ones kept with probability `1 - p`, scaled by `1 / (1 - p)`.
fn keep_mask(shape: &[usize], p: f64, dtype: DType, generator: Option<&Generator>) -> Result<Tensor> {
    let m = Tensor::empty(shape, dtype)?;
    m.bernoulli_(1.0 - p, generator)?;
    m.div_scalar(1.0 - p)
}

/// Options of [`dropout`] and [`feature_dropout`] (`F.dropout`'s keywords and defaults, with
/// the generator of the mask).
#[derive(Clone, Copy, Debug)]
pub struct DropoutOptions<'a> {
    /// The probability of zeroing an element.
    pub p: f64,
    /// Dropout applies (otherwise the identity).
    pub training: bool,
    /// Draws the mask (`None`: the default generator).
    pub generator: Option<&'a Generator>,
}

impl Default for DropoutOptions<'_> {
    fn default() -> Self {
        DropoutOptions { p: 0.5, training: true, generator: None }
    }
}

/// Options of [`alpha_dropout`] and [`feature_alpha_dropout`]: as [`DropoutOptions`], but
/// PyTorch's `F.alpha_dropout` defaults to `training=False`.
#[derive(Clone, Copy, Debug)]
pub struct AlphaDropoutOptions<'a> {
    /// The probability of dropping an element.
    pub p: f64,
    /// Dropout applies (otherwise the identity).
    pub training: bool,
    /// Draws the mask (`None`: the default generator).
    pub generator: Option<&'a Generator>,
}

impl Default for AlphaDropoutOptions<'_> {
    fn default() -> Self {
        AlphaDropoutOptions { p: 0.5, training: false, generator: None }
    }
}

/// `F.dropout(x, p=0.5, training=True)`: zeroes each element with probability `p` and scales
/// the rest by `1 / (1 - p)` in training; the identity otherwise.
pub fn dropout(x: &Tensor, opts: &DropoutOptions) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::dropout", &[x]);
    let DropoutOptions { p, training, generator } = *opts;
    check_p(p)?;
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul(&x.zeros_like()?);
    }
    x.mul(&keep_mask(x.dims(), p, x.dtype(), generator)?)
}

/// Channel dropout (`F.dropout1d/2d/3d(x, p=0.5, training=True)`): whole channels (dim 1 of
/// a batched input, dim 0 of an unbatched one) are zeroed. `spatial` is 1, 2 or 3.
pub fn feature_dropout(x: &Tensor, spatial: usize, opts: &DropoutOptions) -> Result<Tensor> {
    let DropoutOptions { p, training, generator } = *opts;
    check_p(p)?;
    let r = x.rank();
    if r != spatial + 1 && r != spatial + 2 {
        bail!(
            Shape,
            "dropout{spatial}d: Expected {}D or {}D input, but received a {r}D input",
            spatial + 1,
            spatial + 2
        );
    }
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul(&x.zeros_like()?);
    }
    let batched = r == spatial + 2;
    let mut shape = vec![1usize; r];
    let channel_dims = if batched { 2 } else { 1 };
    shape[..channel_dims].copy_from_slice(&x.dims()[..channel_dims]);
    x.mul(&keep_mask(&shape, p, x.dtype(), generator)?)
}

/// `F.alpha_dropout(x, p=0.5, training=False)`: dropout that keeps SELU's mean and variance.
pub fn alpha_dropout(x: &Tensor, opts: &AlphaDropoutOptions) -> Result<Tensor> {
    let AlphaDropoutOptions { p, training, generator } = *opts;
    check_p(p)?;
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul(&x.zeros_like()?);
    }
    let alpha_p = -super::SELU_ALPHA * super::SELU_SCALE;
    let a = ((1.0 - p) * (1.0 + p * alpha_p * alpha_p)).powf(-0.5);
    let b = -a * alpha_p * p;
    let keep = Tensor::empty(x.dims(), x.dtype())?;
    keep.bernoulli_(1.0 - p, generator)?;
    // kept: a * x + b; dropped: a * alpha' + b
    let dropped = keep.neg()?.add_scalar(1.0)?.mul_scalar(alpha_p * a)?;
    x.mul(&keep)?.mul_scalar(a)?.add(&dropped)?.add_scalar(b)
}

/// Options of [`embedding`] (`F.embedding`'s keywords).
#[derive(Clone, Debug, Default)]
pub struct EmbeddingOptions {
    /// Rows at this index get no gradient (and are zero at construction).
    pub padding_idx: Option<i64>,
    /// Rows looked up are renormalised in place to this norm first.
    pub max_norm: Option<f64>,
    /// The p of the max_norm norm (default 2).
    pub norm_type: Option<f64>,
    /// Divides each row's gradient by how often the row occurs in the batch.
    pub scale_grad_by_freq: bool,
}

/// `F.embedding(idx, weight, ...)`: the rows of `weight` at the int64 indices `idx`, shape
/// `idx.shape + [embedding_dim]`.
pub fn embedding(idx: &Tensor, weight: &Tensor, opts: &EmbeddingOptions) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::embedding", &[weight, idx]);
    if idx.dtype() != DType::I64 && idx.dtype() != DType::I32 {
        bail!(
            DType,
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {} instead (while checking arguments for embedding)",
            idx.dtype().type_name()
        );
    }
    if weight.rank() != 2 {
        bail!(Shape, "'weight' must be 2-D, got shape {}", weight.shape());
    }
    let n = weight.dims()[0] as i64;
    let padding_idx = match opts.padding_idx {
        Some(p) if p >= n || p < -n => bail!(Value, "Padding_idx must be within num_embeddings"),
        Some(p) if p < 0 => Some(p + n),
        p => p,
    };
    let flat = idx.to_dtype(DType::I64)?.reshape([-1isize])?;
    if let Some(max_norm) = opts.max_norm {
        embedding_renorm_(weight, &flat, max_norm, opts.norm_type.unwrap_or(2.0))?;
    }
    let mut shape = idx.dims().to_vec();
    shape.push(weight.dims()[1]);
    let embed =
        Embed { padding_idx, num_weights: weight.dims()[0], scale_grad_by_freq: opts.scale_grad_by_freq };
    let rows = autograd::apply(embed, &[weight, &flat])?.remove(0);
    rows.reshape(shape)
}

/// Renormalises in place (under no_grad) the rows of `weight` that `idx` references whose
/// `p`-norm exceeds `max_norm` (`torch.embedding_renorm_`).
fn embedding_renorm_(weight: &Tensor, idx: &Tensor, max_norm: f64, p: f64) -> Result<()> {
    let _g = autograd::no_grad();
    let mut rows = idx.to_vec::<i64>()?;
    rows.sort_unstable();
    rows.dedup();
    for r in rows {
        let row = weight.select(0, r as isize)?;
        let norm = row.to_dtype(DType::F64)?.norm(p, &[], false)?.item::<f64>()?;
        if norm > max_norm {
            row.mul_(&Tensor::scalar(max_norm / (norm + 1e-7))?.to_dtype(weight.dtype())?)?;
        }
    }
    Ok(())
}

/// The lookup with PyTorch's embedding backward: gradients are summed into the rows used,
/// and the padding row gets none.
struct Embed {
    padding_idx: Option<i64>,
    num_weights: usize,
    scale_grad_by_freq: bool,
}

impl Function for Embed {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        ctx.save_for_backward(&[inputs[1]]);
        Ok(vec![inputs[0].index_select(0, inputs[1])?])
    }

    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let idx = &ctx.saved_tensors()[0];
        let mut grad = g[0].clone();
        if let Some(p) = self.padding_idx {
            let keep = idx.ne_scalar(p)?.unsqueeze(1)?.to_dtype(grad.dtype())?;
            grad = grad.mul(&keep)?;
        }
        if self.scale_grad_by_freq {
            let ones = Tensor::ones(idx.dims(), grad.dtype())?;
            let counts = Tensor::zeros([self.num_weights], grad.dtype())?.index_add(0, idx, &ones, 1)?;
            grad = grad.div(&counts.index_select(0, idx)?.unsqueeze(1)?)?;
        }
        let mut shape = grad.dims().to_vec();
        shape[0] = self.num_weights;
        let dw = Tensor::zeros(shape, grad.dtype())?.index_add(0, idx, &grad, 1)?;
        Ok(vec![Some(dw), None])
    }

    fn name(&self) -> String {
        "EmbeddingBackward0".into()
    }
}

/// `mode=` of EmbeddingBag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BagMode {
    Sum,
    #[default]
    Mean,
    Max,
}

/// Options of [`embedding_bag`] (`F.embedding_bag`'s keywords and defaults; `sparse` has no
/// counterpart: gradients are dense).
#[derive(Clone, Debug, Default)]
pub struct EmbeddingBagOptions {
    /// The start of each bag in a 1-D input (required then; a 2-D input has none).
    pub offsets: Option<Tensor>,
    /// Rows looked up are renormalised in place to this norm first.
    pub max_norm: Option<f64>,
    /// The p of the max_norm norm (default 2).
    pub norm_type: Option<f64>,
    /// Divides each row's gradient by how often the row occurs in the batch.
    pub scale_grad_by_freq: bool,
    pub mode: BagMode,
    /// A weight per index, multiplying its row (mode `Sum` only).
    pub per_sample_weights: Option<Tensor>,
    /// `offsets` ends with the end of the last bag.
    pub include_last_offset: bool,
    /// Indices equal to this (negative counts from the end) are left out of their bag and
    /// give the row no gradient.
    pub padding_idx: Option<i64>,
}

/// `F.embedding_bag(idx, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
/// mode='mean', sparse=False, per_sample_weights=None, include_last_offset=False,
/// padding_idx=None)`: sums, means or maxes of the looked-up rows per bag. `idx` is 2-D (one
/// bag per row, no offsets) or 1-D with `offsets` (bag `b` is
/// `idx[offsets[b]..offsets[b+1]]`). An empty bag (or one of only `padding_idx`) gives zeros;
/// the mean divides by the count of the other entries.
pub fn embedding_bag(idx: &Tensor, weight: &Tensor, opts: &EmbeddingBagOptions) -> Result<Tensor> {
    let (offsets, mode, per_sample_weights) =
        (opts.offsets.as_ref(), opts.mode, opts.per_sample_weights.as_ref());
    let include_last_offset = opts.include_last_offset;
    if weight.rank() != 2 {
        bail!(Shape, "'weight' must be 2-D, got shape {}", weight.shape());
    }
    let n = weight.dims()[0] as i64;
    let padding_idx = match opts.padding_idx {
        Some(p) if p >= n || p < -n => bail!(Value, "padding_idx must be within the number of embeddings"),
        Some(p) if p < 0 => Some(p + n),
        p => p,
    };
    let (flat, bounds): (Tensor, Vec<(usize, usize)>) = match (idx.rank(), offsets) {
        (2, None) => {
            let (b, l) = (idx.dims()[0], idx.dims()[1]);
            (idx.reshape([-1isize])?, (0..b).map(|i| (i * l, (i + 1) * l)).collect())
        }
        (2, Some(_)) => bail!(Value, "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length sequences."),
        (1, Some(o)) => {
            if o.rank() != 1 {
                bail!(Value, "offsets has to be a 1D Tensor, but got shape {}", o.shape());
            }
            let mut o = o.to_dtype(DType::I64)?.to_vec::<i64>()?;
            let n = idx.numel();
            if include_last_offset {
                // the last offset is the end of the last bag
                o.pop();
            }
            if o.first().is_some_and(|&s| s != 0) {
                bail!(Value, "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, got {}", o[0]);
            }
            let mut b = Vec::new();
            for i in 0..o.len() {
                let s = o[i].max(0) as usize;
                let e = if i + 1 < o.len() { o[i + 1].max(0) as usize } else { n };
                if s > e || e > n {
                    bail!(Value, "embedding_bag: offsets must be non-decreasing and within the input ({} elements), got {:?}", n, o);
                }
                b.push((s, e));
            }
            (idx.clone(), b)
        }
        (1, None) => bail!(Value, "offsets has to be a 1D Tensor but got None"),
        (r, _) => bail!(Value, "input has to be 1D or 2D Tensor, but got Tensor of dimension {r}"),
    };
    if per_sample_weights.is_some() && mode != BagMode::Sum {
        bail!(Value, "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' (got mode='{:?}'). Please open a feature request on GitHub.", mode);
    }
    let rows = embedding(
        &flat,
        weight,
        &EmbeddingOptions {
            padding_idx,
            max_norm: opts.max_norm,
            norm_type: opts.norm_type,
            scale_grad_by_freq: opts.scale_grad_by_freq,
        },
    )?;
    let rows = match per_sample_weights {
        Some(w) => rows.mul(&w.reshape([-1isize])?.unsqueeze(1)?)?,
        None => rows,
    };
    let keep: Vec<bool> = match padding_idx {
        Some(p) => flat.to_dtype(DType::I64)?.to_vec::<i64>()?.iter().map(|&i| i != p).collect(),
        None => vec![true; flat.numel()],
    };
    let d = weight.dims()[1];
    let mut bags = Vec::with_capacity(bounds.len());
    for (s, e) in bounds {
        let used: Vec<i64> = (s..e).filter(|&i| keep[i]).map(|i| i as i64).collect();
        if used.is_empty() {
            bags.push(Tensor::zeros([d], weight.dtype())?);
            continue;
        }
        let sel = rows.index_select(0, &Tensor::from_vec(used.clone(), [used.len()])?)?;
        bags.push(match mode {
            BagMode::Sum => sel.sum_dims(&[0], false)?,
            BagMode::Mean => sel.mean_dims(&[0], false)?,
            BagMode::Max => sel.amax(&[0], false)?,
        });
    }
    if bags.is_empty() {
        return Tensor::zeros([0, d], weight.dtype());
    }
    Tensor::stack(&bags, 0)
}

/// `F.feature_alpha_dropout(x, p=0.5, training=False)`: alpha dropout of whole channels.
pub fn feature_alpha_dropout(x: &Tensor, opts: &AlphaDropoutOptions) -> Result<Tensor> {
    let AlphaDropoutOptions { p, training, generator } = *opts;
    check_p(p)?;
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul(&x.zeros_like()?);
    }
    if x.rank() < 2 {
        bail!(
            Shape,
            "feature_alpha_dropout: expected an input with at least 2 dims, got shape {}",
            x.shape()
        );
    }
    let alpha_p = -super::SELU_ALPHA * super::SELU_SCALE;
    let a = ((1.0 - p) * (1.0 + p * alpha_p * alpha_p)).powf(-0.5);
    let b = -a * alpha_p * p;
    let mut shape = vec![1usize; x.rank()];
    shape[..2].copy_from_slice(&x.dims()[..2]);
    let keep = Tensor::empty(shape, x.dtype())?;
    keep.bernoulli_(1.0 - p, generator)?;
    let dropped = keep.neg()?.add_scalar(1.0)?.mul_scalar(alpha_p * a)?;
    x.mul(&keep)?.mul_scalar(a)?.add(&dropped)?.add_scalar(b)
}

/// `F.one_hot(idx, num_classes)` (int64).
pub fn one_hot(idx: &Tensor, num_classes: Option<usize>) -> Result<Tensor> {
    idx.one_hot(num_classes)
}

/// Options of [`normalize`] (`F.normalize`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NormalizeOptions {
    /// The norm's exponent.
    pub p: f64,
    pub dim: isize,
    /// The norm is clamped below at this value.
    pub eps: f64,
}

impl Default for NormalizeOptions {
    fn default() -> Self {
        NormalizeOptions { p: 2.0, dim: 1, eps: 1e-12 }
    }
}

/// `F.normalize(x, p=2.0, dim=1, eps=1e-12)`: `x / max(||x||_p, eps)` along `dim`.
pub fn normalize(x: &Tensor, opts: &NormalizeOptions) -> Result<Tensor> {
    let NormalizeOptions { p, dim, eps } = *opts;
    let n = x.norm(p, &[dim], true)?.clamp(Some(Scalar::from(eps)), None)?;
    x.div(&n)
}

/// Options of [`cosine_similarity`] (`F.cosine_similarity`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineSimilarityOptions {
    pub dim: isize,
    /// Each norm is clamped below at this value.
    pub eps: f64,
}

impl Default for CosineSimilarityOptions {
    fn default() -> Self {
        CosineSimilarityOptions { dim: 1, eps: 1e-8 }
    }
}

/// `F.cosine_similarity(x1, x2, dim=1, eps=1e-8)`.
pub fn cosine_similarity(x1: &Tensor, x2: &Tensor, opts: &CosineSimilarityOptions) -> Result<Tensor> {
    if let Some(r) = pyrite_core::autocast::dispatch("cosine_similarity", &[Some(x1), Some(x2)], |t| {
        cosine_similarity(t.at(0), t.at(1), opts)
    }) {
        return r;
    }
    let CosineSimilarityOptions { dim, eps } = *opts;
    // PyTorch 2.x: x1 / max(|x1|, eps) . x2 / max(|x2|, eps)
    let n1 = x1.norm(2.0, &[dim], true)?.clamp(Some(Scalar::from(eps)), None)?;
    let n2 = x2.norm(2.0, &[dim], true)?.clamp(Some(Scalar::from(eps)), None)?;
    x1.div(&n1)?.mul(&x2.div(&n2)?)?.sum_dims(&[dim], false)
}

/// Options of [`pairwise_distance`] (`F.pairwise_distance`'s keywords and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairwiseDistanceOptions {
    /// The norm's exponent.
    pub p: f64,
    /// Added to the differences before the norm.
    pub eps: f64,
    pub keepdim: bool,
}

impl Default for PairwiseDistanceOptions {
    fn default() -> Self {
        PairwiseDistanceOptions { p: 2.0, eps: 1e-6, keepdim: false }
    }
}

/// `F.pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False)`: `||x1 - x2 + eps||_p` over
/// the last dim.
pub fn pairwise_distance(x1: &Tensor, x2: &Tensor, opts: &PairwiseDistanceOptions) -> Result<Tensor> {
    let PairwiseDistanceOptions { p, eps, keepdim } = *opts;
    let r = x1.rank().max(x2.rank());
    let d = x1.sub(x2)?.add_scalar(eps)?;
    if r == 0 {
        return d.abs();
    }
    d.norm(p, &[-1], keepdim)
}

/// `mode=` of [`pad`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum PadMode {
    #[default]
    Constant,
    Reflect,
    Replicate,
    Circular,
}

/// Options of [`pad`] (`F.pad`'s keywords and defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PadOptions {
    pub mode: PadMode,
    /// The fill of `Constant` padding (`None`: 0). The other modes take no value (as in
    /// PyTorch, only `None` or 0 is accepted with them).
    pub value: Option<f64>,
}

/// `F.pad(x, pad, mode='constant', value=None)`: `pad` lists (left, right) pairs starting
/// from the last dim, as in PyTorch. Negative pads crop. Reflect, replicate and circular go
/// through an index lookup per padded dim (so gradients flow back to the source elements).
pub fn pad(x: &Tensor, pad: &[isize], opts: &PadOptions) -> Result<Tensor> {
    let pad_fn = self::pad;
    let mode = opts.mode;
    // Autocast's float32 list has reflection_pad1d/2d and replication_pad1d/2d/3d on the CPU.
    let autocast_name = match (mode, pad.len() / 2) {
        (PadMode::Reflect, 1) => "reflection_pad1d",
        (PadMode::Reflect, 2) => "reflection_pad2d",
        (PadMode::Replicate, 1) => "replication_pad1d",
        (PadMode::Replicate, 2) => "replication_pad2d",
        (PadMode::Replicate, 3) => "replication_pad3d",
        _ => "pad",
    };
    if let Some(r) =
        pyrite_core::autocast::dispatch(autocast_name, &[Some(x)], |t| pad_fn(t.at(0), pad, opts))
    {
        return r;
    }
    let value = opts.value.unwrap_or(0.0);
    if mode != PadMode::Constant && value != 0.0 {
        let name = match mode {
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            _ => "circular",
        };
        bail!(Value, "Padding mode \"{name}\" doesn't take in value argument");
    }
    if !pad.len().is_multiple_of(2) {
        bail!(Value, "Padding length must be divisible by 2");
    }
    if pad.len() / 2 > x.rank() {
        bail!(Value, "Padding length should be less than or equal to two times the input dimension but got padding length {} and input of dimension {}", pad.len(), x.rank());
    }
    let mut y = x.clone();
    for (k, lr) in pad.chunks(2).enumerate() {
        let dim = x.rank() - 1 - k;
        let (l, r) = (lr[0], lr[1]);
        if l == 0 && r == 0 {
            continue;
        }
        let n = y.dims()[dim] as isize;
        let Some(total) = n.checked_add(l).and_then(|t| t.checked_add(r)) else {
            bail!(Value, "pad: the padded size of dimension {dim} ({n} + {l} + {r}) overflows");
        };
        if total < 0 || (mode != PadMode::Constant && total <= 0) {
            bail!(Value, "pad: the padded size of dimension {dim} ({n} + {l} + {r}) is not positive");
        }
        y = match mode {
            PadMode::Constant => pad_constant(&y, dim, l, r, value)?,
            _ => {
                let limit_ok = match mode {
                    PadMode::Reflect => l < n && r < n,
                    PadMode::Circular => l <= n && r <= n,
                    _ => n > 0,
                };
                if !limit_ok {
                    bail!(
                        Value,
                        "Padding size should be less than the corresponding input dimension, but got: padding ({l}, {r}) at dimension {dim} of input {}",
                        x.shape()
                    );
                }
                let idx: Vec<i64> = (-l..n + r)
                    .map(|i| match mode {
                        PadMode::Reflect => {
                            let period = 2 * (n - 1);
                            if period == 0 {
                                0
                            } else {
                                let m = i.rem_euclid(period);
                                if m < n {
                                    m
                                } else {
                                    period - m
                                }
                            }
                        }
                        PadMode::Replicate => i.clamp(0, n - 1),
                        _ => i.rem_euclid(n),
                    } as i64)
                    .collect();
                y.index_select(dim as isize, &Tensor::from_vec(idx.clone(), [idx.len()])?)?
            }
        };
    }
    Ok(y)
}

fn pad_constant(y: &Tensor, dim: usize, l: isize, r: isize, value: f64) -> Result<Tensor> {
    let mut y = y.clone();
    let n = y.dims()[dim] as isize;
    // crop first (negative pads)
    let (cl, cr) = ((-l).max(0), (-r).max(0));
    if cl + cr > 0 {
        y = y.narrow(dim as isize, cl, (n - cl - cr).max(0) as usize)?;
    }
    let mut parts = Vec::new();
    let side = |k: isize| -> Result<Tensor> {
        let mut s = y.dims().to_vec();
        s[dim] = k as usize;
        Tensor::full(s, value, y.dtype())
    };
    if l > 0 {
        parts.push(side(l)?);
    }
    parts.push(y.clone());
    if r > 0 {
        parts.push(side(r)?);
    }
    if parts.len() == 1 {
        return Ok(y);
    }
    Tensor::cat(&parts, dim as isize)
}

/// `F.pixel_shuffle(x, r)`: `[*, C r^2, H, W] -> [*, C, H r, W r]`.
pub fn pixel_shuffle(x: &Tensor, r: usize) -> Result<Tensor> {
    if x.rank() < 3 || r == 0 {
        bail!(
            Shape,
            "pixel_shuffle expects input to have at least 3 dimensions, but got input with {} dimension(s)",
            x.rank()
        );
    }
    let k = x.rank();
    let (c, h, w) = (x.dims()[k - 3], x.dims()[k - 2], x.dims()[k - 1]);
    // checked: r * r, h * r and w * r of a huge factor would wrap (and r * r to 0)
    let rr = r.checked_mul(r);
    if rr.is_none_or(|rr| !c.is_multiple_of(rr)) {
        bail!(Value, "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)={c} is not divisible by {}", r as u128 * r as u128);
    }
    let (Some(hr), Some(wr)) = (h.checked_mul(r), w.checked_mul(r)) else {
        bail!(OutOfMemory, "pixel_shuffle: an output of {h}*{r} x {w}*{r} is larger than memory can hold");
    };
    let lead: Vec<isize> = x.dims()[..k - 3].iter().map(|&d| d as isize).collect();
    let oc = c / rr.unwrap_or(1);
    let mut s = lead.clone();
    s.extend([oc as isize, r as isize, r as isize, h as isize, w as isize]);
    let y = x.reshape(s)?;
    let b = lead.len();
    let b = b as isize;
    let mut perm: Vec<isize> = (0..b).collect();
    perm.extend([b, b + 3, b + 1, b + 4, b + 2]);
    let mut out = lead;
    out.extend([oc as isize, hr as isize, wr as isize]);
    y.permute(&perm)?.reshape(out)
}

/// `F.pixel_unshuffle(x, r)`: `[*, C, H r, W r] -> [*, C r^2, H, W]`.
pub fn pixel_unshuffle(x: &Tensor, r: usize) -> Result<Tensor> {
    if x.rank() < 3 || r == 0 {
        bail!(
            Shape,
            "pixel_unshuffle expects input to have at least 3 dimensions, but got input with {} dimension(s)",
            x.rank()
        );
    }
    let k = x.rank();
    let (c, h, w) = (x.dims()[k - 3], x.dims()[k - 2], x.dims()[k - 1]);
    if h % r != 0 || w % r != 0 {
        bail!(Value, "pixel_unshuffle expects height and width to be divisible by downscale_factor {r}, but got {h} x {w}");
    }
    let lead: Vec<isize> = x.dims()[..k - 3].iter().map(|&d| d as isize).collect();
    let mut s = lead.clone();
    s.extend([c as isize, (h / r) as isize, r as isize, (w / r) as isize, r as isize]);
    let b = lead.len();
    let b = b as isize;
    let mut perm: Vec<isize> = (0..b).collect();
    perm.extend([b, b + 2, b + 4, b + 1, b + 3]);
    let mut out = lead;
    let Some(crr) = r.checked_mul(r).and_then(|rr| rr.checked_mul(c)) else {
        bail!(
            OutOfMemory,
            "pixel_unshuffle: an output of {c}*{r}*{r} channels is larger than memory can hold"
        );
    };
    out.extend([crr as isize, (h / r) as isize, (w / r) as isize]);
    x.reshape(s)?.permute(&perm)?.reshape(out)
}

/// `F.channel_shuffle(x, groups)`: `[N, g * k, *] -> ` channels interleaved across groups.
pub fn channel_shuffle(x: &Tensor, groups: usize) -> Result<Tensor> {
    if x.rank() < 3 {
        bail!(
            Shape,
            "channel_shuffle expects input to have at least 3 dimensions, but got input with {} dimension(s)",
            x.rank()
        );
    }
    let c = x.dims()[1];
    if groups == 0 || !c.is_multiple_of(groups) {
        bail!(Value, "Number of channels must be divisible by groups. Got {c} channels and {groups} groups.");
    }
    let mut s: Vec<isize> = vec![x.dims()[0] as isize, groups as isize, (c / groups) as isize];
    s.extend(x.dims()[2..].iter().map(|&d| d as isize));
    let orig: Vec<isize> = x.dims().iter().map(|&d| d as isize).collect();
    x.reshape(s)?.transpose(1, 2)?.reshape(orig)
}
