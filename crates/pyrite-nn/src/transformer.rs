//! The Transformer (PyTorch's `torch/nn/modules/transformer.py`): `TransformerEncoderLayer`,
//! `TransformerDecoderLayer`, `TransformerEncoder`, `TransformerDecoder` and `Transformer`,
//! with PyTorch's options, defaults, parameter names and masks.
//!
//! The layers take several inputs: each `call` takes them as a tuple, the masks (PyTorch's
//! keyword arguments) as one struct: `encoder.call((&src, &EncoderMasks { .. }))`,
//! `decoder.call((&tgt, &memory))` (see [`crate::call`]). Hooks see the arguments as a tuple
//! in PyTorch's order, which is also what `call_value` takes behind `dyn Module`.
//!
//! ```
//! use pyrite::nn::{Module, Transformer, TransformerEncoder, TransformerEncoderLayer, TransformerLayerOptions};
//! use pyrite::nn::transformer::EncoderMasks;
//! use pyrite::{DType, Tensor};
//! let opts = TransformerLayerOptions { dim_feedforward: 32, dropout: 0.0, batch_first: true, ..Default::default() };
//! let layer = TransformerEncoderLayer::with_options(16, 4, opts)?;
//! let encoder = TransformerEncoder::new(layer, 2, None)?;
//! let x = Tensor::randn([3, 7, 16], DType::F32)?; // (N, L, d_model)
//! let mask = Transformer::generate_square_subsequent_mask(7)?;
//! let y = encoder.call((&x, &EncoderMasks { src_mask: Some(&mask), ..Default::default() }))?;
//! assert_eq!(y.dims(), &[3, 7, 16]);
//! assert_eq!(encoder.state_dict()?.keys().next().unwrap(), "layers.0.self_attn.in_proj_weight");
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::attention::{CallArgs, MhaCall, MultiheadAttention, MultiheadAttentionOptions};
use crate::call::{opt, typed_call, Args};
use crate::container::ModuleList;
use crate::dropout::Dropout;
use crate::functional::{self as F, GeluApproximate};
use crate::init;
use crate::linear::Linear;
use crate::module::{Module, ModuleBase};
use crate::normalization::LayerNorm;
use crate::value::Value;
use pyrite_core::{bail, DType, Result, Tensor};
use std::sync::Arc;

/// A user's activation function, shared between the layer copies of a stack.
pub type ActivationFn = Arc<dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync>;

/// The feed-forward activation (`activation="relu"`, `"gelu"`, or a function).
#[derive(Clone, Default)]
pub enum Activation {
    #[default]
    Relu,
    Gelu,
    Custom(ActivationFn),
}

impl Activation {
    /// A user function as the activation.
    pub fn custom(f: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static) -> Activation {
        Activation::Custom(Arc::new(f))
    }

    /// `"relu"` or `"gelu"`; anything else is PyTorch's error.
    pub fn from_name(name: &str) -> Result<Activation> {
        match name {
            "relu" => Ok(Activation::Relu),
            "gelu" => Ok(Activation::Gelu),
            other => bail!(Value, "activation should be relu/gelu, not {other}"),
        }
    }

    pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Activation::Relu => F::relu(x),
            Activation::Gelu => F::gelu(x, GeluApproximate::None),
            Activation::Custom(f) => f(x),
        }
    }
}

impl std::fmt::Debug for Activation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Activation::Relu => write!(f, "Relu"),
            Activation::Gelu => write!(f, "Gelu"),
            Activation::Custom(_) => write!(f, "Custom(..)"),
        }
    }
}

/// The keyword arguments of `nn.TransformerEncoderLayer(d_model, nhead, ...)` and
/// `nn.TransformerDecoderLayer`, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct TransformerLayerOptions {
    pub dim_feedforward: usize,
    pub dropout: f64,
    pub activation: Activation,
    pub layer_norm_eps: f64,
    /// Inputs `(N, L, d_model)` instead of `(L, N, d_model)`.
    pub batch_first: bool,
    /// Pre-LN (`x + f(norm(x))`) instead of post-LN (`norm(x + f(x))`).
    pub norm_first: bool,
    /// Biases in the linear layers and the layer norms.
    pub bias: bool,
}

impl Default for TransformerLayerOptions {
    fn default() -> Self {
        TransformerLayerOptions {
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: Activation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
        }
    }
}

