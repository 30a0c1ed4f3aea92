"""The name torch is imported under, and where: so that the accelerator can be named where code runs."""

from __future__ import annotations

import ast
from functools import cached_property

from torchdevice.rewrite.outline import Outline, Scope, Unit, binds_torch, blocks


class TorchName:
    def __init__(self, shape: Outline) -> None:
        self.shape = shape

    @cached_property
    def statement(self) -> tuple[int, str] | None:
        """Index of the first top-level statement importing torch unconditionally, and the name it binds."""
        return next(((i, s.binds_torch) for i, s in enumerate(self.shape.statements) if s.binds_torch), None)

    @cached_property
    def alias(self) -> str | None:
        """The name torch is imported under: at module level if it is, else anywhere; None when nowhere."""
        if self.statement is not None:
            return self.statement[1]
        for node in self.shape.imports:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "torch" or (a.asname is None and a.name.startswith("torch.")):
                        return a.asname or "torch"
        return None

    def ready(self, unit: Unit, scopes: tuple[Scope, ...]) -> bool:
        """Is torch imported where code of ``unit`` inside ``scopes`` runs (so that the accelerator can be named
        there)? Code that runs when the module is imported needs an unconditional module-level import before it."""
        in_function = any(not isinstance(s, ast.ClassDef) for s in scopes)
        if self.statement is not None:
            return in_function or unit.top > self.statement[0] or self.shape.statements[unit.top].defines
        if self.alias is None:
            return True  # ``import torch`` will be added before the first statement that needs it
        return in_function and any(
            binds_torch(node) and (self._module_level(node) or any(
                s.lineno <= node.lineno <= (s.end_lineno or s.lineno) for s in scopes))
            for node in self.shape.imports)

    def _module_level(self, node: ast.stmt) -> bool:
        """Is this statement outside every function (module level, possibly under ``if``/``try``)?"""
        return not any(s.lineno <= node.lineno <= (s.end_lineno or s.lineno) for s in self._functions)

    @cached_property
    def _functions(self) -> list[ast.stmt]:
        """Every function of the module (statements only are walked: a function is one)."""
        found: list[ast.stmt] = []
        body = list(self.shape.tree.body) if self.shape.tree is not None else []
        while body:
            node = body.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append(node)
            body.extend(s for block, _ in blocks(node) for s in block)
        return found
