//! `torchvision.datasets`: map-style datasets of images and labels. Each returns
//! `Sample::Tuple([image, label])`, the label an `Int`.
//!
//! The readers of files on disk ([`ImageFolder`], [`MNIST`], [`FashionMNIST`], [`CIFAR10`])
//! read lazily, sample by sample, and hand their transform an [`Image`](crate::Image) (8-bit
//! `[H, W, C]`), as torchvision's hand theirs a PIL image, so torchvision's pipelines port
//! literally (`ToTensor()` first, or geometric transforms then `ToTensor()`). A `Sample` holds
//! tensors, not images, so an image that leaves the dataset (no transform, or a transform that
//! ends on an image) becomes its `[C, H, W]` u8 tensor, what `PILToTensor()` makes.
//!
//! The vendored [`Digits`] (no torchvision counterpart) are `[1, 8, 8]` f32 tensors in
//! `[0, 1]`, and hand their transform that tensor.

use crate::transforms::{ImageOrTensor, Transform};
use pyrite_core::Result;
use pyrite_data::Sample;
use std::sync::Arc;

mod cifar;
mod digits;
mod image_folder;
mod mnist;

pub use cifar::CIFAR10;
pub use digits::{Digits, DigitsSplit};
pub use image_folder::{ImageFolder, IMG_EXTENSIONS};
pub use mnist::{FashionMNIST, MNIST};

/// The sample of an image and its label: the image through the transform, then a tensor (an
/// [`Image`](crate::Image) becomes its `[C, H, W]` u8 tensor).
pub(crate) fn sample(
    img: impl Into<ImageOrTensor>,
    transform: &Option<Arc<dyn Transform>>,
    label: i64,
) -> Result<Sample> {
    let mut x = img.into();
    if let Some(t) = transform {
        x = t.forward(x)?;
    }
    let x = match x {
        ImageOrTensor::Tensor(t) => t,
        ImageOrTensor::Image(img) => crate::transforms::functional::pil_to_tensor(&img)?,
    };
    Ok(Sample::Tuple(vec![x.into(), Sample::Int(label)]))
}
