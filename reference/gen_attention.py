"""Reference data for attention and the Transformer: F.scaled_dot_product_attention,
nn.MultiheadAttention, the Transformer layers, encoder, decoder and nn.Transformer, and a small
causal character language model trained for 100 Adam steps.

Every module case builds the module under a fixed seed (dropout 0, train mode, f32, grad enabled,
so PyTorch takes its composed path and not the inference fast path), records its state_dict
(key order in the JSON), the inputs, the outputs, and the gradients of a fixed scalar loss
    loss = sum(out * g_out) [+ sum(weights * g_w)]
with respect to the inputs that are floating-point and every parameter. SDPA cases record the
gradients of sum(out * g) with respect to q, k and v.

Files: data/attention.safetensors (tensors: "{case}/{name}") and data/attention.json (cases,
reprs, the language model's losses).

Run: python3 reference/gen_attention.py
"""
import json
import os

import torch
import torch.nn.functional as F
from torch import nn

from refgen import DATA, RefFile

torch.backends.mha.set_fastpath_enabled(False)
rf = RefFile("attention")
info = {"torch": torch.__version__, "sdpa": [], "mha": [], "layers": []}


def put(key, t):
    rf._put(key, t)


# ----------------------------------------------------------------------------------------- SDPA
def sdpa_case(name, qs, ks, vs, mask=None, **kw):
    torch.manual_seed(len(info["sdpa"]) + 100)
    q = torch.randn(qs, requires_grad=True)
    k = torch.randn(ks, requires_grad=True)
    v = torch.randn(vs, requires_grad=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    g = torch.randn(out.shape)
    (out * g).sum().backward()
    for n, t in [("q", q), ("k", k), ("v", v), ("out", out), ("g", g), ("dq", q.grad), ("dk", k.grad),
                 ("dv", v.grad)]:
        put(f"sdpa_{name}/{n}", t)
    if mask is not None:
        put(f"sdpa_{name}/mask", mask)
    info["sdpa"].append({"name": name, "mask": mask is not None, **kw})


sdpa_case("basic", [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 8])
sdpa_case("bool_mask_2d", [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 8], mask=torch.rand(5, 7) > 0.3)
sdpa_case("float_mask_bcast", [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 8], mask=torch.randn(2, 1, 5, 7))
sdpa_case("causal", [2, 2, 6, 8], [2, 2, 6, 8], [2, 2, 6, 8], is_causal=True)
sdpa_case("causal_l_lt_s", [1, 2, 4, 8], [1, 2, 6, 8], [1, 2, 6, 8], is_causal=True)
sdpa_case("causal_l_gt_s", [1, 2, 6, 8], [1, 2, 4, 8], [1, 2, 4, 8], is_causal=True)
sdpa_case("scale", [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 8], scale=0.3)
sdpa_case("gqa", [2, 4, 5, 8], [2, 2, 7, 8], [2, 2, 7, 8], enable_gqa=True)
sdpa_case("bcast_batch", [2, 3, 5, 8], [1, 3, 7, 8], [1, 3, 7, 8])
sdpa_case("rank3", [3, 5, 8], [3, 7, 8], [3, 7, 8])
sdpa_case("rank2", [5, 8], [7, 8], [7, 8])
sdpa_case("rank5", [2, 2, 3, 5, 8], [2, 1, 3, 7, 8], [2, 1, 3, 7, 4])
sdpa_case("value_dim", [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 4])
m = torch.rand(2, 3, 5, 7) > 0.5
m[0, 1, 2] = False  # a query with every key masked: zeros
sdpa_case("fully_masked_row", [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 8], mask=m)
sdpa_case("blocks_causal", [1, 2, 150, 16], [1, 2, 150, 16], [1, 2, 150, 16], is_causal=True)
sdpa_case("blocks_mask", [1, 2, 70, 16], [1, 2, 300, 16], [1, 2, 300, 16], mask=torch.randn(70, 300))
sdpa_case("empty_keys", [1, 2, 3, 4], [1, 2, 0, 4], [1, 2, 0, 4])


# ----------------------------------------------------------------------------------- modules
def loss_and_record(case, module, outs, inputs):
    """sum(out_i * g_i) over the tensor outputs, backward, and everything recorded."""
    loss = 0
    for i, o in enumerate(outs):
        if o is None:
            continue
        g = torch.randn(o.shape)
        put(f"{case}/g{i}", g)
        put(f"{case}/out{i}", o)
        loss = loss + (o * g).sum()
    loss.backward()
    for n, t in inputs.items():
        if t is None:
            continue
        put(f"{case}/in/{n}", t)
        if t.requires_grad:
            put(f"{case}/grad_in/{n}", t.grad if t.grad is not None else torch.zeros_like(t))
    for n, p in module.named_parameters():
        put(f"{case}/grad/{n}", p.grad if p.grad is not None else torch.zeros_like(p))


def record_state(case, module):
    sd = module.state_dict()
    for k, v in sd.items():
        put(f"{case}/sd/{k}", v.clone())
    return list(sd.keys())


def leaf(t):
    return t.detach().clone().requires_grad_(t.is_floating_point())


def mha_case(name, ctor, call, shapes, masks=None, self_attn=False, kv_same=False):
    idx = len(info["mha"])
    torch.manual_seed(1000 + idx)
    m = nn.MultiheadAttention(**ctor)
    with torch.no_grad():  # nonzero biases so their gradients and effects are tested
        for n, p in m.named_parameters():
            if "bias" in n:
                p.normal_(0, 0.1)
    keys = record_state(f"mha_{name}", m)
    q = leaf(torch.randn(shapes[0]))
    if self_attn:
        k = v = q
    else:
        k = leaf(torch.randn(shapes[1]))
        v = k if kv_same else leaf(torch.randn(shapes[2]))
    masks = {n: t for n, t in (masks or {}).items()}
    out, w = m(q, k, v, **masks, **call)
    inputs = {"query": q, "key": k, "value": v, **masks}
    loss_and_record(f"mha_{name}", m, [out, w], inputs)
    info["mha"].append({"name": name, "ctor": ctor, "call": call, "masks": sorted(masks), "self_attn": self_attn,
                        "kv_same": kv_same, "state_dict_keys": keys, "repr": repr(m),
                        "weights": w is not None})


E, H, L, S, N = 8, 2, 5, 6, 3
bool_2d = torch.rand(L, S) > 0.7
kpm_bool = torch.zeros(N, S, dtype=torch.bool)
kpm_bool[0, -2:] = True
kpm_bool[2, 0] = True
mha_case("default", dict(embed_dim=E, num_heads=H), {}, [[L, N, E]], self_attn=True)
mha_case("batch_first_no_weights", dict(embed_dim=E, num_heads=H, batch_first=True), dict(need_weights=False),
         [[N, L, E]], self_attn=True)
mha_case("no_bias", dict(embed_dim=E, num_heads=H, bias=False), {}, [[L, N, E]], self_attn=True)
mha_case("bias_kv_zero_attn", dict(embed_dim=E, num_heads=H, add_bias_kv=True, add_zero_attn=True), {},
         [[L, N, E], [S, N, E], [S, N, E]], masks=dict(attn_mask=bool_2d, key_padding_mask=kpm_bool))
mha_case("kdim_vdim", dict(embed_dim=E, num_heads=H, kdim=6, vdim=5, batch_first=True),
         dict(average_attn_weights=False), [[N, L, E], [N, S, 6], [N, S, 5]])
mha_case("float_masks_3d", dict(embed_dim=E, num_heads=H), {}, [[L, N, E], [S, N, E], [S, N, E]],
         masks=dict(attn_mask=torch.randn(N * H, L, S), key_padding_mask=torch.randn(N, S)))
mha_case("bool_mask_3d_no_weights", dict(embed_dim=E, num_heads=H), dict(need_weights=False),
         [[L, N, E], [S, N, E], [S, N, E]], masks=dict(attn_mask=torch.rand(N * H, L, S) > 0.7))
causal = nn.Transformer.generate_square_subsequent_mask(L)
mha_case("causal_hint", dict(embed_dim=E, num_heads=H, batch_first=True), dict(need_weights=False, is_causal=True),
         [[N, L, E]], masks=dict(attn_mask=causal), self_attn=True)
mha_case("causal_hint_kpm", dict(embed_dim=E, num_heads=H, batch_first=True), dict(need_weights=False, is_causal=True),
         [[N, L, E]], masks=dict(attn_mask=causal, key_padding_mask=kpm_bool[:, :L]), self_attn=True)
mha_case("causal_hint_weights", dict(embed_dim=E, num_heads=H), dict(is_causal=True), [[L, N, E]],
         masks=dict(attn_mask=causal), self_attn=True)
mha_case("unbatched", dict(embed_dim=E, num_heads=H), {}, [[L, E], [S, E], [S, E]],
         masks=dict(key_padding_mask=kpm_bool[0]))
mha_case("key_is_value", dict(embed_dim=E, num_heads=H, batch_first=True), dict(need_weights=False),
         [[N, L, E], [N, S, E]], kv_same=True)
mha_case("three_inputs", dict(embed_dim=E, num_heads=4), dict(average_attn_weights=False),
         [[L, N, E], [S, N, E], [S, N, E]])
kpm_all = torch.zeros(N, S, dtype=torch.bool)
kpm_all[1] = True  # every key of one batch element masked: SDPA gives zeros
mha_case("fully_masked_no_weights", dict(embed_dim=E, num_heads=H), dict(need_weights=False),
         [[L, N, E], [S, N, E], [S, N, E]], masks=dict(key_padding_mask=kpm_all))


# ----------------------------------------------------------------------------------- layers
def layer_case(name, kind, ctor, inputs, call=None, build=None):
    idx = len(info["layers"])
    torch.manual_seed(2000 + idx)
    m = build() if build else getattr(nn, kind)(**ctor)
    m.train()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("bias") and "norm" in n:
                p.normal_(0, 0.1)
            elif n.endswith("weight") and "norm" in n:
                p.add_(torch.randn_like(p) * 0.1)
    keys = record_state(f"layer_{name}", m)
    ins = {n: leaf(t) for n, t in inputs.items()}
    args = [ins[n] for n in inputs if n in ("src", "tgt", "memory")]
    masks = {n: t for n, t in ins.items() if n not in ("src", "tgt", "memory")}
    out = m(*args, **masks, **(call or {}))
    loss_and_record(f"layer_{name}", m, [out], ins)
    ctor = {k: v for k, v in ctor.items()}
    info["layers"].append({"name": name, "kind": kind, "ctor": ctor, "call": call or {}, "inputs": list(inputs),
                           "state_dict_keys": keys, "repr": repr(m)})


D, NH, FF = 8, 2, 16
Ls, Lt = 6, 5
src_causal = nn.Transformer.generate_square_subsequent_mask(Ls)
tgt_causal = nn.Transformer.generate_square_subsequent_mask(Lt)
kpm_src = torch.zeros(N, Ls, dtype=torch.bool)
kpm_src[0, -1] = True
kpm_tgt = torch.zeros(N, Lt, dtype=torch.bool)
kpm_tgt[1, -2:] = True
layer_case("enc_relu_post", "TransformerEncoderLayer", dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0),
           dict(src=torch.randn(Ls, N, D), src_mask=src_causal, src_key_padding_mask=kpm_src))
