//! The usual advice for "out of memory", each item shown working and measured with the
//! allocator's statistics (and the process's RSS where the operating system is involved):
//! `no_grad` / `inference_mode` for evaluation, dropping (`del`) what is no longer needed,
//! `empty_cache`, and 16-bit floats.
//!
//! The statistics are process-wide, so the tests take turns.

use pyrite::autograd::{inference_mode, no_grad};
use pyrite::memory::{
    empty_cache, max_memory_allocated, memory_allocated, memory_reserved, reset_peak_memory_stats,
};
use pyrite::nn::{Linear, Module, ReLU, Sequential};
use pyrite::{manual_seed, DType, Device, Tensor};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn allocated() -> u64 {
    memory_allocated(Device::Cpu).unwrap()
}

const MIB: u64 = 1 << 20;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Eight Linear + ReLU blocks of width 256: on a batch of 1024 an activation is 1 MiB, a
/// weight 256 KiB.
fn deep_mlp() -> Sequential {
    manual_seed(0);
    let mut m = Sequential::new();
    for _ in 0..8 {
        m.push(Linear::new(256, 256).unwrap());
        m.push(ReLU::new());
    }
    m
}

/// The peak above the starting point of an evaluation pass that keeps its output until the
/// predictions are taken, as an evaluation loop does.
fn eval_peak(m: &Sequential, x: &Tensor) -> u64 {
    let base = allocated();
    reset_peak_memory_stats(Device::Cpu).unwrap();
    let out = m.call(x).unwrap();
    let preds = out.argmax(Some(1), false).unwrap();
    drop(out);
    drop(preds);
    max_memory_allocated(Device::Cpu).unwrap() - base
}

#[test]
fn no_grad_and_inference_mode_lower_the_peak_of_an_evaluation_pass() {
    let _s = serial();
    let m = deep_mlp();
    let x = Tensor::randn([1024, 256], DType::F32).unwrap();
    let _ = eval_peak(&m, &x); // warm up
    let with_grad = eval_peak(&m, &x);
    let under_no_grad = {
        let _g = no_grad();
        eval_peak(&m, &x)
    };
    let under_inference = {
        let _g = inference_mode();
        eval_peak(&m, &x)
    };
    println!(
        "evaluation peak: with grad {:.1} MiB, no_grad {:.1} MiB, inference_mode {:.1} MiB",
        with_grad as f64 / MIB as f64,
        under_no_grad as f64 / MIB as f64,
        under_inference as f64 / MIB as f64
    );
    // With grad, the output's graph keeps each block's ReLU output alive (saved by ReLU's
    // backward and by the next Linear's): 8 MiB, plus the block in flight. Without, an
    // activation is freed as soon as the next op has read it: two at a time.
    assert!(with_grad >= 9 * MIB, "{with_grad}");
    assert!(under_no_grad <= 2 * MIB, "{under_no_grad}");
    assert!(under_inference <= 2 * MIB, "{under_inference}");
}

#[test]
fn dropping_a_tensor_returns_its_memory_at_once_unless_a_view_still_holds_it() {
    let _s = serial();
    let before = allocated();
    let t = Tensor::zeros([1024, 1024], DType::F32).unwrap();
    assert_eq!(allocated(), before + 4 * MIB);
    drop(t); // `del t`
    assert_eq!(allocated(), before);

    let t = Tensor::zeros([1024, 1024], DType::F32).unwrap();
    let row = t.select(0, 0).unwrap(); // a view shares the storage
    drop(t);
    assert_eq!(allocated(), before + 4 * MIB, "the view keeps the whole storage");
    drop(row);
    assert_eq!(allocated(), before);

    // A row copied out of it (`clone`) holds only its own bytes.
    let t = Tensor::zeros([1024, 1024], DType::F32).unwrap();
    let row = t.select(0, 0).unwrap().deep_clone().unwrap();
    drop(t);
    assert!(allocated() < before + MIB / 8, "{}", allocated() - before);
    drop(row);
    assert_eq!(allocated(), before);
}

#[test]
fn empty_cache_gives_cached_memory_back_to_the_operating_system() {
    let _s = serial();
    empty_cache();
    let (reserved0, rss0) = (memory_reserved(Device::Cpu).unwrap(), rss_bytes());
    let t = Tensor::ones([16 * 1024 * 1024], DType::F32).unwrap(); // 64 MiB, every page written
    assert!(rss_bytes() >= rss0 + 60 * MIB, "the pages are resident");
    drop(t);
    // Freed, but kept by the cache for the next allocation: still reserved, still resident.
    assert_eq!(memory_reserved(Device::Cpu).unwrap(), reserved0 + 64 * MIB);
    assert!(rss_bytes() >= rss0 + 60 * MIB);
    empty_cache();
    assert_eq!(memory_reserved(Device::Cpu).unwrap(), reserved0);
    let rss = rss_bytes();
    assert!(rss < rss0 + 8 * MIB, "RSS {rss} after empty_cache, {rss0} before");
}

#[test]
fn half_precision_halves_the_memory_of_the_parameters() {
    let _s = serial();
    let before = allocated();
    let mut m = deep_mlp();
    let f32_bytes = allocated() - before;
    let n: u64 = m.parameters().iter().map(|p| p.numel() as u64).sum();
    assert!(f32_bytes >= 4 * n, "{f32_bytes} for {n} parameters");
    for dtype in [DType::F16, DType::BF16] {
        let mut half = deep_mlp();
        half.to_dtype(dtype).unwrap(); // `model.half()`: the f32 parameters are dropped
        let half_bytes = allocated() - before - f32_bytes;
        assert!(half.parameters().iter().all(|p| p.dtype() == dtype));
        assert!(
            half_bytes * 2 <= f32_bytes + 4096 && half_bytes * 2 + 4096 >= f32_bytes,
            "{dtype:?}: {half_bytes} against {f32_bytes}"
        );
    }
    m.to_dtype(DType::F16).unwrap();
    assert!((allocated() - before) * 2 <= f32_bytes + 4096);
}
