//! # pyrite-serialization
//!
//! PyTorch's `torch.save` / `torch.load` file format (`.pt`, `.pth`) both ways, as
//! `torch.serialization` does it: checkpoints written here load in PyTorch with
//! `torch.load(path, weights_only=True)`, and checkpoints written by PyTorch load here.
//!
//! A checkpoint holds an [`Object`]: Python values (`None`, numbers, strings, bytes), tensors,
//! and containers of them (tuples, lists, sets, dicts with string or int keys, OrderedDicts).
//!
//! - [`save`] writes PyTorch's zip layout: a protocol-2 pickle (`data.pkl`) whose tensors
//!   reference storage records (`data/0`, `data/1`, ...; 64-byte aligned). Tensors that share
//!   a storage are written once and share it again after loading; views keep their offsets
//!   and strides. Files are written atomically ([`atomic_write`]).
//! - [`load`] reads with weights-only semantics: its own pickle machine recognises only the
//!   globals PyTorch's weights-only unpickler allows (tensor rebuilding, storages,
//!   `OrderedDict`, `torch.Size`, `torch.device`, dtypes, sets, complex, bytes) and never
//!   imports or runs anything; any other global is an error naming it. Hostile files cannot
//!   make it panic or allocate more than their size justifies.
//!
//! ```
//! use pyrite::serialization::{load, save, Object};
//! use pyrite::{DType, Tensor};
//! let path = std::env::temp_dir().join(format!("pyrite-ser-doc-{}.pt", std::process::id()));
//! let weight = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([2, 3])?;
//! let checkpoint = Object::from_pairs([
//!     ("epoch", Object::from(3)),
//!     ("weight", Object::from(&weight)),
//!     ("weight_t", Object::from(weight.t()?)), // a view: shares weight's storage
//! ]);
//! save(&checkpoint, &path)?; // torch.save(checkpoint, path)
//! let back = load(&path)?; // torch.load(path, weights_only=True)
//! assert_eq!(back.get("epoch").and_then(Object::as_int), Some(3));
//! let w = back.get("weight").and_then(Object::as_tensor).unwrap();
//! let wt = back.get("weight_t").and_then(Object::as_tensor).unwrap();
//! assert_eq!(w.to_vec2::<f32>()?, weight.to_vec2::<f32>()?);
//! assert_eq!(wt.stride(), &[1, 3]);
//! assert!(w.same_storage(wt));
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), pyrite::Error>(())
//! ```
//!
//! Not read: legacy pre-1.6 checkpoints (`_use_new_zipfile_serialization=False`), TorchScript
//! archives (`torch.jit.save`), dtypes Pyrite lacks (int8, int16, complex, float8, ...),
//! sparse and quantized tensors, and pickled Python objects of any other class. Each gives an
//! error saying which.

mod allowlist;
mod atomic;
#[doc(hidden)]
pub mod fault;
mod lightning;
mod load;
pub mod npz;
mod object;
mod pickler;
pub mod safetensors;
mod save;
mod unpickler;
pub mod zip;

pub use atomic::{atomic_write, remove_stale_temporaries};
pub use lightning::load_lightning_checkpoint;
pub use load::{load, load_from_bytes, load_from_reader, load_from_reader_with, load_with, LoadOptions};
pub use object::{Dict, Object};
pub use save::{save, save_to_bytes, save_to_writer};
