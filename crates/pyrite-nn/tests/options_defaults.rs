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
