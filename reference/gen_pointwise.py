"""Reference data for pointwise ops, comparisons, casts, views and creation.

Run: python3 reference/gen_pointwise.py  (writes reference/data/pointwise.safetensors)
"""
import torch
import torch.nn.functional as F

from refgen import RefFile

torch.manual_seed(0)
rf = RefFile("pointwise")

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.uint8]


def rnd(shape, dtype, lo=-3.0, hi=3.0):
    if dtype.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype == torch.uint8:
        return torch.randint(0, 20, shape, dtype=dtype)
    return torch.randint(-20, 20, shape, dtype=dtype)


def nz(shape, dtype):
    """Random values with no zeros (divisors)."""
    x = rnd(shape, dtype)
    if dtype.is_floating_point:
        return torch.where(x.abs() < 0.25, torch.ones_like(x), x)
    return torch.where(x == 0, torch.ones_like(x), x)


def short(dt):
    return str(dt).replace("torch.", "")


# ------------------------------------------------------------------ binary
BIN = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "remainder": torch.remainder, "fmod": torch.fmod, "maximum": torch.maximum,
    "minimum": torch.minimum, "atan2": torch.atan2, "pow": torch.pow,
}
SHAPES = [((3, 4), (3, 4)), ((2, 1, 3), (4, 1)), ((5,), ()), ((0, 3), (3,)), ((), ())]
for op, fn in BIN.items():
    for dt in FLOATS + INTS:
        if op == "atan2" and not dt.is_floating_point:
            continue
        for k, (sa, sb) in enumerate(SHAPES):
            a = rnd(sa, dt)
            b = nz(sb, dt) if op in ("div", "remainder", "fmod") else rnd(sb, dt)
            if op == "pow":
                if dt.is_floating_point:
                    a = a.abs() + 0.1 if k % 2 == 0 else a
                    b = rnd(sb, dt, -2, 2)
                else:
                    b = torch.randint(0, 4, sb, dtype=dt)
            if op in ("remainder", "fmod") and dt == torch.uint8:
                b = torch.randint(1, 7, sb, dtype=dt)
            rf.case(f"{op}_{short(dt)}_{k}", op, [a, b], fn, call=f"torch.{op}(a, b)")
    # non-contiguous operands
    a = rnd((4, 6), torch.float32)
    b = nz((6, 4), torch.float32)
    rf.case(f"{op}_noncontig", op, [a, b], fn, call=f"torch.{op}(a[:, ::2], b.t()[:, 1::2])",
            views=[[["slice", 1, 0, None, 2]], [["t"], ["slice", 1, 1, None, 2]]])

# type promotion
PROMO = [
    (torch.int64, torch.float32, (3,), (3,)), (torch.int32, torch.float64, (3,), ()),
    (torch.uint8, torch.int32, (4,), (4,)), (torch.float16, torch.bfloat16, (2,), (2,)),
    (torch.bool, torch.float16, (3,), (3,)), (torch.float16, torch.float64, (3,), ()),
    (torch.int64, torch.uint8, (2, 2), ()), (torch.bool, torch.int32, (3,), (3,)),
]
for i, (da, db, sa, sb) in enumerate(PROMO):
    a, b = rnd(sa, da), nz(sb, db)
    for op in ("add", "mul", "div"):
        rf.case(f"promote_{op}_{i}", op, [a, b], BIN[op], call=f"torch.{op}(a:{short(da)}, b:{short(db)})")
rf.case("add_bool_bool", "add", [rnd((5,), torch.bool), rnd((5,), torch.bool)], torch.add, call="torch.add(bool, bool)")
rf.case("mul_bool_bool", "mul", [rnd((5,), torch.bool), rnd((5,), torch.bool)], torch.mul, call="torch.mul(bool, bool)")

