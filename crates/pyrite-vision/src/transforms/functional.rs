//! `torchvision.transforms.v2.functional`: the deterministic kernels behind the transforms, on
//! tensor images `[..., C, H, W]` (u8 or float). They follow torchvision's tensor kernels: the
//! same output sizes, crop anchors, padding modes and resampling weights. The conversions
//! ([`to_tensor`], [`pil_to_tensor`], [`to_pil_image`]) and [`to_grayscale`] take or make an
//! [`Image`].

use crate::Image;
use pyrite_core::{bail, DType, Result, Tensor};

mod affine;
mod color;
mod resample;

pub use affine::{affine, rotate};
pub use color::{adjust_brightness, adjust_contrast, adjust_hue, adjust_saturation};
use resample::{resample, Taps};

/// `InterpolationMode` (the modes the tensor kernels here implement).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InterpolationMode {
    /// `InterpolationMode.NEAREST` (torch's legacy `"nearest"`: `floor(dst * in / out)`).
    Nearest,
    /// `InterpolationMode.BILINEAR` (`align_corners=False`).
    #[default]
    Bilinear,
    /// `InterpolationMode.BICUBIC` (`align_corners=False`; Keys' kernel with `a = -0.75`, or
    /// PIL's `a = -0.5` when antialiased). `resize` only: rotations and affine maps on tensors
    /// take nearest and bilinear.
    Bicubic,
}

impl InterpolationMode {
    /// torchvision's name of the mode (`"nearest"`, `"bilinear"`, `"bicubic"`).
    pub fn name(self) -> &'static str {
        match self {
            InterpolationMode::Nearest => "nearest",
            InterpolationMode::Bilinear => "bilinear",
            InterpolationMode::Bicubic => "bicubic",
        }
    }
}

/// `padding_mode` of `Pad`/`RandomCrop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PaddingMode {
    /// Pads with `fill`.
    #[default]
    Constant,
    /// Repeats the last value on the edge.
    Edge,
    /// Reflects without repeating the edge value (`[1, 2, 3] -> [3, 2, 1, 2, 3]`).
    Reflect,
    /// Reflects repeating the edge value (`[1, 2, 3] -> [2, 1, 1, 2, 3]`).
    Symmetric,
}

/// A size argument: `Size::Exact(h, w)` (a `(h, w)` tuple) or one int (`Size::Int(n)`: the
/// shorter side for `Resize`, a square for the crops).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// One int, as torchvision's `size=n`.
    Int(usize),
    /// `(height, width)`.
    Exact(usize, usize),
}

impl Size {
    /// `(h, w)`, a square for `Size::Int`.
    pub fn pair(self) -> (usize, usize) {
        match self {
            Size::Int(n) => (n, n),
            Size::Exact(h, w) => (h, w),
        }
    }
}

impl From<usize> for Size {
    fn from(n: usize) -> Size {
        Size::Int(n)
    }
}

impl From<(usize, usize)> for Size {
    fn from((h, w): (usize, usize)) -> Size {
        Size::Exact(h, w)
    }
}

/// An image unpacked to host values: `n` planes of `h x w`, `c` channels per image.
pub(crate) struct Img {
    pub lead: Vec<usize>,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub dtype: DType,
    pub data: Vec<f64>,
}

impl Img {
    pub fn new(img: &Tensor, what: &str) -> Result<Img> {
        let d = img.dims();
        if d.len() < 3 {
            bail!(Shape, "{what}: expected an image tensor [..., C, H, W], got shape {d:?}");
        }
        let dtype = img.dtype();
        if !matches!(dtype, DType::U8 | DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
            bail!(DType, "{what}: expected a u8 or float image, got {dtype:?}");
        }
        let n = d.len();
        Ok(Img {
            lead: d[..n - 3].to_vec(),
            c: d[n - 3],
            h: d[n - 2],
            w: d[n - 1],
            dtype,
            data: img.to_dtype(DType::F64)?.to_vec::<f64>()?,
        })
    }

    pub fn planes(&self) -> usize {
        self.lead.iter().product::<usize>() * self.c
    }

    fn shape(&self, c: usize, h: usize, w: usize) -> Vec<usize> {
        let mut s = self.lead.clone();
        s.extend([c, h, w]);
        s
    }

