"""Reference data for torch.nn layers: forward, backward and state_dict of each layer.

For each case, in PyTorch:
    torch.manual_seed(seed)                 # seed = crc32(case name), recorded in the case
    m = nn.<layer>(**kwargs)                # then .double() for the F64 cases
    init(m) (optional, e.g. "perturb")      # randomises params/buffers so eval-mode stats matter
    m.train(train)
    sd = m.state_dict()                     # recorded BEFORE the forward
    xs = inputs (made after the layer, same RNG stream); floating ones require grad
    outs = m(*xs, **forward_kwargs)
    torch.autograd.backward(float outs, gouts)   # gouts: fixed random, same shape as each out
Recorded tensors (all in data/nn_layers.safetensors):
    {case}/sd/{key}        state_dict before the forward (the Rust layer loads this)
    {case}/in/{i}          inputs (int64 indices as I64)
    {case}/out/{i}         outputs (e.g. MaxPool return_indices -> out/1 is I64)
    {case}/gout/{i}        upstream gradient of each floating output
    {case}/gin/{i}         grad of input i (only inputs that required grad)
    {case}/gp/{key}        grad of each parameter, by state_dict key
    {case}/sd_after/{key}  state_dict entries whose value changed during the forward
The metadata "cases" is a JSON list; see `case` below for the fields.

Add a case in one line, e.g.:
    case("linear_nobias", "Linear", dict(in_features=4, out_features=3, bias=False), [R(2, 4)])
Input specs: R(*shape, s=scale) randn, P(*shape, lo, hi) uniform, I(hi, *shape) int64 in [0, hi),
T(tensor) fixed values, A(kinks, *shape) randn with entries just either side of each kink.

Run: python3 reference/gen_nn_layers.py  ->  reference/data/nn_layers.safetensors
"""
import zlib

import torch
import torch.nn.functional as F
from torch import nn

from refgen import RefFile

F32, F64 = torch.float32, torch.float64
BOTH = (F32, F64)
TOL = {F32: (1e-5, 1e-4), F64: (1e-10, 1e-8)}
rf = RefFile("nn_layers")


# ----------------------------------------------------------------------------- input specs
# Each spec is a function dtype -> tensor, evaluated after the layer is built (same RNG stream).
def R(*shape, s=1.0):
    return lambda dt: torch.randn(*shape, dtype=dt) * s


def P(*shape, lo=0.5, hi=1.5):
    return lambda dt: torch.rand(*shape, dtype=dt) * (hi - lo) + lo


def I(hi, *shape):  # noqa: E743 - short on purpose
    return lambda dt: torch.randint(0, hi, shape, dtype=torch.int64)


def T(values, dtype=None):
    """Fixed values; floating values take the case's dtype unless dtype is given."""
    def make(dt):
        t = torch.as_tensor(values)
        if dtype is not None:
            return t.to(dtype)
        return t.to(dt) if t.is_floating_point() else t
    return make


def A(kinks, *shape, s=2.0, eps=0.03):
    """randn * s, with entries at kink - eps and kink + eps for every kink (never at the kink)."""
    def make(dt):
        x = torch.randn(*shape, dtype=dt) * s
        flat = x.view(-1)
        pos = torch.randperm(flat.numel())
        vals = [k + d for k in kinks for d in (-eps, eps)]
        assert len(vals) <= flat.numel()
        for p, v in zip(pos, vals):
            flat[p] = v
        return x
    return make


# ----------------------------------------------------------------------------- init hooks
def perturb(m):
    """Random affine params and running stats, so that eval mode and affine maths are tested."""
    with torch.no_grad():
        for k, v in m.state_dict().items():
            if not v.is_floating_point():
                if k.endswith("num_batches_tracked"):
                    v.fill_(3)
                continue
            if k.endswith("running_var"):
                v.copy_(torch.rand_like(v) + 0.5)
            elif k.endswith("weight"):
                v.copy_(torch.rand_like(v) + 0.5)
            else:
                v.copy_(torch.randn_like(v) * 0.5)


INIT = {"perturb": perturb}


