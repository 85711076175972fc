"""Reference data for torch.nn.functional's vision ops: interpolate, unfold, fold, affine_grid,
grid_sample, with gradients.

For each case, in PyTorch:
    torch.manual_seed(seed)                  # seed = crc32(case name), recorded in the case
    xs = inputs (seeded, the case's dtype); floating ones require grad unless `grad` says no
    views (optional, per input): None or ["transpose", d0, d1], applied before the call
    out = F.<fn>(*viewed xs, **kwargs)
    torch.autograd.backward(out, gout)       # gout: randn_like(out)
Recorded tensors (all in data/nn_functional.safetensors):
    {case}/in/{i}     inputs (before the views)
    {case}/out/0      the output
    {case}/gout/0     upstream gradient
    {case}/gin/{i}    gradient of input i (zeros where PyTorch gives none, e.g. nearest's grid)
The metadata "cases" is a JSON list of
    {name, fn, kwargs, dtype, seed, inputs, input_requires_grad, views, atol, rtol, note?, error?}
kwargs use PyTorch's keyword names; `error` (PyTorch's message) marks a case that must fail.

Run: python3 reference/gen_nn_functional.py  ->  reference/data/nn_functional.safetensors
"""
import warnings
import zlib

import torch
import torch.nn.functional as F

from refgen import RefFile

warnings.filterwarnings("ignore")
F32, F64 = torch.float32, torch.float64
BOTH = (F32, F64)
TOL = {F32: (1e-5, 1e-4), F64: (1e-10, 1e-8)}
rf = RefFile("nn_functional")

FNS = {
    "interpolate": F.interpolate,
    "unfold": F.unfold,
    "fold": F.fold,
    "affine_grid": F.affine_grid,
    "grid_sample": F.grid_sample,
}


def R(*shape, s=1.0):
    return lambda dt: torch.randn(*shape, dtype=dt) * s


def U(*shape, lo=-1.0, hi=1.0):
    return lambda dt: torch.rand(*shape, dtype=dt) * (hi - lo) + lo


def THETA(n, d, s=0.3):
    """Affine matrices near the identity: [n, d, d + 1]."""
    def make(dt):
        eye = torch.cat([torch.eye(d, dtype=dt), torch.zeros(d, 1, dtype=dt)], 1)
        return eye.expand(n, d, d + 1) + torch.randn(n, d, d + 1, dtype=dt) * s
    return make


def jsonable(v):
    if isinstance(v, (tuple, list)):
        return [jsonable(x) for x in v]
    return v


def apply_views(x, view):
    if view is None:
        return x
    assert view[0] == "transpose"
    return x.transpose(view[1], view[2])


def _one(name, fn, kwargs, inputs, dtype, grad, views, atol, rtol, note):
    assert name not in rf.names, f"duplicate case {name}"
    rf.names.add(name)
    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    xs = [spec(dtype) for spec in inputs]
    rg = list(grad) if grad is not None else [x.is_floating_point() for x in xs]
    xs = [x.detach().clone().requires_grad_(r) for x, r in zip(xs, rg)]
    views = views or [None] * len(xs)
    out = FNS[fn](*[apply_views(x, v) for x, v in zip(xs, views)], **kwargs)
    gout = torch.randn_like(out)
    if out.requires_grad:
        torch.autograd.backward([out], [gout])
    for i, x in enumerate(xs):
        rf._put(f"{name}/in/{i}", x)
        if rg[i]:
            rf._put(f"{name}/gin/{i}", x.grad if x.grad is not None else torch.zeros_like(x))
    rf._put(f"{name}/out/0", out)
    rf._put(f"{name}/gout/0", gout)
    d_atol, d_rtol = TOL[dtype]
    c = {"name": name, "fn": fn, "kwargs": jsonable(kwargs), "dtype": "F32" if dtype == F32 else "F64",
         "seed": seed, "inputs": len(xs), "input_requires_grad": rg, "views": views,
         "atol": d_atol if atol is None else atol, "rtol": d_rtol if rtol is None else rtol}
    if note:
        c["note"] = note
    rf.cases.append(c)


def case(name, fn, kwargs, inputs, dtypes=(F32,), grad=None, views=None, atol=None, rtol=None, note=None):
    """One case per dtype; names get _f32/_f64."""
    for dt in dtypes:
        _one(f"{name}_{'f32' if dt == F32 else 'f64'}", fn, kwargs, inputs, dt, grad, views, atol, rtol, note)


