//! MobileNetV2 (torchvision's `models/mobilenetv2.py`): inverted residual blocks (a 1x1
//! expansion, a depthwise 3x3, a linear 1x1 projection) with ReLU6, scaled by `width_mult`.
//!
//! ```
//! use pyrite::nn::{Linear, Module};
//! use pyrite::vision::models::{mobilenet_v2, MobileNetV2Options};
//! use pyrite::{DType, Tensor};
//! let mut model = mobilenet_v2(MobileNetV2Options { width_mult: 0.5, ..Default::default() })?;
//! assert!(model.state_dict()?.contains_key("features.18.0.weight"));
//! model.features.requires_grad_(false)?; // a frozen backbone ...
//! model.classifier.remove(1)?; // ... and a new 3-class head after the Dropout
//! model.classifier.push(Linear::new(model.last_channel, 3)?);
//! model.eval();
//! assert_eq!(model.call(&Tensor::rand([1, 3, 32, 32], DType::F32)?)?.dims(), &[1, 3]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use super::misc::{Activation, Conv2dNormActivation, ConvNormActivationOptions};
use super::{init_weights, LinearInit};
use pyrite_core::ops::pool::adaptive_avg_pool2d;
use pyrite_core::{bail, Result, Tensor};
use pyrite_nn::{BatchNorm2d, Conv2d, ConvOptions, Dropout, Linear, Module, ModuleBase, Sequential};

/// torchvision's `_make_divisible(v, divisor, min_value)`: `v` rounded to the nearest multiple
/// of `divisor` (at least `min_value`, by default `divisor`), never more than 10% below `v`.
///
/// ```
/// use pyrite::vision::models::make_divisible;
/// assert_eq!(make_divisible(32.0 * 0.75, 8, None), 24);
/// assert_eq!(make_divisible(3.2, 8, None), 8);
/// assert_eq!(make_divisible(36.0, 8, None), 40); // 32 would be more than 10% below
/// ```
pub fn make_divisible(v: f64, divisor: usize, min_value: Option<usize>) -> usize {
    let min_value = min_value.unwrap_or(divisor);
    let d = divisor as f64;
    let mut new_v = min_value.max(((v + d / 2.0) as usize / divisor.max(1)) * divisor);
    if (new_v as f64) < 0.9 * v {
        new_v += divisor;
    }
    new_v
}

/// MobileNetV2's block: `[1x1 expand, ReLU6]`, depthwise 3x3 (stride), ReLU6, linear 1x1
/// projection with BatchNorm, in `conv`; the input is added back when the stride is 1 and the
/// channels are unchanged.
#[derive(crate::nn::Module)]
pub struct InvertedResidual {
    base: ModuleBase,
    pub stride: usize,
    pub use_res_connect: bool,
    pub conv: Sequential,
    pub out_channels: usize,
}

impl InvertedResidual {
    /// `InvertedResidual(inp, oup, stride, expand_ratio)`; `stride` is 1 or 2.
    pub fn new(inp: usize, oup: usize, stride: usize, expand_ratio: usize) -> Result<InvertedResidual> {
        if stride != 1 && stride != 2 {
            bail!(Value, "stride should be 1 or 2 instead of {stride}");
        }
        let hidden = inp * expand_ratio;
        let relu6 = |kernel_size, stride, groups| ConvNormActivationOptions {
            kernel_size,
            stride,
            groups,
            activation: Some(Activation::ReLU6),
            ..Default::default()
        };
        let mut conv = Sequential::new();
        if expand_ratio != 1 {
            conv.push(Conv2dNormActivation::new(inp, hidden, relu6(1, 1, 1))?);
        }
        conv.push(Conv2dNormActivation::new(hidden, hidden, relu6(3, stride, hidden))?);
        conv.push(Conv2d::new(hidden, oup, 1, ConvOptions::new().bias(false))?);
        conv.push(BatchNorm2d::new(oup)?);
        Ok(InvertedResidual {
            base: ModuleBase::new(),
            stride,
            use_res_connect: stride == 1 && inp == oup,
            conv,
            out_channels: oup,
        })
    }
}

impl Module for InvertedResidual {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.conv.call(x)?;
        if self.use_res_connect {
            x.add(&y)
        } else {
            Ok(y)
        }
    }
}

