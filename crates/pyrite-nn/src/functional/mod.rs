//! `torch.nn.functional`: each layer's computation as a function of tensors. The layers call
//! these; so can a user who holds the weights themselves. Everything is differentiable
//! (composed of recorded core ops, or recorded with its own backward).
//!
//! ```
//! use pyrite::nn::functional as F;
//! use pyrite::Tensor;
//! let x = Tensor::new([[-1f32, 2.], [0.5, -3.]])?;
//! assert_eq!(F::relu(&x)?.to_vec2::<f32>()?, vec![vec![0., 2.], vec![0.5, 0.]]);
//! let target = Tensor::new([1i64, 0])?;
//! let loss = F::cross_entropy(&x, &target, &Default::default())?;
//! assert!(loss.item::<f32>()? > 0.0);
//! # Ok::<(), pyrite::Error>(())
//! ```

mod activation;
mod attention;
mod conv;
mod linear;
mod loss;
mod normalization;
mod rnn;
mod vision;

pub use activation::*;
pub use attention::*;
pub use conv::*;
pub use linear::*;
pub use loss::*;
pub use normalization::*;
pub use rnn::*;
pub use vision::*;

/// `reduction=` of the losses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    None,
    #[default]
    Mean,
    Sum,
}

impl Reduction {
    /// Applies the reduction to elementwise losses.
    pub(crate) fn apply(self, loss: pyrite_core::Tensor) -> pyrite_core::Result<pyrite_core::Tensor> {
        match self {
            Reduction::None => Ok(loss),
            Reduction::Mean => loss.mean(),
            Reduction::Sum => loss.sum(),
        }
    }
}
