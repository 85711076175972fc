//! `Trainer(precision=...)`, as Lightning: "bf16-mixed" runs each step under bf16 autocast
//! with f32 weights; "16-mixed" becomes "bf16-mixed" on the CPU; "bf16-true" converts the
//! module and the batches; an unknown name is an error listing the allowed ones. And the
//! digits MLP learns as well in bf16-mixed as in f32 (within half a point of test accuracy).

use pyrite::amp::{get_autocast_dtype, is_autocast_enabled};
use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample, Subset};
use pyrite::nn::{self, Linear, Module, ModuleBase};
use pyrite::optim::{Adam, AdamOptions};
use pyrite::prelude::*;
use pyrite::train::{
    Context, EvalOptions, FitOptions, LightningModule, OptimizerConfig, Precision, StepOutput, Trainer,
    TrainerOptions,
};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::Generator;
use std::sync::Arc;

/// The tests seed the global generator and draw from it: they take turns (run side by side,
/// one test's draws shifted another's and its accuracy moved).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(nn::Module)]
struct Mlp {
    base: ModuleBase,
    fc1: Linear,
    fc2: Linear,
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.call(&self.fc1.call(&x.flatten(1, -1)?)?.relu()?)
    }
}

/// What one step saw: autocast on, its dtype, and the dtypes of the input and the logits.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    stage: &'static str,
    autocast: bool,
    input: DType,
    logits: DType,
}

struct Lit {
    net: Mlp,
    seen: Vec<Seen>,
    correct: usize,
    total: usize,
}

impl Lit {
    fn new() -> Result<Lit> {
        pyrite::manual_seed(0);
        Ok(Lit {
            net: Mlp { base: ModuleBase::new(), fc1: Linear::new(64, 64)?, fc2: Linear::new(64, 10)? },
            seen: vec![],
            correct: 0,
            total: 0,
        })
    }

    fn look(&mut self, stage: &'static str, batch: &Sample) -> Result<(Tensor, Tensor)> {
        let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
        let logits = self.net.call(x)?;
        let autocast = is_autocast_enabled(Device::Cpu);
        if autocast {
            assert_eq!(get_autocast_dtype(Device::Cpu), DType::BF16);
        }
        self.seen.push(Seen { stage, autocast, input: x.dtype(), logits: logits.dtype() });
        Ok((logits, y.clone()))
    }
}

impl LightningModule for Lit {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn module_mut(&mut self) -> Option<&mut dyn Module> {
        Some(&mut self.net)
    }
    fn training_step(&mut self, batch: &Sample, _i: usize, _ctx: &mut Context) -> Result<StepOutput> {
        let (logits, y) = self.look("train", batch)?;
        Ok(F::cross_entropy(&logits, &y, &Default::default())?.into())
    }
    fn validation_step(&mut self, batch: &Sample, _i: usize, _ctx: &mut Context) -> Result<()> {
        self.look("val", batch).map(drop)
    }
    fn test_step(&mut self, batch: &Sample, _i: usize, _ctx: &mut Context) -> Result<()> {
        let (logits, y) = self.look("test", batch)?;
        self.correct += logits.argmax(Some(1), false)?.eq(&y)?.sum()?.item::<i64>()? as usize;
        self.total += y.numel();
        Ok(())
    }
    fn predict_step(&mut self, batch: &Sample, _i: usize) -> Result<Tensor> {
        self.look("predict", batch).map(|(l, _)| l)
    }
    fn on_train_epoch_end(&mut self, _ctx: &mut Context) -> Result<()> {
        // Hooks outside the steps run without autocast, as in Lightning.
        assert!(!is_autocast_enabled(Device::Cpu));
        Ok(())
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        Ok(OptimizerConfig::new(Adam::new(
            self.net.parameters(),
            AdamOptions { lr: 1e-2, ..Default::default() },
        )?))
    }
}

