"""Helpers of the fallback engine's tests: fallback counts, an engine on a simulated target."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from torchdevice import simulated
from torchdevice.device.target import Target
from torchdevice.fallback import Engine, activate
from torchdevice.fallback import engine as engine_module
from torchdevice.fallback.cache import CapabilityCache
from torchdevice.fallback.mlx_bridge import MlxUnsupported
from torchdevice.patching import Patcher
from torchdevice.reporting.counts import fallbacks as fallback_counts
from torchdevice.simulated.kernels import SimulatedKernels


class Fallbacks:
    """Counts of :func:`torchdevice.reporting.counts.record_fallback` since creation: ``counts[(op, route)]``."""

    def __init__(self) -> None:
        self._start = Counter(fallback_counts)

    def __getitem__(self, key: tuple[str, str]) -> int:
        return fallback_counts[key] - self._start[key]

    def total(self) -> int:
        return sum(fallback_counts.values()) - sum(self._start.values())


@contextlib.contextmanager
def activated(sim: SimulatedKernels, **options: Any) -> Iterator[Target]:
    """``sim`` entered and the engine activated on it, as the runtime does; restored on exit."""
    with sim as target:
        patcher = Patcher()
        activate(patcher, target, options)
        try:
            yield target
        finally:
            patcher.restore()


@contextlib.contextmanager
def engine(sim: SimulatedKernels, shims: dict[str, Any], *, prefer_mlx: bool = False) -> Iterator[Engine]:
    """``sim`` entered and an engine with the given MLX shims (by aten overload) installed on it."""
    with sim as target:
        e = Engine(target, CapabilityCache.open(target.name), shims=shims, unsupported=(MlxUnsupported,),
                   prefer_mlx=prefer_mlx)
        library = e.install()
        try:
            yield e  # its ``target``: the simulated device
        finally:
            library._destroy()


def on(target: Target, value: Any) -> Any:
    """``value`` with its tensors copied to ``target``'s device (the simulated device's tensors are its own)."""
    return pytree.tree_map(lambda t: t.to(target.device) if isinstance(t, torch.Tensor) else t, value)


def host(value: Any) -> Any:
    """``value`` with its tensors copied to the host, containers (named tuples, ``PackedSequence``) kept."""
    return pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, value)


@contextlib.contextmanager
def simulating(sim: SimulatedKernels) -> Iterator[None]:
    """``torchdevice.installed("mps-sim")`` simulates ``sim`` (its profile, its knobs) instead of Apple silicon."""
    built = simulated.SimulatedKernels
    simulated.SimulatedKernels = lambda profile, **knobs: sim  # type: ignore[assignment, misc]
    try:
        yield
    finally:
        simulated.SimulatedKernels = built  # type: ignore[misc]


def registered(name: str, key: str = "PrivateUse1") -> bool:
    """Whether the engine's kernel is the one ``name`` has under ``key``."""
    lines = torch._C._dispatch_dump(name).splitlines()
    return any(line.startswith(f"{key}: ") and engine_module.__file__ in line for line in lines)
