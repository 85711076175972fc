//! `rotate` and `affine` on tensor images, as torchvision's tensor kernels compute them: the
//! inverse affine matrix of the map, a sampling grid over the output, and `grid_sample` (zero
//! padding, `align_corners=False`, nearest or bilinear). A `fill` travels through an extra
//! all-ones mask channel: nearest uses `fill` where the mask is below one half, bilinear blends
//! `mask * (img - fill) + fill`. u8 and f32 images are computed in f32 (u8 rounded half to even
//! at the end), f64 images in f64.

use super::{get_size, Img, InterpolationMode};
use pyrite_core::{bail, DType, Result, Tensor};

/// The working precision: f32 arithmetic is reproduced exactly by rounding each f64 result.
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
}

/// The inverse of the affine map `T * C * R(angle) S(scale) Shear(shear) * C^-1` (translation
/// `T`, centre `C`) as the row-major 2x3 matrix `[a, b, c, d, e, f]` taking output coordinates
/// to input coordinates (`x_in = a x + b y + c`, `y_in = d x + e y + f`). Angles in degrees;
/// `shear = (x, y)`. Coordinates are relative to the image centre, y pointing down.
pub(crate) fn inverse_affine_matrix(
    center: (f64, f64),
    angle: f64,
    translate: (f64, f64),
    scale: f64,
    shear: (f64, f64),
) -> [f64; 6] {
    let rot = angle.to_radians();
    let (sx, sy) = (shear.0.to_radians(), shear.1.to_radians());
    let (cx, cy) = center;
    let (ox, oy) = (cx + translate.0, cy + translate.1);
    // The rotation-shear part [[a, b], [c, d]] has determinant 1, so its inverse is
    // [[d, -b], [-c, a]]; the scale divides.
    let a = (rot - sy).cos() / sy.cos();
    let b = -(a * sx.tan() + rot.sin());
    let c = (rot - sy).sin() / sy.cos();
    let d = rot.cos() - c * sx.tan();
    let mut m = [d / scale, -b / scale, 0.0, -c / scale, a / scale, 0.0];
    // undo the translation and the centre shift, then shift back to the centre
    m[2] += cx - m[0] * ox - m[1] * oy;
    m[5] += cy - m[3] * ox - m[4] * oy;
    m
}

/// `(width, height)` of the image holding all of the rotated input (`expand=True`), computed
/// in f32 with the corners' coordinates truncated to 1e-4 first, as torchvision does.
fn expanded_size(m: &[f64; 6], w: usize, h: usize) -> (usize, usize) {
    let t: Vec<f32> = m.iter().map(|&x| x as f32).collect();
    let (hw, hh) = ((0.5 * w as f64) as f32, (0.5 * h as f64) as f32);
    let corners = [(-hw, -hh), (-hw, hh), (hw, hh), (hw, -hh)];
    let (mut lo, mut hi) = ([f32::INFINITY; 2], [f32::NEG_INFINITY; 2]);
    for (px, py) in corners {
        let p = [px * t[0] + py * t[1] + t[2], px * t[3] + py * t[4] + t[5]];
        for k in 0..2 {
            lo[k] = lo[k].min(p[k]);
            hi[k] = hi[k].max(p[k]);
        }
    }
    let size = |k: usize, half: f32| {
        let top = ((hi[k] + half) * 10000.0).trunc() * 1e-4f32;
        let bottom = ((lo[k] + half) * 10000.0).trunc() * 1e-4f32;
        (top.ceil() - bottom.floor()).max(0.0) as usize
    };
    (size(0, hw), size(1, hh))
}

/// Checks the interpolation mode and `fill` (one value, or one per channel) of a grid op.
fn check_args(what: &str, mode: InterpolationMode, fill: Option<&[f64]>, channels: usize) -> Result<()> {
    if !matches!(mode, InterpolationMode::Nearest | InterpolationMode::Bilinear) {
        bail!(Value, "{what}: interpolation mode '{}' is unsupported with tensor input", mode.name());
    }
    if let Some(f) = fill
        && (f.is_empty() || (f.len() > 1 && f.len() != channels))
    {
        bail!(
                Value,
                "{what}: the number of elements in 'fill' cannot broadcast to match the number of channels of the image ({} != {channels})",
                f.len()
            );
    }
    Ok(())
}

