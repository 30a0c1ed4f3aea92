"""Read one module (Python's ``ast`` through the rewriter's parser; nothing imported or executed) and say
what will not run on the target and what will run differently there.

Names are resolved through the module's imports and aliases (``import torch.nn.functional as F``,
``from torch import cuda``), in the order Python binds them. A construct is *guarded* when the code has a
way around it: inside the body of a ``try`` whose handlers catch its failure (``ImportError``,
``Exception``, a bare ``except``...), or under an ``if``/``else`` whose test does not mention CUDA (under the
runtime, ``torch.cuda.is_available()`` and ``device == "cuda"`` are true, so they guard nothing).
A guarded blocker is a warning.

Why ``ast`` and not libcst: nothing is rewritten, so the concrete syntax tree buys nothing, and libcst's
parse with positions costs about 30 times as much (timm: minutes instead of seconds on two cores).
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from torchdevice.check import knowledge
from torchdevice.rewrite.outline import parse_ast

Severity = Literal["blocker", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("blocker", "warning", "info")

CATCHES_IMPORT = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError"})
CATCHES_CALL = frozenset({"Exception", "BaseException", "RuntimeError", "NotImplementedError", "AttributeError"})
DEVICE = re.compile(r"cuda(:\d+)?")
EXTENSION_LOADS = ("torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline")
WIDE = frozenset({"torch.float64", "torch.double", "torch.complex128", "torch.cdouble"})
"""The names of the dtypes MPS has no tensors of (see :mod:`torchdevice.runtime.hosted`)."""


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    column: int
    name: str
    severity: Severity
    kind: str
    """What it is about: ``import``, ``extension``, ``cuda-api``, ``device``, ``op``, ``dtype``."""
    message: str
    todo: str = ""
    """What to do (blockers and warnings)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_source(source: str, path: str, target: str) -> list[Finding]:
    """The findings of one module's source, in line order; raises ``SyntaxError``."""
    checker = _Checker(path, target, source)
    checker.visit(parse_ast(source))
    return sorted(checker.findings, key=lambda f: (f.line, f.column))


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, target: str, source: str) -> None:
        self.path, self.target, self.source = path, target, source
        self.lines: list[str] | None = None
        self.device = "mps" if target == "mps-sim" else target
        self.aliases: dict[str, str] = {}
        self.guards: list[tuple[str, frozenset[str]]] = []
        """Enclosing guards, innermost last: ``("try", names caught)``, ``("if", ...)`` or ``("none", ...)``."""
        self.findings: list[Finding] = []

    # -- guards ------------------------------------------------------------------------------------

    def visit_Try(self, node: ast.Try) -> None:
        self.guarded(("try", frozenset(_caught(node))), node.body)
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    visit_TryStar = visit_Try  # type: ignore[assignment]  # except* (Python 3.11)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        guard: tuple[str, frozenset[str]] = ("none" if _about_cuda_or_main(node.test) else "if", frozenset())
        self.guarded(guard, node.body)
        self.guarded(guard, node.orelse)

    def guarded(self, guard: tuple[str, frozenset[str]], body: list[ast.stmt]) -> None:
        self.guards.append(guard)
        for statement in body:
            self.visit(statement)
        self.guards.pop()

    def guard(self, catches: frozenset[str]) -> str | None:
        """How the current node is guarded against a failure that ``catches`` would catch, if it is."""
        for kind, caught in reversed(self.guards):
            if kind == "if":
                return "it runs only under an `if`"
            if kind == "try" and (not caught or caught & catches):
                return f"a `try` catches {', '.join(sorted(caught & catches)) or 'everything'} around it"
        return None

    # -- annotations name types, they run nothing --------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for part in (*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d), *node.body):
            self.visit(part)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    # -- imports -----------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname is not None:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top
            self.imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or node.module is None:
            return
        module, reported = node.module, False
        for alias in node.names:
            if alias.name == "*":
                self.imported(node, module)
                return
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            if knowledge.package(f"{module}.{alias.name}") != knowledge.package(module):  # from apex import amp
                self.imported(node, f"{module}.{alias.name}")
            elif not reported:
                reported = self.imported(node, module)

    def imported(self, node: ast.AST, module: str) -> bool:
        package = knowledge.package(module)
        if package is None:
            return False
        if package.policy == "standin":
            self.add(node, package.module, "info", "import", f"CUDA-only package with a stand-in: {package.why}")
            return True
        if package.policy == "truth":  # the table's instead: what the package does, told the truth
            self.add(node, package.module, "info", "import",
                     f"chooses its backend by probing CUDA, and is told the truth since {package.why}: "
                     f"{package.instead}")
            return True
        guarded = self.guard(CATCHES_IMPORT)
        if guarded:
            self.add(node, package.module, "warning", "import",
                     f"CUDA-only package, guarded ({guarded}): {package.why}; the program goes without it",
                     package.instead)
        else:
            self.add(node, package.module, "blocker", "import",
                     f"CUDA-only package without a stand-in: {package.why}", package.instead)
        return True

    # -- names -------------------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.qualified(node)
        if name is None:
            self.visit(node.value)
        else:
            self.named(node, name)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases:
            self.named(node, self.aliases[node.id])

    def qualified(self, node: ast.expr) -> str | None:
        dotted = _dotted(node)
        if dotted is None:
            return None
        first, _, rest = dotted.partition(".")
        if first not in self.aliases:
            return None
        return f"{self.aliases[first]}.{rest}" if rest else self.aliases[first]

    def named(self, node: ast.AST, name: str) -> None:
        if name.startswith(("torch.cuda.", "torch.backends.cuda.")):
            entry = knowledge.cuda_entry(name)
            if entry is not None and entry.policy == "unsupported":
                guarded = self.guard(CATCHES_CALL)
                self.add(node, entry.name, "warning" if guarded else "blocker", "cuda-api",
                         f"refused on {self.device}: {entry.why}" + (f" (guarded: {guarded})" if guarded else ""),
                         "run this part eagerly without it on this target (or guard it with a try)")
            elif entry is not None:
                self.add(node, entry.name, "info", "cuda-api", f"emulated on {self.device} ({entry.does})")
            return
        if name in WIDE and self.device == "mps":
            self.wide(node, name)
            return
        call = knowledge.missing(name, self.target)
        if call is not None:
            self.missing_call(node, call)
        if name == "torch.utils.cpp_extension.CUDAExtension":
            self.extension(node, name, "builds a CUDA extension: nvcc and a CUDA toolkit are needed")

    def missing_call(self, node: ast.AST, call: knowledge.MissingCall, receiver: str = "") -> None:
        route = "MLX (else the CPU)" if call.mlx else "the CPU"
        ops = ", ".join(f"aten::{op}" for op in call.ops)
        when = "" if call.always else " for some arguments"
        self.add(node, call.name, "info" if receiver or not call.always else "warning", "op",
                 f"{receiver}falls back to {route} on {self.device}{when}: no {self.device.upper()} kernel for {ops}",
                 "" if receiver else "fine for occasional calls; in a hot loop, a supported op is faster")

    def wide(self, node: ast.AST, name: str, receiver: str = "") -> None:
        self.add(node, name, "info", "dtype", f"{receiver}float64 and complex128 tensors on the device are kept by "
                 "the host on MPS, which has none: each op on them runs on the CPU (reported as a fallback)")

    def extension(self, node: ast.AST, name: str, why: str) -> None:
        guarded = self.guard(CATCHES_IMPORT | CATCHES_CALL)
        todo = "use the extension's PyTorch (or CPU) implementation on this target"
        if guarded:
            self.add(node, name, "warning", "extension", f"{why} (guarded: {guarded})", todo)
        else:
            self.add(node, name, "blocker", "extension", why, todo)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        name = self.qualified(func)
        if name in EXTENSION_LOADS and _builds_cuda(node):
            self.extension(node, name, "compiles CUDA sources (.cu, cuda_sources=): nvcc and a CUDA toolkit are needed")
        if not isinstance(func, ast.Attribute) or (name is not None and name.startswith("torch")):
            return
        if func.attr == "cuda":
            self.add(func, ".cuda()", "info", "device", f"moves to {self.device}, the device `cuda` stands for")
        elif func.attr in ("double", "cdouble") and self.device == "mps":
            self.wide(func, f".{func.attr}()", receiver="if the receiver is a device tensor: ")
        elif func.attr in knowledge.tensor_methods(self.target):
            call = knowledge.missing(f"torch.Tensor.{func.attr}", self.target)
            assert call is not None
            self.missing_call(func, call, receiver="if the receiver is a tensor: ")

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if DEVICE.fullmatch(node.value):
            self.add(node, repr(node.value), "info", "device", f"means {self.device}: `cuda` stands for the target")
        elif node.value == "nccl":
            self.add(node, "'nccl'", "info", "device", "the NCCL backend runs on gloo")

    # -- findings ----------------------------------------------------------------------------------

    def add(self, node: ast.AST, name: str, severity: Severity, kind: str, message: str, todo: str = "") -> None:
        line, offset = node.lineno, node.col_offset  # type: ignore[attr-defined]
        if self.lines is None:
            self.lines = self.source.splitlines()
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        column = len(text.encode()[:offset].decode(errors="replace")) + 1  # ast counts UTF-8 bytes
        self.findings.append(Finding(self.path, line, column, name, severity, kind, message, todo))


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a chain of names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        value = _dotted(node.value)
        return f"{value}.{node.attr}" if value is not None else None
    return None


