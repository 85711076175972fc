"""Reference data for Pyrite's convolution and pooling ops (ops/conv.rs, ops/pool.rs):
conv1d/2d/3d, conv_transpose1d/2d/3d, max_pool (with indices), avg_pool, adaptive_avg_pool,
adaptive_max_pool (with indices), max_unpool; every case records the output AND the gradients of
the differentiable inputs for a fixed random upstream gradient, in f32 and f64; plus cases where
PyTorch raises.

Run: python3 reference/gen_conv.py  ->  reference/data/conv.safetensors
"""
import torch
import torch.nn.functional as F

from refgen import RefFile, apply_views

torch.manual_seed(0)
rf = RefFile("conv")

DTYPES = (torch.float32, torch.float64)
F32_TOL = dict(atol=1e-5, rtol=1e-5)


def randn(*s, dtype=torch.float64):
    return torch.randn(s, dtype=torch.float64).to(dtype)


def dname(dt):
    return "f32" if dt == torch.float32 else "f64"


def grad_case(name, op, fn, inputs, diff, call, args, views=None, extra_out=False):
    """Like RefFile.grad_case, but `fn` may return (out, extra) where `extra` (indices) is
    recorded as one more output after the gradients. Outputs: [out, grads..., extra?]."""
    views = views or [None] * len(inputs)
    r0 = fn(*[apply_views(x, v) for x, v in zip(inputs, views)])
    out0 = r0[0] if extra_out else r0
    g = torch.randn(out0.shape, dtype=torch.float64).to(out0.dtype)

    def run(*vs):
        *xs, gg = vs
        xs = [x.detach().requires_grad_(True) if i in diff else x for i, x in enumerate(xs)]
        r = fn(*xs)
        out, extra = (r[0], r[1]) if extra_out else (r, None)
        grads = torch.autograd.grad(out, [xs[i] for i in diff], gg, allow_unused=True)
        grads = [torch.zeros_like(xs[i]) if gr is None else gr for i, gr in zip(diff, grads)]
        res = [out] + grads
        if extra_out:
            res.append(extra)
        return res

    a = dict(args)
    a["diff"] = diff
    a["extra_out"] = extra_out
    tol = F32_TOL if out0.dtype == torch.float32 else {}
    rf.case(name, op, inputs + [g], run, call=call, args=a, views=views + [None], **tol)


