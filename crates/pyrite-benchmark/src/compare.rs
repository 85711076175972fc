//! `Compare` (`torch.utils.benchmark.Compare`): many measurements as tables, one per label,
//! a row per `sub_label` (grouped by thread count), a column per `description`, rendered
//! as PyTorch renders them.

use crate::measurement::{select_unit, trim_sigfig, Measurement};
use std::fmt;

const BEST: &str = "\x1b[92m";
const GOOD: &str = "\x1b[34m";
const BAD: &str = "\x1b[2m\x1b[91m";
const VERY_BAD: &str = "\x1b[31m";
const BOLD: &str = "\x1b[1m";
const TERMINATE: &str = "\x1b[0m";

/// How `Compare` colours its cells (PyTorch's `Colorize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Colorize {
    None,
    Columnwise,
    Rowwise,
}

/// Tables of measurements (PyTorch's `Compare`); `to_string()` / `print()` render them.
///
/// ```
/// use pyrite_benchmark::{Compare, Measurement, TaskSpec};
/// let spec = |sub: &str, desc: &str| TaskSpec {
///     stmt: "op(x)".into(), label: Some("add".into()), sub_label: Some(sub.into()),
///     description: Some(desc.into()), num_threads: 1, ..Default::default()
/// };
/// let mut c = Compare::new(vec![
///     Measurement::new(1, vec![2e-6, 2.1e-6], spec("f32", "[64]")),
///     Measurement::new(1, vec![3e-6, 3.1e-6], spec("f64", "[64]")),
/// ]);
/// c.trim_significant_figures();
/// assert!(c.to_string().contains("Times are in microseconds (us)."));
/// ```
#[derive(Clone, Debug)]
pub struct Compare {
    results: Vec<Measurement>,
    trim: bool,
    colorize: Colorize,
    highlight: bool,
}

impl Compare {
    pub fn new(results: Vec<Measurement>) -> Compare {
        Compare { results, trim: false, colorize: Colorize::None, highlight: false }
    }
    /// Adds measurements to the tables.
    pub fn extend_results(&mut self, results: impl IntoIterator<Item = Measurement>) {
        self.results.extend(results);
    }
    /// Shows each time with the significant figures its spread supports.
    pub fn trim_significant_figures(&mut self) {
        self.trim = true;
    }
    /// Colours each time against the best of its column (or of its row, with `rowwise`).
    pub fn colorize(&mut self, rowwise: bool) {
        self.colorize = if rowwise { Colorize::Rowwise } else { Colorize::Columnwise };
    }
    /// Marks the times whose IQR is large with `(! XX%)`.
    pub fn highlight_warnings(&mut self) {
        self.highlight = true;
    }
    /// Prints the tables.
    pub fn print(&self) {
        println!("{self}");
    }
}

impl fmt::Display for Compare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let merged = Measurement::merge(&self.results);
        let mut groups: Vec<(Option<String>, Vec<Measurement>)> = Vec::new();
        for m in merged {
            match groups.iter_mut().find(|(l, _)| *l == m.task_spec.label) {
                Some((_, v)) => v.push(m),
                None => groups.push((m.task_spec.label.clone(), vec![m])),
            }
        }
        let tables: Vec<String> = groups.iter().map(|(_, g)| self.table(g)).collect();
        f.write_str(&tables.join("\n"))
    }
}

/// Python's `str.center(width, fill)`.
fn center(s: &str, width: usize, fill: char) -> String {
    let len = s.chars().count();
    if width <= len {
        return s.to_string();
    }
    let marg = width - len;
    let left = marg / 2 + (marg & width & 1);
    format!("{}{s}{}", fill.to_string().repeat(left), fill.to_string().repeat(marg - left))
}

fn ljust(s: &str, width: usize) -> String {
    format!("{s:<width$}")
}

fn row_name(m: &Measurement) -> String {
    let t = &m.task_spec;
    match &t.sub_label {
        Some(s) if !s.is_empty() => s.clone(),
        _ if !t.stmt.is_empty() => t.stmt.clone(),
        _ => "[Unknown]".into(),
    }
}

