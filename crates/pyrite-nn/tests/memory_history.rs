//! Where did the memory go: `record_memory_history`, `memory_snapshot` and `dump_snapshot`
//! over a real training step.
//!
//! A small CNN with named sub-modules (`features.0.conv`, ...) takes an Adam step while
//! history is recorded. The snapshot must say, for every allocation, what it is for
//! (parameters, gradients, optimizer state, activations saved for backward, temporaries),
//! which op made it and in which module, and its per-category totals must add up to what the
//! allocator says is allocated at every point. The page that `dump_snapshot` writes is opened
//! in a real headless Chromium, which must draw the timeline without a script error.
//!
//! History and the allocator's figures are process-wide, so the tests here take one lock.

use pyrite::memory::{
    self, dump_snapshot, memory_allocated, memory_snapshot, record_memory_history, set_memory_limit, Action,
    Category, HistoryOptions, MemorySnapshot,
};
use pyrite::nn::*;
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::{manual_seed, DType, Device, ErrorKind, Result, Tensor};
use std::sync::Mutex;

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Module)]
struct Block {
    base: ModuleBase,
    conv: Conv2d,
    relu: ReLU,
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.relu.call(&self.conv.call(x)?)
    }
}

#[derive(Module)]
struct Net {
    base: ModuleBase,
    features: Vec<Block>,
    head: Linear,
}

impl Net {
    fn new() -> Result<Net> {
        manual_seed(0);
        let block = |cin, cout| -> Result<Block> {
            Ok(Block {
                base: ModuleBase::new(),
                conv: Conv2d::new(cin, cout, 3, ConvOptions::new().padding(1))?,
                relu: ReLU::new(),
            })
        };
        Ok(Net {
            base: ModuleBase::new(),
            features: vec![block(1, 8)?, block(8, 8)?],
            head: Linear::new(8 * 8 * 8, 10)?,
        })
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for b in &self.features {
            h = b.call(&h)?;
        }
        self.head.call(&h.flatten(1, -1)?)
    }
}

/// One Adam step of `net` on a random batch of 16 8x8 images.
fn train_step(net: &Net, opt: &mut Adam) -> Result<()> {
    let x = Tensor::randn([16, 1, 8, 8], DType::F32)?;
    let y = Tensor::randint(0, 10, [16], DType::I64)?;
    opt.zero_grad()?;
    let loss = CrossEntropyLoss::new().call((&net.call(&x)?, &y))?;
    loss.backward()?;
    opt.step()
}

fn stop() {
    record_memory_history(HistoryOptions { enabled: false, ..Default::default() }).unwrap();
}

fn total(row: &[u64; 6]) -> u64 {
    row.iter().sum()
}

fn category_bytes(snap: &MemorySnapshot, c: Category) -> u64 {
    snap.blocks.iter().filter(|b| b.category == c).map(|b| b.size).sum()
}

