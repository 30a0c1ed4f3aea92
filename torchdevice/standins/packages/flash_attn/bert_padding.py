"""``flash_attn.bert_padding``: move between padded ``(batch, seqlen, ...)`` and packed ``(total, ...)`` tensors."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from torchdevice.reporting.counts import record_standin


def index_first_axis(input, indices):
    """``input[indices]`` along the first axis (differentiable)."""
    record_standin("flash_attn.bert_padding.index_first_axis", input.device.type)
    return input[indices]


def index_put_first_axis(values, indices, first_axis_dim):
    """A zero tensor of ``first_axis_dim`` rows with ``values`` at ``indices`` (differentiable)."""
    record_standin("flash_attn.bert_padding.index_put_first_axis", values.device.type)
    out = values.new_zeros(first_axis_dim, *values.shape[1:])
    return out.index_put((indices,), values)


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    """``hidden_states`` ``(batch, seqlen, ...)``, ``attention_mask`` ``(batch, seqlen)`` (1: a real token) ->
    ``(hidden_states (total, ...), indices, cu_seqlens, max_seqlen_in_batch, seqused)``; with ``unused_mask``,
    tokens it marks are packed too but not counted in ``seqused``."""
    record_standin("flash_attn.bert_padding.unpad_input", hidden_states.device.type)
    all_masks = attention_mask if unused_mask is None else attention_mask + unused_mask
    seqlens = all_masks.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(all_masks.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return flat[indices], indices, cu_seqlens, int(seqlens.max().item()), used


def pad_input(hidden_states, indices, batch, seqlen):
    """The inverse of :func:`unpad_input`: ``(total, ...)`` -> ``(batch, seqlen, ...)``, zeros where padded."""
    record_standin("flash_attn.bert_padding.pad_input", hidden_states.device.type)
    out = hidden_states.new_zeros(batch * seqlen, *hidden_states.shape[1:])
    return out.index_put((indices,), hidden_states).reshape(batch, seqlen, *hidden_states.shape[1:])


__all__ = ["index_first_axis", "index_put_first_axis", "pad_input", "unpad_input"]
