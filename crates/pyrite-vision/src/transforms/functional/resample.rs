//! The resampling behind `resize` and `gaussian_blur`: per-axis taps (torch's `interpolate`
//! weights) applied separably, width first. Float images use torch's float weights; u8 images
//! with bilinear or bicubic follow torch's native u8 CPU kernel: the weights as 16-bit fixed
//! point, each pass rounded and clamped to u8.

use super::{Img, InterpolationMode};

/// Taps `(first index, weights)` of each output position of one axis.
pub(crate) type Taps = Vec<(usize, Vec<f64>)>;

/// Float taps of one axis for `resize`.
pub(super) fn taps(n_in: usize, n_out: usize, mode: InterpolationMode, antialias: bool) -> Taps {
    match mode {
        InterpolationMode::Nearest => taps_nearest(n_in, n_out),
        InterpolationMode::Bilinear if antialias => taps_aa(n_in, n_out, 1.0, triangle),
        InterpolationMode::Bilinear => taps_bilinear(n_in, n_out),
        InterpolationMode::Bicubic if antialias => taps_aa(n_in, n_out, 2.0, |x| cubic32(x, -0.5)),
        InterpolationMode::Bicubic => taps_bicubic(n_in, n_out),
    }
}

fn taps_nearest(n_in: usize, n_out: usize) -> Taps {
    let scale = n_in as f32 / n_out as f32;
    (0..n_out)
        .map(|i| {
            let src = if n_out == n_in {
                i
            } else if n_out == 2 * n_in {
                i >> 1
            } else {
                ((i as f32 * scale).floor() as usize).min(n_in - 1)
            };
            (src, vec![1.0])
        })
        .collect()
}

fn taps_bilinear(n_in: usize, n_out: usize) -> Taps {
    let scale = n_in as f32 / n_out as f32;
    (0..n_out)
        .map(|i| {
            let src = (scale * (i as f32 + 0.5) - 0.5).max(0.0);
            let i0 = src as usize;
            let l1 = (src - i0 as f32).clamp(0.0, 1.0);
            if i0 < n_in - 1 {
                (i0, vec![(1.0 - l1) as f64, l1 as f64])
            } else {
                (i0.min(n_in - 1), vec![1.0])
            }
        })
        .collect()
}

fn triangle(x: f32) -> f32 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

