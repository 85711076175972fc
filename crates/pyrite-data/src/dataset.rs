//! Datasets (`torch.utils.data.Dataset` and friends): the map-style [`Dataset`] trait and the
//! iterable [`IterableDataset`] trait, the worker information a loader's workers publish
//! ([`get_worker_info`]), and PyTorch's ready-made datasets: [`TensorDataset`], [`Subset`],
//! [`ConcatDataset`], [`ChainDataset`], [`StackDataset`], [`FnDataset`] (a closure as a
//! dataset) and [`random_split`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use pyrite_core::{bail, Generator, Result, Tensor};

use crate::sample::Sample;

/// A map-style dataset (`torch.utils.data.Dataset`): `len` samples, read by index.
///
/// `get(index)` with `index >= len()` is an Index error.
pub trait Dataset: Send + Sync {
    /// The number of samples (`len(dataset)`).
    fn len(&self) -> usize;
    /// Sample `index` (`dataset[index]`); `index >= len()` is an Index error.
    fn get(&self, index: usize) -> Result<Sample>;
    /// Whether the dataset has no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `dataset[index]` with Python's negative indices: `-1` is the last sample. The default
    /// counts a negative index from the end, as a Python sequence (and a tensor, so
    /// [`TensorDataset`] and [`Subset`]) does, with an Index error when it is still out of
    /// range; [`ConcatDataset`] gives PyTorch's ValueError instead.
    fn get_signed(&self, index: isize) -> Result<Sample> {
        if index >= 0 {
            return self.get(index as usize);
        }
        let len = self.len();
        match len.checked_sub(index.unsigned_abs()) {
            Some(i) => self.get(i),
            None => bail!(Index, "index {index} is out of range for a dataset of length {len}"),
        }
    }
}

impl<D: Dataset + ?Sized> Dataset for Arc<D> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        (**self).get(index)
    }
    fn get_signed(&self, index: isize) -> Result<Sample> {
        (**self).get_signed(index)
    }
}

impl<D: Dataset + ?Sized> Dataset for Box<D> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        (**self).get(index)
    }
    fn get_signed(&self, index: isize) -> Result<Sample> {
        (**self).get_signed(index)
    }
}

/// An iterable-style dataset (`torch.utils.data.IterableDataset`): a stream of samples.
///
/// In a loader with several workers each worker calls `iter`; use [`get_worker_info`] inside
/// `iter` to give each worker its own share of the stream.
pub trait IterableDataset: Send + Sync {
    /// A fresh pass over the samples (`iter(dataset)`).
    fn iter(&self) -> Box<dyn Iterator<Item = Result<Sample>> + Send + '_>;
}

impl<D: IterableDataset + ?Sized> IterableDataset for Arc<D> {
    fn iter(&self) -> Box<dyn Iterator<Item = Result<Sample>> + Send + '_> {
        (**self).iter()
    }
}

/// What a loader's worker knows about itself (`torch.utils.data.get_worker_info()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// This worker's id, in `0..num_workers`.
    pub id: usize,
    /// The number of workers.
    pub num_workers: usize,
    /// The seed this worker's random state was seeded with.
    pub seed: u64,
}

thread_local! {
    static WORKER_INFO: RefCell<Option<WorkerInfo>> = const { RefCell::new(None) };
}

/// The current worker's [`WorkerInfo`] inside a loader's worker thread, `None` in the main
/// thread (`torch.utils.data.get_worker_info()`).
pub fn get_worker_info() -> Option<WorkerInfo> {
    WORKER_INFO.with(|w| w.borrow().clone())
}

/// Sets (or clears) this thread's [`WorkerInfo`]; called by the loader in each worker thread.
#[doc(hidden)]
pub fn set_worker_info(info: Option<WorkerInfo>) {
    WORKER_INFO.with(|w| *w.borrow_mut() = info);
}

fn index_error<T>(what: &str, index: usize, len: usize) -> Result<T> {
    bail!(Index, "{what}: index {index} is out of range for a dataset of length {len}")
}

