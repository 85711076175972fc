"""Records PyTorch's repr() of many tensors into reference/data/display.json.

Each case: name, dtype (PyTorch name without 'torch.'), shape, values (row-major; floats as
repr strings so nan/inf survive JSON, ints and bools as JSON numbers/bools), an optional
`view` applied before printing ("t": transpose of a 2-d tensor, "slice_step2": x[..., ::2]),
an optional `default_dtype` in effect while printing, and `expected`, the exact repr.

Run: python3 reference/gen_display.py
"""
import json
import math
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "display.json")
cases = []


def values_of(t):
    flat = t.reshape(-1).tolist()
    if t.dtype == torch.float32:
        # shortest strings that parse back to the same float32
        return [repr(float(np.float32(v))) if not math.isfinite(v) else str(np.float32(v)) for v in flat]
    if t.dtype.is_floating_point:
        return [repr(float(v)) for v in flat]
    return flat


def case(name, t, view=None, default_dtype=None):
    shown = t
    if view == "t":
        shown = t.t()
    elif view == "slice_step2":
        shown = t[..., ::2]
    elif view is not None:
        raise ValueError(view)
    if default_dtype is not None:
        torch.set_default_dtype(default_dtype)
    try:
        expected = repr(shown)
    finally:
        torch.set_default_dtype(torch.float32)
    c = {
        "name": name,
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "values": values_of(t),
        "expected": expected,
    }
    if view is not None:
        c["view"] = view
    if default_dtype is not None:
        c["default_dtype"] = str(default_dtype).replace("torch.", "")
    cases.append(c)


g = torch.Generator().manual_seed(0)
f32, f64, f16, bf16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
i64, i32, u8, b = torch.int64, torch.int32, torch.uint8, torch.bool
nan, inf = math.nan, math.inf

# integers and bools
case("int_vec", torch.tensor([1, 2, 3]))
case("int_2x2", torch.tensor([[1, 2], [3, 4]]))
case("int_negative_widths", torch.tensor([[-100, 2], [3, 40000]]))
case("int32_suffix", torch.tensor([1, 2], dtype=i32))
case("uint8", torch.tensor([0, 7, 255], dtype=u8))
case("int64_extremes", torch.tensor([-(2**63), 0, 2**63 - 1]))
case("int_0d", torch.tensor(5))
case("int32_0d", torch.tensor(-5, dtype=i32))
case("int_arange_50", torch.arange(50))
case("int32_wrap_suffix", torch.arange(1000000, 1000019, dtype=i32))
case("int_3d", torch.arange(24).reshape(2, 3, 4))
case("int_4d", torch.arange(16).reshape(2, 2, 2, 2) - 8)
case("bool_vec", torch.tensor([True, False, True]))
case("bool_2x2", torch.tensor([[True, False], [False, False]]))
case("bool_0d", torch.tensor(True))
case("bool_long", torch.arange(40) % 3 == 0)

