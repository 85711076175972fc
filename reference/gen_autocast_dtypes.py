"""What torch.autocast("cpu") does to each op's output dtype in PyTorch 2.15, for the autocast
work of issue 27: the ops that run in the lower precision, those forced to float32, those that
promote to the widest input, and those left alone, measured rather than read off a list.

For each op, float32 inputs, then inputs already in the lower precision (which separates "forced
to float32" from "left alone"), and for the promote checks a bfloat16/float16 input mixed with a
float32 one, run under autocast with dtype bfloat16 and float16; the output dtypes are recorded. Writes reference/data/autocast_dtypes.json.
Run: python3 reference/gen_autocast_dtypes.py
"""
import json
import os

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "autocast_dtypes.json")
torch.manual_seed(0)
# The dtype the inputs are made in: float32, then the lower precision itself, which tells an op
# forced to float32 (float32 out) from one left alone (the input's dtype out).
DT = [torch.float32]
f = lambda *s: torch.randn(*s).to(DT[0])
pos = lambda *s: (torch.rand(*s) * 0.8 + 0.1).to(DT[0])
tgt = torch.tensor([1, 0, 3, 2])

OPS = {
    # lower precision on CPU
    "matmul": lambda: torch.matmul(f(4, 5), f(5, 3)),
    "mm": lambda: torch.mm(f(4, 5), f(5, 3)),
    "bmm": lambda: torch.bmm(f(2, 4, 5), f(2, 5, 3)),
    "addmm": lambda: torch.addmm(f(4, 3), f(4, 5), f(5, 3)),
    "baddbmm": lambda: torch.baddbmm(f(2, 4, 3), f(2, 4, 5), f(2, 5, 3)),
    "addbmm": lambda: torch.addbmm(f(4, 3), f(2, 4, 5), f(2, 5, 3)),
    "linear": lambda: F.linear(f(4, 5), f(3, 5), f(3)),
    "conv1d": lambda: F.conv1d(f(1, 2, 8), f(3, 2, 3)),
    "conv2d": lambda: F.conv2d(f(1, 2, 6, 6), f(3, 2, 3, 3)),
    "conv3d": lambda: F.conv3d(f(1, 2, 4, 4, 4), f(3, 2, 3, 3, 3)),
    "conv_transpose1d": lambda: F.conv_transpose1d(f(1, 2, 8), f(2, 3, 3)),
    "conv_transpose2d": lambda: F.conv_transpose2d(f(1, 2, 5, 5), f(2, 3, 3, 3)),
    "prelu": lambda: F.prelu(f(4, 3), f(1)),
    "scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(f(1, 2, 4, 8), f(1, 2, 4, 8), f(1, 2, 4, 8)),
    # float32 on CPU
    "binary_cross_entropy": lambda: F.binary_cross_entropy(pos(4), pos(4)),
    "mse_loss": lambda: F.mse_loss(f(4), f(4)),
    "l1_loss": lambda: F.l1_loss(f(4), f(4)),
    "smooth_l1_loss": lambda: F.smooth_l1_loss(f(4), f(4)),
    "huber_loss": lambda: F.huber_loss(f(4), f(4)),
    "nll_loss": lambda: F.nll_loss(f(4, 5), tgt),
    "cross_entropy": lambda: F.cross_entropy(f(4, 5), tgt),
    "kl_div": lambda: F.kl_div(f(4, 5), pos(4, 5)),
    "binary_cross_entropy_with_logits": lambda: F.binary_cross_entropy_with_logits(f(4), pos(4)),
    "prod": lambda: torch.prod(f(4)),
    "cdist": lambda: torch.cdist(f(3, 4), f(2, 4)),
    "trace": lambda: torch.trace(f(3, 3)),
    "avg_pool3d": lambda: F.avg_pool3d(f(1, 1, 4, 4, 4), 2),
    "adaptive_avg_pool3d": lambda: F.adaptive_avg_pool3d(f(1, 1, 4, 4, 4), 2),
    "max_pool3d": lambda: F.max_pool3d(f(1, 1, 4, 4, 4), 2),
    "reflection_pad1d": lambda: F.pad(f(1, 2, 5), (1, 1), mode="reflect"),
    "replication_pad2d": lambda: F.pad(f(1, 2, 5, 5), (1, 1, 1, 1), mode="replicate"),
    "inverse": lambda: torch.inverse(f(3, 3) + 3 * torch.eye(3)),
    "margin_ranking_loss": lambda: F.margin_ranking_loss(f(4), f(4), torch.tensor([1.0, -1, 1, -1]).to(DT[0])),
    "soft_margin_loss": lambda: F.soft_margin_loss(f(4), torch.tensor([1.0, -1, 1, -1]).to(DT[0])),
    "triplet_margin_loss": lambda: F.triplet_margin_loss(f(4, 5), f(4, 5), f(4, 5)),
    "hinge_embedding_loss": lambda: F.hinge_embedding_loss(f(4), torch.tensor([1.0, -1, 1, -1]).to(DT[0])),
    "poisson_nll_loss": lambda: F.poisson_nll_loss(f(4), pos(4)),
    "gaussian_nll_loss": lambda: F.gaussian_nll_loss(f(4), f(4), pos(4)),
    "cosine_embedding_loss": lambda: F.cosine_embedding_loss(f(4, 5), f(4, 5), torch.tensor([1.0, -1, 1, -1]).to(DT[0])),
    "multi_margin_loss": lambda: F.multi_margin_loss(f(4, 5), tgt),
    "multilabel_margin_loss": lambda: F.multilabel_margin_loss(f(4, 5), torch.tensor([[1, 0, -1, 0, 0]] * 4)),
    "grid_sample": lambda: F.grid_sample(f(1, 1, 4, 4), f(1, 3, 3, 2).clamp(-1, 1), align_corners=False),
    "cosine_similarity": lambda: F.cosine_similarity(f(4, 5), f(4, 5)),
    "logsumexp": lambda: torch.logsumexp(f(4, 5), 1),
    "cumprod": lambda: torch.cumprod(f(5), 0),
    "max_pool1d": lambda: F.max_pool1d(f(1, 1, 4), 2),
    "pad_constant": lambda: F.pad(f(1, 2, 5), (1, 1)),
    "cumsum": lambda: torch.cumsum(f(5), 0),
    "softmax": lambda: torch.softmax(f(4, 5), 1),
    "log_softmax": lambda: torch.log_softmax(f(4, 5), 1),
    "layer_norm": lambda: F.layer_norm(f(4, 5), (5,)),
    "group_norm": lambda: F.group_norm(f(2, 4, 3), 2),
    "batch_norm": lambda: F.batch_norm(f(4, 3), torch.zeros(3), torch.ones(3)),
    "sum": lambda: torch.sum(f(5)),
    "mean": lambda: torch.mean(f(5)),
    "exp": lambda: torch.exp(f(5)),
    "relu": lambda: torch.relu(f(5)),
    "gelu": lambda: F.gelu(f(5)),
    "add": lambda: torch.add(f(5), f(5)),
    "norm": lambda: torch.norm(f(5)),
    "dropout": lambda: F.dropout(f(5), 0.0),
    "embedding": lambda: F.embedding(tgt, f(5, 3)),
    "max_pool2d": lambda: F.max_pool2d(f(1, 1, 4, 4), 2),
    "avg_pool2d": lambda: F.avg_pool2d(f(1, 1, 4, 4), 2),
    "interpolate": lambda: F.interpolate(f(1, 1, 4, 4), scale_factor=2.0),
}

