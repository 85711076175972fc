//! Samplers (`torch.utils.data.Sampler` and friends): what order a map-style dataset is read
//! in, one epoch at a time.
//!
//! A [`Sampler`] gives the indices of one epoch; random samplers draw a new order at each call.
//! A [`BatchSampling`] sampler (such as [`BatchSampler`]) gives batches of indices. PyTorch's
//! samplers are here with its semantics: [`SequentialSampler`], [`RandomSampler`],
//! [`SubsetRandomSampler`], [`WeightedRandomSampler`], [`BatchSampler`] and
//! [`DistributedSampler`].
//!
//! Our random numbers come from Pyrite's Philox generator, not PyTorch's Mersenne Twister, so
//! the orders differ from PyTorch's for the same seed; the arithmetic around them (cycling,
//! padding, striding, lengths) is PyTorch's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pyrite_core::{bail, default_generator, DType, Generator, Result, Tensor};

/// A sampler (`torch.utils.data.Sampler`): the dataset indices of an epoch.
pub trait Sampler: Send + Sync {
    /// The indices of one epoch (call again for the next epoch; random samplers draw anew).
    fn indices(&self) -> Result<Vec<usize>>;
    /// The number of indices per epoch (`len(sampler)`).
    fn len(&self) -> usize;
    /// Whether an epoch has no indices.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The sampler's own generator, if it has one: `DataLoader::state_dict` records its state
    /// at the start of an epoch so that a resumed loader draws the same order. A sampler that
    /// draws from a generator of its own must return it here to be resumable.
    fn generator(&self) -> Option<&Generator> {
        None
    }
}

