"""``xformers.ops.fmha.attn_bias``: the attention biases, each a boolean mask built once with tensor ops."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from torchdevice.standins.missing import module_getattr


class AttentionBias:
    """Base of the biases: :meth:`materialize` gives the additive bias (0 or -inf) as a tensor."""

    def _allowed(self, m: int, n: int, device: torch.device) -> Tensor | None:
        return None

    def _tensor_bias(self) -> Tensor | None:
        return None

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        """The bias of ``shape`` ``(..., M, N)``: 0 where a query may see a key, -inf elsewhere (plus a tensor
        bias, for :class:`LowerTriangularMaskWithTensorBias`)."""
        allowed = self._allowed(shape[-2], shape[-1], torch.device(device))
        out = torch.zeros(shape, dtype=dtype, device=device)
        if allowed is not None:
            out = out.masked_fill(~allowed, float("-inf"))
        bias = self._tensor_bias()
        return out if bias is None else out + bias.to(dtype)


def _triangle(m: int, n: int, device: torch.device, offset: int) -> Tensor:
    rows = torch.arange(m, device=device)[:, None]
    return torch.arange(n, device=device)[None, :] <= rows + offset


class LowerTriangularMask(AttentionBias):
    """Causal, aligned top-left: query ``i`` sees keys ``j <= i``."""

    def __init__(self, *tensor_args, **tensor_kwargs):
        pass

    def _allowed(self, m: int, n: int, device: torch.device) -> Tensor | None:
        return _triangle(m, n, device, 0)

    def add_bias(self, bias):
        """This mask plus a tensor bias (broadcastable to ``(B, H, M, N)``)."""
        return LowerTriangularMaskWithTensorBias(bias)


class LowerTriangularFromBottomRightMask(AttentionBias):
    """Causal, aligned bottom-right: query ``i`` sees keys ``j <= i + N - M``."""

    def _allowed(self, m: int, n: int, device: torch.device) -> Tensor | None:
        return _triangle(m, n, device, n - m)


class LowerTriangularMaskWithTensorBias(LowerTriangularMask):
    """:class:`LowerTriangularMask` plus a tensor bias."""

    def __init__(self, bias):
        self._bias = bias

    def _tensor_bias(self) -> Tensor | None:
        return self._bias.float()


class BlockDiagonalMask(AttentionBias):
    """Sequences of different lengths concatenated along one batch element (``B == 1``): each query sees the
    keys of its own sequence only."""

    _causal: int | None = None  # None: not causal; 0: top-left in each block; 1: bottom-right

    def __init__(self, q_seqlens: Sequence[int], kv_seqlens: Sequence[int]):
        self.q_seqlens, self.kv_seqlens = tuple(q_seqlens), tuple(kv_seqlens)

    @classmethod
    def from_seqlens(cls, q_seqlen, kv_seqlen=None, *, device=None):
        """The mask of sequences of query lengths ``q_seqlen`` (and key lengths ``kv_seqlen``, default the same)."""
        kv = q_seqlen if kv_seqlen is None else kv_seqlen
        if len(kv) != len(q_seqlen):
            raise ValueError(f"{len(q_seqlen)} query sequences but {len(kv)} key sequences")
        return cls([int(s) for s in q_seqlen], [int(s) for s in kv])

    @classmethod
    def from_tensor_list(cls, tensors):
        """``(mask, tensors concatenated along the sequence into one (1, sum(M), ...) tensor)``."""
        lengths = [t.shape[1] for t in tensors]
        batched = torch.cat([t.reshape(1, -1, *t.shape[2:]) for t in tensors], dim=1)
        return cls.from_seqlens([n for t, n in zip(tensors, lengths, strict=True) for _ in range(t.shape[0])]), batched

    def split(self, tensor, batch_sizes=None):
        """The sequences of a ``(1, sum(M), ...)`` tensor, one ``(1, M_i, ...)`` tensor each."""
        return [part for part in tensor.split(list(self.q_seqlens), dim=1)]

    def make_causal(self):
        return BlockDiagonalCausalMask(self.q_seqlens, self.kv_seqlens)

    def make_causal_from_bottomright(self):
        return BlockDiagonalCausalFromBottomRightMask(self.q_seqlens, self.kv_seqlens)

    def _allowed(self, m: int, n: int, device: torch.device) -> Tensor | None:
        if (m, n) != (sum(self.q_seqlens), sum(self.kv_seqlens)):
            raise ValueError(f"{type(self).__name__} of {sum(self.q_seqlens)} queries and {sum(self.kv_seqlens)} keys "
                             f"applied to {m} queries and {n} keys (concatenate the sequences along dim 1, batch 1)")
        q_lens = torch.tensor(self.q_seqlens, device=device)
        k_lens = torch.tensor(self.kv_seqlens, device=device)
        q_seq = torch.repeat_interleave(torch.arange(len(q_lens), device=device), q_lens, output_size=m)
        k_seq = torch.repeat_interleave(torch.arange(len(k_lens), device=device), k_lens, output_size=n)
        allowed = q_seq[:, None] == k_seq[None, :]
        if self._causal is not None:
            q_pos = torch.arange(m, device=device) - (torch.cumsum(q_lens, 0) - q_lens)[q_seq]
            k_pos = torch.arange(n, device=device) - (torch.cumsum(k_lens, 0) - k_lens)[k_seq]
            shift = (k_lens - q_lens)[q_seq] if self._causal else torch.zeros_like(q_pos)
            allowed &= k_pos[None, :] <= (q_pos + shift)[:, None]
        return allowed


class BlockDiagonalCausalMask(BlockDiagonalMask):
    """:class:`BlockDiagonalMask`, causal in each sequence, aligned top-left."""

    _causal = 0


class BlockDiagonalCausalFromBottomRightMask(BlockDiagonalMask):
    """:class:`BlockDiagonalMask`, causal in each sequence, aligned bottom-right."""

    _causal = 1


__all__ = ["AttentionBias", "BlockDiagonalCausalFromBottomRightMask", "BlockDiagonalCausalMask", "BlockDiagonalMask",
           "LowerTriangularFromBottomRightMask", "LowerTriangularMask", "LowerTriangularMaskWithTensorBias"]
__getattr__ = module_getattr(__name__)
