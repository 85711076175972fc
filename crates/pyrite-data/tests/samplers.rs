//! Samplers against PyTorch's semantics. Our RNG is Philox, not PyTorch's Mersenne Twister, so
//! random orders are checked by their properties and by PyTorch's arithmetic applied to our
//! permutation; deterministic sequences are PyTorch's exact output (torch 2.x).

use std::collections::BTreeSet;
use std::sync::Arc;

use pyrite::data::{
    BatchSampler, BatchSampling, DistributedSampler, DistributedSamplerOptions, RandomSampler,
    RandomSamplerOptions, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
};
use pyrite::{manual_seed, ErrorKind, Generator, Tensor};

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort();
    v
}

fn dist(n: usize, r: usize, rank: usize, shuffle: bool, drop_last: bool) -> DistributedSampler {
    let o = DistributedSamplerOptions { num_replicas: r, rank, shuffle, seed: 0, drop_last };
    DistributedSampler::with_options(n, o).unwrap()
}

#[test]
fn sequential_sampler_is_in_order() {
    let s = SequentialSampler::new(4);
    assert_eq!(s.indices().unwrap(), vec![0, 1, 2, 3]);
    assert_eq!(s.len(), 4);
    assert!(SequentialSampler::new(0).is_empty());
}

#[test]
fn random_sampler_with_generator_is_reproducible_and_new_each_epoch() {
    let mk = || {
        let o = RandomSamplerOptions { generator: Some(Generator::new(7)), ..Default::default() };
        RandomSampler::with_options(20, o).unwrap()
    };
    let (a, b) = (mk(), mk());
    let (e1, e2) = (a.indices().unwrap(), a.indices().unwrap());
    assert_eq!(sorted(e1.clone()), (0..20).collect::<Vec<_>>());
    assert_eq!(sorted(e2.clone()), (0..20).collect::<Vec<_>>());
    assert_ne!(e1, e2, "the second epoch must be a new permutation");
    assert_eq!(b.indices().unwrap(), e1);
    assert_eq!(b.indices().unwrap(), e2);
    assert_eq!(a.len(), 20);
}

#[test]
fn random_sampler_num_samples_beyond_len_concatenates_permutations() {
    // PyTorch: num_samples // n full permutations, then the first num_samples % n of another.
    let o = RandomSamplerOptions {
        num_samples: Some(13),
        generator: Some(Generator::new(1)),
        ..Default::default()
    };
    let s = RandomSampler::with_options(5, o).unwrap();
    let idx = s.indices().unwrap();
    assert_eq!(idx.len(), 13);
    assert_eq!(s.len(), 13);
    // The same as drawing three permutations of 5 from the same seed and truncating.
    let g = Generator::new(1);
    let mut expected = Vec::new();
    for _ in 0..3 {
        expected.extend(Tensor::randperm_with(5, Some(&g)).unwrap().to_vec::<i64>().unwrap());
    }
    let expected: Vec<usize> = expected[..13].iter().map(|&i| i as usize).collect();
    assert_eq!(idx, expected);
    assert_eq!(sorted(idx[0..5].to_vec()), vec![0, 1, 2, 3, 4]);
    assert_eq!(sorted(idx[5..10].to_vec()), vec![0, 1, 2, 3, 4]);
    assert_eq!(BTreeSet::from_iter(idx[10..].iter().copied()).len(), 3);
}

#[test]
fn random_sampler_with_replacement_draws_in_range() {
    let o = RandomSamplerOptions {
        replacement: true,
        num_samples: Some(100),
        generator: Some(Generator::new(3)),
    };
    let s = RandomSampler::with_options(4, o).unwrap();
    let idx = s.indices().unwrap();
    assert_eq!(idx.len(), 100);
    assert!(idx.iter().all(|&i| i < 4));
    assert_eq!(BTreeSet::from_iter(idx).len(), 4, "100 draws from 4 should hit every index");
}

/// The only test in this file that draws from the global generator (tests run in parallel).
#[test]
fn random_sampler_without_generator_follows_the_global_seed() {
    let s = RandomSampler::new(50).unwrap();
    manual_seed(123);
    let a = s.indices().unwrap();
    let a2 = s.indices().unwrap();
    manual_seed(123);
    let b = s.indices().unwrap();
    assert_eq!(a, b);
    assert_ne!(a, a2);
    assert_eq!(sorted(a), (0..50).collect::<Vec<_>>());
}

