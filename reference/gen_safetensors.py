"""Writes small safetensors fixtures with Hugging Face's `safetensors.torch` into
reference/data/safetensors/ plus manifest.json.

`with_metadata.safetensors` is what `save_pretrained` writes: a state_dict of every dtype
Pyrite has, with `{"format": "pt"}` as metadata. The manifest lists each tensor (sorted by
name): dtype, shape and the hex of its C-order little-endian bytes, and the metadata.
`no_metadata.safetensors` has no `__metadata__`. `errors` lists files Pyrite must refuse.

Run: python3 reference/gen_safetensors.py
"""
import json
import os
import struct

import torch
from safetensors.torch import save, save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "safetensors")
os.makedirs(OUT, exist_ok=True)

NAMES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.uint8: "uint8",
    torch.bool: "bool",
}

g = torch.Generator().manual_seed(0)
sd = {
    "encoder.weight": torch.randn(4, 3, generator=g),
    "encoder.bias": torch.randn(4, generator=g, dtype=torch.float64),
    "half": torch.tensor([0.5, -1.0, 65504.0, float("inf")], dtype=torch.float16),
    "brain": torch.tensor([[1.5, -2.0], [3.0e38, 1e-3]], dtype=torch.bfloat16),
    "steps": torch.tensor(12345678901, dtype=torch.int64),
    "ids": torch.arange(-3, 3, dtype=torch.int32).reshape(2, 3),
    "pixels": torch.tensor([0, 7, 255], dtype=torch.uint8),
    "mask": torch.tensor([True, False, True, True]),
    "empty": torch.zeros(0, 5),
}


def describe(t):
    b = t.contiguous().view(torch.uint8) if t.dim() > 0 else t.reshape(1).view(torch.uint8)
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "hex": bytes(b.numpy().tobytes()).hex()}


cases = []
for name, meta in [("with_metadata", {"format": "pt", "note": "written by safetensors.torch"}), ("no_metadata", None)]:
    save_file(sd, os.path.join(OUT, name + ".safetensors"), metadata=meta)
    cases.append(
        {
            "file": name + ".safetensors",
            "metadata": meta or {},
            "tensors": [dict(name=k, **describe(sd[k])) for k in sorted(sd)],
        }
    )

errors = []


def refuse(name, data, contains):
    with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
        f.write(data)
    errors.append({"file": name + ".safetensors", "contains": contains})


good = save({"a": torch.ones(2, 2)})
n = struct.unpack("<Q", good[:8])[0]
header = good[8 : 8 + n]
refuse("err_truncated_data", good[:-4], "not a valid safetensors")
refuse("err_header_too_long", struct.pack("<Q", 1 << 40) + good[8:], "not a valid safetensors")
refuse("err_header_past_end", struct.pack("<Q", len(good)) + good[8:], "not a valid safetensors")
refuse("err_short", b"\x01\x00", "not a valid safetensors")
refuse("err_offsets_outside", good[:8] + header.replace(b"[0,16]", b"[0,99]") + good[8 + n :], "not a valid safetensors")
refuse("err_int8", save({"a": torch.ones(2, dtype=torch.int8)}), "I8")
refuse("err_not_json", good[:8] + b"{" * n + good[8 + n :], "not a valid safetensors")

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump({"torch_version": torch.__version__, "cases": cases, "errors": errors}, f, indent=1)
print(f"wrote {len(cases)} cases and {len(errors)} error files to {OUT}")
