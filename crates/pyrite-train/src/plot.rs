//! Plots of a training run (`pyrite::train::plot`): the logged curves, a confusion matrix and
//! the learning-rate finder's loss curve, each written as a PNG and an SVG.
//!
//! The figures are drawn with `plotters` (bitmap and SVG backends), text with a vendored
//! subset of DejaVu Sans (`assets/`), so nothing depends on the fonts or libraries of the
//! machine. Every function returns the paths of the PNG and the SVG it wrote.
//!
//! ```
//! use std::collections::BTreeMap;
//! use pyrite_train::plot::plot_curves;
//!
//! let mut logged: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
//! logged.insert("train_loss_step".into(), (0..100).map(|s| (s, 2.0 / (1.0 + s as f64))).collect());
//! logged.insert("val_loss".into(), vec![(49, 0.2), (99, 0.1)]);
//! let dir = std::env::temp_dir().join("pyrite_plot_doc_module");
//! let (png, svg) = plot_curves(&logged, &dir)?;
//! assert!(png.ends_with("curves.png") && svg.ends_with("curves.svg"));
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::drawing::DrawingAreaErrorKind;
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use pyrite_core::{bail, err, Error, Result};

/// The font every figure uses, registered with plotters under the generic family name (so the
/// SVGs ask the browser for its own sans-serif, whose glyphs are no wider than DejaVu's).
const FONT: &str = "sans-serif";
static FONT_REGULAR: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");
static FONT_BOLD: &[u8] = include_bytes!("../assets/DejaVuSans-Bold-subset.ttf");

/// Matplotlib's `tab10` colours, in order.
const TAB10: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const TEXT: RGBColor = RGBColor(34, 34, 34);
const AXIS: RGBColor = RGBColor(90, 90, 90);
const GRID: RGBColor = RGBColor(224, 224, 224);
const GRID_MINOR: RGBColor = RGBColor(242, 242, 242);

// Panel geometry of `plot_curves`, in pixels.
const PANEL_W: u32 = 720;
const PANEL_H: u32 = 420;

/// Plots the metrics a training loop logged, one panel per quantity, to `dir/curves.png` and
/// `dir/curves.svg` (creating `dir`), and returns those two paths.
///
/// `series` maps a metric's name to its points `(global_step, value)`, named as Lightning
/// names them (`train_loss_step`, `train_loss_epoch`, `val_loss`, `val_acc`, `lr-Adam`,
/// `epoch`, ...). Names that differ only by a `train_`/`val_`/`test_` prefix and a
/// `_step`/`_epoch` suffix share a panel (training and validation loss together), names
/// starting with `lr` share a learning-rate panel (log-scale when the values span more than
/// 10x), and `epoch` is not drawn. The x axis is the global step; per-step series are thin
/// lines, per-epoch and validation series lines with markers; NaN and infinite values are
/// skipped (the line breaks there). Panels are laid out in one column, or two when there are
/// more than two.
///
/// An empty map (or one with nothing drawable in it) is an error, as is a folder that cannot
/// be created or written.
///
/// ```
/// use std::collections::BTreeMap;
/// use pyrite_train::plot::plot_curves;
///
/// let mut logged = BTreeMap::new();
/// logged.insert("train_loss_step".to_string(), (0..200).map(|s| (s, (-(s as f64) / 80.0).exp())).collect());
/// logged.insert("train_loss_epoch".to_string(), vec![(99, 0.5), (199, 0.15)]);
/// logged.insert("val_loss".to_string(), vec![(99, 0.55), (199, 0.2)]);
/// logged.insert("val_acc".to_string(), vec![(99, 0.7), (199, 0.9)]);
/// logged.insert("lr-Adam".to_string(), (0..200).map(|s| (s, 1e-3 * 0.98f64.powi(s as i32))).collect());
/// logged.insert("epoch".to_string(), vec![(99, 0.0), (199, 1.0)]);
/// let dir = std::env::temp_dir().join("pyrite_plot_doc_curves");
/// let (png, svg) = plot_curves(&logged, &dir)?;
/// assert_eq!(png, dir.join("curves.png"));
/// assert!(std::fs::read_to_string(&svg).unwrap().contains("val_loss"));
///
/// assert!(plot_curves(&BTreeMap::new(), &dir).is_err());
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn plot_curves(series: &BTreeMap<String, Vec<(u64, f64)>>, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    if series.is_empty() {
        bail!(Value, "plot_curves: no logged metrics to plot");
    }
    let panels = group_panels(series);
    if panels.is_empty() {
        let names: Vec<&str> = series.keys().map(String::as_str).collect();
        bail!(
            Value,
            "plot_curves: no logged metrics to plot (only {} with no finite values, or `epoch`)",
            names.join(", ")
        );
    }
    create_dir(dir, "plot_curves")?;
    let figure = PanelsFigure { panels };
    let (png, svg) = (dir.join("curves.png"), dir.join("curves.svg"));
    render(&figure, &png, &svg, "plot_curves")?;
    Ok((png, svg))
}

