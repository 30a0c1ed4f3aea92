"""``xformers.ops.fmha``: :func:`memory_efficient_attention` on PyTorch's scaled dot product attention."""

from __future__ import annotations

import torch

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.attention import Scores, attend
from torchdevice.standins.missing import module_getattr

from . import attn_bias
from .attn_bias import (
    AttentionBias,
    BlockDiagonalCausalFromBottomRightMask,
    BlockDiagonalCausalMask,
    BlockDiagonalMask,
    LowerTriangularFromBottomRightMask,
    LowerTriangularMask,
    LowerTriangularMaskWithTensorBias,
)


def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *, op=None, output_dtype=None):
    """``query`` ``(B, M, H, K)``, ``key``/``value`` ``(B, N, H, K)`` (also ``(B, M, K)``, and ``(B, M, G, H, K)``
    for grouped heads) -> ``(B, M, H, Kv)``. ``attn_bias``: None, a tensor added to the scores (broadcastable to
    ``(B, H, M, N)``) or an :class:`AttentionBias`; ``p``: dropout; ``scale``: default ``1/sqrt(K)``;
    ``op``: a kernel preference (the target's kernel runs)."""
    record_standin("xformers.ops.memory_efficient_attention", query.device.type)
    shape = query.shape
    if query.dim() == 3:
        query, key, value = query[:, :, None], key[:, :, None], value[:, :, None]
    elif query.dim() == 5:
        query, key, value = (t.flatten(2, 3) for t in (query, key, value))
    elif query.dim() != 4:
        raise ValueError(f"memory_efficient_attention: query must have 3, 4 or 5 dimensions, not {tuple(shape)}")
    m, n = query.shape[1], key.shape[1]
    if attn_bias is None:
        scores = Scores()
    elif isinstance(attn_bias, torch.Tensor):
        scores = Scores(bias=attn_bias.float())
    elif isinstance(attn_bias, AttentionBias):
        scores = Scores(allowed=attn_bias._allowed(m, n, query.device), bias=attn_bias._tensor_bias())
    else:
        raise TypeError(f"memory_efficient_attention: attn_bias must be None, a tensor or an AttentionBias, "
                        f"not {type(attn_bias).__name__}")
    out, _, _ = attend(query, key, value, scores, scale=scale, dropout_p=p)
    if len(shape) == 3:
        out = out[:, :, 0]
    elif len(shape) == 5:
        out = out.unflatten(2, shape[2:4])
    return out if output_dtype is None else out.to(output_dtype)


__all__ = ["AttentionBias", "BlockDiagonalCausalFromBottomRightMask", "BlockDiagonalCausalMask", "BlockDiagonalMask",
           "LowerTriangularFromBottomRightMask", "LowerTriangularMask", "LowerTriangularMaskWithTensorBias",
           "attn_bias", "memory_efficient_attention"]
__getattr__ = module_getattr(__name__)
