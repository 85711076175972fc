//! PyTorch Lightning checkpoints (`.ckpt`): `torch.save` files holding a dict such as
//!
//! ```text
//! {'epoch': 4, 'global_step': 500, 'pytorch-lightning_version': '2.5.0',
//!  'state_dict': OrderedDict({'model.0.weight': ..., ...}),   # the LightningModule's, prefixed
//!  'loops': {...}, 'callbacks': {"ModelCheckpoint{'monitor': 'val_loss', ...}": {...}},
//!  'optimizer_states': [optimizer.state_dict(), ...], 'lr_schedulers': [scheduler.state_dict(), ...],
//!  'hparams_name': 'kwargs', 'hyper_parameters': AttributeDict(lr=0.001, ...)}
//! ```
//!
//! Most of it is plain values, but Lightning also pickles objects of its own classes and the
//! user's (the `AttributeDict` of `save_hyperparameters()`, a callback's state, a config
//! dataclass), which a weights-only load refuses. [`load_lightning_checkpoint`] loads
//! everything else and reports those by key.

use crate::load::{load_with, LoadOptions};
use crate::object::Object;
use pyrite_core::Result;
use std::path::Path;

/// Loads a PyTorch Lightning `.ckpt` (or any `torch.save` file) as far as its values are plain:
/// each object of a class outside the weights-only allowlist is left as an
/// [`Object::Unsupported`] placeholder and reported as `(key path, global)` (paths join keys
/// with `/`). Nothing from the file is imported or run.
///
/// ```no_run
/// use pyrite::nn::{Linear, Module, StateDict};
/// use pyrite::serialization::load_lightning_checkpoint;
/// let (ckpt, skipped) = load_lightning_checkpoint("epoch=4-step=500.ckpt")?;
/// for (key, global) in &skipped {
///     eprintln!("not loaded: {key} (a {global})"); // e.g. hyper_parameters (an AttributeDict)
/// }
/// let sd = StateDict::from_object(ckpt.get("state_dict").unwrap())?.sub("model.");
/// Linear::new(4, 2)?.load_state_dict(&sd, true)?;
/// # Ok::<(), pyrite::Error>(())
/// ```
pub fn load_lightning_checkpoint(path: impl AsRef<Path>) -> Result<(Object, Vec<(String, String)>)> {
    let ckpt = load_with(path, LoadOptions { skip_unsupported: true, ..Default::default() })?;
    let skipped = ckpt.unsupported();
    Ok((ckpt, skipped))
}