/// The masks of an encoder (layer) call. Bool masks mark with `true` what to ignore; float
/// masks are added to the scores. `src_mask` is `(L, L)` or `(N * nhead, L, L)`,
/// `src_key_padding_mask` `(N, L)`. `is_causal` is a hint that `src_mask` is causal (`None`:
/// a layer takes it as `false`; an encoder checks the mask).
#[derive(Clone, Copy, Debug, Default)]
pub struct EncoderMasks<'a> {
    pub src_mask: Option<&'a Tensor>,
    pub src_key_padding_mask: Option<&'a Tensor>,
    pub is_causal: Option<bool>,
}

/// The masks of a decoder (layer) call: self-attention masks `tgt_*` over the target,
/// cross-attention masks `memory_*` over the memory (`memory_mask` `(T, S)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct DecoderMasks<'a> {
    pub tgt_mask: Option<&'a Tensor>,
    pub memory_mask: Option<&'a Tensor>,
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    pub memory_key_padding_mask: Option<&'a Tensor>,
    pub tgt_is_causal: Option<bool>,
    pub memory_is_causal: bool,
}

fn attention(d_model: usize, nhead: usize, o: &TransformerLayerOptions) -> Result<MultiheadAttention> {
    let mo = MultiheadAttentionOptions {
        dropout: o.dropout,
        bias: o.bias,
        batch_first: o.batch_first,
        ..Default::default()
    };
    MultiheadAttention::with_options(d_model, nhead, mo)
}

fn layer_norm(d_model: usize, o: &TransformerLayerOptions) -> Result<LayerNorm> {
    LayerNorm::with_options(&[d_model], o.layer_norm_eps, true, o.bias)
}

fn linear(i: usize, out: usize, o: &TransformerLayerOptions) -> Result<Linear> {
    Linear::with_options(i, out, o.bias, DType::F32)
}

/// A module's copy: the same construction, then its state_dict, training mode and
/// `requires_grad` flags (PyTorch's `copy.deepcopy` of a layer).
fn copy_state<M: Module>(from: &M, to: &M) -> Result<()> {
    to.load_state_dict(&from.state_dict()?, true)?;
    for ((_, a), (_, b)) in from.named_parameters().iter().zip(to.named_parameters()) {
        b.requires_grad_(a.requires_grad())?;
    }
    to.set_training(from.is_training());
    Ok(())
}

fn opt_bool_value(b: Option<bool>) -> Value {
    b.map_or(Value::None, Value::Bool)
}

/// `nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
/// activation=relu, layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True)`:
/// self-attention then a feed-forward block, each with a residual connection and a layer
/// norm (after the sum, or before the block with `norm_first`).
#[derive(crate::Module)]
pub struct TransformerEncoderLayer {
    base: ModuleBase,
    pub self_attn: MultiheadAttention,
    pub linear1: Linear,
    pub dropout: Dropout,
    pub linear2: Linear,
    pub norm1: LayerNorm,
    pub norm2: LayerNorm,
    pub dropout1: Dropout,
    pub dropout2: Dropout,
    pub d_model: usize,
    pub nhead: usize,
    #[module(skip)]
    pub opts: TransformerLayerOptions,
}

impl TransformerEncoderLayer {
    /// With PyTorch's defaults.
    pub fn new(d_model: usize, nhead: usize) -> Result<TransformerEncoderLayer> {
        TransformerEncoderLayer::with_options(d_model, nhead, TransformerLayerOptions::default())
    }

    pub fn with_options(
        d_model: usize,
        nhead: usize,
        opts: TransformerLayerOptions,
    ) -> Result<TransformerEncoderLayer> {
        Ok(TransformerEncoderLayer {
            base: ModuleBase::new(),
            self_attn: attention(d_model, nhead, &opts)?,
            linear1: linear(d_model, opts.dim_feedforward, &opts)?,
            dropout: Dropout::new(opts.dropout)?,
            linear2: linear(opts.dim_feedforward, d_model, &opts)?,
            norm1: layer_norm(d_model, &opts)?,
            norm2: layer_norm(d_model, &opts)?,
            dropout1: Dropout::new(opts.dropout)?,
            dropout2: Dropout::new(opts.dropout)?,
            d_model,
            nhead,
            opts,
        })
    }

    /// An independent copy with the same parameters, options and mode (`copy.deepcopy`).
    pub fn deep_copy(&self) -> Result<TransformerEncoderLayer> {
        let c = TransformerEncoderLayer::with_options(self.d_model, self.nhead, self.opts.clone())?;
        copy_state(self, &c)?;
        Ok(c)
    }

