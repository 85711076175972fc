"""Reference data for a user-defined nn.Module (Net below, mirrored on the Rust side): module tree,
parameter/buffer names, repr, state_dict, train/eval forward, backward, load_state_dict errors, and the
repr of every layer class of gen_nn_layers.py.

Sequence (all recorded):
    torch.manual_seed(0); net = Net()
    sd/{key}            net.state_dict() right after construction
    idx                 fixed int64 [4, 5], values 0..9 (includes the padding index 0)
    net.train(); cls, reg = net(idx)                       -> out_train/cls, out_train/reg
    (cls.sum() + reg.square().sum()).backward()          -> grad/{param name}
    sd_after/{key}      net.state_dict() after that (BatchNorm running stats updated once)
    net.eval(); cls, reg = net(idx) (under no_grad)      -> out_eval/cls, out_eval/reg
Files: data/nn_model.safetensors (tensors) and data/nn_model.json (everything else).

Run: python3 reference/gen_nn_model.py
"""
import copy
import json
import os

import torch
from torch import nn

from refgen import DATA, RefFile


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.norm(self.fc(x))) + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8, padding_idx=0)
        self.blocks = nn.Sequential(Block(8), Block(8))
        self.heads = nn.ModuleDict({"cls": nn.Linear(8, 3), "reg": nn.Linear(8, 1, bias=False)})
        self.bn = nn.BatchNorm1d(8)
        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Dropout(0.1)])
        self.register_buffer("scale", torch.ones(8) * 0.5)
        self.register_buffer("cache", torch.zeros(2), persistent=False)

    def forward(self, idx):
        h = self.embed(idx).mean(1) * self.scale
        h = self.blocks(h)
        h = self.bn(h)
        h = self.layers[0](h)
        return self.heads["cls"](h), self.heads["reg"](h)


rf = RefFile("nn_model")
info = {}

torch.manual_seed(0)
net = Net()
info["named_parameters"] = [{"name": n, "shape": list(p.shape)} for n, p in net.named_parameters()]
info["named_buffers"] = [{"name": n, "shape": list(b.shape), "persistent": n != "cache"}
                         for n, b in net.named_buffers()]
info["state_dict_keys"] = list(net.state_dict().keys())
info["named_modules"] = [{"name": n, "class": type(m).__name__} for n, m in net.named_modules()]
info["named_children"] = [{"name": n, "class": type(m).__name__} for n, m in net.named_children()]
info["repr"] = repr(net)
info["num_parameters"] = sum(p.numel() for p in net.parameters())
info["num_trainable_parameters"] = sum(p.numel() for p in net.parameters() if p.requires_grad)

sd0 = {k: v.detach().clone() for k, v in net.state_dict().items()}
for k, v in sd0.items():
    rf._put(f"sd/{k}", v)

idx = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8], [9, 9, 0, 1, 2], [3, 0, 5, 0, 7]], dtype=torch.int64)
rf._put("idx", idx)

net.train()
cls, reg = net(idx)
(cls.sum() + reg.square().sum()).backward()
rf._put("out_train/cls", cls)
rf._put("out_train/reg", reg)
for n, p in net.named_parameters():
    rf._put(f"grad/{n}", p.grad)
sd1 = net.state_dict()
info["sd_after_keys"] = [k for k in sd1 if not torch.equal(sd1[k], sd0[k])]
for k in info["sd_after_keys"]:
    rf._put(f"sd_after/{k}", sd1[k])

net.eval()
with torch.no_grad():
    cls_e, reg_e = net(idx)
rf._put("out_eval/cls", cls_e)
rf._put("out_eval/reg", reg_e)
info["loss"] = "(cls.sum() + reg.square().sum()).backward() after the train-mode forward"
info["tolerance"] = {"atol": 1e-5, "rtol": 1e-4}


