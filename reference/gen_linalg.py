"""Reference data for Pyrite's linear algebra ops: matmul (every rank combination), mm, bmm,
addmm, baddbmm, mv, dot, outer/ger, matmul with out=, and einsum.

Run: python3 reference/gen_linalg.py  ->  reference/data/linalg.safetensors
"""
import torch

from refgen import RefFile

torch.manual_seed(0)
rf = RefFile("linalg")

F32_TOL = dict(atol=1e-5, rtol=1e-5)  # sums of products round differently between BLASes


def randn(*s, dtype=torch.float32, scale=1.0):
    return (torch.randn(s, dtype=torch.float64) * scale).to(dtype)


def randint(*s, dtype=torch.int64, lo=-5, hi=6):
    return torch.randint(lo, hi, s, dtype=dtype)


def tol(dtype):
    return F32_TOL if dtype == torch.float32 else {}


# ----------------------------------------------------------------------------- matmul
SHAPES = [
    ("dot", (5,), (5,)),
    ("mv", (3, 4), (4,)),
    ("vm", (4,), (4, 3)),
    ("mm", (3, 4), (4, 5)),
    ("bmm3_mat", (2, 3, 4), (4, 5)),  # batch folded into rows
    ("bmm3_vec", (2, 3, 4), (4,)),
    ("vec_bmm3", (4,), (2, 4, 3)),
    ("mat_bmm3", (3, 4), (2, 4, 5)),
    ("bmm3", (2, 3, 4), (2, 4, 5)),
    ("bcast_batch", (2, 1, 3, 4), (5, 4, 2)),
    ("bcast_batch2", (1, 3, 4), (3, 1, 4, 2)),
    ("bmm4", (2, 3, 2, 4), (2, 3, 4, 3)),
    ("col", (4, 1), (1, 3)),
    ("row", (1, 4), (4, 1)),
    ("mm_odd", (7, 13), (13, 9)),
]
for name, sa, sb in SHAPES:
    for dt in (torch.float32, torch.float64):
        a, b = randn(*sa, dtype=dt), randn(*sb, dtype=dt)
        rf.case(f"matmul_{name}_{dt}".replace("torch.", ""), "matmul", [a, b], lambda a, b: torch.matmul(a, b),
                call="torch.matmul(a, b)", **tol(dt))

# half precision (f32 accumulation, one rounding) and integers (wrapping)
for dt in (torch.float16, torch.bfloat16):
    for name, sa, sb in [("mm", (3, 8), (8, 5)), ("bmm3", (2, 3, 6), (2, 6, 4)), ("dot", (9,), (9,)),
                         ("mv", (4, 6), (6,)), ("vm", (6,), (6, 3)), ("bcast", (3, 1, 2, 5), (4, 5, 3))]:
        a, b = randn(*sa, dtype=dt, scale=0.5), randn(*sb, dtype=dt, scale=0.5)
        rf.case(f"matmul_{name}_{dt}".replace("torch.", ""), "matmul", [a, b], lambda a, b: torch.matmul(a, b),
                call="torch.matmul(a, b)")
for dt in (torch.int64, torch.int32, torch.uint8):
    lo, hi = (0, 256) if dt == torch.uint8 else (-5, 6)
    for name, sa, sb in [("mm", (3, 4), (4, 5)), ("bmm3", (2, 3, 4), (2, 4, 2)), ("dot", (6,), (6,)),
                         ("mv", (3, 5), (5,)), ("vm", (5,), (5, 2)), ("bcast", (2, 1, 2, 3), (3, 3, 2))]:
        a, b = randint(*sa, dtype=dt, lo=lo, hi=hi), randint(*sb, dtype=dt, lo=lo, hi=hi)
        rf.case(f"matmul_{name}_{dt}".replace("torch.", ""), "matmul", [a, b], lambda a, b: torch.matmul(a, b),
                call="torch.matmul(a, b)")
# int32 products that overflow wrap around
a = torch.randint(-2**31, 2**31 - 1, (3, 4), dtype=torch.int32)
b = torch.randint(-2**31, 2**31 - 1, (4, 2), dtype=torch.int32)
rf.case("matmul_i32_wrap", "matmul", [a, b], lambda a, b: torch.matmul(a, b), call="torch.matmul(a, b)")
a = torch.randint(-2**62, 2**62, (2, 3), dtype=torch.int64)
b = torch.randint(-2**62, 2**62, (3, 2), dtype=torch.int64)
rf.case("matmul_i64_wrap", "matmul", [a, b], lambda a, b: torch.matmul(a, b), call="torch.matmul(a, b)")

