//! The replay mapping for the vision layers (upsampling, unfold/fold, ...): PyTorch's class
//! name and keyword arguments to the Pyrite layer. Included by `nn_layers.rs`.

use crate::common::Kw;
use pyrite::nn::functional::InterpolateMode;
use pyrite::nn::{Fold, Module, Unfold, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d};
use pyrite::{DType, Result};
use serde_json::Value as J;

/// The classes [`build`] maps (their cases run even while listed as pending).
pub const HANDLED: &[&str] = &["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "Unfold", "Fold"];

/// A number or a list of numbers, as a list of f64.
fn floats(k: &Kw, key: &str) -> Option<Vec<f64>> {
    match k.get(key)? {
        J::Array(a) => Some(a.iter().map(|v| v.as_f64().unwrap()).collect()),
        v => Some(vec![v.as_f64().unwrap()]),
    }
}

fn sizes(k: &Kw, key: &str) -> Option<Vec<usize>> {
    k.get(key).map(|_| k.sizes(key))
}

/// `dilation` / `padding` / `stride` with PyTorch's defaults.
fn or(k: &Kw, key: &str, d: usize) -> Vec<usize> {
    sizes(k, key).unwrap_or_else(|| vec![d])
}

pub fn build(layer: &str, k: &Kw, dtype: DType) -> Result<Box<dyn Module>> {
    let size = sizes(k, "size");
    let scale = floats(k, "scale_factor");
    match layer {
        "Upsample" => {
            let mode = InterpolateMode::parse(k.get("mode").and_then(|m| m.as_str()).unwrap_or("nearest"))?;
            let mut m = Upsample::new(size.as_deref(), scale.as_deref(), mode);
            if let Some(a) = k.get("align_corners") {
                m = m.align_corners(a.as_bool().unwrap());
            }
            if let Some(r) = k.get("recompute_scale_factor") {
                m = m.recompute_scale_factor(r.as_bool().unwrap());
            }
            crate::boxed(m, dtype)
        }
        "UpsamplingNearest2d" => {
            crate::boxed(UpsamplingNearest2d::new(size.as_deref(), scale.as_deref()), dtype)
        }
        "UpsamplingBilinear2d" => {
            crate::boxed(UpsamplingBilinear2d::new(size.as_deref(), scale.as_deref()), dtype)
        }
        "Unfold" => crate::boxed(
            Unfold::new(&k.sizes("kernel_size"))
                .dilation(&or(k, "dilation", 1))
                .padding(&or(k, "padding", 0))
                .stride(&or(k, "stride", 1)),
            dtype,
        ),
        "Fold" => crate::boxed(
            Fold::new(&k.sizes("output_size"), &k.sizes("kernel_size"))
                .dilation(&or(k, "dilation", 1))
                .padding(&or(k, "padding", 0))
                .stride(&or(k, "stride", 1)),
            dtype,
        ),
        other => panic!("vision::build has no mapping for {other}"),
    }
}
