//! `Embedding` and `EmbeddingBag`.

use crate::functional::{self as F, BagMode, EmbeddingBagOptions, EmbeddingOptions};
use crate::init;
use crate::module::{py_float, Module, ModuleBase};
use crate::parameter::Parameter;
use crate::value::Value;
use pyrite_core::{bail, DType, Result, Tensor};

/// `nn.Embedding(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type)`: a lookup
/// table `weight [num_embeddings, embedding_dim]`, initialised `N(0, 1)` with the padding
/// row zeroed; the padding row gets no gradient.
///
/// ```
/// use pyrite::nn::{Embedding, Module};
/// use pyrite::Tensor;
/// let emb = Embedding::new(10, 3)?.padding_idx(0)?;
/// let y = emb.call(&Tensor::new([[0i64, 4], [9, 0]])?)?;
/// assert_eq!(y.dims(), &[2, 2, 3]);
/// assert_eq!(emb.to_string(), "Embedding(10, 3, padding_idx=0)");
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
pub struct Embedding {
    base: ModuleBase,
    pub weight: Parameter,
    #[module(skip)]
    pub opts: EmbeddingOptions,
}

impl Embedding {
    pub fn new(num_embeddings: usize, embedding_dim: usize) -> Result<Embedding> {
        let w = Tensor::empty([num_embeddings, embedding_dim], DType::F32)?;
        init::normal_(&w, 0.0, 1.0, None)?;
        Ok(Embedding {
            base: ModuleBase::new(),
            weight: Parameter::new(w)?,
            opts: EmbeddingOptions::default(),
        })
    }

    /// Sets `padding_idx` (negative counts from the end) and zeroes that row.
    pub fn padding_idx(mut self, idx: i64) -> Result<Embedding> {
        self.opts.padding_idx = Some(zero_padding_row(&self.weight, idx, "Padding_idx")?);
        Ok(self)
    }

    /// Sets `max_norm` (and `norm_type`, default 2).
    pub fn max_norm(mut self, max_norm: f64, norm_type: f64) -> Embedding {
        self.opts.max_norm = Some(max_norm);
        self.opts.norm_type = Some(norm_type);
        self
    }

    /// `Embedding.from_pretrained(embeddings, freeze=True, padding_idx=None)`.
    pub fn from_pretrained(embeddings: &Tensor, freeze: bool, padding_idx: Option<i64>) -> Result<Embedding> {
        if embeddings.rank() != 2 {
            bail!(
                Shape,
                "Embeddings parameter is expected to be 2-dimensional, got shape {}",
                embeddings.shape()
            );
        }
        let mut e = Embedding {
            base: ModuleBase::new(),
            weight: Parameter::with_requires_grad(embeddings.detach().deep_clone()?, !freeze)?,
            opts: EmbeddingOptions::default(),
        };
        if let Some(p) = padding_idx {
            let n = embeddings.dims()[0] as i64;
            if p >= n || p < -n {
                bail!(Value, "Padding_idx must be within num_embeddings");
            }
            e.opts.padding_idx = Some(if p < 0 { p + n } else { p });
        }
        Ok(e)
    }
}

impl Module for Embedding {
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        F::embedding(idx, &self.weight, &self.opts)
    }

    fn extra_repr(&self) -> String {
        let mut s = format!("{}, {}", self.weight.dims()[0], self.weight.dims()[1]);
        if let Some(p) = self.opts.padding_idx {
            s += &format!(", padding_idx={p}");
        }
        if let Some(m) = self.opts.max_norm {
            s += &format!(", max_norm={}", py_float(m));
        }
        if let Some(n) = self.opts.norm_type
            && n != 2.0
        {
            s += &format!(", norm_type={}", py_float(n));
        }
        s
    }
}

