//! `custom_fwd` / `custom_bwd` as in `torch.amp`: what a custom Function's forward and backward
//! see of autocast, in and out of a region, with and without `cast_inputs`.

use pyrite::amp::{autocast, is_autocast_enabled, AutocastOptions, CustomBwd, CustomFwd, CustomFwdOptions};
use pyrite::autograd::{self, Function, FunctionCtx};
use pyrite::{DType, Device, Result, Tensor};
use std::sync::{Arc, Mutex};

/// `x @ w`, recording the autocast state and the input dtypes its forward and backward saw.
struct MatMul(Arc<Mutex<Vec<String>>>);

impl Function for MatMul {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.0.lock().unwrap().push(format!(
            "forward autocast={} x={:?}",
            is_autocast_enabled(Device::Cpu),
            inputs[0].dtype()
        ));
        ctx.save_for_backward(inputs);
        Ok(vec![inputs[0].matmul(inputs[1])?])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        self.0.lock().unwrap().push(format!("backward autocast={}", is_autocast_enabled(Device::Cpu)));
        let (x, w) = (&ctx.saved_tensors()[0], &ctx.saved_tensors()[1]);
        let g = g[0].to_dtype(x.dtype())?;
        Ok(vec![Some(g.matmul(&w.t()?)?), Some(x.t()?.matmul(&g)?)])
    }
}

fn run(cast_inputs: Option<DType>, in_region: bool) -> Result<(Vec<String>, DType, DType)> {
    let log = Arc::new(Mutex::new(vec![]));
    let f = CustomBwd(CustomFwd::new(
        MatMul(log.clone()),
        CustomFwdOptions { cast_inputs, ..Default::default() },
    ));
    let x = Tensor::randn([4, 3], DType::F32)?;
    let w = Tensor::randn([3, 2], DType::F32)?.requires_grad_(true)?;
    let y = {
        let _ac = autocast(AutocastOptions { enabled: in_region, ..Default::default() })?;
        autograd::apply(f, &[&x, &w])?.remove(0)
    };
    y.to_dtype(DType::F32)?.sum()?.backward()?;
    let out = log.lock().unwrap().clone();
    Ok((out, y.dtype(), w.grad().unwrap().dtype()))
}

#[test]
fn cast_inputs_runs_the_forward_in_that_dtype_with_autocast_off() -> Result<()> {
    let (log, y, gw) = run(Some(DType::F32), true)?;
    assert_eq!(log, ["forward autocast=false x=F32", "backward autocast=false"]);
    assert_eq!((y, gw), (DType::F32, DType::F32));
    Ok(())
}

#[test]
fn without_cast_inputs_the_forward_and_backward_run_in_the_region() -> Result<()> {
    let (log, y, gw) = run(None, true)?;
    // The forward's matmul is autocast's: bf16 out; backward runs under autocast too.
    assert_eq!(log, ["forward autocast=true x=F32", "backward autocast=true"]);
    assert_eq!(y, DType::BF16);
    assert_eq!(gw, DType::F32, "the leaf's gradient comes back in its own dtype");
    Ok(())
}

#[test]
fn outside_a_region_cast_inputs_does_nothing() -> Result<()> {
    let (log, y, _) = run(Some(DType::BF16), false)?;
    assert_eq!(log, ["forward autocast=false x=F32", "backward autocast=false"]);
    assert_eq!(y, DType::F32);
    Ok(())
}

#[test]
fn custom_bwd_alone_is_an_error() -> Result<()> {
    let x = Tensor::randn([2, 2], DType::F32)?.requires_grad_(true)?;
    let y = autograd::apply(CustomBwd(MatMul(Default::default())), &[&x, &x])?.remove(0);
    let e = y.sum()?.backward().unwrap_err();
    assert!(e.to_string().contains("wrap the function in CustomFwd"), "{e}");
    Ok(())
}
