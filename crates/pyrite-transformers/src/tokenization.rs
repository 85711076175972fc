//! [`AutoTokenizer`]: Hugging Face's fast tokenizers (`tokenizer.json`, read by the
//! `tokenizers` crate), called the way `transformers` calls them: a batch of texts (or of
//! sentence pairs) in, the model's `input_ids`, `token_type_ids` and `attention_mask` tensors
//! out, padded and truncated as asked.
//!
//! Only in the `tokenizers` feature (on by default).
//!
//! ```no_run
//! use pyrite::transformers::{AutoTokenizer, BertModel, Padding, TokenizerOptions};
//! let tokenizer = AutoTokenizer::from_pretrained("path/to/bert")?;
//! let model = BertModel::from_pretrained("path/to/bert")?;
//! let opts = TokenizerOptions { padding: Padding::Longest, truncation: true, ..Default::default() };
//! let batch = tokenizer.call(&["A first sentence.", "And a second one, longer."], &opts)?;
//! let out = model.call(&batch.to_inputs())?;
//! assert_eq!(out.last_hidden_state.dims()[..2], batch.input_ids.dims()[..]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use crate::bert::BertInputs;
use pyrite_core::{bail, err, Result, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokenizers::{
    EncodeInput, Encoding, PostProcessor, Tokenizer, TruncationDirection, TruncationParams,
    TruncationStrategy,
};

/// `padding=` of a tokenizer call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Padding {
    /// `padding=False` (the default): every sequence must then have the same length to make
    /// a tensor.
    #[default]
    DoNotPad,
    /// `padding=True` / `"longest"`: to the longest sequence of the batch.
    Longest,
    /// `padding="max_length"`: to `max_length` (or the tokenizer's `model_max_length`).
    MaxLength,
}

/// `padding_side` of a tokenizer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PaddingSide {
    #[default]
    Right,
    Left,
}

/// The keyword arguments of a tokenizer call, with `transformers`' defaults (the tensors are
/// always PyTorch's: `return_tensors="pt"`).
#[derive(Clone, Debug)]
pub struct TokenizerOptions {
    /// default [`Padding::DoNotPad`]
    pub padding: Padding,
    /// Cut sequences to `max_length` (longest first for pairs); default false.
    pub truncation: bool,
    /// default: the tokenizer's `model_max_length`
    pub max_length: Option<usize>,
    /// `[CLS]` / `[SEP]` and the like; default true.
    pub add_special_tokens: bool,
}

impl Default for TokenizerOptions {
    fn default() -> Self {
        TokenizerOptions {
            padding: Padding::DoNotPad,
            truncation: false,
            max_length: None,
            add_special_tokens: true,
        }
    }
}

/// A tokenized batch: three int64 tensors of shape `[batch, seq]` (Hugging Face's
/// `BatchEncoding`).
#[derive(Clone, Debug)]
pub struct BatchEncoding {
    pub input_ids: Tensor,
    /// Segment ids: 0 for the first sentence, 1 for the second of a pair.
    pub token_type_ids: Tensor,
    /// 1 for tokens, 0 for padding.
    pub attention_mask: Tensor,
}

impl BatchEncoding {
    /// The model inputs (`model(**batch)`).
    pub fn to_inputs(&self) -> BertInputs {
        BertInputs {
            input_ids: Some(self.input_ids.clone()),
            attention_mask: Some(self.attention_mask.clone()),
            token_type_ids: Some(self.token_type_ids.clone()),
            ..Default::default()
        }
    }
}

/// A fast tokenizer from `tokenizer.json` with the settings of `tokenizer_config.json`
/// (`AutoTokenizer.from_pretrained(folder)` for a model with a fast tokenizer).
///
/// Every call into the `tokenizers` crate is guarded: a malformed `tokenizer.json` that makes
/// it panic gives an error instead (the panic message is still printed by the panic hook).
pub struct AutoTokenizer {
    inner: Tokenizer,
    pad_token: Option<String>,
    pad_token_id: Option<u32>,
    padding_side: PaddingSide,
    model_max_length: Option<usize>,
    /// A copy of `inner` truncating to the given length: truncation is a setting of the
    /// `tokenizers` tokenizer, and copying it (its vocabulary) costs more than a call, so the
    /// copy for the last length asked is kept.
    truncating: Mutex<Option<(usize, Arc<Tokenizer>)>>,
}

impl Clone for AutoTokenizer {
    fn clone(&self) -> Self {
        AutoTokenizer {
            inner: self.inner.clone(),
            pad_token: self.pad_token.clone(),
            pad_token_id: self.pad_token_id,
            padding_side: self.padding_side,
            model_max_length: self.model_max_length,
            truncating: Mutex::new(self.truncating.lock().map(|c| c.clone()).unwrap_or(None)),
        }
    }
}

