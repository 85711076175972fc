#!/usr/bin/env python3
"""PyTorch's side of pyrite-bench's `bert_ops` workload (the shared torch_bench.py has none).

The three element-wise-and-row ops of the `bert_forward` workload's BertModel, alone, on its
shapes, in f32 under torch.no_grad(), as crates/pyrite-bench/src/bert.rs times them: exact
(erf) GELU on the feed-forward activations [8, 81, 1536] (torch.nn.functional.gelu, what
transformers' "gelu" runs), softmax over the attention scores [8, 12, 81, 81] (last dim), and
nn.LayerNorm(384, eps=1e-12) on the hidden states [8, 81, 384]. Reports gelu_ms, softmax_ms and
layer_norm_ms (medians) and their best.

Usage: python3 reference/bench/bert_ops.py [--only bert_ops] [--threads 2] [--repeats 7]
Needs: torch.
"""

import torch

import harness


def bench_bert_ops():
    torch.manual_seed(0)
    ff = torch.randn(8, 81, 1536)
    scores = torch.randn(8, 12, 81, 81)
    hidden = torch.randn(8, 81, 384)
    ln = torch.nn.LayerNorm(384, eps=1e-12).eval()
    res = {
        "config": "BERT (MiniLM) shapes: gelu [8, 81, 1536], softmax(-1) [8, 12, 81, 81], "
                  "layer_norm [8, 81, 384] eps 1e-12; f32, no_grad",
    }
    ops = {
        "gelu": lambda: torch.nn.functional.gelu(ff),
        "softmax": lambda: torch.softmax(scores, -1),
        "layer_norm": lambda: ln(hidden),
    }
    with torch.no_grad():
        for name, fn in ops.items():
            t, times = harness.timeit(fn, warmup=5)
            res[f"{name}_ms"] = round(t * 1e3, 4)
            res[f"{name}_ms_best"] = round(min(times) * 1e3, 4)
    return res


WORKLOADS = {"bert_ops": bench_bert_ops}


if __name__ == "__main__":
    harness.main(WORKLOADS, __doc__)
