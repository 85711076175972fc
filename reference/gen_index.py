"""Reference data for the indexing family: index_select, gather, take, masked_select, nonzero,
advanced indexing (t[idx] with tensor indices and masks), scatter / scatter_add /
scatter_reduce, index_add / index_copy / index_fill, index_put (with accumulate),
masked_scatter, and in-place forms written through non-contiguous views.

Run: python3 reference/gen_index.py  ->  reference/data/index.safetensors

Advanced-indexing cases record the index list as `pattern`: one entry per position, "t" for
the next input tensor or null for a full slice `:`.
"""
import torch

from refgen import RefFile, apply_views

torch.manual_seed(0)
rf = RefFile("index")

ALL_DT = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
          torch.bool]
NAN = float("nan")
L = torch.int64


def short(dt):
    return str(dt).replace("torch.", "")


def rnd(shape, dt=torch.float32):
    if dt.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * 6 - 3).to(dt)
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    if dt == torch.uint8:
        return torch.randint(0, 20, shape, dtype=dt)
    return torch.randint(-20, 20, shape, dtype=dt)


def idx(hi, shape, dt=L):
    return torch.randint(0, hi, shape, dtype=dt)


def perm_idx(n, k):
    """k distinct indices below n (no duplicates: deterministic scatter)."""
    return torch.randperm(n)[:k]


def inplace_case(name, op, inputs, fn, call, args=None, views=None):
    """An in-place op applied to (a fresh copy of) input 0 seen through its views; records the
    view after the op, so writes must go through the view's layout."""
    x0 = inputs[0]
    v0 = (views or [None] * len(inputs))[0]

    def g(_a, *rest):
        b = apply_views(x0.clone(), v0)
        fn(b, *rest)
        return b

    rf.case(name, op, inputs, g, call=call, args=args, views=views)


# ------------------------------------------------------------------ index_select
for dt in ALL_DT:
    x = rnd((4, 5), dt)
    rf.case(f"index_select_{short(dt)}", "index_select", [x, torch.tensor([3, 0, 3, 1])],
            lambda a, i: torch.index_select(a, 1, i), call="torch.index_select(a, 1, i)", args={"dim": 1})
x = rnd((3, 4, 5))
for d in (0, 1, 2, -1):
    rf.case(f"index_select_dim{d}", "index_select", [x, idx(x.shape[d], (6,))],
            lambda a, i, d=d: torch.index_select(a, d, i), call=f"torch.index_select(a, {d}, i)", args={"dim": d})
rf.case("index_select_i32", "index_select", [x, idx(4, (3,), torch.int32)],
        lambda a, i: torch.index_select(a, 1, i), call="torch.index_select(a, 1, i:int32)", args={"dim": 1})
rf.case("index_select_0d_index", "index_select", [x, torch.tensor(2)],
        lambda a, i: torch.index_select(a, 0, i), call="torch.index_select(a, 0, tensor(2))", args={"dim": 0})
rf.case("index_select_empty_index", "index_select", [x, torch.zeros(0, dtype=L)],
        lambda a, i: torch.index_select(a, 2, i), call="torch.index_select(a, 2, [])", args={"dim": 2})
rf.case("index_select_scalar_self", "index_select", [torch.tensor(2.5), torch.tensor([0])],
        lambda a, i: torch.index_select(a, 0, i), call="torch.index_select(tensor(2.5), 0, [0])", args={"dim": 0})
rf.case("index_select_noncontig", "index_select", [rnd((5, 6)), torch.tensor([4, 0, 2])],
        lambda a, i: torch.index_select(a, 1, i), call="torch.index_select(a.t(), 1, i)", args={"dim": 1},
        views=[[["t"]], None])
rf.case("index_select_noncontig_index", "index_select", [rnd((5, 6)), torch.tensor([4, 0, 2, 1, 1, 3])],
        lambda a, i: torch.index_select(a, 0, i), call="torch.index_select(a[:, 1::2], 0, i[::2])",
        args={"dim": 0}, views=[[["slice", 1, 1, None, 2]], [["slice", 0, 0, None, 2]]])
rf.error_case("index_select_oob", "index_select", [x, torch.tensor([0, 3])],
              lambda a, i: torch.index_select(a, 0, i), call="torch.index_select(a, 0, [0, 3])", args={"dim": 0})
rf.error_case("index_select_negative", "index_select", [x, torch.tensor([-1])],
              lambda a, i: torch.index_select(a, 0, i), call="torch.index_select(a, 0, [-1])", args={"dim": 0})
rf.error_case("index_select_2d_index", "index_select", [x, torch.tensor([[0]])],
              lambda a, i: torch.index_select(a, 0, i), call="torch.index_select(a, 0, [[0]])", args={"dim": 0})
rf.error_case("index_select_float_index", "index_select", [x, torch.tensor([0.])],
              lambda a, i: torch.index_select(a, 0, i), call="torch.index_select(a, 0, [0.])", args={"dim": 0})
