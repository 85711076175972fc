//! Convolution layers: `Conv1d/2d/3d` and `ConvTranspose1d/2d/3d` (PyTorch's
//! `torch/nn/modules/conv.py`). The kernels are the core's `ops::conv` (im2col and our GEMM,
//! forward and both backward passes).
//!
//! ```
//! use pyrite::nn::{Conv2d, ConvOptions, Module};
//! use pyrite::{DType, Tensor};
//! let conv = Conv2d::new(1, 32, 3, ConvOptions::new().padding(1))?;
//! assert_eq!(conv.to_string(), "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");
//! let y = conv.call(&Tensor::randn([8, 1, 28, 28], DType::F32)?)?;
//! assert_eq!(y.dims(), &[8, 32, 28, 28]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::functional::{self as F, PadMode};
use crate::init;
use crate::module::{Module, ModuleBase};
use crate::parameter::Parameter;
use crate::value::Value;
use pyrite_core::{bail, DType, Result, Tensor};

/// `padding=` of a convolution: sizes, or PyTorch's `"same"` / `"valid"`.
#[derive(Clone, Debug, PartialEq)]
pub enum Padding {
    /// One size for every spatial dim, or one per dim.
    Sizes(Vec<usize>),
    /// The output has the input's size (stride 1 only).
    Same,
    /// No padding.
    Valid,
}

/// PyTorch's keyword arguments of the convolutions, with its defaults (builder methods take
/// one number for every spatial dim or a slice with one per dim).
#[derive(Clone, Debug)]
pub struct ConvOptions {
    pub stride: Vec<usize>,
    pub padding: Padding,
    pub dilation: Vec<usize>,
    pub groups: usize,
    pub bias: bool,
    pub padding_mode: PadMode,
    /// ConvTranspose only.
    pub output_padding: Vec<usize>,
    pub dtype: DType,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: vec![1],
            padding: Padding::Sizes(vec![0]),
            dilation: vec![1],
            groups: 1,
            bias: true,
            padding_mode: PadMode::Constant,
            output_padding: vec![0],
            dtype: DType::F32,
        }
    }
}

impl ConvOptions {
    pub fn new() -> ConvOptions {
        ConvOptions::default()
    }
    pub fn stride(mut self, s: impl Into<Sizes>) -> Self {
        self.stride = s.into().0;
        self
    }
    pub fn padding(mut self, p: impl Into<Sizes>) -> Self {
        self.padding = Padding::Sizes(p.into().0);
        self
    }
    /// `padding="same"`.
    pub fn padding_same(mut self) -> Self {
        self.padding = Padding::Same;
        self
    }
    /// `padding="valid"`.
    pub fn padding_valid(mut self) -> Self {
        self.padding = Padding::Valid;
        self
    }
    pub fn dilation(mut self, d: impl Into<Sizes>) -> Self {
        self.dilation = d.into().0;
        self
    }
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
    pub fn bias(mut self, b: bool) -> Self {
        self.bias = b;
        self
    }
    /// `padding_mode`: zeros (`Constant`), reflect, replicate or circular.
    pub fn padding_mode(mut self, m: PadMode) -> Self {
        self.padding_mode = m;
        self
    }
    pub fn output_padding(mut self, p: impl Into<Sizes>) -> Self {
        self.output_padding = p.into().0;
        self
    }
    pub fn dtype(mut self, d: DType) -> Self {
        self.dtype = d;
        self
    }
}

/// One size for every spatial dim (`3`) or one per dim (`[3, 5]`).
#[derive(Clone, Debug)]
pub struct Sizes(pub Vec<usize>);

impl From<usize> for Sizes {
    fn from(v: usize) -> Sizes {
        Sizes(vec![v])
    }
}
impl From<&[usize]> for Sizes {
    fn from(v: &[usize]) -> Sizes {
        Sizes(v.to_vec())
    }
}
impl<const N: usize> From<[usize; N]> for Sizes {
    fn from(v: [usize; N]) -> Sizes {
        Sizes(v.to_vec())
    }
}
impl From<Vec<usize>> for Sizes {
    fn from(v: Vec<usize>) -> Sizes {
        Sizes(v)
    }
}

