//! The BERT encoder (Hugging Face's `BertModel` and its parts), with Hugging Face's module
//! tree, so that parameter names match a checkpoint's keys one to one:
//!
//! ```text
//! embeddings.{word_embeddings, position_embeddings, token_type_embeddings, LayerNorm}
//! encoder.layer.N.attention.self.{query, key, value}
//! encoder.layer.N.attention.output.{dense, LayerNorm}
//! encoder.layer.N.intermediate.dense
//! encoder.layer.N.output.{dense, LayerNorm}
//! pooler.dense                      (when built with a pooling layer)
//! ```
//!
//! Each part is a module called through its hooks (`call_value`), so forward hooks on, say,
//! `encoder.layer.3` see that layer's output as in PyTorch. A part that takes two tensors
//! (hidden states and a mask, or the sub-layer output and its residual) takes them as a tuple.
//! The model is post-LN: `LayerNorm(x + dropout(sublayer(x)))` after attention and after the
//! feed-forward block.

use super::config::BertConfig;
use crate::activations::HiddenAct;
use crate::args;
use pyrite_core::{bail, DType, Result, Tensor};
use pyrite_nn::{
    self as nn, init, Buffer, Dropout, Embedding, LayerNorm, Linear, Module, ModuleBase, ModuleList, Tanh,
    Value,
};

fn linear(cfg: &BertConfig, n_in: usize, n_out: usize) -> Result<Linear> {
    let l = Linear::new(n_in, n_out)?;
    init::normal_(&l.weight, 0.0, cfg.initializer_range, None)?;
    if let Some(b) = &l.bias {
        init::zeros_(b)?;
    }
    Ok(l)
}

fn embedding(cfg: &BertConfig, n: usize, padding_idx: Option<usize>) -> Result<Embedding> {
    let e = Embedding::new(n, cfg.hidden_size)?;
    init::normal_(&e.weight, 0.0, cfg.initializer_range, None)?;
    match padding_idx {
        Some(p) => e.padding_idx(p as i64),
        None => Ok(e),
    }
}

fn layer_norm(cfg: &BertConfig) -> Result<LayerNorm> {
    LayerNorm::with_options(&[cfg.hidden_size], cfg.layer_norm_eps, true, true)
}

// ------------------------------------------------------------------------------- embeddings

/// `embeddings`: word + position + token type embeddings, then LayerNorm and dropout.
///
/// `position_ids` (`arange(max_position_embeddings)`, shape `[1, max]`) and `token_type_ids`
/// (zeros) are non-persistent buffers, as in Hugging Face: they are not in the state_dict, and
/// a checkpoint that still has them (older `transformers` saved them) loads all the same.
#[derive(nn::Module)]
#[allow(non_snake_case)]
pub struct BertEmbeddings {
    base: ModuleBase,
    pub word_embeddings: Embedding,
    pub position_embeddings: Embedding,
    pub token_type_embeddings: Embedding,
    pub LayerNorm: LayerNorm,
    pub dropout: Dropout,
    pub position_ids: Buffer,
    pub token_type_ids: Buffer,
}

impl BertEmbeddings {
    pub fn new(cfg: &BertConfig) -> Result<BertEmbeddings> {
        let max = cfg.max_position_embeddings;
        Ok(BertEmbeddings {
            base: ModuleBase::new(),
            word_embeddings: embedding(cfg, cfg.vocab_size, cfg.pad_token_id)?,
            position_embeddings: embedding(cfg, max, None)?,
            token_type_embeddings: embedding(cfg, cfg.type_vocab_size, None)?,
            LayerNorm: layer_norm(cfg)?,
            dropout: Dropout::new(cfg.hidden_dropout_prob)?,
            position_ids: Buffer::non_persistent(
                Tensor::arange(0.0, max as f64, 1.0, DType::I64)?.reshape([1, max])?,
            ),
            token_type_ids: Buffer::non_persistent(Tensor::zeros([1, max], DType::I64)?),
        })
    }

