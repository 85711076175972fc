"""Reference data for pyrite-metrics: torchmetrics' classification, regression and aggregation
metrics on fixed, seeded batches.

Every case builds one torchmetrics metric, feeds it a few batches with ``forward`` (recording the
value of each batch alone), then records ``compute`` over all of them. The Rust test
(crates/pyrite-metrics/tests/torchmetrics.rs) builds the same metric from ``metric`` and
``args``, replays the batches, and also checks that two copies fed halves of the batches and
merged compute the same value.

Tensors are stored as {"dtype", "shape", "data"} with data flattened; NaN values as null.

File: data/metrics.json. Run: python3 reference/gen_metrics.py
"""
import json
import math
import os
import warnings

import torch
import torchmetrics
from torchmetrics import classification as C
from torchmetrics import regression as R
from torchmetrics import aggregation as A

from refgen import DATA

warnings.filterwarnings("ignore")
cases = []
INPUTS = {}


def shared(key, batches):
    """A set of batches stored once and used by several cases."""
    INPUTS[key] = batches
    inputs[key] = [{"preds": enc(p), "target": enc(t)} for p, t in batches]
    return key

DT = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL"}


def enc(t):
    t = torch.as_tensor(t)
    data = t.flatten().tolist()
    if t.is_floating_point():
        data = [None if math.isnan(v) else v for v in data]
    return {"dtype": DT[t.dtype], "shape": list(t.shape), "data": data}


inputs = {}


def case(name, metric, args, batches):
    """Records a case; `batches` is a list of (preds, target) or the key of a shared input set."""
    key = batches if isinstance(batches, str) else f"_{name}"
    if not isinstance(batches, str):
        inputs[key] = [{"preds": enc(p), "target": enc(t)} for p, t in batches]
    batches = INPUTS[key] if key in INPUTS else batches
    cls = getattr(C, metric, None) or getattr(R, metric, None) or getattr(A, metric)
    kw = {k: v for k, v in args.items() if k != "average"}
    if "average" in args:
        kw["average"] = None if args["average"] == "none" else args["average"]
    m = cls(**kw)
    forward = []
    for p, t in batches:
        if metric == "SumMetric":
            forward.append(enc(m(p)))
        else:
            forward.append(enc(m(p, t)))
    cases.append({
        "name": name,
        "metric": metric,
        "args": args,
        "inputs": key,
        "forward": forward,
        "compute": enc(m.compute()),
    })


g = torch.Generator().manual_seed(0)


def rand(*s):
    return torch.rand(*s, generator=g)


def randn(*s):
    return torch.randn(*s, generator=g)


def randint(hi, *s):
    return torch.randint(0, hi, s, generator=g)


# ------------------------------------------------------------------------------------- binary
def binary_batches(ignore=False):
    bs = [
        (rand(8), randint(2, 8)),             # probabilities
        (randn(6) * 2, randint(2, 6)),        # logits
        (randint(2, 7), randint(2, 7)),       # labels
    ]
    if ignore:
        bs = [(p, torch.where(rand(len(t)) < 0.25, torch.full_like(t, -1), t)) for p, t in bs]
    return bs


BIN = shared("binary", binary_batches())
BIN_IGN = shared("binary_ignore", binary_batches(True))
for metric in ("BinaryAccuracy", "BinaryPrecision", "BinaryRecall", "BinaryF1Score", "BinaryFBetaScore"):
    extra = {"beta": 2.0} if metric == "BinaryFBetaScore" else {}
    case(f"{metric}", metric, dict(extra), BIN)
    case(f"{metric}_ignore_threshold", metric, dict(extra, threshold=0.3, ignore_index=-1), BIN_IGN)
# Nothing predicted positive: precision 0/0 -> zero_division.
case("BinaryPrecision_no_positive_pred", "BinaryPrecision", {}, [(torch.zeros(4), torch.tensor([0, 1, 0, 1]))])
case("BinaryPrecision_zero_division_1", "BinaryPrecision", {"zero_division": 1.0},
     [(torch.zeros(4), torch.tensor([0, 1, 0, 1]))])


# --------------------------------------------------------------------------------- multiclass
def mc_batches(c, ignore=None, absent=None, extra_dim=False):
    def target(*s):
        t = randint(c, *s)
        if absent is not None:
            t = torch.where(t == absent, torch.zeros_like(t), t)
        if ignore is not None:
            t = torch.where(rand(*s) < 0.2, torch.full_like(t, ignore), t)
        return t

    if extra_dim:
        return [(randn(4, c, 3), target(4, 3)), (rand(3, c, 3), target(3, 3))]
    return [
        (torch.softmax(randn(10, c), 1), target(10)),   # probabilities
        (randn(7, c) * 2, target(7)),                    # logits
        (randint(c, 9), target(9)),                      # labels
    ]


