//! The vendored digits data set (8x8 grey images of handwritten digits, 10 classes; UCI, CC BY
//! 4.0, see `crates/pyrite-vision/data/README.md`), split 1437/360 by the fixed split the PyTorch
//! reference benchmark uses. Compiled into the library: no file is read at run time.

use crate::transforms::Transform;
use pyrite_core::{bail, Result, Tensor};
use pyrite_data::{Dataset, Sample};
use std::sync::Arc;

const CSV: &str = include_str!("../../data/digits.csv");
const SPLIT: &str = include_str!("../../data/digits_split_seed0.txt");
const N_TRAIN: usize = 1437;

/// Which part of the fixed split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigitsSplit {
    /// 1437 images.
    Train,
    /// 360 images.
    Test,
}

/// The digits: each sample is a `[1, 8, 8]` f32 tensor image in `[0, 1]` (pixel counts divided
/// by 16; the transform gets this tensor, so it needs no `ToTensor`) and its label 0..9.
///
/// ```
/// use pyrite::data::Dataset;
/// use pyrite::vision::datasets::{Digits, DigitsSplit};
/// let train = Digits::new(DigitsSplit::Train)?;
/// assert_eq!((train.len(), Digits::new(DigitsSplit::Test)?.len()), (1437, 360));
/// let s = train.get(0)?;
/// assert_eq!(s.item(0)?.as_tensor()?.dims(), &[1, 8, 8]);
/// assert!((0..10).contains(&s.item(1)?.as_int()?));
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct Digits {
    images: Vec<[f32; 64]>,
    labels: Vec<i64>,
    transform: Option<Arc<dyn Transform>>,
}

impl Digits {
    pub fn new(split: DigitsSplit) -> Result<Digits> {
        let mut rows = Vec::with_capacity(1797);
        for (n, line) in CSV.lines().filter(|l| !l.is_empty()).enumerate() {
            let vals: Vec<u8> = line
                .split(',')
                .map(|v| v.trim().parse::<u8>())
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| pyrite_core::err!(Io, "digits.csv line {}: {e}", n + 1))?;
            if vals.len() != 65 {
                bail!(Io, "digits.csv line {}: expected 65 values, got {}", n + 1, vals.len());
            }
            rows.push(vals);
        }
        let order: Vec<usize> = SPLIT
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.trim().parse())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| pyrite_core::err!(Io, "digits split: {e}"))?;
        let picked = match split {
            DigitsSplit::Train => &order[..N_TRAIN],
            DigitsSplit::Test => &order[N_TRAIN..],
        };
        let mut images = Vec::with_capacity(picked.len());
        let mut labels = Vec::with_capacity(picked.len());
        for &i in picked {
            let row =
                rows.get(i).ok_or_else(|| pyrite_core::err!(Io, "digits split: row {i} out of range"))?;
            let mut img = [0f32; 64];
            for (d, &v) in img.iter_mut().zip(&row[..64]) {
                *d = v as f32 / 16.0;
            }
            images.push(img);
            labels.push(row[64] as i64);
        }
        Ok(Digits { images, labels, transform: None })
    }

    /// Applies `t` to each image when it is read (`transform=`).
    pub fn with_transform(mut self, t: impl Transform + 'static) -> Digits {
        self.transform = Some(Arc::new(t));
        self
    }

    /// The class names, `"0"` to `"9"`.
    pub fn classes(&self) -> Vec<String> {
        (0..10).map(|d| d.to_string()).collect()
    }

    /// Every image as one `[N, 1, 8, 8]` tensor and the labels as `[N]` i64 (no transform):
    /// for evaluation without a loader.
    pub fn tensors(&self) -> Result<(Tensor, Tensor)> {
        let flat: Vec<f32> = self.images.iter().flatten().copied().collect();
        Ok((
            Tensor::from_vec(flat, [self.images.len(), 1, 8, 8])?,
            Tensor::from_vec(self.labels.clone(), [self.labels.len()])?,
        ))
    }
}

impl Dataset for Digits {
    fn len(&self) -> usize {
        self.images.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let Some(img) = self.images.get(index) else {
            bail!(Index, "Digits: index {index} is out of range for {} samples", self.images.len());
        };
        super::sample(Tensor::from_slice(img, [1, 8, 8])?, &self.transform, self.labels[index])
    }
}
