//! Every options struct's `Default` is PyTorch's defaults: each op and layer that takes one is
//! called with `&Default::default()` (only PyTorch's required arguments given) and checked to
//! succeed and behave as PyTorch's defaults do; the options of the other crates are built with
//! `Default` and compared with PyTorch's documented defaults.
//!
//! The options structs of the core and nn, each covered below:
//! - pyrite-core: `GradcheckOptions` (`gradcheck`), `PrintOptions` (`set_printoptions`).
//! - pyrite-nn: `PoolOptions` (MaxPool1d/2d/3d, AvgPool1d/2d/3d, `F::max_pool2d`,
//!   `F::avg_pool2d`), `ConvOptions` (Conv1d/2d/3d, ConvTranspose1d/2d/3d), `NormOptions`
//!   (no `Default`: batch and instance norms differ in PyTorch, so `batch_norm()` and
//!   `instance_norm()` give each one's defaults), `EmbeddingOptions` (`F::embedding`),
//!   `SdpaOptions` (`F::scaled_dot_product_attention`), `MhaOptions`
//!   (`F::multi_head_attention_forward`, whose weights PyTorch also requires),
//!   `CrossEntropyOptions` (`F::cross_entropy`), `RnnOptions` (RNN, LSTM, GRU), `RnnArgs`
//!   (`F::rnn`), `MultiheadAttentionOptions` and `MhaCall` (MultiheadAttention),
//!   `TransformerLayerOptions` (TransformerEncoderLayer/DecoderLayer), `TransformerOptions`
//!   (Transformer), `ClipGradNormOptions` (`clip_grad_norm_`). `NormConfig` holds a norm's
//!   size with its `NormOptions` and is not a keyword struct.
//! - pyrite-optim: every optimizer's options (`SGDOptions` ... `LBFGSOptions`, `AdamOptions`
//!   and its `adamw()`, `AveragedModelOptions`) and every scheduler's (`SchedulerOptions`,
//!   `StepLROptions` ... `ReduceLROnPlateauOptions`, `SWALROptions`).
//! - the functional ops' keyword structs: the losses' (`TripletMarginLossOptions`,
//!   `KlDivOptions`, `PoissonNllLossOptions`, `GaussianNllLossOptions`,
//!   `MarginRankingLossOptions`, `HingeEmbeddingLossOptions`, `CosineEmbeddingLossOptions`,
//!   `MultiMarginLossOptions`, `SmoothL1LossOptions`, `HuberLossOptions`,
//!   `BinaryCrossEntropyOptions`, `BinaryCrossEntropyWithLogitsOptions`,
//!   `MultilabelSoftMarginLossOptions`, `CtcLossOptions`), `PadOptions`, `InterpolateOptions`,
//!   `GridSampleOptions`, `FoldOptions`, `NormalizeOptions`, `CosineSimilarityOptions`,
//!   `PairwiseDistanceOptions`, `EmbeddingBagOptions`, `DropoutOptions`,
//!   `AlphaDropoutOptions`, `HardtanhOptions`, `SoftplusOptions`, `RreluOptions`,
//!   `BatchNormOptions`, `InstanceNormOptions`, `LayerNormOptions` (layer and group norm),
//!   `RmsNormOptions`, `LocalResponseNormOptions`; `F::conv_transpose` takes `ConvOptions` and
//!   `F::max_pool` / `F::avg_pool` take `PoolOptions`, as the layers do.
//! - the other crates' (against torchvision, Hugging Face, Keras, Lightning and `torch.load`):
//!   the vision transforms', utils' and models' options, `CsvOptions`, `TokenizerOptions`,
//!   `FromPretrainedOptions`, `BertConfig`, `EarlyStoppingOptions`, `CheckpointOptions`,
//!   `LoadOptions`, and the data loader's and samplers'. (pyrite-optim's are checked with the
//!   optimizers.)

use pyrite::nn::functional as F;
use pyrite::nn::normalization::NormOptions;
use pyrite::nn::*;
use pyrite::{DType, Result, Tensor};

fn randn(shape: &[usize]) -> Tensor {
    Tensor::randn(shape.to_vec(), DType::F32).unwrap()
}

#[test]
fn pool_options_default_is_pytorchs() -> Result<()> {
    let o = PoolOptions::default();
    assert_eq!(o.stride, None); // the kernel size
    assert_eq!((o.padding.as_slice(), o.dilation.as_slice()), (&[0][..], &[1][..]));
    assert!(!o.ceil_mode && !o.return_indices);
    assert_eq!((o.count_include_pad, o.divisor_override), (None, None));
    // every pooling layer and function with the default options: stride = kernel size
    assert_eq!(MaxPool1d::new(2, Default::default()).call(&randn(&[1, 2, 8]))?.dims(), &[1, 2, 4]);
    assert_eq!(MaxPool2d::new(2, Default::default()).call(&randn(&[1, 2, 8, 8]))?.dims(), &[1, 2, 4, 4]);
    assert_eq!(
        MaxPool3d::new(2, Default::default()).call(&randn(&[1, 2, 4, 4, 4]))?.dims(),
        &[1, 2, 2, 2, 2]
    );
    assert_eq!(AvgPool1d::new(2, Default::default()).call(&randn(&[1, 2, 8]))?.dims(), &[1, 2, 4]);
    assert_eq!(AvgPool2d::new(2, Default::default()).call(&randn(&[1, 2, 8, 8]))?.dims(), &[1, 2, 4, 4]);
    assert_eq!(
        AvgPool3d::new(2, Default::default()).call(&randn(&[1, 2, 4, 4, 4]))?.dims(),
        &[1, 2, 2, 2, 2]
    );
    let x = Tensor::new([[[[1f32, 2., 3., 4.], [5., 6., 7., 8.]]]])?;
    assert_eq!(F::max_pool2d(&x, &[2], &Default::default())?.to_vec::<f32>()?, vec![6., 8.]);
    assert_eq!(F::avg_pool2d(&x, &[2], &Default::default())?.to_vec::<f32>()?, vec![3.5, 5.5]);
    // PyTorch's repr of the defaults
    assert_eq!(
        MaxPool2d::new(2, Default::default()).to_string(),
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    );
    // struct update syntax from the defaults, and empty padding/dilation meaning PyTorch's 0/1
    let o = PoolOptions { stride: Some(vec![1]), ..Default::default() };
    assert_eq!(MaxPool1d::new(2, o).call(&randn(&[1, 1, 5]))?.dims(), &[1, 1, 4]);
    let empty = PoolOptions { padding: vec![], dilation: vec![], ..Default::default() };
    assert_eq!(F::max_pool2d(&x, &[2], &empty)?.to_vec::<f32>()?, vec![6., 8.]);
    assert_eq!(AvgPool2d::new(2, empty.clone()).call(&x)?.to_vec::<f32>()?, vec![3.5, 5.5]);
    assert!(MaxPool2d::new(2, empty).to_string().contains("padding=0, dilation=1"));
    Ok(())
}

