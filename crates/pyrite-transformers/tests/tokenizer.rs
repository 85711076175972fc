//! AutoTokenizer against transformers' tokenizer on the same `tokenizer.json`
//! (reference/gen_bert.py): ids, token types and masks exactly, for a padded batch, sentence
//! pairs and a truncated batch; then tokenizer -> model -> sentence embeddings end to end.
#![cfg(feature = "tokenizers")]

mod common;

use common::{assert_close, bert_tiny, temp_copy, Reference};
use pyrite::transformers::{
    mean_pooling, normalize, AutoTokenizer, BatchEncoding, BertModel, Padding, PaddingSide, TokenizerOptions,
};
use pyrite::Result;

fn longest() -> TokenizerOptions {
    TokenizerOptions { padding: Padding::Longest, ..Default::default() }
}

fn assert_batch_eq(got: &BatchEncoding, r: &Reference, batch: &str) -> Result<()> {
    for (name, t) in [
        ("input_ids", &got.input_ids),
        ("token_type_ids", &got.token_type_ids),
        ("attention_mask", &got.attention_mask),
    ] {
        let want = r.get(&format!("{batch}/{name}"));
        assert_eq!(t.to_vec2::<i64>()?, want.to_vec2::<i64>()?, "{batch}/{name}");
    }
    Ok(())
}

#[test]
fn padded_batch_matches_transformers() -> Result<()> {
    let r = Reference::load();
    let tok = AutoTokenizer::from_pretrained(bert_tiny())?;
    assert_eq!(
        (tok.pad_token(), tok.pad_token_id(), tok.model_max_length()),
        (Some("[PAD]"), Some(0), Some(64))
    );
    assert_eq!(tok.len(), 89);
    let sentences = r.sentences();
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    assert_batch_eq(&tok.call(&texts, &longest())?, &r, "single")
}

#[test]
fn tokens_match_transformers_with_unknown_words() -> Result<()> {
    let r = Reference::load();
    let tok = AutoTokenizer::from_pretrained(bert_tiny())?;
    let want: Vec<Vec<String>> = serde_json::from_value(r.meta("tokens")).unwrap();
    for (s, want) in r.sentences().iter().zip(want) {
        assert_eq!(tok.tokenize(s)?, want, "{s}");
    }
    // "Zebra42" has characters outside the vocabulary: one [UNK].
    assert_eq!(tok.tokenize("Zebra42")?, ["[UNK]"]);
    let ids = tok.encode("Hello, world!")?;
    assert_eq!(ids[0], tok.token_to_id("[CLS]").unwrap());
    assert_eq!(*ids.last().unwrap(), tok.token_to_id("[SEP]").unwrap());
    assert_eq!(tok.decode(&ids, true)?, "hello, world!");
    Ok(())
}

#[test]
fn sentence_pairs_get_token_type_one() -> Result<()> {
    let r = Reference::load();
    let tok = AutoTokenizer::from_pretrained(bert_tiny())?;
    let pairs = r.pairs();
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let enc = tok.call_pairs(&pairs, &longest())?;
    assert_batch_eq(&enc, &r, "pairs")?;
    // Truncation, longest first, to max_length 9, padded to it.
    let opts = TokenizerOptions {
        padding: Padding::MaxLength,
        truncation: true,
        max_length: Some(9),
        ..Default::default()
    };
    assert_batch_eq(&tok.call_pairs(&pairs, &opts)?, &r, "trunc")
}

#[test]
fn tokenizer_to_sentence_embeddings_matches_transformers() -> Result<()> {
    let r = Reference::load();
    let tok = AutoTokenizer::from_pretrained(bert_tiny())?;
    let model = BertModel::from_pretrained(bert_tiny())?;
    let sentences = r.sentences();
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let batch = tok.call(&texts, &longest())?;
    let out = model.call(&batch.to_inputs())?;
    let e = normalize(&mean_pooling(&out.last_hidden_state, &batch.attention_mask)?)?;
    assert_close(&e, &r.get("single/sentence"), 1e-5, "sentence embeddings");
    Ok(())
}

