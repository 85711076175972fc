//! Attention: `F.scaled_dot_product_attention` and `F.multi_head_attention_forward`.
//!
//! Scaled dot-product attention has two implementations:
//! - the math path, composed of recorded ops (`matmul`, `masked_fill`, `softmax`, `dropout`),
//!   which handles everything (dropout, masks that require grad, any dtype) and is
//!   differentiable to any order;
//! - the fused path, pyrite-core's blockwise kernel (`ops::attention`, an online softmax that
//!   never writes the score matrix) in an autograd function whose backward recomputes the
//!   scores from the saved row log-sum-exp. It runs f32/f64 attention without dropout and
//!   with masks that need no gradient. Its backward is a kernel too, except under
//!   `create_graph`, where it is written with recorded ops so that it can be differentiated
//!   again.
//!
//! The fused path is taken whenever it applies (measured faster at every size we tried, see
//! `docs/ARCHITECTURE.md`); [`crate::attention::sdpa_kernel`] restricts the choice, as
//! `torch.nn.attention.sdpa_kernel` does.

use super::linear::{dropout, linear, DropoutOptions};
use crate::attention::{backend_allowed, SdpBackend};
use pyrite_core::autograd::{self, Function, FunctionCtx};
use pyrite_core::ops::attention::FlashAttention;
use pyrite_core::{bail, broadcast_shapes, DType, Result, Tensor};

/// The keyword arguments of `F.scaled_dot_product_attention` (PyTorch's defaults).
///
/// `attn_mask` is a bool mask (`true`: the position takes part) or a float mask added to the
/// scores; it broadcasts to `[..., L, S]`.
#[derive(Clone, Debug, Default)]
pub struct SdpaOptions {
    pub attn_mask: Option<Tensor>,
    pub dropout_p: f64,
    pub is_causal: bool,
    /// `None`: `1 / sqrt(E)`.
    pub scale: Option<f64>,
    pub enable_gqa: bool,
}

impl SdpaOptions {
    pub fn new() -> SdpaOptions {
        SdpaOptions::default()
    }
    pub fn attn_mask(mut self, mask: &Tensor) -> SdpaOptions {
        self.attn_mask = Some(mask.clone());
        self
    }
    pub fn dropout_p(mut self, p: f64) -> SdpaOptions {
        self.dropout_p = p;
        self
    }
    pub fn is_causal(mut self, is_causal: bool) -> SdpaOptions {
        self.is_causal = is_causal;
        self
    }
    pub fn scale(mut self, scale: f64) -> SdpaOptions {
        self.scale = Some(scale);
        self
    }
    pub fn enable_gqa(mut self, enable_gqa: bool) -> SdpaOptions {
        self.enable_gqa = enable_gqa;
        self
    }
}

/// `F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
/// enable_gqa)`: `softmax(query @ key^T * scale + mask) @ value`, with dropout on the
/// attention weights.
///
/// Shapes: `query` `[..., L, E]`, `key` `[..., S, E]`, `value` `[..., S, Ev]`; the leading dims
/// broadcast, and the result is `[..., L, Ev]`. With `enable_gqa`, the key/value heads (dim
/// -3) may be fewer than the query heads if they divide them: each serves a group of query
/// heads. `is_causal` masks key `j` from query `i` when `j > i`, and may not be combined with
/// `attn_mask`. A query whose keys are all masked gets zeros, as in PyTorch. Dropout applies
/// whenever `dropout_p > 0` (pass 0 in evaluation).
///
/// ```
/// use pyrite::nn::functional::{self as F, SdpaOptions};
/// use pyrite::{DType, Tensor};
/// let q = Tensor::randn([2, 4, 5, 8], DType::F32)?; // [batch, heads, L, E]
/// let k = Tensor::randn([2, 2, 6, 8], DType::F32)?; // 2 key/value heads
/// let v = Tensor::randn([2, 2, 6, 3], DType::F32)?;
/// let out = F::scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new().enable_gqa(true))?;
/// assert_eq!(out.dims(), &[2, 4, 5, 3]);
/// let causal = F::scaled_dot_product_attention(&q, &q, &q, &SdpaOptions::new().is_causal(true))?;
/// // the first query sees only the first key
/// assert!(causal.select(2, 0)?.allclose(&q.select(2, 0)?, 1e-6, 1e-6, false)?);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn scaled_dot_product_attention(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    opts: &SdpaOptions,
) -> Result<Tensor> {
    let _prof = pyrite_core::profiler_record::op("aten::scaled_dot_product_attention", &[query, key, value]);
    // Autocast's lower-precision list: q, k, v and a float mask.
    if let Some(r) = pyrite_core::autocast::dispatch(
        "scaled_dot_product_attention",
        &[Some(query), Some(key), Some(value), opts.attn_mask.as_ref()],
        |t| {
            let opts = SdpaOptions { attn_mask: t.opt(3).cloned(), ..opts.clone() };
            scaled_dot_product_attention(t.at(0), t.at(1), t.at(2), &opts)
        },
    ) {
        return r;
    }
    let sh = check_sdpa(query, key, value, opts)?;
    let e = query.dims()[query.rank() - 1];
    let scale = opts.scale.unwrap_or(1.0 / (e as f64).sqrt());
    let mask = match &opts.attn_mask {
        Some(m) => Some(float_mask(m, query.dtype(), true)?),
        None => None,
    };
    let (math, fused) = (backend_allowed(SdpBackend::Math), backend_allowed(SdpBackend::FlashAttention));
    let fused_applies = matches!(query.dtype(), DType::F32 | DType::F64)
        && opts.dropout_p == 0.0
        && !(mask.as_ref().is_some_and(|m| m.requires_grad()) && autograd::is_grad_enabled());
    if fused && fused_applies {
        return fused_sdpa(query, key, value, mask.as_ref(), &sh, scale, opts.is_causal);
    }
    if !math {
        bail!(
            Value,
            "No available kernel. Aborting execution. (the allowed backends cannot run this call: the fused kernel needs f32/f64 inputs, dropout_p == 0 and a mask that does not require grad)"
        );
    }
    let (k, v) = if sh.group > 1 {
        (key.repeat_interleave(sh.group, Some(-3))?, value.repeat_interleave(sh.group, Some(-3))?)
    } else {
        (key.clone(), value.clone())
    };
    let mut p = probs(query, &k, mask.as_ref(), scale, opts.is_causal)?;
    if opts.dropout_p > 0.0 {
        p = dropout(&p, &DropoutOptions { p: opts.dropout_p, ..Default::default() })?;
    }
    p.matmul(&v)
}