    /// `forward(src, src_mask, src_key_padding_mask, is_causal)`.
    pub fn forward_with(&self, src: &Tensor, masks: &EncoderMasks<'_>) -> Result<Tensor> {
        let dtype = src.dtype();
        let kpm = masks
            .src_key_padding_mask
            .map(|m| F::canonical_mask(m, "src_key_padding_mask", dtype))
            .transpose()?;
        let mask = masks.src_mask.map(|m| F::canonical_mask(m, "src_mask", dtype)).transpose()?;
        let sa = |x: &Tensor| -> Result<Tensor> {
            let call = MhaCall {
                key_padding_mask: kpm.as_ref(),
                need_weights: false,
                attn_mask: mask.as_ref(),
                average_attn_weights: true,
                is_causal: masks.is_causal.unwrap_or(false),
            };
            self.dropout1.call(&self.self_attn.call((x, x, x, &call))?.0)
        };
        let ff = |x: &Tensor| -> Result<Tensor> {
            let h = self.opts.activation.apply(&self.linear1.call(x)?)?;
            self.dropout2.call(&self.linear2.call(&self.dropout.call(&h)?)?)
        };
        if self.opts.norm_first {
            let x = src.add(&sa(&self.norm1.call(src)?)?)?;
            x.add(&ff(&self.norm2.call(&x)?)?)
        } else {
            let x = self.norm1.call(&src.add(&sa(src)?)?)?;
            self.norm2.call(&x.add(&ff(&x)?)?)
        }
    }
}

fn encoder_args(src: &Tensor, m: &EncoderMasks<'_>) -> Value {
    Value::Tuple(vec![
        Value::Tensor(src.clone()),
        opt(m.src_mask),
        opt(m.src_key_padding_mask),
        opt_bool_value(m.is_causal),
    ])
}

impl Module for TransformerEncoderLayer {
    /// `(src, src_mask, src_key_padding_mask, is_causal)`, or just `src`.
    fn forward_value(&self, input: Value) -> Result<Value> {
        let a = CallArgs::new(input, "TransformerEncoderLayer.forward");
        let src = a.tensor(0, "src")?;
        let (mask, kpm) = (a.opt_tensor(1, "src_mask")?, a.opt_tensor(2, "src_key_padding_mask")?);
        let masks = EncoderMasks {
            src_mask: mask.as_ref(),
            src_key_padding_mask: kpm.as_ref(),
            is_causal: a.opt_bool(3, "is_causal")?,
        };
        Ok(Value::Tensor(self.forward_with(&src, &masks)?))
    }
}

/// `nn.TransformerDecoderLayer(d_model, nhead, ...)` (options as the encoder layer's):
/// self-attention over the target, cross-attention over the memory, then the feed-forward
/// block, each with a residual connection and a layer norm.
#[derive(crate::Module)]
pub struct TransformerDecoderLayer {
    base: ModuleBase,
    pub self_attn: MultiheadAttention,
    pub multihead_attn: MultiheadAttention,
    pub linear1: Linear,
    pub dropout: Dropout,
    pub linear2: Linear,
    pub norm1: LayerNorm,
    pub norm2: LayerNorm,
    pub norm3: LayerNorm,
    pub dropout1: Dropout,
    pub dropout2: Dropout,
    pub dropout3: Dropout,
    pub d_model: usize,
    pub nhead: usize,
    #[module(skip)]
    pub opts: TransformerLayerOptions,
}

impl TransformerDecoderLayer {
    /// With PyTorch's defaults.
    pub fn new(d_model: usize, nhead: usize) -> Result<TransformerDecoderLayer> {
        TransformerDecoderLayer::with_options(d_model, nhead, TransformerLayerOptions::default())
    }

    pub fn with_options(
        d_model: usize,
        nhead: usize,
        opts: TransformerLayerOptions,
    ) -> Result<TransformerDecoderLayer> {
        Ok(TransformerDecoderLayer {
            base: ModuleBase::new(),
            self_attn: attention(d_model, nhead, &opts)?,
            multihead_attn: attention(d_model, nhead, &opts)?,
            linear1: linear(d_model, opts.dim_feedforward, &opts)?,
            dropout: Dropout::new(opts.dropout)?,
            linear2: linear(opts.dim_feedforward, d_model, &opts)?,
            norm1: layer_norm(d_model, &opts)?,
            norm2: layer_norm(d_model, &opts)?,
            norm3: layer_norm(d_model, &opts)?,
            dropout1: Dropout::new(opts.dropout)?,
            dropout2: Dropout::new(opts.dropout)?,
            dropout3: Dropout::new(opts.dropout)?,
            d_model,
            nhead,
            opts,
        })
    }

