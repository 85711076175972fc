//! Pooling layers (PyTorch's `torch/nn/modules/pooling.py`): max, average, adaptive,
//! power-average pooling and max unpooling, 1-3 spatial dims, batched or unbatched. The
//! kernels are the core's `ops::pool`; max pooling keeps its argmax for backward and, with
//! `return_indices`, returns it.
//!
//! ```
//! use pyrite::nn::{MaxPool2d, Module, PoolOptions};
//! use pyrite::{DType, Tensor};
//! let pool = MaxPool2d::new(2, PoolOptions::new());
//! assert_eq!(pool.to_string(), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
//! assert_eq!(pool.call(&Tensor::randn([1, 3, 8, 8], DType::F32)?)?.dims(), &[1, 3, 4, 4]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::conv::{ntuple, Sizes};
use crate::module::{py_bool, py_tuple, Module, ModuleBase};
use crate::value::Value;
use pyrite_core::ops::pool;
use pyrite_core::{bail, DType, Result, Tensor};

/// PyTorch's keywords of the pooling layers, with its defaults: `stride` the kernel size
/// (`None`), padding 0, dilation 1, no `ceil_mode`, no `return_indices`, `count_include_pad`
/// true (`None`), no `divisor_override`. The kernel size is the layers' (and functions') own
/// argument, as it has no default in PyTorch. An empty `padding` or `dilation` also means
/// PyTorch's default (0, 1).
#[derive(Clone, Debug)]
pub struct PoolOptions {
    pub stride: Option<Vec<usize>>,
    pub padding: Vec<usize>,
    pub dilation: Vec<usize>,
    pub ceil_mode: bool,
    pub return_indices: bool,
    pub count_include_pad: Option<bool>,
    pub divisor_override: Option<usize>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            stride: None,
            padding: vec![0],
            dilation: vec![1],
            ceil_mode: false,
            return_indices: false,
            count_include_pad: None,
            divisor_override: None,
        }
    }
}

impl PoolOptions {
    /// PyTorch's defaults (the same as `PoolOptions::default()`).
    pub fn new() -> PoolOptions {
        PoolOptions::default()
    }

    /// The padding, PyTorch's 0 when left empty.
    pub(crate) fn padding_or_default(&self) -> &[usize] {
        if self.padding.is_empty() {
            &[0]
        } else {
            &self.padding
        }
    }

    /// The dilation, PyTorch's 1 when left empty.
    pub(crate) fn dilation_or_default(&self) -> &[usize] {
        if self.dilation.is_empty() {
            &[1]
        } else {
            &self.dilation
        }
    }
    pub fn stride(mut self, s: impl Into<Sizes>) -> Self {
        self.stride = Some(s.into().0);
        self
    }
    pub fn padding(mut self, p: impl Into<Sizes>) -> Self {
        self.padding = p.into().0;
        self
    }
    pub fn dilation(mut self, d: impl Into<Sizes>) -> Self {
        self.dilation = d.into().0;
        self
    }
    pub fn ceil_mode(mut self, c: bool) -> Self {
        self.ceil_mode = c;
        self
    }
    /// MaxPool: also return the flat argmax of each window (for `MaxUnpool`).
    pub fn return_indices(mut self, r: bool) -> Self {
        self.return_indices = r;
        self
    }
    /// AvgPool: count the zero padding in the divisor (default true).
    pub fn count_include_pad(mut self, c: bool) -> Self {
        self.count_include_pad = Some(c);
        self
    }
    /// AvgPool: divide by this instead of the window size.
    pub fn divisor_override(mut self, d: usize) -> Self {
        self.divisor_override = Some(d);
        self
    }
}

/// A size as PyTorch prints what it was given: a number, or a tuple.
fn given(v: &[usize]) -> String {
    if v.len() == 1 {
        v[0].to_string()
    } else {
        py_tuple(v)
    }
}

