//! `Flatten` and `Unflatten`.

use crate::module::{Module, ModuleBase};
use pyrite_core::{Result, Tensor};

/// `nn.Flatten(start_dim=1, end_dim=-1)`.
#[derive(crate::Module)]
pub struct Flatten {
    base: ModuleBase,
    pub start_dim: isize,
    pub end_dim: isize,
}

impl Flatten {
    /// `nn.Flatten()`: dims 1..=-1 into one.
    pub fn new() -> Flatten {
        Flatten::with_dims(1, -1)
    }

    pub fn with_dims(start_dim: isize, end_dim: isize) -> Flatten {
        Flatten { base: ModuleBase::new(), start_dim, end_dim }
    }
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten::new()
    }
}

impl Module for Flatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten(self.start_dim, self.end_dim)
    }

    fn extra_repr(&self) -> String {
        format!("start_dim={}, end_dim={}", self.start_dim, self.end_dim)
    }
}

/// `nn.Unflatten(dim, unflattened_size)`.
#[derive(crate::Module)]
pub struct Unflatten {
    base: ModuleBase,
    pub dim: isize,
    pub unflattened_size: Vec<isize>,
}

impl Unflatten {
    pub fn new(dim: isize, unflattened_size: &[isize]) -> Unflatten {
        Unflatten { base: ModuleBase::new(), dim, unflattened_size: unflattened_size.to_vec() }
    }
}

impl Module for Unflatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.unflatten(self.dim, self.unflattened_size.clone())
    }

    fn extra_repr(&self) -> String {
        let s: Vec<String> = self.unflattened_size.iter().map(|d| d.to_string()).collect();
        let t = if s.len() == 1 { format!("({},)", s[0]) } else { format!("({})", s.join(", ")) };
        format!("dim={}, unflattened_size={t}", self.dim)
    }
}