/// A dataset of tensors' rows (`torch.utils.data.TensorDataset`): sample `i` is the tuple of
/// each tensor's row `i`.
pub struct TensorDataset {
    tensors: Vec<Tensor>,
}

impl TensorDataset {
    /// Wraps tensors that share their first dimension; errors with PyTorch's
    /// "Size mismatch between tensors" otherwise.
    pub fn new(tensors: Vec<Tensor>) -> Result<TensorDataset> {
        let Some(first) = tensors.first() else {
            bail!(Value, "TensorDataset: at least one tensor is needed");
        };
        for t in &tensors {
            if t.rank() == 0 {
                bail!(Shape, "TensorDataset: a 0-d tensor has no first dimension to index");
            }
        }
        let n = first.dims()[0];
        if tensors.iter().any(|t| t.dims()[0] != n) {
            let sizes: Vec<usize> = tensors.iter().map(|t| t.dims()[0]).collect();
            bail!(Shape, "Size mismatch between tensors (first dimensions {sizes:?})");
        }
        Ok(TensorDataset { tensors })
    }

    /// The tensors (`dataset.tensors`).
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }
}

impl Dataset for TensorDataset {
    fn len(&self) -> usize {
        self.tensors[0].dims()[0]
    }
    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len() {
            return index_error("TensorDataset", index, self.len());
        }
        let rows = self.tensors.iter().map(|t| t.select(0, index as isize).map(Sample::Tensor));
        Ok(Sample::Tuple(rows.collect::<Result<_>>()?))
    }
}

/// A dataset at chosen indices of another (`torch.utils.data.Subset`): sample `i` is
/// `dataset[indices[i]]`.
#[derive(Clone)]
pub struct Subset {
    dataset: Arc<dyn Dataset>,
    indices: Vec<usize>,
}

impl Subset {
    /// The samples of `dataset` at `indices` (checked when read, as in PyTorch).
    pub fn new(dataset: Arc<dyn Dataset>, indices: Vec<usize>) -> Subset {
        Subset { dataset, indices }
    }
    /// The underlying dataset (`subset.dataset`).
    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.dataset
    }
    /// The indices into it (`subset.indices`).
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }
}

impl Dataset for Subset {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        match self.indices.get(index) {
            Some(&i) => self.dataset.get(i),
            None => index_error("Subset", index, self.indices.len()),
        }
    }
}

/// Datasets one after another (`torch.utils.data.ConcatDataset`).
#[derive(Clone)]
pub struct ConcatDataset {
    datasets: Vec<Arc<dyn Dataset>>,
    cumulative_sizes: Vec<usize>,
}

impl ConcatDataset {
    /// Concatenates `datasets` (at least one).
    pub fn new(datasets: Vec<Arc<dyn Dataset>>) -> Result<ConcatDataset> {
        if datasets.is_empty() {
            bail!(Value, "datasets should not be an empty iterable");
        }
        let mut total = 0usize;
        let cumulative_sizes = datasets
            .iter()
            .map(|d| {
                total += d.len();
                total
            })
            .collect();
        Ok(ConcatDataset { datasets, cumulative_sizes })
    }
    /// The running totals of the datasets' lengths (`dataset.cumulative_sizes`).
    pub fn cumulative_sizes(&self) -> &[usize] {
        &self.cumulative_sizes
    }
    /// The concatenated datasets (`dataset.datasets`).
    pub fn datasets(&self) -> &[Arc<dyn Dataset>] {
        &self.datasets
    }
}