    /// The embeddings of `input_ids` `[batch, seq]` (or of given `inputs_embeds`
    /// `[batch, seq, hidden]`), with `token_type_ids` (default zeros) and `position_ids`
    /// (default `0..seq`).
    pub fn embed(
        &self,
        input_ids: Option<&Tensor>,
        token_type_ids: Option<&Tensor>,
        position_ids: Option<&Tensor>,
        inputs_embeds: Option<&Tensor>,
    ) -> Result<Tensor> {
        let (batch, seq) = match (input_ids, inputs_embeds) {
            (Some(_), Some(_)) => {
                bail!(
                    Value,
                    "BertEmbeddings: You cannot specify both input_ids and inputs_embeds at the same time"
                )
            }
            (None, None) => {
                bail!(Value, "BertEmbeddings: You have to specify either input_ids or inputs_embeds")
            }
            (Some(ids), None) => {
                if ids.rank() != 2 || ids.dtype().is_floating_point() {
                    bail!(
                        Value,
                        "BertEmbeddings: input_ids must be an integer tensor of shape [batch, seq], got shape {} and dtype {}",
                        ids.shape(),
                        ids.dtype()
                    );
                }
                (ids.dims()[0], ids.dims()[1])
            }
            (None, Some(e)) => {
                let h = self.word_embeddings.weight.dims()[1];
                if e.rank() != 3 || e.dims()[2] != h {
                    bail!(
                        Shape,
                        "BertEmbeddings: inputs_embeds must have shape [batch, seq, {h}], got {}",
                        e.shape()
                    );
                }
                (e.dims()[0], e.dims()[1])
            }
        };
        let max = self.position_ids.dims()[1];
        let position_ids = match position_ids {
            Some(p) => p.clone(),
            None => {
                if seq > max {
                    bail!(
                        Index,
                        "BertEmbeddings: the sequence length {seq} is longer than max_position_embeddings ({max})"
                    );
                }
                self.position_ids.narrow(1, 0, seq)?
            }
        };
        let token_type_ids = match token_type_ids {
            Some(t) => {
                if t.dims() != [batch, seq] {
                    bail!(
                        Shape,
                        "BertEmbeddings: token_type_ids must have the shape of input_ids [{batch}, {seq}], got {}",
                        t.shape()
                    );
                }
                t.clone()
            }
            None => Tensor::zeros([batch, seq], DType::I64)?,
        };
        let words = match inputs_embeds {
            Some(e) => e.clone(),
            None => self.word_embeddings.call(input_ids.expect("checked above"))?,
        };
        let x = words
            .add(&self.token_type_embeddings.call(&token_type_ids)?)?
            .add(&self.position_embeddings.call(&position_ids)?)?;
        self.dropout.call(&self.LayerNorm.call(&x)?)
    }
}

impl Module for BertEmbeddings {
    /// `(input_ids, token_type_ids, position_ids, inputs_embeds)`, Hugging Face's order.
    fn forward_value(&self, input: Value) -> Result<Value> {
        const OP: &str = "BertEmbeddings.forward";
        let mut a = args::bind(input, OP, &["input_ids", "token_type_ids", "position_ids", "inputs_embeds"])?
            .into_iter();
        let mut next = |name| args::tensor(a.next().unwrap_or_default(), OP, name);
        let (ids, tt, pos, emb) =
            (next("input_ids")?, next("token_type_ids")?, next("position_ids")?, next("inputs_embeds")?);
        Ok(Value::Tensor(self.embed(ids.as_ref(), tt.as_ref(), pos.as_ref(), emb.as_ref())?))
    }
}

// -------------------------------------------------------------------------------- attention

/// `attention.self`: multi-head scaled dot-product self-attention with separate `query`,
/// `key` and `value` projections. Called with `(hidden_states, extended_attention_mask)`,
/// the mask additive and broadcastable to `[batch, heads, seq, seq]` (see
/// [`extended_attention_mask`]).
#[derive(nn::Module)]
pub struct BertSelfAttention {
    base: ModuleBase,
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
    pub dropout: Dropout,
    pub num_attention_heads: usize,
    pub attention_head_size: usize,
}