# division rounding modes
for dt in [torch.float32, torch.float64, torch.int64, torch.int32]:
    a, b = rnd((4, 5), dt, -9, 9), nz((5,), dt)
    for mode in ("floor", "trunc"):
        rf.case(f"div_{mode}_{short(dt)}", "div_mode", [a, b], lambda a, b, m=mode: torch.div(a, b, rounding_mode=m),
                call=f"torch.div(a, b, rounding_mode='{mode}')", args={"mode": mode})
rf.case("floor_divide_neg", "div_mode", [torch.tensor([-7., 7., -7.5, 0.5]), torch.tensor([2., -2., 2., -0.25])],
        lambda a, b: torch.div(a, b, rounding_mode="floor"), call="torch.div(a, b, rounding_mode='floor')", args={"mode": "floor"})

# scalar forms
for op in ("add", "sub", "mul", "div", "pow", "remainder", "maximum"):
    for dt in (torch.float32, torch.int64, torch.float16):
        for s in (2, 2.5):
            if op == "maximum":
                fn = lambda a, s=s: torch.maximum(a, torch.tensor(s))
            else:
                fn = lambda a, s=s, op=op: getattr(torch, op)(a, s)
            a = rnd((3, 2), dt) if op != "pow" else rnd((3, 2), dt).abs()
            rf.case(f"{op}_scalar_{short(dt)}_{s}", f"{op}_scalar", [a], fn, call=f"torch.{op}(a, {s!r})",
                    args={"other": s})

rf.error_case("sub_bool_error", "sub", [rnd((3,), torch.bool), rnd((3,), torch.bool)], torch.sub, call="torch.sub(bool, bool)")
rf.error_case("add_shape_error", "add", [rnd((3,), torch.float32), rnd((4,), torch.float32)], torch.add, call="torch.add(a[3], b[4])")
rf.error_case("floor_divide_int_zero", "div_mode", [torch.tensor([1, 2]), torch.tensor([1, 0])],
              lambda a, b: torch.div(a, b, rounding_mode="floor"), call="torch.div(int, 0, rounding_mode='floor')", args={"mode": "floor"})
rf.error_case("neg_bool_error", "neg", [rnd((3,), torch.bool)], torch.neg, call="torch.neg(bool)")

# ------------------------------------------------------------------ unary
UNARY = {
    "neg": (torch.neg, None), "abs": (torch.abs, None), "sign": (torch.sign, None), "sqrt": (torch.sqrt, (0.01, 9)),
    "rsqrt": (torch.rsqrt, (0.05, 9)), "square": (torch.square, None), "exp": (torch.exp, (-20, 20)),
    "exp2": (torch.exp2, (-10, 10)), "log": (torch.log, (0.01, 50)), "log2": (torch.log2, (0.01, 50)),
    "log10": (torch.log10, (0.01, 50)), "log1p": (torch.log1p, (-0.9, 5)), "expm1": (torch.expm1, (-5, 5)),
    "sin": (torch.sin, None), "cos": (torch.cos, None), "tan": (torch.tan, (-1.4, 1.4)),
    "asin": (torch.asin, (-0.99, 0.99)), "acos": (torch.acos, (-0.99, 0.99)), "atan": (torch.atan, None),
    "sinh": (torch.sinh, None), "cosh": (torch.cosh, None), "tanh": (torch.tanh, None),
    "sigmoid": (torch.sigmoid, (-20, 20)), "relu": (torch.relu, None), "silu": (F.silu, None),
    "mish": (F.mish, None), "erf": (torch.erf, None), "erfinv": (torch.erfinv, (-0.999, 0.999)),
    "floor": (torch.floor, None), "ceil": (torch.ceil, None), "round": (torch.round, None),
    "trunc": (torch.trunc, None), "frac": (torch.frac, None), "reciprocal": (torch.reciprocal, (0.1, 5)),
}
for op, (fn, rng) in UNARY.items():
    lo, hi = rng or (-4, 4)
    for dt in FLOATS:
        a = rnd((7, 5), dt, lo, hi)
        rf.case(f"{op}_{short(dt)}", op, [a], fn, call=f"torch.{op}(a)")
    a = rnd((5, 4), torch.float32, lo, hi)
    rf.case(f"{op}_noncontig", op, [a], fn, call=f"torch.{op}(a.t())", views=[[["t"]]])
    rf.case(f"{op}_empty", op, [torch.empty(0, 2)], fn, call=f"torch.{op}(empty)")
    ia = torch.randint(1 if lo > 0 else -3, 4, (6,))
    try:
        fn(ia)
        rf.case(f"{op}_int64", op, [ia], fn, call=f"torch.{op}(int64)")
    except (RuntimeError, NotImplementedError):
        rf.error_case(f"{op}_int64", op, [ia], fn, call=f"torch.{op}(int64)")
