//! Sentence embeddings from token states, as sentence-transformers makes them: pool the
//! tokens a padding mask keeps ([`mean_pooling`], [`max_pooling`], [`cls_pooling`]), then
//! [`normalize`] to unit length so that a dot product is the cosine similarity.
//!
//! ```
//! use pyrite::transformers::{mean_pooling, normalize};
//! use pyrite::Tensor;
//! // two sentences of three tokens, the second padded after one token
//! let h = Tensor::new([[[1f32, 0.], [3., 0.], [5., 0.]], [[0., 2.], [9., 9.], [9., 9.]]])?;
//! let mask = Tensor::new([[1i64, 1, 1], [1, 0, 0]])?;
//! let e = mean_pooling(&h, &mask)?;
//! assert_eq!(e.to_vec2::<f32>()?, vec![vec![3., 0.], vec![0., 2.]]);
//! assert_eq!(normalize(&e)?.to_vec2::<f32>()?, vec![vec![1., 0.], vec![0., 1.]]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use pyrite_core::{bail, Result, Tensor};
use pyrite_nn::functional as F;

/// The mask as `[batch, seq, 1]` in `h`'s dtype, after checking that it fits `h`.
fn mask_for(op: &str, h: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
    if h.rank() != 3 || attention_mask.rank() != 2 || attention_mask.dims() != &h.dims()[..2] {
        bail!(
            Shape,
            "{op}: expected token states [batch, seq, hidden] and an attention_mask [batch, seq], got {} and {}",
            h.shape(),
            attention_mask.shape()
        );
    }
    if !h.dtype().is_floating_point() {
        bail!(DType, "{op}: expected floating-point token states, got {}", h.dtype());
    }
    attention_mask.to_dtype(h.dtype())?.unsqueeze(-1)
}

/// The mean of the token states `[batch, seq, hidden]` over the tokens that `attention_mask`
/// `[batch, seq]` keeps (1 = token, 0 = padding): `sum(h * mask) / max(sum(mask), 1e-9)`,
/// sentence-transformers' `mean_pooling`. Returns `[batch, hidden]`.
pub fn mean_pooling(last_hidden_state: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
    let m = mask_for("mean_pooling", last_hidden_state, attention_mask)?;
    let sum = last_hidden_state.mul(&m)?.sum_dims(&[1], false)?;
    let count = m.sum_dims(&[1], false)?.clamp(Some(1e-9.into()), None)?;
    sum.div(&count)
}

/// The element-wise maximum over the kept tokens (padding set to -1e9 first, as
/// sentence-transformers does). Returns `[batch, hidden]`.
pub fn max_pooling(last_hidden_state: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
    let m = mask_for("max_pooling", last_hidden_state, attention_mask)?;
    let pad = m.eq_scalar(0)?.expand(last_hidden_state.dims())?;
    last_hidden_state.masked_fill(&pad, -1e9)?.amax(&[1], false)
}

/// The first token's state (`[CLS]`): `last_hidden_state[:, 0]`.
pub fn cls_pooling(last_hidden_state: &Tensor) -> Result<Tensor> {
    if last_hidden_state.rank() != 3 || last_hidden_state.dims()[1] == 0 {
        bail!(
            Shape,
            "cls_pooling: expected token states [batch, seq >= 1, hidden], got {}",
            last_hidden_state.shape()
        );
    }
    last_hidden_state.select(1, 0)
}

/// Each row scaled to unit L2 norm: `F.normalize(x, p=2, dim=-1)` (eps 1e-12), what
/// sentence-transformers' `Normalize` does.
pub fn normalize(embeddings: &Tensor) -> Result<Tensor> {
    if embeddings.rank() == 0 {
        bail!(Shape, "normalize: expected at least one dimension, got a scalar");
    }
    F::normalize(embeddings, &F::NormalizeOptions { dim: -1, ..Default::default() })
}
