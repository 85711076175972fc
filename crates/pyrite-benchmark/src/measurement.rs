//! `Measurement` and `TaskSpec` (`torch.utils.benchmark.utils.common`): the times of a timed
//! statement, their statistics and their rendering, as PyTorch computes and prints them.

use std::fmt;

/// The most significant figures [`Measurement::significant_figures`] gives.
const MAX_SIGNIFICANT_FIGURES: i64 = 4;
/// The narrowest confidence interval assumed (25 ns).
const MIN_CONFIDENCE_INTERVAL: f64 = 25e-9;
/// An IQR above this fraction of the median is worth a warning...
const IQR_WARN_THRESHOLD: f64 = 0.1;
/// ...and above this one, a stronger one.
const IQR_GROSS_WARN_THRESHOLD: f64 = 0.25;

/// What was timed, for titles and tables (PyTorch's `TaskSpec`): `stmt` and `setup` name the
/// timed closure and its setup (PyTorch's code strings).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TaskSpec {
    pub stmt: String,
    pub setup: String,
    pub label: Option<String>,
    pub sub_label: Option<String>,
    pub description: Option<String>,
    pub env: Option<String>,
    pub num_threads: usize,
}

impl TaskSpec {
    /// The best label for the measurement: `label: sub_label`, else the statement.
    pub fn title(&self) -> String {
        let sub = |s: &str| match &self.sub_label {
            Some(sl) if !sl.is_empty() => format!("{s}: {sl}"),
            _ => s.to_string(),
        };
        if let Some(l) = &self.label {
            return sub(l);
        }
        if !self.stmt.contains('\n') {
            return sub(&self.stmt);
        }
        let sl = match &self.sub_label {
            Some(s) if !s.is_empty() => format!(" ({s})"),
            _ => String::new(),
        };
        format!("stmt:{sl}\n{}", indent(&self.stmt))
    }

    fn setup_str(&self) -> String {
        if self.setup.is_empty() || self.setup == "pass" {
            String::new()
        } else if self.setup.contains('\n') {
            format!("setup:\n{}", indent(&self.setup))
        } else {
            format!("setup: {}", self.setup)
        }
    }

    /// The task's part of the rendering: title, description, setup.
    pub fn summarize(&self) -> String {
        let sections = [self.title(), self.description.clone().unwrap_or_default(), self.setup_str()];
        sections
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| if s.contains('\n') { format!("{s}\n") } else { s.clone() })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Python's `textwrap.indent(text, '  ')`: two spaces before every line that is not blank.
fn indent(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|l| if l.trim().is_empty() { l.to_string() } else { format!("  {l}") })
        .collect()
}

/// The result of a [`Timer`](crate::Timer) (PyTorch's `Measurement`): `raw_times` are the
/// seconds of each block of `number_per_run` runs.
#[derive(Clone, Debug)]
pub struct Measurement {
    pub number_per_run: usize,
    pub raw_times: Vec<f64>,
    pub task_spec: TaskSpec,
    sorted: Vec<f64>,
    median: f64,
    mean: f64,
    p25: f64,
    p75: f64,
}

/// `torch.quantile(x, q)` of sorted `x` (linear interpolation).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

impl Measurement {
    /// A measurement of blocks of `number_per_run` runs that took `raw_times` seconds each.
    /// `raw_times` must not be empty.
    pub fn new(number_per_run: usize, raw_times: Vec<f64>, task_spec: TaskSpec) -> Measurement {
        let mut sorted: Vec<f64> = raw_times.iter().map(|t| t / number_per_run as f64).collect();
        sorted.sort_by(f64::total_cmp);
        let (median, mean, p25, p75) = if sorted.is_empty() {
            (-1.0, -1.0, -1.0, -1.0)
        } else {
            (
                quantile(&sorted, 0.5),
                sorted.iter().sum::<f64>() / sorted.len() as f64,
                quantile(&sorted, 0.25),
                quantile(&sorted, 0.75),
            )
        };
        Measurement { number_per_run, raw_times, task_spec, sorted, median, mean, p25, p75 }
    }

    /// Seconds per run of each block.
    pub fn times(&self) -> Vec<f64> {
        self.raw_times.iter().map(|t| t / self.number_per_run as f64).collect()
    }
    /// The median time per run.
    pub fn median(&self) -> f64 {
        self.median
    }
    /// The mean time per run.
    pub fn mean(&self) -> f64 {
        self.mean
    }
    /// The interquartile range of the times per run.
    pub fn iqr(&self) -> f64 {
        self.p75 - self.p25
    }
    pub fn title(&self) -> String {
        self.task_spec.title()
    }