/// The batched input (`[N, C, *spatial]`) and whether it was unbatched.
fn batched(x: &Tensor, spatial: usize, op: &str) -> Result<(Tensor, bool)> {
    if x.rank() == spatial + 1 {
        Ok((x.unsqueeze(0)?, true))
    } else if x.rank() == spatial + 2 {
        Ok((x.clone(), false))
    } else {
        bail!(
            Shape,
            "{op}: Expected {}D or {}D input tensor, but got {}D input of size {:?}",
            spatial + 1,
            spatial + 2,
            x.rank(),
            x.dims()
        )
    }
}

fn unbatch(y: Tensor, unbatched: bool) -> Result<Tensor> {
    if unbatched {
        y.squeeze_dim(0)
    } else {
        Ok(y)
    }
}

macro_rules! max_pool_layer {
    ($($name:ident, $spatial:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(kernel_size, stride=kernel_size, padding=0, dilation=1, return_indices=False, ceil_mode=False)`.")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub kernel_size: Vec<usize>,
            #[module(skip)]
            pub opts: PoolOptions,
        }

        impl $name {
            pub fn new(kernel_size: impl Into<Sizes>, opts: PoolOptions) -> $name {
                $name { base: ModuleBase::new(), kernel_size: kernel_size.into().0, opts }
            }

            /// The pooled values and the flat argmax of each window.
            pub fn forward_with_indices(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
                let (xb, unbatched) = batched(x, $spatial, stringify!($name))?;
                let stride = self.opts.stride.clone().unwrap_or_default();
                let (v, i) = pool::max_pool(&xb, &self.kernel_size, &stride, self.opts.padding_or_default(), self.opts.dilation_or_default(), self.opts.ceil_mode)?;
                Ok((unbatch(v, unbatched)?, unbatch(i, unbatched)?))
            }
        }

        impl Module for $name {
            fn forward_value(&self, input: Value) -> Result<Value> {
                let x = input.into_tensor()?;
                let (v, i) = self.forward_with_indices(&x)?;
                Ok(if self.opts.return_indices { Value::from((v, i)) } else { Value::Tensor(v) })
            }

            fn extra_repr(&self) -> String {
                format!(
                    "kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}",
                    given(&self.kernel_size),
                    given(self.opts.stride.as_deref().unwrap_or(&self.kernel_size)),
                    given(self.opts.padding_or_default()),
                    given(self.opts.dilation_or_default()),
                    py_bool(self.opts.ceil_mode)
                )
            }
        }
    )*};
}

max_pool_layer! {
    MaxPool1d, 1;
    MaxPool2d, 2;
    MaxPool3d, 3;
}

macro_rules! avg_pool_layer {
    ($($name:ident, $spatial:literal, $tuple_repr:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(kernel_size, stride=kernel_size, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)`.")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub kernel_size: Vec<usize>,
            #[module(skip)]
            pub opts: PoolOptions,
        }

        impl $name {
            pub fn new(kernel_size: impl Into<Sizes>, opts: PoolOptions) -> $name {
                $name { base: ModuleBase::new(), kernel_size: kernel_size.into().0, opts }
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let (xb, unbatched) = batched(x, $spatial, stringify!($name))?;
                let stride = self.opts.stride.clone().unwrap_or_default();
                let y = pool::avg_pool(
                    &xb,
                    &self.kernel_size,
                    &stride,
                    self.opts.padding_or_default(),
                    self.opts.ceil_mode,
                    self.opts.count_include_pad.unwrap_or(true),
                    self.opts.divisor_override,
                )?;
                unbatch(y, unbatched)
            }

            fn extra_repr(&self) -> String {
                // AvgPool1d keeps its sizes as 1-tuples; the others print what they were given
                let show = |v: &[usize]| if $tuple_repr { py_tuple(&ntuple(v, 1, "").unwrap_or(v.to_vec())) } else { given(v) };
                format!(
                    "kernel_size={}, stride={}, padding={}",
                    show(&self.kernel_size),
                    show(self.opts.stride.as_deref().unwrap_or(&self.kernel_size)),
                    show(self.opts.padding_or_default())
                )
            }
        }
    )*};
}

avg_pool_layer! {
    AvgPool1d, 1, true;
    AvgPool2d, 2, false;
    AvgPool3d, 3, false;
}

