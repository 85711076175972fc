//! Random affine maps: `RandomRotation` and `RandomAffine` (rotation, translation, scale and
//! shear drawn per call, applied by [`F::rotate`] and [`F::affine`]).

use super::functional::{self as F, InterpolationMode};
use super::random::uniform;
use super::range::NumOrRange;
use super::{on_pixels, transform_generator, ImageOrTensor, Transform};
use pyrite_core::{bail, Result};

/// `RandomRotation` options (torchvision's defaults: nearest, no expansion, about the image
/// centre, fill 0).
#[derive(Clone, Debug)]
pub struct RandomRotationOptions {
    pub interpolation: InterpolationMode,
    /// Grow the output to hold the whole rotated image.
    pub expand: bool,
    /// `(x, y)` in pixels; `None` is the image centre.
    pub center: Option<(f64, f64)>,
    /// The value outside the rotated image: one, or one per channel. `None` samples zeros
    /// without the fill mask (torchvision v2's `fill=None`; differs from 0 at bilinear edges).
    pub fill: Option<Vec<f64>>,
}

impl Default for RandomRotationOptions {
    fn default() -> Self {
        RandomRotationOptions {
            interpolation: InterpolationMode::Nearest,
            expand: false,
            center: None,
            fill: Some(vec![0.0]),
        }
    }
}

/// `transforms.RandomRotation(degrees, interpolation, expand, center, fill)`: rotates by an
/// angle drawn uniformly from `degrees` (one number `d` means `(-d, d)`), one draw per call.
///
/// ```
/// use pyrite::vision::transforms::{RandomRotation, RandomRotationOptions, Transform};
/// let img = pyrite::Tensor::rand([3, 16, 24], pyrite::DType::F32).unwrap();
/// let t = RandomRotation::new(30.0).unwrap();
/// assert_eq!(t.apply(&img).unwrap().dims(), &[3, 16, 24]);
/// let angle = t.get_params().unwrap();
/// assert!((-30.0..30.0).contains(&angle));
/// let grow = RandomRotation::with_options((90.0, 90.0), RandomRotationOptions { expand: true, ..Default::default() });
/// assert_eq!(grow.unwrap().apply(&img).unwrap().dims(), &[3, 24, 16]);
/// assert!(RandomRotation::new(-1.0).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct RandomRotation {
    /// `(min, max)` in degrees.
    pub degrees: (f64, f64),
    pub options: RandomRotationOptions,
}

impl RandomRotation {
    pub fn new(degrees: impl Into<NumOrRange>) -> Result<RandomRotation> {
        RandomRotation::with_options(degrees, RandomRotationOptions::default())
    }

    pub fn with_options(
        degrees: impl Into<NumOrRange>,
        options: RandomRotationOptions,
    ) -> Result<RandomRotation> {
        let t = RandomRotation { degrees: degrees.into().around(0.0, "degrees")?, options };
        check_range(t.degrees, "RandomRotation", "degrees")?;
        Ok(t)
    }

    /// `get_params(degrees)`: the angle, drawn uniformly from `degrees`.
    pub fn get_params(&self) -> Result<f64> {
        check_range(self.degrees, "RandomRotation", "degrees")?;
        let g = transform_generator();
        uniform(g.as_deref(), self.degrees.0, self.degrees.1)
    }
}

impl Transform for RandomRotation {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "RandomRotation", |img| {
            F::get_size(img)?;
            let angle = self.get_params()?;
            let o = &self.options;
            F::rotate(img, angle, o.interpolation, o.expand, o.center, o.fill.as_deref())
        })
    }
}

/// A `(min, max)` range with `min <= max`, both finite.
fn check_range((a, b): (f64, f64), what: &str, name: &str) -> Result<()> {
    if a.is_nan() || b.is_nan() || a > b || !a.is_finite() || !b.is_finite() {
        bail!(Value, "{what}: {name} should be a finite range (min, max) with min <= max, got ({a}, {b})");
    }
    Ok(())
}

/// `RandomAffine` options (torchvision's defaults: no translation, scaling or shear, nearest,
/// fill 0, about the image centre).
#[derive(Clone, Debug)]
pub struct RandomAffineOptions {
    /// Maximal shifts as fractions `(of the width, of the height)`, each in `[0, 1]`: the
    /// shifts are drawn from `(-fw * width, fw * width)` etc. and rounded to whole pixels.
    pub translate: Option<(f64, f64)>,
    /// `(min, max)` of the scale factor, both positive.
    pub scale: Option<(f64, f64)>,
    /// Shear in degrees: `[s]` (x shear in `(-s, s)`), `[min, max]` (x shear), or
    /// `[xmin, xmax, ymin, ymax]` (both).
    pub shear: Option<Vec<f64>>,
    pub interpolation: InterpolationMode,
    /// As [`RandomRotationOptions::fill`].
    pub fill: Option<Vec<f64>>,
    /// `(x, y)` in pixels; `None` is the image centre.
    pub center: Option<(f64, f64)>,
}

impl Default for RandomAffineOptions {
    fn default() -> Self {
        RandomAffineOptions {
            translate: None,
            scale: None,
            shear: None,
            interpolation: InterpolationMode::Nearest,
            fill: Some(vec![0.0]),
            center: None,
        }
    }
}

