"""Reference data for sorting and searching: sort, argsort, topk, kthvalue, unique (flat and
along a dim), searchsorted, bucketize.

Run: python3 reference/gen_sort.py  ->  reference/data/sort.safetensors

PyTorch's tie order is only specified for stable=True, so cases with ties either use
stable=True or record values only (ops named `*_values`).
"""
import torch

from refgen import RefFile

torch.manual_seed(0)
rf = RefFile("sort")

ALL_DT = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
          torch.bool]
NUM_DT = [d for d in ALL_DT if d != torch.bool]
NAN = float("nan")
INF = float("inf")


def short(dt):
    return str(dt).replace("torch.", "")


def distinct(shape, dt=torch.float32):
    """Values without ties (a shuffled range), in dtype dt."""
    n = 1
    for s in shape:
        n *= s
    v = torch.randperm(n).to(torch.float64) - n // 3
    if dt == torch.uint8:
        v = v + n
    if dt.is_floating_point:
        v = v * 0.25
    return v.reshape(shape).to(dt)


def ties(shape, dt=torch.float32):
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    v = torch.randint(0, 4, shape).to(torch.float64)
    return v.to(dt)


x_nan = torch.tensor([3., NAN, 1., -0., 0., NAN, INF, 1., -INF, 2.5])

# ------------------------------------------------------------------ sort / argsort
for dt in NUM_DT:
    for desc in (False, True):
        rf.case(f"sort_{short(dt)}_{desc}", "sort", [distinct((3, 5), dt)],
                lambda a, desc=desc: torch.sort(a, dim=-1, descending=desc),
                call=f"torch.sort(a, -1, descending={desc})", args={"dim": -1, "descending": desc})
        rf.case(f"sort_stable_ties_{short(dt)}_{desc}", "sort", [ties((4, 7), dt)],
                lambda a, desc=desc: torch.sort(a, dim=1, descending=desc, stable=True),
                call=f"torch.sort(a, 1, descending={desc}, stable=True)", args={"dim": 1, "descending": desc})
for desc in (False, True):
    rf.case(f"sort_bool_{desc}", "sort", [ties((3, 6), torch.bool)],
            lambda a, desc=desc: torch.sort(a, dim=1, descending=desc, stable=True),
            call=f"torch.sort(a:bool, 1, descending={desc}, stable=True)", args={"dim": 1, "descending": desc})
    rf.case(f"sort_nan_{desc}", "sort", [x_nan], lambda a, desc=desc: torch.sort(a, descending=desc, stable=True),
            call=f"torch.sort(x_nan, descending={desc}, stable=True)", args={"dim": -1, "descending": desc})
    rf.case(f"sort_nan_f16_{desc}", "sort", [x_nan.half()],
            lambda a, desc=desc: torch.sort(a, descending=desc, stable=True),
            call=f"torch.sort(x_nan:f16, descending={desc}, stable=True)", args={"dim": -1, "descending": desc})
x = distinct((3, 4, 5))
for d in (0, 1, 2, -2):
    rf.case(f"sort_dim{d}", "sort", [x], lambda a, d=d: torch.sort(a, dim=d), call=f"torch.sort(a, {d})",
            args={"dim": d, "descending": False})
rf.case("sort_noncontig", "sort", [distinct((5, 4))], lambda a: torch.sort(a, 1, descending=True),
        call="torch.sort(a.t(), 1, descending=True)", args={"dim": 1, "descending": True}, views=[[["t"]]])
rf.case("sort_scalar", "sort", [torch.tensor(2.)], lambda a: torch.sort(a), call="torch.sort(tensor(2.))",
        args={"dim": -1, "descending": False})
rf.case("sort_empty", "sort", [torch.zeros(2, 0)], lambda a: torch.sort(a, 1), call="torch.sort(zeros(2, 0), 1)",
        args={"dim": 1, "descending": False})
rf.case("sort_long_row", "sort", [distinct((2, 300))], lambda a: torch.sort(a, 1), call="torch.sort(a[2,300], 1)",
        args={"dim": 1, "descending": False})
