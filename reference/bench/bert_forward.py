#!/usr/bin/env python3
"""PyTorch's side of pyrite-bench's `bert_forward` workload (the shared torch_bench.py has none).

Same command line and JSON record as torch_bench.py, so scripts/bench_compare.py pairs it with
`pyrite-bench --only bert_forward`. Builds transformers.BertModel with all-MiniLM-L6-v2's config
(vocab 30522, hidden 384, 6 layers, 12 heads, intermediate 1536, 512 positions, gelu) and random
weights (torch.manual_seed(0), transformers' initialisation), in eval mode, and times one forward
pass under torch.no_grad() on a [8, 81] batch of token ids with an all-ones attention mask and
zero token types, as crates/pyrite-bench/src/bert.rs does. The attention implementation is
transformers' default for BERT (recorded in the results as `attn_implementation`).

Usage: python3 reference/bench/bert_forward.py [--only bert_forward] [--threads 2] [--repeats 7]
Needs: torch and transformers.
"""

import torch

import harness

def bench_bert_forward():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    batch, seq = 8, 81
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536, max_position_embeddings=512, hidden_act="gelu")
    model = BertModel(config).eval()
    input_ids = torch.randint(1000, 30522, (batch, seq))
    attention_mask = torch.ones(batch, seq, dtype=torch.long)
    token_type_ids = torch.zeros(batch, seq, dtype=torch.long)

    def forward():
        with torch.no_grad():
            model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)

    t, times = harness.timeit(forward, warmup=3)
    return {
        "config": "all-MiniLM-L6-v2 shapes: vocab 30522, hidden 384, 6 layers, 12 heads, ff 1536; "
                  "batch 8 x 81 tokens; eval, no_grad",
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "forward_ms": round(t * 1e3, 3),
        "forward_ms_best": round(min(times) * 1e3, 3),
        "tokens_per_s": round(batch * seq / t, 1),
        "spread": round((max(times) - min(times)) / t, 3),
    }


WORKLOADS = {"bert_forward": bench_bert_forward}


if __name__ == "__main__":
    harness.main(WORKLOADS, __doc__)
