"""torchvision model references for crates/pyrite-vision/tests/models.rs.

Real state_dicts of these models are 10-550 MB, too big to commit. Instead every parameter and
buffer is filled with a formula that both sides compute from the state_dict key and the element's
flat (row-major) index, so the Rust test builds the same state_dict, loads it with strict=True and
compares the eval-mode outputs. The formula (computed in f64, rounded once to the tensor's dtype):

    h    = FNV-1a 32-bit hash of the key's UTF-8 bytes
    x_i  = fmix32((h + i * 0x9E3779B1) mod 2^32)    (MurmurHash3's finaliser)
    u_i  = x_i / 2^32 in [0, 1),  r_i = 2 u_i - 1 in [-1, 1)

    *.num_batches_tracked         h mod 1000   (int64)
    *.running_var                 0.5 + u_i
    *.running_mean                0.1 * r_i
    rank-1 *.weight (norms)       W * (1 + 0.5 * r_i)     W per model, below
    other rank-1 (biases)         0.1 * r_i
    rank >= 2 (conv/linear)       sqrt(6 / fan_in) * r_i, fan_in = numel / shape[0]

The weights keep ReLU activations at a steady scale (He-uniform); W = 0.5 damps the residual
branches of the ResNets (else the activations double per block), W = 1 elsewhere. For each key the
f64 sum of the filled values is recorded too, so a formula mismatch shows up apart from a model bug.

One small model is also committed as a real state_dict: mobilenet_v2(width_mult=0.1, num_classes=10)
with torchvision's random init, its BatchNorm statistics updated by three train-mode batches, saved
with safetensors.torch.save_file (0.4 MB) -> data/mobilenet_v2_x0_1.safetensors.

Writes data/models.safetensors (inputs `input.<size>`, outputs `out.<case>`), data/models.json
(per case: constructor, kwargs, input, W, the ordered state_dict keys with shapes and dtypes, the
per-key sums, and for a few cases the repr) and data/mobilenet_v2_x0_1.safetensors.
Run: python3 reference/gen_models.py  (about three minutes: the VGG fills are large)
"""
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file
from torchvision import models as M

from refgen import DATA

DT = {torch.float32: "F32", torch.int64: "I64"}


def fnv1a(key):
    h = 0x811C9DC5
    for b in key.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def unit(h, n):
    """u_i for i in 0..n (numpy's uint32 arithmetic wraps as the formula needs)."""
    x = ((np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B1) + np.uint64(h)) & np.uint64(0xFFFFFFFF))
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    return x.astype(np.float64) / 2.0**32


def formula(key, shape, w):
    h = fnv1a(key)
    n = int(np.prod(shape)) if shape else 1
    if key.endswith("num_batches_tracked"):
        return torch.tensor(h % 1000, dtype=torch.int64)
    u = unit(h, n)
    r = 2.0 * u - 1.0
    if key.endswith("running_var"):
        v = 0.5 + u
    elif key.endswith("running_mean"):
        v = 0.1 * r
    elif len(shape) == 1 and key.endswith("weight"):
        v = w * (1.0 + 0.5 * r)
    elif len(shape) == 1:
        v = 0.1 * r
    else:
        v = np.sqrt(6.0 / (n // shape[0])) * r
    return torch.from_numpy(v.reshape(shape)).to(torch.float32)


torch.manual_seed(0)
inputs = {s: torch.rand(2, 3, s, s) * 2 - 1 for s in (32, 64)}
tensors = {f"input.{s}": x for s, x in inputs.items()}

# name, constructor, kwargs, input size, W, record the repr
CASES = [
    ("resnet18", "resnet18", dict(num_classes=10), 64, 0.5, True),
    ("resnet34", "resnet34", dict(num_classes=10), 64, 0.5, False),
    ("resnet50", "resnet50", dict(num_classes=10), 64, 0.5, True),
    ("resnet101", "resnet101", dict(num_classes=10), 32, 0.5, False),
    ("resnet152", "resnet152", dict(num_classes=10), 32, 0.5, False),
    ("resnet50_g2_w32_dilated", "resnet50",
     dict(num_classes=7, groups=2, width_per_group=32, replace_stride_with_dilation=[False, True, True]),
     32, 0.5, False),
    ("vgg11", "vgg11", dict(num_classes=10), 32, 1.0, False),
    ("vgg11_bn", "vgg11_bn", dict(num_classes=10), 32, 1.0, True),
    ("vgg16", "vgg16", dict(num_classes=10), 32, 1.0, False),
    ("vgg16_bn", "vgg16_bn", dict(num_classes=10), 32, 1.0, False),
    ("mobilenet_v2", "mobilenet_v2", dict(num_classes=10), 64, 1.0, True),
    ("mobilenet_v2_w0_5", "mobilenet_v2", dict(num_classes=5, width_mult=0.5), 32, 1.0, False),
]

info = {"formula": __doc__.split("The formula")[1].split("One small model")[0].strip(), "cases": {}}
for name, ctor, kwargs, size, w, with_repr in CASES:
    model = getattr(M, ctor)(**kwargs).eval()
    sd = model.state_dict()
    keys, sums = [], []
    for k, t in sd.items():
        v = formula(k, tuple(t.shape), w)
        t.copy_(v)
        keys.append([k, list(t.shape), DT[t.dtype]])
        sums.append(float(t.double().sum()))
    with torch.no_grad():
        out = model(inputs[size])
    tensors[f"out.{name}"] = out
    c = {"constructor": ctor, "kwargs": kwargs, "input": f"input.{size}", "w": w, "state_dict": keys,
         "sums": sums, "num_parameters": sum(p.numel() for p in model.parameters())}
    if with_repr:
        c["repr"] = repr(model)
    info["cases"][name] = c
    print(f"{name}: {len(keys)} keys, |out| max {out.abs().max():.3g}, "
          f"sample difference {(out[0] - out[1]).abs().max():.3g}")
    del model, sd

# A real torchvision state_dict, small enough to commit.
torch.manual_seed(0)
real = M.mobilenet_v2(width_mult=0.1, num_classes=10).train()
with torch.no_grad():
    for _ in range(3):
        real(torch.randn(8, 3, 32, 32))
real.eval()
with torch.no_grad():
    tensors["out.real_mobilenet_v2_x0_1"] = real(inputs[64])
save_file(real.state_dict(), os.path.join(DATA, "mobilenet_v2_x0_1.safetensors"))
info["real"] = {"file": "mobilenet_v2_x0_1.safetensors", "constructor": "mobilenet_v2",
                "kwargs": dict(width_mult=0.1, num_classes=10), "input": "input.64",
                "output": "out.real_mobilenet_v2_x0_1",
                "state_dict": [[k, list(t.shape), DT[t.dtype]] for k, t in real.state_dict().items()]}

save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(DATA, "models.safetensors"),
          metadata={"torch": torch.__version__})
with open(os.path.join(DATA, "models.json"), "w") as f:
    json.dump(info, f, indent=1)
print("wrote data/models.safetensors, data/models.json, data/mobilenet_v2_x0_1.safetensors")
