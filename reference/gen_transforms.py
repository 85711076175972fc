"""torchvision (v2 tensor kernels) reference outputs for crates/pyrite-vision/tests/transforms.rs.

Writes reference/data/transforms.safetensors: the input images `img.<name>` and, for each case,
`out.<case>` (and `arg.<case>` for a tensor argument, erase's value); the metadata maps each case
to a JSON description (op, image, arguments) that the Rust test replays. u8 resizes with bilinear
or bicubic take torch's native fixed-point CPU kernel (what torchvision uses on AVX2 machines).
Run: python3 reference/gen_transforms.py
"""
import json, os
import torch
import torchvision
import torchvision.transforms.v2.functional as F
from torchvision.transforms import InterpolationMode as IM
from safetensors.torch import save_file

torch.manual_seed(0)
imgs = {
    "f3": torch.rand(3, 17, 23),
    "u3": torch.randint(0, 256, (3, 17, 23), dtype=torch.uint8),
    "f1": torch.rand(1, 8, 8),
    "u1": torch.randint(0, 256, (1, 8, 8), dtype=torch.uint8),
    "fb": torch.rand(2, 3, 16, 16),
    "ub": torch.randint(0, 256, (2, 3, 16, 16), dtype=torch.uint8),
    "hwc": torch.randint(0, 256, (5, 7, 3), dtype=torch.uint8),
    "d3": torch.rand(3, 9, 11, dtype=torch.float64),
}
tensors = {f"img.{k}": v for k, v in imgs.items()}
cases = {}
MODES = {"nearest": IM.NEAREST, "bilinear": IM.BILINEAR, "bicubic": IM.BICUBIC}
PADS = {"constant": "constant", "edge": "edge", "reflect": "reflect", "symmetric": "symmetric"}


def case(name, img, op, extra=None, **kw):
    x = imgs[img]
    if op == "resize":
        y = F.resize(x, kw["size"], interpolation=MODES[kw["mode"]], max_size=kw.get("max_size"),
                     antialias=kw["antialias"])
    elif op == "center_crop":
        y = F.center_crop(x, kw["size"])
    elif op == "crop":
        y = F.crop(x, kw["top"], kw["left"], kw["height"], kw["width"])
    elif op == "resized_crop":
        y = F.resized_crop(x, kw["top"], kw["left"], kw["height"], kw["width"], kw["size"],
                           interpolation=MODES[kw["mode"]], antialias=kw["antialias"])
    elif op == "pad":
        y = F.pad(x, kw["padding"], fill=kw["fill"], padding_mode=kw["mode"])
    elif op == "normalize":
        y = F.normalize(x, kw["mean"], kw["std"])
    elif op == "grayscale":
        y = F.rgb_to_grayscale(x, num_output_channels=kw["n"])
    elif op == "hflip":
        y = F.horizontal_flip(x)
    elif op == "vflip":
        y = F.vertical_flip(x)
    elif op == "convert":
        y = F.to_dtype(x, getattr(torch, kw["dtype"]), scale=True)
    elif op == "to_tensor":
        import torchvision.transforms.functional as F1
        y = F1.to_tensor(x.numpy())
    elif op == "blur":
        y = F.gaussian_blur(x, kw["kernel"], kw["sigma"])
    elif op == "rotate":
        y = F.rotate(x, kw["angle"], interpolation=MODES[kw["mode"]], expand=kw["expand"], center=kw.get("center"),
                     fill=kw.get("fill"))
    elif op == "affine":
        y = F.affine(x, kw["angle"], kw["translate"], kw["scale"], kw["shear"], interpolation=MODES[kw["mode"]],
                     fill=kw.get("fill"), center=kw.get("center"))
    elif op in ("brightness", "contrast", "saturation", "hue"):
        y = getattr(F, f"adjust_{op}")(x, kw["factor"])
    elif op == "erase":
        v = extra.pop("v")
        tensors[f"arg.{name}"] = v
        y = F.erase(x, kw["i"], kw["j"], kw["h"], kw["w"], v)
    else:
        raise ValueError(op)
    tensors[f"out.{name}"] = y.contiguous().clone()
    cases[name] = json.dumps(dict(op=op, img=img, **kw))


for img in ["f3", "u3", "f1", "u1", "fb", "ub"]:
    for mode in ["nearest", "bilinear"]:
        for aa in [False, True]:
            if mode == "nearest" and aa:
                continue
            for size in [[5, 7], [30, 41], [6], [11, 4]]:
                case(f"resize_{img}_{mode}_{aa}_{'x'.join(map(str, size))}", img, "resize", size=size, mode=mode,
                     antialias=aa)
    case(f"resize_{img}_max", img, "resize", size=[6], max_size=7, mode="bilinear", antialias=True)
    for size in [[4, 4], [5, 6], [7, 3], [20, 30], [8, 8], [9, 25]]:
        case(f"center_crop_{img}_{size[0]}x{size[1]}", img, "center_crop", size=size)
    for mode in PADS:
        for padding in [[1], [2, 3], [1, 0, 3, 2]]:
            case(f"pad_{img}_{mode}_{'_'.join(map(str, padding))}", img, "pad", padding=padding, fill=7,
                 mode=mode)
    case(f"hflip_{img}", img, "hflip")
    case(f"vflip_{img}", img, "vflip")
    case(f"crop_{img}_in", img, "crop", top=1, left=2, height=4, width=5)
    case(f"crop_{img}_out", img, "crop", top=-2, left=3, height=12, width=30)
    case(f"resized_crop_{img}", img, "resized_crop", top=1, left=2, height=6, width=5, size=[9, 4],
         mode="bilinear", antialias=True)
    case(f"resized_crop_{img}_noaa", img, "resized_crop", top=0, left=1, height=7, width=6, size=[3, 3],
         mode="bilinear", antialias=False)
    if img[1] != "1":
        for n in [1, 3]:
            case(f"grayscale_{img}_{n}", img, "grayscale", n=n)
    else:
        case(f"grayscale_{img}_3", img, "grayscale", n=3)
    if img[0] == "f":
        mean, std = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]) if img != "f1" else ([0.5], [0.3])
        case(f"normalize_{img}", img, "normalize", mean=mean, std=std)
        case(f"convert_{img}_u8", img, "convert", dtype="uint8")
        case(f"convert_{img}_f64", img, "convert", dtype="float64")
    else:
        case(f"convert_{img}_f32", img, "convert", dtype="float32")
    for kernel, sigma in [([3, 3], [1.0, 1.0]), ([5, 3], [0.7, 1.5])]:
        case(f"blur_{img}_{kernel[0]}x{kernel[1]}", img, "blur", kernel=kernel, sigma=sigma)
