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
from codegen.plan import emulation, mlx, samples
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
    shims = mlx.shims(catalog)
    fallback = FallbackTable.of(catalog, shims)
    policies = Policies(catalog, frozenset(fallback.missing_on_mps), frozenset(fallback.try_on_mps))
    routed = {name: policy.route for name, policy in policies.by_name.items()}
    rows = emulation.emulations(catalog, policies)
    translated = [e for e in catalog.entries if e.device_params and routed[e.name] in ("wrap", "hand", "flows")]
    by_overload = {e.name: s for s in shims for e in s.overloads}
    by_op: dict[str, dict[str, Shim]] = {}
    for s in shims:
        for e in s.overloads:
            by_op.setdefault(e.name.removeprefix("torch.ops.aten.").partition(".")[0], {})[s.key] = s
    mlx_routed = dict(fallback.mlx_routes)

    def mlx_of(entry: Any) -> list[dict[str, Any]]:
        """The MLX shims that compute the entry (an overload), or the aten ops it reaches."""
        if entry.name in by_overload:
            found = [by_overload[entry.name]]
        else:
            found = list({k: s for op in entry.aten for k, s in by_op.get(op, {}).items()}.values())
        return [{"key": s.key, "mlx": s.op.mlx, "routed": [a for a in s.aten if a in mlx_routed]} for s in found]

    return Plan(
        torch_version=catalog.torch_version,
        policies=policies,
        wrappers=tuple(wrapper_of(e, policies.device_rule(e).shares)
                       for e in catalog.entries if routed[e.name] == "wrap"),
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
                "mlx": mlx_of(e),
                "signatures": [str(s) for s in e.signatures],
            }
            for e in catalog.entries
        ),
    )