def error_case(name, fn, kwargs, inputs, dtype=F32, note=None):
    """The call must fail; records the inputs and PyTorch's message (first line)."""
    assert name not in rf.names, f"duplicate case {name}"
    rf.names.add(name)
    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    xs = [spec(dtype) for spec in inputs]
    try:
        FNS[fn](*xs, **kwargs)
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    else:
        raise AssertionError(f"{name}: expected PyTorch to raise")
    for i, x in enumerate(xs):
        rf._put(f"{name}/in/{i}", x)
    c = {"name": name, "fn": fn, "kwargs": jsonable(kwargs), "dtype": "F32" if dtype == F32 else "F64",
         "seed": seed, "inputs": len(xs), "input_requires_grad": [False] * len(xs), "views": [None] * len(xs),
         "atol": 0.0, "rtol": 0.0, "error": msg}
    if note:
        c["note"] = note
    rf.cases.append(c)


# ============================================================================ interpolate
I = "interpolate"
# nearest: 4-D goes through nearest_idx (equal sizes copy, doubled sizes halve), 3-D and 5-D
# through the generic kernel (floor(dst / scale_factor) in the input's opmath type)
case("nearest_1d_scale2", I, dict(scale_factor=2.0), [R(2, 3, 5)], dtypes=BOTH)
case("nearest_1d_scale1p7", I, dict(scale_factor=1.7), [R(2, 3, 6)], dtypes=BOTH)
case("nearest_1d_down", I, dict(scale_factor=0.6), [R(1, 2, 9)])
case("nearest_1d_size", I, dict(size=11), [R(2, 2, 4)])
case("nearest_2d_scale2", I, dict(scale_factor=2), [R(2, 3, 3, 4)], dtypes=BOTH)
case("nearest_2d_scale_tuple", I, dict(scale_factor=(1.5, 2.5)), [R(1, 2, 4, 3)], dtypes=BOTH)
case("nearest_2d_size", I, dict(size=(7, 3)), [R(2, 2, 3, 5)])
case("nearest_2d_same_size_scale", I, dict(scale_factor=1.2), [R(1, 2, 4, 4)],
     note="out == in (floor(4 * 1.2) = 4): 4-D nearest copies")
case("nearest_2d_doubled_scale", I, dict(scale_factor=(1.0, 2.05)), [R(1, 2, 2, 10)],
     note="out == 2 * in (floor(10 * 2.05) = 20): 4-D nearest takes dst >> 1, not floor(dst / 2.05)")
case("nearest_3d_scale", I, dict(scale_factor=(2.0, 1.5, 1.7)), [R(1, 2, 2, 3, 3)], dtypes=BOTH)
case("nearest_3d_size", I, dict(size=(3, 2, 5)), [R(2, 1, 2, 4, 3)])
case("nearest_exact_1d", I, dict(scale_factor=1.7, mode="nearest-exact"), [R(2, 2, 5)], dtypes=BOTH)
case("nearest_exact_2d", I, dict(size=(5, 3), mode="nearest-exact"), [R(1, 2, 3, 7)], dtypes=BOTH)
case("nearest_exact_2d_scale", I, dict(scale_factor=2.5, mode="nearest-exact"), [R(1, 2, 3, 2)])
case("nearest_exact_3d", I, dict(scale_factor=(1.5, 0.5, 2.0), mode="nearest-exact"), [R(1, 2, 2, 4, 3)])
# linear / bilinear / trilinear
case("linear_scale2", I, dict(scale_factor=2.0, mode="linear"), [R(2, 3, 5)], dtypes=BOTH)
case("linear_align", I, dict(scale_factor=2.0, mode="linear", align_corners=True), [R(2, 3, 5)], dtypes=BOTH)
case("linear_size", I, dict(size=9, mode="linear"), [R(2, 2, 4)], dtypes=BOTH)
case("linear_down", I, dict(size=3, mode="linear"), [R(2, 2, 8)])
case("linear_down_align", I, dict(size=3, mode="linear", align_corners=True), [R(2, 2, 8)])
case("linear_scale1p7", I, dict(scale_factor=1.7, mode="linear"), [R(1, 2, 6)], dtypes=BOTH)
case("linear_recompute", I, dict(scale_factor=1.7, mode="linear", recompute_scale_factor=True), [R(1, 2, 6)],
     dtypes=BOTH, note="coordinates from in/out sizes instead of 1/scale_factor")
