//! The Trainer on a GPU (`accelerator`), as Lightning: the module's parameters and every batch
//! go to the device, `fit` there gives the CPU's weights, the module comes back to the CPU at
//! the end, predictions come back too; `"16-mixed"` runs the steps under CUDA autocast in f16
//! and scales the loss with a GradScaler (hooks see the scaled loss and the unscaled
//! gradients, an overflowing step is skipped and halves the scale, checkpoints keep the
//! scaler's state and a resumed run goes on with it). Runs on the emulated device
//! (pyrite-cuda-runtime's `emulator`), or on a real GPU with `PYRITE_CUDA_TEST_ON_GPU=1`
//! (`scripts/gpu_check.sh`).

use pyrite::amp::{get_autocast_dtype, is_autocast_enabled};
use pyrite::data::{DataLoader, DataLoaderOptions, Dataset, Sample, Subset};
use pyrite::nn::functional as F;
use pyrite::nn::{self, Linear, Module, ModuleBase};
use pyrite::optim::{SGDOptions, SGD};
use pyrite::train::{
    Accelerator, Callback, CkptPath, Context, EvalOptions, FitOptions, LightningModule, OptimizerConfig,
    StepOutput, Trainer, TrainerOptions,
};
use pyrite::vision::datasets::{Digits, DigitsSplit};
use pyrite::{DType, Device, Result, Tensor};
use std::sync::{Arc, Mutex};

fn gpu() -> Option<Device> {
    if std::env::var("PYRITE_CUDA_TEST_ON_GPU").as_deref() != Ok("1") {
        assert!(pyrite_cuda_runtime::emulator::enable());
    }
    if pyrite::cuda_is_available() {
        Some(Device::Cuda(0))
    } else {
        eprintln!("SKIPPED: no CUDA device");
        None
    }
}

/// The tests seed the global generator: they take turns.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
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

/// What a training step saw.
#[derive(Clone, Debug)]
struct Seen {
    batch: Device,
    labels: Device,
    weight: Device,
    autocast: Option<DType>,
    logits: DType,
    loss: f32,
}

struct Lit {
    net: Mlp,
    seen: Vec<Seen>,
    /// Batches whose loss is multiplied by infinity (an overflow).
    overflow_at: Vec<usize>,
}

impl Lit {
    fn new() -> Result<Lit> {
        pyrite::manual_seed(0);
        Ok(Lit {
            net: Mlp { base: ModuleBase::new(), fc1: Linear::new(64, 32)?, fc2: Linear::new(32, 10)? },
            seen: vec![],
            overflow_at: vec![],
        })
    }

    fn loss(&self, batch: &Sample) -> Result<(Tensor, Tensor)> {
        let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
        let logits = self.net.call(x)?;
        let loss = F::cross_entropy(&logits, y, &Default::default())?;
        Ok((logits, loss))
    }
}

impl LightningModule for Lit {
    fn module(&self) -> &dyn Module {
        &self.net
    }
    fn module_mut(&mut self) -> Option<&mut dyn Module> {
        Some(&mut self.net)
    }
    fn training_step(&mut self, batch: &Sample, i: usize, ctx: &mut Context) -> Result<StepOutput> {
        let (logits, loss) = self.loss(batch)?;
        let cuda = Device::Cuda(0);
        self.seen.push(Seen {
            batch: batch.item(0)?.as_tensor()?.device(),
            labels: batch.item(1)?.as_tensor()?.device(),
            weight: self.net.fc1.weight.tensor().device(),
            autocast: is_autocast_enabled(cuda).then(|| get_autocast_dtype(cuda)),
            logits: logits.dtype(),
            loss: loss.item::<f32>()?,
        });
        ctx.log("train_loss", &loss)?;
        if self.overflow_at.contains(&i) {
            return Ok(loss.mul_scalar(f64::INFINITY)?.into());
        }
        Ok(loss.into())
    }
    fn validation_step(&mut self, batch: &Sample, _i: usize, ctx: &mut Context) -> Result<()> {
        let (_, loss) = self.loss(batch)?;
        ctx.log("val_loss", &loss)
    }
    fn predict_step(&mut self, batch: &Sample, _i: usize) -> Result<Tensor> {
        self.loss(batch).map(|(logits, _)| logits)
    }
    fn configure_optimizers(&mut self) -> Result<OptimizerConfig> {
        Ok(OptimizerConfig::new(SGD::new(
            self.net.parameters(),
            SGDOptions { lr: 0.1, momentum: 0.9, ..Default::default() },
        )?))
    }
}

fn loader(n: usize) -> Result<DataLoader> {
    let d: Arc<dyn Dataset> =
        Arc::new(Subset::new(Arc::new(Digits::new(DigitsSplit::Train)?), (0..n).collect()));
    DataLoader::new(d, DataLoaderOptions { batch_size: Some(16), ..Default::default() })
}

