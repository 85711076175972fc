//! A [`MemorySnapshot`] as JSON and as a self-contained HTML page: memory over the trace
//! stacked by category, and the largest live tensors at the peak.

use crate::memory_history::{Action, Block, Category, MemorySnapshot, TraceEntry};
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

/// The most points the page's timeline draws; a longer trace is cut into this many runs of
/// entries and each run is drawn by its highest point, so no peak is lost.
const MAX_POINTS: usize = 2000;
/// How many of the largest live tensors at the peak the page lists.
const TOP_BLOCKS: usize = 25;

/// Bytes per category after each entry.
pub(crate) struct Timeline {
    /// One row per entry of the trace: the bytes of each category (in [`Category::ALL`]'s
    /// order) once the entry is applied.
    pub rows: Vec<[u64; 6]>,
}

impl MemorySnapshot {
    /// Bytes per category (in [`Category::ALL`]'s order) after each trace entry.
    pub fn timeline(&self) -> Vec<[u64; 6]> {
        self.replay().rows
    }

    fn replay(&self) -> Timeline {
        let mut totals = self.baseline.map(|b| b as i64);
        let mut rows = Vec::with_capacity(self.trace.len());
        for e in &self.trace {
            crate::memory_history::apply(&mut totals, e);
            rows.push(totals.map(|t| t.max(0) as u64));
        }
        Timeline { rows }
    }

    /// The peak of the trace: the index of the entry after which the most bytes were
    /// allocated, and those bytes (`None` for an empty trace).
    pub fn peak(&self) -> Option<(usize, u64)> {
        let rows = self.timeline();
        let mut best: Option<(usize, u64)> = None;
        for (i, r) in rows.iter().enumerate() {
            let t: u64 = r.iter().sum();
            if best.is_none_or(|(_, b)| t > b) {
                best = Some((i, t));
            }
        }
        best
    }

    /// The allocations live just after trace entry `at` that the trace saw being made or
    /// tagged, largest first.
    pub fn live_at(&self, at: usize) -> Vec<Block> {
        let mut live: HashMap<usize, Block> = HashMap::new();
        for e in self.trace.iter().take(at + 1) {
            match e.action {
                Action::Alloc => {
                    live.insert(e.addr, block(e));
                }
                Action::Free => {
                    live.remove(&e.addr);
                }
                Action::Tag => {
                    let b = live.entry(e.addr).or_insert_with(|| block(e));
                    b.category = e.category;
                    b.name = e.name.clone();
                }
                Action::Oom => {}
            }
        }
        let mut v: Vec<Block> = live.into_values().collect();
        v.sort_by(|a, b| b.size.cmp(&a.size).then(a.time_us.cmp(&b.time_us)));
        v
    }

    /// The snapshot as JSON, in the spirit of PyTorch's snapshot: `device_traces` (one trace,
    /// the CPU's, with PyTorch's action names plus `tag`), `blocks` (the live allocations),
    /// and Pyrite's `baseline` bytes per category and allocator figures.
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(256 + self.trace.len() * 160);
        let _ = write!(s, "{{\"device\": \"{}\", \"allocated_bytes\": ", self.device);
        let _ = write!(s, "{}, \"reserved_bytes\": {}, ", self.allocated_bytes, self.reserved_bytes);
        let _ = write!(s, "\"dropped_entries\": {}, \"baseline\": ", self.dropped_entries);
        categories_json(&mut s, &self.baseline);
        s.push_str(",\n\"device_traces\": [[");
        for (i, e) in self.trace.iter().enumerate() {
            s.push_str(if i == 0 { "\n" } else { ",\n" });
            entry_json(&mut s, e);
        }
        s.push_str("\n]],\n\"blocks\": [");
        for (i, b) in self.blocks.iter().enumerate() {
            s.push_str(if i == 0 { "\n" } else { ",\n" });
            block_json(&mut s, b);
        }
        s.push_str("\n]}\n");
        s
    }

    /// A self-contained page (no network, no external scripts): memory over the trace,
    /// stacked by category, with each point's figures on hover, the out-of-memory errors
    /// marked, and the largest live tensors at the peak. It is written by [`dump_snapshot`]
    /// (crate::memory::dump_snapshot) and opens in any browser.
    pub fn to_html(&self) -> String {
        let timeline = self.replay();
        let n = timeline.rows.len();
        // The points drawn: per run of entries, the one with the most bytes.
        let step = n.div_ceil(MAX_POINTS).max(1);
        let mut points = String::from("[");
        let mut first = true;
        let mut i = 0;
        while i < n {
            let end = (i + step).min(n);
            let best = (i..end)
                .max_by_key(|&k| (timeline.rows[k].iter().sum::<u64>(), std::cmp::Reverse(k)))
                .unwrap();
            if !first {
                points.push(',');
            }
            first = false;
            let r = &timeline.rows[best];
            let _ = write!(
                points,
                "[{best},{},{},{},{},{},{},{}]",
                self.trace[best].time_us, r[0], r[1], r[2], r[3], r[4], r[5]
            );
            i = end;
        }
        points.push(']');
        let (peak_at, peak_bytes) = self.peak().unwrap_or((0, 0));
        let peak_rows = timeline.rows.get(peak_at).copied().unwrap_or(self.baseline);
        let mut top = String::from("[");
        if n > 0 {
            for (k, b) in self.live_at(peak_at).iter().take(TOP_BLOCKS).enumerate() {
                if k > 0 {
                    top.push(',');
                }
                block_json(&mut top, b);
            }
        }
        top.push(']');
        // The tensors live when memory last ran out: what to shrink.
        let last_oom = self.trace.iter().rposition(|e| e.action == Action::Oom);
        let mut oom_top = String::from("[");
        if let Some(at) = last_oom {
            for (k, b) in self.live_at(at).iter().take(TOP_BLOCKS).enumerate() {
                if k > 0 {
                    oom_top.push(',');
                }
                block_json(&mut oom_top, b);
            }
        }
        oom_top.push(']');
        let mut ooms = String::from("[");
        for (k, e) in self.trace.iter().enumerate().filter(|(_, e)| e.action == Action::Oom) {
            if ooms.len() > 1 {
                ooms.push(',');
            }
            let _ = write!(ooms, "[{k},{},", e.size);
            json_str(&mut ooms, &e.module);
            ooms.push(']');
        }
        ooms.push(']');
        let mut data = String::new();
        let _ = write!(
            data,
            "{{\"categories\":[{}],\"points\":{points},\"entries\":{n},\"dropped\":{},\"peak\":{{\"at\":{peak_at},\"bytes\":{peak_bytes},\"time_us\":{},\"by_category\":[{}]}},\"top\":{top},\"ooms\":{ooms},\"oom_top\":{oom_top},\"allocated\":{},\"reserved\":{}}}",
            Category::ALL.iter().map(|c| format!("\"{}\"", c.name())).collect::<Vec<_>>().join(","),
            self.dropped_entries,
            self.trace.get(peak_at).map(|e| e.time_us).unwrap_or(0),
            peak_rows.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(","),
            self.allocated_bytes,
            self.reserved_bytes,
        );
        PAGE.replace("/*DATA*/null", &data)
    }
}

