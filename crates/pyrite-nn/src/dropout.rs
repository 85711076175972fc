//! Dropout layers: random zeroing in training, the identity in evaluation.

use crate::functional as F;
use crate::module::{py_bool, py_float, Module, ModuleBase};
use pyrite_core::{bail, Result, Tensor};

fn check_p(p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        bail!(Value, "dropout probability has to be between 0 and 1, but got {p}");
    }
    Ok(())
}

macro_rules! dropout_layer {
    ($($name:ident => |$s:ident, $x:ident| $body:expr, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub p: f64,
        }

        impl $name {
            /// Fails unless `0 <= p <= 1`.
            pub fn new(p: f64) -> Result<$name> {
                check_p(p)?;
                Ok($name { base: ModuleBase::new(), p })
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let ($s, $x) = (self, x);
                $body
            }

            fn extra_repr(&self) -> String {
                format!("p={}, inplace={}", py_float(self.p), py_bool(false))
            }
        }
    )*};
}

dropout_layer! {
    Dropout => |s, x| F::dropout(x, &F::DropoutOptions { p: s.p, training: s.is_training(), generator: None }), "`nn.Dropout(p=0.5)`: zeroes elements with probability `p` in training, scaling the rest by `1/(1-p)`.";
    Dropout1d => |s, x| F::feature_dropout(x, 1, &F::DropoutOptions { p: s.p, training: s.is_training(), generator: None }), "`nn.Dropout1d(p)`: zeroes whole channels of `[N, C, L]` input.";
    Dropout2d => |s, x| F::feature_dropout(x, 2, &F::DropoutOptions { p: s.p, training: s.is_training(), generator: None }), "`nn.Dropout2d(p)`: zeroes whole channels of `[N, C, H, W]` input.";
    Dropout3d => |s, x| F::feature_dropout(x, 3, &F::DropoutOptions { p: s.p, training: s.is_training(), generator: None }), "`nn.Dropout3d(p)`: zeroes whole channels of `[N, C, D, H, W]` input.";
    AlphaDropout => |s, x| F::alpha_dropout(x, &F::AlphaDropoutOptions { p: s.p, training: s.is_training(), generator: None }), "`nn.AlphaDropout(p)`: dropout that keeps SELU's self-normalisation.";
    FeatureAlphaDropout => |s, x| F::feature_alpha_dropout(x, &F::AlphaDropoutOptions { p: s.p, training: s.is_training(), generator: None }), "`nn.FeatureAlphaDropout(p)`: alpha dropout of whole channels.";
}
