"""Where MPS lets host tensors meet device tensors: which ops take host tensors among their arguments, and the error
for a call that mixes them elsewhere (shared by the simulated Mac's kernels and the hosted tensors, whose code is
the same on a Mac); the error CUDA raises for a device the machine lacks (the runtime's and DDP's)."""

from __future__ import annotations

import torch

HOST_ARGUMENTS = frozenset({
    "copy_", "_to_copy", "_copy_from", "_copy_from_and_resize", "index", "index_put", "index_put_",
    "_index_put_impl_", "set_", "lift_fresh", "_pack_padded_sequence", "_pad_packed_sequence", "lstm", "gru",
    "rnn_tanh", "rnn_relu", "ctc_loss", "_ctc_loss", "tensor_split",
})
"""Aten ops that take host tensors with device tensors, as on a GPU (copies, indices, lengths, split points)."""
HOST_RESULTS = {"_pack_padded_sequence": 1, "_pad_packed_sequence": 1}
"""Ops that return a host tensor at this position on every device (a packed sequence's batch sizes, lengths)."""


def placement_error(device: torch.device, other: torch.device | str = "cpu") -> RuntimeError:
    """The error for a call that mixes tensors of ``device`` with a host tensor that is not a scalar (MPS's, CUDA's),
    or with tensors of ``other`` device (CUDA's)."""
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {device} "
                        f"and {other}!")


def invalid_ordinal(index: int, devices: int) -> torch.AcceleratorError:
    """The error CUDA raises for ``cuda:index`` on a machine with ``devices`` GPUs (``cudaErrorInvalidDevice``),
    with a last line saying how to emulate more."""
    emulated = "1 CUDA device (cuda:0)" if devices == 1 else f"{devices} CUDA devices (cuda:0 to cuda:{devices - 1})"
    return torch.AcceleratorError(
        "CUDA error: invalid device ordinal\n"
        "GPU device may be out of range, do you have enough GPUs?\n"
        f"torchdevice emulates {emulated}, so cuda:{index} does not exist; "
        "emulate more with TORCHDEVICE_DEVICES=N or `torchdevice run --devices N`"
    )
