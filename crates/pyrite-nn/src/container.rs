//! Containers (PyTorch's `torch/nn/modules/container.py`): `Sequential`, `ModuleList`,
//! `ModuleDict`, `ParameterList`, `ParameterDict`. They keep their elements in their
//! [`ModuleBase`] as run-time members, so naming, state_dicts and hooks work on them as on any
//! module. Elements are held by `Arc`, so a slice of a `Sequential` shares its layers, as in
//! PyTorch.
//!
//! ```
//! use pyrite::nn::{Linear, Module, ReLU, Sequential};
//! use pyrite::{DType, Tensor};
//! let net = Sequential::new().append(Linear::new(4, 8)?).append(ReLU::new()).append(Linear::new(8, 2)?);
//! assert_eq!(net.len(), 3);
//! assert_eq!(net.call(&Tensor::ones([5, 4], DType::F32)?)?.dims(), &[5, 2]);
//! let head = net.slice(1..3);
//! assert!(head.named_parameters()[0].1.is_same(&net.get_parameter("2.weight")?));
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::module::{Module, ModuleBase};
use crate::parameter::Parameter;
use crate::value::Value;
use pyrite_core::{bail, Result, Tensor};
use std::ops::Range;
use std::sync::Arc;

fn wrap_index(i: isize, len: usize, what: &str) -> Result<usize> {
    let j = if i < 0 { i + len as isize } else { i };
    if j < 0 || j as usize >= len {
        bail!(Index, "index {i} is out of range for {what} of length {len}");
    }
    Ok(j as usize)
}

/// Re-keys run-time children `0..n` after an insertion or removal (as PyTorch's
/// `Sequential.insert` and `del` leave them).
fn renumber(base: &mut ModuleBase) {
    for (i, (name, _)) in base.children_vec_mut().iter_mut().enumerate() {
        *name = i.to_string();
    }
}

macro_rules! indexed_container {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(crate::Module)]
        pub struct $name {
            base: ModuleBase,
        }

        impl Default for $name {
            fn default() -> Self {
                $name::new()
            }
        }

        impl $name {
            pub fn new() -> $name {
                $name { base: ModuleBase::new() }
            }

            /// `append(module)`, in builder form.
            pub fn append(mut self, m: impl Module) -> $name {
                self.push(m);
                self
            }

            /// Appends a module (`append`).
            pub fn push(&mut self, m: impl Module) {
                self.push_shared(Arc::new(m));
            }

            /// Appends a module that may also be held elsewhere.
            pub fn push_shared(&mut self, m: Arc<dyn Module>) {
                let n = self.len();
                self.base.children_vec_mut().push((n.to_string(), m));
            }

            /// `insert(index, module)`: later modules move up by one.
            pub fn insert(&mut self, index: usize, m: impl Module) -> Result<()> {
                let n = self.len();
                if index > n {
                    bail!(Index, "Index out of range: {index}");
                }
                self.base.children_vec_mut().insert(index, (String::new(), Arc::new(m)));
                renumber(&mut self.base);
                Ok(())
            }

            /// `del self[index]`: removes and returns the module; later ones move down.
            pub fn remove(&mut self, index: isize) -> Result<Arc<dyn Module>> {
                let i = wrap_index(index, self.len(), stringify!($name))?;
                let (_, m) = self.base.children_vec_mut().remove(i);
                renumber(&mut self.base);
                Ok(m)
            }

            /// `len(self)`.
            pub fn len(&self) -> usize {
                self.base.children_vec().len()
            }

            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// `self[index]` (negative counts from the end).
            pub fn get(&self, index: isize) -> Result<&dyn Module> {
                let i = wrap_index(index, self.len(), stringify!($name))?;
                Ok(&*self.base.children_vec()[i].1)
            }

            /// `self[index]` as its concrete type (`None` if it is another type).
            pub fn get_as<T: Module>(&self, index: isize) -> Option<&T> {
                self.get(index).ok()?.as_any().downcast_ref::<T>()
            }

            /// The modules in order.
            pub fn iter(&self) -> impl Iterator<Item = &dyn Module> {
                self.base.children_vec().iter().map(|(_, m)| &**m)
            }

            /// `self[a:b]`: a new container of the same modules (shared, not copied), keeping
            /// their names, as PyTorch does.
            pub fn slice(&self, range: Range<usize>) -> $name {
                let mut out = $name::new();
                let end = range.end.min(self.len());
                for (name, m) in &self.base.children_vec()[range.start.min(end)..end] {
                    out.base.children_vec_mut().push((name.clone(), m.clone()));
                }
                out
            }
        }
    };
}

indexed_container!(
    Sequential,
    "`nn.Sequential`: modules called in order, each on the previous one's output. Children are named `0`, `1`, ...; any module can be an element, built-in or user-defined."
);
indexed_container!(
    ModuleList,
    "`nn.ModuleList`: a list of modules, registered (so their parameters are the owner's) but not called in order: it has no `forward`."
);

impl Module for Sequential {
    fn forward_value(&self, input: Value) -> Result<Value> {
        let mut x = input;
        for m in self.iter() {
            x = m.call_value(x)?;
        }
        Ok(x)
    }
}

impl Module for ModuleList {}

/// `nn.ModuleDict`: modules by name, in insertion order.
#[derive(crate::Module)]
pub struct ModuleDict {
    base: ModuleBase,
}

impl Default for ModuleDict {
    fn default() -> Self {
        ModuleDict::new()
    }
}

