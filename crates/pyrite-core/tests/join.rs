//! Joining, splitting and rearranging ops against PyTorch (reference/gen_join.py), plus the
//! view semantics of the splitting ops and thread-count independence of `cat`.

mod common;

use common::one;
use pyrite_core::{DType, Tensor};

#[test]
fn join_matches_pytorch() {
    common::check_family("join", |c| {
        let opt_dim = || c.opt("dim").map(|v| v.as_i64().unwrap() as isize);
        match c.op.as_str() {
            // torch.cat(inputs, dim)
            "cat" => one(Tensor::cat(&c.inputs, c.i("dim"))),
            // torch.stack(inputs, dim)
            "stack" => one(Tensor::stack(&c.inputs, c.i("dim"))),
            // torch.hstack(inputs) / vstack / dstack
            "hstack" => one(Tensor::hstack(&c.inputs)),
            "vstack" => one(Tensor::vstack(&c.inputs)),
            "dstack" => one(Tensor::dstack(&c.inputs)),
            // torch.chunk(a, chunks, dim)
            "chunk" => c.x(0).chunk(c.u("chunks"), c.i("dim")),
            // torch.split(a, split_size, dim)
            "split" => c.x(0).split(c.u("split_size"), c.i("dim")),
            // torch.split(a, [sizes], dim)
            "split_sizes" => c.x(0).split_sizes(&c.sizes("sizes"), c.i("dim")),
            // torch.unbind(a, dim)
            "unbind" => c.x(0).unbind(c.i("dim")),
            // torch.flip(a, dims)
            "flip" => one(c.x(0).flip(&c.dims("dims"))),
            // torch.roll(a, shifts, dims)
            "roll" => one(c.x(0).roll(&c.dims("shifts"), &c.dims("dims"))),
            // a.repeat(*repeats)
            "repeat" => one(c.x(0).repeat(&c.sizes("repeats"))),
            // torch.tile(a, reps)
            "tile" => one(c.x(0).tile(&c.sizes("reps"))),
            // torch.repeat_interleave(a, repeats, dim=dim)
            "repeat_interleave" => one(c.x(0).repeat_interleave(c.u("repeats"), opt_dim())),
            // torch.repeat_interleave(a, repeats_tensor, dim=dim)
            "repeat_interleave_tensor" => one(c.x(0).repeat_interleave_tensor(c.x(1), opt_dim())),
            // torch.repeat_interleave(repeats_tensor)
            "repeat_interleave_counts" => one(c.x(0).repeat_interleave_counts()),
            _ => c.unhandled(),
        }
    });
}

fn arange(n: usize) -> Tensor {
    Tensor::arange(0.0, n as f64, 1.0, DType::F32).unwrap()
}

#[test]
fn splits_are_views_sharing_storage() {
    let x = arange(12).reshape([3, 4]).unwrap();
    let parts = x.split(3, 1).unwrap();
    assert_eq!(parts.len(), 2);
    assert!(parts.iter().all(|p| p.same_storage(&x)));
    parts[1].fill_(-1.0).unwrap();
    assert_eq!(x.to_vec2::<f32>().unwrap()[0], vec![0., 1., 2., -1.]);
    let rows = x.unbind(0).unwrap();
    rows[2].zero_().unwrap();
    assert_eq!(x.to_vec2::<f32>().unwrap()[2], vec![0., 0., 0., 0.]);
    let c = x.chunk(2, 0).unwrap();
    assert_eq!(c[0].dims(), &[2, 4]);
    assert!(c[1].same_storage(&x));
    let s = x.split_sizes(&[1, 2], 0).unwrap();
    assert_eq!(s[1].storage_offset(), 4);
}

#[test]
fn joins_are_fresh_contiguous_tensors() {
    let a = arange(6).reshape([2, 3]).unwrap();
    let t = a.t().unwrap();
    for r in [
        Tensor::cat(&[&t, &t], 0).unwrap(),
        Tensor::stack(&[&a, &a], 2).unwrap(),
        a.flip(&[0]).unwrap(),
        a.roll(&[0], &[0]).unwrap(),
        a.repeat(&[1, 1]).unwrap(),
        Tensor::cat(&[&a], 0).unwrap(),
    ] {
        assert!(r.is_contiguous());
        assert!(!r.same_storage(&a));
    }
}

#[test]
fn cat_errors_read_like_pytorch() {
    let a = Tensor::zeros([2, 3], DType::F32).unwrap();
    let b = Tensor::zeros([2, 2], DType::F32).unwrap();
    let e = Tensor::cat(&[&a, &b], 0).err().unwrap();
    assert_eq!(
        e.message(),
        "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 2 for tensor number 1 in the list."
    );
    let none: [&Tensor; 0] = [];
    assert!(Tensor::cat(&none, 0).is_err());
    assert!(Tensor::stack(&none, 0).is_err());
}

#[test]
fn large_cat_does_not_depend_on_the_thread_count() {
    let a = arange(200_000).reshape([1000, 200]).unwrap();
    let b = arange(150_000).reshape([1000, 150]).unwrap();
    let e = Tensor::zeros([1000, 0], DType::F32).unwrap();
    let run = || {
        (
            Tensor::cat(&[&a, &e, &b, &a], 1).unwrap().to_vec::<f32>().unwrap(),
            Tensor::cat(&[&a.reshape([-1]).unwrap(), &b.reshape([-1]).unwrap()], 0)
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            a.flip(&[0, 1]).unwrap().to_vec::<f32>().unwrap(),
        )
    };
    let before = pyrite_core::get_num_threads();
    pyrite_core::set_num_threads(1);
    let x = run();
    pyrite_core::set_num_threads(3);
    let y = run();
    pyrite_core::set_num_threads(before);
    assert!(x == y);
    // Row 1 of the first cat: a[1] (200), b[1] (150), a[1] (200).
    let row = &x.0[550..1100];
    assert_eq!(row[0], 200.0);
    assert_eq!(row[200], 150.0);
    assert_eq!(row[350], 200.0);
    assert_eq!(x.2[0], 199_999.0);
}