layer_case("enc_gelu_pre_bf", "TransformerEncoderLayer",
           dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0, activation="gelu", norm_first=True,
                batch_first=True),
           dict(src=torch.randn(N, Ls, D)))
layer_case("enc_nobias_causal", "TransformerEncoderLayer",
           dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0, bias=False, batch_first=True, layer_norm_eps=1e-3),
           dict(src=torch.randn(N, Ls, D), src_mask=src_causal), call=dict(is_causal=True))
layer_case("dec_relu_post", "TransformerDecoderLayer", dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0),
           dict(tgt=torch.randn(Lt, N, D), memory=torch.randn(Ls, N, D), tgt_mask=tgt_causal,
                memory_mask=torch.randn(Lt, Ls), tgt_key_padding_mask=kpm_tgt, memory_key_padding_mask=kpm_src))
layer_case("dec_gelu_pre_bf", "TransformerDecoderLayer",
           dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0, activation="gelu", norm_first=True,
                batch_first=True),
           dict(tgt=torch.randn(N, Lt, D), memory=torch.randn(N, Ls, D), tgt_mask=tgt_causal),
           call=dict(tgt_is_causal=True))


def build_encoder():
    layer = nn.TransformerEncoderLayer(D, NH, FF, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(D), enable_nested_tensor=False)