/// Plots a confusion matrix as a heatmap (rows = true class, columns = predicted class), each
/// cell annotated with its value (as an integer when every entry is a whole number, else with
/// two decimals), with a colour scale, titled "Confusion matrix", and returns the paths of the
/// PNG and SVG written at `path` (given without an extension or with `.png` or `.svg`).
///
/// `class_names` label the rows and columns (`0, 1, ...` when `None`), as sklearn's
/// `ConfusionMatrixDisplay` does. A ragged or non-square matrix, an empty one, or a wrong
/// number of class names is an error.
///
/// ```
/// use pyrite_train::plot::plot_confusion_matrix;
///
/// let counts = vec![vec![50.0, 2.0, 3.0], vec![4.0, 40.0, 6.0], vec![1.0, 0.0, 44.0]];
/// let names: Vec<String> = ["cat", "dog", "bird"].iter().map(|s| s.to_string()).collect();
/// let path = std::env::temp_dir().join("pyrite_plot_doc_cm");
/// let (png, svg) = plot_confusion_matrix(&counts, Some(&names), &path)?;
/// assert_eq!(png.extension().unwrap(), "png");
/// assert!(std::fs::read_to_string(&svg).unwrap().contains("Confusion matrix"));
///
/// assert!(plot_confusion_matrix(&[vec![1.0, 2.0]], None, &path).is_err()); // not square
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn plot_confusion_matrix(
    matrix: &[Vec<f64>],
    class_names: Option<&[String]>,
    path: &Path,
) -> Result<(PathBuf, PathBuf)> {
    let n = matrix.len();
    if n == 0 {
        bail!(Value, "plot_confusion_matrix: the matrix is empty");
    }
    for (i, row) in matrix.iter().enumerate() {
        if row.len() != n {
            bail!(
                Value,
                "plot_confusion_matrix: expected a square matrix ({n} rows of {n} values), \
                 but row {i} has {} values",
                row.len()
            );
        }
    }
    let names: Vec<String> = match class_names {
        Some(names) if names.len() != n => {
            bail!(Value, "plot_confusion_matrix: got {} class names for a {n}x{n} matrix", names.len())
        }
        Some(names) => names.to_vec(),
        None => (0..n).map(|i| i.to_string()).collect(),
    };
    let (png, svg) = output_paths(path, "plot_confusion_matrix")?;
    let figure = ConfusionFigure::new(matrix, names);
    render(&figure, &png, &svg, "plot_confusion_matrix")?;
    Ok((png, svg))
}

/// Plots the learning-rate finder's loss against the learning rate (log-scale x axis), with
/// the suggested point marked in red, as Lightning's `lr_finder.plot(suggest=True)` does, and
/// returns the paths of the PNG and SVG written at `path` (given without an extension or with
/// `.png` or `.svg`).
///
/// `suggestion` is the index of the suggested learning rate (Lightning's
/// `lr_finder._optimal_idx`). Non-finite losses are skipped. Lengths that differ, an empty or
/// non-positive learning rate, or a suggestion out of range are errors.
///
/// ```
/// use pyrite_train::plot::plot_lr_finder;
///
/// let lrs: Vec<f64> = (0..100).map(|i| 1e-6 * 10f64.powf(i as f64 * 6.0 / 99.0)).collect();
/// let losses: Vec<f64> = lrs.iter().map(|lr| 2.0 - 0.2 * (lr.log10() + 6.0) + (lr * 30.0).powi(2)).collect();
/// let path = std::env::temp_dir().join("pyrite_plot_doc_lr_find.png");
/// let (png, svg) = plot_lr_finder(&lrs, &losses, Some(60), &path)?;
/// assert_eq!(png, path);
/// assert!(svg.ends_with("pyrite_plot_doc_lr_find.svg"));
///
/// assert!(plot_lr_finder(&lrs, &losses[..10], None, &path).is_err());
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn plot_lr_finder(
    lrs: &[f64],
    losses: &[f64],
    suggestion: Option<usize>,
    path: &Path,
) -> Result<(PathBuf, PathBuf)> {
    if lrs.len() != losses.len() {
        bail!(
            Value,
            "plot_lr_finder: lrs and losses must have the same length, got {} and {}",
            lrs.len(),
            losses.len()
        );
    }
    if lrs.is_empty() {
        bail!(Value, "plot_lr_finder: no learning rates to plot");
    }
    if let Some(bad) = lrs.iter().find(|lr| !(lr.is_finite() && **lr > 0.0)) {
        bail!(
            Value,
            "plot_lr_finder: learning rates must be positive and finite for the log-scale \
             x axis, got {bad}"
        );
    }
    if let Some(i) = suggestion
        && i >= lrs.len()
    {
        bail!(Value, "plot_lr_finder: suggestion index {i} is out of range for {} learning rates", lrs.len());
    }
    let points: Vec<(f64, f64)> = lrs.iter().copied().zip(losses.iter().copied()).collect();
    if !points.iter().any(|(_, l)| l.is_finite()) {
        bail!(Value, "plot_lr_finder: every loss is NaN or infinite");
    }
    let (png, svg) = output_paths(path, "plot_lr_finder")?;
    let figure = LrFinderFigure { points, suggestion: suggestion.filter(|&i| losses[i].is_finite()) };
    render(&figure, &png, &svg, "plot_lr_finder")?;
    Ok((png, svg))
}

// ---------------------------------------------------------------------------------------------
// Rendering: one figure, two backends.

type DrawResult<DB> = std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// A figure that can be drawn on any plotters backend.
trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB>;
}

fn register_fonts() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        register_font(FONT, FontStyle::Normal, FONT_REGULAR).is_ok()
            && register_font(FONT, FontStyle::Bold, FONT_BOLD).is_ok()
    });
    if !ok {
        bail!(Value, "plot: the vendored font (assets/DejaVuSans-subset.ttf) is not a valid font");
    }
    Ok(())
}

fn drawing_error<E: std::error::Error + Send + Sync>(what: &str, e: DrawingAreaErrorKind<E>) -> Error {
    err!(Value, "{what}: drawing failed: {e}")
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    err!(Io, "{what}: cannot write {}: {e}", path.display())
}

fn create_dir(dir: &Path, what: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| err!(Io, "{what}: cannot create the folder {}: {e}", dir.display()))
}

/// `path` with extensions `.png` and `.svg`: an existing `.png`/`.svg` extension is replaced,
/// anything else is kept as part of the name. Creates the parent folder.
fn output_paths(path: &Path, what: &str) -> Result<(PathBuf, PathBuf)> {
    if path.file_name().is_none() {
        bail!(Value, "{what}: expected a file path, got {:?}", path.display().to_string());
    }
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let stem = match ext.as_deref() {
        Some("png" | "svg") => path.with_extension(""),
        _ => path.to_path_buf(),
    };
    let with = |ext: &str| {
        let mut s = stem.clone().into_os_string();
        s.push(ext);
        PathBuf::from(s)
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir(parent, what)?;
    }
    Ok((with(".png"), with(".svg")))
}