# non-contiguous operands: transposed, sliced, expanded, permuted
a, b = randn(5, 3), randn(4, 5)
rf.case("matmul_t_t", "matmul", [a, b], lambda a, b: a @ b, call="a.t() @ b.t()", views=[[["t"]], [["t"]]], **F32_TOL)
a, b = randn(6, 8), randn(8, 10)
rf.case("matmul_slices", "matmul", [a, b], lambda a, b: a @ b, call="a[::2, 1:7] @ b[1:7, ::3]",
        views=[[["slice", 0, 0, 6, 2], ["slice", 1, 1, 7, 1]], [["slice", 0, 1, 7, 1], ["slice", 1, 0, 10, 3]]],
        **F32_TOL)
a, b = randn(1, 3, 4), randn(4, 2)
rf.case("matmul_expand", "matmul", [a, b], lambda a, b: a @ b, call="a.expand(5, 3, 4) @ b",
        views=[[["expand", [5, 3, 4]]], None], **F32_TOL)
a, b = randn(1, 3, 4), randn(1, 4, 2)
rf.case("matmul_expand_both", "matmul", [a, b], lambda a, b: a @ b, call="a.expand(3, 3, 4) @ b.expand(3, 4, 2)",
        views=[[["expand", [3, 3, 4]]], [["expand", [3, 4, 2]]]], **F32_TOL)
a, b = randn(4, 2, 3), randn(2, 5, 4)
rf.case("matmul_permuted", "matmul", [a, b], lambda a, b: a @ b, call="a.permute(1, 2, 0) @ b.transpose(1, 2)",
        views=[[["permute", [1, 2, 0]]], [["transpose", 1, 2]]], **F32_TOL)
a, b = randn(3, 7), randn(7)
rf.case("matmul_vec_strided", "matmul", [a, b], lambda a, b: a @ b, call="a[:, ::2] @ b[::2]",
        views=[[["slice", 1, 0, 7, 2]], [["slice", 0, 0, 7, 2]]], **F32_TOL)
a, b = randn(3, 4, 2), randn(2, 5)
rf.case("matmul_noncontig_fold", "matmul", [a, b], lambda a, b: a @ b, call="a.transpose(0, 1) @ b",
        views=[[["transpose", 0, 1]], None], **F32_TOL)
a, b = randn(2, 5, 3), randn(3, 2, 5)
rf.case("matmul_ex_col_batch", "matmul", [a, b], lambda a, b: a @ b, call="a.t-ish @ b.permute",
        views=[[["permute", [0, 2, 1]]], [["permute", [1, 2, 0]]]], **F32_TOL)
# larger products: multi-threaded gemm and the batch-split path
a, b = randn(65, 70), randn(70, 66)
rf.case("matmul_large", "matmul", [a, b], lambda a, b: a @ b, call="torch.matmul(a, b)", atol=3e-5, rtol=1e-5)
a, b = randn(12, 20, 24, dtype=torch.float16, scale=0.5), randn(12, 24, 20, dtype=torch.float16, scale=0.5)
rf.case("matmul_batch_split_f16", "matmul", [a, b], lambda a, b: a @ b, call="torch.matmul(a, b)")
a, b = randint(40, 60, dtype=torch.uint8, lo=0, hi=256), randint(60, 120, dtype=torch.uint8, lo=0, hi=256)
rf.case("matmul_large_u8", "matmul", [a, b], lambda a, b: a @ b, call="torch.matmul(a, b)")
# empty
for name, sa, sb in [("k0", (2, 0), (0, 3)), ("m0", (0, 3), (3, 4)), ("n0", (2, 3), (3, 0)),
                     ("b0", (0, 2, 3), (3, 4)), ("dot0", (0,), (0,))]:
    rf.case(f"matmul_empty_{name}", "matmul", [randn(*sa), randn(*sb)], lambda a, b: a @ b, call="torch.matmul(a, b)")
# NaN and inf propagate like any product
a = randn(2, 3)
a[0, 1] = float("nan")
a[1, 2] = float("inf")
rf.case("matmul_nan_inf", "matmul", [a, randn(3, 2).abs()], lambda a, b: a @ b, call="torch.matmul(a, b)")

