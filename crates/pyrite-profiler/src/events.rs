//! The recorded events of one trace, their averages per name (`key_averages`) and PyTorch's
//! table of them.

use pyrite_core::profiler_record::{Event, EventKind, Flow, GpuEvent, GpuEventKind, ThreadInfo};
use std::collections::HashMap;

/// One recorded range (PyTorch's `FunctionEvent`). Times are in nanoseconds; `start_ns`
/// counts from the start of the process's profiler clock
/// ([`pyrite_core::profiler_record::time_base`]).
#[derive(Clone, Debug)]
pub struct FunctionEvent {
    /// `aten::addmm`, `autograd::engine::evaluate_function: AddmmBackward0`, a label.
    pub name: String,
    pub kind: EventKind,
    /// Unique in the process.
    pub id: u64,
    /// The enclosing range on the same thread.
    pub parent: Option<u64>,
    /// Nesting depth on its thread (0: top level).
    pub depth: usize,
    /// OS thread id.
    pub tid: u64,
    pub start_ns: u64,
    /// The range's duration (PyTorch's `cpu_time_total` of one event).
    pub cpu_time_total_ns: u64,
    /// The duration less that of the ranges directly inside it.
    pub self_cpu_time_total_ns: u64,
    /// With `record_shapes`: the tensor inputs' sizes and type names.
    pub input_shapes: Vec<Vec<usize>>,
    pub input_types: Vec<&'static str>,
    /// With `profile_memory`: bytes allocated less bytes freed inside the range, with and
    /// without the ranges inside it.
    pub cpu_memory_usage: i64,
    pub self_cpu_memory_usage: i64,
    /// A forward/backward link (the autograd node's sequence number).
    pub flow: Option<Flow>,
    /// With `ProfilerActivity::CUDA`: the GPU time of the work this range launched, with and
    /// without the ranges inside it (PyTorch's `device_time_total`, `self_device_time_total`);
    /// for a kernel, copy or fill, its own duration.
    pub device_time_total_ns: u64,
    pub self_device_time_total_ns: u64,
    /// For GPU work (`kind.on_device()`): the device and stream it ran on (`tid` is the
    /// stream's id then).
    pub device: Option<usize>,
    /// For GPU work and its launch call: the id that ties them (`correlation`).
    pub correlation: Option<u64>,
    /// A kernel's grid and block size, a copy's bytes.
    pub grid: u32,
    pub block: u32,
    pub bytes: u64,
}

impl FunctionEvent {
    /// End of the range, in the same clock as `start_ns`.
    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.duration_ns()
    }

    /// An event with only its name, kind and id (every time, size and link zero or none), for
    /// the builders to fill in.
    fn blank(name: String, kind: EventKind, id: u64) -> FunctionEvent {
        FunctionEvent {
            name,
            kind,
            id,
            parent: None,
            depth: 0,
            tid: 0,
            start_ns: 0,
            cpu_time_total_ns: 0,
            self_cpu_time_total_ns: 0,
            input_shapes: Vec::new(),
            input_types: Vec::new(),
            cpu_memory_usage: 0,
            self_cpu_memory_usage: 0,
            flow: None,
            device_time_total_ns: 0,
            self_device_time_total_ns: 0,
            device: None,
            correlation: None,
            grid: 0,
            block: 0,
            bytes: 0,
        }
    }

    /// How long it ran: CPU time, or device time for GPU work.
    pub fn duration_ns(&self) -> u64 {
        if self.kind.on_device() {
            self.device_time_total_ns
        } else {
            self.cpu_time_total_ns
        }
    }
}