/// Draws `figure` into an RGB buffer and an SVG string, and writes `png` and `svg`.
fn render<F: Figure>(figure: &F, png: &Path, svg: &Path, what: &str) -> Result<()> {
    register_fonts()?;
    let (w, h) = figure.size();
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        figure.draw(&root).map_err(|e| drawing_error(what, e))?;
        root.present().map_err(|e| drawing_error(what, e))?;
    }
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
        figure.draw(&root).map_err(|e| drawing_error(what, e))?;
        root.present().map_err(|e| drawing_error(what, e))?;
    }
    let encoded = encode_png(&rgb, w, h).map_err(|e| err!(Value, "{what}: PNG encoding failed: {e}"))?;
    std::fs::write(png, encoded).map_err(|e| io_error(what, png, e))?;
    std::fs::write(svg, text).map_err(|e| io_error(what, svg, e))?;
    Ok(())
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> std::result::Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

fn font(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().color(&TEXT)
}

fn bold(size: f64) -> TextStyle<'static> {
    // Through `FontDesc::new`: `FontDesc::style` would keep the regular face's glyphs.
    (FONT, size, FontStyle::Bold).into_font().color(&TEXT)
}

// ---------------------------------------------------------------------------------------------
// Axes: ticks at round numbers, chosen here (plotters only draws them).

/// A linear or log-scale axis with its tick positions and labels.
#[derive(Clone, Debug)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    /// Major ticks (grid lines and labels) with their labels.
    major: Vec<(f64, String)>,
    /// Minor grid lines (log axes only).
    minor: Vec<f64>,
}

impl Axis {
    /// A linear axis over the data range `[min, max]`, padded by `pad` of the span on each
    /// side, with at most `max_ticks` ticks (whole numbers only when `integer`).
    fn linear(min: f64, max: f64, pad: f64, max_ticks: usize, integer: bool) -> Axis {
        let (mut lo, mut hi) = (min, max);
        let span = hi - lo;
        if span.is_nan() || span <= f64::EPSILON * hi.abs().max(lo.abs()).max(1e-300) {
            let half = if lo == 0.0 { 1.0 } else { lo.abs() * 0.05 };
            lo -= half;
            hi += half;
        } else {
            lo -= pad * span;
            hi += pad * span;
        }
        let (step, ticks) = nice_ticks(lo, hi, max_ticks.max(2), integer);
        let major = ticks.into_iter().map(|t| (t, format_tick(t, step))).collect();
        Axis { lo, hi, log: false, major, minor: Vec::new() }
    }

    /// A log-scale axis over the positive data range `[min, max]`, padded by `pad` of the
    /// span (in decades) on each side, with ticks at powers of ten (and 2x, 5x when the axis
    /// spans few decades).
    fn log(min: f64, max: f64, pad: f64, max_ticks: usize) -> Axis {
        let (a, b) = (min.log10(), max.log10());
        let span = (b - a).max(1e-9);
        let (lo_e, hi_e) = (a - pad * span, b + pad * span);
        let (lo, hi) = (10f64.powf(lo_e), 10f64.powf(hi_e));
        let decades: Vec<i32> = ((lo_e.ceil() as i32)..=(hi_e.floor() as i32)).collect();
        let every = decades.len().div_ceil(max_ticks.max(2)).max(1);
        let mut major: Vec<(f64, i32, i32)> = decades
            .iter()
            .filter(|e| e.rem_euclid(every as i32) == 0)
            .map(|&e| (pow10(1, e), 1, e))
            .collect();
        if major.len() < 3 {
            // Few decades: 1-2-5 ticks.
            major = (lo_e.floor() as i32..=hi_e.ceil() as i32)
                .flat_map(|e| [1, 2, 5].map(|m| (pow10(m, e), m, e)))
                .filter(|(v, _, _)| *v >= lo && *v <= hi)
                .collect();
        }
        let minor = if every == 1 && decades.len() <= 8 {
            (lo_e.floor() as i32..=hi_e.ceil() as i32)
                .flat_map(|e| (2..10).map(move |m| pow10(m, e)))
                .filter(|v| *v >= lo && *v <= hi)
                .collect()
        } else {
            Vec::new()
        };
        let plain = major.iter().all(|(v, _, _)| (1e-3..1e4).contains(v));
        let major = major
            .into_iter()
            .map(|(v, m, e)| {
                let label = match (plain, e) {
                    (true, _) => format!("{v}"),
                    (false, 0) => format!("{m}"),
                    (false, _) => format!("{m}e{e}"),
                };
                (v, label)
            })
            .collect();
        Axis { lo, hi, log: true, major, minor }
    }

    fn label(&self, v: f64) -> String {
        self.major.iter().find(|(t, _)| *t == v).map(|(_, l)| l.clone()).unwrap_or_else(|| format!("{v}"))
    }

