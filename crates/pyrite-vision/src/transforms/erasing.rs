//! `RandomErasing`: blanks out a random rectangle (Zhong et al., "Random Erasing Data
//! Augmentation").

use super::functional as F;
use super::geometry::fires;
use super::random::{randint, uniform};
use super::{tensor_only, transform_generator, ImageOrTensor, Transform};
use pyrite_core::{bail, DType, Result, Tensor};

/// What [`RandomErasing`] writes into the rectangle.
#[derive(Clone, Debug, PartialEq)]
pub enum ErasingValue {
    /// One value for every channel (torchvision's `value=0`).
    Value(f64),
    /// One value per channel.
    PerChannel(Vec<f64>),
    /// Standard normal noise (torchvision's `value="random"`).
    Random,
}

/// `transforms.RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0,
/// inplace=False)`: with probability `p`, erases a rectangle whose area is a fraction
/// (from `scale`) of the image and whose aspect ratio `h / w` is drawn log-uniformly from
/// `ratio`. Up to 10 attempts find a rectangle smaller than the image; when none fits the
/// image is returned unchanged.
///
/// ```
/// use pyrite::vision::transforms::{ErasingValue, RandomErasing, Transform};
/// let img = pyrite::Tensor::ones([3, 10, 10], pyrite::DType::F32).unwrap();
/// let t = RandomErasing { p: 1.0, value: ErasingValue::Value(0.0), ..Default::default() };
/// let out = t.apply(&img).unwrap().to_vec::<f32>().unwrap();
/// assert!(out.iter().any(|&v| v == 0.0) && out.iter().any(|&v| v == 1.0));
/// let (i, j, h, w, _) = t.get_params(&img).unwrap();
/// assert!(i + h <= 10 && j + w <= 10 && h < 10 && w < 10);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RandomErasing {
    pub p: f64,
    /// `(min, max)` fraction of the image's area, within `[0, 1]`.
    pub scale: (f64, f64),
    /// `(min, max)` aspect ratio `h / w`, positive.
    pub ratio: (f64, f64),
    pub value: ErasingValue,
    /// Overwrite the input tensor (and return it).
    pub inplace: bool,
}

impl Default for RandomErasing {
    fn default() -> Self {
        RandomErasing {
            p: 0.5,
            scale: (0.02, 0.33),
            ratio: (0.3, 3.3),
            value: ErasingValue::Value(0.0),
            inplace: false,
        }
    }
}

impl RandomErasing {
    fn check(&self) -> Result<()> {
        let (s, r) = (self.scale, self.ratio);
        if !(0.0..=1.0).contains(&self.p) {
            bail!(
                Value,
                "RandomErasing: random erasing probability should be between 0 and 1, got {}",
                self.p
            );
        }
        if !(s.0 >= 0.0 && s.1 <= 1.0) {
            bail!(Value, "RandomErasing: scale should be between 0 and 1, got {s:?}");
        }
        if !(s.0 <= s.1 && r.0 <= r.1) {
            bail!(Value, "RandomErasing: scale and ratio should be of kind (min, max), got {s:?} and {r:?}");
        }
        if r.0.is_nan() || r.0 <= 0.0 || !r.1.is_finite() {
            bail!(Value, "RandomErasing: ratio should be positive and finite, got {r:?}");
        }
        Ok(())
    }

    /// `get_params(img, scale, ratio, value)`: `(top, left, height, width, value)` of the
    /// rectangle, the value a tensor that broadcasts to it (`[C, 1, 1]`, `[1, 1, 1]`, or
    /// `[C, h, w]` noise). Each attempt draws the area fraction and the log aspect ratio, then
    /// (for a rectangle that fits) the noise and the position; after 10 failed attempts it is
    /// `(0, 0, H, W, img)`, which leaves the image unchanged.
    pub fn get_params(&self, img: &Tensor) -> Result<(usize, usize, usize, usize, Tensor)> {
        self.check()?;
        let (ih, iw) = F::get_size(img)?;
        let c = img.dims()[img.dims().len() - 3];
        let g = transform_generator();
        let generator = g.as_deref();
        let area = (ih * iw) as f64;
        let (lr0, lr1) = (self.ratio.0.ln(), self.ratio.1.ln());
        for _ in 0..10 {
            let erase_area = area * uniform(generator, self.scale.0, self.scale.1)?;
            let aspect = uniform(generator, lr0, lr1)?.exp();
            let h = F::round_even((erase_area * aspect).sqrt()) as usize;
            let w = F::round_even((erase_area / aspect).sqrt()) as usize;
            if !(h < ih && w < iw) {
                continue;
            }
            let v = match &self.value {
                ErasingValue::Random => Tensor::randn_with([c, h, w], DType::F32, generator)?,
                ErasingValue::Value(x) => Tensor::from_vec(vec![*x as f32], [1, 1, 1])?,
                ErasingValue::PerChannel(vs) => {
                    Tensor::from_vec(vs.iter().map(|&x| x as f32).collect::<Vec<_>>(), [vs.len(), 1, 1])?
                }
            };
            let i = randint(generator, 0, (ih - h + 1) as i64)? as usize;
            let j = randint(generator, 0, (iw - w + 1) as i64)? as usize;
            return Ok((i, j, h, w, v));
        }
        Ok((0, 0, ih, iw, img.clone()))
    }
}

impl Transform for RandomErasing {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        let img = tensor_only(input, "RandomErasing")?;
        self.erase(&img).map(Into::into)
    }
}

impl RandomErasing {
    fn erase(&self, img: &Tensor) -> Result<Tensor> {
        self.check()?;
        F::check_image(img, "RandomErasing")?;
        if !fires(self.p, "RandomErasing")? {
            return Ok(img.clone());
        }
        let c = img.dims()[img.dims().len() - 3];
        if let ErasingValue::PerChannel(vs) = &self.value
            && vs.len() != 1
            && vs.len() != c
        {
            bail!(
                    Value,
                    "RandomErasing: if value is a sequence, it should have either a single value or {c} (number of input channels), got {}",
                    vs.len()
                );
        }
        let (i, j, h, w, v) = self.get_params(img)?;
        if (h, w) == F::get_size(img)? {
            return Ok(img.clone()); // no rectangle fitted: unchanged
        }
        F::erase(img, i, j, h, w, &v, self.inplace)
    }
}
