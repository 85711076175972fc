//! Colour adjustments of 1- or 3-channel images, as torchvision's tensor kernels compute them:
//! brightness, contrast and saturation blend the image with black, its mean grey or its grey
//! version (clamped to the dtype's range; u8 is computed in f32 and truncated), hue rotates
//! the hue channel through RGB -> HSV -> RGB in f32.

use super::Img;
use pyrite_core::{bail, DType, Result, Tensor};

/// f32 arithmetic (u8 and f32 images) or f64 (f64 images), each result rounded to it.
#[derive(Clone, Copy)]
struct Prec {
    f32: bool,
}

impl Prec {
    fn of(dtype: DType) -> Prec {
        Prec { f32: dtype != DType::F64 }
    }

    fn q(self, x: f64) -> f64 {
        if self.f32 {
            x as f32 as f64
        } else {
            x
        }
    }

    /// `a * b + c` rounded once (torch's vectorized `add(c, a, alpha=b)` is a fused multiply-add).
    fn fma(self, a: f64, b: f64, c: f64) -> f64 {
        if self.f32 {
            (a as f32).mul_add(b as f32, c as f32) as f64
        } else {
            a.mul_add(b, c)
        }
    }
}

/// The image, checked to have 1 or 3 channels, and the factor checked non-negative.
fn color_image(img: &Tensor, factor: f64, what: &str, factor_name: &str) -> Result<Img> {
    if factor.is_nan() || factor < 0.0 {
        bail!(Value, "{what}: {factor_name} ({factor}) is not non-negative");
    }
    let im = Img::new(img, what)?;
    if im.c != 1 && im.c != 3 {
        bail!(Shape, "{what}: input image tensor permitted channel values are 1 or 3, but found {}", im.c);
    }
    Ok(im)
}

/// The largest value of the image's dtype: 255 for u8, 1 for floats.
fn bound(im: &Img) -> f64 {
    if im.dtype == DType::U8 {
        255.0
    } else {
        1.0
    }
}

/// `ratio * img + (1 - ratio) * other` clamped to `[0, bound]`; `other(i)` is the value blended
/// with element `i`. u8 results are truncated, as torch's cast of a float.
fn blend(im: &Img, ratio: f64, other: impl Fn(usize) -> f64) -> Result<Tensor> {
    let p = Prec::of(im.dtype);
    let (r, alpha, hi) = (p.q(ratio), p.q(1.0 - ratio), bound(im));
    let out = im
        .data
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let v = p.fma(other(i), alpha, p.q(x * r)).clamp(0.0, hi);
            if im.dtype == DType::U8 {
                v.trunc()
            } else {
                v
            }
        })
        .collect();
    im.tensor(out, im.c, im.h, im.w)
}

/// The grey level of each pixel of each image (`0.2989 R + 0.587 G + 0.114 B`, floored for
/// u8), as `[images][h * w]`; a 1-channel image is its own grey.
fn grey(im: &Img) -> Vec<f64> {
    let p = Prec::of(im.dtype);
    let hw = im.h * im.w;
    if im.c == 1 {
        return im.data.clone();
    }
    let (wr, wg, wb) = (p.q(0.2989), p.q(0.587), p.q(0.114));
    let mut out = Vec::with_capacity(im.data.len() / 3);
    for image in im.data.chunks(3 * hw) {
        for k in 0..hw {
            let l = p.fma(image[2 * hw + k], wb, p.fma(image[hw + k], wg, p.q(image[k] * wr)));
            out.push(if im.dtype == DType::U8 { l.floor() } else { l });
        }
    }
    out
}

/// `F.adjust_brightness(img, factor)`: `img * factor`, clamped to the dtype's range (0 gives a
/// black image, 1 the original).
///
/// ```
/// use pyrite::vision::transforms::functional as F;
/// let img = pyrite::Tensor::from_vec(vec![0.2f32, 0.8], [1, 1, 2]).unwrap();
/// assert_eq!(F::adjust_brightness(&img, 1.5).unwrap().to_vec::<f32>().unwrap(), vec![0.3, 1.0]);
/// ```
pub fn adjust_brightness(img: &Tensor, brightness_factor: f64) -> Result<Tensor> {
    let im = color_image(img, brightness_factor, "adjust_brightness", "brightness_factor")?;
    blend(&im, brightness_factor, |_| 0.0)
}

/// `F.adjust_contrast(img, factor)`: blends each image with the mean of its grey version (0
/// gives a uniform grey image, 1 the original).
///
/// ```
/// use pyrite::vision::transforms::functional as F;
/// let img = pyrite::Tensor::from_vec(vec![0.2f32, 0.6], [1, 1, 2]).unwrap();
/// assert_eq!(F::adjust_contrast(&img, 0.0).unwrap().to_vec::<f32>().unwrap(), vec![0.4, 0.4]);
/// ```
pub fn adjust_contrast(img: &Tensor, contrast_factor: f64) -> Result<Tensor> {
    let im = color_image(img, contrast_factor, "adjust_contrast", "contrast_factor")?;
    let p = Prec::of(im.dtype);
    let g = grey(&im);
    let hw = (im.h * im.w).max(1);
    let means: Vec<f64> = g.chunks(hw).map(|c| p.q(c.iter().sum::<f64>() / c.len() as f64)).collect();
    let per_image = im.c * im.h * im.w;
    blend(&im, contrast_factor, |i| means[i / per_image])
}