    /// A tensor of this image's dtype from `data` (u8 values are rounded and clamped first).
    pub fn tensor(&self, data: Vec<f64>, c: usize, h: usize, w: usize) -> Result<Tensor> {
        self.tensor_as(data, c, h, w, self.dtype)
    }

    pub fn tensor_as(&self, data: Vec<f64>, c: usize, h: usize, w: usize, dtype: DType) -> Result<Tensor> {
        let shape = self.shape(c, h, w);
        if dtype == DType::U8 {
            let v: Vec<u8> = data.iter().map(|x| x.round().clamp(0.0, 255.0) as u8).collect();
            return Tensor::from_vec(v, shape);
        }
        Tensor::from_vec(data, shape)?.to_dtype(dtype)
    }

    /// Maps each output pixel `(plane, y, x)` of an `oh x ow` image to a value.
    fn map(&self, oh: usize, ow: usize, f: impl Fn(&[f64], usize, usize) -> f64) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.planes() * oh * ow);
        for p in 0..self.planes() {
            let plane = &self.data[p * self.h * self.w..(p + 1) * self.h * self.w];
            for y in 0..oh {
                for x in 0..ow {
                    out.push(f(plane, y, x));
                }
            }
        }
        out
    }
}

/// `F.hflip`: flips the last (width) dimension.
pub fn hflip(img: &Tensor) -> Result<Tensor> {
    check_image(img, "hflip")?;
    img.flip(&[-1])
}

/// `F.vflip`: flips the height dimension.
pub fn vflip(img: &Tensor) -> Result<Tensor> {
    check_image(img, "vflip")?;
    img.flip(&[-2])
}

pub(crate) fn check_image(img: &Tensor, what: &str) -> Result<()> {
    if img.dims().len() < 3 {
        bail!(Shape, "{what}: expected an image tensor [..., C, H, W], got shape {:?}", img.dims());
    }
    Ok(())
}

/// `(height, width)` of an image tensor.
pub fn get_size(img: &Tensor) -> Result<(usize, usize)> {
    check_image(img, "get_size")?;
    let d = img.dims();
    Ok((d[d.len() - 2], d[d.len() - 1]))
}

/// `F.crop(img, top, left, height, width)`: the region may leave the image; the outside is
/// zero-padded as torchvision does.
pub fn crop(img: &Tensor, top: i64, left: i64, height: usize, width: usize) -> Result<Tensor> {
    let im = Img::new(img, "crop")?;
    let (h, w) = (im.h as i64, im.w as i64);
    let out = im.map(height, width, |p, y, x| {
        let (sy, sx) = (top + y as i64, left + x as i64);
        if sy < 0 || sx < 0 || sy >= h || sx >= w {
            0.0
        } else {
            p[(sy * w + sx) as usize]
        }
    });
    im.tensor(out, im.c, height, width)
}

/// `F.erase(img, i, j, h, w, v, inplace)`: sets the region of rows `i..i + h` and columns
/// `j..j + w` (clipped to the image) to `v`, which broadcasts to the region (`[C, h, w]`,
/// `[C, 1, 1]` or one value) and is cast to the image's dtype. With `inplace` the input tensor
/// is overwritten and returned; otherwise a copy is.
///
/// ```
/// use pyrite::vision::transforms::functional as F;
/// let img = pyrite::Tensor::zeros([1, 3, 3], pyrite::DType::F32).unwrap();
/// let v = pyrite::Tensor::from_vec(vec![7f32], [1, 1, 1]).unwrap();
/// let out = F::erase(&img, 1, 1, 2, 1, &v, false).unwrap();
/// assert_eq!(out.to_vec::<f32>().unwrap(), vec![0., 0., 0., 0., 7., 0., 0., 7., 0.]);
/// assert_eq!(img.to_vec::<f32>().unwrap(), vec![0.; 9]);
/// ```
pub fn erase(
    img: &Tensor,
    i: usize,
    j: usize,
    h: usize,
    w: usize,
    v: &Tensor,
    inplace: bool,
) -> Result<Tensor> {
    let (ih, iw) = get_size(img)?;
    let out = if inplace { img.clone() } else { img.deep_clone()? };
    let (top, left) = (i.min(ih), j.min(iw));
    let (rh, rw) = (i.saturating_add(h).min(ih) - top, j.saturating_add(w).min(iw) - left);
    let region = out.narrow(-2, top as isize, rh)?.narrow(-1, left as isize, rw)?;
    region.copy_(v).map_err(|e| {
        pyrite_core::err!(
            Shape,
            "erase: the value of shape {:?} does not broadcast to the erased region {:?}: {e}",
            v.dims(),
            region.dims()
        )
    })?;
    Ok(out)
}

