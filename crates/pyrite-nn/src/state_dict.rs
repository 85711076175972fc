//! `state_dict` and `load_state_dict`: a module's tensors by dotted key (`layer1.0.weight`),
//! PyTorch's names and layouts, so that a PyTorch state_dict maps one to one.
//!
//! ```
//! use pyrite::nn::{Linear, Module};
//! let a = Linear::new(3, 2)?;
//! let b = Linear::new(3, 2)?;
//! let sd = a.state_dict()?;
//! assert_eq!(sd.keys().collect::<Vec<_>>(), ["weight", "bias"]);
//! let r = b.load_state_dict(&sd, true)?;
//! assert!(r.missing_keys.is_empty() && r.unexpected_keys.is_empty());
//! assert!(b.weight.allclose(&a.weight, 0.0, 0.0, false)?);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::module::{Member, Module};
use pyrite_core::{bail, Result, Tensor};
use pyrite_serialization::Object;
use std::collections::HashMap;

/// An ordered map from dotted names to tensors (PyTorch's `OrderedDict`).
#[derive(Clone, Default, Debug)]
pub struct StateDict {
    entries: Vec<(String, Tensor)>,
    index: HashMap<String, usize>,
}

impl StateDict {
    pub fn new() -> StateDict {
        StateDict::default()
    }

    /// Inserts or replaces (keeping the key's first position, as an `OrderedDict` does).
    pub fn insert(&mut self, key: impl Into<String>, t: Tensor) {
        let key = key.into();
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 = t,
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, t));
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&Tensor> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// Removes a key, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<Tensor> {
        let i = self.index.remove(key)?;
        let (_, t) = self.entries.remove(i);
        for (_, j) in self.index.iter_mut() {
            if *j > i {
                *j -= 1;
            }
        }
        Some(t)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.entries.iter().map(|(k, t)| (k.as_str(), t))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries under `prefix` with the prefix removed (`sd.sub("backbone.")`), e.g. to
    /// load a pretrained backbone into a sub-module.
    pub fn sub(&self, prefix: &str) -> StateDict {
        let mut out = StateDict::new();
        for (k, t) in &self.entries {
            if let Some(rest) = k.strip_prefix(prefix) {
                out.insert(rest, t.clone());
            }
        }
        out
    }
}

// ------------------------------------------------------------ to and from a pickled Object

impl StateDict {
    /// The state_dict as `torch.save(model.state_dict(), path)` pickles it: an `OrderedDict`
    /// of tensors in this dict's key order, each detached (a plain tensor, not a Parameter).
    /// PyTorch's `_metadata` (per-module versions) is not written; `load_state_dict` in
    /// PyTorch does without it.
    ///
    /// ```
    /// use pyrite::nn::{Linear, Module, StateDict};
    /// use pyrite::serialization::{load_from_bytes, save_to_bytes};
    /// let model = Linear::new(3, 2)?;
    /// let bytes = save_to_bytes(&model.state_dict()?.to_object())?; // torch.save(model.state_dict(), f)
    /// let sd = StateDict::from_object(&load_from_bytes(&bytes)?)?; // torch.load(f, weights_only=True)
    /// assert_eq!(sd.keys().collect::<Vec<_>>(), ["weight", "bias"]);
    /// Linear::new(3, 2)?.load_state_dict(&sd, true)?;
    /// # Ok::<(), pyrite::Error>(())
    /// ```
    pub fn to_object(&self) -> Object {
        Object::from_named_tensors(self.iter().map(|(k, t)| (k, t.detach())))
    }

    /// A state_dict from what `torch.load` returns for a module's `state_dict()`: a dict or
    /// `OrderedDict` of tensors with string keys, in the file's order (`_metadata` is ignored).
    /// Anything else is an error naming the first entry that is not a named tensor.
    pub fn from_object(obj: &Object) -> Result<StateDict> {
        Ok(obj.to_named_tensors()?.into_iter().collect())
    }
}

impl FromIterator<(String, Tensor)> for StateDict {
    fn from_iter<I: IntoIterator<Item = (String, Tensor)>>(iter: I) -> StateDict {
        let mut sd = StateDict::new();
        for (k, t) in iter {
            sd.insert(k, t);
        }
        sd
    }
}

impl<'a> IntoIterator for &'a StateDict {
    type Item = (&'a str, &'a Tensor);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Tensor)>,
        fn(&'a (String, Tensor)) -> (&'a str, &'a Tensor),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, t)| (k.as_str(), t))
    }
}

/// What `load_state_dict` returns: the keys the module has and the state_dict lacks, and the
/// keys the state_dict has and the module lacks.
#[derive(Clone, Default, Debug, PartialEq)]
pub struct IncompatibleKeys {
    pub missing_keys: Vec<String>,
    pub unexpected_keys: Vec<String>,
}