/// The keyword arguments of torchvision's `MobileNetV2`, with its defaults.
#[derive(Clone, Debug)]
pub struct MobileNetV2Options {
    /// Outputs of the classifier (1000).
    pub num_classes: usize,
    /// Scales every layer's channels (1.0).
    pub width_mult: f64,
    /// The stages as `[t, c, n, s]`: expansion, channels, blocks, first stride. `None`: the
    /// paper's seven stages.
    pub inverted_residual_setting: Option<Vec<[usize; 4]>>,
    /// Channels are rounded to multiples of this (8).
    pub round_nearest: usize,
    /// The classifier's dropout probability (0.2).
    pub dropout: f64,
}

impl Default for MobileNetV2Options {
    fn default() -> Self {
        MobileNetV2Options {
            num_classes: 1000,
            width_mult: 1.0,
            inverted_residual_setting: None,
            round_nearest: 8,
            dropout: 0.2,
        }
    }
}

/// The paper's stages: `[t, c, n, s]`.
const SETTING: [[usize; 4]; 7] = [
    [1, 16, 1, 1],
    [6, 24, 2, 2],
    [6, 32, 3, 2],
    [6, 64, 4, 2],
    [6, 96, 3, 1],
    [6, 160, 3, 2],
    [6, 320, 1, 1],
];

/// torchvision's `MobileNetV2`: `features` (a stride-2 3x3 stem, 17 inverted residual blocks,
/// a 1x1 convolution to `last_channel`), global average pooling, and `classifier` =
/// Dropout, Linear(last_channel, num_classes). Replace `classifier` (or its Linear, index 1)
/// to change the head.
#[derive(crate::nn::Module)]
pub struct MobileNetV2 {
    base: ModuleBase,
    pub last_channel: usize,
    pub features: Sequential,
    pub classifier: Sequential,
}

impl MobileNetV2 {
    pub fn new(opts: MobileNetV2Options) -> Result<MobileNetV2> {
        if !(opts.width_mult > 0.0 && opts.width_mult.is_finite()) {
            bail!(Value, "MobileNetV2: width_mult must be a positive number, got {}", opts.width_mult);
        }
        if opts.round_nearest == 0 {
            bail!(Value, "MobileNetV2: round_nearest must be positive, got 0");
        }
        if !(0.0..=1.0).contains(&opts.dropout) {
            bail!(
                Value,
                "MobileNetV2: dropout probability has to be between 0 and 1, but got {}",
                opts.dropout
            );
        }
        let setting = opts.inverted_residual_setting.clone().unwrap_or_else(|| SETTING.to_vec());
        if setting.is_empty() {
            bail!(Value, "inverted_residual_setting should be non-empty or a 4-element list, got []");
        }
        let (w, r) = (opts.width_mult, opts.round_nearest);
        let mut input_channel = make_divisible(32.0 * w, r, None);
        let last_channel = make_divisible(1280.0 * w.max(1.0), r, None);
        let relu6 = |kernel_size, stride| ConvNormActivationOptions {
            kernel_size,
            stride,
            activation: Some(Activation::ReLU6),
            ..Default::default()
        };
        let mut features = Sequential::new();
        features.push(Conv2dNormActivation::new(3, input_channel, relu6(3, 2))?);
        for [t, c, n, s] in setting {
            let output_channel = make_divisible(c as f64 * w, r, None);
            for i in 0..n {
                let stride = if i == 0 { s } else { 1 };
                features.push(InvertedResidual::new(input_channel, output_channel, stride, t)?);
                input_channel = output_channel;
            }
        }
        features.push(Conv2dNormActivation::new(input_channel, last_channel, relu6(1, 1))?);
        let classifier = Sequential::new()
            .append(Dropout::new(opts.dropout)?)
            .append(Linear::new(last_channel, opts.num_classes)?);
        let model = MobileNetV2 { base: ModuleBase::new(), last_channel, features, classifier };
        init_weights(&model, LinearInit::Normal)?;
        Ok(model)
    }
}

impl Module for MobileNetV2 {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.features.call(x)?;
        let x = adaptive_avg_pool2d(&x, &[1, 1])?.flatten(1, -1)?;
        self.classifier.call(&x)
    }
}

/// `mobilenet_v2(**kwargs)`: 3.5M parameters with 1000 classes and `width_mult = 1`.
pub fn mobilenet_v2(opts: MobileNetV2Options) -> Result<MobileNetV2> {
    MobileNetV2::new(opts)
}
