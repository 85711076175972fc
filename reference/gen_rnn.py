"""Reference data for the recurrent layers (nn.RNN, nn.LSTM, nn.GRU, their cells) and
torch.nn.utils.rnn (pad_sequence, pack_padded_sequence, pack_sequence, pad_packed_sequence).

Layer cases, each in f32:
    torch.manual_seed(seed)                      # seed = crc32(case name)
    m = nn.<layer>(**kwargs); m.train(train)
    sd = m.state_dict()                          # the Rust layer loads this, strictly, by name
    x = randn(shape); h0, c0 = randn(...) when the case has an initial state
    packed cases: x is padded [L, N, H_in] (or batch first), packed with
        pack_padded_sequence(x, lengths, batch_first, enforce_sorted) inside the graph
    outputs: output (the packed data for packed cases), h_n, c_n
    loss = sum(output * g_output) + sum(h_n * g_h_n) + sum(c_n * g_c_n), g_* fixed randn
    gradients of loss w.r.t. x, h0, c0 and every parameter
Recorded tensors (data/rnn.safetensors):
    {case}/sd/{key}    state_dict (keys in PyTorch's order: the case's "sd_keys")
    {case}/in/{x,h0,c0}
    {case}/out/{output,h_n,c_n}   and for packed cases out/{batch_sizes,sorted_indices,unsorted_indices}
    {case}/gout/{output,h_n,c_n}
    {case}/gin/{x,h0,c0}  {case}/gp/{key}
The metadata also holds each case's repr (PyTorch's Display of the layer).

Utility cases (names start with "utils_"): inputs in/{i}, outputs out/{...}, and gradients
gin/{i} of sum(out/0 * gout) where a gradient is meaningful.

Run: python3 reference/gen_rnn.py  ->  reference/data/rnn.safetensors
"""
import zlib

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence

from refgen import RefFile

rf = RefFile("rnn")
F32 = torch.float32


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def layer_case(name, layer, kwargs, x_shape, state=False, train=False, lengths=None, enforce_sorted=False,
               note=None):
    """A layer case. x_shape is the (padded) input's shape; lengths makes it a packed case."""
    assert name not in rf.names, name
    rf.names.add(name)
    torch.manual_seed(seed_of(name))
    m = getattr(nn, layer)(**kwargs)
    m.train(train)
    sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
    is_cell = layer.endswith("Cell")
    is_lstm = layer.startswith("LSTM")
    x = torch.randn(*x_shape).requires_grad_(True)
    batch_first = kwargs.get("batch_first", False)
    hidden = kwargs["hidden_size"]
    proj = kwargs.get("proj_size", 0)
    h_out = proj if proj else hidden
    states = []
    if state:
        if is_cell:
            lead = x_shape[:-1]  # (N,) or ()
            states = [torch.randn(*lead, hidden)]
            if is_lstm:
                states.append(torch.randn(*lead, hidden))
        else:
            rows = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional", False) else 1)
            n = () if len(x_shape) == 2 else (x_shape[0 if batch_first else 1],)
            states = [torch.randn(rows, *n, h_out)]
            if is_lstm:
                states.append(torch.randn(rows, *n, hidden))
        states = [s.requires_grad_(True) for s in states]
    hx = None
    if states:
        hx = tuple(states) if is_lstm else states[0]
    inp = x
    packed = None
    if lengths is not None:
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
        inp = packed
    res = m(inp, hx) if hx is not None else m(inp)
    if is_cell:
        outs = {"h_n": res[0], "c_n": res[1]} if is_lstm else {"h_n": res}
    else:
        output, hn = res
        outs = {"output": output.data if lengths is not None else output}
        if is_lstm:
            outs["h_n"], outs["c_n"] = hn
        else:
            outs["h_n"] = hn
    gouts = {k: torch.randn_like(v) for k, v in outs.items()}
    loss = sum((v * gouts[k]).sum() for k, v in outs.items())
    params = dict(m.named_parameters())
    wrt = [x] + states + list(params.values())
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    grads = [torch.zeros_like(w) if g is None else g for w, g in zip(wrt, grads)]

    for k, v in sd.items():
        rf._put(f"{name}/sd/{k}", v)
    rf._put(f"{name}/in/x", x)
    rf._put(f"{name}/gin/x", grads[0])
    state_names = ["h0", "c0"][: len(states)]
    for i, (sn, s) in enumerate(zip(state_names, states)):
        rf._put(f"{name}/in/{sn}", s)
        rf._put(f"{name}/gin/{sn}", grads[1 + i])
    for k, v in outs.items():
        rf._put(f"{name}/out/{k}", v)
        rf._put(f"{name}/gout/{k}", gouts[k])
    for (k, _), g in zip(params.items(), grads[1 + len(states):]):
        rf._put(f"{name}/gp/{k}", g)
    if packed is not None:
        rf._put(f"{name}/out/batch_sizes", packed.batch_sizes)
        if packed.sorted_indices is not None:
            rf._put(f"{name}/out/sorted_indices", packed.sorted_indices)
            rf._put(f"{name}/out/unsorted_indices", packed.unsorted_indices)
    c = {"name": name, "layer": layer, "kwargs": kwargs, "train": train, "seed": seed_of(name),
         "states": state_names, "outputs": list(outs), "sd_keys": list(sd), "params": list(params),
         "repr": repr(m), "atol": 1e-5, "rtol": 1e-5}
    if lengths is not None:
        c["lengths"] = list(lengths)
        c["enforce_sorted"] = enforce_sorted
    if note:
        c["note"] = note
    rf.cases.append(c)


