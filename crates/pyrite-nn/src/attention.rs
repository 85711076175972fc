//! `nn.MultiheadAttention` (PyTorch keeps it in `torch/nn/modules/activation.py`) and the
//! choice of attention kernels (`torch.nn.attention.sdpa_kernel`).
//!
//! ```
//! use pyrite::nn::{Module, MultiheadAttention, MultiheadAttentionOptions};
//! use pyrite::{DType, Tensor};
//! let opts = MultiheadAttentionOptions { batch_first: true, ..Default::default() };
//! let mha = MultiheadAttention::with_options(16, 4, opts)?;
//! let x = Tensor::randn([2, 5, 16], DType::F32)?; // (N, L, E)
//! // self-attention: query, key and value are one tensor, projected by one product
//! let (y, w) = mha.call((&x, &x, &x))?; // `mha(x, x, x)`
//! assert_eq!(y.dims(), &[2, 5, 16]);
//! assert_eq!(w.unwrap().dims(), &[2, 5, 5]); // averaged over heads
//! let names: Vec<String> = mha.state_dict()?.keys().map(String::from).collect();
//! assert_eq!(names, ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
//! // keyword arguments: `mha(x, x, x, need_weights=False)`
//! use pyrite::nn::attention::MhaCall;
//! let (_, w) = mha.call((&x, &x, &x, &MhaCall { need_weights: false, ..Default::default() }))?;
//! assert!(w.is_none());
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::call::{opt, t, typed_call, Args};
use crate::functional::{self as F, MhaOptions};
use crate::init;
use crate::linear::reset_uniform;
use crate::module::{py_bool, Module, ModuleBase};
use crate::parameter::Parameter;
use crate::value::Value;
use pyrite_core::{bail, DType, Result, Tensor};
use std::cell::Cell;

// ------------------------------------------------------------------------------ sdpa_kernel

/// The implementations of scaled dot-product attention (`torch.nn.attention.SDPBackend`):
/// the composed math path and the fused blockwise kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdpBackend {
    Math,
    FlashAttention,
}

thread_local! {
    /// Which backends this thread may use: bit 0 math, bit 1 fused.
    static ALLOWED: Cell<u8> = const { Cell::new(0b11) };
}

fn bit(b: SdpBackend) -> u8 {
    match b {
        SdpBackend::Math => 1,
        SdpBackend::FlashAttention => 2,
    }
}

/// Whether `F::scaled_dot_product_attention` may use `backend` on this thread.
pub fn backend_allowed(backend: SdpBackend) -> bool {
    ALLOWED.with(|a| a.get() & bit(backend) != 0)
}

/// Restores the previous backend choice when dropped (see [`sdpa_kernel`]).
pub struct SdpaKernelGuard {
    prev: u8,
}

impl Drop for SdpaKernelGuard {
    fn drop(&mut self) {
        ALLOWED.with(|a| a.set(self.prev));
    }
}

/// `with torch.nn.attention.sdpa_kernel(backends):` restricts scaled dot-product attention
/// on this thread to `backends` until the guard is dropped. With only
/// [`SdpBackend::FlashAttention`], a call the fused kernel cannot run (dropout, a mask that
/// requires grad) is an error; with only [`SdpBackend::Math`], every call is composed of
/// recorded ops.
///
/// ```
/// use pyrite::nn::attention::{sdpa_kernel, SdpBackend};
/// use pyrite::nn::functional::{self as F, SdpaOptions};
/// use pyrite::{DType, Tensor};
/// let q = Tensor::randn([1, 2, 4, 8], DType::F64)?;
/// let fused = F::scaled_dot_product_attention(&q, &q, &q, &SdpaOptions::new())?;
/// let math = {
///     let _only = sdpa_kernel(&[SdpBackend::Math]);
///     F::scaled_dot_product_attention(&q, &q, &q, &SdpaOptions::new())?
/// };
/// assert!(fused.allclose(&math, 1e-12, 1e-12, false)?);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn sdpa_kernel(backends: &[SdpBackend]) -> SdpaKernelGuard {
    let mask = backends.iter().fold(0, |m, &b| m | bit(b));
    SdpaKernelGuard { prev: ALLOWED.with(|a| a.replace(mask)) }
}

