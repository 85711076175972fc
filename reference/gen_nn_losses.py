"""Reference data for torch.nn loss modules: forward and backward.

For each case, in PyTorch:
    torch.manual_seed(seed)                  # seed = crc32(case name), recorded in the case
    kwargs tensors (weight, pos_weight) are made first, then the loss module, then the inputs
    out = nn.<layer>(**kwargs)(*inputs)      # inputs: (input, target[, extra ...])
    torch.autograd.backward(out, gout)       # gout: fixed random, same shape as out (0-d if reduced)
Recorded tensors (data/nn_losses.safetensors):
    {case}/in/{i}      inputs (class indices, lengths, MultiLabelMargin targets as I64)
    {case}/out/0       the loss
    {case}/gout/0      upstream gradient
    {case}/gin/{i}     grad of each input that required grad (see input_requires_grad)
    {case}/kw/{name}   tensor kwargs; in the case's kwargs they appear as {"tensor": "<case>/kw/<name>"}
The metadata "cases" is a JSON list of {name, layer, kwargs (incl. reduction), train, dtype, seed,
inputs, outputs, input_requires_grad, output_has_grad, atol, rtol, note?, error?}.
Error cases have "error" (PyTorch's message), "outputs": 0, and their inputs recorded.

Add a case in one line, e.g.:
    case("mse", "MSELoss", {}, [R(3, 4), R(3, 4)])     # -> mse_none_f32, mse_mean_f32, mse_sum_f32
Input/kwarg specs: R(*shape, s) randn, P(*shape, lo, hi) uniform, I(hi, *shape) int64 in [0, hi),
T(values) fixed, SM(*shape) softmax probabilities, LSM(*shape) log-softmax, PM1(*shape) +-1 labels,
U01(*shape) 0/1 labels, CNT(hi, *shape) float counts.

Run: python3 reference/gen_nn_losses.py  ->  reference/data/nn_losses.safetensors
"""
import zlib

import torch
from torch import nn

from refgen import RefFile

F32, F64 = torch.float32, torch.float64
BOTH = (F32, F64)
TOL = {F32: (1e-5, 1e-4), F64: (1e-10, 1e-8)}
RED = ("none", "mean", "sum")
rf = RefFile("nn_losses")

# Losses whose every floating input except the target is differentiable (input order as forward()).
DIFF = {
    "MarginRankingLoss": [True, True, False],
    "CosineEmbeddingLoss": [True, True, False],
    "TripletMarginLoss": [True, True, True],
    "GaussianNLLLoss": [True, False, True],
}


# ----------------------------------------------------------------------------- specs: dtype -> tensor
def R(*shape, s=1.0):
    return lambda dt: torch.randn(*shape, dtype=dt) * s


def P(*shape, lo=0.5, hi=1.5):
    return lambda dt: torch.rand(*shape, dtype=dt) * (hi - lo) + lo


def I(hi, *shape):  # noqa: E743
    return lambda dt: torch.randint(0, hi, shape, dtype=torch.int64)


def T(values, dtype=None):
    def make(dt):
        t = torch.as_tensor(values)
        if dtype is not None:
            return t.to(dtype)
        return t.to(dt) if t.is_floating_point() else t
    return make


def SM(*shape, dim=1):
    return lambda dt: torch.softmax(torch.randn(*shape, dtype=dt), dim)


def LSM(*shape, dim=1):
    return lambda dt: torch.log_softmax(torch.randn(*shape, dtype=dt), dim)


def PM1(*shape):
    return lambda dt: torch.randint(0, 2, shape).to(dt) * 2 - 1


def CNT(hi, *shape):
    """Integer counts in [0, hi) as floats (Poisson targets)."""
    return lambda dt: torch.randint(0, hi, shape).to(dt)


def U01(*shape):
    return lambda dt: torch.randint(0, 2, shape).to(dt)