/// Python's `round` (half to even).
pub(crate) fn round_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// `F.center_crop(img, [h, w])`: zero-pads first when the crop is larger than the image.
pub fn center_crop(img: &Tensor, size: impl Into<Size>) -> Result<Tensor> {
    let (ch, cw) = size.into().pair();
    let (h, w) = get_size(img)?;
    let (mut top, mut left) = (0i64, 0i64);
    if ch > h || cw > w {
        // torchvision pads by ((cw - w) // 2, (ch - h) // 2, ...) then crops at the rounded centre
        let (pl, pt) = (if cw > w { (cw - w) / 2 } else { 0 }, if ch > h { (ch - h) / 2 } else { 0 });
        let (ph, pw) = (h + ch.saturating_sub(h), w + cw.saturating_sub(w));
        top -= pt as i64;
        left -= pl as i64;
        top += round_even((ph as f64 - ch as f64) / 2.0) as i64;
        left += round_even((pw as f64 - cw as f64) / 2.0) as i64;
    } else {
        top = round_even((h as f64 - ch as f64) / 2.0) as i64;
        left = round_even((w as f64 - cw as f64) / 2.0) as i64;
    }
    crop(img, top, left, ch, cw)
}

/// torchvision's padding argument: `[all]`, `[left/right, top/bottom]` or
/// `[left, top, right, bottom]`, returned as `(left, top, right, bottom)`.
pub(crate) fn parse_padding(padding: &[usize], what: &str) -> Result<[usize; 4]> {
    Ok(match *padding {
        [p] => [p, p, p, p],
        [a, b] => [a, b, a, b],
        [l, t, r, b] => [l, t, r, b],
        _ => bail!(
            Value,
            "{what}: padding must be an int or a 1, 2 or 4 element sequence, got {} elements",
            padding.len()
        ),
    })
}

/// `F.pad(img, padding, fill, padding_mode)`; `padding` as torchvision: `[all]`,
/// `[left/right, top/bottom]` or `[left, top, right, bottom]`.
pub fn pad(img: &Tensor, padding: &[usize], fill: f64, padding_mode: PaddingMode) -> Result<Tensor> {
    let [l, t, r, b] = parse_padding(padding, "pad")?;
    let im = Img::new(img, "pad")?;
    let (h, w) = (im.h, im.w);
    match padding_mode {
        PaddingMode::Reflect if l >= w.max(1) || r >= w.max(1) || t >= h.max(1) || b >= h.max(1) => bail!(
            Value,
            "pad: reflect padding ({l}, {t}, {r}, {b}) must be smaller than the image size ({h}, {w})"
        ),
        PaddingMode::Symmetric if l > w || r > w || t > h || b > h => bail!(
            Value,
            "pad: symmetric padding ({l}, {t}, {r}, {b}) must be at most the image size ({h}, {w})"
        ),
        PaddingMode::Edge if (h == 0 || w == 0) && l + t + r + b > 0 => {
            bail!(Value, "pad: edge padding needs a non-empty image, got ({h}, {w})")
        }
        _ => {}
    }
    let map = |i: i64, n: i64| -> Option<i64> {
        if (0..n).contains(&i) {
            return Some(i);
        }
        match padding_mode {
            PaddingMode::Constant => None,
            PaddingMode::Edge => Some(i.clamp(0, n - 1)),
            PaddingMode::Reflect => Some(if i < 0 { -i } else { 2 * (n - 1) - i }),
            PaddingMode::Symmetric => Some(if i < 0 { -i - 1 } else { 2 * n - 1 - i }),
        }
    };
    let fill = if im.dtype == DType::U8 { fill.trunc() } else { fill };
    let (oh, ow) = (h + t + b, w + l + r);
    let out = im.map(oh, ow, |p, y, x| {
        match (map(y as i64 - t as i64, h as i64), map(x as i64 - l as i64, w as i64)) {
            (Some(sy), Some(sx)) => p[sy as usize * w + sx as usize],
            _ => fill,
        }
    });
    im.tensor(out, im.c, oh, ow)
}