    /// An independent copy with the same parameters, options and mode (`copy.deepcopy`).
    pub fn deep_copy(&self) -> Result<TransformerDecoderLayer> {
        let c = TransformerDecoderLayer::with_options(self.d_model, self.nhead, self.opts.clone())?;
        copy_state(self, &c)?;
        Ok(c)
    }

    /// `forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
    /// memory_key_padding_mask, tgt_is_causal, memory_is_causal)`.
    pub fn forward_with(&self, tgt: &Tensor, memory: &Tensor, m: &DecoderMasks<'_>) -> Result<Tensor> {
        let sa = |x: &Tensor| -> Result<Tensor> {
            let call = MhaCall {
                key_padding_mask: m.tgt_key_padding_mask,
                need_weights: false,
                attn_mask: m.tgt_mask,
                average_attn_weights: true,
                is_causal: m.tgt_is_causal.unwrap_or(false),
            };
            self.dropout1.call(&self.self_attn.call((x, x, x, &call))?.0)
        };
        let mha = |x: &Tensor| -> Result<Tensor> {
            let call = MhaCall {
                key_padding_mask: m.memory_key_padding_mask,
                need_weights: false,
                attn_mask: m.memory_mask,
                average_attn_weights: true,
                is_causal: m.memory_is_causal,
            };
            self.dropout2.call(&self.multihead_attn.call((x, memory, memory, &call))?.0)
        };
        let ff = |x: &Tensor| -> Result<Tensor> {
            let h = self.opts.activation.apply(&self.linear1.call(x)?)?;
            self.dropout3.call(&self.linear2.call(&self.dropout.call(&h)?)?)
        };
        if self.opts.norm_first {
            let x = tgt.add(&sa(&self.norm1.call(tgt)?)?)?;
            let x = x.add(&mha(&self.norm2.call(&x)?)?)?;
            x.add(&ff(&self.norm3.call(&x)?)?)
        } else {
            let x = self.norm1.call(&tgt.add(&sa(tgt)?)?)?;
            let x = self.norm2.call(&x.add(&mha(&x)?)?)?;
            self.norm3.call(&x.add(&ff(&x)?)?)
        }
    }
}

fn decoder_args(tgt: &Tensor, memory: &Tensor, m: &DecoderMasks<'_>) -> Value {
    Value::Tuple(vec![
        Value::Tensor(tgt.clone()),
        Value::Tensor(memory.clone()),
        opt(m.tgt_mask),
        opt(m.memory_mask),
        opt(m.tgt_key_padding_mask),
        opt(m.memory_key_padding_mask),
        opt_bool_value(m.tgt_is_causal),
        Value::Bool(m.memory_is_causal),
    ])
}

/// The decoder masks from a call's arguments, starting at position `at` (2 for a decoder
/// layer's `(tgt, memory, ...)`).
fn decoder_masks(a: &CallArgs, at: usize) -> Result<[Option<Tensor>; 4]> {
    Ok([
        a.opt_tensor(at, "tgt_mask")?,
        a.opt_tensor(at + 1, "memory_mask")?,
        a.opt_tensor(at + 2, "tgt_key_padding_mask")?,
        a.opt_tensor(at + 3, "memory_key_padding_mask")?,
    ])
}

impl Module for TransformerDecoderLayer {
    /// `(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
    /// tgt_is_causal, memory_is_causal)`.
    fn forward_value(&self, input: Value) -> Result<Value> {
        let a = CallArgs::new(input, "TransformerDecoderLayer.forward");
        let (tgt, memory) = (a.tensor(0, "tgt")?, a.tensor(1, "memory")?);
        let [tm, mm, tk, mk] = decoder_masks(&a, 2)?;
        let masks = DecoderMasks {
            tgt_mask: tm.as_ref(),
            memory_mask: mm.as_ref(),
            tgt_key_padding_mask: tk.as_ref(),
            memory_key_padding_mask: mk.as_ref(),
            tgt_is_causal: a.opt_bool(6, "tgt_is_causal")?,
            memory_is_causal: a.opt_bool(7, "memory_is_causal")?.unwrap_or(false),
        };
        Ok(Value::Tensor(self.forward_with(&tgt, &memory, &masks)?))
    }
}

