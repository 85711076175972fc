//! `PixelShuffle`, `PixelUnshuffle`, `ChannelShuffle`.

use crate::functional as F;
use crate::module::{Module, ModuleBase};
use pyrite_core::{Result, Tensor};

macro_rules! shuffle_layer {
    ($($name:ident, $field:ident, $f:path, $doc:literal;)*) => {$(
        #[doc = $doc]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
            pub $field: usize,
        }

        impl $name {
            pub fn new($field: usize) -> $name {
                $name { base: ModuleBase::new(), $field }
            }
        }

        impl Module for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                $f(x, self.$field)
            }

            fn extra_repr(&self) -> String {
                format!("{}={}", stringify!($field), self.$field)
            }
        }
    )*};
}

shuffle_layer! {
    PixelShuffle, upscale_factor, F::pixel_shuffle, "`nn.PixelShuffle(r)`: `[*, C r^2, H, W] -> [*, C, H r, W r]`.";
    PixelUnshuffle, downscale_factor, F::pixel_unshuffle, "`nn.PixelUnshuffle(r)`: the inverse of PixelShuffle.";
    ChannelShuffle, groups, F::channel_shuffle, "`nn.ChannelShuffle(groups)`: interleaves the channels of the groups.";
}