# ------------------------------------------------------------------------------------ RNN
layer_case("rnn_tanh", "RNN", dict(input_size=4, hidden_size=5), (5, 3, 4))
layer_case("rnn_relu_h0", "RNN", dict(input_size=4, hidden_size=5, nonlinearity="relu"), (5, 3, 4), state=True)
layer_case("rnn_2layer_bidir_h0", "RNN", dict(input_size=4, hidden_size=5, num_layers=2, bidirectional=True),
           (5, 3, 4), state=True)
layer_case("rnn_nobias_batch_first", "RNN", dict(input_size=4, hidden_size=5, bias=False, batch_first=True),
           (3, 5, 4))
layer_case("rnn_unbatched_2layer_h0", "RNN", dict(input_size=4, hidden_size=5, num_layers=2), (5, 4), state=True)
layer_case("rnn_len1_batch1", "RNN", dict(input_size=3, hidden_size=2, nonlinearity="relu"), (1, 1, 3), state=True)

# ----------------------------------------------------------------------------------- LSTM
layer_case("lstm", "LSTM", dict(input_size=4, hidden_size=5), (5, 3, 4))
layer_case("lstm_h0c0", "LSTM", dict(input_size=4, hidden_size=5), (5, 3, 4), state=True)
layer_case("lstm_2layer_bidir_h0c0", "LSTM", dict(input_size=4, hidden_size=5, num_layers=2, bidirectional=True),
           (5, 3, 4), state=True)
layer_case("lstm_proj_h0c0", "LSTM", dict(input_size=4, hidden_size=5, proj_size=3), (5, 3, 4), state=True)
layer_case("lstm_proj_2layer_bidir_batch_first", "LSTM",
           dict(input_size=4, hidden_size=5, proj_size=2, num_layers=2, bidirectional=True, batch_first=True),
           (3, 5, 4), state=True)
layer_case("lstm_nobias", "LSTM", dict(input_size=4, hidden_size=5, bias=False), (5, 3, 4))
layer_case("lstm_unbatched_h0c0", "LSTM", dict(input_size=4, hidden_size=5), (5, 4), state=True)
layer_case("lstm_unbatched_batch_first_bidir", "LSTM",
           dict(input_size=4, hidden_size=5, batch_first=True, bidirectional=True), (5, 4))
