#!/usr/bin/env python3
"""PyTorch's side of pyrite-bench's bf16 workloads (the shared torch_bench.py has none).

Same command line and JSON record as torch_bench.py, so scripts/bench_compare.py pairs each
with `pyrite-bench --only <workload>`:
- matmul_bf16: the `matmul` workload's sizes and metric names, with bf16 operands (oneDNN's
  bf16 GEMM on CPUs with AVX512-BF16);
- cnn_bf16: the `cnn` workload's training step (SmallCNN, batch 64, Adam) with the forward pass
  and the loss under torch.autocast("cpu", dtype=torch.bfloat16): Lightning's "bf16-mixed";
- transformer_bf16: the `transformer` workload's step (one TransformerEncoderLayer, d_model
  256, forward + backward) under the same autocast.

Usage: python3 reference/bench/amp_bf16.py [--only matmul_bf16,cnn_bf16,transformer_bf16]
       [--threads 2] [--repeats 7]
"""
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F

import harness


def spread(times):
    return round((max(times) - min(times)) / statistics.median(times), 3)


def matmul_bf16():
    torch.manual_seed(0)
    res = {}
    for n in (256, 512, 1024, 2048):
        a = torch.randn(n, n).to(torch.bfloat16)
        b = torch.randn(n, n).to(torch.bfloat16)
        t, times = harness.timeit(lambda: a @ b, warmup=3)
        flop = 2.0 * n**3
        res[f"n{n}_gflops"] = round(flop / t / 1e9, 2)
        res[f"n{n}_gflops_best"] = round(flop / min(times) / 1e9, 2)
        res[f"n{n}_ms"] = round(t * 1e3, 4)
        res[f"n{n}_spread"] = spread(times)
    return res


class SmallCNN(nn.Module):
    """torch_bench.py's SmallCNN."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.f1 = nn.Linear(64 * 7 * 7, 128)
        self.f2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = torch.flatten(x, 1)
        return self.f2(F.relu(self.f1(x)))


def cnn_bf16():
    torch.manual_seed(0)
    model = SmallCNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    bs = 64
    x = torch.randn(bs, 1, 28, 28)
    y = torch.randint(0, 10, (bs,))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    t, times = harness.timeit(step, warmup=5)
    macs = 28 * 28 * 32 * 9 + 14 * 14 * 64 * 32 * 9 + 3136 * 128 + 128 * 10
    return {
        "batch": bs,
        "optimizer": "Adam lr=1e-3",
        "precision": "bf16-mixed",
        "steps_per_s": round(1 / t, 2),
        "steps_per_s_best": round(1 / min(times), 2),
        "images_per_s": round(bs / t, 1),
        "ms_per_step": round(t * 1e3, 3),
        "approx_gflops": round(3 * 2 * bs * macs / t / 1e9, 2),
        "spread": spread(times),
    }


def transformer_bf16():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True)
    layer.train()
    x = torch.randn(16, 128, 256)

    def step():
        layer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(x)
        out.float().sum().backward()

    t, times = harness.timeit(step, warmup=3)
    b, s, d, ff = 16, 128, 256, 1024
    macs = b * s * (4 * d * d + 2 * d * ff) + 2 * b * s * s * d
    return {
        "config": "d_model=256 nhead=4 ff=1024 seq=128 batch=16 dropout=0 post-LN relu, no optimizer",
        "precision": "bf16-mixed",
        "steps_per_s": round(1 / t, 2),
        "steps_per_s_best": round(1 / min(times), 2),
        "ms_per_step": round(t * 1e3, 3),
        "tokens_per_s": round(b * s / t, 1),
        "approx_gflops": round(3 * 2 * macs / t / 1e9, 2),
        "spread": spread(times),
    }


WORKLOADS = {"matmul_bf16": matmul_bf16, "cnn_bf16": cnn_bf16, "transformer_bf16": transformer_bf16}

if __name__ == "__main__":
    harness.main(WORKLOADS, __doc__)