    /// Where `v` lies on the axis, 0 at `lo` and 1 at `hi`.
    fn fraction(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
}

impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let t = self.fraction(*value).clamp(-10.0, 10.0);
        let t = if t.is_nan() { 0.0 } else { t };
        limit.0 + (f64::from(limit.1 - limit.0) * t).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.major.iter().map(|(t, _)| *t).collect()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for Axis {
    fn format_ext(&self, value: &f64) -> String {
        self.label(*value)
    }
}

/// `m * 10^e`, exactly as the literal `"{m}e{e}"` parses.
fn pow10(m: i32, e: i32) -> f64 {
    format!("{m}e{e}").parse().unwrap_or(f64::NAN)
}

/// Ticks at multiples of the smallest step in {1, 2, 2.5, 5} x 10^k that gives at most
/// `max_ticks` ticks in `[lo, hi]`.
fn nice_ticks(lo: f64, hi: f64, max_ticks: usize, integer: bool) -> (f64, Vec<f64>) {
    let span = hi - lo;
    let first = (span / max_ticks as f64).log10().floor() as i32 - 1;
    for e in first..first + 5 {
        for m in [10, 20, 25, 50] {
            let step = pow10(m, e - 1);
            if integer && step.fract() != 0.0 {
                continue;
            }
            let (k0, k1) = ((lo / step).ceil() as i64, (hi / step).floor() as i64);
            if k1 - k0 < max_ticks as i64 {
                let ticks = (k0..=k1)
                    .map(|k| {
                        let t = k as f64 * step;
                        if t.abs() < step * 1e-9 {
                            0.0
                        } else {
                            t
                        }
                    })
                    .collect();
                return (step, ticks);
            }
        }
    }
    (span, vec![lo, hi])
}

/// A tick label: as many decimals as the step needs, scientific for very large or small
/// values (`2.5e-4`).
fn format_tick(v: f64, step: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let decimals = (0..=15)
        .find(|&d| {
            let s = step * 10f64.powi(d);
            (s - s.round()).abs() < 1e-6 * s.max(1.0)
        })
        .unwrap_or(15) as usize;
    let a = v.abs();
    if a >= 1e7 || (a < 1e-3 && decimals > 4) {
        let digits = (a.log10().floor() - step.log10().floor()).max(0.0) as usize + 1;
        sci(v, digits)
    } else {
        format!("{v:.decimals$}")
    }
}

/// `v` in scientific notation with `sig` significant digits, trailing zeros dropped
/// (`2.5e-4`, `1e-3`).
fn sci(v: f64, sig: usize) -> String {
    let s = format!("{:.*e}", sig.saturating_sub(1), v);
    match s.split_once('e') {
        Some((m, e)) if m.contains('.') => {
            format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
        }
        _ => s,
    }
}

/// A value for a label or a cell: shortest round-trip with at most 3 significant digits.
fn short(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        sci(v, 3)
    } else {
        let s = format!("{:.*}", (2 - a.log10().floor().min(2.0) as i32).max(0) as usize, v);
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
}

// ---------------------------------------------------------------------------------------------
// plot_curves: grouping and drawing.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    /// A thin, translucent line (per-step values).
    Thin,
    /// A line with markers (per-epoch and validation values).
    Marked,
}

#[derive(Debug)]
struct Curve {
    name: String,
    /// The finite points, split where a non-finite value interrupted the series.
    segments: Vec<Vec<(f64, f64)>>,
    style: Style,
    color: RGBColor,
}

#[derive(Debug)]
struct Panel {
    title: String,
    is_lr: bool,
    curves: Vec<Curve>,
}

/// The panel a metric belongs to: `None` for `epoch`, `Some(None)` for the learning-rate
/// panel, else the metric's base name.
fn panel_key(name: &str) -> Option<Option<String>> {
    if name == "epoch" {
        return None;
    }
    if name.starts_with("lr") {
        return Some(None);
    }
    let (_, rest) = split_prefix(name);
    let base =
        ["_step", "_epoch", "/step", "/epoch"].iter().find_map(|s| rest.strip_suffix(s)).unwrap_or(rest);
    Some(Some(if base.is_empty() { name.to_string() } else { base.to_string() }))
}

/// `("train", "loss_step")` for `train_loss_step`; `("", name)` without a known prefix.
fn split_prefix(name: &str) -> (&str, &str) {
    for prefix in ["train", "val", "test"] {
        for sep in ['_', '/'] {
            if let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix(sep))
                && !rest.is_empty()
            {
                return (prefix, rest);
            }
        }
    }
    ("", name)
}

fn group_panels(series: &BTreeMap<String, Vec<(u64, f64)>>) -> Vec<Panel> {
    let mut groups: BTreeMap<Option<String>, Vec<Curve>> = BTreeMap::new();
    for (name, points) in series {
        let Some(key) = panel_key(name) else { continue };
        let is_lr = key.is_none();
        let mut segments = vec![Vec::new()];
        for &(step, value) in points {
            if value.is_finite() && !(is_lr && value <= 0.0) {
                segments.last_mut().unwrap().push((step as f64, value));
            } else if !segments.last().unwrap().is_empty() {
                segments.push(Vec::new());
            }
        }
        segments.retain(|s| !s.is_empty());
        if segments.is_empty() {
            continue;
        }
        let count: usize = segments.iter().map(Vec::len).sum();
        let (prefix, _) = split_prefix(name);
        let style = if name.ends_with("_step") {
            Style::Thin
        } else if name.ends_with("_epoch") || prefix == "val" || prefix == "test" {
            Style::Marked
        } else if count > 60 {
            Style::Thin
        } else {
            Style::Marked
        };
        groups.entry(key).or_default().push(Curve { name: name.clone(), segments, style, color: TAB10[0] });
    }
    let mut panels: Vec<Panel> = groups
        .into_iter()
        .map(|(key, mut curves)| {
            assign_colors(&mut curves);
            // Thin per-step lines first, so the markers are drawn over them.
            curves.sort_by_key(|c| c.style == Style::Marked);
            Panel { is_lr: key.is_none(), title: key.unwrap_or_else(|| "learning rate".to_string()), curves }
        })
        .collect();
    // The loss first, the learning rate last, the rest by name.
    panels.sort_by_key(|p| (p.title != "loss", p.is_lr));
    panels
}

/// Training curves blue, validation orange, test green (as in Lightning's examples); other
/// names take the remaining tab10 colours in order.
fn assign_colors(curves: &mut [Curve]) {
    let mut next = 3;
    for curve in curves.iter_mut() {
        curve.color = match split_prefix(&curve.name).0 {
            "train" => TAB10[0],
            "val" => TAB10[1],
            "test" => TAB10[2],
            _ => {
                let c = TAB10[next % TAB10.len()];
                next += 1;
                c
            }
        };
    }
}

/// A panel that draws itself into its area of a figure.
trait DrawPanel {
    fn draw_in<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult<DB>;
}

impl DrawPanel for Panel {
    fn draw_in<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        draw_panel(self, area)
    }
}

/// Panels laid out in one column, or two when there are more than two (`plot_curves` and
/// `plot_xy`).
struct PanelsFigure<P> {
    panels: Vec<P>,
}

