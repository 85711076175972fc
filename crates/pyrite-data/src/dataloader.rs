//! [`DataLoader`] (`torch.utils.data.DataLoader`): batches of a map-style [`Dataset`] in the
//! order of a sampler, collated, fetched on the calling thread (`num_workers = 0`) or by worker
//! threads.
//!
//! Workers are threads, not processes: the dataset is shared by reference (an `Arc`), nothing is
//! pickled or copied. Batch `i` of an epoch goes to worker `i % num_workers`, as in PyTorch;
//! each worker has at most `prefetch_factor` batches in flight, so at most
//! `num_workers * prefetch_factor` batches are fetched ahead of the consumer. With `in_order`
//! (the default) batches come out in sampler order, otherwise as they are ready.
//!
//! Random augmentation is reproducible beyond PyTorch: before fetching sample `index`, the
//! fetching thread's [`sample_generator`] is seeded from the epoch's base seed and `index`, so
//! a transform that draws from it gives the same result for any `num_workers`. The base seed
//! comes from the loader's `generator` (or the global one), once per epoch, as PyTorch draws its
//! `_base_seed`; [`get_worker_info`] gives each worker PyTorch's `base_seed + id`.
//!
//! The loader keeps its position: [`DataLoader::state_dict`] says which epoch it is in, how many
//! batches were handed out, and the generator states at the start of the epoch;
//! [`DataLoader::load_state_dict`] on a fresh loader makes its next `iter()` continue that epoch
//! exactly (see [`DataLoaderState`]).
//!
//! An error in a worker reaches the consumer as an error naming the worker and the sample
//! index; a panic in a sample (or `collate_fn`) becomes such an error naming the sample, with or
//! without workers; `timeout` bounds each wait. Dropping the iterator mid-epoch stops its
//! workers (they check between samples) and joins them, waiting at most 0.1 s: a worker still
//! inside a sample then (a hung one) is detached, and ends by itself when the sample returns.
//!
//! ```
//! use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, TensorDataset};
//! use pyrite::{DType, Tensor};
//! use std::sync::Arc;
//! let x = Tensor::arange(0.0, 10.0, 1.0, DType::F32)?.reshape([10, 1])?;
//! let y = Tensor::arange(0.0, 10.0, 1.0, DType::I64)?;
//! let ds = Arc::new(TensorDataset::new(vec![x, y])?);
//! let loader = DataLoader::new(ds, DataLoaderOptions { batch_size: Some(4), num_workers: 2, ..Default::default() })?;
//! assert_eq!(loader.len(), 3);
//! let mut sizes = vec![];
//! for batch in loader.iter()? {
//!     let (xb, yb): (Tensor, Tensor) = batch?.try_into()?; // Python's `xb, yb = batch`
//!     sizes.push(xb.dims()[0]);
//!     assert_eq!(yb.dtype(), DType::I64);
//! }
//! assert_eq!(sizes, [4, 4, 2]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::collate::default_collate;
use crate::dataloader_state::DataLoaderState;
use crate::dataset::{set_worker_info, Dataset, WorkerInfo};
use crate::iterable_loader::panic_text;
use crate::sample::Sample;
use crate::sampler::{
    BatchSampler, BatchSampling, RandomSampler, RandomSamplerOptions, Sampler, SequentialSampler,
};
use pyrite_core::{bail, DType, Generator, Result, Tensor};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A `collate_fn`: turns the samples of one batch into the batch.
pub type CollateFn = Arc<dyn Fn(Vec<Sample>) -> Result<Sample> + Send + Sync>;
/// A `worker_init_fn`: called with the worker id in each worker thread before it fetches, once
/// per epoch (once in all for persistent workers), with
/// [`get_worker_info`](crate::get_worker_info) already set. A panic in it becomes the error of
/// each batch given to that worker (PyTorch re-raises the exception with the worker's first
/// batch); the other workers go on.
pub type WorkerInitFn = Arc<dyn Fn(usize) + Send + Sync>;

