"""The expressions the rewriter writes: the accelerator device, its type, indexed devices, guards.

The accelerator is named, in order of preference, by a name the program already assigns it to (a
``Holder``), by the module helper (``_DEVICE``), or, where torch is not imported at module level, by
the idiom itself. Every ``torch.…`` written uses the module's own name for torch (``import torch as th``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Literal, TypeVar, cast

import libcst as cst

from torchdevice.records.rewrite import RewriteRule
from torchdevice.rewrite.arguments import comma
from torchdevice.rewrite.facts.devices import Holder

_Node = TypeVar("_Node", bound=cst.CSTNode)

Quote = Literal['"', "'", '"""', "'''"]

IDIOM = 'torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'
"""The accelerator present (CUDA, MPS, XPU...), or the CPU."""

DEVICES = "torch.accelerator.device_count() or 1"
"""How many devices the indices of the rewritten code are taken modulo (see ``Forms.index``)."""

EMITTED = ("torch.accelerator.current_accelerator(check_available)", "torch.device", "torch.device.type",
           "torch.accelerator.device_count")
"""The APIs the rewritten code uses besides the rules' own (see ``apis``)."""


def apis(rules: Iterable[RewriteRule]) -> set[str]:
    """Every torch API the rewritten code can use: names (``torch.Stream``), methods (``torch.Stream.__enter__``,
    what ``with stream:`` calls) and keyword parameters (``torch.amp.custom_fwd(device_type)``)."""
    found = set(EMITTED)
    for rule in rules:
        if rule.kind in ("call", "backend"):
            found.add(rule.to)
        if rule.kind == "call":
            if rule.device_type == "keyword":
                found.add(f"{rule.to}(device_type)")
            if rule.args == "keywords":
                found.update(f"{rule.to}({p})" for p in rule.params)
        if rule.kind == "context":
            found.update(f"{r.to}.__enter__" for r in rules if r.match in rule.made_by)
        for code in (rule.without_accelerator, *rule.result_methods.values()):
            found.update(re.findall(r"\btorch(?:\.\w+)+", code or ""))
    return found


def idiom(alias: str = "torch", quote: str = '"') -> str:
    """The idiom's source, with the module's name for torch and its quotes."""
    return IDIOM.replace("torch.", alias + ".").replace('"', quote)


def preferred_quote(source: str) -> str:
    """The quote the module's strings mostly use (``'`` or ``"``), for the strings the rewrite writes."""
    single, double = (len(re.findall(rf"[=(\[,:]\s*{q}", source)) for q in ("'", '"'))
    return "'" if single > double else '"'


@cache
def expression(code: str) -> cst.BaseExpression:
    """Parse ``code`` once; the node is immutable and can appear in many trees."""
    return cst.parse_expression(code)


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    return node if node.lpar else node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