impl Dataset for ConcatDataset {
    fn len(&self) -> usize {
        *self.cumulative_sizes.last().unwrap_or(&0)
    }
    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len() {
            return index_error("ConcatDataset", index, self.len());
        }
        // bisect.bisect_right(cumulative_sizes, index)
        let d = self.cumulative_sizes.partition_point(|&c| c <= index);
        let start = if d == 0 { 0 } else { self.cumulative_sizes[d - 1] };
        self.datasets[d].get(index - start)
    }
    /// PyTorch's `ConcatDataset.__getitem__`: a negative index counts from the end; one past
    /// the start is a Value error ("absolute value of index should not exceed dataset length").
    fn get_signed(&self, index: isize) -> Result<Sample> {
        if index >= 0 {
            return self.get(index as usize);
        }
        match self.len().checked_sub(index.unsigned_abs()) {
            Some(i) => self.get(i),
            None => bail!(Value, "absolute value of index should not exceed dataset length"),
        }
    }
}

/// Iterable datasets one after another (`torch.utils.data.ChainDataset`).
#[derive(Clone)]
pub struct ChainDataset {
    datasets: Vec<Arc<dyn IterableDataset>>,
}

impl ChainDataset {
    /// Chains `datasets`: a pass over the chain is a pass over each in turn.
    pub fn new(datasets: Vec<Arc<dyn IterableDataset>>) -> ChainDataset {
        ChainDataset { datasets }
    }
}

impl IterableDataset for ChainDataset {
    fn iter(&self) -> Box<dyn Iterator<Item = Result<Sample>> + Send + '_> {
        Box::new(self.datasets.iter().flat_map(|d| d.iter()))
    }
}

#[derive(Clone)]
enum Stacked {
    Tuple(Vec<Arc<dyn Dataset>>),
    Map(BTreeMap<String, Arc<dyn Dataset>>),
}

/// Datasets of equal length side by side (`torch.utils.data.StackDataset`): sample `i` is the
/// tuple (or dict) of each dataset's sample `i`.
#[derive(Clone)]
pub struct StackDataset {
    datasets: Stacked,
    len: usize,
}

fn stacked_len<'a>(mut lens: impl Iterator<Item = &'a Arc<dyn Dataset>>) -> Result<usize> {
    let Some(first) = lens.next() else {
        bail!(Value, "At least one dataset should be passed");
    };
    let n = first.len();
    if lens.any(|d| d.len() != n) {
        bail!(Value, "Size mismatch between datasets");
    }
    Ok(n)
}

impl StackDataset {
    /// The tuple form (`StackDataset(a, b)`): samples are [`Sample::Tuple`]s.
    pub fn new(datasets: Vec<Arc<dyn Dataset>>) -> Result<StackDataset> {
        let len = stacked_len(datasets.iter())?;
        Ok(StackDataset { datasets: Stacked::Tuple(datasets), len })
    }
    /// The dict form (`StackDataset(x=a, y=b)`): samples are [`Sample::Map`]s.
    pub fn from_map(datasets: BTreeMap<String, Arc<dyn Dataset>>) -> Result<StackDataset> {
        let len = stacked_len(datasets.values())?;
        Ok(StackDataset { datasets: Stacked::Map(datasets), len })
    }
}

impl Dataset for StackDataset {
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len {
            return index_error("StackDataset", index, self.len);
        }
        match &self.datasets {
            Stacked::Tuple(ds) => Ok(Sample::Tuple(ds.iter().map(|d| d.get(index)).collect::<Result<_>>()?)),
            Stacked::Map(ds) => Ok(Sample::Map(
                ds.iter().map(|(k, d)| Ok((k.clone(), d.get(index)?))).collect::<Result<_>>()?,
            )),
        }
    }
}

type SampleFn = dyn Fn(usize) -> Result<Sample> + Send + Sync;

/// A closure as a dataset: `len` samples, sample `i` is `f(i)` (PyTorch users write a small
/// `Dataset` subclass with `__getitem__` for this).
#[derive(Clone)]
pub struct FnDataset {
    len: usize,
    f: Arc<SampleFn>,
}

impl FnDataset {
    /// A dataset of `len` samples computed by `f` (called only with indices below `len`).
    pub fn new<F>(len: usize, f: F) -> FnDataset
    where
        F: Fn(usize) -> Result<Sample> + Send + Sync + 'static,
    {
        FnDataset { len, f: Arc::new(f) }
    }
}

