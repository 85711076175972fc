//! What the profiler records: a training step's ops, autograd ranges, optimizer and user
//! ranges, properly nested per thread, linked forward to backward, with memory; DataLoader
//! workers on their own threads; nothing at all when no profiler runs.

use pyrite::data::{DataLoader, DataLoaderOptions, TensorDataset};
use pyrite::nn::functional as F;
use pyrite::nn::{Conv2d, ConvOptions, Flatten, Linear, MaxPool2d, Module, PoolOptions, ReLU, Sequential};
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::{DType, Tensor};
use pyrite_profiler::{profile, record_function, Profile, ProfileOptions};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// One profiler at a time per process: the tests of this file take turns.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn small_cnn() -> Sequential {
    Sequential::new()
        .append(Conv2d::new(1, 4, 3, ConvOptions::new().padding(1)).unwrap())
        .append(ReLU::new())
        .append(MaxPool2d::new(2, PoolOptions::new()))
        .append(Flatten::new())
        .append(Linear::new(4 * 4 * 4, 10).unwrap())
}

/// One profiled training step of a small CNN (forward, cross-entropy, backward, Adam).
fn profiled_step(options: ProfileOptions) -> Profile {
    pyrite::manual_seed(0);
    let model = small_cnn();
    let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 1e-3, ..Default::default() }).unwrap();
    let x = Tensor::randn([2, 1, 8, 8], DType::F32).unwrap();
    let y = Tensor::new([3i64, 7]).unwrap();
    let mut prof = profile(options).unwrap();
    {
        let _r = record_function("train_step");
        opt.zero_grad().unwrap();
        let loss = {
            let _f = record_function("forward");
            F::cross_entropy(&model.call(&x).unwrap(), &y, &Default::default()).unwrap()
        };
        loss.backward().unwrap();
        opt.step().unwrap();
    }
    prof.stop().unwrap();
    prof.profile().expect("a trace").clone()
}

fn names(p: &Profile) -> HashSet<String> {
    p.events().iter().map(|e| e.name.clone()).collect()
}

#[test]
fn a_training_step_records_ops_autograd_optimizer_and_user_ranges() {
    let _s = serial();
    let p = profiled_step(ProfileOptions::default());
    let names = names(&p);
    for want in [
        "train_step",
        "forward",
        "aten::conv2d",
        "aten::convolution",
        "aten::relu",
        "aten::max_pool2d_with_indices",
        "aten::flatten",
        "aten::linear",
        "aten::addmm",
        "aten::cross_entropy_loss",
        "autograd::engine::evaluate_function: ConvolutionBackward0",
        "ConvolutionBackward0",
        "autograd::engine::evaluate_function: AddmmBackward0",
        "AddmmBackward0",
        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
        "Optimizer.step#Adam.step",
        "Optimizer.zero_grad#Adam.zero_grad",
    ] {
        assert!(names.contains(want), "missing {want}; recorded: {names:?}");
    }
    // aten::linear holds aten::addmm, as in PyTorch.
    let by_id: HashMap<u64, &pyrite_profiler::FunctionEvent> = p.events().iter().map(|e| (e.id, e)).collect();
    let addmm = p.events().iter().find(|e| e.name == "aten::addmm").unwrap();
    let parent = by_id[&addmm.parent.expect("addmm has a parent")];
    assert_eq!(parent.name, "aten::linear");
    // The node's range sits inside the engine's evaluate_function range.
    let node = p.events().iter().find(|e| e.name == "AddmmBackward0").unwrap();
    assert_eq!(by_id[&node.parent.unwrap()].name, "autograd::engine::evaluate_function: AddmmBackward0");
    // Self time never exceeds total time.
    for e in p.events() {
        assert!(e.self_cpu_time_total_ns <= e.cpu_time_total_ns, "{}", e.name);
    }
}

/// `(ts, end)` in nanoseconds from a trace event's microseconds.
fn span(e: &Value) -> (i64, i64) {
    let ts = (e["ts"].as_f64().unwrap() * 1000.0).round() as i64;
    let dur = (e["dur"].as_f64().unwrap() * 1000.0).round() as i64;
    (ts, ts + dur)
}