/// `nn.EmbeddingBag(num_embeddings, embedding_dim, mode='mean', padding_idx=None, ...)`:
/// sums, means or maxes of embeddings per bag, `weight` initialised `N(0, 1)`. Called with
/// `idx` (2-D: a bag per row) or `(idx, offsets)` or `(idx, offsets, per_sample_weights)`.
/// As in [`Embedding`], [`padding_idx`](EmbeddingBag::padding_idx) zeroes that row, which
/// then gets no gradient; its entries are left out of their bags.
///
/// ```
/// use pyrite::nn::{functional::BagMode, EmbeddingBag, Module};
/// use pyrite::Tensor;
/// let bag = EmbeddingBag::new(10, 3, BagMode::Mean)?.padding_idx(0)?;
/// let y = bag.call(&Tensor::new([[0i64, 4], [9, 0]])?)?;
/// assert_eq!(y.to_vec2::<f32>()?[0], bag.weight.select(0, 4)?.to_vec::<f32>()?);
/// assert_eq!(bag.to_string(), "EmbeddingBag(10, 3, mode='mean', padding_idx=0)");
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
pub struct EmbeddingBag {
    base: ModuleBase,
    pub weight: Parameter,
    /// The keywords of every call (`offsets` and `per_sample_weights` come with the input).
    #[module(skip)]
    pub opts: EmbeddingBagOptions,
}

impl EmbeddingBag {
    pub fn new(num_embeddings: usize, embedding_dim: usize, mode: BagMode) -> Result<EmbeddingBag> {
        let w = Tensor::empty([num_embeddings, embedding_dim], DType::F32)?;
        init::normal_(&w, 0.0, 1.0, None)?;
        Ok(EmbeddingBag {
            base: ModuleBase::new(),
            weight: Parameter::new(w)?,
            opts: EmbeddingBagOptions { mode, ..Default::default() },
        })
    }

    /// Sets `padding_idx` (negative counts from the end) and zeroes that row, as
    /// [`Embedding::padding_idx`] does.
    pub fn padding_idx(mut self, idx: i64) -> Result<EmbeddingBag> {
        self.opts.padding_idx = Some(zero_padding_row(&self.weight, idx, "padding_idx")?);
        Ok(self)
    }

    /// Sets `max_norm` (and `norm_type`, default 2).
    pub fn max_norm(mut self, max_norm: f64, norm_type: f64) -> EmbeddingBag {
        self.opts.max_norm = Some(max_norm);
        self.opts.norm_type = Some(norm_type);
        self
    }

    /// Sets `include_last_offset`: `offsets` ends with the end of the last bag.
    pub fn include_last_offset(mut self, include_last_offset: bool) -> EmbeddingBag {
        self.opts.include_last_offset = include_last_offset;
        self
    }
}

impl Module for EmbeddingBag {
    fn forward_value(&self, input: Value) -> Result<Value> {
        let parts = input.into_vec();
        let idx = parts.first().map(|v| v.as_tensor()).transpose()?;
        let Some(idx) = idx else { bail!(Value, "EmbeddingBag needs an input") };
        let offsets = match parts.get(1) {
            Some(Value::Tensor(t)) => Some(t.clone()),
            _ => None,
        };
        let per_sample_weights = match parts.get(2) {
            Some(Value::Tensor(t)) => Some(t.clone()),
            _ => None,
        };
        let opts = EmbeddingBagOptions { offsets, per_sample_weights, ..self.opts.clone() };
        Ok(Value::Tensor(F::embedding_bag(idx, &self.weight, &opts)?))
    }

    fn extra_repr(&self) -> String {
        let mode = match self.opts.mode {
            BagMode::Sum => "sum",
            BagMode::Mean => "mean",
            BagMode::Max => "max",
        };
        let mut s = format!("{}, {}", self.weight.dims()[0], self.weight.dims()[1]);
        if let Some(m) = self.opts.max_norm {
            s += &format!(", max_norm={}", py_float(m));
        }
        if let Some(n) = self.opts.norm_type
            && n != 2.0
        {
            s += &format!(", norm_type={}", py_float(n));
        }
        s += &format!(", mode='{mode}'");
        if let Some(p) = self.opts.padding_idx {
            s += &format!(", padding_idx={p}");
        }
        s
    }
}

/// `padding_idx` as Embedding and EmbeddingBag take it: checked against the rows (`name` in
/// the message is each class's spelling in PyTorch's), counted from the end when negative,
/// and that row of `weight` zeroed. Returns the non-negative index.
fn zero_padding_row(weight: &Parameter, idx: i64, name: &str) -> Result<i64> {
    let n = weight.dims()[0] as i64;
    if idx >= n || idx < -n {
        bail!(Value, "{name} must be within num_embeddings");
    }
    let idx = if idx < 0 { idx + n } else { idx };
    let _g = pyrite_core::autograd::no_grad();
    weight.select(0, idx as isize)?.fill_(0.0)?;
    Ok(idx)
}
