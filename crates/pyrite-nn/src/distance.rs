//! `CosineSimilarity`, `PairwiseDistance` (two inputs: `call2(&x1, &x2)`).

use crate::functional as F;
use crate::module::{Module, ModuleBase};
use crate::value::Value;
use pyrite_core::Result;

/// `nn.CosineSimilarity(dim=1, eps=1e-8)`.
#[derive(crate::Module)]
pub struct CosineSimilarity {
    base: ModuleBase,
    pub dim: isize,
    pub eps: f64,
}

impl CosineSimilarity {
    pub fn new(dim: isize, eps: f64) -> CosineSimilarity {
        CosineSimilarity { base: ModuleBase::new(), dim, eps }
    }
}

impl Default for CosineSimilarity {
    fn default() -> Self {
        CosineSimilarity::new(1, 1e-8)
    }
}

impl Module for CosineSimilarity {
    fn forward_value(&self, input: Value) -> Result<Value> {
        let (a, b) = (input.get(0)?.as_tensor()?, input.get(1)?.as_tensor()?);
        Ok(Value::Tensor(F::cosine_similarity(
            a,
            b,
            &F::CosineSimilarityOptions { dim: self.dim, eps: self.eps },
        )?))
    }
}

/// `nn.PairwiseDistance(p=2, eps=1e-6, keepdim=False)`.
#[derive(crate::Module)]
pub struct PairwiseDistance {
    base: ModuleBase,
    pub p: f64,
    pub eps: f64,
    pub keepdim: bool,
}

impl PairwiseDistance {
    pub fn new(p: f64, eps: f64, keepdim: bool) -> PairwiseDistance {
        PairwiseDistance { base: ModuleBase::new(), p, eps, keepdim }
    }
}

impl Default for PairwiseDistance {
    fn default() -> Self {
        PairwiseDistance::new(2.0, 1e-6, false)
    }
}

impl Module for PairwiseDistance {
    fn forward_value(&self, input: Value) -> Result<Value> {
        let (a, b) = (input.get(0)?.as_tensor()?, input.get(1)?.as_tensor()?);
        Ok(Value::Tensor(F::pairwise_distance(
            a,
            b,
            &F::PairwiseDistanceOptions { p: self.p, eps: self.eps, keepdim: self.keepdim },
        )?))
    }
}
