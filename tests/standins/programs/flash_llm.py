"""Written for NVIDIA GPUs with flash-attn: the import comes first, then torch; a spawn worker does the same."""
from flash_attn import flash_attn_func, flash_attn_varlen_func  # noqa: I001 - unguarded, before torch, as people write it
from flash_attn.bert_padding import pad_input, unpad_input

import sys

import torch
import torch.multiprocessing as mp


def attention(q, k, v):
    return flash_attn_func(q, k, v, causal=True)


def main(path):
    torch.manual_seed(0)
    device = torch.device("cuda")
    q, k, v = (torch.randn(2, 16, 4, 32, device=device, dtype=torch.float16) for _ in range(3))
    k2, v2 = (torch.randn(2, 16, 2, 32, device=device, dtype=torch.float16) for _ in range(2))
    mask = torch.ones(2, 16, dtype=torch.long, device=device)
    mask[1, 9:] = 0
    x = torch.randn(2, 16, 4, 32, device=device, dtype=torch.bfloat16)
    packed, indices, cu_seqlens, max_seqlen, _ = unpad_input(x, mask)
    varlen = flash_attn_varlen_func(packed, packed, packed, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                                    causal=True, window_size=(4, 0))
    with mp.get_context("spawn").Pool(1) as pool:
        in_child = pool.apply(attention, (q.cpu(), k2.cpu(), v2.cpu()))
    torch.save({"q": q.cpu(), "k": k.cpu(), "v": v.cpu(), "k2": k2.cpu(), "v2": v2.cpu(), "x": x.cpu(),
                "mask": mask.cpu(), "dense": attention(q, k, v).cpu(), "gqa_in_child": in_child,
                "varlen": pad_input(varlen, indices, 2, 16).cpu(), "is_cuda": q.is_cuda}, path)


if __name__ == "__main__":
    main(sys.argv[1])