#[test]
fn random_sampler_rejects_zero_samples() {
    let e = RandomSampler::new(0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert_eq!(e.message(), "num_samples should be a positive integer value, but got num_samples=0");
    let o = RandomSamplerOptions { num_samples: Some(0), ..Default::default() };
    assert!(RandomSampler::with_options(5, o).is_err());
}

#[test]
fn subset_random_sampler_permutes_the_subset() {
    let s = SubsetRandomSampler::new(vec![10, 20, 30, 40], Some(Generator::new(0)));
    let idx = s.indices().unwrap();
    assert_eq!(sorted(idx), vec![10, 20, 30, 40]);
    assert_eq!(s.len(), 4);
}

#[test]
fn weighted_sampler_never_draws_zero_weights() {
    let w = vec![0.0, 1.0, 0.0, 2.0, 0.5];
    let s = WeightedRandomSampler::new(w.clone(), 200, true, Some(Generator::new(5))).unwrap();
    let idx = s.indices().unwrap();
    assert_eq!(idx.len(), 200);
    assert!(idx.iter().all(|&i| i == 1 || i == 3 || i == 4), "{idx:?}");
    // Without replacement: distinct indices among the positive weights.
    let s = WeightedRandomSampler::new(w, 3, false, Some(Generator::new(5))).unwrap();
    assert_eq!(sorted(s.indices().unwrap()), vec![1, 3, 4]);
    assert_eq!(s.len(), 3);
}

#[test]
fn weighted_sampler_errors() {
    let e = WeightedRandomSampler::new(vec![1.0], 0, true, None).unwrap_err();
    assert_eq!(e.message(), "num_samples should be a positive integer value, but got num_samples=0");
    assert!(WeightedRandomSampler::new(vec![1.0, -1.0], 1, true, None).is_err());
    assert!(WeightedRandomSampler::new(vec![0.0, 0.0], 1, true, None).is_err());
    assert!(WeightedRandomSampler::new(vec![], 1, true, None).is_err());
    assert!(WeightedRandomSampler::new(vec![1.0, f64::NAN], 1, true, None).is_err());
    assert!(WeightedRandomSampler::new(vec![1.0, 0.0, 1.0], 3, false, None).is_err());
}

#[test]
fn batch_sampler_batches_and_len() {
    // PyTorch: list(BatchSampler(SequentialSampler(range(10)), 3, False))
    let b = BatchSampler::new(Arc::new(SequentialSampler::new(10)), 3, false).unwrap();
    assert_eq!(b.batches().unwrap(), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9]]);
    assert_eq!(b.len(), 4);
    let b = BatchSampler::new(Arc::new(SequentialSampler::new(10)), 3, true).unwrap();
    assert_eq!(b.batches().unwrap(), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]);
    assert_eq!(b.len(), 3);
    let b = BatchSampler::new(Arc::new(SequentialSampler::new(9)), 3, false).unwrap();
    assert_eq!(b.len(), 3);
    assert_eq!(b.batches().unwrap().len(), 3);
    let b = BatchSampler::new(Arc::new(SequentialSampler::new(2)), 3, true).unwrap();
    assert!(b.is_empty());
    assert!(b.batches().unwrap().is_empty());
    let e = BatchSampler::new(Arc::new(SequentialSampler::new(2)), 0, true).err().unwrap();
    assert_eq!(e.message(), "batch_size should be a positive integer value, but got batch_size=0");
}

#[test]
fn distributed_sampler_without_shuffle_matches_pytorch() {
    // torch.utils.data.DistributedSampler(range(n), num_replicas=3, rank=r, shuffle=False, drop_last=dl)
    let cases: [(usize, bool, [&[usize]; 3]); 6] = [
        (10, false, [&[0, 3, 6, 9], &[1, 4, 7, 0], &[2, 5, 8, 1]]),
        (11, false, [&[0, 3, 6, 9], &[1, 4, 7, 10], &[2, 5, 8, 0]]),
        (2, false, [&[0], &[1], &[0]]),
        (10, true, [&[0, 3, 6], &[1, 4, 7], &[2, 5, 8]]),
        (11, true, [&[0, 3, 6], &[1, 4, 7], &[2, 5, 8]]),
        (2, true, [&[], &[], &[]]),
    ];
    for (n, drop_last, expected) in cases {
        for (rank, exp) in expected.iter().enumerate() {
            let s = dist(n, 3, rank, false, drop_last);
            assert_eq!(s.indices().unwrap(), exp.to_vec(), "n={n} drop_last={drop_last} rank={rank}");
            assert_eq!(s.len(), exp.len());
        }
    }
}

