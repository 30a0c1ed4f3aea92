"""The attention every stand-in computes: layout ``(batch, seqlen, heads, headdim)``, masks built once as
tensors (never a Python loop per row), :func:`torch.nn.functional.scaled_dot_product_attention` wherever the
semantics allow it, an explicit softmax where they do not (``softcap``, attention probabilities).

Packed variable-length batches are padded into one batch (:func:`attend`), except on the CPU where plain
causal or full attention needs no mask: there :func:`attend_each` runs one sequence at a time, as
flash-attn's kernels do, without the padded copies (fresh memory on every call, which cost more than the
attention itself: ``python -m bench standins``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from torchdevice.device.aten import true_device


@dataclass(frozen=True)
class Scores:
    """What is added to or applied on ``QK^T * scale`` before the softmax.

    ``allowed``: boolean, broadcastable to ``(batch, heads, seqlen_q, seqlen_k)`` (``None``: every key);
    ``bias``: float, likewise; ``softcap``: ``softcap * tanh(s / softcap)`` first when positive."""

    allowed: Tensor | None = None
    bias: Tensor | None = None
    softcap: float = 0.0


def band(rows: Tensor, cols: Tensor, offset: Tensor | int, window: tuple[int, int]) -> Tensor:
    """Keys ``j`` query ``i`` may see: ``i + offset - left <= j <= i + offset + right`` (a negative bound is
    unbounded). ``offset`` is ``seqlen_k - seqlen_q`` (bottom-right alignment); a tensor gives one per batch."""
    left, right = window
    distance = cols - rows - (offset[:, None, None] if isinstance(offset, Tensor) else offset)
    allowed = torch.ones_like(distance, dtype=torch.bool)
    if left >= 0:
        allowed &= distance >= -left
    if right >= 0:
        allowed &= distance <= right
    return allowed


def alibi(slopes: Tensor, rows: Tensor, cols: Tensor, offset: Tensor | int) -> Tensor:
    """``-slope * |i + offset - j|`` per head, ``slopes`` of shape ``(heads,)`` or ``(batch, heads)``."""
    distance = (cols - rows - (offset[:, None, None] if isinstance(offset, Tensor) else offset)).abs()
    distance = distance[:, None] if distance.dim() == 3 else distance  # (batch, 1, q, k) or (q, k)
    return -slopes.float()[..., None, None] * distance


def attend(q: Tensor, k: Tensor, v: Tensor, scores: Scores, *, scale: float | None, dropout_p: float = 0.0,
           is_causal: bool = False, probabilities: bool = False) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """``(out, logsumexp, probabilities)``: ``out`` like ``q``; the other two only with ``probabilities``
    (``logsumexp`` of shape ``(batch, heads, seqlen_q)`` in float32, ``+inf`` for a query with no key;
    probabilities ``(batch, heads, seqlen_q, seqlen_k)``, negative where dropout dropped them).
    ``k``/``v`` may have fewer heads, dividing ``q``'s (MQA/GQA); ``is_causal``: top-left, square only."""
    heads, heads_k = q.shape[2], k.shape[2]
    if heads % heads_k:
        raise ValueError(f"the number of heads of the query ({heads}) must be a multiple of the key's ({heads_k})")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if not (scores.softcap > 0 or probabilities):
        mask = scores.allowed
        if scores.bias is not None:
            bias = scores.bias.to(q.dtype)
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal,
                                             scale=scale, enable_gqa=heads != heads_k)
        return out.transpose(1, 2), None, None
    if heads != heads_k:
        kt, vt = kt.repeat_interleave(heads // heads_k, 1), vt.repeat_interleave(heads // heads_k, 1)
    s = torch.matmul(qt.float(), kt.float().transpose(-1, -2)) * scale
    if scores.softcap > 0:
        s = scores.softcap * torch.tanh(s / scores.softcap)
    if scores.bias is not None:
        s = s + scores.bias
    allowed = scores.allowed
    if is_causal:
        n_q, n_k = s.shape[-2:]
        allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=true_device(s)).tril()
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    empty = lse == float("-inf")
    p = torch.exp(s - lse.masked_fill(empty, 0)[..., None])  # rows with no key: all zeros
    kept = p
    if dropout_p > 0:
        keep = torch.rand_like(p) >= dropout_p
        kept = p * keep / (1 - dropout_p)
        p = torch.where(keep, p, -p)
    out = torch.matmul(kept.to(vt.dtype), vt).transpose(1, 2)
    if not probabilities:
        return out, None, None
    return out, lse.masked_fill(empty, float("inf")), p.to(q.dtype)


def attend_each(q: Tensor, k: Tensor, v: Tensor, lengths_q: list[int], lengths_k: list[int], *, causal: bool,
                scale: float | None, dropout_p: float = 0.0) -> Tensor:
    """Packed sequences ``(total, heads, headdim)`` of ``lengths_q``/``lengths_k`` tokens, one at a time: full
    attention, or causal where each query sequence is as long as its key sequence (flash-attn aligns the
    causal mask bottom-right, which is top-left for square blocks). ``out`` like ``q``."""
    enable_gqa = q.shape[1] != k.shape[1]
    outs = [F.scaled_dot_product_attention(a.transpose(0, 1), b.transpose(0, 1), c.transpose(0, 1),
                                           dropout_p=dropout_p, is_causal=causal, scale=scale,
                                           enable_gqa=enable_gqa).transpose(0, 1)
            for a, b, c in zip(q.split(lengths_q), k.split(lengths_k), v.split(lengths_k), strict=True)]
    return torch.cat(outs) if outs else q.new_empty(0, q.shape[1], v.shape[2])
