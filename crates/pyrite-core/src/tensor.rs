//! The [`Tensor`] type: a cheap handle to shared, strided storage with a runtime dtype and device.

use crate::alloc::CpuBuffer;
use crate::autograd::AutogradSlot;
use crate::layout::Layout;
use crate::shape::Shape;
use crate::storage::{Storage, StorageCell};
use crate::{bail, DType, Device, Element, Result};
use std::sync::Arc;

/// An n-dimensional array with a runtime dtype and device, like `torch.Tensor`.
///
/// Cloning a `Tensor` clones the handle, not the data: both handles see the same elements and
/// the same in-place updates. [`Tensor::deep_clone`] is PyTorch's `clone()`. View ops
/// ([`Tensor::view`], [`Tensor::permute`], [`Tensor::narrow`], ...) share storage too.
///
/// ```
/// use pyrite_core::Tensor;
/// let a = Tensor::new([[1f32, 2.], [3., 4.]]).unwrap();
/// let b = (&a * &a + &a).unwrap();
/// assert_eq!(b.to_vec2::<f32>().unwrap(), vec![vec![2., 6.], vec![12., 20.]]);
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorImpl>);

pub(crate) struct TensorImpl {
    pub(crate) storage: Arc<StorageCell>,
    pub(crate) layout: Layout,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
    /// requires_grad, grad and grad_fn live here (see `autograd`); the version counter is the
    /// storage's, shared by all views as in PyTorch.
    pub(crate) autograd: AutogradSlot,
}

impl Tensor {
    pub(crate) fn from_parts(
        storage: Arc<StorageCell>,
        layout: Layout,
        dtype: DType,
        device: Device,
    ) -> Tensor {
        Tensor(Arc::new(TensorImpl { storage, layout, dtype, device, autograd: AutogradSlot::new() }))
    }

    /// A new contiguous tensor owning `buf`, which the caller has fully written.
    pub(crate) fn from_cpu_buffer(buf: CpuBuffer, shape: Shape, dtype: DType) -> Tensor {
        // Memory safety rests on this: a tensor never claims more elements than its storage
        // holds (output sizes go through the checked `CpuBuffer::for_shape` / `for_elems`).
        assert!(
            shape.checked_numel().and_then(|n| n.checked_mul(dtype.size_in_bytes())) == Some(buf.len_bytes()),
            "internal error: a {} buffer for a tensor of shape {shape} and dtype {dtype}",
            buf.len_bytes()
        );
        Tensor::from_parts(
            Arc::new(StorageCell::new_for(Storage::Cpu(buf), dtype)),
            Layout::contiguous(shape),
            dtype,
            Device::Cpu,
        )
    }