// ------------------------------------------------------------------------------ call arguments

/// A module call's arguments from a [`Value`]: positional (a tensor, or a tuple/list whose
/// last element may be a dict of keyword arguments) or keyword (a dict), by PyTorch's names.
pub(crate) struct CallArgs {
    pos: Vec<Value>,
    kw: Vec<(String, Value)>,
    op: &'static str,
}

impl CallArgs {
    pub(crate) fn new(input: Value, op: &'static str) -> CallArgs {
        let (mut pos, mut kw) = (Vec::new(), Vec::new());
        match input {
            Value::Dict(d) => kw = d,
            Value::Tuple(mut v) | Value::List(mut v) => {
                if let Some(Value::Dict(_)) = v.last()
                    && let Some(Value::Dict(d)) = v.pop()
                {
                    kw = d;
                }
                pos = v;
            }
            other => pos.push(other),
        }
        CallArgs { pos, kw, op }
    }

    fn get(&self, i: usize, name: &str) -> Option<&Value> {
        self.kw.iter().find(|(k, _)| k == name).map(|(_, v)| v).or_else(|| self.pos.get(i))
    }

    /// A required tensor argument.
    pub(crate) fn tensor(&self, i: usize, name: &str) -> Result<Tensor> {
        match self.get(i, name) {
            Some(Value::Tensor(t)) => Ok(t.clone()),
            Some(other) => {
                bail!(Value, "{}: argument '{name}' must be a Tensor, not {}", self.op, other.kind())
            }
            None => bail!(Value, "{}() missing required argument: '{name}'", self.op),
        }
    }

    /// An optional tensor argument (absent or `None`).
    pub(crate) fn opt_tensor(&self, i: usize, name: &str) -> Result<Option<Tensor>> {
        match self.get(i, name) {
            None | Some(Value::None) => Ok(None),
            Some(Value::Tensor(t)) => Ok(Some(t.clone())),
            Some(other) => {
                bail!(Value, "{}: argument '{name}' must be a Tensor or None, not {}", self.op, other.kind())
            }
        }
    }

    /// An optional bool argument (`None` when absent or `None`).
    pub(crate) fn opt_bool(&self, i: usize, name: &str) -> Result<Option<bool>> {
        match self.get(i, name) {
            None | Some(Value::None) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                bail!(Value, "{}: argument '{name}' must be a bool, not {}", self.op, other.kind())
            }
        }
    }
}

/// A tensor and an optional tensor as a module's tuple output (`(attn_output, weights)`).
pub(crate) fn pair(a: Tensor, b: Option<Tensor>) -> Value {
    Value::Tuple(vec![Value::Tensor(a), b.map_or(Value::None, Value::Tensor)])
}

// ------------------------------------------------------------------------------ the layer

/// The output projection of `nn.MultiheadAttention`: a `Linear` under the name PyTorch gives
/// it (`NonDynamicallyQuantizableLinear`), with `weight` `[out, in]` and an optional `bias`.
#[derive(crate::Module)]
pub struct NonDynamicallyQuantizableLinear {
    base: ModuleBase,
    pub weight: Parameter,
    pub bias: Option<Parameter>,
    pub in_features: usize,
    pub out_features: usize,
}

impl NonDynamicallyQuantizableLinear {
    /// Initialised as `nn.Linear`.
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Result<Self> {
        let w = Tensor::empty([out_features, in_features], DType::F32)?;
        let b = if bias { Some(Tensor::empty([out_features], DType::F32)?) } else { None };
        reset_uniform(&w, b.as_ref(), in_features)?;
        Ok(NonDynamicallyQuantizableLinear {
            base: ModuleBase::new(),
            weight: Parameter::new(w)?,
            bias: b.map(Parameter::new).transpose()?,
            in_features,
            out_features,
        })
    }
}

