//! The recurrences of `nn.RNN`, `nn.LSTM`, `nn.GRU` and their cells, as functions of tensors:
//! one step ([`rnn_tanh_cell`], [`rnn_relu_cell`], [`lstm_cell`], [`gru_cell`]: PyTorch's
//! `torch.rnn_tanh_cell` ...) and a whole multi-layer, possibly bidirectional, run over a
//! padded sequence ([`rnn`]) or a packed one ([`rnn_packed`]) (PyTorch's `torch.lstm` /
//! `torch.gru` / `torch.rnn_tanh` with their two call forms).
//!
//! How a run is computed, for each layer and direction:
//! 1. the input projection `x W_ih^T + b_ih` for every timestep at once: one matmul over the
//!    `(timesteps * batch, input)` rows;
//! 2. a loop over the timesteps for the hidden part `h W_hh^T + b_hh` and the gates.
//!
//! A padded input runs as a packed one whose batch size is the same at every step, so both
//! forms share one loop. Everything is made of differentiable core ops, except one small
//! recorded op ([`split`] below) that cuts a tensor into parts with a single backward
//! (a `cat` of the parts' gradients), so that slicing the input projection into timesteps
//! costs `O(T)` in the backward pass, not `O(T^2)`.
//!
//! ```
//! use pyrite::nn::functional as F;
//! use pyrite::{DType, Tensor};
//! // GRU step, hidden size 2, input size 3, batch 1
//! let (x, h) = (Tensor::ones([1, 3], DType::F32)?, Tensor::zeros([1, 2], DType::F32)?);
//! let (w_ih, w_hh) = (Tensor::zeros([6, 3], DType::F32)?, Tensor::zeros([6, 2], DType::F32)?);
//! let h1 = F::gru_cell(&x, &h, &w_ih, &w_hh, None, None)?;
//! // all gates see 0: r = z = 1/2, n = tanh(0) = 0, h' = (1 - z) n + z h = 0
//! assert_eq!(h1.to_vec2::<f32>()?, vec![vec![0., 0.]]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use super::linear::{dropout, linear, DropoutOptions};
use pyrite_core::autograd::{self, Function, FunctionCtx};
use pyrite_core::{bail, Result, Tensor};

/// Which recurrence a layer runs (PyTorch's `mode` of `RNNBase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnMode {
    /// `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`.
    RnnTanh,
    /// `h' = relu(W_ih x + b_ih + W_hh h + b_hh)`.
    RnnRelu,
    /// Gates `i, f, g, o` (in that order in the weights); carries `(h, c)`.
    Lstm,
    /// Gates `r, z, n`; `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`.
    Gru,
}

impl RnnMode {
    /// The number of gates stacked in the weights' rows: 4 for LSTM, 3 for GRU, 1 otherwise.
    pub fn gates(self) -> usize {
        match self {
            RnnMode::RnnTanh | RnnMode::RnnRelu => 1,
            RnnMode::Lstm => 4,
            RnnMode::Gru => 3,
        }
    }

    /// The layer's name in messages: `RNN`, `LSTM`, `GRU`.
    pub fn layer_name(self) -> &'static str {
        match self {
            RnnMode::RnnTanh | RnnMode::RnnRelu => "RNN",
            RnnMode::Lstm => "LSTM",
            RnnMode::Gru => "GRU",
        }
    }

    /// How many hidden-state tensors the recurrence carries: 2 (`h`, `c`) for LSTM, else 1.
    pub fn num_states(self) -> usize {
        if self == RnnMode::Lstm {
            2
        } else {
            1
        }
    }
}

/// The keywords of a whole run ([`rnn`], [`rnn_packed`]): PyTorch's `has_biases`,
/// `num_layers`, `dropout`, `train`, `bidirectional`, `batch_first` (the last is ignored by
/// [`rnn_packed`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RnnArgs {
    pub num_layers: usize,
    pub bias: bool,
    /// Dropout on each layer's output except the last's, when `train`.
    pub dropout: f64,
    pub train: bool,
    pub bidirectional: bool,
    pub batch_first: bool,
}

impl Default for RnnArgs {
    /// One layer with biases, no dropout, unidirectional, `(L, N, H_in)` input.
    fn default() -> Self {
        RnnArgs {
            num_layers: 1,
            bias: true,
            dropout: 0.0,
            train: false,
            bidirectional: false,
            batch_first: false,
        }
    }
}

// ---------------------------------------------------------------------------------- one step

