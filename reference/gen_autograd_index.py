"""Reference gradients for the sorting, scanning, rearranging and indexing ops (family
`autograd_index`): same layout as gen_autograd.py (inputs = [x0, x1, ..., g], args.diff lists
the inputs that require grad, outputs = [out, grad of each diff input]), f32 and f64, some
inputs non-contiguous (views), ties where the op picks among equal values, repeated indices
where the op accumulates.

Run: python3 reference/gen_autograd_index.py  ->  reference/data/autograd_index.safetensors
"""
import torch

from refgen import RefFile

torch.manual_seed(0)
rf = RefFile("autograd_index")
F32, F64 = torch.float32, torch.float64
L = torch.long


def rnd(*shape, dtype=F64):
    return torch.randn(*shape, dtype=dtype)


def grad_case(name, op, fn, inputs, diff, call, args=None, views=None):
    rf.grad_case(name, op, fn, inputs, diff, call, args=args, views=views)


def weighted_cat(parts, dim):
    return torch.cat([p * (i + 1) for i, p in enumerate(parts)], dim)


for dt in (F32, F64):
    s = "f32" if dt == F32 else "f64"
    tie = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, 4.0, 5.0, 4.0]], dtype=dt)
    # ------------------------------------------------------------- sort family
    grad_case(f"sort_{s}", "sort", lambda x: torch.sort(x, stable=True, dim=1).values, [rnd(3, 5, dtype=dt)], [0],
              "torch.sort(x, stable=True, dim=1).values", args={"dim": 1, "descending": False})
    grad_case(f"sort_desc_t_{s}", "sort", lambda x: torch.sort(x, stable=True, dim=0, descending=True).values,
              [rnd(5, 3, dtype=dt)], [0], "torch.sort(x.t(), 0, descending=True, stable=True).values",
              args={"dim": 0, "descending": True}, views=[[["t"]]])
    grad_case(f"sort_ties_{s}", "sort", lambda x: torch.sort(x, stable=True, dim=-1, descending=True).values, [tie], [0],
              "torch.sort(tie, -1, descending=True, stable=True).values", args={"dim": -1, "descending": True})
    grad_case(f"topk_{s}", "topk", lambda x: torch.topk(x, 3, 1).values, [rnd(4, 6, dtype=dt)], [0],
              "torch.topk(x, 3, 1).values", args={"k": 3, "dim": 1, "largest": True})
    grad_case(f"topk_small_t_{s}", "topk", lambda x: torch.topk(x, 2, 0, largest=False).values, [rnd(5, 4, dtype=dt)],
              [0], "torch.topk(x.t(), 2, 0, largest=False).values", args={"k": 2, "dim": 0, "largest": False},
              views=[[["t"]]])
    for keep in (False, True):
        grad_case(f"kthvalue_k{int(keep)}_{s}", "kthvalue", lambda x, k=keep: torch.kthvalue(x, 2, 1, keepdim=k).values,
                  [rnd(3, 5, dtype=dt)], [0], f"torch.kthvalue(x, 2, 1, keepdim={keep}).values",
                  args={"k": 2, "dim": 1, "keepdim": keep})
    # ------------------------------------------------------------- scans
    grad_case(f"cumsum_{s}", "cumsum", lambda x: x.cumsum(1), [rnd(3, 4, dtype=dt)], [0], "x.cumsum(1)",
              args={"dim": 1})
    grad_case(f"cumsum_t_{s}", "cumsum", lambda x: x.cumsum(0), [rnd(3, 4, dtype=dt)], [0], "x.t().cumsum(0)",
              args={"dim": 0}, views=[[["t"]]])
    grad_case(f"cumprod_{s}", "cumprod", lambda x: x.cumprod(1), [rnd(3, 4, dtype=dt)], [0], "x.cumprod(1)",
              args={"dim": 1})
    grad_case(f"cumprod_t_{s}", "cumprod", lambda x: x.cumprod(-1), [rnd(5, 3, dtype=dt)], [0], "x.t().cumprod(-1)",
              args={"dim": -1}, views=[[["t"]]])
    cz = rnd(4, 5, dtype=dt)
    cz[0, 2] = 0.0  # one zero mid-line
    cz[1, 0] = 0.0  # a zero first and another later
    cz[1, 3] = 0.0
    cz[2, 4] = 0.0  # a zero last; row 3 has none
    grad_case(f"cumprod_zeros_{s}", "cumprod", lambda x: x.cumprod(1), [cz], [0], "x.cumprod(1) with zeros",
              args={"dim": 1})
    grad_case(f"cumprod_zeros_t_{s}", "cumprod", lambda x: x.cumprod(0), [cz], [0], "x.t().cumprod(0) with zeros",
              args={"dim": 0}, views=[[["t"]]])
    for op in ("cummax", "cummin"):
        grad_case(f"{op}_{s}", op, lambda x, op=op: getattr(x, op)(1).values, [rnd(3, 6, dtype=dt)], [0],
                  f"x.{op}(1).values", args={"dim": 1})
        grad_case(f"{op}_ties_{s}", op, lambda x, op=op: getattr(x, op)(1).values, [tie], [0],
                  f"tie.{op}(1).values", args={"dim": 1})
    # ------------------------------------------------------------- rearranging copies
    grad_case(f"flip_{s}", "flip", lambda x: x.flip([0, 2]), [rnd(2, 3, 4, dtype=dt)], [0],
              "x.permute(2, 0, 1).flip([0, 2])", args={"dims": [0, 2]}, views=[[["permute", [2, 0, 1]]]])
    grad_case(f"roll_{s}", "roll", lambda x: x.roll([1, -1], [0, 1]), [rnd(3, 4, dtype=dt)], [0],
              "x.roll([1, -1], [0, 1])", args={"shifts": [1, -1], "dims": [0, 1]})
    grad_case(f"roll_flat_{s}", "roll", lambda x: x.roll(2), [rnd(3, 4, dtype=dt)], [0], "x.t().roll(2)",
              args={"shifts": [2], "dims": []}, views=[[["t"]]])
    grad_case(f"repeat_{s}", "repeat", lambda x: x.repeat(2, 1, 3), [rnd(2, 3, dtype=dt)], [0], "x.repeat(2, 1, 3)",
              args={"repeats": [2, 1, 3]})
    grad_case(f"repeat_t_{s}", "repeat", lambda x: x.repeat(3, 2), [rnd(3, 2, dtype=dt)], [0], "x.t().repeat(3, 2)",
              args={"repeats": [3, 2]}, views=[[["t"]]])
    grad_case(f"tile_{s}", "tile", lambda x: x.tile((2,)), [rnd(2, 3, dtype=dt)], [0], "x.tile((2,))",
              args={"reps": [2]})
    grad_case(f"repeat_interleave_{s}", "repeat_interleave", lambda x: x.repeat_interleave(2, 1),
              [rnd(2, 3, dtype=dt)], [0], "x.repeat_interleave(2, 1)", args={"repeats": 2, "dim": 1})
    grad_case(f"repeat_interleave_flat_{s}", "repeat_interleave", lambda x: x.repeat_interleave(3),
              [rnd(2, 3, dtype=dt)], [0], "x.repeat_interleave(3)", args={"repeats": 3, "dim": None})
    grad_case(f"repeat_interleave_tensor_{s}", "repeat_interleave_tensor",
              lambda x, r: x.repeat_interleave(r, 1), [rnd(2, 3, dtype=dt), torch.tensor([1, 0, 2])], [0],
              "x.repeat_interleave([1, 0, 2], 1)", args={"dim": 1})
    grad_case(f"take_{s}", "take", lambda x, i: torch.take(x, i), [rnd(3, 4, dtype=dt), torch.tensor([[0, -1], [5, 5]])],
              [0], "torch.take(x.t(), [[0, -1], [5, 5]])", views=[[["t"]], None])
    # ------------------------------------------------------------- splits and stacks
    grad_case(f"split_{s}", "split", lambda x: weighted_cat(x.split(2, 0), 0), [rnd(5, 3, dtype=dt)], [0],
              "cat([p * (i + 1) for p in x.split(2, 0)])", args={"size": 2, "dim": 0})
    grad_case(f"split_sizes_{s}", "split_sizes", lambda x: weighted_cat(x.split([1, 4], 0), 0),
              [rnd(5, 3, dtype=dt)], [0], "cat([p * (i + 1) for p in x.split([1, 4], 0)])",
              args={"sizes": [1, 4], "dim": 0})
    grad_case(f"chunk_{s}", "chunk", lambda x: weighted_cat(x.chunk(3, 1), 1), [rnd(3, 5, dtype=dt)], [0],
              "cat([p * (i + 1) for p in x.t().chunk(3, 1)], 1)", args={"chunks": 3, "dim": 1}, views=[[["t"]]])
    grad_case(f"unbind_{s}", "unbind", lambda x: torch.stack([p * (i + 1) for i, p in enumerate(x.unbind(1))]),
              [rnd(2, 3, dtype=dt)], [0], "stack([p * (i + 1) for p in x.unbind(1)])", args={"dim": 1})
    grad_case(f"hstack_{s}", "hstack", lambda a, b: torch.hstack([a, b]), [rnd(2, 3, dtype=dt), rnd(2, 1, dtype=dt)],
              [0, 1], "torch.hstack([a, b])")
    grad_case(f"vstack_{s}", "vstack", lambda a, b: torch.vstack([a, b]), [rnd(3, dtype=dt), rnd(2, 3, dtype=dt)],
              [0, 1], "torch.vstack([a, b])")
    # ------------------------------------------------------------- scatter family
    idx0 = torch.tensor([[0, 1, 2, 0, 0], [2, 0, 1, 1, 2]])  # distinct per column: no write races
    grad_case(f"scatter_{s}", "scatter", lambda x, i, v: x.scatter(0, i, v),
              [rnd(3, 5, dtype=dt), idx0, rnd(2, 5, dtype=dt)], [0, 2], "x.scatter(0, idx, src)", args={"dim": 0})
    grad_case(f"scatter_value_{s}", "scatter_value", lambda x, i: x.scatter(0, i, 2.5), [rnd(3, 5, dtype=dt), idx0],
              [0], "x.scatter(0, idx, 2.5)", args={"dim": 0})
    rep = torch.tensor([[0, 1, 0, 3], [2, 2, 2, 0]])  # repeated indices along dim 1
    grad_case(f"scatter_add_{s}", "scatter_add", lambda x, i, v: x.scatter_add(1, i, v),
              [rnd(5, 2, dtype=dt), rep, rnd(2, 4, dtype=dt)], [0, 2], "x.t().scatter_add(1, idx, src)",
              args={"dim": 1}, views=[[["t"]], None, None])
    grad_case(f"scatter_add_inplace_{s}", "scatter_add_", lambda x, i, v: (x * 1).scatter_add_(1, i, v),
              [rnd(2, 5, dtype=dt), rep, rnd(2, 4, dtype=dt)], [0, 2], "(x * 1).scatter_add_(1, idx, src)",
              args={"dim": 1})
    for red in ("sum", "mean", "prod", "amax", "amin"):
        for inc in (True, False):
            grad_case(f"scatter_reduce_{red}_{int(inc)}_{s}", "scatter_reduce",
                      lambda x, i, v, r=red, inc=inc: x.scatter_reduce(1, i, v, r, include_self=inc),
                      [rnd(2, 5, dtype=dt), rep, rnd(2, 4, dtype=dt)], [0, 2],
                      f"x.scatter_reduce(1, idx, src, '{red}', include_self={inc})",
                      args={"dim": 1, "reduce": red, "include_self": inc})
    # prod through zeros: a zero in self at a scattered-to position, a lone zero of src at
    # another, and two zeros of src meeting at one position (first derivative only)
    zs, zv = rnd(2, 5, dtype=dt), rnd(2, 4, dtype=dt)
    zs[1, 2] = 0.0
    zv[0, 1] = 0.0
    for inc in (True, False):
        grad_case(f"scatter_reduce_prod_zeros_{int(inc)}_{s}", "scatter_reduce",
                  lambda x, i, v, inc=inc: x.scatter_reduce(1, i, v, "prod", include_self=inc),
                  [zs, rep, zv], [0, 2], f"x.scatter_reduce(1, idx, src, 'prod', include_self={inc}) with zeros",
                  args={"dim": 1, "reduce": "prod", "include_self": inc})
    zv2 = zv.clone()
    zv2[1, 0] = 0.0
    zv2[1, 2] = 0.0  # src[1, 0] and src[1, 2] both go to position 2
    grad_case(f"scatter_reduce_prod_twozeros_{s}", "scatter_reduce",
              lambda x, i, v: x.scatter_reduce(1, i, v, "prod", include_self=True),
              [zs, rep, zv2], [0, 2], "x.scatter_reduce(1, idx, src, 'prod') with two zeros at one position",
              args={"dim": 1, "reduce": "prod", "include_self": True})
    # amax / amin ties: the gradient is shared by every element equal to the result
    ts = torch.tensor([[1.0, 2.0, 0.5, 3.0, -1.0], [4.0, 0.0, 2.0, 1.0, 5.0]], dtype=dt)
    tv = torch.tensor([[1.0, 2.0, 1.0, 3.0], [2.0, 1.0, 2.0, 4.0]], dtype=dt)
    tmin = torch.tensor([[1.0, 2.0, 1.0, 3.0], [-1.0, 1.0, -1.0, 4.0]], dtype=dt)
    # (with include_self=False, self is moved away from the results: PyTorch 2.15 still counts an
    # excluded self that equals the result among the ties, see autograd_index_ops.rs)
    for red, v in (("amax", tv), ("amin", tmin)):
        for inc in (True, False):
            x = ts if inc else ts + (10.0 if red == "amin" else -10.0)
            grad_case(f"scatter_reduce_{red}_ties_{int(inc)}_{s}", "scatter_reduce",
                      lambda x, i, v, r=red, inc=inc: x.scatter_reduce(1, i, v, r, include_self=inc),
                      [x, rep, v], [0, 2], f"x.scatter_reduce(1, idx, src, '{red}', include_self={inc}) with ties",
                      args={"dim": 1, "reduce": red, "include_self": inc})
    # ------------------------------------------------------------- index_* family
    grad_case(f"index_add_{s}", "index_add", lambda x, i, v: x.index_add(0, i, v, alpha=2.0),
              [rnd(5, 3, dtype=dt), torch.tensor([0, 2, 2, 4]), rnd(4, 3, dtype=dt)], [0, 2],
              "x.index_add(0, [0, 2, 2, 4], src, alpha=2.0)", args={"dim": 0, "alpha": 2.0})
    grad_case(f"index_add_t_{s}", "index_add", lambda x, i, v: x.index_add(1, i, v),
              [rnd(3, 4, dtype=dt), torch.tensor([1, 1, 0]), rnd(3, 4, dtype=dt)], [0, 2],
              "x.t().index_add(1, [1, 1, 0], src.t())", args={"dim": 1, "alpha": 1.0}, views=[[["t"]], None, [["t"]]])
    grad_case(f"index_add_inplace_{s}", "index_add_", lambda x, i, v: (x * 1).index_add_(0, i, v),
              [rnd(5, 3, dtype=dt), torch.tensor([0, 2, 2, 4]), rnd(4, 3, dtype=dt)], [0, 2],
              "(x * 1).index_add_(0, [0, 2, 2, 4], src)", args={"dim": 0})
    grad_case(f"index_copy_{s}", "index_copy", lambda x, i, v: x.index_copy(0, i, v),
              [rnd(5, 3, dtype=dt), torch.tensor([4, 0, 2]), rnd(3, 3, dtype=dt)], [0, 2],
              "x.index_copy(0, [4, 0, 2], src)", args={"dim": 0})
    grad_case(f"index_fill_{s}", "index_fill", lambda x, i: x.index_fill(1, i, -1.0),
              [rnd(3, 4, dtype=dt), torch.tensor([1, -1])], [0], "x.index_fill(1, [1, -1], -1.0)", args={"dim": 1})
    # ------------------------------------------------------------- masks and advanced indexing
    m = torch.tensor([[True, False, True, True], [False, False, True, False], [True, True, False, True]])
    grad_case(f"masked_select_{s}", "masked_select", lambda x, m: x.masked_select(m), [rnd(3, 4, dtype=dt), m], [0],
              "x.masked_select(m)")
    grad_case(f"masked_select_bcast_{s}", "masked_select", lambda x, m: x.masked_select(m),
              [rnd(4, dtype=dt), m], [0], "x[4].masked_select(m[3, 4])")
    grad_case(f"masked_scatter_{s}", "masked_scatter", lambda x, m, v: x.masked_scatter(m, v),
              [rnd(3, 4, dtype=dt), m, rnd(4, 4, dtype=dt)], [0, 2], "x.masked_scatter(m, src[4, 4])")
    grad_case(f"masked_scatter_inplace_{s}", "masked_scatter_", lambda x, m, v: (x * 1).masked_scatter_(m, v),
              [rnd(3, 4, dtype=dt), m, rnd(7, dtype=dt)], [0, 2], "(x * 1).masked_scatter_(m, src[7])")
    rows, cols = torch.tensor([0, 2, 3]), torch.tensor([1, 0, 1])
    grad_case(f"index_put_{s}", "index_put", lambda x, r, c, v: x.index_put((r, c), v),
              [rnd(4, 3, dtype=dt), rows, cols, rnd(3, dtype=dt)], [0, 3], "x.index_put((rows, cols), v)",
              args={"accumulate": False})
    grad_case(f"index_put_acc_{s}", "index_put", lambda x, r, c, v: x.index_put((r, c), v, accumulate=True),
              [rnd(4, 3, dtype=dt), torch.tensor([0, 2, 2, 0]), torch.tensor([1, 0, 0, 1]), rnd(1, dtype=dt)], [0, 3],
              "x.index_put((rows, cols), v[1], accumulate=True)", args={"accumulate": True})
    grad_case(f"index_put_inplace_{s}", "index_put_", lambda x, r, c, v: (x * 1).index_put_((r, c), v, accumulate=True),
              [rnd(4, 3, dtype=dt), torch.tensor([0, 2, 2, 0]), torch.tensor([1, 0, 0, 1]), rnd(4, dtype=dt)], [0, 3],
              "(x * 1).index_put_((rows, cols), v, accumulate=True)", args={"accumulate": True})
    grad_case(f"index_{s}", "index", lambda x, r, c: x[r, c], [rnd(4, 3, dtype=dt), torch.tensor([0, 2, 2]),
              torch.tensor([1, 0, 0])], [0], "x[rows, cols]")
    grad_case(f"index_cols_{s}", "index_cols", lambda x, i: x[:, i], [rnd(3, 4, dtype=dt), torch.tensor([[2, 0], [2, 2]])],
              [0], "x.t()[:, idx]", views=[[["t"]], None])
    grad_case(f"index_mask_{s}", "index_mask", lambda x, m: x[m], [rnd(3, 4, dtype=dt), m], [0], "x[m]")
    # ------------------------------------------------------------- triangles
    for diag in (0, 1, -1):
        grad_case(f"tril_d{diag}_{s}", "tril", lambda x, d=diag: x.tril(d), [rnd(4, 5, dtype=dt)], [0],
                  f"x.tril({diag})", args={"diagonal": diag})
        grad_case(f"triu_d{diag}_{s}", "triu", lambda x, d=diag: x.triu(d), [rnd(2, 3, 3, dtype=dt)], [0],
                  f"x.transpose(1, 2).triu({diag})", args={"diagonal": diag}, views=[[["transpose", 1, 2]]])

rf.save()
