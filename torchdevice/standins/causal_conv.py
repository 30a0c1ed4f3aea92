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


def _conv(window: Tensor, weight: Tensor, bias: Tensor | None, silu: bool) -> Tensor:
    """The valid depthwise convolution of ``window`` ``(batch, dim, width - 1 + seqlen)`` in float32."""
    out = F.conv1d(window.float(), weight.float().unsqueeze(1), None if bias is None else bias.float(),
                   groups=weight.shape[0])
    return F.silu(out) if silu else out


def causal_conv(x: Tensor, weight: Tensor, bias: Tensor | None, seq_idx: Tensor | None,
                initial_states: Tensor | None, silu: bool) -> tuple[Tensor, Tensor]:
    """``(out, final_states)`` in float32: ``final_states`` are the last ``width - 1`` inputs (with the initial
    states before them)."""
    width = weight.shape[1]
    before = x.new_zeros(x.shape[0], x.shape[1], width - 1) if initial_states is None else initial_states
    window = torch.cat([before.to(x.dtype), x], dim=-1)
    if seq_idx is None:
        out = _conv(window, weight, bias, silu)
    else:  # a tap reads an input of the same sequence only (initial states belong to the first one)
        first = seq_idx[:, :1].expand(-1, width - 1) if initial_states is not None else \
            seq_idx.new_full((x.shape[0], width - 1), -1)
        taps = torch.cat([first, seq_idx], dim=-1).unfold(-1, width, 1) == seq_idx[..., None]
        out = (window.float().unfold(-1, width, 1) * taps[:, None] * weight.float()[None, :, None]).sum(-1)
        if bias is not None:
            out = out + bias.float()[:, None]
        out = (F.silu(out) if silu else out).masked_fill((seq_idx < 0)[:, None], 0.0)
    return out, window[..., window.shape[-1] - (width - 1):].float()


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
    """Writes ``dx`` (and ``dinitial_states`` when given) and adds into ``dweight`` and ``dbias``, as the kernel."""
    inputs = {"x": x, "weight": weight, "bias": bias, "initial_states": initial_states}
    leaves = {k: v.detach().requires_grad_() for k, v in inputs.items() if v is not None}
    with torch.enable_grad():
        out, final = causal_conv(leaves["x"], leaves["weight"], leaves.get("bias"), seq_idx,
                                 leaves.get("initial_states"), silu_activation)
        outputs, upstream = [out], [dout.float()]
        if dfinal_states is not None:
            outputs.append(final)
            upstream.append(dfinal_states.float())
        grads = dict(zip(leaves, torch.autograd.grad(outputs, list(leaves.values()), upstream, allow_unused=True),
                         strict=True))
    with torch.no_grad():
        for name, buffer, add in (("x", dx, False), ("weight", dweight, True), ("bias", dbias, True),
                                  ("initial_states", dinitial_states, False)):
            grad = grads.get(name)
            if buffer is None:
                continue
            if grad is None:
                grad = torch.zeros_like(buffer)
            buffer.add_(grad) if add else buffer.copy_(grad)


def causal_conv1d_update(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None, out: Tensor,
                         silu_activation: bool, cache_seqlens: Tensor | None,
                         conv_state_indices: Tensor | None) -> None:
    """One decoding step of ``x`` ``(batch, dim, seqlen)``: writes ``out`` and updates ``conv_state`` ``(entries,
    dim, state_len)`` in place (shifted, or a circular buffer at ``cache_seqlens``); ``conv_state_indices`` picks
    each batch row's entry, a negative index a padding row (output zeros, no state)."""
    batch, dim, length = x.shape
    width, state_len = weight.shape[1], conv_state.shape[-1]
    with torch.no_grad():
        rows = torch.arange(batch, device=x.device) if conv_state_indices is None else conv_state_indices.long()
        valid = rows >= 0
        state = conv_state[rows.clamp(min=0)]
        if cache_seqlens is None:
            new = torch.cat([state, x.to(state.dtype)], dim=-1)
            window, state = new[..., -(length + width - 1):], new[..., -state_len:]
        else:
            start = cache_seqlens.long()[:, None]
            taps = torch.remainder(torch.arange(-(width - 1), 0, device=x.device) + start, state_len)
            window = torch.cat([state.gather(2, taps[:, None].expand(-1, dim, -1)), x.to(state.dtype)], dim=-1)
            written = torch.remainder(torch.arange(length, device=x.device) + start, state_len)
            state = state.scatter(2, written[:, None].expand(-1, dim, -1), x.to(state.dtype))
        out.copy_(_conv(window, weight, bias, silu_activation).masked_fill(~valid[:, None, None], 0.0))
        conv_state[rows[valid]] = state[valid]