impl BertSelfAttention {
    pub fn new(cfg: &BertConfig) -> Result<BertSelfAttention> {
        cfg.validate()?;
        let h = cfg.hidden_size;
        Ok(BertSelfAttention {
            base: ModuleBase::new(),
            query: linear(cfg, h, h)?,
            key: linear(cfg, h, h)?,
            value: linear(cfg, h, h)?,
            dropout: Dropout::new(cfg.attention_probs_dropout_prob)?,
            num_attention_heads: cfg.num_attention_heads,
            attention_head_size: cfg.head_dim(),
        })
    }

    /// `[batch, seq, hidden]` to `[batch, heads, seq, head_size]`.
    fn heads(&self, x: &Tensor, batch: usize, seq: usize) -> Result<Tensor> {
        x.reshape([batch, seq, self.num_attention_heads, self.attention_head_size])?.transpose(1, 2)
    }

    fn attend(&self, h: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let hidden = self.num_attention_heads * self.attention_head_size;
        if h.rank() != 3 || h.dims()[2] != hidden {
            bail!(
                Shape,
                "BertSelfAttention: expected hidden_states of shape [batch, seq, {hidden}], got {}",
                h.shape()
            );
        }
        let (batch, seq) = (h.dims()[0], h.dims()[1]);
        let q = self.heads(&self.query.call(h)?, batch, seq)?;
        let k = self.heads(&self.key.call(h)?, batch, seq)?;
        let v = self.heads(&self.value.call(h)?, batch, seq)?;
        let scale = (self.attention_head_size as f64).powf(-0.5);
        let mut scores = q.matmul(&k.transpose(-1, -2)?)?.mul_scalar(scale)?;
        if let Some(m) = mask {
            scores = scores.add(m)?;
        }
        let probs = self.dropout.call(&scores.softmax(-1)?)?;
        probs.matmul(&v)?.transpose(1, 2)?.reshape([batch, seq, hidden])
    }
}

impl Module for BertSelfAttention {
    fn forward_value(&self, input: Value) -> Result<Value> {
        const OP: &str = "BertSelfAttention.forward";
        let mut a = args::bind(input, OP, &["hidden_states", "attention_mask"])?.into_iter();
        let h = args::required_tensor(a.next().unwrap_or_default(), OP, "hidden_states")?;
        let m = args::tensor(a.next().unwrap_or_default(), OP, "attention_mask")?;
        Ok(Value::Tensor(self.attend(&h, m.as_ref())?))
    }
}

/// The residual block after a sub-layer: `LayerNorm(dropout(dense(x)) + input_tensor)`, from
/// a call with `(hidden_states, input_tensor)`.
#[allow(non_snake_case)]
fn residual(
    op: &str,
    dense: &Linear,
    LayerNorm: &LayerNorm,
    dropout: &Dropout,
    input: Value,
) -> Result<Value> {
    let mut a = args::bind(input, op, &["hidden_states", "input_tensor"])?.into_iter();
    let h = args::required_tensor(a.next().unwrap_or_default(), op, "hidden_states")?;
    let res = args::required_tensor(a.next().unwrap_or_default(), op, "input_tensor")?;
    let y = dropout.call(&dense.call(&h)?)?;
    Ok(Value::Tensor(LayerNorm.call(&y.add(&res)?)?))
}

/// `attention.output`: the residual block after self-attention,
/// `LayerNorm(dropout(dense(x)) + input_tensor)` with `dense` hidden to hidden. Called with
/// `(hidden_states, input_tensor)`.
#[derive(nn::Module)]
#[allow(non_snake_case)]
pub struct BertSelfOutput {
    base: ModuleBase,
    pub dense: Linear,
    pub LayerNorm: LayerNorm,
    pub dropout: Dropout,
}

