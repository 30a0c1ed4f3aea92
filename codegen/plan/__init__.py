"""The one planning step between the catalog and the templates: :func:`plan` decides, from the loaded
catalog, everything each generated file and each per-entry test needs, and the templates only render it.

- :mod:`.policies`: the route of every entry (the catalog's ``policy``) and why;
- :mod:`.wrappers`: the device wrappers of the entries routed ``wrap``;
- :mod:`.emulation`: the ``torch.cuda`` emulation table;
- :mod:`.fallback`: the fallback engine's tables (MPS kernels missing or watched, MLX routes);
- :mod:`.mlx`: the MLX shims;
- :mod:`.samples`: the calls the per-entry tests make of device-bearing entries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from codegen.model import Catalog
from codegen.plan import emulation, samples
from codegen.plan.emulation import Emulation, Member
from codegen.plan.fallback import FallbackTable
from codegen.plan.mlx import Shim
from codegen.plan.policies import PlanError, Policies
from codegen.plan.samples import Sample
from codegen.plan.wrappers import Wrapper, wrapper_of
from torchdevice.rewrite.rule import RewriteRule

__all__ = ["Plan", "PlanError", "plan"]


@dataclass(frozen=True)
class Plan:
    torch_version: str
    policies: Policies
    wrappers: tuple[Wrapper, ...]
    emulation: tuple[Emulation, ...]
    members: tuple[Member, ...]
    fallback: FallbackTable
    shims: tuple[Shim, ...]
    rewrite: tuple[RewriteRule, ...]
    samples: tuple[Sample, ...]
    entries: tuple[dict[str, Any], ...]
    """What ``torchdevice catalog`` shows of each entry (``catalog.jsonl``)."""


def plan(catalog: Catalog) -> Plan:
    """Everything the generated files and the per-entry tests need; PlanError names an undecidable entry."""
    shims = tuple(_validated(Shim(e, e.mlx)) for e in catalog.entries if e.mlx is not None)
    fallback = FallbackTable.of(catalog, shims)
    policies = Policies(catalog, frozenset(fallback.missing_on_mps), frozenset(fallback.try_on_mps))
    routed = {name: policy.route for name, policy in policies.by_name.items()}
    rows = emulation.emulations(catalog, policies)
    translated = [e for e in catalog.entries if e.device_params and routed[e.name] in ("wrap", "hand", "flows")]
    mlx_routes: dict[str, list[str]] = {}
    for overload, entry in fallback.mlx_shims:
        mlx_routes.setdefault(entry, []).append(overload)
    return Plan(
        torch_version=catalog.torch_version,
        policies=policies,
        wrappers=tuple(wrapper_of(e) for e in catalog.entries if routed[e.name] == "wrap"),
        emulation=rows,
        members=emulation.members(catalog, rows),
        fallback=fallback,
        shims=shims,
        rewrite=catalog.rewrite,
        samples=tuple(samples.sample_of(e, policies) for e in translated),
        entries=tuple(
            {
                "name": e.name, "kind": e.kind, "module": e.module,
                "policy": policies[e.name].route, "why": policies[e.name].why, "by": policies[e.name].by,
                "device_params": list(e.device_params), "aten": list(e.aten),
                "kernels": dataclasses.asdict(e.kernels), "status": dataclasses.asdict(e.status),
                "mlx": {"mlx": e.mlx.mlx, "routes": mlx_routes.get(e.name, [])} if e.mlx is not None else None,
                "signatures": [str(s) for s in e.signatures],
            }
            for e in catalog.entries
        ),
    )


def _validated(shim: Shim) -> Shim:
    shim.validate()
    return shim
