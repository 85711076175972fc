//! # pyrite-tensorboard
//!
//! `torch.utils.tensorboard` in pure Rust: a [`SummaryWriter`] that writes real TensorBoard
//! event files (scalars, histograms, text, images, hparams), and a reader for them.
//!
//! An event file, `events.out.tfevents.<time>.<hostname>.<pid>.<n>`, is a TFRecord file
//! (each record: `u64` length, masked CRC-32C of the length, the data, masked CRC-32C of the
//! data) of `tensorboard.Event` protobufs, the first one `file_version: "brain.Event:2"`. The
//! protobufs are encoded by a small hand-written encoder (no protoc); the layouts are those
//! PyTorch writes (`torch/utils/tensorboard/summary.py`), so TensorBoard reads them as it reads
//! PyTorch's (`reference/check_tensorboard.py` checks it with TensorBoard's own reader).
//!
//! ```
//! use pyrite_core::{DType, Tensor};
//! use pyrite_tensorboard::{read_dir_events, SummaryWriter};
//!
//! let dir = std::env::temp_dir().join(format!("pyrite-tb-doc-{}", std::process::id()));
//! let mut writer = SummaryWriter::new(&dir)?;
//! for step in 0..3u64 {
//!     writer.add_scalar("loss", 1.0 / (step + 1) as f64, step)?;
//! }
//! writer.add_histogram("weights", &Tensor::randn([100], DType::F32)?, 2)?;
//! writer.add_text("notes", "a **markdown** note", 0)?;
//! writer.add_image("image", &Tensor::ones([3, 8, 8], DType::F32)?, 0)?;
//! writer.add_hparams(&[("lr", 0.1), ("batch_size", 32.0)], &[("hparam/accuracy", 0.9)])?;
//! writer.close()?;
//!
//! let events = read_dir_events(&dir)?;
//! assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
//! let losses: Vec<(i64, f32)> = events
//!     .iter()
//!     .flat_map(|e| e.summary.iter().flat_map(|s| &s.values).map(move |v| (e.step, v)))
//!     .filter(|(_, v)| v.tag == "loss")
//!     .map(|(step, v)| (step, v.scalar().unwrap()))
//!     .collect();
//! assert_eq!(losses, [(0, 1.0), (1, 0.5), (2, 1.0 / 3.0)]);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), pyrite_core::Error>(())
//! ```

mod crc32c;
mod event;
mod proto;
mod record;
pub mod summary;
mod writer;

pub use crate::crc32c::{crc32c, masked_crc32c};
pub use event::{
    Event, HParamType, HParamValue, HParamsPluginData, Histogram, Image, PluginData, Summary, SummaryValue,
    TensorValue, Value, DT_STRING, SESSION_LOG_START,
};
pub use record::{event_files, frame, read_dir_events, read_events, records, EventFileReader};
pub use summary::{default_bins, make_histogram, HistogramValues};
pub use writer::{hostname, now, FileWriter, SummaryWriter, SummaryWriterOptions};

/// `(step, tag, value)` of every scalar in `events`, in order.
pub fn scalars(events: &[Event]) -> Vec<(i64, String, f32)> {
    events
        .iter()
        .flat_map(|e| e.summary.iter().flat_map(|s| &s.values).map(move |v| (e.step, v)))
        .filter_map(|(step, v)| Some((step, v.tag.clone(), v.scalar()?)))
        .collect()
}

/// Every summary value in `events` with its event's step and wall time, in order.
pub fn values(events: &[Event]) -> Vec<(i64, f64, &SummaryValue)> {
    events
        .iter()
        .flat_map(|e| e.summary.iter().flat_map(|s| &s.values).map(move |v| (e.step, e.wall_time, v)))
        .collect()
}
