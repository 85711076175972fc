//! Tensor ops, one family per file. Every family builds on the few primitives here:
//!
//! - [`map1`], [`map2`], [`map3`]: elementwise kernels over broadcast, strided operands, into a
//!   fresh tensor or into an existing one (`out=` and in-place ops), multi-threaded for large
//!   tensors;
//! - [`Tensor::with_slice`]: read access to a contiguous tensor's elements;
//! - `Tensor::build`: a fresh contiguous tensor filled by a closure.

pub mod attention;
#[cfg(target_arch = "x86_64")]
pub(crate) mod bf16gemm;
pub mod binary;
pub mod cast;
pub mod compare;
pub mod conv;
pub(crate) mod derivatives;
pub mod einsum;
pub mod foreach;
pub mod index;
pub mod inplace;
pub mod join;
pub mod linalg;
pub mod norm;
pub mod out;
pub mod pool;
pub mod random;
pub mod reduce;
mod reduce_cuda;
pub mod scan;
mod sgemm;
pub mod softmax;
pub mod sort;
pub mod unary;

use crate::layout::Layout;
use crate::shape::{same_dims, Shape};
use crate::storage::{Storage, StorageCell};
use crate::stream::{worth_streaming, write_run};
use crate::strided::Strided;
use crate::{alloc::CpuBuffer, bail, Element, Result, Tensor};
use std::sync::{RwLockReadGuard, RwLockWriteGuard};

/// Elements per thread below which kernels stay single-threaded.
pub(crate) const GRAIN: usize = 32 * 1024;

/// Where an elementwise kernel writes.
#[derive(Clone, Copy)]
pub(crate) enum Out<'a> {
    /// A fresh contiguous tensor.
    New,
    /// An existing tensor of the result's shape and dtype (`out=`, in-place ops).
    Into(&'a Tensor),
}

#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: kernels write disjoint index ranges from different threads.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