# errors
E = [
    ("matmul_err_0d", [torch.tensor(1.0), randn(3)]),
    ("matmul_err_0d_b", [randn(3), torch.tensor(1.0)]),
    ("matmul_err_dot_size", [randn(3), randn(4)]),
    ("matmul_err_mv", [randn(2, 3), randn(4)]),
    ("matmul_err_vm", [randn(4), randn(2, 3)]),
    ("matmul_err_mm", [randn(2, 3), randn(4, 5)]),
    ("matmul_err_batch_bcast", [randn(2, 2, 3), randn(3, 3, 5)]),
    ("matmul_err_batch_k", [randn(2, 2, 3), randn(2, 4, 5)]),
    ("matmul_err_fold_k", [randn(2, 2, 3), randn(4, 5)]),
    ("matmul_err_dtype", [randn(2, 3), randn(3, 4, dtype=torch.float64)]),
    ("matmul_err_dtype_dot", [randn(3), randn(3, dtype=torch.float64)]),
    ("matmul_err_dtype_int", [randint(2, 3), randint(3, 4, dtype=torch.int32)]),
    ("matmul_err_bool", [randn(2, 3) > 0, randn(3, 4) > 0]),
    ("matmul_err_half_float", [randn(2, 3, dtype=torch.float16), randn(3, 4)]),
]
for name, ins in E:
    rf.error_case(name, "matmul", ins, lambda a, b: torch.matmul(a, b), call="torch.matmul(a, b)")

# out=: written into an existing (possibly transposed) tensor
for name, sa, sb, out_t in [("mm", (3, 4), (4, 5), False), ("mm_t", (3, 4), (4, 5), True),
                            ("bmm", (2, 3, 4), (4, 2), False), ("mv", (3, 4), (4,), False), ("dot", (4,), (4,), False)]:
    a, b = randn(*sa), randn(*sb)
    rf.case(f"matmul_out_{name}", "matmul_out", [a, b], lambda a, b: torch.matmul(a, b),
            call="torch.matmul(a, b, out=out)", args={"out_t": out_t}, **F32_TOL)
rf.error_case("matmul_out_err_dtype", "matmul_out", [randn(2, 3), randn(3, 4)],
              lambda a, b: torch.matmul(a, b, out=torch.empty(2, 4, dtype=torch.float64)),
              call="torch.matmul(a, b, out=torch.empty(2, 4, dtype=torch.float64))", args={"out_dtype": "float64"})

# ----------------------------------------------------------------------------- mm / bmm
rf.case("mm_f32", "mm", [randn(3, 5), randn(5, 2)], lambda a, b: torch.mm(a, b), call="torch.mm(a, b)", **F32_TOL)
rf.case("mm_i64", "mm", [randint(3, 5), randint(5, 2)], lambda a, b: torch.mm(a, b), call="torch.mm(a, b)")
rf.case("mm_bf16_t", "mm", [randn(5, 3, dtype=torch.bfloat16), randn(5, 4, dtype=torch.bfloat16)],
        lambda a, b: torch.mm(a, b), call="torch.mm(a.t(), b)", views=[[["t"]], None])
rf.error_case("mm_err_1d", "mm", [randn(3), randn(3, 2)], lambda a, b: torch.mm(a, b), call="torch.mm(a, b)")
rf.error_case("mm_err_3d", "mm", [randn(2, 3), randn(2, 3, 2)], lambda a, b: torch.mm(a, b), call="torch.mm(a, b)")
rf.error_case("mm_err_shape", "mm", [randn(2, 3), randn(2, 3)], lambda a, b: torch.mm(a, b), call="torch.mm(a, b)")
rf.case("bmm_f64", "bmm", [randn(3, 2, 4, dtype=torch.float64), randn(3, 4, 5, dtype=torch.float64)],
        lambda a, b: torch.bmm(a, b), call="torch.bmm(a, b)")
rf.case("bmm_i32_t", "bmm", [randint(3, 4, 2, dtype=torch.int32), randint(3, 4, 5, dtype=torch.int32)],
        lambda a, b: torch.bmm(a, b), call="torch.bmm(a.transpose(1, 2), b)", views=[[["transpose", 1, 2]], None])
rf.case("bmm_f16", "bmm", [randn(2, 3, 4, dtype=torch.float16, scale=0.5), randn(2, 4, 3, dtype=torch.float16, scale=0.5)],
        lambda a, b: torch.bmm(a, b), call="torch.bmm(a, b)")