/// Samples `img` at the inverse map `m` of every pixel of an `oh x ow` output (torchvision's
/// affine grid, normalized by the input size, then `grid_sample`).
fn warp(
    img: &Tensor,
    m: &[f64; 6],
    (oh, ow): (usize, usize),
    mode: InterpolationMode,
    fill: Option<&[f64]>,
    what: &str,
) -> Result<Tensor> {
    let im = Img::new(img, what)?;
    let (h, w) = (im.h, im.w);
    if im.planes() == 0 || h == 0 || w == 0 || oh == 0 || ow == 0 {
        return im.tensor(vec![0.0; im.planes() * oh * ow], im.c, oh, ow);
    }
    let p = Prec::of(im.dtype);
    // the grid: output pixel centres relative to the output centre, mapped by `m` and divided
    // by half the input size (grid_sample's [-1, 1] units)
    let t: Vec<f64> = m.iter().map(|&x| p.q(x)).collect();
    let (hw, hh) = (p.q(0.5 * w as f64), p.q(0.5 * h as f64));
    let r = [p.q(t[0] / hw), p.q(t[1] / hw), p.q(t[2] / hw), p.q(t[3] / hh), p.q(t[4] / hh), p.q(t[5] / hh)];
    // grid_sample's unnormalization: ((g + 1) * size / 2) - 0.5
    let (sx, sy) = (p.q(w as f64 / 2.0), p.q(h as f64 / 2.0));
    let mut src = Vec::with_capacity(oh * ow);
    for y in 0..oh {
        let by = y as f64 - (oh as f64 - 1.0) * 0.5;
        for x in 0..ow {
            let bx = x as f64 - (ow as f64 - 1.0) * 0.5;
            let gx = p.q(p.q(p.q(bx * r[0]) + p.q(by * r[1])) + r[2]);
            let gy = p.q(p.q(p.q(bx * r[3]) + p.q(by * r[4])) + r[5]);
            src.push((p.q(p.q(p.q(gx + 1.0) * sx) - 0.5), p.q(p.q(p.q(gy + 1.0) * sy) - 0.5)));
        }
    }
    let inside = |yy: f64, xx: f64| yy >= 0.0 && xx >= 0.0 && yy < h as f64 && xx < w as f64;
    let mut out = Vec::with_capacity(im.planes() * oh * ow);
    for plane_i in 0..im.planes() {
        let plane = &im.data[plane_i * h * w..(plane_i + 1) * h * w];
        let fill_v = fill.map(|f| p.q(f[(plane_i % im.c).min(f.len() - 1)]));
        let at = |yy: f64, xx: f64| if inside(yy, xx) { plane[yy as usize * w + xx as usize] } else { 0.0 };
        for &(ix, iy) in &src {
            let v = match mode {
                InterpolationMode::Nearest => {
                    let (xn, yn) = (ix.round_ties_even(), iy.round_ties_even());
                    match fill_v {
                        Some(f) if !inside(yn, xn) => f,
                        _ => at(yn, xn),
                    }
                }
                _ => {
                    let (xw, yn) = (ix.floor(), iy.floor());
                    let we = p.q(ix - xw);
                    let ea = p.q(1.0 - we);
                    let no = p.q(iy - yn);
                    let so = p.q(1.0 - no);
                    let k = [p.q(so * ea), p.q(so * we), p.q(no * ea), p.q(no * we)];
                    let corners = [(yn, xw), (yn, xw + 1.0), (yn + 1.0, xw), (yn + 1.0, xw + 1.0)];
                    let blend = |val: &dyn Fn(f64, f64) -> f64| {
                        let mut acc = p.q(val(corners[0].0, corners[0].1) * k[0]);
                        for c in 1..4 {
                            acc = p.q(acc + p.q(val(corners[c].0, corners[c].1) * k[c]));
                        }
                        acc
                    };
                    let v = blend(&at);
                    match fill_v {
                        Some(f) => {
                            let mask = blend(&|yy, xx| if inside(yy, xx) { 1.0 } else { 0.0 });
                            p.q(p.q(p.q(v - f) * mask) + f)
                        }
                        None => v,
                    }
                }
            };
            out.push(if im.dtype == DType::U8 { v.round_ties_even() } else { v });
        }
    }
    im.tensor(out, im.c, oh, ow)
}

