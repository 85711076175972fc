"""Reference data for the reduction family: sum, mean, prod, nansum, nanmean, max/min,
amax/amin, argmax/argmin, var/std, vector norms, logsumexp, all/any, count_nonzero,
sum_to_size, cumsum/cumprod/cummax/cummin, softmax/log_softmax.

Run: python3 reference/gen_reduce.py  ->  reference/data/reduce.safetensors
"""
import math

import torch

from refgen import RefFile

torch.manual_seed(0)
rf = RefFile("reduce")

F32 = torch.float32
INF = float("inf")
NAN = float("nan")


def rnd(*shape, dtype=F32):
    return torch.randn(*shape).to(dtype)


def ints(*shape, lo=-5, hi=6, dtype=torch.int64):
    return torch.randint(lo, hi, shape).to(dtype)


def dim_text(dim):
    return "None" if dim is None else repr(tuple(dim)) if isinstance(dim, list) else repr(dim)


x345 = rnd(3, 4, 5)
x_nan = rnd(3, 6)
x_nan[0, 2] = NAN
x_nan[2, 0] = NAN
x_nan[2, 4] = NAN
empty03 = torch.zeros(0, 3)
empty203 = torch.zeros(2, 0, 3)
scalar = torch.tensor(1.75)
ALL_DT = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
          torch.bool]
FLOAT_DT = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def typed(dt, *shape):
    if dt == torch.bool:
        return torch.rand(*shape) > 0.5
    if dt == torch.uint8:
        return torch.randint(0, 6, shape).to(dt)
    if dt in (torch.int32, torch.int64):
        return ints(*shape, dtype=dt)
    return rnd(*shape, dtype=dt)


# ---------------------------------------------------------------------------- sum-like

def sum_like(op, fn, name, x, dim, keepdim=False, views=None, **kw):
    """fn(x, dim, keepdim) for dim lists, fn(x) for dim None."""
    if dim is None:
        call = f"torch.{op}(x)"
        f = lambda a: fn(a)
    else:
        call = f"torch.{op}(x, dim={dim_text(dim)}, keepdim={keepdim})"
        f = lambda a: fn(a, dim=dim, keepdim=keepdim)
    rf.case(name, op, [x], f, call=call, args={"dim": dim, "keepdim": keepdim}, views=views, **kw)