#[test]
fn conv_options_default_is_pytorchs() -> Result<()> {
    let o = ConvOptions::default();
    assert_eq!(
        (o.stride.as_slice(), o.dilation.as_slice(), o.output_padding.as_slice()),
        (&[1][..], &[1][..], &[0][..])
    );
    assert!(matches!(o.padding, pyrite::nn::conv::Padding::Sizes(ref p) if p == &[0]));
    assert_eq!((o.groups, o.bias, o.padding_mode), (1, true, F::PadMode::Constant));
    assert_eq!(Conv1d::new(2, 3, 3, Default::default())?.call(&randn(&[1, 2, 8]))?.dims(), &[1, 3, 6]);
    assert_eq!(Conv2d::new(2, 3, 3, Default::default())?.call(&randn(&[1, 2, 8, 8]))?.dims(), &[1, 3, 6, 6]);
    assert_eq!(
        Conv3d::new(2, 3, 3, Default::default())?.call(&randn(&[1, 2, 4, 4, 4]))?.dims(),
        &[1, 3, 2, 2, 2]
    );
    assert_eq!(
        ConvTranspose1d::new(2, 3, 3, Default::default())?.call(&randn(&[1, 2, 4]))?.dims(),
        &[1, 3, 6]
    );
    assert_eq!(
        ConvTranspose2d::new(2, 3, 3, Default::default())?.call(&randn(&[1, 2, 4, 4]))?.dims(),
        &[1, 3, 6, 6]
    );
    assert_eq!(
        ConvTranspose3d::new(2, 3, 3, Default::default())?.call(&randn(&[1, 2, 2, 2, 2]))?.dims(),
        &[1, 3, 4, 4, 4]
    );
    assert_eq!(
        Conv2d::new(2, 3, 3, Default::default())?.to_string(),
        "Conv2d(2, 3, kernel_size=(3, 3), stride=(1, 1))"
    );
    Ok(())
}

#[test]
fn norm_options_are_each_norms_defaults() -> Result<()> {
    // BatchNorm: eps=1e-5, momentum=0.1, affine=True, track_running_stats=True
    let b = NormOptions::batch_norm();
    assert_eq!(
        (b.eps, b.momentum, b.affine, b.bias, b.track_running_stats),
        (1e-5, Some(0.1), true, true, true)
    );
    // InstanceNorm: the same but affine=False, track_running_stats=False
    let i = NormOptions::instance_norm();
    assert_eq!((i.eps, i.momentum, i.affine, i.track_running_stats), (1e-5, Some(0.1), false, false));
    assert_eq!(BatchNorm2d::with_options(2, b)?.call(&randn(&[2, 2, 3, 3]))?.dims(), &[2, 2, 3, 3]);
    assert_eq!(InstanceNorm1d::with_options(2, i)?.call(&randn(&[2, 2, 5]))?.dims(), &[2, 2, 5]);
    Ok(())
}

#[test]
fn functional_options_defaults_are_pytorchs() -> Result<()> {
    // F.embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, ...)
    let e = F::EmbeddingOptions::default();
    assert_eq!((e.padding_idx, e.max_norm, e.scale_grad_by_freq), (None, None, false));
    assert!(e.norm_type.is_none_or(|p| p == 2.0));
    let w = randn(&[5, 3]);
    let y = F::embedding(&Tensor::new([1i64, 4])?, &w, &Default::default())?;
    assert_eq!(y.to_vec2::<f32>()?, vec![w.select(0, 1)?.to_vec::<f32>()?, w.select(0, 4)?.to_vec::<f32>()?]);

    // F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)
    let s = F::SdpaOptions::default();
    assert!(
        s.attn_mask.is_none() && s.dropout_p == 0.0 && !s.is_causal && s.scale.is_none() && !s.enable_gqa
    );
    let (q, k, v) = (randn(&[1, 2, 4, 8]), randn(&[1, 2, 5, 8]), randn(&[1, 2, 5, 8]));
    let y = F::scaled_dot_product_attention(&q, &k, &v, &Default::default())?;
    let want = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(1.0 / 8f64.sqrt())?.softmax(-1)?.matmul(&v)?;
    assert!(y.allclose(&want, 1e-5, 1e-5, false)?, "deterministic, scale 1/sqrt(E)");

    // F.cross_entropy(input, target, weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)
    let c = F::CrossEntropyOptions::default();
    assert!(c.weight.is_none());
    assert_eq!((c.ignore_index, c.reduction, c.label_smoothing), (-100, F::Reduction::Mean, 0.0));
    let logits = randn(&[3, 4]);
    let target = Tensor::new([0i64, 3, 1])?;
    let loss = F::cross_entropy(&logits, &target, &Default::default())?;
    let lsm = logits.log_softmax(-1)?.to_vec2::<f32>()?;
    let want = -(lsm[0][0] + lsm[1][3] + lsm[2][1]) / 3.0;
    assert!((loss.item::<f32>()? - want).abs() < 1e-5);

    // F.multi_head_attention_forward: embed_dim_to_check, num_heads and the weights are
    // required; the keywords default as PyTorch's
    let m = F::MhaOptions::default();
    assert!(!m.add_zero_attn && m.dropout_p == 0.0 && m.training && m.need_weights);
    assert!(m.key_padding_mask.is_none() && m.attn_mask.is_none() && !m.use_separate_proj_weight);
    assert!(m.static_k.is_none() && m.static_v.is_none() && m.average_attn_weights && !m.is_causal);
    let (inw, inb, outw, outb) = (randn(&[24, 8]), randn(&[24]), randn(&[8, 8]), randn(&[8]));
    let q = randn(&[3, 1, 8]);
    let o = F::MhaOptions {
        embed_dim_to_check: 8,
        num_heads: 2,
        in_proj_weight: Some(&inw),
        in_proj_bias: Some(&inb),
        out_proj_weight: Some(&outw),
        out_proj_bias: Some(&outb),
        ..Default::default()
    };
    let (y, w) = F::multi_head_attention_forward(&q, &q, &q, &o)?;
    assert_eq!(
        (y.dims(), w.unwrap().dims()),
        (&[3, 1, 8][..], &[1, 3, 3][..]),
        "averaged weights by default"
    );

    // clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None)
    let cg = utils::ClipGradNormOptions::default();
    assert_eq!((cg.norm_type, cg.error_if_nonfinite, cg.foreach), (2.0, false, None));
    let p = Tensor::zeros([2], DType::F32)?.requires_grad_(true)?;
    p.mul(&Tensor::new([3f32, 4.])?)?.sum()?.backward()?;
    let total = utils::clip_grad_norm_(&[&p], 1.0, Default::default())?;
    assert!((total.item::<f32>()? - 5.0).abs() < 1e-6, "the 2-norm");
    Ok(())
}

