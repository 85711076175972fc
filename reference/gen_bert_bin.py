"""Reference data for pyrite-transformers: the tiny BERT of gen_bert.py (run that first) saved the
old way, as transformers 4 wrote it with save_pretrained(safe_serialization=False) (transformers 5
always writes safetensors, so the state_dict is torch.save'd here as 4.x did):

    data/bert-tiny-bin/   config.json, pytorch_model.bin (torch.save of the state_dict)

The Rust test loads it with BertModel::from_pretrained and compares with the outputs that
gen_bert.py recorded for the safetensors folder.

Run: python3 reference/gen_bert_bin.py   (needs transformers)
"""
import os
import shutil

import torch
from transformers import BertModel

from refgen import DATA

SRC = os.path.join(DATA, "bert-tiny")
FOLDER = os.path.join(DATA, "bert-tiny-bin")


def main():
    shutil.rmtree(FOLDER, ignore_errors=True)
    model = BertModel.from_pretrained(SRC).eval()
    os.makedirs(FOLDER)
    model.config.save_pretrained(FOLDER)
    torch.save(model.state_dict(), os.path.join(FOLDER, "pytorch_model.bin"))
    print(sorted(os.listdir(FOLDER)))
    sd = torch.load(os.path.join(FOLDER, "pytorch_model.bin"), weights_only=True)
    print(type(sd).__name__, len(sd))


if __name__ == "__main__":
    main()