# ----------------------------------------------------------------------------- load_state_dict errors
def load_error(sd, strict=True):
    try:
        Net().load_state_dict(sd, strict=strict)
    except Exception as e:  # noqa: BLE001
        return {"type": type(e).__name__, "message": str(e)}
    raise AssertionError("expected load_state_dict to fail")


bad = copy.copy(net.state_dict())
del bad["blocks.0.norm.bias"]
bad["heads.extra.weight"] = torch.zeros(2)
bad_shape = copy.copy(net.state_dict())
bad_shape["heads.cls.weight"] = torch.zeros(3, 9)
res = Net().load_state_dict(bad, strict=False)
info["load_state_dict"] = {
    "missing_and_unexpected": {
        "removed_key": "blocks.0.norm.bias", "added_key": "heads.extra.weight", "strict": True,
        **load_error(bad),
        "strict_false_result": {"missing_keys": list(res.missing_keys), "unexpected_keys": list(res.unexpected_keys)},
    },
    "wrong_shape": {"key": "heads.cls.weight", "shape": [3, 9], "strict": True, **load_error(bad_shape)},
    "wrong_shape_strict_false": {"key": "heads.cls.weight", "shape": [3, 9], "strict": False,
                                 **load_error(bad_shape, strict=False),
                                 "note": "shape mismatches are errors even with strict=False"},
}

# ----------------------------------------------------------------------------- repr examples
seq = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.MaxPool2d(2), nn.Dropout(p=0.5),
                    nn.GELU(approximate='tanh'), nn.Embedding(10, 3, padding_idx=0), nn.LayerNorm((4,)))
info["repr_sequential"] = {
    "code": "nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.MaxPool2d(2), nn.Dropout(p=0.5), "
            "nn.GELU(approximate='tanh'), nn.Embedding(10, 3, padding_idx=0), nn.LayerNorm((4,)))",
    "repr": repr(seq),
}