/// The shapes of one attention call: the broadcast batch dims of the result and the query
/// heads each key/value head serves.
struct SdpaShapes {
    batch: Vec<usize>,
    group: usize,
}

fn check_sdpa(q: &Tensor, k: &Tensor, v: &Tensor, opts: &SdpaOptions) -> Result<SdpaShapes> {
    if q.rank() < 2 || k.rank() < 2 || v.rank() < 2 {
        bail!(
            Shape,
            "Expected query, key, and value to all be at least 2 dimensional, but got query.dim: {} key.dim: {} and value.dim: {} instead.",
            q.rank(),
            k.rank(),
            v.rank()
        );
    }
    if q.dtype() != k.dtype() || q.dtype() != v.dtype() {
        bail!(
            DType,
            "Expected query, key, and value to have the same dtype, but got query.dtype: {} key.dtype: {} and value.dtype: {} instead.",
            cpp_name(q.dtype()),
            cpp_name(k.dtype()),
            cpp_name(v.dtype())
        );
    }
    if !q.dtype().is_floating_point() {
        bail!(
            DType,
            "scaled_dot_product_attention: expected floating-point query, key and value, got {}",
            q.dtype()
        );
    }
    if !(0.0..=1.0).contains(&opts.dropout_p) {
        bail!(Value, "dropout probability has to be between 0 and 1, but got {}", opts.dropout_p);
    }
    if opts.is_causal && opts.attn_mask.is_some() {
        bail!(
            Value,
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"
        );
    }
    let (qd, kd, vd) = (q.dims(), k.dims(), v.dims());
    let (l, e) = (qd[qd.len() - 2], qd[qd.len() - 1]);
    let (s, ek) = (kd[kd.len() - 2], kd[kd.len() - 1]);
    if ek != e {
        bail!(
            Shape,
            "scaled_dot_product_attention: query and key must have the same embedding size, got query {} and key {}",
            q.shape(),
            k.shape()
        );
    }
    if vd[vd.len() - 2] != s {
        bail!(
            Shape,
            "scaled_dot_product_attention: key and value must have the same sequence length, got key {} and value {}",
            k.shape(),
            v.shape()
        );
    }
    let (qb, kb, vb) = (&qd[..qd.len() - 2], &kd[..kd.len() - 2], &vd[..vd.len() - 2]);
    let gqa = opts.enable_gqa && !qb.is_empty() && !kb.is_empty() && !vb.is_empty() && qb.last() != kb.last();
    let (batch, group) = if gqa {
        let (hq, hk, hv) = (qb[qb.len() - 1], kb[kb.len() - 1], vb[vb.len() - 1]);
        if hk == 0 || hk != hv || hq % hk != 0 {
            bail!(Shape, "Number of heads in key and value must divide the number of heads in query");
        }
        let outer =
            broadcast_shapes(&qb[..qb.len() - 1], &kb[..kb.len() - 1], "scaled_dot_product_attention")?;
        let outer = broadcast_shapes(outer.dims(), &vb[..vb.len() - 1], "scaled_dot_product_attention")?;
        let mut b = outer.dims().to_vec();
        b.push(hq);
        (b, hq / hk)
    } else {
        let b = broadcast_shapes(qb, kb, "scaled_dot_product_attention")?;
        (broadcast_shapes(b.dims(), vb, "scaled_dot_product_attention")?.dims().to_vec(), 1)
    };
    if let Some(m) = &opts.attn_mask {
        if m.dtype() != DType::Bool && !m.dtype().is_floating_point() {
            bail!(
                DType,
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: {} and query.dtype: {} instead.",
                cpp_name(m.dtype()),
                cpp_name(q.dtype())
            );
        }
        let mut full = batch.clone();
        full.extend([l, s]);
        let b = broadcast_shapes(m.dims(), &full, "scaled_dot_product_attention")?;
        if b.dims() != full.as_slice() {
            bail!(
                Shape,
                "scaled_dot_product_attention: attn_mask of shape {} does not broadcast to the attention shape {:?}",
                m.shape(),
                full
            );
        }
    }
    Ok(SdpaShapes { batch, group })
}

