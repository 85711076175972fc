"""Reference gradients for autograd: for each case, PyTorch computes an op's output and
torch.autograd.grad of it with respect to the differentiable inputs, for a given upstream
gradient. Inputs come in f32 and f64, some non-contiguous (views) or broadcasting.

Case layout: inputs = [x0, x1, ..., g] (g = upstream gradient, last); args.diff lists the
indices of the inputs that require grad; outputs = [out, grad of each diff input].

Run: python3 reference/gen_autograd.py  ->  reference/data/autograd.safetensors
"""
import torch

from refgen import RefFile

torch.manual_seed(0)
rf = RefFile("autograd")
F32, F64 = torch.float32, torch.float64


def rnd(*shape, dtype=F64):
    return torch.randn(*shape, dtype=dtype)


def pos(*shape, dtype=F64):
    return torch.rand(*shape, dtype=dtype) + 0.5


def grad_case(name, op, fn, inputs, diff, call, args=None, views=None):
    rf.grad_case(name, op, fn, inputs, diff, call, args=args, views=views)

for dt in (F32, F64):
    s = "f32" if dt == F32 else "f64"
    # ------------------------------------------------------------- binary, broadcasting
    for op in ("add", "sub", "mul", "div", "maximum", "minimum", "atan2", "pow"):
        fn = getattr(torch, op)
        a = pos(3, 4, dtype=dt) if op == "pow" else rnd(3, 4, dtype=dt)
        b = rnd(4, dtype=dt) if op != "pow" else rnd(4, dtype=dt) * 0.5
        if op in ("maximum", "minimum"):
            b = a[1].clone()  # ties in row 1
        grad_case(f"{op}_bcast_{s}", op, fn, [a, b], [0, 1], f"torch.{op}(a, b)")
        grad_case(f"{op}_t_{s}", op, fn, [rnd(4, 3, dtype=dt).abs() + 0.5, rnd(3, 4, dtype=dt)], [0, 1],
                  f"torch.{op}(a.t(), b)", views=[[["t"]], None])
    grad_case(f"remainder_{s}", "remainder", torch.remainder, [rnd(5, dtype=dt) * 3, pos(5, dtype=dt)], [0, 1],
              "torch.remainder(a, b)")
    grad_case(f"mul_scalar_{s}", "mul_scalar", lambda a: a * 2.5, [rnd(2, 3, dtype=dt)], [0], "a * 2.5")
    grad_case(f"pow_scalar_{s}", "pow_scalar", lambda a: a ** 3, [rnd(2, 3, dtype=dt)], [0], "a ** 3")
    grad_case(f"rsub_{s}", "rsub_scalar", lambda a: 1 - a, [rnd(2, 3, dtype=dt)], [0], "1 - a")
    # ------------------------------------------------------------- unary
    for op in ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "abs", "neg",
               "square", "reciprocal", "log1p", "expm1", "log2", "log10", "exp2", "asin", "acos", "atan",
               "sinh", "cosh", "erf", "erfinv", "floor", "frac"):
        x = rnd(3, 5, dtype=dt)
        if op in ("log", "sqrt", "rsqrt", "log2", "log10", "log1p", "reciprocal"):
            x = pos(3, 5, dtype=dt)
        if op in ("asin", "acos", "erfinv"):
            x = torch.rand(3, 5, dtype=dt) * 1.6 - 0.8
        grad_case(f"{op}_{s}", op, getattr(torch, op), [x], [0], f"torch.{op}(x)")
    grad_case(f"exp_perm_{s}", "exp", torch.exp, [rnd(2, 3, 4, dtype=dt)], [0], "torch.exp(x.permute(2, 0, 1))",
              views=[[["permute", [2, 0, 1]]]])
    F = torch.nn.functional
    for op, fn in (("silu", F.silu), ("gelu", F.gelu), ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
                   ("mish", F.mish), ("softplus", lambda x: F.softplus(x, beta=2.0, threshold=3.0))):
        grad_case(f"{op}_{s}", op, fn, [rnd(3, 5, dtype=dt) * 2], [0], f"F.{op}(x)")
    grad_case(f"clamp_{s}", "clamp", lambda x: x.clamp(-0.5, 0.7), [rnd(4, 5, dtype=dt)], [0],
              "x.clamp(-0.5, 0.7)")
    grad_case(f"lerp_{s}", "lerp", torch.lerp, [rnd(3, 4, dtype=dt), rnd(3, 4, dtype=dt), torch.rand(4, dtype=dt)],
              [0, 1, 2], "torch.lerp(a, b, w)")
    grad_case(f"where_{s}", "where", lambda c, a, b: torch.where(c, a, b),
              [torch.rand(3, 4) > 0.5, rnd(3, 4, dtype=dt), rnd(4, dtype=dt)], [1, 2], "torch.where(c, a, b)")
    m = torch.rand(3, 4) > 0.5
    grad_case(f"masked_fill_{s}", "masked_fill", lambda x, m: x.masked_fill(m, 2.0), [rnd(3, 4, dtype=dt), m], [0],
              "x.masked_fill(m, 2.0)")
    # ------------------------------------------------------------- reductions
    x = rnd(3, 4, 5, dtype=dt)
    grad_case(f"sum_all_{s}", "sum", torch.sum, [x], [0], "x.sum()")
    grad_case(f"sum_dims_{s}", "sum_dims", lambda x: x.sum((0, 2)), [x], [0], "x.sum((0, 2))",
              args={"dims": [0, 2], "keepdim": False})
    grad_case(f"sum_keep_{s}", "sum_dims", lambda x: x.sum(-1, keepdim=True), [x], [0], "x.sum(-1, keepdim=True)",
              args={"dims": [-1], "keepdim": True})
    grad_case(f"mean_dims_{s}", "mean_dims", lambda x: x.mean(1), [x], [0], "x.mean(1)",
              args={"dims": [1], "keepdim": False})
    grad_case(f"mean_all_t_{s}", "mean", torch.mean, [rnd(4, 3, dtype=dt)], [0], "x.t().mean()", views=[[["t"]]])
    tie = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, 4.0, 5.0]], dtype=dt)
    grad_case(f"amax_ties_{s}", "amax", lambda x: x.amax(1), [tie], [0], "x.amax(1)",
              args={"dims": [1], "keepdim": False})
    grad_case(f"amin_ties_{s}", "amin", lambda x: x.amin(0, keepdim=True), [tie], [0], "x.amin(0, keepdim=True)",
              args={"dims": [0], "keepdim": True})
    grad_case(f"max_all_ties_{s}", "max", torch.max, [tie], [0], "x.max()")
    grad_case(f"max_dim_{s}", "max_dim", lambda x: x.max(1).values, [rnd(3, 6, dtype=dt)], [0], "x.max(1).values",
              args={"dim": 1, "keepdim": False})
    grad_case(f"min_dim_keep_{s}", "min_dim", lambda x: x.min(0, keepdim=True).values, [rnd(3, 6, dtype=dt)], [0],
              "x.min(0, keepdim=True).values", args={"dim": 0, "keepdim": True})
    for corr in (0, 1):
        grad_case(f"var_c{corr}_{s}", "var_dims", lambda x, c=corr: x.var(1, correction=c), [x], [0],
                  f"x.var(1, correction={corr})", args={"dims": [1], "correction": corr, "keepdim": False})
        grad_case(f"std_c{corr}_{s}", "std_dims", lambda x, c=corr: x.std((0, 2), correction=c, keepdim=True), [x],
                  [0], f"x.std((0, 2), correction={corr}, keepdim=True)",
                  args={"dims": [0, 2], "correction": corr, "keepdim": True})
    grad_case(f"prod_dims_{s}", "prod_dims", lambda x: x.prod(1), [rnd(3, 4, dtype=dt)], [0], "x.prod(1)",
              args={"dims": [1], "keepdim": False})
    zx = rnd(3, 4, dtype=dt)
    zx[0, 1] = 0.0
    zx[2, 0] = 0.0
    zx[2, 3] = 0.0
    grad_case(f"prod_zeros_{s}", "prod_dims", lambda x: x.prod(1, keepdim=True), [zx], [0],
              "x.prod(1, keepdim=True) with zeros", args={"dims": [1], "keepdim": True})
    grad_case(f"prod_all_{s}", "prod", torch.prod, [rnd(2, 3, dtype=dt)], [0], "x.prod()")
    for nz in (1, 2):
        px = rnd(2, 3, dtype=dt)
        px.view(-1)[[1, 4][:nz]] = 0.0
        grad_case(f"prod_all_zeros{nz}_{s}", "prod", torch.prod, [px], [0], f"x.prod() with {nz} zero(s)")
    nx = rnd(3, 4, dtype=dt)
    nx[1, 2] = float("nan")
    grad_case(f"nansum_{s}", "nansum_dims", lambda x: x.nansum(1), [nx], [0], "x.nansum(1)",
              args={"dims": [1], "keepdim": False})
    grad_case(f"nanmean_{s}", "nanmean_dims", lambda x: x.nanmean(0), [nx], [0], "x.nanmean(0)",
              args={"dims": [0], "keepdim": False})
    grad_case(f"logsumexp_{s}", "logsumexp", lambda x: x.logsumexp(2), [x], [0], "x.logsumexp(2)",
              args={"dims": [2], "keepdim": False})
    for p in (1.0, 2.0, 3.0, float("inf")):
        grad_case(f"norm_p{p}_{s}", "norm", lambda x, p=p: torch.linalg.vector_norm(x, p, dim=1), [x], [0],
                  f"torch.linalg.vector_norm(x, {p}, dim=1)", args={"ord": str(p), "dims": [1], "keepdim": False})
    grad_case(f"softmax_{s}", "softmax", lambda x: x.softmax(1), [x], [0], "x.softmax(1)", args={"dim": 1})
    grad_case(f"log_softmax_{s}", "log_softmax", lambda x: x.log_softmax(-1), [x], [0], "x.log_softmax(-1)",
              args={"dim": -1})
    # ------------------------------------------------------------- views
    grad_case(f"reshape_t_{s}", "reshape", lambda x: x.reshape(12), [rnd(4, 3, dtype=dt)], [0], "x.t().reshape(12)",
              args={"shape": [12]}, views=[[["t"]]])
    grad_case(f"permute_{s}", "permute", lambda x: x.permute(2, 0, 1) * torch.arange(4.0, dtype=dt).view(1, 1, 4),
              [x], [0], "x.permute(2, 0, 1) * [0, 1, 2, 3]", args={"dims": [2, 0, 1]})
    grad_case(f"narrow_{s}", "narrow", lambda x: x.narrow(1, 1, 2), [x], [0], "x.narrow(1, 1, 2)",
              args={"dim": 1, "start": 1, "len": 2})
    grad_case(f"slice_step_{s}", "slice", lambda x: x[:, :, 1::2], [x], [0], "x[:, :, 1::2]",
              args={"dim": 2, "start": 1, "step": 2})
    grad_case(f"select_{s}", "select", lambda x: x.select(0, -1), [x], [0], "x.select(0, -1)",
              args={"dim": 0, "index": -1})
    grad_case(f"diagonal_{s}", "diagonal", lambda x: x.diagonal(1, 1, 2), [x], [0], "x.diagonal(1, 1, 2)",
              args={"offset": 1, "d1": 1, "d2": 2})
    grad_case(f"expand_{s}", "expand", lambda x: x.expand(2, 3, 4), [rnd(3, 1, dtype=dt)], [0], "x.expand(2, 3, 4)",
              args={"shape": [2, 3, 4]})
    grad_case(f"squeeze_unsqueeze_{s}", "squeeze_unsqueeze", lambda x: x.squeeze(1).unsqueeze(0),
              [rnd(3, 1, 2, dtype=dt)], [0], "x.squeeze(1).unsqueeze(0)")
    # unfold: overlapping windows (step < size), a tail no window covers, a transposed input, 0-d
    for tag, shape, dim, size, step, views in (("overlap", (3, 7), 1, 3, 2, None), ("tail", (8, 2), 0, 2, 3, None),
                                               ("disjoint_t", (5, 4), 1, 2, 2, [["t"]]), ("0d", (), 0, 1, 1, None)):
        grad_case(f"unfold_{tag}_{s}", "unfold", lambda x, d=dim, n=size, st=step: x.unfold(d, n, st),
                  [torch.randn(shape, dtype=dt)], [0], f"x.unfold({dim}, {size}, {step})" + (" on x.t()" if views else ""),
                  args={"dim": dim, "size": size, "step": step}, views=[views])
    # ------------------------------------------------------------- matmul family
    for sa, sb in (((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                   ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3))):
        tag = "x".join(map(str, sa)) + "_" + "x".join(map(str, sb))
        grad_case(f"matmul_{tag}_{s}", "matmul", torch.matmul, [rnd(*sa, dtype=dt), rnd(*sb, dtype=dt)], [0, 1],
                  f"torch.matmul(a{list(sa)}, b{list(sb)})")
    grad_case(f"mm_t_{s}", "mm", torch.mm, [rnd(4, 3, dtype=dt), rnd(4, 5, dtype=dt)], [0, 1], "torch.mm(a.t(), b)",
              views=[[["t"]], None])
    grad_case(f"linear_{s}", "linear", lambda x, w, b: x @ w.t() + b,
              [rnd(5, 3, dtype=dt), rnd(4, 3, dtype=dt), rnd(4, dtype=dt)], [0, 1, 2], "x @ w.t() + b")
    grad_case(f"addmm_{s}", "addmm", lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2.0),
              [rnd(4, dtype=dt), rnd(3, 5, dtype=dt), rnd(5, 4, dtype=dt)], [0, 1, 2],
              "torch.addmm(i, a, b, beta=0.5, alpha=2.0)")
    grad_case(f"baddbmm_{s}", "baddbmm", lambda i, a, b: torch.baddbmm(i, a, b, alpha=1.5),
              [rnd(2, 3, 4, dtype=dt), rnd(2, 3, 5, dtype=dt), rnd(2, 5, 4, dtype=dt)], [0, 1, 2],
              "torch.baddbmm(i, a, b, alpha=1.5)")
    for eq, shapes in (("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                       ("ii->i", [(4, 4)]), ("ii", [(3, 3)]), ("ij->", [(3, 4)]), ("i,j->ij", [(3,), (4,)]),
                       ("...ij,...jk", [(2, 3, 4), (4, 2)]), ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
                       ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)])):
        tag = eq.replace(",", "_").replace("->", "_to_").replace("...", "E")
        grad_case(f"einsum_{tag}_{s}", "einsum", lambda *xs, eq=eq: torch.einsum(eq, *xs),
                  [rnd(*sh, dtype=dt) for sh in shapes], list(range(len(shapes))), f"torch.einsum('{eq}', ...)",
                  args={"eq": eq})
    grad_case(f"bmm_{s}", "bmm", torch.bmm, [rnd(2, 3, 4, dtype=dt), rnd(2, 4, 5, dtype=dt)], [0, 1], "torch.bmm(a, b)")
    # ------------------------------------------------------------- joins and indexing
    grad_case(f"cat_{s}", "cat", lambda a, b: torch.cat([a, b], 1), [rnd(2, 3, dtype=dt), rnd(2, 2, dtype=dt)],
              [0, 1], "torch.cat([a, b], 1)", args={"dim": 1})
    grad_case(f"stack_{s}", "stack", lambda a, b: torch.stack([a, b], -1), [rnd(2, 3, dtype=dt), rnd(2, 3, dtype=dt)],
              [0, 1], "torch.stack([a, b], -1)", args={"dim": -1})
    grad_case(f"index_select_{s}", "index_select", lambda x, i: x.index_select(1, i),
              [rnd(3, 4, dtype=dt), torch.tensor([0, 2, 2, 3])], [0], "x.index_select(1, [0, 2, 2, 3])",
              args={"dim": 1})
    grad_case(f"gather_{s}", "gather", lambda x, i: x.gather(0, i),
              [rnd(3, 4, dtype=dt), torch.tensor([[0, 1, 2, 0], [2, 2, 2, 2]])], [0], "x.gather(0, idx)",
              args={"dim": 0})
    grad_case(f"to_dtype_{s}", "to_dtype", lambda x: x.to(F64 if dt == F32 else F32) * 2, [rnd(3, dtype=dt)], [0],
              "x.to(other float dtype) * 2")

rf.save()