impl Dataset for FnDataset {
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len {
            return index_error("FnDataset", index, self.len);
        }
        (self.f)(index)
    }
}

/// A split size for [`random_split`]: a count of samples or a fraction of the dataset.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SplitLength {
    /// This many samples.
    Count(usize),
    /// This fraction of the dataset (the fractions must sum to 1).
    Fraction(f64),
}

impl From<usize> for SplitLength {
    fn from(n: usize) -> Self {
        SplitLength::Count(n)
    }
}

impl From<f64> for SplitLength {
    fn from(f: f64) -> Self {
        SplitLength::Fraction(f)
    }
}

impl SplitLength {
    fn value(self) -> f64 {
        match self {
            SplitLength::Count(n) => n as f64,
            SplitLength::Fraction(f) => f,
        }
    }
}

/// Python's `math.isclose(a, b)` with its default `rel_tol=1e-9`.
fn isclose(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Splits `dataset` at random into non-overlapping [`Subset`]s of the given lengths
/// (`torch.utils.data.random_split`).
///
/// Lengths that sum to 1 (all fractions) are fractions of the dataset: each split gets
/// `floor(len * fraction)` samples and the remainder is handed out one by one, round-robin from
/// the first split, as PyTorch 2.x does. Otherwise the lengths are counts and must sum to the
/// dataset's length. The order is one `randperm(len, generator)`; `None` draws from the
/// global generator.
///
/// ```
/// use std::sync::Arc;
/// use pyrite::data::{random_split, Dataset, FnDataset, Sample, SplitLength};
/// use pyrite::Generator;
/// let ds = Arc::new(FnDataset::new(11, |i| Ok(Sample::from(i))));
/// let g = Generator::new(42);
/// let parts = random_split(ds, &[SplitLength::Fraction(0.5), SplitLength::Fraction(0.5)], Some(&g))?;
/// assert_eq!((parts[0].len(), parts[1].len()), (6, 5));
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn random_split(
    dataset: Arc<dyn Dataset>,
    lengths: &[SplitLength],
    generator: Option<&Generator>,
) -> Result<Vec<Subset>> {
    let n = dataset.len();
    let sum: f64 = lengths.iter().map(|l| l.value()).sum();
    let counts: Vec<usize> = if !lengths.is_empty() && isclose(sum, 1.0) && sum <= 1.0 {
        let mut counts = Vec::with_capacity(lengths.len());
        for (i, l) in lengths.iter().enumerate() {
            let frac = l.value();
            if !(0.0..=1.0).contains(&frac) {
                bail!(Value, "Fraction at index {i} is not between 0 and 1");
            }
            counts.push((n as f64 * frac).floor() as usize);
        }
        let remainder = n.saturating_sub(counts.iter().sum());
        let k = counts.len();
        for i in 0..remainder {
            counts[i % k] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            if c == 0 {
                pyrite_core::warnings::warn(
                    "random_split",
                    &format!("Length of split at index {i} is 0. This might result in an empty dataset."),
                );
            }
        }
        counts
    } else {
        let mut counts = Vec::with_capacity(lengths.len());
        for l in lengths {
            match *l {
                SplitLength::Count(c) => counts.push(c),
                SplitLength::Fraction(_) => {
                    bail!(Value, "Sum of input lengths does not equal the length of the input dataset!")
                }
            }
        }
        counts
    };
    let total = counts.iter().try_fold(0usize, |a, &c| a.checked_add(c));
    if total != Some(n) {
        bail!(Value, "Sum of input lengths does not equal the length of the input dataset!");
    }
    let perm = Tensor::randperm_with(n, generator)?.to_vec::<i64>()?;
    let mut offset = 0;
    Ok(counts
        .iter()
        .map(|&c| {
            let idx = perm[offset..offset + c].iter().map(|&i| i as usize).collect();
            offset += c;
            Subset::new(dataset.clone(), idx)
        })
        .collect())
}