rf.error_case("bmm_err_2d", "bmm", [randn(2, 3), randn(2, 3, 5)], lambda a, b: torch.bmm(a, b), call="torch.bmm(a, b)")
rf.error_case("bmm_err_batch", "bmm", [randn(2, 2, 3), randn(3, 3, 5)], lambda a, b: torch.bmm(a, b), call="torch.bmm(a, b)")
rf.error_case("bmm_err_k", "bmm", [randn(2, 2, 3), randn(2, 4, 5)], lambda a, b: torch.bmm(a, b), call="torch.bmm(a, b)")
rf.error_case("bmm_err_dtype", "bmm", [randn(2, 2, 3), randn(2, 3, 5, dtype=torch.float64)],
              lambda a, b: torch.bmm(a, b), call="torch.bmm(a, b)")
rf.error_case("bmm_err_bool", "bmm", [randn(2, 2, 3) > 0, randn(2, 3, 5) > 0], lambda a, b: torch.bmm(a, b),
              call="torch.bmm(a, b)")

# ----------------------------------------------------------------------------- addmm / baddbmm
for name, si, beta, alpha in [("full", (3, 4), 1, 1), ("row_bias", (4,), 1, 1), ("scaled", (3, 4), 0.5, -2.0),
                              ("col_bias", (3, 1), 2, 0.25), ("scalar_in", (), 1, 1)]:
    rf.case(f"addmm_{name}", "addmm", [randn(*si), randn(3, 5), randn(5, 4)],
            lambda i, a, b: torch.addmm(i, a, b, beta=beta, alpha=alpha),
            call=f"torch.addmm(input, a, b, beta={beta}, alpha={alpha})", args={"beta": beta, "alpha": alpha}, **F32_TOL)
nan_in = torch.full((2, 2), float("nan"))
rf.case("addmm_beta0_nan", "addmm", [nan_in, randn(2, 3), randn(3, 2)], lambda i, a, b: torch.addmm(i, a, b, beta=0),
        call="torch.addmm(nan, a, b, beta=0)", args={"beta": 0, "alpha": 1}, **F32_TOL)
nan_a = torch.full((2, 3), float("nan"))
rf.case("addmm_alpha0_nan", "addmm", [randn(2, 2), nan_a, randn(3, 2)], lambda i, a, b: torch.addmm(i, a, b, alpha=0),
        call="torch.addmm(i, nan, b, alpha=0)", args={"beta": 1, "alpha": 0})
for name, beta, alpha in [("int", 2, 3), ("int_float_alpha", 1, 1.7), ("int_float_beta", 0.5, -1.7)]:
    rf.case(f"addmm_{name}", "addmm", [randint(2, 5), randint(2, 3), randint(3, 5)],
            lambda i, a, b: torch.addmm(i, a, b, beta=beta, alpha=alpha),
            call=f"torch.addmm(i, a, b, beta={beta}, alpha={alpha})", args={"beta": beta, "alpha": alpha})
rf.case("addmm_bf16", "addmm", [randn(4, dtype=torch.bfloat16), randn(3, 5, dtype=torch.bfloat16, scale=0.5),
                                randn(5, 4, dtype=torch.bfloat16, scale=0.5)],
        lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2), call="torch.addmm(i, a, b, beta=0.5, alpha=2)",
        args={"beta": 0.5, "alpha": 2})
rf.case("addmm_f64_t", "addmm", [randn(4, 3, dtype=torch.float64), randn(5, 3, dtype=torch.float64),
                                 randn(4, 5, dtype=torch.float64)],
        lambda i, a, b: torch.addmm(i, a, b), call="torch.addmm(i.t(), a.t(), b.t())",
        args={"beta": 1, "alpha": 1}, views=[[["t"]], [["t"]], [["t"]]])
rf.error_case("addmm_err_input", "addmm", [randn(3, 5), randn(2, 3), randn(3, 5)],
              lambda i, a, b: torch.addmm(i, a, b), call="torch.addmm(i, a, b)", args={"beta": 1, "alpha": 1})
rf.error_case("addmm_err_dtype", "addmm", [randn(2, 5, dtype=torch.float64), randn(2, 3), randn(3, 5)],
              lambda i, a, b: torch.addmm(i, a, b), call="torch.addmm(i, a, b)", args={"beta": 1, "alpha": 1})