/// `DataLoader`'s keyword arguments, with PyTorch's defaults.
#[derive(Clone)]
pub struct DataLoaderOptions {
    /// Samples per batch; `None` turns batching off (each item is one sample, converted but not stacked).
    pub batch_size: Option<usize>,
    pub shuffle: bool,
    pub sampler: Option<Arc<dyn Sampler>>,
    pub batch_sampler: Option<Arc<dyn BatchSampling>>,
    /// Worker threads; 0 fetches on the calling thread.
    pub num_workers: usize,
    /// Defaults to [`default_collate`].
    pub collate_fn: Option<CollateFn>,
    /// Batches come in page-locked memory ([`pyrite_core::Tensor::pin_memory`]), whose copies
    /// to a GPU run at full bandwidth. Without a CUDA device it changes nothing (PyTorch warns
    /// that pinned memory won't be used).
    pub pin_memory: bool,
    pub drop_last: bool,
    /// How long to wait for a batch from the workers; `None` waits for ever.
    pub timeout: Option<Duration>,
    pub worker_init_fn: Option<WorkerInitFn>,
    /// Draws the shuffle order and each epoch's base seed.
    pub generator: Option<Arc<Generator>>,
    /// Batches in flight per worker (PyTorch's default: 2); only with `num_workers > 0`.
    pub prefetch_factor: Option<usize>,
    /// Keep the workers between epochs.
    pub persistent_workers: bool,
    /// Yield batches in sampler order (true) or as they are ready.
    pub in_order: bool,
}

impl Default for DataLoaderOptions {
    fn default() -> Self {
        DataLoaderOptions {
            batch_size: Some(1),
            shuffle: false,
            sampler: None,
            batch_sampler: None,
            num_workers: 0,
            collate_fn: None,
            pin_memory: false,
            drop_last: false,
            timeout: None,
            worker_init_fn: None,
            generator: None,
            prefetch_factor: None,
            persistent_workers: false,
            in_order: true,
        }
    }
}

thread_local! {
    static SAMPLE_GEN: RefCell<Option<Arc<Generator>>> = const { RefCell::new(None) };
}

/// The generator of the sample being fetched on this thread: seeded from the epoch's base seed
/// and the sample's index, so random transforms that draw from it are reproducible for any
/// number of workers. Outside a loader it is `None` (draw from the global generator then).
pub fn sample_generator() -> Option<Arc<Generator>> {
    SAMPLE_GEN.with(|g| g.borrow().clone())
}

pub(crate) fn set_sample_generator(g: Option<Arc<Generator>>) {
    SAMPLE_GEN.with(|s| *s.borrow_mut() = g);
}

pub(crate) fn sample_seed(base_seed: u64, index: usize) -> u64 {
    // splitmix64 of the pair: distinct, well-mixed seeds per (epoch seed, index).
    let mut z = base_seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What a loader fetches: the dataset, how to collate, whether batching is on.
struct Fetcher {
    dataset: Arc<dyn Dataset>,
    collate: Option<CollateFn>,
    /// Pin each batch's tensors (`pin_memory` with a CUDA device).
    pin: bool,
    batching: bool,
}

impl Fetcher {
    /// Fetches and collates the samples `indices` (one batch), each with its own generator.
    fn fetch(&self, indices: &[usize], base_seed: u64, stop: Option<&AtomicBool>) -> Result<Sample> {
        let mut samples = Vec::with_capacity(indices.len());
        for &i in indices {
            if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                bail!(Value, "DataLoader: stopped");
            }
            set_sample_generator(Some(Arc::new(Generator::new(sample_seed(base_seed, i)))));
            // Each sample on its own: a panic names its index, and the thread's sample
            // generator is cleared whatever happened.
            let r = catch_unwind(AssertUnwindSafe(|| self.dataset.get(i)));
            set_sample_generator(None);
            match r {
                Ok(Ok(s)) => samples.push(s),
                Ok(Err(e)) => bail!(Value, "DataLoader: fetching sample {i} failed: {e}"),
                Err(p) => bail!(Value, "DataLoader: a panic while fetching sample {i}: {}", panic_text(&*p)),
            }
        }
        let collated = catch_unwind(AssertUnwindSafe(|| {
            if !self.batching {
                let s = samples.pop().expect("one index per item without batching");
                return match &self.collate {
                    Some(f) => f(vec![s]),
                    None => Ok(s),
                };
            }
            match &self.collate {
                Some(f) => f(samples),
                None => default_collate(samples),
            }
        }));
        let batch = collated.unwrap_or_else(|p| {
            Err(pyrite_core::err!(
                Value,
                "DataLoader: a panic while collating the samples {indices:?}: {}",
                panic_text(&*p)
            ))
        })?;
        if self.pin {
            return batch.map_tensors(&mut |t| t.pin_memory());
        }
        Ok(batch)
    }
}