#[test]
fn distributed_sampler_pads_by_repeating_the_whole_list() {
    // PyTorch: n=2, 5 replicas → padding 3 > 2, so indices * ceil(3/2) truncated: [0,1,0,1,0].
    let got: Vec<Vec<usize>> = (0..5).map(|r| dist(2, 5, r, false, false).indices().unwrap()).collect();
    assert_eq!(got, vec![vec![0], vec![1], vec![0], vec![1], vec![0]]);
    // An empty dataset gives empty shares.
    assert!(dist(0, 2, 1, true, false).indices().unwrap().is_empty());
}

#[test]
fn distributed_sampler_shuffle_is_pytorch_arithmetic_on_our_permutation() {
    for drop_last in [false, true] {
        let n = 10;
        for epoch in [0u64, 1, 5] {
            // The permutation PyTorch would draw: randperm(n) from a generator seeded seed+epoch.
            let perm: Vec<usize> = Tensor::randperm_with(n, Some(&Generator::new(42 + epoch)))
                .unwrap()
                .to_vec::<i64>()
                .unwrap()
                .into_iter()
                .map(|i| i as usize)
                .collect();
            let mut all = Vec::new();
            for rank in 0..3 {
                let o =
                    DistributedSamplerOptions { num_replicas: 3, rank, shuffle: true, seed: 42, drop_last };
                let s = DistributedSampler::with_options(n, o).unwrap();
                s.set_epoch(epoch);
                let idx = s.indices().unwrap();
                let expected: Vec<usize> = if drop_last {
                    (0..3).map(|j| perm[rank + 3 * j]).collect()
                } else {
                    let padded: Vec<usize> = perm.iter().chain(&perm[..2]).copied().collect();
                    (0..4).map(|j| padded[rank + 3 * j]).collect()
                };
                assert_eq!(idx, expected, "rank={rank} epoch={epoch} drop_last={drop_last}");
                all.extend(idx);
            }
            let distinct = BTreeSet::from_iter(all.iter().copied());
            if drop_last {
                assert_eq!(all.len(), 9);
                assert_eq!(distinct.len(), 9, "drop_last shares are disjoint");
            } else {
                assert_eq!(all.len(), 12);
                assert_eq!(distinct, (0..10).collect(), "the union covers the dataset");
            }
        }
    }
}

#[test]
fn distributed_sampler_epochs_differ_and_repeat() {
    let s = DistributedSampler::new(100, 2, 0).unwrap();
    let e0 = s.indices().unwrap();
    assert_eq!(s.indices().unwrap(), e0, "same epoch, same order");
    s.set_epoch(1);
    assert_eq!(s.epoch(), 1);
    assert_ne!(s.indices().unwrap(), e0);
    s.set_epoch(0);
    assert_eq!(s.indices().unwrap(), e0);
    assert_eq!(s.len(), 50);
    assert_eq!(s.total_size(), 100);
}

#[test]
fn distributed_sampler_rejects_bad_rank() {
    let e = DistributedSampler::new(10, 3, 3).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert_eq!(e.message(), "Invalid rank 3, rank should be in the interval [0, 2]");
    assert!(DistributedSampler::new(10, 0, 0).is_err());
}

#[test]
fn samplers_work_as_trait_objects() {
    let samplers: Vec<Box<dyn Sampler>> = vec![
        Box::new(SequentialSampler::new(3)),
        Box::new(
            RandomSampler::with_options(
                3,
                RandomSamplerOptions { generator: Some(Generator::new(0)), ..Default::default() },
            )
            .unwrap(),
        ),
        Box::new(dist(3, 1, 0, false, false)),
    ];
    for s in &samplers {
        assert_eq!(sorted(s.indices().unwrap()), vec![0, 1, 2]);
    }
    let b: Box<dyn BatchSampling> =
        Box::new(BatchSampler::new(Arc::new(samplers.into_iter().next().unwrap()), 2, false).unwrap());
    assert_eq!(b.batches().unwrap(), vec![vec![0, 1], vec![2]]);
}
