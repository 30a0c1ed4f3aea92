"""mamba-ssm's selective scan (``selective_scan_cuda.fwd``/``bwd``) in torch ops, with the semantics of its
reference ``selective_scan_ref`` (real ``A``): ``h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t``,
``y_t = C_t h_t``, ``out = y + D u``, ``out_z = out * silu(z)``; arithmetic in float32 as the kernel's.

The recurrence runs as a doubling scan (``log2(seqlen)`` steps over the whole sequence, not one step per
token); the backward pass runs the same scan backwards for the state's gradient (the recurrence's adjoint) and
autograd for the rest, so the scan's steps are never kept for backward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from torchdevice.device.aten import true_device

CHUNK = 2048
"""The kernel's chunk length: ``fwd`` returns the state at the end of each chunk (``x[:, :, c, 1::2]``)."""


def scan(a: Tensor, b: Tensor) -> Tensor:
    """``h_t = a_t h_{t-1} + b_t`` along dim 2 (``h_{-1} = 0``), by recursive doubling."""
    length, offset = a.shape[2], 1
    while offset < length:
        b = b + a * F.pad(b, (0, 0, offset, 0))[:, :, :length]
        a = a * F.pad(a, (0, 0, offset, 0), value=1.0)[:, :, :length]
        offset *= 2
    return b


def _per_time(x: Tensor, dim: int) -> Tensor:
    """B or C as ``(batch or 1, dim or 1, seqlen or 1, dstate)``: ``(dim, dstate)``, ``(batch, dstate, seqlen)``
    or grouped ``(batch, groups, dstate, seqlen)`` (group ``g`` serving channels ``g*dim/groups ...``)."""
    x = x.float()
    if x.dim() == 2:
        return x[None, :, None, :]
    if x.dim() == 3:
        return x.transpose(1, 2)[:, None]
    return x.repeat_interleave(dim // x.shape[1], dim=1).transpose(2, 3)


def _terms(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, delta_bias: Tensor | None,
           delta_softplus: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(delta * A, exp(delta * A), delta * B * u, C)``, each ``(batch, dim, seqlen, dstate)`` (C broadcastable)."""
    if A.is_complex():
        raise NotImplementedError("torchdevice's stand-in for selective_scan_cuda covers real A only (a complex A: "
                                  "use mamba_ssm's selective_scan_ref)")
    delta = delta.float()
    if delta_bias is not None:
        delta = delta + delta_bias.float()[:, None]
    if delta_softplus:
        delta = F.softplus(delta)
    dim = A.shape[0]
    log_a = delta[..., None] * A.float()[:, None, :]
    return log_a, log_a.exp(), (delta * u.float())[..., None] * _per_time(B, dim), _per_time(C, dim)


def _outputs(h: Tensor, c: Tensor, u: Tensor, D: Tensor | None, z: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """``out = C h + D u`` and ``out * silu(z)`` in float32."""
    out = (h * c).sum(-1)
    if D is not None:
        out = out + u.float() * D.float()[:, None]
    return out, None if z is None else out * F.silu(z.float())


def selective_scan_fwd(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                       z: Tensor | None, delta_bias: Tensor | None, delta_softplus: bool) -> list[Tensor]:
    """``[out, x]`` (``[out, x, out_z]`` with ``z``): ``out`` in ``delta``'s dtype, ``x`` ``(batch, dim,
    n_chunks, 2 * dstate)`` float32, per chunk the product of ``exp(delta A)`` (even) and the final state (odd)."""
    with torch.no_grad():
        log_a, a, bu, c = _terms(u, delta, A, B, C, delta_bias, delta_softplus)
        h = scan(a, bu)
        out, out_z = _outputs(h, c, u, D, z)
        length = u.shape[2]
        chunks = -(-length // CHUNK)
        ends = torch.arange(CHUNK - 1, chunks * CHUNK, CHUNK, device=true_device(u)).clamp(max=length - 1)
        products = F.pad(log_a, (0, 0, 0, chunks * CHUNK - length)).unflatten(2, (chunks, CHUNK)).sum(3).exp()
        x = torch.stack([products, h[:, :, ends]], dim=-1).flatten(-2)
        result = [out.to(delta.dtype), x]
        if out_z is not None and z is not None:
            result.append(out_z.to(z.dtype))
    return result


def selective_scan_bwd(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None,
                       z: Tensor | None, delta_bias: Tensor | None, dout: Tensor, out: Tensor | None,
                       dz: Tensor | None, delta_softplus: bool, recompute_out_z: bool) -> list[Tensor | None]:
    """``[du, ddelta, dA, dB, dC, dD, ddelta_bias]``, then ``dz`` with ``z`` (written into ``dz`` when given), then
    ``out_z`` with ``recompute_out_z``; ``dout`` is the gradient of ``out_z`` (with ``z``) or of ``out``."""
    inputs = {"u": u, "delta": delta, "A": A, "B": B, "C": C, "D": D, "z": z, "delta_bias": delta_bias}
    leaves = {k: v.detach().requires_grad_() for k, v in inputs.items() if v is not None}
    with torch.enable_grad():
        _, a, bu, c = _terms(leaves["u"], leaves["delta"], leaves["A"], leaves["B"], leaves["C"],
                             leaves.get("delta_bias"), delta_softplus)
        h = scan(a.detach(), bu.detach()).requires_grad_()
        result, result_z = _outputs(h, c, leaves["u"], leaves.get("D"), leaves.get("z"))
        final = result if result_z is None else result_z
        (dh,) = torch.autograd.grad(final, h, dout.float(), retain_graph=True)
        # the adjoint of h_t = a_t h_{t-1} + b_t: g_t = dh_t + a_{t+1} g_{t+1}
        a_next = F.pad(a.detach()[:, :, 1:], (0, 0, 0, 1))
        g = scan(a_next.flip(2), dh.flip(2)).flip(2)
        h_before = F.pad(h.detach(), (0, 0, 1, 0))[:, :, :-1]
        grads = torch.autograd.grad([final, a, bu], list(leaves.values()), [dout.float(), g * h_before, g],
                                    allow_unused=True)
    d = {k: torch.zeros_like(v) if grad is None else grad for (k, v), grad in zip(leaves.items(), grads, strict=True)}
    found: list[Tensor | None] = [d["u"].to(u.dtype), d["delta"].to(delta.dtype), d["A"], d["B"].to(B.dtype),
                                  d["C"].to(C.dtype), d.get("D"), d.get("delta_bias")]
    if z is not None:
        found.append(d["z"].to(z.dtype) if dz is None else dz.copy_(d["z"]))
        if recompute_out_z:
            base = result.detach() if out is None else out.float()
            found.append((base * F.silu(z.float())).to(z.dtype))
    return found