/// `torch.utils.data.DataLoader` over a map-style dataset.
pub struct DataLoader {
    fetcher: Arc<Fetcher>,
    batches: Arc<dyn BatchSampling>,
    /// The index sampler the batches are made from (none with a `batch_sampler`).
    sampler: Option<Arc<dyn Sampler>>,
    options: DataLoaderOptions,
    pool: Mutex<Option<WorkerPool>>,
    progress: Mutex<Progress>,
}

/// Where the loader is in its epochs (for [`DataLoader::state_dict`]).
#[derive(Default)]
struct Progress {
    /// Epochs begun by `iter()`.
    epochs_begun: u64,
    /// Batches of the latest epoch handed out.
    yielded: usize,
    /// The latest epoch's start: generator states before its draws, and its base seed.
    start: Option<EpochStart>,
    /// The seed the current worker pool was started with.
    worker_seed: Option<u64>,
    /// A mid-epoch state loaded by `load_state_dict`, replayed by the next `iter()`.
    resume: Option<DataLoaderState>,
    /// The worker seed of a loaded state, for the next pool started.
    resume_worker_seed: Option<u64>,
}

#[derive(Clone)]
struct EpochStart {
    generator: Option<Vec<u8>>,
    sampler_generator: Option<Vec<u8>>,
    global_generator: Vec<u8>,
    base_seed: u64,
}

impl DataLoader {
    /// A loader with PyTorch's checks of which options go together.
    pub fn new(dataset: Arc<dyn Dataset>, options: DataLoaderOptions) -> Result<DataLoader> {
        let o = &options;
        check_common(o)?;
        if o.sampler.is_some() && o.shuffle {
            bail!(Value, "DataLoader: sampler option is mutually exclusive with shuffle");
        }
        if o.batch_sampler.is_some()
            && (o.batch_size != Some(1) || o.shuffle || o.sampler.is_some() || o.drop_last)
        {
            bail!(Value, "DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last");
        }
        let n = dataset.len();
        let sampler: Arc<dyn Sampler> = match (&o.sampler, o.shuffle) {
            (Some(s), _) => s.clone(),
            (None, true) => {
                // The shuffle order comes from its own generator, seeded from the loader's.
                let generator = match &o.generator {
                    Some(g) => Some(Generator::new(draw_seed(Some(g))?)),
                    None => None,
                };
                Arc::new(RandomSampler::with_options(
                    n,
                    RandomSamplerOptions { generator, ..Default::default() },
                )?)
            }
            (None, false) => Arc::new(SequentialSampler::new(n)),
        };
        let batches: Arc<dyn BatchSampling> = match (&o.batch_sampler, o.batch_size) {
            (Some(b), _) => b.clone(),
            (None, Some(bs)) => Arc::new(BatchSampler::new(sampler.clone(), bs, o.drop_last)?),
            (None, None) => Arc::new(BatchSampler::new(sampler.clone(), 1, false)?),
        };
        let sampler = o.batch_sampler.is_none().then_some(sampler);
        let batching = o.batch_size.is_some() || o.batch_sampler.is_some();
        let pin = o.pin_memory && pyrite_core::cuda_is_available();
        let fetcher = Arc::new(Fetcher { dataset, collate: o.collate_fn.clone(), pin, batching });
        Ok(DataLoader {
            fetcher,
            batches,
            sampler,
            options,
            pool: Mutex::new(None),
            progress: Mutex::new(Progress::default()),
        })
    }