/// Turns raw events into [`FunctionEvent`]s sorted by thread, start time and depth, with self
/// times, depths and total memory filled in; GPU work becomes a launch call inside the op that
/// launched it (the innermost range open on the launching thread at the call) and a device
/// event, whose time counts for that op and the ranges around it.
pub(crate) fn build(raw: Vec<Event>, gpu: Vec<GpuEvent>) -> Vec<FunctionEvent> {
    let device_events = device_events(&raw, gpu);
    let mut events: Vec<FunctionEvent> = raw
        .into_iter()
        .map(|e| FunctionEvent {
            parent: e.parent,
            tid: e.tid,
            start_ns: e.start_ns,
            cpu_time_total_ns: e.dur_ns,
            self_cpu_time_total_ns: e.dur_ns,
            input_shapes: e.input_shapes,
            input_types: e.input_types,
            cpu_memory_usage: e.self_memory,
            self_cpu_memory_usage: e.self_memory,
            flow: e.flow,
            ..FunctionEvent::blank(e.name.into_owned(), e.kind, e.id)
        })
        .chain(device_events)
        .collect();
    // Parents start no later than their children and last at least as long.
    events.sort_by(|a, b| {
        (a.device, a.tid, a.start_ns, std::cmp::Reverse(a.duration_ns()), a.id).cmp(&(
            b.device,
            b.tid,
            b.start_ns,
            std::cmp::Reverse(b.duration_ns()),
            b.id,
        ))
    });
    let index: HashMap<u64, usize> = events.iter().enumerate().map(|(i, e)| (e.id, i)).collect();
    // Depths: parents come first in this order.
    for i in 0..events.len() {
        let d = events[i].parent.and_then(|p| index.get(&p)).map_or(0, |&p| events[p].depth + 1);
        events[i].depth = d;
    }
    // Children's totals leave their parents' self values (deepest first, so that totals are
    // complete when they are passed up).
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(events[i].depth));
    for i in order {
        if let Some(&p) = events[i].parent.and_then(|p| index.get(&p)) {
            let (t, m) = (events[i].cpu_time_total_ns, events[i].cpu_memory_usage);
            let parent = &mut events[p];
            parent.self_cpu_time_total_ns = parent.self_cpu_time_total_ns.saturating_sub(t);
            parent.cpu_memory_usage += m;
        }
    }
    // Each piece of GPU work counts for the op that launched it (the launch call's parent)
    // and every range around that op.
    let launcher: HashMap<u64, Option<u64>> = events
        .iter()
        .filter(|e| e.kind == EventKind::CudaRuntime)
        .filter_map(|e| e.correlation.map(|c| (c, e.parent)))
        .collect();
    let work: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e.kind.on_device())
        .filter_map(|e| e.correlation.map(|c| (c, e.device_time_total_ns)))
        .collect();
    for (c, dur) in work {
        let mut at = launcher.get(&c).copied().flatten().and_then(|p| index.get(&p).copied());
        if let Some(i) = at {
            events[i].self_device_time_total_ns += dur;
        }
        while let Some(i) = at {
            events[i].device_time_total_ns += dur;
            at = events[i].parent.and_then(|p| index.get(&p).copied());
        }
    }
    events
}

/// Ids for the events made from GPU work, apart from the recorder's.
const DEVICE_IDS: u64 = 1 << 62;

/// The launch calls and the device events of `gpu`, the calls inside the op that made them.
fn device_events(raw: &[Event], gpu: Vec<GpuEvent>) -> Vec<FunctionEvent> {
    let mut out = Vec::with_capacity(2 * gpu.len());
    for (n, g) in gpu.into_iter().enumerate() {
        // The innermost range open on the thread when the call was made.
        let parent = raw
            .iter()
            .filter(|e| {
                e.tid == g.tid && e.start_ns <= g.api_start_ns && g.api_start_ns < e.start_ns + e.dur_ns
            })
            .max_by_key(|e| (e.start_ns, std::cmp::Reverse(e.dur_ns)))
            .map(|e| e.id);
        let call = FunctionEvent {
            parent,
            tid: g.tid,
            start_ns: g.api_start_ns,
            cpu_time_total_ns: g.api_dur_ns,
            self_cpu_time_total_ns: g.api_dur_ns,
            correlation: Some(g.correlation),
            ..FunctionEvent::blank(g.api.to_string(), EventKind::CudaRuntime, DEVICE_IDS + 2 * n as u64)
        };
        let kind = match g.kind {
            GpuEventKind::Kernel => EventKind::Kernel,
            GpuEventKind::Memcpy => EventKind::GpuMemcpy,
            GpuEventKind::Memset => EventKind::GpuMemset,
        };
        let work = FunctionEvent {
            tid: g.stream,
            start_ns: g.start_ns,
            device_time_total_ns: g.dur_ns,
            self_device_time_total_ns: g.dur_ns,
            device: Some(g.device),
            correlation: Some(g.correlation),
            grid: g.grid,
            block: g.block,
            bytes: g.bytes,
            ..FunctionEvent::blank(g.name, kind, DEVICE_IDS + 2 * n as u64 + 1)
        };
        out.push(call);
        out.push(work);
    }
    out
}