/// A dtype as PyTorch's C++ messages spell it (`float`, `double`, `long int`).
fn cpp_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
        DType::I64 => "long int",
        DType::I32 => "int",
        DType::U8 => "unsigned char",
        DType::Bool => "bool",
    }
}

/// A mask as an additive float mask in `dtype`: a float mask is converted; a bool mask gives
/// 0 where `keep_when` and `-inf` elsewhere (`true` keeps for SDPA; `false` for the masks of
/// `nn.MultiheadAttention`, where `true` marks what to ignore).
fn float_mask(m: &Tensor, dtype: DType, keep_when: bool) -> Result<Tensor> {
    if m.dtype() == DType::Bool {
        let drop = if keep_when { m.logical_not()? } else { m.clone() };
        Tensor::zeros(m.dims(), dtype)?.masked_fill(&drop, f64::NEG_INFINITY)
    } else if m.dtype() != dtype {
        m.to_dtype(dtype)
    } else {
        Ok(m.clone())
    }
}

/// The attention weights `softmax(q k^T * scale + mask)` with composed ops. Rows whose
/// scores are all `-inf` (every key masked) are zeros, not NaN, with zero gradient.
fn probs(q: &Tensor, k: &Tensor, mask: Option<&Tensor>, scale: f64, is_causal: bool) -> Result<Tensor> {
    let mut s = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(scale)?;
    let (l, n) = (s.dims()[s.rank() - 2], s.dims()[s.rank() - 1]);
    if is_causal {
        let above = Tensor::ones([l, n], DType::Bool)?.triu(1)?;
        s = s.masked_fill(&above, f64::NEG_INFINITY)?;
    }
    if let Some(m) = mask {
        s = s.add(m)?;
        let full = {
            let _g = autograd::no_grad();
            s.detach().amax(&[-1], true)?.eq_scalar(f64::NEG_INFINITY)?
        };
        if full.numel() > 0 && full.any()?.item::<bool>()? {
            return s.masked_fill(&full, 0.0)?.softmax(-1)?.masked_fill(&full, 0.0);
        }
    }
    s.softmax(-1)
}

/// The fused path: the operands as `[B, H, L, E]` views for the kernel, run through
/// [`FusedAttention`], and the result reshaped to the broadcast batch dims.
fn fused_sdpa(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    sh: &SdpaShapes,
    scale: f64,
    is_causal: bool,
) -> Result<Tensor> {
    let (qd, kd, vd) = (q.dims(), k.dims(), v.dims());
    let (l, e, s, ev) = (qd[qd.len() - 2], qd[qd.len() - 1], kd[kd.len() - 2], vd[vd.len() - 1]);
    let h = sh.batch.last().copied().unwrap_or(1);
    let b: usize = if sh.batch.is_empty() { 1 } else { sh.batch[..sh.batch.len() - 1].iter().product() };
    let hk = h / sh.group;
    let as4 = |t: &Tensor, heads: usize, rows: usize, cols: usize| -> Result<Tensor> {
        let mut full = sh.batch.clone();
        if let Some(last) = full.last_mut() {
            *last = heads;
        }
        full.extend([rows, cols]);
        let t = if t.dims() == full.as_slice() { t.clone() } else { t.broadcast_to(&full)? };
        t.reshape([b, heads, rows, cols])
    };
    let (q4, k4, v4) = (as4(q, h, l, e)?, as4(k, hk, s, e)?, as4(v, hk, s, ev)?);
    let m4 = match mask {
        Some(m) => Some(as4(m, h, l, s)?),
        None => None,
    };
    let f = FusedAttention { scale, is_causal, mask: m4 };
    let out = autograd::apply(f, &[&q4, &k4, &v4])?.remove(0);
    let mut dims = sh.batch.clone();
    dims.extend([l, ev]);
    if out.dims() == dims.as_slice() {
        return Ok(out);
    }
    out.reshape(dims)
}

/// The fused kernel as an autograd function of `[B, H, L, E]` query, key and value.
struct FusedAttention {
    scale: f64,
    is_causal: bool,
    mask: Option<Tensor>,
}

impl FusedAttention {
    fn kernel<'a>(&'a self, q: &'a Tensor, k: &'a Tensor, v: &'a Tensor) -> FlashAttention<'a> {
        FlashAttention { q, k, v, mask: self.mask.as_ref(), scale: self.scale, is_causal: self.is_causal }
    }
}