impl<P> PanelsFigure<P> {
    fn grid(&self) -> (usize, usize) {
        let n = self.panels.len();
        let cols = if n > 2 { 2 } else { 1 };
        (n.div_ceil(cols), cols)
    }
}

impl<P: DrawPanel> Figure for PanelsFigure<P> {
    fn size(&self) -> (u32, u32) {
        let (rows, cols) = self.grid();
        (PANEL_W * cols as u32, PANEL_H * rows as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let areas = root.split_evenly(self.grid());
        for (panel, area) in self.panels.iter().zip(areas.iter()) {
            panel.draw_in(area)?;
        }
        Ok(())
    }
}

fn bounds(points: impl Iterator<Item = (f64, f64)>) -> Option<((f64, f64), (f64, f64))> {
    points.fold(None, |acc, (x, y)| {
        let ((x0, x1), (y0, y1)) = acc.unwrap_or(((x, x), (y, y)));
        Some(((x0.min(x), x1.max(x)), (y0.min(y), y1.max(y))))
    })
}

/// Space for the y tick labels: the widest label plus the tick and a gap.
fn y_label_width<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    axis: &Axis,
    style: &TextStyle,
) -> std::result::Result<u32, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut widest = 0;
    for (_, label) in &axis.major {
        widest = widest.max(area.estimate_text_size(label, style)?.0);
    }
    Ok(widest + 16)
}

/// A chart on two [`Axis`] scales.
type AxesChart<'a, DB> = ChartContext<'a, DB, plotters::coord::cartesian::Cartesian2d<Axis, Axis>>;

/// A titled chart on `x` and `y` with the figures' grid, ticks and axis labels (`y_desc` gets
/// room beside the tick labels).
fn axes_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    title: &str,
    x: &Axis,
    y: &Axis,
    x_desc: &str,
    y_desc: Option<&str>,
) -> std::result::Result<AxesChart<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
    let tick_style = font(14.0).color(&AXIS);
    let y_area = y_label_width(area, y, &tick_style)? + if y_desc.is_some() { 22 } else { 0 };
    let mut chart = ChartBuilder::on(area)
        .caption(title, bold(18.0))
        .margin_top(8)
        .margin_right(22)
        .margin_left(10)
        .margin_bottom(6)
        .x_label_area_size(48)
        .y_label_area_size(y_area)
        .build_cartesian_2d(x.clone(), y.clone())?;
    let fx = |v: &f64| x.label(*v);
    let fy = |v: &f64| y.label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(x.major.len())
        .y_labels(y.major.len())
        .x_label_formatter(&fx)
        .y_label_formatter(&fy)
        .bold_line_style(GRID)
        .light_line_style(GRID_MINOR)
        .axis_style(AXIS)
        .label_style(tick_style)
        .axis_desc_style(font(15.0))
        .x_desc(x_desc);
    if let Some(d) = y_desc {
        mesh.y_desc(d);
    }
    mesh.draw()?;
    Ok(chart)
}

fn draw_panel<DB: DrawingBackend>(panel: &Panel, area: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
    let all = || panel.curves.iter().flat_map(|c| c.segments.iter().flatten().copied());
    let Some(((x0, x1), (y0, y1))) = bounds(all()) else { return Ok(()) };
    let (w, h) = area.dim_in_pixel();
    let x_axis = Axis::linear(x0, x1, 0.03, (w / 110).max(3) as usize, true);
    let log_y = panel.is_lr && y0 > 0.0 && y1 / y0 > 10.0;
    let max_y_ticks = (h / 55).max(3) as usize;
    let y_axis = if log_y {
        Axis::log(y0, y1, 0.05, max_y_ticks)
    } else {
        Axis::linear(y0, y1, 0.06, max_y_ticks, false)
    };
    let mut chart = axes_chart(area, &panel.title, &x_axis, &y_axis, "step", None)?;

    let n_marked_max = 120;
    for curve in &panel.curves {
        let count: usize = curve.segments.iter().map(Vec::len).sum();
        let markers = curve.style == Style::Marked && count <= n_marked_max;
        let line = match curve.style {
            Style::Thin => curve.color.mix(0.75).stroke_width(1),
            Style::Marked => curve.color.stroke_width(2),
        };
        let fill = curve.color.filled();
        for segment in &curve.segments {
            if segment.len() > 1 {
                chart.draw_series(LineSeries::new(segment.iter().copied(), line))?;
            }
            if markers || segment.len() == 1 {
                chart.draw_series(segment.iter().map(|&p| Circle::new(p, 4, fill)))?;
            }
        }
        // The legend entry (drawn by the series-label box, not here).
        let legend = chart.draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?;
        legend.label(curve.name.as_str());
        if markers || count == 1 {
            legend.legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(-2, 0), (22, 0)], line)
                    + Circle::new((10, 0), 4, fill)
            });
        } else {
            legend
                .legend(move |(x, y)| PathElement::new(vec![(x - 2, y), (x + 22, y)], line.stroke_width(2)));
        }
    }
    chart
        .configure_series_labels()
        .position(legend_corner(panel, &x_axis, &y_axis))
        .margin(12)
        .legend_area_size(30)
        .label_font(font(14.0))
        .background_style(WHITE.mix(0.88))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    Ok(())
}

/// The corner of the plot the curves leave most empty, for the legend.
fn legend_corner(panel: &Panel, x: &Axis, y: &Axis) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let rows = panel.curves.len() as f64;
    let (box_w, box_h) = (0.45, (0.12 * rows + 0.06).min(0.9));
    let crowding = |right: bool, top: bool| {
        let mut n = 0usize;
        for curve in &panel.curves {
            // Sample dense curves so each counts about equally.
            for seg in &curve.segments {
                let stride = (seg.len() / 200).max(1);
                for &(px, py) in seg.iter().step_by(stride) {
                    let (fx, fy) = (x.fraction(px), y.fraction(py));
                    let in_x = if right { fx > 1.0 - box_w } else { fx < box_w };
                    let in_y = if top { fy > 1.0 - box_h } else { fy < box_h };
                    n += usize::from(in_x && in_y) * stride;
                }
            }
        }
        n
    };
    corners
        .iter()
        .min_by_key(|(_, right, top)| crowding(*right, *top))
        .map(|c| c.0.clone())
        .unwrap_or(SeriesLabelPosition::UpperRight)
}