impl<S: Sampler + ?Sized> Sampler for Arc<S> {
    fn indices(&self) -> Result<Vec<usize>> {
        (**self).indices()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    fn generator(&self) -> Option<&Generator> {
        (**self).generator()
    }
}

impl<S: Sampler + ?Sized> Sampler for Box<S> {
    fn indices(&self) -> Result<Vec<usize>> {
        (**self).indices()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    fn generator(&self) -> Option<&Generator> {
        (**self).generator()
    }
}

/// A batch sampler (PyTorch's `batch_sampler=` argument): the index batches of an epoch.
pub trait BatchSampling: Send + Sync {
    /// The batches of one epoch (call again for the next epoch).
    fn batches(&self) -> Result<Vec<Vec<usize>>>;
    /// The number of batches per epoch (`len(batch_sampler)`).
    fn len(&self) -> usize;
    /// Whether an epoch has no batches.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The generator this batch sampler (or the sampler inside it) draws from, if it has its
    /// own; see [`Sampler::generator`].
    fn generator(&self) -> Option<&Generator> {
        None
    }
}

fn to_indices(t: &Tensor) -> Result<Vec<usize>> {
    Ok(t.to_vec::<i64>()?.into_iter().map(|i| i as usize).collect())
}

fn randperm(n: usize, generator: Option<&Generator>) -> Result<Vec<usize>> {
    to_indices(&Tensor::randperm_with(n, generator)?)
}

/// `0..len` in order (`torch.utils.data.SequentialSampler`).
#[derive(Clone, Debug)]
pub struct SequentialSampler {
    len: usize,
}

impl SequentialSampler {
    /// Samples `0..len` in order.
    pub fn new(len: usize) -> SequentialSampler {
        SequentialSampler { len }
    }
}

impl Sampler for SequentialSampler {
    fn indices(&self) -> Result<Vec<usize>> {
        Ok((0..self.len).collect())
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// Options of a [`RandomSampler`] (PyTorch's keyword arguments).
#[derive(Clone, Debug, Default)]
pub struct RandomSamplerOptions {
    /// Draw with replacement (default `false`).
    pub replacement: bool,
    /// Indices per epoch; default the dataset's length.
    pub num_samples: Option<usize>,
    /// The generator; default one seeded afresh from the global generator at each epoch.
    pub generator: Option<Generator>,
}

/// Random order (`torch.utils.data.RandomSampler`).
///
/// Without replacement an epoch is a permutation of `0..len`; with `num_samples > len` it is
/// several permutations one after another, the last one truncated (PyTorch's arithmetic).
/// With replacement it is `num_samples` uniform draws in `0..len`. Without a generator each
/// epoch draws a seed from the global generator (as PyTorch does), so `manual_seed` makes
/// epochs reproducible.
#[derive(Clone, Debug)]
pub struct RandomSampler {
    data_len: usize,
    replacement: bool,
    num_samples: usize,
    generator: Option<Generator>,
}

impl RandomSampler {
    /// A permutation of `0..data_len` per epoch.
    pub fn new(data_len: usize) -> Result<RandomSampler> {
        RandomSampler::with_options(data_len, RandomSamplerOptions::default())
    }

    /// A sampler with PyTorch's options; `num_samples` (or the length when it is `None`) must
    /// be positive.
    pub fn with_options(data_len: usize, options: RandomSamplerOptions) -> Result<RandomSampler> {
        let num_samples = options.num_samples.unwrap_or(data_len);
        if num_samples == 0 {
            bail!(Value, "num_samples should be a positive integer value, but got num_samples={num_samples}");
        }
        Ok(RandomSampler {
            data_len,
            replacement: options.replacement,
            num_samples,
            generator: options.generator,
        })
    }

    /// Whether it draws with replacement.
    pub fn replacement(&self) -> bool {
        self.replacement
    }

    /// The generator it draws from, if one was given.
    pub fn generator(&self) -> Option<&Generator> {
        self.generator.as_ref()
    }
}

/// PyTorch's `int(torch.empty((), dtype=torch.int64).random_().item())`: a seed in
/// `[0, 2^63)` drawn from the global generator.
fn seed_from_global() -> Result<u64> {
    let t = Tensor::zeros(Vec::<usize>::new(), DType::I64)?;
    t.random_(0, None, Some(default_generator()))?;
    Ok(t.item::<i64>()? as u64)
}

impl Sampler for RandomSampler {
    fn indices(&self) -> Result<Vec<usize>> {
        let n = self.data_len;
        let fresh;
        let generator = match &self.generator {
            Some(g) => g,
            None => {
                fresh = Generator::new(seed_from_global()?);
                &fresh
            }
        };
        let mut out = Vec::with_capacity(self.num_samples);
        if self.replacement {
            if n == 0 {
                bail!(Value, "RandomSampler: cannot draw with replacement from an empty dataset");
            }
            let high = i64::try_from(n).unwrap_or(i64::MAX);
            // PyTorch draws in chunks of 32.
            let mut left = self.num_samples;
            while left > 0 {
                let k = left.min(32);
                out.extend(to_indices(&Tensor::randint_with(0, high, k, DType::I64, Some(generator))?)?);
                left -= k;
            }
        } else {
            if n == 0 {
                bail!(Value, "RandomSampler: cannot draw {} samples from an empty dataset", self.num_samples);
            }
            for _ in 0..self.num_samples / n {
                out.extend(randperm(n, Some(generator))?);
            }
            let rest = self.num_samples % n;
            if rest > 0 {
                out.extend(randperm(n, Some(generator))?.into_iter().take(rest));
            }
        }
        Ok(out)
    }
    fn len(&self) -> usize {
        self.num_samples
    }
    fn generator(&self) -> Option<&Generator> {
        self.generator.as_ref()
    }
}

/// The given indices in random order (`torch.utils.data.SubsetRandomSampler`): each epoch is
/// a new permutation of them, drawn from `generator` (the global generator when `None`).
#[derive(Clone, Debug)]
pub struct SubsetRandomSampler {
    indices: Vec<usize>,
    generator: Option<Generator>,
}

impl SubsetRandomSampler {
    /// Samples `indices` in a random order.
    pub fn new(indices: Vec<usize>, generator: Option<Generator>) -> SubsetRandomSampler {
        SubsetRandomSampler { indices, generator }
    }
}

impl Sampler for SubsetRandomSampler {
    fn indices(&self) -> Result<Vec<usize>> {
        let perm = randperm(self.indices.len(), self.generator.as_ref())?;
        Ok(perm.into_iter().map(|i| self.indices[i]).collect())
    }
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn generator(&self) -> Option<&Generator> {
        self.generator.as_ref()
    }
}

/// Indices `0..weights.len()` drawn with probabilities proportional to `weights`
/// (`torch.utils.data.WeightedRandomSampler`), with `torch.multinomial` on float64 weights.
/// Without replacement no index repeats within an epoch; an index of weight 0 is never drawn.
#[derive(Clone, Debug)]
pub struct WeightedRandomSampler {
    weights: Tensor,
    num_samples: usize,
    replacement: bool,
    generator: Option<Generator>,
}

impl WeightedRandomSampler {
    /// `num_samples` indices per epoch, drawn from `generator` (the global generator when
    /// `None`). Errors when `num_samples` is 0, a weight is negative or not finite, the weights
    /// are empty or all zero, or (without replacement) fewer than `num_samples` weights are
    /// positive.
    pub fn new(
        weights: Vec<f64>,
        num_samples: usize,
        replacement: bool,
        generator: Option<Generator>,
    ) -> Result<WeightedRandomSampler> {
        if num_samples == 0 {
            bail!(Value, "num_samples should be a positive integer value, but got num_samples={num_samples}");
        }
        if let Some(w) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
            bail!(Value, "WeightedRandomSampler: weights must be finite and non-negative, got {w}");
        }
        let positive = weights.iter().filter(|w| **w > 0.0).count();
        if positive == 0 {
            bail!(
                Value,
                "WeightedRandomSampler: invalid multinomial distribution (sum of probabilities <= 0)"
            );
        }
        if !replacement && num_samples > positive {
            bail!(
                Value,
                "WeightedRandomSampler: cannot draw {num_samples} samples without replacement from {positive} positive weights"
            );
        }
        let n = weights.len();
        let weights = Tensor::from_vec(weights, n)?;
        Ok(WeightedRandomSampler { weights, num_samples, replacement, generator })
    }
}

impl Sampler for WeightedRandomSampler {
    fn indices(&self) -> Result<Vec<usize>> {
        to_indices(&self.weights.multinomial(self.num_samples, self.replacement, self.generator.as_ref())?)
    }
    fn len(&self) -> usize {
        self.num_samples
    }
    fn generator(&self) -> Option<&Generator> {
        self.generator.as_ref()
    }
}

/// Groups another sampler's indices into batches (`torch.utils.data.BatchSampler`): batches of
/// `batch_size`, the last one shorter unless `drop_last` drops it.
#[derive(Clone)]
pub struct BatchSampler {
    sampler: Arc<dyn Sampler>,
    batch_size: usize,
    drop_last: bool,
}

impl BatchSampler {
    /// Batches of `batch_size` (positive) indices from `sampler`.
    pub fn new(sampler: Arc<dyn Sampler>, batch_size: usize, drop_last: bool) -> Result<BatchSampler> {
        if batch_size == 0 {
            bail!(Value, "batch_size should be a positive integer value, but got batch_size={batch_size}");
        }
        Ok(BatchSampler { sampler, batch_size, drop_last })
    }
    /// The batch size.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }
    /// Whether a last, short batch is dropped.
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }
    /// The sampler the indices come from.
    pub fn sampler(&self) -> &Arc<dyn Sampler> {
        &self.sampler
    }
}

impl BatchSampling for BatchSampler {
    fn batches(&self) -> Result<Vec<Vec<usize>>> {
        let idx = self.sampler.indices()?;
        let chunks = idx.chunks(self.batch_size);
        Ok(chunks.filter(|c| !self.drop_last || c.len() == self.batch_size).map(|c| c.to_vec()).collect())
    }
    fn len(&self) -> usize {
        let n = self.sampler.len();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }
    fn generator(&self) -> Option<&Generator> {
        self.sampler.generator()
    }
}

/// Options of a [`DistributedSampler`] (PyTorch's keyword arguments; there is no process group
/// to ask, so `num_replicas` and `rank` are given).
#[derive(Clone, Debug)]
pub struct DistributedSamplerOptions {
    /// The number of processes (world size); default 1.
    pub num_replicas: usize,
    /// This process's rank, in `0..num_replicas`; default 0.
    pub rank: usize,
    /// Shuffle with a generator seeded with `seed + epoch` (default `true`).
    pub shuffle: bool,
    /// The shuffling seed, the same on every rank (default 0).
    pub seed: u64,
    /// Drop the tail so that every rank gets the same number of distinct samples, instead of
    /// padding by repeating indices (default `false`).
    pub drop_last: bool,
}

impl Default for DistributedSamplerOptions {
    fn default() -> Self {
        DistributedSamplerOptions { num_replicas: 1, rank: 0, shuffle: true, seed: 0, drop_last: false }
    }
}

/// This rank's share of a dataset (`torch.utils.data.distributed.DistributedSampler`).
///
/// The order (a permutation drawn from a generator seeded with `seed + epoch`, or `0..len`
/// without shuffling) is padded by wrapping around to `num_replicas * num_samples` indices, or
/// truncated to it with `drop_last`; rank `r` takes every `num_replicas`-th index from `r`.
/// Call [`DistributedSampler::set_epoch`] before each epoch for a new order.
///
/// ```
/// use pyrite::data::{DistributedSampler, DistributedSamplerOptions, Sampler};
/// // 10 samples over 3 ranks, in order: padded to 12 by wrapping around.
/// let o = DistributedSamplerOptions { num_replicas: 3, rank: 1, shuffle: false, ..Default::default() };
/// let s = DistributedSampler::with_options(10, o)?;
/// assert_eq!(s.indices()?, vec![1, 4, 7, 0]);
/// // Shuffled: each epoch its own order, the same on every rank.
/// let s = DistributedSampler::new(10, 3, 1)?;
/// s.set_epoch(1);
/// assert_eq!(s.len(), 4);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Debug)]
pub struct DistributedSampler {
    data_len: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    num_samples: usize,
    epoch: AtomicU64,
}

impl DistributedSampler {
    /// Rank `rank` of `num_replicas`, shuffling with seed 0 and padding (PyTorch's defaults).
    pub fn new(data_len: usize, num_replicas: usize, rank: usize) -> Result<DistributedSampler> {
        DistributedSampler::with_options(
            data_len,
            DistributedSamplerOptions { num_replicas, rank, ..Default::default() },
        )
    }