    /// A view of the same storage with another layout.
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor::from_parts(self.0.storage.clone(), layout, self.0.dtype, self.0.device)
    }

    /// Builds a contiguous tensor by filling a fresh buffer of `shape` elements of `T`.
    pub(crate) fn build<T: Element>(shape: Shape, fill: impl FnOnce(&mut [T])) -> Result<Tensor> {
        let mut buf = CpuBuffer::for_shape(&shape, std::mem::size_of::<T>())?;
        fill(buf.as_mut_slice::<T>());
        Ok(Tensor::from_cpu_buffer(buf, shape, T::DTYPE))
    }

    /// A tensor from any nested array, vec, slice or scalar (`torch.tensor(data)`).
    ///
    /// ```
    /// use pyrite_core::{DType, Tensor};
    /// let t = Tensor::new([[1i64, 2], [3, 4]]).unwrap();
    /// assert_eq!(t.dims(), &[2, 2]);
    /// assert_eq!(t.dtype(), DType::I64);
    /// assert_eq!(Tensor::new(3.5f64).unwrap().dims(), &[] as &[usize]);
    /// ```
    pub fn new<A: NdArray>(data: A) -> Result<Tensor> {
        let shape = data.shape()?;
        let mut v = Vec::with_capacity(shape.numel());
        data.flatten_into(&mut v);
        Tensor::from_vec(v, shape)
    }

    /// A tensor of `shape` from row-major elements.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::from_slice(&data, shape)
    }

    /// A tensor of `shape` copied from a row-major slice.
    pub fn from_slice<T: Element>(data: &[T], shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if shape.numel() != data.len() {
            bail!(Shape, "shape {shape} is invalid for input of size {}", data.len());
        }
        Tensor::build::<T>(shape, |o| o.copy_from_slice(data))
    }

    /// A 0-d tensor holding `v`.
    pub fn scalar<T: Element>(v: T) -> Result<Tensor> {
        Tensor::from_slice(&[v], ())
    }

    /// A tensor from little-endian raw element bytes (as stored in `.npy` and safetensors files).
    /// Bool bytes other than 0 read as true.
    pub fn from_raw_bytes(bytes: &[u8], shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        let shape = shape.into();
        let n = shape.checked_numel().and_then(|n| n.checked_mul(dtype.size_in_bytes()));
        let Some(n) = n.filter(|&n| n == bytes.len()) else {
            bail!(
                Shape,
                "from_raw_bytes: {} bytes given, but shape {shape} of {dtype} needs {}",
                bytes.len(),
                n.map_or("more than fit in memory".to_string(), |n| n.to_string())
            );
        };
        let mut buf = CpuBuffer::new(n)?;
        if dtype == DType::Bool {
            for (o, &b) in buf.as_mut_slice::<u8>().iter_mut().zip(bytes) {
                *o = (b != 0) as u8;
            }
        } else {
            // SAFETY: `buf` holds exactly `n` bytes; every bit pattern is a valid number.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.as_mut_ptr(), n) };
            #[cfg(target_endian = "big")]
            compile_error!("pyrite assumes a little-endian host");
        }
        Ok(Tensor::from_cpu_buffer(buf, shape, dtype))
    }

    /// The elements in row-major order as little-endian raw bytes.
    pub fn to_raw_bytes(&self) -> Result<Vec<u8>> {
        self.0.device.check_available()?;
        if self.0.device.is_cuda() {
            return crate::cuda::to_device(self, Device::Cpu, false)?.to_raw_bytes();
        }
        let t = self.contiguous()?;
        if t.numel() == 0 {
            return Ok(Vec::new());
        }
        let g = t.0.storage.read();
        let sz = t.dtype().size_in_bytes();
        let start = t.storage_offset() * sz;
        let all = g.cpu().as_slice::<u8>();
        Ok(all[start..start + t.numel() * sz].to_vec())
    }

    // ------------------------------------------------------------------ metadata

    /// The sizes (`t.shape`).
    pub fn shape(&self) -> &Shape {
        &self.0.layout.shape
    }
    /// The sizes as a slice.
    pub fn dims(&self) -> &[usize] {
        self.0.layout.dims()
    }
    /// Size of one dim, negative dims allowed (`t.size(dim)`).
    pub fn size(&self, dim: isize) -> Result<usize> {
        let d = self.0.layout.wrap(dim)?;
        match self.dims().get(d) {
            Some(&n) => Ok(n),
            None => bail!(Index, "Dimension specified as {dim} but tensor has no dimensions"),
        }
    }
    /// Number of dims (`t.dim()`).
    pub fn rank(&self) -> usize {
        self.dims().len()
    }
    /// Number of elements (`t.numel()`).
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    /// The device.
    pub fn device(&self) -> Device {
        self.0.device
    }
    /// Strides in elements (`t.stride()`).
    pub fn stride(&self) -> &[usize] {
        self.0.layout.strides()
    }
    /// Offset of the first element in the storage (`t.storage_offset()`).
    pub fn storage_offset(&self) -> usize {
        self.0.layout.offset()
    }
    /// The full layout.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    /// PyTorch's `is_contiguous()`.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }
    /// True when both tensors view the same storage.
    pub fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }
    /// True when both handles are the very same tensor (not just the same storage).
    pub fn is_same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// An identity for this tensor handle (Python's `id(t)`): two handles have the same id
    /// exactly when [`Tensor::is_same`] holds (while both are alive).
    pub fn handle_id(&self) -> usize {
        Arc::as_ptr(&self.0) as *const () as usize
    }
    /// The storage's in-place version counter (PyTorch's `t._version`).
    pub fn version(&self) -> u64 {
        self.0.storage.version()
    }
    /// Size in bytes of one element (`t.element_size()`).
    pub fn element_size(&self) -> usize {
        self.0.dtype.size_in_bytes()
    }

    pub(crate) fn storage(&self) -> &Arc<StorageCell> {
        &self.0.storage
    }

    // ----------------------------------------------------------- data out

    fn check_dtype<T: Element>(&self, op: &str) -> Result<()> {
        if T::DTYPE != self.dtype() {
            bail!(DType, "{op}: tensor has dtype {} but {} was requested", self.dtype(), T::DTYPE);
        }
        Ok(())
    }

    /// Reads elements in row-major order, any layout, into a vec (dtype must match `T`).
    pub(crate) fn gather_elements<T: Element>(&self) -> Vec<T> {
        let g = self.0.storage.read();
        let src = g.cpu().as_slice::<T>();
        let l = &self.0.layout;
        if l.numel() == 0 {
            // An empty view may sit at an offset past its storage (`zeros(0, 3)[:, 2]`).
            return Vec::new();
        }
        if l.is_contiguous() {
            return src[l.offset..l.offset + l.numel()].to_vec();
        }
        let mut out = Vec::with_capacity(l.numel());
        crate::strided::Strided::new(l.dims(), [l.strides()], [l.offset]).for_range(
            0,
            l.numel(),
            |_, [o], len, [s]| {
                for i in 0..len {
                    out.push(src[o + i * s]);
                }
            },
        );
        out
    }

    /// All elements in row-major order, whatever the rank (`t.flatten().tolist()`).
    /// `T` must be the tensor's element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_dtype::<T>("to_vec")?;
        self.0.device.check_available()?;
        if self.0.device.is_cuda() {
            return crate::cuda::to_device(self, Device::Cpu, false)?.to_vec();
        }
        Ok(self.gather_elements())
    }

    /// A 2-d tensor as rows (`t.tolist()` for a matrix).
    pub fn to_vec2<T: Element>(&self) -> Result<Vec<Vec<T>>> {
        if self.rank() != 2 {
            bail!(Shape, "to_vec2: expected a 2-d tensor, got shape {}", self.shape());
        }
        let v = self.to_vec::<T>()?;
        let c = self.dims()[1];
        Ok((0..self.dims()[0]).map(|i| v[i * c..(i + 1) * c].to_vec()).collect())
    }

    /// A 3-d tensor as nested vecs.
    pub fn to_vec3<T: Element>(&self) -> Result<Vec<Vec<Vec<T>>>> {
        if self.rank() != 3 {
            bail!(Shape, "to_vec3: expected a 3-d tensor, got shape {}", self.shape());
        }
        let v = self.to_vec::<T>()?;
        let (a, b, c) = (self.dims()[0], self.dims()[1], self.dims()[2]);
        Ok((0..a)
            .map(|i| (0..b).map(|j| v[(i * b + j) * c..(i * b + j + 1) * c].to_vec()).collect())
            .collect())
    }

    /// The value of a one-element tensor (`t.item()`), converted to `T`.
    ///
    /// ```
    /// use pyrite_core::Tensor;
    /// let t = Tensor::new([2.5f32]).unwrap();
    /// assert_eq!(t.item::<f64>().unwrap(), 2.5);
    /// ```
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            bail!(Value, "a Tensor with {} elements cannot be converted to Scalar", self.numel());
        }
        self.0.device.check_available()?;
        if self.0.device.is_cuda() {
            return crate::cuda::to_device(self, Device::Cpu, false)?.item();
        }
        let g = self.0.storage.read();
        let off = self.0.layout.offset;
        let buf = g.cpu();
        Ok(crate::dispatch_all!(self.dtype(), S => {
            let v: S = buf.as_slice::<S>()[off];
            if S::DTYPE.is_floating_point() { T::from_f64(v.to_f64()) } else { T::from_i64(v.to_i64()) }
        }))
    }
}

