#!/usr/bin/env python3
"""PyTorch's side of the GPU benchmark (`scripts/gpu_check.sh` pairs it with
`cargo run --release -p pyrite --features cuda --example gpu_bench`): the same workloads,
sizes and metric names, on cuda:0, timed with torch.cuda.synchronize() around each loop.

Metrics: matmul_{f32,tf32,bf16}_tflops at n = 4096; add_gbps (16M f32 elements, a + b);
softmax_gbps (4096 x 4096 f32, last dim); add1_us (a 1-element add: launch overhead);
mlp_step_ms (Linear 1024-4096-1024, batch 256, ReLU, MSE, backward, SGD step).

Usage: python3 reference/bench/gpu.py [--only gpu] [--repeats 7] [--min-time 0.1]
"""
import torch

import harness


def timed(fn):
    def run():
        fn()
        torch.cuda.synchronize()
    return harness.timeit(run)[0]


def gpu():
    dev = torch.device("cuda:0")
    r = {"device": torch.cuda.get_device_name(0)}
    n = 4096
    for name, dt, tf32 in [("f32", torch.float32, False), ("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device=dev, dtype=dt)
        b = torch.randn(n, n, device=dev, dtype=dt)
        r[f"matmul_{name}_tflops"] = 2 * n**3 / timed(lambda: a @ b) / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(16 << 20, device=dev)
    y = torch.randn(16 << 20, device=dev)
    r["add_gbps"] = 3 * 4 * x.numel() / timed(lambda: x + y) / 1e9
    s = torch.randn(4096, 4096, device=dev)
    r["softmax_gbps"] = 2 * 4 * s.numel() / timed(lambda: s.softmax(-1)) / 1e9
    one = torch.ones(1, device=dev)
    r["add1_us"] = timed(lambda: one + one) * 1e6
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    xin = torch.randn(256, 1024, device=dev)
    target = torch.randn(256, 1024, device=dev)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(xin), target).backward()
        opt.step()

    r["mlp_step_ms"] = timed(step) * 1e3
    return r


if __name__ == "__main__":
    harness.main({"gpu": gpu}, __doc__)
