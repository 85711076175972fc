//! # Pyrite
//!
//! PyTorch's programming model in pure Rust. This facade re-exports the layers, named the way a
//! PyTorch user expects: the tensor core; `nn`, `optim`, `data`, `vision` and `serialization` (`save` / `load`).
//!
//! ```
//! use pyrite::prelude::*;
//! let a = Tensor::new([[1f32, 2.], [3., 4.]])?;
//! let b = a.matmul(&a)?;
//! assert_eq!(b.to_vec2::<f32>()?, vec![vec![7., 10.], vec![15., 22.]]);
//! # Ok::<(), pyrite::Error>(())
//! ```

pub use pyrite_core::*;

/// `torch.nn`: modules, layers, losses, `functional` and `init` (the `pyrite-nn` crate).
pub mod nn {
    pub use pyrite_nn::*;
}

/// `torch.optim`: optimizers, `lr_scheduler` and `swa_utils` (the `pyrite-optim` crate).
pub mod optim {
    pub use pyrite_optim::*;
}

/// `torch.utils.data`: samples, datasets, samplers and `default_collate` (the `pyrite-data`
/// crate).
pub mod data {
    pub use pyrite_data::*;
}

/// torchvision's `datasets`, `transforms` and `models` (the `pyrite-vision` crate).
pub mod vision {
    pub use pyrite_vision::*;
}

/// `torch.serialization`: PyTorch's `.pt` checkpoint format both ways (the
/// `pyrite-serialization` crate). [`save`] and [`load`] are also at the top level, like
/// `torch.save` and `torch.load`.
pub mod serialization {
    pub use pyrite_serialization::*;
}

/// `torch.save(obj, path)`: see [`serialization::save`].
pub use pyrite_serialization::save;

/// `torch.load(path, weights_only=True)`: see [`serialization::load`].
pub use pyrite_serialization::load;

/// `torch.utils`: the parts beyond `torch.utils.data` (which is [`data`]).
pub mod utils {
    /// `torch.utils.checkpoint`: activation checkpointing, recomputing a segment's forward in
    /// the backward pass instead of keeping its activations (`checkpoint`,
    /// `checkpoint_sequential`).
    pub mod checkpoint {
        pub use pyrite_nn::utils::checkpoint::*;
    }
    /// `torch.utils.tensorboard`: a `SummaryWriter` that writes TensorBoard event files
    /// (scalars, histograms, text, images, hparams) and a reader for them (the
    /// `pyrite-tensorboard` crate).
    pub mod tensorboard {
        pub use pyrite_tensorboard::*;
    }

    /// `torch.utils.benchmark`: the `Timer` and its `Measurement` (the `pyrite-benchmark`
    /// crate).
    pub mod benchmark {
        pub use pyrite_benchmark::*;
    }
}

/// `torch.distributed`: process groups and collectives on MPI (the `mpi` feature),
/// `DistributedDataParallel`, `SyncBatchNorm`, pipeline parallelism (the `pyrite-distributed`
/// crate).
pub mod distributed {
    pub use pyrite_distributed::*;
}

/// `ray.tune`: hyperparameter tuning with Ray Tune's API: search spaces, the `Tuner`,
/// searchers (grid / random, TPE), schedulers (ASHA, the median rule), parallel trials and
/// the experiment in a database (the `pyrite-tune` crate).
pub mod tune {
    pub use pyrite_tune::*;
}

/// `torch.profiler`: `profile`, `record_function`, `schedule`, `tensorboard_trace_handler`,
/// `key_averages().table(...)` and Chrome traces (the `pyrite-profiler` crate).
pub mod profiler {
    pub use pyrite_profiler::*;
}

/// Training with Lightning's ergonomics: the `Trainer`, `LightningModule`, callbacks, loggers
/// and plots, and the checkpoint manager of hand-written loops (the `pyrite-train` crate).
pub mod train {
    pub use pyrite_train::*;
}

/// `torch.amp`: mixed precision, starting with the `GradScaler` (the `pyrite-amp` crate).
pub mod amp {
    pub use pyrite_amp::*;
}

/// torchmetrics: classification, regression and aggregation metrics accumulated over batches,
/// with state kept as sums that copies can merge or all-reduce (the `pyrite-metrics` crate).
pub mod metrics {
    pub use pyrite_metrics::*;
}

/// Hugging Face's `transformers`: BERT-family encoders loaded from a Hugging Face folder,
/// tokenizers and sentence embeddings (the `pyrite-transformers` crate).
pub mod transformers {
    pub use pyrite_transformers::*;
}

/// `torch.cuda`: devices, streams and events (`is_available`, `device_count`, `set_device`,
/// `Stream`, `Event`, ...; CUDA tensors with the `cuda` feature), and GPU status as GPUtil
/// gives it (`gpus`, `get_available`, `show_utilization`) through NVML opened at run time. No
/// driver means no GPU, not an error (the `pyrite-cuda` crate).
pub mod cuda {
    pub use pyrite_cuda::*;
}

/// The names most programs need: `use pyrite::prelude::*;`.
pub mod prelude {
    pub use pyrite_core::{idx, DType, Device, Error, Result, Scalar, Shape, Tensor, TensorIndex};
    pub use pyrite_nn::functional as F;
    pub use pyrite_nn::{Buffer, Module, ModuleBase, ModuleHooks, Parameter, Sequential, Value};
}

// The README's examples run as doctests, so they stay true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

// So do PORTING.md's.
#[doc = include_str!("../../../docs/PORTING.md")]
#[cfg(doctest)]
pub struct PortingDoctests;