/// The output size of `Resize` (torchvision's `_compute_resized_output_size`).
pub fn resized_output_size(
    (h, w): (usize, usize),
    size: Size,
    max_size: Option<usize>,
) -> Result<(usize, usize)> {
    match size {
        Size::Exact(nh, nw) => {
            if max_size.is_some() {
                bail!(
                    Value,
                    "resize: max_size should only be passed if size specifies the length of the smaller edge"
                );
            }
            Ok((nh, nw))
        }
        Size::Int(s) => {
            let (short, long) = if w <= h { (w, h) } else { (h, w) };
            if short == 0 {
                bail!(Value, "resize: cannot resize an empty image of size ({h}, {w})");
            }
            let (mut ns, mut nl) = (s, (s as f64 * long as f64 / short as f64) as usize);
            if let Some(m) = max_size {
                if m <= s {
                    bail!(
                        Value,
                        "resize: max_size = {m} must be strictly greater than the requested size for the smaller edge size = {s}"
                    );
                }
                if nl > m {
                    ns = (m as f64 * ns as f64 / nl as f64) as usize;
                    nl = m;
                }
            }
            Ok(if w <= h { (nl, ns) } else { (ns, nl) })
        }
    }
}

/// `F.resize(img, size, interpolation, max_size, antialias)`. `antialias` affects bilinear and
/// bicubic (as torchvision, it is ignored for nearest). u8 images with bilinear or bicubic are
/// resampled as torch's native u8 CPU kernel does (16-bit fixed-point weights, a horizontal
/// then a vertical pass, each rounded and clamped to `[0, 255]`); float bicubic may overshoot
/// the input range, as in torch.
///
/// ```
/// use pyrite::vision::transforms::{functional as F, InterpolationMode};
/// let img = pyrite::Tensor::rand([3, 20, 40], pyrite::DType::F32).unwrap();
/// let out = F::resize(&img, (30, 50), InterpolationMode::Bicubic, None, true).unwrap();
/// assert_eq!(out.dims(), &[3, 30, 50]);
/// ```
pub fn resize(
    img: &Tensor,
    size: impl Into<Size>,
    interpolation: InterpolationMode,
    max_size: Option<usize>,
    antialias: bool,
) -> Result<Tensor> {
    let (h, w) = get_size(img)?;
    let (oh, ow) = resized_output_size((h, w), size.into(), max_size)?;
    if (oh, ow) == (h, w) {
        return Ok(img.clone());
    }
    if oh == 0 || ow == 0 || h == 0 || w == 0 {
        bail!(Value, "resize: cannot resize an image of size ({h}, {w}) to ({oh}, {ow})");
    }
    let im = Img::new(img, "resize")?;
    let out = if im.dtype == DType::U8 && interpolation != InterpolationMode::Nearest {
        resample::resample_u8(&im, oh, ow, interpolation, antialias)
    } else {
        let taps = |n_in, n_out| resample::taps(n_in, n_out, interpolation, antialias);
        resample(&im, oh, ow, &taps(h, oh), &taps(w, ow))
    };
    im.tensor(out, im.c, oh, ow)
}

/// `F.resized_crop`: `crop` then `resize` to `size`.
#[allow(clippy::too_many_arguments)]
pub fn resized_crop(
    img: &Tensor,
    top: i64,
    left: i64,
    height: usize,
    width: usize,
    size: impl Into<Size>,
    interpolation: InterpolationMode,
    antialias: bool,
) -> Result<Tensor> {
    let c = crop(img, top, left, height, width)?;
    resize(&c, size, interpolation, None, antialias)
}

