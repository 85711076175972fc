//! A flame summary of a trace as SVG: an icicle chart per thread (time left to right, the
//! ranges a range contains below it), one rectangle per event.

use crate::events::thread_label;
use crate::{FunctionEvent, Profile};
use std::fmt::Write;

const WIDTH: f64 = 1600.0;
const ROW: f64 = 18.0;
const MARGIN: f64 = 10.0;
const CHAR_W: f64 = 6.6;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A warm colour picked from the name, so that an op has the same colour everywhere; user
/// ranges are blue, autograd's are green.
fn colour(e: &FunctionEvent) -> String {
    let h = e.name.bytes().fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    let v = (h % 1000) as f64 / 1000.0;
    if e.kind == pyrite_core::profiler_record::EventKind::UserAnnotation {
        format!("rgb({},{},{})", 90 + (v * 40.0) as u8, 140 + (v * 40.0) as u8, 220)
    } else if e.name.starts_with("autograd::")
        || e.name.ends_with("Backward0")
        || e.name.contains("AccumulateGrad")
    {
        format!("rgb({},{},{})", 110 + (v * 50.0) as u8, 190 + (v * 40.0) as u8, 110)
    } else {
        format!("rgb({},{},{})", 230, 110 + (v * 110.0) as u8, 40 + (v * 40.0) as u8)
    }
}

pub(crate) fn flame_svg(p: &Profile) -> String {
    // The threads' ranges (GPU work has no thread).
    let events: Vec<&FunctionEvent> = p.events.iter().filter(|e| !e.kind.on_device()).collect();
    let events = &events;
    let t0 = events.iter().map(|e| e.start_ns).min().unwrap_or(0);
    let t1 = events.iter().map(|e| e.end_ns()).max().unwrap_or(0);
    let span = (t1.saturating_sub(t0)).max(1) as f64;
    let scale = (WIDTH - 2.0 * MARGIN) / span;
    let mut tids: Vec<u64> = events.iter().map(|e| e.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    let mut body = String::new();
    let mut y = 30.0;
    for tid in tids {
        let label = p
            .threads
            .iter()
            .find(|t| t.tid == tid)
            .map(thread_label)
            .unwrap_or_else(|| format!("thread {tid}"));
        let depth = events.iter().filter(|e| e.tid == tid).map(|e| e.depth).max().unwrap_or(0) + 1;
        let _ = writeln!(
            body,
            r#"<text x="{MARGIN}" y="{:.1}" class="thread">{}</text>"#,
            y + 12.0,
            escape(&label)
        );
        y += 18.0;
        for e in events.iter().filter(|e| e.tid == tid) {
            let x = MARGIN + (e.start_ns - t0) as f64 * scale;
            let w = e.cpu_time_total_ns as f64 * scale;
            if w < 0.2 {
                continue; // too narrow to see
            }
            let ry = y + e.depth as f64 * ROW;
            let title = format!(
                "{} ({}, self {})",
                e.name,
                crate::format_time(e.cpu_time_total_ns as f64 / 1e3),
                crate::format_time(e.self_cpu_time_total_ns as f64 / 1e3)
            );
            let _ = write!(
                body,
                r#"<g><title>{}</title><rect x="{x:.2}" y="{ry:.1}" width="{w:.2}" height="{:.1}" fill="{}"/>"#,
                escape(&title),
                ROW - 1.0,
                colour(e)
            );
            let fits = ((w - 6.0) / CHAR_W).floor().max(0.0) as usize;
            if fits >= 3 {
                let name: String = if e.name.chars().count() > fits {
                    e.name.chars().take(fits.saturating_sub(2)).collect::<String>() + ".."
                } else {
                    e.name.clone()
                };
                let _ =
                    write!(body, r#"<text x="{:.2}" y="{:.1}">{}</text>"#, x + 3.0, ry + 12.5, escape(&name));
            }
            body.push_str("</g>\n");
        }
        y += depth as f64 * ROW + 14.0;
    }
    let height = y + MARGIN;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="monospace" font-size="11">"#
    );
    s.push_str("<style>.thread { font-weight: bold; font-size: 12px; } rect { stroke: white; stroke-width: 0.5; }</style>\n");
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{height:.0}" fill="white" style="stroke:none"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{MARGIN}" y="18" class="thread">pyrite profiler: {} events, {} (width = time, depth = nesting)</text>"#,
        events.len(),
        crate::format_time(span / 1e3)
    );
    s.push_str(&body);
    s.push_str("</svg>\n");
    s
}
