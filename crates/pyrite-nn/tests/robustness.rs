//! Bad input never panics: every layer and loss is called on edge-case tensors (0-d, empty,
//! every dtype, wrong ranks and channel counts, non-contiguous, NaN) and must return `Ok` or
//! `Err`, never unwind. Bad configurations are errors at construction.

use pyrite::nn::functional::{self as F, BagMode, PadMode};
use pyrite::nn::normalization::NormOptions;
use pyrite::nn::*;
use pyrite::{DType, Result, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn inputs() -> Vec<(&'static str, Tensor)> {
    let f = Tensor::new([[0.5f32, -1., 2.], [3., -4., 0.]]).unwrap();
    vec![
        ("0-d", Tensor::scalar(1.5f32).unwrap()),
        ("empty [0]", Tensor::zeros([0], DType::F32).unwrap()),
        ("empty [0,3]", Tensor::zeros([0, 3], DType::F32).unwrap()),
        ("empty [2,0]", Tensor::zeros([2, 0], DType::F32).unwrap()),
        ("[2,3] f32", f.clone()),
        ("[2,3] f64", f.to_dtype(DType::F64).unwrap()),
        ("[2,3] f16", f.to_dtype(DType::F16).unwrap()),
        ("[2,3] i64", Tensor::new([[0i64, 1, 2], [1, 0, 2]]).unwrap()),
        ("[2,3] bool", Tensor::new([[true, false, true], [false, false, true]]).unwrap()),
        ("[3,2] transposed", f.t().unwrap()),
        ("[3] nan/inf", Tensor::new([f32::NAN, f32::INFINITY, f32::NEG_INFINITY]).unwrap()),
        ("[2,3,4]", Tensor::randn([2, 3, 4], DType::F32).unwrap()),
        ("[2,3,4,5]", Tensor::randn([2, 3, 4, 5], DType::F32).unwrap()),
        ("[1,1,1,1,1]", Tensor::ones([1, 1, 1, 1, 1], DType::F32).unwrap()),
        ("[2] i64 out of range", Tensor::new([-5i64, 99]).unwrap()),
        ("[2,0,3] empty batch", Tensor::zeros([2, 0, 3], DType::F32).unwrap()),
    ]
}

fn small_layer() -> TransformerLayerOptions {
    TransformerLayerOptions { dim_feedforward: 4, ..Default::default() }
}

fn small_transformer() -> TransformerOptions {
    TransformerOptions {
        d_model: 3,
        nhead: 1,
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        dim_feedforward: 4,
        ..Default::default()
    }
}

fn layers() -> Vec<(&'static str, Box<dyn Module>)> {
    let b = |m: Box<dyn Module>| m;
    vec![
        ("Identity", b(Box::new(Identity::new()))),
        ("Linear", Box::new(Linear::new(3, 2).unwrap())),
        ("Linear(0, 2)", Box::new(Linear::new(0, 2).unwrap())),
        ("Bilinear", Box::new(Bilinear::new(3, 3, 2, true).unwrap())),
        ("Flatten", Box::new(Flatten::new())),
        ("Flatten(5, 9)", Box::new(Flatten::with_dims(5, 9))),
        ("Unflatten", Box::new(Unflatten::new(1, &[3, -1]))),
        ("BatchNorm1d", Box::new(BatchNorm1d::new(3).unwrap())),
        ("BatchNorm2d", Box::new(BatchNorm2d::new(3).unwrap())),
        ("BatchNorm3d", Box::new(BatchNorm3d::new(1).unwrap())),
        (
            "BatchNorm1d momentum None",
            Box::new(
                BatchNorm1d::with_options(3, NormOptions { momentum: None, ..NormOptions::batch_norm() })
                    .unwrap(),
            ),
        ),
        ("InstanceNorm1d", Box::new(InstanceNorm1d::new(3).unwrap())),
        ("InstanceNorm2d", Box::new(InstanceNorm2d::new(3).unwrap())),
        ("LayerNorm", Box::new(LayerNorm::new(&[3]).unwrap())),
        ("LayerNorm 2d", Box::new(LayerNorm::new(&[3, 4]).unwrap())),
        ("GroupNorm", Box::new(GroupNorm::new(1, 3).unwrap())),
        ("RMSNorm", Box::new(RMSNorm::new(&[3], None, true).unwrap())),
        ("LocalResponseNorm", Box::new(LocalResponseNorm::new(2))),
        ("Dropout", Box::new(Dropout::new(0.5).unwrap())),
        ("Dropout1d", Box::new(Dropout1d::new(0.5).unwrap())),
        ("Dropout2d", Box::new(Dropout2d::new(0.5).unwrap())),
        ("Dropout3d", Box::new(Dropout3d::new(1.0).unwrap())),
        ("AlphaDropout", Box::new(AlphaDropout::new(0.5).unwrap())),
        ("FeatureAlphaDropout", Box::new(FeatureAlphaDropout::new(0.5).unwrap())),
        ("Embedding", Box::new(Embedding::new(4, 2).unwrap())),
        (
            "Embedding max_norm",
            Box::new(Embedding::new(4, 2).unwrap().padding_idx(1).unwrap().max_norm(1.0, 2.0)),
        ),
        ("EmbeddingBag", Box::new(EmbeddingBag::new(4, 2, BagMode::Max).unwrap())),
        ("ReLU", Box::new(ReLU::new())),
        ("PReLU", Box::new(PReLU::new(3, 0.25).unwrap())),
        ("GELU", Box::new(GELU::new())),
        ("GLU", Box::new(GLU::new())),
        ("Softmax", Box::new(Softmax::new().dim(1))),
        ("Softmax2d", Box::new(Softmax2d::new())),
        ("RReLU", Box::new(RReLU::new())),
        ("Softshrink", Box::new(Softshrink::new())),
        ("Threshold", Box::new(Threshold::new())),
        ("Hardtanh", Box::new(Hardtanh::new())),
        ("Softplus", Box::new(Softplus::new())),
        ("CELU", Box::new(CELU::new())),
        ("ZeroPad2d", Box::new(ZeroPad2d::new(&[1]).unwrap())),
        ("ConstantPad1d negative", Box::new(ConstantPad1d::new(&[-2, 1]).unwrap())),
        ("ReflectionPad1d", Box::new(ReflectionPad1d::new(&[2]).unwrap())),
        ("ReplicationPad2d", Box::new(ReplicationPad2d::new(&[1]).unwrap())),
        ("CircularPad1d", Box::new(CircularPad1d::new(&[3]).unwrap())),
        ("PixelShuffle", Box::new(PixelShuffle::new(2))),
        ("PixelUnshuffle", Box::new(PixelUnshuffle::new(2))),
        ("ChannelShuffle", Box::new(ChannelShuffle::new(3))),
        ("Conv1d", Box::new(Conv1d::new(3, 2, 2, ConvOptions::new()).unwrap())),
        ("Conv2d same", Box::new(Conv2d::new(3, 2, 2, ConvOptions::new().padding_same()).unwrap())),
        (
            "Conv2d reflect",
            Box::new(
                Conv2d::new(3, 3, 3, ConvOptions::new().padding(5).groups(3).padding_mode(PadMode::Reflect))
                    .unwrap(),
            ),
        ),
        ("ConvTranspose2d", Box::new(ConvTranspose2d::new(3, 2, 2, ConvOptions::new().stride(2)).unwrap())),
        ("MaxPool1d", Box::new(MaxPool1d::new(2, PoolOptions::new().return_indices(true)))),
        ("MaxPool2d", Box::new(MaxPool2d::new(9, PoolOptions::new().padding(4).ceil_mode(true)))),
        ("AvgPool2d", Box::new(AvgPool2d::new(2, PoolOptions::new().divisor_override(0)))),
        ("AdaptiveAvgPool2d", Box::new(AdaptiveAvgPool2d::new(&[Some(0), None]))),
        ("AdaptiveMaxPool1d", Box::new(AdaptiveMaxPool1d::new(&[Some(7)]))),
        ("LPPool2d", Box::new(LPPool2d::new(2.0, 2, None, false))),
        ("MaxUnpool2d", Box::new(MaxUnpool2d::new(2, None, 0).unwrap())),
        ("Sequential", Box::new(Sequential::new().append(Linear::new(3, 3).unwrap()).append(ReLU::new()))),
        ("ModuleList", Box::new(ModuleList::new())),
        ("MultiheadAttention", Box::new(MultiheadAttention::new(3, 1).unwrap())),
        (
            "TransformerEncoderLayer",
            Box::new(TransformerEncoderLayer::with_options(3, 1, small_layer()).unwrap()),
        ),
        (
            "TransformerDecoderLayer",
            Box::new(TransformerDecoderLayer::with_options(3, 1, small_layer()).unwrap()),
        ),
        (
            "TransformerEncoder",
            Box::new(
                TransformerEncoder::new(
                    TransformerEncoderLayer::with_options(3, 1, small_layer()).unwrap(),
                    2,
                    None,
                )
                .unwrap(),
            ),
        ),
        (
            "TransformerDecoder",
            Box::new(
                TransformerDecoder::new(
                    TransformerDecoderLayer::with_options(3, 1, small_layer()).unwrap(),
                    1,
                    None,
                )
                .unwrap(),
            ),
        ),
        ("Transformer", Box::new(Transformer::new(small_transformer()).unwrap())),
        ("RNN", Box::new(RNN::new(3, 2, RnnOptions::new()).unwrap())),
        (
            "RNN relu 2 layers bidirectional batch_first",
            Box::new(
                RNN::new(
                    3,
                    2,
                    RnnOptions::new()
                        .nonlinearity(RnnNonlinearity::Relu)
                        .num_layers(2)
                        .bidirectional(true)
                        .batch_first(true),
                )
                .unwrap(),
            ),
        ),
        (
            "LSTM proj bidirectional",
            Box::new(LSTM::new(3, 2, RnnOptions::new().proj_size(1).bidirectional(true)).unwrap()),
        ),
        (
            "GRU 2 layers dropout",
            Box::new(GRU::new(3, 2, RnnOptions::new().num_layers(2).dropout(0.5)).unwrap()),
        ),
        ("RNNCell", Box::new(RNNCell::new(3, 2).unwrap())),
        ("LSTMCell", Box::new(LSTMCell::new(3, 2).unwrap())),
        ("GRUCell", Box::new(GRUCell::new(3, 2).unwrap())),
    ]
}

type Loss = (&'static str, Box<dyn Module>);

fn losses() -> Vec<Loss> {
    vec![
        ("CrossEntropyLoss", Box::new(CrossEntropyLoss::new())),
        (
            "CrossEntropyLoss smoothing",
            Box::new(CrossEntropyLoss::new().label_smoothing(0.2).ignore_index(1)),
        ),
        ("NLLLoss", Box::new(NLLLoss::new())),
        ("MSELoss", Box::new(MSELoss::new())),
        ("L1Loss", Box::new(L1Loss::new())),
        ("SmoothL1Loss", Box::new(SmoothL1Loss::new())),
        ("HuberLoss", Box::new(HuberLoss::new())),
        ("BCELoss", Box::new(BCELoss::new())),
        ("BCEWithLogitsLoss", Box::new(BCEWithLogitsLoss::new())),
        ("KLDivLoss", Box::new(KLDivLoss::new())),
        ("HingeEmbeddingLoss", Box::new(HingeEmbeddingLoss::new())),
        ("SoftMarginLoss", Box::new(SoftMarginLoss::new())),
        ("MultiLabelSoftMarginLoss", Box::new(MultiLabelSoftMarginLoss::new())),
        ("MultiMarginLoss", Box::new(MultiMarginLoss::new())),
        ("MultiLabelMarginLoss", Box::new(MultiLabelMarginLoss::new())),
        ("PoissonNLLLoss", Box::new(PoissonNLLLoss::new())),
    ]
}

fn check(failures: &mut Vec<String>, what: &str, f: impl FnOnce() -> Result<()>) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        let msg =
            p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
        failures.push(format!("{what}: panicked: {}", msg.unwrap_or_default()));
    }
}