/// `transformers`' `LARGE_INTEGER`: a `model_max_length` above it means "no limit".
const LARGE_INTEGER: f64 = 1e20;

/// Runs a call into the `tokenizers` crate, turning its errors and its panics into errors.
fn guarded<T, E: std::fmt::Display>(what: &str, f: impl FnOnce() -> std::result::Result<T, E>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(tok_err(what, e)),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            Err(err!(
                Value,
                "tokenizer: {what}: the tokenizers library panicked ({msg}); the tokenizer.json is probably malformed"
            ))
        }
    }
}

/// BERT's tokenizer is the generic one reading BERT's `tokenizer.json`.
pub type BertTokenizerFast = AutoTokenizer;

fn tok_err(what: &str, e: impl std::fmt::Display) -> pyrite_core::Error {
    err!(Value, "tokenizer: {what}: {e}")
}

impl AutoTokenizer {
    /// `tokenizer.json` of `folder`, with `tokenizer_config.json`'s `pad_token`,
    /// `padding_side` and `model_max_length` when the folder has one.
    pub fn from_pretrained(folder: impl AsRef<Path>) -> Result<AutoTokenizer> {
        let folder = folder.as_ref();
        let file = folder.join("tokenizer.json");
        if !file.is_file() {
            bail!(
                Io,
                "AutoTokenizer.from_pretrained: {} has no tokenizer.json (only fast tokenizers are supported; a folder with just vocab.txt needs converting with the `tokenizers` library)",
                folder.display()
            );
        }
        let mut t = AutoTokenizer::from_file(&file)?;
        let cfg_path = folder.join("tokenizer_config.json");
        if cfg_path.is_file() {
            let text = std::fs::read_to_string(&cfg_path)
                .map_err(|e| err!(Io, "AutoTokenizer: reading {}: {e}", cfg_path.display()))?;
            let cfg: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| err!(Value, "AutoTokenizer: {} is not valid JSON: {e}", cfg_path.display()))?;
            t.configure(&cfg)?;
        }
        Ok(t)
    }

    /// A `tokenizer.json` file alone: the pad token is `[PAD]` when the vocabulary has it (or
    /// the file's padding settings name one), and there is no `model_max_length`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<AutoTokenizer> {
        let path = path.as_ref();
        let what = format!("reading {}", path.display());
        let mut inner = guarded(&what, || Tokenizer::from_file(path))?;
        let from_file_padding = inner.get_padding().map(|p| p.pad_token.clone());
        // A call sets padding and truncation itself, as `transformers` does: the file's own
        // settings are switched off.
        inner.with_padding(None);
        guarded("clearing truncation", || inner.with_truncation(None).map(drop))?;
        // A file can parse and still make every call panic (a post-processor naming ids that
        // are not there, for example): one call on a short text tells at load time.
        guarded(&format!("{} fails on a test sentence", path.display()), || {
            let single = inner.encode("a b", true)?;
            let pair = inner.encode(("a", "b"), true)?;
            inner.decode(single.get_ids(), true)?;
            inner.decode(pair.get_ids(), false)
        })?;
        let mut t = AutoTokenizer {
            inner,
            pad_token: None,
            pad_token_id: None,
            padding_side: PaddingSide::Right,
            model_max_length: None,
            truncating: Mutex::new(None),
        };
        let pad =
            from_file_padding.filter(|p| t.inner.token_to_id(p).is_some()).unwrap_or_else(|| "[PAD]".into());
        if t.inner.token_to_id(&pad).is_some() {
            t.set_pad_token(&pad)?;
        }
        Ok(t)
    }

    fn configure(&mut self, cfg: &serde_json::Value) -> Result<()> {
        // A special token is a string or an object `{"content": ...}` (an AddedToken).
        let token = |v: &serde_json::Value| -> Option<String> {
            v.as_str().map(String::from).or_else(|| v.get("content")?.as_str().map(String::from))
        };
        if let Some(p) = cfg.get("pad_token").and_then(token) {
            self.set_pad_token(&p)?;
        }
        match cfg.get("padding_side").and_then(|v| v.as_str()) {
            None => {}
            Some("right") => self.padding_side = PaddingSide::Right,
            Some("left") => self.padding_side = PaddingSide::Left,
            Some(other) => {
                bail!(Value, "AutoTokenizer: padding_side should be \"right\" or \"left\", got \"{other}\"")
            }
        }
        // `transformers` writes a huge number (int(1e30)) for "no limit", and takes anything
        // above `LARGE_INTEGER` (1e20) so.
        if let Some(n) = cfg.get("model_max_length").and_then(|v| v.as_f64()) {
            self.model_max_length = (1.0..=LARGE_INTEGER).contains(&n).then_some(n as usize);
        }
        Ok(())
    }

    /// Sets the padding token (`tokenizer.pad_token = ...`); it must be in the vocabulary.
    pub fn set_pad_token(&mut self, token: &str) -> Result<()> {
        match self.inner.token_to_id(token) {
            Some(id) => {
                self.pad_token = Some(token.to_string());
                self.pad_token_id = Some(id);
                Ok(())
            }
            None => bail!(Value, "AutoTokenizer: the pad token \"{token}\" is not in the vocabulary"),
        }
    }

    /// `tokenizer.padding_side = ...`.
    pub fn set_padding_side(&mut self, side: PaddingSide) {
        self.padding_side = side;
    }

    pub fn pad_token(&self) -> Option<&str> {
        self.pad_token.as_deref()
    }

    pub fn pad_token_id(&self) -> Option<u32> {
        self.pad_token_id
    }

    pub fn padding_side(&self) -> PaddingSide {
        self.padding_side
    }

    pub fn model_max_length(&self) -> Option<usize> {
        self.model_max_length
    }

    /// The vocabulary's size, with the added tokens (`len(tokenizer)`).
    pub fn len(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `tokenizers` crate's tokenizer, for everything this wrapper does not cover.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.inner
    }

    /// `tokenizer.tokenize(text)`: the tokens, without special tokens.
    pub fn tokenize(&self, text: &str) -> Result<Vec<String>> {
        let enc = guarded("encode", || self.inner.encode(text, false))?;
        Ok(enc.get_tokens().to_vec())
    }

    /// `tokenizer.encode(text)`: the ids, with special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<i64>> {
        let enc = guarded("encode", || self.inner.encode(text, true))?;
        Ok(enc.get_ids().iter().map(|&i| i as i64).collect())
    }

    /// `tokenizer.convert_tokens_to_ids(token)`.
    pub fn token_to_id(&self, token: &str) -> Option<i64> {
        self.inner.token_to_id(token).map(i64::from)
    }

    /// `tokenizer.decode(ids, skip_special_tokens)`.
    pub fn decode(&self, ids: &[i64], skip_special_tokens: bool) -> Result<String> {
        let ids = ids
            .iter()
            .map(|&i| u32::try_from(i).map_err(|_| err!(Value, "tokenizer: decode: id {i} is out of range")))
            .collect::<Result<Vec<u32>>>()?;
        guarded("decode", || self.inner.decode(&ids, skip_special_tokens))
    }

    /// `tokenizer(texts, padding=..., truncation=..., max_length=..., return_tensors="pt")`.
    pub fn call(&self, texts: &[&str], opts: &TokenizerOptions) -> Result<BatchEncoding> {
        self.batch(texts.iter().map(|&t| EncodeInput::from(t)).collect(), opts)
    }

    /// `tokenizer(first, second, ...)` for sentence pairs: the second sentence of each pair
    /// gets token type 1.
    pub fn call_pairs(&self, pairs: &[(&str, &str)], opts: &TokenizerOptions) -> Result<BatchEncoding> {
        self.batch(pairs.iter().map(|&(a, b)| EncodeInput::from((a, b))).collect(), opts)
    }

    /// The tokenizer truncating to `max_length` (longest first, on the right), made once per
    /// length and kept for the next calls.
    fn truncating_tokenizer(&self, max_length: usize) -> Result<Arc<Tokenizer>> {
        let mut cache = self.truncating.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((m, t)) = cache.as_ref()
            && *m == max_length
        {
            return Ok(t.clone());
        }
        let mut t = self.inner.clone();
        let params = TruncationParams {
            direction: TruncationDirection::Right,
            max_length,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
        };
        guarded("truncation", || t.with_truncation(Some(params)).map(drop))?;
        let t = Arc::new(t);
        *cache = Some((max_length, t.clone()));
        Ok(t)
    }

    fn batch(&self, inputs: Vec<EncodeInput<'_>>, opts: &TokenizerOptions) -> Result<BatchEncoding> {
        if inputs.is_empty() {
            bail!(Value, "tokenizer: the batch is empty");
        }
        let max_length = opts.max_length.or(self.model_max_length);
        let is_pair = matches!(inputs[0], EncodeInput::Dual(..));
        let truncating;
        let tok: &Tokenizer = if opts.truncation {
            let Some(max_length) = max_length else {
                bail!(
                    Value,
                    "tokenizer: truncation needs max_length (the tokenizer has no model_max_length)"
                );
            };
            // `tokenizers` subtracts the special tokens from max_length (those of one sequence
            // even when none are added), which must not underflow; `transformers` would
            // silently not truncate at all.
            let added = |pair| self.inner.get_post_processor().map_or(0, |p| p.added_tokens(pair));
            let added = if opts.add_special_tokens { added(is_pair) } else { added(false) };
            if max_length < added {
                bail!(
                    Value,
                    "tokenizer: max_length {max_length} is shorter than the {added} special tokens the tokenizer adds to a {}",
                    if is_pair { "pair" } else { "sequence" }
                );
            }
            truncating = self.truncating_tokenizer(max_length)?;
            &truncating
        } else {
            &self.inner
        };
        let encs: Vec<Encoding> = inputs
            .into_iter()
            .map(|i| guarded("encode", || tok.encode(i, opts.add_special_tokens)))
            .collect::<Result<_>>()?;
        let longest = encs.iter().map(Encoding::len).max().unwrap_or(0);
        let target = match opts.padding {
            Padding::DoNotPad => {
                if encs.iter().any(|e| e.len() != longest) {
                    let lens: Vec<usize> = encs.iter().map(Encoding::len).collect();
                    bail!(
                        Value,
                        "tokenizer: the sequences have different lengths {lens:?}: a tensor needs padding (padding=Padding::Longest) or truncation"
                    );
                }
                longest
            }
            Padding::Longest => longest,
            Padding::MaxLength => match max_length {
                Some(m) => m.max(longest),
                None => bail!(
                    Value,
                    "tokenizer: padding to max_length needs max_length (the tokenizer has no model_max_length)"
                ),
            },
        };
        let pad_id = match (target > 0 && encs.iter().any(|e| e.len() < target), self.pad_token_id) {
            (true, None) => bail!(
                Value,
                "tokenizer: Asking to pad but the tokenizer does not have a padding token (set one with set_pad_token)"
            ),
            (_, id) => id.unwrap_or(0) as i64,
        };
        let n = encs.len();
        let numel =
            n.checked_mul(target).filter(|&m| m.checked_mul(8).is_some_and(|b| b <= isize::MAX as usize));
        let Some(numel) = numel else {
            bail!(
                Value,
                "tokenizer: a batch of {n} sequences padded to {target} tokens is too large to allocate"
            );
        };
        let alloc = || -> Result<Vec<i64>> {
            let mut v = Vec::new();
            v.try_reserve_exact(numel).map_err(|_| {
                err!(
                    Value,
                    "tokenizer: cannot allocate a batch of {n} sequences padded to {target} tokens ({} bytes per tensor)",
                    numel * 8
                )
            })?;
            Ok(v)
        };
        let (mut ids, mut types, mut mask) = (alloc()?, alloc()?, alloc()?);
        for e in &encs {
            let pad = target - e.len();
            let row = |v: &[u32], fill: i64, out: &mut Vec<i64>| {
                if self.padding_side == PaddingSide::Left {
                    out.extend(std::iter::repeat_n(fill, pad));
                }
                out.extend(v.iter().map(|&x| x as i64));
                if self.padding_side == PaddingSide::Right {
                    out.extend(std::iter::repeat_n(fill, pad));
                }
            };
            row(e.get_ids(), pad_id, &mut ids);
            row(e.get_type_ids(), 0, &mut types);
            row(e.get_attention_mask(), 0, &mut mask);
        }
        Ok(BatchEncoding {
            input_ids: Tensor::from_vec(ids, [n, target])?,
            token_type_ids: Tensor::from_vec(types, [n, target])?,
            attention_mask: Tensor::from_vec(mask, [n, target])?,
        })
    }
}