layer_case("lstm_dropout_eval", "LSTM", dict(input_size=4, hidden_size=5, num_layers=2, dropout=0.5), (5, 3, 4),
           note="eval mode: no dropout")
layer_case("lstm_dropout1_train", "LSTM", dict(input_size=4, hidden_size=5, num_layers=2, dropout=1.0), (5, 3, 4),
           train=True, note="dropout=1 zeroes the first layer's output in training: deterministic")

# ------------------------------------------------------------------------------------ GRU
layer_case("gru", "GRU", dict(input_size=4, hidden_size=5), (5, 3, 4))
layer_case("gru_h0", "GRU", dict(input_size=4, hidden_size=5), (5, 3, 4), state=True)
layer_case("gru_2layer_bidir_batch_first_h0", "GRU",
           dict(input_size=4, hidden_size=5, num_layers=2, bidirectional=True, batch_first=True), (3, 5, 4),
           state=True)
layer_case("gru_nobias", "GRU", dict(input_size=4, hidden_size=5, bias=False), (5, 3, 4))
layer_case("gru_unbatched_h0", "GRU", dict(input_size=4, hidden_size=5), (5, 4), state=True)

# --------------------------------------------------------------------------------- packed
LENS = [3, 5, 2, 5]  # unsorted, with a tie
layer_case("rnn_packed_2layer_bidir_h0", "RNN", dict(input_size=4, hidden_size=5, num_layers=2, bidirectional=True),
           (5, 4, 4), state=True, lengths=LENS)
layer_case("lstm_packed_h0c0", "LSTM", dict(input_size=4, hidden_size=5), (5, 4, 4), state=True, lengths=LENS)
layer_case("lstm_packed_nostate", "LSTM", dict(input_size=4, hidden_size=5, num_layers=2), (5, 4, 4), lengths=LENS)
layer_case("lstm_packed_bidir_proj_batch_first", "LSTM",
           dict(input_size=4, hidden_size=5, proj_size=3, bidirectional=True, batch_first=True), (4, 5, 4),
           state=True, lengths=LENS)
layer_case("gru_packed_bidir_h0", "GRU", dict(input_size=4, hidden_size=5, bidirectional=True), (5, 4, 4),
           state=True, lengths=LENS)
layer_case("gru_packed_sorted", "GRU", dict(input_size=4, hidden_size=5, num_layers=2), (5, 3, 4), state=True,
           lengths=[5, 4, 1], enforce_sorted=True, note="enforce_sorted: no sorted_indices")

# ---------------------------------------------------------------------------------- cells
layer_case("rnncell_h", "RNNCell", dict(input_size=4, hidden_size=5), (3, 4), state=True)
layer_case("rnncell_relu_nobias", "RNNCell", dict(input_size=4, hidden_size=5, bias=False, nonlinearity="relu"),
           (3, 4))
layer_case("rnncell_unbatched_h", "RNNCell", dict(input_size=4, hidden_size=5), (4,), state=True)
layer_case("lstmcell_hc", "LSTMCell", dict(input_size=4, hidden_size=5), (3, 4), state=True)
layer_case("lstmcell_nostate", "LSTMCell", dict(input_size=4, hidden_size=5), (3, 4))
layer_case("lstmcell_unbatched_nobias", "LSTMCell", dict(input_size=4, hidden_size=5, bias=False), (4,), state=True)
layer_case("grucell_h", "GRUCell", dict(input_size=4, hidden_size=5), (3, 4), state=True)
layer_case("grucell_unbatched", "GRUCell", dict(input_size=4, hidden_size=5), (4,))
layer_case("grucell_nobias_h", "GRUCell", dict(input_size=4, hidden_size=5, bias=False), (3, 4), state=True)


