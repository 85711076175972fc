//! Storage: the memory a tensor's elements live in, shared by every view of it.
//!
//! [`Storage`] is an enum over devices (the CPU's buffers, and a GPU's with the `cuda`
//! feature); each variant owns untyped bytes (the dtype lives on the tensor, as in PyTorch). A [`StorageCell`] wraps it
//! with a lock (in-place ops write, everything else reads) and the version counter that
//! autograd uses to detect in-place modification of saved tensors.

use crate::alloc::CpuBuffer;
use crate::{DType, Device};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Device memory holding a tensor's elements.
pub enum Storage {
    /// Host memory from the caching allocator.
    Cpu(CpuBuffer),
    /// Device memory from the CUDA caching allocator.
    #[cfg(feature = "cuda")]
    Cuda(CudaStorage),
}

/// A GPU storage's memory: the runtime's buffer, whose allocation and free memory history
/// records (as the CPU allocator's hooks do for host buffers).
#[cfg(feature = "cuda")]
pub struct CudaStorage(pyrite_cuda_runtime::memory::CudaBuffer);

#[cfg(feature = "cuda")]
impl CudaStorage {
    /// `bytes` of uninitialized memory on `cuda:device` from its caching allocator.
    pub(crate) fn new(device: usize, bytes: usize) -> pyrite_cuda_runtime::Result<CudaStorage> {
        use crate::memory_history as history;
        match pyrite_cuda_runtime::memory::CudaBuffer::new(device, bytes) {
            Ok(b) => {
                if history::is_recording() && b.capacity() > 0 {
                    history::on_alloc(Device::Cuda(device), b.ptr() as usize, b.capacity() as u64);
                }
                Ok(CudaStorage(b))
            }
            Err(e) => {
                if history::is_recording() && e.kind == pyrite_cuda_runtime::ErrorKind::OutOfMemory {
                    history::on_oom(Device::Cuda(device), bytes as u64);
                }
                Err(e)
            }
        }
    }
}

#[cfg(feature = "cuda")]
impl std::ops::Deref for CudaStorage {
    type Target = pyrite_cuda_runtime::memory::CudaBuffer;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

#[cfg(feature = "cuda")]
impl Drop for CudaStorage {
    fn drop(&mut self) {
        if crate::memory_history::is_recording() && self.0.capacity() > 0 {
            crate::memory_history::on_free(
                Device::Cuda(self.0.device()),
                self.0.ptr() as usize,
                self.0.capacity() as u64,
            );
        }
    }
}

impl Storage {
    /// The device this storage lives on.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            #[cfg(feature = "cuda")]
            Storage::Cuda(b) => Device::Cuda(b.device()),
        }
    }
    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        match self {
            Storage::Cpu(b) => b.len_bytes(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(b) => b.len_bytes(),
        }
    }
    /// The CPU buffer. CPU kernels call it; ops on CUDA tensors dispatch to the CUDA backend
    /// (`crate::cuda`) before reaching a CPU kernel, so a CUDA storage here is a Pyrite bug.
    pub fn cpu(&self) -> &CpuBuffer {
        match self {
            Storage::Cpu(b) => b,
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => {
                panic!("internal error: a CPU kernel reached a CUDA storage (an op without a CUDA dispatch)")
            }
        }
    }
    /// The CPU buffer, mutably.
    pub fn cpu_mut(&mut self) -> &mut CpuBuffer {
        match self {
            Storage::Cpu(b) => b,
            #[cfg(feature = "cuda")]
            Storage::Cuda(_) => {
                panic!("internal error: a CPU kernel reached a CUDA storage (an op without a CUDA dispatch)")
            }
        }
    }
}