fn options(accelerator: Accelerator, precision: &str, dir: &str) -> Result<TrainerOptions> {
    Ok(TrainerOptions {
        accelerator,
        precision: precision.parse()?,
        enable_progress_bar: false,
        enable_checkpointing: false,
        logger: Some(vec![]),
        num_sanity_val_steps: 0,
        default_root_dir: std::env::temp_dir()
            .join(format!("pyrite-cuda-trainer-{dir}-{}", std::process::id())),
        ..Default::default()
    })
}

fn weights(lit: &Lit) -> Vec<Tensor> {
    lit.net.parameters()
}

#[test]
fn fit_on_the_gpu_moves_the_module_and_the_batches_and_gives_the_cpus_weights() -> Result<()> {
    let _serial = serial();
    let Some(cuda) = gpu() else { return Ok(()) };
    let (train, val) = (loader(48)?, loader(32)?);
    let mut runs = vec![];
    for accelerator in [Accelerator::Cpu, Accelerator::Cuda] {
        let mut lit = Lit::new()?;
        let mut t =
            Trainer::new(TrainerOptions { max_epochs: Some(2), ..options(accelerator, "32", "fit")? })?;
        t.fit(&mut lit, &train, FitOptions { val_dataloaders: Some(&val), ..Default::default() })?;
        let device = if accelerator == Accelerator::Cuda { cuda } else { Device::Cpu };
        assert_eq!(t.device(), device);
        assert_eq!(lit.seen.len(), 6, "3 batches, 2 epochs");
        for s in &lit.seen {
            assert_eq!((s.batch, s.labels, s.weight), (device, device, device), "{s:?}");
        }
        // Lightning's teardown: the module is back on the CPU after fit, validate and predict.
        assert!(weights(&lit).iter().all(|w| w.device() == Device::Cpu));
        let val_loss =
            t.validate(&mut lit, &val, EvalOptions { verbose: false, ..Default::default() })?["val_loss"];
        assert!(weights(&lit).iter().all(|w| w.device() == Device::Cpu));
        let predictions = t.predict(&mut lit, &val, EvalOptions::default())?;
        assert_eq!(predictions.len(), 2);
        assert!(predictions.iter().all(|p| p.device() == Device::Cpu && p.dims() == [16, 10]));
        let losses: Vec<f32> = lit.seen.iter().map(|s| s.loss).collect();
        runs.push((losses, weights(&lit), val_loss, predictions));
    }
    let (cpu, gpu) = (&runs[0], &runs[1]);
    for (a, b) in cpu.0.iter().zip(&gpu.0) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + a.abs()), "losses: cpu {:?}, cuda {:?}", cpu.0, gpu.0);
    }
    assert!(cpu.0[5] < cpu.0[0], "it learns: {:?}", cpu.0);
    for (a, b) in cpu.1.iter().zip(&gpu.1) {
        let d = a.sub(b)?.abs()?.amax(&[], false)?.item::<f32>()?;
        assert!(d < 1e-4, "weights differ by {d}");
    }
    assert!((cpu.2 - gpu.2).abs() < 1e-4, "val_loss: cpu {}, cuda {}", cpu.2, gpu.2);
    for (a, b) in cpu.3.iter().zip(&gpu.3) {
        assert!(a.sub(b)?.abs()?.amax(&[], false)?.item::<f32>()? < 1e-4);
    }
    Ok(())
}

/// What the scaler and the hooks showed, by training batch.
#[derive(Default)]
struct ScalerLog {
    /// The loss `on_before_backward` saw, and the scale then.
    backward: Vec<(f32, f64)>,
    /// The gradient norm `on_before_optimizer_step` saw (infinite or NaN after an overflow).
    grad_norm: Vec<f32>,
    /// The scale after each batch, and whether the weights moved in it.
    after: Vec<(f64, bool)>,
    before: Vec<Tensor>,
    /// The scale when `fit` started.
    start_scale: Option<f64>,
}

struct WatchScaler(Arc<Mutex<ScalerLog>>);

fn snapshot(m: &dyn LightningModule) -> Result<Vec<Tensor>> {
    m.module().parameters().iter().map(|p| p.to_device(Device::Cpu)).collect()
}

