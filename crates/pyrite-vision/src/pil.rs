//! [`Image`]: Pyrite's PIL image, the 8-bit `[H, W, C]` picture the datasets on disk hand to
//! their transforms, as torchvision's hand them a `PIL.Image.Image`.

use pyrite_core::{bail, err, DType, Result, Tensor};
use std::path::Path;

/// An 8-bit image laid out as PIL lays it out: rows of pixels, each pixel its channels
/// (`[H, W, C]`), with 1 (mode `"L"`), 3 (`"RGB"`) or 4 (`"RGBA"`) channels.
///
/// [`MNIST`](crate::datasets::MNIST), [`FashionMNIST`](crate::datasets::FashionMNIST),
/// [`CIFAR10`](crate::datasets::CIFAR10) and [`ImageFolder`](crate::datasets::ImageFolder) hand
/// their transform an `Image`, as torchvision's hand theirs a PIL image, so torchvision's
/// pipelines port literally: the geometric and colour transforms take an `Image` and return
/// one, and [`ToTensor`](crate::transforms::ToTensor) /
/// [`PILToTensor`](crate::transforms::PILToTensor) turn it into a `[C, H, W]` tensor. A tensor
/// is always `[..., C, H, W]`; the only `[H, W, C]` data is an `Image`, and its type says so.
///
/// ```
/// use pyrite::vision::transforms::{Compose, Normalize, ToTensor, Transform};
/// use pyrite::vision::Image;
/// // a 1 x 2 RGB image: pixel (0, 0) is (0, 51, 255), pixel (0, 1) is (255, 0, 0)
/// let img = Image::new(1, 2, 3, vec![0, 51, 255, 255, 0, 0])?;
/// assert_eq!((img.mode(), img.size()), ("RGB", (2, 1)));
/// let x = ToTensor.forward(img.into())?.into_tensor()?;
/// assert_eq!(x.dims(), &[3, 1, 2]);
/// assert_eq!(x.to_vec::<f32>()?, vec![0.0, 1.0, 0.2, 0.0, 1.0, 0.0]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Image {
    height: usize,
    width: usize,
    channels: usize,
    data: Vec<u8>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<Image mode={} size={}x{}>", self.mode(), self.width, self.height)
    }
}

impl Image {
    /// An image of `height x width` pixels of `channels` (1, 3 or 4) bytes each, from its
    /// `[H, W, C]` bytes (PIL's `Image.frombytes`).
    pub fn new(height: usize, width: usize, channels: usize, data: Vec<u8>) -> Result<Image> {
        if !matches!(channels, 1 | 3 | 4) {
            bail!(Value, "Image: expected 1 (L), 3 (RGB) or 4 (RGBA) channels, got {channels}");
        }
        if data.len() != height * width * channels {
            bail!(
                Shape,
                "Image: {height} x {width} x {channels} needs {} bytes, got {}",
                height * width * channels,
                data.len()
            );
        }
        Ok(Image { height, width, channels, data })
    }

    /// The image of a u8 tensor laid out `[H, W, C]` or `[H, W]` (PIL's `Image.fromarray` of a
    /// numpy array): the one place an `[H, W, C]` array becomes an image.
    pub fn from_hwc_tensor(t: &Tensor) -> Result<Image> {
        if t.dtype() != DType::U8 {
            bail!(DType, "Image::from_hwc_tensor: expected a u8 tensor, got {:?}", t.dtype());
        }
        let (h, w, c) = match *t.dims() {
            [h, w] => (h, w, 1),
            [h, w, c] => (h, w, c),
            _ => {
                bail!(Shape, "Image::from_hwc_tensor: expected [H, W, C] or [H, W], got shape {:?}", t.dims())
            }
        };
        Image::new(h, w, c, t.contiguous()?.to_vec::<u8>()?)
    }

    /// The image of a u8 tensor laid out `[C, H, W]`.
    pub(crate) fn from_chw_u8(t: &Tensor, what: &str) -> Result<Image> {
        let &[c, h, w] = t.dims() else {
            bail!(Shape, "{what}: expected a [C, H, W] image, got shape {:?}", t.dims());
        };
        if t.dtype() != DType::U8 {
            bail!(DType, "{what}: expected a u8 image, got {:?}", t.dtype());
        }
        Image::new(h, w, c, t.permute(&[1, 2, 0])?.contiguous()?.to_vec::<u8>()?)
            .map_err(|e| err!(Value, "{what}: {}", e.message()))
    }

    /// The `[C, H, W]` u8 tensor of the pixels (`F.pil_to_tensor`).
    pub(crate) fn to_chw_u8(&self) -> Result<Tensor> {
        Tensor::from_slice(&self.data, [self.height, self.width, self.channels])?
            .permute(&[2, 0, 1])?
            .contiguous()
    }

    /// Decodes the PNG or JPEG file at `path` (`Image.open`): mode `"L"` for grey images,
    /// `"RGBA"` for any with alpha, `"RGB"` otherwise (16-bit samples are reduced to 8).
    pub fn open(path: impl AsRef<Path>) -> Result<Image> {
        let path = path.as_ref();
        let img = decode(path)?;
        let (w, h) = (img.width() as usize, img.height() as usize);
        let c = img.color();
        if c.has_alpha() {
            Image::new(h, w, 4, img.into_rgba8().into_raw())
        } else if c.has_color() {
            Image::new(h, w, 3, img.into_rgb8().into_raw())
        } else {
            Image::new(h, w, 1, img.into_luma8().into_raw())
        }
    }

    /// Decodes the image at `path` converted to RGB (`Image.open(path).convert("RGB")`,
    /// torchvision's default loader): grey is replicated, alpha dropped.
    pub(crate) fn open_rgb(path: &Path) -> Result<Image> {
        let img = decode(path)?;
        let (w, h) = (img.width() as usize, img.height() as usize);
        Image::new(h, w, 3, img.into_rgb8().into_raw())
    }

    /// Writes the image to `path`, in the format its extension names (`.png`, `.jpg`, `.jpeg`).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let color = match self.channels {
            1 => image::ExtendedColorType::L8,
            3 => image::ExtendedColorType::Rgb8,
            _ => image::ExtendedColorType::Rgba8,
        };
        image::save_buffer(path, &self.data, self.width as u32, self.height as u32, color)
            .map_err(|e| err!(Io, "cannot save image {}: {e}", path.display()))
    }

    /// The height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The width in pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// `(width, height)`, as PIL's `img.size`.
    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }

    /// The number of channels (`F.get_image_num_channels`): 1, 3 or 4.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// PIL's mode: `"L"`, `"RGB"` or `"RGBA"`.
    pub fn mode(&self) -> &'static str {
        match self.channels {
            1 => "L",
            3 => "RGB",
            _ => "RGBA",
        }
    }

    /// The `[H, W, C]` bytes.
    pub fn as_raw(&self) -> &[u8] {
        &self.data
    }

    /// The `[H, W, C]` bytes, by value.
    pub fn into_raw(self) -> Vec<u8> {
        self.data
    }
}

fn decode(path: &Path) -> Result<image::DynamicImage> {
    image::ImageReader::open(path)
        .map_err(|e| err!(Io, "cannot open image {}: {e}", path.display()))?
        .with_guessed_format()
        .map_err(|e| err!(Io, "cannot read image {}: {e}", path.display()))?
        .decode()
        .map_err(|e| err!(Io, "cannot decode image {}: {e}", path.display()))
}
