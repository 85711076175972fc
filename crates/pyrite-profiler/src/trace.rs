//! The Chrome Trace Event JSON that PyTorch's `export_chrome_trace` writes (and
//! `chrome://tracing`, Perfetto and TensorBoard's profiler read).

use crate::events::thread_label;
use crate::Profile;
use pyrite_core::profiler_record::Flow;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// Microseconds with three decimals, exactly (nanoseconds / 1000).
fn us(ns: u64) -> Value {
    // ns / 1000 as the nearest f64: exact to the nanosecond for any trace shorter than
    // about 100 days of uptime.
    json!(ns as f64 / 1000.0)
}

pub(crate) fn chrome_trace(p: &Profile) -> Value {
    let pid = std::process::id();
    let mut ev: Vec<Value> = Vec::with_capacity(p.events.len() + 2 * p.threads.len() + 2);
    let t0 = p.events.iter().map(|e| e.start_ns).min().unwrap_or(0);
    ev.push(json!({"ph": "M", "name": "process_name", "ts": us(t0), "pid": pid, "tid": 0,
                   "args": {"name": "pyrite"}}));
    ev.push(json!({"ph": "M", "name": "process_labels", "ts": us(t0), "pid": pid, "tid": 0,
                   "args": {"labels": "CPU"}}));
    let mut devices: Vec<(usize, u64)> =
        p.events.iter().filter_map(|e| e.device.map(|d| (d, e.tid))).collect();
    devices.sort_unstable();
    devices.dedup();
    for (i, &(d, stream)) in devices.iter().enumerate() {
        if i == 0 || devices[i - 1].0 != d {
            ev.push(json!({"ph": "M", "name": "process_name", "ts": us(t0), "pid": d, "tid": 0,
                           "args": {"name": format!("GPU {d}")}}));
            ev.push(json!({"ph": "M", "name": "process_labels", "ts": us(t0), "pid": d, "tid": 0,
                           "args": {"labels": format!("GPU {d}")}}));
        }
        ev.push(json!({"ph": "M", "name": "thread_name", "ts": us(t0), "pid": d, "tid": stream,
                       "args": {"name": format!("stream {stream}")}}));
    }
    for t in &p.threads {
        ev.push(json!({"ph": "M", "name": "thread_name", "ts": us(t0), "pid": pid, "tid": t.tid,
                       "args": {"name": thread_label(t)}}));
        ev.push(json!({"ph": "M", "name": "thread_sort_index", "ts": us(t0), "pid": pid, "tid": t.tid,
                       "args": {"sort_index": t.tid}}));
    }
    // Forward ops and backward nodes that both made it into this trace are linked.
    let mut forward: HashMap<u64, usize> = HashMap::new();
    let mut backward: HashMap<u64, usize> = HashMap::new();
    for (i, e) in p.events.iter().enumerate() {
        match e.flow {
            Some(Flow::Forward(s)) => {
                forward.entry(s).or_insert(i);
            }
            Some(Flow::Backward(s)) => {
                backward.entry(s).or_insert(i);
            }
            _ => {}
        }
    }
    for (i, e) in p.events.iter().enumerate() {
        let mut args = Map::new();
        args.insert("External id".into(), json!(i + 1));
        if let Some(f) = e.flow {
            args.insert("Sequence number".into(), json!(f.sequence_nr()));
        }
        if !e.input_shapes.is_empty() || !e.input_types.is_empty() {
            args.insert("Input Dims".into(), json!(e.input_shapes));
            args.insert("Input type".into(), json!(e.input_types));
        }
        if let Some(c) = e.correlation {
            args.insert("correlation".into(), json!(c));
        }
        let on = match e.device {
            Some(d) => {
                args.insert("device".into(), json!(d));
                args.insert("stream".into(), json!(e.tid));
                if e.grid > 0 {
                    args.insert("grid".into(), json!([e.grid, 1, 1]));
                    args.insert("block".into(), json!([e.block, 1, 1]));
                }
                if e.bytes > 0 {
                    args.insert("bytes".into(), json!(e.bytes));
                }
                d as u64
            }
            None => pid as u64,
        };
        ev.push(json!({"ph": "X", "cat": e.kind.category(), "name": e.name, "pid": on, "tid": e.tid,
                       "ts": us(e.start_ns), "dur": us(e.duration_ns()), "args": args}));
        // The launch call points at the work it queued (PyTorch's "ac2g" arrows).
        if let Some(c) = e.correlation {
            if e.device.is_some() {
                ev.push(json!({"ph": "f", "id": c, "pid": on, "tid": e.tid, "ts": us(e.start_ns),
                               "cat": "ac2g", "name": "ac2g", "bp": "e"}));
            } else {
                ev.push(json!({"ph": "s", "id": c, "pid": on, "tid": e.tid, "ts": us(e.start_ns),
                               "cat": "ac2g", "name": "ac2g"}));
            }
        }
        match e.flow {
            Some(Flow::Forward(s)) if backward.contains_key(&s) && forward[&s] == i => {
                ev.push(json!({"ph": "s", "id": s, "pid": pid, "tid": e.tid, "ts": us(e.start_ns),
                               "cat": "fwdbwd", "name": "fwdbwd"}));
            }
            Some(Flow::Backward(s)) if forward.contains_key(&s) && backward[&s] == i => {
                ev.push(json!({"ph": "f", "id": s, "pid": pid, "tid": e.tid, "ts": us(e.start_ns),
                               "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"}));
            }
            _ => {}
        }
    }
    let base_ns = p.base_unix_ns;
    json!({
        "schemaVersion": 1,
        "deviceProperties": [],
        "record_shapes": p.record_shapes as u8,
        "profile_memory": p.profile_memory as u8,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base_ns,
        "traceEvents": ev,
    })
}
