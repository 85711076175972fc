"""torch.autocast("cuda")'s op lists in PyTorch 2.15, for the CUDA autocast of issue 30.

CUDA autocast cannot be measured without a GPU, so the lists are read from the source of truth
PyTorch itself compiles them from: the AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE (fp32_append_dtype) and
AT_FORALL_PROMOTE macros of the ATen/autocast_mode.h that the installed wheel ships. Overloads
collapse to the op name. The one refused op (binary_cross_entropy, registered in
autocast_mode.cpp, which the wheel does not ship) and its message are added by hand.
Writes reference/data/autocast_cuda_lists.json.
Run: python3 reference/gen_autocast_cuda_lists.py
"""
import json
import os
import re

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "autocast_cuda_lists.json")
HEADER = os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "autocast_mode.h")
src = open(HEADER).read()


def macro(name):
    """The op names of `#define name(_) _(op, overload) ...` (continued lines joined)."""
    m = re.search(r"#define " + name + r"\(_\)((?:.*\\\n)*.*\n)", src)
    body = m.group(1).replace("\\\n", " ")
    names = []
    for op in re.findall(r"_\(\s*(?:ADD_NS\()?(\w+)", body):
        if op not in names:
            names.append(op)
    return names


lists = {
    "torch": torch.__version__,
    "lower_precision_fp": macro("AT_FORALL_LOWER_PRECISION_FP"),
    "fp32": macro("AT_FORALL_FP32"),
    "fp32_set_opt_dtype": macro("AT_FORALL_FP32_SET_OPT_DTYPE"),
    "fp32_append_dtype": macro("AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE"),
    "promote": macro("AT_FORALL_PROMOTE"),
    "banned": ["binary_cross_entropy"],
}
with open(OUT, "w") as fh:
    json.dump(lists, fh, indent=1)
for k, v in lists.items():
    print(k, v)