fn english(unit: &str) -> &'static str {
    match unit {
        "ns" => "nanosecond",
        "us" => "microsecond",
        "ms" => "millisecond",
        _ => "second",
    }
}

/// A column's number format (PyTorch's `_Column`).
struct Column {
    length: usize,
    decimals: usize,
    highlight: bool,
    trim: bool,
}

impl Column {
    fn new(cells: &[Option<&Measurement>], scale: f64, trim: bool, highlight: bool) -> Column {
        let present: Vec<&Measurement> = cells.iter().flatten().copied().collect();
        let highlight = highlight && present.iter().any(|m| m.has_warnings());
        let leading = |m: &Measurement| ((m.median() / scale) as f32).log10().ceil() as i64;
        let unit_digits = present.iter().map(|m| leading(m)).max().unwrap_or(0);
        let decimals = if trim {
            present.iter().map(|m| (m.significant_figures() as i64 - leading(m)).max(0)).min().unwrap_or(0)
        } else {
            1
        };
        let length = (unit_digits + decimals + i64::from(decimals > 0)).max(0) as usize;
        Column { length, decimals: decimals as usize, highlight, trim }
    }

    fn num_to_str(&self, value: Option<f64>, sigfigs: usize, spread: Option<f64>) -> String {
        let Some(mut v) = value else {
            return " ".repeat(self.num_to_str(Some(1.0), sigfigs, None).chars().count());
        };
        if self.trim {
            v = trim_sigfig(v, sigfigs as i32);
        }
        let (len, dec) = (self.length, self.decimals);
        let warn = match spread {
            Some(s) if self.highlight => format!(" (! {:.0}%)", s * 100.0),
            _ => String::new(),
        };
        let w = if self.highlight { 7 } else { 0 };
        format!("{v:>len$.dec$}{warn:>w$}")
    }
}

/// PyTorch's `color_segment`: green within 1% (or 100 ns) of the best, blue within 10%, dim
/// red from 2x, red from 5x.
fn color(segment: &str, value: f64, best: f64) -> String {
    let code = if value <= best * 1.01 || value <= best + 100e-9 {
        format!("{BEST}{BOLD}")
    } else if value <= best * 1.1 {
        format!("{GOOD}{BOLD}")
    } else if value >= best * 5.0 {
        format!("{VERY_BAD}{BOLD}")
    } else if value >= best * 2.0 {
        BAD.to_string()
    } else {
        return segment.to_string();
    };
    format!("{code}{segment}{TERMINATE}{TERMINATE}")
}

