"""What the parts of the rewriter share: the rules, the expressions it writes, and what it learns."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from torchdevice.rewrite.forms import Forms
from torchdevice.rewrite.imports import ImportMap, root_name
from torchdevice.rewrite.rule import RewriteRule
from torchdevice.rewrite.rules import RuleSet, ValueRule

Form = Literal["object", "string"]
"""How a value is written: ``object`` where it goes straight into torch (a ``torch.device``),
``string`` where the program keeps it (a string stays a string: the accelerator's type)."""


@dataclass(frozen=True)
class Context:
    """A place where a value of ``rule`` is expected, and how to write it there."""

    rule: ValueRule
    form: Form


class RewriterBase(cst.CSTTransformer):
    """State of one rewrite: what lasts for the file, and what is keyed by the nodes of one unit."""

    def __init__(self, rules: RuleSet, forms: Forms) -> None:
        super().__init__()
        self.rules, self.forms = rules, forms
        self.device = next((v for v in rules.values if v.rule.kind == "device"), None)
        self.imports = ImportMap()
        self.notes: list[tuple[cst.CSTNode, str]] = []
        self.receivers: dict[str, RewriteRule] = {}
        """Source of names bound to objects whose methods are guarded (events) -> the rule creating them."""
        self.namespace_names: set[str] = set()
        """Local names an import binds to something in a rewritten namespace (``autocast``)."""
        self.uses: Counter[str] = Counter()
        self.rewritten_uses: Counter[str] = Counter()
        self.start_unit()

    def start_unit(self) -> None:
        """Forget what is keyed by node identity (``id()`` of original nodes): the previous unit's nodes may be gone."""
        self.contexts: dict[int, Context] = {}
        self.call_rules: dict[int, RewriteRule] = {}
        self.method_rules: dict[int, RewriteRule] = {}
        self.argument_rules: dict[int, RewriteRule] = {}
        self.device_calls: set[int] = set()
        self.references: dict[int, str] = {}
        self.callees: set[int] = set()
        self.decorators: set[int] = set()
        self.stores: set[int] = set()
        self.statements: dict[int, int] = {}
        self.guard_lines: set[int] = set()
        self.guarded_blocks: set[int] = set()
        self.guarded_depth = 0
        self.parenthesized: set[int] = set()
        self.kept: set[int] = set()
        self.changed = False  # a node of this unit was replaced
        self.imported = False  # this unit imports a name from a rewritten namespace

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        result = super().on_leave(original_node, updated_node)
        if result is not updated_node:
            self.changed = True
        return result

    def removable_imports(self) -> set[str]:
        """Names imported from a rewritten namespace whose every use was rewritten."""
        return {n for n, k in self.rewritten_uses.items() if k and self.uses[n] == k}

    def note(self, node: cst.CSTNode, message: str) -> None:
        self.notes.append((node, message))

    def mark(self, node: cst.BaseExpression, rule: ValueRule, form: Form) -> None:
        """A value of ``rule`` is expected at ``node``."""
        self.contexts.setdefault(id(node), Context(rule, form))

    def rewritten(self, reference: cst.BaseExpression) -> None:
        """A reference to something in a rewritten namespace was rewritten."""
        root = root_name(reference)
        if root in self.namespace_names:
            self.rewritten_uses[root] += 1
