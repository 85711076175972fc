//! [`DataLoaderState`]: where a [`DataLoader`](crate::DataLoader) is in its epochs, as
//! torchdata's `StatefulDataLoader` keeps it, so that training can stop mid-epoch and go on.
//!
//! The state is small: the epoch, how many batches of it were handed out, and the generator
//! states at the start of that epoch (the loader's `generator`, the sampler's own, and the
//! global one), from which a resumed loader draws the same shuffle order and the same base seed
//! again. It never stores the order or any sample. Resuming skips the consumed batches by
//! index, without fetching them, and then yields exactly the batches the uninterrupted loader
//! would have yielded: the per-sample generators of random transforms are seeded from the base
//! seed and the sample index, so they agree too, for any `num_workers`.
//!
//! It converts to a plain dict of ints, bools and uint8 tensors ([`DataLoaderState::to_object`])
//! for a checkpoint. The generator states are Pyrite's Philox states (see
//! [`Generator::get_state`](pyrite_core::Generator::get_state)), which PyTorch cannot use.

use pyrite_core::{bail, DType, Result, Tensor};
use pyrite_serialization::{Dict, Object};

/// A [`DataLoader`](crate::DataLoader)'s position: what [`DataLoader::state_dict`](crate::DataLoader::state_dict)
/// returns and [`DataLoader::load_state_dict`](crate::DataLoader::load_state_dict) takes.
///
/// ```
/// use pyrite::data::{DataLoader, DataLoaderOptions, DataLoaderState, TensorDataset};
/// use pyrite::{DType, Generator, Tensor};
/// use std::sync::Arc;
/// let ds = Arc::new(TensorDataset::new(vec![Tensor::arange(0.0, 10.0, 1.0, DType::I64)?])?);
/// let options = || DataLoaderOptions {
///     batch_size: Some(3),
///     shuffle: true,
///     generator: Some(Arc::new(Generator::new(7))),
///     ..Default::default()
/// };
/// let first = |b: pyrite::Result<pyrite::data::Sample>| b?.item(0)?.as_tensor()?.to_vec::<i64>();
/// let loader = DataLoader::new(ds.clone(), options())?;
/// let mut it = loader.iter()?;
/// it.next().unwrap()?; // one batch consumed
/// let state = DataLoaderState::from_object(&loader.state_dict().to_object())?;
/// let rest: Vec<_> = it.map(first).collect::<pyrite::Result<_>>()?;
///
/// let resumed = DataLoader::new(ds, options())?; // e.g. in a new process
/// resumed.load_state_dict(&state)?;
/// let again: Vec<_> = resumed.iter()?.map(first).collect::<pyrite::Result<_>>()?;
/// assert_eq!(again, rest); // the other three batches of that epoch
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DataLoaderState {
    /// The epoch the next batch belongs to, counted from 0 (epochs begun by `iter()`).
    pub epoch: u64,
    /// True when an epoch is under way: `batches_yielded` of its batches were handed out and
    /// the next `iter()` continues it. False between epochs: the next `iter()` starts epoch
    /// `epoch`.
    pub mid_epoch: bool,
    /// Batches of the current epoch handed out so far (0 between epochs).
    pub batches_yielded: usize,
    /// Batches in the epoch (`len(loader)`), checked when the state is loaded.
    pub num_batches: usize,
    /// The loader `generator`'s state at the start of the current epoch (between epochs: now).
    pub generator: Option<Vec<u8>>,
    /// The sampler's own generator's state, likewise.
    pub sampler_generator: Option<Vec<u8>>,
    /// The global generator's state at the start of the current epoch (only mid-epoch): the
    /// base seed, and the shuffle order of a loader without a generator, were drawn from it.
    pub global_generator: Option<Vec<u8>>,
    /// The current epoch's base seed: per-sample generators are seeded from it (mid-epoch).
    pub base_seed: u64,
    /// The base seed the workers were started with (`WorkerInfo::seed` is this plus the worker
    /// id); with `persistent_workers` it is the first epoch's.
    pub worker_seed: Option<u64>,
}

fn state_tensor(bytes: &Option<Vec<u8>>) -> Object {
    match bytes {
        Some(b) => match Tensor::from_slice(b, b.len()) {
            Ok(t) => Object::Tensor(t),
            Err(_) => Object::None,
        },
        None => Object::None,
    }
}

impl DataLoaderState {
    /// The state as a plain dict (`{"epoch": int, "mid_epoch": bool, "batches_yielded": int,
    /// "num_batches": int, "generator": uint8 tensor or None, "sampler_generator": ...,
    /// "global_generator": ..., "base_seed": int, "worker_seed": int or None}`); seeds are
    /// stored as the i64 with the same bits.
    pub fn to_object(&self) -> Object {
        let mut d = Dict::new();
        d.insert("epoch", Object::Int(self.epoch as i64));
        d.insert("mid_epoch", Object::Bool(self.mid_epoch));
        d.insert("batches_yielded", Object::Int(self.batches_yielded as i64));
        d.insert("num_batches", Object::Int(self.num_batches as i64));
        d.insert("generator", state_tensor(&self.generator));
        d.insert("sampler_generator", state_tensor(&self.sampler_generator));
        d.insert("global_generator", state_tensor(&self.global_generator));
        d.insert("base_seed", Object::Int(self.base_seed as i64));
        d.insert("worker_seed", self.worker_seed.map_or(Object::None, |s| Object::Int(s as i64)));
        Object::Dict(d)
    }

    /// Reads a state written by [`DataLoaderState::to_object`]; a missing key or a value of the
    /// wrong kind is an error naming the key.
    pub fn from_object(obj: &Object) -> Result<DataLoaderState> {
        let Some(d) = obj.as_dict() else {
            bail!(Value, "DataLoaderState: expected a dict, got {}", obj.type_name());
        };
        let get = |key: &str| match d.get(key) {
            Some(v) => Ok(v),
            None => bail!(Value, "DataLoaderState: the key '{key}' is missing"),
        };
        let int = |key: &str| -> Result<i64> {
            match get(key)?.as_int() {
                Some(v) => Ok(v),
                None => {
                    bail!(Value, "DataLoaderState: '{key}' should be an int, got {}", get(key)?.type_name())
                }
            }
        };
        let count = |key: &str| -> Result<u64> {
            let v = int(key)?;
            if v < 0 {
                bail!(Value, "DataLoaderState: '{key}' should not be negative, got {v}");
            }
            Ok(v as u64)
        };
        let bytes = |key: &str| -> Result<Option<Vec<u8>>> {
            match get(key)? {
                Object::None => Ok(None),
                Object::Tensor(t) if t.dtype() == DType::U8 && t.rank() == 1 => Ok(Some(t.to_vec::<u8>()?)),
                other => bail!(
                    Value,
                    "DataLoaderState: '{key}' should be a 1-d uint8 tensor or None, got {}",
                    other.type_name()
                ),
            }
        };
        let mid_epoch = match get("mid_epoch")?.as_bool() {
            Some(b) => b,
            None => bail!(Value, "DataLoaderState: 'mid_epoch' should be a bool"),
        };
        let worker_seed = match get("worker_seed")? {
            Object::None => None,
            _ => Some(int("worker_seed")? as u64),
        };
        Ok(DataLoaderState {
            epoch: count("epoch")?,
            mid_epoch,
            batches_yielded: count("batches_yielded")? as usize,
            num_batches: count("num_batches")? as usize,
            generator: bytes("generator")?,
            sampler_generator: bytes("sampler_generator")?,
            global_generator: bytes("global_generator")?,
            base_seed: int("base_seed")? as u64,
            worker_seed,
        })
    }
}