rf.error_case("index_select_bad_dim", "index_select", [x, torch.tensor([0])],
              lambda a, i: torch.index_select(a, 3, i), call="torch.index_select(a, 3, [0])", args={"dim": 3})

# ------------------------------------------------------------------ gather
for dt in ALL_DT:
    x = rnd((3, 4), dt)
    rf.case(f"gather_{short(dt)}", "gather", [x, idx(3, (2, 4))],
            lambda a, i: torch.gather(a, 0, i), call="torch.gather(a, 0, i)", args={"dim": 0})
x = rnd((3, 4, 5))
for d in (0, 1, 2, -2):
    shp = [2, 3, 4]
    shp[d] = 6
    rf.case(f"gather_dim{d}", "gather", [x, idx(x.shape[d], tuple(shp))],
            lambda a, i, d=d: torch.gather(a, d, i), call=f"torch.gather(a, {d}, i)", args={"dim": d})
rf.case("gather_i32", "gather", [x, idx(5, (3, 4, 2), torch.int32)],
        lambda a, i: torch.gather(a, 2, i), call="torch.gather(a, 2, i:int32)", args={"dim": 2})
rf.case("gather_noncontig", "gather", [rnd((5, 4)), idx(5, (6, 4))],
        lambda a, i: torch.gather(a, 1, i), call="torch.gather(a.t(), 1, i.t())", args={"dim": 1},
        views=[[["t"]], [["t"]]])
rf.case("gather_expanded_index", "gather", [rnd((4, 6)), idx(6, (1, 3))],
        lambda a, i: torch.gather(a, 1, i), call="torch.gather(a, 1, i.expand(4, 3))", args={"dim": 1},
        views=[None, [["expand", [4, 3]]]])
rf.case("gather_scalar", "gather", [torch.tensor(1.5), torch.tensor(0)],
        lambda a, i: torch.gather(a, 0, i), call="torch.gather(tensor(1.5), 0, tensor(0))", args={"dim": 0})
rf.case("gather_empty", "gather", [x, torch.zeros(3, 0, 5, dtype=L)],
        lambda a, i: torch.gather(a, 1, i), call="torch.gather(a, 1, zeros(3, 0, 5))", args={"dim": 1})
rf.error_case("gather_oob", "gather", [x, torch.full((1, 1, 1), 3)],
              lambda a, i: torch.gather(a, 0, i), call="torch.gather(a, 0, [[[3]]])", args={"dim": 0})
rf.error_case("gather_negative", "gather", [x, torch.full((1, 1, 1), -1)],
              lambda a, i: torch.gather(a, 0, i), call="torch.gather(a, 0, [[[-1]]])", args={"dim": 0})
rf.error_case("gather_rank", "gather", [x, torch.zeros(2, 2, dtype=L)],
              lambda a, i: torch.gather(a, 0, i), call="torch.gather(a, 0, zeros(2, 2))", args={"dim": 0})
rf.error_case("gather_too_large", "gather", [x, torch.zeros(2, 5, 5, dtype=L)],
              lambda a, i: torch.gather(a, 0, i), call="torch.gather(a, 0, zeros(2, 5, 5))", args={"dim": 0})
rf.error_case("gather_float_index", "gather", [x, torch.zeros(2, 2, 2)],
              lambda a, i: torch.gather(a, 0, i), call="torch.gather(a, 0, zeros(2, 2, 2):float)", args={"dim": 0})

# ------------------------------------------------------------------ take
x = rnd((3, 4))
rf.case("take", "take", [x, torch.tensor([[0, 11], [-1, 5]])], torch.take, call="torch.take(a, i)")
rf.case("take_noncontig", "take", [x, torch.tensor([1, 2, 3, -12])], torch.take, call="torch.take(a.t(), i)",
        views=[[["t"]], None])
rf.case("take_int", "take", [rnd((5,), torch.int32), torch.tensor(4)], torch.take, call="torch.take(a, tensor(4))")
rf.case("take_empty", "take", [x, torch.zeros(0, dtype=L)], torch.take, call="torch.take(a, [])")
rf.error_case("take_oob", "take", [x, torch.tensor([12])], torch.take, call="torch.take(a, [12])")
rf.error_case("take_oob_neg", "take", [x, torch.tensor([-13])], torch.take, call="torch.take(a, [-13])")
rf.error_case("take_i32", "take", [x, torch.tensor([1], dtype=torch.int32)], torch.take, call="torch.take(a, [1]:int32)")

# ------------------------------------------------------------------ masked_select / nonzero
for dt in ALL_DT:
    x = rnd((3, 4), dt)
    rf.case(f"masked_select_{short(dt)}", "masked_select", [x, torch.rand(3, 4) > 0.5], torch.masked_select,
            call="torch.masked_select(a, m)")
    rf.case(f"nonzero_{short(dt)}", "nonzero", [rnd((3, 4), dt) * (torch.rand(3, 4) > 0.5).to(dt)
                                               if dt != torch.bool else rnd((3, 4), dt)],
            torch.nonzero, call="torch.nonzero(a)")