impl BertSelfOutput {
    pub fn new(cfg: &BertConfig) -> Result<BertSelfOutput> {
        Ok(BertSelfOutput {
            base: ModuleBase::new(),
            dense: linear(cfg, cfg.hidden_size, cfg.hidden_size)?,
            LayerNorm: layer_norm(cfg)?,
            dropout: Dropout::new(cfg.hidden_dropout_prob)?,
        })
    }
}

impl Module for BertSelfOutput {
    fn forward_value(&self, input: Value) -> Result<Value> {
        residual("BertSelfOutput.forward", &self.dense, &self.LayerNorm, &self.dropout, input)
    }
}

/// `output` of a layer: the residual block after the feed-forward block, as
/// [`BertSelfOutput`] with `dense` intermediate to hidden. Called with
/// `(hidden_states, input_tensor)`.
#[derive(nn::Module)]
#[allow(non_snake_case)]
pub struct BertOutput {
    base: ModuleBase,
    pub dense: Linear,
    pub LayerNorm: LayerNorm,
    pub dropout: Dropout,
}

impl BertOutput {
    pub fn new(cfg: &BertConfig) -> Result<BertOutput> {
        Ok(BertOutput {
            base: ModuleBase::new(),
            dense: linear(cfg, cfg.intermediate_size, cfg.hidden_size)?,
            LayerNorm: layer_norm(cfg)?,
            dropout: Dropout::new(cfg.hidden_dropout_prob)?,
        })
    }
}

impl Module for BertOutput {
    fn forward_value(&self, input: Value) -> Result<Value> {
        residual("BertOutput.forward", &self.dense, &self.LayerNorm, &self.dropout, input)
    }
}

/// `attention`: self-attention (`attention.self`), then its residual block
/// (`attention.output`). Called with `(hidden_states, extended_attention_mask)`.
///
/// Hugging Face names the self-attention `self`, a Rust keyword that no field can have, so it
/// is registered at run time under that name in the module's `base` (the first member, so the
/// state_dict order is Hugging Face's) and reached with [`BertAttention::self_attention`].
#[derive(nn::Module)]
pub struct BertAttention {
    base: ModuleBase,
    pub output: BertSelfOutput,
}

impl BertAttention {
    pub fn new(cfg: &BertConfig) -> Result<BertAttention> {
        let mut base = ModuleBase::new();
        base.add_module("self", BertSelfAttention::new(cfg)?)?;
        Ok(BertAttention { base, output: BertSelfOutput::new(cfg)? })
    }

    /// `attention.self`.
    pub fn self_attention(&self) -> &BertSelfAttention {
        // `new` registers it and a registered child can be neither removed nor replaced.
        self.self_module()
            .as_any()
            .downcast_ref::<BertSelfAttention>()
            .expect("BertAttention::new registers a BertSelfAttention as `self`")
    }

    fn self_module(&self) -> &dyn Module {
        self.base.child("self").expect("BertAttention::new registers `self`")
    }
}

impl Module for BertAttention {
    fn forward_value(&self, input: Value) -> Result<Value> {
        const OP: &str = "BertAttention.forward";
        let mut a = args::bind(input, OP, &["hidden_states", "attention_mask"])?.into_iter();
        let h = args::required_tensor(a.next().unwrap_or_default(), OP, "hidden_states")?;
        let m = args::tensor(a.next().unwrap_or_default(), OP, "attention_mask")?;
        let y = self.self_module().call_value(args::pair(&h, m.as_ref()))?.into_tensor()?;
        self.output.call_value(args::pair(&y, Some(&h)))
    }
}

// ------------------------------------------------------------------------------ feed-forward

/// `intermediate`: `act(dense(x))`, hidden to intermediate size.
#[derive(nn::Module)]
pub struct BertIntermediate {
    base: ModuleBase,
    pub dense: Linear,
    #[module(skip)]
    pub intermediate_act_fn: HiddenAct,
}