#[test]
fn the_chrome_trace_parses_nests_per_thread_and_links_forward_to_backward() {
    let _s = serial();
    let p = profiled_step(ProfileOptions { record_shapes: true, ..Default::default() });
    let dir = std::env::temp_dir().join(format!("pyrite-prof-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    p.export_chrome_trace(&path).unwrap();
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let events = trace["traceEvents"].as_array().unwrap();

    // Complete events have PyTorch's fields; ops carry their input dims and types.
    let xs: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(xs.len(), p.events().len());
    for e in &xs {
        for key in ["name", "cat", "pid", "tid", "ts", "dur", "args"] {
            assert!(!e[key].is_null(), "{key} missing in {e}");
        }
    }
    let cats: HashSet<&str> = xs.iter().map(|e| e["cat"].as_str().unwrap()).collect();
    assert_eq!(cats, HashSet::from(["cpu_op", "user_annotation"]));
    let addmm = xs.iter().find(|e| e["name"] == "aten::addmm").unwrap();
    assert_eq!(addmm["args"]["Input Dims"], serde_json::json!([[10], [2, 64], [64, 10]]));
    assert_eq!(addmm["args"]["Input type"], serde_json::json!(["float", "float", "float"]));

    // Per thread, complete events form a proper tree: each one that starts inside another
    // ends inside it too.
    let mut by_tid: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
    for e in &xs {
        by_tid.entry(e["tid"].as_i64().unwrap()).or_default().push(span(e));
    }
    for spans in by_tid.values_mut() {
        spans.sort_by_key(|&(s, e)| (s, std::cmp::Reverse(e)));
        let mut open: Vec<i64> = Vec::new(); // ends of the enclosing events
        for &(s, e) in spans.iter() {
            while open.last().is_some_and(|&end| end <= s) {
                open.pop();
            }
            if let Some(&end) = open.last() {
                assert!(e <= end, "event [{s}, {e}] overlaps the end {end} of its parent");
            }
            open.push(e);
        }
    }

    // Flow arrows: one start and one end per id, start before end, the start on a forward op
    // and the end on the backward node of the same sequence number.
    let mut starts: HashMap<i64, &Value> = HashMap::new();
    let mut ends: HashMap<i64, &Value> = HashMap::new();
    for e in events.iter().filter(|e| e["cat"] == "fwdbwd") {
        let id = e["id"].as_i64().unwrap();
        let slot = if e["ph"] == "s" { &mut starts } else { &mut ends };
        assert!(slot.insert(id, e).is_none(), "two {} events with id {id}", e["ph"]);
    }
    assert!(starts.len() >= 5, "expected flows for the CNN's nodes, got {}", starts.len());
    assert_eq!(starts.keys().collect::<HashSet<_>>(), ends.keys().collect::<HashSet<_>>());
    let seq_of = |ph_ts: &Value, want_cat: &str| -> String {
        let x = xs
            .iter()
            .find(|x| {
                x["ts"] == ph_ts["ts"]
                    && x["tid"] == ph_ts["tid"]
                    && x["cat"] == want_cat
                    && x["args"]["Sequence number"].as_i64() == ph_ts["id"].as_i64()
            })
            .unwrap_or_else(|| panic!("no op at the flow event {ph_ts}"));
        x["name"].as_str().unwrap().to_string()
    };
    for (id, s) in &starts {
        let f = ends[id];
        assert!(s["ts"].as_f64().unwrap() <= f["ts"].as_f64().unwrap());
        assert_eq!(f["bp"], "e");
        let fwd = seq_of(s, "cpu_op");
        let bwd = seq_of(f, "cpu_op");
        assert!(fwd.starts_with("aten::"), "{fwd}");
        assert!(bwd.contains("Backward"), "{bwd}");
    }
    // The linear layer's addmm links to AddmmBackward0.
    let addmm_seq = addmm["args"]["Sequence number"].as_i64().unwrap();
    assert_eq!(seq_of(ends[&addmm_seq], "cpu_op"), "AddmmBackward0");
}

#[test]
fn memory_is_attributed_to_the_ops_that_allocate() {
    let _s = serial();
    let p = profiled_step(ProfileOptions { profile_memory: true, ..Default::default() });
    let conv = p.events().iter().find(|e| e.name == "aten::convolution").unwrap();
    // The output [2, 4, 8, 8] f32 at least.
    assert!(conv.cpu_memory_usage >= 2 * 4 * 8 * 8 * 4, "{}", conv.cpu_memory_usage);
    let avg = p.key_averages(false);
    let addmm = avg.events.iter().find(|e| e.key == "aten::addmm").unwrap();
    assert!(addmm.cpu_memory_usage >= 2 * 10 * 4, "{addmm:?}");
    // A parent's memory includes its children's.
    let linear = avg.events.iter().find(|e| e.key == "aten::linear").unwrap();
    assert!(linear.cpu_memory_usage >= addmm.cpu_memory_usage);
    // Without profile_memory, nothing is attributed.
    let p = profiled_step(ProfileOptions::default());
    assert!(p.events().iter().all(|e| e.cpu_memory_usage == 0));
}

#[test]
fn nothing_is_recorded_without_a_profiler() {
    let _s = serial();
    assert!(!pyrite::profiler_record::is_active());
    let a = Tensor::ones([3, 3], DType::F32).unwrap();
    {
        let _r = record_function("outside");
        a.matmul(&a).unwrap();
    }
    // A profiler started afterwards sees none of it.
    let mut prof = profile(ProfileOptions::default()).unwrap();
    a.add(&a).unwrap();
    prof.stop().unwrap();
    let names = names(prof.profile().unwrap());
    assert_eq!(names, HashSet::from(["aten::add".to_string()]));
    assert!(!pyrite::profiler_record::is_active());
    // Nor after it stopped.
    a.mul(&a).unwrap();
    assert_eq!(prof.events().len(), 1);
}

#[test]
fn a_second_profiler_is_an_error_while_one_records() {
    let _s = serial();
    let mut first = profile(ProfileOptions::default()).unwrap();
    let err = profile(ProfileOptions::default()).err().expect("a second profiler must fail");
    assert!(err.to_string().contains("another profiler is already running"), "{err}");
    first.stop().unwrap();
    // CUDA activity without a GPU: a warning, and the CPU's ranges (as PyTorch).
    if !pyrite_core::cuda_is_available() {
        let mut cuda = profile(ProfileOptions {
            activities: vec![pyrite_profiler::ProfilerActivity::CUDA],
            ..Default::default()
        })
        .unwrap();
        Tensor::ones([2], DType::F32).unwrap().exp().unwrap();
        cuda.stop().unwrap();
        assert!(cuda.events().iter().any(|e| e.name == "aten::exp"));
        let table = cuda.key_averages(false).table(&Default::default()).unwrap();
        assert!(!table.contains("CUDA"), "no CUDA columns without CUDA activity: {table}");
    }
    // An unwritable trace path is an error, not a panic.
    let bad = std::env::temp_dir().join("pyrite-no-such-dir-xyz").join("t.json");
    let e = first.export_chrome_trace(&bad).unwrap_err();
    assert!(e.to_string().contains("cannot write"), "{e}");
}

#[test]
fn dataloader_batches_are_ranges_and_workers_record_on_their_own_threads() {
    let _s = serial();
    let x = Tensor::arange(0.0, 16.0, 1.0, DType::F32).unwrap().reshape([8, 2]).unwrap();
    let ds = Arc::new(TensorDataset::new(vec![x]).unwrap());
    let single =
        DataLoader::new(ds.clone(), DataLoaderOptions { batch_size: Some(4), ..Default::default() }).unwrap();
    let multi =
        DataLoader::new(ds, DataLoaderOptions { batch_size: Some(4), num_workers: 2, ..Default::default() })
            .unwrap();
    let mut prof = profile(ProfileOptions::default()).unwrap();
    for b in single.iter().unwrap() {
        b.unwrap();
    }
    for b in multi.iter().unwrap() {
        b.unwrap();
    }
    drop(record_function("main"));
    prof.stop().unwrap();
    let p = prof.profile().unwrap();
    let count = |n: &str| p.events().iter().filter(|e| e.name == n).count();
    assert_eq!(count("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"), 3); // 2 batches + the end
    assert_eq!(count("enumerate(DataLoader)#_MultiProcessDataLoaderIter.__next__"), 3);
    let main = p.events().iter().find(|e| e.name == "main").unwrap().tid;
    // The workers stack their batches (aten::stack) on their own threads.
    let worker_tids: HashSet<u64> =
        p.events().iter().filter(|e| e.name == "aten::stack" && e.tid != main).map(|e| e.tid).collect();
    assert!(!worker_tids.is_empty(), "no aten::stack off the main thread");
    let named: HashMap<u64, &str> = p.threads().iter().map(|t| (t.tid, t.name.as_str())).collect();
    for t in worker_tids {
        assert!(named[&t].starts_with("pyrite-dataloader-"), "{}", named[&t]);
    }
}
