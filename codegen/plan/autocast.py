"""CUDA's autocast policy as the runtime applies it on the target's autocast key (``autocast_table.py.j2``).

One row per aten overload of ``catalog/scanned/autocast.yaml``: the overload, its policy, and what
the kernel needs from the schema: for ``fp32_set_opt_dtype``, where the call's ``dtype`` is (its
position, ``-1`` when keyword-only); for ``fp32_append_dtype``, the overload called instead; for
``banned``, CUDA's error.
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.model import Catalog
from codegen.plan.policies import PlanError
from torchdevice.records import aten_entry


@dataclass(frozen=True)
class AutocastRow:
    name: str
    """``softmax.int``: the ``torch.ops.aten`` overload (``.default`` for the unnamed one)."""
    policy: str
    dtype_at: int = -1
    redispatch: str = ""
    message: str = ""


def rows(catalog: Catalog) -> tuple[AutocastRow, ...]:
    out = []
    for rule in catalog.autocast:
        dtype_at = -1
        if rule.policy == "fp32_set_opt_dtype":
            signature = catalog[aten_entry(rule.name)].signatures[0]
            if "dtype" not in (p.name for p in signature.params):
                raise PlanError(rule.name, "policy fp32_set_opt_dtype but the overload has no dtype parameter")
            index = signature.index("dtype")
            dtype_at = -1 if index is None else index
        out.append(AutocastRow(rule.name, rule.policy, dtype_at, rule.redispatch, rule.message))
    return tuple(out)