case("to_tensor_hwc", "hwc", "to_tensor")

# bicubic resize (u8: torch's native fixed-point kernel on CPU)
for img in ["f3", "u3", "f1", "u1", "ub", "d3"]:
    for aa in [False, True]:
        for size in [[5, 7], [30, 41], [6], [17, 40]] if img != "d3" else [[5, 7], [12, 20]]:
            case(f"resize_{img}_bicubic_{aa}_{'x'.join(map(str, size))}", img, "resize", size=size, mode="bicubic",
                 antialias=aa)

# rotate / affine (torchvision's inverse affine matrix + grid_sample)
FILLS = {"f": [0.25, 0.5, 0.9], "u": [10, 128, 250], "d": [0.25, 0.5, 0.9]}
for img in ["f3", "u3", "f1", "u1", "fb", "ub", "d3"]:
    c = imgs[img].shape[-3]
    fill_c = FILLS[img[0]][:c]
    for mode in ["nearest", "bilinear"]:
        for angle, expand, center, fill in [
            (30, False, None, None),
            (-45, True, None, None),
            (137.5, True, None, [7 if img[0] == "u" else 0.7]),
            (90, False, None, None),
            (90, True, None, None),
            (180, False, None, None),
            (270, True, None, None),
            (90, False, [3, 5], None),
            (-20, False, [2.5, 4], fill_c),
            (400, False, None, [0]),
        ][:: 1 if img[1] != "b" else 3]:
            case(f"rotate_{img}_{mode}_{angle}_{expand}_{center is not None}_{fill is not None}", img, "rotate",
                 angle=angle, mode=mode, expand=expand, center=center, fill=fill)
        for angle, translate, scale, shear, center, fill in [
            (0, [3, -2], 1.0, [0, 0], None, None),
            (25, [0, 0], 1.0, [0, 0], None, None),
            (-10, [1, 2], 0.7, [0, 0], None, fill_c),
            (15, [-2, 1], 1.3, [12, 0], None, None),
            (-33, [0, 0], 0.9, [-8, 20], [4, 3], None),
            (5, [2, 0], 1.1, [5, 5], None, [1 if img[0] == "u" else 0.1]),
        ][:: 1 if img[1] != "b" else 2]:
            case(f"affine_{img}_{mode}_{angle}_{'_'.join(map(str, translate))}_{scale}_{shear[0]}_{shear[1]}_"
                 f"{center is not None}_{fill is not None}", img, "affine", angle=angle, translate=translate,
                 scale=scale, shear=shear, mode=mode, center=center, fill=fill)

# colour adjustments (1- or 3-channel images)
for img in ["f3", "u3", "f1", "u1", "fb", "ub", "d3"]:
    for op, factors in [("brightness", [0.0, 0.5, 1.7]), ("contrast", [0.0, 0.3, 1.8]),
                        ("saturation", [0.0, 0.4, 2.5]), ("hue", [-0.5, -0.23, 0.0, 0.1, 0.37, 0.5])]:
        for f in factors[:: 1 if img[1] != "b" else 2]:
            case(f"{op}_{img}_{f}", img, op, factor=f)

# erase: a per-channel value, one value, and random values of the erased block's shape
g = torch.Generator().manual_seed(1)
for img in ["f3", "u3", "f1", "fb", "ub", "d3"]:
    x = imgs[img]
    c = x.shape[-3]
    for k, (i, j, h, w, v) in enumerate([
        (1, 2, 3, 4, torch.tensor([0.5, 0.25, 1.0][:c]).view(c, 1, 1)),
        (0, 0, 5, 2, torch.tensor([3.0]).view(1, 1, 1)),
        (2, 1, 4, 6, torch.randn(c, 4, 6, generator=g)),
    ]):
        v = v.to(x.dtype) if x.dtype != torch.uint8 else (v * 100).abs().to(torch.uint8)
        case(f"erase_{img}_{k}", img, "erase", extra={"v": v}, i=i, j=j, h=h, w=w)

out = os.path.join(os.path.dirname(__file__), "data", "transforms.safetensors")
cases["torchvision"] = torchvision.__version__
cases["torch"] = torch.__version__
save_file(tensors, out, metadata=cases)
print(out, os.path.getsize(out), "bytes,", len(cases) - 2, "cases")
