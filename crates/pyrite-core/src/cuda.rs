//! The CUDA backend's glue: how ops on CUDA tensors reach pyrite-cuda-runtime's kernels.
//!
//! Ops dispatch here at the same points where their CPU kernels take a storage's bytes:
//! `binary` (arithmetic and comparisons), the float unary ops, `convert` (casts, copies,
//! `contiguous`), `to_device`, the reductions and softmax. Each builds a kernel description
//! (an op name and element types), describes the operands' layouts in plain numbers, and
//! launches on the device's current stream. Operands must share one CUDA device; a CPU 0-d
//! tensor (a Python scalar) joins as a kernel scalar, as in PyTorch. Every other op on a CUDA
//! tensor fails with PyTorch's "Could not run ... with arguments from the 'CUDA' backend".
//!
//! Without the `cuda` feature no tensor can be on a CUDA device, and these functions are
//! never reached (they return errors).

#[cfg(feature = "cuda")]
use crate::bail;
use crate::ops::Out;
use crate::{DType, Device, Error, Result, Shape, Tensor};

/// A reduction the CUDA backend runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
    ArgMax,
    ArgMin,
}

/// A running operation along a dim (`cumsum`, `cumprod`, `cummax`, `cummin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    Sum,
    Prod,
    Max,
    Min,
}

/// A convolution's geometry for `im2col` / `col2im`: batch items, input channels, input
/// (`big`) and output (`small`) spatial sizes padded to three dims, kernel, stride, padding and
/// dilation.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct ConvShape {
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) big: [usize; 3],
    pub(crate) small: [usize; 3],
    pub(crate) k: [usize; 3],
    pub(crate) stride: [usize; 3],
    pub(crate) pad: [usize; 3],
    pub(crate) dil: [usize; 3],
}

/// A pooling op's geometry: input and output spatial sizes padded to three dims, the step
/// between taps, the windows (`(lo, hi, padded)` per output position, dim 0's first), and for
/// average pooling the divisor (0 the valid window, 1 the padded one, 2 `divisor`).
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct PoolShape {
    pub(crate) inp: [usize; 3],
    pub(crate) out: [usize; 3],
    pub(crate) step: [usize; 3],
    pub(crate) windows: Vec<i64>,
    pub(crate) div_mode: i64,
    pub(crate) divisor: i64,
}

/// A random fill's distribution for the device kernels: the kind, its float parameters
/// (uniform: `from`, `to - from`; normal: `mean`, `std`; Bernoulli: `p`) and integer bounds.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct Draw {
    pub(crate) kind: DrawKind,
    pub(crate) f: [f64; 2],
    pub(crate) low: i64,
    pub(crate) range: u128,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) enum DrawKind {
    Uniform,
    Normal,
    Bernoulli,
    Int32,
    Int64,
}

