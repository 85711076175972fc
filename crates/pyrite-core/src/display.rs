//! Printing tensors exactly as PyTorch's `repr()` does: `impl Display` and `impl Debug` for
//! [`Tensor`], and PyTorch's print options ([`set_printoptions`]).
//!
//! The rules follow `torch/_tensor_str.py`: integer-valued floats print as `1.`, other floats
//! with `precision` decimals, scientific notation (`1.0000e+10`) when the ratio of the largest
//! to the smallest nonzero finite magnitude exceeds 1000, the largest exceeds 1e8, or the
//! smallest is below 1e-4; every element padded to a common width; rows wrapped at
//! `linewidth`; tensors of more than `threshold` elements summarised with `...` keeping
//! `edgeitems` at each end of every dim; a `dtype=` suffix unless the dtype is the default
//! float dtype, int64 or bool; `size=` for empty tensors that are not 1-d.
//!
//! ```
//! use pyrite_core::{DType, Tensor};
//! let t = Tensor::new([[1f32, 2.], [3., 4.]])?;
//! assert_eq!(format!("{t}"), "tensor([[1., 2.],\n        [3., 4.]])");
//! assert_eq!(Tensor::new([1.5f32, 2.25])?.to_string(), "tensor([1.5000, 2.2500])");
//! assert_eq!(Tensor::new([1i32, 2])?.to_string(), "tensor([1, 2], dtype=torch.int32)");
//! assert_eq!(Tensor::zeros([0, 3], DType::F32)?.to_string(), "tensor([], size=(0, 3))");
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use crate::{dispatch_all, get_default_dtype, DType, Device, Element, Tensor};
use std::fmt;
use std::sync::RwLock;

/// PyTorch's print options (`torch.set_printoptions`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrintOptions {
    /// Digits after the decimal point for floats (default 4).
    pub precision: usize,
    /// Tensors with more elements than this are summarised (default 1000).
    pub threshold: usize,
    /// Items kept at the start and end of each summarised dim (default 3, at least 1).
    pub edgeitems: usize,
    /// Characters per line before wrapping (default 80).
    pub linewidth: usize,
    /// Force (`Some(true)`) or forbid (`Some(false)`) scientific notation; `None` decides per
    /// tensor as PyTorch does.
    pub sci_mode: Option<bool>,
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions { precision: 4, threshold: 1000, edgeitems: 3, linewidth: 80, sci_mode: None }
    }
}

static OPTIONS: RwLock<Option<PrintOptions>> = RwLock::new(None);

/// The current print options (`torch._tensor_str.get_printoptions()`).
pub fn get_printoptions() -> PrintOptions {
    OPTIONS.read().unwrap_or_else(|e| e.into_inner()).unwrap_or_default()
}

/// Sets the print options used by `Display`/`Debug` (`torch.set_printoptions`); pass
/// `PrintOptions::default()` to restore PyTorch's defaults.
///
/// ```
/// use pyrite_core::display::{set_printoptions, PrintOptions};
/// use pyrite_core::Tensor;
/// set_printoptions(PrintOptions { precision: 2, ..PrintOptions::default() });
/// assert_eq!(Tensor::new([1.12345f32])?.to_string(), "tensor([1.12])");
/// set_printoptions(PrintOptions::default());
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn set_printoptions(options: PrintOptions) {
    *OPTIONS.write().unwrap_or_else(|e| e.into_inner()) = Some(options);
}

/// The elements that get printed (every element, or only the edges when summarising), as
/// numbers of one kind.
enum Values {
    Float(Vec<f64>),
    Int(Vec<i64>),
    Bool(Vec<bool>),
}

/// Python's `'{:.{p}e}'.format(v)`: like Rust's `{:.p$e}` with a signed, two-digit exponent.
fn sci(v: f64, precision: usize) -> String {
    if !v.is_finite() {
        return nonfinite(v).to_string();
    }
    let s = format!("{v:.precision$e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let e: i32 = exp.parse().unwrap_or(0);
            format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.unsigned_abs())
        }
        None => s,
    }
}

/// Python's spelling of NaN and the infinities.
fn nonfinite(v: f64) -> &'static str {
    if v.is_nan() {
        "nan"
    } else if v > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// Python's `'{:.{p}f}'.format(v)`.
fn fixed(v: f64, precision: usize) -> String {
    if v.is_finite() {
        format!("{v:.precision$}")
    } else {
        nonfinite(v).to_string()
    }
}

/// PyTorch's `_Formatter`: decides the notation and the common width from the printed values.
struct Formatter {
    floating: bool,
    int_mode: bool,
    sci_mode: bool,
    max_width: usize,
    precision: usize,
}

