//! The reference benchmark's `dataloader` workload: 100,000 random 3x32x32 images whose `get`
//! flips each one horizontally with probability 0.5, loaded in shuffled batches of 128 with 0
//! and 2 workers (`pyrite::data::DataLoader`), as `torch_bench.py` does.

use crate::timing::{median, min, round, spread};
use crate::Args;
use pyrite::data::{sample_generator, DataLoader, DataLoaderOptions, Dataset, Sample};
use pyrite::{DType, Generator, Result, Tensor};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Instant;

struct RandomImages {
    data: Tensor,
    labels: Tensor,
}

impl RandomImages {
    fn new(n: usize) -> RandomImages {
        let g = Generator::new(0);
        let data = Tensor::rand_with([n, 3, 32, 32], DType::F32, Some(&g)).expect("images");
        let labels = Tensor::randint_with(0, 10, [n], DType::I64, Some(&g)).expect("labels");
        RandomImages { data, labels }
    }
}

impl Dataset for RandomImages {
    fn len(&self) -> usize {
        self.data.dims()[0]
    }

    fn get(&self, i: usize) -> Result<Sample> {
        let x = self.data.select(0, i as isize)?;
        let g = sample_generator();
        let coin = Tensor::rand_with([1], DType::F32, g.as_deref())?.to_vec::<f32>()?[0];
        let x = if coin < 0.5 { x.flip(&[-1])? } else { x };
        Ok(Sample::Tuple(vec![x.into(), self.labels.select(0, i as isize)?.into()]))
    }
}

pub fn dataloader(args: &Args) -> Map<String, Value> {
    pyrite::manual_seed(0);
    let ds: Arc<dyn Dataset> = Arc::new(RandomImages::new(100_000));
    let mut res = Map::new();
    res.insert("samples".into(), json!(ds.len()));
    res.insert("batch".into(), json!(128));
    let (warm, per_rep) = (10, 60);
    for nw in [0usize, 2] {
        let dl = DataLoader::new(
            ds.clone(),
            DataLoaderOptions {
                batch_size: Some(128),
                shuffle: true,
                num_workers: nw,
                generator: Some(Arc::new(Generator::new(0))),
                ..Default::default()
            },
        )
        .expect("loader");
        let t0 = Instant::now();
        let mut it = dl.iter().expect("epoch");
        it.next().unwrap().unwrap();
        res.insert(format!("w{nw}_first_batch_s"), json!(round(t0.elapsed().as_secs_f64(), 3)));
        for _ in 0..warm {
            it.next().unwrap().unwrap();
        }
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..args.repeats {
            let t0 = Instant::now();
            for _ in 0..per_rep {
                last = Some(it.next().unwrap().unwrap());
            }
            times.push(t0.elapsed().as_secs_f64() / per_rep as f64);
        }
        let xb = last.unwrap().item(0).unwrap().as_tensor().unwrap().clone();
        assert_eq!(xb.dims(), &[128, 3, 32, 32]);
        drop(it);
        let t = median(&times);
        res.insert(format!("w{nw}_batches_per_s"), json!(round(1.0 / t, 2)));
        res.insert(format!("w{nw}_batches_per_s_best"), json!(round(1.0 / min(&times), 2)));
        res.insert(format!("w{nw}_samples_per_s"), json!(round(128.0 / t, 1)));
        res.insert(format!("w{nw}_spread"), json!(spread(&times)));
    }
    res
}