MC4 = shared("mc4", mc_batches(4))
MC5_ABSENT = shared("mc5_absent", mc_batches(5, absent=4))
MC4_IGN_OUT = shared("mc4_ignore_out", mc_batches(4, ignore=-1))
MC4_IGN_IN = shared("mc4_ignore_in", mc_batches(4, ignore=0))
MC4_SCORES = shared("mc4_scores", mc_batches(4)[:2])
MC3_DIM = shared("mc3_extra_dim", mc_batches(3, extra_dim=True))
for metric in ("MulticlassAccuracy", "MulticlassPrecision", "MulticlassRecall", "MulticlassF1Score",
               "MulticlassFBetaScore"):
    extra = {"beta": 0.5} if metric == "MulticlassFBetaScore" else {}
    for avg in ("micro", "macro", "weighted", "none"):
        case(f"{metric}_{avg}", metric, dict(extra, num_classes=4, average=avg), MC4)
    # Class 4 never occurs in the targets (it may be predicted).
    case(f"{metric}_absent_class", metric, dict(extra, num_classes=5), MC5_ABSENT)
    case(f"{metric}_ignore_out_of_range", metric, dict(extra, num_classes=4, ignore_index=-1), MC4_IGN_OUT)
    case(f"{metric}_ignore_in_range", metric, dict(extra, num_classes=4, ignore_index=0, average="none"),
         MC4_IGN_IN)
    for avg in ("micro", "macro"):
        case(f"{metric}_top2_{avg}", metric, dict(extra, num_classes=4, top_k=2, average=avg), MC4_SCORES)
    case(f"{metric}_extra_dim", metric, dict(extra, num_classes=3), MC3_DIM)
# Nothing predicted and nothing present for class 3 of 4: dropped from macro.
case("MulticlassAccuracy_never_seen_class", "MulticlassAccuracy", {"num_classes": 4},
     [(torch.tensor([0, 1, 2, 1]), torch.tensor([0, 1, 2, 2]))])
case("MulticlassPrecision_never_seen_class", "MulticlassPrecision", {"num_classes": 4},
     [(torch.tensor([0, 1, 2, 1]), torch.tensor([0, 1, 2, 2]))])


# --------------------------------------------------------------------------------- multilabel
def ml_batches(l, ignore=False):
    bs = [(rand(6, l), randint(2, 6, l)), (randn(5, l) * 2, randint(2, 5, l)), (randint(2, 4, l), randint(2, 4, l))]
    if ignore:
        bs = [(p, torch.where(rand(*t.shape) < 0.2, torch.full_like(t, -1), t)) for p, t in bs]
    return bs


ML3 = shared("ml3", ml_batches(3))
ML3_IGN = shared("ml3_ignore", ml_batches(3, True))
for metric in ("MultilabelAccuracy", "MultilabelPrecision", "MultilabelRecall", "MultilabelF1Score"):
    for avg in ("micro", "macro", "weighted", "none"):
        case(f"{metric}_{avg}", metric, {"num_labels": 3, "average": avg}, ML3)
    case(f"{metric}_ignore", metric, {"num_labels": 3, "ignore_index": -1, "threshold": 0.4}, ML3_IGN)

# --------------------------------------------------------------------------- confusion matrix
for norm in ("none", "true", "pred", "all"):
    case(f"BinaryConfusionMatrix_{norm}", "BinaryConfusionMatrix", {"normalize": norm}, BIN)
    case(f"MulticlassConfusionMatrix_{norm}", "MulticlassConfusionMatrix", {"num_classes": 5, "normalize": norm},
         MC5_ABSENT)
    case(f"MultilabelConfusionMatrix_{norm}", "MultilabelConfusionMatrix", {"num_labels": 3, "normalize": norm}, ML3)
case("MulticlassConfusionMatrix_ignore", "MulticlassConfusionMatrix", {"num_classes": 4, "ignore_index": -1}, MC4_IGN_OUT)
case("BinaryConfusionMatrix_ignore", "BinaryConfusionMatrix", {"ignore_index": -1, "threshold": 0.7}, BIN_IGN)