// ---------------------------------------------------------------------------------------------
// plot_confusion_matrix.

/// ColorBrewer's 9-class "Blues" (matplotlib's `Blues` colormap), light to dark.
const BLUES: [(u8, u8, u8); 9] = [
    (247, 251, 255),
    (222, 235, 247),
    (198, 219, 239),
    (158, 202, 225),
    (107, 174, 214),
    (66, 146, 198),
    (33, 113, 181),
    (8, 81, 156),
    (8, 48, 107),
];

/// The colour of `t` in `[0, 1]` on the Blues scale.
fn blues(t: f64) -> RGBColor {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let x = t * (BLUES.len() - 1) as f64;
    let i = (x.floor() as usize).min(BLUES.len() - 2);
    let f = x - i as f64;
    let lerp = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (BLUES[i], BLUES[i + 1]);
    RGBColor(lerp(a.0, b.0), lerp(a.1, b.1), lerp(a.2, b.2))
}

struct ConfusionFigure {
    cells: Vec<Vec<f64>>,
    names: Vec<String>,
    labels: Vec<Vec<String>>,
    vmin: f64,
    vmax: f64,
    cell: u32,
}

impl ConfusionFigure {
    fn new(matrix: &[Vec<f64>], names: Vec<String>) -> Self {
        let finite = || matrix.iter().flatten().copied().filter(|v| v.is_finite());
        let integers = finite().all(|v| v.fract() == 0.0 && v.abs() < 1e15);
        let labels = matrix
            .iter()
            .map(|row| {
                row.iter()
                    .map(|&v| match (v.is_finite(), integers) {
                        (false, _) => format!("{v}"),
                        (true, true) => format!("{v:.0}"),
                        (true, false) => format!("{v:.2}"),
                    })
                    .collect()
            })
            .collect();
        let vmin = finite().fold(0.0f64, f64::min);
        let mut vmax = finite().fold(f64::NEG_INFINITY, f64::max);
        if vmax.is_nan() || vmin.is_nan() || vmax <= vmin {
            vmax = vmin + 1.0;
        }
        let n = matrix.len() as u32;
        ConfusionFigure { cells: matrix.to_vec(), names, labels, vmin, vmax, cell: (560 / n).clamp(26, 96) }
    }

    fn n(&self) -> u32 {
        self.cells.len() as u32
    }

    /// The widest class name in pixels at the label size.
    fn name_width(&self) -> u32 {
        self.names.iter().map(|s| text_width(s, 14.0)).max().unwrap_or(0)
    }

    /// Whether the column names must be written vertically to fit their cells.
    fn vertical_names(&self) -> bool {
        self.name_width() + 6 > self.cell
    }

    /// (left, top, bottom, right) margins around the cell grid.
    fn margins(&self) -> (u32, u32, u32, u32) {
        let names = self.name_width();
        let bottom = 12 + if self.vertical_names() { names } else { 20 } + 40;
        (50 + names + 12, 64, bottom, 150)
    }

    fn annotation_size(&self) -> f64 {
        let widest = self.labels.iter().flatten().map(|s| text_width(s, 16.0)).max().unwrap_or(1);
        let fit = f64::from(self.cell) * 0.82 / f64::from(widest.max(1)) * 16.0;
        fit.min(16.0).min(f64::from(self.cell) * 0.42).max(7.0)
    }
}

/// Text width in pixels, measured with the vendored font (fonts registered by `render`).
fn text_width(text: &str, size: f64) -> u32 {
    font(size).font.box_size(text).map(|(w, _)| w).unwrap_or(text.len() as u32 * size as u32)
}

impl Figure for ConfusionFigure {
    fn size(&self) -> (u32, u32) {
        let (l, t, b, r) = self.margins();
        let grid = self.n() * self.cell;
        ((l + grid + r).max(420), t + grid + b)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let (l, t, _, _) = self.margins();
        let (l, t, c) = (l as i32, t as i32, self.cell as i32);
        let n = self.n() as i32;
        let grid = n * c;
        fn center(s: TextStyle<'_>) -> TextStyle<'_> {
            s.pos(Pos::new(HPos::Center, VPos::Center))
        }

        root.draw(&Text::new("Confusion matrix", (l + grid / 2, 30), center(bold(20.0))))?;

        let ann = self.annotation_size();
        for (i, row) in self.cells.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let (x, y) = (l + j as i32 * c, t + i as i32 * c);
                let t01 = (v - self.vmin) / (self.vmax - self.vmin);
                let fill = if v.is_finite() { blues(t01) } else { RGBColor(235, 235, 235) };
                root.draw(&Rectangle::new([(x, y), (x + c, y + c)], fill.filled()))?;
                let ink = if v.is_finite() && t01 > 0.5 { WHITE } else { TEXT };
                root.draw(&Text::new(
                    self.labels[i][j].as_str(),
                    (x + c / 2, y + c / 2),
                    center(font(ann).color(&ink)),
                ))?;
            }
        }
        root.draw(&Rectangle::new([(l, t), (l + grid, t + grid)], AXIS.stroke_width(1)))?;