/// `torch.rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih, b_hh)`: `tanh(x W_ih^T + b_ih + h W_hh^T
/// + b_hh)` for `input [N, H_in]`, `hx [N, H]`.
pub fn rnn_tanh_cell(
    input: &Tensor,
    hx: &Tensor,
    w_ih: &Tensor,
    w_hh: &Tensor,
    b_ih: Option<&Tensor>,
    b_hh: Option<&Tensor>,
) -> Result<Tensor> {
    let inputs = [Some(input), Some(hx), Some(w_ih), Some(w_hh), b_ih, b_hh];
    if let Some(r) = pyrite_core::autocast::dispatch("rnn_tanh_cell", &inputs, |t| {
        rnn_tanh_cell(t.at(0), t.at(1), t.at(2), t.at(3), t.opt(4), t.opt(5))
    }) {
        return r;
    }
    let w = StepWeights { w_hh, b_hh, w_hr: None };
    Ok(step(RnnMode::RnnTanh, &linear(input, w_ih, b_ih)?, hx, None, &w)?.0)
}

/// `torch.rnn_relu_cell`: [`rnn_tanh_cell`] with `relu`.
pub fn rnn_relu_cell(
    input: &Tensor,
    hx: &Tensor,
    w_ih: &Tensor,
    w_hh: &Tensor,
    b_ih: Option<&Tensor>,
    b_hh: Option<&Tensor>,
) -> Result<Tensor> {
    let inputs = [Some(input), Some(hx), Some(w_ih), Some(w_hh), b_ih, b_hh];
    if let Some(r) = pyrite_core::autocast::dispatch("rnn_relu_cell", &inputs, |t| {
        rnn_relu_cell(t.at(0), t.at(1), t.at(2), t.at(3), t.opt(4), t.opt(5))
    }) {
        return r;
    }
    let w = StepWeights { w_hh, b_hh, w_hr: None };
    Ok(step(RnnMode::RnnRelu, &linear(input, w_ih, b_ih)?, hx, None, &w)?.0)
}

/// `torch.lstm_cell(input, (hx, cx), w_ih, w_hh, b_ih, b_hh)`: one LSTM step, returning
/// `(h', c')`. Weights `[4H, H_in]`, `[4H, H]` with the gates `i, f, g, o` stacked.
pub fn lstm_cell(
    input: &Tensor,
    hx: (&Tensor, &Tensor),
    w_ih: &Tensor,
    w_hh: &Tensor,
    b_ih: Option<&Tensor>,
    b_hh: Option<&Tensor>,
) -> Result<(Tensor, Tensor)> {
    let inputs = [Some(input), Some(hx.0), Some(hx.1), Some(w_ih), Some(w_hh), b_ih, b_hh];
    if let Some(r) = pyrite_core::autocast::dispatch("lstm_cell", &inputs, |t| {
        lstm_cell(t.at(0), (t.at(1), t.at(2)), t.at(3), t.at(4), t.opt(5), t.opt(6))
    }) {
        return r;
    }
    let w = StepWeights { w_hh, b_hh, w_hr: None };
    let (h, c) = step(RnnMode::Lstm, &linear(input, w_ih, b_ih)?, hx.0, Some(hx.1), &w)?;
    match c {
        Some(c) => Ok((h, c)),
        None => bail!(Value, "lstm_cell: no cell state"),
    }
}

/// `torch.gru_cell(input, hx, w_ih, w_hh, b_ih, b_hh)`: one GRU step. Weights `[3H, H_in]`,
/// `[3H, H]` with the gates `r, z, n` stacked.
pub fn gru_cell(
    input: &Tensor,
    hx: &Tensor,
    w_ih: &Tensor,
    w_hh: &Tensor,
    b_ih: Option<&Tensor>,
    b_hh: Option<&Tensor>,
) -> Result<Tensor> {
    let inputs = [Some(input), Some(hx), Some(w_ih), Some(w_hh), b_ih, b_hh];
    if let Some(r) = pyrite_core::autocast::dispatch("gru_cell", &inputs, |t| {
        gru_cell(t.at(0), t.at(1), t.at(2), t.at(3), t.opt(4), t.opt(5))
    }) {
        return r;
    }
    let w = StepWeights { w_hh, b_hh, w_hr: None };
    Ok(step(RnnMode::Gru, &linear(input, w_ih, b_ih)?, hx, None, &w)?.0)
}

/// The weights of the hidden part of a step.
struct StepWeights<'a> {
    w_hh: &'a Tensor,
    b_hh: Option<&'a Tensor>,
    /// LSTM's projection `h = (o * tanh(c)) W_hr^T`.
    w_hr: Option<&'a Tensor>,
}

