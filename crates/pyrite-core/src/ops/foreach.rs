//! Multi-tensor in-place updates: PyTorch's `_foreach_*` / fused optimizer kernels in one
//! mechanism. [`foreach_apply`] runs a kernel over many groups of same-sized tensors (one
//! group per parameter: the parameter, its gradient, its optimizer state), in one pass over
//! each group's elements, split into chunks that run in parallel across groups and within
//! large ones. Nothing is allocated per element and no temporary tensor is made; the kernel
//! sees plain slices.
//!
//! ```
//! use pyrite_core::ops::foreach::foreach_apply;
//! use pyrite_core::Tensor;
//! // p -= 0.5 * g for two parameters of different sizes, in one call.
//! let (p1, g1) = (Tensor::new([1.0f32, 2.0])?, Tensor::new([2.0f32, 2.0])?);
//! let (p2, g2) = (Tensor::new([4.0f32])?, Tensor::new([-2.0f32])?);
//! foreach_apply::<f32>(&[&p1, &g1, &p2, &g2], 2, 1, &|_, w, r| {
//!     for (p, g) in w[0].iter_mut().zip(r[0]) {
//!         *p -= 0.5 * g;
//!     }
//! })?;
//! assert_eq!(p1.to_vec::<f32>()?, [0.0, 1.0]);
//! assert_eq!(p2.to_vec::<f32>()?, [5.0]);
//! # Ok::<(), pyrite_core::Error>(())
//! ```

use crate::dtype::Element;
use crate::error::Result;
use crate::storage::{Storage, StorageCell};
use crate::tensor::Tensor;
use crate::{bail, DType, Device};
use smallvec::SmallVec;
use std::sync::{Arc, RwLockReadGuard, RwLockWriteGuard};

/// Elements one task handles at most; groups larger than this are split.
const CHUNK: usize = 1 << 15;
/// Below this many elements in all, the call runs on the calling thread.
const PARALLEL_MIN: usize = 1 << 15;

/// The kernel: `(group, written slices, read slices)`; all slices of one call have the same
/// length, a chunk of the group's elements in row-major order.
pub type ForeachKernel<'k, T> = dyn Fn(usize, &mut [&mut [T]], &[&[T]]) + Sync + 'k;

#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

