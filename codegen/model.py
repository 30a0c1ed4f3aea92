"""The catalog's data model: frozen, typed dataclasses that every template and command reads.

Decisions about individual functions (does it need a wrapper? where does it fall back? what does
``torch.cuda.X`` do on MPS?) live here, as properties of the model, so templates stay thin.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from codegen.overlays import OverlaySet

Kind = Literal["function", "builtin", "class", "method", "property", "op_overload"]
KernelStatus = Literal["native", "composite", "missing", "none"]
Policy = Literal["passthrough", "translate-device", "emulate", "fallback", "unsupported"]
Measured = Literal["pass", "fail"]

KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]
KERNEL_STATUSES: tuple[str, ...] = KernelStatus.__args__  # type: ignore[attr-defined]
POLICIES: tuple[str, ...] = Policy.__args__  # type: ignore[attr-defined]
BACKENDS = ("cpu", "cuda", "mps")
MEASURED = ("resolves", "cpu", "mlx", "cuda", "mps")


@dataclass(frozen=True)
class Kernels:
    """Kernel availability of an entry's aten ops per backend, from native_functions.yaml."""

    cpu: KernelStatus
    cuda: KernelStatus
    mps: KernelStatus


@dataclass(frozen=True)
class Status:
    """What tests measured for an entry (``None``: never run). Written by ``make status``, never guessed."""

    resolves: Measured | None = None
    cpu: Measured | None = None
    mlx: Measured | None = None
    cuda: Measured | None = None
    mps: Measured | None = None


@dataclass(frozen=True)
class Param:
    name: str
    kind: Literal["positional_only", "positional_or_keyword", "var_positional", "keyword_only", "var_keyword"]
    annotation: str | None
    default: str | None  # source text of the default, None when required


@dataclass(frozen=True)
class Entry:
    """One public torch object, as scanned, with the overlays that refine it."""

    name: str
    kind: Kind
    module: str
    category: str
    signatures: tuple[str, ...]
    device_params: tuple[str, ...]
    aten: tuple[str, ...]
    kernels: Kernels
    scanned_policy: Policy
    overlays: OverlaySet = field(default_factory=OverlaySet)
    status: Status = field(default_factory=Status)

    @property
    def namespace(self) -> str:
        """Where the entry lives: ``torch.Tensor`` for methods, ``torch.ops.aten`` for every aten overload."""
        if self.kind == "op_overload":
            return "torch.ops.aten"
        return self.name.rpartition(".")[0]

    @property
    def attr(self) -> str:
        return self.name.rpartition(".")[2]

    @property
    def path(self) -> tuple[str, ...]:
        """Attribute chain from ``module`` to the object."""
        rest = self.name[len(self.module) :].lstrip(".")
        return tuple(rest.split(".")) if rest else ()

    @property
    def policy(self) -> Policy:
        """The runtime policy: an overlay's word wins over the scanned rule."""
        cuda = self.overlays.cuda
        return cuda.policy if cuda is not None and cuda.policy is not None else self.scanned_policy

    @property
    def mlx(self):  # -> MlxMapping | None
        return self.overlays.mlx

    @cached_property
    def overloads(self) -> tuple[tuple[Param, ...], ...]:
        """Each signature parsed into parameters."""
        return tuple(parse_signature(s) for s in self.signatures)


def parse_signature(signature: str) -> tuple[Param, ...]:
    """Parse a stub-syntax signature such as ``"(x: Tensor, *, dim: int = 0) -> Tensor"``."""
    fn = ast.parse(f"def f{signature}: ...").body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    params: list[Param] = []
    positional = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        kind = "positional_only" if i < len(a.posonlyargs) else "positional_or_keyword"
        params.append(_param(arg, kind, default))
    if a.vararg:
        params.append(_param(a.vararg, "var_positional", None))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append(_param(arg, "keyword_only", default))
    if a.kwarg:
        params.append(_param(a.kwarg, "var_keyword", None))
    return tuple(params)


def _param(arg: ast.arg, kind: str, default: ast.expr | None) -> Param:
    annotation = ast.unparse(arg.annotation) if arg.annotation is not None else None
    return Param(arg.arg, kind, annotation, ast.unparse(default) if default is not None else None)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Catalog:
    """The whole catalog: scanned entries with overlays and measured status applied."""

    torch_version: str
    entries: tuple[Entry, ...]
    rewrite: tuple = ()  # rewrite rules (torchdevice.rewrite.rule.RewriteRule), in file order

    @cached_property
    def by_name(self) -> dict[str, Entry]:
        return {e.name: e for e in self.entries}

    def __getitem__(self, name: str) -> Entry:
        return self.by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def where(self, **conditions: object) -> tuple[Entry, ...]:
        """Entries whose attributes equal the given values, e.g. ``where(policy="emulate")``."""
        return tuple(e for e in self.entries if all(getattr(e, k) == v for k, v in conditions.items()))

    @cached_property
    def device_entries(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.device_params)

    @cached_property
    def mlx_entries(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.mlx is not None)

    @cached_property
    def fallback_table(self):  # -> codegen.fallback_model.FallbackTable
        from codegen.fallback_model import FallbackTable

        return FallbackTable.of(self)

    @cached_property
    def runtime(self):  # -> codegen.runtime_model.RuntimeModel
        """What the runtime does with each entry: wrappers, the ``torch.cuda`` emulation table, test samples."""
        from codegen.runtime_model import RuntimeModel

        return RuntimeModel(self)

    @cached_property
    def summaries(self) -> tuple[dict[str, object], ...]:
        """What ``torchdevice catalog show`` prints of each entry, as plain data."""
        out = []
        for e in self.entries:
            summary: dict[str, object] = {
                "name": e.name, "kind": e.kind, "module": e.module, "category": e.category, "policy": e.policy,
                "device_params": list(e.device_params), "aten": list(e.aten),
                "kernels": dataclasses.asdict(e.kernels), "status": dataclasses.asdict(e.status),
                "signatures": list(e.signatures),
            }
            if e.mlx is not None:
                summary["mlx"] = {"mlx": e.mlx.mlx, "args": e.mlx.args}
            if e.overlays.cuda is not None:
                summary["cuda"] = e.overlays.cuda.does
            out.append(summary)
        return tuple(out)