/// `F.normalize(img, mean, std)`: `(img - mean) / std` per channel; float images only.
pub fn normalize(img: &Tensor, mean: &[f64], std: &[f64]) -> Result<Tensor> {
    let im = Img::new(img, "normalize")?;
    if im.dtype == DType::U8 {
        bail!(DType, "normalize: input tensor should be a float tensor, got U8");
    }
    for (name, v) in [("mean", mean), ("std", std)] {
        if v.len() != 1 && v.len() != im.c {
            bail!(Shape, "normalize: {name} has {} values, the image has {} channels", v.len(), im.c);
        }
    }
    let f32_math = im.dtype != DType::F64;
    if std.iter().any(|&s| if f32_math { s as f32 == 0.0 } else { s == 0.0 }) {
        bail!(Value, "normalize: std evaluated to zero, leading to division by zero");
    }
    let hw = im.h * im.w;
    let out = im
        .data
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let ch = (i / hw) % im.c.max(1);
            let (m, s) = (mean[ch.min(mean.len() - 1)], std[ch.min(std.len() - 1)]);
            if f32_math {
                ((x as f32 - m as f32) / s as f32) as f64
            } else {
                (x - m) / s
            }
        })
        .collect();
    im.tensor(out, im.c, im.h, im.w)
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// `F.convert_image_dtype(img, dtype)`: u8 -> float casts then divides by 255 in the target
/// dtype (torchvision's `image.to(dtype) / 255`, bit for bit; v2's `F.to_dtype(img, dtype,
/// scale=True)` multiplies by `1 / 255` instead, one ulp off in 126 of the 256 f32 values);
/// float -> u8 is `trunc(x * 255.999)` (values outside [0, 1] are clamped to [0, 255]);
/// float -> float and u8 -> u8 are plain casts.
pub fn convert_image_dtype(img: &Tensor, dtype: DType) -> Result<Tensor> {
    let src = img.dtype();
    if src == dtype {
        return Ok(img.clone());
    }
    match (src, dtype) {
        (DType::U8, d) if is_float(d) => img.to_dtype(d)?.div_scalar(255.0),
        (s, DType::U8) if is_float(s) => {
            let v: Vec<u8> = if s == DType::F64 {
                let v = img.to_vec::<f64>()?;
                v.iter().map(|x| (x * (256.0 - 1e-3)) as u8).collect()
            } else {
                let v = img.to_dtype(DType::F32)?.to_vec::<f32>()?;
                v.iter().map(|x| (x * (256.0f32 - 1e-3)) as u8).collect()
            };
            Tensor::from_vec(v, img.dims())
        }
        (s, d) if is_float(s) && is_float(d) => img.to_dtype(d),
        _ => bail!(
            DType,
            "convert_image_dtype: unsupported conversion from {src:?} to {dtype:?} (u8 and float images)"
        ),
    }
}

/// `F.rgb_to_grayscale(img, num_output_channels)`: `0.2989 R + 0.587 G + 0.114 B` (truncated for
/// u8), repeated to `num_output_channels` (1 or 3). A 1-channel image is copied/repeated.
pub fn rgb_to_grayscale(img: &Tensor, num_output_channels: usize) -> Result<Tensor> {
    if num_output_channels != 1 && num_output_channels != 3 {
        bail!(Value, "rgb_to_grayscale: num_output_channels must be 1 or 3, got {num_output_channels}");
    }
    let im = Img::new(img, "rgb_to_grayscale")?;
    if im.c != 1 && im.c != 3 {
        bail!(
            Shape,
            "rgb_to_grayscale: input image tensor permitted channel values are [1, 3], but found {}",
            im.c
        );
    }
    let hw = im.h * im.w;
    let n = im.planes() / im.c;
    let mut out = Vec::with_capacity(n * hw * num_output_channels);
    for i in 0..n {
        let base = i * im.c * hw;
        let gray: Vec<f64> = if im.c == 1 {
            im.data[base..base + hw].to_vec()
        } else {
            (0..hw)
                .map(|k| {
                    let (r, g, b) = (im.data[base + k], im.data[base + hw + k], im.data[base + 2 * hw + k]);
                    let v = if im.dtype == DType::F64 {
                        r * 0.2989 + g * 0.587 + b * 0.114
                    } else {
                        ((r as f32 * 0.2989f32) + g as f32 * 0.587f32 + b as f32 * 0.114f32) as f64
                    };
                    if im.dtype == DType::U8 {
                        v.trunc()
                    } else {
                        v
                    }
                })
                .collect()
        };
        for _ in 0..num_output_channels {
            out.extend_from_slice(&gray);
        }
    }
    im.tensor(out, num_output_channels, im.h, im.w)
}

/// `F.to_tensor(pic)`: the [`Image`]'s `[C, H, W]` f32 tensor in `[0, 1]`
/// (`img.to(float32).div(255)`, bit for bit).
pub fn to_tensor(pic: &Image) -> Result<Tensor> {
    pic.to_chw_u8()?.to_dtype(DType::F32)?.div_scalar(255.0)
}

/// `F.pil_to_tensor(pic)`: the [`Image`]'s `[C, H, W]` u8 tensor.
pub fn pil_to_tensor(pic: &Image) -> Result<Tensor> {
    pic.to_chw_u8()
}