impl Function for FusedAttention {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (out, lse) = self.kernel(inputs[0], inputs[1], inputs[2]).forward()?;
        ctx.save_for_backward(&[inputs[0], inputs[1], inputs[2], &out, &lse]);
        Ok(vec![out])
    }

    fn backward(&self, ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let s = ctx.saved_tensors();
        let (q, k, v, out, lse) = (&s[0], &s[1], &s[2], &s[3], &s[4]);
        let (dq, dk, dv) = if autograd::is_grad_enabled() {
            // create_graph: gradients as recorded ops of q, k, v and the incoming gradient
            composed_grads(q, k, v, &grads[0], self.mask.as_ref(), self.scale, self.is_causal)?
        } else {
            self.kernel(q, k, v).backward(&grads[0], out, lse)?
        };
        Ok(vec![Some(dq), Some(dk), Some(dv)])
    }

    fn name(&self) -> String {
        "ScaledDotProductFlashAttentionForCpuBackward0".into()
    }
}

/// The fused kernel's gradients written with recorded ops (`[B, H, L, E]` operands, `k`/`v`
/// with `H / group` heads): differentiable, for a backward pass with `create_graph`.
fn composed_grads(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    g: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
    is_causal: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (h, hk) = (q.dims()[1], k.dims()[1]);
    let group = h / hk;
    let (ke, ve) = if group > 1 {
        (k.repeat_interleave(group, Some(1))?, v.repeat_interleave(group, Some(1))?)
    } else {
        (k.clone(), v.clone())
    };
    let p = probs(q, &ke, mask, scale, is_causal)?;
    let dv = p.transpose(-2, -1)?.matmul(g)?;
    let dp = g.matmul(&ve.transpose(-2, -1)?)?;
    let ds = p.mul(&dp.sub(&dp.mul(&p)?.sum_dims(&[-1], true)?)?)?;
    let dq = ds.matmul(&ke)?.mul_scalar(scale)?;
    let dk = ds.transpose(-2, -1)?.matmul(q)?.mul_scalar(scale)?;
    if group > 1 {
        let fold = |t: Tensor| -> Result<Tensor> {
            let d = t.dims().to_vec();
            t.reshape([d[0], hk, group, d[2], d[3]])?.sum_dims(&[2], false)
        };
        return Ok((dq, fold(dk)?, fold(dv)?));
    }
    Ok((dq, dk, dv))
}

// --------------------------------------------------------------------------------------------
// multi_head_attention_forward

/// The arguments of `F.multi_head_attention_forward` after `query`, `key` and `value`, with
/// PyTorch's names and defaults (`training`, `need_weights` and `average_attn_weights` are
/// true by default). `out_proj_weight` is required; `in_proj_weight` is, unless
/// `use_separate_proj_weight` (then `q_proj_weight`, `k_proj_weight` and `v_proj_weight`
/// are).
///
/// Masks: `key_padding_mask` `(N, S)` (or `(S)` unbatched) and `attn_mask` `(L, S)` or
/// `(N * num_heads, L, S)`, each bool (`true`: ignore this position) or float (added to the
/// scores).
#[derive(Clone, Copy, Debug)]
pub struct MhaOptions<'a> {
    pub embed_dim_to_check: usize,
    pub num_heads: usize,
    pub in_proj_weight: Option<&'a Tensor>,
    pub in_proj_bias: Option<&'a Tensor>,
    pub bias_k: Option<&'a Tensor>,
    pub bias_v: Option<&'a Tensor>,
    pub add_zero_attn: bool,
    pub dropout_p: f64,
    pub out_proj_weight: Option<&'a Tensor>,
    pub out_proj_bias: Option<&'a Tensor>,
    pub training: bool,
    pub key_padding_mask: Option<&'a Tensor>,
    pub need_weights: bool,
    pub attn_mask: Option<&'a Tensor>,
    pub use_separate_proj_weight: bool,
    pub q_proj_weight: Option<&'a Tensor>,
    pub k_proj_weight: Option<&'a Tensor>,
    pub v_proj_weight: Option<&'a Tensor>,
    pub static_k: Option<&'a Tensor>,
    pub static_v: Option<&'a Tensor>,
    pub average_attn_weights: bool,
    pub is_causal: bool,
}

impl Default for MhaOptions<'_> {
    fn default() -> Self {
        MhaOptions {
            embed_dim_to_check: 0,
            num_heads: 1,
            in_proj_weight: None,
            in_proj_bias: None,
            bias_k: None,
            bias_v: None,
            add_zero_attn: false,
            dropout_p: 0.0,
            out_proj_weight: None,
            out_proj_bias: None,
            training: true,
            key_padding_mask: None,
            need_weights: true,
            attn_mask: None,
            use_separate_proj_weight: false,
            q_proj_weight: None,
            k_proj_weight: None,
            v_proj_weight: None,
            static_k: None,
            static_v: None,
            average_attn_weights: true,
            is_causal: false,
        }
    }
}