    /// A loader like this one in batches of `batch_size`: the same dataset, options and index
    /// sampler (a shuffling loader's own generator included), so its epochs take the samples
    /// in the order this loader would have, only batched differently; it starts at an epoch's
    /// beginning. What a tuner uses to change the batch size of a loader it was given. An
    /// error for a loader built with a `batch_sampler` or without batching.
    pub fn with_batch_size(&self, batch_size: usize) -> Result<DataLoader> {
        let (Some(sampler), Some(_)) = (&self.sampler, self.options.batch_size) else {
            bail!(Value, "DataLoader: with_batch_size needs a loader built with a batch_size (not a batch_sampler, nor batch_size None)");
        };
        let batches = Arc::new(BatchSampler::new(sampler.clone(), batch_size, self.options.drop_last)?);
        Ok(DataLoader {
            fetcher: self.fetcher.clone(),
            batches,
            sampler: Some(sampler.clone()),
            options: DataLoaderOptions { batch_size: Some(batch_size), ..self.options.clone() },
            pool: Mutex::new(None),
            progress: Mutex::new(Progress::default()),
        })
    }

    /// The dataset the loader reads (`loader.dataset`).
    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.fetcher.dataset
    }

    /// The options the loader was built with (to build a like one, e.g. without shuffling).
    pub fn options(&self) -> &DataLoaderOptions {
        &self.options
    }

    /// The number of batches per epoch (`len(loader)`).
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One epoch: draws the order and the base seed, then yields the batches. After
    /// [`DataLoader::load_state_dict`] of a mid-epoch state, it continues that epoch instead.
    pub fn iter(&self) -> Result<DataLoaderIter<'_>> {
        let mut progress = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        let resume = progress.resume.take();
        let worker_seed = progress.resume_worker_seed.take();
        let (start, batches, skip) = match resume {
            Some(state) => {
                let (start, batches) = self.replay_epoch_start(&state)?;
                (start, batches, state.batches_yielded)
            }
            None => {
                let global = pyrite_core::default_generator();
                let generator = self.options.generator.as_ref().map(|g| g.get_state_bytes());
                let sampler_generator = self.batches.generator().map(|g| g.get_state_bytes());
                let global_generator = global.get_state_bytes();
                let base_seed = draw_seed(self.options.generator.as_deref())?;
                let batches = self.batches.batches()?;
                progress.epochs_begun += 1;
                let start = EpochStart { generator, sampler_generator, global_generator, base_seed };
                (start, batches, 0)
            }
        };
        let base_seed = start.base_seed;
        progress.start = Some(start);
        progress.yielded = skip;
        let epoch_id = progress.epochs_begun;
        let mut it = DataLoaderIter {
            loader: self,
            batches,
            base_seed,
            epoch_id,
            next_send: skip,
            next_yield: skip,
            received: BTreeMap::new(),
            in_flight: 0,
            pool: None,
        };
        if self.options.num_workers > 0 {
            let persistent = self.options.persistent_workers;
            let pool =
                if persistent { self.pool.lock().unwrap_or_else(|e| e.into_inner()).take() } else { None };
            it.pool = Some(match pool {
                Some(p) => p,
                None => {
                    let seed = worker_seed.unwrap_or(base_seed);
                    progress.worker_seed = Some(seed);
                    WorkerPool::start(self.fetcher.clone(), &self.options, seed)?
                }
            });
            it.pool.as_mut().unwrap().epoch += 1;
            drop(progress);
            it.fill()?;
        }
        Ok(it)
    }

    /// Draws a saved epoch's base seed and order again from the generator states at its
    /// start; the global generator is put back as it was found.
    fn replay_epoch_start(&self, state: &DataLoaderState) -> Result<(EpochStart, Vec<Vec<usize>>)> {
        let global = pyrite_core::default_generator();
        let now = global.get_state_bytes();
        let Some(global_start) = state.global_generator.clone() else {
            bail!(Value, "DataLoader.load_state_dict: a mid-epoch state needs 'global_generator'");
        };
        // The global generator is only rewound when the draws may use it (no loader generator,
        // or a sampler without one of its own), as other threads may be drawing from it.
        let uses_global = self.options.generator.is_none() || self.batches.generator().is_none();
        if uses_global {
            global.set_state_bytes(&global_start)?;
        }
        let drawn = (|| -> Result<(u64, Vec<Vec<usize>>)> {
            if let (Some(g), Some(bytes)) = (&self.options.generator, &state.generator) {
                g.set_state_bytes(bytes)?;
            }
            if let (Some(g), Some(bytes)) = (self.batches.generator(), &state.sampler_generator) {
                g.set_state_bytes(bytes)?;
            }
            Ok((draw_seed(self.options.generator.as_deref())?, self.batches.batches()?))
        })();
        if uses_global {
            global.set_state_bytes(&now)?;
        }
        let (base_seed, batches) = drawn?;
        if base_seed != state.base_seed {
            bail!(
                Value,
                "DataLoader.load_state_dict: the epoch's base seed drawn again ({base_seed}) differs from the saved one ({}): the loader's generator or sampler is not the one the state was saved from",
                state.base_seed
            );
        }
        let start = EpochStart {
            generator: state.generator.clone(),
            sampler_generator: state.sampler_generator.clone(),
            global_generator: global_start,
            base_seed,
        };
        Ok((start, batches))
    }

    /// The loader's position (torchdata's `StatefulDataLoader.state_dict()`): mid-epoch, the
    /// epoch and the batches handed out so far with the generator states at the epoch's start;
    /// between epochs (none begun, or the last one fully handed out), the generator states now.
    pub fn state_dict(&self) -> DataLoaderState {
        let p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = &p.resume {
            return r.clone();
        }
        let num_batches = self.len();
        match &p.start {
            Some(start) if p.yielded < num_batches => DataLoaderState {
                epoch: p.epochs_begun - 1,
                mid_epoch: true,
                batches_yielded: p.yielded,
                num_batches,
                generator: start.generator.clone(),
                sampler_generator: start.sampler_generator.clone(),
                global_generator: Some(start.global_generator.clone()),
                base_seed: start.base_seed,
                worker_seed: p.worker_seed,
            },
            _ => DataLoaderState {
                epoch: p.epochs_begun,
                mid_epoch: false,
                batches_yielded: 0,
                num_batches,
                generator: self.options.generator.as_ref().map(|g| g.get_state_bytes()),
                sampler_generator: self.batches.generator().map(|g| g.get_state_bytes()),
                global_generator: None,
                base_seed: 0,
                // A persistent pool lives on into the next epoch with its seed.
                worker_seed: if self.options.persistent_workers {
                    p.worker_seed.or(p.resume_worker_seed)
                } else {
                    None
                },
            },
        }
    }

    /// Restores a position saved by [`DataLoader::state_dict`] on a loader built with the same
    /// dataset and options (torchdata's `load_state_dict`). Mid-epoch, the next `iter()`
    /// continues that epoch: it draws the order and the base seed again from the saved
    /// generator states, skips the batches already handed out without fetching them, and
    /// yields the rest. Between epochs, the generators are set and the next `iter()` starts
    /// the next epoch. Workers of a persistent loader are restarted.
    ///
    /// The global generator is left as it is: restore it separately
    /// (`pyrite::set_rng_state`), as a checkpoint's `rng_state`.
    pub fn load_state_dict(&self, state: &DataLoaderState) -> Result<()> {
        let num_batches = self.len();
        if state.num_batches != num_batches {
            bail!(
                Value,
                "DataLoader.load_state_dict: the state is for {} batches per epoch, this loader has {num_batches}",
                state.num_batches
            );
        }
        if state.batches_yielded > num_batches {
            bail!(
                Value,
                "DataLoader.load_state_dict: batches_yielded ({}) exceeds the batches per epoch ({num_batches})",
                state.batches_yielded
            );
        }
        if state.generator.is_some() != self.options.generator.is_some() {
            bail!(
                Value,
                "DataLoader.load_state_dict: the state {} a loader generator, this loader {}",
                if state.generator.is_some() { "has" } else { "has no" },
                if self.options.generator.is_some() { "has one" } else { "has none" }
            );
        }
        if state.sampler_generator.is_some() != self.batches.generator().is_some() {
            bail!(
                Value,
                "DataLoader.load_state_dict: the state {} a sampler generator, this loader's sampler {}",
                if state.sampler_generator.is_some() { "has" } else { "has no" },
                if self.batches.generator().is_some() { "has one" } else { "has none" }
            );
        }
        if state.mid_epoch && state.global_generator.is_none() {
            bail!(Value, "DataLoader.load_state_dict: a mid-epoch state needs 'global_generator'");
        }
        // Workers restart: their seed comes from the state.
        *self.pool.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        p.start = None;
        p.yielded = 0;
        p.worker_seed = None;
        p.resume_worker_seed = state.worker_seed;
        if state.mid_epoch {
            p.epochs_begun = state.epoch + 1;
            p.resume = Some(state.clone());
        } else {
            if let (Some(g), Some(bytes)) = (&self.options.generator, &state.generator) {
                g.set_state_bytes(bytes)?;
            }
            if let (Some(g), Some(bytes)) = (self.batches.generator(), &state.sampler_generator) {
                g.set_state_bytes(bytes)?;
            }
            p.epochs_begun = state.epoch;
            p.resume = None;
        }
        Ok(())
    }

    /// Counts one more batch of epoch `epoch_id` as handed out.
    fn count_yielded(&self, epoch_id: u64) {
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        if p.epochs_begun == epoch_id && p.resume.is_none() {
            p.yielded += 1;
        }
    }
}

