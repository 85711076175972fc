//! Pyrite's `torch.nn`: modules with PyTorch's names, hooks and state_dicts, the layers and
//! losses, `functional` and `init`. Use it through the facade: `pyrite::nn`.
//!
//! - The Module system: [`module`] (the [`Module`] trait, [`ModuleBase`], introspection,
//!   train/eval, `to_dtype`), [`hooks`] (forward, backward and state_dict hooks, and the call
//!   that runs them), [`state_dict`], [`container`] (Sequential, ModuleList, ModuleDict,
//!   ParameterList, ParameterDict), [`value`] (what a call takes and returns).
//! - Layers, one file per family as in `torch/nn/modules`: [`linear`], [`activation`],
//!   [`dropout`], [`sparse`] (embeddings), [`normalization`], [`loss`], [`flatten`], [`rnn`]
//!   (recurrent layers; packed sequences are in [`utils::rnn`]), [`attention`]
//!   (MultiheadAttention), [`transformer`].
//! - [`functional`] (each layer's op as a function) and [`init`].

extern crate self as pyrite;

pub mod activation;
pub mod attention;
pub mod call;
pub mod container;
pub mod conv;
pub mod data_parallel;
pub mod distance;
pub mod dropout;
pub mod flatten;
pub mod fold;
pub mod functional;
pub mod hooks;
pub mod init;
pub mod linear;
pub mod loss;
mod memory_scope;
pub mod module;
pub mod normalization;
pub mod padding;
mod parameter;
pub mod pixelshuffle;
pub mod pooling;
pub mod rnn;
pub mod serialization;
pub mod sparse;
pub mod state_dict;
pub mod summary;
pub mod transformer;
pub mod upsampling;
pub mod utils;
pub mod value;

pub use activation::*;
pub use attention::{MultiheadAttention, MultiheadAttentionOptions};
pub use call::{Args, FromValue};
pub use container::{ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential};
pub use conv::{
    Conv1d, Conv2d, Conv3d, ConvOptions, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, Padding,
};
pub use data_parallel::{DataParallel, DataParallelOptions};
pub use distance::{CosineSimilarity, PairwiseDistance};
pub use dropout::{AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout};
pub use flatten::{Flatten, Unflatten};
pub use fold::{Fold, Unfold};
pub use hooks::{
    register_module_forward_hook, register_module_forward_pre_hook, register_module_full_backward_hook,
    HookHandle, HookOptions, ModuleSnapshot,
};
pub use linear::{Bilinear, Identity, Linear};
pub use loss::*;
pub use module::{AsModule, Member, MemberMut, Members, Module, ModuleBase, ModuleFields, ModuleHooks};
pub use normalization::{
    BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
    LayerNorm, LocalResponseNorm, RMSNorm, SyncBatchNorm,
};
pub use padding::*;
pub use parameter::{Buffer, Parameter};
pub use pixelshuffle::{ChannelShuffle, PixelShuffle, PixelUnshuffle};
pub use pooling::*;
pub use pyrite_nn_derive::Module;
pub use rnn::{GRUCell, LSTMCell, RNNCell, RnnNonlinearity, RnnOptions, GRU, LSTM, RNN};
pub use serialization::{load_safetensors, save_safetensors};
pub use sparse::{Embedding, EmbeddingBag};
pub use state_dict::{IncompatibleKeys, StateDict};
pub use summary::summary;
pub use transformer::{
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
    TransformerLayerOptions, TransformerOptions,
};
pub use upsampling::{Upsample, UpsamplingBilinear2d, UpsamplingNearest2d};
pub use value::Value;

// The paths `#[derive(Module)]` generates (`::pyrite::nn::...`, `::pyrite::Result`) resolve
// inside this crate too (private items, so a user's `use pyrite::nn::*` does not see them), so
// the built-in layers use the derive like any user struct.
mod nn {
    pub use crate::*;
}
use pyrite_core::Result;
