//! One `call` for every module (PyTorch's `module(*args)`): the positional arguments as a
//! tuple, the outputs typed as the module returns them, hooks included.

use pyrite::nn::attention::MhaCall;
use pyrite::nn::transformer::EncoderMasks;
use pyrite::nn::utils::rnn::pack_padded_sequence;
use pyrite::nn::{
    self, CosineEmbeddingLoss, CrossEntropyLoss, LSTMCell, Linear, Module, ModuleBase, ModuleHooks,
    MultiheadAttention, RnnOptions, Transformer, TransformerEncoder, TransformerEncoderLayer,
    TransformerLayerOptions, TransformerOptions, Value, GRU, LSTM,
};
use pyrite::{DType, Result, Tensor};
use std::sync::{Arc, Mutex};

fn randn(shape: &[usize]) -> Tensor {
    Tensor::randn(shape, DType::F32).unwrap()
}

fn same(a: &Tensor, b: &Tensor) -> bool {
    a.allclose(b, 0.0, 0.0, false).unwrap()
}

/// `output, (h_n, c_n) = lstm(x)`, `lstm(x, (h, c))`, `lstm(x, hidden)` with the tuple the
/// last call returned, and `lstm(packed)`: one `call`, typed outputs.
#[test]
fn an_lstm_is_called_as_in_pytorch() -> Result<()> {
    let lstm = LSTM::new(3, 4, RnnOptions::default())?;
    let x = randn(&[5, 2, 3]);
    let (out, (h, c)) = lstm.call(&x)?;
    assert_eq!((out.dims(), h.dims(), c.dims()), (&[5, 2, 4][..], &[1, 2, 4][..], &[1, 2, 4][..]));
    // explicit zero state = no state
    let zeros = Tensor::zeros([1, 2, 4], DType::F32)?;
    let (out0, _) = lstm.call((&x, (&zeros, &zeros)))?;
    assert!(same(&out, &out0));
    // the word-language-model loop: the hidden tuple goes back in as it came out
    let mut hidden = (h, c);
    for _ in 0..2 {
        let (_, next) = lstm.call((&x, &hidden))?;
        hidden = next;
    }
    let (_, none) = lstm.call((&x, None))?;
    assert!(same(&none.0, &lstm.call(&x)?.1 .0));
    // a packed sequence in, a packed sequence out
    let packed = pack_padded_sequence(&x, &[5, 3], false, true)?;
    let (p_out, (h_n, _)) = lstm.call(&packed)?;
    assert_eq!(p_out.data.dims()[0], 8);
    assert_eq!(h_n.dims(), &[1, 2, 4]);
    Ok(())
}

#[test]
fn gru_and_cells_take_an_optional_state() -> Result<()> {
    let gru = GRU::new(3, 4, RnnOptions::default())?;
    let x = randn(&[5, 2, 3]);
    let (out, h) = gru.call(&x)?;
    let (out2, _) = gru.call((&x, &Tensor::zeros([1, 2, 4], DType::F32)?))?;
    assert!(same(&out, &out2));
    let (_, h2) = gru.call((&x, Some(&h)))?;
    assert_eq!(h2.dims(), &[1, 2, 4]);

    let cell = LSTMCell::new(3, 4)?;
    let (h, c) = cell.call(&randn(&[2, 3]))?;
    let (h, _c) = cell.call((&randn(&[2, 3]), (&h, &c)))?;
    assert_eq!(h.dims(), &[2, 4]);
    Ok(())
}

/// `attn_output, attn_weights = mha(q, k, v)`, with the keyword arguments as the tuple's last
/// element.
#[test]
fn attention_and_transformers_take_their_keyword_arguments_last() -> Result<()> {
    let mha = MultiheadAttention::new(8, 2)?;
    let x = randn(&[5, 3, 8]);
    let (y, w) = mha.call((&x, &x, &x))?;
    assert_eq!((y.dims(), w.unwrap().dims()), (&[5, 3, 8][..], &[3, 5, 5][..]));
    let (_, w) = mha.call((&x, &x, &x, &MhaCall { need_weights: false, ..Default::default() }))?;
    assert!(w.is_none());

    let opts = TransformerLayerOptions { dim_feedforward: 16, dropout: 0.0, ..Default::default() };
    let encoder = TransformerEncoder::new(TransformerEncoderLayer::with_options(8, 2, opts)?, 2, None)?;
    let mask = Transformer::generate_square_subsequent_mask(5)?;
    let a = encoder.call((&x, &EncoderMasks { src_mask: Some(&mask), ..Default::default() }))?;
    let b = encoder
        .call((&x, &EncoderMasks { src_mask: Some(&mask), is_causal: Some(true), ..Default::default() }))?;
    assert!(a.allclose(&b, 1e-5, 1e-5, false)?);
    assert_eq!(encoder.call(&x)?.dims(), &[5, 3, 8]);

    let t = Transformer::new(TransformerOptions {
        d_model: 8,
        nhead: 2,
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        dim_feedforward: 16,
        dropout: 0.0,
        ..Default::default()
    })?;
    assert_eq!(t.call((&x, &randn(&[4, 3, 8])))?.dims(), &[4, 3, 8]);
    Ok(())
}

