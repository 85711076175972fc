//! BertModel against Hugging Face's transformers (reference/gen_bert.py): the tiny checkpoint
//! loads by name and gives transformers' hidden states, pooled outputs and sentence
//! embeddings; checkpoints with a `bert.` prefix or legacy keys load; bad configs, folders and
//! inputs are clear errors; the gradients pass finite differences in f64.

mod common;

use common::{assert_close, bert_tiny, bert_tiny_mlm, temp_copy, Reference};
use pyrite::autograd::{gradcheck, GradcheckOptions};
use pyrite::nn::{load_safetensors, save_safetensors, Module, ModuleHooks, StateDict, Value};
use pyrite::serialization::Object;
use pyrite::transformers::{
    bert::BertLayer, mean_pooling, normalize, BertConfig, BertInputs, BertModel, FromPretrainedOptions,
    HiddenAct,
};
use pyrite::warnings::catch_warnings;
use pyrite::{DType, ErrorKind, Generator, Result, Tensor};
use std::sync::{Arc, Mutex};

fn inputs(r: &Reference, batch: &str) -> BertInputs {
    BertInputs {
        input_ids: Some(r.get(&format!("{batch}/input_ids"))),
        attention_mask: Some(r.get(&format!("{batch}/attention_mask"))),
        token_type_ids: Some(r.get(&format!("{batch}/token_type_ids"))),
        ..Default::default()
    }
}

// ------------------------------------------------------------------------------------ config

#[test]
fn config_is_read_from_config_json() -> Result<()> {
    let cfg = BertConfig::from_file(bert_tiny().join("config.json"))?;
    let want = BertConfig {
        vocab_size: 89,
        hidden_size: 32,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        intermediate_size: 37,
        hidden_act: HiddenAct::Gelu,
        hidden_dropout_prob: 0.1,
        attention_probs_dropout_prob: 0.1,
        max_position_embeddings: 64,
        type_vocab_size: 2,
        initializer_range: 0.02,
        layer_norm_eps: 1e-12,
        pad_token_id: Some(0),
    };
    assert_eq!(cfg, want);
    Ok(())
}

const MINIMAL: &str = r#""vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 16"#;

fn config_error(json: &str) -> pyrite::Error {
    BertConfig::from_json_str(json).expect_err(json)
}