        // Class names: rows on the left, columns below.
        for (k, name) in self.names.iter().enumerate() {
            let mid = k as i32 * c + c / 2;
            root.draw(&PathElement::new(vec![(l - 5, t + mid), (l, t + mid)], AXIS))?;
            root.draw(&Text::new(
                name.as_str(),
                (l - 9, t + mid),
                font(14.0).pos(Pos::new(HPos::Right, VPos::Center)),
            ))?;
            root.draw(&PathElement::new(vec![(l + mid, t + grid), (l + mid, t + grid + 5)], AXIS))?;
            if self.vertical_names() {
                root.draw(&Text::new(
                    name.as_str(),
                    (l + mid, t + grid + 9),
                    font(14.0).transform(FontTransform::Rotate270).pos(Pos::new(HPos::Right, VPos::Center)),
                ))?;
            } else {
                root.draw(&Text::new(
                    name.as_str(),
                    (l + mid, t + grid + 9),
                    font(14.0).pos(Pos::new(HPos::Center, VPos::Top)),
                ))?;
            }
        }
        let names_h = if self.vertical_names() { self.name_width() } else { 20 } as i32;
        root.draw(&Text::new(
            "Predicted label",
            (l + grid / 2, t + grid + 12 + names_h + 16),
            center(font(15.0)),
        ))?;
        root.draw(&Text::new(
            "True label",
            (l - 12 - self.name_width() as i32 - 22, t + grid / 2),
            center(font(15.0)).transform(FontTransform::Rotate270),
        ))?;

