"""What the rewriter knows about a module beyond the statements it rewrites, computed once per module from its
``ast`` outline, each kind of fact in its own module: ``names`` (what an imported name stands for), ``torch``
(torch's name and where it is imported), ``guards`` (which tests mean "an accelerator is present"),
``devices`` (the names that hold the program's device), ``gates`` (fallbacks for old torch), ``groups``
(rule groups and launchers). What spans the module is computed from the units' statements, or from the whole
tree only when the source mentions what it is about.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from torchdevice.rewrite.facts.devices import Devices
from torchdevice.rewrite.facts.gates import Gates
from torchdevice.rewrite.facts.groups import Groups
from torchdevice.rewrite.facts.guards import Guards
from torchdevice.rewrite.facts.names import CstImportMap
from torchdevice.rewrite.facts.torch import TorchName
from torchdevice.rewrite.outline import SCOPES, Outline, Scope, blocks
from torchdevice.rewrite.ruleset import RuleSet


class Facts:
    """The facts of one module."""

    def __init__(self, shape: Outline, imports: CstImportMap, rules: RuleSet, source: str) -> None:
        self.imports = imports
        self.torch = TorchName(shape)
        self.guards = Guards(imports, rules)
        self.devices = Devices(shape, imports, self.guards, source)
        self.gates = Gates(imports, rules)
        self.groups = Groups(shape, imports, rules, source)
        body = shape.tree.body if shape.tree is not None else []
        for unit in shape.units:
            scope = unit.scopes[-1] if unit.scopes else None
            self._scan(unit.nodes, scope, set(scope.body if scope is not None else body))

    def _scan(self, nodes: Iterable[ast.stmt], scope: Scope | None, direct: set[ast.stmt]) -> None:
        """Learn guards and devices from the assignments among ``nodes``, in order (statements of ``scope``;
        ``direct``: its own body)."""
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets: list[ast.expr] = node.targets if isinstance(node, ast.Assign) else [node.target]
                self.guards.learn(node.value, targets)
                self.devices.learn(node, targets, scope, node in direct)
            elif isinstance(node, SCOPES):
                self._scan(node.body, node, set(node.body))
            else:
                for block, _ in blocks(node):
                    self._scan(block, scope, direct)
