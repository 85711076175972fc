//! The replay mapping for the vision layers (upsampling, unfold/fold, ...): PyTorch's class
//! name and keyword arguments to the Pyrite layer. Included by `nn_layers.rs`.

use crate::common::Kw;
use pyrite::nn::Module;
use pyrite::{DType, Result};

/// The classes [`build`] maps (their cases run even while listed as pending).
pub const HANDLED: &[&str] = &[];

pub fn build(layer: &str, _k: &Kw, _dtype: DType) -> Result<Box<dyn Module>> {
    panic!("vision::build has no mapping for {layer}")
}