/// `v` as one entry per spatial dim (`_ntuple`).
pub(crate) fn ntuple(v: &[usize], n: usize, what: &str) -> Result<Vec<usize>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        k if k == n => Ok(v.to_vec()),
        k => bail!(Value, "{what} must have 1 or {n} values, got {k}"),
    }
}

fn tuple(v: &[usize]) -> String {
    crate::module::py_tuple(v)
}

fn mode_name(m: PadMode) -> &'static str {
    match m {
        PadMode::Constant => "zeros",
        PadMode::Reflect => "reflect",
        PadMode::Replicate => "replicate",
        PadMode::Circular => "circular",
    }
}

/// The state and checks shared by every convolution.
#[derive(Clone, Debug)]
struct ConvConfig {
    name: &'static str,
    spatial: usize,
    in_channels: usize,
    out_channels: usize,
    kernel_size: Vec<usize>,
    stride: Vec<usize>,
    padding: Padding,
    /// Numeric padding per dim (for `Same`: the left side).
    pad: Vec<usize>,
    /// `(left, right)` per spatial dim, first dim first.
    pad_lr: Vec<(usize, usize)>,
    dilation: Vec<usize>,
    output_padding: Vec<usize>,
    groups: usize,
    padding_mode: PadMode,
}

impl ConvConfig {
    fn new(
        name: &'static str,
        spatial: usize,
        in_channels: usize,
        out_channels: usize,
        kernel_size: Sizes,
        o: &ConvOptions,
        transposed: bool,
    ) -> Result<ConvConfig> {
        if o.groups == 0 {
            bail!(Value, "groups must be a positive integer");
        }
        if !in_channels.is_multiple_of(o.groups) {
            bail!(Value, "in_channels must be divisible by groups");
        }
        if !out_channels.is_multiple_of(o.groups) {
            bail!(Value, "out_channels must be divisible by groups");
        }
        let kernel_size = ntuple(&kernel_size.0, spatial, "kernel_size")?;
        if kernel_size.contains(&0) {
            bail!(Value, "{name}: kernel_size must be positive, got {:?}", kernel_size);
        }
        let stride = ntuple(&o.stride, spatial, "stride")?;
        if stride.contains(&0) {
            bail!(Value, "{name}: stride must be positive, got {:?}", stride);
        }
        let dilation = ntuple(&o.dilation, spatial, "dilation")?;
        if dilation.contains(&0) {
            bail!(Value, "{name}: dilation must be positive, got {:?}", dilation);
        }
        let output_padding = ntuple(&o.output_padding, spatial, "output_padding")?;
        let pad_lr: Vec<(usize, usize)> = match &o.padding {
            Padding::Sizes(p) => ntuple(p, spatial, "padding")?.into_iter().map(|p| (p, p)).collect(),
            Padding::Valid => vec![(0, 0); spatial],
            Padding::Same => {
                if transposed {
                    bail!(Value, "padding='same' is not supported for {name}");
                }
                if stride.iter().any(|&s| s != 1) {
                    bail!(Value, "padding='same' is not supported for strided convolutions");
                }
                kernel_size
                    .iter()
                    .zip(&dilation)
                    .map(|(&k, &d)| {
                        let total = d * (k - 1);
                        (total / 2, total - total / 2)
                    })
                    .collect()
            }
        };
        if transposed && o.padding_mode != PadMode::Constant {
            bail!(Value, "Only \"zeros\" padding mode is supported for {name}");
        }
        Ok(ConvConfig {
            name,
            spatial,
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding: o.padding.clone(),
            pad: pad_lr.iter().map(|p| p.0).collect(),
            pad_lr,
            dilation,
            output_padding,
            groups: o.groups,
            padding_mode: o.padding_mode,
        })
    }

