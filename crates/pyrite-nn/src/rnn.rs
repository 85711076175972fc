//! The recurrent layers `RNN`, `LSTM`, `GRU` and their one-step cells `RNNCell`, `LSTMCell`,
//! `GRUCell` (PyTorch's `torch/nn/modules/rnn.py`).
//!
//! The layers take a padded sequence `[L, N, H_in]` (`[N, L, H_in]` with `batch_first`, or
//! unbatched `[L, H_in]`) or a [`PackedSequence`], and an optional initial state, and return
//! PyTorch's `(output, h_n)` (`(output, (h_n, c_n))` for LSTM). Through [`Module::call_value`]
//! the input is `x`, `(x, h0)` or `(x, (h0, c0))`, where `x` is a tensor or a packed
//! sequence's [`Value`] (a dict, see [`PackedSequence::to_value`]). Each layer's own `call`
//! takes the same forms typed (`lstm.call((&x, (&h0, &c0)))`, `gru.call(&packed)`, see
//! [`crate::call`]) and returns `(output, h_n)` typed. Both run the module's hooks.
//!
//! Parameters carry PyTorch's names, in PyTorch's order (`weight_ih_l0`, `weight_hh_l0`,
//! `bias_ih_l0`, `bias_hh_l0`, `weight_hr_l0` for LSTM projections, then `..._reverse` for
//! the second direction, then the next layer), so state_dicts load across. The computation is
//! [`crate::functional::rnn`].
//!
//! ```
//! use pyrite::nn::{Module, RnnOptions, LSTM};
//! use pyrite::{DType, Tensor};
//! let lstm = LSTM::new(10, 20, RnnOptions::new().num_layers(2).batch_first(true))?;
//! assert_eq!(lstm.to_string(), "LSTM(10, 20, num_layers=2, batch_first=True)");
//! let x = Tensor::randn([3, 5, 10], DType::F32)?; // batch 3, 5 steps
//! let (out, (h_n, c_n)) = lstm.call(&x)?;
//! assert_eq!(out.dims(), &[3, 5, 20]);
//! assert_eq!(h_n.dims(), &[2, 3, 20]);
//! assert_eq!(c_n.dims(), &[2, 3, 20]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::call::{args, opt, t, typed_call};
use crate::functional::{self as F, RnnArgs, RnnMode};
use crate::init;
use crate::module::{py_bool, py_float, py_tuple, Module, ModuleBase};
use crate::parameter::Parameter;
use crate::utils::rnn::PackedSequence;
use crate::value::Value;
use pyrite_core::{bail, DType, Result, Tensor};

/// `nonlinearity=` of [`RNN`] and [`RNNCell`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RnnNonlinearity {
    #[default]
    Tanh,
    Relu,
}

impl RnnNonlinearity {
    /// `"tanh"` or `"relu"`.
    pub fn parse(s: &str) -> Result<RnnNonlinearity> {
        match s {
            "tanh" => Ok(RnnNonlinearity::Tanh),
            "relu" => Ok(RnnNonlinearity::Relu),
            other => bail!(Value, "Unknown nonlinearity '{other}'. Select from 'tanh' or 'relu'."),
        }
    }

    /// PyTorch's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RnnNonlinearity::Tanh => "tanh",
            RnnNonlinearity::Relu => "relu",
        }
    }
}

/// PyTorch's keyword arguments of `RNN`, `LSTM` and `GRU`, with its defaults; set them with
/// the builder methods (`RnnOptions::new().num_layers(2).bidirectional(true)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RnnOptions {
    /// Stacked layers, each reading the previous one's output. Default 1.
    pub num_layers: usize,
    /// `tanh` or `relu`; [`RNN`] only (others must keep the default).
    pub nonlinearity: RnnNonlinearity,
    /// Whether the layers have `bias_ih` and `bias_hh`. Default `true`.
    pub bias: bool,
    /// Input and output as `[N, L, *]` instead of `[L, N, *]` (not the states). Default `false`.
    pub batch_first: bool,
    /// Dropout on the outputs of every layer but the last, in training mode. Default 0.
    pub dropout: f64,
    /// A second, backwards direction per layer; outputs concatenated. Default `false`.
    pub bidirectional: bool,
    /// [`LSTM`] only: projects `h` to this size (`weight_hr`); 0 for none (default).
    pub proj_size: usize,
    /// The parameters' dtype (PyTorch's `dtype=`). Default `f32`.
    pub dtype: DType,
}

impl Default for RnnOptions {
    fn default() -> Self {
        RnnOptions {
            num_layers: 1,
            nonlinearity: RnnNonlinearity::Tanh,
            bias: true,
            batch_first: false,
            dropout: 0.0,
            bidirectional: false,
            proj_size: 0,
            dtype: DType::F32,
        }
    }
}

impl RnnOptions {
    pub fn new() -> RnnOptions {
        RnnOptions::default()
    }
    pub fn num_layers(mut self, n: usize) -> Self {
        self.num_layers = n;
        self
    }
    pub fn nonlinearity(mut self, n: RnnNonlinearity) -> Self {
        self.nonlinearity = n;
        self
    }
    pub fn bias(mut self, b: bool) -> Self {
        self.bias = b;
        self
    }
    pub fn batch_first(mut self, b: bool) -> Self {
        self.batch_first = b;
        self
    }
    pub fn dropout(mut self, p: f64) -> Self {
        self.dropout = p;
        self
    }
    pub fn bidirectional(mut self, b: bool) -> Self {
        self.bidirectional = b;
        self
    }
    pub fn proj_size(mut self, p: usize) -> Self {
        self.proj_size = p;
        self
    }
    pub fn dtype(mut self, d: DType) -> Self {
        self.dtype = d;
        self
    }
}

