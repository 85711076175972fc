//! Conversion, colour and container transforms: `ToTensor`, `PILToTensor`, `ToPILImage`,
//! `ConvertImageDtype`, `Normalize`,
//! `Grayscale`, `GaussianBlur`, `Lambda`, `RandomApply`, `RandomChoice`.

use super::functional as F;
use super::geometry::fires;
use super::random::uniform;
use super::{on_pixels, tensor_only, transform_generator, ImageOrTensor, Transform};
use crate::Image;
use pyrite_core::{bail, DType, Result, Tensor};

/// `transforms.ToTensor()`: an [`Image`] (`[H, W, C]` u8, a PIL image) becomes a `[C, H, W]`
/// f32 tensor in `[0, 1]` (each byte divided by 255, bit for bit as torchvision).
///
/// A tensor is refused, as torchvision refuses one (`TypeError: pic should be PIL Image or
/// ndarray`): a tensor image is already `[C, H, W]` and is never permuted; scale a u8 one with
/// [`ConvertImageDtype`]`(DType::F32)`. An `[H, W, C]` array (torchvision's ndarray input)
/// becomes an image with [`Image::from_hwc_tensor`].
///
/// ```
/// use pyrite::vision::transforms::{ToTensor, Transform};
/// use pyrite::vision::Image;
/// let img = Image::new(2, 1, 3, vec![0, 255, 51, 102, 0, 255])?;
/// let chw = ToTensor.forward(img.into())?.into_tensor()?;
/// assert_eq!(chw.dims(), &[3, 2, 1]);
/// assert_eq!(chw.to_vec::<f32>()?, vec![0.0, 0.4, 1.0, 0.0, 0.2, 1.0]);
/// let already_chw = pyrite::Tensor::zeros([1, 28, 28], pyrite::DType::U8)?;
/// assert!(ToTensor.apply(&already_chw).is_err());
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ToTensor;

impl Transform for ToTensor {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        F::to_tensor(&pic(input, "ToTensor", "ConvertImageDtype(DType::F32) scales a u8 one to [0, 1]")?)
            .map(Into::into)
    }
}

/// `transforms.PILToTensor()`: an [`Image`] becomes its `[C, H, W]` u8 tensor (no scaling). A
/// tensor is refused, as by [`ToTensor`].
///
/// ```
/// use pyrite::vision::transforms::{PILToTensor, Transform};
/// use pyrite::vision::Image;
/// let img = Image::new(1, 2, 3, vec![1, 2, 3, 4, 5, 6])?;
/// let chw = PILToTensor.forward(img.into())?.into_tensor()?;
/// assert_eq!((chw.dims(), chw.to_vec::<u8>()?), (&[3, 1, 2][..], vec![1, 4, 2, 5, 3, 6]));
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct PILToTensor;

impl Transform for PILToTensor {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        F::pil_to_tensor(&pic(input, "PILToTensor", "it is already the [C, H, W] tensor PILToTensor makes")?)
            .map(Into::into)
    }
}

/// The image of a `ToTensor`-like transform's input, or torchvision's error for a tensor.
fn pic(input: ImageOrTensor, what: &str, hint: &str) -> Result<Image> {
    match input {
        ImageOrTensor::Image(img) => Ok(img),
        ImageOrTensor::Tensor(t) => bail!(
            Value,
            "{what}: pic should be an Image (a PIL image), got a tensor of shape {:?} ({:?}). A tensor image is [C, H, W] and is never permuted: {hint}; an [H, W, C] array becomes an Image with Image::from_hwc_tensor",
            t.dims(),
            t.dtype()
        ),
    }
}

/// `transforms.ToPILImage()` (mode inferred): a `[C, H, W]` (or `[H, W]`) tensor of 1, 3 or 4
/// channels becomes an [`Image`] (`"L"`, `"RGB"`, `"RGBA"`); a float one is `x * 255`
/// truncated to u8, as torchvision's `pic.mul(255).byte()`. An image is passed through.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToPILImage;

impl Transform for ToPILImage {
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        match input {
            ImageOrTensor::Image(img) => Ok(img.into()),
            ImageOrTensor::Tensor(t) => F::to_pil_image(&t).map(Into::into),
        }
    }
}

/// `transforms.ConvertImageDtype(dtype)`: u8 -> float divides by 255 (bit for bit), float ->
/// u8 multiplies by 255.999 and truncates (see [`F::convert_image_dtype`]). Tensors only.
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
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        let img = tensor_only(input, "ConvertImageDtype")?;
        F::check_image(&img, "ConvertImageDtype")?;
        F::convert_image_dtype(&img, self.0).map(Into::into)
    }
}

/// `transforms.Normalize(mean, std, inplace=False)`: `(img - mean) / std` per channel, on
/// float tensor images. With `inplace` the input tensor is overwritten too.
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
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        let img = tensor_only(input, "Normalize")?;
        let out = F::normalize(&img, &self.mean, &self.std)?;
        if self.inplace {
            img.copy_(&out)?;
            return Ok(img.into());
        }
        Ok(out.into())
    }
}

/// `transforms.Grayscale(num_output_channels=1)`: on a tensor `F.rgb_to_grayscale`, on an
/// [`Image`] PIL's `convert("L")` ([`F::to_grayscale`]).
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
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        match input {
            ImageOrTensor::Image(img) => F::to_grayscale(&img, self.num_output_channels).map(Into::into),
            ImageOrTensor::Tensor(t) => F::rgb_to_grayscale(&t, self.num_output_channels).map(Into::into),
        }
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
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        on_pixels(input, "GaussianBlur", |img| self.blur(img))
    }
}

impl GaussianBlur {
    fn blur(&self, img: &Tensor) -> Result<Tensor> {
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

/// `transforms.Lambda(f)`: a user function of a tensor image as a transform (an [`Image`] is
/// refused; a closure `Fn(&Tensor) -> Result<Tensor>` is a transform too).
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
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        (self.0)(&tensor_only(input, "Lambda")?).map(Into::into)
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
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
        if !fires(self.p, "RandomApply")? {
            return Ok(input);
        }
        let mut x = input;
        for t in &self.transforms {
            x = t.forward(x)?;
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
    fn forward(&self, input: ImageOrTensor) -> Result<ImageOrTensor> {
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
        self.transforms[pick].forward(input)
    }
}
