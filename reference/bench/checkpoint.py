#!/usr/bin/env python3
"""PyTorch's side of pyrite-bench's `checkpoint` workload (the shared torch_bench.py has none).

Same command line and JSON record as torch_bench.py, so scripts/bench_compare.py pairs it with
`pyrite-bench --only checkpoint`. Builds the same ~100 MB f32 state_dict as
crates/pyrite-bench/src/checkpoint.rs (same names and shapes), saves it once with torch.save
and safetensors.torch.save_file into a temporary folder, and times loading it back:
pt_load (torch.load(weights_only=True)), safetensors_load (safetensors.torch.load_file, when
the safetensors package is installed) and weights_load (= torch.load of the .pt, the baseline
issue 18 compares Pyrite's safetensors load with).

Usage: python3 reference/bench/checkpoint.py [--only checkpoint] [--threads 2] [--repeats 7]
"""
import os
import shutil
import tempfile

import torch

import harness

def shapes():
    vocab, d, ff = 8192, 512, 2048
    v = [("embed.weight", (vocab, d))]
    for l in range(6):
        p = f"layers.{l}"
        v += [
            (f"{p}.attn.in_proj_weight", (3 * d, d)),
            (f"{p}.attn.in_proj_bias", (3 * d,)),
            (f"{p}.attn.out_proj.weight", (d, d)),
            (f"{p}.attn.out_proj.bias", (d,)),
            (f"{p}.linear1.weight", (ff, d)),
            (f"{p}.linear1.bias", (ff,)),
            (f"{p}.linear2.weight", (d, ff)),
            (f"{p}.linear2.bias", (d,)),
        ]
        for n in ("norm1", "norm2"):
            v += [(f"{p}.{n}.weight", (d,)), (f"{p}.{n}.bias", (d,))]
    v.append(("head.weight", (vocab // 2, d)))
    return v


def bench_checkpoint():
    torch.manual_seed(0)
    sd = {k: torch.randn(s) for k, s in shapes()}
    nbytes = sum(t.numel() * 4 for t in sd.values())
    folder = tempfile.mkdtemp(prefix="torch-bench-checkpoint-")
    pt = os.path.join(folder, "weights.pt")
    st = os.path.join(folder, "weights.safetensors")
    torch.save(sd, pt)
    try:
        from safetensors.torch import load_file, save_file
    except ImportError:
        load_file = None
    if load_file is not None:
        save_file(sd, st)
    del sd
    res = {"tensors": len(shapes()), "mb": round(nbytes / 1e6, 1)}
    timed = [("pt_load", lambda: torch.load(pt, weights_only=True))]
    if load_file is not None:
        timed.append(("safetensors_load", lambda: load_file(st)))
    out = {}
    for name, fn in timed:
        out[name] = harness.timeit(fn)
    out["weights_load"] = out["pt_load"]
    for name, (t, times) in out.items():
        res[f"{name}_ms"] = round(t * 1e3, 3)
        res[f"{name}_ms_best"] = round(min(times) * 1e3, 3)
        res[f"{name}_gbs"] = round(nbytes / t / 1e9, 2)
        res[f"{name}_spread"] = round((max(times) - min(times)) / t, 3)
    res["note"] = "weights_load = torch.load(.pt), the baseline for Pyrite's safetensors load; files in the page cache"
    shutil.rmtree(folder, ignore_errors=True)
    return res


WORKLOADS = {"checkpoint": bench_checkpoint}


if __name__ == "__main__":
    harness.main(WORKLOADS, __doc__)