    /// The batched input, and whether it was unbatched (PyTorch's message otherwise).
    fn batched(&self, x: &Tensor) -> Result<(Tensor, bool)> {
        let s = self.spatial;
        let op = self.name.to_lowercase().replace("transpose", "_transpose");
        if x.rank() == s + 1 {
            Ok((x.unsqueeze(0)?, true))
        } else if x.rank() == s + 2 {
            Ok((x.clone(), false))
        } else {
            bail!(
                Shape,
                "Expected {}D (unbatched) or {}D (batched) input to {op}, but got input of size: {:?}",
                s + 1,
                s + 2,
                x.dims()
            )
        }
    }

    fn extra_repr(&self, bias: bool) -> String {
        let mut s = format!(
            "{}, {}, kernel_size={}, stride={}",
            self.in_channels,
            self.out_channels,
            tuple(&self.kernel_size),
            tuple(&self.stride)
        );
        match &self.padding {
            Padding::Same => s += ", padding=same",
            Padding::Valid => s += ", padding=valid",
            Padding::Sizes(_) => {
                if self.pad.iter().any(|&p| p != 0) {
                    s += &format!(", padding={}", tuple(&self.pad));
                }
            }
        }
        if self.dilation.iter().any(|&d| d != 1) {
            s += &format!(", dilation={}", tuple(&self.dilation));
        }
        if self.output_padding.iter().any(|&p| p != 0) {
            s += &format!(", output_padding={}", tuple(&self.output_padding));
        }
        if self.groups != 1 {
            s += &format!(", groups={}", self.groups);
        }
        if !bias {
            s += ", bias=False";
        }
        if self.padding_mode != PadMode::Constant {
            s += &format!(", padding_mode={}", mode_name(self.padding_mode));
        }
        s
    }
}

/// The weight and bias of a convolution, initialised as PyTorch does: Kaiming-uniform with
/// `a = sqrt(5)` for the weight, `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` for the bias.
fn conv_params(
    shape: &[usize],
    out_channels: usize,
    bias: bool,
    dtype: DType,
) -> Result<(Parameter, Option<Parameter>)> {
    let w = Tensor::empty(shape, dtype)?;
    let b = if bias { Some(Tensor::empty([out_channels], dtype)?) } else { None };
    let (fan_in, _) = init::calculate_fan_in_and_fan_out(&w)?;
    crate::linear::reset_uniform(&w, b.as_ref(), fan_in)?;
    Ok((Parameter::new(w)?, b.map(Parameter::new).transpose()?))
}

/// `F.conv1d/2d/3d(x, weight, bias, stride, padding, dilation, groups)` for a batched or
/// unbatched input, with `padding` as sizes, `Same` or `Valid` (zero padding).
pub fn conv(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvOptions) -> Result<Tensor> {
    if weight.rank() < 3 {
        bail!(
            Shape,
            "conv: weight must have at least 3 dims [out, in/groups, *kernel], got shape {}",
            weight.shape()
        );
    }
    let spatial = weight.rank() - 2;
    let name = ["Conv1d", "Conv2d", "Conv3d"].get(spatial - 1).copied().unwrap_or("ConvNd");
    let k: Vec<usize> = weight.dims()[2..].to_vec();
    let cfg = ConvConfig::new(
        name,
        spatial,
        weight.dims()[1] * opts.groups,
        weight.dims()[0],
        Sizes(k),
        opts,
        false,
    )?;
    run_conv(&cfg, x, weight, bias)
}

/// `F.conv_transpose1d/2d/3d(x, weight, bias=None, stride=1, padding=0, output_padding=0,
/// groups=1, dilation=1)` for a batched or unbatched input; the weight is `[in, out/groups,
/// *kernel]` as in PyTorch. `opts.bias` and `opts.dtype` are the layers' and unused here.
pub fn conv_transpose(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvOptions,
) -> Result<Tensor> {
    if weight.rank() < 3 {
        bail!(
            Shape,
            "conv_transpose: weight must have at least 3 dims [in, out/groups, *kernel], got shape {}",
            weight.shape()
        );
    }
    let spatial = weight.rank() - 2;
    let name = ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
        .get(spatial - 1)
        .copied()
        .unwrap_or("ConvTransposeNd");
    let k: Vec<usize> = weight.dims()[2..].to_vec();
    let cfg = ConvConfig::new(
        name,
        spatial,
        weight.dims()[0],
        weight.dims()[1] * opts.groups,
        Sizes(k),
        opts,
        true,
    )?;
    let (xb, unbatched) = cfg.batched(x)?;
    let y = pyrite_core::ops::conv::conv_transpose(
        &xb,
        weight,
        bias,
        &cfg.stride,
        &cfg.pad,
        &cfg.output_padding,
        &cfg.dilation,
        cfg.groups,
    )?;
    if unbatched {
        y.squeeze_dim(0)
    } else {
        Ok(y)
    }
}

