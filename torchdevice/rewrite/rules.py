"""The rewrite rules, indexed for the transformer.

The rules are data (``catalog/overlays/rewrite.yaml``, rendered into ``torchdevice_generated.rewrite_rules``);
this module only arranges them for look-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from torchdevice.rewrite.rule import RewriteRule


@dataclass(frozen=True)
class ValueRule:
    """A ``device`` or ``backend`` rule with its name pattern compiled."""

    rule: RewriteRule
    names: re.Pattern[str]

    def holds(self, name: str) -> bool:
        """Does a variable, parameter, key or option called ``name`` hold this kind of value?"""
        return bool(self.rule.names) and self.names.match(name) is not None


@dataclass(frozen=True)
class RuleSet:
    calls: dict[str, RewriteRule]
    """Qualified torch name -> ``call`` rule."""
    methods: dict[str, RewriteRule]
    """Method name -> ``method`` rule."""
    arguments: dict[str, RewriteRule]
    """Qualified torch name -> ``argument`` rule."""
    values: tuple[ValueRule, ...]
    """``device`` and ``backend`` rules."""
    namespaces: tuple[str, ...]
    """Namespaces the call rules come from (``torch.cuda``): any other use of them is reported."""
    triggers: tuple[str, ...]
    """Text that contains none of these cannot need a rewrite (``cuda``, ``nccl``, ``DistributedDataParallel``)."""
    guarded_methods: dict[str, frozenset[str]]
    """Class name -> methods guarded on its objects (``Event`` -> ``record``...), from ``result_methods``."""
    available: str
    """Qualified name of the guard used where a call needs an accelerator (``torch.accelerator.is_available``)."""
    available_match: str
    """Qualified name of the CUDA check it replaces (``torch.cuda.is_available``)."""

    @classmethod
    def build(cls, rules: Iterable[RewriteRule]) -> RuleSet:
        rules = tuple(rules)
        calls = {r.match: r for r in rules if r.kind == "call"}
        namespaces = sorted({".".join(r.match.split(".")[:2]) for r in calls.values()})
        triggers = {name.split(".")[1] for name in namespaces}
        triggers |= {r.match.rpartition(".")[2] for r in rules if r.kind != "call"}  # argument: the class name
        guards = [r for r in calls.values() if r.to.endswith(".is_available")]
        if len(guards) != 1:
            raise ValueError("rewrite rules need exactly one call rule to an `is_available` check")
        return cls(
            calls=calls,
            methods={r.match: r for r in rules if r.kind == "method"},
            arguments={r.match: r for r in rules if r.kind == "argument"},
            values=tuple(ValueRule(r, re.compile(r.names)) for r in rules if r.kind in ("device", "backend")),
            namespaces=tuple(namespaces),
            triggers=tuple(sorted(triggers)),
            guarded_methods={
                r.match.rpartition(".")[2]: frozenset(r.result_methods) for r in calls.values() if r.result_methods
            },
            available=guards[0].to,
            available_match=guards[0].match,
        )

    def in_namespace(self, qualified: str) -> bool:
        return any(qualified == ns or qualified.startswith(ns + ".") for ns in self.namespaces)

    def mentions(self, text: str) -> bool:
        """Cheap text test: can this text need a rewrite?"""
        return any(t in text for t in self.triggers)

    def may_apply(self, data: bytes) -> bool:
        """``mentions`` for the raw bytes of a file."""
        return any(t.encode() in data for t in self.triggers)


@cache
def default() -> RuleSet:
    """The rules rendered from the catalog."""
    from torchdevice_generated.rewrite_rules import RULES

    return RuleSet.build(RULES)