/// `F.multi_head_attention_forward(query, key, value, ...)`: multi-head attention on
/// sequence-first inputs, `query` `(L, N, E)`, `key` `(S, N, Ek)`, `value` `(S, N, Ev)` (or
/// unbatched `(L, E)`, ...). Returns the output `(L, N, E)` and, with `need_weights`, the
/// attention weights `(N, L, S)` averaged over heads (`(N, num_heads, L, S)` without
/// `average_attn_weights`).
///
/// When `query`, `key` and `value` are the same tensor (self-attention), the three input
/// projections are one product with the packed weight; without `need_weights` the attention
/// itself is [`scaled_dot_product_attention`] on views of that product (no copies).
///
/// ```
/// use pyrite::nn::functional::{self as F, MhaOptions};
/// use pyrite::{DType, Tensor};
/// let x = Tensor::randn([5, 2, 8], DType::F32)?; // (L, N, E)
/// let w_in = Tensor::randn([24, 8], DType::F32)?;
/// let w_out = Tensor::randn([8, 8], DType::F32)?;
/// let opts = MhaOptions {
///     embed_dim_to_check: 8,
///     num_heads: 2,
///     in_proj_weight: Some(&w_in),
///     out_proj_weight: Some(&w_out),
///     ..Default::default()
/// };
/// let (out, weights) = F::multi_head_attention_forward(&x, &x, &x, &opts)?;
/// assert_eq!(out.dims(), &[5, 2, 8]);
/// assert_eq!(weights.unwrap().dims(), &[2, 5, 5]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn multi_head_attention_forward(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    o: &MhaOptions<'_>,
) -> Result<(Tensor, Option<Tensor>)> {
    let batched = mha_shape_check(query, key, value, o)?;
    let self_attn = query.is_same(key) && key.is_same(value);
    let kv_same = key.is_same(value);
    let (query, key, value) = if batched {
        (query.clone(), key.clone(), value.clone())
    } else {
        (query.unsqueeze(1)?, key.unsqueeze(1)?, value.unsqueeze(1)?)
    };
    let kpm = match o.key_padding_mask {
        Some(m) if !batched => Some(m.unsqueeze(0)?),
        m => m.cloned(),
    };
    let (tgt_len, bsz, embed_dim) = (query.dims()[0], query.dims()[1], query.dims()[2]);
    let kpm = kpm.map(|m| canonical_mask(&m, "key_padding_mask", query.dtype())).transpose()?;
    let mut is_causal = o.is_causal;
    if is_causal && o.attn_mask.is_none() {
        bail!(
            Value,
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method `generate_square_subsequent_mask` to create this mask."
        );
    }
    let attn_mask = if is_causal && kpm.is_none() && !o.need_weights {
        // the hint stands for the mask: the fused kernel applies it without reading one
        None
    } else {
        if kpm.is_some() {
            is_causal = false;
        }
        o.attn_mask.map(|m| canonical_mask(m, "attn_mask", query.dtype())).transpose()?
    };
    if embed_dim != o.embed_dim_to_check {
        bail!(Shape, "was expecting embedding dimension of {}, but got {embed_dim}", o.embed_dim_to_check);
    }
    let heads = o.num_heads;
    if heads == 0 || embed_dim % heads != 0 {
        bail!(Value, "embed_dim {embed_dim} not divisible by num_heads {heads}");
    }
    let head_dim = embed_dim / heads;
    if o.use_separate_proj_weight {
        if key.dims()[..2] != value.dims()[..2] {
            bail!(
                Shape,
                "key's sequence and batch dims {:?} do not match value's {:?}",
                &key.dims()[..2],
                &value.dims()[..2]
            );
        }
    } else if key.dims() != value.dims() {
        bail!(Shape, "key shape {} does not match value shape {}", key.shape(), value.shape());
    }
    let Some(out_w) = o.out_proj_weight else {
        bail!(Value, "multi_head_attention_forward: out_proj_weight is required");
    };

    // in-projection: (L, N, E) and (S, N, E)
    let (q, k, v, packed) = in_projection(&query, &key, &value, o, embed_dim, self_attn, kv_same)?;
    let src_len0 = key.dims()[0];

    // attn_mask as (1, 1, L, S) or (N, H, L, S)
    let mut attn_mask = match attn_mask {
        None => None,
        Some(m) if m.rank() == 2 => {
            if m.dims() != [tgt_len, src_len0] {
                bail!(
                    Shape,
                    "The shape of the 2D attn_mask is {}, but should be ({tgt_len}, {src_len0}).",
                    m.shape()
                );
            }
            Some(m.reshape([1, 1, tgt_len, src_len0])?)
        }
        Some(m) if m.rank() == 3 => {
            if m.dims() != [bsz * heads, tgt_len, src_len0] {
                bail!(
                    Shape,
                    "The shape of the 3D attn_mask is {}, but should be ({}, {tgt_len}, {src_len0}).",
                    m.shape(),
                    bsz * heads
                );
            }
            Some(m.reshape([bsz, heads, tgt_len, src_len0])?)
        }
        Some(m) => bail!(Shape, "attn_mask's dimension {} is not supported", m.rank()),
    };
    let mut kpm = kpm;
    let pad1 = |m: Tensor| super::linear::pad(&m, &[0, 1], &Default::default());

    // heads: (N, H, L or S, head_dim) views
    let split = |t: &Tensor| -> Result<Tensor> { t.unflatten(-1, [heads, head_dim])?.permute(&[1, 2, 0, 3]) };
    let (mut k, mut v) = (k, v);
    match (o.bias_k, o.bias_v) {
        (Some(bk), Some(bv)) => {
            if o.static_k.is_some() || o.static_v.is_some() {
                bail!(Value, "bias cannot be added to static key.");
            }
            k = Tensor::cat(&[k, bk.reshape([1, 1, embed_dim])?.expand([1, bsz, embed_dim])?], 0)?;
            v = Tensor::cat(&[v, bv.reshape([1, 1, embed_dim])?.expand([1, bsz, embed_dim])?], 0)?;
            attn_mask = attn_mask.map(pad1).transpose()?;
            kpm = kpm.map(pad1).transpose()?;
        }
        (Some(_), None) => bail!(Value, "bias_k is set but bias_v is None"),
        (None, Some(_)) => bail!(Value, "bias_v is set but bias_k is None"),
        (None, None) => {}
    }
    let q = split(&q)?;
    let mut k = match o.static_k {
        Some(sk) => static_kv(sk, "static_k", bsz, heads, head_dim)?,
        None => split(&k)?,
    };
    let mut v = match o.static_v {
        Some(sv) => static_kv(sv, "static_v", bsz, heads, head_dim)?,
        None => split(&v)?,
    };
    if o.add_zero_attn {
        let zeros = Tensor::zeros([bsz, heads, 1, head_dim], k.dtype())?;
        k = Tensor::cat(&[k, zeros.clone()], 2)?;
        v = Tensor::cat(&[v, zeros], 2)?;
        attn_mask = attn_mask.map(pad1).transpose()?;
        kpm = kpm.map(pad1).transpose()?;
    }
    let src_len = k.dims()[2];

    // merge the key padding mask into the attention mask
    if let Some(m) = kpm {
        if m.dims()[0] != bsz {
            bail!(Shape, "Expected key_padded_mask.shape[0] to be {bsz}, but got {}", m.dims()[0]);
        }
        if m.dims()[1] != src_len {
            bail!(Shape, "Expected key_padded_mask.shape[1] to be {src_len}, but got {}", m.dims()[1]);
        }
        let m = m.reshape([bsz, 1, 1, src_len])?;
        attn_mask = Some(match attn_mask {
            None => m,
            Some(a) => a.add(&m)?,
        });
    }
    if let Some(a) = &attn_mask
        && a.dims()[3] != src_len
    {
        bail!(
                Shape,
                "attn_mask has {} key positions but the keys have {src_len} (static_k/static_v must match the masks)",
                a.dims()[3]
            );
    }
    let dropout_p = if o.training { o.dropout_p } else { 0.0 };

    let (attn, weights) = if o.need_weights {
        let qs = q.mul_scalar((1.0 / head_dim as f64).sqrt())?;
        let mut w = qs.matmul(&k.transpose(-2, -1)?)?;
        if let Some(a) = &attn_mask {
            w = w.add(a)?;
        }
        let mut w = w.softmax(-1)?;
        if dropout_p > 0.0 {
            w = dropout(&w, &DropoutOptions { p: dropout_p, ..Default::default() })?;
        }
        let attn = w.matmul(&v)?;
        let w = if o.average_attn_weights { w.mean_dims(&[1], false)? } else { w };
        (attn, Some(w))
    } else {
        let plain_keys =
            o.bias_k.is_none() && !o.add_zero_attn && o.static_k.is_none() && o.static_v.is_none();
        let fused = plain_keys
            && dropout_p == 0.0
            && matches!(q.dtype(), DType::F32 | DType::F64)
            && backend_allowed(SdpBackend::FlashAttention)
            && !(attn_mask.as_ref().is_some_and(|m| m.requires_grad()) && autograd::is_grad_enabled());
        match packed {
            Some(p) if fused => (packed_self_attention(&p, heads, attn_mask.as_ref(), is_causal)?, None),
            _ => {
                let sdpa = SdpaOptions { attn_mask, dropout_p, is_causal, scale: None, enable_gqa: false };
                (scaled_dot_product_attention(&q, &k, &v, &sdpa)?, None)
            }
        }
    };
    // (N, H, L, hd) -> (L, N, E), then the output projection
    let attn = attn.permute(&[2, 0, 1, 3])?.flatten(2, 3)?;
    let out = project(&attn, out_w, o.out_proj_bias)?;
    if batched {
        Ok((out, weights))
    } else {
        Ok((out.squeeze_dim(1)?, weights.map(|w| w.squeeze_dim(0)).transpose()?))
    }
}