rf.case("round_half_even", "round", [torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999])], torch.round, call="torch.round(halves)")
rf.case("round_decimals", "round_decimals", [rnd((6,), torch.float64)], lambda a: torch.round(a, decimals=2),
        call="torch.round(a, decimals=2)", args={"decimals": 2})
rf.case("exp_large_f32", "exp", [rnd((2000,), torch.float32, -100, 90)], torch.exp, call="torch.exp(a in [-100, 90])")
rf.case("math_special_values", "log", [torch.tensor([-1.0, 0.0, float("inf"), float("nan")])], torch.log, call="torch.log(specials)")
rf.case("sqrt_special_values", "sqrt", [torch.tensor([-1.0, 0.0, float("inf"), float("nan")])], torch.sqrt, call="torch.sqrt(specials)")
rf.case("sign_nan", "sign", [torch.tensor([-2.0, 0.0, 3.0, float("nan")])], torch.sign, call="torch.sign(with nan)")
rf.case("relu_nan", "relu", [torch.tensor([-2.0, 0.0, 3.0, float("nan")])], torch.relu, call="torch.relu(with nan)")
rf.case("relu_int", "relu", [torch.tensor([-2, 0, 3])], torch.relu, call="torch.relu(int64)")
for approx in ("none", "tanh"):
    for dt in FLOATS:
        rf.case(f"gelu_{approx}_{short(dt)}", "gelu", [rnd((6, 5), dt, -5, 5)], lambda a, ap=approx: F.gelu(a, approximate=ap),
                call=f"F.gelu(a, approximate='{approx}')", args={"approximate": approx})
for beta, th in ((1.0, 20.0), (2.0, 5.0)):
    rf.case(f"softplus_{beta}_{th}", "softplus", [rnd((40,), torch.float32, -30, 30)], lambda a, b=beta, t=th: F.softplus(a, b, t),
            call=f"F.softplus(a, beta={beta}, threshold={th})", args={"beta": beta, "threshold": th})
    rf.case(f"softplus_f64_{beta}_{th}", "softplus", [rnd((40,), torch.float64, -30, 30)], lambda a, b=beta, t=th: F.softplus(a, b, t),
            call=f"F.softplus(a, beta={beta}, threshold={th})", args={"beta": beta, "threshold": th})

# clamp, lerp, where, nan_to_num
for dt in (torch.float32, torch.float64, torch.int64, torch.float16):
    a = rnd((4, 5), dt)
    rf.case(f"clamp_both_{short(dt)}", "clamp", [a], lambda a: torch.clamp(a, -1, 2), call="torch.clamp(a, -1, 2)", args={"min": -1, "max": 2})
    rf.case(f"clamp_min_{short(dt)}", "clamp", [a], lambda a: torch.clamp(a, min=0), call="torch.clamp(a, min=0)", args={"min": 0, "max": None})
    rf.case(f"clamp_max_{short(dt)}", "clamp", [a], lambda a: torch.clamp(a, max=1), call="torch.clamp(a, max=1)", args={"min": None, "max": 1})
rf.case("clamp_int_float_bounds", "clamp", [torch.tensor([-3, 0, 4])], lambda a: torch.clamp(a, -1.5, 2.5),
        call="torch.clamp(int64, -1.5, 2.5)", args={"min": -1.5, "max": 2.5})