/// `F.adjust_saturation(img, factor)`: blends with the grey version (0 gives grey, 1 the
/// original, 2 doubles the saturation); a 1-channel image is returned as is.
///
/// ```
/// use pyrite::vision::transforms::functional as F;
/// let img = pyrite::Tensor::from_vec(vec![1.0f32, 0.0, 0.0], [3, 1, 1]).unwrap();
/// let grey = F::adjust_saturation(&img, 0.0).unwrap().to_vec::<f32>().unwrap();
/// assert!(grey.iter().all(|&v| (v - 0.2989).abs() < 1e-6));
/// ```
pub fn adjust_saturation(img: &Tensor, saturation_factor: f64) -> Result<Tensor> {
    let im = color_image(img, saturation_factor, "adjust_saturation", "saturation_factor")?;
    if im.c == 1 {
        return img.deep_clone();
    }
    let g = grey(&im);
    let hw = im.h * im.w;
    blend(&im, saturation_factor, |i| g[(i / (3 * hw)) * hw + i % hw])
}

/// `F.adjust_hue(img, factor)`: shifts the hue by `factor` turns (in `[-0.5, 0.5]`) in HSV
/// space, computed in f32 (u8 images are scaled to `[0, 1]` and back); a 1-channel image is
/// returned as is.
///
/// ```
/// use pyrite::vision::transforms::functional as F;
/// let red = pyrite::Tensor::from_vec(vec![1.0f32, 0.0, 0.0], [3, 1, 1]).unwrap();
/// let green = F::adjust_hue(&red, 1.0 / 3.0).unwrap().to_vec::<f32>().unwrap();
/// assert_eq!(green, vec![0.0, 1.0, 0.0]);
/// assert!(F::adjust_hue(&red, 0.6).is_err());
/// ```
pub fn adjust_hue(img: &Tensor, hue_factor: f64) -> Result<Tensor> {
    if !(-0.5..=0.5).contains(&hue_factor) {
        bail!(Value, "adjust_hue: hue_factor ({hue_factor}) is not in [-0.5, 0.5]");
    }
    let im = color_image(img, 0.0, "adjust_hue", "hue_factor")?;
    if im.c == 1 || im.data.is_empty() {
        return img.deep_clone();
    }
    let q = |x: f64| x as f32 as f64;
    let to_unit = |x: f64| if im.dtype == DType::U8 { q(x * q(1.0 / 255.0)) } else { q(x) };
    let factor = q(hue_factor);
    let hw = im.h * im.w;
    let mut out = vec![0.0; im.data.len()];
    for (src, dst) in im.data.chunks(3 * hw).zip(out.chunks_mut(3 * hw)) {
        for k in 0..hw {
            let rgb = [to_unit(src[k]), to_unit(src[hw + k]), to_unit(src[2 * hw + k])];
            let (h, s, v) = rgb_to_hsv(rgb);
            let mut h = (q(h + factor)) % 1.0;
            if h != 0.0 && h < 0.0 {
                h = q(h + 1.0);
            }
            let rgb = hsv_to_rgb(h, s, v);
            for c in 0..3 {
                dst[c * hw + k] = if im.dtype == DType::U8 { q(rgb[c] * q(255.999)).trunc() } else { rgb[c] };
            }
        }
    }
    im.tensor(out, 3, im.h, im.w)
}

/// torchvision's tensor RGB -> HSV (f32; hue in `[0, 1)`), with grey pixels given hue and
/// saturation 0.
fn rgb_to_hsv([r, g, b]: [f64; 3]) -> (f64, f64, f64) {
    let q = |x: f64| x as f32 as f64;
    let maxc = r.max(g).max(b);
    let minc = r.min(g).min(b);
    let grey = maxc == minc;
    let range = q(maxc - minc);
    let s = q(range / if grey { 1.0 } else { maxc });
    let div = if grey { 1.0 } else { range };
    let (rc, gc, bc) = (q(q(maxc - r) / div), q(q(maxc - g) / div), q(q(maxc - b) / div));
    let (max_is_r, max_is_g) = (maxc == r, maxc == g);
    let hr = if max_is_r { q(bc - gc) } else { 0.0 };
    let hg = if max_is_g && !max_is_r { q(q(rc + 2.0) - bc) } else { 0.0 };
    let hb = if !max_is_r && !max_is_g { q(q(gc + 4.0) - rc) } else { 0.0 };
    let h = q(q(hr + hg) + hb);
    let h = q(q(h * q(1.0 / 6.0)) + 1.0) % 1.0;
    (h, s, maxc)
}

/// torchvision's tensor HSV -> RGB (f32), each channel clamped to `[0, 1]`.
fn hsv_to_rgb(h: f64, s: f64, v: f64) -> [f64; 3] {
    let q = |x: f64| x as f32 as f64;
    let h6 = q(h * 6.0);
    let i = h6.floor();
    let f = q(h6 - i);
    let sxf = q(s * f);
    let one_minus_s = q(1.0 - s);
    let qv = q(q(1.0 - sxf) * v).clamp(0.0, 1.0);
    let t = q(q(sxf + one_minus_s) * v).clamp(0.0, 1.0);
    let p = q(one_minus_s * v).clamp(0.0, 1.0);
    match (i as i64).rem_euclid(6) {
        0 => [v, t, p],
        1 => [qv, v, p],
        2 => [p, v, t],
        3 => [p, qv, v],
        4 => [t, p, v],
        _ => [v, p, qv],
    }
}
