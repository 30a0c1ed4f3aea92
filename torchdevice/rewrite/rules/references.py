"""Names with a rule (``call``, ``context``, ``report`` kinds) where they are not called: the imports that bind
them, renames (``torch.cuda.OutOfMemoryError`` -> ``torch.OutOfMemoryError``), decorators given the device type
(``@torch.cuda.amp.custom_fwd`` -> ``@torch.amp.custom_fwd(device_type=...)``), and reports of CUDA-only names."""

from __future__ import annotations

import libcst as cst

from torchdevice.rewrite.facts.groups import is_rename
from torchdevice.rewrite.facts.names import root_name
from torchdevice.rewrite.rules.base import Rule
from torchdevice.rewrite.rules.calls import device_type_arg


class References(Rule):
    def visit_Import(self, node: cst.Import) -> bool:
        self._imports(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self._imports(node)
        return False

    def _imports(self, node: cst.Import | cst.ImportFrom) -> None:
        for local, qualified in self.rw.imports.add_cst(node):
            if self.rules.lookup(qualified) is None and not self.rules.reaches(qualified):
                continue
            if local == "*":
                self.rw.check(node, "dynamic", f"from {qualified} import *")
            else:
                self.rw.namespace_names.add(local)
                self.rw.imported = True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.rw.namespace_names and self.rw.read(node):
            self.rw.uses[node.value] += 1

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        if original_node.value not in self.rw.namespace_names or not self.rw.read(original_node):
            return updated_node
        qualified = self.rw.imports.resolve_cst(original_node)
        return updated_node if qualified is None else self._reference(original_node, updated_node, qualified)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if self._qualified(node) is None:
            return True
        root = root_name(node)
        if root in self.rw.namespace_names:
            self.rw.uses[root] += 1
        return False

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        qualified = self._qualified(original_node)
        return updated_node if qualified is None else self._reference(original_node, updated_node, qualified)

    def _qualified(self, node: cst.Attribute) -> str | None:
        """The qualified name of an attribute chain with a rule, or through which one is reached."""
        qualified = self.rw.imports.resolve_cst(node)
        if qualified is not None and (self.rules.lookup(qualified) is not None or self.rules.reaches(qualified)):
            return qualified
        return None

    def _reference(self, original: cst.BaseExpression, updated: cst.BaseExpression, qualified: str):
        """A name or attribute chain with a rule (``torch.cuda...``)."""
        rw, rule = self.rw, self.rules.lookup(qualified)
        if rule is None:
            return updated
        if rule.kind == "report":
            if self.rules.reaches(qualified):
                rw.note(original, rule, f"{qualified} is used as a value; what is reached through it is not rewritten")
            elif not rule.keywords:
                rw.note(original, rule, f"{qualified}: {rule.doc}")
            return updated
        if rw.callee(original):
            return updated  # the call is rewritten as a whole
        if not rw.allowed(original, rule) or rule.group and rw.group_left(rule.group) is not None:
            return updated
        if isinstance(rw.parent(original), cst.Decorator) and rule.device_type != "none":
            rw.rewritten(original)
            rw.rewrote(rule)
            return cst.Call(rw.forms.torch(rule.to), [device_type_arg(rw, rule, original)])
        if is_rename(rule):
            rw.rewritten(original)
            rw.rewrote(rule)
            return rw.forms.torch(rule.to)
        rw.note(original, rule, f"{qualified} is used here without being called; left as is")
        return updated