/// The error for an op that has no CUDA kernel yet.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn not_implemented(op: &str) -> Error {
    crate::error::Error::new(
        crate::ErrorKind::NotImplemented,
        format!(
            "Could not run 'aten::{op}' with arguments from the 'CUDA' backend: Pyrite has no CUDA kernel for it yet. Move the tensors to the CPU with .to_device(Device::Cpu) for this op"
        ),
    )
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::*;
    fn off() -> Error {
        crate::error::Error::new(
            crate::ErrorKind::Device,
            "this build of Pyrite has no CUDA backend (the `cuda` feature)",
        )
    }
    pub(crate) fn binary(_: &Tensor, _: &Tensor, _: &str, _: DType, _: Out<'_>) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn unary(_: &Tensor, _: &str, _: Out<'_>, _: [f64; 2]) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn convert(_: &Tensor, _: DType, _: Out<'_>) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn to_device(_: &Tensor, _: Device, _: bool) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn reduce(_: &Tensor, _: &[bool], _: bool, _: Reduction) -> Result<(Tensor, Option<Tensor>)> {
        Err(off())
    }
    pub(crate) fn softmax(_: &Tensor, _: usize, _: bool) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn full(_: &Shape, _: crate::dtype::Scalar, _: DType, _: usize) -> Result<Tensor> {
        Err(off())
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn map(
        _: &str,
        _: &str,
        _: &[&Tensor],
        _: DType,
        _: DType,
        _: Out<'_>,
        _: [f64; 2],
        _: [i64; 2],
    ) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn gather(_: &Tensor, _: usize, _: &[i64], _: &Shape) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn strided_copy(_: &Tensor, _: &[isize], _: isize) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn scan(_: &Tensor, _: (usize, usize, usize), _: Scan) -> Result<(Tensor, Option<Tensor>)> {
        Err(off())
    }
    pub(crate) fn nonzero(_: &Tensor) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn im2col(_: &Tensor, _: &ConvShape) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn pool(_: &Tensor, _: &PoolShape, _: &Shape, _: bool) -> Result<(Tensor, Option<Tensor>)> {
        Err(off())
    }
    pub(crate) fn avg_pool_backward(_: &Tensor, _: &PoolShape, _: &Shape) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn sort(_: &Tensor, _: usize, _: bool) -> Result<(Tensor, Tensor)> {
        Err(off())
    }
    pub(crate) fn random_fill(_: &Tensor, _: Draw, _: u64, _: u64) -> Result<()> {
        Err(off())
    }
    pub(crate) fn storage_from_bytes(_: &[u8], _: usize) -> Result<crate::UntypedStorage> {
        Err(off())
    }
    pub(crate) fn foreach(
        _: &[&Tensor],
        _: usize,
        _: usize,
        _: crate::ops::foreach::DeviceKernel<'_>,
        _: &[f64],
        _: usize,
    ) -> Result<()> {
        Err(off())
    }
    pub(crate) fn col2im(_: &Tensor, _: &ConvShape, _: &Shape) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn index_select(_: &Tensor, _: usize, _: &[i64]) -> Result<Tensor> {
        Err(off())
    }
    pub(crate) fn scatter_add(
        _: &Tensor,
        _: usize,
        _: &[i64],
        _: &Shape,
        _: &Tensor,
        _: bool,
        _: f64,
    ) -> Result<()> {
        Err(off())
    }
    pub(crate) fn scatter(_: &Tensor, _: usize, _: &[i64], _: &Shape, _: &Tensor) -> Result<()> {
        Err(off())
    }
    pub(crate) fn addbmm(
        _: &Tensor,
        _: &Tensor,
        _: Option<&Tensor>,
        _: crate::dtype::Scalar,
        _: crate::dtype::Scalar,
        _: Option<&Tensor>,
    ) -> Result<Tensor> {
        Err(off())
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use super::*;
    use crate::storage::{Storage, StorageCell};
    use pyrite_cuda_runtime as rt;
    use rt::kernels::{
        binary_expr, coalesce, grid_for, reduce, unary_expr, CType, Elementwise, EwParams, KernelCache,
        ReduceOp, ReduceParams, Softmax, SoftmaxParams, BLOCK, MAX_DIMS,
    };
    use std::sync::Arc;

    /// A runtime error as pyrite-core's.
    pub(crate) fn err(e: rt::Error) -> Error {
        e.into()
    }

    impl From<rt::Error> for Error {
        fn from(e: rt::Error) -> Error {
            let kind = match e.kind {
                rt::ErrorKind::Unavailable | rt::ErrorKind::Driver | rt::ErrorKind::Compile => {
                    crate::ErrorKind::Device
                }
                rt::ErrorKind::OutOfMemory => crate::ErrorKind::OutOfMemory,
                rt::ErrorKind::Value => crate::ErrorKind::Value,
            };
            crate::error::Error::new(kind, e.message)
        }
    }

    fn ctype(d: DType) -> CType {
        match d {
            DType::Bool => CType::Bool,
            DType::U8 => CType::U8,
            DType::I32 => CType::I32,
            DType::I64 => CType::I64,
            DType::F16 => CType::F16,
            DType::BF16 => CType::BF16,
            DType::F32 => CType::F32,
            DType::F64 => CType::F64,
        }
    }

    fn index(device: Device) -> usize {
        match device {
            Device::Cuda(i) => i,
            Device::Cpu => unreachable!("a CUDA kernel launched for a CPU tensor"),
        }
    }

    /// A new contiguous tensor of `shape` and `dtype` on `cuda:device`, uninitialized.
    pub(crate) fn empty(shape: &Shape, dtype: DType, device: usize) -> Result<Tensor> {
        let n = shape.checked_numel().and_then(|n| n.checked_mul(dtype.size_in_bytes()));
        let Some(bytes) = n else { bail!(Value, "a tensor of shape {shape} is too large") };
        let buf = crate::storage::CudaStorage::new(device, bytes).map_err(err)?;
        let cell = Arc::new(StorageCell::new_for(Storage::Cuda(buf), dtype));
        Ok(Tensor::from_parts(
            cell,
            crate::layout::Layout::contiguous(shape.clone()),
            dtype,
            Device::Cuda(device),
        ))
    }

    /// `torch.full(shape, value, dtype=dtype, device=cuda:device)`.
    pub(crate) fn full(
        shape: &Shape,
        value: crate::dtype::Scalar,
        dtype: DType,
        device: usize,
    ) -> Result<Tensor> {
        let t = empty(shape, dtype, device)?;
        let k = Elementwise {
            op: "fill".into(),
            inputs: vec![],
            out: ctype(dtype),
            compute: ctype(dtype),
            expr: "s0".into(),
        };
        launch(&k, &t, &[], [value.to_f64(); 2], [value.to_i64(); 2])?;
        Ok(t)
    }

    /// The device address of element 0 of `t`'s storage.
    fn base_ptr(t: &Tensor) -> u64 {
        match &*t.storage().read() {
            Storage::Cuda(b) => b.ptr(),
            Storage::Cpu(_) => unreachable!("a CPU storage handed to a CUDA kernel"),
        }
    }

    /// The device address of `t`'s first element (its storage offset applied).
    fn data_ptr(t: &Tensor) -> u64 {
        base_ptr(t) + (t.storage_offset() * t.dtype().size_in_bytes()) as u64
    }

    /// Compiles `spec` (once per device) and launches it over `grid` blocks on `device`'s
    /// current stream.
    ///
    /// # Safety
    /// `p` must be `spec`'s parameter struct, and every address in it live device memory of
    /// the sizes it states, for as long as the stream runs the kernel (storages return to the
    /// caching allocator in stream order).
    unsafe fn launch_spec<P: Copy>(
        spec: rt::kernels::KernelSpec,
        device: usize,
        grid: u32,
        p: &P,
    ) -> Result<()> {
        let name = spec.name.clone();
        let kernel = KernelCache::global().get(device, || spec, &name).map_err(err)?;
        let stream = rt::stream::current_stream(device).map_err(err)?;
        // SAFETY: the caller's contract.
        unsafe { kernel.launch(grid, BLOCK, &stream, p) }.map_err(err)
    }

    /// Launches the elementwise kernel `k` writing `out` from `ins` (each broadcast to `out`'s
    /// shape) on `out`'s device's current stream.
    fn launch(k: &Elementwise, out: &Tensor, ins: &[&Tensor], fs: [f64; 2], is: [i64; 2]) -> Result<()> {
        let mut ops = vec![operand(out, out.layout().strides().iter().map(|&s| s as i64).collect())];
        for t in ins {
            let l = t.layout().expand(out.dims(), &k.op)?;
            ops.push(operand(t, l.strides().iter().map(|&s| s as i64).collect()));
        }
        launch_operands(k, out, &ops, fs, is)
    }

    /// An operand of an elementwise kernel: its storage, element offset and strides over the
    /// output's shape (any sign: a flip walks backwards).
    struct Operand {
        ptr: u64,
        offset: i64,
        strides: Vec<i64>,
    }

    fn operand(t: &Tensor, strides: Vec<i64>) -> Operand {
        Operand { ptr: base_ptr(t), offset: t.storage_offset() as i64, strides }
    }

    /// Launches `k` over `out`'s shape with the operands `ops` (the output first).
    fn launch_operands(
        k: &Elementwise,
        out: &Tensor,
        ops: &[Operand],
        fs: [f64; 2],
        is: [i64; 2],
    ) -> Result<()> {
        let device = index(out.device());
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        let sizes: Vec<i64> = out.dims().iter().map(|&s| s as i64).collect();
        let strides: Vec<Vec<i64>> = ops.iter().map(|o| o.strides.clone()).collect();
        let (csizes, cstrides) = coalesce(&sizes, &strides);
        if csizes.len() > MAX_DIMS {
            bail!(
                NotImplemented,
                "{}: CUDA kernels take at most {MAX_DIMS} non-mergeable dims; make the operands contiguous first",
                k.op
            );
        }
        let contiguous = csizes.len() <= 1 && cstrides.iter().all(|s| s.first().is_none_or(|&x| x == 1));
        let mut p = EwParams {
            n: n as i64,
            ndim: csizes.len() as i32,
            contiguous: contiguous as i32,
            ..Default::default()
        };
        for (i, o) in ops.iter().enumerate() {
            p.ptrs[i] = o.ptr;
            p.offsets[i] = o.offset;
        }
        for (d, &s) in csizes.iter().enumerate() {
            p.sizes[d] = s;
            for (o, st) in cstrides.iter().enumerate() {
                p.strides[o][d] = st[d];
            }
        }
        p.fscalars = fs;
        p.iscalars = is;
        // SAFETY: EwParams is the kernel's parameter struct; the pointers and layouts describe
        // live storages of the right element types, which stay allocated (stream-ordered reuse)
        // until the kernel has run.
        unsafe { launch_spec(k.spec(), device, grid_for(n as u64), &p) }
    }

    /// A contiguous copy of the elements of `src`'s storage at `base + sum(index * strides)`
    /// over `src`'s shape, with strides of any sign (`flip`).
    pub(crate) fn strided_copy(src: &Tensor, strides: &[isize], base: isize) -> Result<Tensor> {
        let device = common_device(&[src], "flip")?;
        let y = empty(src.shape(), src.dtype(), device)?;
        let k = rt::kernels::elementwise::cast(ctype(src.dtype()), ctype(src.dtype()));
        let out = operand(&y, contiguous_strides(y.dims()));
        let input = Operand {
            ptr: base_ptr(src),
            offset: base as i64,
            strides: strides.iter().map(|&s| s as i64).collect(),
        };
        launch_operands(&k, &y, &[out, input], [0.0; 2], [0; 2])?;
        Ok(y)
    }

    /// The one CUDA device of `ts`, allowing CPU 0-d tensors beside it.
    fn common_device(ts: &[&Tensor], op: &str) -> Result<usize> {
        let mut dev = None;
        for t in ts {
            match t.device() {
                Device::Cuda(i) => match dev {
                    None => dev = Some(i),
                    Some(j) if j == i => {}
                    Some(j) => bail!(
                        Device,
                        "{op}: Expected all tensors to be on the same device, but found at least two devices, cuda:{j} and cuda:{i}!"
                    ),
                },
                Device::Cpu if t.rank() == 0 => {}
                Device::Cpu => bail!(
                    Device,
                    "{op}: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda!"
                ),
            }
        }
        dev.ok_or_else(|| {
            crate::error::Error::new(crate::ErrorKind::Device, format!("{op}: no CUDA operand"))
        })
    }

    /// Replaces the identifier `var` in a kernel expression (whole tokens only).
    fn subst(expr: &str, var: &str, with: &str) -> String {
        let b = expr.as_bytes();
        let mut out = String::with_capacity(expr.len() + 8);
        let mut i = 0;
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        while i < b.len() {
            if expr[i..].starts_with(var)
                && (i == 0 || !ident(b[i - 1]))
                && b.get(i + var.len()).is_none_or(|&c| !ident(c))
            {
                out.push_str(with);
                i += var.len();
            } else {
                out.push(b[i] as char);
                i += 1;
            }
        }
        out
    }

    /// The output for `shape`/`dtype`: a fresh tensor, or `out` when it matches (else the
    /// result is computed fresh and copied into `out`).
    fn output(out: &Out<'_>, shape: &Shape, dtype: DType, device: usize) -> Result<(Tensor, bool)> {
        match out {
            Out::Into(o)
                if o.dtype() == dtype && o.shape() == shape && o.device() == Device::Cuda(device) =>
            {
                Ok(((*o).clone(), false))
            }
            Out::Into(_) => Ok((empty(shape, dtype, device)?, true)),
            Out::New => Ok((empty(shape, dtype, device)?, false)),
        }
    }

    fn finish(out: Out<'_>, y: Tensor, copy: bool) -> Result<Tensor> {
        match out {
            Out::Into(o) if copy => {
                o.copy_(&y)?;
                Ok(o.clone())
            }
            _ => Ok(y),
        }
    }

    /// `op` (a kernel op name: `add`, `floor_divide`, `lt`, ...) on `a` and `b` with result
    /// dtype `dt` (bool for comparisons; the computation runs in `compute`).
    pub(crate) fn binary(a: &Tensor, b: &Tensor, op: &str, compute: DType, out: Out<'_>) -> Result<Tensor> {
        let device = common_device(&[a, b], op)?;
        let shape = crate::shape::broadcast_shapes(a.dims(), b.dims(), op)?;
        let Some(mut expr) = binary_expr(op, ctype(compute)) else {
            bail!(NotImplemented, "\"{op}_cuda\" not implemented for '{}'", compute.type_name());
        };
        let dt = if rt::kernels::elementwise::is_predicate(op) { DType::Bool } else { compute };
        let (mut ins, mut inputs, mut fs, mut is, mut tag) =
            (Vec::new(), Vec::new(), [0.0; 2], [0i64; 2], String::new());
        let mut n_scalars = 0;
        for (t, var) in [(a, "a"), (b, "b")] {
            if t.device() == Device::Cpu {
                // A CPU scalar becomes the kernel scalar s0 / s1.
                let s = format!("s{n_scalars}");
                fs[n_scalars] = t.item::<f64>()?;
                is[n_scalars] =
                    if t.dtype().is_floating_point() { t.item::<f64>()? as i64 } else { t.item::<i64>()? };
                expr = subst(&expr, var, &s);
                tag.push_str(&format!("_{var}s"));
                n_scalars += 1;
            } else {
                ins.push(t);
                inputs.push(ctype(t.dtype()));
            }
        }
        // The inputs keep their names a, b in order; with `a` a scalar, `b` is the first input.
        if a.device() == Device::Cpu {
            expr = subst(&expr, "b", "a");
        }
        let (y, copy) = output(&out, &shape, dt, device)?;
        let k =
            Elementwise { op: format!("{op}{tag}"), inputs, out: ctype(dt), compute: ctype(compute), expr };
        launch(&k, &y, &ins, fs, is)?;
        finish(out, y, copy)
    }

    /// A custom elementwise op: `expr` over the inputs `a`, `b`, `c` (each converted to
    /// `compute`) and the scalars `s0`, `s1`, into a tensor of `out_dtype` of the broadcast
    /// shape (or into `out`). `op` names the kernel: one name, one expression.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn map(
        op: &str,
        expr: &str,
        ins: &[&Tensor],
        out_dtype: DType,
        compute: DType,
        out: Out<'_>,
        fs: [f64; 2],
        is: [i64; 2],
    ) -> Result<Tensor> {
        let device = common_device(ins, op)?;
        // CPU scalars join as one-element device tensors here.
        let moved: Vec<Tensor> = ins
            .iter()
            .map(|t| if t.device().is_cuda() { Ok((*t).clone()) } else { t.to_device(Device::Cuda(device)) })
            .collect::<Result<_>>()?;
        let ins: Vec<&Tensor> = moved.iter().collect();
        let ins = &ins[..];
        let mut shape = Shape::from(Vec::<usize>::new());
        for t in ins {
            shape = crate::shape::broadcast_shapes(shape.dims(), t.dims(), op)?;
        }
        if let Out::Into(o) = &out {
            shape = o.shape().clone();
        }
        let (y, copy) = output(&out, &shape, out_dtype, device)?;
        let k = Elementwise {
            op: op.into(),
            inputs: ins.iter().map(|t| ctype(t.dtype())).collect(),
            out: ctype(out_dtype),
            compute: ctype(compute),
            expr: expr.into(),
        };
        launch(&k, &y, ins, fs, is)?;
        finish(out, y, copy)
    }

    /// A unary op by PyTorch's name on a float (or any, for the generic ones) tensor, with
    /// the scalars `s0`, `s1` it takes.
    pub(crate) fn unary(x: &Tensor, op: &str, out: Out<'_>, scalars: [f64; 2]) -> Result<Tensor> {
        let device = common_device(&[x], op)?;
        let Some(expr) = unary_expr(op, ctype(x.dtype())) else {
            return Err(not_implemented(op));
        };
        let dt = if rt::kernels::elementwise::is_predicate(op) { DType::Bool } else { x.dtype() };
        let (y, copy) = output(&out, x.shape(), dt, device)?;
        let k = Elementwise {
            op: op.into(),
            inputs: vec![ctype(x.dtype())],
            out: ctype(dt),
            compute: ctype(x.dtype()),
            expr,
        };
        launch(&k, &y, &[x], scalars, [scalars[0] as i64, scalars[1] as i64])?;
        finish(out, y, copy)
    }

    /// `src` converted to `dst` (broadcast into `out` when given): casts, copies,
    /// `contiguous`, and `copy_` between devices.
    pub(crate) fn convert(src: &Tensor, dst: DType, out: Out<'_>) -> Result<Tensor> {
        let src = match out {
            // copy_ from another device: move first, then convert on the destination.
            Out::Into(o) if o.device() != src.device() => &src.to_device(o.device())?,
            _ => src,
        };
        if let (Out::Into(o), Device::Cpu) = (&out, src.device()) {
            return crate::ops::cast::convert(src, dst, Out::Into(o), "copy_");
        }
        let device = index(src.device());
        let shape = match &out {
            Out::Into(o) => o.shape().clone(),
            Out::New => src.shape().clone(),
        };
        let (y, copy) = output(&out, &shape, dst, device)?;
        let k = rt::kernels::elementwise::cast(ctype(src.dtype()), ctype(dst));
        launch(&k, &y, &[src], [0.0; 2], [0; 2])?;
        finish(out, y, copy)
    }

    /// `t.to(device)`: copies between host and device memory (contiguous on the way).
    /// `t.to(device, non_blocking)`. With `non_blocking`, a copy from pinned memory to a GPU
    /// is queued on the current stream and returns at once, the source's storage held until
    /// the copy is done; every other copy (from pageable memory, or to the CPU) completes
    /// before it returns.
    pub(crate) fn to_device(t: &Tensor, device: Device, non_blocking: bool) -> Result<Tensor> {
        match (t.device(), device) {
            (Device::Cpu, Device::Cuda(i)) => {
                let c = t.contiguous()?;
                let y = empty(c.shape(), c.dtype(), i)?;
                let stream = rt::stream::current_stream(i).map_err(err)?;
                // Straight from the tensor's buffer (page-locked after `pin_memory`, so the
                // copy runs at full bandwidth), not through a staging copy.
                let sz = c.dtype().size_in_bytes();
                let (start, len) = (c.storage_offset() * sz, c.numel() * sz);
                let src = c.storage().read();
                let bytes = &src.cpu().as_slice::<u8>()[start..start + len];
                match &*y.storage().read() {
                    Storage::Cuda(_) if len == 0 => {}
                    Storage::Cuda(b) if non_blocking && src.cpu().is_pinned() => {
                        let hold: Box<dyn std::any::Any + Send> = Box::new(c.storage().clone());
                        // SAFETY: the bytes are page-locked and belong to the storage `hold`
                        // keeps alive until the stream has copied them.
                        unsafe { b.copy_from_host_async(0, bytes.as_ptr(), len, &stream, hold) }
                            .map_err(err)?
                    }
                    Storage::Cuda(b) => b.copy_from_host(0, bytes, &stream).map_err(err)?,
                    Storage::Cpu(_) => unreachable!(),
                }
                Ok(y)
            }
            (Device::Cuda(i), Device::Cpu) => {
                let c = if t.is_contiguous() { t.clone() } else { convert(t, t.dtype(), Out::New)? };
                let sz = c.dtype().size_in_bytes();
                let mut bytes = vec![0u8; c.numel() * sz];
                let stream = rt::stream::current_stream(i).map_err(err)?;
                match &*c.storage().read() {
                    Storage::Cuda(b) => {
                        b.copy_to_host(c.storage_offset() * sz, &mut bytes, &stream).map_err(err)?
                    }
                    Storage::Cpu(_) => unreachable!(),
                }
                Tensor::from_raw_bytes(&bytes, c.shape().clone(), c.dtype())
            }
            (Device::Cuda(_), Device::Cuda(_)) => {
                to_device(&to_device(t, Device::Cpu, false)?, device, false)
            }
            (Device::Cpu, Device::Cpu) => Ok(t.clone()),
        }
    }

    /// A reduction of the dims of `x` selected by `mask`: the values (and indices for
    /// argmax/argmin).
    pub(crate) fn reduce(
        x: &Tensor,
        mask: &[bool],
        keepdim: bool,
        r: Reduction,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let device = common_device(&[x], "reduce")?;
        let op = match r {
            Reduction::Sum => ReduceOp::Sum,
            Reduction::Mean => ReduceOp::Mean,
            Reduction::Prod => ReduceOp::Prod,
            Reduction::Max => ReduceOp::Max,
            Reduction::Min => ReduceOp::Min,
            Reduction::ArgMax => ReduceOp::ArgMax,
            Reduction::ArgMin => ReduceOp::ArgMin,
        };
        let input = ctype(x.dtype());
        let out_t = reduce::default_out(op, input);
        let out_dtype = DType::ALL[CType::ALL.iter().position(|&c| c == out_t).unwrap()];
        let dims = x.dims();
        let out_shape: Vec<usize> = (0..dims.len())
            .filter_map(|d| if mask[d] { keepdim.then_some(1) } else { Some(dims[d]) })
            .collect();
        let shape = Shape::from(out_shape);
        let values = empty(&shape, out_dtype, device)?;
        let is_arg = matches!(r, Reduction::ArgMax | Reduction::ArgMin);
        let indices = if is_arg { Some(empty(&shape, DType::I64, device)?) } else { None };
        let strides: Vec<i64> = x.layout().strides().iter().map(|&s| s as i64).collect();
        let Some(mut p) = ReduceParams::over(dims, &strides, mask) else {
            bail!(NotImplemented, "CUDA reductions take at most {MAX_DIMS} kept and {MAX_DIMS} reduced dims");
        };
        p.input = base_ptr(x);
        p.in_offset = x.storage_offset() as i64;
        p.out = base_ptr(&values);
        if let Some(i) = &indices {
            p.out_index = base_ptr(i);
        }
        if p.n_out == 0 {
            return Ok((values, indices));
        }
        if p.n_red == 0 && (is_arg || matches!(r, Reduction::Max | Reduction::Min)) {
            bail!(Index, "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
        }
        let spec = rt::kernels::Reduce { op, input, out: out_t };
        let Some(kspec) = spec.spec() else {
            bail!(
                NotImplemented,
                "\"{}\" not implemented for '{}'",
                spec.kernel_name(),
                x.dtype().type_name()
            );
        };
        // SAFETY: ReduceParams is the kernel's parameter struct and describes live storages.
        unsafe { launch_spec(kspec, device, grid_for(p.n_out as u64 * BLOCK as u64).min(65_535), &p) }?;
        Ok((values, indices))
    }

    /// `out = beta * input + alpha * (a @ b)` for matrices (rank 2) or batches (rank 3): cuBLAS
    /// where the layouts allow, else the GEMM kernel; the input added after.
    pub(crate) fn addbmm(
        a: &Tensor,
        b: &Tensor,
        input: Option<&Tensor>,
        beta: crate::dtype::Scalar,
        alpha: crate::dtype::Scalar,
        out: Option<&Tensor>,
    ) -> Result<Tensor> {
        let mut ts = vec![a, b];
        ts.extend(input);
        ts.extend(out);
        let device = common_device(&ts, "addmm")?;
        if !a.device().is_cuda() || !b.device().is_cuda() {
            bail!(Device, "addmm: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:{device}!");
        }
        let dtype = a.dtype();
        if !dtype.is_floating_point() {
            bail!(NotImplemented, "\"addmm_cuda\" not implemented for '{}'", dtype.type_name());
        }
        let r = a.rank();
        if r > 3 {
            // Several batch dims (matmul of 4-D operands): one batch of their product.
            let (m, k, n) = (a.dims()[r - 2], a.dims()[r - 1], b.dims()[r - 1]);
            let flat = |t: &Tensor, rows: usize, cols: usize| t.reshape([-1, rows as isize, cols as isize]);
            let mut shape = a.dims()[..r - 1].to_vec();
            shape.push(n);
            let c = addbmm(&flat(a, m, k)?, &flat(b, k, n)?, None, beta, alpha, None)?.view(shape)?;
            return add_input(c, input, beta, out);
        }
        let (batch, m, k, n) = if r == 3 {
            (a.dims()[0], a.dims()[1], a.dims()[2], b.dims()[2])
        } else {
            (1, a.dims()[0], a.dims()[1], b.dims()[1])
        };
        let mut shape: Vec<usize> = a.dims()[..r - 1].to_vec();
        shape.push(n);
        let c = empty(&Shape::from(shape), dtype, device)?;
        let strides3 = |t: &Tensor| -> [i64; 3] {
            let s = t.layout().strides();
            if r == 3 {
                [s[0] as i64, s[1] as i64, s[2] as i64]
            } else {
                [0, s[0] as i64, s[1] as i64]
            }
        };
        if c.numel() > 0 {
            let sz = dtype.size_in_bytes() as u64;
            let mat = |t: &Tensor| rt::blas::Matrix {
                ptr: base_ptr(t) + t.storage_offset() as u64 * sz,
                strides: strides3(t),
            };
            let stream = rt::stream::current_stream(device).map_err(err)?;
            let alpha_f = alpha.to_f64();
            let by_blas = k > 0
                && rt::blas::gemm(
                    device,
                    &stream,
                    ctype(dtype),
                    batch as i64,
                    m as i64,
                    n as i64,
                    k as i64,
                    alpha_f,
                    &mat(a),
                    &mat(b),
                    &mat(&c),
                    crate::backends::cuda_matmul_allow_tf32(),
                )
                .map_err(err)?;
            if !by_blas {
                let p = rt::kernels::GemmParams {
                    a: base_ptr(a),
                    b: base_ptr(b),
                    c: base_ptr(&c),
                    batch: batch as i64,
                    m: m as i64,
                    n: n as i64,
                    k: k as i64,
                    sa: strides3(a),
                    sb: strides3(b),
                    sc: strides3(&c),
                    offsets: [
                        a.storage_offset() as i64,
                        b.storage_offset() as i64,
                        c.storage_offset() as i64,
                    ],
                    alpha: alpha_f,
                };
                let Some(spec) = rt::kernels::gemm::spec(ctype(dtype)) else {
                    bail!(NotImplemented, "\"addmm_cuda\" not implemented for '{}'", dtype.type_name());
                };
                let tiles = batch as u64 * (m as u64).div_ceil(16) * (n as u64).div_ceil(16);
                // SAFETY: GemmParams describes live storages of `dtype` elements of the stated
                // shapes and strides; blocks are the 256 threads the kernel needs.
                unsafe { launch_spec(spec, device, tiles.clamp(1, 65_535) as u32, &p) }?;
            }
        }
        add_input(c, input, beta, out)
    }

    /// `beta * input + c`, into `out` when given.
    fn add_input(
        c: Tensor,
        input: Option<&Tensor>,
        beta: crate::dtype::Scalar,
        out: Option<&Tensor>,
    ) -> Result<Tensor> {
        let zero_beta = beta.to_f64() == 0.0;
        let y = match input {
            Some(i) if !zero_beta => {
                let scaled = if beta.to_f64() == 1.0 { i.clone() } else { i.mul_scalar(beta)? };
                c.add(&scaled)?
            }
            _ => c,
        };
        match out {
            Some(o) => {
                o.copy_(&y)?;
                Ok(o.clone())
            }
            None => Ok(y),
        }
    }

    /// Validated positions along a dim, uploaded as a contiguous int64 tensor.
    fn upload_index(idx: &[i64], device: usize) -> Result<Tensor> {
        Tensor::from_vec(idx.to_vec(), [idx.len()])?.to_device(Device::Cuda(device))
    }

    fn contiguous_strides(dims: &[usize]) -> Vec<i64> {
        let mut s = vec![1i64; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            s[d] = s[d + 1] * dims[d + 1] as i64;
        }
        s
    }

    /// Launches `gather_*` or `scatter_add_*` over `sizes` with the three operands' strides.
    #[allow(clippy::too_many_arguments)]
    fn launch_index(
        spec: rt::kernels::KernelSpec,
        device: usize,
        dim: usize,
        sizes: &[usize],
        ops: [(&Tensor, Vec<i64>); 3],
        alpha: f64,
    ) -> Result<()> {
        let n: usize = sizes.iter().product();
        if n == 0 {
            return Ok(());
        }
        if sizes.len() > MAX_DIMS {
            bail!(NotImplemented, "CUDA indexing takes at most {MAX_DIMS} dims");
        }
        let mut p = rt::kernels::IndexParams {
            n: n as i64,
            ndim: sizes.len() as i32,
            dim: dim as i32,
            alpha,
            ..Default::default()
        };
        for (d, &s) in sizes.iter().enumerate() {
            p.sizes[d] = s as i64;
        }
        for (k, (t, strides)) in ops.iter().enumerate() {
            p.ptrs[k] = base_ptr(t);
            p.offsets[k] = t.storage_offset() as i64;
            for (d, &s) in strides.iter().enumerate() {
                p.strides[k][d] = s;
            }
        }
        // SAFETY: IndexParams describes live storages; every index was validated against the
        // size of `dim` on the host.
        unsafe { launch_spec(spec, device, grid_for(n as u64), &p) }
    }

    fn strides_of(t: &Tensor) -> Vec<i64> {
        t.layout().strides().iter().map(|&s| s as i64).collect()
    }

    /// `src.gather(dim, index)` with the index's validated values `idx` (row-major over
    /// `index_shape`).
    pub(crate) fn gather(src: &Tensor, dim: usize, idx: &[i64], index_shape: &Shape) -> Result<Tensor> {
        let device = common_device(&[src], "gather")?;
        let out = empty(index_shape, src.dtype(), device)?;
        let index = upload_index(idx, device)?;
        let cs = contiguous_strides(index_shape.dims());
        let spec = rt::kernels::index::gather(ctype(src.dtype()));
        launch_index(
            spec,
            device,
            dim,
            index_shape.dims(),
            [(&out, cs.clone()), (src, strides_of(src)), (&index, cs)],
            1.0,
        )?;
        Ok(out)
    }

    /// `src.index_select(dim, index)` with the validated positions `idx`.
    pub(crate) fn index_select(src: &Tensor, dim: usize, idx: &[i64]) -> Result<Tensor> {
        let device = common_device(&[src], "index_select")?;
        let mut dims = src.dims().to_vec();
        dims[dim] = idx.len();
        let out = empty(&Shape::from(dims.clone()), src.dtype(), device)?;
        let index = upload_index(idx, device)?;
        let mut is = vec![0i64; dims.len()];
        is[dim] = 1;
        let spec = rt::kernels::index::gather(ctype(src.dtype()));
        launch_index(
            spec,
            device,
            dim,
            &dims,
            [(&out, contiguous_strides(&dims)), (src, strides_of(src)), (&index, is)],
            1.0,
        )?;
        Ok(out)
    }

    /// `out.scatter_add_(dim, index, src)` (with `per_slice`, `out.index_add_(dim, index,
    /// src, alpha)`: one position per slice of `src` along `dim`), in place.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scatter_add(
        out: &Tensor,
        dim: usize,
        idx: &[i64],
        index_shape: &Shape,
        src: &Tensor,
        per_slice: bool,
        alpha: f64,
    ) -> Result<()> {
        let device = common_device(&[out, src], "scatter_add")?;
        if matches!(out.dtype(), DType::F16 | DType::BF16) {
            // Half precisions add in float32 (no half atomics), rounded once.
            let _g = crate::autograd::no_grad();
            let acc = out.to_dtype(DType::F32)?;
            scatter_add(&acc, dim, idx, index_shape, &src.to_dtype(DType::F32)?, per_slice, alpha)?;
            out.copy_(&acc)?;
            return Ok(());
        }
        let Some(spec) = rt::kernels::index::scatter_add(ctype(out.dtype())) else {
            bail!(NotImplemented, "\"scatter_add_cuda\" not implemented for '{}'", out.dtype().type_name());
        };
        let index = upload_index(idx, device)?;
        let (sizes, is) = if per_slice {
            let mut is = vec![0i64; src.rank()];
            is[dim] = 1;
            (src.dims().to_vec(), is)
        } else {
            (index_shape.dims().to_vec(), contiguous_strides(index_shape.dims()))
        };
        // The writes land in `out`'s storage: count them as an in-place write.
        drop(out.storage().write());
        launch_index(
            spec,
            device,
            dim,
            &sizes,
            [(out, strides_of(out)), (src, strides_of(src)), (&index, is)],
            alpha,
        )
    }

    /// `out.scatter_(dim, index, src)` with the index's validated values `idx` (row-major over
    /// `index_shape`; `src` is walked over that shape), in place.
    pub(crate) fn scatter(
        out: &Tensor,
        dim: usize,
        idx: &[i64],
        index_shape: &Shape,
        src: &Tensor,
    ) -> Result<()> {
        let device = common_device(&[out, src], "scatter")?;
        let src = if src.device().is_cuda() { src.clone() } else { src.to_device(out.device())? };
        let index = upload_index(idx, device)?;
        // The writes land in `out`'s storage: count them as an in-place write.
        drop(out.storage().write());
        launch_index(
            rt::kernels::index::scatter(ctype(out.dtype())),
            device,
            dim,
            index_shape.dims(),
            [
                (out, strides_of(out)),
                (&src, strides_of(&src)),
                (&index, contiguous_strides(index_shape.dims())),
            ],
            1.0,
        )
    }

    /// softmax / log_softmax over `dim`.
    pub(crate) fn softmax(x: &Tensor, dim: usize, log: bool) -> Result<Tensor> {
        let device = common_device(&[x], "softmax")?;
        let last = x.rank().saturating_sub(1);
        // The kernel walks contiguous rows of the last dim: move `dim` there and back.
        let xt = if dim == last {
            x.contiguous()?
        } else {
            x.transpose(dim as isize, last as isize)?.contiguous()?
        };
        let y = empty(xt.shape(), xt.dtype(), device)?;
        let cols = xt.dims().last().copied().unwrap_or(1).max(1);
        let rows = xt.numel() / cols;
        if xt.numel() > 0 {
            let kind = if log { Softmax::LogForward } else { Softmax::Forward };
            let spec = kind.spec(ctype(x.dtype())).ok_or_else(|| not_implemented("softmax"))?;
            let p = SoftmaxParams {
                out: base_ptr(&y),
                input: data_ptr(&xt),
                grad: 0,
                rows: rows as i64,
                cols: cols as i64,
            };
            // SAFETY: SoftmaxParams describes contiguous live storages of `rows * cols` elements.
            unsafe { launch_spec(spec, device, (rows as u32).clamp(1, 65_535), &p) }?;
        }
        if dim == last {
            Ok(y)
        } else {
            y.transpose(dim as isize, last as isize)?.contiguous()
        }
    }

    /// A scan along the middle dim of the contiguous `x` seen as `(outer, k, inner)`: the
    /// running values (int64 for integer sums and products) and, for max/min, the indices.
    pub(crate) fn scan(
        x: &Tensor,
        (outer, k, inner): (usize, usize, usize),
        op: Scan,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let device = common_device(&[x], "cumsum")?;
        let op = match op {
            Scan::Sum => rt::kernels::ScanOp::Sum,
            Scan::Prod => rt::kernels::ScanOp::Prod,
            Scan::Max => rt::kernels::ScanOp::Max,
            Scan::Min => rt::kernels::ScanOp::Min,
        };
        let t = ctype(x.dtype());
        let out_t = op.out_type(t);
        let out_dtype = DType::ALL[CType::ALL.iter().position(|&c| c == out_t).unwrap()];
        let values = empty(x.shape(), out_dtype, device)?;
        let indices = if op.is_extreme() { Some(empty(x.shape(), DType::I64, device)?) } else { None };
        let lines = outer * inner;
        if lines == 0 || k == 0 {
            return Ok((values, indices));
        }
        let p = rt::kernels::ScanParams {
            input: data_ptr(x),
            out: base_ptr(&values),
            out_index: indices.as_ref().map_or(0, base_ptr),
            outer: outer as i64,
            k: k as i64,
            inner: inner as i64,
        };
        let spec = rt::kernels::scan::scan(op, t);
        // SAFETY: ScanParams describes the contiguous input and fresh outputs of its size.
        unsafe { launch_spec(spec, device, (lines as u32).clamp(1, 65_535), &p) }?;
        Ok((values, indices))
    }

    /// `x.nonzero()`: the running count of non-zero elements, its total read back (the one
    /// synchronization, as in PyTorch), then each element's coordinates written to its row.
    pub(crate) fn nonzero(x: &Tensor) -> Result<Tensor> {
        let device = common_device(&[x], "nonzero")?;
        let n = x.numel();
        let r = x.rank();
        if n == 0 {
            return empty(&Shape::from([0, r]), DType::I64, device);
        }
        let flags = x.ne_scalar(0.0)?.to_dtype(DType::I64)?.reshape([n])?.contiguous()?;
        let counts = scan(&flags, (1, n, 1), Scan::Sum)?.0;
        let total = counts.narrow(0, n as isize - 1, 1)?.to_device(Device::Cpu)?.item::<i64>()? as usize;
        let out = empty(&Shape::from([total, r]), DType::I64, device)?;
        if total == 0 || r == 0 {
            return Ok(out);
        }
        if r > MAX_DIMS {
            bail!(NotImplemented, "nonzero: CUDA kernels take at most {MAX_DIMS} dims");
        }
        let mut p = rt::kernels::NonzeroParams {
            counts: base_ptr(&counts),
            out: base_ptr(&out),
            n: n as i64,
            ndim: r as i32,
            sizes: [1; MAX_DIMS],
        };
        for (d, &s) in x.dims().iter().enumerate() {
            p.sizes[d] = s as i64;
        }
        let spec = rt::kernels::scan::nonzero();
        // SAFETY: the counts hold `n` int64 values ending at `total`, the output `total * r`.
        unsafe { launch_spec(spec, device, grid_for(n as u64), &p) }.map(|_| out)
    }

    fn conv_params(g: &ConvShape, src: u64, dst: u64, total: usize) -> rt::kernels::ConvParams {
        let i3 = |v: [usize; 3]| v.map(|x| x as i64);
        rt::kernels::ConvParams {
            src,
            dst,
            total: total as i64,
            n: g.n as i64,
            c: g.c as i64,
            big: i3(g.big),
            small: i3(g.small),
            k: i3(g.k),
            stride: i3(g.stride),
            pad: i3(g.pad),
            dil: i3(g.dil),
        }
    }

    fn launch_conv(spec: rt::kernels::KernelSpec, device: usize, p: &rt::kernels::ConvParams) -> Result<()> {
        if p.total == 0 {
            return Ok(());
        }
        // SAFETY: ConvParams describes contiguous live storages of the sizes it states.
        unsafe { launch_spec(spec, device, grid_for(p.total as u64), p) }
    }

    /// The column matrix `[C * K, N * L]` of the contiguous input `x` (`[N, C, *big]`).
    pub(crate) fn im2col(x: &Tensor, g: &ConvShape) -> Result<Tensor> {
        let device = common_device(&[x], "im2col")?;
        let rows = g.c * g.k.iter().product::<usize>();
        let cols = g.n * g.small.iter().product::<usize>();
        let col = empty(&Shape::from([rows, cols]), x.dtype(), device)?;
        let src = data_ptr(x);
        let p = conv_params(g, src, base_ptr(&col), rows * cols);
        launch_conv(rt::kernels::conv::im2col(ctype(x.dtype())), device, &p)?;
        Ok(col)
    }

    /// The contiguous column matrix `col` (`[C * K, N * L]`) folded onto a new input-shaped
    /// tensor of `shape` (`[N, C, *big]`), overlapping windows summed.
    pub(crate) fn col2im(col: &Tensor, g: &ConvShape, shape: &Shape) -> Result<Tensor> {
        let device = common_device(&[col], "col2im")?;
        let x = empty(shape, col.dtype(), device)?;
        let src = data_ptr(col);
        let p = conv_params(g, src, base_ptr(&x), x.numel());
        launch_conv(rt::kernels::conv::col2im(ctype(col.dtype())), device, &p)?;
        Ok(x)
    }

    /// Launches a pooling kernel writing `total` elements of `dst` from the contiguous `src`.
    fn launch_pool(
        spec: rt::kernels::KernelSpec,
        src: &Tensor,
        dst: &Tensor,
        indices: Option<&Tensor>,
        g: &PoolShape,
        total: usize,
    ) -> Result<()> {
        let device = common_device(&[src], "pool")?;
        if total == 0 {
            return Ok(());
        }
        let windows = upload_index(&g.windows, device)?;
        let i3 = |v: [usize; 3]| v.map(|x| x as i64);
        let p = rt::kernels::PoolParams {
            src: data_ptr(src),
            dst: base_ptr(dst),
            indices: indices.map_or(0, base_ptr),
            windows: base_ptr(&windows),
            total: total as i64,
            inp: i3(g.inp),
            out: i3(g.out),
            step: i3(g.step),
            div_mode: g.div_mode,
            divisor: g.divisor,
        };
        // SAFETY: PoolParams describes contiguous live storages and the window table of the
        // stated sizes; every window lies inside the input.
        unsafe { launch_spec(spec, device, grid_for(total as u64), &p) }
    }

    /// Max (`max`, with indices) or average pooling of the contiguous `x` into `shape`.
    pub(crate) fn pool(
        x: &Tensor,
        g: &PoolShape,
        shape: &Shape,
        max: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let device = common_device(&[x], "pool")?;
        let y = empty(shape, x.dtype(), device)?;
        let t = ctype(x.dtype());
        if max {
            let i = empty(shape, DType::I64, device)?;
            launch_pool(rt::kernels::pool::max_pool(t), x, &y, Some(&i), g, y.numel())?;
            Ok((y, Some(i)))
        } else {
            launch_pool(rt::kernels::pool::avg_pool(t), x, &y, None, g, y.numel())?;
            Ok((y, None))
        }
    }

    /// Average pooling's gradient for the contiguous output gradient `gy`, input-shaped.
    pub(crate) fn avg_pool_backward(gy: &Tensor, g: &PoolShape, shape: &Shape) -> Result<Tensor> {
        let device = common_device(&[gy], "avg_pool_backward")?;
        let x = empty(shape, gy.dtype(), device)?;
        launch_pool(rt::kernels::pool::avg_pool_backward(ctype(gy.dtype())), gy, &x, None, g, x.numel())?;
        Ok(x)
    }

    /// `x.sort(dim, descending)`, stable: the rows along `dim` padded to a power of two and
    /// sorted by the bitonic network, one launch per step.
    pub(crate) fn sort(x: &Tensor, dim: usize, descending: bool) -> Result<(Tensor, Tensor)> {
        let device = common_device(&[x], "sort")?;
        if x.rank() == 0 {
            return Ok((x.deep_clone()?, Tensor::zeros_on([], DType::I64, x.device())?));
        }
        let last = x.rank() - 1;
        let xt = if dim == last { x.clone() } else { x.transpose(dim as isize, last as isize)? };
        let len = xt.dims()[last];
        let rows = xt.numel() / len.max(1);
        if xt.numel() == 0 {
            let v = xt.deep_clone()?;
            let i = Tensor::zeros_on(xt.shape().clone(), DType::I64, x.device())?;
            return Ok((
                v.transpose(dim as isize, last as isize)?,
                i.transpose(dim as isize, last as isize)?,
            ));
        }
        let width = len.next_power_of_two();
        let flat = xt.reshape([rows, len])?;
        // Fresh storage (sorted in place), padded to the width.
        let keys = if width == len {
            if flat.is_contiguous() {
                flat.deep_clone()?
            } else {
                flat.contiguous()?
            }
        } else {
            Tensor::cat(&[&flat, &Tensor::zeros_on([rows, width - len], x.dtype(), x.device())?], 1)?
        };
        let order = Tensor::arange(0.0, width as f64, 1.0, DType::I64)?.to_device(x.device())?;
        let idx = order.unsqueeze(0)?.expand([rows, width])?.contiguous()?;
        let spec = rt::kernels::sort::sort_step(ctype(x.dtype()));
        let name = spec.name.clone();
        let kernel = KernelCache::global().get(device, || spec, &name).map_err(err)?;
        let stream = rt::stream::current_stream(device).map_err(err)?;
        let mut p = rt::kernels::SortParams {
            keys: data_ptr(&keys),
            indices: data_ptr(&idx),
            rows: rows as i64,
            width: width as i64,
            len: len as i64,
            descending: descending as i32,
            ..Default::default()
        };
        let pairs = (rows * width / 2) as u64;
        let mut stage = 2;
        while stage <= width {
            let mut step = stage / 2;
            while step > 0 {
                p.stage = stage as i64;
                p.step = step as i64;
                // SAFETY: SortParams describes the fresh contiguous keys and indices of
                // `rows * width` elements.
                unsafe { kernel.launch(grid_for(pairs), BLOCK, &stream, &p) }.map_err(err)?;
                step /= 2;
            }
            stage *= 2;
        }
        let shape = xt.dims().to_vec();
        let back = |t: &Tensor| -> Result<Tensor> {
            let t = t.narrow(1, 0, len)?.reshape(shape.clone())?;
            if dim == last {
                t.contiguous()
            } else {
                t.transpose(dim as isize, last as isize)?.contiguous()
            }
        };
        Ok((back(&keys)?, back(&idx)?))
    }

    /// Launches the foreach kernel for `k` over the groups of `tensors` (checked by the caller:
    /// one dtype and device, one size per group, contiguous written tensors).
    pub(crate) fn foreach(
        tensors: &[&Tensor],
        arity: usize,
        n_write: usize,
        k: crate::ops::foreach::DeviceKernel<'_>,
        coefs: &[f64],
        ncoef: usize,
    ) -> Result<()> {
        if tensors.is_empty() {
            return Ok(());
        }
        let device = common_device(tensors, "foreach")?;
        let dtype = tensors[0].dtype();
        // Read tensors that are not contiguous are copied; the copies live until the launch.
        let mut held = Vec::new();
        let mut table: Vec<i64> = Vec::with_capacity(tensors.len() / arity * (arity + 1));
        let mut largest = 0;
        for (i, t) in tensors.iter().enumerate() {
            let t = if t.is_contiguous() { (*t).clone() } else { t.contiguous()? };
            table.push(data_ptr(&t) as i64);
            if i % arity < n_write {
                // An in-place write: the version counter moves.
                drop(t.storage().write());
            }
            if i % arity == arity - 1 {
                table.push(t.numel() as i64);
                largest = largest.max(t.numel());
            }
            held.push(t);
        }
        if largest == 0 {
            return Ok(());
        }
        let Some(spec) = rt::kernels::foreach::foreach(k.name, k.body, ctype(dtype), arity) else {
            bail!(
                NotImplemented,
                "foreach: \"{}\" not implemented for '{}' on CUDA",
                k.name,
                dtype.type_name()
            );
        };
        let table_t = upload_index(&table, device)?;
        let coefs_t = Tensor::from_vec(coefs.to_vec(), [coefs.len()])?.to_device(Device::Cuda(device))?;
        let p = rt::kernels::ForeachParams {
            table: base_ptr(&table_t),
            coefs: base_ptr(&coefs_t),
            items: (tensors.len() / arity) as i64,
            ncoef: ncoef as i32,
        };
        // SAFETY: the table holds live, contiguous tensors of `dtype` with their element
        // counts; the coefficients `ncoef` per item.
        unsafe { launch_spec(spec, device, grid_for(largest as u64), &p) }?;
        drop(held);
        Ok(())
    }

    /// Fills the contiguous `t` with `draw` from counter blocks `base..` of the stream `seed`,
    /// element `i` from the same block and word as on the CPU.
    pub(crate) fn random_fill(t: &Tensor, draw: Draw, seed: u64, base: u64) -> Result<()> {
        use rt::kernels::random::Dist;
        let device = common_device(&[t], "random")?;
        let dist = match draw.kind {
            DrawKind::Uniform => Dist::Uniform,
            DrawKind::Normal => Dist::Normal,
            DrawKind::Bernoulli => Dist::Bernoulli,
            DrawKind::Int32 => Dist::Int32,
            DrawKind::Int64 => Dist::Int64,
        };
        let Some(spec) = rt::kernels::random::fill(dist, ctype(t.dtype())) else {
            bail!(
                NotImplemented,
                "random: {:?} draws into '{}' are not implemented on CUDA",
                draw.kind,
                t.dtype().type_name()
            );
        };
        let n = t.numel();
        if n == 0 {
            return Ok(());
        }
        drop(t.storage().write());
        let p = rt::kernels::RandomParams {
            out: data_ptr(t),
            n: n as i64,
            seed,
            base,
            f: draw.f,
            low: draw.low,
            range_lo: draw.range as u64,
            range_hi: (draw.range >> 64) as u64,
        };
        let blocks = n.div_ceil(dist.per_block(ctype(t.dtype()))) as u64;
        // SAFETY: RandomParams describes the contiguous live output of `n` elements.
        unsafe { launch_spec(spec, device, grid_for(blocks), &p) }
    }

    /// A storage on `cuda:device` holding a copy of `bytes`.
    pub(crate) fn storage_from_bytes(bytes: &[u8], device: usize) -> Result<crate::UntypedStorage> {
        let buf = crate::storage::CudaStorage::new(device, bytes.len()).map_err(err)?;
        let stream = rt::stream::current_stream(device).map_err(err)?;
        buf.copy_from_host(0, bytes, &stream).map_err(err)?;
        Ok(crate::UntypedStorage(Arc::new(StorageCell::new(Storage::Cuda(buf)))))
    }
}

pub(crate) use imp::*;
