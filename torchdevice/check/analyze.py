"""Read one module (Python's ``ast``; nothing imported or executed) and say what will not run on the target
and what will run differently there.

Names are resolved through the module's imports and aliases (``import torch.nn.functional as F``,
``from torch import cuda``), in the order Python binds them, by the import resolver ``rewrite`` uses too
(``torchdevice.source.names``). A construct is *guarded* when the code has a way around it: inside the body
of a ``try`` whose handlers catch its failure (``ImportError``, ``Exception``, a bare ``except``...), or under
an ``if``/``else`` whose test does not mention CUDA (under the runtime, ``torch.cuda.is_available()`` and
``device == "cuda"`` are true, so they guard nothing). A guarded blocker is a warning.

A module that builds CUDA code is a blocker wherever it does: ``CUDAExtension`` (its name, however it is
imported), and the other builders of ``torch.utils.cpp_extension`` and setuptools (``CppExtension``, ``load``,
``load_inline``, ``Extension``) given CUDA sources (a ``.cu`` or ``.cuh`` string in their arguments, or in a
name assigned one), ``cuda_sources=``, ``extra_cuda_cflags=`` or ``with_cuda=True``.

``may_find`` is the text prefilter: a file none of whose words is one a finding needs is not parsed. Every
finding names a qualified name made of the module's own identifiers (from its imports and attribute chains),
or a string ``"cuda"``/``"nccl"``, so ``words`` holds, for each name the checker looks for, one of its parts
(``cuda`` for ``torch.cuda.*``, ``cpp_extension`` for the extension builders...). The text is read as written:
a word spelled with escape sequences, split across implicitly joined strings or in another Unicode form of the
same identifier is not seen (``tests/check/test_prefilter.py`` holds the prefilter to the parser on real code).

Why ``ast`` and not libcst: nothing is rewritten, so the concrete syntax tree buys nothing, and libcst's
parse with positions costs about 30 times as much (timm: minutes instead of seconds on two cores).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from torchdevice.check import knowledge
from torchdevice.records.check import MissingCall
from torchdevice.source.names import ImportMap, dotted
from torchdevice.source.parsing import parse_ast, split_lines

Severity = Literal["blocker", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("blocker", "warning", "info")

CATCHES_IMPORT = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError"})
CATCHES_CALL = frozenset({"Exception", "BaseException", "RuntimeError", "NotImplementedError", "AttributeError"})
DEVICE = re.compile(r"cuda(:\d+)?")
WIDE_METHODS = ("double", "cdouble")
"""``Tensor`` methods that make float64 and complex128 tensors (see ``WIDE``)."""
CUDA_EXTENSION = "torch.utils.cpp_extension.CUDAExtension"
"""Builds CUDA code, whatever it is given."""
EXTENSION_BUILDERS = frozenset({
    "torch.utils.cpp_extension.CppExtension", "torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline",
    "setuptools.Extension", "setuptools.extension.Extension", "distutils.core.Extension",
    "distutils.extension.Extension",
})
"""Build C++ code, and CUDA code where they are given CUDA sources or options."""
CUDA_OPTIONS = ("cuda_sources", "extra_cuda_cflags", "with_cuda")
"""Keywords of the builders that compile or link CUDA code (unless None, False or empty)."""
CUDA_SOURCES = (".cu", ".cuh")
EXTENSION_WORDS = frozenset({"cpp_extension", "setuptools", "distutils"})
"""A part of each builder's qualified name: a module that names a builder writes it."""
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
WIDE = frozenset({"torch.float64", "torch.double", "torch.complex128", "torch.cdouble"})
"""The names of the dtypes MPS has no tensors of (see :mod:`torchdevice.device.hosted`)."""


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
    cell: int | None = None
    """In a notebook: the number of the code cell ``line`` is in."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@functools.cache
def words(target: str) -> frozenset[bytes]:
    """The words a module with anything to report on ``target`` contains (see the module's docstring)."""
    found = {"cuda", "nccl", *(key.split(".")[0] for key in knowledge.packages()), *EXTENSION_WORDS}
    if target != "cpu":
        found |= {name.rpartition(".")[2] for name in (*knowledge.missing_on_mps(), *WIDE, *WIDE_METHODS)}
    return frozenset(word.encode() for word in found)


def may_find(data: bytes, target: str) -> bool:
    """Whether the text of a module has a word some finding on ``target`` needs (else it is not parsed)."""
    return not words(target).isdisjoint(_IDENTIFIER.findall(data))


def check_source(source: str, path: str, target: str) -> list[Finding]:
    """The findings of one module's source, in line order; raises ``SyntaxError``."""
    return check_tree(parse_ast(source), source, path, target)


def check_tree(tree: ast.Module, source: str, path: str, target: str) -> list[Finding]:
    """The findings of one module parsed as ``tree`` (``parse_ast(source)``), in line order."""
    checker = _Checker(path, target, source)
    checker.visit(tree)
    return sorted(checker.findings, key=lambda f: (f.line, f.column))


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, target: str, source: str) -> None:
        self.path, self.target, self.source = path, target, source
        self.lines: list[str] | None = None
        self.device = {"mps-sim": "mps", "cuda-sim": "cuda:0 (simulated)"}.get(target, target)
        self.imports = ImportMap()
        self.may_build = ".cu" in source
        """Whether the text may name a CUDA source (``.cu``, ``.cuh``)."""
        self.sources: set[str] = set()
        """Names assigned a list (or a name) of CUDA sources."""
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
            self.assigned([node.target], node.value)

    # -- names that hold CUDA sources ----------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        self.assigned(node.targets, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        self.assigned([node.target], node.value)

    def assigned(self, targets: list[ast.expr], value: ast.expr) -> None:
        if self.cuda_sources(value):
            self.sources.update(n.id for target in targets for n in ast.walk(target)
                                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))

    def cuda_sources(self, value: ast.expr) -> bool:
        """Whether ``value`` mentions a CUDA source (``"kernel.cu"``) or a name holding some."""
        return self.may_build and any(
            isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(CUDA_SOURCES) or
            isinstance(node, ast.Name) and node.id in self.sources for node in ast.walk(value))

    def builds_cuda(self, node: ast.Call) -> bool:
        """Whether a builder's call compiles CUDA code: given a CUDA option, or CUDA sources."""
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg in CUDA_OPTIONS and not (
                    isinstance(value, ast.Constant) and value.value in (None, False, "") or
                    isinstance(value, (ast.List, ast.Tuple)) and not value.elts):
                return True
        return any(self.cuda_sources(value) for value in (*node.args, *(k.value for k in node.keywords)))

    # -- imports -----------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        self.imports.add_ast(node)
        for alias in node.names:
            self.imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module, reported = node.module or "", False
        for local, qualified in self.imports.add_ast(node):  # a star import: the module itself
            if local == "*":  # binds the builders it defines
                self.imports.bind(module, [(name.rpartition(".")[2], None) for name in (CUDA_EXTENSION,
                                           *EXTENSION_BUILDERS) if name.rpartition(".")[0] == module])
            if knowledge.package(qualified) != knowledge.package(module):  # from apex import amp
                self.imported(node, qualified)
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
        if self.target in package.runs_on:  # guarded or not: installed, it is imported and its kernels run
            self.add(node, package.module, "warning", "import", f"{package.why}; on {self.target}: {package.cost}",
                     "fine where it is occasional; in a hot loop, keep a PyTorch path for this target")
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
        name = self.imports.resolve_ast(node)
        if name is None:
            self.visit(node.value)
        else:
            self.named(node, name)

    def visit_Name(self, node: ast.Name) -> None:
        name = self.imports.resolve_ast(node)
        if name is not None:
            self.named(node, name)

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
        if name == CUDA_EXTENSION:
            self.extension(node, name, "builds a CUDA extension: nvcc and a CUDA toolkit are needed")

    def missing_call(self, node: ast.AST, call: MissingCall, receiver: str = "") -> None:
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
        name = self.imports.resolve_ast(func)
        if name in EXTENSION_BUILDERS and self.builds_cuda(node):
            self.extension(node, name, "compiles CUDA code (.cu sources, cuda_sources=, extra_cuda_cflags=, "
                                       "with_cuda=True): nvcc and a CUDA toolkit are needed")
        elif isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert") and \
                isinstance(func.value, ast.Name) and any(map(self.cuda_sources, node.args)):
            self.sources.add(func.value.id)  # sources.append("kernel.cu")
        if not isinstance(func, ast.Attribute) or (name is not None and name.startswith("torch")):
            return
        if func.attr == "cuda":
            self.add(func, ".cuda()", "info", "device", f"moves to {self.device}, the device `cuda` stands for")
        elif func.attr in WIDE_METHODS and self.device == "mps":
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
            self.lines = split_lines(self.source)
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        column = len(text.encode()[:offset].decode(errors="replace")) + 1  # ast counts UTF-8 bytes
        self.findings.append(Finding(self.path, line, column, name, severity, kind, message, todo))


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
            name = dotted(item)
            if name is not None:
                names.add(name.rpartition(".")[2])
    return names or {"?"}