        // The colour scale: a vertical bar, top = vmax.
        let (bx, bw) = (l + grid + 28, 22);
        for py in 0..grid {
            let t01 = 1.0 - (f64::from(py) + 0.5) / f64::from(grid);
            root.draw(&Rectangle::new([(bx, t + py), (bx + bw, t + py + 1)], blues(t01).filled()))?;
        }
        root.draw(&Rectangle::new([(bx, t), (bx + bw, t + grid)], AXIS.stroke_width(1)))?;
        let scale = Axis::linear(self.vmin, self.vmax, 0.0, (grid / 40).clamp(2, 8) as usize, false);
        for (v, label) in &scale.major {
            if *v < self.vmin || *v > self.vmax {
                continue;
            }
            let y = t + grid - ((v - self.vmin) / (self.vmax - self.vmin) * f64::from(grid)).round() as i32;
            root.draw(&PathElement::new(vec![(bx + bw, y), (bx + bw + 5, y)], AXIS))?;
            root.draw(&Text::new(
                label.as_str(),
                (bx + bw + 9, y),
                font(13.0).color(&AXIS).pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// plot_lr_finder.

struct LrFinderFigure {
    points: Vec<(f64, f64)>,
    suggestion: Option<usize>,
}

impl Figure for LrFinderFigure {
    fn size(&self) -> (u32, u32) {
        (800, 520)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        let finite = || self.points.iter().copied().filter(|(_, l)| l.is_finite());
        let Some(((x0, x1), (y0, y1))) = bounds(finite()) else { return Ok(()) };
        let (x0, x1) = if x1 > x0 { (x0, x1) } else { (x0 / 2.0, x1 * 2.0) };
        let x_axis = Axis::log(x0, x1, 0.03, 9);
        let y_axis = Axis::linear(y0, y1, 0.06, 8, false);
        let tick_style = font(14.0).color(&AXIS);
        let y_area = y_label_width(root, &y_axis, &tick_style)? + 26;
        let mut chart = ChartBuilder::on(root)
            .caption("Learning rate finder", bold(20.0))
            .margin(16)
            .margin_right(28)
            .x_label_area_size(56)
            .y_label_area_size(y_area)
            .build_cartesian_2d(x_axis.clone(), y_axis.clone())?;
        let fx = |v: &f64| x_axis.label(*v);
        let fy = |v: &f64| y_axis.label(*v);
        chart
            .configure_mesh()
            .x_labels(x_axis.major.len())
            .y_labels(y_axis.major.len())
            .x_label_formatter(&fx)
            .y_label_formatter(&fy)
            .bold_line_style(GRID)
            .light_line_style(GRID_MINOR)
            .axis_style(AXIS)
            .label_style(tick_style)
            .axis_desc_style(font(15.0))
            .x_desc("Learning rate")
            .y_desc("Loss")
            .draw()?;
        // Lines between consecutive finite losses; a NaN breaks the line.
        let line = TAB10[0].stroke_width(2);
        let mut segment = Vec::new();
        for &(lr, loss) in self.points.iter().chain(std::iter::once(&(f64::NAN, f64::NAN))) {
            if loss.is_finite() {
                segment.push((lr, loss));
            } else if !segment.is_empty() {
                if segment.len() == 1 {
                    chart.draw_series(segment.iter().map(|&p| Circle::new(p, 3, TAB10[0].filled())))?;
                }
                chart.draw_series(LineSeries::new(segment.drain(..), line))?;
            }
        }
        if let Some(i) = self.suggestion {
            let p = self.points[i];
            let red = RGBColor(214, 39, 40);
            chart
                .draw_series(std::iter::once(Circle::new(p, 7, red.filled())))?
                .label(format!("suggested lr = {}", short(p.0)))
                .legend(move |(x, y)| Circle::new((x + 8, y), 6, red.filled()));
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .margin(12)
                .legend_area_size(26)
                .label_font(font(14.0))
                .background_style(WHITE.mix(0.88))
                .border_style(RGBColor(200, 200, 200))
                .draw()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_group_by_base_quantity() {
        assert_eq!(panel_key("train_loss_step"), Some(Some("loss".into())));
        assert_eq!(panel_key("train_loss_epoch"), Some(Some("loss".into())));
        assert_eq!(panel_key("val_loss"), Some(Some("loss".into())));
        assert_eq!(panel_key("test_acc"), Some(Some("acc".into())));
        assert_eq!(panel_key("grad_norm"), Some(Some("grad_norm".into())));
        assert_eq!(panel_key("lr-Adam"), Some(None));
        assert_eq!(panel_key("lr-SGD/pg1"), Some(None));
        assert_eq!(panel_key("epoch"), None);
        assert_eq!(panel_key("train_"), Some(Some("train_".into())));
    }

    #[test]
    fn ticks_are_round_numbers_within_the_range() {
        let (step, ticks) = nice_ticks(0.0, 1000.0, 6, true);
        assert_eq!(step, 200.0);
        assert_eq!(ticks, vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        let (step, ticks) = nice_ticks(0.61, 1.43, 8, false);
        assert_eq!(step, 0.1);
        assert_eq!(ticks.len(), 8);
        assert_eq!(format_tick(ticks[0], step), "0.7");
        assert_eq!(format_tick(2.5e-4, 2.5e-5), "2.5e-4");
        assert_eq!(format_tick(0.25, 0.05), "0.25");
    }

    #[test]
    fn log_axis_ticks_at_decades() {
        let axis = Axis::log(1e-8, 1e-3, 0.0, 8);
        let labels: Vec<&str> = axis.major.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["1e-8", "1e-7", "1e-6", "1e-5", "1e-4", "1e-3"]);
        let axis = Axis::log(0.01, 0.5, 0.0, 8);
        let labels: Vec<&str> = axis.major.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5"]);
    }

    #[test]
    fn short_values() {
        assert_eq!(short(5.495408738576244e-05), "5.5e-5");
        assert_eq!(short(0.0123), "0.0123");
        assert_eq!(short(0.3), "0.3");
    }
}

// ---------------------------------------------------------------------------------------------
// plot_xy: generic x-y panels (the tuner's trial curves, best-so-far and parameter scatters).

/// How a series of an x-y panel is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XyKind {
    /// A line.
    Line,
    /// A line with a marker on its last point (a trial's curve: where it ended shows).
    LineEndMarker,
    /// Markers only (a scatter).
    Markers,
}

/// One series of an x-y panel.
#[derive(Clone, Debug)]
pub struct XySeries {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub kind: XyKind,
}

/// One panel: a title, axis labels and series (colours cycle through matplotlib's `tab10`; the
/// legend shows when there are 2 to 12 series).
#[derive(Clone, Debug, Default)]
pub struct XyPanel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// A log-scale x axis (used when every x is positive).
    pub log_x: bool,
    pub series: Vec<XySeries>,
}

/// Plots panels of x-y series (one column, or two when there are more than two panels) to the
/// PNG and SVG at `path` (given without an extension or with `.png` / `.svg`), and returns their
/// paths. Non-finite points are left out; panels without any finite point, or no panels, are an
/// error.
///
/// ```
/// use pyrite_train::plot::{plot_xy, XyKind, XyPanel, XySeries};
/// let panel = XyPanel {
///     title: "loss by trial".into(),
///     x_label: "training_iteration".into(),
///     y_label: "loss".into(),
///     log_x: false,
///     series: vec![XySeries { name: "trial 0".into(), points: vec![(1.0, 0.9), (2.0, 0.5)], kind: XyKind::LineEndMarker }],
/// };
/// let (png, svg) = plot_xy(&[panel], &std::env::temp_dir().join("pyrite_plot_doc_xy"))?;
/// assert!(std::fs::read_to_string(svg).unwrap().contains("loss by trial"));
/// # Ok::<(), pyrite_core::Error>(())
/// ```
pub fn plot_xy(panels: &[XyPanel], path: &Path) -> Result<(PathBuf, PathBuf)> {
    let panels: Vec<XyPanel> = panels
        .iter()
        .map(|p| XyPanel {
            series: p
                .series
                .iter()
                .map(|s| XySeries {
                    points: s
                        .points
                        .iter()
                        .copied()
                        .filter(|(x, y)| x.is_finite() && y.is_finite() && (!p.log_x || *x > 0.0))
                        .collect(),
                    ..s.clone()
                })
                .filter(|s| !s.points.is_empty())
                .collect(),
            ..p.clone()
        })
        .filter(|p| !p.series.is_empty())
        .collect();
    if panels.is_empty() {
        bail!(Value, "plot_xy: nothing to plot (no panel has a finite point)");
    }
    let (png, svg) = output_paths(path, "plot_xy")?;
    render(&PanelsFigure { panels }, &png, &svg, "plot_xy")?;
    Ok((png, svg))
}

impl DrawPanel for XyPanel {
    fn draw_in<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
        draw_xy_panel(self, area)
    }
}

fn draw_xy_panel<DB: DrawingBackend>(panel: &XyPanel, area: &DrawingArea<DB, Shift>) -> DrawResult<DB> {
    let all = || panel.series.iter().flat_map(|s| s.points.iter().copied());
    let Some(((x0, x1), (y0, y1))) = bounds(all()) else { return Ok(()) };
    let (w, h) = area.dim_in_pixel();
    let max_x_ticks = (w / 110).max(3) as usize;
    let x_axis = if panel.log_x && x0 > 0.0 {
        Axis::log(x0, x1, 0.04, max_x_ticks)
    } else {
        Axis::linear(x0, x1, 0.03, max_x_ticks, false)
    };
    let y_axis = Axis::linear(y0, y1, 0.06, (h / 55).max(3) as usize, false);
    let mut chart =
        axes_chart(area, &panel.title, &x_axis, &y_axis, &panel.x_label, Some(panel.y_label.as_str()))?;
    let legend = (2..=12).contains(&panel.series.len());
    for (i, s) in panel.series.iter().enumerate() {
        let color = TAB10[i % TAB10.len()];
        let line = color.stroke_width(2);
        let fill = color.filled();
        if s.kind != XyKind::Markers && s.points.len() > 1 {
            chart.draw_series(LineSeries::new(s.points.iter().copied(), line))?;
        }
        match s.kind {
            XyKind::Markers => {
                chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, fill)))?;
            }
            _ => {
                if let Some(&p) = s.points.last() {
                    chart.draw_series(std::iter::once(Circle::new(p, 4, fill)))?;
                }
            }
        }
        if legend {
            let entry = chart.draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?;
            entry.label(s.name.as_str());
            if s.kind == XyKind::Markers {
                entry.legend(move |(x, y)| Circle::new((x + 10, y), 4, fill));
            } else {
                entry.legend(move |(x, y)| PathElement::new(vec![(x - 2, y), (x + 22, y)], line));
            }
        }
    }
    if legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .margin(12)
            .legend_area_size(30)
            .label_font(font(14.0))
            .background_style(WHITE.mix(0.88))
            .border_style(RGBColor(200, 200, 200))
            .draw()?;
    }
    Ok(())
}