def build_decoder():
    layer = nn.TransformerDecoderLayer(D, NH, FF, dropout=0.0, activation="gelu")
    return nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(D))


def build_transformer():
    return nn.Transformer(D, NH, 2, 2, FF, dropout=0.0, batch_first=True)


layer_case("encoder", "TransformerEncoder", dict(num_layers=2, norm=True, batch_first=True),
           dict(src=torch.randn(N, Ls, D), mask=src_causal, src_key_padding_mask=kpm_src), build=build_encoder)
layer_case("decoder", "TransformerDecoder", dict(num_layers=2, norm=True, activation="gelu"),
           dict(tgt=torch.randn(Lt, N, D), memory=torch.randn(Ls, N, D), tgt_mask=tgt_causal,
                memory_key_padding_mask=kpm_src), build=build_decoder)
layer_case("transformer", "Transformer", dict(d_model=D, nhead=NH, num_encoder_layers=2, num_decoder_layers=2,
                                              dim_feedforward=FF, dropout=0.0, batch_first=True),
           dict(src=torch.randn(N, Ls, D), tgt=torch.randn(N, Lt, D), src_key_padding_mask=kpm_src,
                tgt_mask=tgt_causal), build=build_transformer)

# --------------------------------------------------------------------------- reprs with defaults
info["reprs"] = {
    "MultiheadAttention(8, 2, kdim=6, vdim=5, add_bias_kv=True)":
        repr(nn.MultiheadAttention(8, 2, kdim=6, vdim=5, add_bias_kv=True)),
    "TransformerEncoderLayer(8, 2)": repr(nn.TransformerEncoderLayer(8, 2)),
    "TransformerDecoderLayer(8, 2, 16, activation='gelu')":
        repr(nn.TransformerDecoderLayer(8, 2, 16, activation="gelu")),
    "Transformer(8, 2, 1, 1, 16)": repr(nn.Transformer(8, 2, 1, 1, 16)),
}
info["generate_square_subsequent_mask_3"] = [[str(v) for v in row] for row in
                                              nn.Transformer.generate_square_subsequent_mask(3).tolist()]