# One representative construction per layer class (kwargs as passed; tuples become JSON lists).
LAYERS = {
    "Identity": {},
    "Linear": dict(in_features=4, out_features=3),
    "Bilinear": dict(in1_features=3, in2_features=4, out_features=2),
    "Flatten": {},
    "Unflatten": dict(dim=1, unflattened_size=(2, 3)),
    "Conv1d": dict(in_channels=2, out_channels=3, kernel_size=3, stride=2, padding=1),
    "Conv2d": dict(in_channels=4, out_channels=2, kernel_size=3, stride=(2, 1), padding=(1, 2), groups=2,
                   bias=False, padding_mode="reflect"),
    "Conv3d": dict(in_channels=2, out_channels=2, kernel_size=3, padding="same", dilation=2),
    "ConvTranspose1d": dict(in_channels=2, out_channels=3, kernel_size=3, stride=2, padding=1, output_padding=1),
    "ConvTranspose2d": dict(in_channels=4, out_channels=2, kernel_size=3, stride=2, groups=2, dilation=2),
    "ConvTranspose3d": dict(in_channels=2, out_channels=2, kernel_size=2, stride=2),
    "MaxPool1d": dict(kernel_size=3, stride=2),
    "MaxPool2d": dict(kernel_size=3, stride=2, padding=1, return_indices=True, ceil_mode=True),
    "MaxPool3d": dict(kernel_size=2),
    "MaxUnpool1d": dict(kernel_size=2),
    "MaxUnpool2d": dict(kernel_size=3, stride=2, padding=1),
    "AvgPool1d": dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    "AvgPool2d": dict(kernel_size=2, padding=1, divisor_override=3),
    "AvgPool3d": dict(kernel_size=2, ceil_mode=True),
    "AdaptiveAvgPool1d": dict(output_size=3),
    "AdaptiveAvgPool2d": dict(output_size=(None, 3)),
    "AdaptiveMaxPool1d": dict(output_size=4, return_indices=True),
    "AdaptiveMaxPool2d": dict(output_size=(3, 4)),
    "LPPool1d": dict(norm_type=2, kernel_size=3, stride=2),
    "LPPool2d": dict(norm_type=2, kernel_size=2),
    "BatchNorm1d": dict(num_features=3),
    "BatchNorm2d": dict(num_features=3, momentum=None, affine=False),
    "BatchNorm3d": dict(num_features=2, track_running_stats=False),
    "LayerNorm": dict(normalized_shape=(3, 4), bias=False),
    "GroupNorm": dict(num_groups=2, num_channels=4),
    "InstanceNorm1d": dict(num_features=3),
    "InstanceNorm2d": dict(num_features=2, affine=True, track_running_stats=True),
    "RMSNorm": dict(normalized_shape=4),
    "LocalResponseNorm": dict(size=3),
    "Dropout": dict(p=0.5),
    "Dropout1d": dict(p=0.5),
    "Dropout2d": dict(p=0.5),
    "Dropout3d": dict(p=0.5),
    "AlphaDropout": dict(p=0.5),
    "FeatureAlphaDropout": dict(p=0.5),
    "Embedding": dict(num_embeddings=10, embedding_dim=4, padding_idx=0, max_norm=1.0),
    "EmbeddingBag": dict(num_embeddings=8, embedding_dim=3, mode="mean"),
    "ReLU": {},
    "ReLU6": {},
    "LeakyReLU": dict(negative_slope=0.2),
    "PReLU": dict(num_parameters=3),
    "RReLU": dict(lower=0.1, upper=0.3),
    "ELU": dict(alpha=1.5),
    "SELU": {},
    "CELU": dict(alpha=0.7),
    "GELU": dict(approximate="tanh"),
    "SiLU": {},
    "Mish": {},
    "Sigmoid": {},
    "LogSigmoid": {},
    "Tanh": {},
    "Hardtanh": dict(min_val=-0.5, max_val=1.5),
    "Hardsigmoid": {},
    "Hardswish": {},
    "Softplus": dict(beta=2.0, threshold=5.0),
    "Softsign": {},
    "Softshrink": dict(lambd=0.3),
    "Hardshrink": dict(lambd=0.4),
    "Tanhshrink": {},
    "Threshold": dict(threshold=0.1, value=-1.0),
    "GLU": dict(dim=1),
    "Softmax": dict(dim=1),
    "LogSoftmax": dict(dim=-1),
    "Softmin": dict(dim=0),
    "Softmax2d": {},
    "Upsample": dict(scale_factor=2, mode="bilinear", align_corners=True),
    "UpsamplingNearest2d": dict(scale_factor=2),
    "UpsamplingBilinear2d": dict(size=(4, 5)),
    "PixelShuffle": dict(upscale_factor=2),
    "PixelUnshuffle": dict(downscale_factor=2),
    "ChannelShuffle": dict(groups=2),
    "ZeroPad1d": dict(padding=(1, 3)),
    "ZeroPad2d": dict(padding=(1, 2, 0, 3)),
    "ConstantPad1d": dict(padding=2, value=3.5),
    "ConstantPad2d": dict(padding=(1, 0, 2, 1), value=-1.0),
    "ConstantPad3d": dict(padding=1, value=0.5),
    "ReflectionPad1d": dict(padding=2),
    "ReflectionPad2d": dict(padding=(1, 2, 2, 1)),
    "ReplicationPad1d": dict(padding=(2, 3)),
    "ReplicationPad2d": dict(padding=2),
    "CircularPad1d": dict(padding=(2, 1)),
    "CircularPad2d": dict(padding=1),
    "CosineSimilarity": dict(dim=1),
    "PairwiseDistance": dict(p=3.0, eps=1e-3, keepdim=True),
}


