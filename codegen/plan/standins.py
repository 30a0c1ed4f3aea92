"""The stand-ins' table (``standins.py.j2``) and the cases the generated tests compare with a reference."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from codegen.model import Catalog


@dataclass(frozen=True)
class Case:
    """One comparison: call ``name`` with ``args`` (grid values) and its ``reference`` the same way."""

    name: str
    reference: str
    args: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.name}[" + ",".join(f"{k}={v}" for k, v in self.args.items()) + "]"


@dataclass(frozen=True)
class Standins:
    packages: dict[str, tuple[str, str, str]]
    """Top-level name -> (distribution, version followed, torch API to use for what is not covered)."""
    covered: dict[str, tuple[str, str, str]]
    """Covered name -> (signature, torch API computing it, notes)."""
    missing: dict[str, str]
    """Known uncovered name -> the torch API to use instead."""
    cases: tuple[Case, ...]

    @classmethod
    def of(cls, catalog: Catalog) -> Standins:
        packages, covered, missing, cases = {}, {}, {}, []
        for record in catalog.standins:
            rule = record.rule
            if rule.policy == "package":
                packages[record.name] = (rule.distribution, rule.version, rule.computes)
            elif rule.policy == "missing":
                missing[record.name] = rule.computes
            else:
                covered[record.name] = (rule.signature, rule.computes, rule.notes)
                keys = list(rule.grid)
                for values in itertools.product(*(rule.grid[k] for k in keys)) if keys else ():
                    cases.append(Case(record.name, rule.reference, dict(zip(keys, values, strict=True))))
        return cls(packages, covered, missing, tuple(cases))