// ------------------------------------------------------------------------ the shared layer

/// Checks the configuration and makes the parameters, registered on a new [`ModuleBase`] in
/// PyTorch's order; returns it with their names (PyTorch's `_flat_weights_names`).
fn build(
    mode: RnnMode,
    input_size: usize,
    hidden_size: usize,
    o: &RnnOptions,
) -> Result<(ModuleBase, Vec<String>)> {
    if !(0.0..=1.0).contains(&o.dropout) {
        bail!(Value, "dropout should be a number in range [0, 1] representing the probability of an element being zeroed");
    }
    if o.dropout > 0.0 && o.num_layers == 1 {
        pyrite_core::warnings::warn(
            mode.layer_name(),
            &format!(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects num_layers greater than 1, but got dropout={} and num_layers=1",
                py_float(o.dropout)
            ),
        );
    }
    if hidden_size == 0 {
        bail!(Value, "hidden_size must be greater than zero");
    }
    if o.num_layers == 0 {
        bail!(Value, "num_layers must be greater than zero");
    }
    if input_size == 0 {
        bail!(Value, "input_size must be greater than zero");
    }
    if o.proj_size > 0 && mode != RnnMode::Lstm {
        bail!(Value, "proj_size argument is only supported for LSTM, not RNN or GRU");
    }
    if o.proj_size >= hidden_size && mode == RnnMode::Lstm {
        bail!(Value, "proj_size has to be smaller than hidden_size");
    }
    if o.nonlinearity != RnnNonlinearity::Tanh && !matches!(mode, RnnMode::RnnTanh | RnnMode::RnnRelu) {
        bail!(Value, "nonlinearity is an argument of RNN only, not {}", mode.layer_name());
    }
    let gate_size = mode.gates() * hidden_size;
    let real_hidden = if o.proj_size > 0 { o.proj_size } else { hidden_size };
    let dirs = if o.bidirectional { 2 } else { 1 };
    let bound = 1.0 / (hidden_size as f64).sqrt();
    let mut base = ModuleBase::new();
    let mut names = Vec::new();
    for layer in 0..o.num_layers {
        for dir in 0..dirs {
            let layer_input = if layer == 0 { input_size } else { real_hidden * dirs };
            let suffix = if dir == 1 { "_reverse" } else { "" };
            let mut params: Vec<(String, Vec<usize>)> = vec![
                (format!("weight_ih_l{layer}{suffix}"), vec![gate_size, layer_input]),
                (format!("weight_hh_l{layer}{suffix}"), vec![gate_size, real_hidden]),
            ];
            if o.bias {
                params.push((format!("bias_ih_l{layer}{suffix}"), vec![gate_size]));
                params.push((format!("bias_hh_l{layer}{suffix}"), vec![gate_size]));
            }
            if o.proj_size > 0 {
                params.push((format!("weight_hr_l{layer}{suffix}"), vec![o.proj_size, hidden_size]));
            }
            for (name, shape) in params {
                let t = Tensor::empty(shape, o.dtype)?;
                init::uniform_(&t, -bound, bound, None)?;
                base.register_parameter(&name, Some(Parameter::new(t)?))?;
                names.push(name);
            }
        }
    }
    Ok((base, names))
}

/// A borrowed view of a recurrent layer: what `RNN`, `LSTM` and `GRU` share (PyTorch's
/// `RNNBase.forward`).
struct Layer<'a> {
    mode: RnnMode,
    base: &'a ModuleBase,
    input_size: usize,
    hidden_size: usize,
    o: &'a RnnOptions,
    names: &'a [String],
}