/// Held for its drop: releases the lock.
#[allow(dead_code)]
enum Guard<'a> {
    R(RwLockReadGuard<'a, Storage>),
    W(RwLockWriteGuard<'a, Storage>),
}

/// Locks the output storage for writing (if any) and the input storages for reading, each
/// storage once, in address order (so two threads never deadlock), and returns base pointers.
fn lock_all<'a, const N: usize>(
    out: Option<&'a StorageCell>,
    inputs: [&'a StorageCell; N],
) -> (smallvec::SmallVec<[Guard<'a>; 4]>, Option<*mut u8>, [*const u8; N]) {
    let mut cells: smallvec::SmallVec<[&'a StorageCell; 4]> = smallvec::SmallVec::new();
    if let Some(o) = out {
        cells.push(o);
    }
    for c in inputs {
        if !cells.iter().any(|x| std::ptr::eq(*x, c)) {
            cells.push(c);
        }
    }
    cells.sort_by_key(|c| *c as *const StorageCell as usize);
    let mut guards: smallvec::SmallVec<[Guard<'a>; 4]> = smallvec::SmallVec::new();
    let mut ptrs: smallvec::SmallVec<[(usize, *const u8); 4]> = smallvec::SmallVec::new();
    let mut out_ptr = None;
    for c in cells {
        let key = c as *const StorageCell as usize;
        if out.is_some_and(|o| std::ptr::eq(o, c)) {
            let mut g = c.write();
            let p = g.cpu_mut().as_mut_ptr();
            out_ptr = Some(p);
            ptrs.push((key, p as *const u8));
            guards.push(Guard::W(g));
        } else {
            let g = c.read();
            ptrs.push((key, g.cpu().as_ptr()));
            guards.push(Guard::R(g));
        }
    }
    let find = |c: &StorageCell| ptrs.iter().find(|(k, _)| *k == c as *const StorageCell as usize).unwrap().1;
    let inp = std::array::from_fn(|k| find(inputs[k]));
    (guards, out_ptr, inp)
}

/// The output tensor and its layout, or a fresh buffer for `shape`.
fn prepare_out<R: Element>(
    out: Out<'_>,
    shape: &Shape,
    op: &str,
) -> Result<(Option<CpuBuffer>, Option<Tensor>)> {
    match out {
        Out::New => Ok((Some(CpuBuffer::for_shape(&shape, std::mem::size_of::<R>())?), None)),
        Out::Into(t) => {
            t.check_inplace_allowed()?;
            if t.dims() != shape.dims() {
                bail!(
                    Shape,
                    "{op}: output with shape {} doesn't match the broadcast shape {}",
                    t.shape(),
                    shape
                );
            }
            check_no_internal_overlap(t, op)?;
            if t.dtype() != R::DTYPE {
                bail!(
                    DType,
                    "{op}: result type {} can't be cast to the desired output type {}",
                    R::DTYPE,
                    t.dtype()
                );
            }
            Ok((None, Some(t.clone())))
        }
    }
}

/// PyTorch's `assert_no_internal_overlap` for tensors written in place or as `out=`: a
/// written-to tensor may not have two elements at one memory location (a dim of size > 1 and
/// stride 0, as `expand` makes). A tensor with no elements has no such pair.
pub(crate) fn check_no_internal_overlap(t: &Tensor, op: &str) -> Result<()> {
    if t.numel() > 0 && t.dims().iter().zip(t.stride()).any(|(&d, &s)| d > 1 && s == 0) {
        bail!(
            Value,
            "{op}: unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation."
        );
    }
    Ok(())
}

/// An input that shares the output's storage through a different layout is copied first, so
/// a kernel never reads an element after writing it.
fn detach_overlap(x: &Tensor, out: Out<'_>) -> Result<Tensor> {
    if let Out::Into(o) = out
        && x.same_storage(o)
        && x.layout() != o.layout()
    {
        return x.deep_clone();
    }
    Ok(x.clone())
}

/// Whether an elementwise op writing into `out` streams its stores (see [`crate::stream`]).
fn streams<R>(out: &Layout) -> bool {
    out.is_contiguous() && worth_streaming(out.numel() * std::mem::size_of::<R>())
}

/// Runs a strided elementwise loop over `n` elements with operand pointers already resolved.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn drive<const K: usize>(
    n: usize,
    shape: &[usize],
    strides: [&[usize]; K],
    offsets: [usize; K],
    run: impl Fn([usize; K], usize, [usize; K]) + Sync,
) {
    let it = Strided::new(shape, strides, offsets);
    crate::threads::parallel_for(n, GRAIN, |a, b| it.for_range(a, b, |_, offs, len, st| run(offs, len, st)));
}

/// Elementwise kernel with one input: `out[i] = f(a[i])`.
pub(crate) fn map1<A: Element, R: Element>(
    a: &Tensor,
    shape: &Shape,
    out: Out<'_>,
    op: &str,
    f: impl Fn(A) -> R + Sync + Send,
) -> Result<Tensor> {
    a.device().check_cpu_kernel()?;
    debug_assert_eq!(a.dtype(), A::DTYPE);
    if matches!(out, Out::New) && a.is_contiguous() && a.dims() == shape.dims() {
        return map1_contiguous(a, f);
    }
    let a = detach_overlap(a, out)?;
    let la = a.layout().expand(shape.dims(), op)?;
    let (mut fresh, target) = prepare_out::<R>(out, shape, op)?;
    let lo = target.as_ref().map(|t| t.layout().clone()).unwrap_or_else(|| Layout::contiguous(shape.clone()));
    {
        let (_g, optr, [pa]) = lock_all(target.as_ref().map(|t| &**t.storage()), [&**a.storage()]);
        let po = SendPtr(match (&mut fresh, optr) {
            (Some(b), _) => b.as_mut_ptr() as *mut R,
            (None, Some(p)) => p as *mut R,
            _ => unreachable!(),
        });
        let pa = SendPtr(pa as *mut A);
        let stream = streams::<R>(&lo);
        drive(
            shape.numel(),
            shape.dims(),
            [lo.strides(), la.strides()],
            [lo.offset(), la.offset()],
            |[oo, oa], len, [so, sa]| {
                let (po, pa) = (po, pa);
                // SAFETY: offsets come from validated layouts within the storages.
                unsafe {
                    let o = po.0.add(oo);
                    let a = pa.0.add(oa) as *const A;
                    if so == 1 && sa == 1 {
                        write_run(o, len, stream, |i| f(*a.add(i)));
                    } else if so == 1 && sa == 0 {
                        let v = f(*a);
                        for i in 0..len {
                            *o.add(i) = v;
                        }
                    } else {
                        for i in 0..len {
                            *o.add(i * so) = f(*a.add(i * sa));
                        }
                    }
                }
            },
        );
    }
    Ok(match fresh {
        Some(buf) => Tensor::from_cpu_buffer(buf, shape.clone(), R::DTYPE),
        None => target.unwrap(),
    })
}

/// Elementwise kernel with two broadcast inputs: `out[i] = f(a[i], b[i])`.
pub(crate) fn map2<A: Element, B: Element, R: Element>(
    a: &Tensor,
    b: &Tensor,
    shape: &Shape,
    out: Out<'_>,
    op: &str,
    f: impl Fn(A, B) -> R + Sync + Send,
) -> Result<Tensor> {
    a.device().check_cpu_kernel()?;
    b.device().check_cpu_kernel()?;
    debug_assert_eq!(a.dtype(), A::DTYPE);
    debug_assert_eq!(b.dtype(), B::DTYPE);
    if matches!(out, Out::New)
        && a.is_contiguous()
        && b.is_contiguous()
        && same_dims(a.dims(), shape.dims())
        && (same_dims(b.dims(), shape.dims()) || b.numel() == 1)
    {
        return map2_contiguous(a, b, f);
    }
    let a = detach_overlap(a, out)?;
    let b = detach_overlap(b, out)?;
    let la = a.layout().expand(shape.dims(), op)?;
    let lb = b.layout().expand(shape.dims(), op)?;
    let (mut fresh, target) = prepare_out::<R>(out, shape, op)?;
    let lo = target.as_ref().map(|t| t.layout().clone()).unwrap_or_else(|| Layout::contiguous(shape.clone()));
    {
        let (_g, optr, [pa, pb]) =
            lock_all(target.as_ref().map(|t| &**t.storage()), [&**a.storage(), &**b.storage()]);
        let po = SendPtr(match (&mut fresh, optr) {
            (Some(b), _) => b.as_mut_ptr() as *mut R,
            (None, Some(p)) => p as *mut R,
            _ => unreachable!(),
        });
        let (pa, pb) = (SendPtr(pa as *mut A), SendPtr(pb as *mut B));
        let stream = streams::<R>(&lo);
        drive(
            shape.numel(),
            shape.dims(),
            [lo.strides(), la.strides(), lb.strides()],
            [lo.offset(), la.offset(), lb.offset()],
            |[oo, oa, ob], len, [so, sa, sb]| {
                let (po, pa, pb) = (po, pa, pb);
                // SAFETY: offsets come from validated layouts within the storages.
                unsafe {
                    let o = po.0.add(oo);
                    let a = pa.0.add(oa) as *const A;
                    let b = pb.0.add(ob) as *const B;
                    if so == 1 && sa == 1 && sb == 1 {
                        write_run(o, len, stream, |i| f(*a.add(i), *b.add(i)));
                    } else if so == 1 && sa == 1 && sb == 0 {
                        let bv = *b;
                        write_run(o, len, stream, |i| f(*a.add(i), bv));
                    } else if so == 1 && sa == 0 && sb == 1 {
                        let av = *a;
                        for i in 0..len {
                            *o.add(i) = f(av, *b.add(i));
                        }
                    } else {
                        for i in 0..len {
                            *o.add(i * so) = f(*a.add(i * sa), *b.add(i * sb));
                        }
                    }
                }
            },
        );
    }
    Ok(match fresh {
        Some(buf) => Tensor::from_cpu_buffer(buf, shape.clone(), R::DTYPE),
        None => target.unwrap(),
    })
}

/// Elementwise kernel with three broadcast inputs: `out[i] = f(a[i], b[i], c[i])`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn map3<A: Element, B: Element, C: Element, R: Element>(
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    shape: &Shape,
    out: Out<'_>,
    op: &str,
    f: impl Fn(A, B, C) -> R + Sync + Send,
) -> Result<Tensor> {
    a.device().check_cpu_kernel()?;
    b.device().check_cpu_kernel()?;
    c.device().check_cpu_kernel()?;
    let a = detach_overlap(a, out)?;
    let b = detach_overlap(b, out)?;
    let c = detach_overlap(c, out)?;
    let la = a.layout().expand(shape.dims(), op)?;
    let lb = b.layout().expand(shape.dims(), op)?;
    let lc = c.layout().expand(shape.dims(), op)?;
    let (mut fresh, target) = prepare_out::<R>(out, shape, op)?;
    let lo = target.as_ref().map(|t| t.layout().clone()).unwrap_or_else(|| Layout::contiguous(shape.clone()));
    {
        let (_g, optr, [pa, pb, pc]) = lock_all(
            target.as_ref().map(|t| &**t.storage()),
            [&**a.storage(), &**b.storage(), &**c.storage()],
        );
        let po = SendPtr(match (&mut fresh, optr) {
            (Some(b), _) => b.as_mut_ptr() as *mut R,
            (None, Some(p)) => p as *mut R,
            _ => unreachable!(),
        });
        let (pa, pb, pc) = (SendPtr(pa as *mut A), SendPtr(pb as *mut B), SendPtr(pc as *mut C));
        drive(
            shape.numel(),
            shape.dims(),
            [lo.strides(), la.strides(), lb.strides(), lc.strides()],
            [lo.offset(), la.offset(), lb.offset(), lc.offset()],
            |[oo, oa, ob, oc], len, [so, sa, sb, sc]| {
                let (po, pa, pb, pc) = (po, pa, pb, pc);
                // SAFETY: offsets come from validated layouts within the storages.
                unsafe {
                    let o = po.0.add(oo);
                    let a = pa.0.add(oa) as *const A;
                    let b = pb.0.add(ob) as *const B;
                    let c = pc.0.add(oc) as *const C;
                    for i in 0..len {
                        *o.add(i * so) = f(*a.add(i * sa), *b.add(i * sb), *c.add(i * sc));
                    }
                }
            },
        );
    }
    Ok(match fresh {
        Some(buf) => Tensor::from_cpu_buffer(buf, shape.clone(), R::DTYPE),
        None => target.unwrap(),
    })
}

/// `map1` for a contiguous input into a fresh tensor: no layout work, one read lock.
fn map1_contiguous<A: Element, R: Element>(a: &Tensor, f: impl Fn(A) -> R + Sync + Send) -> Result<Tensor> {
    let n = a.numel();
    let mut buf = CpuBuffer::for_elems(n, std::mem::size_of::<R>())?;
    let po = SendPtr(buf.as_mut_ptr() as *mut R);
    {
        let g = a.storage().read();
        // SAFETY: a contiguous layout covers `offset..offset + n` of its storage.
        let pa = SendPtr(unsafe { (g.cpu().as_ptr() as *mut A).add(a.storage_offset()) });
        let stream = worth_streaming(n * std::mem::size_of::<R>());
        crate::threads::parallel_for(n, GRAIN, |s, e| {
            let (po, pa) = (po, pa);
            // SAFETY: disjoint ranges of a fresh buffer of n elements; the input has n elements.
            unsafe {
                let a = pa.0.add(s);
                write_run(po.0.add(s), e - s, stream, |i| f(*a.add(i)));
            }
        });
    }
    Ok(Tensor::from_cpu_buffer(buf, a.shape().clone(), R::DTYPE))
}

/// `map2` for contiguous inputs of the result's shape (or a one-element `b`) into a fresh tensor.
fn map2_contiguous<A: Element, B: Element, R: Element>(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(A, B) -> R + Sync + Send,
) -> Result<Tensor> {
    let n = a.numel();
    let mut buf = CpuBuffer::for_elems(n, std::mem::size_of::<R>())?;
    let po = SendPtr(buf.as_mut_ptr() as *mut R);
    {
        // Both read locks in address order, as every kernel takes its locks.
        let (sa, sb) = (&**a.storage(), &**b.storage());
        let (ga, gb) = if std::ptr::eq(sa, sb) {
            (sa.read(), None)
        } else if (sa as *const StorageCell as usize) < (sb as *const StorageCell as usize) {
            let ga = sa.read();
            (ga, Some(sb.read()))
        } else {
            let gb = sb.read();
            (sa.read(), Some(gb))
        };
        let base_b = gb.as_ref().map_or(ga.cpu().as_ptr(), |g| g.cpu().as_ptr());
        // SAFETY: contiguous layouts cover `offset..offset + numel` of their storages.
        let pa = SendPtr(unsafe { (ga.cpu().as_ptr() as *mut A).add(a.storage_offset()) });
        let pb = SendPtr(unsafe { (base_b as *mut B).add(b.storage_offset()) });
        let scalar_b = b.numel() == 1 && n != 1;
        let stream = worth_streaming(n * std::mem::size_of::<R>());
        crate::threads::parallel_for(n, GRAIN, |s, e| {
            let (po, pa, pb) = (po, pa, pb);
            // SAFETY: disjoint ranges of a fresh buffer; inputs hold n (or 1 for scalar b) elements.
            unsafe {
                let (a, o) = (pa.0.add(s), po.0.add(s));
                if scalar_b {
                    let bv = *pb.0;
                    write_run(o, e - s, stream, |i| f(*a.add(i), bv));
                } else {
                    let b = pb.0.add(s);
                    write_run(o, e - s, stream, |i| f(*a.add(i), *b.add(i)));
                }
            }
        });
    }
    Ok(Tensor::from_cpu_buffer(buf, a.shape().clone(), R::DTYPE))
}

impl Tensor {
    /// Calls `f` with this tensor's elements in row-major order. Contiguous tensors are read in
    /// place; others are gathered into a temporary first. `T` must be the tensor's dtype.
    pub(crate) fn with_slice<T: Element, R>(&self, f: impl FnOnce(&[T]) -> R) -> R {
        debug_assert_eq!(self.dtype(), T::DTYPE);
        if self.numel() == 0 {
            // An empty view may sit at an offset past its storage (`zeros(0, 3)[:, 2]`).
            return f(&[]);
        }
        if self.is_contiguous() {
            let g = self.storage().read();
            f(&g.cpu().as_slice::<T>()[elem_range(self.layout())])
        } else {
            f(&self.gather_elements::<T>())
        }
    }

    /// Calls `f` with mutable access to this tensor's storage elements and its layout
    /// (in-place kernels). Bumps the version counter.
    /// Fails on an inference tensor outside inference mode.
    pub(crate) fn with_storage_mut<T: Element, R>(
        &self,
        f: impl FnOnce(&mut [T], &Layout) -> R,
    ) -> Result<R> {
        debug_assert_eq!(self.dtype(), T::DTYPE);
        self.device().check_cpu_kernel()?;
        self.check_inplace_allowed()?;
        let mut g = self.storage().write();
        Ok(f(g.cpu_mut().as_mut_slice::<T>(), self.layout()))
    }

    /// [`Tensor::with_storage_mut`] with the storage elements of `src` readable too (`src`
    /// must not share this tensor's storage: callers copy it first). The two locks are taken
    /// in address order, as [`lock_all`] takes them, so two threads that each write into the
    /// other's source never wait on each other for ever.
    pub(crate) fn with_storage_mut_reading<T: Element, R>(
        &self,
        src: &Tensor,
        f: impl FnOnce(&mut [T], &Layout, &[T]) -> R,
    ) -> Result<R> {
        debug_assert!(!self.same_storage(src));
        self.device().check_cpu_kernel()?;
        src.device().check_cpu_kernel()?;
        self.check_inplace_allowed()?;
        let (s, d) = (&**src.storage(), &**self.storage());
        let (r, mut w);
        if (s as *const StorageCell as usize) < (d as *const StorageCell as usize) {
            r = s.read();
            w = d.write();
        } else {
            w = d.write();
            r = s.read();
        }
        Ok(f(w.cpu_mut().as_mut_slice::<T>(), self.layout(), r.cpu().as_slice::<T>()))
    }

    /// The contiguous fast paths' access (`exp_out`, `softmax_out`): this contiguous tensor's
    /// own elements, writable, and the contiguous `src`'s, readable, as slices of exactly
    /// `numel` elements each (locks as [`Tensor::with_storage_mut_reading`]). Fast paths slice
    /// storage only here, so the guard for an empty view whose offset lies past its storage
    /// (`zeros(0, 2).narrow(1, 1, 1)`) is here once: such a tensor has an empty slice.
    pub(crate) fn with_elems_mut_reading<T: Element, R>(
        &self,
        src: &Tensor,
        f: impl FnOnce(&mut [T], &[T]) -> R,
    ) -> Result<R> {
        debug_assert!(self.is_contiguous() && src.is_contiguous());
        self.with_storage_mut_reading::<T, _>(src, |d, l, s| {
            f(&mut d[elem_range(l)], &s[elem_range(src.layout())])
        })
    }

    /// [`Tensor::with_elems_mut_reading`] for a kernel that reads and writes this contiguous
    /// tensor's own elements (`exp_` in place).
    pub(crate) fn with_elems_mut<T: Element, R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        debug_assert!(self.is_contiguous());
        self.with_storage_mut::<T, _>(|d, l| f(&mut d[elem_range(l)]))
    }
}

/// The storage elements a contiguous layout covers; empty for a layout with no elements,
/// whatever its offset (an empty view may sit past the end of its storage).
pub(crate) fn elem_range(l: &Layout) -> std::ops::Range<usize> {
    match l.numel() {
        0 => 0..0,
        n => l.offset()..l.offset() + n,
    }
}
