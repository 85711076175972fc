//! `key_averages()` and its table: PyTorch's layout, units and footer, checked by printing
//! the rows PyTorch averaged (recorded by `reference/profiler_table.py`) and comparing the
//! text; and our own averages of a real profile.

use pyrite::{DType, Tensor};
use pyrite_profiler::{
    format_memory, format_time, profile, record_function, EventKind, EventList, FunctionEventAvg,
    ProfileOptions, TableOptions,
};
use serde_json::Value;
use std::sync::{Mutex, MutexGuard};

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/profiler_table.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("reference/data/profiler_table.json")).unwrap()
}

#[test]
fn the_table_prints_pytorchs_rows_as_pytorch_does() {
    let r = reference();
    for t in r["tables"].as_array().unwrap() {
        let events = t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| FunctionEventAvg {
                key: row["key"].as_str().unwrap().to_string(),
                input_shapes: serde_json::from_value(row["input_shapes"].clone()).unwrap(),
                count: row["count"].as_u64().unwrap(),
                cpu_time_total_ns: row["cpu_time_total_ns"].as_u64().unwrap(),
                self_cpu_time_total_ns: row["self_cpu_time_total_ns"].as_u64().unwrap(),
                cpu_memory_usage: row["cpu_memory_usage"].as_i64().unwrap(),
                self_cpu_memory_usage: row["self_cpu_memory_usage"].as_i64().unwrap(),
                device_time_total_ns: 0,
                self_device_time_total_ns: 0,
                kind: EventKind::Op,
            })
            .collect();
        let list = EventList { events, profile_memory: true };
        let text = list
            .table(&TableOptions {
                sort_by: Some(t["sort_by"].as_str().unwrap().to_string()),
                row_limit: t["row_limit"].as_u64().unwrap() as usize,
                ..Default::default()
            })
            .unwrap();
        same_text(&text, t["text"].as_str().unwrap());
    }
}

/// The texts agree character for character, except that a time may differ in its last
/// digit: PyTorch sums microseconds as floats, and an average that lands on a half
/// (`19.889 / 2`) rounds by that sum's representation error, where ours sums nanoseconds.
fn same_text(ours: &str, theirs: &str) {
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), theirs.lines().collect());
    assert_eq!(a.len(), b.len(), "ours:\n{ours}\ntheirs:\n{theirs}");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.len(), y.len(), "\n{x}\n{y}");
        for (p, q) in x.split_whitespace().zip(y.split_whitespace()) {
            if p == q {
                continue;
            }
            let unit = |s: &str| s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.').to_string();
            let num = |s: &str| s[..s.len() - unit(s).len()].parse::<f64>().unwrap_or(f64::NAN);
            assert!(unit(p) == unit(q) && (num(p) - num(q)).abs() <= 0.0011, "{p} != {q} in\n{x}\n{y}");
        }
    }
}

#[test]
fn units_are_pytorchs() {
    assert_eq!(format_time(474.054), "474.054us");
    assert_eq!(format_time(36951.282), "36.951ms");
    assert_eq!(format_time(2_500_000.0), "2.500s");
    assert_eq!(format_memory(-24), "-24 B");
    assert_eq!(format_memory(1536), "1.50 KB");
    assert_eq!(format_memory(3 << 20), "3.00 MB");
    assert_eq!(format_memory(-(5 << 30)), "-5.00 GB");
}

#[test]
fn key_averages_count_calls_and_split_self_from_total_time() {
    let _s = serial();
    let a = Tensor::randn([16, 16], DType::F32).unwrap();
    let mut prof =
        profile(ProfileOptions { record_shapes: true, profile_memory: true, ..Default::default() }).unwrap();
    {
        let _r = record_function("outer");
        for _ in 0..3 {
            a.matmul(&a).unwrap();
        }
        for _ in 0..5 {
            a.add(&a).unwrap();
        }
        a.reshape([256]).unwrap().add(&Tensor::ones([256], DType::F32).unwrap()).unwrap();
    }
    prof.stop().unwrap();
    let avg = prof.key_averages(false);
    let row = |k: &str| avg.events.iter().find(|e| e.key == k).unwrap_or_else(|| panic!("no {k}"));
    assert_eq!(row("aten::matmul").count, 3);
    assert_eq!(row("aten::add").count, 6);
    assert_eq!(row("outer").count, 1);
    for e in &avg.events {
        assert!(e.self_cpu_time_total_ns <= e.cpu_time_total_ns, "{e:?}");
    }
    // The outer range's self time is its total less what ran inside it.
    let inner: u64 = prof.events().iter().filter(|e| e.depth == 1).map(|e| e.cpu_time_total_ns).sum();
    let outer = row("outer");
    assert_eq!(outer.self_cpu_time_total_ns, outer.cpu_time_total_ns - inner);
    // add allocates its 16x16 f32 result each time.
    assert!(row("aten::add").self_cpu_memory_usage >= 5 * 16 * 16 * 4);

    // Grouped by input shapes, the two shapes of add are two rows.
    let by_shape = prof.key_averages(true);
    let adds: Vec<&FunctionEventAvg> = by_shape.events.iter().filter(|e| e.key == "aten::add").collect();
    assert_eq!(adds.len(), 2);
    assert_eq!(adds[0].input_shapes, vec![vec![16, 16], vec![16, 16]]);
    assert_eq!(adds[0].count, 5);
    assert_eq!(adds[1].input_shapes, vec![vec![256], vec![256]]);

    let table = by_shape
        .table(&TableOptions { sort_by: Some("cpu_time_total".into()), row_limit: 3, ..Default::default() })
        .unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3 + 3 + 2, "{table}");
    for h in [
        "Name",
        "Self CPU %",
        "Self CPU",
        "CPU total %",
        "CPU total",
        "CPU time avg",
        "CPU Mem",
        "Self CPU Mem",
        "# of Calls",
        "Input Shapes",
    ] {
        assert!(lines[1].contains(h), "{h} missing from {}", lines[1]);
    }
    assert!(lines[3].trim_start().starts_with("outer"), "largest total first: {table}");
    assert!(lines[7].starts_with("Self CPU time total: "));
    let e =
        by_shape.table(&TableOptions { sort_by: Some("flops".into()), ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("unknown sort_by key 'flops'"), "{e}");
}