class Forms:
    """Expressions naming the accelerator in one module.

    ``helper`` is the module helper's name, or None where there is none (torch is not imported at module
    level): the idiom is then written in place.
    """

    def __init__(self, alias: str, helper: str | None, indent: str = "    ", quote: str = '"') -> None:
        self.alias, self.helper, self.indent, self.quote = alias, helper, indent, quote
        self.idiom_code = idiom(alias, quote)
        self.made: dict[cst.CSTNode, str] = {}
        """Nodes written for the current unit -> what they are: ``device``, ``type``, ``available``, ``guard``..."""
        self.idioms: set[cst.CSTNode] = set()
        """The parenthesized idioms written for the current unit, whose parentheses go where they are not needed."""

    def forget(self) -> None:
        """Drop what was written for the previous unit (its nodes are no longer looked at)."""
        self.made.clear()
        self.idioms.clear()

    def tag(self, node: _Node, what: str) -> _Node:
        """Remember ``node`` as written here, as ``what``."""
        self.made[node] = what
        return node

    def what(self, node: cst.CSTNode) -> str | None:
        """``device``, ``type``, ``available``... for a node written here, else None."""
        return self.made.get(node)

    def torch(self, code: str) -> cst.BaseExpression:
        """A ``torch.…`` expression, with the module's name for torch."""
        if self.alias != "torch":
            code = re.sub(r"\btorch\.", self.alias + ".", code)
        return expression(code)

    @property
    def idiom(self) -> cst.BaseExpression:
        """The one-line idiom, parenthesized (``bare`` drops the parentheses where they are not needed)."""
        node = parenthesized(expression(self.idiom_code))
        self.idioms.add(node)
        return node

    def bare(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """``node`` without its parentheses if it is a written idiom (a whole argument, value...)."""
        return node.with_changes(lpar=(), rpar=()) if node in self.idioms else node

    def device(self, holder: Holder | None) -> cst.BaseExpression:
        """The accelerator (a ``torch.device``, or a device string where the program keeps one)."""
        if holder is not None:
            return self.tag(cst.Name(holder.name), "device")
        return self.tag(cst.Name(self.helper) if self.helper else self.idiom, "device")

    def device_type(self, holder: Holder | None) -> cst.BaseExpression:
        """Its type as a string: ``"cuda"``, ``"mps"``, ``"cpu"``..."""
        if holder is not None and holder.given:
            holder = None  # a parameter may hold a string: no `.type`
        if holder is not None and holder.form == "string":
            return self.tag(cst.Name(holder.name), "type")
        base = cst.Name(holder.name) if holder is not None else cst.Name(self.helper) if self.helper else self.idiom
        return self.tag(cst.Attribute(base, cst.Name("type")), "type")

    def indexed(self, holder: Holder | None, index: cst.BaseExpression) -> cst.Call:
        """``torch.device(<type>, <index>)`` (see ``index``)."""
        call = cst.Call(self.torch("torch.device"), [
            cst.Arg(self.device_type(holder), comma=comma()), cst.Arg(self.index(index))])
        return self.tag(call, "indexed")

    def index(self, index: cst.BaseExpression) -> cst.BaseExpression:
        """CUDA device ``index`` as an index of the accelerator: ``index % (torch.accelerator.device_count() or 1)``.

        The same device wherever the CUDA program ran (fewer ranks than devices); where the accelerator has
        fewer devices than the program has ranks (MPS has one), the ranks share them instead of asking for a
        device that does not exist (``mps:1``). Device 0 is written as it is.
        """
        if isinstance(index, cst.Integer) and index.value == "0":
            return index
        if not isinstance(index, (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)):
            index = parenthesized(index)
        return cst.BinaryOperation(index, cst.Modulo(), parenthesized(self.torch(DEVICES)))

    def typed_string(self, holder: Holder | None, quote: str, prefix: str, rest: str) -> cst.FormattedString:
        """``f"<type><rest>"``: a device string with ``cuda`` replaced by the accelerator's type (and the index
        of ``rest`` = ``:N`` taken as ``index`` does)."""
        end = cast(Quote, quote)
        parts: list[cst.BaseFormattedStringContent] = [cst.FormattedStringExpression(self.device_type(holder))]
        number = rest[1:]
        if rest[:1] == ":" and number.isdigit() and number != "0":
            parts += [cst.FormattedStringText(":"), cst.FormattedStringExpression(self.index(cst.Integer(number)))]
        elif rest:
            parts.append(cst.FormattedStringText(rest.replace("{", "{{").replace("}", "}}")))
        return cst.FormattedString(parts, start="f" + prefix.lower().replace("u", "") + quote, end=end)

    def only_on(self, holder: Holder | None, value: cst.BaseExpression, device_type: str) -> cst.IfExp:
        """``value if <accelerator>.type == "<device_type>" else None``."""
        if isinstance(value, (cst.IfExp, cst.Lambda)):
            value = parenthesized(value)
        test = cst.Comparison(self.device_type(holder), [
            cst.ComparisonTarget(cst.Equal(), cst.SimpleString(f"{self.quote}{device_type}{self.quote}"))])
        self.tag(test, "test")
        return cst.IfExp(test=test, body=value, orelse=cst.Name("None"))

    def backend(self, rule: RewriteRule, holder: Holder | None) -> cst.BaseExpression:
        """``torch.distributed.get_default_backend_for_device(<accelerator>)``."""
        return self.tag(cst.Call(self.torch(rule.to), [cst.Arg(self.bare(self.device(holder)))]), "backend")

    def call(self, rule: RewriteRule, updated: cst.Call, args: list[cst.Arg]) -> cst.Call:
        """``updated`` calling ``rule.to`` with ``args``; the availability check is remembered as such."""
        new = updated.with_changes(func=self.torch(rule.to), args=args)
        if rule.to.endswith(".is_available"):
            self.tag(new, "available")
        return new

    def available(self, rule: RewriteRule) -> cst.BaseExpression:
        return self.tag(cst.Call(self.torch(rule.to)), "available")

    def guarded(self, call: cst.BaseExpression, test: cst.BaseExpression, fallback: str) -> cst.IfExp:
        """``(call if <accelerator available> else fallback)``."""
        return self.tag(cst.IfExp(test=test, body=call, orelse=self.torch(fallback), lpar=[cst.LeftParen()],
                                  rpar=[cst.RightParen()]), "guarded")

    def guard_statement(self, test: cst.BaseExpression, line: cst.SimpleStatementLine) -> cst.If:
        """``if <accelerator available>:`` around a statement line, keeping its comments."""
        body = cst.IndentedBlock([line.with_changes(leading_lines=())], indent=self.indent)
        return self.tag(cst.If(test=test, body=body, leading_lines=line.leading_lines), "guard")

    def finished_type(self, value: cst.BaseExpression) -> cst.Attribute:
        """``torch.device(value).type``: the device type of a device string."""
        return cst.Attribute(cst.Call(self.torch("torch.device"), [cst.Arg(value)]), cst.Name("type"))
