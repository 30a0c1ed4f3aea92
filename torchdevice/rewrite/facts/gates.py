"""Conditionals choosing between a device-agnostic API and its CUDA form for old torch releases
(``torch.Stream() if torch_ge_2_7 else torch.cuda.Stream()``): their CUDA branch stays."""

from __future__ import annotations

import ast
import re
from functools import cached_property

from torchdevice.rewrite.outline import Unit
from torchdevice.rewrite.ruleset import RuleSet
from torchdevice.source.names import ImportMap

_VERSION = re.compile(r"version|_g[et]_|greater|less|hasattr|torch_\d|TORCH_\d", re.IGNORECASE)
"""What a test choosing between torch releases looks like."""


class Gates:
    def __init__(self, imports: ImportMap, rules: RuleSet) -> None:
        self.imports, self.rules = imports, rules

    @staticmethod
    def gate_test(test: str) -> bool:
        """Does a test (source text) choose between torch releases (``torch_ge_2_7``, ``hasattr(torch, ...)``)?"""
        return _VERSION.search(test) is not None

    def agnostic_name(self, qualified: str) -> bool:
        """Is ``qualified`` a device-agnostic API the rules write (``torch.accelerator.*``, ``torch.Stream``...)?"""
        return qualified.startswith("torch.accelerator.") or qualified in self._targets

    @cached_property
    def _targets(self) -> set[str]:
        return {r.to for r in self.rules.calls.values()}

    def fallback_of(self, unit: Unit) -> ast.If | None:
        """The ``if`` whose other branch uses the device-agnostic API for old torch's sake, when ``unit`` is
        the CUDA fallback of it."""
        for test, holds, node in unit.conditions:
            if node is None or not self.gate_test(ast.unparse(test)):
                continue
            other = node.orelse if holds else node.body
            if any(isinstance(n, (ast.Name, ast.Attribute)) and self.agnostic_name(self.imports.resolve_ast(n) or "")
                   for statement in other for n in ast.walk(statement)):
                return node
        return None