/// PyTorch's `_detect_is_causal_mask`: an explicit hint wins; without one, a mask equal to
/// [`Transformer::generate_square_subsequent_mask`] of the sequence length is causal.
fn detect_is_causal(mask: Option<&Tensor>, is_causal: Option<bool>, size: usize) -> Result<bool> {
    match (is_causal, mask) {
        (Some(c), _) => Ok(c),
        (None, Some(m)) if m.dims() == [size, size] => {
            let causal = Transformer::generate_square_subsequent_mask_dtype(size, m.dtype())?;
            Ok(m.eq(&causal)?.all()?.item::<bool>()?)
        }
        _ => Ok(false),
    }
}

/// The sequence length of a `(L, d)`, `(L, N, d)` or `(N, L, d)` input.
fn seq_len(x: &Tensor, batch_first: bool) -> usize {
    match x.rank() {
        2 => x.dims()[0],
        r if r >= 3 => x.dims()[usize::from(batch_first)],
        _ => 0,
    }
}

/// `nn.TransformerEncoder(encoder_layer, num_layers, norm=None)`: `num_layers` independent
/// copies of `encoder_layer` in a `ModuleList` named `layers`, then the optional final norm.
#[derive(crate::Module)]
pub struct TransformerEncoder {
    base: ModuleBase,
    pub layers: ModuleList,
    pub norm: Option<LayerNorm>,
    pub num_layers: usize,
}

impl TransformerEncoder {
    pub fn new(
        encoder_layer: TransformerEncoderLayer,
        num_layers: usize,
        norm: Option<LayerNorm>,
    ) -> Result<TransformerEncoder> {
        let mut layers = ModuleList::new();
        for _ in 0..num_layers {
            layers.push(encoder_layer.deep_copy()?);
        }
        Ok(TransformerEncoder { base: ModuleBase::new(), layers, norm, num_layers })
    }

    /// `forward(src, mask, src_key_padding_mask, is_causal)`: masks as for the layers
    /// (`src_mask` is the encoder's `mask`); with `is_causal: None` a mask equal to the
    /// causal mask is used as causal.
    pub fn forward_with(&self, src: &Tensor, masks: &EncoderMasks<'_>) -> Result<Tensor> {
        let dtype = src.dtype();
        let kpm = masks
            .src_key_padding_mask
            .map(|m| F::canonical_mask(m, "src_key_padding_mask", dtype))
            .transpose()?;
        let mask = masks.src_mask.map(|m| F::canonical_mask(m, "mask", dtype)).transpose()?;
        let first = self.layers.get_as::<TransformerEncoderLayer>(0);
        let batch_first = first.is_some_and(|l| l.opts.batch_first);
        let is_causal = detect_is_causal(mask.as_ref(), masks.is_causal, seq_len(src, batch_first))?;
        let m = EncoderMasks {
            src_mask: mask.as_ref(),
            src_key_padding_mask: kpm.as_ref(),
            is_causal: Some(is_causal),
        };
        let mut x = src.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            x = match self.layers.get_as::<TransformerEncoderLayer>(i as isize) {
                Some(l) => l.call((&x, &m))?,
                None => layer.call_value(encoder_args(&x, &m))?.into_tensor()?,
            };
        }
        match &self.norm {
            Some(n) => n.call(&x),
            None => Ok(x),
        }
    }
}

impl Module for TransformerEncoder {
    /// `(src, mask, src_key_padding_mask, is_causal)`, or just `src`.
    fn forward_value(&self, input: Value) -> Result<Value> {
        let a = CallArgs::new(input, "TransformerEncoder.forward");
        let src = a.tensor(0, "src")?;
        let (mask, kpm) = (a.opt_tensor(1, "mask")?, a.opt_tensor(2, "src_key_padding_mask")?);
        let masks = EncoderMasks {
            src_mask: mask.as_ref(),
            src_key_padding_mask: kpm.as_ref(),
            is_causal: a.opt_bool(3, "is_causal")?,
        };
        Ok(Value::Tensor(self.forward_with(&src, &masks)?))
    }
}

/// `nn.TransformerDecoder(decoder_layer, num_layers, norm=None)`: `num_layers` independent
/// copies of `decoder_layer` (`layers`), then the optional final norm.
#[derive(crate::Module)]
pub struct TransformerDecoder {
    base: ModuleBase,
    pub layers: ModuleList,
    pub norm: Option<LayerNorm>,
    pub num_layers: usize,
}