impl std::fmt::Debug for AutoTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoTokenizer")
            .field("vocab_size", &self.len())
            .field("pad_token", &self.pad_token)
            .field("padding_side", &self.padding_side)
            .field("model_max_length", &self.model_max_length)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> AutoTokenizer {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reference/data/bert-tiny");
        AutoTokenizer::from_pretrained(dir).unwrap()
    }

    #[test]
    fn panics_inside_tokenizers_become_errors() {
        let e = guarded("encode", || -> std::result::Result<(), String> { panic!("index out of bounds") })
            .unwrap_err();
        assert!(e.to_string().contains("encode") && e.to_string().contains("index out of bounds"), "{e}");
        let e = guarded("encode", || -> std::result::Result<(), String> { Err("plain".into()) }).unwrap_err();
        assert_eq!(e.to_string(), "tokenizer: encode: plain");
    }

    #[test]
    fn the_truncating_tokenizer_is_made_once_per_length() -> Result<()> {
        let t = tiny();
        let a = t.truncating_tokenizer(9)?;
        assert!(
            Arc::ptr_eq(&a, &t.truncating_tokenizer(9)?),
            "a second call with the same length copies again"
        );
        assert_eq!(a.get_truncation().map(|p| p.max_length), Some(9));
        let b = t.truncating_tokenizer(5)?;
        assert_eq!(b.get_truncation().map(|p| p.max_length), Some(5));
        assert!(t.inner.get_truncation().is_none());
        Ok(())
    }
}