impl Module for NonDynamicallyQuantizableLinear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::linear(x, &self.weight, self.bias.as_deref())
    }

    fn extra_repr(&self) -> String {
        format!(
            "in_features={}, out_features={}, bias={}",
            self.in_features,
            self.out_features,
            py_bool(self.bias.is_some())
        )
    }
}

/// The keyword arguments of `nn.MultiheadAttention(embed_dim, num_heads, ...)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MultiheadAttentionOptions {
    /// Dropout on the attention weights, in training.
    pub dropout: f64,
    /// Biases of the input and output projections.
    pub bias: bool,
    /// Learned `bias_k` / `bias_v` appended to the keys and values.
    pub add_bias_kv: bool,
    /// A zero key and value appended.
    pub add_zero_attn: bool,
    /// Key and value feature sizes (default `embed_dim`).
    pub kdim: Option<usize>,
    pub vdim: Option<usize>,
    /// Inputs and outputs `(N, L, E)` instead of `(L, N, E)`.
    pub batch_first: bool,
}

impl Default for MultiheadAttentionOptions {
    fn default() -> Self {
        MultiheadAttentionOptions {
            dropout: 0.0,
            bias: true,
            add_bias_kv: false,
            add_zero_attn: false,
            kdim: None,
            vdim: None,
            batch_first: false,
        }
    }
}

/// The arguments of `MultiheadAttention.forward` after query, key and value, with PyTorch's
/// defaults (`need_weights` and `average_attn_weights` true). Masks: `key_padding_mask`
/// `(N, S)`, `attn_mask` `(L, S)` or `(N * num_heads, L, S)`; bool (`true`: ignore) or float
/// (added to the scores). `is_causal` is a hint that `attn_mask` is the causal mask.
#[derive(Clone, Copy, Debug)]
pub struct MhaCall<'a> {
    pub key_padding_mask: Option<&'a Tensor>,
    pub need_weights: bool,
    pub attn_mask: Option<&'a Tensor>,
    pub average_attn_weights: bool,
    pub is_causal: bool,
}

impl Default for MhaCall<'_> {
    fn default() -> Self {
        MhaCall {
            key_padding_mask: None,
            need_weights: true,
            attn_mask: None,
            average_attn_weights: true,
            is_causal: false,
        }
    }
}

/// `nn.MultiheadAttention(embed_dim, num_heads, dropout=0, bias=True, add_bias_kv=False,
/// add_zero_attn=False, kdim=None, vdim=None, batch_first=False)`.
///
/// Parameters, in PyTorch's order and with its names: `in_proj_weight` `[3E, E]` (or
/// `q_proj_weight` `[E, E]`, `k_proj_weight` `[E, kdim]`, `v_proj_weight` `[E, vdim]` when
/// `kdim`/`vdim` differ from `embed_dim`), `in_proj_bias` `[3E]`, `bias_k`, `bias_v`
/// `[1, 1, E]`, then `out_proj.weight`, `out_proj.bias`. Initialised as PyTorch does:
/// Xavier-uniform input projections, zero biases, `out_proj` as a `Linear` with its bias
/// zeroed, Xavier-normal `bias_k`/`bias_v`.
///
/// Call it with `call((&q, &k, &v))` or `call((&q, &k, &v, &MhaCall { .. }))` (hooks run);
/// behind `dyn Module`, with `call_value` on a tuple `(query, key, value, key_padding_mask, need_weights, attn_mask,
/// average_attn_weights, is_causal)` (trailing arguments may be left out, or given in a
/// dict by name); the output is the tuple `(attn_output, attn_weights or None)`.
#[derive(crate::Module)]
pub struct MultiheadAttention {
    base: ModuleBase,
    pub in_proj_weight: Option<Parameter>,
    pub q_proj_weight: Option<Parameter>,
    pub k_proj_weight: Option<Parameter>,
    pub v_proj_weight: Option<Parameter>,
    pub in_proj_bias: Option<Parameter>,
    pub bias_k: Option<Parameter>,
    pub bias_v: Option<Parameter>,
    pub out_proj: NonDynamicallyQuantizableLinear,
    pub embed_dim: usize,
    pub num_heads: usize,
    #[module(skip)]
    pub opts: MultiheadAttentionOptions,
}

