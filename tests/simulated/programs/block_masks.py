"""Flex attention as transformers runs it on a GPU: a causal block mask built by a compiled function that takes no
tensor, then attention through it; one JSON line."""

import json

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def causal(batch, head, query, key):
    return query >= key


if __name__ == "__main__":
    torch.manual_seed(0)
    mask = create_block_mask(causal, B=None, H=None, Q_LEN=256, KV_LEN=256, device="cuda")
    q, k, v = (torch.randn(1, 2, 256, 16, device="cuda") for _ in range(3))
    out = flex_attention(q, k, v, block_mask=mask)
    print(json.dumps({"device": str(mask.kv_num_blocks.device), "blocks": mask.kv_num_blocks.tolist(),
                      "out": out.sum(-1).flatten().tolist()}))
