//! `torchvision.transforms`: functions of an image tensor (`[C, H, W]`, or `[..., C, H, W]`).
//! A transform implements [`Transform`]; random transforms draw from
//! [`pyrite_data::sample_generator`] when a loader fetches the sample (so augmentation is the
//! same for any number of workers) and from the global generator otherwise.

use pyrite_core::{Generator, Result, Tensor};
use std::sync::Arc;

/// A transform of an image tensor (`transforms.Compose` holds a list of them).
pub trait Transform: Send + Sync {
    fn apply(&self, img: &Tensor) -> Result<Tensor>;
}

impl<F: Fn(&Tensor) -> Result<Tensor> + Send + Sync> Transform for F {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        self(img)
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
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        let mut x = img.clone();
        for t in &self.0 {
            x = t.apply(&x)?;
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
    ConvertImageDtype, GaussianBlur, Grayscale, Lambda, Normalize, RandomApply, RandomChoice, ToTensor,
};
pub use range::NumOrRange;