def _about_cuda_or_main(test: ast.expr) -> bool:
    """Whether an ``if`` test asks about CUDA (``torch.cuda.*``, ``x.is_cuda``, ``"cuda"``: true under the
    runtime) or is ``__name__ == "__main__"``; a program's own flags (``use_cuda_graph``) are not about CUDA."""
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute) and (node.attr in ("cuda", "is_cuda") or node.attr.startswith("cuda")):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                (DEVICE.fullmatch(node.value) or node.value in ("nccl", "__main__")):
            return True
        if isinstance(node, ast.Name) and node.id == "__name__":
            return True
    return False


def _caught(node: ast.Try) -> set[str]:
    """Exception names the handlers catch; empty for a bare ``except`` (it catches everything)."""
    names: set[str] = set()
    for handler in node.handlers:
        if handler.type is None:
            return set()
        for item in handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]:
            dotted = _dotted(item)
            if dotted is not None:
                names.add(dotted.rpartition(".")[2])
    return names or {"?"}


def _builds_cuda(node: ast.Call) -> bool:
    if any(k.arg == "cuda_sources" for k in node.keywords):
        return True
    for value in (*node.args, *(k.value for k in node.keywords)):
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        if any(isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value.endswith((".cu", ".cuh"))
               for v in items):
            return True
    return False