impl BertIntermediate {
    pub fn new(cfg: &BertConfig) -> Result<BertIntermediate> {
        Ok(BertIntermediate {
            base: ModuleBase::new(),
            dense: linear(cfg, cfg.hidden_size, cfg.intermediate_size)?,
            intermediate_act_fn: cfg.hidden_act,
        })
    }
}

impl Module for BertIntermediate {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.intermediate_act_fn.apply(&self.dense.call(x)?)
    }

    fn extra_repr(&self) -> String {
        format!("intermediate_act_fn={}", self.intermediate_act_fn.name())
    }
}

// ---------------------------------------------------------------------------------- layers

/// `encoder.layer.N`: attention, then the feed-forward block (`intermediate`, `output`).
/// Called with `(hidden_states, extended_attention_mask)`.
#[derive(nn::Module)]
pub struct BertLayer {
    base: ModuleBase,
    pub attention: BertAttention,
    pub intermediate: BertIntermediate,
    pub output: BertOutput,
}

impl BertLayer {
    pub fn new(cfg: &BertConfig) -> Result<BertLayer> {
        Ok(BertLayer {
            base: ModuleBase::new(),
            attention: BertAttention::new(cfg)?,
            intermediate: BertIntermediate::new(cfg)?,
            output: BertOutput::new(cfg)?,
        })
    }
}

impl Module for BertLayer {
    fn forward_value(&self, input: Value) -> Result<Value> {
        const OP: &str = "BertLayer.forward";
        let mut a = args::bind(input, OP, &["hidden_states", "attention_mask"])?.into_iter();
        let h = args::required_tensor(a.next().unwrap_or_default(), OP, "hidden_states")?;
        let m = args::tensor(a.next().unwrap_or_default(), OP, "attention_mask")?;
        let att = self.attention.call_value(args::pair(&h, m.as_ref()))?.into_tensor()?;
        let mid = self.intermediate.call(&att)?;
        self.output.call_value(args::pair(&mid, Some(&att)))
    }
}

/// `encoder`: the stack of layers, a `ModuleList` as in Hugging Face (`encoder.layer.0`,
/// `encoder.layer.1`, ...; `layer.get_as::<BertLayer>(i)` for one, typed). Layers can be
/// removed or inserted like any `ModuleList`'s, to keep only the lower layers for example.
/// Called with `(hidden_states, extended_attention_mask, output_hidden_states)`; returns the
/// tuple `(last_hidden_state, hidden_states)`, the second a list of the input and every
/// layer's output when `output_hidden_states` is true, `None` otherwise.
#[derive(nn::Module)]
pub struct BertEncoder {
    base: ModuleBase,
    pub layer: ModuleList,
}

impl BertEncoder {
    pub fn new(cfg: &BertConfig) -> Result<BertEncoder> {
        let mut layer = ModuleList::new();
        for _ in 0..cfg.num_hidden_layers {
            layer.push(BertLayer::new(cfg)?);
        }
        Ok(BertEncoder { base: ModuleBase::new(), layer })
    }
}

impl Module for BertEncoder {
    fn forward_value(&self, input: Value) -> Result<Value> {
        const OP: &str = "BertEncoder.forward";
        let mut a =
            args::bind(input, OP, &["hidden_states", "attention_mask", "output_hidden_states"])?.into_iter();
        let mut h = args::required_tensor(a.next().unwrap_or_default(), OP, "hidden_states")?;
        let m = args::tensor(a.next().unwrap_or_default(), OP, "attention_mask")?;
        let keep = args::flag(a.next().unwrap_or_default(), OP, "output_hidden_states")?;
        let mut all = Vec::new();
        for layer in self.layer.iter() {
            if keep {
                all.push(h.clone());
            }
            h = layer.call_value(args::pair(&h, m.as_ref()))?.into_tensor()?;
        }
        let all = if keep {
            all.push(h.clone());
            Value::from(all)
        } else {
            Value::None
        };
        Ok(Value::Tuple(vec![Value::Tensor(h), all]))
    }
}