# ----------------------------------------------------------------------------- recording
def jsonable(v):
    if isinstance(v, (tuple, list)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    return v


def _build(name, layer, kwargs, dtype):
    """Evaluates tensor kwargs (callables) and records them under {name}/kw/{key}."""
    real, meta = {}, {}
    for k, v in kwargs.items():
        if callable(v):
            t = v(dtype)
            rf._put(f"{name}/kw/{k}", t)
            real[k], meta[k] = t, {"tensor": f"{name}/kw/{k}"}
        else:
            real[k], meta[k] = v, jsonable(v)
    return getattr(nn, layer)(**real), meta


def _one(name, layer, kwargs, inputs, dtype, grad, atol, rtol, note):
    assert name not in rf.names, f"duplicate case {name}"
    rf.names.add(name)
    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    m, meta = _build(name, layer, kwargs, dtype)
    xs = [spec(dtype) for spec in inputs]
    if grad is None:
        grad = DIFF.get(layer, [True])
    rg = [i < len(grad) and grad[i] and x.is_floating_point() for i, x in enumerate(xs)]
    xs = [x.detach().clone().requires_grad_(r) for x, r in zip(xs, rg)]
    out = m(*xs)
    gout = torch.randn_like(out)
    torch.autograd.backward(out, gout)
    for i, x in enumerate(xs):
        rf._put(f"{name}/in/{i}", x)
        if rg[i]:
            rf._put(f"{name}/gin/{i}", x.grad if x.grad is not None else torch.zeros_like(x))
    rf._put(f"{name}/out/0", out)
    rf._put(f"{name}/gout/0", gout)
    d_atol, d_rtol = TOL[dtype]
    c = {"name": name, "layer": layer, "kwargs": meta, "train": True,
         "dtype": "F32" if dtype == F32 else "F64", "seed": seed,
         "inputs": len(xs), "outputs": 1, "input_requires_grad": rg, "output_has_grad": [True],
         "atol": d_atol if atol is None else atol, "rtol": d_rtol if rtol is None else rtol}
    if note:
        c["note"] = note
    rf.cases.append(c)


def case(name, layer, kwargs, inputs, reductions=RED, dtypes=(F32,), grad=None, atol=None, rtol=None,
         note=None):
    """One case per reduction and dtype, named {name}_{reduction}_{f32|f64}."""
    for dt in dtypes:
        for r in reductions:
            n = f"{name}_{r}_{'f32' if dt == F32 else 'f64'}"
            _one(n, layer, {**kwargs, "reduction": r}, inputs, dt, grad, atol, rtol, note)


def error_case(name, layer, kwargs, inputs, note=None):
    """The call must fail; records the inputs and PyTorch's full message."""
    assert name not in rf.names, f"duplicate case {name}"
    rf.names.add(name)
    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    m, meta = _build(name, layer, kwargs, F32)
    xs = [spec(F32) for spec in inputs]
    try:
        m(*xs)
    except Exception as e:  # noqa: BLE001
        msg, etype = str(e), type(e).__name__
    else:
        raise AssertionError(f"{name}: expected PyTorch to raise")
    for i, x in enumerate(xs):
        rf._put(f"{name}/in/{i}", x)
    c = {"name": name, "layer": layer, "kwargs": meta, "train": True, "dtype": "F32", "seed": seed,
         "inputs": len(xs), "outputs": 0, "input_requires_grad": [False] * len(xs), "output_has_grad": [],
         "atol": 0.0, "rtol": 0.0, "error": msg, "error_type": etype}
    if note:
        c["note"] = note
    rf.cases.append(c)


# ============================================================================ classification
CE = "CrossEntropyLoss"
case("ce", CE, {}, [R(4, 5), I(5, 4)], dtypes=BOTH)
case("ce_4d", CE, {}, [R(2, 3, 2, 3), I(3, 2, 2, 3)])
case("ce_3d", CE, {}, [R(2, 4, 3), I(4, 2, 3)])
case("ce_unbatched", CE, {}, [R(5), T(3)], note="input [C], target 0-d")
case("ce_ignore_default", CE, {}, [R(4, 5), T([0, -100, 2, 4])], note="ignore_index=-100 (default)")
case("ce_ignore", CE, dict(ignore_index=1), [R(5, 4), T([1, 0, 1, 3, 2])])
case("ce_weight", CE, dict(weight=P(5)), [R(4, 5), I(5, 4)], dtypes=BOTH,
     note="mean divides by the sum of the target classes' weights")
case("ce_weight_ignore", CE, dict(weight=P(4), ignore_index=2), [R(5, 4), T([2, 0, 1, 2, 3])])
case("ce_weight_4d", CE, dict(weight=P(3)), [R(2, 3, 2, 2), I(3, 2, 2, 2)])
case("ce_ls", CE, dict(label_smoothing=0.1), [R(4, 5), I(5, 4)], dtypes=BOTH)
case("ce_ls_weight", CE, dict(label_smoothing=0.2, weight=P(5)), [R(4, 5), I(5, 4)])
case("ce_ls_ignore", CE, dict(label_smoothing=0.15, ignore_index=0), [R(4, 5), T([0, 1, 0, 4])])
case("ce_ls_weight_ignore_4d", CE, dict(label_smoothing=0.1, weight=P(3), ignore_index=1),
     [R(2, 3, 2, 2), I(3, 2, 2, 2)])
case("ce_prob", CE, {}, [R(4, 5), SM(4, 5)], dtypes=BOTH, note="class-probability target (float, same shape)")
case("ce_prob_4d", CE, {}, [R(2, 3, 2, 2), SM(2, 3, 2, 2)])
case("ce_prob_ls", CE, dict(label_smoothing=0.1), [R(4, 5), SM(4, 5)])
case("ce_prob_weight", CE, dict(weight=P(5)), [R(4, 5), SM(4, 5)],
     note="probability target with weight: mean divides by N, not by a weight sum")
case("ce_all_ignored", CE, dict(ignore_index=1), [R(3, 4), T([1, 1, 1])],
     note="every target ignored: mean is 0/0 = nan (its input grad is all 0, not nan); none and sum are 0")
NLL = "NLLLoss"
case("nll", NLL, {}, [LSM(4, 5), I(5, 4)], dtypes=BOTH)
case("nll_weight", NLL, dict(weight=P(5)), [LSM(4, 5), I(5, 4)])
case("nll_ignore", NLL, dict(ignore_index=2), [LSM(5, 3), T([2, 0, 1, 2, 1])])
case("nll_weight_ignore", NLL, dict(weight=P(3), ignore_index=0), [LSM(5, 3), T([2, 0, 1, 0, 1])])
case("nll_3d", NLL, {}, [LSM(2, 3, 4), I(3, 2, 4)])
case("nll_4d_weight", NLL, dict(weight=P(3)), [LSM(2, 3, 2, 2), I(3, 2, 2, 2)])
case("nll_raw_input", NLL, {}, [R(3, 4), I(4, 3)], note="NLLLoss does not require log-probabilities")

# ============================================================================ regression
case("mse", "MSELoss", {}, [R(3, 4), R(3, 4)], dtypes=BOTH)
case("l1", "L1Loss", {}, [R(3, 4), R(3, 4)], dtypes=BOTH)
case("l1_ties", "L1Loss", {}, [T([1.0, -2.0, 0.5, 3.0]), T([1.0, 0.0, 0.5, -1.0])],
     note="input == target at two entries: subgradient 0 there")
DIFFS = T([[-2.0, -0.9, -0.4, -0.03], [0.03, 0.45, 1.1, 3.0]])  # input; target 0 -> differences around beta/delta
Z24 = T([[0.0] * 4] * 2)
case("smoothl1", "SmoothL1Loss", {}, [R(3, 4, s=2), R(3, 4)], dtypes=BOTH)
case("smoothl1_beta05", "SmoothL1Loss", dict(beta=0.5), [DIFFS, Z24])
case("smoothl1_beta0", "SmoothL1Loss", dict(beta=0.0), [R(3, 4), R(3, 4)], note="beta=0 is exactly L1Loss")
case("huber", "HuberLoss", {}, [R(3, 4, s=2), R(3, 4)], dtypes=BOTH)
case("huber_delta05", "HuberLoss", dict(delta=0.5), [DIFFS, Z24])
case("huber_delta2", "HuberLoss", dict(delta=2.0), [R(3, 4, s=2), R(3, 4)])

# ============================================================================ binary / probabilistic
case("bce", "BCELoss", {}, [P(3, 4, lo=0.05, hi=0.95), P(3, 4, lo=0.0, hi=1.0)], dtypes=BOTH)
case("bce_hard_target", "BCELoss", {}, [P(3, 4, lo=0.05, hi=0.95), U01(3, 4)])
case("bce_weight", "BCELoss", dict(weight=P(4)), [P(3, 4, lo=0.05, hi=0.95), U01(3, 4)],
     note="weight [4] broadcasts over the batch")
case("bce_extremes", "BCELoss", {}, [T([0.0, 1.0, 1e-30, 0.999999, 0.5, 0.0]), T([0.0, 1.0, 1.0, 0.0, 1.0, 1.0])],
     note="log is clamped to >= -100; input exactly 0 or 1")
BCEL = "BCEWithLogitsLoss"
case("bcel", BCEL, {}, [R(3, 4, s=2), P(3, 4, lo=0.0, hi=1.0)], dtypes=BOTH)
case("bcel_pos_weight", BCEL, dict(pos_weight=P(4, lo=0.5, hi=3.0)), [R(3, 4, s=2), U01(3, 4)])
case("bcel_weight", BCEL, dict(weight=P(3, 1)), [R(3, 4, s=2), U01(3, 4)], note="weight [3,1] broadcasts")
case("bcel_both", BCEL, dict(weight=P(4), pos_weight=P(4, lo=0.5, hi=3.0)), [R(3, 4, s=2), P(3, 4, lo=0.0, hi=1.0)],
     dtypes=BOTH)
case("bcel_large", BCEL, dict(pos_weight=T([2.0, 0.5])), [T([[-60.0, 60.0], [45.0, -45.0]]), T([[1.0, 0.0], [1.0, 0.0]])],
     note="large logits: must stay finite (log-sum-exp form)")
KL = "KLDivLoss"
RED_KL = RED + ("batchmean",)
case("kldiv", KL, {}, [LSM(3, 4), SM(3, 4)], reductions=RED_KL, dtypes=BOTH)
case("kldiv_log_target", KL, dict(log_target=True), [LSM(3, 4), LSM(3, 4)], reductions=RED_KL)
case("kldiv_zero_target", KL, {}, [LSM(2, 3), T([[0.0, 0.3, 0.7], [1.0, 0.0, 0.0]])], reductions=RED_KL,
     note="target 0 contributes 0 (xlogy)")
case("kldiv_3d", KL, {}, [LSM(2, 3, 2), SM(2, 3, 2)], reductions=("batchmean",), note="batchmean divides by size(0)")
case("poissonnll", "PoissonNLLLoss", {}, [R(3, 4), CNT(5, 3, 4)], dtypes=BOTH,
     note="log_input=True (default): loss = exp(input) - target * input")
case("poissonnll_nolog", "PoissonNLLLoss", dict(log_input=False), [P(3, 4, lo=0.2, hi=3.0), P(3, 4, lo=0.0, hi=4.0)],
     dtypes=BOTH)
case("poissonnll_full", "PoissonNLLLoss", dict(full=True), [R(2, 4), T([[0.0, 1.0, 2.0, 5.0], [0.5, 1.5, 3.0, 10.0]])],
     note="Stirling term added only where target > 1")
case("poissonnll_nolog_eps", "PoissonNLLLoss", dict(log_input=False, eps=0.1, full=True),
     [P(3, 4, lo=0.0, hi=2.0), P(3, 4, lo=0.0, hi=4.0)])
G = "GaussianNLLLoss"
case("gaussiannll", G, {}, [R(4, 3), R(4, 3), P(4, 3)], dtypes=BOTH)
case("gaussiannll_full", G, dict(full=True), [R(4, 3), R(4, 3), P(4, 3)])
case("gaussiannll_var_last1", G, {}, [R(4, 3), R(4, 3), P(4, 1)], note="var [N,1] broadcasts (homoscedastic)")
case("gaussiannll_var_fewer_dim", G, {}, [R(4, 3), R(4, 3), P(4)], note="var [N] for input [N,D]: unsqueezed to [N,1]")
case("gaussiannll_eps", G, dict(eps=0.05), [R(4, 3), R(4, 3), P(4, 3, lo=0.001, hi=0.2)],
     note="var is clamped to eps without cutting the gradient (clamp is done under no_grad on a clone)")

# ============================================================================ embeddings / ranking
case("cosineembedding", "CosineEmbeddingLoss", {}, [R(4, 5), R(4, 5), T([1.0, -1.0, 1.0, -1.0])], dtypes=BOTH)
case("cosineembedding_margin", "CosineEmbeddingLoss", dict(margin=0.3), [R(6, 3), R(6, 3), PM1(6)])
case("marginranking", "MarginRankingLoss", {}, [R(5), R(5), PM1(5)], dtypes=BOTH)
case("marginranking_margin", "MarginRankingLoss", dict(margin=0.5), [R(6), R(6), PM1(6)])
case("triplet", "TripletMarginLoss", {}, [R(4, 5), R(4, 5), R(4, 5)], dtypes=BOTH)
case("triplet_p1_margin", "TripletMarginLoss", dict(p=1.0, margin=0.5), [R(4, 5), R(4, 5), R(4, 5)])
case("triplet_swap", "TripletMarginLoss", dict(swap=True), [R(4, 5), R(4, 5), R(4, 5)])
case("triplet_p3_eps", "TripletMarginLoss", dict(p=3.0, eps=1e-3, margin=2.0), [R(3, 4), R(3, 4), R(3, 4)])
case("hingeembedding", "HingeEmbeddingLoss", {}, [R(3, 4, s=2), PM1(3, 4)], dtypes=BOTH)
case("hingeembedding_margin", "HingeEmbeddingLoss", dict(margin=0.5), [R(3, 4), PM1(3, 4)])
case("softmargin", "SoftMarginLoss", {}, [R(3, 4, s=2), PM1(3, 4)], dtypes=BOTH)
case("multilabelsoftmargin", "MultiLabelSoftMarginLoss", {}, [R(3, 4, s=2), U01(3, 4)], dtypes=BOTH,
     note="reduction 'none' gives one value per sample (mean over classes)")
case("multilabelsoftmargin_weight", "MultiLabelSoftMarginLoss", dict(weight=P(4)), [R(3, 4, s=2), U01(3, 4)])
case("multimargin", "MultiMarginLoss", {}, [R(4, 5), I(5, 4)], dtypes=BOTH)
case("multimargin_p2", "MultiMarginLoss", dict(p=2), [R(4, 5), I(5, 4)])
case("multimargin_margin_weight", "MultiMarginLoss", dict(margin=0.5, weight=P(5)), [R(4, 5), I(5, 4)])
case("multimargin_p2_weight", "MultiMarginLoss", dict(p=2, weight=P(3)), [R(4, 3), I(3, 4)])
case("multimargin_1d", "MultiMarginLoss", {}, [R(4), T(2)])
case("multilabelmargin", "MultiLabelMarginLoss", {},
     [R(3, 4), T([[3, 0, -1, 1], [1, 2, 3, 0], [2, -1, 0, 0]])], dtypes=BOTH,
     note="targets are class indices, ended by the first -1 (later entries ignored)")
case("multilabelmargin_1d", "MultiLabelMarginLoss", {}, [R(4), T([0, 3, -1, 2])])

# ============================================================================ CTC
# log_probs [T=12, N=2, C=5] (log_softmax of randn, a leaf), blank 0, targets in 1..4
CTC_LP = LSM(12, 2, 5, dim=2)
CTC_TGT = T([[1, 2, 2, 3], [4, 1, 3, 0]])
CTC_IL, CTC_TL = T([12, 10]), T([4, 3])
CTC_NOTE = ("PyTorch's grad w.r.t. log_probs is NOT the true derivative: it is the true one plus "
            "g_n * exp(log_probs) (g_n = upstream grad of sample n's loss), i.e. the grad w.r.t. logits assuming "
            "log_probs = log_softmax(logits); the extra term vanishes through log_softmax's backward")
case("ctc", "CTCLoss", {}, [CTC_LP, CTC_TGT, CTC_IL, CTC_TL], dtypes=BOTH, note=CTC_NOTE)
case("ctc_concat_targets", "CTCLoss", {}, [CTC_LP, T([1, 2, 2, 3, 4, 1, 3]), CTC_IL, CTC_TL],
     note="1-d concatenated targets")
case("ctc_blank4", "CTCLoss", dict(blank=4), [CTC_LP, T([[0, 1, 1, 2], [3, 0, 2, 0]]), T([11, 12]), T([4, 2])])
CTC_INF = [LSM(12, 2, 5, dim=2), T([[1, 1, 1, 1], [2, 3, 0, 0]]), T([6, 12]), T([4, 2])]
case("ctc_zero_infinity", "CTCLoss", dict(zero_infinity=True), CTC_INF,
     note="sample 0 is infeasible (4 repeated labels need 7 frames, has 6): its loss and grad become 0")
case("ctc_infeasible", "CTCLoss", {}, CTC_INF,
     note="zero_infinity=False: loss inf for sample 0 and its grad is nan on frames < its input length")
case("ctc_empty_target", "CTCLoss", {}, [CTC_LP, T([[1, 2, 0, 0], [0, 0, 0, 0]]), T([12, 8]), T([2, 0])],
     note="target length 0: loss = -sum of blank log-probs")

# ============================================================================ errors
error_case("err_ce_batch_mismatch", CE, {}, [R(4, 5), I(5, 3)], note="wrong target shape")
error_case("err_ce_target_4d_shape", CE, {}, [R(2, 3, 2, 2), I(3, 2, 2, 3)], note="wrong spatial target shape")
error_case("err_ce_class_out_of_range", CE, {}, [R(3, 4), T([0, 4, 1])], note="class index == C")
error_case("err_ce_negative_class", CE, {}, [R(3, 4), T([0, -1, 1])], note="negative index other than ignore_index")
error_case("err_ce_float_target_wrong_shape", CE, {}, [R(3, 4), R(3)],
           note="float target must be probabilities of the input's shape")
error_case("err_ce_int32_target", CE, {}, [R(3, 4), T([0, 1, 2], dtype=torch.int32)], note="int32 class indices")
error_case("err_nll_class_out_of_range", NLL, {}, [LSM(3, 4), T([0, 7, 1])])
error_case("err_nll_float_target", NLL, {}, [LSM(3, 4), T([0.0, 1.0, 2.0])], note="wrong target dtype")
error_case("err_bce_shape", "BCELoss", {}, [P(3, 4, lo=0.1, hi=0.9), P(3, 1, lo=0.0, hi=1.0)],
           note="BCELoss refuses a target of a different size")
error_case("err_bcel_shape", BCEL, {}, [R(3, 4), P(4, lo=0.0, hi=1.0)])
error_case("err_bce_input_out_of_range", "BCELoss", {}, [T([0.5, 1.5]), T([1.0, 0.0])])
error_case("err_multimargin_target_range", "MultiMarginLoss", {}, [R(3, 4), T([0, 4, 1])])
error_case("err_ctc_input_length", "CTCLoss", {}, [LSM(3, 1, 5, dim=2), T([[1, 2]]), T([4]), T([2])],
           note="input_lengths larger than T (a target longer than the input is not an error: loss inf)")
error_case("err_ctc_target_length", "CTCLoss", {}, [LSM(6, 1, 5, dim=2), T([[1, 2]]), T([6]), T([3])],
           note="target_lengths larger than the padded targets' width")

rf.save()
