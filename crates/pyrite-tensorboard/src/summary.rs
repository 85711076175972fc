//! Builders of `Summary` values, like `torch.utils.tensorboard.summary`: [`scalar`],
//! [`histogram`], [`text`], [`image`] and [`hparams`]. [`SummaryWriter`](crate::SummaryWriter)'s
//! `add_*` methods use them; [`SummaryWriter::add_summary`](crate::SummaryWriter::add_summary)
//! writes any of them.

use crate::event::{
    HParamType, HParamValue, HParamsPluginData, Histogram, Image, PluginData, Summary, SummaryValue,
    TensorValue, Value, DT_STRING,
};
use pyrite_core::{bail, err, DType, Result, Tensor};

/// Values a histogram or an image can be made of: a [`Tensor`] (any dtype, any shape) or a
/// slice of numbers.
pub trait HistogramValues {
    /// The values, flattened, as `f64`.
    fn to_f64_vec(&self) -> Result<Vec<f64>>;
}

impl HistogramValues for Tensor {
    fn to_f64_vec(&self) -> Result<Vec<f64>> {
        self.detach().to_dtype(DType::F64)?.to_vec::<f64>()
    }
}
impl HistogramValues for [f64] {
    fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(self.to_vec())
    }
}
impl HistogramValues for [f32] {
    fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(self.iter().map(|&v| v as f64).collect())
    }
}
impl HistogramValues for Vec<f64> {
    fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(self.clone())
    }
}
impl HistogramValues for Vec<f32> {
    fn to_f64_vec(&self) -> Result<Vec<f64>> {
        self.as_slice().to_f64_vec()
    }
}
impl<const N: usize> HistogramValues for [f64; N] {
    fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(self.to_vec())
    }
}
impl<const N: usize> HistogramValues for [f32; N] {
    fn to_f64_vec(&self) -> Result<Vec<f64>> {
        self.as_slice().to_f64_vec()
    }
}

/// A scalar (`simple_value`, stored as a 32-bit float, as PyTorch writes it).
pub fn scalar(tag: &str, value: f64) -> Summary {
    Summary {
        values: vec![SummaryValue { tag: tag.into(), plugin: None, value: Value::Simple(value as f32) }],
    }
}

/// PyTorch's `bins="tensorflow"` (`SummaryWriter.default_bins`): `±1e-12 * 1.1^k` up to
/// 1e20, and 0.
pub fn default_bins() -> Vec<f64> {
    let mut pos = vec![];
    let mut v = 1e-12f64;
    while v < 1e20 {
        pos.push(v);
        v *= 1.1;
    }
    let mut bins: Vec<f64> = pos.iter().rev().map(|v| -v).collect();
    bins.push(0.0);
    bins.extend(pos);
    bins
}

/// `numpy.histogram(values, bins=edges)`'s counts: bin `i` holds `[edges[i], edges[i+1])`, the
/// last one also its right edge; values outside the edges (and NaN) are not counted.
fn np_histogram(values: &[f64], edges: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = edges.len();
    // cum[i]: how many values are < edges[i] (<= for the last edge).
    let cum: Vec<usize> =
        edges
            .iter()
            .enumerate()
            .map(|(i, &e)| {
                if i + 1 < n {
                    sorted.partition_point(|&v| v < e)
                } else {
                    sorted.partition_point(|&v| v <= e)
                }
            })
            .collect();
    cum.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
}

