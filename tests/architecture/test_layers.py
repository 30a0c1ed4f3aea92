"""The package's layers, read from its import statements (those under ``if TYPE_CHECKING:`` aside, the ones inside
functions included): the device layer at the bottom, the simulated Mac in one package, no circle of imports.

``torchdevice.device`` (what a target is and what its tensors are) stands on the utilities only; ``fallback``,
``simulated``, ``distributed`` and ``standins`` stand on it; ``runtime`` installs them (by name, through
``importlib``, never an import statement of one another); the front (``torchdevice/__init__.py``) and the command
line are on top. The source tools (``rewrite``, ``check``, on ``source``) read files and never the runtime
(``codegen`` importing only the shared records is held in ``tests/codegen/test_generated.py``). Jupyter's packages
(the ``notebook`` extra) are imported by name through ``torchdevice.notebooks.require`` alone.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "torchdevice"
UTILITIES = {"torchdevice.version", "torchdevice.patching", "torchdevice.atomic", "torchdevice.records",
             "torchdevice.cachedir",
             "torchdevice.callers", "torchdevice.reporting"}
RUNTIME_SIDE = {"device", "simulated", "fallback", "distributed", "standins", "runtime"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The modules ``path`` imports (absolute names), leaving out what only type checkers read."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree)
               if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for child in node.body for n in ast.walk(child)}
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            modules = {f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}")}
            found.update(modules)
            if len(modules) < len(node.names):  # names defined in the module itself
                found.add(base)
    return found


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").exists() or path.is_dir()


def _graph(folder: Path) -> dict[str, set[str]]:
    return {_module_name(path): _imports(path) for path in folder.rglob("*.py")}


def _part(module: str) -> str:
    """The part of the package a module belongs to: its subpackage, or itself for a top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def test_the_device_layer_stands_on_the_utilities_alone():
    wrong = {(m, i) for m, imports in _graph(PACKAGE / "device").items() for i in imports
             if i.startswith("torchdevice.") and _part(i) not in UTILITIES | {"torchdevice.device"}}
    assert wrong == set()


def test_nothing_below_the_runtime_imports_it_by_name_or_by_string():
    """The runtime installs the features (fallback, distributed, stand-ins, the simulated devices); none of them, nor
    the device layer, imports the runtime, with an import statement or ``importlib.import_module("...")``."""
    below = {"torchdevice.device", "torchdevice.fallback", "torchdevice.distributed", "torchdevice.standins",
             "torchdevice.simulated", *UTILITIES}
    wrong = {(m, i) for m, imports in _graph(PACKAGE).items() if _part(m) in below
             for i in imports | _imported_by_string(m) if _part(i) == "torchdevice.runtime"}
    assert wrong == set()


def _imported_by_string(module: str) -> set[str]:
    """The modules ``module`` names to ``importlib.import_module`` (string literals and the literal start of
    f-strings)."""
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
            elif isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant):
                found.add(str(first.values[0].value).rstrip("."))
    return found


def test_no_module_below_the_front_imports_the_front():
    graph = _graph(PACKAGE)
    above = ("torchdevice.cli", "torchdevice.__main__", "torchdevice.pytest_plugin")  # the fronts: CLI, plugin
    wrong = {m for m, imports in graph.items() if "torchdevice" in imports and m != "torchdevice"
             and not m.startswith(above)}
    assert wrong == set()


def test_the_parts_of_the_package_import_each_other_in_no_circle():
    edges: dict[str, set[str]] = defaultdict(set)
    for module, imports in _graph(PACKAGE).items():
        for imported in imports:
            if imported.startswith("torchdevice.") and _part(imported) != _part(module):
                edges[_part(module)].add(_part(imported))
    visiting: list[str] = []
    done: set[str] = set()

    def visit(part: str) -> None:
        assert part not in visiting, f"a circle of imports: {' -> '.join([*visiting[visiting.index(part):], part])}"
        if part in done:
            return
        visiting.append(part)
        for nxt in sorted(edges[part]):
            visit(nxt)
        visiting.pop()
        done.add(part)

    for part in sorted(edges):
        visit(part)


def test_the_source_tools_never_import_the_runtime_side():
    wrong = {(m, i) for folder in ("rewrite", "check") for m, imports in _graph(PACKAGE / folder).items()
             for i in imports if i.startswith("torchdevice.") and _part(i).split(".")[1] in RUNTIME_SIDE}
    assert wrong == set()


def test_jupyter_s_packages_are_imported_only_when_a_notebook_command_needs_them():
    jupyter = ("nbclient", "nbformat", "jupyter_client", "jupyter_core", "ipykernel", "IPython", "traitlets")
    wrong = {(m, i) for m, imports in _graph(PACKAGE).items() for i in imports if i.split(".")[0] in jupyter}
    assert wrong == set()


def test_only_the_simulated_mac_and_its_activation_know_the_target_is_simulated():
    """The rest of the runtime asks the target (its storage type, its kernel table), never whether it is simulated."""
    allowed = {PACKAGE / "device" / "target.py", PACKAGE / "runtime" / "activation.py"}
    asking = {str(path.relative_to(ROOT)) for folder in ("device", "fallback", "distributed", "standins", "runtime",
                                                          "reporting")
              for path in (PACKAGE / folder).rglob("*.py") if path not in allowed
              and any(word in code for code in [_code(path)] for word in ("SIMULATED_MPS", ".simulated", "mps-sim",
                                                                          "torchdevice.simulated"))}
    assert asking == set()


def _code(path: Path) -> str:
    """The source without its docstrings and comments (what runs)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            first.value.value = ""
    return ast.unparse(tree)
