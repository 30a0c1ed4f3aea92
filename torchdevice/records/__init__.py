"""The facts torchdevice shares with codegen: names, backends, and the records of the generated tables.

Each is defined here once; ``codegen`` imports them (and nothing else of torchdevice but ``atomic``) to write
``generated/torchdevice_generated/``, the package to read it (never the reverse: torchdevice imports nothing
of ``codegen``). No torch import. This module holds the runtime's and ``torchdevice catalog``'s; the records
of the other tables are beside it: :mod:`.rewrite` (``rewrite_rules.RULES``) and :mod:`.check`
(``check_table.MISSING_ON_MPS``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

PACKAGE_DIR = Path(__file__).resolve().parent.parent
"""The ``torchdevice`` package's folder: the sources codegen reads (the runtime's words, the stand-ins), wherever it
runs (a source checkout, or the toolchain an installed wheel carries)."""

BACKENDS = ("cpu", "cuda", "mps")
"""The backends whose kernels the catalog records for every aten op."""

HAND_WRITTEN = ("tensors", "checkpoints", "amp", "device_classes", "memory_history")
"""The runtime's hand-written entry-point modules (``torchdevice/runtime/<name>.py``), each with a
``patch(patcher, installation, emulation)``; ``devices.yaml`` names one as ``by:`` of a ``hand`` entry."""

WORD_MODULES = ("emulation", "graphs")
"""The runtime modules (``torchdevice/runtime/<name>.py``) defining the emulation words ``cuda.yaml`` names."""

ATEN_NAMESPACE = "torch.ops.aten"
"""Where every aten overload entry lives: ``torch.ops.aten.<op>.<overload>``."""
_ATEN_PREFIX = ATEN_NAMESPACE + "."


def aten_entry(key: str) -> str:
    """``add.Tensor`` -> the catalog entry ``torch.ops.aten.add.Tensor``."""
    return _ATEN_PREFIX + key


def aten_key(name: str) -> str:
    """``torch.ops.aten.add.Tensor`` -> ``add.Tensor``."""
    return name.removeprefix(_ATEN_PREFIX)


def aten_op(name: str) -> str:
    """``torch.ops.aten.add.Tensor`` -> the op ``add``."""
    return aten_key(name).partition(".")[0]


def is_aten_entry(name: str) -> bool:
    return name.startswith(_ATEN_PREFIX)


def dispatcher_name(name: str) -> str:
    """``torch.ops.aten.add.Tensor`` -> ``aten::add.Tensor``, as the dispatcher names it; the default
    overload has no suffix (``aten::zeros``)."""
    op, _, overload = aten_key(name).partition(".")
    return f"aten::{op}" if overload == "default" else f"aten::{op}.{overload}"


class EmulationRow(NamedTuple):
    """A row of ``torchdevice_generated.cuda_table.EMULATION``: the runtime installs
    ``emulation.build(does, value, name)`` (policy ``emulate``) or a stand-in raising with ``why``
    (``unsupported``) at ``module`` -> ``path`` -> ``attr``."""

    module: str
    path: tuple[str, ...]
    attr: str
    policy: str
    does: str
    value: Any
    why: str
    is_class: bool

    @property
    def name(self) -> str:
        return ".".join((self.module, *self.path, self.attr))


class WrapperRow(NamedTuple):
    """A row of ``torchdevice_generated.device_wrappers.WRAPPERS``: the runtime replaces ``module`` ->
    ``path`` -> ``attr`` by ``factory(original, redirect, slot)``; ``op`` names it in the counters."""

    module: str
    path: tuple[str, ...]
    attr: str
    op: str
    factory: Callable[..., Any]


@dataclass(frozen=True)
class MlxUse:
    """An MLX shim that computes a catalog entry (or the aten ops it reaches)."""

    key: str
    """The ``mlx.yaml`` record (an aten op or overload)."""
    mlx: str
    """The MLX function it calls."""
    routed: tuple[str, ...]
    """The aten overloads it computes that run on MLX (verified)."""


@dataclass(frozen=True)
class CatalogRow:
    """One entry of ``torchdevice_generated/catalog.jsonl`` (what ``torchdevice catalog`` shows)."""

    name: str
    kind: str
    module: str
    policy: str
    why: str
    by: str
    device_params: tuple[str, ...]
    aten: tuple[str, ...]
    kernels: dict[str, str]
    """Backend (:data:`BACKENDS`) -> kernel status."""
    status: dict[str, str | None]
    """What the tests measured (per backend): ``pass``, ``fail`` or ``None``."""
    mlx: tuple[MlxUse, ...]
    signatures: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> CatalogRow:
        fields = json.loads(line)
        lists = ("device_params", "aten", "signatures")
        fields.update({k: tuple(fields[k]) for k in lists})
        fields["mlx"] = tuple(MlxUse(m["key"], m["mlx"], tuple(m["routed"])) for m in fields["mlx"])
        return cls(**fields)