rf.case("clamp_min_gt_max", "clamp", [rnd((5,), torch.float32)], lambda a: torch.clamp(a, 2, 1), call="torch.clamp(a, 2, 1)", args={"min": 2, "max": 1})
rf.case("clamp_nan", "clamp", [torch.tensor([float("nan"), -5.0, 5.0])], lambda a: torch.clamp(a, -1, 1), call="torch.clamp(nan, -1, 1)", args={"min": -1, "max": 1})
rf.case("clamp_tensor", "clamp_tensor", [rnd((3, 4), torch.float32), rnd((4,), torch.float32, -3, 0), rnd((3, 1), torch.float32, 0, 3)],
        lambda a, lo, hi: torch.clamp(a, lo, hi), call="torch.clamp(a, min=lo, max=hi)")
for dt in (torch.float32, torch.float64):
    rf.case(f"lerp_{short(dt)}", "lerp", [rnd((3, 4), dt), rnd((4,), dt), rnd((3, 1), dt, 0, 1)], torch.lerp, call="torch.lerp(a, b, w)")
    rf.case(f"lerp_scalar_{short(dt)}", "lerp_scalar", [rnd((3, 4), dt), rnd((3, 4), dt)], lambda a, b: torch.lerp(a, b, 0.75),
            call="torch.lerp(a, b, 0.75)", args={"weight": 0.75})
rf.case("where_bcast", "where", [rnd((3, 4), torch.bool), rnd((4,), torch.float32), rnd((3, 1), torch.float32)],
        torch.where, call="torch.where(c, a, b)")
rf.case("where_promote", "where", [rnd((5,), torch.bool), rnd((5,), torch.int64), rnd((5,), torch.float64)],
        torch.where, call="torch.where(c, int64, float64)")
special = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -2.0])
for dt in (torch.float32, torch.float64, torch.float16):
    rf.case(f"nan_to_num_default_{short(dt)}", "nan_to_num", [special.to(dt)], torch.nan_to_num, call="torch.nan_to_num(a)", args={})
rf.case("nan_to_num_args", "nan_to_num", [special], lambda a: torch.nan_to_num(a, nan=7.0, posinf=100.0, neginf=-100.0),
        call="torch.nan_to_num(a, 7.0, 100.0, -100.0)", args={"nan": 7.0, "posinf": 100.0, "neginf": -100.0})

# ------------------------------------------------------------------ comparisons and logic
for op in ("eq", "ne", "lt", "le", "gt", "ge"):
    for dt in (torch.float32, torch.int64, torch.float16, torch.bool, torch.uint8):
        a = rnd((3, 4), dt)
        b = rnd((4,), dt)
        b[0] = a[0, 0]
        rf.case(f"{op}_{short(dt)}", op, [a, b], getattr(torch, op), call=f"torch.{op}(a, b)")
    rf.case(f"{op}_nan", op, [torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([1.0, float("nan"), 3.0])], getattr(torch, op), call=f"torch.{op}(with nan)")
    rf.case(f"{op}_mixed", op, [rnd((5,), torch.int64), rnd((5,), torch.float32)], getattr(torch, op), call=f"torch.{op}(int64, float32)")
    rf.case(f"{op}_scalar", f"{op}_scalar", [rnd((6,), torch.float32)], lambda a, op=op: getattr(torch, op)(a, 0.5), call=f"torch.{op}(a, 0.5)", args={"other": 0.5})
for op in ("logical_and", "logical_or", "logical_xor"):
    rf.case(f"{op}_bool", op, [rnd((3, 4), torch.bool), rnd((4,), torch.bool)], getattr(torch, op), call=f"torch.{op}(a, b)")
    rf.case(f"{op}_float", op, [torch.tensor([0.0, 1.0, -2.0, 0.0]), torch.tensor([0, 0, 3, 1])], getattr(torch, op), call=f"torch.{op}(float, int)")