fn block(e: &TraceEntry) -> Block {
    Block {
        device: e.device,
        addr: e.addr,
        size: e.size,
        category: e.category,
        op: e.op.clone(),
        module: e.module.clone(),
        name: e.name.clone(),
        time_us: e.time_us,
    }
}

fn categories_json(s: &mut String, v: &[u64; 6]) {
    s.push('{');
    for (i, c) in Category::ALL.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "\"{}\": {}", c.name(), v[i]);
    }
    s.push('}');
}

fn entry_json(s: &mut String, e: &TraceEntry) {
    let _ = write!(
        s,
        "{{\"action\": \"{}\", \"addr\": {}, \"size\": {}, \"time_us\": {}, \"category\": \"{}\"",
        e.action.name(),
        e.addr,
        e.size,
        e.time_us,
        e.category.name()
    );
    if e.action == Action::Tag {
        let _ = write!(s, ", \"previous\": \"{}\"", e.previous.name());
    }
    strings_json(s, &e.op, &e.module, &e.name);
    s.push('}');
}

fn block_json(s: &mut String, b: &Block) {
    let _ = write!(
        s,
        "{{\"addr\": {}, \"size\": {}, \"time_us\": {}, \"category\": \"{}\"",
        b.addr,
        b.size,
        b.time_us,
        b.category.name()
    );
    strings_json(s, &b.op, &b.module, &b.name);
    s.push('}');
}

fn strings_json(s: &mut String, op: &Arc<str>, module: &Arc<str>, name: &Arc<str>) {
    s.push_str(", \"op\": ");
    json_str(s, op);
    s.push_str(", \"module\": ");
    json_str(s, module);
    s.push_str(", \"name\": ");
    json_str(s, name);
}

/// A JSON string; `<`, `>` and `&` are escaped too, so the text is safe inside a `<script>`.
fn json_str(s: &mut String, v: &str) {
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            '<' | '>' | '&' => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
}

const PAGE: &str = include_str!("memory_viz.html");

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: Action, addr: usize, size: u64, category: Category, previous: Category) -> TraceEntry {
        let e: Arc<str> = Arc::from("");
        TraceEntry {
            action,
            device: crate::Device::Cpu,
            addr,
            size,
            time_us: addr as u64,
            category,
            previous,
            op: e.clone(),
            module: e.clone(),
            name: e,
        }
    }

    #[test]
    fn timeline_peak_and_live_blocks_follow_the_trace() {
        use Action::*;
        use Category::*;
        let snap = MemorySnapshot {
            baseline: [100, 0, 0, 0, 0, 0],
            trace: vec![
                entry(Alloc, 1, 10, Temporary, Temporary),
                entry(Tag, 1, 10, Activation, Temporary),
                entry(Alloc, 2, 50, Temporary, Temporary),
                entry(Free, 2, 50, Temporary, Temporary),
                entry(Oom, 0, 1000, Temporary, Temporary),
                entry(Free, 1, 10, Activation, Activation),
            ],
            ..Default::default()
        };
        let t = snap.timeline();
        assert_eq!(t[1], [100, 0, 0, 10, 0, 0]);
        assert_eq!(t[2], [100, 0, 0, 10, 50, 0]);
        assert_eq!(t[5], [100, 0, 0, 0, 0, 0]);
        assert_eq!(snap.peak(), Some((2, 160)));
        let live: Vec<(usize, Category)> = snap.live_at(2).iter().map(|b| (b.addr, b.category)).collect();
        assert_eq!(live, [(2, Temporary), (1, Activation)]);
        let html = snap.to_html();
        assert!(html.contains("\"peak\":{\"at\":2,\"bytes\":160"), "{html}");
        assert!(!html.contains("/*DATA*/null"));
    }

    #[test]
    fn strings_are_escaped_for_json_inside_a_script() {
        let mut s = String::new();
        json_str(&mut s, "a\"b\\</script>\n");
        assert_eq!(s, r#""a\"b\\\u003c/script\u003e\n""#);
    }
}