impl Layer<'_> {
    fn name(&self) -> &'static str {
        self.mode.layer_name()
    }

    fn dirs(&self) -> usize {
        if self.o.bidirectional {
            2
        } else {
            1
        }
    }

    /// The parameters in PyTorch's `_flat_weights` order.
    fn weights(&self) -> Result<Vec<&Tensor>> {
        self.names
            .iter()
            .map(|n| match self.base.parameter(n) {
                Some(p) => Ok(p.tensor()),
                None => bail!(Value, "{}: parameter `{n}` is missing", self.name()),
            })
            .collect()
    }

    fn args(&self) -> RnnArgs {
        RnnArgs {
            num_layers: self.o.num_layers,
            bias: self.o.bias,
            dropout: self.o.dropout,
            train: self.base.is_training(),
            bidirectional: self.o.bidirectional,
            batch_first: self.o.batch_first,
        }
    }

    fn check_input(&self, x: &Tensor, weights: &[&Tensor]) -> Result<()> {
        let wd = weights.first().map_or(self.o.dtype, |w| w.dtype());
        if x.dtype() != wd {
            bail!(
                DType,
                "RNN input dtype ({}) does not match weight dtype ({wd}). Convert input: input.to({wd}), or convert model: model.to({})",
                x.dtype(),
                x.dtype()
            );
        }
        Ok(())
    }

    fn check_input_size(&self, x: &Tensor) -> Result<()> {
        let got = x.dims().last().copied().unwrap_or(0);
        if got != self.input_size {
            bail!(
                Shape,
                "input.size(-1) must be equal to input_size. Expected {}, got {got}",
                self.input_size
            );
        }
        Ok(())
    }

    /// The expected shapes of `h0` (and `c0`) for a batch of `n`.
    fn state_shapes(&self, n: usize) -> Vec<Vec<usize>> {
        let rows = self.o.num_layers * self.dirs();
        let h_out = if self.o.proj_size > 0 { self.o.proj_size } else { self.hidden_size };
        let mut v = vec![vec![rows, n, h_out]];
        if self.mode == RnnMode::Lstm {
            v.push(vec![rows, n, self.hidden_size]);
        }
        v
    }

    /// The given initial states (batched) checked against the expected shapes, or zeros.
    fn initial_states(&self, hx: Option<Vec<Tensor>>, n: usize, dtype: DType) -> Result<Vec<Tensor>> {
        let shapes = self.state_shapes(n);
        let Some(hx) = hx else {
            return shapes.into_iter().map(|s| Tensor::zeros(s, dtype)).collect();
        };
        for (k, (h, want)) in hx.iter().zip(&shapes).enumerate() {
            if h.dims() != want.as_slice() {
                let which = if self.mode == RnnMode::Lstm { format!("hidden[{k}]") } else { "hidden".into() };
                bail!(Shape, "Expected {which} size {}, got {:?}", py_tuple(want), h.dims());
            }
            if h.dtype() != dtype {
                bail!(
                    DType,
                    "{}: the initial state has dtype {}, but the input has {dtype}: they must match",
                    self.name(),
                    h.dtype()
                );
            }
        }
        Ok(hx)
    }

    /// Checks the number and ranks of the initial states given with an input of `rank`.
    fn check_state_ranks(&self, hx: &[&Tensor], batched: bool) -> Result<()> {
        if hx.len() != self.mode.num_states() {
            if self.mode == RnnMode::Lstm {
                bail!(Value, "LSTM: the initial state must be a pair (h_0, c_0), got {} tensor(s)", hx.len());
            }
            bail!(Value, "{}: the initial state must be one tensor h_0, got {}", self.name(), hx.len());
        }
        let (want, what) = if batched { (3, "batched 3-D") } else { (2, "unbatched 2-D") };
        if hx.iter().all(|h| h.rank() == want) {
            return Ok(());
        }
        if self.mode == RnnMode::Lstm {
            bail!(
                Shape,
                "For {what} input, hx and cx should also be {want}-D but got ({}-D, {}-D) tensors",
                hx[0].rank(),
                hx[1].rank()
            );
        }
        bail!(Shape, "For {what} input, hx should also be {want}-D but got {}-D tensor", hx[0].rank())
    }

    /// A padded (or unbatched) input: `(output, [h_n] or [h_n, c_n])`.
    fn forward_tensor(&self, input: &Tensor, hx: Option<&[&Tensor]>) -> Result<(Tensor, Vec<Tensor>)> {
        let rank = input.rank();
        if rank != 2 && rank != 3 {
            let tensor =
                if matches!(self.mode, RnnMode::RnnTanh | RnnMode::RnnRelu) { " tensor" } else { "" };
            bail!(Shape, "{}: Expected input to be 2D or 3D, got {rank}D{tensor} instead", self.name());
        }
        let weights = self.weights()?;
        self.check_input(input, &weights)?;
        let batched = rank == 3;
        if let Some(hx) = hx {
            self.check_state_ranks(hx, batched)?;
        }
        let batch_dim: usize = if self.o.batch_first { 0 } else { 1 };
        let x = if batched { input.clone() } else { input.unsqueeze(batch_dim as isize)? };
        self.check_input_size(&x)?;
        let hx = match hx {
            Some(hx) => Some(
                hx.iter()
                    .map(|h| if batched { Ok((*h).clone()) } else { h.unsqueeze(1) })
                    .collect::<Result<Vec<_>>>()?,
            ),
            None => None,
        };
        let states = self.initial_states(hx, x.dims()[batch_dim], x.dtype())?;
        let refs: Vec<&Tensor> = states.iter().collect();
        let (out, finals) = F::rnn(self.mode, &x, &refs, &weights, &self.args())?;
        if batched {
            return Ok((out, finals));
        }
        let finals = finals.iter().map(|h| h.select(1, 0)).collect::<Result<Vec<_>>>()?;
        Ok((out.select(batch_dim as isize, 0)?, finals))
    }

    /// A packed input: `(packed output, [h_n] or [h_n, c_n])`, the states in the order of
    /// the batch before packing.
    fn forward_packed(
        &self,
        input: &PackedSequence,
        hx: Option<&[&Tensor]>,
    ) -> Result<(PackedSequence, Vec<Tensor>)> {
        let batch_sizes = input.batch_sizes_vec()?;
        let data = &input.data;
        let weights = self.weights()?;
        self.check_input(data, &weights)?;
        if data.rank() != 2 {
            bail!(Shape, "input must have 2 dimensions, got {}", data.rank());
        }
        self.check_input_size(data)?;
        let n = batch_sizes[0];
        let hx = match hx {
            Some(hx) => {
                self.check_state_ranks(hx, true)?;
                let hx =
                    self.initial_states(Some(hx.iter().map(|h| (*h).clone()).collect()), n, data.dtype())?;
                // into the packed (sorted) order
                match &input.sorted_indices {
                    Some(s) => hx.iter().map(|h| h.index_select(1, s)).collect::<Result<Vec<_>>>()?,
                    None => hx,
                }
            }
            None => self.initial_states(None, n, data.dtype())?,
        };
        let refs: Vec<&Tensor> = hx.iter().collect();
        let (out, finals) = F::rnn_packed(self.mode, data, &batch_sizes, &refs, &weights, &self.args())?;
        let finals = match &input.unsorted_indices {
            Some(u) => finals.iter().map(|h| h.index_select(1, u)).collect::<Result<Vec<_>>>()?,
            None => finals,
        };
        let out = PackedSequence { data: out, ..input.clone() };
        Ok((out, finals))
    }

    /// `forward_value`: `x`, `(x,)`, `(x, None)`, `(x, h0)` or `(x, (h0, c0))`, `x` a tensor
    /// or a packed sequence's dict.
    fn forward_value(&self, input: Value) -> Result<Value> {
        let (x, hx) = split_call(self.name(), input)?;
        let hx: Option<Vec<Tensor>> = match hx {
            Value::None => None,
            Value::Tensor(h) if self.mode != RnnMode::Lstm => Some(vec![h]),
            Value::Tuple(v) | Value::List(v) if self.mode == RnnMode::Lstm => {
                Some(v.into_iter().map(|h| h.into_tensor()).collect::<Result<Vec<_>>>()?)
            }
            other => {
                let want = if self.mode == RnnMode::Lstm { "a pair (h_0, c_0)" } else { "a Tensor h_0" };
                bail!(
                    Value,
                    "{}: the initial state must be None or {want}, got {}",
                    self.name(),
                    other.kind()
                )
            }
        };
        let hx_refs: Option<Vec<&Tensor>> = hx.as_ref().map(|v| v.iter().collect());
        let (out, finals) = if PackedSequence::is_packed_value(&x) {
            let (p, f) = self.forward_packed(&PackedSequence::from_value(&x)?, hx_refs.as_deref())?;
            (p.to_value(), f)
        } else {
            let x = x.into_tensor()?;
            let (o, f) = self.forward_tensor(&x, hx_refs.as_deref())?;
            (Value::Tensor(o), f)
        };
        Ok(Value::Tuple(vec![out, states_value(self.mode, finals)]))
    }

    fn extra_repr(&self) -> String {
        let o = self.o;
        let mut s = format!("{}, {}", self.input_size, self.hidden_size);
        if o.proj_size != 0 {
            s += &format!(", proj_size={}", o.proj_size);
        }
        if o.num_layers != 1 {
            s += &format!(", num_layers={}", o.num_layers);
        }
        if !o.bias {
            s += ", bias=False";
        }
        if o.batch_first {
            s += ", batch_first=True";
        }
        if o.dropout != 0.0 {
            s += &format!(", dropout={}", py_float(o.dropout));
        }
        if o.bidirectional {
            s += ", bidirectional=True";
        }
        s
    }
}