rf.case("masked_select_bcast", "masked_select", [rnd((2, 3)), torch.tensor([[True], [False]])], torch.masked_select,
        call="torch.masked_select(a[2,3], m[2,1])")
rf.case("masked_select_bcast_self", "masked_select", [rnd((3,)), torch.rand(2, 3) > 0.5], torch.masked_select,
        call="torch.masked_select(a[3], m[2,3])")
rf.case("masked_select_noncontig", "masked_select", [rnd((4, 3)), torch.rand(3, 4) > 0.5], torch.masked_select,
        call="torch.masked_select(a.t(), m)", views=[[["t"]], None])
rf.case("masked_select_empty", "masked_select", [rnd((0, 3)), torch.zeros(0, 3, dtype=torch.bool)],
        torch.masked_select, call="torch.masked_select(empty, empty)")
rf.error_case("masked_select_int_mask", "masked_select", [rnd((3,)), torch.tensor([1, 0, 1])],
              torch.masked_select, call="torch.masked_select(a, m:int64)")
rf.error_case("masked_select_bad_bcast", "masked_select", [rnd((3,)), torch.tensor([True, False])],
              torch.masked_select, call="torch.masked_select(a[3], m[2])")
x = torch.tensor([[0., NAN, -0.], [1., 0., float("inf")]])
rf.case("nonzero_nan", "nonzero", [x], torch.nonzero, call="torch.nonzero([[0, nan, -0], [1, 0, inf]])")
rf.case("nonzero_3d", "nonzero", [rnd((2, 3, 4), torch.int64) % 3], torch.nonzero, call="torch.nonzero(a % 3)")
rf.case("nonzero_noncontig", "nonzero", [rnd((4, 3), torch.int64) % 2], torch.nonzero, call="torch.nonzero(a.t())",
        views=[[["t"]]])
rf.case("nonzero_scalar_true", "nonzero", [torch.tensor(3.)], torch.nonzero, call="torch.nonzero(tensor(3.))")
rf.case("nonzero_scalar_false", "nonzero", [torch.tensor(0)], torch.nonzero, call="torch.nonzero(tensor(0))")
rf.case("nonzero_empty", "nonzero", [torch.zeros(0, 2)], torch.nonzero, call="torch.nonzero(zeros(0, 2))")
rf.case("nonzero_all_zero", "nonzero", [torch.zeros(2, 2)], torch.nonzero, call="torch.nonzero(zeros(2, 2))")


# ------------------------------------------------------------------ advanced indexing
def build_index(pattern, tensors):
    it = iter(tensors)
    return tuple(next(it) if p == "t" else slice(None) for p in pattern)


def index_case(name, x, pattern, tensors, views=None, call=None, error=False):
    def fn(a, *ts):
        return a[build_index(pattern, ts)]

    text = call or "a[" + ", ".join("i" if p == "t" else ":" for p in pattern) + "]"
    if error:
        rf.error_case(name, "index", [x] + tensors, fn, call=text, args={"pattern": pattern}, views=views)
    else:
        rf.case(name, "index", [x] + tensors, fn, call=text, args={"pattern": pattern}, views=views)


x = rnd((4, 5, 6))
for dt in ALL_DT:
    index_case(f"index_{short(dt)}", rnd((4, 5), dt), ["t"], [torch.tensor([3, -1, 0, 0])])
index_case("index_2d_idx", x, ["t"], [idx(4, (2, 3))])
index_case("index_dim1", x, [None, "t"], [torch.tensor([4, -5, 2])])
index_case("index_dim2", x, [None, None, "t"], [idx(6, (2, 2))])
index_case("index_two_adjacent", x, [None, "t", "t"], [idx(5, (3, 1)), idx(6, (2,))])
index_case("index_two_front", x, ["t", "t"], [idx(4, (3,)), idx(5, (3,))])
index_case("index_full", x, ["t", "t", "t"], [idx(4, (2, 2)), idx(5, (2, 2)), idx(6, (1,))])
index_case("index_separated", x, ["t", None, "t"], [idx(4, (1, 2)), idx(6, (3, 1))])
index_case("index_i32", x, [None, "t"], [idx(5, (4,), torch.int32)])
index_case("index_0d", x, [None, "t"], [torch.tensor(2)])
index_case("index_0d_pair", x, ["t", None, "t"], [torch.tensor(1), torch.tensor(-1)])
index_case("index_mask_full", x, ["t"], [torch.rand(4, 5, 6) > 0.6])
index_case("index_mask_lead", x, ["t"], [torch.rand(4, 5) > 0.5])
index_case("index_mask_mid", x, [None, "t"], [torch.tensor([True, False, True, True, False])])
index_case("index_mask_and_long", x, [None, "t", "t"], [torch.tensor([True, False, True, False, False]),
                                                        torch.tensor([5, 0])])