impl MultiheadAttention {
    /// With PyTorch's defaults.
    pub fn new(embed_dim: usize, num_heads: usize) -> Result<MultiheadAttention> {
        MultiheadAttention::with_options(embed_dim, num_heads, MultiheadAttentionOptions::default())
    }

    pub fn with_options(
        embed_dim: usize,
        num_heads: usize,
        opts: MultiheadAttentionOptions,
    ) -> Result<MultiheadAttention> {
        if embed_dim == 0 || num_heads == 0 {
            bail!(
                Value,
                "embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and num_heads={num_heads} instead"
            );
        }
        if !embed_dim.is_multiple_of(num_heads) {
            bail!(Value, "embed_dim must be divisible by num_heads");
        }
        if !(0.0..=1.0).contains(&opts.dropout) {
            bail!(Value, "dropout probability has to be between 0 and 1, but got {}", opts.dropout);
        }
        let e = embed_dim;
        let (kdim, vdim) = (opts.kdim.unwrap_or(e), opts.vdim.unwrap_or(e));
        let xavier = |shape: [usize; 2]| -> Result<Parameter> {
            let t = Tensor::empty(shape, DType::F32)?;
            init::xavier_uniform_(&t, 1.0, None)?;
            Parameter::new(t)
        };
        let (in_proj_weight, q, k, v) = if kdim == e && vdim == e {
            (Some(xavier([3 * e, e])?), None, None, None)
        } else {
            (None, Some(xavier([e, e])?), Some(xavier([e, kdim])?), Some(xavier([e, vdim])?))
        };
        let in_proj_bias =
            if opts.bias { Some(Parameter::new(Tensor::zeros([3 * e], DType::F32)?)?) } else { None };
        let out_proj = NonDynamicallyQuantizableLinear::new(e, e, opts.bias)?;
        if let Some(b) = &out_proj.bias {
            init::zeros_(b)?;
        }
        let bias_kv = || -> Result<Parameter> {
            let t = Tensor::empty([1, 1, e], DType::F32)?;
            init::xavier_normal_(&t, 1.0, None)?;
            Parameter::new(t)
        };
        let (bias_k, bias_v) =
            if opts.add_bias_kv { (Some(bias_kv()?), Some(bias_kv()?)) } else { (None, None) };
        Ok(MultiheadAttention {
            base: ModuleBase::new(),
            in_proj_weight,
            q_proj_weight: q,
            k_proj_weight: k,
            v_proj_weight: v,
            in_proj_bias,
            bias_k,
            bias_v,
            out_proj,
            embed_dim,
            num_heads,
            opts,
        })
    }

    /// `head_dim = embed_dim / num_heads`.
    pub fn head_dim(&self) -> usize {
        self.embed_dim / self.num_heads
    }

