//! `Conv2dNormActivation` (torchvision's `ops.misc`): a convolution, a BatchNorm and an
//! activation, the building block of MobileNetV2 (and of most mobile networks).

use pyrite_core::{bail, Result, Tensor};
use pyrite_nn::{BatchNorm2d, Conv2d, ConvOptions, Hardswish, Module, ModuleBase, ReLU, ReLU6, SiLU};

/// The activation of a [`Conv2dNormActivation`] (`activation_layer=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    ReLU,
    ReLU6,
    Hardswish,
    SiLU,
}

/// The keyword arguments of `Conv2dNormActivation`, with torchvision's defaults: a 3x3 kernel,
/// stride 1, "same"-style padding `(kernel_size - 1) / 2 * dilation`, a BatchNorm and a ReLU,
/// and a bias only when there is no norm.
#[derive(Clone, Debug)]
pub struct ConvNormActivationOptions {
    pub kernel_size: usize,
    pub stride: usize,
    /// `None`: `(kernel_size - 1) / 2 * dilation`.
    pub padding: Option<usize>,
    pub groups: usize,
    /// `norm_layer=BatchNorm2d` (`false`: `norm_layer=None`).
    pub batch_norm: bool,
    /// `activation_layer` (`None`: no activation).
    pub activation: Option<Activation>,
    pub dilation: usize,
    /// `None`: a bias only without a norm.
    pub bias: Option<bool>,
}

impl Default for ConvNormActivationOptions {
    fn default() -> Self {
        ConvNormActivationOptions {
            kernel_size: 3,
            stride: 1,
            padding: None,
            groups: 1,
            batch_norm: true,
            activation: Some(Activation::ReLU),
            dilation: 1,
            bias: None,
        }
    }
}

/// `torchvision.ops.Conv2dNormActivation`: a `Sequential` of `Conv2d`, `BatchNorm2d` and an
/// activation, named `0`, `1`, `2` as torchvision names them (a layer left out shifts the
/// next one's name down, as there).
///
/// ```
/// use pyrite::nn::Module;
/// use pyrite::vision::models::{Activation, Conv2dNormActivation, ConvNormActivationOptions};
/// use pyrite::{DType, Tensor};
/// let block = Conv2dNormActivation::new(3, 8, ConvNormActivationOptions {
///     stride: 2,
///     activation: Some(Activation::ReLU6),
///     ..Default::default()
/// })?;
/// let keys: Vec<String> = block.state_dict()?.keys().map(String::from).collect();
/// assert_eq!(keys[..2], ["0.weight", "1.weight"]);
/// assert_eq!(block.call(&Tensor::zeros([1, 3, 16, 16], DType::F32)?)?.dims(), &[1, 8, 8, 8]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::nn::Module)]
pub struct Conv2dNormActivation {
    base: ModuleBase,
    /// The channels out (`out_channels`).
    pub out_channels: usize,
}

impl Conv2dNormActivation {
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        opts: ConvNormActivationOptions,
    ) -> Result<Conv2dNormActivation> {
        if opts.kernel_size == 0 {
            bail!(Value, "Conv2dNormActivation: kernel_size must be positive, got 0");
        }
        let padding = opts.padding.unwrap_or((opts.kernel_size - 1) / 2 * opts.dilation);
        let bias = opts.bias.unwrap_or(!opts.batch_norm);
        let conv = Conv2d::new(
            in_channels,
            out_channels,
            opts.kernel_size,
            ConvOptions::new()
                .stride(opts.stride)
                .padding(padding)
                .dilation(opts.dilation)
                .groups(opts.groups)
                .bias(bias),
        )?;
        let mut base = ModuleBase::new();
        let mut n = 0;
        let mut next = || {
            n += 1;
            (n - 1).to_string()
        };
        base.add_module(&next(), conv)?;
        if opts.batch_norm {
            base.add_module(&next(), BatchNorm2d::new(out_channels)?)?;
        }
        match opts.activation {
            Some(Activation::ReLU) => base.add_module(&next(), ReLU::new())?,
            Some(Activation::ReLU6) => base.add_module(&next(), ReLU6::new())?,
            Some(Activation::Hardswish) => base.add_module(&next(), Hardswish::new())?,
            Some(Activation::SiLU) => base.add_module(&next(), SiLU::new())?,
            None => {}
        }
        Ok(Conv2dNormActivation { base, out_channels })
    }
}

impl Module for Conv2dNormActivation {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = x.clone();
        for m in self.children() {
            x = m.call(&x)?;
        }
        Ok(x)
    }
}