/// A call's value as `(input, initial state)`.
fn split_call(name: &str, input: Value) -> Result<(Value, Value)> {
    match input {
        Value::Tuple(mut v) | Value::List(mut v) => match v.len() {
            1 => Ok((v.remove(0), Value::None)),
            2 => {
                let hx = v.remove(1);
                Ok((v.remove(0), hx))
            }
            n => bail!(Value, "{name} takes (input, hx), got a tuple of {n} values"),
        },
        other => Ok((other, Value::None)),
    }
}

/// `h_n`, or `(h_n, c_n)` for LSTM.
fn states_value(mode: RnnMode, mut finals: Vec<Tensor>) -> Value {
    if mode == RnnMode::Lstm && finals.len() == 2 {
        let c = finals.remove(1);
        let h = finals.remove(0);
        Value::Tuple(vec![Value::Tensor(h), Value::Tensor(c)])
    } else {
        finals.into_iter().next().into()
    }
}

macro_rules! layer_view {
    ($t:ty, $mode:expr) => {
        impl $t {
            fn layer(&self) -> Layer<'_> {
                Layer {
                    mode: $mode(self),
                    base: &self.base,
                    input_size: self.input_size,
                    hidden_size: self.hidden_size,
                    o: &self.options,
                    names: &self.flat_weights_names,
                }
            }

            /// PyTorch's `_flat_weights_names`: the parameters' names in order.
            pub fn flat_weights_names(&self) -> &[String] {
                &self.flat_weights_names
            }

            /// `flatten_parameters()`: PyTorch compacts the weights for cuDNN; Pyrite's weights
            /// need nothing, so this does nothing (kept so ported code runs).
            pub fn flatten_parameters(&self) {}
        }

        impl Module for $t {
            fn forward_value(&self, input: Value) -> Result<Value> {
                self.layer().forward_value(input)
            }

            fn extra_repr(&self) -> String {
                self.layer().extra_repr()
            }
        }
    };
}

