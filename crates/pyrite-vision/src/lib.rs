//! # pyrite-vision
//!
//! The part of torchvision that feeds [`pyrite_data`]: [`datasets`] (the vendored digits,
//! image folders and the common binary formats) and [`transforms`] (tensor image transforms;
//! the random ones draw from the loader's per-sample generator).

pub mod datasets;
pub mod transforms;
