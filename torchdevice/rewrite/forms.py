"""The expressions the rewriter writes: the accelerator device, its type, indexed devices, guards."""

from __future__ import annotations

from functools import cache

import libcst as cst

from torchdevice.rewrite.arguments import comma
from torchdevice.rewrite.rule import RewriteRule


@cache
def expression(code: str) -> cst.BaseExpression:
    """Parse ``code`` once; the node is immutable and can appear in many trees."""
    return cst.parse_expression(code)


class Forms:
    """Expressions naming the accelerator through the module-level helper ``helper``.

    Counts what it hands out, so the caller knows whether the module needs the helper and ``import torch``.
    """

    def __init__(self, helper: str, available: str, indent: str = "    ") -> None:
        self.helper = helper
        self.indent = indent
        self.device_type_code = f"{helper}.type"
        self.available_code = f"{available}()"
        self.helper_uses = 0
        self.torch_uses = 0

    def torch(self, qualified: str) -> cst.BaseExpression:
        """A ``torch.…`` expression."""
        self.torch_uses += 1
        return expression(qualified)

    def torch_used(self) -> None:
        self.torch_uses += 1

    @property
    def device(self) -> cst.BaseExpression:
        """The accelerator (a ``torch.device``), CPU where there is none."""
        self.helper_uses += 1
        return expression(self.helper)

    @property
    def device_type(self) -> cst.BaseExpression:
        """Its type as a string: ``"cuda"``, ``"mps"``, ``"cpu"``..."""
        self.helper_uses += 1
        return expression(self.device_type_code)

    @property
    def available(self) -> cst.BaseExpression:
        return self.torch(self.available_code)

    def type_test_code(self, device_type: str) -> str:
        """``<accelerator>.type == "<device_type>"``."""
        return f'{self.device_type_code} == "{device_type}"'

    def only_on(self, value: cst.BaseExpression, device_type: str) -> cst.IfExp:
        """``value if <accelerator>.type == "<device_type>" else None``."""
        if isinstance(value, (cst.IfExp, cst.Lambda)) and not value.lpar:
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.helper_uses += 1
        return cst.IfExp(test=expression(self.type_test_code(device_type)), body=value, orelse=cst.Name("None"))

    def indexed(self, index: cst.BaseExpression) -> cst.Call:
        """``torch.device(<type>, index)``."""
        return cst.Call(self.torch("torch.device"), [cst.Arg(self.device_type, comma=comma()), cst.Arg(index)])

    def typed_string(self, node: cst.SimpleString, rest: str) -> cst.FormattedString:
        """The string ``node`` (``"cuda<rest>"``) with ``cuda`` replaced by the accelerator's type."""
        prefix = "f" + node.prefix.lower().replace("u", "")
        text = rest.replace("{", "{{").replace("}", "}}")
        parts: list[cst.BaseFormattedStringContent] = [cst.FormattedStringExpression(self.device_type)]
        if text:
            parts.append(cst.FormattedStringText(text))
        return cst.FormattedString(parts, start=prefix + node.quote, end=node.quote)

    def backend_code(self, rule: RewriteRule) -> str:
        return f"{rule.to}({self.helper})"

    def backend(self, rule: RewriteRule) -> cst.BaseExpression:
        self.helper_uses += 1
        return self.torch(self.backend_code(rule))

    def guarded(self, call: cst.BaseExpression, fallback: str) -> cst.IfExp:
        """``(call if <accelerator available> else fallback)``."""
        return cst.IfExp(
            test=self.available, body=call, orelse=self.torch(fallback),
            lpar=[cst.LeftParen()], rpar=[cst.RightParen()],
        )

    def guard_statement(self, line: cst.SimpleStatementLine) -> cst.If:
        """``if <accelerator available>:`` around a statement line, keeping its comments."""
        inner = line.with_changes(leading_lines=())
        body = cst.IndentedBlock([inner], indent=self.indent)
        return cst.If(test=self.available, body=body, leading_lines=line.leading_lines)
