"""Signatures in Python stub syntax, ``"(params) -> return"``, one string per overload.

Sources, best first: the stubs torch ships (``torch/_C/*.pyi`` for C bindings: ``torch.X``
builtins, ``TensorBase`` methods, ``torch._C._nn``...; ``.pyi`` files beside Python modules such
as ``torch/nn/functional.pyi``), ``typing.get_overloads`` and ``inspect.signature`` (Python
objects), and aten schemas (``torch.ops.aten`` overloads, and C bindings without a stub).
Defaults that are not literals are written ``...``; annotations that are not valid expressions
are dropped, so every string parses with ``ast.parse("def f" + sig + ": ...")``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import keyword
import re
import typing
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import torch
import typing_extensions

from codegen.signatures import P, Param, Signature, from_arguments

_C_STUBS = Path(torch.__file__).parent / "_C"
C_INIT = _C_STUBS / "__init__.pyi"  # also stubs torch._C builtins that say their module is ``torch``
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}|<")


class _Stub(typing.NamedTuple):
    functions: dict[str, list[ast.FunctionDef]]
    classes: dict[str, dict[str, list[ast.FunctionDef]]]


@cache
def _stub(path: Path | None) -> _Stub:
    """Top-level functions and class methods of the stub at ``path`` (empty when absent)."""
    functions: dict[str, list[ast.FunctionDef]] = {}
    classes: dict[str, dict[str, list[ast.FunctionDef]]] = {}
    if path is not None and path.exists():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ClassDef):
                methods = classes.setdefault(node.name, {})
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        methods.setdefault(item.name, []).append(item)
    return _Stub(functions, classes)


def c_stub(module: str) -> Path | None:
    """The ``torch/_C`` stub describing C objects whose ``__module__`` is ``module``."""
    if module in ("torch", "torch._C._VariableFunctions"):
        return _C_STUBS / "_VariableFunctions.pyi"
    if module == "torch._C":
        return C_INIT
    if module.startswith("torch._C._"):
        return _C_STUBS / f"{module.split('.')[2]}.pyi"
    return None


@cache
def python_stub(module: str) -> Path | None:
    """The ``.pyi`` torch ships beside a Python module (``torch/nn/functional.pyi``), if any."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    path = Path(spec.origin).with_suffix(".pyi")
    return path if path.exists() else None


def from_stub_function(path: Path | None, name: str) -> list[Signature]:
    return _render_defs(_stub(path).functions.get(name, []))


def from_stub_method(cls: type, name: str) -> list[Signature]:
    """Signatures of ``cls.name`` from the stub of its class (``TensorBase``, ``Generator``...)."""
    return _render_defs(_stub_class(cls).get(name, []))


def from_stub_class(cls: type) -> list[Signature]:
    """Constructor signatures of a stubbed class, without ``self`` and return."""
    methods = _stub_class(cls)
    return _render_defs(methods.get("__init__") or methods.get("__new__") or [], constructor=True)


def _stub_class(cls: type) -> dict[str, list[ast.FunctionDef]]:
    """The stubbed methods of ``cls``, from its module's stub; C classes may be stubbed in
    ``torch/_C/__init__.pyi`` whatever module they name (``torch.Stream`` says ``torch``)."""
    module = cls.__module__
    paths = [python_stub(module)]
    if module == "torch" or module.startswith("torch._C"):
        paths += [c_stub(module), C_INIT]
    for path in paths:
        if path is not None and (methods := _stub(path).classes.get(cls.__name__)):
            return methods
    return {}


def unique(signatures: Iterable[Signature]) -> list[Signature]:
    """Distinct signatures (by text), first occurrences in order."""
    first: dict[str, Signature] = {}
    for signature in signatures:
        first.setdefault(str(signature), signature)
    return list(first.values())


def _render_defs(defs: list[ast.FunctionDef], constructor: bool = False) -> list[Signature]:
    return unique(
        from_arguments(node.args, None if constructor else node.returns, skip=1 if constructor else 0)
        for node in defs
        if not any(_decorator(d) in ("property", "setter", "deleter") for d in node.decorator_list)
    )


def _decorator(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def from_python(obj: Any, constructor: bool = False) -> list[Signature]:
    """Signatures of a Python callable: its ``@overload``s when registered, else ``inspect``."""
    func = getattr(obj, "__func__", obj)
    try:
        variants = list(typing_extensions.get_overloads(func)) if not constructor else []
    except Exception:  # noqa: BLE001 - objects that are no functions have no overloads
        variants = []
    out: list[Signature] = []
    for target in variants or [obj]:
        try:
            sig = inspect.signature(target)
        except (ValueError, TypeError):
            continue
        params = tuple(
            Param(p.name, p.kind, _annotation(p.annotation), None if p.default is p.empty else _default(p.default))
            for p in sig.parameters.values()
        )
        returns = None
        if not constructor and sig.return_annotation is not sig.empty:
            returns = "None" if sig.return_annotation is None else _annotation(sig.return_annotation)
        out.append(Signature(params, returns))
    return unique(out)


def _annotation(annotation: Any) -> str | None:
    if annotation is inspect.Parameter.empty or annotation is None:
        return None  # None: a runtime placeholder (BroadcastingList2[int] evaluates to None)
    return _expression(annotation if isinstance(annotation, str) else inspect.formatannotation(annotation))


@cache
def _expression(text: str) -> str | None:
    """``text`` when it is a valid, address-free Python expression."""
    if _ADDRESS.search(text):
        return None
    try:
        ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    return text


def _default(value: Any) -> str:
    text = repr(value)
    try:
        if type(ast.literal_eval(text)) is type(value):
            return text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    return "..."


def from_schema(schema: Any, self_name: str = "self") -> Signature:
    """A ``torch._C.FunctionSchema`` in stub syntax (``self`` renamed to ``self_name``)."""
    params: list[Param] = []
    for arg in schema.arguments:
        name = self_name if arg.name == "self" else arg.name
        params.append(
            Param(
                f"{name}_" if keyword.iskeyword(name) else name,
                P.KEYWORD_ONLY if arg.kwarg_only else P.POSITIONAL_OR_KEYWORD,
                _annotation(str(arg.real_type)),
                _default(arg.default_value) if arg.has_default_value() else None,
            )
        )
    arguments, _, results = str(schema).partition(" -> ")
    if "..." in arguments:
        params.append(
            Param("kwargs", P.VAR_KEYWORD)
            if params and params[-1].kind is P.KEYWORD_ONLY
            else Param("args", P.VAR_POSITIONAL)
        )
    returns = [_annotation(str(r.real_type)) or "Any" for r in schema.returns]
    ret = "None" if not returns else returns[0] if len(returns) == 1 else f"tuple[{', '.join(returns)}]"
    return Signature(tuple(params), "Any" if "..." in results else ret)
