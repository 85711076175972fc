//! Padding layers: `ZeroPad`, `ConstantPad`, `ReflectionPad`, `ReplicationPad`, `CircularPad`
//! (1d/2d/3d), each [`crate::functional::pad`] with a fixed mode.

use crate::functional::{self as F, PadMode};
use crate::module::{py_float, Module, ModuleBase};
use pyrite_core::{bail, Result, Tensor};

/// `padding` as PyTorch takes it: one number for every side, or `(left, right, top, bottom,
/// front, back)` for the last dims.
fn expand_padding(padding: &[isize], dims: usize) -> Result<Vec<isize>> {
    match padding.len() {
        1 => Ok(vec![padding[0]; 2 * dims]),
        n if n == 2 * dims => Ok(padding.to_vec()),
        n => bail!(Value, "padding must be an int or a {}-tuple, got {n} values", 2 * dims),
    }
}

fn tuple(p: &[isize]) -> String {
    format!("({})", p.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
}

macro_rules! pad_layer {
    ($($name:ident, $dims:literal, $mode:expr, $with_value:literal;)*) => {$(
        #[doc = concat!("`nn.", stringify!($name), "(padding)`: pads the last ", stringify!($dims), " dim(s).")]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub padding: Vec<isize>,
            pub value: f64,
        }

        impl $name {
            /// `padding`: one number for all sides, or two per padded dim (last dim first).
            pub fn new(padding: &[isize]) -> Result<$name> {
                Ok($name { base: ModuleBase::new(), padding: expand_padding(padding, $dims)?, value: 0.0 })
            }

            /// The fill value (ConstantPad's `value`).
            pub fn value(mut self, value: f64) -> $name {
                self.value = value;
                self
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                let r = x.rank();
                if r != $dims + 1 && r != $dims + 2 {
                    bail!(Shape, "{}: expected {}D or {}D input, but got {}D input", stringify!($name), $dims + 1, $dims + 2, r);
                }
                F::pad(x, &self.padding, &F::PadOptions { mode: $mode, value: Some(self.value) })
            }

            fn extra_repr(&self) -> String {
                if $with_value {
                    format!("padding={}, value={}", tuple(&self.padding), py_float(self.value))
                } else {
                    tuple(&self.padding)
                }
            }
        }
    )*};
}

pad_layer! {
    ZeroPad1d, 1, PadMode::Constant, false;
    ZeroPad2d, 2, PadMode::Constant, false;
    ZeroPad3d, 3, PadMode::Constant, false;
    ConstantPad1d, 1, PadMode::Constant, true;
    ConstantPad2d, 2, PadMode::Constant, true;
    ConstantPad3d, 3, PadMode::Constant, true;
    ReflectionPad1d, 1, PadMode::Reflect, false;
    ReflectionPad2d, 2, PadMode::Reflect, false;
    ReflectionPad3d, 3, PadMode::Reflect, false;
    ReplicationPad1d, 1, PadMode::Replicate, false;
    ReplicationPad2d, 2, PadMode::Replicate, false;
    ReplicationPad3d, 3, PadMode::Replicate, false;
    CircularPad1d, 1, PadMode::Circular, false;
    CircularPad2d, 2, PadMode::Circular, false;
    CircularPad3d, 3, PadMode::Circular, false;
}
