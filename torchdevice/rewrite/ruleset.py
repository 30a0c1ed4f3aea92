"""The rewrite rules, indexed for the transformer.

The rules are data (``catalog/overlays/rewrite.yaml``, rendered into ``torchdevice_generated.rewrite_rules``);
this module only arranges them for look-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache, cached_property

from torchdevice.records.rewrite import RewriteRule


@dataclass(frozen=True)
class ValueRule:
    """A ``device``, ``backend`` or ``index`` rule with its name pattern compiled."""

    rule: RewriteRule
    names: re.Pattern[str]

    def holds(self, name: str | None) -> bool:
        """Does a variable, parameter, key or option called ``name`` hold this kind of value?"""
        return name is not None and self.names.match(name) is not None

    def drops_index(self, place: str | None) -> bool:
        """Is a device index dropped where a value is given to or kept under ``place``?"""
        return place is not None and bool(self.rule.unindexed) and re.fullmatch(self.rule.unindexed, place) is not None


@dataclass(frozen=True)
class RuleSet:
    by_code: dict[str, RewriteRule]
    calls: dict[str, RewriteRule]
    """Qualified torch name -> ``call`` rule."""
    contexts: dict[str, RewriteRule]
    """Qualified torch name -> ``context`` rule."""
    methods: dict[str, RewriteRule]
    """Method name -> ``method`` rule."""
    arguments: dict[str, RewriteRule]
    """Qualified torch name -> ``argument`` rule."""
    launchers: dict[str, RewriteRule]
    """Qualified name -> ``launcher`` rule."""
    reports: dict[str, RewriteRule]
    """Qualified name -> ``report`` rule."""
    checks: dict[str, RewriteRule]
    """Analysis (``comparison``...) -> ``check`` rule."""
    values: tuple[ValueRule, ...]
    """``device`` and ``backend`` rules."""
    device: ValueRule
    """The ``device`` rule: how the accelerator is named."""
    index: ValueRule | None
    groups: dict[str, tuple[RewriteRule, ...]]
    """Group -> its ``call`` and ``context`` rules, rewritten together or not at all."""
    triggers: tuple[str, ...]
    """Text that contains none of these cannot need a rewrite or a report (``cuda``, ``nccl``...)."""
    guarded_methods: dict[str, frozenset[str]]
    """Class name -> methods guarded on its objects (``Event`` -> ``record``...), from ``result_methods``."""
    available: RewriteRule
    """The rule rewriting the CUDA check (``torch.cuda.is_available`` -> ``torch.accelerator.is_available``)."""
    looked_up: dict[str, RewriteRule | None] = field(default_factory=dict, repr=False, compare=False)
    """``lookup``'s answers so far."""

    @classmethod
    def build(cls, rules: Iterable[RewriteRule]) -> RuleSet:
        rules = tuple(rules)
        by_code: dict[str, RewriteRule] = {}
        for rule in rules:
            if rule.code in by_code:
                raise ValueError(f"rewrite rules {by_code[rule.code].name!r} and {rule.name!r} share code {rule.code}")
            by_code[rule.code] = rule

        def kind(name: str) -> dict[str, RewriteRule]:
            return {r.match: r for r in rules if r.kind == name}

        calls = kind("call")
        guards = [r for r in calls.values() if r.to.endswith(".is_available")]
        devices = [r for r in rules if r.kind == "device"]
        if len(guards) != 1 or len(devices) != 1:
            raise ValueError("rewrite rules need exactly one `is_available` call rule and one device rule")
        groups: dict[str, list[RewriteRule]] = {}
        for rule in rules:
            if rule.group:
                groups.setdefault(rule.group, []).append(rule)
        index = next((r for r in rules if r.kind == "index"), None)
        values = tuple(ValueRule(r, re.compile(r.names)) for r in rules if r.kind in ("device", "backend"))
        return cls(
            by_code=by_code,
            calls=calls,
            contexts=kind("context"),
            methods=kind("method"),
            arguments=kind("argument"),
            launchers=kind("launcher"),
            reports=kind("report"),
            checks=kind("check"),
            values=values,
            device=next(v for v in values if v.rule.kind == "device"),
            index=None if index is None else ValueRule(index, re.compile(index.names)),
            groups={g: tuple(members) for g, members in groups.items()},
            triggers=tuple(sorted({t for t in map(_trigger, rules) if t})),
            guarded_methods={
                r.match.rpartition(".")[2]: frozenset(r.result_methods) for r in calls.values() if r.result_methods
            },
            available=guards[0],
        )

    def lookup(self, qualified: str) -> RewriteRule | None:
        """The rule for a reference to ``qualified``: its own rule, else the report covering it, else None."""
        if qualified in self.looked_up:
            return self.looked_up[qualified]
        found = self.calls.get(qualified) or self.contexts.get(qualified) or self.reports.get(qualified)
        if found is None:
            for rule in self.reports.values():
                if rule.prefix and qualified.startswith(rule.match + ".") and (
                    found is None or len(rule.match) > len(found.match)
                ):
                    found = rule
        self.looked_up[qualified] = found
        return found

    def reaches(self, qualified: str) -> bool:
        """Is something with a rule reached through ``qualified`` (``torch.cuda.amp`` -> ``autocast``)?"""
        return any(name.startswith(qualified + ".") for name in (*self.calls, *self.contexts))

    def check(self, analysis: str) -> RewriteRule:
        return self.checks[analysis]

    @cached_property
    def _index_site(self) -> re.Pattern[str] | None:
        if self.index is None:
            return None
        rule = self.index.rule
        where = [rf"\.{re.escape(m)}\(" for m in rule.methods] + [rf"\b{re.escape(k)}\s*=\s*" for k in rule.keywords]
        return re.compile(rf"(?:{'|'.join(where)})\s*((?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)|\d+)\s*[,)]")

    def index_sites(self, source: str) -> list[int]:
        """Offsets in ``source`` of integer device indices where a device is expected (``.to(local_rank)``)."""
        pattern = self._index_site
        if pattern is None or self.index is None:
            return []
        return [m.start() for m in pattern.finditer(source) if m.group(2) is None or self.index.holds(m.group(2))]

    def mentions(self, text: str) -> bool:
        """Cheap text test: can this text need a rewrite?"""
        return any(t in text for t in self.triggers)

    def may_apply(self, data: bytes) -> bool:
        """``mentions`` for the raw bytes of a file."""
        return any(t.encode() in data for t in self.triggers)


def _trigger(rule: RewriteRule) -> str | None:
    """The text a source must contain for ``rule`` to apply (None: another rule's trigger covers it)."""
    if rule.kind in ("device", "backend", "method"):
        return rule.match
    if rule.kind in ("index", "check", "launcher"):
        return None  # an index, a comparison or a launcher matter only next to "cuda" or "nccl"
    parts = rule.match.split(".")
    cuda = next((p for p in parts if "cud" in p), None)
    if cuda is not None:
        return cuda
    return parts[-1] + "(" if rule.kind == "report" and rule.keywords else parts[-1]  # a call is reported


@cache
def default() -> RuleSet:
    """The rules rendered from the catalog."""
    from torchdevice_generated.rewrite_rules import RULES

    return RuleSet.build(RULES)