index_case("index_mask_none", x, ["t"], [torch.zeros(4, dtype=torch.bool)])
index_case("index_mask_0d_true", x, ["t"], [torch.tensor(True)])
index_case("index_mask_0d_false", x, ["t"], [torch.tensor(False)])
index_case("index_noncontig", rnd((6, 5)), ["t", "t"], [idx(5, (3,)), idx(6, (3,))],
           views=[[["t"]], None, None], call="a.t()[i, j]")
index_case("index_noncontig_idx", x, [None, "t"], [idx(5, (4, 3))], views=[None, [["t"]]], call="a[:, i.t()]")
index_case("index_empty_idx", x, [None, "t"], [torch.zeros(0, dtype=L)])
index_case("index_empty_self", rnd((0, 3)), [None, "t"], [torch.tensor([2, 0])])
index_case("index_oob", x, [None, "t"], [torch.tensor([5])], error=True)
index_case("index_oob_neg", x, ["t"], [torch.tensor([-5])], error=True)
index_case("index_float", x, ["t"], [torch.tensor([1.])], error=True)
index_case("index_bcast_error", x, ["t", "t"], [torch.tensor([0, 1]), torch.tensor([0, 1, 2])], error=True)
index_case("index_mask_shape", x, ["t"], [torch.ones(5, dtype=torch.bool)], error=True)
index_case("index_too_many", rnd((2, 3)), ["t", "t", "t"], [torch.tensor([0])] * 3, error=True)


# ------------------------------------------------------------------ index_put
def put_case(name, x, pattern, tensors, values, accumulate=False, views=None, error=False):
    """a.index_put_(indices, v, accumulate) (or a[i, :, j] = v when the pattern has slices)."""
    def apply(a, *rest):
        ts, v = rest[:-1], rest[-1]
        if None in pattern:
            assert not accumulate
            a[build_index(pattern, ts)] = v
        else:
            a.index_put_(tuple(ts), v, accumulate=accumulate)
        return a

    text = "a.index_put_([" + ", ".join("i" if p == "t" else "None" for p in pattern) + \
        f"], v, accumulate={accumulate})"
    args = {"pattern": pattern, "accumulate": accumulate}
    inputs = [x] + tensors + [values]
    if error:
        rf.error_case(name, "index_put", inputs, lambda a, *rest: apply(a.clone(), *rest), call=text, args=args,
                      views=views)
    else:
        inplace_case(name, "index_put", inputs, apply, call=text, args=args, views=views)


x = rnd((4, 5))
for dt in ALL_DT:
    put_case(f"index_put_{short(dt)}", rnd((4, 5), dt), ["t"], [perm_idx(4, 2)], rnd((2, 5), dt))
    if dt != torch.bool:
        put_case(f"index_put_acc_{short(dt)}", rnd((4, 5), dt), ["t", "t"], [torch.tensor([1, 3, 1, 1]),
                 torch.tensor([0, 4, 0, 2])], rnd((4,), dt), accumulate=True)
put_case("index_put_scalar_value", x, ["t", "t"], [torch.tensor([0, 3]), torch.tensor([-1, 2])], torch.tensor(7.))
put_case("index_put_bcast_value", x, ["t"], [torch.tensor([2, 0])], rnd((5,)))
put_case("index_put_slice_dim", x, [None, "t"], [torch.tensor([4, 1])], rnd((4, 1)))
put_case("index_put_separated", rnd((3, 4, 5)), ["t", None, "t"], [torch.tensor([0, 2]), torch.tensor([1, 4])],
         rnd((2, 4)))
put_case("index_put_mask", x, ["t"], [torch.rand(4, 5) > 0.5], torch.tensor(-1.))
put_case("index_put_mask_rows", x, ["t"], [torch.tensor([True, False, False, True])], rnd((2, 5)))
put_case("index_put_acc_mask", x, ["t"], [torch.rand(4, 5) > 0.5], torch.tensor(10.), accumulate=True)
put_case("index_put_view", rnd((5, 4)), ["t", "t"], [torch.tensor([0, 3]), torch.tensor([4, 1])],
         torch.tensor([8., 9.]), views=[[["t"]], None, None, None])
put_case("index_put_acc_view", rnd((5, 8)), ["t"], [torch.tensor([1, 1, 0])], rnd((3, 4)), accumulate=True,
         views=[[["slice", 1, 0, None, 2]], None, None])
put_case("index_put_oob", x, ["t"], [torch.tensor([4])], torch.tensor(1.), error=True)
put_case("index_put_value_shape", x, ["t"], [torch.tensor([0, 1])], rnd((2,)), error=True)
put_case("index_put_dtype", x, ["t"], [torch.tensor([0, 1])], torch.tensor(1., dtype=torch.float64), error=True)