rf.error_case("addmm_err_shape", "addmm", [randn(2, 5), randn(2, 3), randn(4, 5)],
              lambda i, a, b: torch.addmm(i, a, b), call="torch.addmm(i, a, b)", args={"beta": 1, "alpha": 1})
rf.case("baddbmm_f32", "baddbmm", [randn(2, 3, 4), randn(2, 3, 5), randn(2, 5, 4)],
        lambda i, a, b: torch.baddbmm(i, a, b, beta=0.5, alpha=1.5), call="torch.baddbmm(i, a, b, beta=0.5, alpha=1.5)",
        args={"beta": 0.5, "alpha": 1.5}, **F32_TOL)
rf.case("baddbmm_bcast", "baddbmm", [randn(4), randn(2, 3, 5), randn(2, 5, 4)],
        lambda i, a, b: torch.baddbmm(i, a, b), call="torch.baddbmm(i, a, b)", args={"beta": 1, "alpha": 1}, **F32_TOL)
rf.case("baddbmm_i64", "baddbmm", [randint(2, 1, 2), randint(2, 3, 5), randint(2, 5, 2)],
        lambda i, a, b: torch.baddbmm(i, a, b, beta=-1, alpha=2), call="torch.baddbmm(i, a, b, beta=-1, alpha=2)",
        args={"beta": -1, "alpha": 2})
rf.error_case("baddbmm_err_input", "baddbmm", [randn(3, 2, 5), randn(2, 2, 3), randn(2, 3, 5)],
              lambda i, a, b: torch.baddbmm(i, a, b), call="torch.baddbmm(i, a, b)", args={"beta": 1, "alpha": 1})

# ----------------------------------------------------------------------------- mv / dot / outer
rf.case("mv_f32", "mv", [randn(4, 6), randn(6)], lambda a, b: torch.mv(a, b), call="torch.mv(a, b)", **F32_TOL)
rf.case("mv_t", "mv", [randn(6, 4), randn(6)], lambda a, b: torch.mv(a, b), call="torch.mv(a.t(), b)",
        views=[[["t"]], None], **F32_TOL)
rf.case("mv_u8", "mv", [randint(3, 4, dtype=torch.uint8, lo=0, hi=256), randint(4, dtype=torch.uint8, lo=0, hi=256)],
        lambda a, b: torch.mv(a, b), call="torch.mv(a, b)")
rf.error_case("mv_err_size", "mv", [randn(2, 3), randn(4)], lambda a, b: torch.mv(a, b), call="torch.mv(a, b)")
rf.error_case("mv_err_rank", "mv", [randn(2, 3), randn(3, 1)], lambda a, b: torch.mv(a, b), call="torch.mv(a, b)")
rf.error_case("mv_err_dtype", "mv", [randn(2, 3), randn(3, dtype=torch.float64)], lambda a, b: torch.mv(a, b),
              call="torch.mv(a, b)")
rf.case("dot_f64", "dot", [randn(7, dtype=torch.float64), randn(7, dtype=torch.float64)], lambda a, b: torch.dot(a, b),
        call="torch.dot(a, b)")
rf.case("dot_strided", "dot", [randn(10), randn(5)], lambda a, b: torch.dot(a, b), call="torch.dot(a[::2], b)",
        views=[[["slice", 0, 0, 10, 2]], None], **F32_TOL)
rf.case("dot_i64", "dot", [randint(6), randint(6)], lambda a, b: torch.dot(a, b), call="torch.dot(a, b)")
rf.case("dot_bf16", "dot", [randn(8, dtype=torch.bfloat16), randn(8, dtype=torch.bfloat16)], lambda a, b: torch.dot(a, b),
        call="torch.dot(a, b)")
rf.error_case("dot_err_2d", "dot", [randn(3, 1), randn(3)], lambda a, b: torch.dot(a, b), call="torch.dot(a, b)")
rf.error_case("dot_err_size", "dot", [randn(3), randn(4)], lambda a, b: torch.dot(a, b), call="torch.dot(a, b)")
rf.error_case("dot_err_bool", "dot", [randn(3) > 0, randn(3) > 0], lambda a, b: torch.dot(a, b), call="torch.dot(a, b)")
rf.case("outer_f32", "outer", [randn(3), randn(4)], lambda a, b: torch.outer(a, b), call="torch.outer(a, b)")
rf.case("outer_promote", "outer", [randint(3), randn(4, dtype=torch.float64)], lambda a, b: torch.outer(a, b),
        call="torch.outer(a, b)")
