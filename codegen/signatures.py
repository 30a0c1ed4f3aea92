"""Signatures as the catalog writes them, in Python stub syntax: ``"(x: Tensor, *, dim: int = 0) -> Tensor"``.

One parser (:func:`parse`) and one renderer (:func:`render`, which is ``inspect.Signature``'s) serve
the scanner that writes them, the loader that validates them and the planner that generates code
from them. Annotations and defaults are kept as source text (``None``: absent; a default that is
not a literal is written ``...``).
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from functools import cache

Kind = inspect._ParameterKind
P = inspect.Parameter

INT_LIKE = re.compile(r"\b(_?int|SymInt|Number|_size)\b")
"""Annotations of parameters that take an integer (a size, where another overload takes a device)."""


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    annotation: str | None = None
    default: str | None = None
    """Source text of the default; ``None`` when the parameter is required."""

    @property
    def positional(self) -> bool:
        return self.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)

    @property
    def variadic(self) -> bool:
        return self.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD)

    @property
    def required(self) -> bool:
        return self.default is None and not self.variadic


@dataclass(frozen=True)
class Signature:
    """One overload: its parameters and return annotation."""

    params: tuple[Param, ...]
    returns: str | None = None

    def __str__(self) -> str:
        return render(self)

    def index(self, name: str) -> int | None:
        """Position of ``name`` among the positional parameters, ``None`` if it is keyword-only or absent."""
        positional = [p.name for p in self.params if p.positional]
        return positional.index(name) if name in positional else None


class _Source(str):
    """Source text that ``inspect`` prints as is (it prints other strings with quotes)."""

    def __repr__(self) -> str:
        return str(self)


def render(signature: Signature) -> str:
    """The stub text of ``signature``: ``/`` and ``*`` where the kinds need them, PEP 8 spacing."""
    params = [
        P(p.name, p.kind,
          annotation=P.empty if p.annotation is None else _Source(p.annotation),
          default=P.empty if p.default is None else _Source(p.default))
        for p in signature.params
    ]
    returns = inspect.Signature.empty if signature.returns is None else _Source(signature.returns)
    return str(inspect.Signature(params, return_annotation=returns, __validate_parameters__=False))


@cache  # half the catalog's signatures repeat another's (torch.abs, torch.Tensor.abs, ...); records are frozen
def parse(text: str) -> Signature:
    """The signature written as ``text``; ``ValueError`` naming the problem when it is not one."""
    try:
        node = ast.parse(f"def f{text}: ...").body[0]
    except SyntaxError as exc:
        raise ValueError(f"not a signature: {text!r} ({exc.msg})") from None
    if not isinstance(node, ast.FunctionDef):
        raise ValueError(f"not a signature: {text!r}")
    return from_arguments(node.args, node.returns)


def from_arguments(args: ast.arguments, returns: ast.expr | None = None, skip: int = 0) -> Signature:
    """The signature of a parsed ``def`` (its ``args`` and ``returns``), without its first ``skip`` parameters."""
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [
        Param(a.arg, P.POSITIONAL_ONLY if i < len(args.posonlyargs) else P.POSITIONAL_OR_KEYWORD,
              _source(a.annotation), _default(d))
        for i, (a, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    if args.vararg:
        params.append(Param(args.vararg.arg, P.VAR_POSITIONAL, _source(args.vararg.annotation)))
    params += [Param(a.arg, P.KEYWORD_ONLY, _source(a.annotation), _default(d))
               for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg:
        params.append(Param(args.kwarg.arg, P.VAR_KEYWORD, _source(args.kwarg.annotation)))
    return Signature(tuple(params[skip:]), _source(returns))


def _source(node: ast.expr | None) -> str | None:
    return ast.unparse(node) if node is not None else None


def _default(node: ast.expr | None) -> str | None:
    """A default's source text: the literal itself, else ``...``."""
    if node is None:
        return None
    try:
        ast.literal_eval(node)
    except ValueError:
        return "..."
    return ast.unparse(node)
