"""flash-attn 2's functions (``flash_attn.flash_attn_interface``), computed by :mod:`torchdevice.standins.attention`.

Layout ``(batch, seqlen, nheads, headdim)`` (varlen: ``(total, nheads, headdim)`` with ``cu_seqlens``); causal
masks and windows aligned to the bottom-right corner; a query that sees no key gets zeros.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from torchdevice.reporting.counts import record_standin
from torchdevice.standins.attention import Scores, alibi, attend, attend_each, band


def _scores(rows: Tensor, cols: Tensor, offset: Tensor | int, causal: bool, window_size: Sequence[int],
            softcap: float, alibi_slopes: Tensor | None, valid: Tensor | None = None) -> Scores:
    """The masks and bias of flash-attn's options; ``valid``: the keys and queries that exist (varlen, caches)."""
    window = (int(window_size[0]), 0 if causal else int(window_size[1]))
    allowed = None if window == (-1, -1) else band(rows, cols, offset, window)
    if valid is not None:
        allowed = valid if allowed is None else allowed & valid
    if allowed is not None and allowed.dim() == 3:
        allowed = allowed[:, None]  # (batch, 1, q, k)
    bias = None if alibi_slopes is None else alibi(alibi_slopes, rows, cols, offset)
    return Scores(allowed, bias, softcap)