/// `make_histogram(values, bins)` of torch's summary.py: numpy's counts over `bins`, trimmed to
/// the buckets from one left of the first non-empty one to the last non-empty one (TensorBoard
/// stores only right limits).
pub fn make_histogram(values: &[f64], bins: &[f64]) -> Result<Histogram> {
    if values.is_empty() {
        bail!(Value, "histogram: the input has no element");
    }
    if bins.len() < 2 {
        bail!(Value, "histogram: at least two bin edges are needed, got {}", bins.len());
    }
    let counts = np_histogram(values, bins);
    let (Some(first), Some(last)) =
        (counts.iter().position(|&c| c > 0.0), counts.iter().rposition(|&c| c > 0.0))
    else {
        bail!(Value, "histogram: no value lies within the bins (non-finite values or out of range)");
    };
    let end = last + 1;
    let bucket: Vec<f64> = if first > 0 {
        counts[first - 1..end].to_vec()
    } else {
        std::iter::once(0.0).chain(counts[..end].iter().copied()).collect()
    };
    let bucket_limit = bins[first..end + 1].to_vec();
    let min = values.iter().copied().fold(f64::INFINITY, |a, b| {
        if b.is_nan() || a.is_nan() {
            f64::NAN
        } else {
            a.min(b)
        }
    });
    let max = values.iter().copied().fold(f64::NEG_INFINITY, |a, b| {
        if b.is_nan() || a.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    });
    Ok(Histogram {
        min,
        max,
        num: values.len() as f64,
        sum: values.iter().sum(),
        sum_squares: values.iter().map(|v| v * v).sum(),
        bucket_limit,
        bucket,
    })
}

/// A histogram of `values` over [`default_bins`] (PyTorch's `bins="tensorflow"`).
pub fn histogram<V: HistogramValues + ?Sized>(tag: &str, values: &V) -> Result<Summary> {
    let values = values.to_f64_vec()?;
    let h =
        make_histogram(&values, &default_bins()).map_err(|e| err!(Value, "add_histogram({tag:?}): {e}"))?;
    Ok(Summary { values: vec![SummaryValue { tag: tag.into(), plugin: None, value: Value::Histogram(h) }] })
}

/// A text summary: tag `<tag>/text_summary`, a one-element `DT_STRING` tensor, the `"text"`
/// plugin (as torch's `summary.text`).
pub fn text(tag: &str, text: &str) -> Summary {
    let t = TensorValue {
        dtype: DT_STRING,
        shape: vec![1],
        string_val: vec![text.as_bytes().to_vec()],
        ..Default::default()
    };
    Summary {
        values: vec![SummaryValue {
            tag: format!("{tag}/text_summary"),
            plugin: Some(PluginData { plugin_name: "text".into(), content: vec![] }),
            value: Value::Tensor(t),
        }],
    }
}

/// Where pixel `(y, x)`'s channel `k` lies in a tensor's flat values.
type PixelIndex = Box<dyn Fn(usize, usize, usize) -> usize>;

/// An image from a tensor in `dataformats` `"CHW"`, `"HWC"` or `"HW"`, with 1, 3 or 4
/// channels. A `U8` tensor is taken as it is; any other dtype is scaled by 255 and clipped to
/// `[0, 255]` (torch's `_calc_scale_factor`). One channel becomes RGB, as in torch's
/// `convert_to_HWC`; the image is PNG-encoded.
pub fn image(tag: &str, tensor: &Tensor, dataformats: &str) -> Result<Summary> {
    let dims = tensor.dims().to_vec();
    let (h, w, c, at): (usize, usize, usize, PixelIndex) = match (dataformats, &dims[..]) {
        ("CHW", &[c, h, w]) => (h, w, c, Box::new(move |y, x, k| (k * h + y) * w + x)),
        ("HWC", &[h, w, c]) => (h, w, c, Box::new(move |y, x, k| (y * w + x) * c + k)),
        ("HW", &[h, w]) => (h, w, 1, Box::new(move |y, x, _| y * w + x)),
        _ => bail!(
            Shape,
            "add_image({tag:?}): expected a {} tensor for dataformats {dataformats:?}, got shape {:?}",
            match dataformats {
                "CHW" | "HWC" => "3-d",
                "HW" => "2-d",
                _ => "CHW, HWC or HW",
            },
            dims
        ),
    };
    if ![1, 3, 4].contains(&c) {
        bail!(Shape, "add_image({tag:?}): expected 1, 3 or 4 channels, got {c}");
    }
    if h == 0 || w == 0 {
        bail!(Shape, "add_image({tag:?}): empty image {dims:?}");
    }
    let pixels: Vec<u8> = if tensor.dtype() == DType::U8 {
        tensor.contiguous()?.to_vec::<u8>()?
    } else {
        let v = tensor.detach().to_dtype(DType::F32)?.to_vec::<f32>()?;
        v.into_iter().map(|x| (x * 255.0).clamp(0.0, 255.0) as u8).collect()
    };
    let out_c = if c == 1 { 3 } else { c };
    let mut hwc = Vec::with_capacity(h * w * out_c);
    for y in 0..h {
        for x in 0..w {
            for k in 0..out_c {
                hwc.push(pixels[at(y, x, if c == 1 { 0 } else { k })]);
            }
        }
    }
    let png = encode_png(&hwc, w as u32, h as u32, out_c)
        .map_err(|e| err!(Value, "add_image({tag:?}): PNG: {e}"))?;
    let img =
        Image { height: h as i32, width: w as i32, colorspace: out_c as i32, encoded_image_string: png };
    Ok(Summary { values: vec![SummaryValue { tag: tag.into(), plugin: None, value: Value::Image(img) }] })
}