#[test]
fn losses_take_input_and_target_as_a_tuple() -> Result<()> {
    let logits = Tensor::new([[2.0f32, 0.5, -1.0], [0.1, 0.2, 3.0]])?;
    let target = Tensor::new([0i64, 2])?;
    let loss = CrossEntropyLoss::new().call((&logits, &target))?;
    let f = nn::functional::cross_entropy(&logits, &target, &Default::default())?;
    assert!(same(&loss, &f));
    let (a, b) = (randn(&[4, 3]), randn(&[4, 3]));
    let y = Tensor::new([1f32, -1., 1., -1.])?;
    assert_eq!(CosineEmbeddingLoss::new().call((&a, &b, &y))?.rank(), 0);
    Ok(())
}

/// The typed call runs the hooks with the tuple PyTorch's hooks see, and returns what the
/// forward hook returned.
#[test]
fn the_typed_call_runs_the_hooks() -> Result<()> {
    let lstm = LSTM::new(3, 4, RnnOptions::default())?;
    let seen: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let s = seen.clone();
    let h = lstm.register_forward_hook(move |_m, args, out| {
        s.lock().unwrap().push((args.tensors().len(), out.tensors().len()));
        // replace the output by zeros
        Ok(Some(out.clone().map_tensors(&mut |t| t.zeros_like())?))
    });
    let x = randn(&[5, 2, 3]);
    let z = Tensor::zeros([1, 2, 4], DType::F32)?;
    let (out, (h_n, _)) = lstm.call((&x, (&z, &z)))?;
    assert_eq!(*seen.lock().unwrap(), [(3, 3)]);
    assert!(out.abs()?.sum()?.item::<f32>()? == 0.0 && h_n.abs()?.sum()?.item::<f32>()? == 0.0);
    h.remove();
    assert!(lstm.call(&x)?.0.abs()?.sum()?.item::<f32>()? > 0.0);
    Ok(())
}

/// A module chosen at run time (`self.rnn = getattr(nn, rnn_type)(...)`) is a `Box<dyn
/// Module>` field: a sub-module under its field's name, in field order, called through
/// `call_value` with the same tuple.
#[test]
fn a_boxed_module_field_ports_getattr_nn() -> Result<()> {
    #[derive(nn::Module)]
    struct RnnModel {
        base: ModuleBase,
        encoder: nn::Embedding,
        rnn: Box<dyn Module>,
        decoder: Linear,
    }
    impl Module for RnnModel {}
    for kind in ["LSTM", "GRU"] {
        let rnn: Box<dyn Module> = match kind {
            "LSTM" => Box::new(LSTM::new(4, 6, RnnOptions::default())?),
            _ => Box::new(GRU::new(4, 6, RnnOptions::default())?),
        };
        let m = RnnModel {
            base: ModuleBase::new(),
            encoder: nn::Embedding::new(10, 4)?,
            rnn,
            decoder: Linear::new(6, 10)?,
        };
        let keys: Vec<String> = m.state_dict()?.keys().map(String::from).collect();
        assert_eq!(keys.first().unwrap(), "encoder.weight");
        assert_eq!(keys[1], "rnn.weight_ih_l0");
        assert_eq!(keys.last().unwrap(), "decoder.bias");
        let emb = m.encoder.call(&Tensor::new([[1i64, 2], [3, 4], [5, 6]])?)?;
        let out: Value = m.rnn.call_value((&emb).into())?;
        let first: Tensor = out.get(0)?.as_tensor()?.clone();
        assert_eq!(m.decoder.call(&first)?.dims(), &[3, 2, 10]);
        // training mode and to_dtype reach the boxed module
        let mut m = m;
        m.eval();
        assert!(!m.rnn.is_training());
        m.to_dtype(DType::F64)?;
        assert_eq!(m.rnn.parameters()[0].dtype(), DType::F64);
    }
    Ok(())
}
