"""What ``torchdevice check`` needs from the catalog (``check_table.py.j2``).

- **packages**: the packages of ``catalog/overlays/packages.yaml``: blockers, stand-ins, those told the truth
  (also what the runtime reads, ``told``: the modules it answers as it answers torch, with the probes they ask), and
  those the runtime interprets on some targets (``interpreted``: where, at what cost);
- **calls missing on MPS**: public Python entries (``torch.nn.functional.adaptive_max_pool3d``) that reach an
  aten op without any MPS kernel (every overload but the ``out=`` ones missing on MPS, as the fallback table
  says); whether each such op has a verified MLX route; whether every op the entry reaches is missing (it
  always falls back) or only some (it falls back for some arguments).
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.model import Catalog
from codegen.plan.fallback import FallbackTable
from torchdevice.records import aten_key, is_aten_entry
from torchdevice.records.check import MissingCall

PYTHON_KINDS = ("function", "builtin", "method")


@dataclass(frozen=True)
class CheckTable:
    packages: tuple[tuple[str, str, str, str], ...]
    """``(module, policy, why, instead)``; for policy ``truth``, what it does told the truth in place of instead."""
    missing_on_mps: tuple[MissingCall, ...]
    told: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(module, probes)`` of the packages told the truth."""
    interpreted: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    """``(module, runs_on, cost)`` of the packages the runtime runs another way on the targets ``runs_on``."""
    as_program: tuple[str, ...] = ()
    """torch's own modules the runtime answers as it answers the program (policy ``program``)."""

    @classmethod
    def of(cls, catalog: Catalog, fallback: FallbackTable) -> CheckTable:
        missing, routed = set(fallback.missing_on_mps), {name for name, _ in fallback.mlx_routes}
        overloads: dict[str, list[str]] = {}
        for e in catalog.entries:
            if e.kind == "op_overload" and is_aten_entry(e.name):
                op, _, overload = aten_key(e.name).partition(".")
                if overload != "out" and not overload.endswith("_out"):
                    name = f"aten::{op}" if overload == "default" else f"aten::{op}.{overload}"
                    overloads.setdefault(op, []).append(name)
        lacking = {op for op, names in overloads.items() if all(n in missing for n in names)}
        calls = []
        for e in catalog.entries:
            if e.kind not in PYTHON_KINDS or e.name.startswith("torch.ops.") or "._" in e.name:
                continue
            ops = tuple(op for op in e.aten if op in lacking)
            if ops:
                calls.append(MissingCall(e.name, ops, len(ops) == len(e.aten),
                                         all(n in routed for op in ops for n in overloads[op])))
        packages = tuple((name, r.policy, r.why, r.gets if r.policy == "truth" else r.instead)
                         for name, r in catalog.packages if r.policy != "program")
        told = tuple((name, r.probes) for name, r in catalog.packages if r.policy == "truth")
        interpreted = tuple((name, r.runs_on, r.cost) for name, r in catalog.packages if r.policy == "interpreted")
        as_program = tuple(name for name, r in catalog.packages if r.policy == "program")
        return cls(packages, tuple(sorted(calls, key=lambda c: c.name)), told, interpreted, as_program)
