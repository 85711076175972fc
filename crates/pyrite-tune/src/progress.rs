//! The live status table, like Ray's: trial, status, config, iterations, last metric.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::config::{short_float, short_value, Config};
use crate::trial::{Metrics, TrialStatus};

/// What the table shows.
pub struct View<'a> {
    pub metric: Option<&'a str>,
    pub trials: Vec<(&'a str, TrialStatus, &'a Config, Option<&'a Metrics>)>,
}

/// Prints the table every few seconds (verbose 1) and once at the end.
pub struct ProgressTable {
    verbose: u8,
    last: Option<Instant>,
    every: Duration,
}

impl ProgressTable {
    pub fn new(verbose: u8) -> ProgressTable {
        ProgressTable { verbose, last: None, every: Duration::from_secs(5) }
    }

    pub fn maybe_print(&mut self, view: &View<'_>, elapsed: Duration, last: bool) {
        if self.verbose == 0 {
            return;
        }
        if !last && self.last.is_some_and(|t| t.elapsed() < self.every) {
            return;
        }
        self.last = Some(Instant::now());
        println!("{}", render(view, elapsed));
    }
}

/// The table as text.
pub fn render(view: &View<'_>, elapsed: Duration) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &view.trials {
        *counts.entry(t.1.as_str()).or_default() += 1;
    }
    let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let mut out = format!(
        "Trial status: {}\nCurrent time: {:.0} s. Total running time: {}\n",
        summary.join(" | "),
        elapsed.as_secs_f64(),
        format_duration(elapsed)
    );
    let keys: Vec<String> =
        view.trials.first().map(|t| t.2.flat().into_iter().map(|(k, _)| k).collect()).unwrap_or_default();
    let mut header = vec!["Trial name".to_string(), "status".into()];
    header.extend(keys.iter().cloned());
    header.push("iter".into());
    header.push("total time (s)".into());
    if let Some(m) = view.metric {
        header.push(m.to_string());
    }
    let mut rows = vec![header];
    for (id, status, config, last) in &view.trials {
        let mut row = vec![format!("trial_{id}"), status.as_str().to_string()];
        for k in &keys {
            row.push(config.value(k).map(short_value).unwrap_or_default());
        }
        row.push(last.map(|m| m.iteration().to_string()).unwrap_or_default());
        row.push(
            last.and_then(|m| m.get(crate::trial::TIME_TOTAL_S))
                .map(|t| format!("{t:.2}"))
                .unwrap_or_default(),
        );
        if let Some(m) = view.metric {
            row.push(last.and_then(|r| r.get(m)).map(short_float).unwrap_or_default());
        }
        rows.push(row);
    }
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let line = |r: &Vec<String>| -> String {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(s, w)| format!("{s:<w$}")).collect();
        format!("| {} |", cells.join("  "))
    };
    let rule = format!("+{}+", "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1) + 2));
    out.push_str(&rule);
    out.push('\n');
    out.push_str(&line(&rows[0]));
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
    for r in &rows[1..] {
        out.push_str(&line(r));
        out.push('\n');
    }
    out.push_str(&rule);
    out
}

fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