#[test]
fn padding_left_and_errors() -> Result<()> {
    let mut tok = AutoTokenizer::from_pretrained(bert_tiny())?;
    let texts = ["Hello, world!", "The cat sat on the mat."];
    // padding=False: a ragged batch cannot be a tensor.
    let e = tok.call(&texts, &TokenizerOptions::default()).unwrap_err();
    assert!(e.to_string().contains("different lengths"), "{e}");
    // One sentence needs no padding.
    assert_eq!(tok.call(&texts[..1], &TokenizerOptions::default())?.input_ids.dims(), &[1, 6]);
    assert!(tok.call(&[], &longest()).is_err());

    let right = tok.call(&texts, &longest())?;
    tok.set_padding_side(PaddingSide::Left);
    let left = tok.call(&texts, &longest())?;
    let (r_ids, l_ids) = (right.input_ids.to_vec2::<i64>()?, left.input_ids.to_vec2::<i64>()?);
    let pad = r_ids[0].iter().filter(|&&i| i == 0).count();
    assert_eq!(l_ids[0][pad..], r_ids[0][..r_ids[0].len() - pad]);
    assert_eq!(left.attention_mask.to_vec2::<i64>()?[0][..pad], vec![0; pad][..]);

    // Truncation without a limit, and padding without a pad token.
    let dir = temp_copy(&bert_tiny(), "tokenizer");
    std::fs::remove_file(dir.join("tokenizer_config.json"))?;
    let bare = AutoTokenizer::from_pretrained(&dir)?;
    assert_eq!(bare.pad_token(), Some("[PAD]"), "[PAD] of the vocabulary");
    let e = bare.call(&texts, &TokenizerOptions { truncation: true, ..longest() }).unwrap_err();
    assert!(e.to_string().contains("truncation needs max_length"), "{e}");
    let e = AutoTokenizer::from_pretrained(dir.join("nothing")).unwrap_err();
    assert!(e.to_string().contains("has no tokenizer.json"), "{e}");
    std::fs::write(dir.join("tokenizer.json"), "{")?;
    assert!(AutoTokenizer::from_file(dir.join("tokenizer.json")).is_err());
    std::fs::remove_dir_all(dir).ok();
    let mut t = AutoTokenizer::from_pretrained(bert_tiny())?;
    assert!(t.set_pad_token("[NOPE]").is_err());
    assert!(t.decode(&[-1], false).is_err());
    Ok(())
}