rf.case("logical_not", "logical_not", [torch.tensor([0.0, 1.0, float("nan"), -0.0])], torch.logical_not, call="torch.logical_not(a)")
for op in ("isnan", "isinf", "isfinite"):
    rf.case(op, op, [special], getattr(torch, op), call=f"torch.{op}(a)")
    rf.case(f"{op}_int", op, [torch.tensor([1, 2])], getattr(torch, op), call=f"torch.{op}(int64)")
a = torch.tensor([1.0, 1.0001, float("nan"), float("inf"), 2.0, 1e-9])
b = torch.tensor([1.0, 1.0, float("nan"), float("inf"), 2.1, 0.0])
for en in (False, True):
    rf.case(f"isclose_{en}", "isclose", [a, b], lambda a, b, en=en: torch.isclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=en),
            call=f"torch.isclose(a, b, 1e-5, 1e-8, equal_nan={en})", args={"rtol": 1e-5, "atol": 1e-8, "equal_nan": en})
rf.case("isclose_loose", "isclose", [a, b], lambda a, b: torch.isclose(a, b, rtol=1e-3, atol=1e-3),
        call="torch.isclose(a, b, 1e-3, 1e-3)", args={"rtol": 1e-3, "atol": 1e-3, "equal_nan": False})
rf.case("allclose_true", "allclose", [a[:2], b[:2]], lambda a, b: torch.tensor(torch.allclose(a, b, rtol=1e-3, atol=0.0)),
        call="torch.allclose(a, b, rtol=1e-3)", args={"rtol": 1e-3, "atol": 0.0, "equal_nan": False})
rf.case("allclose_false", "allclose", [a, b], lambda a, b: torch.tensor(torch.allclose(a, b)),
        call="torch.allclose(a, b)", args={"rtol": 1e-5, "atol": 1e-8, "equal_nan": False})

# ------------------------------------------------------------------ casts
src = torch.tensor([-2.7, -1.0, -0.5, 0.0, 0.4, 1.5, 2.5, 3.9, 100.25])
for sdt in FLOATS + [torch.int64, torch.int32, torch.bool]:
    x = src.to(sdt) if sdt != torch.bool else (src > 0)
    for ddt in FLOATS + INTS + [torch.bool]:
        if ddt == torch.uint8 and sdt in FLOATS + [torch.int64, torch.int32]:
            xx = x.abs()
        else:
            xx = x
        rf.case(f"to_{short(sdt)}_{short(ddt)}", "to", [xx], lambda a, d=ddt: a.to(d), call=f"a.to({ddt})", args={"dtype": short(ddt)})
rf.case("to_noncontig", "to", [rnd((3, 4), torch.float64)], lambda a: a.to(torch.float32), call="a.t().to(float32)",
        args={"dtype": "float32"}, views=[[["t"]]])

# ------------------------------------------------------------------ views (values)
base = torch.arange(24.0).reshape(2, 3, 4)
rf.case("permute_contiguous", "contiguous", [base], lambda a: a.contiguous(), call="a.permute(2,0,1).contiguous()", views=[[["permute", [2, 0, 1]]]])
rf.case("reshape_noncontig", "reshape", [base], lambda a: a.reshape(4, 6), call="a.transpose(0,2).reshape(4, 6)",
        args={"shape": [4, 6]}, views=[[["transpose", 0, 2]]])
rf.case("reshape_infer", "reshape", [base], lambda a: a.reshape(-1, 8), call="a.reshape(-1, 8)", args={"shape": [-1, 8]})
rf.case("flatten_1_2", "flatten", [base], lambda a: a.flatten(1, 2), call="a.flatten(1, 2)", args={"start": 1, "end": 2})
rf.case("flatten_noncontig", "flatten", [base], lambda a: a.flatten(0, 1), call="a.transpose(1,2).flatten(0, 1)",
        args={"start": 0, "end": 1}, views=[[["transpose", 1, 2]]])
