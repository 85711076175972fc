//! SentenceTransformer against sentence-transformers (reference/gen_sentence_transformers.py)
//! on the tiny BERT: the folder's `max_seq_length` (8, where the tokenizer's
//! `model_max_length` is 64) truncates every call, the pooling config and Normalize are
//! applied, and a plain BERT folder gets mean pooling and `min(max_position_embeddings,
//! model_max_length)`.
#![cfg(feature = "tokenizers")]

mod common;

use common::{assert_close, bert_tiny, data_path};
use pyrite::nn::load_safetensors;
use pyrite::transformers::{
    mean_pooling, normalize, AutoTokenizer, BertModel, Padding, PoolingMode, SentenceTransformer,
    TokenizerOptions,
};
use pyrite::{ErrorKind, Result, Tensor};
use std::path::{Path, PathBuf};

struct Expected {
    sentences: Vec<String>,
    tensors: pyrite::nn::StateDict,
}

fn expected() -> Expected {
    let path = data_path("sentence_transformers.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let sentences = serde_json::from_str(&meta.metadata().as_ref().unwrap()["sentences"]).unwrap();
    Expected { sentences, tensors: load_safetensors(&path).unwrap() }
}

fn st_folder() -> PathBuf {
    data_path("bert-tiny-st")
}

/// A copy of `src` with its subfolders, in a fresh temporary folder.
fn copy_tree(src: &Path, tag: &str) -> PathBuf {
    fn copy(src: &Path, dst: &Path) {
        std::fs::create_dir_all(dst).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &dst.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("pyrite-st-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy(src, &dir);
    dir
}

#[test]
fn max_seq_length_pooling_and_normalize_match_sentence_transformers() -> Result<()> {
    let want = expected();
    let texts: Vec<&str> = want.sentences.iter().map(String::as_str).collect();
    let st = SentenceTransformer::from_pretrained(st_folder())?;
    assert_eq!(st.max_seq_length(), 8, "sentence_bert_config.json, not model_max_length");
    assert_eq!(st.tokenizer().model_max_length(), Some(64));
    assert_eq!((st.pooling_modes(), st.normalizes()), (&[PoolingMode::Mean][..], true));
    let got = st.encode(&texts)?;
    assert_close(&got, want.tensors.get("mean_normalize").unwrap(), 1e-5, "mean_normalize");

    // The same by hand: truncation to 8, not to the tokenizer's 64.
    let tok = AutoTokenizer::from_pretrained(st_folder())?;
    let model = BertModel::from_pretrained(st_folder())?;
    let manual = |max_length| -> Result<Tensor> {
        let opts = TokenizerOptions {
            padding: Padding::Longest,
            truncation: true,
            max_length,
            ..Default::default()
        };
        let b = tok.call(&texts, &opts)?;
        normalize(&mean_pooling(&model.call(&b.to_inputs())?.last_hidden_state, &b.attention_mask)?)
    };
    assert_close(&got, &manual(Some(8))?, 1e-6, "by hand");
    let long = manual(None)?; // model_max_length 64: the long sentence keeps all its tokens
    let diff = long.sub(&got)?.abs()?.max()?.item::<f32>()?;
    assert!(diff > 1e-2, "truncation to 8 must change the long sentence's embedding ({diff})");

    // Batches of 32: 70 sentences give the embeddings of each one alone.
    let many: Vec<&str> = texts.iter().copied().cycle().take(70).collect();
    let all = st.encode(&many)?;
    assert_eq!(all.dims(), &[70, 32]);
    assert_close(&all.narrow(0, 64, 4)?, &got, 1e-5, "third batch");
    assert_eq!(st.encode(&[])?.dims(), &[0, 32]);
    Ok(())
}

#[test]
fn several_pooling_modes_concatenate() -> Result<()> {
    let want = expected();
    let texts: Vec<&str> = want.sentences.iter().map(String::as_str).collect();
    let dir = copy_tree(&st_folder(), "modes");
    // The older pooling_mode_* booleans ...
    let cfg = serde_json::json!({
        "word_embedding_dimension": 32, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false,
        "pooling_mode_max_tokens": true, "pooling_mode_mean_sqrt_len_tokens": true,
    });
    std::fs::write(dir.join("1_Pooling/config.json"), cfg.to_string())?;
    let modules = serde_json::json!([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]);
    std::fs::write(dir.join("modules.json"), modules.to_string())?;
    let st = SentenceTransformer::from_pretrained(&dir)?;
    assert_eq!(st.pooling_modes(), [PoolingMode::Cls, PoolingMode::Max, PoolingMode::MeanSqrtLen]);
    assert_eq!(st.get_sentence_embedding_dimension(), 96);
    assert!(!st.normalizes());
    let expected = want.tensors.get("cls_max_sqrt").unwrap();
    assert_close(&st.encode(&texts)?, expected, 1e-5, "cls_max_sqrt");
    // ... and sentence-transformers 4's pooling_mode list, with the module types it writes.
    let cfg = serde_json::json!({"embedding_dimension": 32, "pooling_mode": ["cls", "max", "mean_sqrt_len_tokens"]});
    std::fs::write(dir.join("1_Pooling/config.json"), cfg.to_string())?;
    let modules = serde_json::json!([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
    ]);
    std::fs::write(dir.join("modules.json"), modules.to_string())?;
    assert_close(
        &SentenceTransformer::from_pretrained(&dir)?.encode(&texts)?,
        expected,
        1e-5,
        "pooling_mode list",
    );
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}

#[test]
fn a_plain_bert_folder_gets_mean_pooling_and_the_shorter_limit() -> Result<()> {
    let want = expected();
    let texts: Vec<&str> = want.sentences.iter().map(String::as_str).collect();
    let st = SentenceTransformer::from_pretrained(bert_tiny())?;
    assert_eq!(st.max_seq_length(), 64);
    assert!(!st.normalizes());
    assert_close(&st.encode(&texts)?, want.tensors.get("no_st_config").unwrap(), 1e-5, "no_st_config");
    Ok(())
}

#[test]
fn unsupported_modules_and_bad_configs_are_errors() -> Result<()> {
    let dir = copy_tree(&st_folder(), "errors");
    let write = |path: &str, v: serde_json::Value| std::fs::write(dir.join(path), v.to_string()).unwrap();
    let modules = |extra: serde_json::Value| {
        serde_json::json!([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            extra,
        ])
    };
    write(
        "modules.json",
        modules(
            serde_json::json!({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}),
        ),
    );
    let e = SentenceTransformer::from_pretrained(&dir).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotImplemented);
    assert!(e.to_string().contains("sentence_transformers.models.Dense"), "{e}");
    write(
        "modules.json",
        modules(
            serde_json::json!({"idx": 2, "name": "2", "path": "../..", "type": "sentence_transformers.models.Normalize"}),
        ),
    );
    let e = SentenceTransformer::from_pretrained(&dir).unwrap_err();
    assert!(e.to_string().contains("inside the model folder"), "{e}");
    write(
        "modules.json",
        modules(
            serde_json::json!({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}),
        ),
    );

    write(
        "1_Pooling/config.json",
        serde_json::json!({"word_embedding_dimension": 32, "pooling_mode_weightedmean_tokens": true}),
    );
    let e = SentenceTransformer::from_pretrained(&dir).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotImplemented);
    assert!(e.to_string().contains("weightedmean"), "{e}");
    write(
        "1_Pooling/config.json",
        serde_json::json!({"word_embedding_dimension": 384, "pooling_mode_mean_tokens": true}),
    );
    let e = SentenceTransformer::from_pretrained(&dir).unwrap_err();
    assert!(e.to_string().contains("word_embedding_dimension 384"), "{e}");
    write("1_Pooling/config.json", serde_json::json!({"pooling_mode": "median"}));
    let e = SentenceTransformer::from_pretrained(&dir).unwrap_err();
    assert!(e.to_string().contains("invalid pooling mode \"median\""), "{e}");
    write("1_Pooling/config.json", serde_json::json!({"pooling_mode": "mean"}));
    write("sentence_bert_config.json", serde_json::json!({"max_seq_length": -3}));
    let e = SentenceTransformer::from_pretrained(&dir).unwrap_err();
    assert!(e.to_string().contains("max_seq_length"), "{e}");
    write("sentence_bert_config.json", serde_json::json!({"max_seq_length": null, "do_lower_case": true}));
    assert_eq!(SentenceTransformer::from_pretrained(&dir)?.max_seq_length(), 64);
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}