/// The parameters [`RandomAffine::get_params`] draws: `(angle, (tx, ty), scale, (shear_x,
/// shear_y))`, as torchvision's.
pub type AffineParams = (f64, (i64, i64), f64, (f64, f64));

/// `transforms.RandomAffine(degrees, translate, scale, shear, interpolation, fill, center)`:
/// an affine map with a random rotation (from `degrees`; one number `d` means `(-d, d)`),
/// translation, scale and shear, drawn per call in that order.
///
/// ```
/// use pyrite::vision::transforms::{RandomAffine, RandomAffineOptions, Transform};
/// let img = pyrite::Tensor::rand([3, 16, 20], pyrite::DType::F32).unwrap();
/// let opts = RandomAffineOptions { translate: Some((0.1, 0.1)), scale: Some((0.9, 1.1)), shear: Some(vec![10.0]), ..Default::default() };
/// let t = RandomAffine::with_options(15.0, opts).unwrap();
/// assert_eq!(t.apply(&img).unwrap().dims(), &[3, 16, 20]);
/// let (angle, (tx, ty), scale, (sx, sy)) = t.get_params((20, 16)).unwrap();
/// assert!(angle.abs() <= 15.0 && tx.abs() <= 2 && ty.abs() <= 2 && (0.9..=1.1).contains(&scale));
/// assert!(sx.abs() <= 10.0 && sy == 0.0);
/// ```
#[derive(Clone, Debug)]
pub struct RandomAffine {
    /// `(min, max)` in degrees.
    pub degrees: (f64, f64),
    pub options: RandomAffineOptions,
}

impl RandomAffine {
    pub fn new(degrees: impl Into<NumOrRange>) -> Result<RandomAffine> {
        RandomAffine::with_options(degrees, RandomAffineOptions::default())
    }

    pub fn with_options(
        degrees: impl Into<NumOrRange>,
        options: RandomAffineOptions,
    ) -> Result<RandomAffine> {
        let t = RandomAffine { degrees: degrees.into().around(0.0, "degrees")?, options };
        t.shear_ranges()?;
        Ok(t)
    }

    /// The checked options: the x shear range and, with four values, the y shear range.
    #[allow(clippy::type_complexity)]
    fn shear_ranges(&self) -> Result<Option<((f64, f64), Option<(f64, f64)>)>> {
        const WHAT: &str = "RandomAffine";
        check_range(self.degrees, WHAT, "degrees")?;
        let o = &self.options;
        if let Some((tx, ty)) = o.translate
            && (!(0.0..=1.0).contains(&tx) || !(0.0..=1.0).contains(&ty))
        {
            bail!(Value, "{WHAT}: translation values should be between 0 and 1, got ({tx}, {ty})");
        }
        if let Some(s) = o.scale {
            if !(s.0 > 0.0 && s.1 > 0.0) {
                bail!(Value, "{WHAT}: scale values should be positive, got {s:?}");
            }
            check_range(s, WHAT, "scale")?;
        }
        let Some(shear) = &o.shear else { return Ok(None) };
        let ranges = match shear[..] {
            [s] => (NumOrRange::Num(s).around(0.0, "shear")?, None),
            [a, b] => ((a, b), None),
            [a, b, c, d] => ((a, b), Some((c, d))),
            _ => bail!(Value, "{WHAT}: shear should be a sequence of 1, 2 or 4 values, got {}", shear.len()),
        };
        check_range(ranges.0, WHAT, "shear")?;
        if let Some(y) = ranges.1 {
            check_range(y, WHAT, "shear")?;
        }
        Ok(Some(ranges))
    }

    /// `get_params(degrees, translate, scale_ranges, shears, img_size)` for an image of
    /// `(width, height)`: the angle, the translation (rounded half to even), the scale and the
    /// shear, drawn in that order (only the ranges that are set draw).
    pub fn get_params(&self, (width, height): (usize, usize)) -> Result<AffineParams> {
        let shear = self.shear_ranges()?;
        let o = &self.options;
        let g = transform_generator();
        let generator = g.as_deref();
        let angle = uniform(generator, self.degrees.0, self.degrees.1)?;
        let translate = match o.translate {
            Some((fx, fy)) => {
                let (mx, my) = (fx * width as f64, fy * height as f64);
                let tx = F::round_even(uniform(generator, -mx, mx)?) as i64;
                let ty = F::round_even(uniform(generator, -my, my)?) as i64;
                (tx, ty)
            }
            None => (0, 0),
        };
        let scale = match o.scale {
            Some((a, b)) => uniform(generator, a, b)?,
            None => 1.0,
        };
        let mut shears = (0.0, 0.0);
        if let Some((x, y)) = shear {
            shears.0 = uniform(generator, x.0, x.1)?;
            if let Some(y) = y {
                shears.1 = uniform(generator, y.0, y.1)?;
            }
        }
        Ok((angle, translate, scale, shears))
    }
}

impl Transform for RandomAffine {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "RandomAffine", |img| {
            let (h, w) = F::get_size(img)?;
            let (angle, (tx, ty), scale, shear) = self.get_params((w, h))?;
            let o = &self.options;
            F::affine(
                img,
                angle,
                (tx as f64, ty as f64),
                scale,
                shear,
                o.interpolation,
                o.fill.as_deref(),
                o.center,
            )
        })
    }
}