for op, fn in [("sum", torch.sum), ("mean", torch.mean), ("nansum", torch.nansum), ("nanmean", torch.nanmean)]:
    sum_like(op, fn, f"{op}_all", x345, None)
    sum_like(op, fn, f"{op}_d1", x345, [1])
    sum_like(op, fn, f"{op}_nan_d1", x_nan, [1])
    sum_like(op, fn, f"{op}_nan_all", x_nan, None)
    sum_like(op, fn, f"{op}_empty_d0", empty03, [0])
    sum_like(op, fn, f"{op}_t_d0", x345, [0], views=[[["transpose", 0, 2]]])
    sum_like(op, fn, f"{op}_cols_i70", rnd(2, 3, 66), [1], True)
    if op.startswith("nan"):
        sum_like(op, fn, f"{op}_float16_d1", rnd(4, 33, dtype=torch.float16), [1])
        sum_like(op, fn, f"{op}_d02_keep", x345, [0, 2], True)
        if op == "nansum":
            sum_like(op, fn, f"{op}_int64_d1", ints(3, 7), [1], True)
        else:
            rf.error_case(f"{op}_int64_err", op, [ints(3, 7)], lambda a, fn=fn: fn(a, dim=[1]),
                          call=f"torch.{op}(x, dim=(1,))", args={"dim": [1], "keepdim": False})
        continue
    sum_like(op, fn, f"{op}_dneg1_keep", x345, [-1], True)
    if op == "mean":
        sum_like(op, fn, f"{op}_d02_keep", x345, [0, 2], True)
        sum_like(op, fn, f"{op}_scalar", scalar, None)
        sum_like(op, fn, f"{op}_d0_of_2d", rnd(37, 11), [0])
        for dt in [torch.float64, torch.float16, torch.bfloat16]:
            tn = str(dt).split(".")[1]
            sum_like(op, fn, f"{op}_{tn}_d1", rnd(3, 33, dtype=dt), [1])
        sum_like(op, fn, f"{op}_float16_d0", rnd(33, 3, dtype=torch.float16), [0])
        rf.error_case(f"{op}_int64_err", op, [ints(3, 7)], lambda a, fn=fn: fn(a, dim=[1]),
                      call=f"torch.{op}(x, dim=(1,))", args={"dim": [1], "keepdim": False})
        rf.error_case(f"{op}_bool_err", op, [typed(torch.bool, 3, 7)], lambda a, fn=fn: fn(a),
                      call=f"torch.{op}(x)", args={"dim": None, "keepdim": False})
        continue
    sum_like(op, fn, f"{op}_d02", x345, [0, 2])
    sum_like(op, fn, f"{op}_d02_keep", x345, [0, 2], True)
    sum_like(op, fn, f"{op}_dempty", x345, [])
    sum_like(op, fn, f"{op}_d012_keep", x345, [2, 0, 1], True)
    sum_like(op, fn, f"{op}_perm_d12", x345, [1, 2], views=[[["permute", [2, 0, 1]]]])
    sum_like(op, fn, f"{op}_slice_d1", rnd(4, 9), [1], views=[[["slice", 1, 1, 8, 2]]])
    sum_like(op, fn, f"{op}_expand_d0", rnd(1, 5), [0], views=[[["expand", [4, 5]]]])
    sum_like(op, fn, f"{op}_empty_d1", empty03, [1], True)
    sum_like(op, fn, f"{op}_empty_all", empty203, None)
    sum_like(op, fn, f"{op}_scalar", scalar, None)
    sum_like(op, fn, f"{op}_scalar_d0", scalar, [0])
    sum_like(op, fn, f"{op}_scalar_dneg1_keep", scalar, [-1], True)
    # Long rows (pairwise split), columns with k > 64 (blocked split), more than 64 columns.
    sum_like(op, fn, f"{op}_long_rows", rnd(2, 600), [1])
    sum_like(op, fn, f"{op}_cols_k130", rnd(2, 130, 2), [1])
    sum_like(op, fn, f"{op}_d0_of_2d", rnd(37, 11), [0])
    for dt in [torch.float64, torch.float16, torch.bfloat16]:
        tn = str(dt).split(".")[1]
        sum_like(op, fn, f"{op}_{tn}_d1", rnd(3, 33, dtype=dt), [1])
        if dt == torch.float16:
            sum_like(op, fn, f"{op}_{tn}_d0", rnd(33, 3, dtype=dt), [0])
    for dt in [torch.int64, torch.int32, torch.uint8, torch.bool]:
        tn = str(dt).split(".")[1]
        x = typed(dt, 3, 7)
        if op in ("sum", "nansum"):
            sum_like(op, fn, f"{op}_{tn}_all", x, None)
            sum_like(op, fn, f"{op}_{tn}_d1", x, [1], True)
        else:
            rf.error_case(f"{op}_{tn}_err", op, [x], lambda a, fn=fn: fn(a, dim=[1]),
                          call=f"torch.{op}(x, dim=(1,))", args={"dim": [1], "keepdim": False})

rf.error_case("sum_dup_dims", "sum", [x345], lambda a: a.sum(dim=(0, -3)), call="x.sum(dim=(0, -3))",
              args={"dim": [0, -3], "keepdim": False})
rf.error_case("sum_dim_range", "sum", [x345], lambda a: a.sum(dim=3), call="x.sum(dim=3)",
              args={"dim": [3], "keepdim": False})

# prod: values near 1 so products stay moderate.
xp = (torch.rand(3, 4, 5) + 0.5)
sum_like("prod", torch.prod, "prod_all", xp, None)
for d in [0, -1]:
    rf.case(f"prod_d{d}", "prod", [xp], lambda a, d=d: torch.prod(a, d), call=f"torch.prod(x, {d})",
            args={"dim": [d], "keepdim": False})
rf.case("prod_d1_keep", "prod", [xp], lambda a: torch.prod(a, 1, keepdim=True), call="torch.prod(x, 1, keepdim=True)",
        args={"dim": [1], "keepdim": True})
rf.case("prod_t_d0", "prod", [xp[0]], lambda a: torch.prod(a, 0), call="torch.prod(x.t(), 0)",
        args={"dim": [0], "keepdim": False}, views=[[["t"]]])
rf.case("prod_empty", "prod", [empty03], lambda a: torch.prod(a, 0), call="torch.prod(x, 0)",
        args={"dim": [0], "keepdim": False})
rf.case("prod_nan", "prod", [x_nan], lambda a: torch.prod(a, 1), call="torch.prod(x, 1)",
        args={"dim": [1], "keepdim": False})