/// One step given the input projection `xw = x W_ih^T + b_ih` (`[N, G*H]`): the new `h` (and
/// `c` for LSTM).
fn step(
    mode: RnnMode,
    xw: &Tensor,
    h: &Tensor,
    c: Option<&Tensor>,
    w: &StepWeights,
) -> Result<(Tensor, Option<Tensor>)> {
    if h.rank() != 2 || xw.rank() != 2 {
        bail!(
            Shape,
            "{}: expected a 2-D input [batch, features] and a 2-D hidden state [batch, hidden], got shapes {} and {}",
            mode.layer_name(),
            xw.shape(),
            h.shape()
        );
    }
    let hw = linear(h, w.w_hh, w.b_hh)?;
    if xw.dims() != hw.dims() {
        bail!(
            Shape,
            "{}: the input projection has shape {} but the hidden projection {} (check the weights' shapes)",
            mode.layer_name(),
            xw.shape(),
            hw.shape()
        );
    }
    let gate_size = hw.dims()[1] / mode.gates();
    match mode {
        RnnMode::RnnTanh => Ok((xw.add(&hw)?.tanh()?, None)),
        RnnMode::RnnRelu => Ok((xw.add(&hw)?.relu()?, None)),
        RnnMode::Lstm => {
            let Some(c) = c else { bail!(Value, "lstm_cell expects two hidden states") };
            let g = split(&xw.add(&hw)?, &[gate_size; 4], 1)?;
            let (i, f, gg, o) = (g[0].sigmoid()?, g[1].sigmoid()?, g[2].tanh()?, g[3].sigmoid()?);
            let c = f.mul(c)?.add(&i.mul(&gg)?)?;
            let mut h = o.mul(&c.tanh()?)?;
            if let Some(w_hr) = w.w_hr {
                h = linear(&h, w_hr, None)?;
            }
            Ok((h, Some(c)))
        }
        RnnMode::Gru => {
            let x = split(xw, &[gate_size; 3], 1)?;
            let hh = split(&hw, &[gate_size; 3], 1)?;
            let r = x[0].add(&hh[0])?.sigmoid()?;
            let z = x[1].add(&hh[1])?.sigmoid()?;
            let n = x[2].add(&r.mul(&hh[2])?)?.tanh()?;
            // (1 - z) * n + z * h
            Ok((n.add(&z.mul(&h.sub(&n)?)?)?, None))
        }
    }
}

// -------------------------------------------------------------------------------- whole runs

/// A whole run over a padded sequence: PyTorch's `torch.lstm(input, hx, params, has_biases,
/// num_layers, dropout, train, bidirectional, batch_first)` and its `gru` / `rnn_tanh` /
/// `rnn_relu` siblings.
///
/// - `input`: `[L, N, H_in]` (`[N, L, H_in]` with `batch_first`);
/// - `hx`: `[h0]`, or `[h0, c0]` for LSTM, each `[num_layers * D, N, H_out]` (`c0`: `H`);
/// - `weights`: per layer, per direction, `w_ih, w_hh` then `b_ih, b_hh` (with `bias`) then
///   `w_hr` (LSTM with projections): the order of the layer's parameters.
///
/// Returns the output `[L, N, D * H_out]` (batch first with `batch_first`) and `[h_n]` or
/// `[h_n, c_n]`.
pub fn rnn(
    mode: RnnMode,
    input: &Tensor,
    hx: &[&Tensor],
    weights: &[&Tensor],
    args: &RnnArgs,
) -> Result<(Tensor, Vec<Tensor>)> {
    if input.rank() != 3 {
        bail!(Shape, "{}: input must have 3 dimensions, got {}", mode.layer_name(), input.rank());
    }
    let x = if args.batch_first { input.transpose(0, 1)? } else { input.clone() };
    let (l, n, i) = (x.dims()[0], x.dims()[1], x.dims()[2]);
    let data = x.reshape([l * n, i])?;
    let (out, states) = run(mode, &data, &vec![n; l], hx, weights, args)?;
    let width = out.dims()[1];
    let out = out.reshape([l, n, width])?;
    let out = if args.batch_first { out.transpose(0, 1)? } else { out };
    Ok((out, states))
}

