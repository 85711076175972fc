"""Checks checkpoints written by Pyrite's `save` with real PyTorch.

Usage:
    PYRITE_PT_OUT=/tmp/pt cargo test -p pyrite-serialization --test save_roundtrip files_for_pytorch
    python3 reference/check_pt.py /tmp/pt

Loads every file with torch.load(weights_only=True) (and checks the zip with zipfile's CRC
test), then compares values, dtypes, strides, storage offsets and storage sharing with what
crates/pyrite-serialization/tests/save_roundtrip.rs wrote (`pytorch_check_files`).
"""
import collections
import os
import sys
import zipfile

import torch

DIR = sys.argv[1]
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def load(name):
    path = os.path.join(DIR, name + ".pt")
    with zipfile.ZipFile(path) as z:
        check(z.testzip() is None, f"{name}: zip CRCs")
        for info in z.infolist():
            check(info.compress_type == zipfile.ZIP_STORED, f"{name}: {info.filename} stored")
    return torch.load(path, weights_only=True)


def same_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# dtypes
d = load("dtypes")
signed = (torch.arange(6, dtype=torch.float64) - 2).reshape(2, 3)
for dt in [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32]:
    t = d[str(dt).removeprefix("torch.")]
    check(t.dtype == dt and torch.equal(t, signed.to(dt)), f"dtypes: {dt}")
check(torch.equal(d["uint8"], (torch.arange(6) * 50).to(torch.uint8).reshape(2, 3)), "dtypes: uint8")
check(torch.equal(d["bool"], (torch.arange(6) % 2 == 1).reshape(2, 3)), "dtypes: bool")
check(list(d.keys()) == ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"], "dtypes: order")

# views
v = load("views")
grid = torch.arange(24, dtype=torch.float32).reshape(4, 6)
col = torch.arange(3, dtype=torch.float32)
want = {
    "base": grid,
    "transposed": grid.t(),
    "block": grid[1:3, 2:5],
    "every_other_column": grid[:, ::2],
    "row": grid[2],
    "expanded": col[:, None].expand(3, 4),
    "col": col,
}
for k, w in want.items():
    t = v[k]
    check(torch.equal(t, w), f"views: {k} values")
    check(t.stride() == w.stride() and t.storage_offset() == w.storage_offset(), f"views: {k} layout")
for k in ["transposed", "block", "every_other_column", "row"]:
    check(same_storage(v[k], v["base"]), f"views: {k} shares base's storage")
check(same_storage(v["expanded"], v["col"]) and not same_storage(v["col"], v["base"]), "views: col storage")
v["base"].zero_()
check(v["block"].abs().sum() == 0, "views: writes show through")

# nested values
n = load("nested")
check(type(n) is dict, "nested: dict")
check(n["int"] == 7 and n["big"] == -(2**40) and n["max"] == 2**63 - 1 and n["min"] == -(2**63), "nested: ints")
check(n["float"] == 0.25 and n["str"] == "h\u00e9llo \u2603" and n["bytes"] == b"\x00\xffa", "nested: scalars")
check(n["none"] is None and n["true"] is True, "nested: None/True")
check(n["tuple"] == (1, "a", (2.5,), 4) and n["list"] == [1, [2, []]], "nested: tuple/list")
check(type(n["odict"]) is collections.OrderedDict and list(n["odict"].items()) == [("b", 1), ("a", 2)], "nested: OrderedDict")
check(n["int_keys"] == {0: "zero", -5: "minus five"}, "nested: int keys")
check(n["tuple_key"] == {(1, "x"): "tuple key"}, "nested: tuple key")
check(n["set"] == {3, 4} and n["complex"] == complex(1.5, -2.0), "nested: set/complex")
check(n["dtype"] is torch.bfloat16 and n["device"] == torch.device("cpu"), "nested: dtype/device")
check(n["empty_dict"] == {}, "nested: empty dict")

# a state_dict with _metadata loads into nn.Linear
sd = load("state_dict")
check(type(sd) is collections.OrderedDict and list(sd.keys()) == ["weight", "bias"], "state_dict: keys")
check(sd._metadata == {"": {"version": 1}}, "state_dict: _metadata")
lin = torch.nn.Linear(3, 2)
lin.load_state_dict(sd)
check(torch.equal(lin.weight.data, torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5), "state_dict: weight")
check(torch.equal(lin.bias.data, torch.tensor([0.25, -0.5])), "state_dict: bias")

# misc
m = load("misc")
check(m["scalar"].dim() == 0 and m["scalar"].dtype == torch.float64 and m["scalar"].item() == 3.5, "misc: scalar")
check(m["empty"].shape == (0, 3), "misc: empty")
check(m["leaf"].requires_grad and m["leaf"].is_leaf and m["leaf"].tolist() == [1.0, -1.0], "misc: requires_grad")

# identity: one tensor saved twice is one object; two views of one storage stay two tensors
i = load("identity")
check(i["same"][0] is i["same"][1], "identity: [t, t] loads as one tensor")
check(i["same"][0] is i["views"][0], "identity: the same tensor in two containers")
check(i["views"][0] is not i["views"][1] and same_storage(i["views"][0], i["views"][1]), "identity: two views, one storage")
check(i["views"][1].tolist() == [1.0, 2.0], "identity: the view's values")

print(f"check_pt: {checks} checks passed on the files in {DIR}")
