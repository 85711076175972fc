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
import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

import torch

ARGS = None


def loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def timeit(fn, warmup=1):
    """Median seconds per call, as torch_bench.py times (inner loop of >= --min-time s)."""
    for _ in range(warmup):
        fn()
    inner = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        dt = time.perf_counter() - t0
        if dt >= ARGS.min_time or inner >= 1 << 24:
            break
        inner = max(inner * 2, int(inner * ARGS.min_time / max(dt, 1e-9) * 1.1))
    times = []
    for _ in range(ARGS.repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times), times


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
        out[name] = timeit(fn)
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


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--min-time", type=float, default=0.1)
    p.add_argument("--list", action="store_true")
    ARGS = p.parse_args()
    if ARGS.list:
        print("\n".join(WORKLOADS))
        return
    names = [s for s in ARGS.only.split(",") if s] or list(WORKLOADS)
    torch.set_num_threads(ARGS.threads)
    for n in names:
        la0 = loadavg()
        t0 = time.perf_counter()
        res = WORKLOADS[n]()
        rec = {
            "bench": n,
            "threads": ARGS.threads,
            "repeats": ARGS.repeats,
            "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "wall_s": round(time.perf_counter() - t0, 2),
            "loadavg_before": la0,
            "loadavg_after": loadavg(),
            "results": res,
        }
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
