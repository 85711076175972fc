//! The experiment's figures, PNG and SVG in its folder: each trial's metric curve (early-stopped
//! trials end early, with a marker where they stopped), the best value so far over time, and
//! each numeric hyperparameter against the final metric.

use std::path::PathBuf;

use pyrite_core::Result;
use pyrite_train::plot::{plot_xy, XyKind, XyPanel, XySeries};

use crate::result_grid::ResultGrid;
use crate::trial::{Mode, TIMESTAMP, TIME_THIS_ITER_S, TRAINING_ITERATION};

/// Writes `trial_curves`, `best_over_time` and `param_vs_metric` (`.png` and `.svg`) into
/// the experiment's folder and returns the PNG paths.
pub fn plot_results(grid: &ResultGrid, metric: &str, mode: Mode) -> Result<Vec<PathBuf>> {
    let dir = grid.experiment_path();
    let mut written = vec![];
    let curves: Vec<XySeries> = grid
        .results()
        .iter()
        .map(|r| XySeries {
            name: format!("trial {}", r.trial_id),
            points: r
                .metrics_history
                .iter()
                .filter_map(|m| Some((m.get(TRAINING_ITERATION)?, m.get(metric)?)))
                .collect(),
            kind: XyKind::LineEndMarker,
        })
        .collect();
    written.push(
        plot_xy(
            &[XyPanel {
                title: format!("{metric} of each trial"),
                x_label: TRAINING_ITERATION.into(),
                y_label: metric.into(),
                log_x: false,
                series: curves,
            }],
            &dir.join("trial_curves"),
        )?
        .0,
    );
    // Every report in time order; the best so far after each.
    let mut reports: Vec<(f64, f64)> = grid
        .results()
        .iter()
        .flat_map(|r| r.metrics_history.iter())
        .filter_map(|m| Some((m.get(TIMESTAMP)?, m.get(metric)?)))
        .collect();
    reports.sort_by(|a, b| a.0.total_cmp(&b.0));
    let start = grid
        .results()
        .iter()
        .filter_map(|r| r.metrics_history.first())
        .filter_map(|m| Some(m.get(TIMESTAMP)? - m.get(TIME_THIS_ITER_S).unwrap_or(0.0)))
        .fold(f64::INFINITY, f64::min);
    let mut best: Option<f64> = None;
    let best_points: Vec<(f64, f64)> = reports
        .iter()
        .filter(|(_, v)| v.is_finite())
        .map(|&(t, v)| {
            let b = match best {
                Some(b) if !mode.better(v, b) => b,
                _ => v,
            };
            best = Some(b);
            (t - start, b)
        })
        .collect();
    written.push(
        plot_xy(
            &[XyPanel {
                title: format!("best {metric} so far"),
                x_label: "seconds since the experiment started".into(),
                y_label: metric.into(),
                log_x: false,
                series: vec![XySeries {
                    name: format!("best {metric}"),
                    points: best_points,
                    kind: XyKind::Line,
                }],
            }],
            &dir.join("best_over_time"),
        )?
        .0,
    );
    // One scatter per numeric hyperparameter.
    let mut keys: Vec<String> = vec![];
    for r in grid.results() {
        for (k, v) in r.config.flat() {
            if v.is_number() && !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let panels: Vec<XyPanel> = keys
        .iter()
        .map(|k| {
            let points: Vec<(f64, f64)> = grid
                .results()
                .iter()
                .filter_map(|r| Some((r.config.value(k)?.as_f64()?, r.metrics.get(metric)?)))
                .collect();
            let (lo, hi) =
                points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
            XyPanel {
                title: format!("{metric} by {k}"),
                x_label: k.clone(),
                y_label: format!("last {metric}"),
                log_x: lo > 0.0 && hi / lo >= 100.0,
                series: vec![XySeries { name: "trials".into(), points, kind: XyKind::Markers }],
            }
        })
        .collect();
    if !panels.is_empty()
        && let Ok((png, _)) = plot_xy(&panels, &dir.join("param_vs_metric"))
    {
        written.push(png);
    }
    Ok(written)
}