/// `pooler`: `tanh(dense(hidden_states[:, 0]))`, the first ([CLS]) token's state.
#[derive(nn::Module)]
pub struct BertPooler {
    base: ModuleBase,
    pub dense: Linear,
    pub activation: Tanh,
}

impl BertPooler {
    pub fn new(cfg: &BertConfig) -> Result<BertPooler> {
        Ok(BertPooler {
            base: ModuleBase::new(),
            dense: linear(cfg, cfg.hidden_size, cfg.hidden_size)?,
            activation: Tanh::new(),
        })
    }
}

impl Module for BertPooler {
    fn forward(&self, h: &Tensor) -> Result<Tensor> {
        if h.rank() != 3 || h.dims()[1] == 0 {
            bail!(
                Shape,
                "BertPooler: expected hidden_states of shape [batch, seq >= 1, hidden], got {}",
                h.shape()
            );
        }
        self.activation.call(&self.dense.call(&h.select(1, 0)?)?)
    }
}

// ---------------------------------------------------------------------------------- the model

/// The additive attention mask of a `[batch, seq]` padding mask (1 = attend, 0 = padding):
/// `(1 - mask) * finfo(dtype).min`, shaped `[batch, 1, 1, seq]` to broadcast over heads and
/// query positions (Hugging Face's `get_extended_attention_mask` for an encoder). `mask` may
/// be integer, bool or floating point.
pub fn extended_attention_mask(mask: &Tensor, dtype: DType) -> Result<Tensor> {
    if mask.rank() != 2 {
        bail!(Shape, "attention_mask must have shape [batch, seq], got {}", mask.shape());
    }
    let min = match dtype {
        DType::F64 => f64::MIN,
        DType::F32 => f32::MIN as f64,
        DType::F16 => -65504.0,
        DType::BF16 => -3.3895313892515355e38,
        other => bail!(DType, "extended_attention_mask: expected a floating-point dtype, got {other}"),
    };
    let (b, s) = (mask.dims()[0], mask.dims()[1]);
    mask.to_dtype(dtype)?.neg()?.add_scalar(1.0)?.mul_scalar(min)?.reshape([b, 1, 1, s])
}

/// What [`BertModel::run`] takes: Hugging Face's `BertModel.forward` keyword arguments.
/// Give `input_ids` or `inputs_embeds`; the rest is optional.
#[derive(Clone, Debug, Default)]
pub struct BertInputs {
    /// `[batch, seq]` token ids (int64).
    pub input_ids: Option<Tensor>,
    /// `[batch, seq]`, 1 for tokens to attend to and 0 for padding (default: all ones).
    pub attention_mask: Option<Tensor>,
    /// `[batch, seq]` segment ids (default: zeros).
    pub token_type_ids: Option<Tensor>,
    /// `[batch or 1, seq]` positions (default: `0..seq`).
    pub position_ids: Option<Tensor>,
    /// `[batch, seq, hidden]` in place of `input_ids`' word embeddings.
    pub inputs_embeds: Option<Tensor>,
    /// Also return the embeddings' output and every layer's (default false).
    pub output_hidden_states: bool,
}

const MODEL_ARGS: [&str; 6] = [
    "input_ids",
    "attention_mask",
    "token_type_ids",
    "position_ids",
    "inputs_embeds",
    "output_hidden_states",
];

impl BertInputs {
    /// Just the token ids.
    pub fn ids(input_ids: &Tensor) -> BertInputs {
        BertInputs { input_ids: Some(input_ids.clone()), ..Default::default() }
    }