enum Guard<'a> {
    Read(#[allow(dead_code)] RwLockReadGuard<'a, Storage>),
    Write(#[allow(dead_code)] RwLockWriteGuard<'a, Storage>),
}

/// The checks every foreach call makes: groups of `arity` tensors with the first `n_write`
/// written, every tensor of `dtype` on `device`, the tensors of a group of one size, written
/// tensors contiguous and writable.
fn check_groups(
    tensors: &[&Tensor],
    arity: usize,
    n_write: usize,
    dtype: DType,
    device: Device,
) -> Result<()> {
    if arity == 0 || n_write > arity || !tensors.len().is_multiple_of(arity) {
        bail!(
            Value,
            "foreach: {} tensors cannot be split into groups of {arity} with {n_write} written",
            tensors.len()
        );
    }
    for (i, t) in tensors.iter().enumerate() {
        let (g, slot) = (i / arity, i % arity);
        let first = tensors[g * arity];
        if t.dtype() != dtype {
            bail!(
                DType,
                "foreach: expected every tensor to be {:?}, got {:?} (group {g}, tensor {slot})",
                dtype,
                t.dtype()
            );
        }
        if t.device() != device {
            bail!(
                Device,
                "foreach: expected tensors on {device}, got {} (group {g}, tensor {slot})",
                t.device()
            );
        }
        if t.numel() != first.numel() {
            bail!(
                Shape,
                "foreach: the tensors of group {g} differ in size: {:?} and {:?}",
                first.dims(),
                t.dims()
            );
        }
        if slot < n_write {
            if !t.is_contiguous() {
                bail!(Value, "foreach: the tensor updated in place must be contiguous (group {g}, tensor {slot}, stride {:?})", t.stride());
            }
            t.check_inplace_allowed()?;
        }
    }
    Ok(())
}

/// Applies `kernel` in place over groups of tensors. `tensors` holds the groups one after the
/// other, `arity` tensors each; in each group the first `n_write` are updated in place (their
/// version counters bump, as with any in-place op) and the rest only read. The tensors of a
/// group must have the same number of elements and the dtype `T`; written tensors must be
/// contiguous, and no written tensor may share memory with another tensor of the call. Read
/// tensors that are not contiguous are copied first.
///
/// Autograd does not see this update (it is for optimizers, which run under `no_grad`).
pub fn foreach_apply<T: Element>(
    tensors: &[&Tensor],
    arity: usize,
    n_write: usize,
    kernel: &ForeachKernel<'_, T>,
) -> Result<()> {
    check_groups(tensors, arity, n_write, T::DTYPE, Device::Cpu)?;
    let groups = tensors.len() / arity;
    // Read tensors that are not contiguous are copied; the copies live until the end.
    let mut copies: Vec<Tensor> = Vec::new();
    let mut views: Vec<&Tensor> = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        if i % arity >= n_write && !t.is_contiguous() {
            copies.push(t.contiguous()?);
        }
    }
    let mut next_copy = 0;
    for (i, t) in tensors.iter().enumerate() {
        if i % arity >= n_write && !t.is_contiguous() {
            views.push(&copies[next_copy]);
            next_copy += 1;
        } else {
            views.push(t);
        }
    }

    // Lock every storage once, in address order (as `lock_all` does), writers exclusively.
    let mut cells: Vec<(&Arc<StorageCell>, bool)> = Vec::with_capacity(views.len());
    for (i, t) in views.iter().enumerate() {
        if t.numel() > 0 {
            cells.push((t.storage(), i % arity < n_write));
        }
    }
    cells.sort_by_key(|(c, w)| (Arc::as_ptr(c) as usize, !*w));
    let mut unique: Vec<(&Arc<StorageCell>, bool)> = Vec::with_capacity(cells.len());
    for (c, w) in cells {
        match unique.last() {
            Some((prev, pw)) if Arc::ptr_eq(prev, c) => {
                if *pw || w {
                    bail!(
                        Value,
                        "foreach: a tensor updated in place shares memory with another tensor of the call"
                    );
                }
            }
            _ => unique.push((c, w)),
        }
    }
    let mut guards: Vec<(usize, Guard<'_>)> = Vec::with_capacity(unique.len());
    for (c, w) in &unique {
        let g = if *w { Guard::Write(c.write()) } else { Guard::Read(c.read()) };
        guards.push((Arc::as_ptr(c) as usize, g));
    }
    let base = |t: &Tensor| -> SendPtr<T> {
        if t.numel() == 0 {
            return SendPtr(std::ptr::NonNull::<T>::dangling().as_ptr());
        }
        let key = Arc::as_ptr(t.storage()) as usize;
        let i = guards.binary_search_by_key(&key, |(k, _)| *k).expect("locked above");
        let p = match &guards[i].1 {
            Guard::Read(g) => g.cpu().as_ptr() as *mut T,
            Guard::Write(g) => g.cpu().as_ptr() as *mut T,
        };
        // SAFETY: a contiguous layout covers `offset..offset + numel` of its storage.
        SendPtr(unsafe { p.add(t.storage_offset()) })
    };
    let ptrs: Vec<SendPtr<T>> = views.iter().map(|t| base(t)).collect();

    // Tasks: (group, start, end) chunks of at most CHUNK elements.
    let mut tasks: Vec<(usize, usize, usize)> = Vec::new();
    let mut total = 0;
    for g in 0..groups {
        let n = views[g * arity].numel();
        total += n;
        let mut s = 0;
        while s < n {
            let e = (s + CHUNK).min(n);
            tasks.push((g, s, e));
            s = e;
        }
    }
    let run = |t: usize| {
        let (g, s, e) = tasks[t];
        let ps = &ptrs[g * arity..(g + 1) * arity];
        // SAFETY: the storages are locked above (written ones exclusively, and no written
        // storage is shared with another tensor), every pointer covers `numel` elements, and
        // tasks cover disjoint ranges of each group.
        let mut w: SmallVec<[&mut [T]; 4]> = ps[..n_write]
            .iter()
            .map(|p| unsafe { std::slice::from_raw_parts_mut(p.0.add(s), e - s) })
            .collect();
        let r: SmallVec<[&[T]; 4]> = ps[n_write..]
            .iter()
            .map(|p| unsafe { std::slice::from_raw_parts(p.0.add(s) as *const T, e - s) })
            .collect();
        kernel(g, &mut w, &r);
    };
    if total < PARALLEL_MIN || tasks.len() == 1 {
        (0..tasks.len()).for_each(run);
    } else {
        crate::threads::run_tasks(tasks.len(), run);
    }
    drop(guards);
    Ok(())
}

/// An update for CUDA tensors: the per-element C code a foreach kernel runs (see
/// `pyrite_cuda_runtime::kernels::foreach`: `t0[i]`, `t1[i]`, ... are the group's tensors,
/// `tg` the last, `c[k]` the group's coefficients as doubles, `T` the element type).
#[derive(Clone, Copy, Debug)]
pub struct DeviceKernel<'a> {
    /// The kernel's name (one name, one body).
    pub name: &'a str,
    pub body: &'a str,
}

/// [`foreach_apply`] on CUDA tensors: `kernel` over the groups of `tensors` (f32 or f64, one
/// device), the group `g`'s coefficients `coefs[g * ncoef..][..ncoef]`, in one launch.
/// Written tensors must be contiguous; read ones are copied when they are not.
pub fn foreach_apply_cuda(
    tensors: &[&Tensor],
    arity: usize,
    n_write: usize,
    kernel: DeviceKernel<'_>,
    coefs: &[f64],
    ncoef: usize,
) -> Result<()> {
    let (dtype, device) = tensors.first().map_or((DType::F32, Device::Cuda(0)), |t| (t.dtype(), t.device()));
    check_groups(tensors, arity, n_write, dtype, device)?;
    if coefs.len() != tensors.len() / arity * ncoef {
        bail!(Value, "foreach: {} coefficients for {} groups of {ncoef}", coefs.len(), tensors.len() / arity);
    }
    crate::cuda::foreach(tensors, arity, n_write, kernel, coefs, ncoef)
}