// ------------------------------------------------------------------------------ the layers

/// `nn.RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
/// batch_first=False, dropout=0.0, bidirectional=False)`: an Elman RNN,
/// `h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)` (or `relu`). Returns
/// `(output, h_n)`.
///
/// ```
/// use pyrite::nn::{Module, RnnNonlinearity, RnnOptions, RNN};
/// use pyrite::{DType, Tensor};
/// let rnn = RNN::new(4, 8, RnnOptions::new().nonlinearity(RnnNonlinearity::Relu).bidirectional(true))?;
/// let (out, h_n) = rnn.call(&Tensor::randn([6, 2, 4], DType::F32)?)?;
/// assert_eq!((out.dims(), h_n.dims()), (&[6, 2, 16][..], &[2, 2, 8][..]));
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
pub struct RNN {
    base: ModuleBase,
    pub input_size: usize,
    pub hidden_size: usize,
    #[module(skip)]
    pub options: RnnOptions,
    #[module(skip)]
    flat_weights_names: Vec<String>,
}

fn rnn_mode(r: &RNN) -> RnnMode {
    match r.options.nonlinearity {
        RnnNonlinearity::Tanh => RnnMode::RnnTanh,
        RnnNonlinearity::Relu => RnnMode::RnnRelu,
    }
}

impl RNN {
    pub fn new(input_size: usize, hidden_size: usize, options: RnnOptions) -> Result<RNN> {
        let mode = match options.nonlinearity {
            RnnNonlinearity::Tanh => RnnMode::RnnTanh,
            RnnNonlinearity::Relu => RnnMode::RnnRelu,
        };
        let (base, flat_weights_names) = build(mode, input_size, hidden_size, &options)?;
        Ok(RNN { base, input_size, hidden_size, options, flat_weights_names })
    }
}

layer_view!(RNN, rnn_mode);

/// `nn.LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
/// dropout=0.0, bidirectional=False, proj_size=0)`: long short-term memory. Gates `i, f, g, o`
/// (stacked in that order in the weights); `c_t = f * c_{t-1} + i * g`, `h_t = o * tanh(c_t)`,
/// projected by `weight_hr` when `proj_size > 0`. Returns `(output, (h_n, c_n))`.
#[derive(crate::Module)]
pub struct LSTM {
    base: ModuleBase,
    pub input_size: usize,
    pub hidden_size: usize,
    #[module(skip)]
    pub options: RnnOptions,
    #[module(skip)]
    flat_weights_names: Vec<String>,
}

impl LSTM {
    pub fn new(input_size: usize, hidden_size: usize, options: RnnOptions) -> Result<LSTM> {
        let (base, flat_weights_names) = build(RnnMode::Lstm, input_size, hidden_size, &options)?;
        Ok(LSTM { base, input_size, hidden_size, options, flat_weights_names })
    }
}

layer_view!(LSTM, |_: &LSTM| RnnMode::Lstm);

/// `nn.GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
/// bidirectional=False)`: gated recurrent unit. Gates `r, z, n`;
/// `n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))`, `h_t = (1 - z) * n + z * h_{t-1}`.
/// Returns `(output, h_n)`.
#[derive(crate::Module)]
pub struct GRU {
    base: ModuleBase,
    pub input_size: usize,
    pub hidden_size: usize,
    #[module(skip)]
    pub options: RnnOptions,
    #[module(skip)]
    flat_weights_names: Vec<String>,
}

impl GRU {
    pub fn new(input_size: usize, hidden_size: usize, options: RnnOptions) -> Result<GRU> {
        let (base, flat_weights_names) = build(RnnMode::Gru, input_size, hidden_size, &options)?;
        Ok(GRU { base, input_size, hidden_size, options, flat_weights_names })
    }
}

layer_view!(GRU, |_: &GRU| RnnMode::Gru);

// ------------------------------------------------------------------------------- the cells

/// The parameters of a cell, in PyTorch's order, initialised `U(-1/sqrt(H), 1/sqrt(H))`.
type CellParams = (Parameter, Parameter, Option<Parameter>, Option<Parameter>);

fn cell_params(
    input_size: usize,
    hidden_size: usize,
    gates: usize,
    bias: bool,
    dtype: DType,
) -> Result<CellParams> {
    let bound = if hidden_size > 0 { 1.0 / (hidden_size as f64).sqrt() } else { 0.0 };
    let make = |shape: Vec<usize>| -> Result<Parameter> {
        let t = Tensor::empty(shape, dtype)?;
        init::uniform_(&t, -bound, bound, None)?;
        Parameter::new(t)
    };
    let g = gates * hidden_size;
    let w_ih = make(vec![g, input_size])?;
    let w_hh = make(vec![g, hidden_size])?;
    let (b_ih, b_hh) = if bias { (Some(make(vec![g])?), Some(make(vec![g])?)) } else { (None, None) };
    Ok((w_ih, w_hh, b_ih, b_hh))
}