    /// `forward(query, key, value, ...)`: `(attn_output, attn_weights)`, the weights only
    /// with `need_weights`. Inputs `(L, N, E)` (`(N, L, E)` with `batch_first`) or unbatched
    /// `(L, E)`. Pass the same tensor as query, key and value for self-attention (one fused
    /// projection).
    pub fn forward_with(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        call: &MhaCall<'_>,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let batched = query.rank() == 3;
        let (q, k, v) = if self.opts.batch_first && batched {
            let t = |x: &Tensor| x.transpose(0, 1);
            if key.is_same(value) {
                if query.is_same(key) {
                    let x = t(query)?;
                    (x.clone(), x.clone(), x)
                } else {
                    let kx = t(key)?;
                    (t(query)?, kx.clone(), kx)
                }
            } else {
                (t(query)?, t(key)?, t(value)?)
            }
        } else {
            (query.clone(), key.clone(), value.clone())
        };
        let separate = self.in_proj_weight.is_none();
        let opts = MhaOptions {
            embed_dim_to_check: self.embed_dim,
            num_heads: self.num_heads,
            in_proj_weight: self.in_proj_weight.as_deref(),
            in_proj_bias: self.in_proj_bias.as_deref(),
            bias_k: self.bias_k.as_deref(),
            bias_v: self.bias_v.as_deref(),
            add_zero_attn: self.opts.add_zero_attn,
            dropout_p: self.opts.dropout,
            out_proj_weight: Some(&self.out_proj.weight),
            out_proj_bias: self.out_proj.bias.as_deref(),
            training: self.is_training(),
            key_padding_mask: call.key_padding_mask,
            need_weights: call.need_weights,
            attn_mask: call.attn_mask,
            use_separate_proj_weight: separate,
            q_proj_weight: self.q_proj_weight.as_deref(),
            k_proj_weight: self.k_proj_weight.as_deref(),
            v_proj_weight: self.v_proj_weight.as_deref(),
            static_k: None,
            static_v: None,
            average_attn_weights: call.average_attn_weights,
            is_causal: call.is_causal,
        };
        let (out, w) = F::multi_head_attention_forward(&q, &k, &v, &opts)?;
        let out = if self.opts.batch_first && batched { out.transpose(0, 1)? } else { out };
        Ok((out, w))
    }
}

fn mha_value(q: &Tensor, k: &Tensor, v: &Tensor, call: &MhaCall<'_>) -> Value {
    Value::Tuple(vec![
        t(q),
        t(k),
        t(v),
        opt(call.key_padding_mask),
        Value::Bool(call.need_weights),
        opt(call.attn_mask),
        Value::Bool(call.average_attn_weights),
        Value::Bool(call.is_causal),
    ])
}

/// `mha(query, key, value)`: `(attn_output, attn_weights)`, with [`MhaCall`]'s defaults.
impl Args<MultiheadAttention> for (&Tensor, &Tensor, &Tensor) {
    type Output = (Tensor, Option<Tensor>);
    fn into_value(self) -> Value {
        mha_value(self.0, self.1, self.2, &MhaCall::default())
    }
    fn forward(self, m: &MultiheadAttention) -> Result<Self::Output> {
        m.forward_with(self.0, self.1, self.2, &MhaCall::default())
    }
}

/// `mha(query, key, value, key_padding_mask=.., need_weights=.., attn_mask=..,
/// average_attn_weights=.., is_causal=..)`.
impl Args<MultiheadAttention> for (&Tensor, &Tensor, &Tensor, &MhaCall<'_>) {
    type Output = (Tensor, Option<Tensor>);
    fn into_value(self) -> Value {
        mha_value(self.0, self.1, self.2, self.3)
    }
    fn forward(self, m: &MultiheadAttention) -> Result<Self::Output> {
        m.forward_with(self.0, self.1, self.2, self.3)
    }
}

typed_call!(MultiheadAttention);

impl Module for MultiheadAttention {
    fn forward_value(&self, input: Value) -> Result<Value> {
        let a = CallArgs::new(input, "MultiheadAttention.forward");
        let (q, k, v) = (a.tensor(0, "query")?, a.tensor(1, "key")?, a.tensor(2, "value")?);
        let kpm = a.opt_tensor(3, "key_padding_mask")?;
        let mask = a.opt_tensor(5, "attn_mask")?;
        let call = MhaCall {
            key_padding_mask: kpm.as_ref(),
            need_weights: a.opt_bool(4, "need_weights")?.unwrap_or(true),
            attn_mask: mask.as_ref(),
            average_attn_weights: a.opt_bool(6, "average_attn_weights")?.unwrap_or(true),
            is_causal: a.opt_bool(7, "is_causal")?.unwrap_or(false),
        };
        let (out, w) = self.forward_with(&q, &k, &v, &call)?;
        Ok(pair(out, w))
    }
}