/// Shared, lockable storage plus its version counter.
pub struct StorageCell {
    data: RwLock<Storage>,
    version: AtomicU64,
    /// Made inside `inference_mode`: the tensors over it are PyTorch's inference tensors.
    inference: bool,
    /// Whether the bytes hold bools, other elements, or are not claimed by any tensor yet
    /// (a fresh [`UntypedStorage`]). Bool elements must be 0 or 1, so a storage that tensors
    /// view as bool is never viewed as anything else, and the other way round.
    elements: Mutex<Elements>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Elements {
    Unclaimed,
    Bools,
    Other,
}

impl Elements {
    fn of(dtype: DType) -> Elements {
        if dtype == DType::Bool {
            Elements::Bools
        } else {
            Elements::Other
        }
    }
}

impl StorageCell {
    /// Wraps a storage that no tensor views yet.
    pub fn new(s: Storage) -> Self {
        StorageCell {
            data: RwLock::new(s),
            version: AtomicU64::new(0),
            inference: crate::autograd::is_inference_mode_enabled(),
            elements: Mutex::new(Elements::Unclaimed),
        }
    }
    /// Wraps a storage whose bytes are valid elements of `dtype` (its creator wrote them).
    pub(crate) fn new_for(s: Storage, dtype: DType) -> Self {
        let cell = StorageCell::new(s);
        *cell.elements.lock().unwrap_or_else(|e| e.into_inner()) = Elements::of(dtype);
        cell
    }
    /// Lets tensors of `dtype` view this storage: fails if tensors view it as bool and
    /// `dtype` is not, or the other way round. The first bool claim of raw bytes turns every
    /// byte other than 0 into 1 (as `from_raw_bytes` reads bools); no tensor views the bytes
    /// before that claim, so none can see them change.
    fn claim(&self, dtype: DType) -> crate::Result<()> {
        let mut e = self.elements.lock().unwrap_or_else(|e| e.into_inner());
        match (*e, Elements::of(dtype)) {
            (Elements::Unclaimed, Elements::Bools) => {
                if self.read().cpu().as_slice::<u8>().iter().any(|&b| b > 1) {
                    for b in self.write().cpu_mut().as_mut_slice::<u8>() {
                        *b = (*b != 0) as u8;
                    }
                }
                *e = Elements::Bools;
            }
            (Elements::Unclaimed, want) => *e = want,
            (have, want) if have == want => {}
            (Elements::Bools, _) => {
                crate::bail!(DType, "a storage that holds bool elements cannot be viewed as {dtype}")
            }
            _ => crate::bail!(DType, "a storage that holds non-bool elements cannot be viewed as bool"),
        }
        Ok(())
    }
    /// Whether this storage was made inside `inference_mode` (its tensors are inference
    /// tensors: no autograd, no in-place update outside inference mode).
    pub fn is_inference(&self) -> bool {
        self.inference
    }
    /// Locks for reading.
    pub fn read(&self) -> RwLockReadGuard<'_, Storage> {
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }
    /// Locks for reading unless a writer holds the lock now (`None` then).
    pub(crate) fn try_read(&self) -> Option<RwLockReadGuard<'_, Storage>> {
        match self.data.try_read() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
    /// Locks for writing and bumps the version counter (every writer is an in-place op).
    pub fn write(&self) -> RwLockWriteGuard<'_, Storage> {
        self.version.fetch_add(1, Ordering::Relaxed);
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }
    /// How many times this storage was written in place (PyTorch's `_version`).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }
}

/// `torch.UntypedStorage`: a handle to the bytes that one or more tensors view.
///
/// Cloning the handle shares the bytes. [`Tensor::untyped_storage`] gives a tensor's storage,
/// and [`Tensor::from_untyped_storage`] makes a tensor that views one, the way `torch.load`
/// rebuilds tensors that shared a storage when they were saved.
///
/// ```
/// use pyrite_core::{DType, Tensor};
/// let x = Tensor::arange(0.0, 6.0, 1.0, DType::F32)?;
/// let s = x.untyped_storage();
/// assert_eq!(s.nbytes(), 24);
/// let y = Tensor::from_untyped_storage(&s, DType::F32, 1, [2], &[2])?; // x[1::2]
/// assert_eq!(y.to_vec::<f32>()?, vec![1., 3.]);
/// assert!(y.untyped_storage().is_same(&s));
/// // A view must fit in its storage.
/// assert!(Tensor::from_untyped_storage(&s, DType::F32, 5, [2], &[1]).is_err());
/// assert!(Tensor::from_untyped_storage(&s, DType::F64, 0, [4], &[1]).is_err());
/// assert!(Tensor::from_untyped_storage(&s, DType::Bool, 0, [4], &[1]).is_err());
/// # Ok::<(), pyrite_core::Error>(())
/// ```
#[derive(Clone)]
pub struct UntypedStorage(pub(crate) std::sync::Arc<StorageCell>);

impl UntypedStorage {
    /// A CPU storage of `nbytes` bytes that `fill` writes in full before anything reads it
    /// (`fill` gets every byte; an error from it is returned and the storage dropped).
    pub fn new_with(
        nbytes: usize,
        fill: impl FnOnce(&mut [u8]) -> crate::Result<()>,
    ) -> crate::Result<UntypedStorage> {
        let mut buf = CpuBuffer::new(nbytes)?;
        fill(buf.as_mut_slice::<u8>())?;
        Ok(UntypedStorage(std::sync::Arc::new(StorageCell::new(Storage::Cpu(buf)))))
    }