def _dense(name: str, q: Tensor, k: Tensor, v: Tensor, dropout_p: float, softmax_scale: float | None, causal: bool,
           window_size: Sequence[int], softcap: float, alibi_slopes: Tensor | None,
           return_attn_probs: bool) -> Tensor | tuple[Tensor, Tensor, Tensor]:
    record_standin(name, q.device.type)
    sq, sk = q.shape[1], k.shape[1]
    simple_causal = causal and sq == sk and window_size[0] < 0 and alibi_slopes is None
    rows = torch.arange(sq, device=q.device)[:, None]
    cols = torch.arange(sk, device=q.device)[None, :]
    scores = _scores(rows, cols, sk - sq, causal and not simple_causal, window_size, softcap, alibi_slopes)
    out, lse, probs = attend(q, k, v, scores, scale=softmax_scale, dropout_p=dropout_p, is_causal=simple_causal,
                             probabilities=return_attn_probs)
    return (out, lse, probs) if return_attn_probs else out  # type: ignore[return-value]


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """``q`` ``(batch, seqlen_q, nheads, headdim)``, ``k``/``v`` ``(batch, seqlen_k, nheads_k, headdim)`` ->
    ``out`` like ``q`` (with ``return_attn_probs``: ``(out, softmax_lse, S_dmask)``)."""
    return _dense("flash_attn.flash_attn_func", q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                  alibi_slopes, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """``qkv`` ``(batch, seqlen, 3, nheads, headdim)``."""
    q, k, v = qkv.unbind(2)
    return _dense("flash_attn.flash_attn_qkvpacked_func", q, k, v, dropout_p, softmax_scale, causal, window_size,
                  softcap, alibi_slopes, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """``kv`` ``(batch, seqlen_k, 2, nheads_k, headdim)``."""
    k, v = kv.unbind(2)
    return _dense("flash_attn.flash_attn_kvpacked_func", q, k, v, dropout_p, softmax_scale, causal, window_size,
                  softcap, alibi_slopes, return_attn_probs)


class _Packing:
    """Where each token of a varlen batch goes in the padded ``(batch, max_seqlen, ...)`` tensor, flattened:
    the real positions of the padded batch, in order, are the packed tokens."""

    def __init__(self, cu_seqlens: Tensor, max_seqlen: int):
        self.lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
        self.max_seqlen = max_seqlen
        real = (torch.arange(max_seqlen, device=cu_seqlens.device) < self.lengths[:, None]).flatten()
        self.index, self.padding = real.nonzero().squeeze(1), (~real).nonzero().squeeze(1)

    def pad(self, x: Tensor) -> Tensor:
        """Each buffer row written once: the tokens, then zeros where padded (masked keys must be finite)."""
        padded = x.new_empty(len(self.lengths) * self.max_seqlen, *x.shape[1:]).index_copy_(0, self.index, x)
        return padded.index_fill_(0, self.padding, 0).unflatten(0, (len(self.lengths), self.max_seqlen))

    def unpad(self, x: Tensor) -> Tensor:
        return x.flatten(0, 1).index_select(0, self.index)


def _varlen(name: str, q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
            max_seqlen_q: int, max_seqlen_k: int, dropout_p: float, softmax_scale: float | None, causal: bool,
            window_size: Sequence[int], softcap: float, alibi_slopes: Tensor | None, return_attn_probs: bool,
            block_table: Tensor | None = None) -> Tensor | tuple[Tensor, Tensor, Tensor]:
    record_standin(name, q.device.type)
    if block_table is not None:
        raise ValueError(f"{name}: block_table (a paged KV cache) is not covered by torchdevice's stand-in; "
                         "pass contiguous k and v")
    if q.device.type == "cpu" and alibi_slopes is None and softcap == 0 and not return_attn_probs and (
            window_size[0] < 0 and (causal or window_size[1] < 0)):
        lengths_q = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).tolist()
        lengths_k = lengths_q if cu_seqlens_k is cu_seqlens_q else (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).tolist()
        if not causal or lengths_q == lengths_k:
            return attend_each(q, k, v, lengths_q, lengths_k, causal=causal, scale=softmax_scale,
                               dropout_p=dropout_p)
    pq = _Packing(cu_seqlens_q, int(max_seqlen_q))
    pk = pq if cu_seqlens_k is cu_seqlens_q else _Packing(cu_seqlens_k, int(max_seqlen_k))
    rows = torch.arange(pq.max_seqlen, device=q.device)[:, None]
    cols = torch.arange(pk.max_seqlen, device=q.device)[None, :]
    valid = (rows < pq.lengths[:, None, None]) & (cols < pk.lengths[:, None, None])
    scores = _scores(rows, cols, pk.lengths - pq.lengths, causal, window_size, softcap, alibi_slopes, valid)
    out, lse, probs = attend(pq.pad(q), pk.pad(k), pk.pad(v), scores, scale=softmax_scale, dropout_p=dropout_p,
                             probabilities=return_attn_probs)
    out = pq.unpad(out)
    if not return_attn_probs:
        return out
    assert lse is not None and probs is not None
    return out, pq.unpad(lse.transpose(1, 2)).transpose(0, 1), probs  # lse: (nheads, total_q)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """``q`` ``(total_q, nheads, headdim)``, ``k``/``v`` ``(total_k, nheads_k, headdim)``, sequences delimited
    by ``cu_seqlens_q``/``cu_seqlens_k`` ``(batch + 1,)`` int32 -> ``out`` like ``q``."""
    return _varlen("flash_attn.flash_attn_varlen_func", q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                   max_seqlen_k, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                   return_attn_probs, block_table)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
                                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """``qkv`` ``(total, 3, nheads, headdim)``."""
    q, k, v = qkv.unbind(1)
    return _varlen("flash_attn.flash_attn_varlen_qkvpacked_func", q, k, v, cu_seqlens, cu_seqlens, max_seqlen,
                   max_seqlen, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """``kv`` ``(total_k, 2, nheads_k, headdim)``."""
    k, v = kv.unbind(1)
    return _varlen("flash_attn.flash_attn_varlen_kvpacked_func", q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                   max_seqlen_k, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                   return_attn_probs)


def _rotary(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor, interleaved: bool) -> Tensor:
    """Rotate the first ``2 * cos.shape[-1]`` features of ``x`` ``(batch, seqlen, heads, dim)`` by the angles at
    ``positions`` ``(batch, seqlen)``: pairs of neighbours (``interleaved``, GPT-J) or of halves (GPT-NeoX)."""
    c, s = cos[positions][:, :, None].float(), sin[positions][:, :, None].float()
    width = 2 * cos.shape[-1]
    head, rest = x[..., :width].float(), x[..., width:]
    if interleaved:
        x1, x2 = head[..., 0::2], head[..., 1::2]
        rotated = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = head.chunk(2, dim=-1)
        rotated = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return torch.cat((rotated.to(x.dtype), rest), dim=-1)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None,
                            cache_batch_idx=None, cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
                            alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """Attention of ``q`` over the first ``cache_seqlens`` positions of the cache, after writing ``k``/``v``
    (if given) into ``k_cache``/``v_cache`` in place at those positions. No backward pass (as in flash-attn)."""
    name = "flash_attn.flash_attn_with_kvcache"
    record_standin(name, q.device.type)
    for arg, value in (("block_table", block_table), ("cache_leftpad", cache_leftpad)):
        if value is not None:
            raise ValueError(f"{name}: {arg} is not covered by torchdevice's stand-in; pass a contiguous cache "
                             "without left padding")
    batch, sq, device = q.shape[0], q.shape[1], q.device
    index = torch.arange(batch, device=device) if cache_batch_idx is None else cache_batch_idx.long()
    if cache_seqlens is None:
        if k is not None:
            raise ValueError(f"{name}: give cache_seqlens to say where k and v go in the cache")
        seqlens = torch.full((batch,), k_cache.shape[1], device=device, dtype=torch.long)
    else:
        seqlens = torch.as_tensor(cache_seqlens, device=device).long().expand(batch)
    local = causal or window_size != (-1, -1)
    steps = torch.arange(sq, device=device)
    if rotary_cos is not None:
        positions = seqlens[:, None] + (steps if local else torch.zeros_like(steps))
        q = _rotary(q, rotary_cos, rotary_sin, positions, rotary_interleaved)
    with torch.no_grad():
        if k is not None:
            new = torch.arange(k.shape[1], device=device)
            at = seqlens[:, None] + new
            if rotary_cos is not None:
                k = _rotary(k, rotary_cos, rotary_sin, at, rotary_interleaved)
            k_cache[index[:, None], at] = k.to(k_cache.dtype)
            v_cache[index[:, None], at] = v.to(v_cache.dtype)
            seqlens = seqlens + k.shape[1]
        keys, values = k_cache[index], v_cache[index]
        rows = steps[:, None]
        cols = torch.arange(keys.shape[1], device=device)[None, :]
        valid = (cols < seqlens[:, None, None]).expand(batch, sq, keys.shape[1])
        scores = _scores(rows, cols, seqlens - sq, causal, window_size, softcap, alibi_slopes, valid)
        out, lse, _ = attend(q, keys, values, scores, scale=softmax_scale, probabilities=return_softmax_lse)
    return (out, lse) if return_softmax_lse else out
