//! # pyrite-transformers
//!
//! A small part of Hugging Face's `transformers` for transfer learning with language models,
//! on Pyrite's `nn`: use it through the facade as `pyrite::transformers`.
//!
//! - [`bert`]: [`BertConfig`] (from `config.json`), [`BertModel`] (a [`pyrite_nn::Module`]
//!   whose parameter names are Hugging Face's, so checkpoints map one to one) and
//!   [`BertModel::from_pretrained`] (a Hugging Face folder with `model.safetensors` or
//!   `pytorch_model.bin`, or their shards).
//! - [`tokenization`] (feature `tokenizers`, on by default): [`AutoTokenizer`] reads
//!   `tokenizer.json` with the `tokenizers` crate and returns padded `input_ids`,
//!   `token_type_ids` and `attention_mask` tensors.
//! - [`pooling`]: sentence embeddings as sentence-transformers makes them ([`mean_pooling`],
//!   [`normalize`]).
//! - [`sentence_transformers`] (feature `tokenizers`): [`SentenceTransformer`] reads a
//!   sentence-transformers folder (`modules.json`, `sentence_bert_config.json`, the pooling
//!   config) and encodes sentences as `SentenceTransformer.encode` does.
//! - [`activations`]: the `hidden_act` names of a config.
//!
//! A tiny BERT with random weights, run on a batch of ids with padding:
//!
//! ```
//! use pyrite::nn::Module;
//! use pyrite::transformers::{mean_pooling, normalize, BertConfig, BertInputs, BertModel};
//! use pyrite::Tensor;
//!
//! // vocab 100, hidden 16, 2 layers, 4 heads, feed-forward 32, 20 positions
//! let config = BertConfig::new(100, 16, 2, 4, 32, 20);
//! let model = BertModel::new(&config)?;
//! model.eval();
//! assert!(model.state_dict()?.contains_key("encoder.layer.1.attention.self.query.weight"));
//!
//! let input_ids = Tensor::new([[2i64, 17, 42, 3], [2, 9, 3, 0]])?;
//! let attention_mask = Tensor::new([[1i64, 1, 1, 1], [1, 1, 1, 0]])?;
//! let inputs = BertInputs {
//!     input_ids: Some(input_ids),
//!     attention_mask: Some(attention_mask.clone()),
//!     ..Default::default()
//! };
//! let out = model.call(&inputs)?;
//! assert_eq!(out.last_hidden_state.dims(), &[2, 4, 16]);
//! assert_eq!(out.pooler_output.unwrap().dims(), &[2, 16]);
//!
//! let sentences = normalize(&mean_pooling(&out.last_hidden_state, &attention_mask)?)?;
//! assert_eq!(sentences.dims(), &[2, 16]);
//! # Ok::<(), pyrite::Error>(())
//! ```
//!
//! ## `#[derive(Module)]` outside `pyrite-nn`
//!
//! The derive writes absolute paths through the facade (`::pyrite::nn::ModuleFields`,
//! `::pyrite::Result`), so that user crates, which depend on `pyrite`, need nothing special.
//! This crate cannot depend on the facade (the facade re-exports it), so it names itself
//! `pyrite` with `extern crate self as pyrite` and provides the two paths the derive uses: a
//! private `nn` module re-exporting `pyrite_nn`, and `Result` at the root. `pyrite-nn` does
//! the same for its own layers; any crate below the facade can.

extern crate self as pyrite;

pub mod activations;
mod args;
pub mod bert;
pub mod pooling;
#[cfg(feature = "tokenizers")]
pub mod sentence_transformers;
#[cfg(feature = "tokenizers")]
pub mod tokenization;

pub use activations::HiddenAct;
pub use bert::{BertConfig, BertInputs, BertModel, BertModelOutput, FromPretrainedOptions, LoadingInfo};
pub use pooling::{cls_pooling, max_pooling, mean_pooling, normalize};
#[cfg(feature = "tokenizers")]
pub use sentence_transformers::{PoolingMode, SentenceTransformer};
#[cfg(feature = "tokenizers")]
pub use tokenization::{
    AutoTokenizer, BatchEncoding, BertTokenizerFast, Padding, PaddingSide, TokenizerOptions,
};

// The paths `#[derive(Module)]` generates (`::pyrite::nn::...`, `::pyrite::Result`); private,
// so `pyrite::transformers::nn` does not exist for users.
mod nn {
    pub use pyrite_nn::*;
}
#[allow(unused_imports)]
use pyrite_core::Result;
