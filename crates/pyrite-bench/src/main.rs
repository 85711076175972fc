//! Pyrite's benchmark suite: the workloads of the PyTorch reference benchmark
//! (`shared/reference/torch_bench.py`) with the same names, sizes and metric fields, one JSON
//! line per workload. `scripts/bench_compare.py` runs both side by side and prints ratios.
//!
//! ```text
//! cargo run --release -p pyrite-bench -- [--only matmul,elementwise] [--threads N]
//!                                        [--repeats 7] [--min-time 0.1] [--list]
//!                                        [--memory-history MAX_ENTRIES]
//! cargo run --release -p pyrite-bench -- --serve   # single calls on request: see `serve`
//! ```

mod bert;
mod checkpoint;
mod data;
mod ddp;
mod fit;
mod models;
mod serve;
mod timing;
mod transformer;
mod tune;
mod workloads;

use serde_json::{json, Map, Value};
use std::time::Instant;

/// Command-line options shared by all workloads.
pub struct Args {
    pub threads: usize,
    pub repeats: usize,
    pub min_time: f64,
    pub data: String,
}

fn loadavg() -> Value {
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(s) => {
            let v: Vec<f64> = s.split_whitespace().take(3).filter_map(|x| x.parse().ok()).collect();
            json!(v)
        }
        Err(_) => Value::Null,
    }
}

fn main() {
    let mut only = String::new();
    let mut args = Args { threads: 2, repeats: 7, min_time: 0.1, data: String::new() };
    let mut list = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = |name: &str| it.next().unwrap_or_else(|| die(&format!("{name} needs a value")));
        match a.as_str() {
            "--only" => only = val("--only"),
            "--threads" => args.threads = val("--threads").parse().unwrap_or_else(|_| die("bad --threads")),
            "--repeats" => args.repeats = val("--repeats").parse().unwrap_or_else(|_| die("bad --repeats")),
            "--min-time" => {
                args.min_time = val("--min-time").parse().unwrap_or_else(|_| die("bad --min-time"))
            }
            "--data" => args.data = val("--data"),
            // Record memory history (keeping the newest MAX_ENTRIES entries) while the
            // workloads run: what recording costs an op.
            "--memory-history" => {
                let max_entries =
                    val("--memory-history").parse().unwrap_or_else(|_| die("bad --memory-history"));
                pyrite::memory::record_memory_history(pyrite::memory::HistoryOptions {
                    enabled: true,
                    max_entries,
                })
                .unwrap_or_else(|e| die(&e.to_string()));
            }
            "--list" => list = true,
            "--serve" => return serve::serve(),
            "-h" | "--help" => {
                println!("usage: pyrite-bench [--only a,b] [--threads N] [--repeats R] [--min-time S] [--data DIR] [--memory-history MAX_ENTRIES] [--list] | --serve");
                return;
            }
            other => die(&format!("unknown argument {other}")),
        }
    }
    if args.data.is_empty() {
        args.data = format!("{}/../../../shared/data", env!("CARGO_MANIFEST_DIR"));
    }
    let all = workloads::all();
    if list {
        for (name, _) in &all {
            println!("{name}");
        }
        return;
    }
    let names: Vec<&str> = if only.is_empty() {
        all.iter().map(|(n, _)| *n).collect()
    } else {
        only.split(',').filter(|s| !s.is_empty()).collect()
    };
    for n in &names {
        if !all.iter().any(|(m, _)| m == n) {
            let known: Vec<&str> = all.iter().map(|(m, _)| *m).collect();
            die(&format!("unknown workload '{n}'; choose from {}", known.join(", ")));
        }
    }
    pyrite::set_num_threads(args.threads);
    for n in names {
        let f = all.iter().find(|(m, _)| *m == n).unwrap().1;
        let la0 = loadavg();
        let t0 = Instant::now();
        let results: Map<String, Value> = f(&args);
        let rec = json!({
            "bench": n,
            "threads": args.threads,
            "repeats": args.repeats,
            "memory_history": pyrite::memory_history::is_recording(),
            "pyrite": env!("CARGO_PKG_VERSION"),
            "wall_s": (t0.elapsed().as_secs_f64() * 100.0).round() / 100.0,
            "loadavg_before": la0,
            "loadavg_after": loadavg(),
            "results": results,
        });
        println!("{rec}");
    }
}

fn die(msg: &str) -> ! {
    eprintln!("pyrite-bench: {msg}");
    std::process::exit(2)
}
