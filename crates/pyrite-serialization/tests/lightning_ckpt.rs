//! PyTorch Lightning checkpoints load as far as their values are plain; the objects of other
//! classes are reported by key and the rest still loads.
//!
//! The fixture, `reference/data/lightning/example.ckpt`, is the dict Lightning's Trainer saves,
//! built by `reference/gen_lightning_ckpt.py` with torch alone: its `hyper_parameters` is an
//! `AttributeDict` (pickled as `lightning_fabric.utilities.data.AttributeDict`) and a user
//! callback's state holds a `__main__.Foo`. `torch.load(weights_only=True)` refuses the file.

use pyrite::nn::{Linear, Module, StateDict};
use pyrite::optim::lr_scheduler::{SchedulerStateDict, SchedulerStateObject};
use pyrite::optim::OptimizerStateDict;
use pyrite::serialization::{load, load_lightning_checkpoint, load_with, save_to_bytes, LoadOptions, Object};

fn fixture() -> String {
    format!("{}/../../reference/data/lightning/example.ckpt", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_strict_load_refuses_the_file_naming_the_class() {
    let e = load(fixture()).unwrap_err().to_string();
    assert!(e.contains("Weights only load failed") && e.contains("__main__.Foo"), "{e}");
    let e = load_with(fixture(), LoadOptions::default()).unwrap_err().to_string();
    assert!(e.contains("__main__.Foo"), "{e}");
}

#[test]
fn unsupported_objects_are_reported_by_key_and_the_rest_loads() {
    let (ckpt, skipped) = load_lightning_checkpoint(fixture()).unwrap();
    assert_eq!(
        skipped,
        [
            ("callbacks/MyCallback/config".to_string(), "__main__.Foo".to_string()),
            ("hyper_parameters".to_string(), "lightning_fabric.utilities.data.AttributeDict".to_string()),
        ]
    );
    // Plain values.
    assert_eq!(ckpt.get("epoch"), Some(&Object::Int(4)));
    assert_eq!(ckpt.get("global_step"), Some(&Object::Int(500)));
    assert_eq!(ckpt.get("pytorch-lightning_version").and_then(Object::as_str), Some("2.5.1"));
    assert_eq!(ckpt.get("hparams_name").and_then(Object::as_str), Some("kwargs"));
    let fit = ckpt.get("loops").and_then(|l| l.get("fit_loop")).unwrap();
    let batches = fit.get("epoch_loop.state_dict").and_then(|d| d.get("_batches_that_stepped"));
    assert_eq!(batches, Some(&Object::Int(500)));
    // Callbacks: the plain ones load whole; the user callback keeps its plain entries.
    let callbacks = ckpt.get("callbacks").and_then(Object::as_dict).unwrap();
    let (mc_key, mc) = callbacks.iter().next().unwrap();
    assert!(mc_key.as_str().unwrap().starts_with("ModelCheckpoint{'monitor': 'val_loss'"));
    let best = mc.get("best_model_score").and_then(Object::as_tensor).unwrap();
    assert_eq!(best.item::<f32>().unwrap(), 0.25);
    assert_eq!(callbacks.get("MyCallback").and_then(|c| c.get("calls")), Some(&Object::Int(7)));
    // The model, optimizer and scheduler states load into Pyrite's types.
    let sd = StateDict::from_object(ckpt.get("state_dict").unwrap()).unwrap();
    assert_eq!(
        sd.keys().collect::<Vec<_>>(),
        ["model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"]
    );
    let first = Linear::new(4, 3).unwrap();
    let r = first.load_state_dict(&sd.sub("model.0."), true).unwrap();
    assert!(r.missing_keys.is_empty() && r.unexpected_keys.is_empty());
    let opt = &ckpt.get("optimizer_states").and_then(Object::as_slice).unwrap()[0];
    let osd = OptimizerStateDict::from_object(opt).unwrap();
    assert_eq!(osd.optimizer.as_deref(), Some("Adam"));
    assert_eq!(osd.state.len(), 4);
    let sched = &ckpt.get("lr_schedulers").and_then(Object::as_slice).unwrap()[0];
    let ssd = SchedulerStateDict::from_object(sched).unwrap();
    assert_eq!(ssd.get("last_epoch").and_then(|v| v.as_i64()), Some(3));
}

#[test]
fn placeholders_cannot_be_saved() {
    let (ckpt, _) = load_lightning_checkpoint(fixture()).unwrap();
    let e = save_to_bytes(&ckpt).unwrap_err().to_string();
    assert!(e.contains("lightning_fabric.utilities.data.AttributeDict") || e.contains("__main__.Foo"), "{e}");
    // Without the placeholders, the checkpoint saves and loads strictly.
    let mut plain = ckpt.clone();
    plain.as_dict_mut().unwrap().remove("hyper_parameters");
    let cb = plain.as_dict_mut().unwrap().get_mut("callbacks").unwrap().as_dict_mut().unwrap();
    cb.get_mut("MyCallback").unwrap().as_dict_mut().unwrap().remove("config");
    let bytes = save_to_bytes(&plain).unwrap();
    let back = pyrite::serialization::load_from_bytes(&bytes).unwrap();
    assert!(back.unsupported().is_empty());
    assert_eq!(back.get("global_step"), Some(&Object::Int(500)));
}