fn run_conv(cfg: &ConvConfig, x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let name = match cfg.spatial {
        1 => "aten::conv1d",
        2 => "aten::conv2d",
        _ => "aten::conv3d",
    };
    let _prof = pyrite_core::profiler_record::op(name, &[x, weight]);
    let (x, unbatched) = cfg.batched(x)?;
    let symmetric = cfg.pad_lr.iter().all(|(l, r)| l == r);
    let y = if cfg.padding_mode == PadMode::Constant && symmetric {
        pyrite_core::ops::conv::conv(&x, weight, bias, &cfg.stride, &cfg.pad, &cfg.dilation, cfg.groups)?
    } else {
        // non-zero padding modes (and asymmetric "same"): pad first, as PyTorch does
        let pads: Vec<isize> = cfg.pad_lr.iter().rev().flat_map(|&(l, r)| [l as isize, r as isize]).collect();
        let xp = F::pad(&x, &pads, &F::PadOptions { mode: cfg.padding_mode, value: None })?;
        let zeros = vec![0; cfg.spatial];
        pyrite_core::ops::conv::conv(&xp, weight, bias, &cfg.stride, &zeros, &cfg.dilation, cfg.groups)?
    };
    if unbatched {
        y.squeeze_dim(0)
    } else {
        Ok(y)
    }
}

