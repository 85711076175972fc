"""Writes small .npy fixtures with numpy into reference/data/npy/ plus manifest.json.

Each entry of manifest.json names a file, the Pyrite dtype and shape it must load as, and the
expected elements as hex of their C-order little-endian bytes. `numpy_default` marks files
written by plain `np.save` (version 1.0, C order, little-endian): Pyrite's writer must
reproduce those byte for byte. `errors` lists files Pyrite must refuse, with a message part.

Run: python3 reference/gen_npy.py
"""
import io
import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "npy")
os.makedirs(OUT, exist_ok=True)

DTYPE_NAMES = {
    np.dtype(np.float16): "float16",
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.bool_): "bool",
}

cases = []
errors = []


def expect(name, arr, *, version=None, numpy_default=None):
    """Saves `arr` to name.npy (np.save, or format.write_array with `version`)."""
    path = os.path.join(OUT, name + ".npy")
    if version is None:
        np.save(path, arr)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, arr, version=version)
    native = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
    c = np.ascontiguousarray(arr).astype(native.newbyteorder("<"))
    if numpy_default is None:
        numpy_default = (
            version is None
            and (arr.flags.c_contiguous or not arr.flags.f_contiguous)
            and arr.dtype.byteorder in ("=", "<", "|")
        )
    cases.append(
        {
            "file": name + ".npy",
            "dtype": DTYPE_NAMES[np.dtype(native.newbyteorder("="))],
            "shape": list(arr.shape),
            "hex": c.tobytes().hex(),
            "numpy_default": bool(numpy_default),
        }
    )


def refuse(name, arr_or_bytes, contains, **save_kw):
    path = os.path.join(OUT, name + ".npy")
    if isinstance(arr_or_bytes, bytes):
        with open(path, "wb") as f:
            f.write(arr_or_bytes)
    else:
        np.save(path, arr_or_bytes, **save_kw)
    errors.append({"file": name + ".npy", "contains": contains})


# plain np.save of every supported dtype
expect("f32_2x3", (np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5 - 2.0))
expect("f64_0d", np.array(3.25))
expect("f16_specials", np.array([0.5, -1.0, 65504.0, np.inf, -np.inf, np.nan, 6e-8, -0.0], dtype=np.float16))
expect("f64_specials", np.array([np.pi, -np.e, 1e300, 5e-324, np.nan, np.inf], dtype=np.float64))
expect("i64_empty_0x3", np.zeros((0, 3), dtype=np.int64))
expect("f32_empty_4x0x2", np.zeros((4, 0, 2), dtype=np.float32))
expect("i32_2x3x4", np.arange(24, dtype=np.int32).reshape(2, 3, 4) - 12)
expect("i64_extremes", np.array([np.iinfo(np.int64).min, -1, 0, 1, np.iinfo(np.int64).max], dtype=np.int64))
expect("u8_vec", np.array([0, 1, 127, 128, 255], dtype=np.uint8))
expect("bool_2x2", np.array([[True, False], [False, True]]))
expect("f32_1elem", np.array([7.0], dtype=np.float32))
expect("f32_0d", np.array(-2.5, dtype=np.float32))
expect("i32_large_dim", np.arange(1000, dtype=np.int32))
expect("f64_rank5", np.arange(32, dtype=np.float64).reshape(1, 2, 2, 4, 2))

# Fortran order (np.save keeps it), big-endian data, other format versions
expect("f64_fortran_3x4", np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)))
expect("i32_fortran_2x3x4", np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)))
expect("u8_fortran_1d", np.asfortranarray(np.arange(5, dtype=np.uint8)))
expect("f32_bigendian", np.array([1.5, -2.25, 1e-3], dtype=">f4"))
expect("i64_bigendian_2x2", np.array([[1, -2], [3, 1 << 40]], dtype=">i8"))
expect("f16_bigendian_fortran", np.asfortranarray(np.arange(6, dtype=">f2").reshape(2, 3)))
expect("v2_f64", np.arange(5, dtype=np.float64), version=(2, 0))
expect("v3_f32_2x2", np.array([[1, 2], [3, 4]], dtype=np.float32), version=(3, 0))
expect("v2_bool_empty", np.zeros((0,), dtype=np.bool_), version=(2, 0))

# files Pyrite must refuse
refuse("err_int8", np.array([1, 2], dtype=np.int8), "unsupported dtype")
refuse("err_uint16", np.array([1, 2], dtype=np.uint16), "unsupported dtype")
refuse("err_complex64", np.array([1 + 2j], dtype=np.complex64), "unsupported dtype")
refuse("err_structured", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]), "structured")
refuse("err_object", np.array([{"a": 1}, None], dtype=object), "unsupported dtype", allow_pickle=True)
good = io.BytesIO()
np.save(good, np.arange(6, dtype=np.float32))
g = good.getvalue()
refuse("err_truncated_data", g[:-3], "data bytes")
refuse("err_extra_data", g + b"\0\0\0\0", "data bytes")
refuse("err_truncated_header", g[:40], "truncated")
refuse("err_bad_magic", b"\x93NUMPZ" + g[6:], "magic")
refuse("err_version_9", g[:6] + b"\x09\x00" + g[8:], "version")
refuse("err_not_npy", b"hello", "magic")

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump({"numpy_version": np.__version__, "cases": cases, "errors": errors}, f, indent=1)
print(f"wrote {len(cases)} cases and {len(errors)} error files to {OUT}")
