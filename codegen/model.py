"""The catalog's data model: frozen, typed records of what the catalog files say, nothing more.

:mod:`codegen.load` builds them from ``catalog/`` (validating every field); :mod:`codegen.plan`
decides what the runtime does with each entry; the templates render the plan. This module knows
nothing of either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from codegen.overlays.cuda import CudaRule
from codegen.overlays.cuda_kernels import AlertRule
from codegen.overlays.devices import DeviceRule
from codegen.overlays.gpus import GpuRule
from codegen.overlays.limits import LimitRule
from codegen.overlays.mlx import MlxOp
from codegen.overlays.packages import PackageRule
from codegen.overlays.standins import StandinRule
from codegen.signatures import Signature
from torchdevice.records import ATEN_NAMESPACE
from torchdevice.records.rewrite import RewriteRule

Kind = Literal["function", "builtin", "class", "method", "property", "attribute", "op_overload"]
KernelStatus = Literal["native", "composite", "implicit", "missing", "none"]
Measured = Literal["pass", "fail"]

MEASURED = ("cpu", "mlx", "cuda", "mps")


@dataclass(frozen=True)
class Kernels:
    """Kernel availability of an entry's aten ops per backend (``codegen/scan/kernels.py`` says how)."""

    cpu: KernelStatus
    cuda: KernelStatus
    mps: KernelStatus


@dataclass(frozen=True)
class Status:
    """What tests measured for an entry (``None``: never run). Written by ``make status``, never guessed."""

    cpu: Measured | None = None
    mlx: Measured | None = None
    cuda: Measured | None = None
    mps: Measured | None = None


@dataclass(frozen=True)
class Entry:
    """One public torch object, as scanned, with the measured status and the overlay records naming it."""

    name: str
    kind: Kind
    module: str
    signatures: tuple[Signature, ...]
    device_params: tuple[str, ...]
    aten: tuple[str, ...]
    kernels: Kernels
    status: Status = field(default_factory=Status)
    cuda: CudaRule | None = None
    devices: DeviceRule | None = None

    @property
    def namespace(self) -> str:
        """Where the entry lives: ``torch.Tensor`` for methods, ``torch.ops.aten`` for every aten overload."""
        if self.kind == "op_overload":
            return ATEN_NAMESPACE
        return self.name.rpartition(".")[0]

    @property
    def attr(self) -> str:
        return self.name.rpartition(".")[2]

    @property
    def path(self) -> tuple[str, ...]:
        """Attribute chain from ``module`` to the object."""
        rest = self.name[len(self.module) :].lstrip(".")
        return tuple(rest.split(".")) if rest else ()


@dataclass(frozen=True)
class Pattern:
    """A ``catalog/overlays/devices.yaml`` record keyed by a glob (``torch.nn.*``) rather than a name."""

    glob: str
    rule: DeviceRule
    line: int


@dataclass(frozen=True)
class MlxRecord:
    """A ``catalog/overlays/mlx.yaml`` record: ``key`` is an aten op (``abs``) or overload (``max.dim``)."""

    key: str
    op: MlxOp
    line: int


AutocastPolicy = Literal["lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype", "promote", "banned"]


@dataclass(frozen=True)
class DeviceCheck:
    """An aten overload whose CUDA kernel wrapper checks that its tensors are on one device
    (``catalog/scanned/cuda_device_checks.yaml``): ``name`` as ``torch.ops.aten`` names it, the wrapper's name and
    the arguments it checks, in its order."""

    name: str
    wrapper: str
    arguments: tuple[str, ...]


@dataclass(frozen=True)
class AutocastRule:
    """One aten overload of CUDA's autocast policy (``catalog/scanned/autocast.yaml``, scanned from ATen's
    ``autocast_mode.h``): ``name`` as ``torch.ops.aten`` names it (``softmax.int``, ``sum.default``)."""

    name: str
    policy: AutocastPolicy
    redispatch: str = ""
    """``fp32_append_dtype``: the overload called instead, with the same arguments and a ``dtype``."""
    message: str = ""
    """``banned``: the error CUDA's autocast raises."""

    def __post_init__(self) -> None:
        if (self.policy == "fp32_append_dtype") != bool(self.redispatch):
            raise ValueError("redispatch names the overload of policy fp32_append_dtype, and only of it")
        if (self.policy == "banned") != bool(self.message):
            raise ValueError("message is the error of policy banned, and only of it")


@dataclass(frozen=True)
class StandinRecord:
    """A ``catalog/overlays/standins.yaml`` record: ``name`` is a name of a stood-in package (``flash_attn.x``)."""

    name: str
    rule: StandinRule
    line: int


@dataclass(frozen=True)
class LimitRecord:
    """A ``catalog/overlays/limits.yaml`` record: one of MPS's limits, by name."""

    name: str
    rule: LimitRule
    line: int


@dataclass(frozen=True)
class AlertRecord:
    """A ``catalog/overlays/cuda_kernels.yaml`` record: one of CUDA's determinism alerts, by name."""

    name: str
    rule: AlertRule
    line: int


@dataclass(frozen=True)
class Catalog:
    """The whole catalog: scanned entries with measured status and overlays applied."""

    torch_version: str
    entries: tuple[Entry, ...]
    device_patterns: tuple[Pattern, ...] = ()
    """Glob-keyed ``devices.yaml`` records, in file order: the first that matches a name applies."""
    mlx: tuple[MlxRecord, ...] = ()
    """MLX equivalents of aten ops, in file order."""
    rewrite: tuple[RewriteRule, ...] = ()
    """Rewrite rules, in file order."""
    standins: tuple[StandinRecord, ...] = ()
    """What the flash-attn, xformers and apex stand-ins cover, in file order."""
    autocast: tuple[AutocastRule, ...] = ()
    """CUDA's autocast policy, by overload name."""
    sparse_mps: tuple[str, ...] = ()
    """The overloads MPS has a sparse COO kernel of (``catalog/scanned/sparse_mps.yaml``), as ``torch.ops.aten``
    names them (``add.Tensor``, ``abs.default``)."""
    sparse_csr_cuda: tuple[str, ...] = ()
    """The overloads CUDA has a sparse compressed kernel of (``catalog/scanned/sparse_csr_cuda.yaml``), named so."""
    device_checks: tuple[DeviceCheck, ...] = ()
    """The overloads whose CUDA kernel wrapper checks its tensors' devices, by name."""
    gpus: tuple[tuple[str, GpuRule], ...] = ()
    """The cards a simulated GPU can be, by ``--gpu`` name, in file order."""
    packages: tuple[tuple[str, PackageRule], ...] = ()
    """CUDA-only packages by module name, in file order."""
    limits: tuple[LimitRecord, ...] = ()
    """MPS's limits, in file order."""
    alerts: tuple[AlertRecord, ...] = ()
    """CUDA's determinism alerts, in file order."""
    differs: tuple[str, ...] = ()
    """In another release's view (``load(release=...)``): how the overlays' records differ there (left out, or kept
    without that release's words), each naming the record and why."""

    @cached_property
    def by_name(self) -> dict[str, Entry]:
        return {e.name: e for e in self.entries}

    def __getitem__(self, name: str) -> Entry:
        return self.by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self.by_name