/// The output size of an adaptive pooling: one per spatial dim, `None` keeps the input's.
fn adaptive_size(x: &Tensor, output_size: &[Option<usize>], spatial: usize) -> Result<Vec<usize>> {
    let sizes: Vec<Option<usize>> = match output_size.len() {
        1 => vec![output_size[0]; spatial],
        n if n == spatial => output_size.to_vec(),
        n => bail!(Value, "output_size must have 1 or {spatial} values, got {n}"),
    };
    let r = x.rank();
    Ok(sizes.iter().enumerate().map(|(d, s)| s.unwrap_or(x.dims()[r - spatial + d])).collect())
}

fn show_adaptive(v: &[Option<usize>]) -> String {
    let s: Vec<String> = v.iter().map(|x| x.map_or("None".to_string(), |x| x.to_string())).collect();
    if s.len() == 1 {
        s[0].clone()
    } else {
        format!("({})", s.join(", "))
    }
}

macro_rules! adaptive_layer {
    ($($name:ident, $spatial:literal, $max:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(output_size)`: pools to a fixed output size (`None` in a dim keeps the input's).")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            #[module(skip)]
            pub output_size: Vec<Option<usize>>,
            pub return_indices: bool,
        }

        impl $name {
            /// One size for every dim, or one per dim (`None`: the input's size).
            pub fn new(output_size: &[Option<usize>]) -> $name {
                $name { base: ModuleBase::new(), output_size: output_size.to_vec(), return_indices: false }
            }
        }

        impl Module for $name {
            fn forward_value(&self, input: Value) -> Result<Value> {
                let x = input.into_tensor()?;
                let (xb, unbatched) = batched(&x, $spatial, stringify!($name))?;
                let size = adaptive_size(&xb, &self.output_size, $spatial)?;
                if $max {
                    let (v, i) = pool::adaptive_max_pool(&xb, &size)?;
                    let (v, i) = (unbatch(v, unbatched)?, unbatch(i, unbatched)?);
                    Ok(if self.return_indices { Value::from((v, i)) } else { Value::Tensor(v) })
                } else {
                    Ok(Value::Tensor(unbatch(pool::adaptive_avg_pool(&xb, &size)?, unbatched)?))
                }
            }

            fn extra_repr(&self) -> String {
                format!("output_size={}", show_adaptive(&self.output_size))
            }
        }
    )*};
}

adaptive_layer! {
    AdaptiveAvgPool1d, 1, false;
    AdaptiveAvgPool2d, 2, false;
    AdaptiveAvgPool3d, 3, false;
    AdaptiveMaxPool1d, 1, true;
    AdaptiveMaxPool2d, 2, true;
    AdaptiveMaxPool3d, 3, true;
}

macro_rules! lp_pool_layer {
    ($($name:ident, $spatial:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(norm_type, kernel_size, stride=None, ceil_mode=False)`: `(sum over the window of x^p)^(1/p)`.")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub norm_type: f64,
            pub kernel_size: Vec<usize>,
            #[module(skip)]
            pub stride: Option<Vec<usize>>,
            pub ceil_mode: bool,
        }

        impl $name {
            pub fn new(norm_type: f64, kernel_size: impl Into<Sizes>, stride: Option<Vec<usize>>, ceil_mode: bool) -> $name {
                $name { base: ModuleBase::new(), norm_type, kernel_size: kernel_size.into().0, stride, ceil_mode }
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let (xb, unbatched) = batched(x, $spatial, stringify!($name))?;
                let k = ntuple(&self.kernel_size, $spatial, "kernel_size")?;
                let stride = self.stride.clone().unwrap_or_default();
                let zeros = vec![0; $spatial];
                let avg = pool::avg_pool(&xb.pow_scalar(self.norm_type)?, &k, &stride, &zeros, self.ceil_mode, true, None)?;
                // PyTorch: (sign(out) * relu(|out|)) * window ^ (1 / p)
                let window: usize = k.iter().product();
                let y = avg.sign()?.mul(&avg.abs()?.relu()?)?.mul_scalar(window as f64)?.pow_scalar(1.0 / self.norm_type)?;
                unbatch(y, unbatched)
            }

            fn extra_repr(&self) -> String {
                let p = if self.norm_type.fract() == 0.0 { format!("{}", self.norm_type as i64) } else { self.norm_type.to_string() };
                format!(
                    "norm_type={p}, kernel_size={}, stride={}, ceil_mode={}",
                    given(&self.kernel_size),
                    self.stride.as_deref().map_or("None".to_string(), given),
                    py_bool(self.ceil_mode)
                )
            }
        }
    )*};
}