case("linear_to_one", I, dict(size=1, mode="linear", align_corners=True), [R(1, 2, 5)],
     note="align_corners with one output: scale 0")
case("linear_same_size_scale", I, dict(scale_factor=1.2, mode="linear"), [R(1, 2, 4)],
     note="out == in: linear copies whatever the scale")
case("bilinear_scale2", I, dict(scale_factor=2, mode="bilinear"), [R(2, 3, 3, 4)], dtypes=BOTH)
case("bilinear_align", I, dict(scale_factor=2, mode="bilinear", align_corners=True), [R(2, 3, 3, 4)],
     dtypes=BOTH)
case("bilinear_size", I, dict(size=(7, 5), mode="bilinear"), [R(2, 2, 3, 4)], dtypes=BOTH)
case("bilinear_size_align", I, dict(size=(7, 5), mode="bilinear", align_corners=True), [R(2, 2, 3, 4)])
case("bilinear_down", I, dict(size=(2, 3), mode="bilinear"), [R(1, 3, 7, 8)], dtypes=BOTH)
case("bilinear_tuple_scale", I, dict(scale_factor=(1.3, 2.6), mode="bilinear"), [R(1, 2, 5, 3)], dtypes=BOTH)
case("bilinear_recompute", I, dict(scale_factor=(1.3, 2.6), mode="bilinear", recompute_scale_factor=True),
     [R(1, 2, 5, 3)])
case("bilinear_transposed", I, dict(scale_factor=1.5, mode="bilinear"), [R(2, 2, 4, 3)],
     views=[["transpose", 2, 3]], note="non-contiguous input")
case("trilinear_scale2", I, dict(scale_factor=2, mode="trilinear"), [R(1, 2, 2, 3, 3)], dtypes=BOTH)
case("trilinear_align_size", I, dict(size=(3, 5, 4), mode="trilinear", align_corners=True), [R(2, 1, 2, 3, 3)],
     dtypes=BOTH)
case("trilinear_down", I, dict(scale_factor=(0.5, 0.7, 1.5), mode="trilinear"), [R(1, 2, 4, 5, 3)])
# bicubic (A = -0.75, taps clamped into the input)
case("bicubic_scale2", I, dict(scale_factor=2, mode="bicubic"), [R(2, 2, 3, 4)], dtypes=BOTH)
case("bicubic_align", I, dict(scale_factor=2, mode="bicubic", align_corners=True), [R(2, 2, 3, 4)], dtypes=BOTH)
case("bicubic_size", I, dict(size=(5, 9), mode="bicubic"), [R(1, 3, 4, 4)], dtypes=BOTH)
case("bicubic_down", I, dict(size=(3, 2), mode="bicubic"), [R(1, 2, 8, 7)], dtypes=BOTH)
case("bicubic_down_align", I, dict(size=(3, 2), mode="bicubic", align_corners=True), [R(1, 2, 8, 7)])
case("bicubic_scale1p7", I, dict(scale_factor=1.7, mode="bicubic"), [R(1, 2, 4, 5)], dtypes=BOTH)
case("bicubic_one_pixel", I, dict(size=(3, 4), mode="bicubic"), [R(1, 2, 1, 2)],
     note="every tap clamps to the single row")
# area (adaptive average pooling)
case("area_1d", I, dict(size=3, mode="area"), [R(2, 2, 7)], dtypes=BOTH)
case("area_2d_down", I, dict(size=(2, 3), mode="area"), [R(1, 2, 5, 7)], dtypes=BOTH)
case("area_2d_scale", I, dict(scale_factor=0.5, mode="area"), [R(1, 2, 6, 5)],
     note="area always recomputes the output size from the scale: floor(in * scale)")
case("area_2d_up", I, dict(size=(5, 4), mode="area"), [R(1, 2, 3, 3)])
case("area_3d", I, dict(size=(1, 2, 3), mode="area"), [R(1, 2, 3, 4, 5)])
# PyTorch's forward and backward disagree here (backward takes the copy / dst >> 1 path of
# nearest_idx, the forward of 3-D/5-D does not, nor does bicubic's): forward only
case("nearest_1d_same_size_scale_fwd", I, dict(scale_factor=1.2), [R(1, 2, 4)], grad=[False],
     note="forward only: PyTorch's 3-D nearest forward gives [0, 0, 1, 2] for out == in with scale 1.2, "
          "its backward copies (not the adjoint); Pyrite's gradient is the adjoint of the forward")