/// Checks a cell's input and states (PyTorch's messages) and brings them to 2-D; `hx` is
/// zeros when absent. Returns `(x, states, batched)`.
fn cell_inputs(
    name: &str,
    input: &Tensor,
    hx: Option<&[&Tensor]>,
    input_size: usize,
    hidden_size: usize,
    num_states: usize,
    weight_dtype: DType,
) -> Result<(Tensor, Vec<Tensor>, bool)> {
    let rank = input.rank();
    if rank != 1 && rank != 2 {
        bail!(Shape, "{name}: Expected input to be 1D or 2D, got {rank}D instead");
    }
    if input.dtype() != weight_dtype {
        bail!(DType, "{name}: input dtype ({}) does not match weight dtype ({weight_dtype})", input.dtype());
    }
    let batched = rank == 2;
    let x = if batched { input.clone() } else { input.unsqueeze(0)? };
    if x.dims()[1] != input_size {
        bail!(Shape, "input has inconsistent input_size: got {} expected {input_size}", x.dims()[1]);
    }
    let n = x.dims()[0];
    let Some(hx) = hx else {
        let z = Tensor::zeros([n, hidden_size], x.dtype())?;
        return Ok((x, vec![z; num_states], batched));
    };
    if hx.len() != num_states {
        bail!(Value, "{name} expects {num_states} hidden state(s), got {}", hx.len());
    }
    let mut states = Vec::with_capacity(num_states);
    for (k, h) in hx.iter().enumerate() {
        if batched && h.rank() != 2 {
            bail!(Shape, "Expected 2D hidden{k} (batch x hidden_size), but got {}D tensor", h.rank());
        }
        if !batched && h.rank() != 1 {
            bail!(
                Shape,
                "Expected 1D hidden{k} (hidden_size) for an unbatched 1D input, but got {}D tensor",
                h.rank()
            );
        }
        let h = if batched { (*h).clone() } else { h.unsqueeze(0)? };
        if h.dims()[0] != n {
            bail!(Shape, "Input batch size {n} doesn't match hidden{k} batch size {}", h.dims()[0]);
        }
        if h.dims()[1] != hidden_size {
            bail!(
                Shape,
                "hidden{k} has inconsistent hidden_size: got {}, expected {hidden_size}",
                h.dims()[1]
            );
        }
        if h.dtype() != x.dtype() {
            bail!(DType, "{name}: hidden{k} has dtype {}, but the input has {}", h.dtype(), x.dtype());
        }
        states.push(h);
    }
    Ok((x, states, batched))
}

fn unbatch(t: Tensor, batched: bool) -> Result<Tensor> {
    if batched {
        Ok(t)
    } else {
        t.select(0, 0)
    }
}

fn cell_extra_repr(
    input_size: usize,
    hidden_size: usize,
    bias: bool,
    nonlinearity: Option<RnnNonlinearity>,
) -> String {
    let mut s = format!("{input_size}, {hidden_size}");
    if !bias {
        s += &format!(", bias={}", py_bool(bias));
    }
    if let Some(n) = nonlinearity.filter(|&n| n != RnnNonlinearity::Tanh) {
        s += &format!(", nonlinearity={}", n.as_str());
    }
    s
}

/// A cell's `(input, hx)` value: `x`, `(x,)`, `(x, None)`, `(x, h)` or (LSTM) `(x, (h, c))`.
fn cell_call(name: &str, input: Value, lstm: bool) -> Result<(Tensor, Option<Vec<Tensor>>)> {
    let (x, hx) = split_call(name, input)?;
    let x = x.into_tensor()?;
    let hx = match hx {
        Value::None => None,
        Value::Tensor(h) if !lstm => Some(vec![h]),
        Value::Tuple(v) | Value::List(v) if lstm => {
            Some(v.into_iter().map(|h| h.into_tensor()).collect::<Result<_>>()?)
        }
        other => {
            let want = if lstm { "a pair (h, c)" } else { "a Tensor" };
            bail!(Value, "{name}: hx must be None or {want}, got {}", other.kind())
        }
    };
    Ok((x, hx))
}

/// `nn.RNNCell(input_size, hidden_size, bias=True, nonlinearity='tanh')`: one step of an
/// Elman RNN, `h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`. Called with `x` (`h` zeros) or
/// `(x, h)`.
///
/// ```
/// use pyrite::nn::{Module, RNNCell};
/// use pyrite::{DType, Tensor};
/// let cell = RNNCell::new(3, 5)?;
/// let mut h = Tensor::zeros([2, 5], DType::F32)?;
/// for _ in 0..4 {
///     h = cell.call((&Tensor::randn([2, 3], DType::F32)?, &h))?;
/// }
/// assert_eq!(h.dims(), &[2, 5]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
pub struct RNNCell {
    base: ModuleBase,
    pub weight_ih: Parameter,
    pub weight_hh: Parameter,
    pub bias_ih: Option<Parameter>,
    pub bias_hh: Option<Parameter>,
    pub input_size: usize,
    pub hidden_size: usize,
    #[module(skip)]
    pub nonlinearity: RnnNonlinearity,
}

impl RNNCell {
    /// With biases and `tanh`, in f32.
    pub fn new(input_size: usize, hidden_size: usize) -> Result<RNNCell> {
        RNNCell::with_options(input_size, hidden_size, true, RnnNonlinearity::Tanh, DType::F32)
    }