/// The checks shared by map-style and iterable loaders.
pub(crate) fn check_common(o: &DataLoaderOptions) -> Result<()> {
    if o.num_workers == 0 && o.prefetch_factor.is_some() {
        bail!(Value, "DataLoader: prefetch_factor option could only be specified in multiprocessing. let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.");
    }
    if o.prefetch_factor == Some(0) {
        bail!(Value, "DataLoader: prefetch_factor should be at least 1");
    }
    if o.persistent_workers && o.num_workers == 0 {
        bail!(Value, "DataLoader: persistent_workers option needs num_workers > 0");
    }
    if o.batch_size.is_none() && o.drop_last {
        bail!(Value, "DataLoader: batch_size=None option disables auto-batching and is mutually exclusive with drop_last");
    }
    if o.batch_size == Some(0) {
        bail!(Value, "DataLoader: batch_size should be a positive integer value, but got batch_size=0");
    }
    Ok(())
}

/// Draws a base seed from `g` (or the global generator), as PyTorch draws `_base_seed`.
pub(crate) fn draw_seed(g: Option<&Generator>) -> Result<u64> {
    let t = Tensor::randint_with(0, i64::MAX, [1], DType::I64, g)?;
    Ok(t.to_vec::<i64>()?[0] as u64)
}

struct Task {
    epoch: u64,
    batch: usize,
    indices: Vec<usize>,
    base_seed: u64,
}