# -------------------------------------------------------------------------- AUROC and AP
def curve_binary(ties=False, ignore=False):
    bs = [(rand(9), randint(2, 9)), (randn(7) * 2, randint(2, 7)), (rand(8), randint(2, 8))]
    if ties:
        bs = [(torch.round(rand(12) * 10) / 10, randint(2, 12)), (torch.round(rand(10) * 10) / 10, randint(2, 10))]
    if ignore:
        bs = [(p, torch.where(rand(len(t)) < 0.25, torch.full_like(t, -1), t)) for p, t in bs]
    return bs


def curve_mc(c, absent=None, ignore=None):
    def target(n):
        t = randint(c, n)
        if absent is not None:
            t = torch.where(t == absent, torch.ones_like(t), t)
        if ignore is not None:
            t = torch.where(rand(n) < 0.2, torch.full_like(t, ignore), t)
        return t

    return [(torch.softmax(randn(10, c), 1), target(10)), (randn(8, c) * 2, target(8)),
            (torch.softmax(randn(6, c), 1), target(6))]


CB = shared("curve_binary", curve_binary())
CB_IGN = shared("curve_binary_ignore", curve_binary(ignore=True))
CB_TIES = shared("curve_binary_ties", curve_binary(ties=True))
CB_NOPOS = shared("curve_binary_no_positive", [(rand(5), torch.zeros(5, dtype=torch.long))])
for metric in ("BinaryAUROC", "BinaryAveragePrecision"):
    for thr in (None, 7):
        args = {} if thr is None else {"thresholds": thr}
        sfx = "exact" if thr is None else f"binned{thr}"
        case(f"{metric}_{sfx}", metric, args, CB)
        case(f"{metric}_{sfx}_ignore", metric, dict(args, ignore_index=-1), CB_IGN)
    case(f"{metric}_ties_exact", metric, {}, CB_TIES)
    case(f"{metric}_ties_binned11", metric, {"thresholds": 11}, CB_TIES)
    case(f"{metric}_no_positive", metric, {}, CB_NOPOS)
    case(f"{metric}_no_positive_binned", metric, {"thresholds": 5}, CB_NOPOS)

CM = shared("curve_mc4", curve_mc(4))
CM_ABSENT = shared("curve_mc4_absent", curve_mc(4, absent=3))
CM_IGN = shared("curve_mc4_ignore", curve_mc(4, ignore=-1))
for metric in ("MulticlassAUROC", "MulticlassAveragePrecision"):
    for thr in (None, 9):
        base = {"num_classes": 4} if thr is None else {"num_classes": 4, "thresholds": thr}
        sfx = "exact" if thr is None else f"binned{thr}"
        for avg in ("macro", "weighted", "none"):
            case(f"{metric}_{sfx}_{avg}", metric, dict(base, average=avg), CM)
        case(f"{metric}_{sfx}_absent_class", metric, dict(base, average="none"), CM_ABSENT)
        case(f"{metric}_{sfx}_absent_class_macro", metric, dict(base), CM_ABSENT)
        case(f"{metric}_{sfx}_ignore", metric, dict(base, ignore_index=-1), CM_IGN)

# ------------------------------------------------------------------------------ regression
reg = shared("regression", [(randn(6), randn(6)), (randn(5), randn(5)), (randn(7) * 3, randn(7))])
case("MeanSquaredError", "MeanSquaredError", {}, reg)
case("MeanSquaredError_rmse", "MeanSquaredError", {"squared": False}, reg)
case("MeanAbsoluteError", "MeanAbsoluteError", {}, reg)
case("R2Score", "R2Score", {}, reg)
case("R2Score_constant_target", "R2Score", {}, [(randn(4), torch.full((4,), 2.0)), (randn(3), torch.full((3,), 2.0))])

# ----------------------------------------------------------------------------- aggregation
SUMS = [randn(5), torch.tensor([1.0, float("nan"), 3.0]), randn(4)]
vals = [(SUMS[0], rand(5)), (torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([1.0, 2.0, 0.5])),
        (SUMS[2], torch.tensor(2.0))]
vals = shared("mean", vals)
case("MeanMetric", "MeanMetric", {}, vals)
case("MeanMetric_ignore_nan", "MeanMetric", {"nan_strategy": "ignore"}, vals)
case("SumMetric", "SumMetric", {}, [(v, torch.tensor(0.0)) for v in SUMS])

out = {"torch": torch.__version__, "torchmetrics": torchmetrics.__version__, "inputs": inputs, "cases": cases}
path = os.path.join(DATA, "metrics.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print(f"{len(cases)} cases -> {path} ({os.path.getsize(path)} bytes)")