# ------------------------------------------------------------------ scatter family
for dt in ALL_DT:
    x = rnd((4, 5), dt)
    i = torch.stack([perm_idx(4, 3) for _ in range(4)], 1)  # [3, 4], distinct per column
    rf.case(f"scatter_{short(dt)}", "scatter", [x, i, rnd((3, 5), dt)], lambda a, i, s: torch.scatter(a, 0, i, s),
            call="torch.scatter(a, 0, i, s)", args={"dim": 0})
    rf.case(f"scatter_add_{short(dt)}", "scatter_add", [x, idx(4, (6, 5)), rnd((6, 5), dt)],
            lambda a, i, s: torch.scatter_add(a, 0, i, s), call="torch.scatter_add(a, 0, i, s)", args={"dim": 0})
    for red in ("sum", "prod", "mean", "amax", "amin"):
        if red == "mean" and dt == torch.bool:
            continue
        for inc in (True, False):
            src = rnd((4, 3), dt)
            if red == "prod" and dt.is_floating_point:
                src = src.abs() / 2 + 0.5
            rf.case(f"scatter_reduce_{red}_{inc}_{short(dt)}", "scatter_reduce", [x, idx(5, (4, 3)), src],
                    lambda a, i, s, red=red, inc=inc: torch.scatter_reduce(a, 1, i, s, red, include_self=inc),
                    call=f"torch.scatter_reduce(a, 1, i, s, '{red}', include_self={inc})",
                    args={"dim": 1, "reduce": red, "include_self": inc})
x = rnd((3, 4, 5))
for d in (0, 1, 2, -1):
    shp = [3, 4, 5]
    # distinct indices along d: a permutation per line
    i = torch.argsort(torch.rand(shp), dim=d).narrow(d, 0, 2)
    sshape = list(shp)
    sshape[d] = 2
    rf.case(f"scatter_dim{d}", "scatter", [x, i, rnd(tuple(sshape))], lambda a, i, s, d=d: torch.scatter(a, d, i, s),
            call=f"torch.scatter(a, {d}, i, s)", args={"dim": d})
rf.case("scatter_small_index", "scatter", [rnd((4, 5)), torch.tensor([[1, 0], [3, 2]]), rnd((3, 6))],
        lambda a, i, s: torch.scatter(a, 1, i, s), call="torch.scatter(a, 1, i[2,2], s[3,6])", args={"dim": 1})
rf.case("scatter_i32_index", "scatter", [rnd((4, 5)), torch.tensor([[1, 0], [3, 2]], dtype=torch.int32),
                                         rnd((2, 2))],
        lambda a, i, s: torch.scatter(a, 1, i, s), call="torch.scatter(a, 1, i:int32, s)", args={"dim": 1})
rf.case("scatter_noncontig", "scatter", [rnd((5, 4)), torch.argsort(torch.rand(4, 5), 1)[:, :3], rnd((3, 4))],
        lambda a, i, s: torch.scatter(a, 1, i, s), call="torch.scatter(a.t(), 1, i, s.t())", args={"dim": 1},
        views=[[["t"]], None, [["t"]]])
rf.case("scatter_empty_index", "scatter", [rnd((2, 3)), torch.zeros(0, 3, dtype=L), rnd((2, 3))],
        lambda a, i, s: torch.scatter(a, 0, i, s), call="torch.scatter(a, 0, zeros(0, 3), s)", args={"dim": 0})
rf.case("scatter_scalar_self", "scatter", [torch.tensor(1.), torch.tensor(0), torch.tensor(4.)],
        lambda a, i, s: torch.scatter(a, 0, i, s), call="torch.scatter(tensor(1.), 0, tensor(0), tensor(4.))",
        args={"dim": 0})
for dt in (torch.float32, torch.int64, torch.bool, torch.float16):
    v = True if dt == torch.bool else 2.5
    rf.case(f"scatter_value_{short(dt)}", "scatter_value", [rnd((3, 4), dt), torch.tensor([[2, 0, 1, 2]])],
            lambda a, i, v=v: torch.scatter(a, 0, i, v), call=f"torch.scatter(a, 0, i, value={v})",
            args={"dim": 0, "value": v})
rf.case("scatter_add_dup", "scatter_add", [torch.zeros(3), torch.tensor([0, 2, 0, 0, 1]), torch.arange(5.)],
        lambda a, i, s: torch.scatter_add(a, 0, i, s), call="torch.scatter_add(zeros(3), 0, [0,2,0,0,1], s)",
        args={"dim": 0})
rf.case("scatter_add_3d", "scatter_add", [rnd((2, 3, 4)), idx(3, (2, 5, 4)), rnd((2, 5, 4))],
        lambda a, i, s: torch.scatter_add(a, 1, i, s), call="torch.scatter_add(a, 1, i, s)", args={"dim": 1})