rf.case("diagonal_offset", "diagonal", [base], lambda a: torch.diagonal(a, 1, 1, 2), call="torch.diagonal(a, 1, 1, 2)", args={"offset": 1, "d1": 1, "d2": 2})
rf.case("diagonal_neg", "diagonal", [base], lambda a: torch.diagonal(a, -1, -1, 1), call="torch.diagonal(a, -1, -1, 1)", args={"offset": -1, "d1": -1, "d2": 1})
rf.case("unfold", "unfold", [torch.arange(10.0)], lambda a: a.unfold(0, 3, 2), call="a.unfold(0, 3, 2)", args={"dim": 0, "size": 3, "step": 2})
rf.case("unfold_2d", "unfold", [base], lambda a: a.unfold(-1, 2, 1), call="a.unfold(-1, 2, 1)", args={"dim": -1, "size": 2, "step": 1})
rf.case("narrow_neg", "narrow", [base], lambda a: a.narrow(-1, -3, 2), call="a.narrow(-1, -3, 2)", args={"dim": -1, "start": -3, "length": 2})
rf.case("select_neg", "select", [base], lambda a: a.select(1, -1), call="a.select(1, -1)", args={"dim": 1, "index": -1})
rf.case("slice_step", "slice", [base], lambda a: a[:, 1::2, ::3], call="a[:, 1::2, ::3]")
rf.case("index_mixed", "index_newaxis", [base], lambda a: a[1, ..., None, 1:3], call="a[1, ..., None, 1:3]")
rf.case("squeeze_unsqueeze", "squeeze", [torch.zeros(1, 3, 1, 2)], lambda a: a.squeeze(), call="a.squeeze()")
rf.case("squeeze_dim", "squeeze_dim", [torch.zeros(1, 3, 1, 2)], lambda a: a.squeeze(-2), call="a.squeeze(-2)", args={"dim": -2})
rf.case("expand_add", "add", [torch.arange(3.0).reshape(3, 1), torch.ones(1, 4)], torch.add, call="a[3,1] + b[1,4]",
        views=[[["expand", [3, 4]]], None])
rf.error_case("view_error", "view", [base], lambda a: a.view(24), call="a.transpose(0,1).view(24)", args={"shape": [24]},
              views=[[["transpose", 0, 1]]])
rf.error_case("reshape_error", "reshape", [base], lambda a: a.reshape(5, -1), call="a.reshape(5, -1)", args={"shape": [5, -1]})

# ------------------------------------------------------------------ creation
rf.case("arange_float", "arange", [], lambda: torch.arange(-1.0, 2.0, 0.3), call="torch.arange(-1, 2, 0.3)", args={"start": -1.0, "end": 2.0, "step": 0.3, "dtype": "float32"})
rf.case("arange_int", "arange", [], lambda: torch.arange(10, 0, -3), call="torch.arange(10, 0, -3)", args={"start": 10, "end": 0, "step": -3, "dtype": "int64"})
rf.case("arange_f64", "arange", [], lambda: torch.arange(0, 1, 0.1, dtype=torch.float64), call="torch.arange(0, 1, 0.1, float64)", args={"start": 0, "end": 1, "step": 0.1, "dtype": "float64"})
for steps in (1, 2, 7, 10):
    rf.case(f"linspace_{steps}", "linspace", [], lambda s=steps: torch.linspace(-2, 5, s), call=f"torch.linspace(-2, 5, {steps})", args={"start": -2.0, "end": 5.0, "steps": steps, "dtype": "float32"})