LOW = {"bfloat16": torch.bfloat16, "float16": torch.float16}
MIXED = {
    # One input already in the lower precision, one in float32: promote, fall through or cast.
    "cat": lambda lo: torch.cat([f(2, 3).to(lo), f(2, 3)]),
    "stack": lambda lo: torch.stack([f(2, 3).to(lo), f(2, 3)]),
    "index_copy": lambda lo: f(4, 3).index_copy(0, torch.tensor([0, 2]), f(2, 3).to(lo)),
    "add_mixed": lambda lo: torch.add(f(5).to(lo), f(5)),
    "mul_mixed": lambda lo: torch.mul(f(5).to(lo), f(5)),
    "matmul_mixed": lambda lo: torch.matmul(f(4, 5).to(lo), f(5, 3)),
    "mse_loss_mixed": lambda lo: F.mse_loss(f(4).to(lo), f(4)),
    "exp_lower": lambda lo: torch.exp(f(5).to(lo)),
    "softmax_lower": lambda lo: torch.softmax(f(4, 5).to(lo), 1),
    "layer_norm_lower": lambda lo: F.layer_norm(f(4, 5).to(lo), (5,)),
    "sum_lower": lambda lo: torch.sum(f(5).to(lo)),
}

result = {"torch": torch.__version__, "ops": {}, "ops_lower_inputs": {}, "mixed": {}}
for key, lower_inputs in [("ops", False), ("ops_lower_inputs", True)]:
    for name, fn in OPS.items():
        row = {}
        for lname, lo in LOW.items():
            DT[0] = lo if lower_inputs else torch.float32
            try:
                with torch.autocast("cpu", dtype=lo):
                    row[lname] = str(fn().dtype).replace("torch.", "")
            except Exception as e:  # an op autocast cannot run for this dtype
                row[lname] = "error: " + type(e).__name__
        result[key][name] = row
DT[0] = torch.float32
for name, fn in MIXED.items():
    row = {}
    for lname, lo in LOW.items():
        try:
            with torch.autocast("cpu", dtype=lo):
                row[lname] = str(fn(lo).dtype).replace("torch.", "")
        except Exception as e:
            row[lname] = "error: " + type(e).__name__ + ": " + str(e).split("\n")[0][:120]
    result["mixed"][name] = row
with open(OUT, "w") as fh:
    json.dump(result, fh, indent=1)
for k, v in result["ops"].items():
    print(f"{k:34s} {v}  lower inputs: {result['ops_lower_inputs'][k]}")
for k, v in result["mixed"].items():
    print(f"{k:34s} {v}")
