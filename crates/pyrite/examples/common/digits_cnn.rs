//! The digits CNN and its evaluation loop, shared by the examples that train it
//! (`train_digits`, `ddp_digits`, `tune_digits`; included with `#[path]`).

use pyrite::data::DataLoader;
use pyrite::nn::{self, Conv2d, ConvOptions, Dropout, Linear, Module, ModuleBase, PoolOptions};
use pyrite::prelude::*;

/// Two 3x3 convolutions, a 2x2 max-pool and two linear layers, with dropout.
#[derive(nn::Module)]
pub struct Net {
    base: ModuleBase,
    conv1: Conv2d,
    conv2: Conv2d,
    drop: Dropout,
    fc1: Linear,
    fc2: Linear,
}

impl Net {
    #[allow(dead_code)] // not used by tune_digits
    pub fn new() -> Result<Net> {
        Net::with_width(32)
    }

    /// The same network with `width` channels in the first convolution (twice as many in the
    /// second); `new` is width 32.
    #[allow(dead_code)] // used by tune_digits only
    pub fn with_width(width: usize) -> Result<Net> {
        let same = || ConvOptions::new().padding(1);
        Ok(Net {
            base: ModuleBase::new(),
            conv1: Conv2d::new(1, width, 3, same())?,
            conv2: Conv2d::new(width, 2 * width, 3, same())?,
            drop: Dropout::new(0.25)?,
            fc1: Linear::new(2 * width * 4 * 4, 128)?,
            fc2: Linear::new(128, 10)?,
        })
    }
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.conv1.call(x)?.relu()?;
        let x = F::max_pool2d(&self.conv2.call(&x)?.relu()?, &[2], &PoolOptions::new())?;
        let x = self.drop.call(&x.flatten(1, -1)?)?;
        self.fc2.call(&self.drop.call(&self.fc1.call(&x)?.relu()?)?)
    }
}

/// Loss and accuracy of `model` over a loader, without gradients.
pub fn evaluate(model: &dyn Module, loader: &DataLoader) -> Result<(f64, f64)> {
    model.eval();
    let _g = pyrite::autograd::no_grad();
    let (mut loss, mut correct, mut n) = (0.0, 0i64, 0usize);
    for batch in loader.iter()? {
        let batch = batch?;
        let (x, y) = (batch.item(0)?.as_tensor()?, batch.item(1)?.as_tensor()?);
        let logits = model.call(x)?;
        let sum = F::cross_entropy(
            &logits,
            y,
            &F::CrossEntropyOptions { reduction: F::Reduction::Sum, ..Default::default() },
        )?;
        loss += sum.item::<f32>()? as f64;
        correct += logits.argmax(Some(1), false)?.eq(y)?.to_dtype(DType::I64)?.sum()?.item::<i64>()?;
        n += y.dims()[0];
    }
    Ok((loss / n as f64, correct as f64 / n as f64))
}