    /// A sampler with PyTorch's options.
    pub fn with_options(data_len: usize, o: DistributedSamplerOptions) -> Result<DistributedSampler> {
        if o.num_replicas == 0 {
            bail!(Value, "num_replicas should be a positive integer value, but got num_replicas=0");
        }
        if o.rank >= o.num_replicas {
            bail!(
                Value,
                "Invalid rank {}, rank should be in the interval [0, {}]",
                o.rank,
                o.num_replicas - 1
            );
        }
        // PyTorch: ceil((len - r) / r) with drop_last and an uneven split, which is floor(len / r)
        // (and 0 when len < r); ceil(len / r) otherwise.
        let num_samples =
            if o.drop_last { data_len / o.num_replicas } else { data_len.div_ceil(o.num_replicas) };
        Ok(DistributedSampler {
            data_len,
            num_replicas: o.num_replicas,
            rank: o.rank,
            shuffle: o.shuffle,
            seed: o.seed,
            drop_last: o.drop_last,
            num_samples,
            epoch: AtomicU64::new(0),
        })
    }

    /// Sets the epoch, which (with the seed) chooses the order when shuffling
    /// (`sampler.set_epoch(epoch)`).
    pub fn set_epoch(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::Relaxed);
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// The number of indices over all ranks (`sampler.total_size`).
    pub fn total_size(&self) -> usize {
        self.num_samples * self.num_replicas
    }
}

impl Clone for DistributedSampler {
    fn clone(&self) -> Self {
        DistributedSampler {
            data_len: self.data_len,
            num_replicas: self.num_replicas,
            rank: self.rank,
            shuffle: self.shuffle,
            seed: self.seed,
            drop_last: self.drop_last,
            num_samples: self.num_samples,
            epoch: AtomicU64::new(self.epoch()),
        }
    }
}

impl Sampler for DistributedSampler {
    fn indices(&self) -> Result<Vec<usize>> {
        let mut indices = if self.shuffle {
            let g = Generator::new(self.seed.wrapping_add(self.epoch()));
            randperm(self.data_len, Some(&g))?
        } else {
            (0..self.data_len).collect()
        };
        let total = self.total_size();
        if self.drop_last {
            indices.truncate(total);
        } else if indices.len() < total {
            // Padding by wrap-around: repeat the list as often as needed.
            let n = indices.len();
            indices = (0..total).map(|i| indices[i % n]).collect();
        }
        Ok(indices.into_iter().skip(self.rank).step_by(self.num_replicas).collect())
    }
    fn len(&self) -> usize {
        self.num_samples
    }
}