struct Done {
    epoch: u64,
    batch: usize,
    worker: usize,
    result: Result<Sample>,
}

/// The worker threads of a loader: one task channel each, one shared result channel.
struct WorkerPool {
    tasks: Vec<Sender<Task>>,
    results: Receiver<Done>,
    threads: Vec<JoinHandle<()>>,
    live: Arc<LiveWorkers>,
    stop: Arc<AtomicBool>,
    /// Tasks whose results have not been received (across epochs: a persistent pool drains
    /// the previous epoch's leftovers by this tag).
    epoch: u64,
    pending: usize,
    prefetch: usize,
}

impl WorkerPool {
    /// Starts the workers; worker `id` gets PyTorch's seed `base_seed + id` in its
    /// `WorkerInfo` (no extra draw: the loader's generator advances the same with or without
    /// workers, so a seed gives the same epochs for any `num_workers`).
    fn start(fetcher: Arc<Fetcher>, o: &DataLoaderOptions, worker_seed: u64) -> Result<WorkerPool> {
        let (done_tx, results) = channel::<Done>();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        let mut threads = Vec::new();
        let live = Arc::new(LiveWorkers::default());
        for id in 0..o.num_workers {
            let (tx, rx) = channel::<Task>();
            let (fetcher, done_tx, stop) = (fetcher.clone(), done_tx.clone(), stop.clone());
            let alive = live.enter();
            let init = o.worker_init_fn.clone();
            let n = o.num_workers;
            let h = std::thread::Builder::new()
                .name(format!("pyrite-dataloader-{id}"))
                .spawn(move || {
                    let _alive = alive;
                    set_worker_info(Some(WorkerInfo {
                        id,
                        num_workers: n,
                        seed: worker_seed.wrapping_add(id as u64),
                    }));
                    let init_error = match &init {
                        Some(f) => catch_unwind(AssertUnwindSafe(|| f(id))).err().map(|p| panic_text(&*p)),
                        None => None,
                    };
                    while let Ok(task) = rx.recv() {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let r = match &init_error {
                            Some(msg) => Ok(Err(pyrite_core::err!(Value, "worker_init_fn panicked: {msg}"))),
                            None => catch_unwind(AssertUnwindSafe(|| {
                                fetcher.fetch(&task.indices, task.base_seed, Some(&stop))
                            })),
                        };
                        // `fetch` turns panics of user code into errors; this one is a net.
                        let result = match r {
                            Ok(r) => r,
                            Err(p) => Err(pyrite_core::err!(
                                Value,
                                "DataLoader: a panic while fetching batch {} (indices {:?}): {}",
                                task.batch,
                                task.indices,
                                panic_text(&*p)
                            )),
                        };
                        if done_tx
                            .send(Done { epoch: task.epoch, batch: task.batch, worker: id, result })
                            .is_err()
                        {
                            break;
                        }
                    }
                })
                .map_err(|e| pyrite_core::err!(Value, "DataLoader: could not start worker {id}: {e}"))?;
            tasks.push(tx);
            threads.push(h);
        }
        Ok(WorkerPool {
            tasks,
            results,
            threads,
            live,
            stop,
            epoch: 0,
            pending: 0,
            prefetch: o.prefetch_factor.unwrap_or(2),
        })
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tasks.clear(); // closes the task channels: idle workers return
        self.live.shut_down(&mut self.threads);
    }
}