macro_rules! conv_layer {
    ($($name:ident, $spatial:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(in_channels, out_channels, kernel_size, ...)`: weight `[out, in/groups, *kernel]` as in PyTorch.")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub weight: Parameter,
            pub bias: Option<Parameter>,
            #[module(skip)]
            config: ConvConfig,
        }

        impl $name {
            /// `kernel_size`: one size or one per dim; `opts`: PyTorch's keywords.
            pub fn new(in_channels: usize, out_channels: usize, kernel_size: impl Into<Sizes>, opts: ConvOptions) -> Result<$name> {
                let config = ConvConfig::new(stringify!($name), $spatial, in_channels, out_channels, kernel_size.into(), &opts, false)?;
                let mut shape = vec![out_channels, in_channels / opts.groups];
                shape.extend(&config.kernel_size);
                let (weight, bias) = conv_params(&shape, out_channels, opts.bias, opts.dtype)?;
                Ok($name { base: ModuleBase::new(), weight, bias, config })
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let r = x.rank();
                if r == $spatial + 1 || r == $spatial + 2 {
                    let c = x.dims()[r - $spatial - 1];
                    if c != self.config.in_channels {
                        bail!(
                            Shape,
                            "Given groups={}, weight of size {:?}, expected input{:?} to have {} channels, but got {} channels instead",
                            self.config.groups,
                            self.weight.dims(),
                            x.dims(),
                            self.config.in_channels,
                            c
                        );
                    }
                }
                run_conv(&self.config, x, &self.weight, self.bias.as_deref())
            }

            fn extra_repr(&self) -> String {
                self.config.extra_repr(self.bias.is_some())
            }
        }
    )*};
}

conv_layer! {
    Conv1d, 1;
    Conv2d, 2;
    Conv3d, 3;
}

macro_rules! conv_transpose_layer {
    ($($name:ident, $spatial:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(in_channels, out_channels, kernel_size, ...)`: weight `[in, out/groups, *kernel]` as in PyTorch. Call with `(x, output_size)` through [`", stringify!($name), "::forward_with_output_size`] to pick among the output sizes a stride allows.")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub weight: Parameter,
            pub bias: Option<Parameter>,
            #[module(skip)]
            config: ConvConfig,
        }

        impl $name {
            pub fn new(in_channels: usize, out_channels: usize, kernel_size: impl Into<Sizes>, opts: ConvOptions) -> Result<$name> {
                let config = ConvConfig::new(stringify!($name), $spatial, in_channels, out_channels, kernel_size.into(), &opts, true)?;
                for (d, &op) in config.output_padding.iter().enumerate() {
                    if op >= config.stride[d] && op >= config.dilation[d] {
                        bail!(Value, "output padding must be smaller than either stride or dilation, but got output_padding={:?}, stride={:?}, dilation={:?}", config.output_padding, config.stride, config.dilation);
                    }
                }
                let mut shape = vec![in_channels, out_channels / opts.groups];
                shape.extend(&config.kernel_size);
                let (weight, bias) = conv_params(&shape, out_channels, opts.bias, opts.dtype)?;
                Ok($name { base: ModuleBase::new(), weight, bias, config })
            }

            /// `forward(x, output_size)`: the output_padding that gives `output_size` (the
            /// spatial sizes, or with the batch and channel dims too).
            pub fn forward_with_output_size(&self, x: &Tensor, output_size: Option<&[usize]>) -> Result<Tensor> {
                let (xb, unbatched) = self.config.batched(x)?;
                let s = $spatial;
                let output_padding = match output_size {
                    None => self.config.output_padding.clone(),
                    Some(size) => {
                        let size = if size.len() > s { &size[size.len() - s..] } else { size };
                        if size.len() != s {
                            bail!(Value, "ConvTranspose{}D: output_size must have {} or {} elements (got {})", s, s, s + 2, size.len());
                        }
                        let mut op = Vec::with_capacity(s);
                        for d in 0..s {
                            let inp = xb.dims()[d + 2];
                            let c = &self.config;
                            let min = ((inp as isize - 1) * c.stride[d] as isize - 2 * c.pad[d] as isize
                                + (c.dilation[d] * (c.kernel_size[d] - 1)) as isize
                                + 1) as isize;
                            let max = min + c.stride[d] as isize - 1;
                            let want = size[d] as isize;
                            if want < min || want > max {
                                bail!(Value, "requested an output size of {:?}, but valid sizes range from {} to {} (for an input of {:?})", size, min, max, &xb.dims()[2..]);
                            }
                            op.push((want - min) as usize);
                        }
                        op
                    }
                };
                let c = &self.config;
                let y = pyrite_core::ops::conv::conv_transpose(&xb, &self.weight, self.bias.as_deref(), &c.stride, &c.pad, &output_padding, &c.dilation, c.groups)?;
                if unbatched { y.squeeze_dim(0) } else { Ok(y) }
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                self.forward_with_output_size(x, None)
            }

            fn forward_value(&self, input: Value) -> Result<Value> {
                match input {
                    Value::Tensor(x) => Ok(Value::Tensor(self.forward(&x)?)),
                    v => {
                        let x = v.get(0)?.as_tensor()?.clone();
                        let size = match v.get(1)? {
                            Value::Tensor(t) => t.to_dtype(DType::I64)?.to_vec::<i64>()?.into_iter().map(|d| d as usize).collect::<Vec<_>>(),
                            Value::List(l) | Value::Tuple(l) => l.iter().map(|d| match d { Value::Int(i) => Ok(*i as usize), o => bail!(Value, "output_size: expected ints, got {}", o.kind()) }).collect::<Result<_>>()?,
                            Value::None => return Ok(Value::Tensor(self.forward(&x)?)),
                            o => bail!(Value, "output_size: expected a list of ints, got {}", o.kind()),
                        };
                        Ok(Value::Tensor(self.forward_with_output_size(&x, Some(&size))?))
                    }
                }
            }

            fn extra_repr(&self) -> String {
                self.config.extra_repr(self.bias.is_some())
            }
        }
    )*};
}

conv_transpose_layer! {
    ConvTranspose1d, 1;
    ConvTranspose2d, 2;
    ConvTranspose3d, 3;
}