/// Keys' cubic convolution kernel with parameter `a` (torch: -0.75 plain, -0.5 antialiased).
fn cubic32(x: f32, a: f32) -> f32 {
    let x = x.abs();
    if x < 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

fn cubic64(x: f64, a: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// torch's antialiased weights (PIL's filters, support scaled by the downscale factor):
/// `half` is half the filter's support (1 for the triangle, 2 for the cubic).
fn taps_aa(n_in: usize, n_out: usize, half: f32, filter: impl Fn(f32) -> f32) -> Taps {
    let scale = n_in as f32 / n_out as f32;
    let (support, invscale) = if scale >= 1.0 { (half * scale, 1.0 / scale) } else { (half, 1.0) };
    let max_taps = support.ceil() as usize * 2 + 1;
    (0..n_out)
        .map(|i| {
            let center = scale * (i as f32 + 0.5);
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(n_in as i64) as usize;
            let xmax = xmax.clamp(xmin, xmin + max_taps);
            let mut ws: Vec<f32> =
                (xmin..xmax).map(|j| filter((j as f32 - center + 0.5) * invscale)).collect();
            let total: f32 = ws.iter().sum();
            if total != 0.0 {
                ws.iter_mut().for_each(|w| *w /= total);
            }
            (xmin, ws.into_iter().map(f64::from).collect())
        })
        .collect()
}

/// torch's plain bicubic weights (`a = -0.75`, `align_corners=False`): four taps around the
/// source position, indices past the edges clamped to it (their weights merged here).
fn taps_bicubic(n_in: usize, n_out: usize) -> Taps {
    let scale = n_in as f32 / n_out as f32;
    let last = n_in as i64 - 1;
    (0..n_out)
        .map(|i| {
            let real = scale * (i as f32 + 0.5) - 0.5;
            let idx = (real.floor() as i64).min(last);
            let t = (real - idx as f32).clamp(0.0, 1.0);
            let coeffs = [
                cubic32(t + 1.0, -0.75),
                cubic32(t, -0.75),
                cubic32(1.0 - t, -0.75),
                cubic32(2.0 - t, -0.75),
            ];
            let lo = (idx - 1).clamp(0, last);
            let hi = (idx + 2).clamp(0, last);
            let mut ws = vec![0.0f64; (hi - lo + 1) as usize];
            for (j, c) in coeffs.iter().enumerate() {
                let k = (idx - 1 + j as i64).clamp(0, last);
                ws[(k - lo) as usize] += *c as f64;
            }
            (lo as usize, ws)
        })
        .collect()
}

/// Resamples every plane of `im` to `oh x ow` with the taps of each axis: along the width
/// first, then the height (torch's separable order).
pub(crate) fn resample(im: &Img, oh: usize, ow: usize, th: &Taps, tw: &Taps) -> Vec<f64> {
    let mut mid = vec![0.0; im.planes() * im.h * ow];
    for p in 0..im.planes() {
        for y in 0..im.h {
            let row = &im.data[(p * im.h + y) * im.w..(p * im.h + y + 1) * im.w];
            for (x, (s, ws)) in tw.iter().enumerate() {
                mid[(p * im.h + y) * ow + x] = ws.iter().enumerate().map(|(k, w)| w * row[s + k]).sum();
            }
        }
    }
    let mut out = vec![0.0; im.planes() * oh * ow];
    for p in 0..im.planes() {
        for (y, (s, ws)) in th.iter().enumerate() {
            for x in 0..ow {
                out[(p * oh + y) * ow + x] =
                    ws.iter().enumerate().map(|(k, w)| w * mid[(p * im.h + s + k) * ow + x]).sum();
            }
        }
    }
    out
}

/// Fixed-point taps of one axis: `(first index, integer weights)` and the number of
/// fractional bits of the weights.
struct IntTaps {
    taps: Vec<(usize, Vec<i64>)>,
    precision: u32,
}

/// torch's u8 weights: computed in f64 (antialiased as PIL, or the plain interpolation with
/// the taps past the edges merged into the edge), then scaled to 16-bit integers with as many
/// fractional bits as the largest weight allows.
fn int_taps(n_in: usize, n_out: usize, mode: InterpolationMode, antialias: bool) -> IntTaps {
    let cubic = mode == InterpolationMode::Bicubic;
    let interp = if cubic { 4usize } else { 2 };
    let filter = |x: f64| -> f64 {
        if !cubic {
            let x = x.abs();
            return if x < 1.0 { 1.0 - x } else { 0.0 };
        }
        cubic64(x, if antialias { -0.5 } else { -0.75 })
    };
    let scale = n_in as f64 / n_out as f64;
    let mut float_taps: Vec<(usize, Vec<f64>)> = Vec::with_capacity(n_out);
    let mut wt_max = 0.0f64;
    for i in 0..n_out {
        if antialias {
            let half = interp as f64 * 0.5;
            let (support, invscale) = if scale >= 1.0 { (half * scale, 1.0 / scale) } else { (half, 1.0) };
            let max_taps = support.ceil() as i64 * 2 + 1;
            let center = scale * (i as f64 + 0.5);
            let xmin = ((center - support + 0.5) as i64).max(0);
            let size = (((center + support + 0.5) as i64).min(n_in as i64) - xmin).clamp(0, max_taps);
            let mut ws: Vec<f64> =
                (0..size).map(|j| filter((j as f64 + xmin as f64 - center + 0.5) * invscale)).collect();
            let total: f64 = ws.iter().sum();
            if total != 0.0 {
                for w in ws.iter_mut() {
                    *w /= total;
                    wt_max = wt_max.max(*w);
                }
            }
            float_taps.push((xmin as usize, ws));
        } else {
            let mut real = scale * (i as f64 + 0.5) - 0.5;
            if !cubic {
                real = real.max(0.0);
            }
            let idx = ((real as f32).floor() as i64).min(n_in as i64 - 1);
            let lambda = (real - idx as f64).clamp(0.0, 1.0);
            let support = interp as i64 / 2;
            let unbound_min = idx - support + 1;
            let index_min = unbound_min.max(0);
            let size = ((idx + support + 1).min(n_in as i64) - index_min).clamp(0, interp as i64);
            let mut ws = vec![0.0f64; interp];
            let mut k = 0i64;
            for j in 0..interp as i64 {
                let w = filter((j + 1 - support) as f64 - lambda);
                if unbound_min + j <= 0 {
                    k = 0;
                } else if unbound_min + j >= n_in as i64 - 1 {
                    k = size - 1;
                }
                ws[k as usize] += w;
                wt_max = wt_max.max(ws[k as usize]);
                k += 1;
            }
            ws.truncate(size as usize);
            float_taps.push((index_min as usize, ws));
        }
    }
    let mut precision = 0u32;
    while precision < 22 {
        if (0.5 + wt_max * (1u64 << (precision + 1)) as f64) as i64 >= 1 << 15 {
            break;
        }
        precision += 1;
    }
    let unit = (1u64 << precision) as f64;
    let taps = float_taps
        .into_iter()
        .map(|(s, ws)| {
            let iw = ws
                .iter()
                .map(|w| {
                    let v = w * unit;
                    (if v < 0.0 { -0.5 + v } else { 0.5 + v }) as i64
                })
                .collect();
            (s, iw)
        })
        .collect();
    IntTaps { taps, precision }
}

/// One fixed-point tap sum, rounded and clamped to u8 as torch's u8 kernel does.
fn int_sum(t: &IntTaps, ws: &[i64], value: impl Fn(usize) -> f64) -> f64 {
    let mut acc: i64 = if t.precision > 0 { 1 << (t.precision - 1) } else { 0 };
    for (k, w) in ws.iter().enumerate() {
        acc += w * value(k) as i64;
    }
    (acc >> t.precision).clamp(0, 255) as f64
}

/// `resize` of a u8 image with bilinear or bicubic as torch's native u8 CPU kernel computes it:
/// a horizontal pass (when the width changes) into a u8 image, then a vertical one.
pub(super) fn resample_u8(
    im: &Img,
    oh: usize,
    ow: usize,
    mode: InterpolationMode,
    antialias: bool,
) -> Vec<f64> {
    let planes = im.planes();
    let (h, mut w) = (im.h, im.w);
    let mut data = im.data.clone();
    if ow != w {
        let t = int_taps(w, ow, mode, antialias);
        let mut out = Vec::with_capacity(planes * h * ow);
        for row in data.chunks(w) {
            for (s, ws) in &t.taps {
                out.push(int_sum(&t, ws, |k| row[s + k]));
            }
        }
        data = out;
        w = ow;
    }
    if oh != h {
        let t = int_taps(h, oh, mode, antialias);
        let mut out = Vec::with_capacity(planes * oh * w);
        for plane in data.chunks(h * w) {
            for (s, ws) in &t.taps {
                for x in 0..w {
                    out.push(int_sum(&t, ws, |k| plane[(s + k) * w + x]));
                }
            }
        }
        data = out;
    }
    data
}