rf.error_case("sort_bad_dim", "sort", [x], lambda a: torch.sort(a, 3), call="torch.sort(a, 3)",
              args={"dim": 3, "descending": False})
for desc in (False, True):
    rf.case(f"argsort_ties_{desc}", "argsort", [ties((3, 8), torch.int64)],
            lambda a, desc=desc: torch.argsort(a, dim=0, descending=desc, stable=True),
            call=f"torch.argsort(a, 0, descending={desc}, stable=True)", args={"dim": 0, "descending": desc})
rf.case("argsort_nan", "argsort", [x_nan], lambda a: torch.argsort(a, stable=True),
        call="torch.argsort(x_nan, stable=True)", args={"dim": -1, "descending": False})

# ------------------------------------------------------------------ topk
for dt in NUM_DT:
    for largest in (True, False):
        rf.case(f"topk_{short(dt)}_{largest}", "topk", [distinct((4, 6), dt)],
                lambda a, largest=largest: torch.topk(a, 3, dim=1, largest=largest),
                call=f"torch.topk(a, 3, 1, largest={largest})", args={"k": 3, "dim": 1, "largest": largest})
for k in (0, 1, 4, 5):
    rf.case(f"topk_k{k}", "topk", [distinct((3, 5))], lambda a, k=k: torch.topk(a, k), call=f"torch.topk(a, {k})",
            args={"k": k, "dim": -1, "largest": True})
for d in (0, 1, 2):
    rf.case(f"topk_dim{d}", "topk", [x], lambda a, d=d: torch.topk(a, 2, dim=d, largest=False),
            call=f"torch.topk(a, 2, {d}, largest=False)", args={"k": 2, "dim": d, "largest": False})
rf.case("topk_noncontig", "topk", [distinct((6, 4))], lambda a: torch.topk(a, 2, 1), call="torch.topk(a.t(), 2, 1)",
        args={"k": 2, "dim": 1, "largest": True}, views=[[["t"]]])
rf.case("topk_scalar", "topk", [torch.tensor(2.)], lambda a: torch.topk(a, 1), call="torch.topk(tensor(2.), 1)",
        args={"k": 1, "dim": -1, "largest": True})
rf.case("topk_long_row", "topk", [distinct((2, 500))], lambda a: torch.topk(a, 7, 1), call="torch.topk(a[2,500], 7)",
        args={"k": 7, "dim": 1, "largest": True})
for largest in (True, False):
    rf.case(f"topk_values_ties_{largest}", "topk_values", [ties((3, 9), torch.int64)],
            lambda a, largest=largest: torch.topk(a, 4, largest=largest).values,
            call=f"torch.topk(a_ties, 4, largest={largest}).values", args={"k": 4, "dim": -1, "largest": largest})
    rf.case(f"topk_values_nan_{largest}", "topk_values", [x_nan],
            lambda a, largest=largest: torch.topk(a, 4, largest=largest).values,
            call=f"torch.topk(x_nan, 4, largest={largest}).values", args={"k": 4, "dim": -1, "largest": largest})
rf.error_case("topk_k_too_big", "topk", [distinct((3, 5))], lambda a: torch.topk(a, 6), call="torch.topk(a[3,5], 6)",
              args={"k": 6, "dim": -1, "largest": True})

# ------------------------------------------------------------------ kthvalue
for dt in NUM_DT:
    rf.case(f"kthvalue_{short(dt)}", "kthvalue", [distinct((4, 5), dt)], lambda a: torch.kthvalue(a, 2, 1),
            call="torch.kthvalue(a, 2, 1)", args={"k": 2, "dim": 1, "keepdim": False})
for k in (1, 3, 5):
    for keepdim in (False, True):
        rf.case(f"kthvalue_k{k}_{keepdim}", "kthvalue", [distinct((5, 3))],
                lambda a, k=k, keepdim=keepdim: torch.kthvalue(a, k, 0, keepdim=keepdim),
                call=f"torch.kthvalue(a, {k}, 0, keepdim={keepdim})", args={"k": k, "dim": 0, "keepdim": keepdim})