/// PyTorch's `_mha_shape_check`: whether the input is batched; errors for wrong ranks.
fn mha_shape_check(q: &Tensor, k: &Tensor, v: &Tensor, o: &MhaOptions<'_>) -> Result<bool> {
    match q.rank() {
        3 => {
            if k.rank() != 3 || v.rank() != 3 {
                bail!(
                    Shape,
                    "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found {}-D and {}-D tensors respectively",
                    k.rank(),
                    v.rank()
                );
            }
            if let Some(m) = o.key_padding_mask
                && m.rank() != 2
            {
                bail!(
                        Shape,
                        "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but found {}-D tensor instead",
                        m.rank()
                    );
            }
            if let Some(m) = o.attn_mask
                && m.rank() != 2
                && m.rank() != 3
            {
                bail!(
                        Shape,
                        "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found {}-D tensor instead",
                        m.rank()
                    );
            }
            Ok(true)
        }
        2 => {
            if k.rank() != 2 || v.rank() != 2 {
                bail!(
                    Shape,
                    "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found {}-D and {}-D tensors respectively",
                    k.rank(),
                    v.rank()
                );
            }
            if let Some(m) = o.key_padding_mask
                && m.rank() != 1
            {
                bail!(
                        Shape,
                        "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but found {}-D tensor instead",
                        m.rank()
                    );
            }
            if let Some(m) = o.attn_mask {
                if m.rank() != 2 && m.rank() != 3 {
                    bail!(
                        Shape,
                        "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found {}-D tensor instead",
                        m.rank()
                    );
                }
                let want = [o.num_heads, q.dims()[0], k.dims()[0]];
                if m.rank() == 3 && m.dims() != want {
                    bail!(Shape, "Expected `attn_mask` shape to be {want:?} but got {}", m.shape());
                }
            }
            Ok(false)
        }
        r => {
            bail!(Shape, "query should be unbatched 2D or batched 3D tensor but received {r}-D query tensor")
        }
    }
}