/// How long dropping a loader's iterator waits for its workers to return before it detaches
/// those still inside user code (PyTorch waits 5 s, then terminates worker processes).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_millis(100);

/// The number of a loader's worker threads still running, so that shutting down can wait for
/// them a little without joining one stuck in a sample.
#[derive(Default)]
pub(crate) struct LiveWorkers {
    count: Mutex<usize>,
    exited: Condvar,
}

/// Held by a worker thread while it runs; counts it out when dropped (on return or panic).
pub(crate) struct Alive(Arc<LiveWorkers>);

impl Drop for Alive {
    fn drop(&mut self) {
        let mut n = self.0.count.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        self.0.exited.notify_all();
    }
}

impl LiveWorkers {
    /// Counts in a worker about to start; its thread holds the guard.
    pub(crate) fn enter(self: &Arc<Self>) -> Alive {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Alive(self.clone())
    }

    /// After the workers were told to stop: waits up to [`SHUTDOWN_GRACE`] for them to return
    /// and joins them; a worker still in user code after that (a hung sample) is detached. It
    /// holds only its own handles to the dataset and to channels whose other ends are gone,
    /// so when the sample returns it sees the stop, fails to send and ends: no harm done.
    pub(crate) fn shut_down(&self, threads: &mut Vec<JoinHandle<()>>) {
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        let mut n = self.count.lock().unwrap_or_else(|e| e.into_inner());
        while *n > 0 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            n = self.exited.wait_timeout(n, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        let all_out = *n == 0;
        drop(n);
        for h in threads.drain(..) {
            if all_out || h.is_finished() {
                let _ = h.join();
            } // else: dropping the handle detaches the thread
        }
    }
}

/// One epoch of a [`DataLoader`]: an iterator of `Result<batch>`.
pub struct DataLoaderIter<'a> {
    loader: &'a DataLoader,
    batches: Vec<Vec<usize>>,
    base_seed: u64,
    /// Which epoch of the loader this is (for its progress).
    epoch_id: u64,
    next_send: usize,
    next_yield: usize,
    received: BTreeMap<usize, (usize, Result<Sample>)>,
    in_flight: usize,
    pool: Option<WorkerPool>,
}

