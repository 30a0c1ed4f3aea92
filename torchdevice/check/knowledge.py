"""What the runtime does with a name, as the generated tables say: CUDA-only packages (blockers, stand-ins),
``torch.cuda`` entries (emulated, refused), calls the target lacks kernels for. No torch import, no YAML."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from torchdevice.records.check import MissingCall


@dataclass(frozen=True)
class Package:
    module: str
    """The table's key that applies (``apex.normalization`` for ``apex.normalization.fused_layer_norm``)."""
    policy: str
    """``blocker``, ``standin``, ``truth`` (the runtime answers the package's probes of CUDA truthfully) or
    ``interpreted`` (the runtime runs its GPU code another way on some targets)."""
    why: str
    instead: str
    """``blocker``, ``interpreted``: what to do instead; ``truth``: what the package does, told the truth."""
    runs_on: tuple[str, ...] = ()
    """``interpreted``: the targets where the runtime runs it (elsewhere it blocks)."""
    cost: str = ""
    """``interpreted``: what running it there costs."""


@dataclass(frozen=True)
class CudaEntry:
    name: str
    policy: str
    """``emulate`` or ``unsupported`` (entries not in the table pass through unchanged)."""
    does: str
    why: str


@functools.cache
def packages() -> dict[str, tuple[str, str, str]]:
    from torchdevice_generated.check_table import PACKAGES

    return PACKAGES


@functools.cache
def interpreted() -> dict[str, tuple[tuple[str, ...], str]]:
    from torchdevice_generated.check_table import INTERPRETED

    return INTERPRETED


@functools.cache
def cuda_entries() -> dict[str, CudaEntry]:
    from torchdevice_generated.cuda_table import EMULATION

    return {row.name: CudaEntry(row.name, row.policy, row.does, row.why) for row in EMULATION}


def package(module: str) -> Package | None:
    """The package rule that applies to an imported module: the longest key that is it or a parent of it."""
    table = packages()
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in table:
            return Package(key, *table[key], *interpreted().get(key, ((), "")))
    return None


def cuda_entry(name: str) -> CudaEntry | None:
    """The ``torch.cuda`` table's row for ``name`` or the nearest entry it is an attribute of
    (``torch.cuda.Event.record`` -> ``torch.cuda.Event``)."""
    table = cuda_entries()
    parts = name.split(".")
    for n in range(len(parts), 2, -1):
        found = table.get(".".join(parts[:n]))
        if found is not None:
            return found
    return None


@functools.cache
def missing_on_mps() -> dict[str, tuple[tuple[str, ...], bool, bool]]:
    """The check table's public entries that reach ops MPS has no kernel for (see ``MissingCall``)."""
    from torchdevice_generated.check_table import MISSING_ON_MPS

    return MISSING_ON_MPS


def missing(name: str, target: str) -> MissingCall | None:
    """The public entry ``name`` when the target lacks a kernel it reaches (the CPU, and so the table, knows no lack
    of the CPU's or of a GPU's)."""
    if target in ("cpu", "cuda-sim"):
        return None
    found = missing_on_mps().get(name)
    return MissingCall(name, *found) if found is not None else None


@functools.cache
def tensor_methods(target: str) -> frozenset[str]:
    """Names of ``torch.Tensor`` methods the target lacks kernels for (``take``, ``put_``)."""
    if target in ("cpu", "cuda-sim"):
        return frozenset()
    return frozenset(name.rpartition(".")[2] for name in missing_on_mps() if name.startswith("torch.Tensor."))
