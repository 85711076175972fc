//! `torchvision.datasets`: map-style datasets of images and labels. Each returns
//! `Sample::Tuple([image, label])` with the image a float tensor `[C, H, W]` after the optional
//! transform, and the label an `Int`.

mod digits;

pub use digits::{Digits, DigitsSplit};