/// Names of threads by tid, as PyTorch's trace writes them (`thread 12 (python3)`).
pub(crate) fn thread_label(t: &ThreadInfo) -> String {
    if t.name.is_empty() {
        format!("thread {}", t.tid)
    } else {
        format!("thread {} ({})", t.tid, t.name)
    }
}

/// The statistics of every event with the same key (PyTorch's `FunctionEventAvg`).
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionEventAvg {
    /// The name (`ProfilerStep#3` becomes `ProfilerStep*`, as in PyTorch).
    pub key: String,
    /// With `group_by_input_shape`: the shapes of this group, else empty.
    pub input_shapes: Vec<Vec<usize>>,
    /// `# of Calls`.
    pub count: u64,
    pub cpu_time_total_ns: u64,
    pub self_cpu_time_total_ns: u64,
    pub cpu_memory_usage: i64,
    pub self_cpu_memory_usage: i64,
    /// GPU time (see [`FunctionEvent::device_time_total_ns`]).
    pub device_time_total_ns: u64,
    pub self_device_time_total_ns: u64,
    pub kind: EventKind,
}

impl FunctionEventAvg {
    /// `CUDA time avg`: `device_time_total / count`.
    pub fn device_time_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.device_time_total_ns as f64 / self.count as f64
        }
    }

    /// `CPU time avg`: `cpu_time_total / count`.
    pub fn cpu_time_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.cpu_time_total_ns as f64 / self.count as f64
        }
    }
}

/// What `key_averages()` returns: one [`FunctionEventAvg`] per key, in order of first
/// appearance (PyTorch's `EventList`).
#[derive(Clone, Debug, Default)]
pub struct EventList {
    pub events: Vec<FunctionEventAvg>,
    /// Whether memory was recorded (the table then has the memory columns).
    pub profile_memory: bool,
}

/// The options of [`EventList::table`], with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct TableOptions {
    /// `cpu_time_total`, `self_cpu_time_total`, `cpu_time` (the average), `count`,
    /// `cpu_memory_usage`, `self_cpu_memory_usage`, and with GPU activity
    /// `device_time_total`, `self_device_time_total`, `device_time` (or their older names
    /// `cuda_time_total`, `self_cuda_time_total`, `cuda_time`); `None` keeps the order of
    /// appearance.
    pub sort_by: Option<String>,
    /// At most this many rows.
    pub row_limit: usize,
    pub max_name_column_width: usize,
    pub max_shapes_column_width: usize,
    /// A line printed above the table.
    pub header: Option<String>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            sort_by: None,
            row_limit: 100,
            max_name_column_width: 55,
            max_shapes_column_width: 80,
            header: None,
        }
    }
}