#[test]
fn recurrent_options_defaults_are_pytorchs() -> Result<()> {
    // nn.RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    // batch_first=False, dropout=0.0, bidirectional=False, proj_size=0)
    let o = RnnOptions::default();
    assert_eq!(
        (o.num_layers, o.nonlinearity, o.bias, o.batch_first),
        (1, RnnNonlinearity::Tanh, true, false)
    );
    assert_eq!((o.dropout, o.bidirectional, o.proj_size), (0.0, false, 0));
    let x = randn(&[5, 2, 3]); // (L, N, H_in): batch_first=False
    let output = |m: &dyn Module| -> Result<Vec<usize>> {
        Ok(m.call_value(Value::Tensor(x.clone()))?.get(0)?.as_tensor()?.dims().to_vec())
    };
    assert_eq!(output(&RNN::new(3, 4, Default::default())?)?, [5, 2, 4]);
    assert_eq!(output(&LSTM::new(3, 4, Default::default())?)?, [5, 2, 4]);
    assert_eq!(output(&GRU::new(3, 4, Default::default())?)?, [5, 2, 4]);
    let a = F::RnnArgs::default();
    assert_eq!(
        (a.num_layers, a.bias, a.dropout, a.bidirectional, a.batch_first),
        (1, true, 0.0, false, false)
    );
    Ok(())
}

#[test]
fn attention_and_transformer_options_defaults_are_pytorchs() -> Result<()> {
    // nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
    // add_zero_attn=False, kdim=None, vdim=None, batch_first=False)
    let o = MultiheadAttentionOptions::default();
    assert_eq!((o.dropout, o.bias, o.add_bias_kv, o.add_zero_attn), (0.0, true, false, false));
    assert_eq!((o.kdim, o.vdim, o.batch_first), (None, None, false));
    let mha = MultiheadAttention::with_options(8, 2, Default::default())?;
    let q = randn(&[3, 1, 8]);
    let (y, w) = mha.call((&q, &q, &q))?;
    assert_eq!((y.dims(), w.map(|w| w.dims().to_vec())), (&[3, 1, 8][..], Some(vec![1, 3, 3])));

    // nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    // activation=relu, layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True)
    let l = TransformerLayerOptions::default();
    assert_eq!((l.dim_feedforward, l.dropout, l.layer_norm_eps), (2048, 0.1, 1e-5));
    assert!(!l.batch_first && !l.norm_first && l.bias);
    assert!(matches!(l.activation, pyrite::nn::transformer::Activation::Relu));
    let x = randn(&[4, 1, 8]);
    let enc = TransformerEncoderLayer::with_options(8, 2, Default::default())?;
    enc.eval();
    assert_eq!(enc.call(&x)?.dims(), &[4, 1, 8]);
    let dec = TransformerDecoderLayer::with_options(8, 2, Default::default())?;
    dec.eval();
    assert_eq!(dec.forward_with(&x, &x, &Default::default())?.dims(), &[4, 1, 8]);

    // nn.Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, ...)
    let t = TransformerOptions::default();
    assert_eq!((t.d_model, t.nhead, t.num_encoder_layers, t.num_decoder_layers), (512, 8, 6, 6));
    assert_eq!((t.dim_feedforward, t.dropout, t.layer_norm_eps), (2048, 0.1, 1e-5));
    assert!(!t.batch_first && !t.norm_first && t.bias);
    let small = TransformerOptions {
        d_model: 8,
        nhead: 2,
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        ..Default::default()
    };
    let tr = Transformer::new(small)?;
    tr.eval();
    assert_eq!(tr.forward_with(&x, &x, &Default::default())?.dims(), &[4, 1, 8]);
    Ok(())
}

#[test]
fn core_options_defaults_are_pytorchs() -> Result<()> {
    // torch.autograd.gradcheck(..., eps=1e-06, atol=1e-05, rtol=0.001)
    let g = pyrite::autograd::GradcheckOptions::default();
    assert_eq!((g.eps, g.atol, g.rtol), (1e-6, 1e-5, 1e-3));
    let x = Tensor::randn([3], DType::F64)?.requires_grad_(true)?;
    pyrite::autograd::gradcheck(|v| v[0].mul(&v[0])?.sum(), &[x], Default::default())?;
    // torch.set_printoptions: precision=4, threshold=1000, edgeitems=3, linewidth=80, sci_mode=None
    let p = pyrite::display::PrintOptions::default();
    assert_eq!((p.precision, p.threshold, p.edgeitems, p.linewidth, p.sci_mode), (4, 1000, 3, 80, None));
    Ok(())
}

#[test]
fn other_crates_options_defaults_are_pytorchs() {
    use pyrite::data::{DataLoaderOptions, DistributedSamplerOptions, RandomSamplerOptions};
    use pyrite::optim::*;
    // torch.optim: SGD(lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False)
    let o = SGDOptions::default();
    assert_eq!(
        (o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.maximize),
        (1e-3, 0.0, 0.0, 0.0, false, false)
    );
    // Adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False)
    let o = AdamOptions::default();
    assert_eq!((o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad), (1e-3, (0.9, 0.999), 1e-8, 0.0, false));
    // RMSprop(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False)
    let o = RMSpropOptions::default();
    assert_eq!(
        (o.lr, o.alpha, o.eps, o.weight_decay, o.momentum, o.centered),
        (1e-2, 0.99, 1e-8, 0.0, 0.0, false)
    );
    // Adagrad(lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10)
    let o = AdagradOptions::default();
    assert_eq!(
        (o.lr, o.lr_decay, o.weight_decay, o.initial_accumulator_value, o.eps),
        (1e-2, 0.0, 0.0, 0.0, 1e-10)
    );
    // torch.utils.data: DataLoader(batch_size=1, shuffle=False, num_workers=0, drop_last=False,
    // timeout=0, prefetch_factor=None, persistent_workers=False, in_order=True)
    let o = DataLoaderOptions::default();
    assert_eq!(
        (o.batch_size, o.shuffle, o.num_workers, o.pin_memory, o.drop_last),
        (Some(1), false, 0, false, false)
    );
    assert_eq!((o.timeout, o.prefetch_factor, o.persistent_workers, o.in_order), (None, None, false, true));
    assert!(
        o.sampler.is_none() && o.batch_sampler.is_none() && o.collate_fn.is_none() && o.generator.is_none()
    );
    // RandomSampler(data_source, replacement=False, num_samples=None, generator=None)
    let o = RandomSamplerOptions::default();
    assert!(!o.replacement && o.num_samples.is_none() && o.generator.is_none());
    // DistributedSampler(..., shuffle=True, seed=0, drop_last=False); one process: 1 replica, rank 0
    let o = DistributedSamplerOptions::default();
    assert_eq!((o.num_replicas, o.rank, o.shuffle, o.seed, o.drop_last), (1, 0, true, 0, false));
    // torchvision: Resize(size, interpolation=BILINEAR, max_size=None, antialias=True),
    // RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3/4, 4/3), BILINEAR, antialias=True)
    use pyrite::vision::transforms::{InterpolationMode, RandomResizedCropOptions, ResizeOptions};
    let o = ResizeOptions::default();
    assert!(matches!(o.interpolation, InterpolationMode::Bilinear) && o.max_size.is_none() && o.antialias);
    let o = RandomResizedCropOptions::default();
    assert_eq!((o.scale, o.ratio, o.antialias), ((0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0), true));
    assert!(matches!(o.interpolation, InterpolationMode::Bilinear));
}