rf.case("outer_bool", "outer", [randn(3) > 0, randn(2) > 0], lambda a, b: torch.outer(a, b), call="torch.outer(a, b)")
rf.case("ger_f16", "ger", [randn(3, dtype=torch.float16), randn(2, dtype=torch.float16)], lambda a, b: torch.ger(a, b),
        call="torch.ger(a, b)")
rf.error_case("outer_err_2d", "outer", [randn(3), randn(4, 1)], lambda a, b: torch.outer(a, b), call="torch.outer(a, b)")

# ----------------------------------------------------------------------------- einsum
EIN = [
    ("mm", "ij,jk->ik", [(3, 4), (4, 5)]),
    ("mm_implicit", "ij,jk", [(3, 4), (4, 5)]),
    ("transpose", "ij->ji", [(3, 4)]),
    ("transpose_implicit", "ji", [(3, 4)]),
    ("upper_first", "bA", [(2, 3)]),
    ("trace", "ii->", [(4, 4)]),
    ("trace_implicit", "ii", [(4, 4)]),
    ("diag", "ii->i", [(4, 4)]),
    ("diag3", "iji->ij", [(3, 2, 3)]),
    ("sum_all", "ij->", [(3, 4)]),
    ("sum_rows", "ij->j", [(3, 4)]),
    ("dot", "i,i->", [(5,), (5,)]),
    ("dot_implicit", "i,i", [(5,), (5,)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("hadamard", "ij,ij->ij", [(3, 4), (3, 4)]),
    ("bmm", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("batch_out_perm", "bij,bjk->kib", [(2, 3, 4), (2, 4, 5)]),
    ("ellipsis_mm", "...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ellipsis_bcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ellipsis_implicit", "...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("ellipsis_sum", "...i->i", [(2, 3, 4)]),
    ("ellipsis_mid", "i...j->ji...", [(2, 3, 4, 5)]),
    ("ellipsis_dropped", "...i,...i", [(2, 3), (1, 3)]),
    ("ellipsis_out_only", "ij->...", [(2, 3)]),
    ("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("three_vec", "i,ij,j->", [(3,), (3, 4), (4,)]),
    ("three_shared", "bi,bj,bk->bijk", [(2, 3), (2, 2), (2, 2)]),
    ("four", "ab,bc,cd,de->ae", [(2, 3), (3, 2), (2, 4), (4, 2)]),
    ("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("sum_first", "ij,jk->k", [(3, 4), (4, 5)]),
    ("only_one_side", "ij,kl->ik", [(2, 3), (4, 5)]),
    ("bcast_label", "ij,kj->ik", [(2, 1), (4, 3)]),
    ("bcast_label2", "i,j", [(2,), (1,)]),
    ("bcast_hadamard", "ij,ij->ij", [(2, 3), (1, 3)]),
    ("spaces", "i j , j k -> i k", [(2, 3), (3, 4)]),
    ("attention", "bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("scalar", "->", [()]),
    ("scalar_mul", ",ij->ij", [(), (2, 3)]),
    ("empty_contract", "ij,jk->ik", [(2, 0), (0, 3)]),
    ("repeat_two_ops", "iij,jk->ik", [(3, 3, 4), (4, 2)]),
]
for name, eq, shapes in EIN:
    ins = [randn(*s) for s in shapes]
    n = len(ins)
    names = ", ".join("abcd"[:n])
    rf.case(f"einsum_{name}", "einsum", ins, lambda *xs, eq=eq: torch.einsum(eq, *xs),
            call=f"torch.einsum('{eq}', {names})", args={"eq": eq}, **F32_TOL)
# non-contiguous operands
a, b = randn(4, 3), randn(5, 4)
rf.case("einsum_views", "einsum", [a, b], lambda a, b: torch.einsum("ij,jk->ik", a, b), call="einsum('ij,jk->ik', a.t(), b.t())",
        args={"eq": "ij,jk->ik"}, views=[[["t"]], [["t"]]], **F32_TOL)
a = randn(1, 4)
rf.case("einsum_expanded", "einsum", [a], lambda a: torch.einsum("ij->j", a), call="einsum('ij->j', a.expand(3, 4))",
        args={"eq": "ij->j"}, views=[[["expand", [3, 4]]]], **F32_TOL)
# dtypes: float64, half, integers (single-operand sums promote to int64, products keep the dtype)
rf.case("einsum_f64", "einsum", [randn(3, 4, dtype=torch.float64), randn(4, dtype=torch.float64)],
        lambda a, b: torch.einsum("ij,j->i", a, b), call="einsum('ij,j->i', a, b)", args={"eq": "ij,j->i"})
rf.case("einsum_bf16", "einsum", [randn(3, 4, dtype=torch.bfloat16, scale=0.5), randn(4, 2, dtype=torch.bfloat16, scale=0.5)],
        lambda a, b: torch.einsum("ij,jk->ik", a, b), call="einsum('ij,jk->ik', a, b)", args={"eq": "ij,jk->ik"})
rf.case("einsum_f16_sum", "einsum", [randn(3, 4, dtype=torch.float16)], lambda a: torch.einsum("ij->i", a),
        call="einsum('ij->i', a)", args={"eq": "ij->i"})
INT = [
    ("i64_mm", "ij,jk->ik", [(2, 3), (3, 4)], torch.int64),
    ("u8_sum", "ij->j", [(2, 3)], torch.uint8),
    ("i32_trace", "ii->", [(3, 3)], torch.int32),
    ("i32_diag", "ii->i", [(3, 3)], torch.int32),
    ("u8_transpose", "ij->ji", [(2, 3)], torch.uint8),
    ("u8_sum_then_mul", "ij,j->j", [(2, 3), (3,)], torch.uint8),
    ("u8_contract", "ij,j->i", [(2, 3), (3,)], torch.uint8),
    ("u8_outer", "i,j->ij", [(3,), (2,)], torch.uint8),
    ("u8_both_summed", "i,j->", [(3,), (2,)], torch.uint8),
    ("bool_outer", "i,j->ij", [(3,), (2,)], torch.bool),
    ("bool_sum", "ij->", [(2, 3)], torch.bool),
]
for name, eq, shapes, dt in INT:
    if dt == torch.bool:
        ins = [torch.randint(0, 2, s).bool() for s in shapes]
    else:
        ins = [randint(*s, dtype=dt, lo=0, hi=4) for s in shapes]
    names = ", ".join("abcd"[:len(ins)])
    rf.case(f"einsum_{name}", "einsum", ins, lambda *xs, eq=eq: torch.einsum(eq, *xs),
            call=f"torch.einsum('{eq}', {names})", args={"eq": eq})
EIN_ERR = [
    ("too_few", "ij,jk->ik", [(2, 3)]),
    ("too_many", "ij,jk->ik", [(2, 3), (3, 4), (3,)]),
    ("size", "ij,jk->ik", [(2, 3), (4, 4)]),
    ("rank_more", "ij,jk->ik", [(2, 3, 4), (3, 4)]),
    ("rank_fewer", "ijk,jk->ik", [(2, 3), (3, 4)]),
    ("rank_ellipsis", "ijk...->k", [(2, 3)]),
    ("diag_size", "ii->i", [(2, 3)]),
    ("bad_char", "i1->i", [(2, 3)]),
    ("out_repeat", "ij->ii", [(2, 3)]),
    ("out_unknown", "ij->k", [(2, 3)]),
    ("lone_dot", "i.j->i", [(2, 3)]),
    ("two_ellipses", "...i...->i", [(2, 3)]),
    ("out_two_ellipses", "...i->......", [(2, 3)]),
    ("ellipsis_bcast", "...i,...i->...", [(2, 3), (4, 3)]),
    ("double_arrow", "ij->ji->", [(2, 3)]),
    ("empty_eq", "", [(2, 3)]),
    ("dtype", "ij,jk->ik", [(2, 3), (3, 4)]),
    ("bool_contract", "i,i->", [(3,), (3,)]),
    ("promoted_mismatch", "ij,j->", [(2, 3), (3,)]),
]
for name, eq, shapes in EIN_ERR:
    ins = [randn(*s) for s in shapes]
    if name == "dtype":
        ins[1] = ins[1].double()
    if name == "bool_contract":
        ins = [x > 0 for x in ins]
    if name == "promoted_mismatch":
        ins = [randint(*s, dtype=torch.int32) for s in shapes]
    rf.error_case(f"einsum_err_{name}", "einsum", ins, lambda *xs, eq=eq: torch.einsum(eq, *xs),
                  call=f"torch.einsum('{eq}', ...)", args={"eq": eq})

rf.save()