fn loader(split: DigitsSplit, n: Option<usize>, shuffle: bool) -> Result<DataLoader> {
    let d: Arc<dyn Dataset> = Arc::new(Digits::new(split)?);
    let d: Arc<dyn Dataset> = match n {
        Some(n) => Arc::new(Subset::new(d, (0..n).collect())),
        None => d,
    };
    DataLoader::new(
        d,
        DataLoaderOptions {
            batch_size: Some(32),
            shuffle,
            generator: shuffle.then(|| Arc::new(Generator::new(3))),
            ..Default::default()
        },
    )
}

fn trainer(precision: &str, epochs: usize, dir: &str) -> Result<Trainer> {
    let root = std::env::temp_dir().join(format!("pyrite-precision-{dir}-{}", std::process::id()));
    Trainer::new(TrainerOptions {
        max_epochs: Some(epochs),
        precision: precision.parse()?,
        enable_progress_bar: false,
        enable_checkpointing: false,
        logger: Some(vec![]),
        num_sanity_val_steps: 0,
        default_root_dir: root,
        ..Default::default()
    })
}

#[test]
fn bf16_mixed_runs_every_step_under_autocast_and_keeps_f32_weights() -> Result<()> {
    let _serial = serial();
    let mut lit = Lit::new()?;
    let mut t = trainer("bf16-mixed", 1, "mixed")?;
    let (train, val) =
        (loader(DigitsSplit::Train, Some(64), true)?, loader(DigitsSplit::Test, Some(32), false)?);
    t.fit(&mut lit, &train, FitOptions { val_dataloaders: Some(&val), ..Default::default() })?;
    t.test(&mut lit, &val, EvalOptions { verbose: false, ..Default::default() })?;
    t.predict(&mut lit, &val, EvalOptions::default())?;
    let stages: Vec<&str> = lit.seen.iter().map(|s| s.stage).collect();
    assert_eq!(stages.iter().filter(|&&s| s == "train").count(), 2);
    for s in ["val", "test", "predict"] {
        assert!(stages.contains(&s), "{s} ran");
    }
    for s in &lit.seen {
        assert_eq!(
            (s.autocast, s.input, s.logits),
            (true, DType::F32, DType::BF16),
            "{}: autocast on, f32 batch, bf16 products",
            s.stage
        );
    }
    for p in lit.net.parameters() {
        assert_eq!(p.dtype(), DType::F32, "weights stay f32");
        assert!(p.grad().is_none_or(|g| g.dtype() == DType::F32), "f32 gradients");
    }
    Ok(())
}

#[test]
fn names_aliases_and_the_cpu_fallback_for_16_mixed() -> Result<()> {
    let _serial = serial();
    for (name, p) in [
        ("32", Precision::F32True),
        ("32-true", Precision::F32True),
        ("bf16", Precision::Bf16Mixed),
        ("bf16-mixed", Precision::Bf16Mixed),
        ("16", Precision::F16Mixed),
        ("16-mixed", Precision::F16Mixed),
        ("bf16-true", Precision::Bf16True),
        ("16-true", Precision::F16True),
        ("64-true", Precision::F64True),
    ] {
        assert_eq!(name.parse::<Precision>()?, p, "{name}");
    }
    let e = "fp8".parse::<Precision>().unwrap_err();
    assert!(e.to_string().contains("Precision \"fp8\" is invalid. Allowed precision values:"), "{e}");
    // fp16 autocast is for GPUs: on the CPU the Trainer trains in bf16-mixed (Lightning warns
    // and does the same).
    let mut lit = Lit::new()?;
    trainer("16-mixed", 1, "16mixed")?.fit(
        &mut lit,
        &loader(DigitsSplit::Train, Some(32), false)?,
        Default::default(),
    )?;
    assert!(lit.seen.iter().all(|s| s.autocast));
    Ok(())
}

#[test]
fn bf16_true_converts_the_module_and_the_batches() -> Result<()> {
    let _serial = serial();
    // Inference in bf16: the module's weights and the batches are converted.
    let mut lit = Lit::new()?;
    let data = loader(DigitsSplit::Test, Some(32), false)?;
    trainer("bf16-true", 1, "true")?.test(
        &mut lit,
        &data,
        EvalOptions { verbose: false, ..Default::default() },
    )?;
    for p in lit.net.parameters() {
        assert_eq!(p.dtype(), DType::BF16);
    }
    assert!(lit.seen.iter().all(|s| !s.autocast && s.input == DType::BF16 && s.logits == DType::BF16));
    // Training in bf16: the optimizers keep f32 (or f64) parameters, and say so.
    let mut lit = Lit::new()?;
    let e = trainer("bf16-true", 1, "true-fit")?.fit(&mut lit, &data, Default::default()).unwrap_err();
    assert!(e.to_string().contains("parameters of dtype BF16 are not supported"), "{e}");
    Ok(())
}