xn = torch.tensor([[1., NAN, 3.], [4., 5., 6.]])
for red in ("amax", "amin", "sum", "mean"):
    rf.case(f"scatter_reduce_nan_{red}", "scatter_reduce",
            [xn, torch.tensor([[0, 0, 2], [1, 1, 1]]), torch.tensor([[NAN, 2., -1.], [7., 0., NAN]])],
            lambda a, i, s, red=red: torch.scatter_reduce(a, 1, i, s, red),
            call=f"torch.scatter_reduce(a_nan, 1, i, s_nan, '{red}')",
            args={"dim": 1, "reduce": red, "include_self": True})
rf.case("scatter_reduce_mean_neg_int", "scatter_reduce",
        [torch.tensor([[0, 1, 2], [3, 4, 5]]), torch.tensor([[1, 0, 0], [1, 1, 1]]),
         -torch.tensor([[3, 4, 5], [7, 7, 7]])],
        lambda a, i, s: torch.scatter_reduce(a, 0, i, s, "mean"), call="torch.scatter_reduce(a, 0, i, -s, 'mean')",
        args={"dim": 0, "reduce": "mean", "include_self": True})
rf.case("scatter_reduce_mean_view", "scatter_reduce", [rnd((5, 4)), idx(5, (4, 3)), rnd((4, 3))],
        lambda a, i, s: torch.scatter_reduce(a, 1, i, s, "mean", include_self=False),
        call="torch.scatter_reduce(a.t(), 1, i, s, 'mean', include_self=False)",
        args={"dim": 1, "reduce": "mean", "include_self": False}, views=[[["t"]], None, None])
x = rnd((3, 4))
rf.error_case("scatter_oob", "scatter", [x, torch.tensor([[3]]), rnd((1, 1))],
              lambda a, i, s: torch.scatter(a, 0, i, s), call="torch.scatter(a, 0, [[3]], s)", args={"dim": 0})
rf.error_case("scatter_neg", "scatter", [x, torch.tensor([[-1]]), rnd((1, 1))],
              lambda a, i, s: torch.scatter(a, 0, i, s), call="torch.scatter(a, 0, [[-1]], s)", args={"dim": 0})
rf.error_case("scatter_src_small", "scatter", [x, torch.tensor([[0, 1, 2]]), rnd((1, 2))],
              lambda a, i, s: torch.scatter(a, 0, i, s), call="torch.scatter(a, 0, i[1,3], s[1,2])", args={"dim": 0})
rf.error_case("scatter_index_large", "scatter", [x, torch.zeros(1, 5, dtype=L), rnd((3, 5))],
              lambda a, i, s: torch.scatter(a, 0, i, s), call="torch.scatter(a[3,4], 0, i[1,5], s)", args={"dim": 0})
rf.error_case("scatter_dtype", "scatter", [x, torch.tensor([[0]]), torch.ones(1, 1, dtype=torch.float64)],
              lambda a, i, s: torch.scatter(a, 0, i, s), call="torch.scatter(a, 0, i, s:float64)", args={"dim": 0})
rf.error_case("scatter_rank", "scatter", [x, torch.tensor([0]), rnd((1,))],
              lambda a, i, s: torch.scatter(a, 0, i, s), call="torch.scatter(a[3,4], 0, i[1], s[1])", args={"dim": 0})
rf.error_case("scatter_add_oob", "scatter_add", [x, torch.tensor([[0, 4]]), rnd((1, 2))],
              lambda a, i, s: torch.scatter_add(a, 1, i, s), call="torch.scatter_add(a, 1, [[0, 4]], s)",
              args={"dim": 1})
rf.error_case("scatter_reduce_bad", "scatter_reduce", [x, torch.tensor([[0]]), rnd((1, 1))],
              lambda a, i, s: torch.scatter_reduce(a, 0, i, s, "foo"), call="torch.scatter_reduce(a, 0, i, s, 'foo')",
              args={"dim": 0, "reduce": "foo", "include_self": True})
rf.error_case("scatter_reduce_mean_bool", "scatter_reduce",
              [rnd((2, 2), torch.bool), torch.tensor([[0]]), rnd((1, 1), torch.bool)],
              lambda a, i, s: torch.scatter_reduce(a, 0, i, s, "mean"),
              call="torch.scatter_reduce(a:bool, 0, i, s, 'mean')",
              args={"dim": 0, "reduce": "mean", "include_self": True})

# in-place through views
inplace_case("scatter__view", "scatter_", [rnd((5, 4)), torch.argsort(torch.rand(4, 5), 1)[:, :2], rnd((4, 2))],
             lambda a, i, s: a.scatter_(1, i, s), call="a.t().scatter_(1, i, s)", args={"dim": 1},
             views=[[["t"]], None, None])