# ----------------------------------------------------------------------------- convolution
CONV = [
    # name, x shape, w shape, stride, padding, dilation, groups, bias, views
    ("1d_plain", (2, 4, 9), (6, 4, 3), [1], [0], [1], 1, True, None),
    ("1d_s2_p1", (2, 4, 9), (6, 4, 3), [2], [1], [1], 1, True, None),
    ("1d_d2_p2_g2", (2, 4, 10), (6, 2, 3), [1], [2], [2], 2, False, None),
    ("1d_depthwise_s3", (3, 4, 11), (8, 1, 4), [3], [1], [1], 4, True, None),
    ("1d_k1", (2, 5, 6), (3, 5, 1), [1], [0], [1], 1, True, None),
    ("2d_plain", (2, 3, 7, 6), (5, 3, 3, 3), [1, 1], [0, 0], [1, 1], 1, True, None),
    ("2d_pad1", (2, 3, 7, 6), (5, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1, True, None),
    ("2d_mixed", (2, 4, 8, 7), (6, 4, 3, 2), [2, 1], [1, 2], [1, 2], 1, True, None),
    ("2d_groups2", (2, 4, 6, 6), (6, 2, 3, 3), [1, 2], [1, 0], [2, 1], 2, False, None),
    ("2d_depthwise", (2, 3, 6, 5), (6, 1, 3, 3), [1, 1], [1, 1], [1, 1], 3, True, None),
    ("2d_1x1", (2, 6, 5, 4), (4, 6, 1, 1), [1, 1], [0, 0], [1, 1], 1, True, None),
    ("2d_1x1_s2", (2, 6, 5, 4), (4, 6, 1, 1), [2, 2], [0, 0], [1, 1], 1, False, None),
    ("2d_1x1_groups", (2, 6, 5, 4), (4, 3, 1, 1), [1, 1], [0, 0], [1, 1], 2, True, None),
    ("2d_big_pad", (1, 2, 3, 3), (3, 2, 2, 2), [1, 1], [2, 2], [1, 1], 1, True, None),
    ("2d_stride_skips", (2, 2, 9, 8), (3, 2, 2, 2), [3, 3], [0, 0], [1, 1], 1, True, None),
    ("2d_kernel_eq_input", (2, 3, 4, 5), (2, 3, 4, 5), [1, 1], [0, 0], [1, 1], 1, True, None),
    ("2d_noncontig_x", (2, 3, 6, 7), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1, True, [[["transpose", 2, 3]], None, None]),
    ("2d_noncontig_w", (2, 3, 7, 6), (4, 3, 3, 3), [1, 2], [1, 1], [1, 1], 1, True,
     [[["slice", 3, 0, 6, 1]], [["transpose", 0, 1]], [["slice", 0, 0, 8, 2]]]),
    ("3d_plain", (2, 2, 5, 4, 5), (3, 2, 2, 3, 2), [1, 1, 1], [0, 1, 0], [1, 1, 1], 1, True, None),
    ("3d_mixed", (1, 4, 6, 5, 5), (4, 2, 3, 2, 2), [2, 1, 2], [1, 0, 1], [1, 2, 1], 2, True, None),
    ("3d_1x1", (2, 3, 2, 3, 2), (2, 3, 1, 1, 1), [1, 1, 1], [0, 0, 0], [1, 1, 1], 1, True, None),
]
for name, xs, ws, s, p, d, g, bias, views in CONV:
    for dt in DTYPES:
        x = randn(*xs, dtype=dt)
        w = randn(*ws, dtype=dt) * 0.5
        b = randn(ws[0], dtype=dt)
        vx, vw, vb = views if views else (None, None, None)
        if vx:  # store the un-viewed tensor so that applying the views gives the shape above
            if vx[0][0] == "transpose":
                x = x.transpose(vx[0][1], vx[0][2]).contiguous()
            else:
                x = torch.cat([x, randn(*xs, dtype=dt)[..., :1]], dim=-1)
        if vw:
            w = w.transpose(0, 1).contiguous()
        if vb:
            b = randn(2 * ws[0], dtype=dt)
        inputs = [x, w, b] if bias else [x, w]
        vs = [vx, vw, vb][: len(inputs)]
        args = dict(stride=s, padding=p, dilation=d, groups=g, bias=bias)
        call = f"F.conv{len(xs) - 2}d(x, w, {'b' if bias else 'None'}, stride={s}, padding={p}, dilation={d}, groups={g})"
        grad_case(f"conv{name}_{dname(dt)}", "conv",
                  lambda *t, s=s, p=p, d=d, g=g, n=len(xs) - 2: getattr(F, f"conv{n}d")(
                      t[0], t[1], t[2] if len(t) > 2 else None, stride=s, padding=p, dilation=d, groups=g),
                  inputs, list(range(len(inputs))), call, args, views=vs if views else None)

CONVT = [
    # name, x shape, w shape [C_in, C_out/groups, *k], stride, padding, output_padding, dilation, groups, bias
    ("1d_plain", (2, 4, 5), (4, 3, 3), [1], [0], [0], [1], 1, True),
    ("1d_s2_op1", (2, 4, 5), (4, 3, 3), [2], [1], [1], [1], 1, True),
    ("1d_groups_dil", (2, 4, 6), (4, 2, 3), [2], [2], [1], [2], 2, False),
    ("2d_plain", (2, 3, 4, 5), (3, 2, 3, 3), [1, 1], [0, 0], [0, 0], [1, 1], 1, True),
    ("2d_s2", (2, 3, 4, 5), (3, 2, 3, 3), [2, 2], [1, 1], [1, 0], [1, 1], 1, True),
    ("2d_mixed", (2, 4, 4, 3), (4, 2, 3, 2), [2, 1], [1, 0], [1, 0], [1, 2], 2, True),
    ("2d_k2s2", (2, 4, 3, 3), (4, 3, 2, 2), [2, 2], [0, 0], [0, 0], [1, 1], 1, False),
    ("2d_1x1", (2, 4, 3, 3), (4, 3, 1, 1), [1, 1], [0, 0], [0, 0], [1, 1], 1, True),
    ("3d_mixed", (1, 2, 3, 2, 3), (2, 2, 2, 3, 2), [2, 1, 2], [0, 1, 1], [1, 0, 1], [1, 1, 1], 1, True),
]
for name, xs, ws, s, p, op, d, g, bias in CONVT:
    for dt in DTYPES:
        x = randn(*xs, dtype=dt)
        w = randn(*ws, dtype=dt) * 0.5
        b = randn(ws[1] * g, dtype=dt)
        inputs = [x, w, b] if bias else [x, w]
        args = dict(stride=s, padding=p, output_padding=op, dilation=d, groups=g, bias=bias)
        n = len(xs) - 2
        call = (f"F.conv_transpose{n}d(x, w, {'b' if bias else 'None'}, stride={s}, padding={p}, "
                f"output_padding={op}, groups={g}, dilation={d})")
        grad_case(f"conv_transpose{name}_{dname(dt)}", "conv_transpose",
                  lambda *t, s=s, p=p, op=op, d=d, g=g, n=n: getattr(F, f"conv_transpose{n}d")(
                      t[0], t[1], t[2] if len(t) > 2 else None, stride=s, padding=p, output_padding=op,
                      groups=g, dilation=d),
                  inputs, list(range(len(inputs))), call, args)

# ----------------------------------------------------------------------------- pooling
MAXPOOL = [
    # name, x shape, kernel, stride, padding, dilation, ceil_mode
    ("1d_k3s2p1", (2, 3, 11), [3], [2], [1], [1], False),
    ("1d_k2_ceil", (2, 3, 11), [2], [2], [0], [1], True),
    ("1d_d2_ceil", (2, 2, 12), [3], [2], [1], [2], True),
    ("2d_k2", (2, 3, 7, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),
    ("2d_k3s2p1", (2, 3, 7, 8), [3, 3], [2, 2], [1, 1], [1, 1], False),
    ("2d_mixed_ceil", (2, 2, 8, 9), [3, 2], [2, 1], [1, 0], [1, 2], True),
    ("2d_k3s3_ceil", (1, 2, 7, 8), [3, 3], [3, 3], [1, 0], [1, 1], True),
    ("2d_overlap", (2, 2, 6, 6), [3, 3], [1, 1], [1, 1], [1, 1], False),
    ("3d_k2", (1, 2, 5, 6, 5), [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False),
    ("3d_mixed_ceil", (2, 2, 5, 6, 7), [3, 2, 2], [2, 1, 2], [1, 0, 1], [1, 2, 1], True),
]
for name, xs, k, s, p, d, ceil in MAXPOOL:
    for dt in DTYPES:
        x = randn(*xs, dtype=dt)
        n = len(xs) - 2
        args = dict(kernel=k, stride=s, padding=p, dilation=d, ceil_mode=ceil)
        call = f"F.max_pool{n}d(x, {k}, {s}, {p}, {d}, ceil_mode={ceil}, return_indices=True)"
        grad_case(f"max_pool{name}_{dname(dt)}", "max_pool",
                  lambda x, k=k, s=s, p=p, d=d, ceil=ceil, n=n: getattr(F, f"max_pool{n}d")(
                      x, k, s, p, d, ceil_mode=ceil, return_indices=True),
                  [x], [0], call, args, extra_out=True)
# ties (the first maximum wins) and NaN (it wins, the last one), default stride (= kernel)
for dt in DTYPES:
    x = torch.randint(0, 3, (2, 2, 6, 6)).to(dt)
    args = dict(kernel=[3, 3], stride=[], padding=[1, 1], dilation=[1, 1], ceil_mode=False)
    grad_case(f"max_pool2d_ties_{dname(dt)}", "max_pool",
              lambda x: F.max_pool2d(x, 3, None, 1, return_indices=True), [x], [0],
              "F.max_pool2d(x, 3, padding=1, return_indices=True)", args, extra_out=True)
    x = randn(1, 2, 4, 6, dtype=dt)
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, 2, 3] = float("nan")
    x[0, 1, 3, 3] = float("nan")
    args = dict(kernel=[2, 3], stride=[2, 3], padding=[0, 0], dilation=[1, 1], ceil_mode=False)
    rf.case(f"max_pool2d_nan_{dname(dt)}", "max_pool_fwd", [x],
            lambda x: F.max_pool2d(x, (2, 3), return_indices=True),
            call="F.max_pool2d(x, (2, 3), return_indices=True)", args=args)

AVGPOOL = [
    # name, x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ("1d_k3s2p1", (2, 3, 10), [3], [2], [1], False, True, None),
    ("1d_k3s2p1_nopad", (2, 3, 10), [3], [2], [1], False, False, None),
    ("1d_ceil", (2, 3, 10), [4], [3], [2], True, True, None),
    ("1d_ceil_nopad", (2, 3, 10), [4], [3], [2], True, False, None),
    ("2d_k2", (2, 3, 6, 8), [2, 2], [2, 2], [0, 0], False, True, None),
    ("2d_k3s2p1", (2, 3, 7, 8), [3, 3], [2, 2], [1, 1], False, True, None),
    ("2d_k3s2p1_nopad", (2, 3, 7, 8), [3, 3], [2, 2], [1, 1], False, False, None),
    ("2d_ceil_pad", (2, 2, 7, 8), [3, 2], [2, 3], [1, 1], True, True, None),
    ("2d_ceil_nopad", (2, 2, 7, 8), [3, 2], [2, 3], [1, 1], True, False, None),
    ("2d_divisor", (2, 2, 7, 8), [3, 3], [2, 2], [1, 1], True, False, 5),
    ("3d_k2", (1, 2, 4, 6, 5), [2, 2, 2], [2, 2, 2], [0, 0, 0], False, True, None),
    ("3d_mixed_ceil", (2, 2, 5, 6, 7), [3, 2, 3], [2, 1, 2], [1, 0, 1], True, False, None),
    ("3d_divisor", (1, 2, 5, 4, 5), [2, 2, 2], [1, 2, 2], [1, 1, 0], False, True, 3),
]
for name, xs, k, s, p, ceil, cip, div in AVGPOOL:
    for dt in DTYPES:
        x = randn(*xs, dtype=dt)
        n = len(xs) - 2
        args = dict(kernel=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=cip, divisor_override=div)
        if n == 1:
            fn = (lambda x, k=k, s=s, p=p, ceil=ceil, cip=cip: F.avg_pool1d(x, k, s, p, ceil, cip))
            if div is not None:
                raise AssertionError("avg_pool1d takes no divisor_override")
        else:
            fn = (lambda x, k=k, s=s, p=p, ceil=ceil, cip=cip, div=div, n=n: getattr(F, f"avg_pool{n}d")(
                x, k, s, p, ceil, cip, div))
        call = f"F.avg_pool{n}d(x, {k}, {s}, {p}, ceil_mode={ceil}, count_include_pad={cip}, divisor_override={div})"
        grad_case(f"avg_pool{name}_{dname(dt)}", "avg_pool", fn, [x], [0], call, args)

ADAPTIVE = [
    ("1d_down", (2, 3, 7), [3]),
    ("1d_up", (2, 3, 4), [6]),
    ("1d_one", (2, 3, 5), [1]),
    ("2d_down", (2, 3, 7, 9), [3, 4]),
    ("2d_up", (1, 2, 3, 5), [5, 7]),
    ("2d_mixed", (2, 2, 6, 5), [4, 2]),
    ("3d_down", (1, 2, 5, 6, 7), [2, 3, 3]),
    ("3d_up", (1, 2, 2, 3, 2), [3, 4, 3]),
]
for name, xs, o in ADAPTIVE:
    for dt in DTYPES:
        x = randn(*xs, dtype=dt)
        n = len(xs) - 2
        grad_case(f"adaptive_avg_pool{name}_{dname(dt)}", "adaptive_avg_pool",
                  lambda x, o=o, n=n: getattr(F, f"adaptive_avg_pool{n}d")(x, o), [x], [0],
                  f"F.adaptive_avg_pool{n}d(x, {o})", dict(output_size=o))
        grad_case(f"adaptive_max_pool{name}_{dname(dt)}", "adaptive_max_pool",
                  lambda x, o=o, n=n: getattr(F, f"adaptive_max_pool{n}d")(x, o, return_indices=True), [x], [0],
                  f"F.adaptive_max_pool{n}d(x, {o}, return_indices=True)", dict(output_size=o), extra_out=True)

UNPOOL = [
    # name, pooled input shape, kernel, stride, padding, output spatial size
    ("1d", (2, 3, 11), [2], [2], [0], [11]),
    ("1d_pad", (2, 2, 9), [3], [2], [1], [9]),
    ("2d", (2, 3, 6, 7), [2, 2], [2, 2], [0, 0], [6, 7]),
    ("2d_overlap", (1, 2, 6, 6), [3, 3], [1, 1], [1, 1], [6, 6]),
    ("3d", (1, 2, 4, 5, 4), [2, 2, 2], [2, 2, 2], [0, 0, 0], [4, 5, 4]),
]
for name, xs, k, s, p, osz in UNPOOL:
    for dt in DTYPES:
        n = len(xs) - 2
        v, idx = getattr(F, f"max_pool{n}d")(randn(*xs, dtype=dt), k, s, p, return_indices=True)
        v = randn(*v.shape, dtype=dt)
        grad_case(f"max_unpool{name}_{dname(dt)}", "max_unpool",
                  lambda v, i, k=k, s=s, p=p, osz=osz, n=n: getattr(F, f"max_unpool{n}d")(v, i, k, s, p, osz),
                  [v, idx], [0], f"F.max_unpool{n}d(v, i, {k}, {s}, {p}, output_size={osz})",
                  dict(output_size=osz))

# ----------------------------------------------------------------------------- errors
x4 = randn(2, 4, 5, 5, dtype=torch.float32)
w4 = randn(6, 4, 3, 3, dtype=torch.float32)
CONV_ERR = [
    ("conv_err_channels", [x4, randn(6, 3, 3, 3, dtype=torch.float32)], dict(stride=[1], padding=[0], dilation=[1], groups=1)),
    ("conv_err_groups", [x4, w4], dict(stride=[1], padding=[0], dilation=[1], groups=3)),
    ("conv_err_groups_div", [randn(2, 4, 5, 5, dtype=torch.float32), randn(3, 2, 3, 3, dtype=torch.float32)],
     dict(stride=[1], padding=[0], dilation=[1], groups=2)),
    ("conv_err_kernel_too_big", [x4[:, :, :2, :2].contiguous(), w4], dict(stride=[1], padding=[0], dilation=[1], groups=1)),
    ("conv_err_dilated_too_big", [x4, w4], dict(stride=[1], padding=[0], dilation=[3], groups=1)),
    ("conv_err_stride0", [x4, w4], dict(stride=[0], padding=[0], dilation=[1], groups=1)),
    ("conv_err_dilation0", [x4, w4], dict(stride=[1], padding=[0], dilation=[0], groups=1)),
    ("conv_err_groups0", [x4, w4], dict(stride=[1], padding=[0], dilation=[1], groups=0)),
    ("conv_err_stride_len", [x4, w4], dict(stride=[1, 1, 1], padding=[0], dilation=[1], groups=1)),
    ("conv_err_rank", [x4[:, :, 0].contiguous(), w4], dict(stride=[1], padding=[0], dilation=[1], groups=1)),
    ("conv_err_dtype", [x4, w4.double()], dict(stride=[1], padding=[0], dilation=[1], groups=1)),
    ("conv_err_out_channels0", [x4, randn(0, 4, 3, 3, dtype=torch.float32)], dict(stride=[1], padding=[0], dilation=[1], groups=1)),
]
for name, ins, a in CONV_ERR:
    rf.error_case(name, "conv", ins, lambda x, w, a=a: F.conv2d(
        x, w, None, a["stride"] if len(a["stride"]) > 1 else a["stride"][0], a["padding"][0], a["dilation"][0],
        a["groups"]), call=f"F.conv2d(x, w, **{a})", args=dict(a, bias=False))
rf.error_case("conv_err_bias", "conv", [x4, w4, randn(5, dtype=torch.float32)], lambda x, w, b: F.conv2d(x, w, b),
              call="F.conv2d(x, w, b)", args=dict(stride=[1], padding=[0], dilation=[1], groups=1, bias=True))
rf.error_case("conv_err_bias_dtype", "conv", [x4, w4, randn(6, dtype=torch.float64)], lambda x, w, b: F.conv2d(x, w, b),
              call="F.conv2d(x, w, b)", args=dict(stride=[1], padding=[0], dilation=[1], groups=1, bias=True))
wt = randn(4, 3, 3, 3, dtype=torch.float32)
CONVT_ERR = [
    ("conv_transpose_err_outpad", [x4, wt], dict(stride=[1], padding=[0], output_padding=[1], dilation=[1], groups=1)),
    ("conv_transpose_err_outpad_s2", [x4, wt], dict(stride=[2], padding=[0], output_padding=[2], dilation=[1], groups=1)),
    ("conv_transpose_err_channels", [x4, randn(3, 3, 3, 3, dtype=torch.float32)],
     dict(stride=[1], padding=[0], output_padding=[0], dilation=[1], groups=1)),
]
for name, ins, a in CONVT_ERR:
    rf.error_case(name, "conv_transpose", ins, lambda x, w, a=a: F.conv_transpose2d(
        x, w, None, a["stride"][0], a["padding"][0], a["output_padding"][0], a["groups"], a["dilation"][0]),
        call=f"F.conv_transpose2d(x, w, **{a})", args=dict(a, bias=False))
POOL_ERR = [
    ("max_pool_err_pad", "max_pool", dict(kernel=[3], stride=[], padding=[2], dilation=[1], ceil_mode=False),
     lambda x: F.max_pool2d(x, 3, padding=2)),
    ("max_pool_err_pad_dil", "max_pool", dict(kernel=[3], stride=[], padding=[3], dilation=[2], ceil_mode=False),
     lambda x: F.max_pool2d(x, 3, dilation=2, padding=3)),
    ("max_pool_err_too_small", "max_pool", dict(kernel=[6], stride=[], padding=[0], dilation=[1], ceil_mode=False),
     lambda x: F.max_pool2d(x, 6)),
    ("max_pool_err_kernel0", "max_pool", dict(kernel=[0], stride=[1], padding=[0], dilation=[1], ceil_mode=False),
     lambda x: F.max_pool2d(x, 0, 1)),
    ("max_pool_err_stride0", "max_pool", dict(kernel=[2], stride=[0], padding=[0], dilation=[1], ceil_mode=False),
     lambda x: F.max_pool2d(x, 2, stride=0)),
    ("max_pool_err_dilation0", "max_pool", dict(kernel=[2], stride=[], padding=[0], dilation=[0], ceil_mode=False),
     lambda x: F.max_pool2d(x, 2, dilation=0)),
    ("avg_pool_err_pad", "avg_pool", dict(kernel=[3], stride=[], padding=[2], ceil_mode=False, count_include_pad=True,
                                          divisor_override=None), lambda x: F.avg_pool2d(x, 3, padding=2)),
    ("avg_pool_err_too_small", "avg_pool", dict(kernel=[6], stride=[], padding=[0], ceil_mode=False,
                                                count_include_pad=True, divisor_override=None), lambda x: F.avg_pool2d(x, 6)),
    ("avg_pool_err_divisor0", "avg_pool", dict(kernel=[2], stride=[], padding=[0], ceil_mode=False,
                                               count_include_pad=True, divisor_override=0),
     lambda x: F.avg_pool2d(x, 2, divisor_override=0)),
]
for name, op, a, fn in POOL_ERR:
    rf.error_case(name, op, [x4], fn, call=name, args=a)
rf.error_case("adaptive_avg_pool_err_empty", "adaptive_avg_pool", [x4[:, :, :0].contiguous()],
              lambda x: F.adaptive_avg_pool2d(x, 2), call="F.adaptive_avg_pool2d(x[:, :, :0], 2)", args=dict(output_size=[2]))
rf.error_case("adaptive_max_pool_err_empty", "adaptive_max_pool", [x4[:, :, :0].contiguous()],
              lambda x: F.adaptive_max_pool2d(x, 2), call="F.adaptive_max_pool2d(x[:, :, :0], 2)", args=dict(output_size=[2]))
rf.error_case("max_pool_err_empty_channels", "max_pool", [x4[:, :0].contiguous()],
              lambda x: F.max_pool2d(x, 2), call="F.max_pool2d(x[:, :0], 2)",
              args=dict(kernel=[2], stride=[], padding=[0], dilation=[1], ceil_mode=False))
v, i = F.max_pool2d(x4, 2, return_indices=True)
rf.error_case("max_unpool_err_index", "max_unpool", [v, i + 100], lambda v, i: F.max_unpool2d(v, i, 2, output_size=(4, 4)),
              call="F.max_unpool2d(v, i + 100, 2, output_size=(4, 4))", args=dict(output_size=[4, 4]))
rf.error_case("max_unpool_err_index_small", "max_unpool", [v, i], lambda v, i: F.max_unpool2d(v, i, 1),
              call="F.max_unpool2d(v, i, 1)", args=dict(output_size=[2, 2]))
rf.error_case("max_unpool_err_dtype", "max_unpool", [v, i.int()], lambda v, i: F.max_unpool2d(v, i, 2),
              call="F.max_unpool2d(v, i.int(), 2)", args=dict(output_size=[4, 4]))
rf.error_case("max_unpool_err_shape", "max_unpool", [v, i[:1].contiguous()], lambda v, i: F.max_unpool2d(v, i, 2),
              call="F.max_unpool2d(v, i[:1], 2)", args=dict(output_size=[4, 4]))

rf.save()
