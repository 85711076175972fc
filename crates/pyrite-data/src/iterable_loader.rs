//! [`IterableDataLoader`]: the `DataLoader` of an [`IterableDataset`]. Each worker thread runs
//! its own pass over the dataset (which shards itself with [`get_worker_info`]), batches what it
//! reads and sends the batches back through a channel holding at most `prefetch_factor`; the
//! consumer takes one batch from each worker in turn, as PyTorch does, skipping workers that
//! have finished. Without workers the calling thread reads and batches.
//!
//! ```
//! use pyrite::data::{get_worker_info, DataLoaderOptions, IterableDataLoader, IterableDataset, Sample};
//! use pyrite::Result;
//! use std::sync::Arc;
//! /// 0..10, each worker reading every num_workers-th number.
//! struct Range;
//! impl IterableDataset for Range {
//!     fn iter(&self) -> Box<dyn Iterator<Item = Result<Sample>> + Send + '_> {
//!         let (id, n) = get_worker_info().map_or((0, 1), |w| (w.id, w.num_workers));
//!         Box::new((id..10).step_by(n).map(|i| Ok(Sample::Int(i as i64))))
//!     }
//! }
//! let loader = IterableDataLoader::new(Arc::new(Range), DataLoaderOptions { batch_size: Some(3), num_workers: 2, ..Default::default() })?;
//! let firsts: Vec<i64> = loader.iter()?.map(|b| b.and_then(|b| Ok(b.as_tensor()?.to_vec::<i64>()?[0]))).collect::<Result<_>>()?;
//! assert_eq!(firsts, [0, 1, 6, 7]); // worker 0: [0 2 4] [6 8]; worker 1: [1 3 5] [7 9]
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::collate::default_collate;
use crate::dataloader::{draw_seed, set_sample_generator, DataLoaderOptions, LiveWorkers};
use crate::dataset::{set_worker_info, IterableDataset, WorkerInfo};
use crate::sample::Sample;
use pyrite_core::{bail, err, Generator, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// `DataLoader(iterable_dataset, ...)`.
pub struct IterableDataLoader {
    dataset: Arc<dyn IterableDataset>,
    options: DataLoaderOptions,
}

impl IterableDataLoader {
    /// PyTorch's checks: an iterable dataset takes no sampler, shuffle or batch_sampler.
    pub fn new(dataset: Arc<dyn IterableDataset>, options: DataLoaderOptions) -> Result<IterableDataLoader> {
        let o = &options;
        if o.shuffle {
            bail!(
                Value,
                "DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle=true"
            );
        }
        if o.sampler.is_some() {
            bail!(Value, "DataLoader with IterableDataset: expected unspecified sampler option");
        }
        if o.batch_sampler.is_some() {
            bail!(Value, "DataLoader with IterableDataset: expected unspecified batch_sampler option");
        }
        crate::dataloader::check_common(o)?;
        Ok(IterableDataLoader { dataset, options })
    }

    /// The dataset the loader reads (`loader.dataset`).
    pub fn dataset(&self) -> &Arc<dyn IterableDataset> {
        &self.dataset
    }

    /// One pass over the dataset (one per worker with workers).
    pub fn iter(&self) -> Result<IterableLoaderIter<'_>> {
        let base_seed = draw_seed(self.options.generator.as_deref())?;
        let o = &self.options;
        if o.num_workers == 0 {
            return Ok(IterableLoaderIter {
                inner: Inner::Local(Reader::new(self.dataset.iter(), o, base_seed, 0)),
                loader: self,
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(LiveWorkers::default());
        let mut receivers = Vec::new();
        let mut threads = Vec::new();
        for id in 0..o.num_workers {
            let alive = live.enter();
            let (tx, rx) = sync_channel::<Result<Sample>>(o.prefetch_factor.unwrap_or(2).max(1) - 1);
            let (ds, stop, opts, n) = (self.dataset.clone(), stop.clone(), o.clone(), o.num_workers);
            let h = std::thread::Builder::new()
                .name(format!("pyrite-dataloader-{id}"))
                .spawn(move || {
                    let _alive = alive;
                    set_worker_info(Some(WorkerInfo {
                        id,
                        num_workers: n,
                        seed: base_seed.wrapping_add(id as u64),
                    }));
                    if let Some(f) = &opts.worker_init_fn
                        && let Err(p) = catch_unwind(AssertUnwindSafe(|| f(id)))
                    {
                        let _ = tx.send(Err(err!(
                            Value,
                            "DataLoader worker {id}: worker_init_fn panicked: {}",
                            panic_text(&*p)
                        )));
                        return;
                    }
                    let run = catch_unwind(AssertUnwindSafe(|| {
                        let mut reader = Reader::new(ds.iter(), &opts, base_seed, id as u64 + 1);
                        while !stop.load(Ordering::Relaxed) {
                            match reader.next() {
                                Some(b) => {
                                    let b = b.map_err(|e| err!(Value, "DataLoader worker {id}: {e}"));
                                    if tx.send(b).is_err() {
                                        return;
                                    }
                                }
                                None => return,
                            }
                        }
                    }));
                    if let Err(p) = run {
                        let _ = tx.send(Err(err!(
                            Value,
                            "DataLoader worker {id}: a panic while reading: {}",
                            panic_text(&*p)
                        )));
                    }
                })
                .map_err(|e| err!(Value, "DataLoader: could not start worker {id}: {e}"))?;
            receivers.push(Some(rx));
            threads.push(h);
        }
        Ok(IterableLoaderIter {
            inner: Inner::Workers { receivers, threads, live, stop, turn: 0 },
            loader: self,
        })
    }
}

/// The message of a caught panic.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Reads samples from one pass over the dataset and collates them into batches.
struct Reader<'a> {
    samples: Box<dyn Iterator<Item = Result<Sample>> + Send + 'a>,
    options: DataLoaderOptions,
    base_seed: u64,
    stream: u64,
    count: u64,
    done: bool,
}

impl<'a> Reader<'a> {
    fn new(
        samples: Box<dyn Iterator<Item = Result<Sample>> + Send + 'a>,
        o: &DataLoaderOptions,
        base_seed: u64,
        stream: u64,
    ) -> Reader<'a> {
        Reader { samples, options: o.clone(), base_seed, stream, count: 0, done: false }
    }

    /// The next sample, read with its own generator (seeded from the base seed, the worker and
    /// the sample's position in the worker's stream).
    fn sample(&mut self) -> Option<Result<Sample>> {
        let seed =
            crate::dataloader::sample_seed(self.base_seed ^ self.stream.rotate_left(32), self.count as usize);
        self.count += 1;
        set_sample_generator(Some(Arc::new(Generator::new(seed))));
        let s = catch_unwind(AssertUnwindSafe(|| self.samples.next()));
        set_sample_generator(None);
        match s {
            Ok(Some(Err(e))) => {
                Some(Err(err!(Value, "DataLoader: reading sample {} failed: {e}", self.count - 1)))
            }
            Ok(s) => s,
            Err(p) => {
                // The stream is in an unknown state after a panic: the pass ends with it.
                self.done = true;
                Some(Err(err!(
                    Value,
                    "DataLoader: a panic while reading sample {}: {}",
                    self.count - 1,
                    panic_text(&*p)
                )))
            }
        }
    }

    /// Collates `batch` with the loader's `collate_fn` (or [`default_collate`]); a panic in it
    /// is an error.
    fn collate(&self, batch: Vec<Sample>) -> Result<Sample> {
        let r = catch_unwind(AssertUnwindSafe(|| match &self.options.collate_fn {
            Some(f) => f(batch),
            None => default_collate(batch),
        }));
        r.unwrap_or_else(|p| Err(err!(Value, "DataLoader: a panic while collating: {}", panic_text(&*p))))
    }
}

impl Iterator for Reader<'_> {
    type Item = Result<Sample>;

    fn next(&mut self) -> Option<Result<Sample>> {
        if self.done {
            return None;
        }
        let Some(bs) = self.options.batch_size else {
            let s = self.sample()?;
            return Some(match &self.options.collate_fn {
                Some(_) => s.and_then(|s| self.collate(vec![s])),
                None => s,
            });
        };
        let mut batch = Vec::with_capacity(bs);
        while batch.len() < bs {
            match self.sample() {
                Some(Ok(s)) => batch.push(s),
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        if batch.is_empty() || (batch.len() < bs && self.options.drop_last) {
            return None;
        }
        Some(self.collate(batch))
    }
}

enum Inner<'a> {
    Local(Reader<'a>),
    Workers {
        receivers: Vec<Option<Receiver<Result<Sample>>>>,
        threads: Vec<JoinHandle<()>>,
        live: Arc<LiveWorkers>,
        stop: Arc<AtomicBool>,
        turn: usize,
    },
}

/// One pass of an [`IterableDataLoader`]: an iterator of `Result<batch>`.
pub struct IterableLoaderIter<'a> {
    inner: Inner<'a>,
    loader: &'a IterableDataLoader,
}

impl Iterator for IterableLoaderIter<'_> {
    type Item = Result<Sample>;

    fn next(&mut self) -> Option<Result<Sample>> {
        let timeout = self.loader.options.timeout;
        match &mut self.inner {
            Inner::Local(r) => r.next(),
            Inner::Workers { receivers, turn, .. } => loop {
                if receivers.iter().all(Option::is_none) {
                    return None;
                }
                let k = *turn % receivers.len();
                *turn += 1;
                let Some(rx) = &receivers[k] else { continue };
                let got = match timeout {
                    Some(t) => rx.recv_timeout(t).map_err(|e| e == RecvTimeoutError::Timeout),
                    None => rx.recv().map_err(|_| false),
                };
                match got {
                    Ok(b) => return Some(b),
                    Err(true) => {
                        let t = timeout.unwrap_or_default().as_secs_f64();
                        return Some(Err(err!(Value, "DataLoader timed out after {t} seconds")));
                    }
                    Err(false) => receivers[k] = None, // this worker's pass is over
                }
            },
        }
    }
}

impl Drop for IterableLoaderIter<'_> {
    fn drop(&mut self) {
        if let Inner::Workers { receivers, threads, live, stop, .. } = &mut self.inner {
            stop.store(true, Ordering::Relaxed);
            receivers.clear(); // a worker blocked on a full channel sees it closed
            live.shut_down(threads); // joins, detaching a worker stuck in the dataset
        }
    }
}