for dt in ALL_DT[1:]:
    tn = str(dt).split(".")[1]
    x = typed(dt, 3, 5) if dt not in FLOAT_DT else (torch.rand(3, 5) + 0.5).to(dt)
    if dt in (torch.int32, torch.bool):
        sum_like("prod", torch.prod, f"prod_{tn}_all", x, None)
    rf.case(f"prod_{tn}_d1", "prod", [x], lambda a: torch.prod(a, 1), call="torch.prod(x, 1)",
            args={"dim": [1], "keepdim": False})

# sum_to_size
g = rnd(2, 3, 4)
for size in [[3, 1], [1, 4], [4], [2, 3, 4], [2, 1, 4], [1, 1, 1], []]:
    rf.case(f"sum_to_size_{'x'.join(map(str, size)) or 'scalar'}", "sum_to_size", [g],
            lambda a, s=size: a.sum_to_size(s), call=f"x.sum_to_size({size})", args={"size": size})
rf.case("sum_to_size_int", "sum_to_size", [ints(2, 3, dtype=torch.int32)], lambda a: a.sum_to_size([1, 3]),
        call="x.sum_to_size([1, 3])", args={"size": [1, 3]})
rf.case("sum_to_size_expand", "sum_to_size", [rnd(3, 1)], lambda a: a.sum_to_size([3, 1]),
        call="x.expand(3, 5).sum_to_size([3, 1])", args={"size": [3, 1]}, views=[[["expand", [3, 5]]]])
rf.error_case("sum_to_size_bad", "sum_to_size", [g], lambda a: a.sum_to_size([3, 2]),
              call="x.sum_to_size([3, 2])", args={"size": [3, 2]})
rf.error_case("sum_to_size_longer", "sum_to_size", [g], lambda a: a.sum_to_size([1, 2, 3, 4]),
              call="x.sum_to_size([1, 2, 3, 4])", args={"size": [1, 2, 3, 4]})

# ---------------------------------------------------------------------------- max / min family