/// `module._save_to_state_dict` then the children, with `prefix` (PyTorch's recursion: a
/// module shared by two parents is saved under both names).
pub(crate) fn save(m: &dyn Module, prefix: &str, sd: &mut StateDict) -> Result<()> {
    let hooks = m.base().hooks.snapshot();
    for (_, h) in &hooks.state_dict_pre {
        h(m, prefix)?;
    }
    let mut children = Vec::new();
    let mut buffers = Vec::new();
    m.visit_members(&mut |mem| match mem {
        Member::Parameter(n, Some(p)) => sd.insert(format!("{prefix}{n}"), p.tensor().detach()),
        Member::Buffer(n, Some(b)) if b.persistent() => {
            buffers.push((format!("{prefix}{n}"), b.tensor().detach()))
        }
        Member::Module(n, c) => children.push((format!("{prefix}{n}."), c)),
        _ => {}
    });
    for (k, t) in buffers {
        sd.insert(k, t);
    }
    for (p, c) in children {
        save(c, &p, sd)?;
    }
    for (_, h) in &hooks.state_dict_post {
        h(m, sd, prefix)?;
    }
    Ok(())
}

/// `module.load_state_dict(sd, strict)`.
pub(crate) fn load(root: &dyn Module, sd: &StateDict, strict: bool) -> Result<IncompatibleKeys> {
    let mut sd = sd.clone();
    let mut expected = Vec::new();
    let mut errors = Vec::new();
    let mut post = Vec::new();
    load_into(root, "", &mut sd, &mut expected, &mut errors, &mut post)?;
    let expected_set: std::collections::HashSet<&str> = expected.iter().map(|s| s.as_str()).collect();
    let mut keys = IncompatibleKeys {
        missing_keys: expected.iter().filter(|k| !sd.contains_key(k)).cloned().collect(),
        unexpected_keys: sd.keys().filter(|k| !expected_set.contains(k)).map(String::from).collect(),
    };
    for (m, h) in post {
        h(m, &mut keys)?;
    }
    let mut msgs = Vec::new();
    if strict {
        if !keys.missing_keys.is_empty() {
            msgs.push(format!("Missing key(s) in state_dict: {}. ", quoted(&keys.missing_keys)));
        }
        if !keys.unexpected_keys.is_empty() {
            msgs.push(format!("Unexpected key(s) in state_dict: {}. ", quoted(&keys.unexpected_keys)));
        }
    }
    msgs.extend(errors);
    if !msgs.is_empty() {
        bail!(Value, "Error(s) in loading state_dict for {}:\n\t{}", root.type_name(), msgs.join("\n\t"));
    }
    Ok(keys)
}

fn quoted(keys: &[String]) -> String {
    keys.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ")
}

type PostHook<'a> = (&'a dyn Module, crate::hooks::LoadPostHook);

fn load_into<'a>(
    m: &'a dyn Module,
    prefix: &str,
    sd: &mut StateDict,
    expected: &mut Vec<String>,
    errors: &mut Vec<String>,
    post: &mut Vec<PostHook<'a>>,
) -> Result<()> {
    let hooks = m.base().hooks.snapshot();
    for (_, h) in &hooks.load_pre {
        h(m, sd, prefix)?;
    }
    m.upgrade_state_dict(sd, prefix)?;
    let mut own: Vec<(String, Tensor)> = Vec::new();
    let mut children = Vec::new();
    m.visit_members(&mut |mem| match mem {
        Member::Parameter(n, Some(p)) => own.push((format!("{prefix}{n}"), p.tensor().clone())),
        Member::Buffer(n, Some(b)) if b.persistent() => {
            own.push((format!("{prefix}{n}"), b.tensor().clone()))
        }
        Member::Module(n, c) => children.push((format!("{prefix}{n}."), c)),
        _ => {}
    });
    for (key, dst) in own {
        if let Some(src) = sd.get(&key) {
            if src.dims() != dst.dims() {
                errors.push(format!(
                    "size mismatch for {key}: copying a param with shape torch.Size({:?}) from checkpoint, the shape in current model is torch.Size({:?}).",
                    src.dims(),
                    dst.dims()
                ));
            } else if src.dtype() != dst.dtype()
                && !(src.dtype().is_floating_point() && dst.dtype().is_floating_point())
            {
                errors.push(format!(
                    "dtype mismatch for {key}: copying a tensor of dtype {} from checkpoint, the dtype in current model is {}.",
                    src.dtype(),
                    dst.dtype()
                ));
            } else {
                let _ng = pyrite_core::autograd::no_grad();
                if let Err(e) = dst.copy_(src) {
                    errors.push(format!(
                        "While copying the parameter named \"{key}\", whose dimensions in the model are {:?} and whose dimensions in the checkpoint are {:?}, an exception occurred : {e}.",
                        dst.dims(),
                        src.dims()
                    ));
                }
            }
        }
        expected.push(key);
    }
    for (p, c) in children {
        load_into(c, &p, sd, expected, errors, post)?;
    }
    for (_, h) in hooks.load_post {
        post.push((m, h));
    }
    Ok(())
}
