//! Conversion, colour and container transforms: `ToTensor`, `ConvertImageDtype`, `Normalize`,
//! `Grayscale`, `GaussianBlur`, `Lambda`, `RandomApply`, `RandomChoice`.

use super::functional as F;
use super::geometry::fires;
use super::random::uniform;
use super::{transform_generator, Transform};
use pyrite_core::{bail, DType, Result, Tensor};

/// `transforms.ToTensor()` for a tensor holding an `[H, W, C]` image: `[C, H, W]`, u8 scaled
/// to f32 in `[0, 1]`.
///
/// ```
/// use pyrite::vision::transforms::{ToTensor, Transform};
/// let hwc = pyrite::Tensor::from_vec(vec![0u8, 255, 51, 102], [2, 1, 2]).unwrap();
/// let chw = ToTensor.apply(&hwc).unwrap();
/// assert_eq!(chw.dims(), &[2, 2, 1]);
/// assert_eq!(chw.to_vec::<f32>().unwrap(), vec![0.0, 0.2, 1.0, 0.4]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ToTensor;

impl Transform for ToTensor {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        F::to_tensor(img)
    }
}

/// `transforms.ConvertImageDtype(dtype)` (v2 `ToDtype(dtype, scale=True)`): u8 -> float
/// divides by 255, float -> u8 multiplies by 255.999 and truncates.
///
/// ```
/// use pyrite::vision::transforms::{ConvertImageDtype, Transform};
/// use pyrite::DType;
/// let img = pyrite::Tensor::from_vec(vec![0.0f32, 0.5, 1.0], [1, 1, 3]).unwrap();
/// let u = ConvertImageDtype(DType::U8).apply(&img).unwrap();
/// assert_eq!(u.to_vec::<u8>().unwrap(), vec![0, 127, 255]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ConvertImageDtype(pub DType);

impl Transform for ConvertImageDtype {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        F::check_image(img, "ConvertImageDtype")?;
        F::convert_image_dtype(img, self.0)
    }
}

/// `transforms.Normalize(mean, std, inplace=False)`: `(img - mean) / std` per channel, on
/// float images. With `inplace` the input tensor is overwritten too.
///
/// ```
/// use pyrite::vision::transforms::{Normalize, Transform};
/// let img = pyrite::Tensor::full([2, 1, 1], 0.5, pyrite::DType::F32).unwrap();
/// let t = Normalize { mean: vec![0.5, 0.0], std: vec![1.0, 0.25], ..Default::default() };
/// assert_eq!(t.apply(&img).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 2.0]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Normalize {
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    pub inplace: bool,
}

impl Transform for Normalize {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        let out = F::normalize(img, &self.mean, &self.std)?;
        if self.inplace {
            img.copy_(&out)?;
            return Ok(img.clone());
        }
        Ok(out)
    }
}

/// `transforms.Grayscale(num_output_channels=1)`.
///
/// ```
/// use pyrite::vision::transforms::{Grayscale, Transform};
/// let img = pyrite::Tensor::rand([3, 4, 4], pyrite::DType::F32).unwrap();
/// assert_eq!(Grayscale::default().apply(&img).unwrap().dims(), &[1, 4, 4]);
/// assert_eq!(Grayscale { num_output_channels: 3 }.apply(&img).unwrap().dims(), &[3, 4, 4]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Grayscale {
    pub num_output_channels: usize,
}

impl Default for Grayscale {
    fn default() -> Self {
        Grayscale { num_output_channels: 1 }
    }
}

impl Transform for Grayscale {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        F::rgb_to_grayscale(img, self.num_output_channels)
    }
}

