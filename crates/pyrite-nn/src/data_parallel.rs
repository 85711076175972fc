//! `nn.DataParallel`: one process, the batch split over devices, a replica of the module on
//! each, run on threads.

use crate::module::Module;
use crate::{ModuleBase, Value};
use pyrite_core::autocast::{self, AutocastOptions};
use pyrite_core::autograd;
use pyrite_core::{bail, Device, Result, Tensor};

/// Options of [`DataParallel`] (PyTorch's keyword arguments).
#[derive(Clone, Debug, Default)]
pub struct DataParallelOptions {
    /// The devices to replicate on, one replica per entry. `None` is every CUDA device (none
    /// until Pyrite's CUDA backend lands, so the module then runs as it is, as PyTorch's
    /// DataParallel does without GPUs). On the CPU, list `Device::Cpu` once per replica.
    pub device_ids: Option<Vec<Device>>,
    /// Where the outputs are gathered (the first device by default).
    pub output_device: Option<Device>,
    /// The dim the inputs are split along and the outputs joined along (0).
    pub dim: usize,
}

/// `nn.DataParallel(module, device_ids, output_device, dim)`: splits each input along `dim`
/// into one chunk per device, runs a replica of the module on each chunk in its own thread, and
/// joins the outputs along `dim`. Gradients of every replica add up on the module's own
/// parameters (the replicas' parameters are a differentiable broadcast of them), so a step
/// after `backward` trains the one module. Output and gradients equal the module's on the
/// whole batch.
///
/// On the CPU the replicas are the module itself, shared by the threads: broadcasting a
/// parameter to the device it is on is the identity, and autograd sums each replica's
/// gradient into it. Buffers are shared too: a BatchNorm in training mode has its running
/// statistics moved by every replica's chunk, one after another in no fixed order (in
/// PyTorch only the first device's replica writes them back).
///
/// ```
/// use pyrite::nn::{DataParallel, DataParallelOptions, Linear, Module};
/// use pyrite::{DType, Device, Tensor};
/// let dp = DataParallel::new(
///     Linear::new(4, 2)?,
///     DataParallelOptions { device_ids: Some(vec![Device::Cpu; 2]), ..Default::default() },
/// )?;
/// let x = Tensor::randn([6, 4], DType::F32)?;
/// let y = dp.call(&x)?; // two chunks of 3 rows, on two threads
/// assert_eq!(y.dims(), &[6, 2]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
#[module(name = "DataParallel")]
pub struct DataParallel<M: Module> {
    base: ModuleBase,
    /// The wrapped module (`state_dict` keys start with `module.`, as in PyTorch).
    pub module: M,
    #[module(skip)]
    devices: Vec<Device>,
    #[module(skip)]
    output_device: Device,
    #[module(skip)]
    dim: usize,
}

impl<M: Module> DataParallel<M> {
    /// Wraps `module`. Devices other than the CPU are errors until their backend exists.
    pub fn new(module: M, options: DataParallelOptions) -> Result<DataParallel<M>> {
        let devices = options.device_ids.unwrap_or_default();
        for d in &devices {
            if *d != Device::Cpu {
                bail!(Device, "DataParallel: device {d} is not available (Pyrite has no CUDA backend yet)");
            }
        }
        let output_device = options.output_device.or(devices.first().copied()).unwrap_or(Device::Cpu);
        Ok(DataParallel { base: ModuleBase::new(), module, devices, output_device, dim: options.dim })
    }

    /// The replicas' devices.
    pub fn device_ids(&self) -> &[Device] {
        &self.devices
    }

    /// Where the outputs are gathered.
    pub fn output_device(&self) -> Device {
        self.output_device
    }
}

impl<M: Module> Module for DataParallel<M> {
    fn forward_value(&self, input: Value) -> Result<Value> {
        if self.devices.len() <= 1 {
            return self.module.call_value(input);
        }
        let chunks = scatter(&input, self.devices.len(), self.dim)?;
        let outputs = parallel_apply(&self.module, chunks)?;
        gather(outputs, self.dim)
    }
}

/// `scatter`: each tensor of `input` split along `dim` into up to `n` chunks (as
/// `Tensor::chunk`: fewer when the batch is smaller than `n`); everything else repeated.
pub fn scatter(input: &Value, n: usize, dim: usize) -> Result<Vec<Value>> {
    let rows = input.tensors().first().map(|t| t.dims().get(dim).copied().unwrap_or(0));
    let Some(rows) = rows else {
        bail!(Value, "DataParallel: the input holds no tensor to split");
    };
    let k = n.min(rows.max(1));
    let mut out: Vec<Value> = Vec::with_capacity(k);
    for i in 0..k {
        out.push(input.clone().map_tensors(&mut |t| {
            let pieces = t.chunk(k, dim as isize)?;
            match pieces.get(i) {
                Some(p) => Ok(p.clone()),
                None => bail!(Shape, "DataParallel: an input has fewer than {k} rows along dim {dim}"),
            }
        })?);
    }
    Ok(out)
}

/// `parallel_apply`: `module` on each input, each on its own thread, with the caller's grad
/// mode and autocast state. The first error is returned.
pub fn parallel_apply(module: &dyn Module, inputs: Vec<Value>) -> Result<Vec<Value>> {
    let grad = autograd::is_grad_enabled();
    // The caller's autocast regions, of each device type.
    let amp: Vec<AutocastOptions> = [Device::Cpu, Device::Cuda(0)]
        .into_iter()
        .filter(|&d| autocast::is_autocast_enabled(d))
        .map(|d| AutocastOptions {
            device_type: d,
            dtype: Some(autocast::get_autocast_dtype(d)),
            ..Default::default()
        })
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = inputs
            .into_iter()
            .map(|x| {
                let amp = amp.clone();
                s.spawn(move || {
                    let _grad = autograd::set_grad_enabled(grad);
                    let _amp = amp.into_iter().map(autocast::autocast).collect::<Result<Vec<_>>>()?;
                    module.call_value(x)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| bail!(Value, "DataParallel: a replica's thread panicked")))
            .collect()
    })
}

/// `gather`: the outputs joined along `dim` (tensors concatenated, tuples element-wise).
pub fn gather(outputs: Vec<Value>, dim: usize) -> Result<Value> {
    let first = outputs.first().cloned().ok_or_else(|| pyrite_core::err!(Value, "gather: no outputs"))?;
    match first {
        Value::Tensor(_) => {
            let ts: Vec<Tensor> = outputs.into_iter().map(|v| v.into_tensor()).collect::<Result<_>>()?;
            Ok(Value::Tensor(Tensor::cat(&ts, dim as isize)?))
        }
        Value::Tuple(items) | Value::List(items) => {
            let n = items.len();
            let mut columns: Vec<Vec<Value>> = (0..n).map(|_| Vec::new()).collect();
            for v in outputs {
                for (c, item) in columns.iter_mut().zip(v.into_vec()) {
                    c.push(item);
                }
            }
            Ok(Value::Tuple(columns.into_iter().map(|c| gather(c, dim)).collect::<Result<_>>()?))
        }
        other => Ok(other),
    }
}
