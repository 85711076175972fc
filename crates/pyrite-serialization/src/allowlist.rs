//! The globals a checkpoint may name, mirroring PyTorch's weights-only unpickler, and the
//! storage-class and dtype names of the format.
//!
//! A pickle names Python callables as `module.name` (the `GLOBAL` opcode) and calls them
//! (`REDUCE`). A trusting unpickler imports and calls whatever the file names, which runs
//! arbitrary code. `torch.load(weights_only=True)` accepts only a fixed set of names; Pyrite
//! goes further: it never imports or calls anything, it *recognises* the allowed names and
//! builds the value each one would make ([`Global`]). Every other name is an error that names
//! the global.

use pyrite_core::{bail, DType, Result};

/// A recognised global: what a `GLOBAL module name` opcode may refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Global {
    /// `collections.OrderedDict`
    OrderedDict,
    /// `collections.Counter` (a dict of counts: `MultiStepLR`'s milestones)
    Counter,
    /// `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])`
    RebuildTensorV2,
    /// `torch._utils._rebuild_tensor_v3(...)`: v2 with the dtype given (untyped storages).
    RebuildTensorV3,
    /// `torch._utils._rebuild_parameter(data, requires_grad, hooks)`
    RebuildParameter,
    /// A typed storage class (`torch.FloatStorage`, ...) of a dtype Pyrite has.
    StorageClass(DType),
    /// `torch.storage.UntypedStorage` (bytes; the tensor gives the dtype).
    UntypedStorage,
    /// `torch.Size`
    Size,
    /// `torch.device`
    Device,
    /// A dtype object (`torch.float16`, ...).
    DType(DType),
    /// `_codecs.encode(str, encoding)`: how protocol 2 pickles `bytes`.
    Encode,
    /// `builtins.set`
    Set,
    /// `builtins.frozenset`
    FrozenSet,
    /// `builtins.complex`
    Complex,
    /// `builtins.bytearray`
    ByteArray,
}

impl Global {
    /// The dotted name, for messages.
    pub(crate) fn name(self) -> String {
        match self {
            Global::OrderedDict => "collections.OrderedDict".into(),
            Global::Counter => "collections.Counter".into(),
            Global::RebuildTensorV2 => "torch._utils._rebuild_tensor_v2".into(),
            Global::RebuildTensorV3 => "torch._utils._rebuild_tensor_v3".into(),
            Global::RebuildParameter => "torch._utils._rebuild_parameter".into(),
            Global::StorageClass(d) => format!("torch.{}", storage_class(d)),
            Global::UntypedStorage => "torch.storage.UntypedStorage".into(),
            Global::Size => "torch.Size".into(),
            Global::Device => "torch.device".into(),
            Global::DType(d) => format!("torch.{}", d.as_str()),
            Global::Encode => "_codecs.encode".into(),
            Global::Set => "builtins.set".into(),
            Global::FrozenSet => "builtins.frozenset".into(),
            Global::Complex => "builtins.complex".into(),
            Global::ByteArray => "builtins.bytearray".into(),
        }
    }
}

/// The legacy typed-storage class that PyTorch writes for tensors of `dtype`.
pub(crate) fn storage_class(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "FloatStorage",
        DType::F64 => "DoubleStorage",
        DType::F16 => "HalfStorage",
        DType::BF16 => "BFloat16Storage",
        DType::I64 => "LongStorage",
        DType::I32 => "IntStorage",
        DType::U8 => "ByteStorage",
        DType::Bool => "BoolStorage",
    }
}

/// Storage classes PyTorch allows whose dtype Pyrite does not have, with that dtype's name.
const UNSUPPORTED_STORAGES: &[(&str, &str)] = &[
    ("CharStorage", "int8"),
    ("ShortStorage", "int16"),
    ("ComplexFloatStorage", "complex64"),
    ("ComplexDoubleStorage", "complex128"),
    ("QInt8Storage", "qint8"),
    ("QUInt8Storage", "quint8"),
    ("QInt32Storage", "qint32"),
    ("QUInt4x2Storage", "quint4x2"),
    ("QUInt2x4Storage", "quint2x4"),
];

/// PyTorch dtypes Pyrite does not have (named so the error can say so plainly).
const UNSUPPORTED_DTYPES: &[&str] = &[
    "int8",
    "int16",
    "short",
    "uint16",
    "uint32",
    "uint64",
    "complex32",
    "complex64",
    "complex128",
    "cfloat",
    "cdouble",
    "chalf",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "qint8",
    "quint8",
    "qint32",
    "quint4x2",
    "quint2x4",
    "bits8",
    "bits16",
    "bits1x8",
    "bits2x4",
    "bits4x2",
    "uint1",
    "uint2",
    "uint3",
    "uint4",
    "uint5",
    "uint6",
    "uint7",
    "int1",
    "int2",
    "int3",
    "int4",
    "int5",
    "int6",
    "int7",
];

