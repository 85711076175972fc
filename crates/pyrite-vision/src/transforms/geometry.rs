//! Geometric transforms: `Resize`, `CenterCrop`, `RandomCrop`, `RandomResizedCrop`, `Pad`,
//! `RandomHorizontalFlip`, `RandomVerticalFlip`.

use super::functional::{self as F, InterpolationMode, PaddingMode, Size};
use super::random::{randint, uniform};
use super::{on_pixels, transform_generator, ImageOrTensor, Transform};
use pyrite_core::{bail, Result};

/// `Resize` options (torchvision's defaults: bilinear, no `max_size`, antialias on).
#[derive(Clone, Debug)]
pub struct ResizeOptions {
    pub interpolation: InterpolationMode,
    /// With an int size: the longer side is capped at `max_size`.
    pub max_size: Option<usize>,
    /// PIL-style antialiasing for bilinear (ignored for nearest).
    pub antialias: bool,
}

impl Default for ResizeOptions {
    fn default() -> Self {
        ResizeOptions { interpolation: InterpolationMode::Bilinear, max_size: None, antialias: true }
    }
}

/// `transforms.Resize(size)`: `(h, w)`, or one int for the shorter side (aspect kept).
///
/// ```
/// use pyrite::vision::transforms::{Resize, Transform};
/// let img = pyrite::Tensor::rand([3, 20, 40], pyrite::DType::F32).unwrap();
/// assert_eq!(Resize::new(10).apply(&img).unwrap().dims(), &[3, 10, 20]);
/// assert_eq!(Resize::new((8, 8)).apply(&img).unwrap().dims(), &[3, 8, 8]);
/// ```
#[derive(Clone, Debug)]
pub struct Resize {
    pub size: Size,
    pub options: ResizeOptions,
}

impl Resize {
    pub fn new(size: impl Into<Size>) -> Resize {
        Resize { size: size.into(), options: ResizeOptions::default() }
    }
    pub fn with_options(size: impl Into<Size>, options: ResizeOptions) -> Resize {
        Resize { size: size.into(), options }
    }
}

impl Transform for Resize {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "Resize", |img| {
            let o = &self.options;
            F::resize(img, self.size, o.interpolation, o.max_size, o.antialias)
        })
    }
}

/// `transforms.CenterCrop(size)`: zero-pads when the image is smaller.
///
/// ```
/// use pyrite::vision::transforms::{CenterCrop, Transform};
/// let img = pyrite::Tensor::rand([3, 9, 9], pyrite::DType::F32).unwrap();
/// assert_eq!(CenterCrop::new(4).apply(&img).unwrap().dims(), &[3, 4, 4]);
/// ```
#[derive(Clone, Debug)]
pub struct CenterCrop(pub Size);

impl CenterCrop {
    pub fn new(size: impl Into<Size>) -> CenterCrop {
        CenterCrop(size.into())
    }
}

impl Transform for CenterCrop {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "CenterCrop", |img| F::center_crop(img, self.0))
    }
}

/// `transforms.Pad(padding, fill=0, padding_mode="constant")`.
///
/// ```
/// use pyrite::vision::transforms::{Pad, PaddingMode, Transform};
/// let img = pyrite::Tensor::ones([1, 2, 2], pyrite::DType::F32).unwrap();
/// let p = Pad { padding: vec![1, 2], padding_mode: PaddingMode::Edge, ..Default::default() };
/// assert_eq!(p.apply(&img).unwrap().dims(), &[1, 6, 4]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Pad {
    /// `[all]`, `[left/right, top/bottom]` or `[left, top, right, bottom]`.
    pub padding: Vec<usize>,
    pub fill: f64,
    pub padding_mode: PaddingMode,
}

impl Transform for Pad {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "Pad", |img| F::pad(img, &self.padding, self.fill, self.padding_mode))
    }
}

/// `RandomCrop` options (torchvision's defaults: no padding, constant fill 0).
#[derive(Clone, Debug, Default)]
pub struct RandomCropOptions {
    /// Padding applied before cropping, as [`Pad::padding`].
    pub padding: Option<Vec<usize>>,
    /// Pads (both sides by the missing amount) when the image is smaller than the crop.
    pub pad_if_needed: bool,
    pub fill: f64,
    pub padding_mode: PaddingMode,
}