lp_pool_layer! {
    LPPool1d, 1;
    LPPool2d, 2;
}

macro_rules! max_unpool_layer {
    ($($name:ident, $spatial:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(kernel_size, stride=kernel_size, padding=0)`: puts each value back at its max-pooling index, zeros elsewhere. Called with `(values, indices)` or `(values, indices, output_size)`.")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub kernel_size: Vec<usize>,
            pub stride: Vec<usize>,
            pub padding: Vec<usize>,
        }

        impl $name {
            pub fn new(kernel_size: impl Into<Sizes>, stride: Option<Vec<usize>>, padding: impl Into<Sizes>) -> Result<$name> {
                let kernel_size = ntuple(&kernel_size.into().0, $spatial, "kernel_size")?;
                let stride = ntuple(&stride.unwrap_or(kernel_size.clone()), $spatial, "stride")?;
                let padding = ntuple(&padding.into().0, $spatial, "padding")?;
                Ok($name { base: ModuleBase::new(), kernel_size, stride, padding })
            }

            /// `forward(values, indices, output_size)`.
            pub fn unpool(&self, x: &Tensor, indices: &Tensor, output_size: Option<&[usize]>) -> Result<Tensor> {
                let (xb, unbatched) = batched(x, $spatial, stringify!($name))?;
                let ib = if unbatched { indices.unsqueeze(0)? } else { indices.clone() };
                let size: Vec<usize> = match output_size {
                    Some(s) => s[s.len().saturating_sub($spatial)..].to_vec(),
                    None => {
                        // PyTorch's default: (in - 1) * stride - 2 * padding + kernel_size
                        let mut v = Vec::with_capacity($spatial);
                        for d in 0..$spatial {
                            let i = xb.dims()[d + 2] as i64;
                            let s = (i - 1) * self.stride[d] as i64 - 2 * self.padding[d] as i64 + self.kernel_size[d] as i64;
                            if s < 0 {
                                bail!(Value, "{}: the default output size is negative for input {:?}", stringify!($name), xb.dims());
                            }
                            v.push(s as usize);
                        }
                        v
                    }
                };
                unbatch(pool::max_unpool(&xb, &ib, &size)?, unbatched)
            }
        }

        impl Module for $name {
            fn forward_value(&self, input: Value) -> Result<Value> {
                let x = input.get(0)?.as_tensor()?;
                let idx = input.get(1)?.as_tensor()?;
                let size: Option<Vec<usize>> = match input.get(2) {
                    Ok(Value::Tensor(t)) => Some(t.to_dtype(DType::I64)?.to_vec::<i64>()?.into_iter().map(|d| d as usize).collect()),
                    Ok(Value::List(l)) | Ok(Value::Tuple(l)) => Some(l.iter().map(|d| match d { Value::Int(i) => Ok(*i as usize), o => bail!(Value, "output_size: expected ints, got {}", o.kind()) }).collect::<Result<_>>()?),
                    _ => None,
                };
                Ok(Value::Tensor(self.unpool(x, idx, size.as_deref())?))
            }

            fn extra_repr(&self) -> String {
                format!("kernel_size={}, stride={}, padding={}", py_tuple(&self.kernel_size), py_tuple(&self.stride), py_tuple(&self.padding))
            }
        }
    )*};
}

max_unpool_layer! {
    MaxUnpool1d, 1;
    MaxUnpool2d, 2;
    MaxUnpool3d, 3;
}