/// A copy of bert-tiny whose tokenizer_config.json has `model_max_length` set to `value`.
fn with_model_max_length(tag: &str, value: &str) -> Result<std::path::PathBuf> {
    let dir = temp_copy(&bert_tiny(), tag);
    let path = dir.join("tokenizer_config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?).unwrap();
    cfg["model_max_length"] = serde_json::from_str(value).unwrap();
    std::fs::write(path, cfg.to_string())?;
    Ok(dir)
}

#[test]
fn huge_lengths_are_errors_not_aborts() -> Result<()> {
    let texts = ["Hello, world!", "The cat sat on the mat."];
    let plain = AutoTokenizer::from_pretrained(bert_tiny())?.call(&texts, &longest())?;
    // A model_max_length of 1e12 is a limit (transformers takes only > 1e20 as "none"):
    // truncating to it changes nothing, padding to it cannot be allocated.
    let dir = with_model_max_length("mml-1e12", "1e12")?;
    let tok = AutoTokenizer::from_pretrained(&dir)?;
    assert_eq!(tok.model_max_length(), Some(1_000_000_000_000));
    let got = tok.call(&texts, &TokenizerOptions { truncation: true, ..longest() })?;
    assert_eq!(got.input_ids.to_vec2::<i64>()?, plain.input_ids.to_vec2::<i64>()?);
    let e = tok
        .call(&texts, &TokenizerOptions { padding: Padding::MaxLength, ..Default::default() })
        .unwrap_err();
    assert!(e.to_string().contains("cannot allocate") || e.to_string().contains("too large"), "{e}");
    std::fs::remove_dir_all(dir).ok();
    // int(1e30), what transformers writes for "no limit".
    let dir = with_model_max_length("mml-1e30", "1000000000000000019884624838656")?;
    assert_eq!(AutoTokenizer::from_pretrained(&dir)?.model_max_length(), None);
    std::fs::remove_dir_all(dir).ok();

    // An explicit max_length of 2^61: the padded size overflows.
    let tok = AutoTokenizer::from_pretrained(bert_tiny())?;
    let huge =
        TokenizerOptions { padding: Padding::MaxLength, max_length: Some(1 << 61), ..Default::default() };
    let e = tok.call(&texts, &huge).unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
    let got =
        tok.call(&texts, &TokenizerOptions { truncation: true, max_length: Some(1 << 61), ..longest() })?;
    assert_eq!(got.input_ids.to_vec2::<i64>()?, plain.input_ids.to_vec2::<i64>()?);
    // Shorter than the special tokens: an error (tokenizers would underflow).
    for (max_length, pairs) in [(1, false), (2, true), (0, false)] {
        let opts = TokenizerOptions { truncation: true, max_length: Some(max_length), ..longest() };
        let e =
            if pairs { tok.call_pairs(&[("a", "b")], &opts) } else { tok.call(&texts, &opts) }.unwrap_err();
        assert!(e.to_string().contains("shorter than the"), "{max_length}: {e}");
    }
    // Exactly the special tokens: [CLS] [SEP].
    let opts = TokenizerOptions { truncation: true, max_length: Some(2), ..longest() };
    assert_eq!(tok.call(&texts, &opts)?.input_ids.to_vec2::<i64>()?, vec![vec![2, 3], vec![2, 3]]);
    Ok(())
}

#[test]
fn truncation_lengths_can_change_between_calls() -> Result<()> {
    // The truncating tokenizer is kept for the last length: a new length must not reuse it.
    let r = Reference::load();
    let tok = AutoTokenizer::from_pretrained(bert_tiny())?;
    let pairs = r.pairs();
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    for max_length in [9, 5, 9, 64] {
        let opts = TokenizerOptions {
            padding: Padding::MaxLength,
            truncation: true,
            max_length: Some(max_length),
            ..Default::default()
        };
        let got = tok.call_pairs(&pairs, &opts)?;
        assert_eq!(got.input_ids.dims(), &[2, max_length]);
        if max_length == 9 {
            assert_batch_eq(&got, &r, "trunc")?;
        }
    }
    let copy = tok.clone();
    let opts = TokenizerOptions {
        padding: Padding::MaxLength,
        truncation: true,
        max_length: Some(9),
        ..Default::default()
    };
    assert_batch_eq(&copy.call_pairs(&pairs, &opts)?, &r, "trunc")?;
    Ok(())
}

#[test]
fn malformed_tokenizer_json_is_an_error_not_a_panic() -> Result<()> {
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bert_tiny().join("tokenizer.json"))?).unwrap();
    let cases: Vec<(&str, serde_json::Value)> = vec![
        // A single-sentence template that uses the second sentence: tokenizers indexes a pair
        // that is not there on every single-sentence call.
        ("template", {
            let mut v = base.clone();
            v["post_processor"]["single"][1]["Sequence"]["id"] = "B".into();
            v
        }),
        // A precompiled normalizer whose charsmap is not one: tokenizers panics normalizing.
        ("charsmap", {
            let mut v = base.clone();
            v["normalizer"] = serde_json::json!({"type": "Precompiled", "precompiled_charsmap": "AAAA"});
            v
        }),
    ];
    for (name, json) in cases {
        let dir = temp_copy(&bert_tiny(), &format!("malformed-{name}"));
        std::fs::write(dir.join("tokenizer.json"), json.to_string())?;
        let e = AutoTokenizer::from_pretrained(&dir).unwrap_err();
        assert!(e.to_string().contains("panicked") && e.to_string().contains("malformed"), "{name}: {e}");
        assert!(e.to_string().contains("tokenizer.json"), "{name}: {e}");
        std::fs::remove_dir_all(dir).ok();
    }
    Ok(())
}