rf.case("kthvalue_3d", "kthvalue", [x], lambda a: torch.kthvalue(a, 3, -1), call="torch.kthvalue(a, 3, -1)",
        args={"k": 3, "dim": -1, "keepdim": False})
rf.case("kthvalue_noncontig", "kthvalue", [distinct((4, 6))], lambda a: torch.kthvalue(a, 2, 1),
        call="torch.kthvalue(a.t(), 2, 1)", args={"k": 2, "dim": 1, "keepdim": False}, views=[[["t"]]])
rf.case("kthvalue_scalar", "kthvalue", [torch.tensor(2.)], lambda a: torch.kthvalue(a, 1),
        call="torch.kthvalue(tensor(2.), 1)", args={"k": 1, "dim": -1, "keepdim": False})
rf.case("kthvalue_nan", "kthvalue_values", [x_nan], lambda a: torch.kthvalue(a, 9).values,
        call="torch.kthvalue(x_nan, 9).values", args={"k": 9, "dim": -1, "keepdim": False})
rf.case("kthvalue_ties", "kthvalue_values", [ties((3, 8), torch.int32)], lambda a: torch.kthvalue(a, 4, 1).values,
        call="torch.kthvalue(a_ties, 4, 1).values", args={"k": 4, "dim": 1, "keepdim": False})
rf.error_case("kthvalue_k0", "kthvalue", [x], lambda a: torch.kthvalue(a, 0), call="torch.kthvalue(a, 0)",
              args={"k": 0, "dim": -1, "keepdim": False})
rf.error_case("kthvalue_k_big", "kthvalue", [x], lambda a: torch.kthvalue(a, 6), call="torch.kthvalue(a[..,5], 6)",
              args={"k": 6, "dim": -1, "keepdim": False})
rf.error_case("kthvalue_empty", "kthvalue", [torch.zeros(0)], lambda a: torch.kthvalue(a, 1),
              call="torch.kthvalue(zeros(0), 1)", args={"k": 1, "dim": -1, "keepdim": False})


# ------------------------------------------------------------------ unique
def unique_case(name, x, inv, cnt, dim=None, views=None):
    def fn(a):
        r = torch.unique(a, sorted=True, return_inverse=inv, return_counts=cnt, dim=dim)
        return r

    text = f"torch.unique(a, return_inverse={inv}, return_counts={cnt}" + (f", dim={dim})" if dim is not None else ")")
    rf.case(name, "unique" if dim is None else "unique_dim", [x], fn, call=text,
            args={"return_inverse": inv, "return_counts": cnt, "dim": dim}, views=views)


for dt in ALL_DT:
    unique_case(f"unique_{short(dt)}", ties((3, 5), dt), True, True)
unique_case("unique_plain", ties((10,), torch.int64), False, False)
unique_case("unique_inverse", ties((2, 6), torch.int64), True, False)
unique_case("unique_counts", ties((2, 6), torch.int64), False, True)
unique_case("unique_nan", x_nan, True, True)
unique_case("unique_scalar", torch.tensor(3.), True, True)
unique_case("unique_empty", torch.zeros(0, 3), True, True)
unique_case("unique_noncontig", ties((3, 4), torch.float32), True, True, views=[[["t"]]])
y = torch.tensor([[3, 1, 3], [1, 2, 1], [3, 1, 3], [0, 0, 0]])
unique_case("unique_dim0", y, True, True, dim=0)
unique_case("unique_dim1", y, True, True, dim=1)
unique_case("unique_dim_neg", ties((2, 6, 2), torch.int64) % 2, True, True, dim=-2)
unique_case("unique_dim_float", torch.tensor([[1., 2.], [0.5, 3.], [1., 2.]]), True, True, dim=0)

# ------------------------------------------------------------------ searchsorted / bucketize
seq = torch.tensor([-2., 0., 0., 1.5, 3., 3., 7.])
vals = torch.tensor([[-3., 0., 0.5], [3., 7., 8.], [NAN, 1.5, -2.]])


