"""Written for NVIDIA GPUs with xformers, the way diffusion and LLM code calls it."""
import sys

import torch
import xformers
import xformers.ops
from xformers.ops import fmha

torch.manual_seed(0)
q, k, v = (torch.randn(2, 10, 4, 16, device="cuda", dtype=torch.float16) for _ in range(3))
causal = xformers.ops.memory_efficient_attention(q, k, v, attn_bias=xformers.ops.LowerTriangularMask())
lengths = [3, 5, 8]
qb, kb, vb = (torch.randn(1, sum(lengths), 4, 16, device="cuda") for _ in range(3))
blocks = fmha.BlockDiagonalMask.from_seqlens(lengths)
packed = xformers.ops.memory_efficient_attention(qb, kb, vb, attn_bias=blocks.make_causal(), scale=0.2)
torch.save({"q": q.cpu(), "k": k.cpu(), "v": v.cpu(), "causal": causal.cpu(), "qb": qb.cpu(), "kb": kb.cpu(),
            "vb": vb.cpu(), "lengths": lengths, "packed": packed.cpu(), "version": xformers.__version__}, sys.argv[1])