# ------------------------------------------------------------------------------ utilities
def util_case(name, op, inputs, fn, args, grad=True):
    """fn(*inputs) -> dict of outputs; 'out' (float) gets a gradient check when grad."""
    assert name not in rf.names, name
    rf.names.add(name)
    torch.manual_seed(seed_of(name))
    xs = [x.detach().clone().requires_grad_(grad) for x in inputs]
    outs = fn(*xs)
    for i, x in enumerate(xs):
        rf._put(f"{name}/in/{i}", x)
    for k, v in outs.items():
        if v is not None:
            rf._put(f"{name}/out/{k}", v)
    if grad:
        g = torch.randn_like(outs["out"])
        gins = torch.autograd.grad((outs["out"] * g).sum(), xs)
        rf._put(f"{name}/gout", g)
        for i, gi in enumerate(gins):
            rf._put(f"{name}/gin/{i}", gi)
    rf.cases.append({"name": name, "op": op, "args": args, "inputs": len(xs),
                     "outputs": [k for k, v in outs.items() if v is not None], "grad": grad})


def seqs(lengths, feat):
    return [torch.randn(n, *feat) for n in lengths]


def packed_outs(p):
    return {"out": p.data, "batch_sizes": p.batch_sizes, "sorted_indices": p.sorted_indices,
            "unsorted_indices": p.unsorted_indices}


for bf, pv, side in [(False, 0.0, "right"), (True, -1.5, "left"), (False, 2.0, "left"), (True, 0.0, "right")]:
    name = f"utils_pad_sequence_{'bf' if bf else 'tf'}_{side}_{str(pv).replace('.', 'p').replace('-', 'm')}"
    util_case(name, "pad_sequence", seqs([2, 4, 1], (3,)),
              lambda *s, bf=bf, pv=pv, side=side: {
                  "out": pad_sequence(list(s), batch_first=bf, padding_value=pv, padding_side=side)},
              dict(batch_first=bf, padding_value=pv, padding_side=side))
util_case("utils_pad_sequence_1d", "pad_sequence", seqs([3, 1, 2], ()),
          lambda *s: {"out": pad_sequence(list(s))}, dict(batch_first=False, padding_value=0.0, padding_side="right"))

for name, shape, lengths, bf, es in [
    ("utils_pack_padded_unsorted_ties", (5, 4, 3), [5, 2, 5, 3], False, False),
    ("utils_pack_padded_batch_first", (4, 5, 3), [2, 5, 1, 4], True, False),
    ("utils_pack_padded_sorted", (5, 4, 3), [5, 4, 2, 1], False, True),
    ("utils_pack_padded_no_features", (4, 3), [1, 4, 2], False, False),
]:
    util_case(name, "pack_padded_sequence", [torch.randn(*shape)],
              lambda x, lengths=lengths, bf=bf, es=es: packed_outs(
                  pack_padded_sequence(x, lengths, batch_first=bf, enforce_sorted=es)),
              dict(lengths=lengths, batch_first=bf, enforce_sorted=es))

util_case("utils_pack_sequence_unsorted", "pack_sequence", seqs([3, 1, 4], (2,)),
          lambda *s: packed_outs(pack_sequence(list(s), enforce_sorted=False)), dict(enforce_sorted=False))
util_case("utils_pack_sequence_sorted", "pack_sequence", seqs([4, 3, 3], (2,)),
          lambda *s: packed_outs(pack_sequence(list(s), enforce_sorted=True)), dict(enforce_sorted=True))

for bf, pv, total in [(False, 0.0, None), (True, -1.0, 7), (False, 3.5, 6)]:
    name = f"utils_pad_packed_{'bf' if bf else 'tf'}_{total}"

    def fn(*s, bf=bf, pv=pv, total=total):
        p = pack_sequence(list(s), enforce_sorted=False)
        out, lengths = pad_packed_sequence(p, batch_first=bf, padding_value=pv, total_length=total)
        return {"out": out, "lengths": lengths}
    util_case(name, "pad_packed_sequence", seqs([3, 5, 1, 5], (2,)), fn,
              dict(batch_first=bf, padding_value=pv, total_length=total),
              )

rf.save()
