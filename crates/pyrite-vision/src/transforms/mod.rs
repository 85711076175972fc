//! `torchvision.transforms`. A transform takes an [`ImageOrTensor`]: an [`Image`] (8-bit
//! `[H, W, C]`, what the datasets on disk hand their transform, as torchvision's hand theirs a
//! PIL image) or a tensor image (always `[C, H, W]`, or `[..., C, H, W]`), and returns one.
//! As in torchvision:
//!
//! - [`ToTensor`] turns an `Image` into a `[C, H, W]` f32 tensor in `[0, 1]` and
//!   [`PILToTensor`] into a `[C, H, W]` u8 tensor; both refuse a tensor (torchvision's
//!   `TypeError: pic should be PIL Image`), so a tensor is never permuted. [`ToPILImage`] goes
//!   back.
//! - The geometric and colour transforms (`Resize`, the crops, flips, `Pad`, rotations,
//!   `RandomAffine`, `ColorJitter`, `Grayscale`, `GaussianBlur`) take either and return the
//!   same kind. On an `Image` they run the tensor kernels on its u8 pixels (exactly PIL's
//!   result for crops, flips, pads and `Grayscale`, which uses PIL's luma; the resampling and
//!   colour kernels are torch's u8 ones, not PIL's).
//! - `Normalize`, `ConvertImageDtype` and `RandomErasing` take tensors only.
//!
//! ```
//! // torchvision's MNIST pipeline, ported literally:
//! // Compose([ToTensor(), Normalize((0.1307,), (0.3081,))])
//! use pyrite::vision::transforms::{Compose, Normalize, ToTensor, Transform};
//! use pyrite::vision::Image;
//! let t = Compose(vec![
//!     Box::new(ToTensor),
//!     Box::new(Normalize { mean: vec![0.1307], std: vec![0.3081], ..Default::default() }),
//! ]);
//! let digit = Image::new(28, 28, 1, vec![255; 28 * 28])?; // what MNIST hands its transform
//! let x = t.forward(digit.into())?.into_tensor()?;
//! assert_eq!(x.dims(), &[1, 28, 28]);
//! # Ok::<(), pyrite::Error>(())
//! ```
//!
//! Random transforms draw from [`pyrite_data::sample_generator`] when a loader fetches the
//! sample (so augmentation is the same for any number of workers) and from the global
//! generator otherwise.

use crate::Image;
use pyrite_core::{bail, Generator, Result, Tensor};
use std::sync::Arc;

/// What a transform takes and returns: a PIL-style [`Image`] or a tensor image.
#[derive(Clone, Debug)]
pub enum ImageOrTensor {
    /// An 8-bit `[H, W, C]` image (a PIL image).
    Image(Image),
    /// A tensor image, `[..., C, H, W]`.
    Tensor(Tensor),
}

impl From<Image> for ImageOrTensor {
    fn from(img: Image) -> ImageOrTensor {
        ImageOrTensor::Image(img)
    }
}

impl From<Tensor> for ImageOrTensor {
    fn from(t: Tensor) -> ImageOrTensor {
        ImageOrTensor::Tensor(t)
    }
}

impl ImageOrTensor {
    /// The tensor, or an error naming the image if this is an [`Image`].
    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            ImageOrTensor::Tensor(t) => Ok(t),
            ImageOrTensor::Image(img) => bail!(
                Value,
                "expected a tensor, got an Image ({img:?}): convert it with ToTensor() or PILToTensor()"
            ),
        }
    }

    /// The image, or an error if this is a tensor.
    pub fn into_image(self) -> Result<Image> {
        match self {
            ImageOrTensor::Image(img) => Ok(img),
            ImageOrTensor::Tensor(t) => bail!(
                Value,
                "expected an Image, got a tensor of shape {:?} ({:?}): convert it with ToPILImage()",
                t.dims(),
                t.dtype()
            ),
        }
    }
}

/// A transform (`transforms.Compose` holds a list of them).
pub trait Transform: Send + Sync {
    /// The transform of an image or a tensor (torchvision's `__call__` / `forward`).
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor>;

    /// The transform of a tensor image, when it returns a tensor (an error if it returns an
    /// [`Image`]).
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        self.forward(ImageOrTensor::Tensor(img.clone()))?.into_tensor()
    }
}

/// A function of a tensor image is a transform of tensors (an [`Image`] is refused: put
/// `ToTensor()` or `PILToTensor()` before it).
impl<F: Fn(&Tensor) -> Result<Tensor> + Send + Sync> Transform for F {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        tensor_only(input, "a transform function of a tensor").and_then(|t| self(&t)).map(Into::into)
    }
}

/// The tensor of `input`, or an error saying `what` takes tensors only (torchvision's
/// `img should be Tensor Image`).
pub(crate) fn tensor_only(input: ImageOrTensor, what: &str) -> Result<Tensor> {
    match input {
        ImageOrTensor::Tensor(t) => Ok(t),
        ImageOrTensor::Image(img) => bail!(
            Value,
            "{what}: img should be a tensor image, got an Image ({img:?}): convert it with ToTensor() or PILToTensor() first"
        ),
    }
}

/// Runs the tensor kernel `f` on `input`: on a tensor directly, on an [`Image`] on its
/// `[C, H, W]` u8 pixels, the result turned back into an `Image`.
pub(crate) fn on_pixels(
    input: ImageOrTensor,
    what: &str,
    f: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<ImageOrTensor> {
    match input {
        ImageOrTensor::Tensor(t) => f(&t).map(Into::into),
        ImageOrTensor::Image(img) => Ok(Image::from_chw_u8(&f(&img.to_chw_u8()?)?, what)?.into()),
    }
}

/// The generator a random transform draws from: the sample's inside a loader, else none (the
/// global generator).
pub fn transform_generator() -> Option<Arc<Generator>> {
    pyrite_data::sample_generator()
}

/// `transforms.Compose`: applies transforms in order.
pub struct Compose(pub Vec<Box<dyn Transform>>);

impl Transform for Compose {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        let mut x = input;
        for t in &self.0 {
            x = t.forward(x)?;
        }
        Ok(x)
    }
}

mod affine;
mod color;
mod erasing;
pub mod functional;
mod geometry;
mod misc;
mod random;
mod range;

pub use affine::{AffineParams, RandomAffine, RandomAffineOptions, RandomRotation, RandomRotationOptions};
pub use color::{ColorJitter, ColorJitterParams};
pub use erasing::{ErasingValue, RandomErasing};

pub use functional::{InterpolationMode, PaddingMode, Size};
pub use geometry::{
    CenterCrop, Pad, RandomCrop, RandomCropOptions, RandomHorizontalFlip, RandomResizedCrop,
    RandomResizedCropOptions, RandomVerticalFlip, Resize, ResizeOptions,
};
pub use misc::{
    ConvertImageDtype, GaussianBlur, Grayscale, Lambda, Normalize, PILToTensor, RandomApply, RandomChoice,
    ToPILImage, ToTensor,
};
pub use range::NumOrRange;