#[test]
fn a_training_step_is_recorded_by_category_op_and_module() -> Result<()> {
    let _l = lock();
    let net = Net::new()?; // made before recording: its memory is tagged when it is called
    let mut opt = Adam::new(net.parameters(), AdamOptions::default())?;
    let before = memory_allocated(Device::Cpu)?;
    record_memory_history(HistoryOptions::default())?;
    train_step(&net, &mut opt)?;
    train_step(&net, &mut opt)?;
    let snap = memory_snapshot()?;
    stop();

    // The totals add up: the trace starts from what was allocated before recording and ends
    // at what is allocated now, and never goes negative on the way.
    assert_eq!(total(&snap.baseline), before);
    let rows = snap.timeline();
    assert_eq!(total(rows.last().unwrap()), snap.allocated_bytes);
    assert!(snap.trace.iter().all(|e| e.action != Action::Oom));

    // Live memory, by what it is: the 6 parameters with their names, their gradients and
    // Adam's state (exp_avg, exp_avg_sq and step per parameter).
    let names = |c: Category| {
        let mut v: Vec<String> =
            snap.blocks.iter().filter(|b| b.category == c).map(|b| b.name.to_string()).collect();
        v.sort();
        v
    };
    let params = [
        "features.0.conv.bias",
        "features.0.conv.weight",
        "features.1.conv.bias",
        "features.1.conv.weight",
        "head.bias",
        "head.weight",
    ];
    assert_eq!(names(Category::Parameter), params);
    assert_eq!(names(Category::Gradient), params.map(|p| format!("{p}.grad")));
    let state = names(Category::OptimizerState);
    assert!(state.contains(&"head.weight: exp_avg".to_string()), "{state:?}");
    assert!(state.contains(&"features.0.conv.weight: exp_avg_sq".to_string()), "{state:?}");
    let param_bytes: u64 = net.parameters().iter().map(|p| p.numel() as u64 * 4).sum();
    assert!(category_bytes(&snap, Category::Parameter) >= param_bytes);
    assert_eq!(category_bytes(&snap, Category::Activation), 0, "the graph is freed after backward");

    // Activations: saved by the backward node of the op that made them, in the module that
    // ran it. The first conv's output is saved by ReLU, in features.0.relu... and made by
    // Convolution in features.0.conv.
    let saved_by_relu: Vec<_> = snap
        .trace
        .iter()
        .filter(|e| {
            e.action == Action::Tag && e.category == Category::Activation && &*e.name == "ReluBackward0"
        })
        .collect();
    assert!(!saved_by_relu.is_empty());
    assert!(saved_by_relu.iter().any(|e| &*e.module == "features.0.relu" || &*e.module == "features.0.conv"));
    let conv_out = snap
        .trace
        .iter()
        .find(|e| e.action == Action::Alloc && &*e.module == "features.1.conv" && &*e.op == "Convolution");
    assert!(conv_out.is_some(), "the conv's output is named after its op and module");
    // What backward formulas allocate is named after their node.
    assert!(snap.trace.iter().any(|e| e.action == Action::Alloc && e.op.ends_with("Backward0")));
    // Optimizer temporaries are named after the optimizer.
    assert!(snap.trace.iter().any(|e| e.action == Action::Alloc && &*e.op == "Adam"));

    // The peak is in the first step, where activations, gradients and new optimizer state
    // meet; activations were live then.
    let (at, peak) = snap.peak().unwrap();
    assert_eq!(peak, total(&rows[at]));
    assert!(rows.iter().any(|r| r[3] > 0), "activations were live at some point");
    let live = snap.live_at(at);
    assert!(live.windows(2).all(|w| w[0].size >= w[1].size), "largest first");
    Ok(())
}

#[test]
fn out_of_memory_is_in_the_trace_and_max_entries_keeps_the_totals_right() -> Result<()> {
    let _l = lock();
    let net = Net::new()?;
    let mut opt = Adam::new(net.parameters(), AdamOptions::default())?;
    train_step(&net, &mut opt)?;
    memory::empty_cache();
    record_memory_history(HistoryOptions { max_entries: 50, ..Default::default() })?;
    train_step(&net, &mut opt)?;
    set_memory_limit(Some(memory::memory_reserved(Device::Cpu)? + 4096), Device::Cpu)?;
    let e = Tensor::zeros([1 << 20], DType::F32).unwrap_err();
    set_memory_limit(None, Device::Cpu)?;
    assert_eq!(e.kind(), ErrorKind::OutOfMemory);
    let snap = memory_snapshot()?;
    stop();
    assert_eq!(snap.trace.len(), 50);
    assert!(snap.dropped_entries > 0);
    let last = snap.trace.last().unwrap();
    assert_eq!((last.action, last.size), (Action::Oom, 4 << 20));
    // Dropped entries are folded into the baseline, so the totals still end at what is
    // allocated.
    assert_eq!(total(snap.timeline().last().unwrap()), snap.allocated_bytes);
    assert!(record_memory_history(HistoryOptions { max_entries: 0, ..Default::default() }).is_err());
    Ok(())
}

