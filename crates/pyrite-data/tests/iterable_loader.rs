//! Loading an IterableDataset: each worker makes its own pass and shards it with
//! `get_worker_info`; batches come from the workers in turn; PyTorch's option rules; errors,
//! panics and early drops.

use pyrite::data::*;
use pyrite::{Result, Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The numbers 0..n; with workers, worker w reads w, w + W, w + 2W, ...
struct Numbers {
    n: usize,
    fail_at: Option<usize>,
    delay: Duration,
}

impl IterableDataset for Numbers {
    fn iter(&self) -> Box<dyn Iterator<Item = Result<Sample>> + Send + '_> {
        let (id, w) = get_worker_info().map_or((0, 1), |i| (i.id, i.num_workers));
        Box::new((id..self.n).step_by(w).map(move |i| {
            std::thread::sleep(self.delay);
            if Some(i) == self.fail_at {
                pyrite::bail!(Value, "bad record {i}");
            }
            if i == 1000 {
                panic!("user bug");
            }
            Ok(Sample::Int(i as i64))
        }))
    }
}

fn numbers(n: usize) -> Arc<dyn IterableDataset> {
    Arc::new(Numbers { n, fail_at: None, delay: Duration::ZERO })
}

fn run(loader: &IterableDataLoader) -> Vec<Vec<i64>> {
    loader.iter().unwrap().map(|b| b.unwrap().as_tensor().unwrap().to_vec::<i64>().unwrap()).collect()
}

#[test]
fn without_workers_the_pass_is_batched_in_order() {
    let o = DataLoaderOptions { batch_size: Some(4), ..Default::default() };
    assert_eq!(
        run(&IterableDataLoader::new(numbers(10), o.clone()).unwrap()),
        [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]
    );
    let dropping = IterableDataLoader::new(numbers(10), DataLoaderOptions { drop_last: true, ..o }).unwrap();
    assert_eq!(run(&dropping).len(), 2);
    let single =
        IterableDataLoader::new(numbers(3), DataLoaderOptions { batch_size: None, ..Default::default() })
            .unwrap();
    let items: Vec<i64> = single.iter().unwrap().map(|s| s.unwrap().as_int().unwrap()).collect();
    assert_eq!(items, [0, 1, 2]);
}

#[test]
fn workers_shard_and_batches_alternate_between_them() {
    let loader = IterableDataLoader::new(
        numbers(12),
        DataLoaderOptions { batch_size: Some(2), num_workers: 3, ..Default::default() },
    )
    .unwrap();
    // worker 0: 0 3 6 9, worker 1: 1 4 7 10, worker 2: 2 5 8 11; one batch from each in turn
    assert_eq!(run(&loader), [vec![0, 3], vec![1, 4], vec![2, 5], vec![6, 9], vec![7, 10], vec![8, 11]]);
    // uneven shards: a finished worker is skipped
    let loader = IterableDataLoader::new(
        numbers(5),
        DataLoaderOptions { batch_size: Some(2), num_workers: 2, ..Default::default() },
    )
    .unwrap();
    assert_eq!(run(&loader), [vec![0, 2], vec![1, 3], vec![4]]);
}

#[test]
fn an_iterable_dataset_takes_no_sampler_or_shuffle() {
    let e = IterableDataLoader::new(numbers(4), DataLoaderOptions { shuffle: true, ..Default::default() })
        .err()
        .unwrap();
    assert!(e.to_string().contains("expected unspecified shuffle option"));
    let s: Arc<dyn Sampler> = Arc::new(SequentialSampler::new(4));
    let e = IterableDataLoader::new(numbers(4), DataLoaderOptions { sampler: Some(s), ..Default::default() })
        .err()
        .unwrap();
    assert!(e.to_string().contains("expected unspecified sampler option"));
}

