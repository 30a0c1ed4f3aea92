"""The ``torch.cuda`` emulation table (``cuda_table.py.j2``): one row per entry of policy ``emulate`` or
``unsupported``, from its ``catalog/overlays/cuda.yaml`` record."""

from __future__ import annotations

from dataclasses import dataclass

from codegen.model import Catalog, Entry
from codegen.plan.policies import Policies
from torchdevice.records import EmulationRow


@dataclass(frozen=True)
class Emulation:
    """One row of the table: the runtime installs ``emulation.build(does, value)`` (``emulate``) or a
    stand-in raising with ``why`` (``unsupported``) in place of the entry."""

    entry: Entry

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def owner(self) -> tuple[str, tuple[str, ...], str]:
        return self.entry.module, self.entry.path[:-1], self.entry.attr

    @property
    def row(self) -> EmulationRow:
        rule = self.entry.cuda
        assert rule is not None
        return EmulationRow(*self.owner, policy=rule.policy, does=rule.does, value=rule.value, why=rule.why,
                            is_class=self.entry.kind == "class")


@dataclass(frozen=True)
class Member:
    """A method or property of an emulated ``torch.cuda`` class: the stand-in class must have it too."""

    entry: Entry
    owner: Emulation


def emulations(catalog: Catalog, policies: Policies) -> tuple[Emulation, ...]:
    return tuple(Emulation(e) for e in catalog.entries if policies[e.name].name in ("emulate", "unsupported"))


def members(catalog: Catalog, rows: tuple[Emulation, ...]) -> tuple[Member, ...]:
    classes = {row.name: row for row in rows if row.entry.kind == "class" and row.entry.cuda.policy == "emulate"}  # type: ignore[union-attr]
    return tuple(Member(e, classes[e.namespace]) for e in catalog.entries
                 if e.kind in ("method", "property") and e.namespace in classes)
