"""The one planning step between the catalog and the templates: :func:`plan` decides, from the loaded
catalog, everything each generated file and each per-entry test needs, and the templates only render it.

- :mod:`.policies`: the policy of every entry and why;
- :mod:`.wrappers`: the device wrappers of the entries of policy ``wrap``;
- :mod:`.emulation`: the ``torch.cuda`` emulation table;
- :mod:`.fallback`: the fallback engine's tables (MPS kernels missing or watched, MLX routes);
- :mod:`.check`: what ``torchdevice check`` knows (CUDA-only packages, calls MPS lacks);
- :mod:`.mlx`: the MLX shims;
- :mod:`.samples`: the calls the per-entry tests make of device-bearing entries;
- :mod:`.standins`: the stand-ins' table and the cases comparing each with its reference;
- :mod:`.autocast`: CUDA's autocast policy, as the runtime applies it on the target's autocast key;
- :mod:`.limits`: MPS's limits (the conditions under which its kernels refuse a call, and what they raise);
- :mod:`.cuda_kernels`: CUDA's kernel table (the overloads a GPU lacks, its determinism alerts).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from codegen.model import Catalog, Entry
from codegen.plan import autocast, emulation, limits, mlx, samples
from codegen.plan.autocast import AutocastRow
from codegen.plan.check import CheckTable
from codegen.plan.cuda_kernels import CudaKernels
from codegen.plan.emulation import Emulation, Member
from codegen.plan.fallback import FallbackTable
from codegen.plan.mlx import Shim
from codegen.plan.policies import PlanError, Policies
from codegen.plan.samples import Sample
from codegen.plan.standins import Standins
from codegen.plan.wrappers import Wrapper, wrapper_of
from torchdevice.records import CatalogRow, MlxUse, aten_op
from torchdevice.records.gpus import Gpu
from torchdevice.records.limits import LimitRow
from torchdevice.records.rewrite import RewriteRule

__all__ = ["Plan", "PlanError", "plan"]


@dataclass(frozen=True)
class Plan:
    torch_version: str
    policies: Policies
    wrappers: tuple[Wrapper, ...]
    emulation: tuple[Emulation, ...]
    members: tuple[Member, ...]
    fallback: FallbackTable
    check: CheckTable
    shims: tuple[Shim, ...]
    rewrite: tuple[RewriteRule, ...]
    samples: tuple[Sample, ...]
    standins: Standins
    entries: tuple[CatalogRow, ...]
    """What ``torchdevice catalog`` shows of each entry (``catalog.jsonl``)."""
    autocast: tuple[AutocastRow, ...] = ()
    """CUDA's autocast policy, by aten overload."""
    limits: tuple[LimitRow, ...] = ()
    """MPS's limits."""
    cuda_kernels: CudaKernels = CudaKernels()
    """CUDA's kernel table: the overloads a GPU lacks, its determinism alerts."""
    gpus: tuple[Gpu, ...] = ()
    """The cards a simulated GPU can be, the default first."""


def plan(catalog: Catalog) -> Plan:
    """Everything the generated files and the per-entry tests need; PlanError names an undecidable entry."""
    shims = mlx.shims(catalog)
    fallback = FallbackTable.of(catalog, shims)
    policies = Policies(catalog, frozenset(fallback.missing_on_mps), frozenset(fallback.try_on_mps))
    decided = {name: policy.name for name, policy in policies.by_name.items()}
    rows = emulation.emulations(catalog, policies)
    translated = [e for e in catalog.entries if e.device_params and decided[e.name] in ("wrap", "hand", "flows")]
    by_overload = {e.name: s for s in shims for e in s.overloads}
    by_op: dict[str, dict[str, Shim]] = {}
    for s in shims:
        for e in s.overloads:
            by_op.setdefault(aten_op(e.name), {})[s.key] = s
    mlx_routed = dict(fallback.mlx_routes)

    def mlx_of(entry: Entry) -> tuple[MlxUse, ...]:
        """The MLX shims that compute the entry (an overload), or the aten ops it reaches."""
        if entry.name in by_overload:
            found = [by_overload[entry.name]]
        else:
            found = list({k: s for op in entry.aten for k, s in by_op.get(op, {}).items()}.values())
        return tuple(MlxUse(s.key, s.op.mlx, tuple(a for a in s.aten if a in mlx_routed)) for s in found)

    return Plan(
        torch_version=catalog.torch_version,
        policies=policies,
        wrappers=tuple(wrapper_of(e, policies.device_rule(e).shares, policies.device_rule(e).module)
                       for e in catalog.entries if decided[e.name] == "wrap"),
        emulation=rows,
        members=emulation.members(catalog, rows),
        fallback=fallback,
        check=CheckTable.of(catalog, fallback),
        shims=shims,
        rewrite=catalog.rewrite,
        samples=tuple(samples.sample_of(e, policies) for e in translated),
        standins=Standins.of(catalog),
        entries=tuple(
            CatalogRow(
                name=e.name, kind=e.kind, module=e.module,
                policy=policies[e.name].name, why=policies[e.name].why, by=policies[e.name].by,
                device_params=e.device_params, aten=e.aten,
                kernels=dataclasses.asdict(e.kernels), status=dataclasses.asdict(e.status),
                mlx=mlx_of(e),
                signatures=tuple(str(s) for s in e.signatures),
            )
            for e in catalog.entries
        ),
        autocast=autocast.rows(catalog),
        limits=limits.rows(catalog),
        cuda_kernels=CudaKernels.of(catalog),
        gpus=tuple(sorted((Gpu(key, c.name, c.capability, c.memory_mib << 20, c.multiprocessors, c.seen, c.source)
                           for key, c in catalog.gpus), key=lambda g: not dict(catalog.gpus)[g.key].default)),
    )
