"""PyTorch side of `cargo run --release -p pyrite-core --example conv_bench`: the convolutional
part of the benchmark CNN (conv 1->32 3x3 pad 1, relu, max_pool 2, conv 32->64 3x3 pad 1, relu,
max_pool 2; batch 64 of 1x28x28 f32), forward+backward and each conv pass alone.

Run: python3 scripts/bench_conv.py [threads] [iters]
"""
import sys
import time

import torch
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.set_num_threads(threads)
x = torch.randn(64, 1, 28, 28)
w1 = (torch.randn(32, 1, 3, 3) * 0.3).requires_grad_()
b1 = torch.zeros(32).requires_grad_()
w2 = (torch.randn(64, 32, 3, 3) * 0.06).requires_grad_()
b2 = torch.zeros(64).requires_grad_()
g = torch.randn(64, 64, 7, 7)


def forward():
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
    return F.max_pool2d(F.relu(F.conv2d(h, w2, b2, padding=1)), 2)


def timeit(f):
    for _ in range(5):
        f()
    t = []
    for _ in range(iters):
        s = time.perf_counter()
        f()
        t.append((time.perf_counter() - s) * 1e3)
    t.sort()
    return t[len(t) // 2]


def fwd_bwd():
    y = forward()
    torch.autograd.grad(y, [w1, b1, w2, b2], g)


def fwd():
    with torch.no_grad():
        forward()


h = torch.randn(64, 32, 14, 14)
hl = h.clone().requires_grad_()
g2 = torch.randn(64, 64, 14, 14)


def c2_fwd():
    with torch.no_grad():
        F.conv2d(h, w2, b2, padding=1)


def c2_all():
    y = F.conv2d(hl, w2, b2, padding=1)
    torch.autograd.grad(y, [hl, w2, b2], g2)


print(f"threads {threads} (torch {torch.__version__}, mkldnn {torch.backends.mkldnn.is_available()})")
print(f"cnn convs+pools forward+backward: {timeit(fwd_bwd):8.3f} ms")
print(f"cnn convs+pools forward (no grad): {timeit(fwd):8.3f} ms")
print(f"conv2 forward:                     {timeit(c2_fwd):8.3f} ms")
print(f"conv2 forward+backward (x, w, b):  {timeit(c2_all):8.3f} ms")