/// `F.to_pil_image(pic)` (mode inferred): a `[C, H, W]` or `[H, W]` tensor of 1, 3 or 4
/// channels as an [`Image`] (`"L"`, `"RGB"`, `"RGBA"`). u8 is taken as is; a float tensor is
/// `pic.mul(255).byte()` (truncated; out-of-range values saturate).
pub fn to_pil_image(pic: &Tensor) -> Result<Image> {
    let x = match pic.dims().len() {
        2 => pic.unsqueeze(0)?,
        3 => pic.clone(),
        n => bail!(Value, "to_pil_image: pic should be 2/3 dimensional. Got {n} dimensions."),
    };
    let c = x.dims()[0];
    if c > 4 {
        bail!(Value, "to_pil_image: pic should not have > 4 channels. Got {c} channels.");
    }
    if !matches!(c, 1 | 3 | 4) {
        bail!(Value, "to_pil_image: only 1 (L), 3 (RGB) and 4 (RGBA) channels are supported, got {c}");
    }
    let x = match x.dtype() {
        DType::U8 => x,
        d if is_float(d) => x.mul_scalar(255.0)?.to_dtype(DType::U8)?,
        d => bail!(DType, "to_pil_image: expected a u8 or float tensor, got {d:?}"),
    };
    Image::from_chw_u8(&x, "to_pil_image")
}

/// `F.to_grayscale(img, num_output_channels)` on an [`Image`]: PIL's `convert("L")`, the
/// ITU-R 601-2 luma `(19595 R + 38470 G + 7471 B + 32768) >> 16` (alpha ignored), repeated to
/// 3 channels (mode `"RGB"`) when `num_output_channels` is 3.
pub fn to_grayscale(img: &Image, num_output_channels: usize) -> Result<Image> {
    if num_output_channels != 1 && num_output_channels != 3 {
        bail!(Value, "to_grayscale: num_output_channels should be either 1 or 3, got {num_output_channels}");
    }
    let c = img.channels();
    let luma: Vec<u8> = if c == 1 {
        img.as_raw().to_vec()
    } else {
        img.as_raw()
            .chunks_exact(c)
            .map(|p| ((p[0] as u32 * 19595 + p[1] as u32 * 38470 + p[2] as u32 * 7471 + 0x8000) >> 16) as u8)
            .collect()
    };
    let data = if num_output_channels == 1 { luma } else { luma.iter().flat_map(|&v| [v, v, v]).collect() };
    Image::new(img.height(), img.width(), num_output_channels, data)
}

/// `F.gaussian_blur(img, [kh, kw], [sigma_y, sigma_x])`: separable Gaussian kernel (odd sizes),
/// reflect padding, as torchvision's tensor kernel.
pub fn gaussian_blur(img: &Tensor, kernel_size: (usize, usize), sigma: (f64, f64)) -> Result<Tensor> {
    let (kh, kw) = kernel_size;
    if kh % 2 == 0 || kw % 2 == 0 || kh == 0 || kw == 0 {
        bail!(Value, "gaussian_blur: kernel size should have odd and positive values, got ({kh}, {kw})");
    }
    if sigma.0 <= 0.0 || sigma.1 <= 0.0 {
        bail!(Value, "gaussian_blur: sigma should have positive values, got {sigma:?}");
    }
    let kernel = |k: usize, s: f64| -> Vec<f64> {
        let half = (k as f32 - 1.0) * 0.5;
        let v: Vec<f32> = (0..k)
            .map(|i| {
                let x = -half + i as f32;
                (-0.5 * (x / s as f32).powi(2)).exp()
            })
            .collect();
        let sum: f32 = v.iter().sum();
        v.iter().map(|x| (x / sum) as f64).collect()
    };
    let padded = pad(img, &[kw / 2, kh / 2], 0.0, PaddingMode::Reflect)?;
    let im = Img::new(&padded, "gaussian_blur")?;
    let (oh, ow) = (im.h - 2 * (kh / 2), im.w - 2 * (kw / 2));
    let tw: Taps = (0..ow).map(|x| (x, kernel(kw, sigma.1))).collect();
    let th: Taps = (0..oh).map(|y| (y, kernel(kh, sigma.0))).collect();
    let out = resample(&im, oh, ow, &th, &tw);
    im.tensor(out, im.c, oh, ow)
}
