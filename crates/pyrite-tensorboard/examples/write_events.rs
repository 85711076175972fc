//! Writes a fixed set of summaries into a folder: what `reference/check_tensorboard.py` reads
//! with TensorBoard's own reader (and writes again with torch.utils.tensorboard to compare).
//!
//! ```text
//! cargo run -p pyrite-tensorboard --example write_events -- <folder>
//! ```

use pyrite_core::{Result, Tensor};
use pyrite_tensorboard::{HParamValue, SummaryWriter};
use std::path::Path;

/// The histogram's values: deterministic, of both signs, with a zero and a repeat.
pub fn histogram_values(step: u64) -> Vec<f64> {
    (0..200)
        .map(|i| ((i as f64) * 0.37 + step as f64).sin() * (1.0 + step as f64) * 3.0)
        .chain([0.0, 0.0, 1e-3])
        .collect()
}

/// The image: 3 x 4 x 5 (CHW) u8.
pub fn image_pixels() -> Vec<u8> {
    (0..3 * 4 * 5).map(|i| ((i * 37) % 256) as u8).collect()
}

/// Writes the fixed content (same calls as the Python side of the check).
pub fn write_fixed(dir: &Path) -> Result<()> {
    let mut w = SummaryWriter::new(dir)?;
    for step in 0..5u64 {
        w.add_scalar("loss", 1.0 / (step as f64 + 1.0), step)?;
        w.add_scalar("metrics/acc", 0.5 + 0.1 * step as f64, step)?;
    }
    for step in 0..2u64 {
        w.add_histogram("weights", &histogram_values(step), step)?;
    }
    w.add_histogram("small", &[1.0f64, 2.0, 2.0, 3.5], 0)?;
    w.add_text("notes", "hello *TensorBoard* from Pyrite", 3)?;
    w.add_image("image", &Tensor::from_vec(image_pixels(), [3, 4, 5])?, 1)?;
    w.add_scalars("pair", &[("a", 1.5), ("b", -2.5)], 2)?;
    let hparams: Vec<(&str, HParamValue)> = vec![
        ("lr", 0.01.into()),
        ("batch_size", 32i64.into()),
        ("optimizer", "adam".into()),
        ("nesterov", true.into()),
    ];
    w.add_hparams_with(
        &hparams,
        &[("hparam/accuracy", 0.875), ("hparam/loss", 0.25)],
        Some("hparams"),
        None,
    )?;
    w.close()
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let dir = std::env::args().nth(1).expect("usage: write_events <folder>");
    write_fixed(Path::new(&dir))
}
