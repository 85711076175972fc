//! `torchvision.datasets`: map-style datasets of images and labels. Each returns
//! `Sample::Tuple([image, label])` with the image a tensor `[C, H, W]` after the optional
//! transform, and the label an `Int`. The vendored [`Digits`] are f32 in `[0, 1]`; the readers
//! of files on disk ([`ImageFolder`], [`MNIST`], [`FashionMNIST`], [`CIFAR10`]) return u8 images,
//! read lazily sample by sample, for a transform to convert.

mod cifar;
mod digits;
mod image_folder;
mod mnist;

pub use cifar::CIFAR10;
pub use digits::{Digits, DigitsSplit};
pub use image_folder::{ImageFolder, IMG_EXTENSIONS};
pub use mnist::{FashionMNIST, MNIST};
