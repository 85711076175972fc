//! `DataLoader::state_dict` / `load_state_dict` (torchdata's StatefulDataLoader): a loader cut
//! at any batch of any epoch and rebuilt from its saved state (through the checkpoint's plain
//! dict) yields exactly the batches the uninterrupted loader yields, with shuffling, random
//! augmentation, 0, 1 and 2 workers and persistent workers; consumed batches are not fetched.

use pyrite::data::*;
use pyrite::{DType, Generator, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Sample i: a number drawn from the sample's generator (a random augmentation), the label i,
/// and the worker's `WorkerInfo` seed (-1 on the calling thread).
fn augmented(n: usize, fetched: Arc<AtomicUsize>) -> Arc<dyn Dataset> {
    Arc::new(FnDataset::new(n, move |i| {
        fetched.fetch_add(1, Ordering::Relaxed);
        let g = sample_generator().expect("inside a loader every sample has a generator");
        let noise = Tensor::rand_with([1], DType::F64, Some(&g))?;
        let seed = get_worker_info().map_or(-1, |w| w.seed as i64);
        Ok(Sample::Tuple(vec![noise.into(), Sample::Int(i as i64), Sample::Int(seed)]))
    }))
}

/// (labels, noise, worker seeds) of a batch.
type Batch = (Vec<i64>, Vec<f64>, Vec<i64>);

fn batch(b: pyrite::Result<Sample>) -> Batch {
    let b = b.unwrap();
    let col = |i: usize| b.item(i).unwrap().as_tensor().unwrap().clone();
    (
        col(1).to_vec::<i64>().unwrap(),
        col(0).flatten(0, -1).unwrap().to_vec::<f64>().unwrap(),
        col(2).to_vec::<i64>().unwrap(),
    )
}

fn loader(workers: usize, persistent: bool, seeded: bool, fetched: Arc<AtomicUsize>) -> DataLoader {
    DataLoader::new(
        augmented(11, fetched),
        DataLoaderOptions {
            batch_size: Some(3),
            shuffle: true,
            num_workers: workers,
            persistent_workers: persistent,
            generator: seeded.then(|| Arc::new(Generator::new(5))),
            ..Default::default()
        },
    )
    .unwrap()
}

const EPOCHS: usize = 3;

/// For every cut (epoch, batches consumed), checks that a fresh loader resumed from the state
/// saved at the cut yields the rest of the uninterrupted run.
fn check_every_cut(workers: usize, persistent: bool, seeded: bool) {
    let unused = || Arc::new(AtomicUsize::new(0));
    if !seeded {
        pyrite::manual_seed(11);
    }
    let full_loader = loader(workers, persistent, seeded, unused());
    let full: Vec<Vec<Batch>> =
        (0..EPOCHS).map(|_| full_loader.iter().unwrap().map(batch).collect()).collect();
    let per_epoch = full[0].len();
    assert_eq!(per_epoch, 4);
    for cut_epoch in 0..EPOCHS {
        for cut in 0..=per_epoch {
            if !seeded {
                pyrite::manual_seed(11);
            }
            let first = loader(workers, persistent, seeded, unused());
            for _ in 0..cut_epoch {
                first.iter().unwrap().for_each(drop);
            }
            let mut it = first.iter().unwrap();
            for _ in 0..cut {
                it.next().unwrap().unwrap();
            }
            let saved = first.state_dict().to_object();
            let rng = pyrite::get_rng_state();
            drop(it);
            drop(first);
            if !seeded {
                pyrite::manual_seed(999); // whatever happens in between
            }
            let state = DataLoaderState::from_object(&saved).unwrap();
            assert_eq!(
                (state.epoch as usize, state.mid_epoch),
                if cut < per_epoch { (cut_epoch, true) } else { (cut_epoch + 1, false) }
            );

            let fetched = Arc::new(AtomicUsize::new(0));
            let resumed = loader(workers, persistent, seeded, fetched.clone());
            if !seeded {
                pyrite::set_rng_state(&rng).unwrap(); // the checkpoint's rng_state
            }
            resumed.load_state_dict(&state).unwrap();
            assert_eq!(resumed.state_dict(), state, "a loaded state reads back before iter()");
            let mut rest: Vec<Batch> = vec![];
            for e in state.epoch as usize..EPOCHS {
                rest.extend(resumed.iter().unwrap().map(batch));
                if e == cut_epoch && state.mid_epoch {
                    let left = 11 - 3 * cut;
                    assert_eq!(fetched.load(Ordering::Relaxed), left, "consumed batches are not fetched");
                }
            }
            let expected: Vec<Batch> =
                full.iter().flatten().skip(cut_epoch * per_epoch + cut).cloned().collect();
            let case =
                format!("workers {workers}, persistent {persistent}, seeded {seeded}, cut {cut_epoch}/{cut}");
            assert_eq!(rest.len(), expected.len(), "{case}");
            for (k, (a, b)) in rest.iter().zip(&expected).enumerate() {
                assert_eq!(a.0, b.0, "{case}: labels of batch {k}");
                assert_eq!(a.1, b.1, "{case}: augmentation of batch {k}");
                assert_eq!(a.2, b.2, "{case}: worker seeds of batch {k}");
            }
        }
    }
}

#[test]
fn resuming_at_any_batch_continues_the_uninterrupted_run() {
    for workers in [0, 1, 2] {
        check_every_cut(workers, false, true);
    }
    check_every_cut(2, true, true);
}

#[test]
fn resuming_without_a_loader_generator_uses_the_saved_global_state() {
    // The only test here that draws from the global generator (tests run in parallel).
    check_every_cut(0, false, false);
    check_every_cut(2, true, false);
}

#[test]
fn a_state_for_another_loader_is_an_error() {
    let unused = || Arc::new(AtomicUsize::new(0));
    let l = loader(0, false, true, unused());
    let mut it = l.iter().unwrap();
    it.next();
    let state = l.state_dict();
    drop(it);

    let mut other = state.clone();
    other.num_batches = 7;
    let e = loader(0, false, true, unused()).load_state_dict(&other).unwrap_err();
    assert!(e.to_string().contains("7 batches per epoch, this loader has 4"), "{e}");

    let mut other = state.clone();
    other.batches_yielded = 5;
    assert!(loader(0, false, true, unused()).load_state_dict(&other).is_err());

    let mut other = state.clone();
    other.base_seed ^= 1;
    let l2 = loader(0, false, true, unused());
    l2.load_state_dict(&other).unwrap();
    let e = l2.iter().err().expect("a different base seed is detected");
    assert!(e.to_string().contains("base seed"), "{e}");

    let e = DataLoaderState::from_object(&pyrite::serialization::Object::from(3)).unwrap_err();
    assert!(e.to_string().contains("expected a dict"), "{e}");
    let mut obj = state.to_object();
    obj.as_dict_mut().unwrap().remove("epoch");
    let e = DataLoaderState::from_object(&obj).unwrap_err();
    assert!(e.to_string().contains("'epoch' is missing"), "{e}");
}