/// The options of every optimizer in `torch.optim` (SGD, Adam, RMSprop and Adagrad are in
/// `other_crates_options_defaults_are_pytorchs`), with PyTorch's signatures.
#[test]
fn optimizer_options_defaults_are_pytorchs() {
    use pyrite::optim::swa_utils::AveragedModelOptions;
    use pyrite::optim::*;
    // AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False)
    let o = AdamOptions::adamw();
    assert_eq!((o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad), (1e-3, (0.9, 0.999), 1e-8, 1e-2, false));
    assert!(o.decoupled_weight_decay && !o.maximize);
    let o = AdamOptions::default();
    assert!(!o.maximize && !o.decoupled_weight_decay);
    // Adadelta(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False)
    let o = AdadeltaOptions::default();
    assert_eq!((o.lr, o.rho, o.eps, o.weight_decay, o.maximize), (1.0, 0.9, 1e-6, 0.0, false));
    // Adagrad(..., maximize=False)
    assert!(!AdagradOptions::default().maximize);
    // Adamax(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False)
    let o = AdamaxOptions::default();
    assert_eq!((o.lr, o.betas, o.eps, o.weight_decay, o.maximize), (2e-3, (0.9, 0.999), 1e-8, 0.0, false));
    // ASGD(lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False)
    let o = ASGDOptions::default();
    assert_eq!(
        (o.lr, o.lambd, o.alpha, o.t0, o.weight_decay, o.maximize),
        (1e-2, 1e-4, 0.75, 1e6, 0.0, false)
    );
    // NAdam(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
    // decoupled_weight_decay=False, maximize=False)
    let o = NAdamOptions::default();
    assert_eq!(
        (o.lr, o.betas, o.eps, o.weight_decay, o.momentum_decay),
        (2e-3, (0.9, 0.999), 1e-8, 0.0, 4e-3)
    );
    assert!(!o.decoupled_weight_decay && !o.maximize);
    // RAdam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
    // maximize=False)
    let o = RAdamOptions::default();
    assert_eq!((o.lr, o.betas, o.eps, o.weight_decay), (1e-3, (0.9, 0.999), 1e-8, 0.0));
    assert!(!o.decoupled_weight_decay && !o.maximize);
    // RMSprop(..., maximize=False)
    assert!(!RMSpropOptions::default().maximize);
    // Rprop(lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False)
    let o = RpropOptions::default();
    assert_eq!((o.lr, o.etas, o.step_sizes, o.maximize), (1e-2, (0.5, 1.2), (1e-6, 50.0), false));
    // LBFGS(lr=1, max_iter=20, max_eval=None (max_iter * 5 // 4), tolerance_grad=1e-7,
    // tolerance_change=1e-9, history_size=100, line_search_fn=None)
    let o = LBFGSOptions::default();
    assert_eq!((o.lr, o.max_iter, o.max_eval, o.history_size), (1.0, 20, None, 100));
    assert_eq!(
        (o.tolerance_grad, o.tolerance_change, o.line_search_fn, o.maximize),
        (1e-7, 1e-9, None, false)
    );
    // swa_utils.AveragedModel(model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False)
    let o = AveragedModelOptions::default();
    assert!(o.avg_fn.is_none() && o.multi_avg_fn.is_none() && !o.use_buffers);
}

