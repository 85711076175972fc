//! `Identity`, `Linear`, `Bilinear` (PyTorch's `torch/nn/modules/linear.py`).

use crate::functional as F;
use crate::init;
use crate::module::{py_bool, Module, ModuleBase};
use crate::parameter::Parameter;
use crate::value::Value;
use pyrite_core::{DType, Result, Tensor};

/// `nn.Identity`: returns its input.
#[derive(crate::Module)]
pub struct Identity {
    base: ModuleBase,
}

impl Identity {
    pub fn new() -> Identity {
        Identity { base: ModuleBase::new() }
    }
}

impl Default for Identity {
    fn default() -> Self {
        Identity::new()
    }
}

impl Module for Identity {
    fn forward_value(&self, input: Value) -> Result<Value> {
        Ok(input)
    }
}

/// The uniform bound PyTorch's layers initialise with: `1 / sqrt(fan_in)` (what
/// `kaiming_uniform_(a=sqrt(5))` gives for the weight, and the bias's range).
pub(crate) fn reset_uniform(weight: &Tensor, bias: Option<&Tensor>, fan_in: usize) -> Result<()> {
    init::kaiming_uniform_(weight, 5f64.sqrt(), init::FanMode::FanIn, init::Nonlinearity::LeakyRelu, None)?;
    if let Some(b) = bias {
        let bound = if fan_in > 0 { 1.0 / (fan_in as f64).sqrt() } else { 0.0 };
        init::uniform_(b, -bound, bound, None)?;
    }
    Ok(())
}

/// `nn.Linear(in_features, out_features, bias=True)`: `y = x W^T + b`, with `weight`
/// `[out_features, in_features]` as in PyTorch.
///
/// ```
/// use pyrite::nn::{Linear, Module};
/// use pyrite::{DType, Tensor};
/// let fc = Linear::new(64, 10)?;
/// assert_eq!(fc.to_string(), "Linear(in_features=64, out_features=10, bias=True)");
/// assert_eq!(fc.call(&Tensor::ones([5, 64], DType::F32)?)?.dims(), &[5, 10]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
pub struct Linear {
    base: ModuleBase,
    pub weight: Parameter,
    pub bias: Option<Parameter>,
    pub in_features: usize,
    pub out_features: usize,
}

impl Linear {
    /// With a bias, in f32.
    pub fn new(in_features: usize, out_features: usize) -> Result<Linear> {
        Linear::with_options(in_features, out_features, true, DType::F32)
    }

    /// `nn.Linear(in, out, bias, dtype=dtype)`.
    pub fn with_options(in_features: usize, out_features: usize, bias: bool, dtype: DType) -> Result<Linear> {
        let w = Tensor::empty([out_features, in_features], dtype)?;
        let b = if bias { Some(Tensor::empty([out_features], dtype)?) } else { None };
        reset_uniform(&w, b.as_ref(), in_features)?;
        Ok(Linear {
            base: ModuleBase::new(),
            weight: Parameter::new(w)?,
            bias: b.map(Parameter::new).transpose()?,
            in_features,
            out_features,
        })
    }
}

impl Module for Linear {
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

/// `nn.Bilinear(in1_features, in2_features, out_features, bias=True)`: `y = x1^T A x2 + b`
/// with `weight` `[out, in1, in2]`. Called with two inputs: `call_value((x1, x2).into())`.
#[derive(crate::Module)]
pub struct Bilinear {
    base: ModuleBase,
    pub weight: Parameter,
    pub bias: Option<Parameter>,
    in1_features: usize,
    in2_features: usize,
    out_features: usize,
}

impl Bilinear {
    pub fn new(
        in1_features: usize,
        in2_features: usize,
        out_features: usize,
        bias: bool,
    ) -> Result<Bilinear> {
        let w = Tensor::empty([out_features, in1_features, in2_features], DType::F32)?;
        let bound = 1.0 / (in1_features as f64).sqrt();
        init::uniform_(&w, -bound, bound, None)?;
        let b = if bias {
            let b = Tensor::empty([out_features], DType::F32)?;
            init::uniform_(&b, -bound, bound, None)?;
            Some(Parameter::new(b)?)
        } else {
            None
        };
        Ok(Bilinear {
            base: ModuleBase::new(),
            weight: Parameter::new(w)?,
            bias: b,
            in1_features,
            in2_features,
            out_features,
        })
    }

    /// `bilinear(x1, x2)`.
    pub fn forward2(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        F::bilinear(x1, x2, &self.weight, self.bias.as_deref())
    }
}

impl Module for Bilinear {
    fn forward_value(&self, input: Value) -> Result<Value> {
        let x1 = input.get(0)?.as_tensor()?;
        let x2 = input.get(1)?.as_tensor()?;
        Ok(Value::Tensor(self.forward2(x1, x2)?))
    }

    fn extra_repr(&self) -> String {
        format!(
            "in1_features={}, in2_features={}, out_features={}, bias={}",
            self.in1_features,
            self.in2_features,
            self.out_features,
            py_bool(self.bias.is_some())
        )
    }
}