/// `F.rotate(img, angle, interpolation, expand, center, fill)`: rotates counter-clockwise by
/// `angle` degrees about `center` (pixel coordinates `(x, y)`, default the image centre). With
/// `expand` the output grows to hold the whole rotated image. `fill`: the value of pixels
/// outside the input (one, or one per channel); `None` samples zeros, as torchvision's `None`.
/// Without a centre, multiples of 90 degrees that keep the size are exact transposes.
///
/// ```
/// use pyrite::vision::transforms::{functional as F, InterpolationMode};
/// let img = pyrite::Tensor::from_vec(vec![1f32, 2., 3., 4.], [1, 2, 2]).unwrap();
/// let r = F::rotate(&img, 90.0, InterpolationMode::Nearest, false, None, None).unwrap();
/// assert_eq!(r.to_vec::<f32>().unwrap(), vec![2., 4., 1., 3.]);
/// let e = F::rotate(&img, 45.0, InterpolationMode::Bilinear, true, None, Some(&[0.5])).unwrap();
/// assert_eq!(e.dims(), &[1, 4, 4]); // as torchvision: the corners span -0.41..2.41, rounded outwards
/// ```
pub fn rotate(
    img: &Tensor,
    angle: f64,
    interpolation: InterpolationMode,
    expand: bool,
    center: Option<(f64, f64)>,
    fill: Option<&[f64]>,
) -> Result<Tensor> {
    let (h, w) = get_size(img)?;
    if !angle.is_finite() {
        bail!(Value, "rotate: angle must be finite, got {angle}");
    }
    let angle = angle.rem_euclid(360.0);
    if center.is_none() {
        if angle == 0.0 {
            return img.deep_clone();
        }
        if angle == 180.0 {
            return img.flip(&[-2, -1])?.contiguous();
        }
        if expand || h == w {
            if angle == 90.0 {
                return img.flip(&[-1])?.transpose(-2, -1)?.contiguous();
            }
            if angle == 270.0 {
                return img.flip(&[-2])?.transpose(-2, -1)?.contiguous();
            }
        }
    }
    let c = img.dims()[img.dims().len() - 3];
    check_args("rotate", interpolation, fill, c)?;
    let center_f = center.map_or((0.0, 0.0), |(x, y)| (x - w as f64 * 0.5, y - h as f64 * 0.5));
    // torchvision's rotation is counter-clockwise, its affine map's clockwise
    let m = inverse_affine_matrix(center_f, -angle, (0.0, 0.0), 1.0, (0.0, 0.0));
    let (ow, oh) = if expand { expanded_size(&m, w, h) } else { (w, h) };
    warp(img, &m, (oh, ow), interpolation, fill, "rotate")
}

/// `F.affine(img, angle, translate, scale, shear, interpolation, fill, center)`: rotation by
/// `angle` degrees (clockwise, as torchvision's affine), `translate = (dx, dy)` pixels, `scale`
/// (positive), `shear = (x, y)` degrees, about `center` (default the image centre); the output
/// has the input's size. `fill` as in [`rotate`].
///
/// ```
/// use pyrite::vision::transforms::{functional as F, InterpolationMode};
/// let img = pyrite::Tensor::from_vec(vec![1f32, 2., 3., 4.], [1, 2, 2]).unwrap();
/// let shifted = F::affine(&img, 0.0, (1.0, 0.0), 1.0, (0.0, 0.0), InterpolationMode::Nearest, Some(&[9.0]), None).unwrap();
/// assert_eq!(shifted.to_vec::<f32>().unwrap(), vec![9., 1., 9., 3.]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn affine(
    img: &Tensor,
    angle: f64,
    translate: (f64, f64),
    scale: f64,
    shear: (f64, f64),
    interpolation: InterpolationMode,
    fill: Option<&[f64]>,
    center: Option<(f64, f64)>,
) -> Result<Tensor> {
    let (h, w) = get_size(img)?;
    if scale.is_nan() || scale <= 0.0 || !scale.is_finite() {
        bail!(Value, "affine: argument scale should be positive, got {scale}");
    }
    if ![angle, translate.0, translate.1, shear.0, shear.1].iter().all(|v| v.is_finite()) {
        bail!(
            Value,
            "affine: angle, translate and shear must be finite, got {angle}, {translate:?}, {shear:?}"
        );
    }
    let c = img.dims()[img.dims().len() - 3];
    check_args("affine", interpolation, fill, c)?;
    let center_f = center.map_or((0.0, 0.0), |(x, y)| (x - w as f64 * 0.5, y - h as f64 * 0.5));
    let m = inverse_affine_matrix(center_f, angle, translate, scale, shear);
    warp(img, &m, (h, w), interpolation, fill, "affine")
}
