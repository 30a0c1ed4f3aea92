"""Writing argument lists: moving arguments between positions and keywords, keeping commas right."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from torchdevice.records.rewrite import RewriteRule

_SPACE = cst.SimpleWhitespace(" ")
_NONE = cst.SimpleWhitespace("")


def comma() -> cst.Comma:
    return cst.Comma(whitespace_after=_SPACE)


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name), equal=cst.AssignEqual(_NONE, _NONE))


def with_commas(args: list[cst.Arg], original: Sequence[cst.Arg]) -> list[cst.Arg]:
    """``args`` with a comma after each but the last, which keeps the trailing comma of ``original``."""
    trailing = original[-1].comma if original else cst.MaybeSentinel.DEFAULT
    out = [a if isinstance(a.comma, cst.Comma) else a.with_changes(comma=comma()) for a in args[:-1]]
    return [*out, args[-1].with_changes(comma=trailing)] if args else []


def convert(rule: RewriteRule, args: list[cst.Arg]) -> list[cst.Arg] | None:
    """Move arguments between positions and keywords as ``rule.args`` says; None when impossible."""
    if rule.args == "same":
        return args
    if any(a.star for a in args):
        return None
    positional = [a for a in args if a.keyword is None]
    keywords = {a.keyword.value: a for a in args if a.keyword is not None}
    if rule.args == "keywords":
        if len(positional) > len(rule.params):
            return None
        named = [keyword_arg(rule.params[i], a.value).with_changes(comma=a.comma) for i, a in enumerate(positional)]
        return named + list(keywords.values())
    wanted = rule.params[len(positional) : len(positional) + len(keywords)]
    if set(wanted) != set(keywords):
        return None  # unknown keywords, or a gap that positions cannot express
    return positional + [keywords[p].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT) for p in wanted]