impl TransformerDecoder {
    pub fn new(
        decoder_layer: TransformerDecoderLayer,
        num_layers: usize,
        norm: Option<LayerNorm>,
    ) -> Result<TransformerDecoder> {
        let mut layers = ModuleList::new();
        for _ in 0..num_layers {
            layers.push(decoder_layer.deep_copy()?);
        }
        Ok(TransformerDecoder { base: ModuleBase::new(), layers, norm, num_layers })
    }

    /// `forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
    /// memory_key_padding_mask, tgt_is_causal, memory_is_causal)`; with `tgt_is_causal:
    /// None` a `tgt_mask` equal to the causal mask is used as causal.
    pub fn forward_with(&self, tgt: &Tensor, memory: &Tensor, masks: &DecoderMasks<'_>) -> Result<Tensor> {
        let first = self.layers.get_as::<TransformerDecoderLayer>(0);
        let batch_first = first.is_some_and(|l| l.opts.batch_first);
        let tgt_is_causal = detect_is_causal(masks.tgt_mask, masks.tgt_is_causal, seq_len(tgt, batch_first))?;
        let m = DecoderMasks { tgt_is_causal: Some(tgt_is_causal), ..*masks };
        let mut x = tgt.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            x = match self.layers.get_as::<TransformerDecoderLayer>(i as isize) {
                Some(l) => l.call((&x, memory, &m))?,
                None => layer.call_value(decoder_args(&x, memory, &m))?.into_tensor()?,
            };
        }
        match &self.norm {
            Some(n) => n.call(&x),
            None => Ok(x),
        }
    }
}

impl Module for TransformerDecoder {
    /// `(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
    /// tgt_is_causal, memory_is_causal)`.
    fn forward_value(&self, input: Value) -> Result<Value> {
        let a = CallArgs::new(input, "TransformerDecoder.forward");
        let (tgt, memory) = (a.tensor(0, "tgt")?, a.tensor(1, "memory")?);
        let [tm, mm, tk, mk] = decoder_masks(&a, 2)?;
        let masks = DecoderMasks {
            tgt_mask: tm.as_ref(),
            memory_mask: mm.as_ref(),
            tgt_key_padding_mask: tk.as_ref(),
            memory_key_padding_mask: mk.as_ref(),
            tgt_is_causal: a.opt_bool(6, "tgt_is_causal")?,
            memory_is_causal: a.opt_bool(7, "memory_is_causal")?.unwrap_or(false),
        };
        Ok(Value::Tensor(self.forward_with(&tgt, &memory, &masks)?))
    }
}

/// The keyword arguments of `nn.Transformer(...)` (PyTorch's defaults). `custom_encoder` and
/// `custom_decoder` are not options here: build the encoder and decoder yourself instead.
#[derive(Clone, Debug)]
pub struct TransformerOptions {
    pub d_model: usize,
    pub nhead: usize,
    pub num_encoder_layers: usize,
    pub num_decoder_layers: usize,
    pub dim_feedforward: usize,
    pub dropout: f64,
    pub activation: Activation,
    pub layer_norm_eps: f64,
    pub batch_first: bool,
    pub norm_first: bool,
    pub bias: bool,
}

impl Default for TransformerOptions {
    fn default() -> Self {
        TransformerOptions {
            d_model: 512,
            nhead: 8,
            num_encoder_layers: 6,
            num_decoder_layers: 6,
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: Activation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
        }
    }
}

/// The masks of a [`Transformer`] call (see [`EncoderMasks`] and [`DecoderMasks`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct TransformerMasks<'a> {
    pub src_mask: Option<&'a Tensor>,
    pub tgt_mask: Option<&'a Tensor>,
    pub memory_mask: Option<&'a Tensor>,
    pub src_key_padding_mask: Option<&'a Tensor>,
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    pub memory_key_padding_mask: Option<&'a Tensor>,
    pub src_is_causal: Option<bool>,
    pub tgt_is_causal: Option<bool>,
    pub memory_is_causal: bool,
}

/// `nn.Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, ...)`:
/// an encoder and a decoder, each with a final layer norm; every parameter of more than one
/// dim re-initialised with Xavier-uniform, as PyTorch does.
#[derive(crate::Module)]
pub struct Transformer {
    base: ModuleBase,
    pub encoder: TransformerEncoder,
    pub decoder: TransformerDecoder,
    pub d_model: usize,
    pub nhead: usize,
    pub batch_first: bool,
}