pub(crate) fn key_averages(
    events: &[FunctionEvent],
    group_by_input_shape: bool,
    profile_memory: bool,
) -> EventList {
    let mut out: Vec<FunctionEventAvg> = Vec::new();
    let mut at: HashMap<(String, String), usize> = HashMap::new();
    for e in events {
        let key =
            if e.name.starts_with("ProfilerStep#") { "ProfilerStep*".to_string() } else { e.name.clone() };
        let shapes = if group_by_input_shape { e.input_shapes.clone() } else { Vec::new() };
        let k = (key.clone(), if group_by_input_shape { format!("{shapes:?}") } else { String::new() });
        let i = *at.entry(k).or_insert_with(|| {
            out.push(FunctionEventAvg {
                key,
                input_shapes: shapes,
                count: 0,
                cpu_time_total_ns: 0,
                self_cpu_time_total_ns: 0,
                cpu_memory_usage: 0,
                self_cpu_memory_usage: 0,
                device_time_total_ns: 0,
                self_device_time_total_ns: 0,
                kind: e.kind,
            });
            out.len() - 1
        });
        let a = &mut out[i];
        a.count += 1;
        a.cpu_time_total_ns += e.cpu_time_total_ns;
        a.self_cpu_time_total_ns += e.self_cpu_time_total_ns;
        a.cpu_memory_usage += e.cpu_memory_usage;
        a.self_cpu_memory_usage += e.self_cpu_memory_usage;
        a.device_time_total_ns += e.device_time_total_ns;
        a.self_device_time_total_ns += e.self_device_time_total_ns;
    }
    EventList { events: out, profile_memory }
}

/// PyTorch's `_format_time`: `12.345us`, `1.234ms`, `1.234s`.
pub fn format_time(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.3}ms", us / 1e3)
    } else {
        format!("{us:.3}us")
    }
}

/// PyTorch's `_format_memory`: `512 B`, `1.50 KB`, `2.00 MB`, `1.00 GB` (sign kept).
pub fn format_memory(bytes: i64) -> String {
    const KB: f64 = 1024.0;
    const MB: f64 = 1024.0 * KB;
    const GB: f64 = 1024.0 * MB;
    let b = bytes as f64;
    if b.abs() >= GB {
        format!("{:.2} GB", b / GB)
    } else if b.abs() >= MB {
        format!("{:.2} MB", b / MB)
    } else if b.abs() >= KB {
        format!("{:.2} KB", b / KB)
    } else {
        format!("{bytes} B")
    }
}

fn format_share(part: f64, total: f64) -> String {
    if total == 0.0 {
        "NaN".to_string()
    } else {
        format!("{:.2}%", part * 100.0 / total)
    }
}

impl EventList {
    /// The averages sorted by `key` (largest first; see [`TableOptions::sort_by`]), or
    /// `None` for an unknown key.
    pub fn sorted_by(&self, key: &str) -> Option<Vec<FunctionEventAvg>> {
        let f: fn(&FunctionEventAvg) -> f64 = match key {
            "cpu_time_total" => |e| e.cpu_time_total_ns as f64,
            "self_cpu_time_total" => |e| e.self_cpu_time_total_ns as f64,
            "cpu_time" => |e| e.cpu_time_ns(),
            "count" => |e| e.count as f64,
            "cpu_memory_usage" => |e| e.cpu_memory_usage as f64,
            "self_cpu_memory_usage" => |e| e.self_cpu_memory_usage as f64,
            "device_time_total" | "cuda_time_total" => |e| e.device_time_total_ns as f64,
            "self_device_time_total" | "self_cuda_time_total" => |e| e.self_device_time_total_ns as f64,
            "device_time" | "cuda_time" => |e| e.device_time_ns(),
            _ => return None,
        };
        let mut v = self.events.clone();
        // Stable, largest first (Python's sorted(..., reverse=True) keeps ties in order).
        v.sort_by(|a, b| f(b).partial_cmp(&f(a)).unwrap_or(std::cmp::Ordering::Equal));
        Some(v)
    }