/// A whole run over a packed sequence: PyTorch's `torch.lstm(data, batch_sizes, hx, params,
/// has_biases, num_layers, dropout, train, bidirectional)`. `data` is `[sum(batch_sizes),
/// H_in]`, the timesteps one after the other, each with the `batch_sizes[t]` sequences still
/// running (sorted longest first); `hx` is in that sorted order. Returns the output data
/// `[sum(batch_sizes), D * H_out]` in the same layout, and `h_n` (`c_n`) for each sequence
/// at its own last step.
pub fn rnn_packed(
    mode: RnnMode,
    data: &Tensor,
    batch_sizes: &[usize],
    hx: &[&Tensor],
    weights: &[&Tensor],
    args: &RnnArgs,
) -> Result<(Tensor, Vec<Tensor>)> {
    if data.rank() != 2 {
        bail!(Shape, "{}: packed input data must have 2 dimensions, got {}", mode.layer_name(), data.rank());
    }
    if batch_sizes.windows(2).any(|w| w[1] > w[0]) {
        bail!(Value, "{}: batch_sizes must not increase, got {batch_sizes:?}", mode.layer_name());
    }
    if batch_sizes.iter().sum::<usize>() != data.dims()[0] {
        bail!(
            Shape,
            "{}: batch_sizes sum to {} but the packed data has {} rows",
            mode.layer_name(),
            batch_sizes.iter().sum::<usize>(),
            data.dims()[0]
        );
    }
    run(mode, data, batch_sizes, hx, weights, args)
}

/// The weights of one layer and direction.
struct DirWeights<'a> {
    w_ih: &'a Tensor,
    b_ih: Option<&'a Tensor>,
    step: StepWeights<'a>,
}

/// Groups `weights` per layer and direction, checking the count.
fn group<'a>(mode: RnnMode, weights: &[&'a Tensor], args: &RnnArgs) -> Result<Vec<DirWeights<'a>>> {
    let dirs = if args.bidirectional { 2 } else { 1 };
    let groups = args.num_layers * dirs;
    let base = if args.bias { 4 } else { 2 };
    let per = if groups > 0 && weights.len().is_multiple_of(groups) { weights.len() / groups } else { 0 };
    let proj = per == base + 1 && mode == RnnMode::Lstm;
    if groups == 0 || !(per == base || proj) {
        bail!(
            Value,
            "{}: expected {} weights ({} layers x {} directions x {} tensors{}), got {}",
            mode.layer_name(),
            groups * base,
            args.num_layers,
            dirs,
            base,
            if mode == RnnMode::Lstm { ", one more each with projections" } else { "" },
            weights.len()
        );
    }
    Ok(weights
        .chunks(per)
        .map(|w| DirWeights {
            w_ih: w[0],
            b_ih: if args.bias { Some(w[2]) } else { None },
            step: StepWeights {
                w_hh: w[1],
                b_hh: if args.bias { Some(w[3]) } else { None },
                w_hr: if proj { Some(w[per - 1]) } else { None },
            },
        })
        .collect())
}

/// The shared loop: `data` `[T, H_in]` with `batch_sizes` (non-increasing, summing to `T`).
fn run(
    mode: RnnMode,
    data: &Tensor,
    batch_sizes: &[usize],
    hx: &[&Tensor],
    weights: &[&Tensor],
    args: &RnnArgs,
) -> Result<(Tensor, Vec<Tensor>)> {
    let name = mode.layer_name();
    if batch_sizes.is_empty() {
        bail!(Value, "Expected sequence length to be larger than 0 in RNN");
    }
    if !(0.0..=1.0).contains(&args.dropout) {
        bail!(Value, "dropout should be a number in range [0, 1], got {}", args.dropout);
    }
    let w = group(mode, weights, args)?;
    if hx.len() != mode.num_states() {
        bail!(Value, "{name}: expected {} hidden state tensors, got {}", mode.num_states(), hx.len());
    }
    let dirs = if args.bidirectional { 2 } else { 1 };
    let batch = batch_sizes[0];
    for (k, h) in hx.iter().enumerate() {
        let want_rows = args.num_layers * dirs;
        if h.rank() != 3 || h.dims()[0] != want_rows || h.dims()[1] != batch {
            bail!(
                Shape,
                "{name}: hidden state {k} must be [{want_rows}, {batch}, *], got shape {}",
                h.shape()
            );
        }
        if h.dtype() != data.dtype() {
            bail!(
                DType,
                "{name}: hidden state {k} has dtype {}, but the input has {}",
                h.dtype(),
                data.dtype()
            );
        }
    }
    let mut layer_input = data.clone();
    let mut finals: Vec<Vec<Tensor>> = vec![Vec::new(); mode.num_states()];
    for layer in 0..args.num_layers {
        let mut outs = Vec::with_capacity(dirs);
        for dir in 0..dirs {
            let k = layer * dirs + dir;
            let dw = &w[k];
            let h0 = hx[0].select(0, k as isize)?;
            let c0 = if mode == RnnMode::Lstm { Some(hx[1].select(0, k as isize)?) } else { None };
            // the input projection of every timestep at once
            let xw = linear(&layer_input, dw.w_ih, dw.b_ih)?;
            let (out, h_n, c_n) = direction(mode, &xw, batch_sizes, &h0, c0.as_ref(), &dw.step, dir == 1)?;
            outs.push(out);
            finals[0].push(h_n);
            if let Some(c_n) = c_n {
                finals[1].push(c_n);
            }
        }
        let out = if outs.len() == 1 { outs.remove(0) } else { Tensor::cat(&outs, 1)? };
        layer_input = if layer + 1 < args.num_layers && args.dropout > 0.0 && args.train {
            dropout(&out, &DropoutOptions { p: args.dropout, ..Default::default() })?
        } else {
            out
        };
    }
    let states = finals.iter().map(|f| Tensor::stack(f, 0)).collect::<Result<Vec<_>>>()?;
    Ok((layer_input, states))
}