impl Callback for WatchScaler {
    fn on_train_start(&mut self, t: &mut Trainer, _m: &mut dyn LightningModule) -> Result<()> {
        self.0.lock().unwrap().start_scale = t.scaler().map(|s| s.get_scale());
        Ok(())
    }
    fn on_train_batch_start(
        &mut self,
        _t: &mut Trainer,
        m: &mut dyn LightningModule,
        _b: &Sample,
        _i: usize,
    ) -> Result<()> {
        self.0.lock().unwrap().before = snapshot(m)?;
        Ok(())
    }
    fn on_before_backward(
        &mut self,
        t: &mut Trainer,
        _m: &mut dyn LightningModule,
        loss: &Tensor,
    ) -> Result<()> {
        let scale = t.scaler().expect("16-mixed on a GPU has a scaler").get_scale();
        self.0.lock().unwrap().backward.push((loss.item::<f32>()?, scale));
        Ok(())
    }
    fn on_before_optimizer_step(&mut self, _t: &mut Trainer, m: &mut dyn LightningModule) -> Result<()> {
        let mut sq = 0.0f32;
        for p in m.module().parameters() {
            sq += p.grad().expect("a gradient").square()?.sum()?.item::<f32>()?;
        }
        self.0.lock().unwrap().grad_norm.push(sq.sqrt());
        Ok(())
    }
    fn on_train_batch_end(
        &mut self,
        t: &mut Trainer,
        m: &mut dyn LightningModule,
        _o: &StepOutput,
        _b: &Sample,
        _i: usize,
    ) -> Result<()> {
        let now = snapshot(m)?;
        let mut log = self.0.lock().unwrap();
        let mut moved = false;
        for (a, b) in log.before.iter().zip(&now) {
            moved |= a.sub(b)?.abs()?.amax(&[], false)?.item::<f32>()? > 0.0;
        }
        log.after.push((t.scaler().expect("a scaler").get_scale(), moved));
        Ok(())
    }
}

#[test]
fn sixteen_mixed_autocasts_to_f16_scales_the_loss_and_skips_an_overflowing_step() -> Result<()> {
    let _serial = serial();
    let Some(_) = gpu() else { return Ok(()) };
    let train = loader(48)?;
    let log = Arc::new(Mutex::new(ScalerLog::default()));
    let mut lit = Lit::new()?;
    lit.overflow_at = vec![1];
    let mut t = Trainer::new(TrainerOptions {
        max_epochs: Some(1),
        callbacks: vec![Box::new(WatchScaler(log.clone()))],
        ..options(Accelerator::Cuda, "16-mixed", "amp")?
    })?;
    t.fit(&mut lit, &train, FitOptions::default())?;
    assert_eq!(t.global_step(), 3, "a skipped step still counts, as in Lightning");
    for s in &lit.seen {
        assert_eq!((s.autocast, s.logits), (Some(DType::F16), DType::F16), "CUDA autocast in f16: {s:?}");
    }
    {
        let log = log.lock().unwrap();
        assert_eq!(log.start_scale, Some(65536.0));
        // Hooks and backward see the loss times the scale of the moment.
        let (loss0, scale0) = log.backward[0];
        let want = lit.seen[0].loss as f64 * scale0;
        assert!((loss0 as f64 - want).abs() <= 2e-3 * want, "scaled loss {loss0}, want {want}");
        assert!(log.backward[1].0.is_infinite());
        // The hooks before the optimizer step see true gradients: small, not 65536 times so.
        assert!(log.grad_norm[0].is_finite() && log.grad_norm[0] < 100.0, "{:?}", log.grad_norm);
        assert!(!log.grad_norm[1].is_finite(), "{:?}", log.grad_norm);
        assert!(log.grad_norm[2].is_finite() && log.grad_norm[2] < 100.0, "{:?}", log.grad_norm);
        // The overflowing step is skipped and halves the scale; the next one steps.
        assert_eq!(log.after, vec![(65536.0, true), (32768.0, false), (32768.0, true)]);
    }
    // The weights stay f32, and the module is back on the CPU.
    assert!(weights(&lit).iter().all(|w| w.dtype() == DType::F32 && w.device() == Device::Cpu));

    // A checkpoint keeps the scaler's state under Lightning's key, and a resumed fit goes on
    // with it.
    let path = std::env::temp_dir().join(format!("pyrite-cuda-trainer-{}.ckpt", std::process::id()));
    t.save_checkpoint(&path, &mut lit)?;
    let ck = pyrite::serialization::load(&path)?;
    let scaler = ck.get("MixedPrecision").expect("the scaler's state");
    assert_eq!(scaler.get("scale").and_then(|s| s.as_float()), Some(32768.0));
    let log2 = Arc::new(Mutex::new(ScalerLog::default()));
    let mut resumed = Trainer::new(TrainerOptions {
        max_epochs: Some(2),
        callbacks: vec![Box::new(WatchScaler(log2.clone()))],
        ..options(Accelerator::Cuda, "16-mixed", "amp-resume")?
    })?;
    let mut lit2 = Lit::new()?;
    resumed.fit(
        &mut lit2,
        &train,
        FitOptions { ckpt_path: Some(CkptPath::Path(path.clone())), ..Default::default() },
    )?;
    assert_eq!(log2.lock().unwrap().start_scale, Some(32768.0));
    assert_eq!(resumed.global_step(), 6);
    std::fs::remove_file(&path).ok();
    Ok(())
}