case("bicubic_same_size_scale_fwd", I, dict(scale_factor=1.2, mode="bicubic"), [R(1, 2, 3, 4)], grad=[False],
     note="forward only: out == in with scale 1.2 interpolates forward, PyTorch's backward copies")

error_case("err_interp_size_and_scale", I, dict(size=4, scale_factor=2.0), [R(1, 2, 3)])
error_case("err_interp_neither", I, dict(), [R(1, 2, 3)])
error_case("err_interp_align_nearest", I, dict(scale_factor=2.0, align_corners=True), [R(1, 2, 3)])
error_case("err_interp_bilinear_3d", I, dict(scale_factor=2.0, mode="bilinear"), [R(1, 2, 3)])
error_case("err_interp_linear_4d", I, dict(scale_factor=2.0, mode="linear"), [R(1, 2, 3, 3)])
error_case("err_interp_bicubic_5d", I, dict(scale_factor=2.0, mode="bicubic"), [R(1, 2, 3, 3, 3)])
error_case("err_interp_trilinear_4d", I, dict(size=(4, 4, 4), mode="trilinear"), [R(1, 2, 3, 3)])
error_case("err_interp_2d_input", I, dict(scale_factor=2.0), [R(2, 3)])
error_case("err_interp_6d_input", I, dict(scale_factor=2.0), [R(1, 1, 2, 2, 2, 2)])
error_case("err_interp_size_len", I, dict(size=(4, 5, 6)), [R(1, 2, 3, 3)])
error_case("err_interp_scale_len", I, dict(scale_factor=(2.0, 2.0)), [R(1, 2, 3)])
error_case("err_interp_recompute_with_size", I, dict(size=4, recompute_scale_factor=True), [R(1, 2, 3)])
error_case("err_interp_zero_output", I, dict(scale_factor=0.2, mode="linear"), [R(1, 2, 3)])
error_case("err_interp_zero_size", I, dict(size=(0, 3), mode="bilinear"), [R(1, 2, 3, 3)])

# ============================================================================ unfold / fold
case("unfold_k2", "unfold", dict(kernel_size=2), [R(2, 3, 4, 5)], dtypes=BOTH)
case("unfold_all", "unfold", dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
     [R(2, 2, 6, 7)], dtypes=BOTH)
case("unfold_unbatched", "unfold", dict(kernel_size=3, padding=1), [R(2, 4, 3)], dtypes=BOTH)
case("unfold_transposed", "unfold", dict(kernel_size=2, stride=2), [R(1, 2, 5, 4)], views=[["transpose", 2, 3]])
case("fold_k2", "fold", dict(output_size=(4, 5), kernel_size=2), [R(2, 12, 12)], dtypes=BOTH)
case("fold_all", "fold", dict(output_size=(6, 7), kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2),
                              stride=(2, 3)), [R(2, 12, 9)], dtypes=BOTH,
     note="blocks: (6 + 2 - 3) // 2 + 1 = 3 rows, (7 + 4 - 3) // 3 + 1 = 3 columns")
case("fold_unbatched", "fold", dict(output_size=4, kernel_size=3, padding=1), [R(18, 16)], dtypes=BOTH)
error_case("err_unfold_kernel_too_big", "unfold", dict(kernel_size=5), [R(1, 2, 3, 3)])
error_case("err_unfold_5d", "unfold", dict(kernel_size=2), [R(1, 1, 2, 3, 3)])
error_case("err_unfold_zero_stride", "unfold", dict(kernel_size=2, stride=0), [R(1, 2, 3, 3)])
error_case("err_fold_not_divisible", "fold", dict(output_size=4, kernel_size=2), [R(1, 5, 9)])
error_case("err_fold_blocks", "fold", dict(output_size=4, kernel_size=2), [R(1, 8, 10)])
error_case("err_fold_4d", "fold", dict(output_size=4, kernel_size=2), [R(1, 4, 3, 3)])

