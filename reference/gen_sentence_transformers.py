"""Reference data for pyrite-transformers' SentenceTransformer: sentence-transformers on the tiny
BERT of gen_bert.py (run that first).

Folder, in the layout of the Hub's sentence-transformers models (all-MiniLM-L6-v2 and the
like, saved by sentence-transformers 2.x/3.x; the Rust side loads it with
SentenceTransformer::from_pretrained):
    data/bert-tiny-st/   bert-tiny's files plus modules.json (Transformer, Pooling, Normalize),
                         sentence_bert_config.json (max_seq_length 8, shorter than the
                         tokenizer's model_max_length 64, so that truncation shows) and
                         1_Pooling/config.json (the pooling_mode_* booleans: mean)

Recorded (data/sentence_transformers.safetensors), for SENTENCES (some longer than 8 tokens):
    mean_normalize      SentenceTransformer(folder).encode(SENTENCES)
    cls_max_sqrt        the same Transformer with Pooling(cls, max, mean_sqrt_len) and no
                        Normalize (the Rust test writes that folder from bert-tiny-st)
    no_st_config        the bert-tiny folder alone (no modules.json: mean pooling, and
                        max_seq_length = min(max_position_embeddings, model_max_length) = 64)
The metadata holds the sentences.

Run: python3 reference/gen_sentence_transformers.py   (needs sentence-transformers)
"""
import json
import os
import shutil

import torch
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformer
from sentence_transformers.models import Normalize, Pooling, Transformer

from refgen import DATA

BERT = os.path.join(DATA, "bert-tiny")
FOLDER = os.path.join(DATA, "bert-tiny-st")

SENTENCES = [
    "The cat sat on the mat.",
    "  Hello, world!  ",
    "A quick brown fox jumped over the lazy dogs, the quick dog sat on the mat.",
    "Zebra42 is UNKNOWN?",
]


def main():
    torch.manual_seed(0)
    shutil.rmtree(FOLDER, ignore_errors=True)
    shutil.copytree(BERT, FOLDER)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    pooling = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
               "pooling_mode_lasttoken": False, "include_prompt": True}
    os.makedirs(os.path.join(FOLDER, "1_Pooling"))
    for path, obj in [("modules.json", modules), ("sentence_bert_config.json", {"max_seq_length": 8, "do_lower_case": False}),
                      ("1_Pooling/config.json", pooling)]:
        with open(os.path.join(FOLDER, path), "w") as f:
            json.dump(obj, f, indent=2)
    dim = 32
    out = {}
    loaded = SentenceTransformer(FOLDER, device="cpu")
    assert loaded.max_seq_length == 8
    out["mean_normalize"] = loaded.encode(SENTENCES, convert_to_tensor=True)
    tr2 = Transformer(BERT, max_seq_length=8)
    pool = Pooling(dim, pooling_mode_cls_token=True, pooling_mode_max_tokens=True,
                   pooling_mode_mean_tokens=False, pooling_mode_mean_sqrt_len_tokens=True)
    st2 = SentenceTransformer(modules=[tr2, pool], device="cpu")
    out["cls_max_sqrt"] = st2.encode(SENTENCES, convert_to_tensor=True)
    plain = SentenceTransformer(BERT, device="cpu")
    assert plain.max_seq_length == 64, plain.max_seq_length
    out["no_st_config"] = plain.encode(SENTENCES, convert_to_tensor=True)
    # The truncation matters: the long sentence embeds differently with 8 and with 64 tokens.
    assert not torch.allclose(out["mean_normalize"][2], torch.nn.functional.normalize(out["no_st_config"][2], dim=0))
    save_file({k: v.cpu().contiguous() for k, v in out.items()},
              os.path.join(DATA, "sentence_transformers.safetensors"),
              metadata={"sentences": json.dumps(SENTENCES)})
    for k in sorted(out):
        print(k, tuple(out[k].shape))


if __name__ == "__main__":
    main()