/// The options of every scheduler in `torch.optim.lr_scheduler` and `swa_utils.SWALR`, with
/// PyTorch's signatures (the required arguments are positional in `new`, not options).
#[test]
fn lr_scheduler_options_defaults_are_pytorchs() {
    use pyrite::optim::lr_scheduler::*;
    use pyrite::optim::swa_utils::SWALROptions;
    // LambdaLR(optimizer, lr_lambda, last_epoch=-1), MultiplicativeLR and ExponentialLR alike
    assert_eq!(SchedulerOptions::default().last_epoch, -1);
    // StepLR(optimizer, step_size, gamma=0.1, last_epoch=-1)
    let o = StepLROptions::default();
    assert_eq!((o.gamma, o.last_epoch), (0.1, -1));
    // MultiStepLR(optimizer, milestones, gamma=0.1, last_epoch=-1)
    let o = MultiStepLROptions::default();
    assert_eq!((o.gamma, o.last_epoch), (0.1, -1));
    // ConstantLR(optimizer, factor=1/3, total_iters=5, last_epoch=-1)
    let o = ConstantLROptions::default();
    assert_eq!((o.factor, o.total_iters, o.last_epoch), (1.0 / 3.0, 5, -1));
    // LinearLR(optimizer, start_factor=1/3, end_factor=1.0, total_iters=5, last_epoch=-1)
    let o = LinearLROptions::default();
    assert_eq!((o.start_factor, o.end_factor, o.total_iters, o.last_epoch), (1.0 / 3.0, 1.0, 5, -1));
    // PolynomialLR(optimizer, total_iters=5, power=1.0, last_epoch=-1)
    let o = PolynomialLROptions::default();
    assert_eq!((o.total_iters, o.power, o.last_epoch), (5, 1.0, -1));
    // CosineAnnealingLR(optimizer, T_max, eta_min=0.0, last_epoch=-1)
    let o = CosineAnnealingLROptions::default();
    assert_eq!((o.eta_min, o.last_epoch), (0.0, -1));
    // CosineAnnealingWarmRestarts(optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1)
    let o = CosineAnnealingWarmRestartsOptions::default();
    assert_eq!((o.t_mult, o.eta_min, o.last_epoch), (1, 0.0, -1));
    // CyclicLR(optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
    // mode='triangular', gamma=1.0, scale_fn=None, scale_mode='cycle', cycle_momentum=True,
    // base_momentum=0.8, max_momentum=0.9, last_epoch=-1)
    let o = CyclicLROptions::default();
    assert_eq!(
        (o.step_size_up, o.step_size_down, o.mode, o.gamma),
        (2000, None, CyclicMode::Triangular, 1.0)
    );
    assert!(o.scale_fn.is_none());
    assert_eq!((o.scale_mode, o.cycle_momentum, o.last_epoch), (ScaleMode::Cycle, true, -1));
    assert_eq!((o.base_momentum, o.max_momentum), (PerGroup::All(0.8), PerGroup::All(0.9)));
    // OneCycleLR(optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
    // pct_start=0.3, anneal_strategy='cos', cycle_momentum=True, base_momentum=0.85,
    // max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1)
    let o = OneCycleLROptions::default();
    assert_eq!((o.total_steps, o.epochs, o.steps_per_epoch), (None, None, None));
    assert_eq!((o.pct_start, o.anneal_strategy, o.cycle_momentum), (0.3, AnnealStrategy::Cos, true));
    assert_eq!((o.base_momentum, o.max_momentum), (PerGroup::All(0.85), PerGroup::All(0.95)));
    assert_eq!((o.div_factor, o.final_div_factor, o.three_phase, o.last_epoch), (25.0, 1e4, false, -1));
    // ReduceLROnPlateau(optimizer, mode='min', factor=0.1, patience=10, threshold=1e-4,
    // threshold_mode='rel', cooldown=0, min_lr=0, eps=1e-8)
    let o = ReduceLROnPlateauOptions::default();
    assert_eq!((o.mode, o.factor, o.patience, o.threshold), (PlateauMode::Min, 0.1, 10, 1e-4));
    assert_eq!(
        (o.threshold_mode, o.cooldown, o.min_lr, o.eps),
        (ThresholdMode::Rel, 0, PerGroup::All(0.0), 1e-8)
    );
    // swa_utils.SWALR(optimizer, swa_lr, anneal_epochs=10, anneal_strategy='cos', last_epoch=-1)
    let o = SWALROptions::default();
    assert_eq!((o.anneal_epochs, o.anneal_strategy, o.last_epoch), (10, AnnealStrategy::Cos, -1));
}

fn close(t: &Tensor, want: &[f32]) -> Result<()> {
    let got = t.to_dtype(DType::F32)?.reshape([-1isize])?.to_vec::<f32>()?;
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-4, "{got:?} vs {want:?}");
    }
    Ok(())
}

fn t(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), [v.len()]).unwrap()
}

fn t2(rows: &[&[f32]]) -> Tensor {
    let flat: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    Tensor::from_vec(flat, [rows.len(), rows[0].len()]).unwrap()
}

#[test]
fn loss_options_defaults_are_pytorchs() -> Result<()> {
    use F::Reduction::Mean;
    // F.triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, reduction='mean')
    let o = F::TripletMarginLossOptions::default();
    assert_eq!((o.margin, o.p, o.eps, o.swap, o.reduction), (1.0, 2.0, 1e-6, false, Mean));
    let (a, p, n) = (t2(&[&[0., 0.]]), t2(&[&[3., 4.]]), t2(&[&[0., 1.]]));
    close(&F::triplet_margin_loss(&a, &p, &n, &Default::default())?, &[5.0])?; // 5 - 1 + 1
                                                                               // F.kl_div(input, target, reduction='mean', log_target=False): 'mean' averages every element
    let o = F::KlDivOptions::default();
    assert_eq!((o.reduction, o.log_target), (F::KlReduction::Mean, false));
    let half = 0.5f32.ln();
    let (lp, tp) = (t2(&[&[half, half], &[half, half]]), t2(&[&[0.25, 0.75], &[0.25, 0.75]]));
    let row = 0.25 * (0.25f32.ln() - half) + 0.75 * (0.75f32.ln() - half);
    close(&F::kl_div(&lp, &tp, &Default::default())?, &[row / 2.0])?;
    let batchmean = F::KlDivOptions { reduction: F::KlReduction::BatchMean, ..Default::default() };
    close(&F::kl_div(&lp, &tp, &batchmean)?, &[row])?;
    let lt = F::KlDivOptions { log_target: true, ..Default::default() };
    close(&F::kl_div(&lp, &tp.log()?, &lt)?, &[row / 2.0])?;
    // F.poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction='mean')
    let o = F::PoissonNllLossOptions::default();
    assert_eq!((o.log_input, o.full, o.eps, o.reduction), (true, false, 1e-8, Mean));
    let e = std::f32::consts::E;
    close(
        &F::poisson_nll_loss(&t(&[0., 1.]), &t(&[1., 2.]), &Default::default())?,
        &[(1.0 + e - 2.0) / 2.0],
    )?;
    // F.gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction='mean')
    let o = F::GaussianNllLossOptions::default();
    assert_eq!((o.full, o.eps, o.reduction), (false, 1e-6, Mean));
    let want = 0.5 * (2f32.ln() + 4.0 / 2.0);
    close(&F::gaussian_nll_loss(&t(&[1.]), &t(&[3.]), &t(&[2.]), &Default::default())?, &[want])?;
    // F.margin_ranking_loss(x1, x2, y, margin=0, reduction='mean')
    let o = F::MarginRankingLossOptions::default();
    assert_eq!((o.margin, o.reduction), (0.0, Mean));
    let l = F::margin_ranking_loss(&t(&[1., 2.]), &t(&[2., 1.]), &t(&[1., 1.]), &Default::default())?;
    close(&l, &[0.5])?;
    // F.hinge_embedding_loss(input, target, margin=1.0, reduction='mean')
    let o = F::HingeEmbeddingLossOptions::default();
    assert_eq!((o.margin, o.reduction), (1.0, Mean));
    close(&F::hinge_embedding_loss(&t(&[0.3, 0.2]), &t(&[1., -1.]), &Default::default())?, &[0.55])?;
    // F.cosine_embedding_loss(x1, x2, y, margin=0, reduction='mean')
    let o = F::CosineEmbeddingLossOptions::default();
    assert_eq!((o.margin, o.reduction), (0.0, Mean));
    let (x1, x2) = (t2(&[&[1., 0.], &[1., 0.]]), t2(&[&[0., 1.], &[0., 1.]]));
    close(&F::cosine_embedding_loss(&x1, &x2, &t(&[1., -1.]), &Default::default())?, &[0.5])?;
    // F.multi_margin_loss(input, target, p=1, margin=1, weight=None, reduction='mean'): PyTorch's example
    let o = F::MultiMarginLossOptions::default();
    assert_eq!((o.p, o.margin, o.weight.is_none(), o.reduction), (1, 1.0, true, Mean));
    let x = t2(&[&[0.1, 0.2, 0.4, 0.8]]);
    close(&F::multi_margin_loss(&x, &Tensor::new([3i64])?, &Default::default())?, &[0.325])?;
    // F.smooth_l1_loss(input, target, reduction='mean', beta=1.0), F.huber_loss(..., delta=1.0)
    let o = F::SmoothL1LossOptions::default();
    assert_eq!((o.reduction, o.beta), (Mean, 1.0));
    let o = F::HuberLossOptions::default();
    assert_eq!((o.reduction, o.delta), (Mean, 1.0));
    let (x, y) = (t(&[0., 0.]), t(&[0.5, 3.]));
    close(&F::smooth_l1_loss(&x, &y, &Default::default())?, &[(0.125 + 2.5) / 2.0])?;
    close(&F::huber_loss(&x, &y, &Default::default())?, &[(0.125 + 2.5) / 2.0])?;
    // F.binary_cross_entropy(input, target, weight=None, reduction='mean'), and with logits
    // (weight=None, reduction='mean', pos_weight=None)
    let o = F::BinaryCrossEntropyOptions::default();
    assert!(o.weight.is_none() && o.reduction == Mean);
    let o = F::BinaryCrossEntropyWithLogitsOptions::default();
    assert!(o.weight.is_none() && o.pos_weight.is_none() && o.reduction == Mean);
    let ln2 = 2f32.ln();
    close(&F::binary_cross_entropy(&t(&[0.5, 0.5]), &t(&[1., 0.]), &Default::default())?, &[ln2])?;
    close(&F::binary_cross_entropy_with_logits(&t(&[0., 0.]), &t(&[1., 0.]), &Default::default())?, &[ln2])?;
    // F.multilabel_soft_margin_loss(input, target, weight=None, reduction='mean')
    let o = F::MultilabelSoftMarginLossOptions::default();
    assert!(o.weight.is_none() && o.reduction == Mean);
    let l = F::multilabel_soft_margin_loss(&t2(&[&[0., 0.]]), &t2(&[&[1., 0.]]), &Default::default())?;
    close(&l, &[ln2])?;
    // F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction='mean', zero_infinity=False)
    let o = F::CtcLossOptions::default();
    assert_eq!((o.blank, o.reduction, o.zero_infinity), (0, Mean, false));
    // one frame, one label 1 of two classes: -log p(1), divided by the target length 1
    let lp = Tensor::new([[[0.25f32.ln(), 0.75f32.ln()]]])?;
    let (tg, il, tl) = (Tensor::new([[1i64]])?, Tensor::new([1i64])?, Tensor::new([1i64])?);
    close(&F::ctc_loss(&lp, &tg, &il, &tl, &Default::default())?, &[-(0.75f32.ln())])?;
    Ok(())
}