# ============================================================================ affine_grid
A = "affine_grid"
for ac in (False, True):
    sfx = "_align" if ac else ""
    case(f"affine_grid_2d{sfx}", A, dict(size=[2, 3, 4, 5], align_corners=ac), [THETA(2, 2)], dtypes=BOTH)
    case(f"affine_grid_3d{sfx}", A, dict(size=[2, 1, 3, 4, 2], align_corners=ac), [THETA(2, 3)], dtypes=BOTH)
    case(f"affine_grid_2d_unit{sfx}", A, dict(size=[1, 1, 1, 3], align_corners=ac), [THETA(1, 2)])
error_case("err_affine_grid_theta_shape", A, dict(size=[1, 1, 4, 4], align_corners=False), [R(1, 3, 3)])
error_case("err_affine_grid_size_len", A, dict(size=[1, 4, 4], align_corners=False), [R(1, 2, 3)])
error_case("err_affine_grid_zero_size", A, dict(size=[1, 1, 0, 4], align_corners=False), [R(1, 2, 3)])
error_case("err_affine_grid_batch", A, dict(size=[3, 1, 4, 4], align_corners=False), [R(2, 2, 3)])
error_case("err_affine_grid_3d_theta_for_2d", A, dict(size=[1, 1, 2, 4, 4], align_corners=False), [R(1, 2, 3)])

# ============================================================================ grid_sample
G = "grid_sample"
for mode in ("bilinear", "nearest", "bicubic"):
    for pm in ("zeros", "border", "reflection"):
        for ac in (False, True):
            nm = f"gs_{mode}_{pm}{'_align' if ac else ''}"
            kw = dict(mode=mode, padding_mode=pm, align_corners=ac)
            # locations mostly inside, some outside by up to 1.5 units of the half-width
            case(nm, G, kw, [R(2, 3, 4, 5), U(2, 3, 6, 2, lo=-1.5, hi=1.5)], dtypes=BOTH)
    # far outside: several reflections
    case(f"gs_{mode}_reflection_far", G, dict(mode=mode, padding_mode="reflection", align_corners=False),
         [R(1, 2, 3, 4), U(1, 4, 5, 2, lo=-5.0, hi=5.0)], dtypes=BOTH)
    case(f"gs_{mode}_reflection_far_align", G, dict(mode=mode, padding_mode="reflection", align_corners=True),
         [R(1, 2, 3, 4), U(1, 4, 5, 2, lo=-5.0, hi=5.0)])
case("gs_bilinear_one_pixel_reflection_align", G, dict(mode="bilinear", padding_mode="reflection",
                                                       align_corners=True),
     [R(1, 2, 1, 3), U(1, 2, 3, 2, lo=-1.5, hi=1.5)], note="a dim of size 1: the reflection is empty, x = 0")
case("gs_bilinear_grid_transposed", G, dict(mode="bilinear", padding_mode="zeros", align_corners=False),
     [R(1, 2, 4, 4), U(1, 3, 5, 2, lo=-1.2, hi=1.2)], views=[None, ["transpose", 1, 2]])
for mode in ("bilinear", "nearest"):
    for pm in ("zeros", "border", "reflection"):
        for ac in (False, True):
            nm = f"gs3d_{mode}_{pm}{'_align' if ac else ''}"
            case(nm, G, dict(mode=mode, padding_mode=pm, align_corners=ac),
                 [R(2, 2, 3, 4, 3), U(2, 2, 3, 2, 3, lo=-1.5, hi=1.5)], dtypes=BOTH)
case("gs3d_bilinear_reflection_far", G, dict(mode="bilinear", padding_mode="reflection", align_corners=False),
     [R(1, 2, 2, 3, 3), U(1, 2, 2, 3, 3, lo=-5.0, hi=5.0)], dtypes=BOTH)
error_case("err_gs_dims", G, dict(), [R(1, 2, 3, 3), U(1, 3, 2)])
error_case("err_gs_batch", G, dict(), [R(2, 2, 3, 3), U(1, 3, 3, 2)])
error_case("err_gs_last_dim", G, dict(), [R(1, 2, 3, 3), U(1, 3, 3, 3)])
# (5-D bicubic is not an error case here: PyTorch 2.15's CPU kernel raises nothing and returns
# uninitialised memory; Pyrite refuses it, tests/nn_vision_functional.rs checks that)
error_case("err_gs_3d_input", G, dict(), [R(1, 2, 3), U(1, 3, 1)])
error_case("err_gs_empty_spatial", G, dict(), [R(1, 2, 0, 3), U(1, 3, 3, 2)])

rf.save()