impl ModuleDict {
    pub fn new() -> ModuleDict {
        ModuleDict { base: ModuleBase::new() }
    }

    /// Adds a module under `key` (builder form).
    pub fn add(mut self, key: &str, m: impl Module) -> Result<ModuleDict> {
        self.insert(key, m)?;
        Ok(self)
    }

    /// `self[key] = module`: replaces an existing entry in place, or appends.
    pub fn insert(&mut self, key: &str, m: impl Module) -> Result<()> {
        if key.is_empty() || key.contains('.') {
            bail!(Value, "module name can't be empty or contain \".\", got: \"{key}\"");
        }
        let children = self.base.children_vec_mut();
        match children.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = Arc::new(m),
            None => children.push((key.to_string(), Arc::new(m))),
        }
        Ok(())
    }

    /// `self[key]`.
    pub fn get(&self, key: &str) -> Result<&dyn Module> {
        match self.base.child(key) {
            Some(m) => Ok(m),
            None => bail!(Index, "ModuleDict has no key '{key}'"),
        }
    }

    /// `self[key]` as its concrete type.
    pub fn get_as<T: Module>(&self, key: &str) -> Option<&T> {
        self.get(key).ok()?.as_any().downcast_ref::<T>()
    }

    /// `pop(key)`.
    pub fn remove(&mut self, key: &str) -> Option<Arc<dyn Module>> {
        let children = self.base.children_vec_mut();
        let i = children.iter().position(|(k, _)| k == key)?;
        Some(children.remove(i).1)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.base.children_vec().iter().map(|(k, _)| k.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &dyn Module)> {
        self.base.children_vec().iter().map(|(k, m)| (k.as_str(), &**m))
    }

    pub fn len(&self) -> usize {
        self.base.children_vec().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.base.child(key).is_some()
    }
}

impl Module for ModuleDict {}

/// PyTorch's `Parameter containing: [torch.float32 of size 3x4]` line (`ParameterDict`
/// names the legacy tensor type instead: `torch.DoubleTensor`).
fn param_line(t: &Tensor, legacy_type: bool) -> String {
    let size: Vec<String> = t.dims().iter().map(|d| d.to_string()).collect();
    let ty = if legacy_type {
        let name = match t.dtype() {
            pyrite_core::DType::F32 => "Float",
            pyrite_core::DType::F64 => "Double",
            pyrite_core::DType::F16 => "Half",
            pyrite_core::DType::BF16 => "BFloat16",
            pyrite_core::DType::I64 => "Long",
            pyrite_core::DType::I32 => "Int",
            pyrite_core::DType::U8 => "Byte",
            pyrite_core::DType::Bool => "Bool",
        };
        format!("torch.{name}Tensor")
    } else {
        t.dtype().to_string()
    };
    format!("Parameter containing: [{ty} of size {}]", size.join("x"))
}

/// `nn.ParameterList`: parameters named `0`, `1`, ...
#[derive(crate::Module)]
pub struct ParameterList {
    base: ModuleBase,
}

impl Default for ParameterList {
    fn default() -> Self {
        ParameterList::new()
    }
}

impl ParameterList {
    pub fn new() -> ParameterList {
        ParameterList { base: ModuleBase::new() }
    }

    /// `append(parameter)`.
    pub fn push(&mut self, p: Parameter) {
        let n = self.len();
        self.base.params_vec_mut().push((n.to_string(), Some(p)));
    }

    pub fn len(&self) -> usize {
        self.base.params_vec().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `self[index]`.
    pub fn get(&self, index: isize) -> Result<&Parameter> {
        let i = wrap_index(index, self.len(), "ParameterList")?;
        Ok(self.base.params_vec()[i].1.as_ref().expect("list entries are present"))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Parameter> {
        self.base.params_vec().iter().filter_map(|(_, p)| p.as_ref())
    }
}

impl Module for ParameterList {
    fn extra_repr(&self) -> String {
        self.base
            .params_vec()
            .iter()
            .filter_map(|(k, p)| p.as_ref().map(|p| format!("  ({k}): {}", param_line(p, false))))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `nn.ParameterDict`: parameters by name, in insertion order.
#[derive(crate::Module)]
pub struct ParameterDict {
    base: ModuleBase,
}

impl Default for ParameterDict {
    fn default() -> Self {
        ParameterDict::new()
    }
}

impl ParameterDict {
    pub fn new() -> ParameterDict {
        ParameterDict { base: ModuleBase::new() }
    }

    /// `self[key] = parameter`: replaces an existing entry in place, or appends.
    pub fn insert(&mut self, key: &str, p: Parameter) -> Result<()> {
        if key.is_empty() || key.contains('.') {
            bail!(Value, "parameter name can't be empty or contain \".\", got: \"{key}\"");
        }
        let params = self.base.params_vec_mut();
        match params.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = Some(p),
            None => params.push((key.to_string(), Some(p))),
        }
        Ok(())
    }

    /// `self[key]`.
    pub fn get(&self, key: &str) -> Result<&Parameter> {
        match self.base.parameter(key) {
            Some(p) => Ok(p),
            None => bail!(Index, "ParameterDict has no key '{key}'"),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.base.params_vec().iter().map(|(k, _)| k.as_str())
    }

    pub fn len(&self) -> usize {
        self.base.params_vec().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Module for ParameterDict {
    fn extra_repr(&self) -> String {
        self.base
            .params_vec()
            .iter()
            .filter_map(|(k, p)| p.as_ref().map(|p| format!("  ({k}): {}", param_line(p, true))))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