    /// `nn.RNNCell(input_size, hidden_size, bias, nonlinearity, dtype=dtype)`.
    pub fn with_options(
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        nonlinearity: RnnNonlinearity,
        dtype: DType,
    ) -> Result<RNNCell> {
        let (weight_ih, weight_hh, bias_ih, bias_hh) = cell_params(input_size, hidden_size, 1, bias, dtype)?;
        Ok(RNNCell {
            base: ModuleBase::new(),
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            input_size,
            hidden_size,
            nonlinearity,
        })
    }

    fn step(&self, input: &Tensor, hx: Option<&[&Tensor]>) -> Result<Tensor> {
        let (x, h, batched) =
            cell_inputs("RNNCell", input, hx, self.input_size, self.hidden_size, 1, self.weight_ih.dtype())?;
        let f = match self.nonlinearity {
            RnnNonlinearity::Tanh => F::rnn_tanh_cell,
            RnnNonlinearity::Relu => F::rnn_relu_cell,
        };
        let h =
            f(&x, &h[0], &self.weight_ih, &self.weight_hh, self.bias_ih.as_deref(), self.bias_hh.as_deref())?;
        unbatch(h, batched)
    }
}

impl Module for RNNCell {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.step(input, None)
    }

    fn forward_value(&self, input: Value) -> Result<Value> {
        let (x, hx) = cell_call("RNNCell", input, false)?;
        let refs: Option<Vec<&Tensor>> = hx.as_ref().map(|v| v.iter().collect());
        Ok(Value::Tensor(self.step(&x, refs.as_deref())?))
    }

    fn extra_repr(&self) -> String {
        cell_extra_repr(self.input_size, self.hidden_size, self.bias_ih.is_some(), Some(self.nonlinearity))
    }
}

/// `nn.LSTMCell(input_size, hidden_size, bias=True)`: one LSTM step. Called with `x` (zero
/// states) or `(x, (h, c))`; returns `(h', c')`.
#[derive(crate::Module)]
pub struct LSTMCell {
    base: ModuleBase,
    pub weight_ih: Parameter,
    pub weight_hh: Parameter,
    pub bias_ih: Option<Parameter>,
    pub bias_hh: Option<Parameter>,
    pub input_size: usize,
    pub hidden_size: usize,
}

impl LSTMCell {
    /// With biases, in f32.
    pub fn new(input_size: usize, hidden_size: usize) -> Result<LSTMCell> {
        LSTMCell::with_options(input_size, hidden_size, true, DType::F32)
    }

    /// `nn.LSTMCell(input_size, hidden_size, bias, dtype=dtype)`.
    pub fn with_options(input_size: usize, hidden_size: usize, bias: bool, dtype: DType) -> Result<LSTMCell> {
        let (weight_ih, weight_hh, bias_ih, bias_hh) = cell_params(input_size, hidden_size, 4, bias, dtype)?;
        Ok(LSTMCell {
            base: ModuleBase::new(),
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            input_size,
            hidden_size,
        })
    }

    fn step(&self, input: &Tensor, hx: Option<&[&Tensor]>) -> Result<(Tensor, Tensor)> {
        let (x, s, batched) =
            cell_inputs("LSTMCell", input, hx, self.input_size, self.hidden_size, 2, self.weight_ih.dtype())?;
        let (h, c) = F::lstm_cell(
            &x,
            (&s[0], &s[1]),
            &self.weight_ih,
            &self.weight_hh,
            self.bias_ih.as_deref(),
            self.bias_hh.as_deref(),
        )?;
        Ok((unbatch(h, batched)?, unbatch(c, batched)?))
    }
}

impl Module for LSTMCell {
    fn forward_value(&self, input: Value) -> Result<Value> {
        let (x, hx) = cell_call("LSTMCell", input, true)?;
        let refs: Option<Vec<&Tensor>> = hx.as_ref().map(|v| v.iter().collect());
        let (h, c) = self.step(&x, refs.as_deref())?;
        Ok(Value::from((h, c)))
    }

    fn extra_repr(&self) -> String {
        cell_extra_repr(self.input_size, self.hidden_size, self.bias_ih.is_some(), None)
    }
}

/// `nn.GRUCell(input_size, hidden_size, bias=True)`: one GRU step. Called with `x` (`h`
/// zeros) or `(x, h)`.
#[derive(crate::Module)]
pub struct GRUCell {
    base: ModuleBase,
    pub weight_ih: Parameter,
    pub weight_hh: Parameter,
    pub bias_ih: Option<Parameter>,
    pub bias_hh: Option<Parameter>,
    pub input_size: usize,
    pub hidden_size: usize,
}

impl GRUCell {
    /// With biases, in f32.
    pub fn new(input_size: usize, hidden_size: usize) -> Result<GRUCell> {
        GRUCell::with_options(input_size, hidden_size, true, DType::F32)
    }

    /// `nn.GRUCell(input_size, hidden_size, bias, dtype=dtype)`.
    pub fn with_options(input_size: usize, hidden_size: usize, bias: bool, dtype: DType) -> Result<GRUCell> {
        let (weight_ih, weight_hh, bias_ih, bias_hh) = cell_params(input_size, hidden_size, 3, bias, dtype)?;
        Ok(GRUCell {
            base: ModuleBase::new(),
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            input_size,
            hidden_size,
        })
    }