    /// PyTorch's `key_averages().table(...)`: the same columns, widths, units and footer.
    /// Fails for an unknown `sort_by` key.
    ///
    /// ```text
    /// -------------------  ------------  ------------  ...  ------------
    ///                Name    Self CPU %      Self CPU  ...    # of Calls
    /// -------------------  ------------  ------------  ...  ------------
    ///     aten::addmm          40.12%      12.345us  ...             1
    /// ...
    /// Self CPU time total: 30.770us
    /// ```
    pub fn table(&self, options: &TableOptions) -> pyrite_core::Result<String> {
        if self.events.is_empty() {
            return Ok(String::new());
        }
        let events = match &options.sort_by {
            None => self.events.clone(),
            Some(k) => self.sorted_by(k).ok_or_else(|| {
                pyrite_core::err!(
                    Value,
                    "table: unknown sort_by key '{k}' (expected cpu_time_total, self_cpu_time_total, cpu_time, count, cpu_memory_usage, self_cpu_memory_usage, device_time_total, self_device_time_total or device_time)"
                )
            })?,
        };
        let has_shapes = events.iter().any(|e| !e.input_shapes.is_empty());
        let name_w = (events.iter().map(|e| e.key.chars().count()).max().unwrap_or(0) + 4)
            .min(options.max_name_column_width);
        let shapes_w = (events.iter().map(|e| format!("{:?}", e.input_shapes).len()).max().unwrap_or(0) + 4)
            .min(options.max_shapes_column_width);
        // As PyTorch: the CUDA columns when some GPU time was recorded, and the total of the
        // GPU work's own times (not the ops', which would count each kernel twice).
        let has_device = events.iter().any(|e| e.self_device_time_total_ns > 0);
        let total_self_device: f64 = events
            .iter()
            .filter(|e| e.kind.on_device())
            .map(|e| e.self_device_time_total_ns as f64 / 1e3)
            .sum();
        let mut headers = vec!["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"];
        if has_device {
            headers.extend(["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]);
        }
        if self.profile_memory {
            headers.extend(["CPU Mem", "Self CPU Mem"]);
        }
        headers.push("# of Calls");
        let mut widths = vec![name_w];
        widths.extend(std::iter::repeat_n(12, headers.len() - 1));
        if has_shapes {
            headers.push("Input Shapes");
            widths.push(shapes_w);
        }
        let row = |cells: &[String]| -> String {
            let mut s = String::new();
            for (c, w) in cells.iter().zip(&widths) {
                s.push_str(&format!("{c:>w$}  "));
            }
            s
        };
        let sep: String = widths.iter().map(|&w| "-".repeat(w) + "  ").collect();
        let line_len: usize = widths.iter().map(|w| w + 2).sum::<usize>() - 2;
        let total_self: f64 = events.iter().map(|e| e.self_cpu_time_total_ns as f64 / 1e3).sum();
        let mut out = String::new();
        let mut push = |s: &str| {
            out.push_str(s);
            out.push('\n');
        };
        if let Some(h) = &options.header {
            push(&"=".repeat(line_len));
            push(h);
        }
        push(&sep);
        push(&row(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>()));
        push(&sep);
        for e in events.iter().take(options.row_limit) {
            let mut name = e.key.clone();
            let max = options.max_name_column_width;
            if name.chars().count() >= max.saturating_sub(3) {
                name = name.chars().take(max.saturating_sub(3)).collect::<String>() + "...";
            }
            let (self_us, total_us) =
                (e.self_cpu_time_total_ns as f64 / 1e3, e.cpu_time_total_ns as f64 / 1e3);
            let mut cells = vec![
                name,
                format_share(self_us, total_self),
                format_time(self_us),
                format_share(total_us, total_self),
                format_time(total_us),
                format_time(e.cpu_time_ns() / 1e3),
            ];
            if has_device {
                let self_us = e.self_device_time_total_ns as f64 / 1e3;
                cells.push(format_time(self_us));
                cells.push(format_share(self_us, total_self_device));
                cells.push(format_time(e.device_time_total_ns as f64 / 1e3));
                cells.push(format_time(e.device_time_ns() / 1e3));
            }
            if self.profile_memory {
                cells.push(format_memory(e.cpu_memory_usage));
                cells.push(format_memory(e.self_cpu_memory_usage));
            }
            cells.push(e.count.to_string());
            if has_shapes {
                let mut s = format!("{:?}", e.input_shapes);
                if s.len() > shapes_w {
                    s.truncate(shapes_w.saturating_sub(3));
                    s.push_str("...");
                }
                cells.push(s);
            }
            push(&row(&cells));
        }
        push(&sep);
        out.push_str(&format!("Self CPU time total: {}\n", format_time(total_self)));
        if has_device {
            out.push_str(&format!("Self CUDA time total: {}\n", format_time(total_self_device)));
        }
        Ok(out)
    }
}