# ----------------------------------------------------------------------------- recording
def jsonable(v):
    if isinstance(v, (tuple, list)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    return v


def _one(name, layer, kwargs, inputs, train, dtype, grad, init, fwd, atol, rtol, note):
    assert name not in rf.names, f"duplicate case {name}"
    rf.names.add(name)
    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    m = getattr(nn, layer)(**kwargs)
    if dtype == F64:
        m = m.double()
    if init:
        INIT[init](m)
    m.train(train)
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    xs = inputs(dtype) if callable(inputs) else [spec(dtype) for spec in inputs]
    rg = list(grad) if grad is not None else [x.is_floating_point() for x in xs]
    xs = [x.detach().clone().requires_grad_(r) for x, r in zip(xs, rg)]
    out = m(*xs, **(fwd or {}))
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    gouts = [torch.randn_like(o) if o.is_floating_point() and o.requires_grad else None for o in outs]
    pairs = [(o, g) for o, g in zip(outs, gouts) if g is not None]
    if pairs:
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    after = m.state_dict()
    changed = [k for k in after if not torch.equal(after[k], sd[k])]
    params = dict(m.named_parameters())

    for k, v in sd.items():
        rf._put(f"{name}/sd/{k}", v)
    for i, x in enumerate(xs):
        rf._put(f"{name}/in/{i}", x)
        if rg[i]:
            rf._put(f"{name}/gin/{i}", x.grad if x.grad is not None else torch.zeros_like(x))
    for i, (o, g) in enumerate(zip(outs, gouts)):
        rf._put(f"{name}/out/{i}", o)
        if g is not None:
            rf._put(f"{name}/gout/{i}", g)
    for k, p in params.items():
        rf._put(f"{name}/gp/{k}", p.grad if p.grad is not None else torch.zeros_like(p))
    for k in changed:
        rf._put(f"{name}/sd_after/{k}", after[k])
    d_atol, d_rtol = TOL[dtype]
    c = {
        "name": name, "layer": layer, "kwargs": jsonable(kwargs), "train": train,
        "dtype": "F32" if dtype == F32 else "F64", "seed": seed,
        "inputs": len(xs), "outputs": len(outs), "input_requires_grad": rg,
        "output_has_grad": [g is not None for g in gouts],
        "sd_keys": list(sd), "params": list(params), "sd_after_keys": changed,
        "atol": d_atol if atol is None else atol, "rtol": d_rtol if rtol is None else rtol,
    }
    if fwd:
        c["forward_kwargs"] = jsonable(fwd)
    if init:
        c["init"] = init
    if note:
        c["note"] = note
    rf.cases.append(c)


def case(name, layer, kwargs, inputs, train=True, dtypes=(F32,), grad=None, init=None, fwd=None,
         atol=None, rtol=None, note=None):
    """Records one case per (dtype, train mode). Names get _f32/_f64 and, when train is a tuple,
    _train/_eval suffixes. grad: per input, whether it requires grad (default: floating inputs).
    fwd: extra keyword arguments of forward (e.g. output_size)."""
    modes = train if isinstance(train, tuple) else (train,)
    for dt in dtypes:
        for tr in modes:
            n = f"{name}_{'f32' if dt == F32 else 'f64'}"
            if len(modes) > 1:
                n += "_train" if tr else "_eval"
            _one(n, layer, kwargs, inputs, tr, dt, grad, init, fwd, atol, rtol, note)


def error_case(name, layer, kwargs, inputs, train=True, fwd=None, note=None):
    """The forward must fail; records the inputs and PyTorch's message (first line)."""
    assert name not in rf.names, f"duplicate case {name}"
    rf.names.add(name)
    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    m = getattr(nn, layer)(**kwargs)
    m.train(train)
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    xs = [spec(F32) for spec in inputs]
    try:
        m(*xs, **(fwd or {}))
    except Exception as e:  # noqa: BLE001
        msg = str(e)
    else:
        raise AssertionError(f"{name}: expected PyTorch to raise")
    for k, v in sd.items():
        rf._put(f"{name}/sd/{k}", v)
    for i, x in enumerate(xs):
        rf._put(f"{name}/in/{i}", x)
    c = {"name": name, "layer": layer, "kwargs": jsonable(kwargs), "train": train, "dtype": "F32",
         "seed": seed, "inputs": len(xs), "outputs": 0, "input_requires_grad": [False] * len(xs),
         "output_has_grad": [], "sd_keys": list(sd), "params": [], "sd_after_keys": [],
         "atol": 0.0, "rtol": 0.0, "error": msg}
    if fwd:
        c["forward_kwargs"] = jsonable(fwd)
    if note:
        c["note"] = note
    rf.cases.append(c)


TE = (True, False)  # record both train and eval

# ============================================================================ basic
case("identity", "Identity", {}, [R(2, 3)])
case("linear", "Linear", dict(in_features=4, out_features=3), [R(2, 4)], dtypes=BOTH)
case("linear_nobias", "Linear", dict(in_features=4, out_features=3, bias=False), [R(2, 4)])
case("linear_3d", "Linear", dict(in_features=4, out_features=5), [R(2, 3, 4)])
case("linear_unbatched", "Linear", dict(in_features=4, out_features=2), [R(4)])
case("bilinear", "Bilinear", dict(in1_features=3, in2_features=4, out_features=2), [R(3, 3), R(3, 4)], dtypes=BOTH)
case("bilinear_nobias", "Bilinear", dict(in1_features=2, in2_features=3, out_features=4, bias=False),
     [R(2, 2), R(2, 3)])
case("flatten", "Flatten", {}, [R(2, 3, 2, 2)])
case("flatten_0_m1", "Flatten", dict(start_dim=0, end_dim=-1), [R(2, 3, 2)])
case("flatten_1_2", "Flatten", dict(start_dim=1, end_dim=2), [R(2, 3, 2, 2)])
case("flatten_neg", "Flatten", dict(start_dim=-3, end_dim=-2), [R(2, 3, 2, 2)])
case("unflatten", "Unflatten", dict(dim=1, unflattened_size=(2, 3)), [R(2, 6, 2)])
case("unflatten_neg_infer", "Unflatten", dict(dim=-1, unflattened_size=(2, -1)), [R(2, 3, 6)])
case("unflatten_dim0", "Unflatten", dict(dim=0, unflattened_size=(2, 2)), [R(4, 3)])

# ============================================================================ convolution
C1 = dict(in_channels=2, out_channels=3, kernel_size=3)
case("conv1d", "Conv1d", C1, [R(2, 2, 8)], dtypes=BOTH)
case("conv1d_stride2_pad1", "Conv1d", {**C1, "stride": 2, "padding": 1}, [R(2, 2, 8)])
case("conv1d_pad_tuple", "Conv1d", {**C1, "padding": (2,)}, [R(2, 2, 7)])
case("conv1d_same_k4_dil2", "Conv1d", dict(in_channels=2, out_channels=3, kernel_size=4, padding="same",
                                           dilation=2), [R(2, 2, 8)],
     note="effective kernel dilation*(k-1)+1 = 7 is odd: symmetric padding 3/3")
case("conv1d_same_even_k", "Conv1d", dict(in_channels=2, out_channels=2, kernel_size=2, padding="same"), [R(2, 2, 6)],
     note="padding='same' with an even effective kernel pads asymmetrically: total//2 left, the rest right")
case("conv1d_same_k4", "Conv1d", dict(in_channels=2, out_channels=3, kernel_size=4, padding="same"), [R(2, 2, 7)],
     note="total padding 3: 1 left, 2 right")
case("conv1d_valid", "Conv1d", {**C1, "padding": "valid"}, [R(2, 2, 7)])
case("conv1d_dil2", "Conv1d", {**C1, "dilation": 2}, [R(2, 2, 8)])
case("conv1d_groups2", "Conv1d", dict(in_channels=4, out_channels=6, kernel_size=3, groups=2), [R(2, 4, 6)])
case("conv1d_nobias", "Conv1d", {**C1, "bias": False}, [R(2, 2, 6)])
for pm in ("reflect", "replicate", "circular"):
    case(f"conv1d_{pm}", "Conv1d", {**C1, "padding": 2, "padding_mode": pm}, [R(2, 2, 6)])
case("conv1d_unbatched", "Conv1d", C1, [R(2, 7)])
C2 = dict(in_channels=2, out_channels=3, kernel_size=3)
case("conv2d", "Conv2d", C2, [R(2, 2, 5, 5)], dtypes=BOTH)
case("conv2d_stride_pad_tuple", "Conv2d", {**C2, "stride": (2, 1), "padding": (1, 2)}, [R(2, 2, 6, 5)])
case("conv2d_stride2_odd", "Conv2d", {**C2, "stride": 2}, [R(2, 2, 7, 6)])
case("conv2d_kernel_tuple", "Conv2d", dict(in_channels=2, out_channels=2, kernel_size=(2, 3)), [R(2, 2, 5, 6)])
case("conv2d_same", "Conv2d", dict(in_channels=2, out_channels=2, kernel_size=(3, 4), padding="same"),
     [R(2, 2, 5, 6)], note="width: kernel 4 -> padding 1 left, 2 right")
case("conv2d_same_dil", "Conv2d", dict(in_channels=2, out_channels=2, kernel_size=(2, 3), padding="same",
                                       dilation=(3, 2)), [R(2, 2, 6, 6)])
case("conv2d_valid", "Conv2d", {**C2, "padding": "valid"}, [R(2, 2, 5, 6)])
case("conv2d_dil2", "Conv2d", {**C2, "dilation": 2, "padding": 1}, [R(2, 2, 6, 6)])
case("conv2d_groups2", "Conv2d", dict(in_channels=4, out_channels=2, kernel_size=3, groups=2), [R(2, 4, 5, 5)])
case("conv2d_depthwise", "Conv2d", dict(in_channels=2, out_channels=4, kernel_size=3, groups=2, padding=1),
     [R(2, 2, 5, 5)], dtypes=BOTH)
case("conv2d_nobias", "Conv2d", {**C2, "bias": False}, [R(2, 2, 5, 5)])
for pm in ("zeros", "reflect", "replicate", "circular"):
    case(f"conv2d_{pm}", "Conv2d", {**C2, "padding": (1, 2), "padding_mode": pm}, [R(2, 2, 5, 5)])
case("conv2d_unbatched", "Conv2d", C2, [R(2, 5, 5)])
C3 = dict(in_channels=2, out_channels=2, kernel_size=2)
case("conv3d", "Conv3d", C3, [R(2, 2, 4, 5, 5)], dtypes=BOTH)
case("conv3d_stride2_pad1", "Conv3d", {**C3, "kernel_size": 3, "stride": 2, "padding": 1}, [R(2, 2, 5, 5, 5)])
case("conv3d_same", "Conv3d", {**C3, "kernel_size": 3, "padding": "same"}, [R(1, 2, 4, 4, 5)])
case("conv3d_groups2_dil2", "Conv3d", dict(in_channels=2, out_channels=4, kernel_size=2, groups=2, dilation=2),
     [R(2, 2, 5, 5, 5)])
case("conv3d_circular", "Conv3d", {**C3, "padding": 1, "padding_mode": "circular", "bias": False},
     [R(1, 2, 4, 4, 4)])
T1 = dict(in_channels=2, out_channels=3, kernel_size=3)
case("convt1d", "ConvTranspose1d", T1, [R(2, 2, 5)], dtypes=BOTH)
case("convt1d_stride2_pad1_op1", "ConvTranspose1d", {**T1, "stride": 2, "padding": 1, "output_padding": 1},
     [R(2, 2, 5)])
case("convt1d_groups2", "ConvTranspose1d", dict(in_channels=4, out_channels=6, kernel_size=3, groups=2),
     [R(2, 4, 5)])
case("convt1d_dil2_nobias", "ConvTranspose1d", {**T1, "dilation": 2, "bias": False}, [R(2, 2, 5)])
case("convt1d_output_size", "ConvTranspose1d", {**T1, "stride": 2, "padding": 1}, [R(2, 2, 5)],
     fwd=dict(output_size=[10]))
T2 = dict(in_channels=2, out_channels=3, kernel_size=3)
case("convt2d", "ConvTranspose2d", T2, [R(2, 2, 4, 4)], dtypes=BOTH)
case("convt2d_stride2_pad1_op1", "ConvTranspose2d", {**T2, "stride": 2, "padding": 1, "output_padding": 1},
     [R(2, 2, 4, 4)], dtypes=BOTH)
case("convt2d_tuple", "ConvTranspose2d", {**T2, "kernel_size": (2, 3), "stride": (2, 3), "padding": (0, 1),
                                          "output_padding": (1, 2)}, [R(2, 2, 3, 4)])
case("convt2d_groups2", "ConvTranspose2d", dict(in_channels=4, out_channels=2, kernel_size=3, groups=2, stride=2),
     [R(2, 4, 3, 3)])
case("convt2d_dil2_stride2_op1", "ConvTranspose2d", {**T2, "dilation": 2, "stride": 2, "output_padding": 1},
     [R(2, 2, 3, 3)], note="output_padding must be < max(stride, dilation)")
case("convt2d_nobias", "ConvTranspose2d", {**T2, "bias": False}, [R(2, 2, 3, 4)])
case("convt2d_output_size", "ConvTranspose2d", {**T2, "stride": 2, "padding": 1}, [R(2, 2, 4, 4)],
     fwd=dict(output_size=[8, 8]))
case("convt3d", "ConvTranspose3d", dict(in_channels=2, out_channels=2, kernel_size=2, stride=2), [R(1, 2, 2, 3, 3)])

# ============================================================================ pooling
case("maxpool1d", "MaxPool1d", dict(kernel_size=3, stride=2), [R(2, 3, 9)])
case("maxpool1d_pad_dil", "MaxPool1d", dict(kernel_size=2, padding=1, dilation=2), [R(2, 3, 8)])
case("maxpool1d_ceil", "MaxPool1d", dict(kernel_size=2, stride=2, ceil_mode=True), [R(2, 3, 7)])
case("maxpool1d_indices", "MaxPool1d", dict(kernel_size=3, stride=2, padding=1, return_indices=True), [R(2, 3, 8)])
case("maxpool2d", "MaxPool2d", dict(kernel_size=2), [R(2, 2, 6, 6)], dtypes=BOTH)
case("maxpool2d_k3_s2_p1", "MaxPool2d", dict(kernel_size=3, stride=2, padding=1), [R(2, 2, 7, 7)])
case("maxpool2d_ceil", "MaxPool2d", dict(kernel_size=2, stride=2, ceil_mode=True), [R(2, 2, 7, 7)])
case("maxpool2d_ceil_pad_drop", "MaxPool2d", dict(kernel_size=2, stride=2, padding=1, ceil_mode=True),
     [R(2, 2, 5, 5)], note="ceil_mode: the last window would start in the right padding, so it is dropped (3x3)")
case("maxpool2d_dil2", "MaxPool2d", dict(kernel_size=2, dilation=2), [R(2, 2, 6, 7)])
case("maxpool2d_tuple", "MaxPool2d", dict(kernel_size=(2, 3), stride=(1, 2)), [R(2, 2, 5, 7)])
case("maxpool2d_indices", "MaxPool2d", dict(kernel_size=3, stride=2, padding=1, return_indices=True),
     [R(2, 2, 6, 6)])
case("maxpool2d_unbatched", "MaxPool2d", dict(kernel_size=2), [R(3, 4, 4)])
case("maxpool3d", "MaxPool3d", dict(kernel_size=2), [R(2, 2, 4, 4, 4)])
case("maxpool3d_indices_ceil", "MaxPool3d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                                 return_indices=True), [R(1, 2, 5, 5, 4)])


def pooled2d(shape, **kw):
    """(values, indices) of F.max_pool2d on randn(shape): the inputs of MaxUnpool2d."""
    return lambda dt: list(F.max_pool2d(torch.randn(*shape, dtype=dt), return_indices=True, **kw))


def pooled1d(shape, **kw):
    return lambda dt: list(F.max_pool1d(torch.randn(*shape, dtype=dt), return_indices=True, **kw))


case("maxunpool2d", "MaxUnpool2d", dict(kernel_size=2), pooled2d((2, 2, 6, 6), kernel_size=2),
     note="inputs are (values, indices) of F.max_pool2d(randn(2,2,6,6), 2, return_indices=True)")
case("maxunpool2d_s2_p1", "MaxUnpool2d", dict(kernel_size=3, stride=2, padding=1),
     pooled2d((2, 2, 5, 5), kernel_size=3, stride=2, padding=1))
case("maxunpool2d_output_size", "MaxUnpool2d", dict(kernel_size=2), pooled2d((2, 2, 7, 7), kernel_size=2),
     fwd=dict(output_size=[7, 7]))
case("maxunpool1d", "MaxUnpool1d", dict(kernel_size=2), pooled1d((2, 3, 8), kernel_size=2))
case("avgpool1d", "AvgPool1d", dict(kernel_size=3, stride=2, padding=1), [R(2, 3, 8)])
case("avgpool1d_nopadcount", "AvgPool1d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
     [R(2, 3, 8)])
case("avgpool1d_ceil", "AvgPool1d", dict(kernel_size=2, stride=2, ceil_mode=True), [R(2, 3, 7)])
case("avgpool2d", "AvgPool2d", dict(kernel_size=2), [R(2, 2, 6, 6)], dtypes=BOTH)
case("avgpool2d_k3_s2_p1", "AvgPool2d", dict(kernel_size=3, stride=2, padding=1), [R(2, 2, 7, 7)])
case("avgpool2d_nopadcount", "AvgPool2d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
     [R(2, 2, 7, 7)])
case("avgpool2d_ceil", "AvgPool2d", dict(kernel_size=2, stride=2, ceil_mode=True), [R(2, 2, 5, 5)],
     note="the partial last window divides by the number of in-bounds elements")
case("avgpool2d_ceil_pad", "AvgPool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), [R(2, 2, 6, 6)],
     note="count_include_pad=True counts padding but not positions past the padding")
case("avgpool2d_divisor", "AvgPool2d", dict(kernel_size=2, padding=1, divisor_override=3), [R(2, 2, 5, 5)])
case("avgpool3d", "AvgPool3d", dict(kernel_size=2), [R(2, 2, 4, 4, 4)])
case("avgpool3d_p1_nopad_div", "AvgPool3d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False,
                                                 divisor_override=5), [R(1, 2, 5, 5, 4)])
case("avgpool3d_ceil_nopad", "AvgPool3d", dict(kernel_size=2, stride=2, padding=1, ceil_mode=True,
                                               count_include_pad=False), [R(1, 2, 5, 4, 5)])
case("adaptiveavgpool1d", "AdaptiveAvgPool1d", dict(output_size=3), [R(2, 3, 8)])
case("adaptiveavgpool1d_uneven", "AdaptiveAvgPool1d", dict(output_size=5), [R(2, 3, 7)])
case("adaptiveavgpool2d", "AdaptiveAvgPool2d", dict(output_size=(3, 2)), [R(2, 2, 7, 5)], dtypes=BOTH)
case("adaptiveavgpool2d_none", "AdaptiveAvgPool2d", dict(output_size=(None, 3)), [R(2, 2, 4, 7)])
case("adaptiveavgpool2d_global", "AdaptiveAvgPool2d", dict(output_size=1), [R(2, 3, 5, 5)])
case("adaptiveavgpool2d_upsample", "AdaptiveAvgPool2d", dict(output_size=(5, 4)), [R(1, 2, 3, 3)],
     note="output larger than input: windows overlap/repeat")
case("adaptivemaxpool1d", "AdaptiveMaxPool1d", dict(output_size=3), [R(2, 3, 8)])
case("adaptivemaxpool1d_indices", "AdaptiveMaxPool1d", dict(output_size=4, return_indices=True), [R(2, 3, 7)])
case("adaptivemaxpool2d", "AdaptiveMaxPool2d", dict(output_size=(3, 4)), [R(2, 2, 7, 6)])
case("adaptivemaxpool2d_indices", "AdaptiveMaxPool2d", dict(output_size=2, return_indices=True), [R(2, 2, 5, 5)])
case("adaptivemaxpool2d_none", "AdaptiveMaxPool2d", dict(output_size=(None, 2)), [R(2, 2, 3, 5)])
case("lppool2d", "LPPool2d", dict(norm_type=2, kernel_size=2), [R(2, 2, 6, 6)], dtypes=BOTH)
case("lppool2d_p3_ceil", "LPPool2d", dict(norm_type=3, kernel_size=(3, 2), stride=2, ceil_mode=True),
     [P(2, 2, 7, 6)], note="positive input")
case("lppool2d_p1", "LPPool2d", dict(norm_type=1, kernel_size=2, stride=1), [P(2, 2, 4, 4)])
case("lppool1d", "LPPool1d", dict(norm_type=2, kernel_size=3, stride=2), [R(2, 3, 8)])

# ============================================================================ normalization
case("batchnorm1d_2d", "BatchNorm1d", dict(num_features=3), [R(4, 3)], train=TE, init="perturb")
case("batchnorm1d_3d", "BatchNorm1d", dict(num_features=3), [R(2, 3, 5)], train=TE, init="perturb", dtypes=BOTH)
case("batchnorm1d_mom_none", "BatchNorm1d", dict(num_features=3, momentum=None), [R(2, 3, 5)], train=TE,
     init="perturb", note="momentum=None: cumulative average with factor 1/num_batches_tracked (3 -> 4)")
case("batchnorm1d_mom03", "BatchNorm1d", dict(num_features=3, momentum=0.3, eps=1e-3), [R(4, 3)], init="perturb")
case("batchnorm1d_noaffine", "BatchNorm1d", dict(num_features=3, affine=False), [R(4, 3)], train=TE, init="perturb")
case("batchnorm1d_notrack", "BatchNorm1d", dict(num_features=3, track_running_stats=False), [R(2, 3, 4)], train=TE,
     init="perturb", note="no running stats: batch statistics in eval mode too")
case("batchnorm2d", "BatchNorm2d", dict(num_features=3), [R(2, 3, 4, 4)], train=TE, init="perturb", dtypes=BOTH)
case("batchnorm2d_default_init", "BatchNorm2d", dict(num_features=2), [R(3, 2, 3, 3)], train=TE)
case("batchnorm2d_mom_none", "BatchNorm2d", dict(num_features=2, momentum=None), [R(2, 2, 3, 3)], init="perturb")
case("batchnorm2d_noaffine", "BatchNorm2d", dict(num_features=2, affine=False), [R(2, 2, 3, 3)], train=TE,
     init="perturb")
case("batchnorm2d_notrack", "BatchNorm2d", dict(num_features=2, track_running_stats=False), [R(2, 2, 3, 3)],
     train=TE, init="perturb")
case("batchnorm2d_nobias", "BatchNorm2d", dict(num_features=2, bias=False), [R(2, 2, 3, 3)], train=TE,
     init="perturb", note="bias is a keyword-only constructor argument (new in recent PyTorch): weight only")
case("batchnorm3d", "BatchNorm3d", dict(num_features=2), [R(2, 2, 3, 3, 3)], train=TE, init="perturb")
case("batchnorm3d_noaffine_notrack", "BatchNorm3d", dict(num_features=2, affine=False, track_running_stats=False),
     [R(2, 2, 2, 3, 3)])
case("layernorm", "LayerNorm", dict(normalized_shape=4), [R(2, 3, 4)], init="perturb", dtypes=BOTH)
case("layernorm_2d_shape", "LayerNorm", dict(normalized_shape=(3, 4)), [R(2, 3, 4)], init="perturb")
case("layernorm_default_init", "LayerNorm", dict(normalized_shape=5, eps=1e-3), [R(3, 5)])
case("layernorm_noaffine", "LayerNorm", dict(normalized_shape=4, elementwise_affine=False), [R(2, 3, 4)])
case("layernorm_nobias", "LayerNorm", dict(normalized_shape=4, bias=False), [R(2, 3, 4)], init="perturb")
case("groupnorm", "GroupNorm", dict(num_groups=2, num_channels=4), [R(2, 4, 5)], init="perturb", dtypes=BOTH)
case("groupnorm_4d", "GroupNorm", dict(num_groups=3, num_channels=6), [R(2, 6, 3, 3)], init="perturb")
case("groupnorm_noaffine", "GroupNorm", dict(num_groups=2, num_channels=4, affine=False, eps=1e-3), [R(2, 4, 3, 2)])
case("groupnorm_1group", "GroupNorm", dict(num_groups=1, num_channels=3), [R(2, 3, 4)], init="perturb")
case("groupnorm_nobias", "GroupNorm", dict(num_groups=2, num_channels=4, bias=False), [R(2, 4, 3)], init="perturb")
case("groupnorm_per_channel", "GroupNorm", dict(num_groups=3, num_channels=3), [R(2, 3, 4)])
case("instancenorm1d", "InstanceNorm1d", dict(num_features=3), [R(2, 3, 6)], train=TE)
case("instancenorm1d_affine", "InstanceNorm1d", dict(num_features=3, affine=True), [R(2, 3, 6)], init="perturb")
case("instancenorm1d_track", "InstanceNorm1d", dict(num_features=3, track_running_stats=True), [R(2, 3, 6)],
     train=TE, init="perturb")
case("instancenorm1d_unbatched", "InstanceNorm1d", dict(num_features=3, affine=True), [R(3, 6)], init="perturb")
case("instancenorm2d", "InstanceNorm2d", dict(num_features=2), [R(2, 2, 4, 4)], dtypes=BOTH)
case("instancenorm2d_affine", "InstanceNorm2d", dict(num_features=2, affine=True), [R(2, 2, 3, 4)], init="perturb")
case("instancenorm2d_affine_track", "InstanceNorm2d", dict(num_features=2, affine=True, track_running_stats=True,
                                                           momentum=0.2), [R(2, 2, 3, 4)], train=TE, init="perturb")
case("instancenorm1d_affine_nobias", "InstanceNorm1d", dict(num_features=3, affine=True, bias=False), [R(2, 3, 5)],
     init="perturb")
case("rmsnorm", "RMSNorm", dict(normalized_shape=4), [R(2, 3, 4)], init="perturb", dtypes=BOTH,
     note="eps=None: torch.finfo(dtype).eps")
case("rmsnorm_eps", "RMSNorm", dict(normalized_shape=4, eps=1e-3), [R(2, 3, 4, s=0.1)], init="perturb")
case("rmsnorm_2d_shape", "RMSNorm", dict(normalized_shape=(3, 4), eps=1e-6), [R(2, 3, 4)], init="perturb")
case("rmsnorm_noaffine", "RMSNorm", dict(normalized_shape=5, elementwise_affine=False), [R(3, 5)])
case("localresponsenorm", "LocalResponseNorm", dict(size=3), [R(2, 5, 4)], dtypes=BOTH)
case("localresponsenorm_4d", "LocalResponseNorm", dict(size=2, alpha=1e-2, beta=0.5, k=2.0), [R(2, 4, 3, 3, s=3)])

# ============================================================================ dropout (deterministic only)
DROP = (("Dropout", (2, 3, 4)), ("Dropout1d", (2, 3, 5)), ("Dropout2d", (2, 3, 3, 3)),
        ("Dropout3d", (2, 3, 2, 2, 3)), ("AlphaDropout", (2, 3, 4)), ("FeatureAlphaDropout", (2, 3, 2, 3)))
for layer, shape in DROP:
    case(f"{layer.lower()}_eval", layer, dict(p=0.5), [R(*shape)], train=False)
    case(f"{layer.lower()}_p0_train", layer, dict(p=0.0), [R(*shape)], train=True)

# ============================================================================ embedding
case("embedding", "Embedding", dict(num_embeddings=10, embedding_dim=4), [I(10, 2, 5)], dtypes=BOTH)
case("embedding_padding_idx", "Embedding", dict(num_embeddings=6, embedding_dim=3, padding_idx=0),
     [T([[0, 2, 0, 5], [1, 0, 3, 3]])], note="padding_idx row starts at 0 and gets no gradient")
case("embedding_padding_idx_neg", "Embedding", dict(num_embeddings=6, embedding_dim=3, padding_idx=-1),
     [T([[5, 2, 5], [1, 0, 3]])], note="padding_idx=-1 means row 5")
case("embedding_max_norm", "Embedding", dict(num_embeddings=6, embedding_dim=4, max_norm=1.0),
     [T([[0, 2, 2, 5], [1, 2, 4, 4]])],
     note="max_norm renormalises the looked-up rows of the weight in place (see sd_after)")
case("embedding_max_norm_p1", "Embedding", dict(num_embeddings=6, embedding_dim=4, max_norm=1.5, norm_type=1.0),
     [T([1, 3, 3, 0])])
case("embedding_scale_grad", "Embedding", dict(num_embeddings=5, embedding_dim=3, scale_grad_by_freq=True),
     [T([[1, 1, 2], [1, 4, 2]])], note="grad of each row divided by its count in the batch")
case("embedding_1d", "Embedding", dict(num_embeddings=7, embedding_dim=2), [I(7, 5)])
EB = dict(num_embeddings=8, embedding_dim=3)
IDX8 = T([1, 2, 4, 5, 4, 3, 2, 7])
OFF3 = T([0, 2, 5])
for mode in ("sum", "mean", "max"):
    case(f"embeddingbag_{mode}", "EmbeddingBag", {**EB, "mode": mode}, [IDX8, OFF3])
    case(f"embeddingbag_{mode}_2d", "EmbeddingBag", {**EB, "mode": mode}, [I(8, 3, 4)])
    case(f"embeddingbag_{mode}_empty_bag", "EmbeddingBag", {**EB, "mode": mode}, [IDX8, T([0, 3, 3, 6])],
         note="bag 1 is empty: its output row is zeros")
case("embeddingbag_mean_1d", "EmbeddingBag", {**EB, "mode": "mean"}, [IDX8, OFF3], dtypes=(F64,))
case("embeddingbag_sum_psw", "EmbeddingBag", {**EB, "mode": "sum"}, [IDX8, OFF3, R(8)],
     note="per_sample_weights (third input) requires grad")
case("embeddingbag_last_offset", "EmbeddingBag", {**EB, "mode": "sum", "include_last_offset": True},
     [IDX8, T([0, 2, 5, 8])], note="include_last_offset: 3 bags")
case("embeddingbag_padding_idx", "EmbeddingBag", {**EB, "mode": "mean", "padding_idx": 2}, [IDX8, OFF3],
     note="padding_idx entries are excluded from the bag (and from the mean's count)")

# ============================================================================ activations
S = (2, 3, 4)
case("relu", "ReLU", {}, [A([0], *S)], dtypes=BOTH)
case("relu6", "ReLU6", {}, [A([0, 6], *S, s=4)])
case("leakyrelu", "LeakyReLU", dict(negative_slope=0.2), [A([0], *S)], dtypes=BOTH)
case("leakyrelu_default", "LeakyReLU", {}, [A([0], *S)])
case("prelu", "PReLU", {}, [A([0], *S)])
case("prelu_channels", "PReLU", dict(num_parameters=3, init=0.1), [A([0], *S)], init="perturb", dtypes=BOTH,
     note="one slope per channel (dim 1)")
case("prelu_channels_4d", "PReLU", dict(num_parameters=2), [A([0], 2, 2, 3, 3)], init="perturb")
case("rrelu_eval", "RReLU", dict(lower=0.1, upper=0.3), [A([0], *S)], train=False,
     note="eval mode: fixed slope (lower+upper)/2")
case("elu", "ELU", dict(alpha=1.5), [A([0], *S)], dtypes=BOTH)
case("elu_default", "ELU", {}, [A([0], *S)])
case("selu", "SELU", {}, [A([0], *S)])
case("celu", "CELU", dict(alpha=0.7), [A([0], *S)])
case("gelu", "GELU", {}, [A([0], *S, s=3)], dtypes=BOTH)
case("gelu_tanh", "GELU", dict(approximate="tanh"), [A([0], *S, s=3)], dtypes=BOTH)
case("silu", "SiLU", {}, [R(*S, s=3)], dtypes=BOTH)
case("mish", "Mish", {}, [R(*S, s=3)], dtypes=BOTH)
case("sigmoid", "Sigmoid", {}, [R(*S, s=4)], dtypes=BOTH)
case("logsigmoid", "LogSigmoid", {}, [T([[-30.0, -5.0, -0.5, 0.03], [0.7, 5.0, 30.0, -0.03]])], dtypes=BOTH)
case("logsigmoid_rand", "LogSigmoid", {}, [R(*S, s=4)])
case("tanh", "Tanh", {}, [R(*S, s=2)], dtypes=BOTH)
case("hardtanh", "Hardtanh", dict(min_val=-0.5, max_val=1.5), [A([-0.5, 1.5], *S)])
case("hardtanh_default", "Hardtanh", {}, [A([-1, 1], *S)])
case("hardsigmoid", "Hardsigmoid", {}, [A([-3, 3], *S, s=4)], dtypes=BOTH)
case("hardswish", "Hardswish", {}, [A([-3, 3], *S, s=4)], dtypes=BOTH)
case("softplus", "Softplus", {}, [R(*S, s=5)])
case("softplus_beta_thr", "Softplus", dict(beta=2.0, threshold=5.0), [A([2.5], *S, s=3)], dtypes=BOTH,
     note="linear where beta * x > threshold")
case("softsign", "Softsign", {}, [R(*S, s=3)])
case("softshrink", "Softshrink", dict(lambd=0.3), [A([-0.3, 0.3], *S)])
case("softshrink_default", "Softshrink", {}, [A([-0.5, 0.5], *S)])
case("hardshrink", "Hardshrink", dict(lambd=0.4), [A([-0.4, 0.4], *S)])
case("tanhshrink", "Tanhshrink", {}, [R(*S, s=2)])
case("threshold", "Threshold", dict(threshold=0.1, value=-1.0), [A([0.1], *S)])
case("glu", "GLU", {}, [R(2, 3, 4)], dtypes=BOTH, note="default dim=-1")
case("glu_dim1", "GLU", dict(dim=1), [R(2, 4, 3)])
case("softmax_dim1", "Softmax", dict(dim=1), [R(2, 3, 4)], dtypes=BOTH)
case("softmax_last", "Softmax", dict(dim=-1), [R(2, 3, 4, s=30)], note="large logits")
case("logsoftmax_dim1", "LogSoftmax", dict(dim=1), [R(2, 3, 4)], dtypes=BOTH)
case("logsoftmax_last", "LogSoftmax", dict(dim=-1), [R(2, 5, s=30)])
case("softmin", "Softmin", dict(dim=0), [R(3, 4)])
case("softmin_last", "Softmin", dict(dim=-1), [R(2, 3, 4)], dtypes=(F64,))
case("softmax2d", "Softmax2d", {}, [R(2, 3, 2, 2)])

# ============================================================================ resampling
case("upsample_nearest2", "Upsample", dict(scale_factor=2, mode="nearest"), [R(2, 2, 3, 3)], dtypes=BOTH)
case("upsample_nearest_1d", "Upsample", dict(scale_factor=2), [R(2, 2, 4)])
case("upsample_nearest_size", "Upsample", dict(size=(5, 7)), [R(1, 2, 3, 3)])
case("upsample_nearest_1p7", "Upsample", dict(scale_factor=1.7), [R(1, 2, 3, 5)],
     note="non-integer scale: out = floor(in*1.7) = (5, 8) and the source index is floor(dst / 1.7), not "
          "floor(dst * in/out): width maps to 0,0,1,1,2,2,3,4")
case("upsample_nearest_exact", "Upsample", dict(scale_factor=1.7, mode="nearest-exact"), [R(1, 2, 3, 5)])
case("upsample_bilinear_1p7", "Upsample", dict(scale_factor=1.7, mode="bilinear"), [R(1, 2, 3, 5)],
     note="bilinear with a non-integer scale also uses 1/scale_factor for the source coordinate")
case("upsample_bilinear", "Upsample", dict(scale_factor=2, mode="bilinear"), [R(2, 2, 3, 3)], dtypes=BOTH)
case("upsample_bilinear_align", "Upsample", dict(scale_factor=2, mode="bilinear", align_corners=True),
     [R(2, 2, 3, 3)], dtypes=BOTH)
case("upsample_bilinear_size", "Upsample", dict(size=(5, 7), mode="bilinear"), [R(1, 2, 3, 4)])
case("upsample_bilinear_size_align", "Upsample", dict(size=(5, 7), mode="bilinear", align_corners=True),
     [R(1, 2, 3, 4)])
case("upsample_bilinear_tuple_scale", "Upsample", dict(scale_factor=(2.0, 1.5), mode="bilinear"), [R(1, 2, 3, 4)])
case("upsample_bicubic", "Upsample", dict(scale_factor=2, mode="bicubic"), [R(1, 2, 3, 3)], dtypes=BOTH)
case("upsample_bicubic_align", "Upsample", dict(scale_factor=2, mode="bicubic", align_corners=True),
     [R(1, 2, 3, 3)])
case("upsample_linear_1d", "Upsample", dict(scale_factor=3, mode="linear"), [R(2, 2, 4)])
case("upsample_trilinear", "Upsample", dict(scale_factor=2, mode="trilinear"), [R(1, 1, 2, 2, 3)])
case("upsample_downsample_bilinear", "Upsample", dict(size=(2, 3), mode="bilinear"), [R(1, 2, 5, 6)])
case("upsamplingnearest2d", "UpsamplingNearest2d", dict(scale_factor=2), [R(1, 2, 2, 3)])
case("upsamplingbilinear2d", "UpsamplingBilinear2d", dict(scale_factor=2), [R(1, 2, 2, 3)],
     note="UpsamplingBilinear2d uses align_corners=True")
case("pixelshuffle", "PixelShuffle", dict(upscale_factor=2), [R(2, 8, 3, 3)])
case("pixelshuffle_3", "PixelShuffle", dict(upscale_factor=3), [R(1, 9, 2, 2)])
case("pixelunshuffle", "PixelUnshuffle", dict(downscale_factor=2), [R(2, 2, 4, 6)])
case("channelshuffle", "ChannelShuffle", dict(groups=2), [R(2, 4, 3, 3)])
case("channelshuffle_3", "ChannelShuffle", dict(groups=3), [R(2, 6, 4)])


def n_blocks(size, k, d=1, p=0, st=1):
    """The number of sliding blocks of unfold/fold along one dim."""
    return (size + 2 * p - d * (k - 1) - 1) // st + 1


case("unfold", "Unfold", dict(kernel_size=2), [R(2, 3, 4, 5)], dtypes=BOTH)
case("unfold_dil_pad_stride", "Unfold", dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
     [R(2, 2, 5, 6)], dtypes=BOTH)
case("unfold_unbatched_k3_s2", "Unfold", dict(kernel_size=3, stride=2), [R(3, 5, 5)],
     note="3-D input: [C, H, W] -> [C*kh*kw, L]")
case("unfold_pad_only", "Unfold", dict(kernel_size=(1, 2), padding=(2, 0)), [R(1, 2, 3, 3)])
case("fold", "Fold", dict(output_size=(4, 5), kernel_size=2), [R(2, 3 * 4, n_blocks(4, 2) * n_blocks(5, 2))],
     dtypes=BOTH, note="overlapping blocks are summed")
case("fold_dil_pad_stride", "Fold", dict(output_size=(5, 6), kernel_size=(2, 3), dilation=(2, 1), padding=1,
                                         stride=(2, 1)),
     [R(2, 2 * 6, n_blocks(5, 2, 2, 1, 2) * n_blocks(6, 3, 1, 1, 1))], dtypes=BOTH)
case("fold_unbatched", "Fold", dict(output_size=5, kernel_size=3, stride=2), [R(2 * 9, 4)],
     note="2-D input: [C*kh*kw, L] -> [C, H, W]")
case("fold_stride_gaps", "Fold", dict(output_size=(5, 5), kernel_size=1, stride=2), [R(1, 3, 9)],
     note="stride > kernel: positions no block covers are zero")

# ============================================================================ padding
case("zeropad1d", "ZeroPad1d", dict(padding=2), [R(2, 3, 5)])
case("zeropad1d_tuple", "ZeroPad1d", dict(padding=(1, 3)), [R(2, 3, 5)])
case("zeropad2d", "ZeroPad2d", dict(padding=(1, 2, 0, 3)), [R(2, 2, 3, 4)])
case("zeropad2d_negative", "ZeroPad2d", dict(padding=(-1, 1, 0, -2)), [R(2, 2, 4, 5)],
     note="negative padding crops")
case("constantpad1d", "ConstantPad1d", dict(padding=2, value=3.5), [R(2, 3, 4)])
case("constantpad2d", "ConstantPad2d", dict(padding=(1, 0, 2, 1), value=-1.0), [R(2, 2, 3, 3)])
case("constantpad3d", "ConstantPad3d", dict(padding=1, value=0.5), [R(1, 2, 2, 2, 2)])
case("reflectionpad1d", "ReflectionPad1d", dict(padding=2), [R(2, 3, 5)])
case("reflectionpad1d_tuple", "ReflectionPad1d", dict(padding=(3, 1)), [R(2, 3, 5)])
case("reflectionpad2d", "ReflectionPad2d", dict(padding=(1, 2, 2, 1)), [R(2, 2, 4, 4)], dtypes=BOTH)
case("reflectionpad2d_int", "ReflectionPad2d", dict(padding=2), [R(1, 2, 3, 4)])
case("replicationpad1d", "ReplicationPad1d", dict(padding=(2, 3)), [R(2, 3, 4)])
case("replicationpad2d", "ReplicationPad2d", dict(padding=2), [R(2, 2, 3, 3)], dtypes=BOTH)
case("replicationpad2d_tuple", "ReplicationPad2d", dict(padding=(0, 1, 3, 2)), [R(1, 2, 3, 4)])
case("circularpad1d", "CircularPad1d", dict(padding=(2, 1)), [R(2, 3, 4)])
case("circularpad2d", "CircularPad2d", dict(padding=(1, 2, 2, 0)), [R(1, 2, 3, 4)])

# ============================================================================ distances
case("cosinesimilarity", "CosineSimilarity", dict(dim=1), [R(3, 5), R(3, 5)], dtypes=BOTH)
case("cosinesimilarity_bcast", "CosineSimilarity", dict(dim=-1, eps=1e-6), [R(2, 3, 4), R(3, 4)])
case("cosinesimilarity_dim0", "CosineSimilarity", dict(dim=0), [R(4, 3), R(4, 3)])
case("pairwisedistance", "PairwiseDistance", {}, [R(3, 5), R(3, 5)], dtypes=BOTH,
     note="p=2, eps=1e-6 added to the difference: ||x1 - x2 + eps||_p")
case("pairwisedistance_p1", "PairwiseDistance", dict(p=1.0), [R(3, 5), R(3, 5)])
case("pairwisedistance_p3_keepdim", "PairwiseDistance", dict(p=3.0, eps=1e-3, keepdim=True), [R(3, 5), R(3, 5)])
case("pairwisedistance_bcast", "PairwiseDistance", {}, [R(3, 4), R(4)])

# ============================================================================ errors
error_case("err_linear_in_features", "Linear", dict(in_features=4, out_features=3), [R(2, 5)])
error_case("err_conv2d_channels", "Conv2d", dict(in_channels=3, out_channels=2, kernel_size=3), [R(1, 2, 5, 5)])
error_case("err_conv2d_kernel_too_big", "Conv2d", dict(in_channels=1, out_channels=1, kernel_size=5),
           [R(1, 1, 3, 3)])
error_case("err_batchnorm_one_value", "BatchNorm1d", dict(num_features=3), [R(1, 3)],
           note="train mode needs more than one value per channel")
error_case("err_embedding_out_of_range", "Embedding", dict(num_embeddings=5, embedding_dim=2), [T([1, 5])])
error_case("err_reflectionpad_too_big", "ReflectionPad1d", dict(padding=4), [R(1, 2, 4)])
error_case("err_pixelshuffle_channels", "PixelShuffle", dict(upscale_factor=2), [R(1, 6, 2, 2)])
error_case("err_glu_odd", "GLU", {}, [R(2, 3)])
error_case("err_unfold_kernel_too_big", "Unfold", dict(kernel_size=4), [R(1, 2, 3, 3)])
error_case("err_unfold_2d_input", "Unfold", dict(kernel_size=2), [R(4, 4)])
error_case("err_fold_channels", "Fold", dict(output_size=(4, 4), kernel_size=2), [R(1, 6, 9)],
           note="input.size(1)=6 is not divisible by kh*kw=4")
error_case("err_fold_blocks", "Fold", dict(output_size=(4, 4), kernel_size=2), [R(1, 8, 8)],
           note="L=8 but 3*3=9 blocks")
error_case("err_upsample_both", "Upsample", dict(size=4, scale_factor=2.0), [R(1, 2, 3)])
error_case("err_upsample_bilinear_3d", "Upsample", dict(scale_factor=2.0, mode="bilinear"), [R(1, 2, 3)])

rf.save()