ties = torch.tensor([[3, 1, 3, 2], [0, 0, -1, 0], [5, 5, 5, 5]])
ties_f = ties.to(F32)
ties_f[1, 1] = NAN
ties_f[1, 3] = NAN
for op, fn in [("max", torch.max), ("min", torch.min)]:
    rf.case(f"{op}_all", op, [x345], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)")
    rf.case(f"{op}_all_nan", op, [x_nan], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)")
    rf.case(f"{op}_scalar", op, [scalar], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)")
    for dt in [torch.int64, torch.float16, torch.bool]:
        tn = str(dt).split(".")[1]
        rf.case(f"{op}_all_{tn}", op, [typed(dt, 4, 5)], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)")
    rf.error_case(f"{op}_all_empty", op, [empty03], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)")
    od = f"{op}_dim"
    for d, k in [(0, False), (-1, True), (1, False)]:
        rf.case(f"{od}_d{d}_{k}", od, [x345], lambda a, fn=fn, d=d, k=k: fn(a, d, keepdim=k),
                call=f"torch.{op}(x, {d}, keepdim={k})", args={"dim": d, "keepdim": k})
    rf.case(f"{od}_ties", od, [ties], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "keepdim": False})
    rf.case(f"{od}_ties_d0", od, [ties], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
            args={"dim": 0, "keepdim": False})
    rf.case(f"{od}_nan", od, [ties_f], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "keepdim": False})
    rf.case(f"{od}_nan_d0", od, [ties_f], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
            args={"dim": 0, "keepdim": False})
    rf.case(f"{od}_t", od, [x345[0]], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x.t(), 1)",
            args={"dim": 1, "keepdim": False}, views=[[["t"]]])
    rf.case(f"{od}_scalar", od, [scalar], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
            args={"dim": 0, "keepdim": False})
    rf.case(f"{od}_empty_other", od, [empty03], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "keepdim": False})
    rf.error_case(f"{od}_empty_dim", od, [empty03], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
                  args={"dim": 0, "keepdim": False})
    for dt in [torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.uint8, torch.bool]:
        tn = str(dt).split(".")[1]
        rf.case(f"{od}_{tn}", od, [typed(dt, 4, 6)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
                args={"dim": 1, "keepdim": False})

for op, fn in [("amax", torch.amax), ("amin", torch.amin)]:
    for dim, k in [([1], False), ([0, 2], True), ([-1, 0], False)]:
        rf.case(f"{op}_{'_'.join(map(str, dim)) or 'all'}_{k}", op, [x345],
                lambda a, fn=fn, dim=dim, k=k: fn(a, dim, keepdim=k),
                call=f"torch.{op}(x, {dim_text(dim)}, keepdim={k})", args={"dim": dim, "keepdim": k})
    rf.case(f"{op}_nan", op, [x_nan], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": [1], "keepdim": False})
    rf.case(f"{op}_nan_d0", op, [x_nan], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
            args={"dim": [0], "keepdim": False})
    rf.case(f"{op}_cols", op, [rnd(2, 130, 2)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": [1], "keepdim": False})
    rf.case(f"{op}_perm", op, [x345], lambda a, fn=fn: fn(a, (0, 1)), call=f"torch.{op}(x.permute(2, 0, 1), (0, 1))",
            args={"dim": [0, 1], "keepdim": False}, views=[[["permute", [2, 0, 1]]]])
    rf.case(f"{op}_empty_other", op, [empty03], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": [1], "keepdim": False})
    rf.error_case(f"{op}_empty_dim", op, [empty03], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
                  args={"dim": [0], "keepdim": False})
    rf.error_case(f"{op}_empty_all", op, [empty03], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
                  args={"dim": [], "keepdim": False})
    for dt in [torch.float16, torch.int64, torch.bool]:
        tn = str(dt).split(".")[1]
        rf.case(f"{op}_{tn}", op, [typed(dt, 4, 6)], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
                args={"dim": [0], "keepdim": False})

for op, fn in [("argmax", torch.argmax), ("argmin", torch.argmin)]:
    for dim, k in [(None, False), (None, True), (1, True), (-1, False)]:
        rf.case(f"{op}_{dim}_{k}", op, [x345], lambda a, fn=fn, dim=dim, k=k: fn(a, dim, keepdim=k),
                call=f"torch.{op}(x, {dim}, keepdim={k})", args={"dim": dim, "keepdim": k})
    rf.case(f"{op}_ties", op, [ties], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "keepdim": False})
    rf.case(f"{op}_ties_flat", op, [ties], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
            args={"dim": None, "keepdim": False})
    rf.case(f"{op}_nan", op, [ties_f], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "keepdim": False})
    rf.case(f"{op}_nan_flat", op, [ties_f], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
            args={"dim": None, "keepdim": False})
    rf.case(f"{op}_t_flat", op, [x345[1]], lambda a, fn=fn: fn(a), call=f"torch.{op}(x.t())",
            args={"dim": None, "keepdim": False}, views=[[["t"]]])
    rf.case(f"{op}_scalar", op, [scalar], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
            args={"dim": None, "keepdim": False})
    rf.error_case(f"{op}_empty", op, [empty03], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
                  args={"dim": None, "keepdim": False})
    rf.error_case(f"{op}_empty_dim", op, [empty03], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
                  args={"dim": 0, "keepdim": False})
    rf.case(f"{op}_empty_other", op, [empty03], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "keepdim": False})
    rf.error_case(f"{op}_bool", op, [typed(torch.bool, 5)], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
                  args={"dim": None, "keepdim": False})
    for dt in [torch.float16, torch.bfloat16, torch.uint8]:
        tn = str(dt).split(".")[1]
        rf.case(f"{op}_{tn}", op, [typed(dt, 4, 6)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
                args={"dim": 1, "keepdim": False})

# ---------------------------------------------------------------------------- var / std

for op, fn in [("var", torch.var), ("std", torch.std), ("var_mean", torch.var_mean), ("std_mean", torch.std_mean)]:
    full = op == "var"
    combos = [(None, 1, False), ([1], 1, False), ([0, 2], 0, True), ([-1], 2, False), ([], 1, False),
              (None, 0.5, True)] if full else [(None, 1, False), ([0, 2], 0, True)]
    for dim, corr, k in combos:
        rf.case(f"{op}_{dim_text(dim)}_{corr}_{k}", op, [x345],
                lambda a, fn=fn, dim=dim, corr=corr, k=k: fn(a, dim, correction=corr, keepdim=k),
                call=f"torch.{op}(x, {dim_text(dim)}, correction={corr}, keepdim={k})",
                args={"dim": dim, "correction": corr, "keepdim": k})
    rf.case(f"{op}_t", op, [x345[0]], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x.t(), 0)",
            args={"dim": [0], "correction": 1, "keepdim": False}, views=[[["t"]]])
    if not full:
        rf.case(f"{op}_float16", op, [rnd(3, 40, dtype=torch.float16)], lambda a, fn=fn: fn(a, 1),
                call=f"torch.{op}(x, 1)", args={"dim": [1], "correction": 1, "keepdim": False})
        continue
    rf.case(f"{op}_cols", op, [rnd(2, 130, 2) + 10], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x + 10, 1)",
            args={"dim": [1], "correction": 1, "keepdim": False})
    rf.case(f"{op}_one", op, [rnd(3, 1)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": [1], "correction": 1, "keepdim": False})
    rf.case(f"{op}_corr_big", op, [rnd(3, 2)], lambda a, fn=fn: fn(a, 1, correction=3),
            call=f"torch.{op}(x, 1, correction=3)", args={"dim": [1], "correction": 3, "keepdim": False})
    rf.case(f"{op}_empty", op, [empty03], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
            args={"dim": [0], "correction": 1, "keepdim": False})
    rf.case(f"{op}_nan", op, [x_nan], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": [1], "correction": 1, "keepdim": False})
    rf.case(f"{op}_scalar", op, [scalar], lambda a, fn=fn: fn(a, correction=0),
            call=f"torch.{op}(x, correction=0)", args={"dim": None, "correction": 0, "keepdim": False})
    for dt in [torch.float64, torch.float16, torch.bfloat16]:
        tn = str(dt).split(".")[1]
        rf.case(f"{op}_{tn}", op, [rnd(4, 40, dtype=dt)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
                args={"dim": [1], "correction": 1, "keepdim": False})
    rf.error_case(f"{op}_int", op, [ints(3, 4)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
                  args={"dim": [1], "correction": 1, "keepdim": False})

# ---------------------------------------------------------------------------- norms

xn = rnd(3, 4, 5)
xn[0, 0, 0] = 0.0
xn[1, 2, 3] = 0.0
for ord_ in [2, 1, 0, 3, 0.5, -1.5, INF, -INF]:
    for dim, k in [(None, False), ([0, 2], True)]:
        rf.case(f"norm_{ord_}_{dim_text(dim)}_{k}", "norm", [xn],
                lambda a, o=ord_, dim=dim, k=k: torch.linalg.vector_norm(a, o, dim, keepdim=k),
                call=f"torch.linalg.vector_norm(x, {ord_}, {dim_text(dim)}, keepdim={k})",
                args={"ord": str(float(ord_)), "dim": dim, "keepdim": k})
    if ord_ in (2, 3, INF):
        rf.case(f"norm_{ord_}_cols", "norm", [rnd(2, 66, 2)], lambda a, o=ord_: torch.linalg.vector_norm(a, o, 1),
                call=f"torch.linalg.vector_norm(x, {ord_}, 1)", args={"ord": str(float(ord_)), "dim": [1],
                                                                       "keepdim": False})
    if ord_ in (2, 0, INF, -INF, 0.5):
        rf.case(f"norm_{ord_}_nan", "norm", [x_nan], lambda a, o=ord_: torch.linalg.vector_norm(a, o, 1),
            call=f"torch.linalg.vector_norm(x, {ord_}, 1)", args={"ord": str(float(ord_)), "dim": [1], "keepdim": False})
    if ord_ < 0 or math.isinf(ord_):
        rf.error_case(f"norm_{ord_}_empty", "norm", [empty03], lambda a, o=ord_: torch.linalg.vector_norm(a, o, 0),
                      call=f"torch.linalg.vector_norm(x, {ord_}, 0)",
                      args={"ord": str(float(ord_)), "dim": [0], "keepdim": False})
        if ord_ == INF:
            rf.error_case(f"norm_{ord_}_empty_all", "norm", [empty03], lambda a, o=ord_: torch.linalg.vector_norm(a, o),
                          call=f"torch.linalg.vector_norm(x, {ord_})", args={"ord": str(float(ord_)), "dim": None,
                                                                              "keepdim": False})
        rf.case(f"norm_{ord_}_empty_other", "norm", [empty03], lambda a, o=ord_: torch.linalg.vector_norm(a, o, 1),
                call=f"torch.linalg.vector_norm(x, {ord_}, 1)",
                args={"ord": str(float(ord_)), "dim": [1], "keepdim": False})
    else:
        rf.case(f"norm_{ord_}_empty", "norm", [empty03], lambda a, o=ord_: torch.linalg.vector_norm(a, o, 0),
                call=f"torch.linalg.vector_norm(x, {ord_}, 0)", args={"ord": str(float(ord_)), "dim": [0],
                                                                       "keepdim": False})
for dt in [torch.float64, torch.float16, torch.bfloat16]:
    tn = str(dt).split(".")[1]
    rf.case(f"norm_{tn}", "norm", [rnd(4, 40, dtype=dt)], lambda a: torch.linalg.vector_norm(a, 2, 1),
            call="torch.linalg.vector_norm(x, 2, 1)", args={"ord": "2.0", "dim": [1], "keepdim": False})
rf.case("norm_t", "norm", [xn[0]], lambda a: torch.linalg.vector_norm(a, 2, 0),
        call="torch.linalg.vector_norm(x.t(), 2, 0)", args={"ord": "2.0", "dim": [0], "keepdim": False},
        views=[[["t"]]])
rf.error_case("norm_int", "norm", [ints(3, 4)], lambda a: torch.linalg.vector_norm(a),
              call="torch.linalg.vector_norm(x)", args={"ord": "2.0", "dim": None, "keepdim": False})
for dim, k in [(None, False), ([1], True), ([0, 2], False)]:
    rf.case(f"norm_fro_{dim_text(dim)}_{k}", "norm_fro", [xn],
            lambda a, dim=dim, k=k: torch.norm(a, p="fro", dim=dim, keepdim=k),
            call=f"torch.norm(x, p='fro', dim={dim_text(dim)}, keepdim={k})", args={"dim": dim, "keepdim": k})

# ---------------------------------------------------------------------------- logsumexp

xl = rnd(3, 4, 5) * 10
xl[0, 1, :] = -INF
xl[1, 2, 3] = INF
xl[2, 0, 1] = NAN
for dim, k in [([2], False), ([1], True), ([0, 2], False), ([-1, 0, 1], True)]:
    rf.case(f"logsumexp_{dim_text(dim)}_{k}", "logsumexp", [xl],
            lambda a, dim=dim, k=k: torch.logsumexp(a, dim, keepdim=k),
            call=f"torch.logsumexp(x, {dim_text(dim)}, keepdim={k})", args={"dim": dim, "keepdim": k})
rf.case("logsumexp_big", "logsumexp", [rnd(4, 50) * 100], lambda a: torch.logsumexp(a, 1),
        call="torch.logsumexp(x * 100, 1)", args={"dim": [1], "keepdim": False})
rf.case("logsumexp_t", "logsumexp", [x345[0]], lambda a: torch.logsumexp(a, 0),
        call="torch.logsumexp(x.t(), 0)", args={"dim": [0], "keepdim": False}, views=[[["t"]]])
rf.case("logsumexp_empty", "logsumexp", [empty03], lambda a: torch.logsumexp(a, 0),
        call="torch.logsumexp(x, 0)", args={"dim": [0], "keepdim": False})
rf.case("logsumexp_scalar", "logsumexp", [scalar], lambda a: torch.logsumexp(a, 0),
        call="torch.logsumexp(x, 0)", args={"dim": [0], "keepdim": False})
rf.case("logsumexp_int", "logsumexp", [ints(3, 4)], lambda a: torch.logsumexp(a, 1),
        call="torch.logsumexp(x, 1)", args={"dim": [1], "keepdim": False})
rf.case("logsumexp_bool", "logsumexp", [typed(torch.bool, 3, 4)], lambda a: torch.logsumexp(a, 1),
        call="torch.logsumexp(x, 1)", args={"dim": [1], "keepdim": False})
for dt in [torch.float64, torch.float16, torch.bfloat16]:
    tn = str(dt).split(".")[1]
    rf.case(f"logsumexp_{tn}", "logsumexp", [rnd(4, 40, dtype=dt)], lambda a: torch.logsumexp(a, 1),
            call="torch.logsumexp(x, 1)", args={"dim": [1], "keepdim": False}, atol=1e-2 if dt != torch.float64 else None)

# ---------------------------------------------------------------------------- all / any / count_nonzero

xb = torch.rand(3, 4, 5) > 0.2
xf0 = rnd(3, 5)
xf0[0, :] = 0.0
xf0[1, 1] = 0.0
xf0[2, 2] = NAN
for op, fn in [("all", torch.all), ("any", torch.any)]:
    rf.case(f"{op}_all", op, [xb], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)", args={"dim": None, "keepdim": False})
    for dim, k in [([1], False), ([0, 2], True), ([-1], False), ([], False)]:
        rf.case(f"{op}_{dim_text(dim)}_{k}", op, [xb], lambda a, fn=fn, dim=dim, k=k: fn(a, dim=dim, keepdim=k),
                call=f"torch.{op}(x, dim={dim_text(dim)}, keepdim={k})", args={"dim": dim, "keepdim": k})
    rf.case(f"{op}_float", op, [xf0], lambda a, fn=fn: fn(a, dim=1), call=f"torch.{op}(x, dim=1)",
            args={"dim": [1], "keepdim": False})
    rf.case(f"{op}_float_all", op, [xf0], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
            args={"dim": None, "keepdim": False})
    rf.case(f"{op}_empty", op, [empty03], lambda a, fn=fn: fn(a, dim=0), call=f"torch.{op}(x, dim=0)",
            args={"dim": [0], "keepdim": False})
    rf.case(f"{op}_empty_all", op, [empty03], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
            args={"dim": None, "keepdim": False})
    rf.case(f"{op}_t", op, [xb[0]], lambda a, fn=fn: fn(a, dim=0), call=f"torch.{op}(x.t(), dim=0)",
            args={"dim": [0], "keepdim": False}, views=[[["t"]]])
    for dt in ALL_DT[:-1]:
        tn = str(dt).split(".")[1]
        x = typed(dt, 4, 6)
        x[0, :] = 0
        x[1, :] = 1
        rf.case(f"{op}_{tn}", op, [x], lambda a, fn=fn: fn(a, dim=1), call=f"torch.{op}(x, dim=1)",
                args={"dim": [1], "keepdim": False})
        if dt in (torch.uint8, torch.float16):
            rf.case(f"{op}_{tn}_all", op, [x], lambda a, fn=fn: fn(a), call=f"torch.{op}(x)",
                    args={"dim": None, "keepdim": False})

for dim in [None, [1], [0, 2], [-1], []]:
    rf.case(f"count_nonzero_{dim_text(dim)}", "count_nonzero", [xn], lambda a, dim=dim: torch.count_nonzero(a, dim),
            call=f"torch.count_nonzero(x, {dim_text(dim)})", args={"dim": dim})
for dt in ALL_DT[1:]:
    tn = str(dt).split(".")[1]
    rf.case(f"count_nonzero_{tn}", "count_nonzero", [typed(dt, 4, 6)], lambda a: torch.count_nonzero(a, 0),
            call="torch.count_nonzero(x, 0)", args={"dim": [0]})
rf.case("count_nonzero_nan", "count_nonzero", [xf0], lambda a: torch.count_nonzero(a, 1),
        call="torch.count_nonzero(x, 1)", args={"dim": [1]})
rf.case("count_nonzero_empty", "count_nonzero", [empty03], lambda a: torch.count_nonzero(a, 0),
        call="torch.count_nonzero(x, 0)", args={"dim": [0]})

# ---------------------------------------------------------------------------- cumulative

xc = rnd(3, 4, 5)
xcp = torch.rand(3, 4, 5) + 0.5
xcn = torch.tensor([[1.0, NAN, 3.0, NAN, 0.0, 5.0], [2.0, 2.0, 1.0, 3.0, 3.0, -1.0]])
for op, fn, x in [("cumsum", torch.cumsum, xc), ("cumprod", torch.cumprod, xcp)]:
    for d in [0, 1, 2, -1]:
        rf.case(f"{op}_d{d}", op, [x], lambda a, fn=fn, d=d: fn(a, d), call=f"torch.{op}(x, {d})", args={"dim": d})
    rf.case(f"{op}_t", op, [x[0]], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x.t(), 1)", args={"dim": 1},
            views=[[["t"]]])
    rf.case(f"{op}_cols70", op, [torch.rand(2, 3, 66) + 0.5], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1})
    rf.case(f"{op}_wide", op, [rnd(3, 20) * 0.1 + 1], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
            args={"dim": 0})
    rf.case(f"{op}_nan", op, [xcn], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)", args={"dim": 1})
    rf.case(f"{op}_scalar", op, [scalar], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)", args={"dim": 0})
    rf.case(f"{op}_empty", op, [empty203], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)", args={"dim": 1})
    rf.case(f"{op}_empty_d2", op, [empty203], lambda a, fn=fn: fn(a, 2), call=f"torch.{op}(x, 2)", args={"dim": 2})
    for dt in [torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.uint8, torch.bool]:
        if op == "cumprod" and dt in (torch.bfloat16, torch.int32):
            continue
        tn = str(dt).split(".")[1]
        xd = typed(dt, 3, 9) if dt not in FLOAT_DT else x[0].to(dt)
        rf.case(f"{op}_{tn}", op, [xd], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)", args={"dim": 1})
    rf.error_case(f"{op}_dim_range", op, [x], lambda a, fn=fn: fn(a, 3), call=f"torch.{op}(x, 3)", args={"dim": 3})

for op, fn in [("cummax", torch.cummax), ("cummin", torch.cummin)]:
    for d in [0, 1, -1]:
        rf.case(f"{op}_d{d}", op, [xc], lambda a, fn=fn, d=d: fn(a, d), call=f"torch.{op}(x, {d})", args={"dim": d})
    rf.case(f"{op}_nan", op, [xcn], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)", args={"dim": 1})
    rf.case(f"{op}_nan_d0", op, [xcn], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)", args={"dim": 0})
    rf.case(f"{op}_ties", op, [ties], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)", args={"dim": 1})
    rf.case(f"{op}_ties_d0", op, [ties.t().contiguous()], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
            args={"dim": 0})
    rf.case(f"{op}_t", op, [xc[0]], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x.t(), 1)", args={"dim": 1},
            views=[[["t"]]])
    rf.case(f"{op}_scalar", op, [scalar], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)", args={"dim": 0})
    rf.case(f"{op}_empty", op, [empty203], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)", args={"dim": 1})
    for dt in [torch.float16, torch.int64, torch.uint8, torch.bool]:
        tn = str(dt).split(".")[1]
        rf.case(f"{op}_{tn}", op, [typed(dt, 3, 9)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
                args={"dim": 1})

# ---------------------------------------------------------------------------- softmax

xs = rnd(3, 4, 21) * 3
xs[0, 1, :] = -INF
xs[1, 2, 5] = NAN
xs[2, 3, 7] = INF
xs[2, 0, 3] = -INF
for op, fn in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
    for d in [-1, 1, 0, 2]:
        rf.case(f"{op}_d{d}", op, [xs], lambda a, fn=fn, d=d: fn(a, d), call=f"torch.{op}(x, {d})",
                args={"dim": d, "dtype": None})
    rf.case(f"{op}_rows100", op, [rnd(3, 40) * 5], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "dtype": None})
    rf.case(f"{op}_rows1", op, [rnd(5, 1)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "dtype": None})
    rf.case(f"{op}_big", op, [rnd(4, 33) * 1000], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x * 1000, 1)",
            args={"dim": 1, "dtype": None})
    rf.case(f"{op}_cols70", op, [rnd(2, 3, 66)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "dtype": None})
    rf.case(f"{op}_t", op, [xs[0, :, :20]], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x.t(), 1)",
            args={"dim": 1, "dtype": None}, views=[[["t"]]])
    rf.case(f"{op}_slice", op, [rnd(4, 40)], lambda a, fn=fn: fn(a, -1), call=f"torch.{op}(x[:, ::3], -1)",
            args={"dim": -1, "dtype": None}, views=[[["slice", 1, 0, 40, 3]]])
    rf.case(f"{op}_scalar", op, [scalar], lambda a, fn=fn: fn(a, 0), call=f"torch.{op}(x, 0)",
            args={"dim": 0, "dtype": None})
    rf.case(f"{op}_empty", op, [torch.zeros(2, 0)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
            args={"dim": 1, "dtype": None})
    for dt in [torch.float64, torch.float16, torch.bfloat16]:
        tn = str(dt).split(".")[1]
        rf.case(f"{op}_{tn}", op, [xs[1:].to(dt)], lambda a, fn=fn: fn(a, -1), call=f"torch.{op}(x, -1)",
                args={"dim": -1, "dtype": None})
        if dt == torch.float16:
            rf.case(f"{op}_{tn}_d1", op, [xs.to(dt)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
                    args={"dim": 1, "dtype": None})
    rf.case(f"{op}_int_dtype", op, [ints(3, 6)], lambda a, fn=fn: fn(a, 1, dtype=torch.float32),
            call=f"torch.{op}(x, 1, dtype=torch.float32)", args={"dim": 1, "dtype": "float32"})
    rf.case(f"{op}_f32_to_f64", op, [xs[1]], lambda a, fn=fn: fn(a, 1, dtype=torch.float64),
            call=f"torch.{op}(x, 1, dtype=torch.float64)", args={"dim": 1, "dtype": "float64"})
    rf.error_case(f"{op}_int", op, [ints(3, 6)], lambda a, fn=fn: fn(a, 1), call=f"torch.{op}(x, 1)",
                  args={"dim": 1, "dtype": None})
    rf.error_case(f"{op}_dim_range", op, [xs], lambda a, fn=fn: fn(a, 3), call=f"torch.{op}(x, 3)",
                  args={"dim": 3, "dtype": None})

rf.save()