impl Transformer {
    pub fn new(o: TransformerOptions) -> Result<Transformer> {
        let layer = TransformerLayerOptions {
            dim_feedforward: o.dim_feedforward,
            dropout: o.dropout,
            activation: o.activation.clone(),
            layer_norm_eps: o.layer_norm_eps,
            batch_first: o.batch_first,
            norm_first: o.norm_first,
            bias: o.bias,
        };
        let norm = || LayerNorm::with_options(&[o.d_model], o.layer_norm_eps, true, o.bias);
        let enc_layer = TransformerEncoderLayer::with_options(o.d_model, o.nhead, layer.clone())?;
        let encoder = TransformerEncoder::new(enc_layer, o.num_encoder_layers, Some(norm()?))?;
        let dec_layer = TransformerDecoderLayer::with_options(o.d_model, o.nhead, layer)?;
        let decoder = TransformerDecoder::new(dec_layer, o.num_decoder_layers, Some(norm()?))?;
        let t = Transformer {
            base: ModuleBase::new(),
            encoder,
            decoder,
            d_model: o.d_model,
            nhead: o.nhead,
            batch_first: o.batch_first,
        };
        for p in t.parameters() {
            if p.rank() > 1 {
                init::xavier_uniform_(&p, 1.0, None)?;
            }
        }
        Ok(t)
    }

    /// `Transformer.generate_square_subsequent_mask(sz)`: an f32 `(sz, sz)` mask with `-inf`
    /// above the diagonal and 0 elsewhere.
    ///
    /// ```
    /// use pyrite::nn::Transformer;
    /// let m = Transformer::generate_square_subsequent_mask(3)?;
    /// assert_eq!(m.to_vec2::<f32>()?[0], vec![0., f32::NEG_INFINITY, f32::NEG_INFINITY]);
    /// # Ok::<(), pyrite::Error>(())
    /// ```
    pub fn generate_square_subsequent_mask(sz: usize) -> Result<Tensor> {
        Transformer::generate_square_subsequent_mask_dtype(sz, DType::F32)
    }

    /// [`Transformer::generate_square_subsequent_mask`] in a floating-point `dtype`.
    pub fn generate_square_subsequent_mask_dtype(sz: usize, dtype: DType) -> Result<Tensor> {
        Tensor::full([sz, sz], f64::NEG_INFINITY, dtype)?.triu(1)
    }

    /// `forward(src, tgt, src_mask, tgt_mask, memory_mask, src_key_padding_mask,
    /// tgt_key_padding_mask, memory_key_padding_mask, src_is_causal, tgt_is_causal,
    /// memory_is_causal)`.
    pub fn forward_with(&self, src: &Tensor, tgt: &Tensor, m: &TransformerMasks<'_>) -> Result<Tensor> {
        let batched = src.rank() == 3;
        if batched && tgt.rank() == 3 {
            let b = usize::from(!self.batch_first);
            if src.dims()[b] != tgt.dims()[b] {
                bail!(Shape, "the batch number of src and tgt must be equal");
            }
        }
        if src.dims().last() != Some(&self.d_model) || tgt.dims().last() != Some(&self.d_model) {
            bail!(Shape, "the feature number of src and tgt must be equal to d_model");
        }
        let memory = self.encoder.call((
            src,
            &EncoderMasks {
                src_mask: m.src_mask,
                src_key_padding_mask: m.src_key_padding_mask,
                is_causal: m.src_is_causal,
            },
        ))?;
        self.decoder.call((
            tgt,
            &memory,
            &DecoderMasks {
                tgt_mask: m.tgt_mask,
                memory_mask: m.memory_mask,
                tgt_key_padding_mask: m.tgt_key_padding_mask,
                memory_key_padding_mask: m.memory_key_padding_mask,
                tgt_is_causal: m.tgt_is_causal,
                memory_is_causal: m.memory_is_causal,
            },
        ))
    }
}

impl Module for Transformer {
    /// `(src, tgt, src_mask, tgt_mask, memory_mask, src_key_padding_mask,
    /// tgt_key_padding_mask, memory_key_padding_mask, src_is_causal, tgt_is_causal,
    /// memory_is_causal)`.
    fn forward_value(&self, input: Value) -> Result<Value> {
        let a = CallArgs::new(input, "Transformer.forward");
        let (src, tgt) = (a.tensor(0, "src")?, a.tensor(1, "tgt")?);
        let names = [
            "src_mask",
            "tgt_mask",
            "memory_mask",
            "src_key_padding_mask",
            "tgt_key_padding_mask",
            "memory_key_padding_mask",
        ];
        let t: Vec<Option<Tensor>> =
            names.iter().enumerate().map(|(i, n)| a.opt_tensor(i + 2, n)).collect::<Result<_>>()?;
        let masks = TransformerMasks {
            src_mask: t[0].as_ref(),
            tgt_mask: t[1].as_ref(),
            memory_mask: t[2].as_ref(),
            src_key_padding_mask: t[3].as_ref(),
            tgt_key_padding_mask: t[4].as_ref(),
            memory_key_padding_mask: t[5].as_ref(),
            src_is_causal: a.opt_bool(8, "src_is_causal")?,
            tgt_is_causal: a.opt_bool(9, "tgt_is_causal")?,
            memory_is_causal: a.opt_bool(10, "memory_is_causal")?.unwrap_or(false),
        };
        Ok(Value::Tensor(self.forward_with(&src, &tgt, &masks)?))
    }
}

