"""Which torch releases have the API the rewritten code uses, read from each release's own sources.

``python tests/rewrite/torch_api.py`` fetches the torch wheels of ``RELEASES`` (``pip download --no-deps``
into ``.bench/torch-wheels``, never installed), reads each one's Python sources and ``torch/_C`` stubs
with ``ast``, and writes ``torch-api.json``: for every release, whether each API the rewrites write
(``torch.accelerator.synchronize``, ``torch.Stream.__enter__``, keyword parameters as
``torch.amp.custom_fwd(device_type)``) is there. ``test_torch_api`` checks ``REQUIRES_TORCH`` against it,
and checks this reading against the installed torch.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "torch-api.json"
WHEELS = HERE.parents[1] / ".bench" / "torch-wheels"
RELEASES = ("2.6.0", "2.7.0", "2.8.0", "2.9.0", "2.10.0", "2.11.0", "2.12.0", "2.13.0")
PLATFORMS = ("macosx_11_0_arm64", "macosx_14_0_arm64")
"""The smallest wheels (no CUDA libraries); the Python sources are the same on every platform."""

_API = re.compile(r"(?P<name>[\w.]+)(?:\((?P<param>\w+)\))?")


class TorchSource:
    """The Python files and ``_C`` stubs of one torch release, read on demand (``read(path)`` -> text or None)."""

    def __init__(self, read: Callable[[str], str | None]) -> None:
        self.read = read

    @classmethod
    def wheel(cls, path: Path) -> TorchSource:
        archive = zipfile.ZipFile(path)
        names = set(archive.namelist())
        return cls(lambda p: archive.read(p).decode() if p in names else None)

    @classmethod
    def directory(cls, root: Path) -> TorchSource:
        """An installed torch: ``root`` is the folder holding the ``torch`` package."""
        return cls(lambda p: (root / p).read_text() if (root / p).is_file() else None)

    @cache  # noqa: B019 - one reader per release, kept for the whole run
    def module(self, dotted: str) -> tuple[ast.Module, bool] | None:
        """The module's tree, and whether it is a package (``__init__``)."""
        base = dotted.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py", f"{base}.pyi", f"{base}/__init__.pyi"):
            text = self.read(path)
            if text is not None:
                return ast.parse(text), "__init__" in path
        return None

    def has(self, api: str) -> bool:
        """Is ``api`` (``torch.a.b``, ``torch.a.b(param)``, ``torch.Class.method``) in this release?"""
        found = _API.fullmatch(api)
        assert found is not None, api
        parts = found["name"].split(".")
        for split in range(len(parts) - 1, 0, -1):
            module = self.module(".".join(parts[:split]))
            if module is not None:
                node = self._find(".".join(parts[:split]), *module, parts[split:], set())
                break
        else:
            return False
        if node is None or found["param"] is None:
            return node is not None
        return found["param"] in _parameters(node)

    def _find(self, dotted: str, module: ast.Module, package: bool, path: list[str], seen: set[str]) -> ast.AST | None:
        """The definition of ``path`` in ``module``, following imports (``from .memory import x``,
        ``from torch._C import *``) and classes (``Stream.__enter__``)."""
        if dotted in seen:
            return None
        seen.add(dotted)
        name, rest = path[0], path[1:]
        for node in module.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return _member(node, rest)
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and name in _targets(node) and not rest:
                return node
            if isinstance(node, ast.ImportFrom):
                source = _absolute(dotted, package, node)
                for alias in node.names:
                    if (alias.asname or alias.name) == name or alias.name == "*":
                        inner = self.module(source) if source.startswith("torch") else None
                        if inner is None:
                            if alias.name != "*" and not rest:
                                return node  # bound from outside torch (math.nan)
                            continue
                        found = self._find(source, *inner, [alias.name if alias.name != "*" else name, *rest], seen)
                        if found is not None:
                            return found
        for node in module.body:  # definitions under `if TYPE_CHECKING:`, `try:` and the like
            if isinstance(node, (ast.If, ast.Try)):
                inner = ast.Module(body=[s for block in _blocks(node) for s in block], type_ignores=[])
                found = self._find(dotted, inner, package, path, seen - {dotted})
                if found is not None:
                    return found
        return None


def _blocks(node: ast.If | ast.Try) -> list[list[ast.stmt]]:
    if isinstance(node, ast.If):
        return [node.body, node.orelse]
    return [node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)]


def _member(node: ast.AST, rest: list[str]) -> ast.AST | None:
    for name in rest:
        if not isinstance(node, ast.ClassDef):
            return None
        node = next((n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
                     or isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name),
                    None)
        if node is None:
            return None
    return node


def _targets(node: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _absolute(dotted: str, package: bool, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` in module ``dotted`` (a package's ``__init__`` or not) imports from."""
    if not node.level:
        return node.module or ""
    parts = dotted.split(".") if package else dotted.split(".")[:-1]
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _parameters(node: ast.AST) -> set[str]:
    """Parameter names of a function, or of a class's ``__init__``/``__new__`` (every overload)."""
    functions = [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else [
        n for n in getattr(node, "body", []) if isinstance(n, ast.FunctionDef) and n.name in ("__init__", "__new__")]
    return {a.arg for f in functions for a in (*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs)}


def wheel(release: str) -> Path:
    """The torch wheel of ``release`` (downloaded once)."""
    found = sorted(WHEELS.glob(f"torch-{release}-*.whl"))
    for platform in PLATFORMS:
        if found:
            break
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
                        "--platform", platform, "--python-version", "3.11", f"torch=={release}", "-d", str(WHEELS)],
                       check=False)
        found = sorted(WHEELS.glob(f"torch-{release}-*.whl"))
    if not found:
        raise SystemExit(f"cannot download torch=={release}")
    return found[0]


def main() -> None:
    from torchdevice_generated.rewrite_rules import RULES

    from torchdevice.rewrite.forms import apis

    needed = sorted(apis(RULES))
    releases = {release: {api: TorchSource.wheel(wheel(release)).has(api) for api in needed} for release in RELEASES}
    DATA.write_text(json.dumps({"apis": needed, "releases": releases}, indent=1) + "\n")
    for release, found in releases.items():
        missing = [api for api, present in found.items() if not present]
        print(f"torch {release}: {'everything' if not missing else 'missing ' + ', '.join(missing)}")


if __name__ == "__main__":
    main()
