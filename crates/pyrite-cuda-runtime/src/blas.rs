//! Matrix products through cuBLAS (`cublasGemmStridedBatchedEx`), one handle per device and
//! stream, for the layouts cuBLAS takes: every matrix with unit stride along its rows or its
//! columns and one batch stride per operand. pyrite-core falls back to the GEMM kernel for
//! the others.

use crate::driver::{context, driver_error};
use crate::kernels::CType;
use crate::stream::Stream;
use crate::{cuda_bail, Result};
use cudarc::cublas::sys;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// A row-major matrix operand: device address of element (0, 0) of matrix 0, and element
/// strides (batch, row, column).
#[derive(Clone, Copy, Debug)]
pub struct Matrix {
    /// Device address of the first element (offset applied).
    pub ptr: u64,
    /// Element strides: batch, row, column.
    pub strides: [i64; 3],
}

/// How a row-major operand appears to column-major cuBLAS: (transpose?, leading dimension),
/// when its layout allows it. `rows` x `cols` is the matrix's row-major shape.
fn as_col_major(m: &Matrix, rows: i64, cols: i64) -> Option<(bool, i64)> {
    let [_, rs, cs] = m.strides;
    // Row-major with unit column stride is column-major of the transpose, untransposed.
    if cs == 1 && rs >= cols.max(1) {
        return Some((false, rs));
    }
    if rs == 1 && cs >= rows.max(1) {
        return Some((true, cs));
    }
    // Degenerate dims: a single row or column has any stride there.
    if rows == 1 && cs == 1 {
        return Some((false, cols.max(1)));
    }
    if cols == 1 && rs == 1 {
        return Some((true, rows.max(1)));
    }
    None
}

struct Handle(sys::cublasHandle_t);
// SAFETY: a cuBLAS handle may be used from any thread, one call at a time (the mutex below).
unsafe impl Send for Handle {}

fn handle(device: usize, stream: &Stream) -> Result<sys::cublasHandle_t> {
    static HANDLES: OnceLock<Mutex<HashMap<(usize, u64), Handle>>> = OnceLock::new();
    let map = HANDLES.get_or_init(Default::default);
    let mut m = map.lock().unwrap();
    if let Some(h) = m.get(&(device, stream.id())) {
        return Ok(h.0);
    }
    if !crate::driver::cublas_is_available() {
        cuda_bail!(Unavailable, "cuBLAS (libcublas.so.12, libcublasLt.so.12) could not be opened");
    }
    let _ctx = context(device)?;
    let h = cudarc::cublas::result::create_handle().map_err(|e| blas_error("cublasCreate", e))?;
    // SAFETY: a fresh handle and a live stream of this device.
    unsafe { cudarc::cublas::result::set_stream(h, stream.cu_stream() as _) }
        .map_err(|e| blas_error("cublasSetStream", e))?;
    m.insert((device, stream.id()), Handle(h));
    Ok(h)
}

fn blas_error(call: &str, e: cudarc::cublas::result::CublasError) -> crate::Error {
    crate::Error::new(crate::ErrorKind::Driver, format!("CUDA error: {call} failed: {e:?}"))
}

/// `C = alpha * A @ B` for `batch` matrices (A: m x k, B: k x n, C: m x n, row-major, C with
/// unit column stride). `allow_tf32` lets f32 products use TF32 tensor cores
/// (`torch.backends.cuda.matmul.allow_tf32`, set by `set_float32_matmul_precision("high")`).
/// Returns `Ok(false)` without doing anything when the layouts are not ones cuBLAS takes.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    device: usize,
    stream: &Stream,
    t: CType,
    batch: i64,
    m: i64,
    n: i64,
    k: i64,
    alpha: f64,
    a: &Matrix,
    b: &Matrix,
    c: &Matrix,
    allow_tf32: bool,
) -> Result<bool> {
    if crate::emulated() {
        return Ok(false);
    }
    let (data, compute) = match t {
        CType::F32 if allow_tf32 => {
            (sys::cudaDataType::CUDA_R_32F, sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32)
        }
        CType::F32 => (sys::cudaDataType::CUDA_R_32F, sys::cublasComputeType_t::CUBLAS_COMPUTE_32F),
        CType::F16 => (sys::cudaDataType::CUDA_R_16F, sys::cublasComputeType_t::CUBLAS_COMPUTE_32F),
        CType::BF16 => (sys::cudaDataType::CUDA_R_16BF, sys::cublasComputeType_t::CUBLAS_COMPUTE_32F),
        CType::F64 => (sys::cudaDataType::CUDA_R_64F, sys::cublasComputeType_t::CUBLAS_COMPUTE_64F),
        _ => return Ok(false),
    };
    // Column-major view: C^T (n x m) = B^T (n x k) @ A^T (k x m).
    let (Some((tb, ldb)), Some((ta, lda))) = (as_col_major(b, k, n), as_col_major(a, m, k)) else {
        return Ok(false);
    };
    if c.strides[2] != 1 || c.strides[1] < n.max(1) {
        return Ok(false);
    }
    let fits = |v: i64| i32::try_from(v).is_ok();
    if ![m, n, k, lda, ldb, c.strides[1], batch].into_iter().all(fits) {
        return Ok(false);
    }
    let h = handle(device, stream)?;
    let op =
        |t: bool| if t { sys::cublasOperation_t::CUBLAS_OP_T } else { sys::cublasOperation_t::CUBLAS_OP_N };
    let (alpha32, beta32, alpha64, beta64) = (alpha as f32, 0f32, alpha, 0f64);
    let (pa, pb): (*const std::ffi::c_void, *const std::ffi::c_void) = if t == CType::F64 {
        (&alpha64 as *const f64 as _, &beta64 as *const f64 as _)
    } else {
        (&alpha32 as *const f32 as _, &beta32 as *const f32 as _)
    };
    let _ctx = context(device)?;
    let launch = crate::activity::Launch {
        kind: crate::activity::ActivityKind::Kernel,
        name: "cublasGemmStridedBatchedEx",
        api: "cublasGemmStridedBatchedEx",
        grid: 0,
        block: 0,
        bytes: 0,
    };
    // SAFETY: the pointers and strides describe live device matrices of `t` elements of the
    // stated shapes (checked above to be expressible to cuBLAS); alpha and beta are host
    // scalars of the compute type, read before the call returns.
    crate::activity::record(launch, stream, || {
        unsafe {
            cudarc::cublas::result::gemm_strided_batched_ex(
                h,
                op(tb),
                op(ta),
                n as i32,
                m as i32,
                k as i32,
                pa,
                b.ptr as *const _,
                data,
                ldb as i32,
                b.strides[0],
                a.ptr as *const _,
                data,
                lda as i32,
                a.strides[0],
                pb,
                c.ptr as *mut _,
                data,
                c.strides[1] as i32,
                c.strides[0],
                batch as i32,
                compute,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| blas_error("cublasGemmStridedBatchedEx", e))
    })?;
    let _ = driver_error;
    Ok(true)
}