inplace_case("scatter_add__view", "scatter_add_", [rnd((4, 6)), idx(3, (4, 5)), rnd((4, 5))],
             lambda a, i, s: a.scatter_add_(1, i, s), call="a[:, ::2].scatter_add_(1, i, s)", args={"dim": 1},
             views=[[["slice", 1, 0, None, 2]], None, None])
inplace_case("scatter_reduce__view", "scatter_reduce_", [rnd((4, 6)), idx(4, (3, 3)), rnd((3, 3))],
             lambda a, i, s: a.scatter_reduce_(0, i, s, "amax", include_self=False),
             call="a[:, 1::2].scatter_reduce_(0, i, s, 'amax', include_self=False)",
             args={"dim": 0, "reduce": "amax", "include_self": False},
             views=[[["slice", 1, 1, None, 2]], None, None])
inplace_case("scatter_value__view", "scatter_value_", [rnd((5, 4)), torch.tensor([[0, 4, 2, 1]])],
             lambda a, i: a.scatter_(1, i, -3.0), call="a.t().scatter_(1, i, -3.0)", args={"dim": 1, "value": -3.0},
             views=[[["t"]], None])

# ------------------------------------------------------------------ index_add / index_copy / index_fill
for dt in ALL_DT:
    x = rnd((4, 5), dt)
    alpha = 1 if dt == torch.bool else (2 if not dt.is_floating_point else 0.5)
    rf.case(f"index_add_{short(dt)}", "index_add", [x, torch.tensor([3, 0, 3]), rnd((4, 3), dt)],
            lambda a, i, s, alpha=alpha: torch.index_add(a, 1, i, s, alpha=alpha),
            call=f"torch.index_add(a, 1, i, s, alpha={alpha})", args={"dim": 1, "alpha": alpha})
    rf.case(f"index_copy_{short(dt)}", "index_copy", [x, perm_idx(4, 3), rnd((3, 5), dt)],
            lambda a, i, s: torch.index_copy(a, 0, i, s), call="torch.index_copy(a, 0, i, s)", args={"dim": 0})
    v = True if dt == torch.bool else -2
    rf.case(f"index_fill_{short(dt)}", "index_fill", [x, torch.tensor([4, -1, 0])],
            lambda a, i, v=v: torch.index_fill(a, 1, i, v), call=f"torch.index_fill(a, 1, i, {v})",
            args={"dim": 1, "value": v})
x = rnd((3, 4, 5))
for d in (0, 1, 2, -1):
    n = x.shape[d]
    sshape = list(x.shape)
    sshape[d] = 4
    rf.case(f"index_add_dim{d}", "index_add", [x, idx(n, (4,)), rnd(tuple(sshape))],
            lambda a, i, s, d=d: torch.index_add(a, d, i, s), call=f"torch.index_add(a, {d}, i, s)",
            args={"dim": d, "alpha": 1})
rf.case("index_add_i32", "index_add", [x, torch.tensor([1, 1], dtype=torch.int32), rnd((3, 2, 5))],
        lambda a, i, s: torch.index_add(a, 1, i, s), call="torch.index_add(a, 1, i:int32, s)",
        args={"dim": 1, "alpha": 1})
rf.case("index_add_int_alpha_float", "index_add", [rnd((3, 2), L), torch.tensor([0]), rnd((3, 1), L)],
        lambda a, i, s: torch.index_add(a, 1, i, s, alpha=2.5), call="torch.index_add(a:int64, 1, i, s, alpha=2.5)",
        args={"dim": 1, "alpha": 2.5})
rf.case("index_add_scalar", "index_add", [torch.tensor(5.), torch.tensor([0]), torch.tensor(2.)],
        lambda a, i, s: torch.index_add(a, 0, i, s), call="torch.index_add(tensor(5.), 0, [0], tensor(2.))",
        args={"dim": 0, "alpha": 1})
rf.case("index_fill_float_into_int", "index_fill", [rnd((2, 3), L), torch.tensor([2, 0])],
        lambda a, i: torch.index_fill(a, 1, i, 2.5), call="torch.index_fill(a:int64, 1, i, 2.5)",
        args={"dim": 1, "value": 2.5})
rf.case("index_fill_scalar", "index_fill", [torch.tensor(5.), torch.tensor(-1)],
        lambda a, i: torch.index_fill(a, 0, i, 1.0), call="torch.index_fill(tensor(5.), 0, tensor(-1), 1.0)",
        args={"dim": 0, "value": 1.0})
rf.error_case("index_add_oob", "index_add", [x, torch.tensor([3]), rnd((1, 4, 5))],
              lambda a, i, s: torch.index_add(a, 0, i, s), call="torch.index_add(a, 0, [3], s)",
              args={"dim": 0, "alpha": 1})
rf.error_case("index_add_neg", "index_add", [x, torch.tensor([-1]), rnd((1, 4, 5))],
              lambda a, i, s: torch.index_add(a, 0, i, s), call="torch.index_add(a, 0, [-1], s)",
              args={"dim": 0, "alpha": 1})