#[test]
fn no_layer_panics_on_edge_case_inputs() {
    let ins = inputs();
    let mut failures = Vec::new();
    for (name, layer) in layers() {
        for train in [true, false] {
            layer.set_training(train);
            for (xn, x) in &ins {
                check(&mut failures, &format!("{name}({xn}, train={train})"), || {
                    let y = layer.call(x)?;
                    if y.requires_grad() {
                        y.sum()?.backward()?;
                    }
                    Ok(())
                });
                // as a pair, for the layers of two inputs
                check(&mut failures, &format!("{name}(({xn}, {xn}))"), || {
                    layer.call_value(Value::from((x.clone(), x.clone()))).map(drop)
                });
            }
        }
    }
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn no_loss_panics_on_edge_case_inputs() {
    let ins = inputs();
    let mut failures = Vec::new();
    for (name, loss) in losses() {
        for (xn, x) in &ins {
            for (yn, y) in &ins {
                check(&mut failures, &format!("{name}({xn}, {yn})"), || {
                    loss.call_value((x, y).into()).map(drop)
                });
            }
        }
    }
    for (xn, x) in &ins {
        check(&mut failures, &format!("functional on {xn}"), || {
            let _ = F::pad(x, &[1, -9], &F::PadOptions { mode: PadMode::Reflect, value: None });
            let _ = F::pad(x, &[isize::MAX, 1], &Default::default());
            let _ = F::normalize(x, &F::NormalizeOptions { dim: 7, ..Default::default() });
            let _ = F::one_hot(x, Some(3));
            let bag = F::EmbeddingBagOptions {
                offsets: Some(x.clone()),
                mode: BagMode::Sum,
                include_last_offset: true,
                ..Default::default()
            };
            let _ = F::embedding_bag(x, &Tensor::ones([3, 2], DType::F32)?, &bag);
            let _ = F::cosine_similarity(x, x, &F::CosineSimilarityOptions { dim: 5, ..Default::default() });
            let _ = F::glu(x, 9);
            Ok(())
        });
    }
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

/// The recurrent layers with edge-case initial states (as `h0`, as both of LSTM's states)
/// and edge-case packed sequences (each input as the data, with good and bad batch sizes).
#[test]
fn no_recurrent_layer_panics_on_edge_case_states_and_packed_input() {
    let ins = inputs();
    let mut failures = Vec::new();
    let x = Tensor::randn([4, 2, 3], DType::F32).unwrap();
    let rnn = GRU::new(3, 2, RnnOptions::new().bidirectional(true)).unwrap();
    let lstm = LSTM::new(3, 2, RnnOptions::new().proj_size(1)).unwrap();
    let sizes = [vec![2i64, 1], vec![1], vec![3, 0], vec![0], vec![1, 2], vec![-1, 3]];
    for (hn, h) in &ins {
        check(&mut failures, &format!("GRU(x, h0={hn})"), || {
            rnn.call_value(Value::from((x.clone(), h.clone()))).map(drop)
        });
        check(&mut failures, &format!("LSTM(x, ({hn}, {hn}))"), || {
            lstm.call_value(Value::from((x.clone(), Value::from((h.clone(), h.clone()))))).map(drop)
        });
        for bs in &sizes {
            let p = Value::Dict(vec![
                ("data".into(), Value::Tensor(h.clone())),
                ("batch_sizes".into(), Value::Tensor(Tensor::new(bs.as_slice()).unwrap())),
                ("sorted_indices".into(), Value::None),
                ("unsorted_indices".into(), Value::None),
            ]);
            check(&mut failures, &format!("GRU(packed {hn}, batch_sizes {bs:?})"), || {
                rnn.call_value(p.clone()).map(drop)
            });
            check(&mut failures, &format!("LSTM(packed {hn}, batch_sizes {bs:?})"), || {
                lstm.call_value(p.clone()).map(drop)
            });
        }
        check(&mut failures, &format!("utils on {hn}"), || {
            use pyrite::nn::utils::rnn::*;
            let _ = pad_sequence(&[h, &x], false, 0.0, PaddingSide::Left);
            let _ = pack_padded_sequence(h, &[1, 9], true, false);
            let _ = pack_padded_sequence(h, &[2, 1, 0], false, true);
            let _ = pack_sequence(&[h, h], true);
            let _ = unpad_sequence(h, &[3, 1], false);
            Ok(())
        });
    }
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn bad_configurations_are_errors_at_construction() {
    assert!(Dropout::new(1.5).is_err());
    assert!(Dropout::new(-0.1).is_err());
    assert!(LSTM::new(3, 2, RnnOptions::new().proj_size(2)).is_err());
    assert!(GRU::new(3, 2, RnnOptions::new().dropout(f64::NAN)).is_err());
    assert!(GRU::new(3, 2, RnnOptions::new().nonlinearity(RnnNonlinearity::Relu)).is_err());
    assert!(GroupNorm::new(2, 3).err().unwrap().message().contains("divisible"));
    assert!(GroupNorm::new(0, 3).is_err());
    assert!(Embedding::new(3, 2).unwrap().padding_idx(3).is_err());
    assert!(Embedding::from_pretrained(&Tensor::zeros([3], DType::F32).unwrap(), true, None).is_err());
    assert!(ZeroPad2d::new(&[1, 2, 3]).is_err());
    assert!(Conv2d::new(3, 4, 3, ConvOptions::new().groups(2)).is_err());
    assert!(Conv2d::new(3, 3, 3, ConvOptions::new().stride(2).padding_same()).is_err());
    assert!(Conv2d::new(3, 3, 0, ConvOptions::new()).is_err());
    assert!(ConvTranspose2d::new(3, 3, 3, ConvOptions::new().padding_mode(PadMode::Reflect)).is_err());
    let e = Conv2d::new(3, 4, 3, ConvOptions::new())
        .unwrap()
        .call(&Tensor::zeros([2, 3], DType::F32).unwrap())
        .unwrap_err();
    assert_eq!(
        e.message(),
        "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [2, 3]"
    );
    let e = Conv2d::new(3, 4, 5, ConvOptions::new())
        .unwrap()
        .call(&Tensor::zeros([1, 3, 2, 2], DType::F32).unwrap())
        .unwrap_err();
    assert!(e.message().contains("Kernel size can't be greater than actual input size"), "{e}");
    // wrong ranks and channel counts get PyTorch-like messages
    let e = BatchNorm2d::new(3).unwrap().call(&Tensor::zeros([2, 3], DType::F32).unwrap()).unwrap_err();
    assert_eq!(e.message(), "expected 4D input (got 2D input)");
    let e = Linear::new(4, 2).unwrap().call(&Tensor::zeros([2, 3], DType::F32).unwrap()).unwrap_err();
    assert_eq!(e.message(), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x2)");
    let e = GroupNorm::new(1, 4).unwrap().call(&Tensor::zeros([2, 3], DType::F32).unwrap()).unwrap_err();
    assert!(e.message().contains("[N, 4, *]"), "{e}");
}

/// Attention takes several inputs: every edge-case tensor as query, key and value (and as
/// masks) of `MultiheadAttention` and `F::scaled_dot_product_attention`, in both modes.
#[test]
fn no_attention_call_panics_on_edge_case_inputs() {
    use pyrite::nn::attention::MhaCall;
    use pyrite::nn::functional::SdpaOptions;
    let ins = inputs();
    let mut failures = Vec::new();
    let mha = MultiheadAttention::with_options(
        3,
        1,
        MultiheadAttentionOptions { add_bias_kv: true, ..Default::default() },
    )
    .unwrap();
    for (xn, x) in &ins {
        for (mn, m) in &ins {
            for need_weights in [true, false] {
                check(
                    &mut failures,
                    &format!("MultiheadAttention({xn}, mask {mn}, need_weights={need_weights})"),
                    || {
                        let call = MhaCall { attn_mask: Some(m), need_weights, ..Default::default() };
                        let _ = mha.forward_with(x, x, x, &call);
                        let call = MhaCall {
                            key_padding_mask: Some(m),
                            need_weights,
                            is_causal: true,
                            ..Default::default()
                        };
                        let _ = mha.forward_with(x, x, x, &call);
                        Ok(())
                    },
                );
            }
            check(&mut failures, &format!("scaled_dot_product_attention({xn}, mask {mn})"), || {
                let _ = F::scaled_dot_product_attention(x, x, x, &SdpaOptions::new().attn_mask(m));
                let _ = F::scaled_dot_product_attention(
                    x,
                    m,
                    m,
                    &SdpaOptions::new().enable_gqa(true).is_causal(true),
                );
                let _ =
                    F::scaled_dot_product_attention(x, x, x, &SdpaOptions::new().dropout_p(0.5).scale(-1.0));
                Ok(())
            });
        }
    }
    assert!(failures.is_empty(), "{} panics:\n{}", failures.len(), failures.join("\n"));
}

/// Sizes that would wrap or allocate without bound are errors before any allocation: unfold's
/// effective kernel `d * (k - 1) + 1`, its gather tables, interpolation plans of a huge scale,
/// a pixel-shuffle factor whose square wraps to 0.
#[test]
fn huge_sizes_are_errors_not_aborts_or_wraps() {
    use pyrite::ErrorKind;
    let x = Tensor::ones([1, 1, 4, 4], DType::F32).unwrap();
    // d * (k - 1) + 1 wraps to a small kernel in usize
    assert!(
        F::unfold(&x, &[1 << 40], &F::FoldOptions { dilation: vec![1 << 40], ..Default::default() }).is_err()
    );
    assert!(F::unfold(
        &x,
        &[(1usize << 63) + 1],
        &F::FoldOptions { dilation: vec![2], ..Default::default() }
    )
    .is_err());
    // huge padding: the gather tables would be k * blocks entries
    let e = F::unfold(&x, &[1 << 21], &F::FoldOptions { padding: vec![1 << 21], ..Default::default() })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    let cols = Tensor::ones([1, 4, 1], DType::F32).unwrap();
    assert!(F::fold(&cols, &[usize::MAX, 1], &[2, 2], &Default::default()).is_err());

    let s = Tensor::ones([1, 1, 4], DType::F32).unwrap();
    for mode in [
        F::InterpolateMode::Nearest,
        F::InterpolateMode::NearestExact,
        F::InterpolateMode::Linear,
        F::InterpolateMode::Area,
    ] {
        let opts = F::InterpolateOptions { scale_factor: Some(vec![1e10]), mode, ..Default::default() };
        let e = F::interpolate(&s, &opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{mode}: {e}");
    }
    let up = Upsample::new(None, Some(&[1e10]), F::InterpolateMode::Nearest);
    assert_eq!(up.call(&s).unwrap_err().kind(), ErrorKind::OutOfMemory);
    // an empty batch interpolates to an empty result of any size, as in PyTorch
    let empty = Tensor::zeros([0, 1, 4], DType::F32).unwrap();
    let opts = F::InterpolateOptions { scale_factor: Some(vec![1e10]), ..Default::default() };
    let y = F::interpolate(&empty, &opts).unwrap();
    assert_eq!(y.dims(), &[0, 1, 40_000_000_000]);

    // r * r wraps to 0 for r = 2^32: a division by zero before
    let p = Tensor::ones([1, 4, 2, 2], DType::F32).unwrap();
    assert_eq!(F::pixel_shuffle(&p, 1 << 32).unwrap_err().kind(), ErrorKind::Value);
    assert!(F::pixel_shuffle(&p, usize::MAX).is_err());
    assert!(F::pixel_unshuffle(&p, 1 << 32).is_err());
    let z = Tensor::zeros([1, 0, 2, 2], DType::F32).unwrap();
    assert!(F::pixel_shuffle(&z, 1 << 62).is_err());
}
