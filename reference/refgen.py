"""Shared helpers for Pyrite's reference-data generators.

Each generator script (``gen_<family>.py``) runs real PyTorch on fixed, seeded inputs and records
cases into ``data/<family>.safetensors``: every input and output tensor with its exact dtype and
bits, plus a JSON list of cases in the file's metadata. The Rust tests
(``crates/pyrite-core/tests/common/mod.rs``) read those files; CI needs no Python.

A case records:
  name     unique case name
  op       the op family member, named like the torch function (``add``, ``sum``, ``gather`` ...)
  call     the exact PyTorch call as text, shown by the Rust test on failure
  args     JSON-able keyword arguments the Rust side needs (dim, keepdim, ...)
  views    per input, None or a list of view steps applied before the call, to make
           non-contiguous inputs: ["t"], ["transpose", d0, d1], ["permute", [..]],
           ["slice", dim, start, end, step], ["expand", [..]]
  n_in / n_out, atol / rtol, and ``error`` (PyTorch's message) for cases that must fail.

Usage:
    rf = RefFile("pointwise")
    rf.case("add_bcast", "add", [a, b], lambda a, b: torch.add(a, b), call="torch.add(a, b)")
    rf.save()
"""
import json
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")

_DT = {
    torch.float32: "F32",
    torch.float64: "F64",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}

# Default tolerances per dtype (PyTorch's own assert_close defaults, a little looser for f32).
TOL = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


def apply_views(t, steps):
    for s in steps or []:
        kind = s[0]
        if kind == "t":
            t = t.t()
        elif kind == "transpose":
            t = t.transpose(s[1], s[2])
        elif kind == "permute":
            t = t.permute(*s[1])
        elif kind == "slice":
            dim, start, end, step = s[1:]
            idx = [slice(None)] * t.dim()
            idx[dim] = slice(start, end, step)
            t = t[tuple(idx)]
        elif kind == "expand":
            t = t.expand(*s[1])
        else:
            raise ValueError(f"unknown view step {s}")
    return t


class RefFile:
    def __init__(self, family):
        self.family = family
        self.tensors = {}
        self.cases = []
        self.names = set()

    def _put(self, key, t):
        t = t.detach().contiguous().cpu()
        if t.dtype not in _DT:
            raise TypeError(f"{key}: unsupported dtype {t.dtype}")
        self.tensors[key] = t

    def case(self, name, op, inputs, fn, call="", args=None, views=None, atol=None, rtol=None):
        """Runs fn(*viewed_inputs) and records inputs and outputs (a tensor or tuple of them)."""
        assert name not in self.names, f"duplicate case {name}"
        self.names.add(name)
        views = views or [None] * len(inputs)
        viewed = [apply_views(x, v) for x, v in zip(inputs, views)]
        out = fn(*viewed)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        outs = [o if isinstance(o, torch.Tensor) else torch.tensor(o) for o in outs]
        for i, x in enumerate(inputs):
            self._put(f"{name}.in{i}", x)
        for i, o in enumerate(outs):
            self._put(f"{name}.out{i}", o)
        fdt = [o.dtype for o in outs if o.dtype in TOL]
        d_atol, d_rtol = TOL[fdt[0]] if fdt else (0.0, 0.0)
        self.cases.append({
            "name": name, "op": op, "call": call, "args": args or {}, "views": views,
            "n_in": len(inputs), "n_out": len(outs),
            "atol": d_atol if atol is None else atol, "rtol": d_rtol if rtol is None else rtol,
        })

    def error_case(self, name, op, inputs, fn, call="", args=None, views=None):
        """Records a case where PyTorch raises; the Rust side must return an Err."""
        assert name not in self.names, f"duplicate case {name}"
        self.names.add(name)
        views = views or [None] * len(inputs)
        viewed = [apply_views(x, v) for x, v in zip(inputs, views)]
        try:
            fn(*viewed)
        except Exception as e:  # noqa: BLE001 - any PyTorch error counts
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        else:
            raise AssertionError(f"{name}: expected PyTorch to raise")
        for i, x in enumerate(inputs):
            self._put(f"{name}.in{i}", x)
        self.cases.append({
            "name": name, "op": op, "call": call, "args": args or {}, "views": views,
            "n_in": len(inputs), "n_out": 0, "atol": 0.0, "rtol": 0.0, "error": msg,
        })

    def grad_case(self, name, op, fn, inputs, diff, call, args=None, views=None):
        """Records fn(*viewed_inputs) and torch.autograd.grad of it with respect to inputs[diff]
        for a random upstream gradient g, appended as the last input. Outputs: [out, grads...]."""
        views = views or [None] * len(inputs)
        # the output shape, to make the upstream gradient
        out0 = fn(*[apply_views(x, v) for x, v in zip(inputs, views)])
        g = torch.randn(out0.shape, dtype=out0.dtype)

        def run(*vs):
            *xs, gg = vs
            xs = [x.detach().requires_grad_(True) if i in diff else x for i, x in enumerate(xs)]
            out = fn(*xs)
            grads = torch.autograd.grad(out, [xs[i] for i in diff], gg, allow_unused=True)
            grads = [torch.zeros_like(xs[i]) if gr is None else gr for i, gr in zip(diff, grads)]
            return [out] + grads

        a = dict(args or {})
        a["diff"] = diff
        tol = {}
        if out0.dtype == torch.float32:
            tol = dict(atol=1e-5, rtol=1e-4)
        self.case(name, op, inputs + [g], run, call=call, args=a, views=views + [None], **tol)

    def save(self):
        os.makedirs(DATA, exist_ok=True)
        header = {"__metadata__": {"family": self.family, "torch": torch.__version__,
                                   "cases": json.dumps(self.cases)}}
        blobs, off = [], 0
        for key in sorted(self.tensors):
            t = self.tensors[key]
            if t.dtype == torch.bfloat16:
                raw = t.view(torch.int16).numpy().tobytes()
            else:
                raw = t.numpy().tobytes()
            header[key] = {"dtype": _DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
        hb = json.dumps(header, separators=(",", ":")).encode()
        hb += b" " * ((8 - len(hb) % 8) % 8)
        path = os.path.join(DATA, f"{self.family}.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(hb)))
            f.write(hb)
            for b in blobs:
                f.write(b)
        print(f"{path}: {len(self.cases)} cases, {off} bytes of tensors")
