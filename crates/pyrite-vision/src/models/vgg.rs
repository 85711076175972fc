//! VGG (torchvision's `models/vgg.py`): [`vgg11`], [`vgg13`], [`vgg16`], [`vgg19`], each with
//! or without BatchNorm (`_bn`). `features` (3x3 convolutions and 2x2 max-pools),
//! `avgpool` (adaptive, to 7x7) and `classifier` (three Linear layers with ReLU and Dropout).
//! The input must be at least 32x32 (five halvings).
//!
//! Most of a VGG's weights are its classifier's first layer (512 * 7 * 7 x 4096: 103M
//! parameters, 411 MB in f32) whatever `num_classes` is.
//!
//! ```no_run
//! use pyrite::nn::{Linear, Module};
//! use pyrite::vision::models::{vgg16_bn, VggOptions};
//! let mut model = vgg16_bn(VggOptions::default())?;
//! model.features.requires_grad_(false)?;
//! model.classifier.remove(6)?; // the last Linear(4096, 1000) ...
//! model.classifier.push(Linear::new(4096, 5)?); // ... becomes a 5-class head
//! assert_eq!(model.classifier.len(), 7);
//! # Ok::<(), pyrite::Error>(())
//! ```

use super::{init_weights, LinearInit};
use pyrite_core::{bail, Result, Tensor};
use pyrite_nn::{
    AdaptiveAvgPool2d, BatchNorm2d, Conv2d, ConvOptions, Dropout, Linear, MaxPool2d, Module, ModuleBase,
    PoolOptions, ReLU, Sequential,
};

/// One entry of a VGG configuration (torchvision's `cfgs`: a channel count or `"M"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VggLayer {
    /// A 3x3 convolution (padding 1) to this many channels, [BatchNorm], ReLU.
    Conv(usize),
    /// A 2x2 max-pool with stride 2.
    MaxPool,
}

use VggLayer::{Conv as C, MaxPool as M};

// torchvision's configurations, one row per stage (each ends with a max-pool).

/// Configuration "A" (VGG-11).
#[rustfmt::skip]
const CFG_A: &[VggLayer] = &[
    C(64), M,
    C(128), M,
    C(256), C(256), M,
    C(512), C(512), M,
    C(512), C(512), M,
];
/// Configuration "B" (VGG-13).
#[rustfmt::skip]
const CFG_B: &[VggLayer] = &[
    C(64), C(64), M,
    C(128), C(128), M,
    C(256), C(256), M,
    C(512), C(512), M,
    C(512), C(512), M,
];
/// Configuration "D" (VGG-16).
#[rustfmt::skip]
const CFG_D: &[VggLayer] = &[
    C(64), C(64), M,
    C(128), C(128), M,
    C(256), C(256), C(256), M,
    C(512), C(512), C(512), M,
    C(512), C(512), C(512), M,
];
/// Configuration "E" (VGG-19).
#[rustfmt::skip]
const CFG_E: &[VggLayer] = &[
    C(64), C(64), M,
    C(128), C(128), M,
    C(256), C(256), C(256), C(256), M,
    C(512), C(512), C(512), C(512), M,
    C(512), C(512), C(512), C(512), M,
];

/// `make_layers(cfg, batch_norm)`: the `features` of a VGG, from 3 input channels; a
/// convolution is followed by `BatchNorm2d` (with `batch_norm`) and `ReLU`.
pub fn make_layers(cfg: &[VggLayer], batch_norm: bool) -> Result<Sequential> {
    let mut layers = Sequential::new();
    let mut in_channels = 3;
    for &v in cfg {
        match v {
            VggLayer::MaxPool => layers.push(MaxPool2d::new(2, PoolOptions::new().stride(2))),
            VggLayer::Conv(c) => {
                layers.push(Conv2d::new(in_channels, c, 3, ConvOptions::new().padding(1))?);
                if batch_norm {
                    layers.push(BatchNorm2d::new(c)?);
                }
                layers.push(ReLU::new());
                in_channels = c;
            }
        }
    }
    Ok(layers)
}

