//! # pyrite-vision
//!
//! The part of torchvision that feeds [`pyrite_data`] and builds on [`pyrite_nn`]: [`datasets`]
//! (the vendored digits, image folders and the common binary formats), [`Image`] (the PIL image
//! those datasets hand their transform), [`transforms`] (of images and `[C, H, W]` tensors; the
//! random ones draw from the loader's per-sample generator) and
//! [`models`] (ResNet, VGG, MobileNetV2 with torchvision's names, so its state_dicts load), and
//! [`utils`] (`make_grid`, `save_image`).

extern crate self as pyrite;

pub mod datasets;
pub mod models;
mod pil;
pub mod transforms;
pub mod utils;

pub use pil::Image;

// The paths `#[derive(Module)]` generates (`::pyrite::nn::...`, `::pyrite::Result`) resolve
// inside this crate too (private items), as in pyrite-nn, so the models use the derive like any
// user struct.
mod nn {
    pub use pyrite_nn::*;
}
use pyrite_core::Result;