/// `transforms.RandomCrop(size, padding, pad_if_needed, fill, padding_mode)`: a crop at a
/// random position (one draw for the top if the padded height is larger than the crop, then
/// one for the left likewise).
///
/// ```
/// use pyrite::vision::transforms::{RandomCrop, RandomCropOptions, Transform};
/// let img = pyrite::Tensor::rand([3, 8, 8], pyrite::DType::F32).unwrap();
/// let t = RandomCrop::with_options(10, RandomCropOptions { padding: Some(vec![2]), ..Default::default() });
/// assert_eq!(t.apply(&img).unwrap().dims(), &[3, 10, 10]);
/// assert!(RandomCrop::new(9).apply(&img).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct RandomCrop {
    pub size: Size,
    pub options: RandomCropOptions,
}

impl RandomCrop {
    pub fn new(size: impl Into<Size>) -> RandomCrop {
        RandomCrop { size: size.into(), options: RandomCropOptions::default() }
    }
    pub fn with_options(size: impl Into<Size>, options: RandomCropOptions) -> RandomCrop {
        RandomCrop { size: size.into(), options }
    }
}

impl Transform for RandomCrop {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "RandomCrop", |img| {
            let (mut ph, mut pw) = F::get_size(img)?;
            let o = &self.options;
            let [mut l, mut t, mut r, mut b] = match &o.padding {
                Some(p) => F::parse_padding(p, "RandomCrop")?,
                None => [0; 4],
            };
            ph += t + b;
            pw += l + r;
            let (ch, cw) = self.size.pair();
            if o.pad_if_needed {
                if ph < ch {
                    let d = ch - ph;
                    t += d;
                    b += d;
                    ph += 2 * d;
                }
                if pw < cw {
                    let d = cw - pw;
                    l += d;
                    r += d;
                    pw += 2 * d;
                }
            }
            if ph < ch || pw < cw {
                bail!(
                    Value,
                    "RandomCrop: Required crop size ({ch}, {cw}) is larger than {}input image size ({ph}, {pw})",
                    if o.padding.is_some() { "padded " } else { "" }
                );
            }
            let g = transform_generator();
            let generator = g.as_deref();
            let top = if ph > ch { randint(generator, 0, (ph - ch + 1) as i64)? } else { 0 };
            let left = if pw > cw { randint(generator, 0, (pw - cw + 1) as i64)? } else { 0 };
            let padded = if l + t + r + b > 0 {
                F::pad(img, &[l, t, r, b], o.fill, o.padding_mode)?
            } else {
                img.clone()
            };
            F::crop(&padded, top, left, ch, cw)
        })
    }
}

/// `transforms.RandomHorizontalFlip(p=0.5)`: one draw per call.
///
/// ```
/// use pyrite::vision::transforms::{RandomHorizontalFlip, Transform};
/// let img = pyrite::Tensor::from_vec(vec![1f32, 2.], [1, 1, 2]).unwrap();
/// let out = RandomHorizontalFlip(1.0).apply(&img).unwrap();
/// assert_eq!(out.to_vec::<f32>().unwrap(), vec![2., 1.]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RandomHorizontalFlip(pub f64);

impl Default for RandomHorizontalFlip {
    fn default() -> Self {
        RandomHorizontalFlip(0.5)
    }
}

/// `transforms.RandomVerticalFlip(p=0.5)`: one draw per call.
#[derive(Clone, Copy, Debug)]
pub struct RandomVerticalFlip(pub f64);

impl Default for RandomVerticalFlip {
    fn default() -> Self {
        RandomVerticalFlip(0.5)
    }
}

fn check_p(p: f64, what: &str) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        bail!(Value, "{what}: p should be a probability in [0, 1], got {p}");
    }
    Ok(())
}

/// Whether a transform with probability `p` fires (torchvision: `torch.rand(1) < p`).
pub(crate) fn fires(p: f64, what: &str) -> Result<bool> {
    check_p(p, what)?;
    let g = transform_generator();
    Ok(uniform(g.as_deref(), 0.0, 1.0)? < p)
}

impl Transform for RandomHorizontalFlip {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "RandomHorizontalFlip", |img| {
            F::check_image(img, "RandomHorizontalFlip")?;
            if fires(self.0, "RandomHorizontalFlip")? {
                F::hflip(img)
            } else {
                Ok(img.clone())
            }
        })
    }
}

