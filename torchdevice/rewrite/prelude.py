"""The module helper naming the accelerator, added once per rewritten file where needed.

The helper is ``_DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")``
(the module's own name for torch): the accelerator present (CUDA, MPS, XPU...) or the CPU. It goes
right after the imports that come before the first statement using it (and after torch's), never
between statements of code; where it would be used once, the idiom is written there instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import count

import libcst as cst

from torchdevice.rewrite.forms import IDIOM, Forms
from torchdevice.rewrite.outline import Statement

HELPER = "_DEVICE"


def helper_name(source: str) -> tuple[str, bool]:
    """A helper name for ``source`` and whether the source already defines it.

    ``_DEVICE``, or ``_DEVICE_1``, ``_DEVICE_2``... when the name is taken by something else.
    """
    for i in count():
        name = HELPER if i == 0 else f"{HELPER}_{i}"
        if not re.search(rf"\b{name}\b", source):
            return name, False
        written = re.escape(IDIOM).replace("torch", r"\w+").replace('"', "[\"']")
        if re.search(rf"^{name} = {written}[ \t]*(#.*)?$", source, re.MULTILINE):
            return name, True
    raise AssertionError("unreachable")


def placement(statements: Sequence[Statement], first_use: int, docstring: bool) -> int:
    """Index of the top-level statement the helper follows (-1: the top of the file).

    After the last import before the statement at ``first_use`` and after the first unconditional
    ``import torch``; after the module docstring at least.
    """
    after = max((i for i in range(first_use) if statements[i].imports), default=0 if docstring else -1)
    torch = next((i for i, s in enumerate(statements) if s.binds_torch), None)
    return after if torch is None else max(after, torch)


def prelude(forms: Forms, helper: str, newline: str, top: bool) -> str:
    """The helper definition to insert after a statement (before the first one where ``top``), set off by blank
    lines."""
    definition = f"{helper} = {forms.idiom_code}{newline}"
    return definition + newline if top else newline + definition


class Inline(cst.CSTTransformer):
    """Write the idiom in place of the helper's only use; ``failed`` where it cannot (inside an f-string)."""

    def __init__(self, helper: str, forms: Forms) -> None:
        super().__init__()
        self.helper, self.forms = helper, forms
        self.strings = 0
        self.failed = False

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.strings += 1

    def leave_FormattedString(self, original_node, updated_node):
        self.strings -= 1
        return updated_node

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        if original_node.value != self.helper:
            return updated_node
        self.failed |= self.strings > 0
        return self.forms.idiom

    def _bare(self, holder):
        return holder if holder.value is None else holder.with_changes(value=self.forms.bare(holder.value))

    def leave_Arg(self, original_node, updated_node):
        return self._bare(updated_node)

    def leave_Assign(self, original_node, updated_node):
        return self._bare(updated_node)

    def leave_Return(self, original_node, updated_node):
        return self._bare(updated_node)

    def leave_Param(self, original_node, updated_node):
        default = updated_node.default
        return updated_node if default is None else updated_node.with_changes(default=self.forms.bare(default))