#[test]
fn names_from_scopes_and_nothing_recorded_when_off() -> Result<()> {
    let _l = lock();
    record_memory_history(HistoryOptions::default())?;
    let a = {
        let _s = memory::scope("augmentation");
        Tensor::ones([1024], DType::F32)?
    };
    let snap = memory_snapshot()?;
    stop();
    let e = snap.trace.iter().rev().find(|e| e.action == Action::Alloc).unwrap();
    assert_eq!((&*e.op, e.size), ("augmentation", 4096));
    // Stopped: nothing more is recorded, and the trace stays readable until the next start.
    drop(a);
    let _b = Tensor::ones([1024], DType::F32)?;
    assert_eq!(memory_snapshot()?.trace.len(), snap.trace.len());
    Ok(())
}

#[test]
fn dump_snapshot_writes_json_and_a_page_that_a_browser_draws() -> Result<()> {
    let _l = lock();
    let net = Net::new()?;
    let mut opt = Adam::new(net.parameters(), AdamOptions::default())?;
    record_memory_history(HistoryOptions::default())?;
    for _ in 0..3 {
        train_step(&net, &mut opt)?;
    }
    // And one out-of-memory, which the page marks and explains.
    let held = Tensor::ones([4096], DType::F32)?;
    set_memory_limit(Some(memory::memory_reserved(Device::Cpu)?), Device::Cpu)?;
    memory::empty_cache();
    let oom = Tensor::zeros([1 << 20], DType::F32);
    set_memory_limit(None, Device::Cpu)?;
    assert_eq!(oom.unwrap_err().kind(), ErrorKind::OutOfMemory);
    let dir = std::env::temp_dir().join(format!("pyrite_snapshot_{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let html = dump_snapshot(dir.join("snapshot.json"))?;
    stop();
    assert_eq!(html, dir.join("snapshot.html"));

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("snapshot.json"))?).unwrap();
    let trace = json["device_traces"][0].as_array().unwrap();
    assert!(trace.iter().any(|e| e["action"] == "alloc" && e["category"] == "temporary"));
    assert!(trace.iter().any(|e| e["action"] == "tag" && e["category"] == "activation"));
    assert!(trace.iter().any(|e| e["action"] == "free_completed"));
    assert!(json["blocks"].as_array().unwrap().iter().any(|b| b["name"] == "head.weight"));

    let page = std::fs::read_to_string(&html)?;
    assert!(
        !page.contains("http://")
            || page.matches("http://").all(|_| page.contains("http://www.w3.org/2000/svg"))
    );
    assert!(!page.contains("<script src"), "self-contained");
    assert!(!page.contains("https://"));

    // A real browser loads it and draws the six category areas without a script error.
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(chromium) = chromium else {
        assert!(
            std::env::var_os("PYRITE_REQUIRE_CHROMIUM").is_none(),
            "PYRITE_REQUIRE_CHROMIUM is set but Chromium is not installed"
        );
        eprintln!("Chromium not installed: the page was not opened in a browser");
        return Ok(());
    };
    let profile = dir.join("chromium-profile");
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1200,1000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(format!("--user-data-dir={}", profile.display()));
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(format!("file://{}", html.display()));
        a
    };
    let out = std::process::Command::new(chromium).args(args(&["--dump-dom"])).output()?;
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("data-drawn=\"6\""),
        "the page did not draw: {}\n{}",
        dom,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dom.contains("data-error=\""), "script error: {dom}");
    assert_eq!(dom.matches("data-category=").count(), 6);
    assert!(dom.contains("head.weight"), "the largest tensors at the peak are listed");
    assert_eq!(dom.matches("class=\"oom\"").count(), 1, "the out-of-memory is marked");
    assert!(
        dom.contains("<h2 id=\"oomhead\">Largest live tensors when memory last ran out (entry"),
        "the tensors live at the out-of-memory are listed"
    );
    drop(held);
    // A screenshot to look at (`target/memory_snapshot.png` when run from the workspace).
    let shot = std::env::var("PYRITE_SNAPSHOT_SCREENSHOT")
        .unwrap_or_else(|_| dir.join("snapshot.png").display().to_string());
    let out = std::process::Command::new(chromium).args(args(&[&format!("--screenshot={shot}")])).output()?;
    assert!(std::path::Path::new(&shot).exists(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&profile);
    Ok(())
}