#[test]
fn config_defaults_are_hugging_faces() -> Result<()> {
    let cfg = BertConfig::from_json_str(&format!("{{{MINIMAL}}}"))?;
    assert_eq!(cfg, BertConfig::new(50, 8, 1, 2, 12, 16));
    assert_eq!((cfg.hidden_act, cfg.layer_norm_eps, cfg.type_vocab_size), (HiddenAct::Gelu, 1e-12, 2));
    let cfg = BertConfig::from_json_str(&format!(
        r#"{{{MINIMAL}, "hidden_act": "gelu_new", "pad_token_id": null, "position_embedding_type": "absolute"}}"#
    ))?;
    assert_eq!((cfg.hidden_act, cfg.pad_token_id), (HiddenAct::GeluTanh, None));
    assert_eq!(
        BertConfig::from_json_str(&format!(r#"{{{MINIMAL}, "hidden_act": "relu"}}"#))?.hidden_act,
        HiddenAct::Relu
    );
    Ok(())
}

#[test]
fn config_errors_name_the_field() {
    for field in
        ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"]
    {
        let json = format!(
            "{{{}}}",
            MINIMAL.split(", ").filter(|kv| !kv.contains(field)).collect::<Vec<_>>().join(", ")
        );
        let e = config_error(&json);
        assert!(e.to_string().contains(&format!("missing the required field \"{field}\"")), "{e}");
    }
    let e = config_error(&format!(r#"{{{MINIMAL}, "position_embedding_type": "relative_key"}}"#));
    assert_eq!(e.kind(), ErrorKind::NotImplemented);
    assert!(e.to_string().contains("relative_key"), "{e}");
    let e = config_error(&format!(r#"{{{MINIMAL}, "hidden_act": "quick_gelu"}}"#));
    assert!(e.to_string().contains("quick_gelu"), "{e}");
    let e = config_error(&format!(
        "{{{}}}",
        MINIMAL.replace("\"num_attention_heads\": 2", "\"num_attention_heads\": 3")
    ));
    assert!(e.to_string().contains("not a multiple of the number of attention heads (3)"), "{e}");
    let e = config_error(&format!("{{{}}}", MINIMAL.replace("\"hidden_size\": 8", "\"hidden_size\": \"8\"")));
    assert!(e.to_string().contains("\"hidden_size\" must be a non-negative integer"), "{e}");
    let e = config_error(&format!(r#"{{{MINIMAL}, "model_type": "gpt2"}}"#));
    assert!(e.to_string().contains("gpt2"), "{e}");
    assert!(config_error("[1, 2]").to_string().contains("JSON object"));
    assert!(config_error("{").to_string().contains("not valid JSON"));
}

// ---------------------------------------------------------------------------------- structure

#[test]
fn parameter_names_are_hugging_faces() -> Result<()> {
    let cfg = BertConfig::from_file(bert_tiny().join("config.json"))?;
    let model = BertModel::new(&cfg)?;
    let ours: Vec<String> = model.state_dict()?.keys().map(String::from).collect();
    let mut theirs: Vec<String> =
        load_safetensors(bert_tiny().join("model.safetensors"))?.keys().map(String::from).collect();
    let mut sorted = ours.clone();
    sorted.sort();
    theirs.sort();
    assert_eq!(sorted, theirs);
    // PyTorch's registration order, as Hugging Face's state_dict lists it.
    assert_eq!(
        ours[..9],
        [
            "embeddings.word_embeddings.weight",
            "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight",
            "embeddings.LayerNorm.weight",
            "embeddings.LayerNorm.bias",
            "encoder.layer.0.attention.self.query.weight",
            "encoder.layer.0.attention.self.query.bias",
            "encoder.layer.0.attention.self.key.weight",
            "encoder.layer.0.attention.self.key.bias",
        ]
    );
    assert_eq!(ours.last().unwrap(), "pooler.dense.bias");
    // position_ids and token_type_ids are non-persistent buffers.
    let buffers: Vec<String> = model.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(buffers, ["embeddings.position_ids", "embeddings.token_type_ids"]);
    assert_eq!(model.embeddings.position_ids.to_vec2::<i64>()?[0][..4], [0, 1, 2, 3]);
    // The word embedding's padding row starts at zero, as nn.Embedding(padding_idx=0) makes it.
    assert!(model.embeddings.word_embeddings.weight.select(0, 0)?.abs()?.max()?.item::<f32>()? == 0.0);
    let no_pooler = BertModel::with_pooling_layer(&cfg, false)?;
    assert!(!no_pooler.state_dict()?.keys().any(|k| k.starts_with("pooler")));
    assert_eq!(no_pooler.num_parameters(false), model.num_parameters(false) - 32 * 32 - 32);
    // Hugging Face's module tree, as its repr shows it.
    let repr = model.to_string();
    for part in [
        "(layer): ModuleList(",
        "(self): BertSelfAttention(",
        "(output): BertSelfOutput(",
        "(output): BertOutput(",
        "(pooler): BertPooler(",
    ] {
        assert!(repr.contains(part), "{part} in\n{repr}");
    }
    assert!(model.get_submodule("encoder.layer.0.attention.self")?.type_name() == "BertSelfAttention");
    let layer = model.encoder.layer.get_as::<BertLayer>(1).expect("a BertLayer");
    let query = &layer.attention.self_attention().query;
    assert!(query.weight.is_same(&model.get_parameter("encoder.layer.1.attention.self.query.weight")?));
    Ok(())
}

// --------------------------------------------------------------------- against transformers

#[test]
fn forward_matches_transformers() -> Result<()> {
    let r = Reference::load();
    let model = BertModel::from_pretrained(bert_tiny())?;
    assert!(!model.is_training(), "from_pretrained returns the model in eval mode");
    for batch in ["single", "pairs"] {
        let x = inputs(&r, batch);
        let out = model.call(&x)?;
        assert_close(&out.last_hidden_state, &r.get(&format!("{batch}/last_hidden_state")), 1e-5, batch);
        let pooled = out.pooler_output.as_ref().expect("a pooler");
        assert_close(pooled, &r.get(&format!("{batch}/pooler_output")), 1e-5, batch);
        let sentence = normalize(&mean_pooling(&out.last_hidden_state, x.attention_mask.as_ref().unwrap())?)?;
        assert_close(&sentence, &r.get(&format!("{batch}/sentence")), 1e-5, batch);
        assert!(out.hidden_states.is_none());
    }
    Ok(())
}

#[test]
fn forward_matches_transformers_in_f64() -> Result<()> {
    let r = Reference::load();
    let mut model = BertModel::from_pretrained(bert_tiny())?;
    model.to_dtype(DType::F64)?;
    for batch in ["single", "pairs"] {
        let out = model.call(&inputs(&r, batch))?;
        assert_eq!(out.last_hidden_state.dtype(), DType::F64);
        assert_close(&out.last_hidden_state, &r.get(&format!("{batch}/f64/last_hidden_state")), 1e-12, batch);
        assert_close(
            out.pooler_output.as_ref().unwrap(),
            &r.get(&format!("{batch}/f64/pooler_output")),
            1e-12,
            batch,
        );
    }
    Ok(())
}

#[test]
fn output_hidden_states_are_the_embeddings_and_each_layer() -> Result<()> {
    let r = Reference::load();
    let model = BertModel::from_pretrained(bert_tiny())?;
    let out = model.call(&BertInputs { output_hidden_states: true, ..inputs(&r, "single") })?;
    let hs = out.hidden_states.expect("asked for");
    assert_eq!(hs.len(), 3);
    for (i, h) in hs.iter().enumerate() {
        assert_close(h, &r.get(&format!("single/hidden_states/{i}")), 1e-5, &format!("hidden_states[{i}]"));
    }
    assert!(hs[2].allclose(&out.last_hidden_state, 0.0, 0.0, false)?);
    Ok(())
}

#[test]
fn defaults_token_types_zero_and_no_mask() -> Result<()> {
    // Sentence 2 is the longest: no padding, all token types 0, so ids alone give its row.
    let r = Reference::load();
    let model = BertModel::from_pretrained(bert_tiny())?;
    let ids = r.get("single/input_ids").narrow(0, 2, 1)?;
    let out = model.call(&BertInputs::ids(&ids))?;
    let want = r.get("single/last_hidden_state").narrow(0, 2, 1)?;
    assert_close(&out.last_hidden_state, &want, 1e-5, "ids only");
    // A shorter sentence alone, unpadded, gives its padded row's real tokens.
    let mask = r.get("single/attention_mask").select(0, 1)?;
    let n = mask.sum()?.item::<i64>()? as usize;
    let short = r.get("single/input_ids").narrow(0, 1, 1)?.narrow(1, 0, n)?;
    let out = model.call(&BertInputs::ids(&short))?;
    let want = r.get("single/last_hidden_state").narrow(0, 1, 1)?.narrow(1, 0, n)?;
    assert_close(&out.last_hidden_state, &want, 1e-5, "unpadded");
    Ok(())
}

#[test]
fn module_calls_take_a_tensor_a_tuple_or_keywords_and_run_hooks() -> Result<()> {
    let r = Reference::load();
    let model = BertModel::from_pretrained(bert_tiny())?;
    let x = inputs(&r, "pairs");
    let want = r.get("pairs/last_hidden_state");
    let (ids, mask, tt) =
        (x.input_ids.clone().unwrap(), x.attention_mask.clone().unwrap(), x.token_type_ids.clone().unwrap());
    let positional = model.call_value(Value::from((ids.clone(), mask.clone(), tt.clone())))?;
    assert_close(positional.get(0)?.as_tensor()?, &want, 1e-5, "positional");
    assert_eq!(positional.get(1)?.as_tensor()?.dims(), &[2, 32]);
    let keywords = model.call_value(Value::Dict(vec![
        ("token_type_ids".into(), tt.into()),
        ("input_ids".into(), ids.clone().into()),
        ("attention_mask".into(), mask.into()),
    ]))?;
    assert_close(keywords.get(0)?.as_tensor()?, &want, 1e-5, "keywords");
    let e = model.call_value(Value::Dict(vec![("input_idz".into(), ids.clone().into())])).unwrap_err();
    assert!(e.to_string().contains("unexpected keyword argument 'input_idz'"), "{e}");

    // A forward hook on a layer sees that layer's output (hidden_states[2] for the last).
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let layer = model.get_submodule("encoder.layer.1")?;
    let handle = layer.register_forward_hook(move |_, _, out| {
        *s.lock().unwrap() = Some(out.as_tensor()?.clone());
        Ok(None)
    });
    let out = model.call(&x)?;
    let hooked = seen.lock().unwrap().take().expect("the hook ran");
    assert!(hooked.allclose(&out.last_hidden_state, 0.0, 0.0, false)?);
    handle.remove();
    Ok(())
}

#[test]
fn dropout_is_on_in_training_and_off_in_eval() -> Result<()> {
    let r = Reference::load();
    let model = BertModel::from_pretrained(bert_tiny())?;
    let x = inputs(&r, "single");
    let (a, b) = (model.call(&x)?, model.call(&x)?);
    assert!(a.last_hidden_state.allclose(&b.last_hidden_state, 0.0, 0.0, false)?);
    model.train();
    let (a, b) = (model.call(&x)?, model.call(&x)?);
    assert!(!a.last_hidden_state.allclose(&b.last_hidden_state, 1e-3, 1e-3, false)?);
    Ok(())
}

// ------------------------------------------------------------------------------- checkpoints

#[test]
fn bert_prefixed_checkpoint_loads_the_encoder_and_reports_the_head() -> Result<()> {
    let r = Reference::load();
    let (loaded, warnings) =
        catch_warnings(|| BertModel::from_pretrained_with(bert_tiny_mlm(), FromPretrainedOptions::default()));
    let (model, info) = loaded?;
    assert_eq!(info.removed_prefix.as_deref(), Some("bert."));
    let mut unexpected = info.unexpected_keys.clone();
    unexpected.sort();
    assert_eq!(
        unexpected,
        [
            "cls.predictions.bias",
            "cls.predictions.transform.LayerNorm.bias",
            "cls.predictions.transform.LayerNorm.weight",
            "cls.predictions.transform.dense.bias",
            "cls.predictions.transform.dense.weight",
        ]
    );
    // BertForMaskedLM has no pooler: it gets Hugging Face's initialisation (the model is built
    // without one): weights N(0, initializer_range = 0.02), zero biases.
    assert_eq!(info.missing_keys, ["pooler.dense.weight", "pooler.dense.bias"]);
    let pooler = model.pooler.as_ref().unwrap();
    let w = pooler.dense.weight.to_vec2::<f32>()?.concat();
    let mean = w.iter().sum::<f32>() / w.len() as f32;
    let std = (w.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / w.len() as f32).sqrt();
    assert!(mean.abs() < 0.005 && (0.015..0.025).contains(&std), "pooler weight mean {mean} std {std}");
    assert!(pooler.dense.bias.as_ref().unwrap().to_vec::<f32>()?.iter().all(|&b| b == 0.0));
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("were not used when initializing BertModel")
            && warnings[0].contains("cls.predictions.bias")
    );
    assert!(warnings[1].contains("newly initialized") && warnings[1].contains("pooler.dense.weight"));
    let out = model.call(&inputs(&r, "single"))?;
    assert_close(&out.last_hidden_state, &r.get("mlm/last_hidden_state"), 1e-5, "mlm encoder");

    // Without the pooler, nothing is missing.
    let (_, info) =
        BertModel::from_pretrained_with(bert_tiny_mlm(), FromPretrainedOptions { add_pooling_layer: false })?;
    assert!(info.missing_keys.is_empty());
    Ok(())
}

#[test]
fn legacy_checkpoint_keys_load() -> Result<()> {
    // Older transformers saved the position_ids / token_type_ids buffers; TensorFlow-era
    // checkpoints call LayerNorm's parameters gamma and beta.
    let r = Reference::load();
    let dir = temp_copy(&bert_tiny(), "legacy");
    let sd = load_safetensors(dir.join("model.safetensors"))?;
    let mut old = StateDict::new();
    for (k, t) in sd.iter() {
        let k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta");
        old.insert(k, t.clone());
    }
    old.insert("embeddings.position_ids", Tensor::arange(0.0, 64.0, 1.0, DType::I64)?.reshape([1, 64])?);
    old.insert("embeddings.token_type_ids", Tensor::zeros([1, 64], DType::I64)?);
    save_safetensors(&old, dir.join("model.safetensors"))?;
    let (model, info) = BertModel::from_pretrained_with(&dir, FromPretrainedOptions::default())?;
    assert_eq!(info, Default::default());
    let out = model.call(&inputs(&r, "single"))?;
    assert_close(&out.last_hidden_state, &r.get("single/last_hidden_state"), 1e-5, "legacy");
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}

#[test]
fn shape_mismatch_is_an_error_naming_the_key() -> Result<()> {
    let dir = temp_copy(&bert_tiny(), "mismatch");
    let config =
        std::fs::read_to_string(dir.join("config.json"))?.replace("\"vocab_size\": 89", "\"vocab_size\": 95");
    std::fs::write(dir.join("config.json"), config)?;
    let e = BertModel::from_pretrained(&dir).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("size mismatch for embeddings.word_embeddings.weight"), "{msg}");
    assert!(msg.contains("[89, 32]") && msg.contains("[95, 32]"), "{msg}");
    assert!(msg.contains(&dir.display().to_string()), "{msg}");
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}

#[test]
fn folder_errors_say_what_is_missing() -> Result<()> {
    let missing = std::env::temp_dir().join("pyrite-transformers-no-such-folder");
    let e = BertModel::from_pretrained(&missing).unwrap_err();
    assert!(e.to_string().contains("is not a folder"), "{e}");

    let dir = temp_copy(&bert_tiny(), "files");
    std::fs::remove_file(dir.join("model.safetensors"))?;
    let e = BertModel::from_pretrained(&dir).unwrap_err();
    assert!(
        e.to_string().contains("has no model.safetensors") && e.to_string().contains("pytorch_model.bin"),
        "{e}"
    );
    // A pytorch_model.bin that is not a torch.save file: an error naming it.
    std::fs::write(dir.join("pytorch_model.bin"), b"not read")?;
    let e = BertModel::from_pretrained(&dir).unwrap_err();
    assert!(e.to_string().contains("pytorch_model.bin"), "{e}");
    // One that holds something else than a state_dict.
    pyrite::save(&Object::from(3), dir.join("pytorch_model.bin"))?;
    let e = BertModel::from_pretrained(&dir).unwrap_err();
    assert!(e.to_string().contains("pytorch_model.bin") && e.to_string().contains("state_dict"), "{e}");
    std::fs::remove_file(dir.join("config.json"))?;
    let e = BertModel::from_pretrained(&dir).unwrap_err();
    assert!(e.to_string().contains("has no config.json"), "{e}");
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}

#[test]
fn sharded_checkpoints_load() -> Result<()> {
    let r = Reference::load();
    let dir = temp_copy(&bert_tiny(), "sharded");
    let sd = load_safetensors(dir.join("model.safetensors"))?;
    std::fs::remove_file(dir.join("model.safetensors"))?;
    let (mut a, mut b) = (StateDict::new(), StateDict::new());
    let mut map = serde_json::Map::new();
    for (k, t) in sd.iter() {
        let (part, file) = if k.starts_with("encoder.layer.1") {
            (&mut b, "model-2.safetensors")
        } else {
            (&mut a, "model-1.safetensors")
        };
        part.insert(k, t.clone());
        map.insert(k.to_string(), file.into());
    }
    save_safetensors(&a, dir.join("model-1.safetensors"))?;
    save_safetensors(&b, dir.join("model-2.safetensors"))?;
    let index = serde_json::json!({ "metadata": {}, "weight_map": map });
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string())?;
    let out = BertModel::from_pretrained(&dir)?.call(&inputs(&r, "pairs"))?;
    assert_close(&out.last_hidden_state, &r.get("pairs/last_hidden_state"), 1e-5, "sharded");
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}

/// The outputs of the model in `dir` on the "pairs" batch, with the pooler's.
fn pairs_outputs(dir: &std::path::Path, r: &Reference) -> Result<(Vec<f32>, Vec<f32>)> {
    let out = BertModel::from_pretrained(dir)?.call(&inputs(r, "pairs"))?;
    Ok((
        out.last_hidden_state.flatten(0, -1)?.to_vec::<f32>()?,
        out.pooler_output.unwrap().flatten(0, -1)?.to_vec::<f32>()?,
    ))
}

#[test]
fn pytorch_model_bin_and_its_shards_load_like_safetensors() -> Result<()> {
    let r = Reference::load();
    let want = pairs_outputs(&bert_tiny(), &r)?;
    let dir = temp_copy(&bert_tiny(), "bin");
    let sd = load_safetensors(dir.join("model.safetensors"))?;
    std::fs::remove_file(dir.join("model.safetensors"))?;
    // torch.save(model.state_dict(), "pytorch_model.bin")
    pyrite::save(&Object::from_named_tensors(sd.iter()), dir.join("pytorch_model.bin"))?;
    assert_eq!(pairs_outputs(&dir, &r)?, want, "pytorch_model.bin");

    // Hugging Face's order: safetensors first. A pytorch_model.bin of zeros beside the
    // safetensors file is not read.
    let zeros: Vec<(String, Tensor)> =
        sd.iter().map(|(k, t)| Ok((k.to_string(), t.zeros_like()?))).collect::<Result<_>>()?;
    pyrite::save(
        &Object::from_named_tensors(zeros.iter().map(|(k, t)| (k.as_str(), t))),
        dir.join("pytorch_model.bin"),
    )?;
    std::fs::copy(bert_tiny().join("model.safetensors"), dir.join("model.safetensors"))?;
    assert_eq!(pairs_outputs(&dir, &r)?, want, "model.safetensors before pytorch_model.bin");
    std::fs::remove_file(dir.join("model.safetensors"))?;
    std::fs::remove_file(dir.join("pytorch_model.bin"))?;

    // Two shards and pytorch_model.bin.index.json, as save_pretrained(max_shard_size=...) writes.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut map = serde_json::Map::new();
    for (k, t) in sd.iter() {
        let (part, file) = if k.starts_with("encoder.layer.1") || k.starts_with("pooler") {
            (&mut b, "pytorch_model-00002-of-00002.bin")
        } else {
            (&mut a, "pytorch_model-00001-of-00002.bin")
        };
        part.push((k, t));
        map.insert(k.to_string(), file.into());
    }
    pyrite::save(&Object::from_named_tensors(a), dir.join("pytorch_model-00001-of-00002.bin"))?;
    pyrite::save(&Object::from_named_tensors(b), dir.join("pytorch_model-00002-of-00002.bin"))?;
    let index = serde_json::json!({ "metadata": {"total_size": 0}, "weight_map": map });
    std::fs::write(dir.join("pytorch_model.bin.index.json"), index.to_string())?;
    assert_eq!(pairs_outputs(&dir, &r)?, want, "sharded pytorch_model.bin");

    // A shard outside the folder is refused.
    let index = serde_json::json!({ "weight_map": { "pooler.dense.bias": "../elsewhere.bin" } });
    std::fs::write(dir.join("pytorch_model.bin.index.json"), index.to_string())?;
    let e = BertModel::from_pretrained(&dir).unwrap_err();
    assert!(e.to_string().contains("must be a file name in the folder"), "{e}");
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}

#[test]
fn pytorch_model_bin_written_by_torch_loads() -> Result<()> {
    // reference/gen_bert_bin.py: torch.save(model.state_dict(), "pytorch_model.bin").
    let r = Reference::load();
    let (model, info) =
        BertModel::from_pretrained_with(common::data_path("bert-tiny-bin"), Default::default())?;
    assert_eq!(info, Default::default());
    let out = model.call(&inputs(&r, "pairs"))?;
    assert_close(
        &out.last_hidden_state,
        &r.get("pairs/last_hidden_state"),
        1e-5,
        "torch's pytorch_model.bin",
    );
    assert_close(&out.pooler_output.unwrap(), &r.get("pairs/pooler_output"), 1e-5, "pooler");
    Ok(())
}

/// A copy of bert-tiny whose config.json has `field` set to `value`.
fn with_config(tag: &str, field: &str, value: &str) -> Result<std::path::PathBuf> {
    let dir = temp_copy(&bert_tiny(), tag);
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?).unwrap();
    cfg[field] = serde_json::from_str(value).unwrap();
    std::fs::write(dir.join("config.json"), cfg.to_string())?;
    Ok(dir)
}

#[test]
fn hostile_configs_are_checked_against_the_weights_before_anything_is_allocated() -> Result<()> {
    // Each of these would allocate from gigabytes to petabytes for a model the 80 kB
    // checkpoint cannot fill; each is an error before the model is built.
    for (field, value, want) in [
        ("vocab_size", "1000000000000", "size mismatch for embeddings.word_embeddings.weight"),
        ("max_position_embeddings", "100000000", "size mismatch for embeddings.position_embeddings.weight"),
        ("intermediate_size", "60000000", "size mismatch for encoder.layer.0.intermediate.dense.weight"),
        ("num_hidden_layers", "1000", "config.json does not fit the checkpoint"),
        ("num_hidden_layers", "4000000000000000000", "too large to address"),
        ("vocab_size", "9223372036854775807", "size mismatch for embeddings.word_embeddings.weight"),
    ] {
        let dir = with_config(&format!("hostile-{field}"), field, value)?;
        let t0 = std::time::Instant::now();
        let e = BertModel::from_pretrained(&dir).unwrap_err();
        assert!(e.to_string().contains(want), "{field} = {value}: {e}");
        assert!(e.to_string().contains(&dir.display().to_string()), "{e}");
        assert!(t0.elapsed().as_secs_f64() < 5.0, "{field} = {value}: {:?}", t0.elapsed());
        std::fs::remove_dir_all(dir).ok();
    }
    // A config with a layer more than the checkpoint still loads, as in Hugging Face: the
    // missing layer is initialised and reported.
    let dir = with_config("one-more-layer", "num_hidden_layers", "3")?;
    let (loaded, warnings) =
        catch_warnings(|| BertModel::from_pretrained_with(&dir, FromPretrainedOptions::default()));
    let (_, info) = loaded?;
    assert!(info.missing_keys.iter().all(|k| k.starts_with("encoder.layer.2.")), "{:?}", info.missing_keys);
    assert_eq!(info.missing_keys.len(), 16);
    assert_eq!(warnings.len(), 1);
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}

// ------------------------------------------------------------------------------- bad inputs

#[test]
fn bad_inputs_are_errors() -> Result<()> {
    let model = BertModel::new(&BertConfig::new(20, 8, 1, 2, 12, 6))?;
    let ids = Tensor::new([[1i64, 2, 3]])?;
    let embeds = Tensor::zeros([1, 3, 8], DType::F32)?;
    let cases: Vec<(BertInputs, &str)> = vec![
        (BertInputs::default(), "You have to specify either input_ids or inputs_embeds"),
        (
            BertInputs { input_ids: Some(ids.clone()), inputs_embeds: Some(embeds), ..Default::default() },
            "You cannot specify both input_ids and inputs_embeds",
        ),
        (
            BertInputs::ids(&Tensor::new([1i64, 2, 3])?),
            "input_ids must be an integer tensor of shape [batch, seq]",
        ),
        (BertInputs::ids(&Tensor::new([[1f32, 2.]])?), "input_ids must be an integer tensor"),
        (BertInputs::ids(&Tensor::zeros([1, 7], DType::I64)?), "longer than max_position_embeddings (6)"),
        (
            BertInputs { attention_mask: Some(Tensor::ones([1, 4], DType::I64)?), ..BertInputs::ids(&ids) },
            "attention_mask must have the shape of input_ids [1, 3]",
        ),
        (
            BertInputs { token_type_ids: Some(Tensor::zeros([3], DType::I64)?), ..BertInputs::ids(&ids) },
            "token_type_ids must have the shape of input_ids",
        ),
        (
            BertInputs { inputs_embeds: Some(Tensor::zeros([1, 3, 5], DType::F32)?), ..Default::default() },
            "inputs_embeds must have shape [batch, seq, 8]",
        ),
    ];
    for (x, want) in cases {
        let e = model.call(&x).expect_err(want);
        assert!(e.to_string().contains(want), "got {e}, want {want}");
    }
    // Ids outside the vocabulary: the embedding's error, not a panic.
    assert!(model.call(&BertInputs::ids(&Tensor::new([[25i64]])?)).is_err());
    Ok(())
}

// ------------------------------------------------------------------------------- gradients

/// A small f64 BERT without dropout, with every weight redrawn so no gradient is trivially
/// small.
fn tiny_f64(seed: u64) -> Result<BertModel> {
    let mut cfg = BertConfig::new(11, 8, 2, 2, 6, 6);
    cfg.hidden_dropout_prob = 0.0;
    cfg.attention_probs_dropout_prob = 0.0;
    let mut model = BertModel::new(&cfg)?;
    model.to_dtype(DType::F64)?;
    let g = Generator::new(seed);
    let _ng = pyrite::autograd::no_grad();
    for (_, p) in model.named_parameters() {
        p.copy_(&Tensor::randn_with(p.dims(), DType::F64, Some(&g))?.mul_scalar(0.5)?)?;
    }
    Ok(model)
}

#[test]
fn gradients_pass_finite_differences_in_f64() -> Result<()> {
    let model = tiny_f64(7)?;
    let mask = Tensor::new([[1i64, 1, 1, 0]])?;
    let token_types = Tensor::new([[0i64, 0, 1, 1]])?;
    let g = Generator::new(3);
    let embeds = Tensor::randn_with([1, 4, 8], DType::F64, Some(&g))?.requires_grad_(true)?;
    let f = |x: &[Tensor]| -> Result<Tensor> {
        let out = model.call(&BertInputs {
            inputs_embeds: Some(x[0].clone()),
            attention_mask: Some(mask.clone()),
            token_type_ids: Some(token_types.clone()),
            ..Default::default()
        })?;
        // the last hidden state and the pooled output, both in the checked function
        Tensor::cat(
            &[out.last_hidden_state.reshape([-1isize])?, out.pooler_output.unwrap().reshape([-1isize])?],
            0,
        )
    };
    gradcheck(f, &[embeds], GradcheckOptions { eps: 1e-6, atol: 1e-6, rtol: 1e-4 })?;

    // A parameter's gradient (a query weight and the embedding LayerNorm's weight) against
    // central differences of a weighted sum of the outputs.
    let ids = Tensor::new([[2i64, 5, 9, 0]])?;
    let x = BertInputs { attention_mask: Some(mask.clone()), ..BertInputs::ids(&ids) };
    let weights = Tensor::randn_with([1, 4, 8], DType::F64, Some(&g))?;
    let loss = |m: &BertModel| -> Result<Tensor> { m.call(&x)?.last_hidden_state.mul(&weights)?.sum() };
    loss(&model)?.backward()?;
    for name in ["encoder.layer.0.attention.self.query.weight", "embeddings.LayerNorm.weight"] {
        let p = model.get_parameter(name)?;
        let grad = p.grad().expect("a gradient").reshape([-1isize])?.to_vec::<f64>()?;
        let flat = p.detach().reshape([-1isize])?;
        for i in [0usize, 3, 7] {
            let at = |delta: f64| -> Result<f64> {
                let _ng = pyrite::autograd::no_grad();
                let old = flat.select(0, i as isize)?.item::<f64>()?;
                flat.select(0, i as isize)?.fill_(old + delta)?;
                let l = loss(&model)?.item::<f64>()?;
                flat.select(0, i as isize)?.fill_(old)?;
                Ok(l)
            };
            let numeric = (at(1e-6)? - at(-1e-6)?) / 2e-6;
            assert!(
                (numeric - grad[i]).abs() <= 1e-6 + 1e-4 * numeric.abs(),
                "{name}[{i}]: autograd {} vs finite differences {numeric}",
                grad[i]
            );
        }
    }
    Ok(())
}