impl Formatter {
    fn new(values: &Values, opts: &PrintOptions) -> Formatter {
        let p = opts.precision;
        let mut f =
            Formatter { floating: false, int_mode: true, sci_mode: false, max_width: 1, precision: p };
        match values {
            Values::Int(v) => f.max_width = v.iter().map(|x| x.to_string().len()).max().unwrap_or(0).max(1),
            Values::Bool(v) => {
                f.max_width = v.iter().map(|&x| if x { 4 } else { 5 }).max().unwrap_or(0).max(1)
            }
            Values::Float(v) => {
                f.floating = true;
                let nz: Vec<f64> = v.iter().copied().filter(|x| x.is_finite() && *x != 0.0).collect();
                if nz.is_empty() {
                    return f;
                }
                let min = nz.iter().map(|x| x.abs()).fold(f64::INFINITY, f64::min);
                let max = nz.iter().map(|x| x.abs()).fold(0.0, f64::max);
                f.int_mode = nz.iter().all(|x| *x == x.ceil());
                f.sci_mode = opts.sci_mode.unwrap_or(max / min > 1000.0 || max > 1.0e8 || min < 1.0e-4);
                f.max_width = nz
                    .iter()
                    .map(|&x| match (f.int_mode, f.sci_mode) {
                        (_, true) => sci(x, p).len(),
                        (true, false) => format!("{x:.0}").len() + 1,
                        (false, false) => fixed(x, p).len(),
                    })
                    .max()
                    .unwrap_or(1)
                    .max(1);
            }
        }
        f
    }

    fn format_float(&self, v: f64) -> String {
        let s = if self.sci_mode {
            sci(v, self.precision)
        } else if self.int_mode {
            if v.is_finite() {
                format!("{v:.0}.")
            } else {
                nonfinite(v).to_string()
            }
        } else {
            fixed(v, self.precision)
        };
        self.pad(s)
    }

    fn pad(&self, s: String) -> String {
        if s.len() >= self.max_width {
            s
        } else {
            format!("{}{s}", " ".repeat(self.max_width - s.len()))
        }
    }

    /// Element `i` of `values`, formatted and padded.
    fn format(&self, values: &Values, i: usize) -> String {
        match values {
            Values::Float(v) => self.format_float(v[i]),
            Values::Int(v) => self.pad(v[i].to_string()),
            Values::Bool(v) => self.pad(if v[i] { "True" } else { "False" }.to_string()),
        }
    }
}

/// The printed part of one dim: the kept indices and whether `...` follows the first
/// `edgeitems` of them.
struct DimPlan {
    kept: Vec<usize>,
    split: Option<usize>,
}

fn plan(dims: &[usize], summarize: bool, edge: usize) -> Vec<DimPlan> {
    dims.iter()
        .map(|&n| {
            if summarize && n > 2 * edge {
                DimPlan { kept: (0..edge).chain(n - edge..n).collect(), split: Some(edge) }
            } else {
                DimPlan { kept: (0..n).collect(), split: None }
            }
        })
        .collect()
}

/// Reads the kept elements (row-major over the kept indices of every dim).
fn gather(t: &Tensor, plans: &[DimPlan]) -> Values {
    let strides = t.stride();
    let offset = t.storage_offset();
    let mut positions = vec![offset];
    for (p, &s) in plans.iter().zip(strides) {
        let mut next = Vec::with_capacity(positions.len() * p.kept.len());
        for &base in &positions {
            next.extend(p.kept.iter().map(|&i| base + i * s));
        }
        positions = next;
    }
    let g = t.storage().read();
    let buf = g.cpu();
    dispatch_all!(t.dtype(), T => {
        let s = buf.as_slice::<T>();
        match t.dtype() {
            DType::Bool => Values::Bool(positions.iter().map(|&i| s[i].to_i64() != 0).collect()),
            d if d.is_floating_point() => Values::Float(positions.iter().map(|&i| s[i].to_f64()).collect()),
            _ => Values::Int(positions.iter().map(|&i| s[i].to_i64()).collect()),
        }
    })
}

struct Printer<'a> {
    values: &'a Values,
    plans: &'a [DimPlan],
    fmt: Formatter,
    opts: PrintOptions,
}

