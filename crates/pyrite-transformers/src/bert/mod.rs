//! BERT (Hugging Face's `models/bert`): [`config`] (`BertConfig` from `config.json`),
//! [`modeling`] (`BertModel` and its parts, with Hugging Face's parameter names) and
//! [`pretrained`] (`BertModel::from_pretrained` and the checkpoint key mapping).

pub mod config;
pub mod modeling;
pub mod pretrained;

pub use config::BertConfig;
pub use modeling::{
    extended_attention_mask, BertAttention, BertEmbeddings, BertEncoder, BertInputs, BertIntermediate,
    BertLayer, BertModel, BertModelOutput, BertOutput, BertPooler, BertSelfAttention, BertSelfOutput,
};
pub use pretrained::{FromPretrainedOptions, LoadingInfo};
