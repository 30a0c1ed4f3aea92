"""The cost of CUDA's autocast policy on the CPU target, against plain PyTorch (torchdevice not installed).

- a small MLP's forward (Linear, LayerNorm, GELU, Linear; 32x64, bfloat16) in ``torch.autocast("cuda")``
  through the runtime vs the same forward in ``torch.autocast("cpu")`` natively: the region, the
  Python kernels of the listed ops (linear, layer_norm) and CUDA's float32 layer norm, together;
- the same redirected forward vs the casts CUDA's policy makes, written out without autocast: the
  runtime's own cost;
- one listed op (``softmax`` of 32x64) in the same two regions: the per-call cost of one kernel;
- the same forward in ``torch.autocast("cpu")`` with the runtime installed vs not: what a program
  written for the CPU pays for the kernels while the runtime is installed.

Rounds alternate between installed and not installed, in one process, on one thread (the
forward is small; threads only add the machine's noise).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

import torchdevice
from bench.timing import per_call

DTYPE = torch.bfloat16
"""bfloat16: the CPU's float16 matrix products have no fast kernel here, which would hide the runtime's cost."""


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.LayerNorm(256), torch.nn.GELU(),
                               torch.nn.Linear(256, 64))


def _in_region(device_type: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    def call() -> Any:
        with torch.no_grad(), torch.autocast(device_type, dtype=DTYPE):
            return fn()
    return call


def _cast_by_hand(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """What ``torch.autocast("cuda")`` computes for :func:`_mlp`: linear in the lower precision,
    layer_norm in float32 (GELU then runs on its float32 result)."""
    lin1, norm, gelu, lin2 = model
    with torch.no_grad():
        h = F.linear(x.to(DTYPE), lin1.weight.to(DTYPE), lin1.bias.to(DTYPE))
        h = gelu(F.layer_norm(h.float(), norm.normalized_shape, norm.weight, norm.bias, norm.eps))
        return F.linear(h.to(DTYPE), lin2.weight.to(DTYPE), lin2.bias.to(DTYPE))


def _alternate(name: str, candidate: Callable[[], Any], baseline: Callable[[], Any], *,
               rounds: int = 3, number: int = 200) -> dict[str, Any]:
    """Best per-call times, the candidate with the runtime installed, the baseline without."""
    best_c = best_b = float("inf")
    for _ in range(rounds):
        best_b = min(best_b, per_call(baseline, number=number, repeat=5))
        with torchdevice.installed("cpu"):
            best_c = min(best_c, per_call(candidate, number=number, repeat=5))
    return {"name": name, "candidate_s": best_c, "baseline_s": best_b, "ratio": best_c / best_b,
            "added_us": (best_c - best_b) * 1e6}


def run() -> Iterator[dict[str, Any]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield from _rows()
    finally:
        torch.set_num_threads(threads)


def _rows() -> Iterator[dict[str, Any]]:
    model, x = _mlp(), torch.randn(32, 64)
    forward = lambda: model(x)  # noqa: E731
    yield _alternate("MLP forward: autocast('cuda') redirected vs autocast('cpu') native",
                     _in_region("cuda", forward), _in_region("cpu", forward))
    yield _alternate("MLP forward: autocast('cuda') redirected vs CUDA's casts written out",
                     _in_region("cuda", forward), lambda: _cast_by_hand(model, x))
    h = torch.randn(32, 64).to(DTYPE)
    softmax = lambda: h.softmax(-1)  # noqa: E731
    yield _alternate("softmax: autocast('cuda') redirected vs autocast('cpu') native",
                     _in_region("cuda", softmax), _in_region("cpu", softmax), number=2_000)
    yield _alternate("MLP forward: autocast('cpu') installed vs not", _in_region("cpu", forward),
                     _in_region("cpu", forward))
