"""causal-conv1d's kernels (``causal_conv1d_cuda``) in torch ops, with the semantics of its references
``causal_conv1d_ref`` and ``causal_conv1d_update_ref``: a depthwise convolution of ``x`` ``(batch, dim, seqlen)``
with ``weight`` ``(dim, width)`` seeing only the past (``initial_states`` or zeros before the start; ``seq_idx``
restarting it at each new sequence), ``bias``, SiLU; computed in float32 as the kernels do, results in ``x``'s
dtype, written into the caller's buffers as the kernels write them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from torchdevice.device.aten import true_device


def _conv(window: Tensor, weight: Tensor, bias: Tensor | None, silu: bool) -> Tensor:
    """The valid depthwise convolution of ``window`` ``(batch, dim, width - 1 + seqlen)`` in float32."""
    out = F.conv1d(window.float(), weight.float().unsqueeze(1), None if bias is None else bias.float(),
                   groups=weight.shape[0])
    return F.silu(out) if silu else out


def _window(x: Tensor, width: int, initial_states: Tensor | None) -> Tensor:
    """``x`` with the ``width - 1`` inputs before it (``initial_states`` or zeros)."""
    before = x.new_zeros(x.shape[0], x.shape[1], width - 1) if initial_states is None else initial_states
    return torch.cat([before.to(x.dtype), x], dim=-1)


def _taps(seq_idx: Tensor, width: int, initial_states: Tensor | None) -> Tensor:
    """``(batch, seqlen, width)``: whether each tap reads an input of the step's sequence (initial states belong to
    the first one)."""
    first = seq_idx[:, :1].expand(-1, width - 1) if initial_states is not None else \
        seq_idx.new_full((seq_idx.shape[0], width - 1), -1)
    return torch.cat([first, seq_idx], dim=-1).unfold(-1, width, 1) == seq_idx[..., None]


def causal_conv(x: Tensor, weight: Tensor, bias: Tensor | None, seq_idx: Tensor | None,
                initial_states: Tensor | None, silu: bool) -> tuple[Tensor, Tensor]:
    """``(out, final_states)`` in float32: ``final_states`` are the last ``width - 1`` inputs (with the initial
    states before them)."""
    width = weight.shape[1]
    window = _window(x, width, initial_states)
    final = window[..., window.shape[-1] - (width - 1):].float()
    if seq_idx is None:
        return _conv(window, weight, bias, silu), final
    taps = _taps(seq_idx, width, initial_states)
    out = (window.float().unfold(-1, width, 1) * taps[:, None] * weight.float()[None, :, None]).sum(-1)
    if bias is not None:
        out = out + bias.float()[:, None]
    return (F.silu(out) if silu else out).masked_fill((seq_idx < 0)[:, None], 0.0), final


def causal_conv1d_fwd(x: Tensor, weight: Tensor, bias: Tensor | None, seq_idx: Tensor | None,
                      initial_states: Tensor | None, out: Tensor, final_states_out: Tensor | None,
                      silu_activation: bool) -> None:
    """Writes ``out`` (and ``final_states_out`` when given)."""
    with torch.no_grad():
        result, final = causal_conv(x, weight, bias, seq_idx, initial_states, silu_activation)
        out.copy_(result)
        if final_states_out is not None:
            final_states_out.copy_(final)


def causal_conv1d_bwd(x: Tensor, weight: Tensor, bias: Tensor | None, dout: Tensor, seq_idx: Tensor | None,
                      initial_states: Tensor | None, dfinal_states: Tensor | None, dx: Tensor, dweight: Tensor,
                      dbias: Tensor | None, dinitial_states: Tensor | None, silu_activation: bool) -> None:
    """Writes ``dx`` (and ``dinitial_states`` when given) and adds into ``dweight`` and ``dbias``, as the kernel.
    The gradients are written out (not autograd: causal-conv1d calls this inside a custom op, below autograd)."""
    width, length = weight.shape[1], x.shape[-1]
    with torch.no_grad():
        windows = _window(x, width, initial_states).float().unfold(-1, width, 1)  # (batch, dim, seqlen, width)
        taps = torch.ones_like(windows[:1, :1]) if seq_idx is None else _taps(seq_idx, width, initial_states)[:, None]
        grad = dout.float()
        if silu_activation:
            pre = (windows * taps * weight.float()[None, :, None]).sum(-1)
            if bias is not None:
                pre = pre + bias.float()[:, None]
            sigmoid = torch.sigmoid(pre)
            grad = grad * sigmoid * (1 + pre * (1 - sigmoid))
        if seq_idx is not None:
            grad = grad.masked_fill((seq_idx < 0)[:, None], 0.0)
        per_tap = grad[..., None] * taps * weight.float()[None, :, None]
        dwindow = grad.new_zeros(*grad.shape[:2], length + width - 1)
        for k in range(width):
            dwindow[..., k:k + length] += per_tap[..., k]
        if dfinal_states is not None:
            dwindow[..., length:] += dfinal_states.float()
        dx.copy_(dwindow[..., width - 1:])
        if dinitial_states is not None:
            dinitial_states.copy_(dwindow[..., :width - 1])
        dweight.add_((grad[..., None] * taps * windows).sum((0, 2)))
        if dbias is not None:
            dbias.add_(grad.sum((0, 2)))


def causal_conv1d_update(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None, out: Tensor,
                         silu_activation: bool, cache_seqlens: Tensor | None,
                         conv_state_indices: Tensor | None) -> None:
    """One decoding step of ``x`` ``(batch, dim, seqlen)``: writes ``out`` and updates ``conv_state`` ``(entries,
    dim, state_len)`` in place (shifted, or a circular buffer at ``cache_seqlens``); ``conv_state_indices`` picks
    each batch row's entry, a negative index a padding row (output zeros, no state)."""
    batch, dim, length = x.shape
    width, state_len = weight.shape[1], conv_state.shape[-1]
    with torch.no_grad():
        rows = torch.arange(batch, device=true_device(x)) if conv_state_indices is None else conv_state_indices.long()
        valid = rows >= 0
        state = conv_state[rows.clamp(min=0)]
        if cache_seqlens is None:
            new = torch.cat([state, x.to(state.dtype)], dim=-1)
            window, state = new[..., -(length + width - 1):], new[..., -state_len:]
        else:
            start = cache_seqlens.long()[:, None]
            taps = torch.remainder(torch.arange(-(width - 1), 0, device=true_device(x)) + start, state_len)
            window = torch.cat([state.gather(2, taps[:, None].expand(-1, dim, -1)), x.to(state.dtype)], dim=-1)
            written = torch.remainder(torch.arange(length, device=true_device(x)) + start, state_len)
            state = state.scatter(2, written[:, None].expand(-1, dim, -1), x.to(state.dtype))
        out.copy_(_conv(window, weight, bias, silu_activation).masked_fill(~valid[:, None, None], 0.0))
        conv_state[rows[valid]] = state[valid]
