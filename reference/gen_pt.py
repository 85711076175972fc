"""Writes PyTorch checkpoint fixtures (.pt) with real torch.save into reference/data/pt/.

Every file is made from fixed, seeded inputs. Next to them:
  expected.safetensors  every tensor found in the .pt files, contiguous, under
                        "<file stem>/<path>" where a path joins dict keys and list/tuple
                        indices with "/" (e.g. "adam_state_dict/state/0/exp_avg")
  manifest.json         per file: for every tensor path its dtype, size, stride, storage
                        offset, requires_grad and storage group (tensors with the same group
                        share one storage in PyTorch), plus the files Pyrite must refuse with
                        a part of the message.

The Rust tests (crates/pyrite-serialization/tests/load_reference.rs) read them; CI needs no
Python. Run: python3 reference/gen_pt.py
"""
import collections
import json
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pt")
os.makedirs(OUT, exist_ok=True)

manifest = {"files": {}, "errors": {}}
expected = {}


def walk(obj, path, out):
    """Yields (path, tensor) for every tensor inside nested dicts, lists and tuples."""
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, f"{path}/{k}" if path else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            walk(v, f"{path}/{i}" if path else str(i), out)


def save(stem, obj, **kwargs):
    """torch.save(obj, **kwargs) to <stem>.pt and records its tensors in the manifest."""
    torch.save(obj, os.path.join(OUT, stem + ".pt"), **kwargs)
    tensors = []
    walk(obj, "", tensors)
    groups = {}
    entries = {}
    for path, t in tensors:
        key = t.untyped_storage()._cdata
        group = groups.setdefault(key, len(groups))
        entries[path] = {
            "dtype": str(t.dtype).removeprefix("torch."),
            "size": list(t.shape),
            "stride": list(t.stride()),
            "offset": t.storage_offset(),
            "requires_grad": t.requires_grad,
            "storage_group": group,
            "storage_nbytes": t.untyped_storage().nbytes(),
        }
        expected[f"{stem}/{path}"] = t.detach().contiguous().clone()
    manifest["files"][stem] = entries


def refuse(stem, message_part, writer):
    """A file Pyrite must refuse, with part of the message it must give."""
    writer(os.path.join(OUT, stem + ".pt"))
    manifest["errors"][stem] = message_part


torch.manual_seed(0)

# Every dtype Pyrite has, with values that exercise signs, fractions and bit patterns.
base = torch.arange(-3, 3, dtype=torch.float64).reshape(2, 3) * 1.25
save(
    "dtypes",
    {
        "float32": base.float(),
        "float64": base,
        "float16": base.half(),
        "bfloat16": base.bfloat16(),
        "int64": torch.tensor([[-(2**40), -1, 0], [1, 2**33, 2**62]]),
        "int32": torch.tensor([[-(2**31), -1, 0], [1, 7, 2**31 - 1]], dtype=torch.int32),
        "uint8": torch.tensor([[0, 1, 127], [128, 200, 255]], dtype=torch.uint8),
        "bool": torch.tensor([[True, False, True], [False, False, True]]),
    },
)

# 0-d and empty tensors.
save(
    "shapes",
    {
        "scalar": torch.tensor(3.5),
        "scalar_int": torch.tensor(-7),
        "empty": torch.zeros(0, 3),
        "empty_1d": torch.tensor([], dtype=torch.int32),
        "ones_4d": torch.ones(1, 2, 1, 3, dtype=torch.float64),
    },
)

# Views of one storage: transposed, sliced with offsets and steps, selected, expanded.
grid = torch.arange(24, dtype=torch.float32).reshape(4, 6)
col = torch.arange(3, dtype=torch.float32)
save(
    "views",
    {
        "base": grid,
        "transposed": grid.t(),
        "block": grid[1:3, 2:5],
        "every_other_column": grid[:, ::2],
        "row": grid[2],
        "tail": grid.reshape(-1)[5:],
        "expanded": col[:, None].expand(3, 4),
        "col": col,
        "alone": torch.arange(4, dtype=torch.int64)[1:3],
    },
)

# Nested Python values with int and str keys, an OrderedDict, and the builtins the
# weights-only unpickler allows (set, complex, bytes via _codecs.encode, torch.Size, ...).
shared = torch.tensor([1.0, 2.0])
save(
    "nested",
    {
        "int": 7,
        "neg": -3,
        "big": 2**40,
        "float": 0.25,
        "str": "h\u00e9llo \u2603",
        "bytes": b"\x00\xffab",
        "none": None,
        "true": True,
        "false": False,
        "tuple": (1, "a", (2.5,)),
        "list": [1, [2, [3, []]]],
        "odict": collections.OrderedDict([("b", 1), ("a", 2)]),
        "int_keys": {0: "zero", 1: "one", -5: "minus five"},
        "tuple_key": {(1, "x"): "tuple key"},
        "set": {3},
        "complex": complex(1.5, -2.0),
        "dtype": torch.float16,
        "device": torch.device("cpu"),
        "size": torch.Size([2, 3]),
        "tensors": [shared, (shared, {"again": shared})],
    },
)

# A module state_dict: an OrderedDict with a _metadata attribute (module versions).
model = torch.nn.Sequential(
    torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)
)
model.train()
model(torch.randn(5, 3))
save("sequential_state_dict", model.state_dict())

# An optimizer state_dict after two Adam steps (step is a 0-d float tensor).
lin = torch.nn.Linear(3, 2)
opt = torch.optim.Adam(lin.parameters(), lr=0.01)
for _ in range(2):
    opt.zero_grad()
    lin(torch.randn(4, 3)).pow(2).sum().backward()
    opt.step()
save("adam_state_dict", opt.state_dict())

# A Parameter (requires_grad) and a plain leaf that requires grad.
save(
    "parameter",
    {
        "param": torch.nn.Parameter(torch.randn(2, 3)),
        "leaf": torch.tensor([1.0, -1.0], requires_grad=True),
        "frozen": torch.nn.Parameter(torch.ones(2, dtype=torch.float64), requires_grad=False),
    },
)

# The same checkpoint pickled with protocol 4 (FRAME, MEMOIZE, SHORT_BINUNICODE, ...).
save("protocol4", {"w": grid[1:3], "n": 3, "name": "p4"}, pickle_protocol=4)


class Payload:
    """Runs a shell command when unpickled by a trusting loader."""

    def __reduce__(self):
        return (os.system, ("echo pyrite-was-pwned",))


class Plain:
    pass


refuse("malicious_reduce", "system", lambda p: torch.save({"x": Payload()}, p))
refuse("malicious_class", "__main__.Plain", lambda p: torch.save([Plain()], p))
refuse(
    "legacy",
    "legacy",
    lambda p: torch.save({"w": torch.ones(2)}, p, _use_new_zipfile_serialization=False),
)
refuse("torchscript", "TorchScript", lambda p: torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), p))
refuse("int8", "int8", lambda p: torch.save(torch.ones(2, dtype=torch.int8), p))

save_file(expected, os.path.join(OUT, "expected.safetensors"))
with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1, sort_keys=True)
print("wrote", len(manifest["files"]), "files,", len(expected), "tensors,", len(manifest["errors"]), "refusals")
