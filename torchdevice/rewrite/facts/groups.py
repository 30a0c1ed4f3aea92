"""Rule groups and launchers, over the whole module: whether every member of a group (``torch.cuda.Stream``
with ``torch.cuda.stream``) can be rewritten, and which names count the processes a launcher starts."""

from __future__ import annotations

import ast
from functools import cached_property

from torchdevice.records.rewrite import RewriteRule
from torchdevice.rewrite.outline import Outline
from torchdevice.rewrite.ruleset import RuleSet
from torchdevice.source.names import ImportMap


class Groups:
    def __init__(self, shape: Outline, imports: ImportMap, rules: RuleSet, source: str) -> None:
        self.shape, self.imports, self.rules, self.source = shape, imports, rules, source

    @cached_property
    def _references(self) -> list[tuple[ast.expr, str, ast.Call | None]]:
        """Every reference to something with a rule: the node, its qualified name, the call it is the callee of."""
        found: list[tuple[ast.expr, str, ast.Call | None]] = []
        if self.shape.tree is None:
            return found
        callees: dict[ast.expr, ast.Call] = {}
        for node in ast.walk(self.shape.tree):
            if isinstance(node, ast.Call):
                callees[node.func] = node
            if isinstance(node, (ast.Name, ast.Attribute)):
                qualified = self.imports.resolve_ast(node)
                if qualified is not None and (qualified in self.rules.calls or qualified in self.rules.contexts
                                              or qualified in self.rules.launchers):
                    found.append((node, qualified, callees.get(node)))
        return found

    def blocker(self, group: str) -> str | None:
        """Why the rules of ``group`` cannot all be rewritten in this module, or None when they can."""
        members = {r.match: r for r in self.rules.groups[group]}
        makers = {name for r in members.values() for name in r.made_by}
        made: set[str] = set()
        for node in ast.walk(self.shape.tree) if self.shape.tree is not None else ():
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.withitem)):
                value = node.context_expr if isinstance(node, ast.withitem) else node.value
                targets = [node.optional_vars] if isinstance(node, ast.withitem) else (
                    node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(value, ast.Call) and self.imports.resolve_ast(value.func) in makers:
                    made.update(ast.unparse(t) for t in targets if t is not None)
        for node, qualified, call in self._references:
            rule = members.get(qualified)
            if rule is None:
                continue
            line = f"{qualified} at line {node.lineno}"
            if rule.kind == "context":
                if call is None or call.keywords or len(call.args) != 1:
                    return f"{line} is not called with one stream"
                (arg,) = call.args
                if not (isinstance(arg, ast.Call) and self.imports.resolve_ast(arg.func) in makers) and \
                        ast.unparse(arg) not in made:
                    return f"{line} is given {ast.unparse(arg)}, not a stream made by {', '.join(sorted(makers))}"
            elif call is None and not is_rename(rule):
                return f"{line} is used without being called"
        return None

    @cached_property
    def launch_counts(self) -> set[str]:
        """Names assigned an accelerator count that a launcher uses as its number of processes."""
        names: set[str] = set()
        if not any(name.rpartition(".")[2] in self.source for name in self.rules.launchers):
            return names
        for _, qualified, call in self._references:
            rule = self.rules.launchers.get(qualified)
            if rule is None or call is None:
                continue
            count = _argument(call, rule.params, rule.keywords[0])
            if isinstance(count, ast.Name):
                names.add(count.id)
        return names


def _argument(call: ast.Call, params: tuple[str, ...], name: str) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    index = params.index(name)
    return call.args[index] if len(call.args) > index and not any(
        isinstance(a, ast.Starred) for a in call.args[: index + 1]) else None



def is_rename(rule: RewriteRule) -> bool:
    """A call rule whose replacement also stands for the original where it is not called (a type in
    ``isinstance``, an exception class): no arguments to add, nothing to guard."""
    return (rule.kind == "call" and rule.device_type == "none" and rule.without_accelerator is None
            and not rule.result_methods)