/// Data that [`Tensor::new`] accepts: scalars, arrays, slices and vecs, nested to any depth.
pub trait NdArray {
    /// The element type.
    type Elem: Element;
    /// The shape of the data; errors for ragged nesting.
    fn shape(&self) -> Result<Shape>;
    /// Appends the elements in row-major order.
    fn flatten_into(&self, out: &mut Vec<Self::Elem>);
}

macro_rules! nd_scalar {
    ($($t:ty),*) => {$(
        impl NdArray for $t {
            type Elem = $t;
            fn shape(&self) -> Result<Shape> { Ok(Shape::default()) }
            fn flatten_into(&self, out: &mut Vec<$t>) { out.push(*self) }
        }
    )*};
}
nd_scalar!(bool, u8, i32, i64, f32, f64, half::f16, half::bf16);

fn nested_shape<A: NdArray>(items: &[A]) -> Result<Shape> {
    let inner = match items.first() {
        Some(x) => x.shape()?,
        None => Shape::default(),
    };
    for x in items.iter().skip(1) {
        if x.shape()? != inner {
            bail!(Value, "expected sequence of equal-length lists, got shapes {inner} and {}", x.shape()?);
        }
    }
    let mut d = smallvec::smallvec![items.len()];
    if !items.is_empty() {
        d.extend_from_slice(inner.dims());
    }
    Ok(Shape(d))
}

impl<A: NdArray, const N: usize> NdArray for [A; N] {
    type Elem = A::Elem;
    fn shape(&self) -> Result<Shape> {
        nested_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<A::Elem>) {
        self.iter().for_each(|x| x.flatten_into(out))
    }
}
impl<A: NdArray> NdArray for &[A] {
    type Elem = A::Elem;
    fn shape(&self) -> Result<Shape> {
        nested_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<A::Elem>) {
        self.iter().for_each(|x| x.flatten_into(out))
    }
}
impl<A: NdArray> NdArray for Vec<A> {
    type Elem = A::Elem;
    fn shape(&self) -> Result<Shape> {
        nested_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<A::Elem>) {
        self.iter().for_each(|x| x.flatten_into(out))
    }
}
