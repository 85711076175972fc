//! `torchvision.models`: the classic image classifiers, one file per family as in torchvision
//! ([`resnet`], [`vgg`], [`mobilenetv2`], and [`misc`] for `Conv2dNormActivation`). Module
//! names, parameter and buffer names, registration order and initialisation are torchvision's,
//! so a state_dict saved from torchvision (`safetensors.torch.save_file(model.state_dict(), p)`)
//! loads with `strict = true` through [`pyrite_nn::load_safetensors`]. There is no weights
//! download: the constructors build a randomly initialised model, as `weights=None` does.
//!
//! Transfer learning works as in PyTorch: the heads are public fields (`fc` of a ResNet,
//! `classifier` of VGG and MobileNetV2), so a new head is an assignment, and freezing is
//! `requires_grad_(false)` on the model before it.
//!
//! ```
//! use pyrite::nn::{Linear, Module};
//! use pyrite::vision::models::{resnet18, ResNetOptions};
//!
//! let mut model = resnet18(ResNetOptions { num_classes: 10, ..Default::default() })?;
//! // model.load_state_dict(&pyrite::nn::load_safetensors("resnet18.safetensors")?, true)?;
//! model.requires_grad_(false)?; // freeze everything ...
//! model.fc = Linear::new(model.fc.in_features, 5)?; // ... then a new head, trainable
//! assert_eq!(model.num_parameters(true), 512 * 5 + 5);
//! let trainable: Vec<_> = model.parameters().into_iter().filter(|p| p.requires_grad()).collect();
//! assert_eq!(trainable.len(), 2); // fc.weight, fc.bias: what the optimizer gets
//! // frozen BatchNorm layers keep their statistics: model.train(), then model.eval() on them
//! # Ok::<(), pyrite::Error>(())
//! ```

pub mod misc;
pub mod mobilenetv2;
pub mod resnet;
pub mod vgg;

pub use misc::{Activation, Conv2dNormActivation, ConvNormActivationOptions};
pub use mobilenetv2::{make_divisible, mobilenet_v2, InvertedResidual, MobileNetV2, MobileNetV2Options};
pub use resnet::{
    resnet101, resnet152, resnet18, resnet34, resnet50, BasicBlock, Block, Bottleneck, ResNet, ResNetOptions,
};
pub use vgg::{
    make_layers, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn, Vgg, VggLayer,
    VggOptions,
};

use pyrite_core::Result;
use pyrite_nn::init::{self, FanMode, Nonlinearity};
use pyrite_nn::{BatchNorm2d, Conv2d, Linear, Module};

/// How a family initialises its `Linear` layers.
#[derive(Clone, Copy, PartialEq)]
enum LinearInit {
    /// `nn.Linear`'s own (Kaiming-uniform weight, uniform bias): ResNet.
    Default,
    /// `normal_(weight, 0, 0.01)`, zero bias: VGG and MobileNetV2.
    Normal,
}

/// torchvision's init loop over `model.modules()`: every `Conv2d` weight Kaiming-normal
/// (`mode="fan_out"`, ReLU gain) with a zero bias, every `BatchNorm2d` weight one and bias zero,
/// and the `Linear` layers as `linear` says.
fn init_weights(model: &dyn Module, linear: LinearInit) -> Result<()> {
    for m in model.modules() {
        let any = m.as_any();
        if let Some(c) = any.downcast_ref::<Conv2d>() {
            init::kaiming_normal_(&c.weight, 0.0, FanMode::FanOut, Nonlinearity::Relu, None)?;
            if let Some(b) = &c.bias {
                init::zeros_(b)?;
            }
        } else if let Some(bn) = any.downcast_ref::<BatchNorm2d>() {
            if let Some(w) = &bn.weight {
                init::ones_(w)?;
            }
            if let Some(b) = &bn.bias {
                init::zeros_(b)?;
            }
        } else if let Some(l) = any.downcast_ref::<Linear>()
            && linear == LinearInit::Normal
        {
            init::normal_(&l.weight, 0.0, 0.01, None)?;
            if let Some(b) = &l.bias {
                init::zeros_(b)?;
            }
        }
    }
    Ok(())
}