def ss_case(name, s, v, right=False, side=None, out_int32=False, views=None):
    def fn(a, b):
        return torch.searchsorted(a, b, right=right, side=side, out_int32=out_int32)

    rf.case(name, "searchsorted", [s, v], fn,
            call=f"torch.searchsorted(s, v, right={right}, side={side!r}, out_int32={out_int32})",
            args={"right": right, "side": side, "out_int32": out_int32}, views=views)


ss_case("searchsorted_left", seq, vals)
ss_case("searchsorted_right", seq, vals, right=True)
ss_case("searchsorted_side_right", seq, vals, side="right")
ss_case("searchsorted_side_left", seq, vals, side="left")
ss_case("searchsorted_out_int32", seq, vals, out_int32=True)
ss_case("searchsorted_seq_nan", torch.tensor([1., 2., 3., NAN]), torch.tensor([2., 0., 5., NAN]))
for dt in (torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8):
    ss_case(f"searchsorted_{short(dt)}", torch.tensor([0, 1, 3, 3, 5, 9]).to(dt), torch.tensor([3, 0, 4, 9, 10]).to(dt))
ss_case("searchsorted_mixed", torch.tensor([1, 2, 3], dtype=torch.int32), torch.tensor([2.5, 0.5, 3.]))
ss_case("searchsorted_nd", torch.sort(torch.randn(2, 3, 5), -1).values, torch.randn(2, 3, 4), right=True)
ss_case("searchsorted_scalar_value", seq, torch.tensor(1.5))
ss_case("searchsorted_empty_seq", torch.zeros(0), torch.tensor([1., 2.]))
ss_case("searchsorted_noncontig_values", seq, vals, views=[None, [["t"]]])
rf.error_case("searchsorted_mismatch", "searchsorted", [torch.zeros(2, 3), torch.zeros(3, 1)],
              lambda a, b: torch.searchsorted(a, b), call="torch.searchsorted(s[2,3], v[3,1])",
              args={"right": False, "side": None, "out_int32": False})
rf.error_case("searchsorted_side_conflict", "searchsorted", [seq, vals],
              lambda a, b: torch.searchsorted(a, b, right=True, side="left"),
              call="torch.searchsorted(s, v, right=True, side='left')",
              args={"right": True, "side": "left", "out_int32": False})
rf.error_case("searchsorted_scalar_seq", "searchsorted", [torch.tensor(1.), vals],
              lambda a, b: torch.searchsorted(a, b), call="torch.searchsorted(tensor(1.), v)",
              args={"right": False, "side": None, "out_int32": False})
rf.case("searchsorted_py_scalar", "searchsorted_scalar", [seq], lambda a: torch.searchsorted(a, 3),
        call="torch.searchsorted(s, 3)", args={"value": 3, "right": False})
rf.case("searchsorted_py_scalar_right", "searchsorted_scalar", [seq], lambda a: torch.searchsorted(a, 0.0, right=True),
        call="torch.searchsorted(s, 0.0, right=True)", args={"value": 0.0, "right": True})
for right in (False, True):
    rf.case(f"bucketize_{right}", "bucketize", [vals, seq], lambda a, b, r=right: torch.bucketize(a, b, right=r),
            call=f"torch.bucketize(v, s, right={right})", args={"right": right, "out_int32": False})
rf.case("bucketize_int_input", "bucketize", [torch.tensor([[2, 0], [5, 3]]), torch.tensor([1., 2., 3.])],
        lambda a, b: torch.bucketize(a, b, right=True, out_int32=True),
        call="torch.bucketize(v:i64, s, right=True, out_int32=True)", args={"right": True, "out_int32": True})
rf.case("bucketize_scalar", "bucketize", [torch.tensor(2.), seq], lambda a, b: torch.bucketize(a, b),
        call="torch.bucketize(tensor(2.), s)", args={"right": False, "out_int32": False})
rf.error_case("bucketize_2d_boundaries", "bucketize", [vals, torch.zeros(1, 3)],
              lambda a, b: torch.bucketize(a, b), call="torch.bucketize(v, zeros(1, 3))",
              args={"right": False, "out_int32": False})

rf.save()
