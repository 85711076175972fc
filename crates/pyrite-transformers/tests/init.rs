//! `from_pretrained` builds the model without random initialisation (as Hugging Face builds it
//! under `no_init_weights`): loading a complete checkpoint draws nothing from the global
//! generator. Its own test binary, so that no other test draws from the generator meanwhile.

mod common;

use common::bert_tiny;
use pyrite::transformers::BertModel;
use pyrite::{DType, Result, Tensor};

#[test]
fn from_pretrained_draws_no_random_numbers() -> Result<()> {
    pyrite::manual_seed(11);
    let want = Tensor::randn([8], DType::F32)?.to_vec::<f32>()?;
    pyrite::manual_seed(11);
    let model = BertModel::from_pretrained(bert_tiny())?;
    let got = Tensor::randn([8], DType::F32)?.to_vec::<f32>()?;
    assert_eq!(got, want, "from_pretrained initialised weights that the checkpoint overwrites");
    // ... and the weights are the checkpoint's all the same.
    let sd = pyrite::nn::load_safetensors(bert_tiny().join("model.safetensors"))?;
    use pyrite::nn::Module;
    for (k, t) in model.state_dict()?.iter() {
        let w = sd.get(k).unwrap_or_else(|| panic!("{k}"));
        assert_eq!(t.flatten(0, -1)?.to_vec::<f32>()?, w.flatten(0, -1)?.to_vec::<f32>()?, "{k}");
    }
    // BertModel::new still initialises at random.
    pyrite::manual_seed(11);
    let _ = BertModel::new(&model.config)?;
    assert_ne!(Tensor::randn([8], DType::F32)?.to_vec::<f32>()?, want);
    Ok(())
}
