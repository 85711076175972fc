"""TensorBoard's own reader on Pyrite's event files, against torch.utils.tensorboard's.

1. Runs the Rust example ``write_events`` (crates/pyrite-tensorboard/examples/write_events.rs),
   which writes a fixed set of summaries (scalars, add_scalars, histograms, text, an image,
   hparams) into a temporary folder.
2. Writes the same content with ``torch.utils.tensorboard.SummaryWriter`` into another one.
3. Loads both with ``tensorboard.backend.event_processing.event_accumulator.EventAccumulator``
   (every run folder; the hparams plugin's data parsed as ``HParamsPluginData``; images
   decoded to pixels by PIL) and compares the two readings: same runs, tags, steps and values,
   histogram buckets and limits, text, pixels, hparams.
4. Writes reference/data/tensorboard_read.json: what TensorBoard read from Pyrite's files, and
   the comparison's result. The Rust test crates/pyrite-tensorboard/tests/tensorboard_reference.rs
   checks that Pyrite's own reader reads the same from its files (CI needs no Python).

Run: python3 reference/check_tensorboard.py (builds the example with cargo; CPU, seconds).
"""
import io
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
from google.protobuf import json_format
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2
from torch.utils.tensorboard import SummaryWriter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "data", "tensorboard_read.json")


def histogram_values(step):
    # Same values as write_events.rs's histogram_values.
    return [math.sin(i * 0.37 + step) * (1.0 + step) * 3.0 for i in range(200)] + [0.0, 0.0, 1e-3]


def image_pixels():
    return [(i * 37) % 256 for i in range(3 * 4 * 5)]


def write_torch(d):
    w = SummaryWriter(d)
    for step in range(5):
        w.add_scalar("loss", 1.0 / (step + 1.0), step)
        w.add_scalar("metrics/acc", 0.5 + 0.1 * step, step)
    for step in range(2):
        w.add_histogram("weights", np.array(histogram_values(step)), step)
    w.add_histogram("small", np.array([1.0, 2.0, 2.0, 3.5]), 0)
    w.add_text("notes", "hello *TensorBoard* from Pyrite", 3)
    w.add_image("image", torch.tensor(image_pixels(), dtype=torch.uint8).reshape(3, 4, 5), 1)
    w.add_scalars("pair", {"a": 1.5, "b": -2.5}, 2)
    w.add_hparams(
        {"lr": 0.01, "batch_size": 32, "optimizer": "adam", "nesterov": True},
        {"hparam/accuracy": 0.875, "hparam/loss": 0.25},
        run_name="hparams",
    )
    w.close()


def read_run(d):
    acc = EventAccumulator(d, size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    run = {"scalars": {}, "histograms": {}, "texts": {}, "images": {}, "hparams": {}}
    for t in sorted(tags["scalars"]):
        run["scalars"][t] = [[e.step, e.value] for e in acc.Scalars(t)]
    for t in sorted(tags["histograms"]):
        run["histograms"][t] = [
            {
                "step": e.step,
                "min": e.histogram_value.min,
                "max": e.histogram_value.max,
                "num": e.histogram_value.num,
                "sum": e.histogram_value.sum,
                "sum_squares": e.histogram_value.sum_squares,
                "bucket_limit": list(e.histogram_value.bucket_limit),
                "bucket": list(e.histogram_value.bucket),
            }
            for e in acc.Histograms(t)
        ]
    for t in sorted(tags["tensors"]):
        if acc.SummaryMetadata(t).plugin_data.plugin_name == "text":
            run["texts"][t] = [[e.step, e.tensor_proto.string_val[0].decode()] for e in acc.Tensors(t)]
    for t in sorted(tags["images"]):
        run["images"][t] = []
        for e in acc.Images(t):
            img = np.asarray(Image.open(io.BytesIO(e.encoded_image_string)))
            run["images"][t].append(
                {"step": e.step, "width": e.width, "height": e.height, "shape": list(img.shape),
                 "pixels": img.reshape(-1).tolist()}
            )
    try:
        hp = acc.PluginTagToContent("hparams")
    except KeyError:
        hp = {}
    for tag, content in sorted(hp.items()):
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        run["hparams"][tag] = json_format.MessageToDict(data, preserving_proto_field_name=True)
    return {k: v for k, v in run.items() if v}


def read_all(root):
    runs = {}
    for dirpath, _, files in os.walk(root):
        if any("tfevents" in f for f in files):
            runs[os.path.relpath(dirpath, root)] = read_run(dirpath)
    return dict(sorted(runs.items()))


def canon_hparams(h):
    # Map and list order is not part of the format: sort for the comparison.
    h = json.loads(json.dumps(h))
    for v in h.values():
        exp = v.get("experiment")
        if exp:
            exp["hparam_infos"] = sorted(exp.get("hparam_infos", []), key=lambda x: x["name"])
            exp["metric_infos"] = sorted(exp.get("metric_infos", []), key=lambda x: x["name"]["tag"])
    return h


def compare(a, b, path=""):
    """Differences between two readings (floats to 1e-12 relative: numpy sums pairwise)."""
    diffs = []
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            diffs.append(f"{path}: keys {sorted(a)} != {sorted(b)}")
        for k in sorted(set(a) & set(b)):
            diffs += compare(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{path}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diffs += compare(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        if not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12):
            diffs.append(f"{path}: {a!r} != {b!r}")
    elif a != b:
        diffs.append(f"{path}: {a!r} != {b!r}")
    return diffs


def main():
    with tempfile.TemporaryDirectory() as tmp:
        rust_dir, torch_dir = os.path.join(tmp, "rust"), os.path.join(tmp, "torch")
        subprocess.run(
            ["cargo", "run", "-q", "-p", "pyrite-tensorboard", "--example", "write_events", "--", rust_dir],
            cwd=ROOT, check=True,
        )
        write_torch(torch_dir)
        rust, ref = read_all(rust_dir), read_all(torch_dir)
    # PyTorch's file for add_hparams sits in log_dir/<run_name>; the same layout on both sides.
    for r in (rust, ref):
        for run in r.values():
            if "hparams" in run:
                run["hparams"] = canon_hparams(run["hparams"])
    diffs = compare(rust, ref)
    n_hist = sum(len(v) for run in rust.values() for v in run.get("histograms", {}).values())
    out = {
        "about": "What TensorBoard's EventAccumulator read from the event files of "
                 "crates/pyrite-tensorboard/examples/write_events.rs, and how it compares with the "
                 "same content written by torch.utils.tensorboard (reference/check_tensorboard.py).",
        "tensorboard_version": __import__("tensorboard").__version__,
        "torch_version": torch.__version__,
        "runs": rust,
        "comparison_with_torch": {
            "identical": not diffs,
            "differences": diffs,
            "runs": sorted(rust),
            "histograms_compared": n_hist,
        },
    }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {OUT}: {len(rust)} runs; torch comparison: {'identical' if not diffs else diffs}")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
