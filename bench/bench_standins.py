"""Stand-in attention against plain ``scaled_dot_product_attention`` on the same inputs.

The stand-ins are imported once through the runtime, then timed with torchdevice not installed, as the
baseline is: the figures are the stand-ins' own cost (layout, masks, packing) over the kernel they call.
Dense: flash-attn's and xformers' (batch, seqlen, heads, dim) layout against SDPA on the transposed views.
Varlen: 64 packed sequences against SDPA on the same sequences padded into one batch with a boolean mask
built once beforehand (the plain-torch way); the stand-in packs, builds its mask and unpacks on every call.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

import torchdevice
from bench.timing import compare


def _standin(name: str) -> Any:
    module, _, attr = name.rpartition(".")
    with torchdevice.installed("cpu"):
        return getattr(importlib.import_module(module), attr)


def dense() -> Iterator[dict[str, Any]]:
    flash_attn_func = _standin("flash_attn.flash_attn_func")
    memory_efficient_attention = _standin("xformers.ops.memory_efficient_attention")
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 512, 8, 64) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    sdpa = lambda causal: lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)  # noqa: E731
    yield compare("flash_attn_func causal, 4x512x8x64 float32", lambda: flash_attn_func(q, k, v, causal=True),
                  sdpa(True), number=5, repeat=3)
    yield compare("flash_attn_func, 4x512x8x64 float32", lambda: flash_attn_func(q, k, v), sdpa(False),
                  number=5, repeat=3)
    yield compare("xformers memory_efficient_attention, 4x512x8x64 float32",
                  lambda: memory_efficient_attention(q, k, v), sdpa(False), number=5, repeat=3)


def varlen(shortest: int, longest: int) -> dict[str, Any]:
    flash_attn_varlen_func = _standin("flash_attn.flash_attn_varlen_func")
    torch.manual_seed(0)
    lengths = torch.randint(shortest, longest + 1, (64,))
    label = f"flash_attn_varlen_func causal, 64 sequences of {shortest}-{longest} tokens, 8x64 float32"
    longest, heads, dim = int(lengths.max()), 8, 64
    cu = torch.cat([torch.zeros(1, dtype=torch.int32), lengths.cumsum(0).to(torch.int32)])
    q, k, v = (torch.randn(int(lengths.sum()), heads, dim) for _ in range(3))
    # the baseline: the same sequences padded once, with a key-padding and causal mask built once
    batch = torch.repeat_interleave(torch.arange(64), lengths)
    position = torch.arange(len(batch)) - cu[:-1].long()[batch]
    padded = [torch.zeros(64, longest, heads, dim).index_put((batch, position), t).transpose(1, 2) for t in (q, k, v)]
    steps = torch.arange(longest)
    mask = (steps[None, None, :] < lengths[:, None, None]) & (steps[None, None, :] <= steps[None, :, None])
    mask = mask[:, None]
    return compare(label,
                  lambda: flash_attn_varlen_func(q, k, v, cu, cu, longest, longest, causal=True),
                  lambda: F.scaled_dot_product_attention(*padded, attn_mask=mask), number=5, repeat=3)


def run() -> Iterator[dict[str, Any]]:
    torchdevice.uninstall()
    yield from dense()
    yield varlen(16, 128)
    yield varlen(64, 512)