# ------------------------------------------------------------------------ causal language model
TEXT = ("pyrite is pytorch's programming model in rust. attention is all you need, "
        "and a little language model learns to continue a sentence one character at a time. ")
VOCAB = sorted(set(TEXT))
V, DM, SEQ, B = len(VOCAB), 16, 24, 4


class CharLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, DM)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(DM, 2, 32, dropout=0.0, batch_first=True) for _ in range(2)])
        self.norm = nn.LayerNorm(DM)

    def forward(self, idx):
        mask = nn.Transformer.generate_square_subsequent_mask(idx.shape[1])
        h = self.emb(idx)
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)
        return self.norm(h) @ self.emb.weight.t()  # tied output projection


ids = torch.tensor([VOCAB.index(c) for c in TEXT])
starts = [0, 37, 74, 111]
x = torch.stack([ids[s:s + SEQ] for s in starts])
y = torch.stack([ids[s + 1:s + SEQ + 1] for s in starts])
torch.manual_seed(7)
lm = CharLM()
for k, v in lm.state_dict().items():
    put(f"lm/sd/{k}", v.clone())  # a copy: training changes the parameters in place
put("lm/x", x)
put("lm/y", y)
opt = torch.optim.Adam(lm.parameters(), lr=3e-3)
losses = []
for step in range(100):
    opt.zero_grad()
    logits = lm(x)
    loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    loss.backward()
    opt.step()
    losses.append(loss.item())
info["lm"] = {"vocab": "".join(VOCAB), "d_model": DM, "nhead": 2, "dim_feedforward": 32, "seq": SEQ,
              "starts": starts, "lr": 3e-3, "optimizer": "Adam", "losses": losses,
              "state_dict_keys": list(lm.state_dict().keys())}

rf.save()
with open(os.path.join(DATA, "attention.json"), "w") as f:
    json.dump(info, f, indent=1)
    f.write("\n")
print(f"{os.path.join(DATA, 'attention.json')}: written; lm loss {losses[0]:.4f} -> {losses[-1]:.4f}")