#[test]
fn functional_keyword_options_defaults_are_pytorchs() -> Result<()> {
    // F.pad(input, pad, mode='constant', value=None): zeros
    let o = F::PadOptions::default();
    assert_eq!((o.mode, o.value), (F::PadMode::Constant, None));
    close(&F::pad(&t(&[1., 2.]), &[1, 1], &Default::default())?, &[0., 1., 2., 0.])?;
    // as in PyTorch, the other modes take no value
    let reflect = |value| F::PadOptions { mode: F::PadMode::Reflect, value };
    let e = F::pad(&t2(&[&[1., 2., 3.]]), &[1, 1], &reflect(Some(1.0))).unwrap_err();
    assert!(e.to_string().contains("Padding mode \"reflect\" doesn't take in value argument"), "{e}");
    close(&F::pad(&t2(&[&[1., 2., 3.]]), &[1, 1], &reflect(Some(0.0)))?, &[2., 1., 2., 3., 2.])?;

    // F.interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None, recompute_scale_factor=None)
    let o = F::InterpolateOptions::default();
    assert_eq!((o.size, o.scale_factor), (None, None));
    assert_eq!(
        (o.mode, o.align_corners, o.recompute_scale_factor),
        (F::InterpolateMode::Nearest, None, None)
    );
    let x = Tensor::new([[[1f32, 2.]]])?;
    let e = F::interpolate(&x, &Default::default()).unwrap_err();
    assert!(e.to_string().contains("either size or scale_factor should be defined"), "{e}");
    let y = F::interpolate(&x, &F::InterpolateOptions { size: Some(vec![4]), ..Default::default() })?;
    close(&y, &[1., 1., 2., 2.])?;

    // F.grid_sample(input, grid, mode='bilinear', padding_mode='zeros', align_corners=None (False))
    let o = F::GridSampleOptions::default();
    assert_eq!(
        (o.mode, o.padding_mode, o.align_corners),
        (F::GridSampleMode::Bilinear, F::GridSamplePadding::Zeros, false)
    );
    let x = Tensor::new([[[[1f32, 2.], [3., 4.]]]])?;
    // align_corners=False: -1 is the outer edge of the top-left pixel, half of it outside (zeros)
    let grid = Tensor::new([[[[0f32, 0.], [-1., -1.]]]])?;
    close(&F::grid_sample(&x, &grid, &Default::default())?, &[2.5, 0.25])?;

    // F.unfold(input, kernel_size, dilation=1, padding=0, stride=1), F.fold(same)
    let o = F::FoldOptions::default();
    assert_eq!((o.dilation, o.padding, o.stride), (vec![1], vec![0], vec![1]));
    let cols = F::unfold(&Tensor::ones([1, 1, 3, 3], DType::F32)?, &[2], &Default::default())?;
    assert_eq!(cols.dims(), &[1, 4, 4]);
    assert_eq!(F::fold(&cols, &[3, 3], &[2], &Default::default())?.dims(), &[1, 1, 3, 3]);

    // F.normalize(input, p=2.0, dim=1, eps=1e-12)
    let o = F::NormalizeOptions::default();
    assert_eq!((o.p, o.dim, o.eps), (2.0, 1, 1e-12));
    close(&F::normalize(&t2(&[&[3., 4.]]), &Default::default())?, &[0.6, 0.8])?;
    // F.cosine_similarity(x1, x2, dim=1, eps=1e-8)
    let o = F::CosineSimilarityOptions::default();
    assert_eq!((o.dim, o.eps), (1, 1e-8));
    let c = F::cosine_similarity(&t2(&[&[1., 0.]]), &t2(&[&[1., 1.]]), &Default::default())?;
    close(&c, &[std::f32::consts::FRAC_1_SQRT_2])?;
    // F.pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False)
    let o = F::PairwiseDistanceOptions::default();
    assert_eq!((o.p, o.eps, o.keepdim), (2.0, 1e-6, false));
    let d = F::pairwise_distance(&t2(&[&[0., 0.]]), &t2(&[&[3., 4.]]), &Default::default())?;
    assert_eq!(d.dims(), &[1]);
    close(&d, &[5.0])?;

    // F.embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
    // mode='mean', sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None)
    let o = F::EmbeddingBagOptions::default();
    assert!(o.offsets.is_none() && o.max_norm.is_none() && o.norm_type.is_none_or(|p| p == 2.0));
    assert!(!o.scale_grad_by_freq && o.mode == F::BagMode::Mean && o.per_sample_weights.is_none());
    assert!(!o.include_last_offset && o.padding_idx.is_none());
    let w = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?.reshape([3, 2])?;
    close(&F::embedding_bag(&Tensor::new([[0i64, 2]])?, &w, &Default::default())?, &[2., 3.])?;

    // F.dropout(input, p=0.5, training=True); F.alpha_dropout(input, p=0.5, training=False)
    let o = F::DropoutOptions::default();
    assert!(o.p == 0.5 && o.training && o.generator.is_none());
    let y = F::dropout(&Tensor::ones([1000], DType::F32)?, &Default::default())?.to_vec::<f32>()?;
    assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
    let kept = y.iter().filter(|&&v| v == 2.0).count();
    assert!((350..650).contains(&kept), "about half kept, got {kept}");
    let o = F::AlphaDropoutOptions::default();
    assert!(o.p == 0.5 && !o.training && o.generator.is_none());
    let x = randn(&[2, 3, 4]);
    let same = |y: Tensor| y.to_vec::<f32>().unwrap() == x.to_vec::<f32>().unwrap();
    assert!(same(F::alpha_dropout(&x, &Default::default())?), "the identity by default");
    assert!(same(F::feature_alpha_dropout(&x, &Default::default())?));
    let y = F::feature_dropout(&Tensor::ones([4, 100, 3], DType::F32)?, 1, &Default::default())?;
    assert!(y.to_vec::<f32>()?.contains(&0.0), "training by default");

    // F.hardtanh(input, min_val=-1.0, max_val=1.0); F.softplus(input, beta=1.0, threshold=20.0);
    // F.rrelu(input, lower=1/8, upper=1/3, training=False)
    let o = F::HardtanhOptions::default();
    assert_eq!((o.min_val, o.max_val), (-1.0, 1.0));
    close(&F::hardtanh(&t(&[-2., 0.5, 2.]), &Default::default())?, &[-1., 0.5, 1.])?;
    let o = F::SoftplusOptions::default();
    assert_eq!((o.beta, o.threshold), (1.0, 20.0));
    close(&F::softplus(&t(&[0., 30.]), &Default::default())?, &[2f32.ln(), 30.])?;
    let o = F::RreluOptions::default();
    assert!(o.lower == 1.0 / 8.0 && o.upper == 1.0 / 3.0 && !o.training && o.generator.is_none());
    close(&F::rrelu(&t(&[-1., 1.]), &Default::default())?, &[-(1.0 / 8.0 + 1.0 / 3.0) / 2.0, 1.])?;
    Ok(())
}

