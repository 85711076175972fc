//! The DataLoader as PyTorch documents it: batching, `len`, which options go together,
//! shuffling and ordering, workers that are threads (and their `worker_init_fn`), prefetch
//! bounds, errors and panics that reach the consumer, timeouts, prompt shutdown, and
//! per-sample generators that make random augmentation independent of the number of workers.

use pyrite::data::*;
use pyrite::{DType, Generator, Tensor};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Sample i is the tensor [i] (f32) with the label i (an int).
fn numbers(n: usize) -> Arc<dyn Dataset> {
    Arc::new(FnDataset::new(n, |i| {
        Ok(Sample::Tuple(vec![Tensor::new([i as f32])?.into(), Sample::Int(i as i64)]))
    }))
}

fn labels(batch: &Sample) -> Vec<i64> {
    batch.item(1).unwrap().as_tensor().unwrap().to_vec::<i64>().unwrap()
}

fn epoch(loader: &DataLoader) -> Vec<Vec<i64>> {
    loader.iter().unwrap().map(|b| labels(&b.unwrap())).collect()
}

#[test]
fn batches_follow_the_sampler_and_len_counts_them() {
    for workers in [0, 1, 3] {
        let loader = DataLoader::new(
            numbers(10),
            DataLoaderOptions { batch_size: Some(4), num_workers: workers, ..Default::default() },
        )
        .unwrap();
        assert_eq!(loader.len(), 3);
        assert_eq!(epoch(&loader), [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]], "{workers} workers");
        let dropping = DataLoader::new(
            numbers(10),
            DataLoaderOptions {
                batch_size: Some(4),
                drop_last: true,
                num_workers: workers,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(dropping.len(), 2);
        assert_eq!(epoch(&dropping).len(), 2);
    }
    // the collated batch: a tuple of a [4, 1] f32 tensor and an i64 label tensor
    let loader =
        DataLoader::new(numbers(8), DataLoaderOptions { batch_size: Some(4), ..Default::default() }).unwrap();
    let b = loader.iter().unwrap().next().unwrap().unwrap();
    assert_eq!(b.item(0).unwrap().as_tensor().unwrap().dims(), &[4, 1]);
    assert_eq!(b.item(1).unwrap().as_tensor().unwrap().dtype(), DType::I64);
}

#[test]
fn batch_size_none_yields_single_samples() {
    let loader =
        DataLoader::new(numbers(3), DataLoaderOptions { batch_size: None, ..Default::default() }).unwrap();
    assert_eq!(loader.len(), 3);
    let items: Vec<Sample> = loader.iter().unwrap().map(|s| s.unwrap()).collect();
    assert_eq!(items[2].item(1).unwrap().as_int().unwrap(), 2);
}

#[test]
fn pytorchs_option_rules_are_errors() {
    let sampler: Arc<dyn Sampler> = Arc::new(SequentialSampler::new(4));
    let err =
        |o: DataLoaderOptions| DataLoader::new(numbers(4), o).err().expect("should be refused").to_string();
    assert!(err(DataLoaderOptions { sampler: Some(sampler.clone()), shuffle: true, ..Default::default() })
        .contains("sampler option is mutually exclusive with shuffle"));
    let bs: Arc<dyn BatchSampling> = Arc::new(BatchSampler::new(sampler.clone(), 2, false).unwrap());
    assert!(err(DataLoaderOptions {
        batch_sampler: Some(bs.clone()),
        batch_size: Some(2),
        ..Default::default()
    })
    .contains("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"));
    assert!(err(DataLoaderOptions { batch_size: None, drop_last: true, ..Default::default() })
        .contains("mutually exclusive with drop_last"));
    assert!(err(DataLoaderOptions { prefetch_factor: Some(2), ..Default::default() })
        .contains("prefetch_factor option could only be specified"));
    assert!(err(DataLoaderOptions { persistent_workers: true, ..Default::default() })
        .contains("persistent_workers option needs num_workers > 0"));
    // a batch sampler alone is fine, and decides the batches and len
    let loader =
        DataLoader::new(numbers(4), DataLoaderOptions { batch_sampler: Some(bs), ..Default::default() })
            .unwrap();
    assert_eq!(epoch(&loader), [vec![0, 1], vec![2, 3]]);
}

#[test]
fn shuffle_is_a_permutation_and_a_seeded_generator_repeats_it() {
    let make = |workers| {
        DataLoader::new(
            numbers(20),
            DataLoaderOptions {
                batch_size: Some(6),
                shuffle: true,
                num_workers: workers,
                generator: Some(Arc::new(Generator::new(7))),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let a = make(0);
    let first: Vec<i64> = epoch(&a).concat();
    assert_eq!(first.iter().copied().collect::<BTreeSet<_>>(), (0..20).collect::<BTreeSet<_>>());
    assert_ne!(first, (0..20).collect::<Vec<_>>(), "shuffled");
    let second: Vec<i64> = epoch(&a).concat();
    assert_ne!(first, second, "each epoch draws a new order");
    // the same seed gives the same epochs, with or without workers
    let b = make(2);
    assert_eq!(epoch(&b).concat(), first);
    assert_eq!(epoch(&b).concat(), second);
}

/// Sample i: the label i and a number drawn from the sample's generator (a random augmentation).
fn augmented(n: usize) -> Arc<dyn Dataset> {
    Arc::new(FnDataset::new(n, |i| {
        let g = sample_generator().expect("inside a loader every sample has a generator");
        let noise = Tensor::rand_with([1], DType::F64, Some(&g))?;
        Ok(Sample::Tuple(vec![noise.into(), Sample::Int(i as i64)]))
    }))
}

#[test]
fn random_augmentation_is_the_same_for_any_number_of_workers() {
    // three epochs each: the loader's generator must advance the same way for every worker count
    let run = |workers: usize| -> Vec<(i64, f64)> {
        let loader = DataLoader::new(
            augmented(12),
            DataLoaderOptions {
                batch_size: Some(5),
                shuffle: true,
                num_workers: workers,
                generator: Some(Arc::new(Generator::new(3))),
                ..Default::default()
            },
        )
        .unwrap();
        let mut out = vec![];
        for _epoch in 0..3 {
            for b in loader.iter().unwrap() {
                let b = b.unwrap();
                let noise = b.item(0).unwrap().as_tensor().unwrap().to_vec2::<f64>().unwrap();
                out.extend(labels(&b).into_iter().zip(noise.into_iter().map(|r| r[0])));
            }
        }
        out
    };
    let zero = run(0);
    assert_eq!(run(1), zero);
    assert_eq!(run(3), zero);
    let distinct: BTreeSet<u64> = zero.iter().map(|(_, v)| v.to_bits()).collect();
    assert_eq!(distinct.len(), 36, "every sample of every epoch gets its own numbers");
}

#[test]
fn workers_are_threads_with_pytorchs_worker_info() {
    let seen = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let s = seen.clone();
    let ds = Arc::new(FnDataset::new(8, move |i| {
        let info = get_worker_info().expect("worker info inside a worker");
        assert_eq!(info.num_workers, 2);
        s.lock().unwrap().insert((info.id, i));
        Ok(Sample::Int(i as i64))
    }));
    assert!(get_worker_info().is_none(), "none on the main thread");
    let loader =
        DataLoader::new(ds, DataLoaderOptions { batch_size: Some(2), num_workers: 2, ..Default::default() })
            .unwrap();
    assert_eq!(loader.iter().unwrap().count(), 4);
    // batch k goes to worker k % 2, as in PyTorch
    let seen = seen.lock().unwrap();
    assert_eq!(seen.iter().filter(|(w, _)| *w == 0).map(|(_, i)| *i).collect::<Vec<_>>(), [0, 1, 4, 5]);
    assert_eq!(seen.iter().filter(|(w, _)| *w == 1).map(|(_, i)| *i).collect::<Vec<_>>(), [2, 3, 6, 7]);
}

#[test]
fn at_most_workers_times_prefetch_batches_are_fetched_ahead() {
    let fetched = Arc::new(AtomicUsize::new(0));
    let f = fetched.clone();
    let ds = Arc::new(FnDataset::new(100, move |i| {
        f.fetch_add(1, Ordering::SeqCst);
        Ok(Sample::Int(i as i64))
    }));
    let loader = DataLoader::new(
        ds,
        DataLoaderOptions {
            batch_size: Some(1),
            num_workers: 2,
            prefetch_factor: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    let mut it = loader.iter().unwrap();
    it.next().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // one consumed, and at most 2 * 3 in flight after it
    assert!(fetched.load(Ordering::SeqCst) <= 7, "fetched {}", fetched.load(Ordering::SeqCst));
}

#[test]
fn a_failing_or_panicking_sample_is_an_error_naming_the_worker_and_index() {
    for workers in [0, 2] {
        let ds = Arc::new(FnDataset::new(6, |i| {
            if i == 4 {
                pyrite::bail!(Value, "corrupt file");
            }
            Ok(Sample::Int(i as i64))
        }));
        let loader = DataLoader::new(
            ds,
            DataLoaderOptions { batch_size: Some(2), num_workers: workers, ..Default::default() },
        )
        .unwrap();
        let results: Vec<_> = loader.iter().unwrap().collect();
        assert!(results[0].is_ok() && results[1].is_ok());
        let e = results[2].as_ref().unwrap_err().to_string();
        assert!(e.contains("sample 4") && e.contains("corrupt file"), "{e}");
        if workers > 0 {
            assert!(e.contains("worker 0"), "batch 2 is worker 0's: {e}");
        }
    }
    let ds = Arc::new(FnDataset::new(4, |i| {
        if i == 3 {
            panic!("bug in user code");
        }
        Ok(Sample::Int(i as i64))
    }));
    let loader =
        DataLoader::new(ds, DataLoaderOptions { batch_size: Some(2), num_workers: 2, ..Default::default() })
            .unwrap();
    let results: Vec<_> = loader.iter().unwrap().collect();
    let e = results[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("panic") && e.contains("bug in user code"), "{e}");
}

#[test]
fn a_timeout_is_an_error() {
    let ds = Arc::new(FnDataset::new(2, |i| {
        std::thread::sleep(Duration::from_millis(500));
        Ok(Sample::Int(i as i64))
    }));
    let loader = DataLoader::new(
        ds,
        DataLoaderOptions { num_workers: 1, timeout: Some(Duration::from_millis(50)), ..Default::default() },
    )
    .unwrap();
    let e = loader.iter().unwrap().next().unwrap().unwrap_err().to_string();
    assert!(e.contains("timed out"), "{e}");
}

#[test]
fn dropping_an_iterator_mid_epoch_stops_its_workers_promptly() {
    let ds = Arc::new(FnDataset::new(1000, |i| {
        std::thread::sleep(Duration::from_millis(20));
        Ok(Sample::Int(i as i64))
    }));
    let loader =
        DataLoader::new(ds, DataLoaderOptions { batch_size: Some(8), num_workers: 2, ..Default::default() })
            .unwrap();
    let mut it = loader.iter().unwrap();
    it.next().unwrap().unwrap();
    let t = Instant::now();
    drop(it); // slow samples in flight: workers stop between samples and are joined
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
}

#[test]
fn persistent_workers_serve_several_epochs() {
    let loader = DataLoader::new(
        numbers(6),
        DataLoaderOptions {
            batch_size: Some(4),
            num_workers: 2,
            persistent_workers: true,
            ..Default::default()
        },
    )
    .unwrap();
    for _ in 0..3 {
        assert_eq!(epoch(&loader), [vec![0, 1, 2, 3], vec![4, 5]]);
    }
    // an epoch cut short does not leak into the next one
    let mut it = loader.iter().unwrap();
    it.next().unwrap().unwrap();
    drop(it);
    assert_eq!(epoch(&loader), [vec![0, 1, 2, 3], vec![4, 5]]);
}

#[test]
fn out_of_order_delivery_yields_every_batch_once() {
    let ds = Arc::new(FnDataset::new(12, |i| {
        if i < 3 {
            std::thread::sleep(Duration::from_millis(30)); // the first batch is slow
        }
        Ok(Sample::Tuple(vec![Tensor::new([i as f32])?.into(), Sample::Int(i as i64)]))
    }));
    let loader = DataLoader::new(
        ds,
        DataLoaderOptions { batch_size: Some(3), num_workers: 2, in_order: false, ..Default::default() },
    )
    .unwrap();
    let got: BTreeSet<Vec<i64>> = epoch(&loader).into_iter().collect();
    assert_eq!(got.len(), 4);
    assert!(got.contains(&vec![0, 1, 2]));
}

thread_local! {
    /// The worker id `worker_init_fn` saw on this thread.
    static INITIALIZED_AS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

#[test]
fn worker_init_fn_runs_in_each_worker_before_it_fetches() {
    // the dataset reports which worker_init_fn call initialized the fetching thread
    let ds: Arc<dyn Dataset> = Arc::new(FnDataset::new(6, |_| {
        let id = INITIALIZED_AS.with(|c| c.get()).expect("worker_init_fn ran before the fetch");
        Ok(Sample::Int(id as i64))
    }));
    for persistent in [false, true] {
        let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
        let c = calls.clone();
        let init: WorkerInitFn = Arc::new(move |id| {
            let info = get_worker_info().expect("worker info inside worker_init_fn");
            let thread = std::thread::current().name().unwrap_or("").to_string();
            c.lock().unwrap().push((id, info, thread));
            INITIALIZED_AS.with(|c| c.set(Some(id)));
        });
        let loader = DataLoader::new(
            ds.clone(),
            DataLoaderOptions {
                batch_size: Some(1),
                num_workers: 3,
                worker_init_fn: Some(init),
                persistent_workers: persistent,
                generator: Some(Arc::new(Generator::new(5))),
                ..Default::default()
            },
        )
        .unwrap();
        for _ in 0..2 {
            // sample k is fetched by worker k % 3, which worker_init_fn initialized as k % 3
            let ids: Vec<i64> = loader
                .iter()
                .unwrap()
                .map(|b| b.unwrap().as_tensor().unwrap().to_vec::<i64>().unwrap()[0])
                .collect();
            assert_eq!(ids, [0, 1, 2, 0, 1, 2]);
        }
        let calls = calls.lock().unwrap();
        // once per worker and epoch, or once in all for persistent workers
        assert_eq!(calls.len(), if persistent { 3 } else { 6 }, "persistent: {persistent}");
        for epoch in calls.chunks(3) {
            let mut epoch = epoch.to_vec();
            epoch.sort_by_key(|(id, ..)| *id);
            let seed0 = epoch[0].1.seed;
            for (k, (id, info, thread)) in epoch.iter().enumerate() {
                assert_eq!((*id, info.id, info.num_workers), (k, k, 3));
                assert_eq!(info.seed, seed0.wrapping_add(k as u64), "PyTorch's base_seed + worker id");
                assert_eq!(thread, &format!("pyrite-dataloader-{k}"), "called on the worker's thread");
            }
        }
        if !persistent {
            assert_ne!(calls[0].1.seed, calls[3].1.seed, "each epoch draws a new base seed");
        }
    }
}

#[test]
fn a_panicking_worker_init_fn_is_an_error_of_the_loader_not_a_hang() {
    let failing = |bad: usize| -> WorkerInitFn {
        Arc::new(move |id| {
            if id == bad {
                panic!("no scratch space for worker {id}");
            }
        })
    };
    let opts = |bad| DataLoaderOptions {
        batch_size: Some(1),
        num_workers: 2,
        worker_init_fn: Some(failing(bad)),
        timeout: Some(Duration::from_secs(20)), // a hang would end in a timeout error instead
        ..Default::default()
    };
    // worker 1's batches are errors naming it and the panic; worker 0's are fine
    let loader = DataLoader::new(numbers(4), opts(1)).unwrap();
    let results: Vec<_> = loader.iter().unwrap().collect();
    assert_eq!(results.len(), 4);
    assert!(results[0].is_ok() && results[2].is_ok());
    for r in [&results[1], &results[3]] {
        let e = r.as_ref().unwrap_err().to_string();
        assert!(e.contains("worker 1: worker_init_fn panicked: no scratch space for worker 1"), "{e}");
    }
    // the failing worker has the only batch and the other worker none
    let loader = DataLoader::new(numbers(1), opts(0)).unwrap();
    let results: Vec<_> = loader.iter().unwrap().collect();
    assert_eq!(results.len(), 1);
    let e = results[0].as_ref().unwrap_err().to_string();
    assert!(e.contains("worker 0: worker_init_fn panicked"), "{e}");
}

#[test]
fn a_panic_names_the_sample_not_the_batch_with_or_without_workers() {
    for workers in [0, 2] {
        let ds = Arc::new(FnDataset::new(8, |i| {
            if i == 6 {
                panic!("bad sample");
            }
            Ok(Sample::Int(i as i64))
        }));
        let loader = DataLoader::new(
            ds,
            DataLoaderOptions { batch_size: Some(4), num_workers: workers, ..Default::default() },
        )
        .unwrap();
        // no panic reaches the consumer, not even without workers
        let results: Vec<_> = loader.iter().unwrap().collect();
        assert!(results[0].is_ok());
        let e = results[1].as_ref().unwrap_err().to_string();
        assert!(e.contains("sample 6") && e.contains("bad sample"), "{workers} workers: {e}");
        assert!(!e.contains("[4, 5, 6, 7]"), "names the batch instead of the sample: {e}");
        if workers > 0 {
            assert!(e.contains("worker 1"), "batch 1 is worker 1's: {e}");
        }
        // the fetching thread is left clean: no sample generator set, and the loader works on
        assert!(sample_generator().is_none());
        assert_eq!(loader.iter().unwrap().filter(|b| b.is_ok()).count(), 1);
    }
    // a panicking collate_fn is an error too
    let collate: CollateFn = Arc::new(|_| panic!("collate bug"));
    let loader = DataLoader::new(
        numbers(2),
        DataLoaderOptions { batch_size: Some(2), collate_fn: Some(collate), ..Default::default() },
    )
    .unwrap();
    let e = loader.iter().unwrap().next().unwrap().unwrap_err().to_string();
    assert!(e.contains("collat") && e.contains("collate bug"), "{e}");
}

#[test]
fn dropping_after_a_timeout_does_not_wait_for_the_slow_sample() {
    let ds = Arc::new(FnDataset::new(4, |i| {
        std::thread::sleep(Duration::from_secs(2));
        Ok(Sample::Int(i as i64))
    }));
    let loader = DataLoader::new(
        ds,
        DataLoaderOptions { num_workers: 1, timeout: Some(Duration::from_millis(100)), ..Default::default() },
    )
    .unwrap();
    let mut it = loader.iter().unwrap();
    let e = it.next().unwrap().unwrap_err().to_string();
    assert!(e.contains("timed out after 0.1 seconds"), "{e}");
    let t = Instant::now();
    drop(it);
    assert!(t.elapsed() < Duration::from_millis(500), "dropping took {:?}", t.elapsed());
}

#[test]
fn a_worker_hung_in_a_sample_is_detached_and_harmless_when_it_returns() {
    let (release, hung) = mpsc::channel::<()>();
    let hung = Mutex::new(hung);
    let first = AtomicBool::new(true);
    let returned = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let (ret, count) = (returned.clone(), calls.clone());
    let ds = Arc::new(FnDataset::new(8, move |i| {
        count.fetch_add(1, Ordering::SeqCst);
        if i == 0 && first.swap(false, Ordering::SeqCst) {
            let _ = hung.lock().unwrap().recv(); // until the test releases it
            ret.store(true, Ordering::SeqCst);
        }
        Ok(Sample::Int(i as i64))
    }));
    let loader = DataLoader::new(
        ds,
        DataLoaderOptions {
            batch_size: Some(2),
            num_workers: 2,
            timeout: Some(Duration::from_millis(100)),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(loader.dataset().len(), 8);
    let mut it = loader.iter().unwrap();
    assert!(it.next().unwrap().unwrap_err().to_string().contains("timed out"));
    let t = Instant::now();
    drop(it);
    assert!(t.elapsed() < Duration::from_millis(500), "dropping took {:?}", t.elapsed());
    // fresh workers serve the next epoch while the old one is still stuck
    let ints = |b: Sample| b.as_tensor().unwrap().to_vec::<i64>().unwrap();
    let epoch: Vec<Vec<i64>> = loader.iter().unwrap().map(|b| ints(b.unwrap())).collect();
    assert_eq!(epoch, [vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
    // the stuck sample returns: its detached worker stops without fetching anything more
    let before = calls.load(Ordering::SeqCst);
    release.send(()).unwrap();
    let t = Instant::now();
    while !returned.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(returned.load(Ordering::SeqCst));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(calls.load(Ordering::SeqCst), before, "a detached worker went on fetching");
    assert_eq!(epoch_of(&loader), [vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
}

#[test]
fn dropping_never_waits_for_a_sample_that_never_returns() {
    let (never, hung) = mpsc::channel::<()>();
    std::mem::forget(never); // nothing ever sends: the sample blocks for the whole process
    let hung = Mutex::new(hung);
    let ds = Arc::new(FnDataset::new(4, move |i| {
        if i == 1 {
            let _ = hung.lock().unwrap().recv();
        }
        Ok(Sample::Int(i as i64))
    }));
    let loader = DataLoader::new(
        ds,
        DataLoaderOptions { num_workers: 2, timeout: Some(Duration::from_millis(100)), ..Default::default() },
    )
    .unwrap();
    let mut it = loader.iter().unwrap();
    assert!(it.next().unwrap().is_ok());
    assert!(it.next().unwrap().unwrap_err().to_string().contains("timed out"));
    let t = Instant::now();
    drop(it);
    assert!(t.elapsed() < Duration::from_millis(500), "dropping took {:?}", t.elapsed());
}

fn epoch_of(loader: &DataLoader) -> Vec<Vec<i64>> {
    loader.iter().unwrap().map(|b| b.unwrap().as_tensor().unwrap().to_vec::<i64>().unwrap()).collect()
}
