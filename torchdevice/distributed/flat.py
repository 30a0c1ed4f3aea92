"""The single-tensor collectives see memory, as NCCL does, on groups asked for NCCL (which run on gloo).

NCCL's ``all_gather_single`` (``all_gather_into_tensor``) and ``reduce_scatter_single``
(``reduce_scatter_tensor``) check only that the output and the input hold ``world_size`` times fewer (or
more) elements: a stacked output ``(world, *shape)``, a 0-d input, or ``(4, 1)`` inputs gathered into an
``(8,)`` output (accelerate's ``gather`` on NCCL) are fine there. gloo wants the output to be the inputs
concatenated along dim 0; it refuses the others, and a mismatched ``reduce_scatter_single`` aborts the process.
Contiguous tensors are therefore handed to gloo flat; a count that does not add up raises NCCL's error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from torchdevice.distributed.groups import nccl_call_group
from torchdevice.patching import Patcher


def flat(output: torch.Tensor, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``output`` and ``input`` as 1-d views where both are contiguous (else as they are, for gloo to judge)."""
    if output.is_contiguous() and input.is_contiguous():
        return output.view(-1), input.view(-1)
    return output, input


def counted(output: torch.Tensor, input: torch.Tensor, world: int, gathering: bool) -> None:
    """NCCL's check of the element counts (``ProcessGroupNCCL::_allgather_base``, ``_reduce_scatter_base``)."""
    if gathering and output.numel() != input.numel() * world:
        raise ValueError("output tensor size must be equal to world_size times input tensor size")
    if not gathering and input.numel() != output.numel() * world:
        raise ValueError("input tensor must be the same size as output size times world size")


def patch(patcher: Patcher) -> None:
    """``all_gather_single`` (where the deprecated ``all_gather_into_tensor`` and ``_all_gather_base`` find it); before
    torch 2.13, which has no ``all_gather_single``, ``all_gather_into_tensor`` (where ``_all_gather_base`` finds it)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    name = "all_gather_single" if hasattr(c10d, "all_gather_single") else "all_gather_into_tensor"
    wrapped = _all_gather_single(getattr(c10d, name))
    patcher.set(c10d, name, wrapped)
    patcher.set(dist, name, wrapped)


def _all_gather_single(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def all_gather_single(output_tensor: Any, input_tensor: Any, group: Any = None, async_op: bool = False) -> Any:
        chosen = nccl_call_group(group, output_tensor, input_tensor)
        if chosen is None:
            return original(output_tensor, input_tensor, group, async_op)
        counted(output_tensor, input_tensor, chosen.size(), gathering=True)
        return original(*flat(output_tensor, input_tensor), group, async_op)

    return all_gather_single