/// Globals PyTorch's weights-only unpickler allows but Pyrite cannot build yet.
const UNSUPPORTED_ALLOWED: &[(&str, &str)] = &[
    ("torch._utils._rebuild_parameter_with_state", "Parameter subclasses with extra state"),
    ("torch._utils._rebuild_qtensor", "quantized tensors"),
    ("torch._utils._rebuild_tensor", "tensors of the pre-1.0 layout"),
    ("torch._utils._rebuild_sparse_tensor", "sparse tensors"),
    ("torch._utils._rebuild_meta_tensor_no_storage", "meta tensors"),
    ("torch._utils._rebuild_wrapper_subclass", "tensor subclasses"),
    ("torch._utils._rebuild_device_tensor_from_numpy", "tensors saved from numpy on a device"),
    ("torch._utils._rebuild_device_tensor_from_cpu_tensor", "tensors of device backends"),
    ("torch._tensor._rebuild_from_type_v2", "tensor subclasses"),
    ("torch.nn.parameter.Parameter", "Parameters pickled with NEWOBJ"),
    ("torch.Tensor", "tensors pickled with NEWOBJ"),
    ("torch.serialization._get_layout", "sparse layouts"),
    ("torch.per_tensor_affine", "quantized tensors"),
    ("torch.per_tensor_symmetric", "quantized tensors"),
    ("torch.per_channel_affine", "quantized tensors"),
    ("torch.per_channel_symmetric", "quantized tensors"),
    ("torch.per_channel_affine_float_qparams", "quantized tensors"),
];

/// A dtype by the name `torch.<name>` pickles it under (aliases included).
pub(crate) fn dtype_by_name(name: &str) -> Option<DType> {
    Some(match name {
        "float32" | "float" => DType::F32,
        "float64" | "double" => DType::F64,
        "float16" | "half" => DType::F16,
        "bfloat16" => DType::BF16,
        "int64" | "long" => DType::I64,
        "int32" | "int" => DType::I32,
        "uint8" => DType::U8,
        "bool" => DType::Bool,
        _ => return None,
    })
}

/// Resolves `GLOBAL module name` to a recognised global, or says why it is refused.
pub(crate) fn resolve(module: &str, name: &str) -> Result<Global> {
    // Protocol 2 pickles written for Python 2 compatibility use Python 2 module names.
    let module = match module {
        "__builtin__" => "builtins",
        "copy_reg" => "copyreg",
        m => m,
    };
    let full = format!("{module}.{name}");
    let g = match (module, name) {
        ("collections", "OrderedDict") => Global::OrderedDict,
        ("collections", "Counter") => Global::Counter,
        ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
        ("torch._utils", "_rebuild_tensor_v3") => Global::RebuildTensorV3,
        ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
        ("torch.storage", "UntypedStorage") | ("torch", "UntypedStorage") => Global::UntypedStorage,
        ("torch", "Size") => Global::Size,
        ("torch", "device") => Global::Device,
        ("_codecs", "encode") => Global::Encode,
        ("builtins", "set") => Global::Set,
        ("builtins", "frozenset") => Global::FrozenSet,
        ("builtins", "complex") => Global::Complex,
        ("builtins", "bytearray") => Global::ByteArray,
        ("torch", n) if n.ends_with("Storage") => {
            if let Some(d) = DType::ALL.into_iter().find(|&d| storage_class(d) == n) {
                Global::StorageClass(d)
            } else if let Some((_, dt)) = UNSUPPORTED_STORAGES.iter().find(|(c, _)| *c == n) {
                bail!(NotImplemented, "torch.load: {full} holds {dt} elements; Pyrite has no {dt} dtype");
            } else {
                return Err(refused(&full));
            }
        }
        ("torch", n) => match dtype_by_name(n) {
            Some(d) => Global::DType(d),
            None if UNSUPPORTED_DTYPES.contains(&n) => {
                bail!(
                    NotImplemented,
                    "torch.load: the checkpoint uses dtype torch.{n}, which Pyrite does not have"
                )
            }
            None => return Err(unsupported_or_refused(&full)),
        },
        _ => return Err(unsupported_or_refused(&full)),
    };
    Ok(g)
}

fn unsupported_or_refused(full: &str) -> pyrite_core::Error {
    match UNSUPPORTED_ALLOWED.iter().find(|(n, _)| *n == full) {
        Some((_, what)) => pyrite_core::err!(
            NotImplemented,
            "torch.load: the checkpoint holds {what} ({full}), which Pyrite cannot load yet"
        ),
        None => refused(full),
    }
}

fn refused(full: &str) -> pyrite_core::Error {
    pyrite_core::err!(
        Io,
        "Weights only load failed: unsupported global {full} in the checkpoint. Pyrite loads like \
         torch.load(weights_only=True): only tensors, containers and plain values are allowed, and \
         nothing named by a file is ever imported or called. Do not load files from sources you do not trust."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_like_pytorch_writes_them() {
        assert_eq!(resolve("torch", "FloatStorage").unwrap(), Global::StorageClass(DType::F32));
        assert_eq!(resolve("torch", "BFloat16Storage").unwrap(), Global::StorageClass(DType::BF16));
        assert_eq!(resolve("__builtin__", "set").unwrap(), Global::Set);
        assert_eq!(resolve("torch", "half").unwrap(), Global::DType(DType::F16));
        for d in DType::ALL {
            assert_eq!(resolve("torch", d.as_str()).unwrap(), Global::DType(d));
            assert_eq!(resolve("torch", storage_class(d)).unwrap(), Global::StorageClass(d));
        }
    }

    #[test]
    fn everything_else_is_refused_by_name() {
        for (m, n) in [
            ("posix", "system"),
            ("os", "system"),
            ("builtins", "eval"),
            ("__main__", "Foo"),
            ("torch", "load"),
        ] {
            let e = resolve(m, n).unwrap_err().to_string();
            assert!(e.contains(&format!("{m}.{n}")), "{e}");
        }
        assert!(resolve("torch", "CharStorage").unwrap_err().to_string().contains("int8"));
        assert!(resolve("torch", "uint16").unwrap_err().to_string().contains("uint16"));
        assert!(resolve("torch._utils", "_rebuild_qtensor").unwrap_err().to_string().contains("quantized"));
    }
}
