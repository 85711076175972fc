//! [`HiddenAct`]: the feed-forward activations a config's `hidden_act` names (Hugging Face's
//! `ACT2FN`), each the same function as the PyTorch op it stands for.

use pyrite_core::{bail, Result, Tensor};
use pyrite_nn::functional::{self as F, GeluApproximate};

/// `hidden_act` of a config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HiddenAct {
    /// `"gelu"`: the exact GELU, `x * Phi(x)` with the erf (`F.gelu(x)`).
    Gelu,
    /// `"gelu_new"`, `"gelu_pytorch_tanh"`: the tanh approximation
    /// (`F.gelu(x, approximate="tanh")`).
    GeluTanh,
    /// `"relu"`.
    Relu,
    /// `"silu"`, `"swish"`: `x * sigmoid(x)`.
    Silu,
    /// `"tanh"`.
    Tanh,
}

impl HiddenAct {
    /// The activation a config names; an error listing the known names otherwise.
    pub fn from_name(name: &str) -> Result<HiddenAct> {
        Ok(match name {
            "gelu" => HiddenAct::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => HiddenAct::GeluTanh,
            "relu" => HiddenAct::Relu,
            "silu" | "swish" => HiddenAct::Silu,
            "tanh" => HiddenAct::Tanh,
            other => bail!(
                NotImplemented,
                "hidden_act \"{other}\" is not supported (known: gelu, gelu_new, gelu_pytorch_tanh, relu, silu, swish, tanh)"
            ),
        })
    }

    /// The name `config.json` uses.
    pub fn name(self) -> &'static str {
        match self {
            HiddenAct::Gelu => "gelu",
            HiddenAct::GeluTanh => "gelu_new",
            HiddenAct::Relu => "relu",
            HiddenAct::Silu => "silu",
            HiddenAct::Tanh => "tanh",
        }
    }

    /// Applies the activation.
    pub fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            HiddenAct::Gelu => F::gelu(x, GeluApproximate::None),
            HiddenAct::GeluTanh => F::gelu(x, GeluApproximate::Tanh),
            HiddenAct::Relu => F::relu(x),
            HiddenAct::Silu => F::silu(x),
            HiddenAct::Tanh => F::tanh(x),
        }
    }
}
