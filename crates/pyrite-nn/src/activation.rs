//! Activation layers (PyTorch's `torch/nn/modules/activation.py`); each calls its function in
//! [`crate::functional`].

use crate::functional::{self as F, GeluApproximate};
use crate::module::{py_float, Module, ModuleBase};
use crate::parameter::Parameter;
use pyrite_core::{DType, Result, Tensor};

/// Layers without configuration: `ReLU()`, `Tanh()`, ...
macro_rules! plain_activation {
    ($($name:ident => $f:path, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
        }

        impl $name {
            pub fn new() -> $name {
                $name { base: ModuleBase::new() }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name::new()
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                $f(x)
            }
        }
    )*};
}

plain_activation! {
    ReLU => F::relu, "`nn.ReLU`: `max(0, x)`.";
    ReLU6 => F::relu6, "`nn.ReLU6`: `min(max(0, x), 6)`.";
    SELU => F::selu, "`nn.SELU`: scaled ELU with the self-normalising constants.";
    SiLU => F::silu, "`nn.SiLU` (swish): `x * sigmoid(x)`.";
    Mish => F::mish, "`nn.Mish`: `x * tanh(softplus(x))`.";
    Sigmoid => F::sigmoid, "`nn.Sigmoid`.";
    LogSigmoid => F::logsigmoid, "`nn.LogSigmoid`: `log(sigmoid(x))`, stable.";
    Tanh => F::tanh, "`nn.Tanh`.";
    Hardsigmoid => F::hardsigmoid, "`nn.Hardsigmoid`: `relu6(x + 3) / 6`.";
    Hardswish => F::hardswish, "`nn.Hardswish`: `x * relu6(x + 3) / 6`.";
    Softsign => F::softsign, "`nn.Softsign`: `x / (1 + |x|)`.";
    Tanhshrink => F::tanhshrink, "`nn.Tanhshrink`: `x - tanh(x)`.";
    Softmax2d => F::softmax2d, "`nn.Softmax2d`: softmax over the channels of each position.";
}

/// Layers with scalar configuration: a struct of public fields, `new` with PyTorch's
/// defaults, the function, and PyTorch's `extra_repr`.
macro_rules! configured_activation {
    ($($name:ident { $($field:ident: $ty:ty = $default:expr),* } => |$s:ident, $x:ident| $body:expr, repr |$r:ident| $repr:expr, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            $(#[module(skip)] pub $field: $ty,)*
        }

        impl $name {
            /// With PyTorch's defaults.
            #[allow(clippy::new_without_default)]
            pub fn new() -> $name {
                $name { base: ModuleBase::new(), $($field: $default,)* }
            }
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                pub fn $field(mut self, v: $ty) -> $name {
                    self.$field = v;
                    self
                }
            )*
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let ($s, $x) = (self, x);
                $body
            }

            fn extra_repr(&self) -> String {
                let $r = self;
                $repr
            }
        }
    )*};
}

configured_activation! {
    LeakyReLU { negative_slope: f64 = 0.01 } => |s, x| F::leaky_relu(x, s.negative_slope),
        repr |r| format!("negative_slope={}", py_float(r.negative_slope)), "`nn.LeakyReLU(negative_slope=0.01)`.";
    ELU { alpha: f64 = 1.0 } => |s, x| F::elu(x, s.alpha),
        repr |r| format!("alpha={}", py_float(r.alpha)), "`nn.ELU(alpha=1.0)`.";
    CELU { alpha: f64 = 1.0 } => |s, x| F::celu(x, s.alpha),
        repr |r| format!("alpha={}", py_float(r.alpha)), "`nn.CELU(alpha=1.0)`.";
    GELU { approximate: GeluApproximate = GeluApproximate::None } => |s, x| F::gelu(x, s.approximate),
        repr |r| format!("approximate='{}'", if r.approximate == GeluApproximate::Tanh { "tanh" } else { "none" }),
        "`nn.GELU(approximate='none')`.";
    Hardtanh { min_val: f64 = -1.0, max_val: f64 = 1.0 } => |s, x| F::hardtanh(x, &F::HardtanhOptions { min_val: s.min_val, max_val: s.max_val }),
        repr |r| format!("min_val={}, max_val={}", py_float(r.min_val), py_float(r.max_val)), "`nn.Hardtanh(min_val=-1, max_val=1)`.";
    Softplus { beta: f64 = 1.0, threshold: f64 = 20.0 } => |s, x| F::softplus(x, &F::SoftplusOptions { beta: s.beta, threshold: s.threshold }),
        repr |r| format!("beta={}, threshold={}", py_float(r.beta), py_float(r.threshold)), "`nn.Softplus(beta=1, threshold=20)`.";
    Softshrink { lambd: f64 = 0.5 } => |s, x| F::softshrink(x, s.lambd),
        repr |r| py_float(r.lambd), "`nn.Softshrink(lambd=0.5)`.";
    Hardshrink { lambd: f64 = 0.5 } => |s, x| F::hardshrink(x, s.lambd),
        repr |r| py_float(r.lambd), "`nn.Hardshrink(lambd=0.5)`.";
    Threshold { threshold: f64 = 0.0, value: f64 = 0.0 } => |s, x| F::threshold(x, s.threshold, s.value),
        repr |r| format!("threshold={}, value={}", py_float(r.threshold), py_float(r.value)), "`nn.Threshold(threshold, value)`.";
    GLU { dim: isize = -1 } => |s, x| F::glu(x, s.dim),
        repr |r| format!("dim={}", r.dim), "`nn.GLU(dim=-1)`: `a * sigmoid(b)` of the two halves.";
    Softmax { dim: isize = -1 } => |s, x| F::softmax(x, s.dim),
        repr |r| format!("dim={}", r.dim), "`nn.Softmax(dim)` (set `dim`; PyTorch's implicit dim is deprecated).";
    LogSoftmax { dim: isize = -1 } => |s, x| F::log_softmax(x, s.dim),
        repr |r| format!("dim={}", r.dim), "`nn.LogSoftmax(dim)`.";
    Softmin { dim: isize = -1 } => |s, x| F::softmin(x, s.dim),
        repr |r| format!("dim={}", r.dim), "`nn.Softmin(dim)`.";
    RReLU { lower: f64 = 1.0 / 8.0, upper: f64 = 1.0 / 3.0 } => |s, x| F::rrelu(x, &F::RreluOptions { lower: s.lower, upper: s.upper, training: s.is_training(), generator: None }),
        repr |r| format!("lower={}, upper={}", py_float(r.lower), py_float(r.upper)),
        "`nn.RReLU(lower=1/8, upper=1/3)`: a random negative slope in training, the mean slope in evaluation.";
}

/// `nn.PReLU(num_parameters=1, init=0.25)`: a learned negative slope, one per channel or
/// shared.
#[derive(crate::Module)]
pub struct PReLU {
    base: ModuleBase,
    pub weight: Parameter,
    num_parameters: usize,
}

impl PReLU {
    pub fn new(num_parameters: usize, init: f64) -> Result<PReLU> {
        let w = Tensor::full([num_parameters], init, DType::F32)?;
        Ok(PReLU { base: ModuleBase::new(), weight: Parameter::new(w)?, num_parameters })
    }
}

impl Module for PReLU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::prelu(x, &self.weight)
    }

    fn extra_repr(&self) -> String {
        format!("num_parameters={}", self.num_parameters)
    }
}
