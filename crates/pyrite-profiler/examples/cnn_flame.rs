//! Profiles one training step of the benchmark's small CNN (conv-relu-pool x2, two linear
//! layers, cross-entropy, backward, Adam) and writes its flame chart, Chrome trace and table.
//!
//! ```text
//! cargo run --release -p pyrite-profiler --example cnn_flame -- [OUT_DIR]
//! ```

use pyrite::nn::functional as F;
use pyrite::nn::{Conv2d, ConvOptions, Flatten, Linear, MaxPool2d, Module, PoolOptions, ReLU, Sequential};
use pyrite::optim::{Adam, AdamOptions, Optimizer};
use pyrite::profiler::{profile, record_function, ProfileOptions, TableOptions};
use pyrite::{DType, Result, Tensor};

fn main() -> Result<()> {
    let out = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    pyrite::manual_seed(0);
    let p1 = || ConvOptions::new().padding(1);
    let model = Sequential::new()
        .append(Conv2d::new(1, 32, 3, p1())?)
        .append(ReLU::new())
        .append(MaxPool2d::new(2, PoolOptions::new()))
        .append(Conv2d::new(32, 64, 3, p1())?)
        .append(ReLU::new())
        .append(MaxPool2d::new(2, PoolOptions::new()))
        .append(Flatten::new())
        .append(Linear::new(64 * 7 * 7, 128)?)
        .append(ReLU::new())
        .append(Linear::new(128, 10)?);
    let mut opt = Adam::new(model.parameters(), AdamOptions { lr: 1e-3, ..Default::default() })?;
    let x = Tensor::randn([64, 1, 28, 28], DType::F32)?;
    let y = Tensor::randint(0, 10, [64], DType::I64)?;
    let step = |opt: &mut Adam| -> Result<()> {
        let _r = record_function("train_step");
        opt.zero_grad()?;
        let loss = {
            let _f = record_function("forward");
            F::cross_entropy(&model.call(&x)?, &y, &Default::default())?
        };
        {
            let _b = record_function("backward");
            loss.backward()?;
        }
        opt.step()
    };
    step(&mut opt)?; // warm-up: Adam's state, the allocator's cache
    let mut prof =
        profile(ProfileOptions { record_shapes: true, profile_memory: true, ..Default::default() })?;
    step(&mut opt)?;
    prof.stop()?;
    prof.export_flame_svg(out.join("profiler_flame.svg"))?;
    prof.export_chrome_trace(out.join("profiler_cnn.pt.trace.json"))?;
    let table = prof.key_averages(false).table(&TableOptions {
        sort_by: Some("cpu_time_total".into()),
        row_limit: 15,
        ..Default::default()
    })?;
    println!("{table}");
    Ok(())
}