rf.case("linspace_f64", "linspace", [], lambda: torch.linspace(0, 1, 11, dtype=torch.float64), call="torch.linspace(0, 1, 11, float64)", args={"start": 0.0, "end": 1.0, "steps": 11, "dtype": "float64"})
rf.case("logspace", "logspace", [], lambda: torch.logspace(-2, 2, 5, base=10.0), call="torch.logspace(-2, 2, 5)", args={"start": -2.0, "end": 2.0, "steps": 5, "base": 10.0, "dtype": "float32"})
rf.case("logspace_base2", "logspace", [], lambda: torch.logspace(0, 4, 5, base=2.0, dtype=torch.float64), call="torch.logspace(0, 4, 5, base=2)", args={"start": 0.0, "end": 4.0, "steps": 5, "base": 2.0, "dtype": "float64"})
rf.case("eye_3x4", "eye", [], lambda: torch.eye(3, 4), call="torch.eye(3, 4)", args={"n": 3, "m": 4, "dtype": "float32"})
rf.case("eye_i64", "eye", [], lambda: torch.eye(2, dtype=torch.int64), call="torch.eye(2, dtype=int64)", args={"n": 2, "m": 2, "dtype": "int64"})
for d in (-1, 0, 2):
    rf.case(f"tril_{d}", "tril", [rnd((2, 3, 4), torch.float32)], lambda a, d=d: torch.tril(a, d), call=f"torch.tril(a, {d})", args={"diagonal": d})
    rf.case(f"triu_{d}", "triu", [rnd((3, 4), torch.int64)], lambda a, d=d: torch.triu(a, d), call=f"torch.triu(a, {d})", args={"diagonal": d})
rf.case("one_hot", "one_hot", [torch.tensor([[0, 2], [1, 4]])], lambda a: F.one_hot(a, 6), call="F.one_hot(a, 6)", args={"num_classes": 6})
rf.case("one_hot_infer", "one_hot", [torch.tensor([3, 0, 1])], lambda a: F.one_hot(a), call="F.one_hot(a)", args={"num_classes": None})
rf.error_case("one_hot_too_small", "one_hot", [torch.tensor([3, 0, 1])], lambda a: F.one_hot(a, 2), call="F.one_hot(a, 2)", args={"num_classes": 2})
rf.case("full_int", "full", [], lambda: torch.full((2, 3), 7), call="torch.full((2,3), 7)", args={"shape": [2, 3], "value": 7, "dtype": "int64"})

# ------------------------------------------------------------------ in-place through views
a = rnd((3, 4), torch.float32)
rf.case("add__view", "add_view_", [a, rnd((2,), torch.float32)], lambda a, b: (lambda c: (c[:, 1:3].add_(b), c)[1])(a.clone()),
        call="c = a.clone(); c[:, 1:3].add_(b); c")
rf.case("mul__bcast", "mul_", [a, rnd((4,), torch.float32)], lambda a, b: a.clone().mul_(b), call="a.clone().mul_(b)")
rf.case("div__int_scalar", "div_scalar_", [rnd((3,), torch.float64)], lambda a: a.clone().div_(4), call="a.clone().div_(4)", args={"other": 4})
rf.error_case("add__int_float", "add_", [rnd((3,), torch.int64), rnd((3,), torch.float32)], lambda a, b: a.clone().add_(b), call="int64.add_(float32)")
rf.error_case("add__bcast_self", "add_", [rnd((3,), torch.float32), rnd((2, 3), torch.float32)], lambda a, b: a.clone().add_(b), call="a[3].add_(b[2,3])")
rf.case("masked_fill_", "masked_fill_", [a, rnd((4,), torch.bool)], lambda a, m: a.clone().masked_fill_(m, -1.5), call="a.clone().masked_fill_(m, -1.5)", args={"value": -1.5})
rf.case("masked_fill", "masked_fill", [rnd((4,), torch.int64), rnd((3, 4), torch.bool)], lambda a, m: a.masked_fill(m, 9), call="a.masked_fill(m, 9)", args={"value": 9})
rf.case("clamp_", "clamp_", [a], lambda a: a.clone().clamp_(-0.5, 0.5), call="a.clone().clamp_(-0.5, 0.5)")
rf.case("fill__view", "fill_view", [a], lambda a: (lambda c: (c.t()[1].fill_(3.0), c)[1])(a.clone()), call="c = a.clone(); c.t()[1].fill_(3); c")
rf.case("copy__bcast_cast", "copy_", [rnd((2, 3), torch.float64), rnd((3,), torch.int64)], lambda a, b: a.clone().copy_(b), call="a.clone().copy_(b: int64)")

rf.save()
