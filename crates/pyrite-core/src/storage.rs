//! Storage: the memory a tensor's elements live in, shared by every view of it.
//!
//! [`Storage`] is an enum over devices so that a CUDA buffer can join later; each variant owns
//! untyped bytes (the dtype lives on the tensor, as in PyTorch). A [`StorageCell`] wraps it
//! with a lock (in-place ops write, everything else reads) and the version counter that
//! autograd uses to detect in-place modification of saved tensors.

use crate::alloc::CpuBuffer;
use crate::Device;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Device memory holding a tensor's elements.
pub enum Storage {
    /// Host memory from the caching allocator.
    Cpu(CpuBuffer),
}

impl Storage {
    /// The device this storage lives on.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
        }
    }
    /// The CPU buffer (every storage is a CPU one until another backend lands).
    pub fn cpu(&self) -> &CpuBuffer {
        match self {
            Storage::Cpu(b) => b,
        }
    }
    /// The CPU buffer, mutably.
    pub fn cpu_mut(&mut self) -> &mut CpuBuffer {
        match self {
            Storage::Cpu(b) => b,
        }
    }
}

/// Shared, lockable storage plus its version counter.
pub struct StorageCell {
    data: RwLock<Storage>,
    version: AtomicU64,
    /// Made inside `inference_mode`: the tensors over it are PyTorch's inference tensors.
    inference: bool,
}

impl StorageCell {
    /// Wraps a storage.
    pub fn new(s: Storage) -> Self {
        StorageCell {
            data: RwLock::new(s),
            version: AtomicU64::new(0),
            inference: crate::autograd::is_inference_mode_enabled(),
        }
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
