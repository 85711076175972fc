"""Reference data for pyrite-transformers: a tiny random BERT and its WordPiece tokenizer, saved
as Hugging Face folders, and what Hugging Face's transformers computes with them.

Folders (what `save_pretrained` writes; the Rust side loads them with from_pretrained):
    data/bert-tiny/       config.json, model.safetensors (BertModel with pooler),
                          tokenizer.json, tokenizer_config.json
    data/bert-tiny-mlm/   config.json, model.safetensors of a BertForMaskedLM whose encoder has
                          bert-tiny's weights (keys under "bert.", a "cls." head, no pooler)

The model: BertConfig(vocab=len(VOCAB), hidden 32, 2 layers, 4 heads, intermediate 37,
max_position_embeddings 64, gelu), torch.manual_seed(0), then every parameter redrawn so the
outputs depend strongly on every weight and on the mask: weights and embeddings N(0, 0.3), biases
N(0, 0.1), LayerNorm weights 1 + N(0, 0.1).

The tokenizer: the `tokenizers` library's WordPiece over VOCAB ([PAD] [UNK] [CLS] [SEP] [MASK],
punctuation, a few words, every letter alone and as a ##suffix) with BERT's normalizer
(lowercase, strip accents), pre-tokenizer, [CLS] A [SEP] B [SEP] post-processor and decoder,
wrapped in PreTrainedTokenizerFast and saved.

Recorded (data/bert.safetensors), for each batch B in "single" (SENTENCES, padding=True),
"pairs" (PAIRS, padding=True) and "trunc" (PAIRS, padding="max_length", truncation, max_length 9):
    B/input_ids, B/token_type_ids, B/attention_mask      AutoTokenizer.from_pretrained(folder)(...)
and for "single" and "pairs", the model (from_pretrained, eval) on them:
    B/last_hidden_state, B/pooler_output, B/sentence     normalize(mean_pooling(...)), f32
    B/f64/last_hidden_state, B/f64/pooler_output         the same model in float64
    single/hidden_states/{0,1,2}                          output_hidden_states=True
    mlm/last_hidden_state                                 BertModel.from_pretrained(bert-tiny-mlm)
                                                          on "single": the same encoder, no pooler
The metadata holds the sentences, the pairs and the tokens of each single sentence.

Run: python3 reference/gen_bert.py   (needs transformers and tokenizers; PyTorch is the oracle)
"""
import json
import os
import shutil

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel, PreTrainedTokenizerFast

from refgen import DATA

FOLDER = os.path.join(DATA, "bert-tiny")
MLM_FOLDER = os.path.join(DATA, "bert-tiny-mlm")

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "is", "hello", "world", "quick", "brown", "fox",
         "jump", "over", "lazy", "play", "run", "un", "known", "sentence", "short", "pair", "second"]
SUFFIXES = ["##s", "##ed", "##ing", "##er", "##ly"]
PUNCT = [".", ",", "!", "?", "'"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
# Each token once, in order of first appearance ("a" is a word and a letter, "##s" a suffix and a letter).
VOCAB = list(dict.fromkeys(SPECIAL + PUNCT + WORDS + SUFFIXES + LETTERS + ["##" + c for c in LETTERS]))

SENTENCES = [
    "The cat sat on the mat.",
    "Hello, world!",
    "A quick brown fox jumped over the lazy dogs.",
    "Zebra42 is UNKNOWN?",
]
PAIRS = [
    ("The cat sat.", "The dog played on the mat."),
    ("A short pair", "and a second sentence, longer than the first."),
]


def build_tokenizer():
    vocab = {t: i for i, t in enumerate(VOCAB)}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece(prefix="##")
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=64,
                                   model_input_names=["input_ids", "token_type_ids", "attention_mask"])


def build_model():
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
                        hidden_act="gelu", pad_token_id=0)
    torch.manual_seed(0)
    model = BertModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.normal_(0, 0.1)
            else:
                p.normal_(0, 0.3)
    return model.eval()


def clean(folder):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)


def main():
    out, meta = {}, {}
    clean(FOLDER)
    build_tokenizer().save_pretrained(FOLDER)
    model = build_model()
    model.save_pretrained(FOLDER)
    # The MLM checkpoint: the same encoder under "bert.", a prediction head, no pooler.
    clean(MLM_FOLDER)
    torch.manual_seed(1)
    mlm = BertForMaskedLM(model.config)
    missing = mlm.bert.load_state_dict(model.state_dict(), strict=False)
    assert missing.missing_keys == [] and all(k.startswith("pooler.") for k in missing.unexpected_keys)
    mlm.save_pretrained(MLM_FOLDER)
    for f in os.listdir(FOLDER) + os.listdir(MLM_FOLDER):
        assert f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                     "special_tokens_map.json", "generation_config.json"), f"unexpected file {f}"

    # Everything below runs on what was saved, as a user would load it.
    tok = AutoTokenizer.from_pretrained(FOLDER)
    model = BertModel.from_pretrained(FOLDER).eval()
    model64 = BertModel.from_pretrained(FOLDER).double().eval()
    mlm_base = BertModel.from_pretrained(MLM_FOLDER).eval()

    batches = {
        "single": tok(SENTENCES, padding=True, return_tensors="pt"),
        "pairs": tok([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt"),
        "trunc": tok([a for a, _ in PAIRS], [b for _, b in PAIRS], padding="max_length", truncation=True,
                     max_length=9, return_tensors="pt"),
    }
    for name, enc in batches.items():
        for k in ("input_ids", "token_type_ids", "attention_mask"):
            out[f"{name}/{k}"] = enc[k]
    with torch.no_grad():
        for name in ("single", "pairs"):
            enc = batches[name]
            r = model(**enc)
            out[f"{name}/last_hidden_state"] = r.last_hidden_state
            out[f"{name}/pooler_output"] = r.pooler_output
            m = enc["attention_mask"].unsqueeze(-1).float()
            pooled = (r.last_hidden_state * m).sum(1) / m.sum(1).clamp(min=1e-9)
            out[f"{name}/sentence"] = F.normalize(pooled, p=2, dim=1)
            r64 = model64(**enc)
            out[f"{name}/f64/last_hidden_state"] = r64.last_hidden_state
            out[f"{name}/f64/pooler_output"] = r64.pooler_output
            assert (r64.last_hidden_state.float() - r.last_hidden_state).abs().max() < 1e-4
        r = model(**batches["single"], output_hidden_states=True)
        for i, h in enumerate(r.hidden_states):
            out[f"single/hidden_states/{i}"] = h
        out["mlm/last_hidden_state"] = mlm_base(**batches["single"]).last_hidden_state
        assert torch.allclose(out["mlm/last_hidden_state"], out["single/last_hidden_state"])

    meta["sentences"] = json.dumps(SENTENCES)
    meta["pairs"] = json.dumps(PAIRS)
    meta["tokens"] = json.dumps([tok.tokenize(s) for s in SENTENCES])
    meta["vocab_size"] = str(len(VOCAB))
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(DATA, "bert.safetensors"), metadata=meta)
    for k in sorted(out):
        print(k, tuple(out[k].shape))
    print("tokens:", meta["tokens"])


if __name__ == "__main__":
    main()