/// The keyword arguments of torchvision's `VGG`, with its defaults.
#[derive(Clone, Debug)]
pub struct VggOptions {
    /// Outputs of the classifier (1000).
    pub num_classes: usize,
    /// torchvision's init (Kaiming-normal convolutions, `N(0, 0.01)` linear layers); `false`
    /// keeps each layer's own default init.
    pub init_weights: bool,
    /// The classifier's dropout probability (0.5).
    pub dropout: f64,
}

impl Default for VggOptions {
    fn default() -> Self {
        VggOptions { num_classes: 1000, init_weights: true, dropout: 0.5 }
    }
}

/// torchvision's `VGG`: `features`, `avgpool` (AdaptiveAvgPool2d to 7x7), flatten, and
/// `classifier` = Linear(25088, 4096), ReLU, Dropout, Linear(4096, 4096), ReLU, Dropout,
/// Linear(4096, num_classes). Replace `classifier` (or its last layer) to change the head.
#[derive(crate::nn::Module)]
#[module(name = "VGG")]
pub struct Vgg {
    base: ModuleBase,
    pub features: Sequential,
    pub avgpool: AdaptiveAvgPool2d,
    pub classifier: Sequential,
}

impl Vgg {
    /// `VGG(features, num_classes, init_weights, dropout)`: `features` must end with 512
    /// channels.
    pub fn new(features: Sequential, opts: VggOptions) -> Result<Vgg> {
        if !(0.0..=1.0).contains(&opts.dropout) {
            bail!(Value, "VGG: dropout probability has to be between 0 and 1, but got {}", opts.dropout);
        }
        let classifier = Sequential::new()
            .append(Linear::new(512 * 7 * 7, 4096)?)
            .append(ReLU::new())
            .append(Dropout::new(opts.dropout)?)
            .append(Linear::new(4096, 4096)?)
            .append(ReLU::new())
            .append(Dropout::new(opts.dropout)?)
            .append(Linear::new(4096, opts.num_classes)?);
        let model = Vgg {
            base: ModuleBase::new(),
            features,
            avgpool: AdaptiveAvgPool2d::new(&[Some(7), Some(7)]),
            classifier,
        };
        if opts.init_weights {
            init_weights(&model, LinearInit::Normal)?;
        }
        Ok(model)
    }
}

impl Module for Vgg {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.features.call(x)?;
        let x = self.avgpool.call(&x)?.flatten(1, -1)?;
        self.classifier.call(&x)
    }
}

fn vgg(cfg: &[VggLayer], batch_norm: bool, opts: VggOptions) -> Result<Vgg> {
    Vgg::new(make_layers(cfg, batch_norm)?, opts)
}

/// VGG-11 (configuration "A": 8 convolutions), 132.9M parameters with 1000 classes.
pub fn vgg11(opts: VggOptions) -> Result<Vgg> {
    vgg(CFG_A, false, opts)
}

/// VGG-11 with BatchNorm.
pub fn vgg11_bn(opts: VggOptions) -> Result<Vgg> {
    vgg(CFG_A, true, opts)
}

/// VGG-13 (configuration "B": 10 convolutions), 133.0M parameters.
pub fn vgg13(opts: VggOptions) -> Result<Vgg> {
    vgg(CFG_B, false, opts)
}

/// VGG-13 with BatchNorm.
pub fn vgg13_bn(opts: VggOptions) -> Result<Vgg> {
    vgg(CFG_B, true, opts)
}

/// VGG-16 (configuration "D": 13 convolutions), 138.4M parameters.
pub fn vgg16(opts: VggOptions) -> Result<Vgg> {
    vgg(CFG_D, false, opts)
}

/// VGG-16 with BatchNorm.
pub fn vgg16_bn(opts: VggOptions) -> Result<Vgg> {
    vgg(CFG_D, true, opts)
}

/// VGG-19 (configuration "E": 16 convolutions), 143.7M parameters.
pub fn vgg19(opts: VggOptions) -> Result<Vgg> {
    vgg(CFG_E, false, opts)
}

/// VGG-19 with BatchNorm.
pub fn vgg19_bn(opts: VggOptions) -> Result<Vgg> {
    vgg(CFG_E, true, opts)
}