/// `transforms.GaussianBlur(kernel_size, sigma=(0.1, 2.0))`: sigma drawn uniformly from the
/// range on each call (one draw; a fixed sigma is `(s, s)`).
///
/// ```
/// use pyrite::vision::transforms::{GaussianBlur, Transform};
/// let img = pyrite::Tensor::rand([3, 8, 8], pyrite::DType::F32).unwrap();
/// let t = GaussianBlur { kernel_size: (3, 5), sigma: (1.0, 1.0) };
/// assert_eq!(t.apply(&img).unwrap().dims(), &[3, 8, 8]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct GaussianBlur {
    /// `(height, width)`, odd and positive.
    pub kernel_size: (usize, usize),
    /// `(min, max)` of the sigma drawn.
    pub sigma: (f64, f64),
}

impl Default for GaussianBlur {
    fn default() -> Self {
        GaussianBlur { kernel_size: (3, 3), sigma: (0.1, 2.0) }
    }
}

impl Transform for GaussianBlur {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        let (a, b) = self.sigma;
        if a <= 0.0 || a > b {
            bail!(
                Value,
                "GaussianBlur: sigma should be (min, max) with 0 < min <= max, got {:?}",
                self.sigma
            );
        }
        let g = transform_generator();
        let s = uniform(g.as_deref(), a, b)?;
        F::gaussian_blur(img, self.kernel_size, (s, s))
    }
}

/// `transforms.Lambda(f)`: a user function as a transform.
///
/// ```
/// use pyrite::vision::transforms::{Lambda, Transform};
/// let t = Lambda::new(|x: &pyrite::Tensor| x.mul_scalar(2.0));
/// let img = pyrite::Tensor::ones([1, 1, 1], pyrite::DType::F32).unwrap();
/// assert_eq!(t.apply(&img).unwrap().to_vec::<f32>().unwrap(), vec![2.0]);
/// ```
pub struct Lambda(pub Box<LambdaFn>);

/// The function a [`Lambda`] holds.
pub type LambdaFn = dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync;

impl Lambda {
    pub fn new(f: impl Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static) -> Lambda {
        Lambda(Box::new(f))
    }
}

impl Transform for Lambda {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        (self.0)(img)
    }
}

/// `transforms.RandomApply(transforms, p=0.5)`: all of `transforms` in order, with
/// probability `p` (one draw per call).
pub struct RandomApply {
    pub transforms: Vec<Box<dyn Transform>>,
    pub p: f64,
}

impl RandomApply {
    pub fn new(transforms: Vec<Box<dyn Transform>>, p: f64) -> RandomApply {
        RandomApply { transforms, p }
    }
}

impl Transform for RandomApply {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        if !fires(self.p, "RandomApply")? {
            return Ok(img.clone());
        }
        let mut x = img.clone();
        for t in &self.transforms {
            x = t.apply(&x)?;
        }
        Ok(x)
    }
}

/// `transforms.RandomChoice(transforms, p=None)`: one of `transforms`, picked with weights
/// `p` (uniform when `None`; one draw per call).
pub struct RandomChoice {
    pub transforms: Vec<Box<dyn Transform>>,
    pub p: Option<Vec<f64>>,
}

impl RandomChoice {
    pub fn new(transforms: Vec<Box<dyn Transform>>) -> RandomChoice {
        RandomChoice { transforms, p: None }
    }
}

impl Transform for RandomChoice {
    fn apply(&self, img: &Tensor) -> Result<Tensor> {
        let n = self.transforms.len();
        if n == 0 {
            bail!(Value, "RandomChoice: needs at least one transform");
        }
        let p = self.p.clone().unwrap_or_else(|| vec![1.0; n]);
        if p.len() != n || p.iter().any(|&x| x.is_nan() || x < 0.0) || p.iter().sum::<f64>() <= 0.0 {
            bail!(Value, "RandomChoice: p must be {n} non-negative weights with a positive sum, got {p:?}");
        }
        let total: f64 = p.iter().sum();
        let g = transform_generator();
        let u = uniform(g.as_deref(), 0.0, total)?;
        let mut acc = 0.0;
        let mut pick = n - 1;
        for (i, w) in p.iter().enumerate() {
            acc += w;
            if u < acc && *w > 0.0 {
                pick = i;
                break;
            }
        }
        self.transforms[pick].apply(img)
    }
}