#[test]
fn errors_and_panics_reach_the_consumer() {
    let ds = Arc::new(Numbers { n: 10, fail_at: Some(5), delay: Duration::ZERO });
    let loader = IterableDataLoader::new(
        ds,
        DataLoaderOptions { batch_size: Some(2), num_workers: 2, ..Default::default() },
    )
    .unwrap();
    let errors: Vec<String> = loader.iter().unwrap().filter_map(|b| b.err()).map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("worker 1") && errors[0].contains("bad record 5"), "{}", errors[0]);
    let ds = Arc::new(Numbers { n: 1001, fail_at: None, delay: Duration::ZERO });
    let loader = IterableDataLoader::new(
        ds,
        DataLoaderOptions { batch_size: Some(100), num_workers: 2, ..Default::default() },
    )
    .unwrap();
    let errors: Vec<String> = loader.iter().unwrap().filter_map(|b| b.err()).map(|e| e.to_string()).collect();
    assert!(errors.iter().any(|e| e.contains("panic") && e.contains("user bug")), "{errors:?}");
}

#[test]
fn dropping_mid_pass_joins_the_workers_promptly() {
    let ds = Arc::new(Numbers { n: 100_000, fail_at: None, delay: Duration::from_millis(5) });
    let loader = IterableDataLoader::new(
        ds,
        DataLoaderOptions { batch_size: Some(4), num_workers: 2, ..Default::default() },
    )
    .unwrap();
    let mut it = loader.iter().unwrap();
    it.next().unwrap().unwrap();
    let t = Instant::now();
    drop(it);
    assert!(t.elapsed() < Duration::from_secs(1), "took {:?}", t.elapsed());
}

#[test]
fn every_sample_gets_a_generator() {
    struct Noisy;
    impl IterableDataset for Noisy {
        fn iter(&self) -> Box<dyn Iterator<Item = Result<Sample>> + Send + '_> {
            Box::new((0..4).map(|_| {
                let g = sample_generator().expect("a generator per sample");
                Ok(Sample::Tensor(Tensor::rand_with([1], pyrite::DType::F64, Some(&g))?))
            }))
        }
    }
    let loader = IterableDataLoader::new(
        Arc::new(Noisy),
        DataLoaderOptions { batch_size: Some(4), ..Default::default() },
    )
    .unwrap();
    let v = loader.iter().unwrap().next().unwrap().unwrap().as_tensor().unwrap().to_vec2::<f64>().unwrap();
    assert!(v[0][0] != v[1][0] && v[1][0] != v[2][0]);
}

#[test]
fn a_panic_without_workers_is_an_error_and_ends_the_pass() {
    let ds = Arc::new(Numbers { n: 1001, fail_at: None, delay: Duration::ZERO });
    let loader =
        IterableDataLoader::new(ds, DataLoaderOptions { batch_size: Some(400), ..Default::default() })
            .unwrap();
    let results: Vec<_> = loader.iter().unwrap().collect();
    assert_eq!(results.len(), 3, "two batches, then the panic ends the pass");
    let e = results[2].as_ref().unwrap_err().to_string();
    assert!(e.contains("panic") && e.contains("sample 1000") && e.contains("user bug"), "{e}");
}

#[test]
fn dropping_never_waits_for_a_worker_stuck_in_the_dataset() {
    struct Stuck(std::sync::Mutex<std::sync::mpsc::Receiver<()>>);
    impl IterableDataset for Stuck {
        fn iter(&self) -> Box<dyn Iterator<Item = Result<Sample>> + Send + '_> {
            Box::new((0..10).map(move |i| {
                if i == 2 {
                    let _ = self.0.lock().unwrap().recv();
                }
                Ok(Sample::Int(i))
            }))
        }
    }
    let (never, rx) = std::sync::mpsc::channel();
    std::mem::forget(never); // nothing ever sends
    let loader = IterableDataLoader::new(
        Arc::new(Stuck(std::sync::Mutex::new(rx))),
        DataLoaderOptions {
            batch_size: Some(2),
            num_workers: 1,
            timeout: Some(Duration::from_millis(100)),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(loader.dataset().iter().take(1).count(), 1);
    let mut it = loader.iter().unwrap();
    assert!(it.next().unwrap().is_ok());
    assert!(it.next().unwrap().unwrap_err().to_string().contains("timed out"));
    let t = Instant::now();
    drop(it);
    assert!(t.elapsed() < Duration::from_millis(500), "dropping took {:?}", t.elapsed());
}