    /// The call as a [`Value`]: a dict of the given keyword arguments (what
    /// [`Module::call_value`] passes to the model's hooks).
    pub fn to_value(&self) -> Value {
        let mut kv = Vec::new();
        for (k, t) in MODEL_ARGS.iter().zip([
            &self.input_ids,
            &self.attention_mask,
            &self.token_type_ids,
            &self.position_ids,
            &self.inputs_embeds,
        ]) {
            if let Some(t) = t {
                kv.push((k.to_string(), Value::Tensor(t.clone())));
            }
        }
        if self.output_hidden_states {
            kv.push(("output_hidden_states".to_string(), Value::Bool(true)));
        }
        Value::Dict(kv)
    }

    /// Binds a call's value: one tensor (`input_ids`), a tuple in Hugging Face's order
    /// `(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds,
    /// output_hidden_states)`, or a dict by keyword.
    pub fn from_value(input: Value) -> Result<BertInputs> {
        const OP: &str = "BertModel.forward";
        let mut a = args::bind(input, OP, &MODEL_ARGS)?.into_iter();
        let mut next = |name| args::tensor(a.next().unwrap_or_default(), OP, name);
        let (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds) = (
            next("input_ids")?,
            next("attention_mask")?,
            next("token_type_ids")?,
            next("position_ids")?,
            next("inputs_embeds")?,
        );
        let output_hidden_states = args::flag(a.next().unwrap_or_default(), OP, "output_hidden_states")?;
        Ok(BertInputs {
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states,
        })
    }
}

/// What [`BertModel::run`] returns (Hugging Face's `BaseModelOutputWithPooling`).
#[derive(Clone, Debug)]
pub struct BertModelOutput {
    /// `[batch, seq, hidden]`: the last layer's output.
    pub last_hidden_state: Tensor,
    /// `[batch, hidden]`: the pooler's output; `None` without a pooling layer.
    pub pooler_output: Option<Tensor>,
    /// With `output_hidden_states`: the embeddings' output and each layer's
    /// (`num_hidden_layers + 1` tensors).
    pub hidden_states: Option<Vec<Tensor>>,
}

impl BertModelOutput {
    /// The model's output value: the tuple `(last_hidden_state, pooler_output or None)`, and
    /// the list of hidden states third when they were asked for (Hugging Face's
    /// `return_dict=False` order).
    pub fn to_value(&self) -> Value {
        let mut v = vec![Value::Tensor(self.last_hidden_state.clone()), self.pooler_output.clone().into()];
        if let Some(h) = &self.hidden_states {
            v.push(Value::from(h.clone()));
        }
        Value::Tuple(v)
    }

    /// Reads [`BertModelOutput::to_value`]'s tuple back.
    pub fn from_value(v: Value) -> Result<BertModelOutput> {
        let mut it = v.into_vec().into_iter();
        let last_hidden_state = it.next().unwrap_or_default().into_tensor()?;
        let pooler_output = match it.next().unwrap_or_default() {
            Value::None => None,
            other => Some(other.into_tensor()?),
        };
        let hidden_states = match it.next() {
            None | Some(Value::None) => None,
            Some(Value::List(h)) | Some(Value::Tuple(h)) => {
                Some(h.into_iter().map(Value::into_tensor).collect::<Result<_>>()?)
            }
            Some(other) => {
                bail!(Value, "BertModel output: expected a list of hidden states, got {}", other.kind())
            }
        };
        Ok(BertModelOutput { last_hidden_state, pooler_output, hidden_states })
    }
}

/// Hugging Face's `BertModel`: embeddings, the encoder, and an optional pooler.
///
/// Build it from a [`BertConfig`] with random weights (Hugging Face's initialisation: normal
/// with `initializer_range` for linear and embedding weights, zero biases, the padding row of
/// the word embeddings zero) or load one with [`BertModel::from_pretrained`]. Run it with
/// [`BertModel::call`] (`model.call(&inputs)`), or with `call_value` on a [`Value`] (one tensor of ids, a tuple in
/// Hugging Face's argument order, or a dict by keyword); either returns
/// `(last_hidden_state, pooler_output)`.
#[derive(nn::Module)]
pub struct BertModel {
    base: ModuleBase,
    pub embeddings: BertEmbeddings,
    pub encoder: BertEncoder,
    pub pooler: Option<BertPooler>,
    #[module(skip)]
    pub config: BertConfig,
}