impl Printer<'_> {
    /// Prints dims `d..` starting at flat kept-element index `start`, PyTorch's
    /// `_tensor_str_with_formatter`.
    fn tensor_str(&self, d: usize, start: usize, indent: usize) -> String {
        let rank = self.plans.len();
        if rank == 0 {
            return self.fmt.format(self.values, 0);
        }
        let p = &self.plans[d];
        if d == rank - 1 {
            return self.vector_str(p, start, indent);
        }
        let inner: usize = self.plans[d + 1..].iter().map(|p| p.kept.len()).product();
        let mut slices = Vec::with_capacity(p.kept.len() + 1);
        for k in 0..p.kept.len() {
            if p.split == Some(k) {
                slices.push("...".to_string());
            }
            slices.push(self.tensor_str(d + 1, start + k * inner, indent + 1));
        }
        let sep = format!(",{}{}", "\n".repeat(rank - d - 1), " ".repeat(indent + 1));
        format!("[{}]", slices.join(&sep))
    }

    /// A 1-d row with wrapping, PyTorch's `_vector_str`.
    fn vector_str(&self, p: &DimPlan, start: usize, indent: usize) -> String {
        let element_length = (self.fmt.max_width + 2) as i64;
        let per_line =
            ((self.opts.linewidth as i64 - indent as i64).div_euclid(element_length)).max(1) as usize;
        let mut data = Vec::with_capacity(p.kept.len() + 1);
        for k in 0..p.kept.len() {
            if p.split == Some(k) {
                data.push(" ...".to_string());
            }
            data.push(self.fmt.format(self.values, start + k));
        }
        let lines: Vec<String> = data.chunks(per_line).map(|c| c.join(", ")).collect();
        format!("[{}]", lines.join(&format!(",\n{}", " ".repeat(indent + 1))))
    }
}

/// Python's `str(tuple(shape))`.
fn tuple_str(dims: &[usize]) -> String {
    match dims {
        [d] => format!("({d},)"),
        _ => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// PyTorch's `_add_suffixes`.
fn add_suffixes(body: String, suffixes: &[String], indent: usize, linewidth: usize) -> String {
    let mut out = body;
    let mut last_line_len = match out.rfind('\n') {
        Some(i) => out.len() - i + 1,
        None => out.len() + 2,
    };
    for s in suffixes {
        if last_line_len + s.len() + 2 > linewidth {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent));
            out.push_str(s);
            last_line_len = indent + s.len();
        } else {
            out.push_str(", ");
            out.push_str(s);
            last_line_len += s.len() + 2;
        }
    }
    out.push(')');
    out
}

impl Tensor {
    /// PyTorch's `repr(t)` under the given print options.
    pub fn repr_with(&self, opts: &PrintOptions) -> String {
        let prefix = "tensor(";
        let indent = prefix.len();
        let mut suffixes = Vec::new();
        if self.device() != Device::Cpu {
            suffixes.push(format!("device='{}'", self.device()));
        }
        let dtype = self.dtype();
        let body = if self.numel() == 0 {
            if self.rank() != 1 {
                suffixes.push(format!("size={}", tuple_str(self.dims())));
            }
            if dtype != get_default_dtype() {
                suffixes.push(format!("dtype={dtype}"));
            }
            "[]".to_string()
        } else if self.device().check_available().is_err() {
            suffixes.push(format!("size={}", tuple_str(self.dims())));
            "...".to_string()
        } else {
            if !(dtype == get_default_dtype() || dtype == DType::I64 || dtype == DType::Bool) {
                suffixes.push(format!("dtype={dtype}"));
            }
            let opts = PrintOptions { edgeitems: opts.edgeitems.max(1), ..*opts };
            let summarize = self.numel() > opts.threshold;
            let plans = plan(self.dims(), summarize, opts.edgeitems);
            // CUDA tensors print from a host copy, as PyTorch's repr does.
            let host;
            let src = if self.device().is_cuda() {
                match self.detach().to_device(Device::Cpu) {
                    Ok(h) => {
                        host = h;
                        &host
                    }
                    Err(e) => return format!("tensor(<{e}>, device='{}')", self.device()),
                }
            } else {
                self
            };
            let values = gather(src, &plans);
            let fmt = Formatter::new(&values, &opts);
            Printer { values: &values, plans: &plans, fmt, opts }.tensor_str(0, 0, indent)
        };
        match self.grad_fn() {
            Some(f) => suffixes.push(format!("grad_fn=<{}>", f.name())),
            None if self.requires_grad() => suffixes.push("requires_grad=True".to_string()),
            None => {}
        }
        add_suffixes(format!("{prefix}{body}"), &suffixes, indent, opts.linewidth)
    }
}

impl fmt::Display for Tensor {
    /// PyTorch's `repr(t)`, e.g. `tensor([1.5000, 2.2500])`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr_with(&get_printoptions()))
    }
}

impl fmt::Debug for Tensor {
    /// The same as `Display`: PyTorch's `repr(t)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