/// PyTorch's `_canonical_mask`: a bool mask (`true` = ignore) becomes a float mask of 0 and
/// `-inf`; a float mask stays; other dtypes are errors.
pub(crate) fn canonical_mask(m: &Tensor, name: &str, dtype: DType) -> Result<Tensor> {
    if m.dtype() != DType::Bool && !m.dtype().is_floating_point() {
        bail!(DType, "only bool and floating types of {name} are supported");
    }
    float_mask(m, dtype, false)
}

/// `static_k` / `static_v` `(N * H, S, head_dim)` as `(N, H, S, head_dim)`.
fn static_kv(t: &Tensor, name: &str, bsz: usize, heads: usize, head_dim: usize) -> Result<Tensor> {
    if t.rank() != 3 || t.dims()[0] != bsz * heads {
        bail!(
            Shape,
            "expecting {name}.size(0) of {}, but got {}",
            bsz * heads,
            t.dims().first().copied().unwrap_or(0)
        );
    }
    if t.dims()[2] != head_dim {
        bail!(Shape, "expecting {name}.size(2) of {head_dim}, but got {}", t.dims()[2]);
    }
    t.reshape([bsz, heads, t.dims()[1], head_dim])
}

/// The q, k, v projections (PyTorch's `_in_projection_packed` / `_in_projection`), each in
/// its input's layout. Self-attention is one product with the packed weight (q, k, v are
/// column slices of it, and that product is returned too); `key is value` is two.
fn in_projection(
    query: &Tensor,
    key: &Tensor,
    value: &Tensor,
    o: &MhaOptions<'_>,
    e: usize,
    self_attn: bool,
    kv_same: bool,
) -> Result<(Tensor, Tensor, Tensor, Option<Tensor>)> {
    let chunk = |t: Option<&Tensor>, i: usize, n: usize| -> Result<Option<Tensor>> {
        t.map(|t| t.narrow(0, (i * e) as isize, n * e)).transpose()
    };
    if !o.use_separate_proj_weight {
        let Some(w) = o.in_proj_weight else {
            bail!(Value, "use_separate_proj_weight is False but in_proj_weight is None");
        };
        if w.rank() != 2 || w.dims() != [3 * e, e] {
            bail!(Shape, "in_proj_weight must be ({}, {e}), got {}", 3 * e, w.shape());
        }
        if let Some(b) = o.in_proj_bias
            && b.dims() != [3 * e]
        {
            bail!(Shape, "in_proj_bias must be ({},), got {}", 3 * e, b.shape());
        }
        let b = o.in_proj_bias;
        if self_attn {
            let p = project(query, w, b)?;
            return Ok((
                p.narrow(-1, 0, e)?,
                p.narrow(-1, e as isize, e)?,
                p.narrow(-1, 2 * e as isize, e)?,
                Some(p),
            ));
        }
        let q = project(query, &w.narrow(0, 0, e)?, chunk(b, 0, 1)?.as_ref())?;
        if kv_same {
            let kv = project(key, &w.narrow(0, e as isize, 2 * e)?, chunk(b, 1, 2)?.as_ref())?;
            return Ok((q, kv.narrow(-1, 0, e)?, kv.narrow(-1, e as isize, e)?, None));
        }
        let k = project(key, &w.narrow(0, e as isize, e)?, chunk(b, 1, 1)?.as_ref())?;
        let v = project(value, &w.narrow(0, 2 * e as isize, e)?, chunk(b, 2, 1)?.as_ref())?;
        return Ok((q, k, v, None));
    }
    let (Some(wq), Some(wk), Some(wv)) = (o.q_proj_weight, o.k_proj_weight, o.v_proj_weight) else {
        bail!(
            Value,
            "use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight is None"
        );
    };
    let want = [(wq, query, "q_proj_weight"), (wk, key, "k_proj_weight"), (wv, value, "v_proj_weight")];
    for (w, x, name) in want {
        let xe = x.dims()[x.rank() - 1];
        if w.rank() != 2 || w.dims() != [e, xe] {
            bail!(Shape, "expecting {name} of shape ({e}, {xe}), but got {}", w.shape());
        }
    }
    let b = o.in_proj_bias;
    Ok((
        project(query, wq, chunk(b, 0, 1)?.as_ref())?,
        project(key, wk, chunk(b, 1, 1)?.as_ref())?,
        project(value, wv, chunk(b, 2, 1)?.as_ref())?,
        None,
    ))
}