/// A module the Trainer cannot convert says so.
#[test]
fn bf16_true_needs_module_mut() -> Result<()> {
    let _serial = serial();
    struct Frozen(Lit);
    impl LightningModule for Frozen {
        fn module(&self) -> &dyn Module {
            &self.0.net
        }
        fn training_step(&mut self, b: &Sample, i: usize, c: &mut Context) -> Result<StepOutput> {
            self.0.training_step(b, i, c)
        }
        fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
            self.0.configure_optimizers()
        }
    }
    let mut m = Frozen(Lit::new()?);
    let e = trainer("bf16-true", 1, "frozen")?
        .fit(&mut m, &loader(DigitsSplit::Train, Some(32), false)?, Default::default())
        .unwrap_err();
    assert!(e.to_string().contains("implement LightningModule::module_mut"), "{e}");
    Ok(())
}

/// The accuracy check: the same seeded run in f32 and in bf16-mixed, tested on the
/// held-out digits.
#[test]
fn digits_accuracy_in_bf16_mixed_is_within_half_a_point_of_f32() -> Result<()> {
    let _serial = serial();
    let mut acc = vec![];
    for precision in ["32-true", "bf16-mixed"] {
        let mut lit = Lit::new()?;
        let mut t = trainer(precision, 8, "acc")?;
        t.fit(&mut lit, &loader(DigitsSplit::Train, None, true)?, Default::default())?;
        t.test(
            &mut lit,
            &loader(DigitsSplit::Test, None, false)?,
            EvalOptions { verbose: false, ..Default::default() },
        )?;
        acc.push(100.0 * lit.correct as f64 / lit.total as f64);
    }
    eprintln!("test accuracy: f32 {:.2}%, bf16-mixed {:.2}%", acc[0], acc[1]);
    assert!(acc[0] > 90.0, "f32 learns ({:.2}%)", acc[0]);
    assert!((acc[0] - acc[1]).abs() <= 0.5, "f32 {:.2}% vs bf16-mixed {:.2}%", acc[0], acc[1]);
    Ok(())
}

/// `accelerator`: "auto" takes a GPU when there is one and the CPU otherwise; "cuda" without
/// one is Lightning's error, naming what is available; an unknown name lists the known ones.
#[test]
fn the_accelerator_is_the_cpu_without_a_gpu_and_cuda_says_why_not() -> Result<()> {
    use pyrite::train::Accelerator;
    let _serial = serial();
    let auto = trainer("32", 1, "auto")?;
    let cuda = Trainer::new(TrainerOptions { accelerator: Accelerator::Cuda, ..Default::default() });
    if pyrite::cuda_is_available() {
        assert_eq!(auto.device(), Device::Cuda(0));
        assert_eq!(cuda?.device(), Device::Cuda(0));
    } else {
        assert_eq!(auto.device(), Device::Cpu);
        let e = cuda.err().expect("no GPU: an error");
        assert!(
            e.to_string().starts_with(
                "CUDAAccelerator can not run on your system since the accelerator is not available ("
            ),
            "{e}"
        );
        assert!(e.to_string().ends_with("The following accelerator(s) is available and can be passed into `accelerator` argument of `Trainer`: ['cpu']."), "{e}");
    }
    let cpu = Trainer::new(TrainerOptions { accelerator: "cpu".parse()?, ..Default::default() })?;
    assert_eq!(cpu.device(), Device::Cpu);
    assert!(cpu.scaler().is_none());
    let e = "mps".parse::<Accelerator>().unwrap_err();
    assert!(
        e.to_string().starts_with("You selected an invalid accelerator name: `accelerator=\"mps\"`."),
        "{e}"
    );
    Ok(())
}