fn encode_png(pixels: &[u8], w: u32, h: u32, c: usize) -> std::result::Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(if c == 4 { png::ColorType::Rgba } else { png::ColorType::Rgb });
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(pixels)?;
    writer.finish()?;
    Ok(out)
}

fn hparams_value(tag: &str, data: HParamsPluginData) -> SummaryValue {
    SummaryValue {
        tag: tag.into(),
        plugin: Some(PluginData { plugin_name: "hparams".into(), content: data.encode() }),
        value: Value::None,
    }
}

/// The three summaries of the hparams plugin, as torch's `summary.hparams(hparam_dict,
/// metric_dict)`: `_hparams_/experiment` (names and types, the metrics' tags),
/// `_hparams_/session_start_info` (the values) and `_hparams_/session_end_info`
/// (`STATUS_SUCCESS`). As in PyTorch, a bool is written as a number (Python's `bool` is an
/// `int`).
pub fn hparams(hparams: &[(String, HParamValue)], metrics: &[String]) -> (Summary, Summary, Summary) {
    let values: Vec<(String, HParamValue)> = hparams
        .iter()
        .map(|(k, v)| {
            let v = match v {
                HParamValue::Bool(b) => HParamValue::Number(*b as i64 as f64),
                v => v.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    let types = values
        .iter()
        .map(|(k, v)| {
            let t = match v {
                HParamValue::Str(_) => HParamType::String,
                HParamValue::Bool(_) => HParamType::Bool,
                HParamValue::Number(_) => HParamType::Float64,
            };
            (k.clone(), t)
        })
        .collect();
    let exp = HParamsPluginData::Experiment { hparams: types, metrics: metrics.to_vec() };
    let ssi = HParamsPluginData::SessionStart { hparams: values };
    let sei = HParamsPluginData::SessionEnd { status: 1 };
    (
        Summary { values: vec![hparams_value("_hparams_/experiment", exp)] },
        Summary { values: vec![hparams_value("_hparams_/session_start_info", ssi)] },
        Summary { values: vec![hparams_value("_hparams_/session_end_info", sei)] },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_like_pytorch() {
        let b = default_bins();
        assert_eq!(b.len() % 2, 1);
        assert_eq!(b[b.len() / 2], 0.0);
        assert_eq!(b[b.len() / 2 + 1], 1e-12);
        assert!(*b.last().unwrap() < 1e20 && b.last().unwrap() * 1.1 >= 1e20);
    }

    #[test]
    fn histogram_trims_to_support() {
        let edges = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        let h = make_histogram(&[1.5, 2.5, 2.7, 5.0], &edges).unwrap();
        // counts [0, 1, 2, 0, 1]: first non-empty bucket 1, last 4
        assert_eq!(h.bucket, [0.0, 1.0, 2.0, 0.0, 1.0]);
        assert_eq!(h.bucket_limit, [1.0, 2.0, 3.0, 4.0, 5.0]);
        let h = make_histogram(&[0.5], &edges).unwrap();
        assert_eq!(h.bucket, [0.0, 1.0]);
        assert_eq!(h.bucket_limit, [0.0, 1.0]);
        assert!(make_histogram(&[], &edges).is_err());
        assert!(make_histogram(&[9.0], &edges).is_err());
    }
}
