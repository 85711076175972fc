#!/usr/bin/env python3
"""Pyrite against PyTorch on the same call, in alternating batches a fraction of a second apart.

bench_compare.py runs each side's whole benchmark in turn, so the two sides of one ratio are
seconds to minutes apart. On a shared VM a core's speed drifts by 10-30% over a few seconds
(another tenant on the same physical core, for instance), so single ratios of matmul swing
from 0.7x to 1.4x. Here one process runs PyTorch's call and `pyrite-bench --serve` runs
Pyrite's: the script times a batch of PyTorch calls, then asks Pyrite for a batch of the same
call, and so on (the order alternates each sample). Each pair of batches sees the same machine,
and the median of the per-pair ratios is far steadier than a ratio of two medians.

The workload is the `matmul` workload of torch_bench.py: (n x n) @ (n x n) in f32, inputs
from randn with seed 0. The metric names match (`n{n}_gflops`).

Usage:
  python3 scripts/bench_paired.py [--sizes 256,512,1024,2048] [--threads 1,2] [--samples 41]
      [--sample-time 0.05] [--gap 0.02] [--json out.jsonl]

Requires: cargo build --release -p pyrite-bench, and torch installed. A pause of --gap
seconds separates the batches, so that a side's idle worker threads (PyTorch's OpenMP
workers and Pyrite's pool both spin briefly after a parallel region) have gone to sleep
before the other side starts.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "pyrite-bench")


def quantile(v, q):
    s = sorted(v)
    x = q * (len(s) - 1)
    lo, hi = math.floor(x), math.ceil(x)
    return s[lo] + (s[hi] - s[lo]) * (x - lo)


class Pyrite:
    """A `pyrite-bench --serve` child process."""

    def __init__(self):
        self.p = subprocess.Popen([BIN, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def matmul(self, n, threads, calls):
        self.p.stdin.write(f"matmul {n} {threads} {calls}\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline().strip()
        if not line or line.startswith("error"):
            sys.exit(f"pyrite-bench --serve: {line or 'no reply'}")
        return float(line)

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait()


def torch_matmul(a, b, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        a @ b
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="256,512,1024,2048")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--samples", type=int, default=41, help="pairs of batches per size")
    p.add_argument("--sample-time", type=float, default=0.05, help="seconds per batch (at least one call)")
    p.add_argument("--gap", type=float, default=0.02, help="seconds of pause between batches")
    p.add_argument("--json", default="", help="also append one JSON record per thread count to this file")
    a = p.parse_args()
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release -p pyrite-bench")
    pyr = Pyrite()
    print(f"{'threads':>7} {'n':>5} {'calls':>5} {'pytorch GFLOP/s':>16} {'pyrite GFLOP/s':>15} "
          f"{'speedup':>8} {'25%..75%':>13}")
    for threads in [int(t) for t in a.threads.split(",")]:
        torch.set_num_threads(threads)
        results = {}
        for n in [int(s) for s in a.sizes.split(",")]:
            torch.manual_seed(0)
            x, y = torch.randn(n, n), torch.randn(n, n)
            flop = 2 * n**3
            torch_matmul(x, y, 3)
            pyr.matmul(n, threads, 3)
            calls = max(1, math.ceil(a.sample_time / (torch_matmul(x, y, 1) or 1e-9)))
            tt, pt, ratios = [], [], []
            for s in range(a.samples):
                for side in ((0, 1) if s % 2 == 0 else (1, 0)):
                    time.sleep(a.gap)
                    if side == 0:
                        t = torch_matmul(x, y, calls) / calls
                    else:
                        q = pyr.matmul(n, threads, calls) / calls
                tt.append(t)
                pt.append(q)
                ratios.append(t / q)
            tg, pg = flop / quantile(tt, 0.5) / 1e9, flop / quantile(pt, 0.5) / 1e9
            r25, r50, r75 = (quantile(ratios, q) for q in (0.25, 0.5, 0.75))
            print(f"{threads:>7} {n:>5} {calls:>5} {tg:>16.1f} {pg:>15.1f} {r50:>7.3f}x {r25:>6.3f}..{r75:.3f}",
                  flush=True)
            results.update({f"n{n}_gflops_torch": round(tg, 2), f"n{n}_gflops_pyrite": round(pg, 2),
                            f"n{n}_speedup": round(r50, 4), f"n{n}_speedup_q25": round(r25, 4),
                            f"n{n}_speedup_q75": round(r75, 4), f"n{n}_calls": calls})
        if a.json:
            rec = {"bench": "matmul_paired", "threads": threads, "samples": a.samples, "torch": torch.__version__,
                   "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "results": results}
            with open(a.json, "a") as f:
                f.write(json.dumps(rec) + "\n")
    pyr.close()


if __name__ == "__main__":
    main()