// ------------------------------------------------------------------------------ the calls

/// `(src, masks)` through the encoder (layer)'s `forward_with`, or its value for the hooks.
macro_rules! encoder_calls {
    ($($m:ty),*) => {$(
        /// `encoder(src)`.
        impl Args<$m> for &Tensor {
            type Output = Tensor;
            fn into_value(self) -> Value {
                Value::Tensor(self.clone())
            }
            fn forward(self, m: &$m) -> Result<Tensor> {
                m.forward_with(self, &EncoderMasks::default())
            }
        }
        /// `encoder(src, mask=.., src_key_padding_mask=.., is_causal=..)`.
        impl Args<$m> for (&Tensor, &EncoderMasks<'_>) {
            type Output = Tensor;
            fn into_value(self) -> Value {
                encoder_args(self.0, self.1)
            }
            fn forward(self, m: &$m) -> Result<Tensor> {
                m.forward_with(self.0, self.1)
            }
        }
    )*};
}
encoder_calls!(TransformerEncoderLayer, TransformerEncoder);

macro_rules! decoder_calls {
    ($($m:ty),*) => {$(
        /// `decoder(tgt, memory)`.
        impl Args<$m> for (&Tensor, &Tensor) {
            type Output = Tensor;
            fn into_value(self) -> Value {
                decoder_args(self.0, self.1, &DecoderMasks::default())
            }
            fn forward(self, m: &$m) -> Result<Tensor> {
                m.forward_with(self.0, self.1, &DecoderMasks::default())
            }
        }
        /// `decoder(tgt, memory, tgt_mask=.., memory_mask=.., ...)`.
        impl Args<$m> for (&Tensor, &Tensor, &DecoderMasks<'_>) {
            type Output = Tensor;
            fn into_value(self) -> Value {
                decoder_args(self.0, self.1, self.2)
            }
            fn forward(self, m: &$m) -> Result<Tensor> {
                m.forward_with(self.0, self.1, self.2)
            }
        }
    )*};
}
decoder_calls!(TransformerDecoderLayer, TransformerDecoder);

fn transformer_args(src: &Tensor, tgt: &Tensor, m: &TransformerMasks<'_>) -> Value {
    Value::Tuple(vec![
        Value::Tensor(src.clone()),
        Value::Tensor(tgt.clone()),
        opt(m.src_mask),
        opt(m.tgt_mask),
        opt(m.memory_mask),
        opt(m.src_key_padding_mask),
        opt(m.tgt_key_padding_mask),
        opt(m.memory_key_padding_mask),
        opt_bool_value(m.src_is_causal),
        opt_bool_value(m.tgt_is_causal),
        Value::Bool(m.memory_is_causal),
    ])
}

/// `transformer(src, tgt)`.
impl Args<Transformer> for (&Tensor, &Tensor) {
    type Output = Tensor;
    fn into_value(self) -> Value {
        transformer_args(self.0, self.1, &TransformerMasks::default())
    }
    fn forward(self, m: &Transformer) -> Result<Tensor> {
        m.forward_with(self.0, self.1, &TransformerMasks::default())
    }
}

/// `transformer(src, tgt, src_mask=.., tgt_mask=.., ...)`.
impl Args<Transformer> for (&Tensor, &Tensor, &TransformerMasks<'_>) {
    type Output = Tensor;
    fn into_value(self) -> Value {
        transformer_args(self.0, self.1, self.2)
    }
    fn forward(self, m: &Transformer) -> Result<Tensor> {
        m.forward_with(self.0, self.1, self.2)
    }
}

typed_call!(
    TransformerEncoderLayer,
    TransformerEncoder,
    TransformerDecoderLayer,
    TransformerDecoder,
    Transformer
);
