//! # pyrite-data
//!
//! `torch.utils.data` for Pyrite, first part: the [`Sample`] values that flow from datasets to
//! batches, the [`Dataset`] and [`IterableDataset`] traits with PyTorch's ready-made datasets,
//! the [`Sampler`] and [`BatchSampling`] traits with PyTorch's samplers, and
//! [`default_collate`].
//!
//! ```
//! use std::sync::Arc;
//! use pyrite::data::{
//!     default_collate, BatchSampler, BatchSampling, Dataset, RandomSampler, RandomSamplerOptions,
//!     Sample, TensorDataset,
//! };
//! use pyrite::{DType, Generator, Tensor};
//!
//! let x = Tensor::arange(0., 12., 1., DType::F32)?.reshape([6, 2])?;
//! let y = Tensor::new([0i64, 1, 0, 1, 0, 1])?;
//! let ds = TensorDataset::new(vec![x, y])?;
//! assert_eq!(ds.len(), 6);
//!
//! let opts = RandomSamplerOptions { generator: Some(Generator::new(0)), ..Default::default() };
//! let sampler = RandomSampler::with_options(ds.len(), opts)?;
//! let batches = BatchSampler::new(Arc::new(sampler), 4, false)?;
//! assert_eq!(batches.len(), 2);
//! for batch in batches.batches()? {
//!     let samples = batch.iter().map(|&i| ds.get(i)).collect::<pyrite::Result<Vec<Sample>>>()?;
//!     let (xs, ys) = match default_collate(samples)? {
//!         Sample::Tuple(cols) => (cols[0].as_tensor()?.clone(), cols[1].as_tensor()?.clone()),
//!         other => panic!("expected a tuple, got {other:?}"),
//!     };
//!     assert_eq!(xs.dims(), &[batch.len(), 2]);
//!     assert_eq!(ys.dtype(), DType::I64);
//! }
//! # Ok::<(), pyrite::Error>(())
//! ```

pub mod collate;
pub mod csv_dataset;
pub mod dataloader;
pub mod dataloader_state;
pub mod dataset;
pub mod iterable_loader;
pub mod npy_dataset;
pub mod sample;
pub mod sampler;

pub use collate::default_collate;
pub use csv_dataset::{CsvDataset, CsvOptions};
pub use dataloader::{
    sample_generator, CollateFn, DataLoader, DataLoaderIter, DataLoaderOptions, WorkerInitFn,
};
pub use dataloader_state::DataLoaderState;
pub use dataset::{
    get_worker_info, random_split, set_worker_info, ChainDataset, ConcatDataset, Dataset, FnDataset,
    IterableDataset, SplitLength, StackDataset, Subset, TensorDataset, WorkerInfo,
};
pub use iterable_loader::{IterableDataLoader, IterableLoaderIter};
pub use npy_dataset::NpyDataset;
pub use sample::Sample;
pub use sampler::{
    BatchSampler, BatchSampling, DistributedSampler, DistributedSamplerOptions, RandomSampler,
    RandomSamplerOptions, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
};