    fn step(&self, input: &Tensor, hx: Option<&[&Tensor]>) -> Result<Tensor> {
        let (x, h, batched) =
            cell_inputs("GRUCell", input, hx, self.input_size, self.hidden_size, 1, self.weight_ih.dtype())?;
        let h = F::gru_cell(
            &x,
            &h[0],
            &self.weight_ih,
            &self.weight_hh,
            self.bias_ih.as_deref(),
            self.bias_hh.as_deref(),
        )?;
        unbatch(h, batched)
    }
}

impl Module for GRUCell {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        self.step(input, None)
    }

    fn forward_value(&self, input: Value) -> Result<Value> {
        let (x, hx) = cell_call("GRUCell", input, false)?;
        let refs: Option<Vec<&Tensor>> = hx.as_ref().map(|v| v.iter().collect());
        Ok(Value::Tensor(self.step(&x, refs.as_deref())?))
    }

    fn extra_repr(&self) -> String {
        cell_extra_repr(self.input_size, self.hidden_size, self.bias_ih.is_some(), None)
    }
}

// ------------------------------------------------------------------------------ the calls

// `rnn(input)`, `rnn(input, h_0)`: `(output, h_n)`; packed in, packed out. The same for GRU.
args!(RNN, GRU: &Tensor => (Tensor, Tensor), |x| t(x));
args!(RNN, GRU: (&Tensor, &Tensor) => (Tensor, Tensor), |(x, h)| Value::Tuple(vec![t(x), t(h)]));
args!(RNN, GRU: (&Tensor, Option<&Tensor>) => (Tensor, Tensor), |(x, h)| Value::Tuple(vec![t(x), opt(h)]));
args!(RNN, GRU: &PackedSequence => (PackedSequence, Tensor), |x| x.to_value());
args!(RNN, GRU: (&PackedSequence, &Tensor) => (PackedSequence, Tensor),
    |(x, h)| Value::Tuple(vec![x.to_value(), t(h)]));
args!(RNN, GRU: (&PackedSequence, Option<&Tensor>) => (PackedSequence, Tensor),
    |(x, h)| Value::Tuple(vec![x.to_value(), opt(h)]));

// `lstm(input)`, `lstm(input, (h_0, c_0))`: `(output, (h_n, c_n))`.
fn pair(h: &Tensor, c: &Tensor) -> Value {
    Value::Tuple(vec![t(h), t(c)])
}
args!(LSTM: &Tensor => (Tensor, (Tensor, Tensor)), |x| t(x));
args!(LSTM: (&Tensor, (&Tensor, &Tensor)) => (Tensor, (Tensor, Tensor)),
    |(x, (h, c))| Value::Tuple(vec![t(x), pair(h, c)]));
args!(LSTM: (&Tensor, &(Tensor, Tensor)) => (Tensor, (Tensor, Tensor)),
    |(x, (h, c))| Value::Tuple(vec![t(x), pair(h, c)]));
args!(LSTM: (&Tensor, Option<(&Tensor, &Tensor)>) => (Tensor, (Tensor, Tensor)),
    |(x, hx)| Value::Tuple(vec![t(x), hx.map_or(Value::None, |(h, c)| pair(h, c))]));
args!(LSTM: &PackedSequence => (PackedSequence, (Tensor, Tensor)), |x| x.to_value());
args!(LSTM: (&PackedSequence, (&Tensor, &Tensor)) => (PackedSequence, (Tensor, Tensor)),
    |(x, (h, c))| Value::Tuple(vec![x.to_value(), pair(h, c)]));
args!(LSTM: (&PackedSequence, &(Tensor, Tensor)) => (PackedSequence, (Tensor, Tensor)),
    |(x, (h, c))| Value::Tuple(vec![x.to_value(), pair(h, c)]));
args!(LSTM: (&PackedSequence, Option<(&Tensor, &Tensor)>) => (PackedSequence, (Tensor, Tensor)),
    |(x, hx)| Value::Tuple(vec![x.to_value(), hx.map_or(Value::None, |(h, c)| pair(h, c))]));

// `cell(input)`, `cell(input, hx)`: the next hidden state; LSTMCell's is `(h', c')`.
args!(RNNCell, GRUCell: &Tensor => Tensor, |x| t(x));
args!(RNNCell, GRUCell: (&Tensor, &Tensor) => Tensor, |(x, h)| Value::Tuple(vec![t(x), t(h)]));
args!(RNNCell, GRUCell: (&Tensor, Option<&Tensor>) => Tensor, |(x, h)| Value::Tuple(vec![t(x), opt(h)]));
args!(LSTMCell: &Tensor => (Tensor, Tensor), |x| t(x));
args!(LSTMCell: (&Tensor, (&Tensor, &Tensor)) => (Tensor, Tensor),
    |(x, (h, c))| Value::Tuple(vec![t(x), pair(h, c)]));
args!(LSTMCell: (&Tensor, &(Tensor, Tensor)) => (Tensor, Tensor),
    |(x, (h, c))| Value::Tuple(vec![t(x), pair(h, c)]));
args!(LSTMCell: (&Tensor, Option<(&Tensor, &Tensor)>) => (Tensor, Tensor),
    |(x, hx)| Value::Tuple(vec![t(x), hx.map_or(Value::None, |(h, c)| pair(h, c))]));

typed_call!(RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell);