    /// A CPU storage holding a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> crate::Result<UntypedStorage> {
        UntypedStorage::new_with(bytes.len(), |b| {
            b.copy_from_slice(bytes);
            Ok(())
        })
    }

    /// Size in bytes (`storage.nbytes()`).
    pub fn nbytes(&self) -> usize {
        self.0.read().nbytes()
    }

    /// The device the bytes live on.
    pub fn device(&self) -> Device {
        self.0.read().device()
    }

    /// Calls `f` with all the bytes (read-locked for the call) of a CPU storage (a CUDA
    /// storage panics: use [`UntypedStorage::try_with_bytes`]).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let g = self.0.read();
        f(g.cpu().as_slice::<u8>())
    }

    /// [`UntypedStorage::with_bytes`] for a storage on any device: a GPU's bytes are copied to
    /// the host first (what `torch.save` does with CUDA tensors), and a failed copy is an
    /// error.
    pub fn try_with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> crate::Result<R> {
        let g = self.0.read();
        match &*g {
            Storage::Cpu(b) => Ok(f(b.as_slice::<u8>())),
            #[cfg(feature = "cuda")]
            Storage::Cuda(b) => {
                let mut host = vec![0u8; b.len_bytes()];
                let stream = pyrite_cuda_runtime::stream::current_stream(b.device())?;
                b.copy_to_host(0, &mut host, &stream)?;
                Ok(f(&host))
            }
        }
    }

    /// Calls `f` with all the bytes, writable (write-locked for the call, and counted as an
    /// in-place write by the version counter). Autograd does not see the write: this is for
    /// code that fills a tensor's memory from outside, as a collective does (PyTorch's
    /// `c10d` ops write into tensors the same way). In a storage that tensors view as bool,
    /// every byte other than 0 reads as 1 afterwards.
    pub fn with_bytes_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let bools = *self.0.elements.lock().unwrap_or_else(|e| e.into_inner()) == Elements::Bools;
        let mut g = self.0.write();
        let bytes = g.cpu_mut().as_mut_slice::<u8>();
        let r = f(bytes);
        if bools {
            for b in bytes.iter_mut() {
                *b = (*b != 0) as u8;
            }
        }
        r
    }

    /// A copy of the bytes on `device` (the same storage when it is already there): how
    /// `torch.load`'s `map_location` places storages.
    pub fn to_device(&self, device: Device) -> crate::Result<UntypedStorage> {
        if self.device() == device {
            return Ok(self.clone());
        }
        let bytes = self.try_with_bytes(|b| b.to_vec())?;
        match device {
            Device::Cpu => UntypedStorage::from_bytes(&bytes),
            Device::Cuda(i) => crate::cuda::storage_from_bytes(&bytes, i),
        }
    }

    /// A copy of all the bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// True when both handles are the same storage.
    pub fn is_same(&self, other: &UntypedStorage) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }

    /// An identity for this storage (like PyTorch's `storage._cdata`): two live handles have
    /// the same id exactly when [`UntypedStorage::is_same`] holds.
    pub fn id(&self) -> usize {
        std::sync::Arc::as_ptr(&self.0) as usize
    }
}

impl std::fmt::Debug for UntypedStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UntypedStorage(nbytes={}, device={})", self.nbytes(), self.device())
    }
}

impl crate::Tensor {
    /// The storage this tensor views (`t.untyped_storage()`), shared with every view of it.
    pub fn untyped_storage(&self) -> UntypedStorage {
        UntypedStorage(self.storage().clone())
    }

    /// A tensor of `dtype` viewing `storage` with the given storage offset, sizes and strides,
    /// all in elements (what `torch.empty(0, dtype=dtype).set_(storage, offset, size, stride)`
    /// makes; `torch.load` rebuilds saved tensors this way). The result is a new leaf that
    /// does not require grad. Fails unless every element it can reach lies inside the storage
    /// and the storage size is a whole number of elements. Tensors of different dtypes may
    /// view one storage, except that bool elements (which must be 0 or 1) never share a
    /// storage with other dtypes; viewing fresh bytes as bool reads nonzero bytes as true.
    pub fn from_untyped_storage(
        storage: &UntypedStorage,
        dtype: crate::DType,
        storage_offset: usize,
        size: impl Into<crate::Shape>,
        stride: &[usize],
    ) -> crate::Result<crate::Tensor> {
        use crate::bail;
        let shape: crate::Shape = size.into();
        let strides = crate::shape::DimVec::from_slice(stride);
        let nbytes = storage.nbytes();
        let esize = dtype.size_in_bytes();
        if shape.rank() != strides.len() {
            bail!(
                Shape,
                "from_untyped_storage: mismatch in length of strides and shape ({} sizes, {} strides)",
                shape.rank(),
                strides.len()
            );
        }
        if !nbytes.is_multiple_of(esize) {
            bail!(
                Value,
                "from_untyped_storage: a storage of {nbytes} bytes is not a whole number of {dtype} elements"
            );
        }
        // One past the last element reached, computed without overflow.
        let mut extent = Some(storage_offset);
        if shape.dims().iter().all(|&d| d > 0) {
            for (&d, &s) in shape.dims().iter().zip(strides.iter()) {
                extent = extent.and_then(|e| (d - 1).checked_mul(s).and_then(|x| e.checked_add(x)));
            }
            extent = extent.and_then(|e| e.checked_add(1));
        }
        match extent {
            Some(e) if shape.checked_numel().is_some() && (e <= nbytes / esize || shape.numel() == 0) => {}
            _ => bail!(
                Value,
                "from_untyped_storage: setStorage: sizes {shape}, strides {:?} and storage offset {storage_offset} \
                 need more than the {} {dtype} elements of the storage ({nbytes} bytes)",
                strides.as_slice(),
                nbytes / esize
            ),
        }
        storage.0.claim(dtype).map_err(|e| crate::err!(DType, "from_untyped_storage: {e}"))?;
        let device = storage.device();
        let layout = crate::layout::Layout { shape, strides, offset: storage_offset };
        Ok(crate::Tensor::from_parts(storage.0.clone(), layout, dtype, device))
    }
}