rf.error_case("index_add_count", "index_add", [x, torch.tensor([0, 1, 1]), rnd((2, 4, 5))],
              lambda a, i, s: torch.index_add(a, 0, i, s), call="torch.index_add(a, 0, [0,1,1], s[2,4,5])",
              args={"dim": 0, "alpha": 1})
rf.error_case("index_add_shape", "index_add", [x, torch.tensor([0]), rnd((1, 4, 4))],
              lambda a, i, s: torch.index_add(a, 0, i, s), call="torch.index_add(a, 0, [0], s[1,4,4])",
              args={"dim": 0, "alpha": 1})
rf.error_case("index_add_dtype", "index_add", [x, torch.tensor([0]), rnd((1, 4, 5), torch.float64)],
              lambda a, i, s: torch.index_add(a, 0, i, s), call="torch.index_add(a, 0, [0], s:float64)",
              args={"dim": 0, "alpha": 1})
rf.error_case("index_add_2d_index", "index_add", [x, torch.tensor([[0]]), rnd((1, 4, 5))],
              lambda a, i, s: torch.index_add(a, 0, i, s), call="torch.index_add(a, 0, [[0]], s)",
              args={"dim": 0, "alpha": 1})
rf.error_case("index_copy_neg", "index_copy", [x, torch.tensor([-1]), rnd((1, 4, 5))],
              lambda a, i, s: torch.index_copy(a, 0, i, s), call="torch.index_copy(a, 0, [-1], s)", args={"dim": 0})
rf.error_case("index_copy_i32", "index_copy", [x, torch.tensor([0], dtype=torch.int32), rnd((1, 4, 5))],
              lambda a, i, s: torch.index_copy(a, 0, i, s), call="torch.index_copy(a, 0, [0]:int32, s)",
              args={"dim": 0})
rf.error_case("index_fill_oob", "index_fill", [x, torch.tensor([5])],
              lambda a, i: torch.index_fill(a, 2, i, 0.), call="torch.index_fill(a, 2, [5], 0.)",
              args={"dim": 2, "value": 0.0})
rf.error_case("index_fill_i32", "index_fill", [x, torch.tensor([1], dtype=torch.int32)],
              lambda a, i: torch.index_fill(a, 2, i, 0.), call="torch.index_fill(a, 2, [1]:int32, 0.)",
              args={"dim": 2, "value": 0.0})
inplace_case("index_add__view", "index_add_", [rnd((6, 4)), torch.tensor([0, 2, 0]), rnd((4, 3))],
             lambda a, i, s: a.index_add_(1, i, s, alpha=-1), call="a.t().index_add_(1, i, s, alpha=-1)",
             args={"dim": 1, "alpha": -1}, views=[[["t"]], None, None])
inplace_case("index_copy__view", "index_copy_", [rnd((4, 6)), torch.tensor([2, 0]), rnd((4, 2))],
             lambda a, i, s: a.index_copy_(1, i, s), call="a[:, ::2].index_copy_(1, i, s)", args={"dim": 1},
             views=[[["slice", 1, 0, None, 2]], None, None])
inplace_case("index_fill__view", "index_fill_", [rnd((6, 4)), torch.tensor([1, -1])],
             lambda a, i: a.index_fill_(0, i, 9.0), call="a.t().index_fill_(0, i, 9.0)",
             args={"dim": 0, "value": 9.0}, views=[[["t"]], None])

# ------------------------------------------------------------------ masked_scatter
for dt in (torch.float32, torch.int64, torch.bool, torch.bfloat16):
    rf.case(f"masked_scatter_{short(dt)}", "masked_scatter", [rnd((3, 4), dt), torch.rand(3, 4) > 0.5,
                                                               rnd((12,), dt)],
            torch.masked_scatter, call="torch.masked_scatter(a, m, s)")
rf.case("masked_scatter_bcast_mask", "masked_scatter", [rnd((2, 3)), torch.tensor([True, False, True]),
                                                        rnd((2, 3))],
        torch.masked_scatter, call="torch.masked_scatter(a[2,3], m[3], s[2,3])")
inplace_case("masked_scatter__view", "masked_scatter_", [rnd((4, 3)), torch.rand(3, 4) > 0.5, rnd((20,))],
             lambda a, m, s: a.masked_scatter_(m, s), call="a.t().masked_scatter_(m, s)",
             views=[[["t"]], None, None])
rf.error_case("masked_scatter_short_source", "masked_scatter",
              [rnd((3,)), torch.tensor([True, False, True]), rnd((1,))],
              torch.masked_scatter, call="torch.masked_scatter(a, m, s[1])")
rf.error_case("masked_scatter_int_mask", "masked_scatter", [rnd((3,)), torch.tensor([1, 0, 1]), rnd((3,))],
              torch.masked_scatter, call="torch.masked_scatter(a, m:int64, s)")

rf.save()