#[test]
fn normalization_function_options_defaults_are_pytorchs() -> Result<()> {
    let s = (1.0f32 + 1e-5).sqrt();
    // F.batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5)
    let o = F::BatchNormOptions::default();
    assert!(o.weight.is_none() && o.bias.is_none());
    assert_eq!((o.training, o.momentum, o.eps), (false, 0.1, 1e-5));
    let (rm, rv) = (t(&[0.]), t(&[1.]));
    close(
        &F::batch_norm(&t2(&[&[2.], &[4.]]), Some(&rm), Some(&rv), &Default::default())?,
        &[2. / s, 4. / s],
    )?;
    assert_eq!((rm.to_vec::<f32>()?, rv.to_vec::<f32>()?), (vec![0.], vec![1.]), "evaluation: not updated");
    // F.instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
    // use_input_stats=True, momentum=0.1, eps=1e-5)
    let o = F::InstanceNormOptions::default();
    assert!(o.running_mean.is_none() && o.running_var.is_none() && o.weight.is_none() && o.bias.is_none());
    assert_eq!((o.use_input_stats, o.momentum, o.eps), (true, 0.1, 1e-5));
    close(&F::instance_norm(&Tensor::new([[[1f32, 3.]]])?, &Default::default())?, &[-1. / s, 1. / s])?;
    // F.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5); F.group_norm(input, num_groups, same)
    let o = F::LayerNormOptions::default();
    assert!(o.weight.is_none() && o.bias.is_none() && o.eps == 1e-5);
    close(&F::layer_norm(&t2(&[&[1., 3.]]), &[2], &Default::default())?, &[-1. / s, 1. / s])?;
    close(&F::group_norm(&Tensor::new([[[1f32], [3.]]])?, 1, &Default::default())?, &[-1. / s, 1. / s])?;
    // F.rms_norm(input, normalized_shape, weight=None, eps=None): eps is the dtype's epsilon
    let o = F::RmsNormOptions::default();
    assert!(o.weight.is_none() && o.eps.is_none());
    let r = (12.5f32 + f32::EPSILON).sqrt();
    close(&F::rms_norm(&t2(&[&[3., 4.]]), &[2], &Default::default())?, &[3. / r, 4. / r])?;
    // F.local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0)
    let o = F::LocalResponseNormOptions::default();
    assert_eq!((o.alpha, o.beta, o.k), (1e-4, 0.75, 1.0));
    let y = F::local_response_norm(&Tensor::new([[[2f32]]])?, 1, &Default::default())?;
    close(&y, &[2. / (1.0f32 + 1e-4 * 4.0).powf(0.75)])?;
    Ok(())
}