def jsonable(v):
    if isinstance(v, (tuple, list)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    return v


info["layer_reprs"] = {name: {"kwargs": jsonable(kw), "repr": repr(getattr(nn, name)(**kw))}
                       for name, kw in LAYERS.items()}
# A few more reprs that exercise the formatting rules (defaults omitted, tuples, floats).
EXTRA = {
    "Conv2d_default": ("Conv2d", dict(in_channels=1, out_channels=32, kernel_size=3)),
    "Conv2d_same": ("Conv2d", dict(in_channels=1, out_channels=2, kernel_size=(3, 4), padding="same")),
    "Linear_nobias": ("Linear", dict(in_features=8, out_features=1, bias=False)),
    "BatchNorm1d_eps": ("BatchNorm1d", dict(num_features=3, eps=1e-3, momentum=0.3)),
    "LayerNorm_noaffine": ("LayerNorm", dict(normalized_shape=4, elementwise_affine=False)),
    "RMSNorm_eps": ("RMSNorm", dict(normalized_shape=(3, 4), eps=1e-6)),
    "BatchNorm2d_nobias": ("BatchNorm2d", dict(num_features=3, bias=False)),
    "GroupNorm_nobias": ("GroupNorm", dict(num_groups=1, num_channels=2, affine=True, bias=False)),
    "InstanceNorm1d_affine_nobias": ("InstanceNorm1d", dict(num_features=3, affine=True, bias=False)),
    "EmbeddingBag_sum": ("EmbeddingBag", dict(num_embeddings=8, embedding_dim=3, mode="sum", padding_idx=1)),
    "Upsample_bilinear_align": ("Upsample", dict(scale_factor=2, mode="bilinear", align_corners=True)),
    "AvgPool2d_all": ("AvgPool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False,
                                        divisor_override=2)),
    "MaxPool2d_indices": ("MaxPool2d", dict(kernel_size=2, return_indices=True)),
    "CosineSimilarity_args": ("CosineSimilarity", dict(dim=0, eps=1e-6)),
    "Dropout_default": ("Dropout", {}),
    "GELU_default": ("GELU", {}),
    "Softmax_nodim": ("Softmax", {}),
    "Upsample_nearest": ("Upsample", dict(scale_factor=2)),
    "Upsample_size": ("Upsample", dict(size=(5, 7), mode="bilinear")),
    "MaxPool2d_default": ("MaxPool2d", dict(kernel_size=2)),
    "AvgPool2d_default": ("AvgPool2d", dict(kernel_size=2)),
    "Embedding_default": ("Embedding", dict(num_embeddings=10, embedding_dim=3)),
    "LeakyReLU_default": ("LeakyReLU", {}),
    "ELU_default": ("ELU", {}),
    "Hardtanh_default": ("Hardtanh", {}),
    "PReLU_default": ("PReLU", {}),
    "Flatten_args": ("Flatten", dict(start_dim=0, end_dim=2)),
}
extra = {}
for key, (name, kw) in EXTRA.items():
    extra[key] = {"layer": name, "kwargs": jsonable(kw), "repr": repr(getattr(nn, name)(**kw))}
extra["ModuleList"] = {"code": "nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])",
                       "repr": repr(nn.ModuleList([nn.Linear(2, 2), nn.ReLU()]))}
extra["ModuleList_repeated"] = {"code": "nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])",
                                "repr": repr(nn.ModuleList([nn.Linear(2, 2) for _ in range(3)]))}
extra["ModuleDict"] = {"code": "nn.ModuleDict({'a': nn.ReLU(), 'b': nn.Tanh()})",
                       "repr": repr(nn.ModuleDict({"a": nn.ReLU(), "b": nn.Tanh()}))}
extra["Sequential_empty"] = {"code": "nn.Sequential()", "repr": repr(nn.Sequential())}
info["extra_reprs"] = extra
info["torch"] = torch.__version__

rf.save()
with open(os.path.join(DATA, "nn_model.json"), "w") as f:
    json.dump(info, f, indent=1)
    f.write("\n")
print(f"{os.path.join(DATA, 'nn_model.json')}: written")