/// `F.linear(x, w, b)` computed as one 2-D product over `x`'s elements in their memory order
/// (a transposed batch-first input is not copied); the result has the same dim order in
/// memory as `x`.
pub(crate) fn project(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    if x.rank() <= 2 {
        return linear(x, w, b);
    }
    let lead = x.rank() - 1;
    let mut order: Vec<usize> = (0..lead).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(if x.dims()[d] == 1 { usize::MAX } else { x.stride()[d] }));
    let perm: Vec<isize> = order.iter().map(|&d| d as isize).chain([lead as isize]).collect();
    let xp = x.permute(&perm)?;
    let rows: usize = xp.dims()[..lead].iter().product();
    let y = linear(&xp.reshape([rows, x.dims()[lead]])?, w, b)?;
    let mut dims = xp.dims()[..lead].to_vec();
    dims.push(w.dims()[0]);
    let y = y.reshape(dims)?;
    let mut inv = vec![0isize; perm.len()];
    for (i, &d) in perm.iter().enumerate() {
        inv[d as usize] = i as isize;
    }
    y.permute(&inv)
}

/// q, k and v `(N, H, L, head_dim)` as views of a packed projection `(L, N, 3E)`.
fn packed_views(p: &Tensor, heads: usize) -> Result<[Tensor; 3]> {
    let e = p.dims()[2] / 3;
    let part = |i: usize| -> Result<Tensor> {
        p.narrow(-1, (i * e) as isize, e)?.unflatten(-1, [heads, e / heads])?.permute(&[1, 2, 0, 3])
    };
    Ok([part(0)?, part(1)?, part(2)?])
}

/// Self-attention on the packed projection `proj` `(L, N, 3E)` with the fused kernel, as one
/// autograd function of `proj`: its backward writes the three gradients straight into the
/// columns of one `(L, N, 3E)` gradient (laid out in memory as `proj` is), where separate
/// column slices would each need a zero-filled full-size gradient and a sum of three.
/// Returns `(N, H, L, head_dim)`.
fn packed_self_attention(
    proj: &Tensor,
    heads: usize,
    mask: Option<&Tensor>,
    is_causal: bool,
) -> Result<Tensor> {
    let (l, n, e3) = (proj.dims()[0], proj.dims()[1], proj.dims()[2]);
    let head_dim = e3 / 3 / heads;
    let mask = match mask {
        Some(m) => Some(m.broadcast_to(&[n, heads, l, l])?),
        None => None,
    };
    let f = PackedAttention { heads, scale: 1.0 / (head_dim as f64).sqrt(), is_causal, mask };
    Ok(autograd::apply(f, &[proj])?.remove(0))
}

struct PackedAttention {
    heads: usize,
    scale: f64,
    is_causal: bool,
    mask: Option<Tensor>,
}

impl Function for PackedAttention {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let [q, k, v] = packed_views(inputs[0], self.heads)?;
        let a = FlashAttention {
            q: &q,
            k: &k,
            v: &v,
            mask: self.mask.as_ref(),
            scale: self.scale,
            is_causal: self.is_causal,
        };
        let (out, lse) = a.forward()?;
        ctx.save_for_backward(&[inputs[0], &out, &lse]);
        Ok(vec![out])
    }

    fn backward(&self, ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let s = ctx.saved_tensors();
        let (proj, out, lse) = (&s[0], &s[1], &s[2]);
        let [q, k, v] = packed_views(proj, self.heads)?;
        if autograd::is_grad_enabled() {
            let (dq, dk, dv) =
                composed_grads(&q, &k, &v, &grads[0], self.mask.as_ref(), self.scale, self.is_causal)?;
            let back = |t: Tensor| t.permute(&[2, 0, 1, 3])?.flatten(2, 3);
            return Ok(vec![Some(Tensor::cat(&[back(dq)?, back(dk)?, back(dv)?], -1)?)]);
        }
        let g = empty_in_memory_order(proj)?;
        let [dq, dk, dv] = packed_views(&g, self.heads)?;
        let a = FlashAttention {
            q: &q,
            k: &k,
            v: &v,
            mask: self.mask.as_ref(),
            scale: self.scale,
            is_causal: self.is_causal,
        };
        a.backward_into(&grads[0], out, lse, &dq, &dk, &dv)?;
        Ok(vec![Some(g)])
    }

    fn name(&self) -> String {
        "ScaledDotProductFlashAttentionForCpuBackward0".into()
    }
}

/// An uninitialised tensor of `t`'s shape and dtype whose dims are laid out in memory in the
/// order of `t`'s strides (a transposed `t` gets a transposed result).
fn empty_in_memory_order(t: &Tensor) -> Result<Tensor> {
    let mut order: Vec<usize> = (0..t.rank()).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(if t.dims()[d] == 1 { usize::MAX } else { t.stride()[d] }));
    let dims: Vec<usize> = order.iter().map(|&d| t.dims()[d]).collect();
    let mut inv = vec![0isize; order.len()];
    for (i, &d) in order.iter().enumerate() {
        inv[d] = i as isize;
    }
    Tensor::empty(dims, t.dtype())?.permute(&inv)
}