impl Compare {
    /// One label's table (PyTorch's `Table.render`).
    fn table(&self, results: &[Measurement]) -> String {
        let min_median = results.iter().map(|m| m.median()).fold(f64::INFINITY, f64::min);
        let (unit, scale) = select_unit(min_median);
        type RowKey = (usize, Option<String>, String);
        let row_key =
            |m: &Measurement| -> RowKey { (m.task_spec.num_threads, m.task_spec.env.clone(), row_name(m)) };
        let mut rows: Vec<RowKey> = Vec::new();
        for m in results {
            let k = row_key(m);
            if !rows.contains(&k) {
                rows.push(k);
            }
        }
        rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1))); // stable: keeps the statement order
        let mut cols: Vec<Option<String>> = Vec::new();
        for m in results {
            if !cols.contains(&m.task_spec.description) {
                cols.push(m.task_spec.description.clone());
            }
        }
        let mut grid: Vec<Vec<Option<&Measurement>>> = vec![vec![None; cols.len()]; rows.len()];
        for m in results {
            let i = rows.iter().position(|k| *k == row_key(m)).unwrap();
            let j = cols.iter().position(|d| *d == m.task_spec.description).unwrap();
            grid[i][j] = Some(m);
        }
        let envs: Vec<Option<String>> = {
            let mut e: Vec<Option<String>> = results.iter().map(|m| m.task_spec.env.clone()).collect();
            e.sort();
            e.dedup();
            e
        };
        let render_env = envs.len() > 1;
        let env_len = if render_env {
            envs.iter().map(|e| e.as_deref().unwrap_or("None").len()).max().unwrap()
        } else {
            0
        };
        // Rows grouped by thread count; each column's format is set over all its cells.
        let mut group_of = Vec::with_capacity(rows.len());
        let mut prior_threads = usize::MAX;
        let mut group = 0usize;
        for (i, r) in rows.iter().enumerate() {
            if r.0 != prior_threads {
                if i > 0 {
                    group += 1;
                }
                prior_threads = r.0;
            }
            group_of.push(group);
        }
        let columns: Vec<Column> = (0..cols.len())
            .map(|j| {
                let cells: Vec<Option<&Measurement>> = grid.iter().map(|r| r[j]).collect();
                Column::new(&cells, scale, self.trim, self.highlight)
            })
            .collect();
        // The cells as strings.
        let mut string_rows: Vec<Vec<String>> = vec![std::iter::once(String::new())
            .chain(cols.iter().map(|c| c.clone().unwrap_or_default()))
            .collect()];
        let mut prior_env: Option<Option<String>> = None;
        let mut prior_t = usize::MAX;
        for (i, r) in rows.iter().enumerate() {
            if r.0 != prior_t {
                prior_t = r.0;
                prior_env = None;
            }
            let env = if render_env && prior_env.as_ref() != Some(&r.1) {
                format!("({})", r.1.as_deref().unwrap_or("None"))
            } else {
                String::new()
            };
            prior_env = Some(r.1.clone());
            let mut out = vec![format!("  {}{}", ljust(&env, env_len + 4), r.2)];
            for (m, col) in grid[i].iter().zip(&columns) {
                out.push(match m {
                    None => col.num_to_str(None, 1, None),
                    Some(m) => col.num_to_str(
                        Some(m.median() / scale),
                        m.significant_figures(),
                        m.has_warnings().then(|| m.iqr() / m.median()),
                    ),
                });
            }
            string_rows.push(out);
        }
        let ncols = string_rows.iter().map(|r| r.len()).max().unwrap();
        for r in &mut string_rows {
            r.resize(ncols, String::new());
        }
        let widths: Vec<usize> =
            (0..ncols).map(|j| string_rows.iter().map(|r| r[j].chars().count()).max().unwrap()).collect();
        let header: Vec<String> =
            string_rows[0].iter().zip(&widths).map(|(s, &w)| center(s, w, ' ')).collect();
        let header = header.join("  |  ");
        let overall = header.chars().count();
        let mut lines = vec![header];
        let mut prior_t = usize::MAX;
        for (i, r) in rows.iter().enumerate() {
            if r.0 != prior_t {
                prior_t = r.0;
                lines.push(format!("{:-<overall$}", format!("{} threads: ", r.0)));
            }
            let s = &string_rows[i + 1];
            let best: Vec<Option<f64>> = match self.colorize {
                Colorize::None => vec![None; cols.len()],
                Colorize::Rowwise => {
                    let m = grid[i].iter().flatten().map(|m| m.median()).fold(f64::INFINITY, f64::min);
                    vec![Some(m); cols.len()]
                }
                Colorize::Columnwise => (0..cols.len())
                    .map(|j| {
                        grid.iter()
                            .zip(&group_of)
                            .filter(|&(_, &g)| g == group_of[i])
                            .filter_map(|(row, _)| row[j].map(|m| m.median()))
                            .reduce(f64::min)
                    })
                    .collect(),
            };
            let mut cells = vec![ljust(&s[0], widths[0])];
            for (j, width) in widths.iter().enumerate().skip(1) {
                let mut c = center(&s[j], *width, ' ');
                if let (Some(Some(m)), Some(Some(b))) = (grid[i].get(j - 1), best.get(j - 1))
                    && self.colorize != Colorize::None
                {
                    c = color(&c, m.median(), *b);
                }
                cells.push(c);
            }
            lines.push(cells.join("  |  "));
        }
        let label = results[0].task_spec.label.clone().unwrap_or_default();
        let warn = self.highlight && results.iter().any(|m| m.has_warnings());
        format!(
            "[{}]\n{}\n\nTimes are in {}s ({unit}).\n{}",
            center(&format!(" {label} "), overall.saturating_sub(2), '-'),
            lines.join("\n"),
            english(unit),
            if warn {
                "(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n"
            } else {
                ""
            }
        )
    }
}
