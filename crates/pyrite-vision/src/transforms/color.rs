//! `ColorJitter`: random brightness, contrast, saturation and hue, applied in a random order.

use super::functional as F;
use super::random::uniform;
use super::range::NumOrRange;
use super::{on_pixels, transform_generator, ImageOrTensor, Transform};
use pyrite_core::{bail, Result, Tensor};

/// `transforms.ColorJitter(brightness, contrast, saturation, hue)`. Each factor is drawn
/// uniformly from its range; a number `x` means `(max(0, 1 - x), 1 + x)` for brightness,
/// contrast and saturation (non-negative) and `(-x, x)` for hue (`x <= 0.5`). A range that is
/// `None` (or the neutral `(1, 1)` / `(0, 0)`) is not applied. Each call draws the order of
/// the four adjustments (a permutation) and then the factors of those that are set.
///
/// ```
/// use pyrite::vision::transforms::{ColorJitter, Transform};
/// let img = pyrite::Tensor::rand([3, 8, 8], pyrite::DType::F32).unwrap();
/// let t = ColorJitter::new(0.4, 0.4, 0.4, 0.1).unwrap();
/// assert_eq!(t.brightness, Some((0.6, 1.4)));
/// assert_eq!(t.apply(&img).unwrap().dims(), &[3, 8, 8]);
/// let p = t.get_params().unwrap();
/// assert!(p.hue.unwrap().abs() <= 0.1);
/// assert!(ColorJitter::new(0.0, 0.0, 0.0, 0.6).is_err()); // hue beyond [-0.5, 0.5]
/// assert!(ColorJitter::new((1.2, 0.8), 0.0, 0.0, 0.0).is_err()); // min > max
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColorJitter {
    /// `(min, max)` of the brightness factor, non-negative.
    pub brightness: Option<(f64, f64)>,
    /// `(min, max)` of the contrast factor, non-negative.
    pub contrast: Option<(f64, f64)>,
    /// `(min, max)` of the saturation factor, non-negative.
    pub saturation: Option<(f64, f64)>,
    /// `(min, max)` of the hue shift, within `[-0.5, 0.5]`.
    pub hue: Option<(f64, f64)>,
}

/// What [`ColorJitter::get_params`] draws: the order of the adjustments (0 brightness, 1
/// contrast, 2 saturation, 3 hue) and the factors of those that are set.
#[derive(Clone, Debug, PartialEq)]
pub struct ColorJitterParams {
    pub order: [usize; 4],
    pub brightness: Option<f64>,
    pub contrast: Option<f64>,
    pub saturation: Option<f64>,
    pub hue: Option<f64>,
}

const FACTOR_BOUND: (f64, f64) = (0.0, f64::INFINITY);
const HUE_BOUND: (f64, f64) = (-0.5, 0.5);

/// torchvision's `_check_input`: the range of a parameter, `None` when it is the neutral one.
fn jitter_range(
    value: NumOrRange,
    name: &str,
    center: f64,
    bound: (f64, f64),
    clip_first_on_zero: bool,
) -> Result<Option<(f64, f64)>> {
    let (mut a, b) = value.around(center, name)?;
    if clip_first_on_zero && matches!(value, NumOrRange::Num(_)) {
        a = a.max(0.0);
    }
    check_jitter(Some((a, b)), name, bound)?;
    Ok(if a == center && b == center { None } else { Some((a, b)) })
}

fn check_jitter(range: Option<(f64, f64)>, name: &str, bound: (f64, f64)) -> Result<()> {
    if let Some((a, b)) = range
        && !(bound.0 <= a && a <= b && b <= bound.1)
    {
        bail!(Value, "ColorJitter: {name} values should be between {bound:?}, but got ({a}, {b})");
    }
    Ok(())
}

impl ColorJitter {
    /// Checks and stores the four ranges (see the type's documentation).
    pub fn new(
        brightness: impl Into<NumOrRange>,
        contrast: impl Into<NumOrRange>,
        saturation: impl Into<NumOrRange>,
        hue: impl Into<NumOrRange>,
    ) -> Result<ColorJitter> {
        Ok(ColorJitter {
            brightness: jitter_range(brightness.into(), "brightness", 1.0, FACTOR_BOUND, true)?,
            contrast: jitter_range(contrast.into(), "contrast", 1.0, FACTOR_BOUND, true)?,
            saturation: jitter_range(saturation.into(), "saturation", 1.0, FACTOR_BOUND, true)?,
            hue: jitter_range(hue.into(), "hue", 0.0, HUE_BOUND, false)?,
        })
    }

    /// `get_params(brightness, contrast, saturation, hue)`: a random order of the four
    /// adjustments, then one uniform factor for each range that is set.
    pub fn get_params(&self) -> Result<ColorJitterParams> {
        check_jitter(self.brightness, "brightness", FACTOR_BOUND)?;
        check_jitter(self.contrast, "contrast", FACTOR_BOUND)?;
        check_jitter(self.saturation, "saturation", FACTOR_BOUND)?;
        check_jitter(self.hue, "hue", HUE_BOUND)?;
        let g = transform_generator();
        let generator = g.as_deref();
        let perm = Tensor::randperm_with(4, generator)?.to_vec::<i64>()?;
        let mut order = [0usize; 4];
        for (o, p) in order.iter_mut().zip(perm) {
            *o = p as usize;
        }
        let draw = |r: Option<(f64, f64)>| r.map(|(a, b)| uniform(generator, a, b)).transpose();
        Ok(ColorJitterParams {
            order,
            brightness: draw(self.brightness)?,
            contrast: draw(self.contrast)?,
            saturation: draw(self.saturation)?,
            hue: draw(self.hue)?,
        })
    }
}

impl Transform for ColorJitter {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "ColorJitter", |img| {
            F::check_image(img, "ColorJitter")?;
            let p = self.get_params()?;
            let mut x = img.clone();
            for id in p.order {
                x = match (id, p.brightness, p.contrast, p.saturation, p.hue) {
                    (0, Some(b), ..) => F::adjust_brightness(&x, b)?,
                    (1, _, Some(c), ..) => F::adjust_contrast(&x, c)?,
                    (2, _, _, Some(s), _) => F::adjust_saturation(&x, s)?,
                    (3, .., Some(h)) => F::adjust_hue(&x, h)?,
                    _ => x,
                };
            }
            Ok(x)
        })
    }
}