impl BertModel {
    /// A model with a pooling layer and random weights.
    pub fn new(config: &BertConfig) -> Result<BertModel> {
        BertModel::with_pooling_layer(config, true)
    }

    /// `BertModel(config, add_pooling_layer)`.
    pub fn with_pooling_layer(config: &BertConfig, add_pooling_layer: bool) -> Result<BertModel> {
        config.validate()?;
        Ok(BertModel {
            base: ModuleBase::new(),
            embeddings: BertEmbeddings::new(config)?,
            encoder: BertEncoder::new(config)?,
            pooler: if add_pooling_layer { Some(BertPooler::new(config)?) } else { None },
            config: config.clone(),
        })
    }

    /// `model(**inputs)` (`model.call(&inputs)`) or `model(input_ids)`
    /// (`model.call(&ids)`): runs the model through its hooks.
    pub fn call<A: nn::Args<Self>>(&self, inputs: A) -> Result<A::Output> {
        nn::call::call(self, inputs)
    }

    fn forward_inputs(&self, x: &BertInputs) -> Result<BertModelOutput> {
        let h = self.embeddings.call_value(Value::Tuple(vec![
            x.input_ids.clone().into(),
            x.token_type_ids.clone().into(),
            x.position_ids.clone().into(),
            x.inputs_embeds.clone().into(),
        ]))?;
        let h = h.into_tensor()?;
        let mask = match &x.attention_mask {
            Some(m) => {
                let (b, s) = (h.dims()[0], h.dims()[1]);
                if m.dims() != [b, s] {
                    bail!(
                        Shape,
                        "BertModel: attention_mask must have the shape of input_ids [{b}, {s}], got {}",
                        m.shape()
                    );
                }
                Some(extended_attention_mask(m, h.dtype())?)
            }
            None => None,
        };
        let out = self.encoder.call_value(Value::Tuple(vec![
            Value::Tensor(h),
            mask.into(),
            Value::Bool(x.output_hidden_states),
        ]))?;
        let mut out = out.into_vec().into_iter();
        let last_hidden_state = out.next().unwrap_or_default().into_tensor()?;
        let hidden_states = match out.next().unwrap_or_default() {
            Value::None => None,
            other => Some(other.into_vec().into_iter().map(Value::into_tensor).collect::<Result<_>>()?),
        };
        let pooler_output = match &self.pooler {
            Some(p) => Some(p.call(&last_hidden_state)?),
            None => None,
        };
        Ok(BertModelOutput { last_hidden_state, pooler_output, hidden_states })
    }
}

/// The module tree (`Display`), so that `Result<BertModel>` can be unwrapped.
impl std::fmt::Debug for BertModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.repr())
    }
}

impl Module for BertModel {
    fn forward_value(&self, input: Value) -> Result<Value> {
        Ok(self.forward_inputs(&BertInputs::from_value(input)?)?.to_value())
    }
}

impl nn::FromValue for BertModelOutput {
    fn from_value(v: Value) -> Result<BertModelOutput> {
        BertModelOutput::from_value(v)
    }
}

/// `model(**inputs)`.
impl nn::Args<BertModel> for &BertInputs {
    type Output = BertModelOutput;
    fn into_value(self) -> Value {
        self.to_value()
    }
    fn forward(self, m: &BertModel) -> Result<BertModelOutput> {
        m.forward_inputs(self)
    }
}

/// `model(input_ids)`.
impl nn::Args<BertModel> for &Tensor {
    type Output = BertModelOutput;
    fn into_value(self) -> Value {
        Value::Tensor(self.clone())
    }
    fn forward(self, m: &BertModel) -> Result<BertModelOutput> {
        m.forward_inputs(&BertInputs::ids(self))
    }
}