/// One direction of one layer over packed rows: returns the output rows `[T, H_out]` and
/// the final `h` (and `c`) of every sequence, `[N, *]`.
fn direction(
    mode: RnnMode,
    xw: &Tensor,
    batch_sizes: &[usize],
    h0: &Tensor,
    c0: Option<&Tensor>,
    w: &StepWeights,
    reverse: bool,
) -> Result<(Tensor, Tensor, Option<Tensor>)> {
    let steps = split(xw, batch_sizes, 0)?;
    let mut outs: Vec<Tensor> = Vec::with_capacity(steps.len());
    if !reverse {
        // sequences end over time (the batch shrinks): keep each one's last state when it leaves
        let (mut h, mut c) = (h0.clone(), c0.cloned());
        let (mut done_h, mut done_c) = (Vec::new(), Vec::new());
        for (x, &b) in steps.iter().zip(batch_sizes) {
            let rows = h.dims()[0];
            if b < rows {
                done_h.push(h.narrow(0, b as isize, rows - b)?);
                h = h.narrow(0, 0, b)?;
                if let Some(cc) = &c {
                    done_c.push(cc.narrow(0, b as isize, rows - b)?);
                    c = Some(cc.narrow(0, 0, b)?);
                }
            }
            let (nh, nc) = step(mode, x, &h, c.as_ref(), w)?;
            outs.push(nh.clone());
            h = nh;
            c = nc;
        }
        done_h.push(h);
        done_h.reverse();
        let h_n = cat_rows(done_h)?;
        let c_n = match c {
            Some(c) => {
                done_c.push(c);
                done_c.reverse();
                Some(cat_rows(done_c)?)
            }
            None => None,
        };
        Ok((cat_rows(outs)?, h_n, c_n))
    } else {
        // backwards in time, sequences join as the batch grows: each starts from its h0 row
        let last = *batch_sizes.last().unwrap_or(&0);
        let mut h = h0.narrow(0, 0, last)?;
        let mut c = match c0 {
            Some(c0) => Some(c0.narrow(0, 0, last)?),
            None => None,
        };
        for (x, &b) in steps.iter().zip(batch_sizes).rev() {
            let rows = h.dims()[0];
            if b > rows {
                h = Tensor::cat(&[h, h0.narrow(0, rows as isize, b - rows)?], 0)?;
                if let (Some(cc), Some(c0)) = (&c, c0) {
                    c = Some(Tensor::cat(&[cc.clone(), c0.narrow(0, rows as isize, b - rows)?], 0)?);
                }
            }
            let (nh, nc) = step(mode, x, &h, c.as_ref(), w)?;
            outs.push(nh.clone());
            h = nh;
            c = nc;
        }
        outs.reverse();
        Ok((cat_rows(outs)?, h, c))
    }
}

fn cat_rows(mut parts: Vec<Tensor>) -> Result<Tensor> {
    if parts.len() == 1 {
        return Ok(parts.remove(0));
    }
    Tensor::cat(&parts, 0)
}

/// `x.split(sizes, dim)` recorded as one node whose backward is `cat` of the parts'
/// gradients (a chain of `narrow`s would build a full-size gradient per part).
fn split(x: &Tensor, sizes: &[usize], dim: isize) -> Result<Vec<Tensor>> {
    if !x.requires_grad() || !autograd::is_grad_enabled() {
        return x.split_sizes(sizes, dim);
    }
    autograd::apply(Split { sizes: sizes.to_vec(), dim }, &[x])
}

struct Split {
    sizes: Vec<usize>,
    dim: isize,
}

impl Function for Split {
    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        inputs[0].split_sizes(&self.sizes, self.dim)
    }

    fn backward(&self, _ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(Tensor::cat(grads, self.dim)?)])
    }

    fn name(&self) -> String {
        "SplitWithSizesBackward0".to_string()
    }
}
