"""Writes small .npz fixtures with numpy into reference/data/npz/ plus manifest.json.

Each case of manifest.json names an .npz file and lists its arrays in the archive's order:
key, the Pyrite dtype and shape it must load as, and the expected elements as hex of their
C-order little-endian bytes. `errors` lists files Pyrite must refuse, with a message part.

Run: python3 reference/gen_npz.py
"""
import io
import json
import os
import zipfile

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "npz")
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

rng = np.random.default_rng(0)
positional = [np.arange(3, dtype=np.int64)]
arrays = {
    "w_f32": rng.standard_normal((2, 3)).astype(np.float32),
    "scalar_f64": np.array(3.25),
    "half": np.array([0.5, -1.0, 65504.0, np.inf, -0.0], dtype=np.float16),
    "steps_i64": np.array([np.iinfo(np.int64).min, -1, 0, 1 << 40], dtype=np.int64),
    "fortran_i32": np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4) - 6),
    "fortran_f64_3d": np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4)),
    "pixels_u8": np.array([[0, 1], [128, 255]], dtype=np.uint8),
    "mask": np.array([True, False, True]),
    "empty_0x3": np.zeros((0, 3), dtype=np.float32),
    "nested/name.with.dots": np.array([1.0, 2.0], dtype=np.float32),
    # Compresses well: savez_compressed's deflate has something to do.
    "zeros_f32": np.zeros((64, 64), dtype=np.float32),
}

cases = []
errors = []


def describe(arr):
    c = arr.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    return {
        "dtype": DTYPE_NAMES[c.dtype],
        "shape": list(c.shape),
        "hex": c.astype(c.dtype.newbyteorder("<")).tobytes().hex(),
    }


def expect(name, save):
    path = os.path.join(OUT, name + ".npz")
    save(path, *positional, **arrays)
    # numpy names positional arrays arr_0, ... after the keyword ones.
    keys = list(arrays) + ["arr_0"]
    vals = list(arrays.values()) + positional
    with zipfile.ZipFile(path) as z:
        methods = sorted({i.compress_type for i in z.infolist()})
    cases.append(
        {
            "file": name + ".npz",
            "zip_methods": methods,
            "arrays": [dict(key=k, **describe(v)) for k, v in zip(keys, vals)],
        }
    )


def refuse(name, members, contains, compression=zipfile.ZIP_STORED):
    path = os.path.join(OUT, name + ".npz")
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for member, data in members:
            z.writestr(member, data)
    errors.append({"file": name + ".npz", "contains": contains})


def npy_bytes(arr):
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()


expect("savez", np.savez)
expect("savez_compressed", np.savez_compressed)

refuse("err_not_npy_member", [("a.npy", npy_bytes(np.ones(2))), ("notes.txt", b"hello")], "not a .npy")
refuse("err_int8", [("a.npy", npy_bytes(np.array([1, 2], dtype=np.int8)))], "unsupported dtype")
refuse("err_bzip2", [("a.npy", npy_bytes(np.ones(4)))], "method 12", compression=zipfile.ZIP_BZIP2)
refuse("err_lzma", [("a.npy", npy_bytes(np.ones(4)))], "method 14", compression=zipfile.ZIP_LZMA)
with open(os.path.join(OUT, "err_not_zip.npz"), "wb") as f:
    f.write(npy_bytes(np.ones(3)))
errors.append({"file": "err_not_zip.npz", "contains": "not a valid .npz"})

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump({"numpy_version": np.__version__, "cases": cases, "errors": errors}, f, indent=1)
print(f"wrote {len(cases)} cases and {len(errors)} error files to {OUT}")