impl Transform for RandomVerticalFlip {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "RandomVerticalFlip", |img| {
            F::check_image(img, "RandomVerticalFlip")?;
            if fires(self.0, "RandomVerticalFlip")? {
                F::vflip(img)
            } else {
                Ok(img.clone())
            }
        })
    }
}

/// `RandomResizedCrop` options (torchvision's defaults: scale (0.08, 1), ratio (3/4, 4/3),
/// bilinear, antialias on).
#[derive(Clone, Debug)]
pub struct RandomResizedCropOptions {
    pub scale: (f64, f64),
    pub ratio: (f64, f64),
    pub interpolation: InterpolationMode,
    pub antialias: bool,
}

impl Default for RandomResizedCropOptions {
    fn default() -> Self {
        RandomResizedCropOptions {
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
            interpolation: InterpolationMode::Bilinear,
            antialias: true,
        }
    }
}

/// `transforms.RandomResizedCrop(size, scale, ratio)`: a crop of random area fraction and
/// aspect ratio (up to 10 attempts, 2 draws each plus 2 for the position of a fitting crop; then
/// a centre crop clamped to the ratio range), resized to `size`.
///
/// ```
/// use pyrite::vision::transforms::{RandomResizedCrop, Transform};
/// let img = pyrite::Tensor::rand([3, 32, 24], pyrite::DType::F32).unwrap();
/// assert_eq!(RandomResizedCrop::new(16).apply(&img).unwrap().dims(), &[3, 16, 16]);
/// ```
#[derive(Clone, Debug)]
pub struct RandomResizedCrop {
    pub size: Size,
    pub options: RandomResizedCropOptions,
}

impl RandomResizedCrop {
    pub fn new(size: impl Into<Size>) -> RandomResizedCrop {
        RandomResizedCrop { size: size.into(), options: RandomResizedCropOptions::default() }
    }
    pub fn with_options(size: impl Into<Size>, options: RandomResizedCropOptions) -> RandomResizedCrop {
        RandomResizedCrop { size: size.into(), options }
    }

    /// `get_params`: `(top, left, height, width)` of the crop for an image of `(height, width)`.
    pub fn get_params(&self, (height, width): (usize, usize)) -> Result<(i64, i64, usize, usize)> {
        let (s0, s1) = self.options.scale;
        let (r0, r1) = self.options.ratio;
        if s0 > s1 || r0 > r1 || r0 <= 0.0 {
            bail!(Value, "RandomResizedCrop: scale and ratio should be of kind (min, max) with positive ratios, got {:?} and {:?}", (s0, s1), (r0, r1));
        }
        let g = transform_generator();
        let generator = g.as_deref();
        let area = (height * width) as f64;
        let (lr0, lr1) = (r0.ln(), r1.ln());
        for _ in 0..10 {
            let target_area = area * uniform(generator, s0, s1)?;
            let aspect = uniform(generator, lr0, lr1)?.exp();
            let w = F::round_even((target_area * aspect).sqrt()) as usize;
            let h = F::round_even((target_area / aspect).sqrt()) as usize;
            if 0 < w && w <= width && 0 < h && h <= height {
                let i = randint(generator, 0, (height - h + 1) as i64)?;
                let j = randint(generator, 0, (width - w + 1) as i64)?;
                return Ok((i, j, h, w));
            }
        }
        let in_ratio = width as f64 / height as f64;
        let (w, h) = if in_ratio < r0 {
            (width, F::round_even(width as f64 / r0) as usize)
        } else if in_ratio > r1 {
            (F::round_even(height as f64 * r1) as usize, height)
        } else {
            (width, height)
        };
        Ok((((height - h.min(height)) / 2) as i64, ((width - w.min(width)) / 2) as i64, h, w))
    }
}

impl Transform for RandomResizedCrop {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "RandomResizedCrop", |img| {
            let (h, w) = F::get_size(img)?;
            if h == 0 || w == 0 {
                bail!(Value, "RandomResizedCrop: cannot crop an empty image of size ({h}, {w})");
            }
            let (top, left, ch, cw) = self.get_params((h, w))?;
            let o = &self.options;
            F::resized_crop(
                img,
                top,
                left,
                ch,
                cw,
                Size::Exact(self.size.pair().0, self.size.pair().1),
                o.interpolation,
                o.antialias,
            )
        })
    }
}