#[test]
fn conv_and_pool_functions_take_the_layers_options() -> Result<()> {
    // F.conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)
    let x = Tensor::ones([1, 1, 2], DType::F32)?;
    let w = Tensor::ones([1, 1, 2], DType::F32)?;
    close(&F::conv_transpose(&x, &w, None, &Default::default())?, &[1., 2., 1.])?;
    let strided = ConvOptions::new().stride(2);
    close(&F::conv_transpose(&x, &w, None, &strided)?, &[1., 1., 1., 1.])?;
    // unbatched, as the layers
    assert_eq!(
        F::conv_transpose(&Tensor::ones([1, 2], DType::F32)?, &w, None, &Default::default())?.dims(),
        &[1, 3]
    );
    // F.max_pool1d(input, kernel_size, stride=None (the kernel size), padding=0, dilation=1, ceil_mode=False)
    let x = Tensor::new([[[1f32, 2., 3., 4.]]])?;
    let (v, i) = F::max_pool(&x, &[2], &Default::default())?;
    close(&v, &[2., 4.])?;
    assert_eq!(i.to_vec::<i64>()?, vec![1, 3]);
    // F.avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True)
    close(&F::avg_pool(&x, &[2], &Default::default())?, &[1.5, 3.5])?;
    Ok(())
}

#[test]
fn vision_options_defaults_are_torchvisions() {
    use pyrite::vision::models::{
        Activation, ConvNormActivationOptions, MobileNetV2Options, ResNetOptions, VggOptions,
    };
    use pyrite::vision::transforms::{
        InterpolationMode, PaddingMode, RandomAffineOptions, RandomCropOptions, RandomRotationOptions,
    };
    use pyrite::vision::utils::MakeGridOptions;
    // RandomRotation(degrees, interpolation=NEAREST, expand=False, center=None, fill=0)
    let o = RandomRotationOptions::default();
    assert!(matches!(o.interpolation, InterpolationMode::Nearest));
    assert_eq!((o.expand, o.center, o.fill), (false, None, Some(vec![0.0])));
    // RandomAffine(degrees, translate=None, scale=None, shear=None, interpolation=NEAREST, fill=0, center=None)
    let o = RandomAffineOptions::default();
    assert_eq!((o.translate, o.scale, o.shear), (None, None, None));
    assert!(matches!(o.interpolation, InterpolationMode::Nearest));
    assert_eq!((o.fill, o.center), (Some(vec![0.0]), None));
    // RandomCrop(size, padding=None, pad_if_needed=False, fill=0, padding_mode='constant')
    let o = RandomCropOptions::default();
    assert_eq!(
        (o.padding, o.pad_if_needed, o.fill, o.padding_mode),
        (None, false, 0.0, PaddingMode::Constant)
    );
    // utils.make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0)
    let o = MakeGridOptions::default();
    assert_eq!((o.nrow, o.padding, o.normalize, o.value_range), (8, 2, false, None));
    assert_eq!((o.scale_each, o.pad_value), (false, 0.0));
    // ResNet(block, layers, num_classes=1000, zero_init_residual=False, groups=1,
    // width_per_group=64, replace_stride_with_dilation=None)
    let o = ResNetOptions::default();
    assert_eq!((o.num_classes, o.zero_init_residual, o.groups, o.width_per_group), (1000, false, 1, 64));
    assert_eq!(o.replace_stride_with_dilation, [false; 3]);
    // VGG(features, num_classes=1000, init_weights=True, dropout=0.5)
    let o = VggOptions::default();
    assert_eq!((o.num_classes, o.init_weights, o.dropout), (1000, true, 0.5));
    // MobileNetV2(num_classes=1000, width_mult=1.0, inverted_residual_setting=None, round_nearest=8, dropout=0.2)
    let o = MobileNetV2Options::default();
    assert_eq!((o.num_classes, o.width_mult, o.round_nearest, o.dropout), (1000, 1.0, 8, 0.2));
    assert!(o.inverted_residual_setting.is_none());
    // ops.Conv2dNormActivation(in, out, kernel_size=3, stride=1, padding=None, groups=1,
    // norm_layer=BatchNorm2d, activation_layer=ReLU, dilation=1, bias=None)
    let o = ConvNormActivationOptions::default();
    assert_eq!((o.kernel_size, o.stride, o.padding, o.groups, o.dilation), (3, 1, None, 1, 1));
    assert!(o.batch_norm && matches!(o.activation, Some(Activation::ReLU)) && o.bias.is_none());
}

#[test]
fn data_transformers_train_and_serialization_options_defaults_are_upstreams() {
    use pyrite::train::{CheckpointOptions, EarlyStoppingOptions, Mode};
    use pyrite::transformers::{BertConfig, FromPretrainedOptions, Padding, TokenizerOptions};
    // CsvDataset has no torch counterpart; its defaults are those of torchdata's CSVParser
    // (skip_lines=0: no header) and Python's csv module (delimiter=','), the label last
    let o = pyrite::data::CsvOptions::default();
    assert_eq!((o.label_column, o.has_header, o.delimiter), (-1, false, b','));
    // tokenizer(text, add_special_tokens=True, padding=False, truncation=None (False), max_length=None)
    let o = TokenizerOptions::default();
    assert_eq!(
        (o.padding, o.truncation, o.max_length, o.add_special_tokens),
        (Padding::DoNotPad, false, None, true)
    );
    // BertModel.from_pretrained(..., add_pooling_layer=True)
    assert!(FromPretrainedOptions::default().add_pooling_layer);
    // BertConfig(hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
    // type_vocab_size=2, initializer_range=0.02, layer_norm_eps=1e-12, pad_token_id=0)
    let c = BertConfig::new(30522, 768, 12, 12, 3072, 512);
    assert!(matches!(c.hidden_act, pyrite::transformers::HiddenAct::Gelu));
    assert_eq!((c.hidden_dropout_prob, c.attention_probs_dropout_prob, c.type_vocab_size), (0.1, 0.1, 2));
    assert_eq!((c.initializer_range, c.layer_norm_eps, c.pad_token_id), (0.02, 1e-12, Some(0)));
    // keras.callbacks.EarlyStopping(monitor='val_loss', min_delta=0, patience=0, mode='auto',
    // baseline=None, restore_best_weights=False, start_from_epoch=0); 'auto' is 'min' for a loss
    let o = EarlyStoppingOptions::default();
    assert_eq!((o.monitor.as_str(), o.min_delta, o.patience, o.mode), ("val_loss", 0.0, 0, Mode::Min));
    assert_eq!((o.baseline, o.restore_best_weights, o.start_from_epoch), (None, false, 0));
    // Lightning's ModelCheckpoint(filename=None ("epoch={epoch}-step={step}"), monitor=None,
    // save_top_k=1, mode='min'); the last one is kept to resume from
    let o = CheckpointOptions::default();
    assert_eq!((o.filename.as_str(), o.monitor, o.mode), ("epoch={epoch}-step={step}.pt", None, Mode::Min));
    assert_eq!((o.save_top_k, o.keep_last), (1, 1));
    // torch.load(f, weights_only=True): an object of a class outside the allowlist fails the
    // load unless asked to become a placeholder
    assert!(!pyrite::serialization::LoadOptions::default().skip_unsupported);
}