    /// PyTorch's rough estimate of the significant figures of the median, from the spread of
    /// the interquartile times (1 to 4).
    pub fn significant_figures(&self) -> usize {
        let n = self.sorted.len();
        let lower = n / 4;
        let upper = (3.0 * n as f64 / 4.0).ceil() as usize;
        // PyTorch puts them in a float32 tensor.
        let pts: Vec<f64> = self.sorted[lower..upper].iter().map(|&t| t as f32 as f64).collect();
        let m = pts.iter().sum::<f64>() / pts.len() as f64;
        let std =
            (pts.iter().map(|t| (t - m) * (t - m)).sum::<f64>() / pts.len() as f64).sqrt() as f32 as f64;
        let sqrt_n = (pts.len() as f32).sqrt() as f64;
        let ci = (1.645 * std / sqrt_n).max(MIN_CONFIDENCE_INTERVAL);
        let relative = ((self.median / ci) as f32).log10();
        (relative.floor() as i64).clamp(1, MAX_SIGNIFICANT_FIGURES) as usize
    }

    /// Whether the IQR is below `threshold` of the median (PyTorch's default 0.1).
    pub fn meets_confidence(&self, threshold: f64) -> bool {
        self.iqr() / self.median < threshold
    }

    /// PyTorch's warnings about the spread, as its rendering shows them.
    pub fn warnings(&self) -> Vec<String> {
        if self.sorted.is_empty() {
            return vec![];
        }
        let rel = self.iqr() / self.median * 100.0;
        let msg = if !self.meets_confidence(IQR_GROSS_WARN_THRESHOLD) {
            "This suggests significant environmental influence."
        } else if !self.meets_confidence(IQR_WARN_THRESHOLD) {
            "This could indicate system fluctuation."
        } else {
            return vec![];
        };
        vec![format!(
            "  WARNING: Interquartile range is {rel:.1}% of the median measurement.\n           {msg}"
        )]
    }

    pub fn has_warnings(&self) -> bool {
        !self.warnings().is_empty()
    }

    /// `Measurement.merge`: replicates of the same task pooled into one measurement of
    /// `number_per_run` 1, per task, in first-seen order.
    pub fn merge(measurements: &[Measurement]) -> Vec<Measurement> {
        let mut groups: Vec<(TaskSpec, Vec<f64>)> = Vec::new();
        for m in measurements {
            match groups.iter_mut().find(|(t, _)| *t == m.task_spec) {
                Some((_, times)) => times.extend(m.times()),
                None => groups.push((m.task_spec.clone(), m.times())),
            }
        }
        groups.into_iter().map(|(t, times)| Measurement::new(1, times, t)).collect()
    }
}

/// PyTorch's `select_unit`: the unit that makes `t` seconds a number of order 1.
pub fn select_unit(t: f64) -> (&'static str, f64) {
    let k = ((t as f32).log10() as f64 / 3.0).floor() as i64;
    match k {
        -3 => ("ns", 1e-9),
        -2 => ("us", 1e-6),
        -1 => ("ms", 1e-3),
        _ => ("s", 1.0),
    }
}

/// PyTorch's `trim_sigfig`: `x` rounded to `n` significant figures.
pub fn trim_sigfig(x: f64, n: i32) -> f64 {
    let magnitude = (x.abs() as f32).log10().ceil() as i32;
    let scale = 10f64.powi(magnitude - n);
    // PyTorch rounds and scales back in float32 (a float32 tensor), rounding half to even.
    (((x / scale) as f32).round_ties_even() * scale as f32) as f64
}

impl fmt::Display for Measurement {
    /// PyTorch's `repr(measurement)` without its first line (the object's address):
    ///
    /// ```text
    /// Broadcasting add: 4x8
    ///   Median: 5.73 us
    ///   IQR:    2.25 us (4.01 to 6.26)
    ///   372 measurements, 100 runs per measurement, 1 thread
    ///   WARNING: Interquartile range is 39.4% of the median measurement.
    ///            This suggests significant environmental influence.
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.sorted.len();
        let (unit, scale) = select_unit(self.median);
        let mut lines = vec![self.task_spec.summarize()];
        lines.push(format!("  {}{:.2} {unit}", if n > 1 { "Median: " } else { "" }, self.median / scale));
        if n >= 4 {
            lines.push(format!(
                "  IQR:    {:.2} {unit} ({:.2} to {:.2})",
                self.iqr() / scale,
                self.p25 / scale,
                self.p75 / scale
            ));
        }
        let threads = self.task_spec.num_threads;
        lines.push(format!(
            "  {n} measurement{}, {} runs {} {threads} thread{}",
            if n > 1 { "s" } else { "" },
            self.number_per_run,
            if n > 1 { "per measurement," } else { "," },
            if threads > 1 { "s" } else { "" }
        ));
        lines.push(self.warnings().join("\n"));
        f.write_str(lines.join("\n").trim())
    }
}
