//! `torchvision.utils`: [`make_grid`] and [`save_image`].

use crate::Image;
use pyrite_core::{bail, DType, Result, Tensor};
use std::path::Path;

/// The options of [`make_grid`] and [`save_image`], with torchvision's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct MakeGridOptions {
    /// Images per row of the grid (`nrow=8`).
    pub nrow: usize,
    /// Pixels between the images and around the grid (`padding=2`).
    pub padding: usize,
    /// Shift the values to `[0, 1]`: by `value_range` if given, else by the min and max of the
    /// batch (or of each image with `scale_each`) (`normalize=False`).
    pub normalize: bool,
    /// `(low, high)` for `normalize` (values are clamped to it first) (`value_range=None`).
    pub value_range: Option<(f64, f64)>,
    /// Normalize each image by its own min and max (`scale_each=False`).
    pub scale_each: bool,
    /// The value of the padding (`pad_value=0.0`).
    pub pad_value: f64,
}

impl Default for MakeGridOptions {
    fn default() -> Self {
        MakeGridOptions {
            nrow: 8,
            padding: 2,
            normalize: false,
            value_range: None,
            scale_each: false,
            pad_value: 0.0,
        }
    }
}

/// `torchvision.utils.make_grid(tensor, nrow, padding, normalize, value_range, scale_each,
/// pad_value)`: a batch `[B, C, H, W]` (or one image `[C, H, W]` / `[H, W]`) laid out as one
/// `[C, H', W']` image, `nrow` images a row, `padding` pixels of `pad_value` between and around
/// them. One-channel images are repeated to 3 channels, and a batch of one image is returned
/// without padding, as torchvision does. (Stack a list of images with `Tensor::stack` first.)
///
/// ```
/// use pyrite::vision::utils::{make_grid, MakeGridOptions};
/// let batch = pyrite::Tensor::rand([5, 1, 28, 28], pyrite::DType::F32)?;
/// let grid = make_grid(&batch, MakeGridOptions { nrow: 4, ..Default::default() })?;
/// // 4 x 2 cells of 28 + 2 pixels, plus the padding of the last row and column
/// assert_eq!(grid.dims(), &[3, 2 * 30 + 2, 4 * 30 + 2]);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn make_grid(tensor: &Tensor, options: MakeGridOptions) -> Result<Tensor> {
    let o = options;
    let mut t = match tensor.dims().len() {
        2 => tensor.unsqueeze(0)?,
        3 | 4 => tensor.clone(),
        _ => bail!(
            Shape,
            "make_grid: expected a batch [B, C, H, W] or an image [C, H, W] or [H, W], got shape {:?}",
            tensor.dims()
        ),
    };
    if t.dims().len() == 3 {
        if t.dims()[0] == 1 {
            t = Tensor::cat(&[&t, &t, &t], 0)?;
        }
        t = t.unsqueeze(0)?;
    }
    if t.dims()[1] == 1 {
        t = Tensor::cat(&[&t, &t, &t], 1)?;
    }
    if o.normalize {
        if !matches!(t.dtype(), DType::F16 | DType::BF16 | DType::F32 | DType::F64) {
            bail!(DType, "make_grid: normalize needs a float tensor, got {:?}", t.dtype());
        }
        if let Some((low, high)) = o.value_range
            && (low.is_nan() || high.is_nan() || low > high)
        {
            bail!(Value, "make_grid: value_range has to be (min, max) with min <= max, got ({low}, {high})");
        }
        t = if o.scale_each {
            let each: Vec<Tensor> = (0..t.dims()[0])
                .map(|i| norm_range(&t.select(0, i as isize)?, o.value_range))
                .collect::<Result<_>>()?;
            Tensor::stack(&each, 0)?
        } else {
            norm_range(&t, o.value_range)?
        };
    }
    let (n, c, h, w) = (t.dims()[0], t.dims()[1], t.dims()[2], t.dims()[3]);
    if n == 1 {
        return t.squeeze_dim(0);
    }
    if o.nrow == 0 {
        bail!(Value, "make_grid: nrow must be positive, got 0");
    }
    let xmaps = o.nrow.min(n);
    let ymaps = n.div_ceil(xmaps);
    let (ch, cw) = (h + o.padding, w + o.padding);
    let grid = Tensor::full([c, ch * ymaps + o.padding, cw * xmaps + o.padding], o.pad_value, t.dtype())?;
    for k in 0..n {
        let (y, x) = (k / xmaps, k % xmaps);
        grid.narrow(1, (y * ch + o.padding) as isize, h)?
            .narrow(2, (x * cw + o.padding) as isize, w)?
            .copy_(&t.select(0, k as isize)?)?;
    }
    Ok(grid)
}

/// torchvision's `norm_range`: clamp to `(low, high)` (the tensor's min and max when `None`),
/// then `(x - low) / max(high - low, 1e-5)`.
fn norm_range(t: &Tensor, value_range: Option<(f64, f64)>) -> Result<Tensor> {
    let (low, high) = match value_range {
        Some(r) => r,
        None => {
            (t.min()?.to_dtype(DType::F64)?.item::<f64>()?, t.max()?.to_dtype(DType::F64)?.item::<f64>()?)
        }
    };
    t.clamp(Some(low.into()), Some(high.into()))?.sub_scalar(low)?.div_scalar((high - low).max(1e-5))
}

/// `torchvision.utils.save_image(tensor, fp, **kwargs)`: [`make_grid`] with `options`, then
/// each value `x` (float, `[0, 1]`) written as the byte `trunc(clamp(x * 255 + 0.5, 0, 255))`
/// to `path` in the format its extension names (PNG for `.png`). The grid must have 1, 3 or 4
/// channels (grey batches are already 3 by then).
///
/// ```no_run
/// use pyrite::vision::utils::{save_image, MakeGridOptions};
/// let samples = pyrite::Tensor::rand([64, 1, 28, 28], pyrite::DType::F32)?;
/// save_image(&samples, "samples.png", MakeGridOptions::default())?;
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn save_image(tensor: &Tensor, path: impl AsRef<Path>, options: MakeGridOptions) -> Result<()> {
    if !matches!(tensor.dtype(), DType::F16 | DType::BF16 | DType::F32 | DType::F64) {
        bail!(DType, "save_image: expected a float tensor with values in [0, 1], got {:?}", tensor.dtype());
    }
    let grid = make_grid(tensor, options)?;
    let bytes = grid
        .mul_scalar(255.0)?
        .add_scalar(0.5)?
        .clamp(Some(0.0.into()), Some(255.0.into()))?
        .trunc()?
        .to_dtype(DType::U8)?;
    Image::from_chw_u8(&bytes, "save_image")?.save(path)
}