# floats: fixed point, integer mode, scientific notation
case("float_ints", torch.tensor([1.0, 2.0]))
case("float_2x2", torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
case("float_frac", torch.tensor([1.5, 2.25]))
case("float_tenths", torch.tensor([0.1, 0.2, -0.3]))
case("float_0d", torch.tensor(3.5))
case("float_0d_int", torch.tensor(2.0))
case("float_0d_nan", torch.tensor(nan))
case("float_0d_small", torch.tensor(1e-7))
case("float_large", torch.tensor([1e10, 1.0]))
case("float_large_frac", torch.tensor([1.5e10, 2.25]))
case("float_small", torch.tensor([1e-5, 1.0]))
case("float_ratio_1000", torch.tensor([1.0, 1000.0]))
case("float_ratio_1001", torch.tensor([1.0, 1001.5]))
case("float_1e8", torch.tensor([1e8, 1.5e8]))
case("float_1e-4_edge", torch.tensor([1e-4, 1.0]))
case("float_wide_fixed", torch.tensor([123456.789, -0.5]))
case("float_nan_inf_int", torch.tensor([1.0, nan, -inf, inf]))
case("float_nan_inf_frac", torch.tensor([1.25, nan, -inf]))
case("float_nan_inf_sci", torch.tensor([1e-9, nan, inf]))
case("float_all_zero", torch.zeros(4))
case("float_all_nan", torch.tensor([nan, nan]))
case("float_zero_inf", torch.tensor([0.0, -inf, 0.0]))
case("float_neg_zero", torch.tensor([-0.0, 0.0]))
case("float_neg_zero_frac", torch.tensor([-0.0, 1.5]))
case("float_ties", torch.tensor([0.03125, 1.03125, 2.5, 0.09375]))
case("float_negative_sci", torch.tensor([-1e-8, 5.0, 3e5]))
case("float_arange_30", torch.arange(30.0))
case("float_frac_30", torch.arange(30.0) / 7)
case("float_rand_3x20", torch.rand(3, 20, generator=g))
case("float_randn_4x5", torch.randn(4, 5, generator=g))
case("float_randn_2x3x4", torch.randn(2, 3, 4, generator=g))
case("float_randn_scaled_sci", torch.randn(3, 4, generator=g) * 1e6)
case("float64_suffix", torch.tensor([1.5, 2.0], dtype=f64))
case("float64_precise", torch.tensor([1 / 3, 2 / 3], dtype=f64))
case("float16_suffix", torch.tensor([0.1, 65504.0, -2.0], dtype=f16))
case("float16_small", torch.tensor([0.001, 0.5], dtype=f16))
case("bfloat16_suffix", torch.tensor([0.1, 1e20, -3.0], dtype=bf16))
case("bfloat16_ints", torch.tensor([1.0, 2.0, 256.0], dtype=bf16))
case("float64_0d", torch.tensor(0.1, dtype=f64))
case("float_1x1", torch.tensor([[7.25]]))
case("float_col", torch.tensor([[1.0], [2.5], [3.0]]))

case("float_rounds_up_width", torch.tensor([9.99996, 1.5, -99.99999]))
case("float_exact_1e8", torch.tensor([1e8, 3.0]))
case("float_neg_1e8_frac", torch.tensor([-1e8, 0.5]))
case("float64_huge_tiny", torch.tensor([1e100, -1e-100, 0.0], dtype=f64))
case("float64_int_mode_sci", torch.tensor([1e20, 3.0], dtype=f64))
case("float16_subnormal", torch.tensor([6e-8, 1.0], dtype=f16))
case("float_5d", torch.arange(32.0).reshape(2, 1, 2, 4, 2) / 8)
case("int_wrap_3x40", torch.arange(-60, 60).reshape(3, 40) * 1001)
case("bool_0d_false", torch.tensor(False))
case("uint8_2d_suffix_wrap", torch.arange(120, dtype=u8).reshape(4, 30))
case("float_sum_int_mode_1d_neg", torch.arange(-600.0, 601.0))

# default dtype float64: float64 is unmarked, float32 is marked
case("default_f64_f64", torch.tensor([1.5, 2.0], dtype=f64), default_dtype=f64)
case("default_f64_f32", torch.tensor([1.5, 2.0], dtype=f32), default_dtype=f64)
case("default_f64_empty_f32", torch.zeros(0, dtype=f32), default_dtype=f64)

# empty tensors
case("empty_1d_float", torch.zeros(0))
case("empty_0x3_float", torch.zeros(0, 3))
case("empty_2x0x4_float", torch.zeros(2, 0, 4))
case("empty_1d_int", torch.zeros(0, dtype=i64))
case("empty_0x3_int32", torch.zeros(0, 3, dtype=i32))
case("empty_bool", torch.zeros(0, dtype=b))
case("empty_float64", torch.zeros(3, 0, dtype=f64))

# summarisation (numel > 1000) and line wrapping
case("sum_arange_1001", torch.arange(1001))
case("sum_float_1001", torch.arange(1001.0))
case("sum_frac_1001", torch.arange(1001.0) / 3)
case("sum_2d_40x50", torch.arange(2000).reshape(40, 50))
case("sum_2d_float_13x77", torch.randn(13, 77, generator=g))
case("sum_2d_few_rows", torch.arange(2000.0).reshape(4, 500) / 2)
case("sum_2d_few_cols", torch.arange(2000).reshape(500, 4))
case("sum_3d", torch.randn(11, 7, 13, generator=g))
case("sum_3d_ints_small_middle", torch.arange(2400).reshape(100, 2, 12))
case("sum_bool", torch.arange(1200) % 2 == 0)
case("sum_ones_int_mode", torch.ones(1001))
case("sum_sci", torch.logspace(-10, 10, 1001))
case("sum_int32", torch.arange(1500, dtype=i32))
case("exactly_1000", torch.arange(1000))
case("wrap_2d_long_rows", torch.randn(3, 30, generator=g))
case("wrap_3d_long_rows", torch.arange(120.0).reshape(2, 2, 30) / 4)
case("wrap_f16_suffix", (torch.arange(16, dtype=f16) + 0.5) * 1000)

# non-contiguous views
case("view_t_int", torch.arange(6).reshape(2, 3), view="t")
case("view_t_float", torch.tensor([[1.5, 2.0, 3.0], [4.0, 5.0, 6.25]]), view="t")
case("view_step2", torch.arange(24.0).reshape(2, 3, 4), view="slice_step2")

with open(OUT, "w") as f:
    # one case per line: small and diff-friendly
    f.write('{"torch_version": %s, "cases": [\n' % json.dumps(torch.__version__))
    f.write(",\n".join(json.dumps(c) for c in cases))
    f.write("\n]}\n")
print(f"wrote {len(cases)} cases to {OUT}")