impl DataLoaderIter<'_> {
    /// Sends batches to their workers until each has `prefetch_factor` in flight.
    fn fill(&mut self) -> Result<()> {
        let Some(pool) = self.pool.as_mut() else { return Ok(()) };
        let workers = pool.tasks.len();
        while self.next_send < self.batches.len() && self.in_flight < workers * pool.prefetch {
            let b = self.next_send;
            let task = Task {
                epoch: pool.epoch,
                batch: b,
                indices: self.batches[b].clone(),
                base_seed: self.base_seed,
            };
            if pool.tasks[b % workers].send(task).is_err() {
                bail!(Value, "DataLoader: worker {} exited unexpectedly", b % workers);
            }
            self.next_send += 1;
            self.in_flight += 1;
            pool.pending += 1;
        }
        Ok(())
    }

    /// Yields a received batch: it stops counting as in flight (a batch waiting in the
    /// reorder buffer still counts, as in PyTorch), and the next batch is sent.
    fn hand_out(&mut self, worker: usize, r: Result<Sample>) -> Result<Sample> {
        self.next_yield += 1;
        self.loader.count_yielded(self.epoch_id);
        self.in_flight -= 1;
        self.fill()?;
        r.map_err(|e| pyrite_core::err!(Value, "DataLoader worker {worker}: {e}"))
    }

    fn next_from_workers(&mut self) -> Option<Result<Sample>> {
        let in_order = self.loader.options.in_order;
        loop {
            if in_order && let Some((w, r)) = self.received.remove(&self.next_yield) {
                return Some(self.hand_out(w, r));
            }
            if self.next_yield >= self.batches.len() {
                return None;
            }
            let pool = self.pool.as_mut()?;
            let got = match self.loader.options.timeout {
                Some(t) => pool.results.recv_timeout(t).map_err(|e| match e {
                    RecvTimeoutError::Timeout => {
                        pyrite_core::err!(Value, "DataLoader timed out after {} seconds", t.as_secs_f64())
                    }
                    RecvTimeoutError::Disconnected => {
                        pyrite_core::err!(Value, "DataLoader: the workers exited unexpectedly")
                    }
                }),
                None => pool
                    .results
                    .recv()
                    .map_err(|_| pyrite_core::err!(Value, "DataLoader: the workers exited unexpectedly")),
            };
            let done = match got {
                Ok(d) => d,
                Err(e) => {
                    self.next_yield = self.batches.len(); // the epoch ends with this error
                    return Some(Err(e));
                }
            };
            pool.pending -= 1;
            if done.epoch != pool.epoch {
                continue; // a leftover of an earlier epoch of a persistent pool
            }
            if in_order {
                self.received.insert(done.batch, (done.worker, done.result));
            } else {
                return Some(self.hand_out(done.worker, done.result));
            }
        }
    }
}

impl Iterator for DataLoaderIter<'_> {
    type Item = Result<Sample>;

    fn next(&mut self) -> Option<Result<Sample>> {
        // The profiler's range for fetching one batch, named as PyTorch names it.
        let _prof = pyrite_core::profiler_record::record_function(if self.pool.is_some() {
            "enumerate(DataLoader)#_MultiProcessDataLoaderIter.__next__"
        } else {
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
        });
        if self.pool.is_some() {
            return self.next_from_workers();
        }
        let b = self.batches.get(self.next_yield)?;
        self.next_yield += 1;
        let r = self.loader.fetcher.fetch(b, self.base_seed, None);
        self.loader.count_yielded(self.epoch_id);
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.batches.len() - self.next_yield;
        (left, Some(left))
    }
}

impl Drop for DataLoaderIter<'_> {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else { return };
        if self.loader.options.persistent_workers && pool.pending == 0 {
            // Keep the workers for the next epoch.
            *self.loader.pool.lock().unwrap_or_else(|e| e.into_inner()) = Some(pool);
        }
        // Otherwise the pool's drop stops and joins the workers, detaching any stuck in a
        // sample (a persistent loader whose epoch was cut short starts fresh workers next
        // epoch).
    }
}
