"""Per-backend kernel availability of aten overloads, read from torchgen's ``native_functions.yaml``.

Rules, per overload and backend (``cpu``/``cuda``/``mps`` = dispatch keys ``CPU``/``CUDA``/``MPS``):

* the dispatch keys of an overload are those of its ``dispatch:`` section (comma-joined keys split),
  plus ``CPU`` and ``CUDA`` when it has a ``ufunc_inner_loop`` (torchgen generates both kernels), plus
  the keys of its ``structured_delegate`` (recursively); an overload with none of these is
  ``CompositeImplicitAutograd``;
* ``native`` when the backend's key is present, else ``composite`` when a composite key is present
  (CompositeImplicitAutograd, CompositeExplicitAutograd, CompositeExplicitAutogradNonFunctional),
  else ``missing``;
* an overload listed under another's ``autogen:`` is a generated wrapper of that overload:
  ``missing`` where it is missing, else ``composite``;
* an overload absent from the file (TorchScript builtins such as ``add.str``) is ``none``.

A Python-level entry reaching several ops aggregates over their overloads, ``out=`` variants
excluded: ``missing`` if any overload is missing for the backend, else ``native`` if any is native,
else ``composite``; ``none`` when no overload of its ops is in the file.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

BACKENDS = {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS"}
COMPOSITE_KEYS = frozenset(
    {"CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"}
)
NONE = {"cpu": "none", "cuda": "none", "mps": "none"}
_KWONLY = re.compile(r"(?:^|, )\*(?:, |$)")


@dataclass(frozen=True)
class Overload:
    """One aten overload as native_functions.yaml describes it."""

    op: str
    overload: str  # "default" for the unnamed overload, as torch.ops names it
    kernels: dict[str, str]
    tags: frozenset[str]
    is_out: bool


def native_functions_path() -> Path:
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("torchgen is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "packaged/ATen/native/native_functions.yaml"


@lru_cache(maxsize=1)
def native_functions() -> list[dict[str, Any]]:
    """The entries of native_functions.yaml, as parsed."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(native_functions_path().read_text(encoding="utf-8"), Loader=loader)


@lru_cache(maxsize=1)
def overloads() -> dict[tuple[str, str], Overload]:
    """Every overload of native_functions.yaml (autogen'd ones included) by ``(op, overload)``."""
    by_name = {_split(e["func"])[0]: e for e in native_functions()}
    out: dict[tuple[str, str], Overload] = {}
    for name, entry in by_name.items():
        keys = _keys(name, by_name)
        status = {backend: _status(key, keys) for backend, key in BACKENDS.items()}
        out[_key(name)] = Overload(*_key(name), status, _tags(entry), _is_out(_split(entry["func"])[1]))
        wrapped = {backend: "missing" if s == "missing" else "composite" for backend, s in status.items()}
        for generated in filter(None, (g.strip() for g in str(entry.get("autogen", "")).split(","))):
            op, overload = _key(generated)
            is_out = overload == "out" or overload.endswith("_out")
            out.setdefault((op, overload), Overload(op, overload, wrapped, frozenset(), is_out))
    return out


@lru_cache(maxsize=1)
def by_op() -> dict[str, tuple[Overload, ...]]:
    """Overloads grouped by op name, in overload-name order."""
    grouped: dict[str, list[Overload]] = {}
    for key in sorted(overloads()):
        grouped.setdefault(key[0], []).append(overloads()[key])
    return {op: tuple(v) for op, v in grouped.items()}


def functional(ops: list[str]) -> list[Overload]:
    """The non-``out=`` overloads of ``ops`` known to native_functions.yaml."""
    return [o for op in ops for o in by_op().get(op, ()) if not o.is_out]


def aggregate(ops: list[str]) -> dict[str, str]:
    """Kernel status of an entry reaching ``ops`` (see the module docstring)."""
    found = functional(ops)
    if not found:
        return dict(NONE)
    result: dict[str, str] = {}
    for backend in BACKENDS:
        statuses = {o.kernels[backend] for o in found}
        result[backend] = next(s for s in ("missing", "native", "composite") if s in statuses)
    return result


def tags(ops: list[str]) -> frozenset[str]:
    """Tags of the ops' overloads; an in-place op without tags (``abs_``) takes its functional op's."""
    found = frozenset(t for o in functional(ops) for t in o.tags)
    inplace = [op[:-1] for op in ops if op.endswith("_") and not op.endswith("__")]
    return found or (tags(inplace) if inplace else found)


def _split(func: str) -> tuple[str, str]:
    """``"add.Tensor(Tensor self, ...) -> Tensor"`` -> ``("add.Tensor", "Tensor self, ...")``."""
    name, _, rest = func.partition("(")
    return name.strip(), rest.rpartition(") ->")[0]


def _key(name: str) -> tuple[str, str]:
    op, _, overload = name.partition(".")
    return op, overload or "default"


def _is_out(args: str) -> bool:
    """An ``out=`` variant writes keyword-only tensors: ``*, Tensor(a!) out``."""
    parts = _KWONLY.split(args, maxsplit=1)
    return len(parts) == 2 and "!" in parts[1]


def _tags(entry: dict) -> frozenset[str]:
    value = entry.get("tags", ())
    return frozenset([value] if isinstance(value, str) else value)


def _keys(name: str, by_name: dict[str, dict]) -> frozenset[str]:
    entry = by_name[name]
    keys = {k.strip() for joined in entry.get("dispatch", {}) for k in joined.split(",")}
    if "ufunc_inner_loop" in entry:
        keys |= {"CPU", "CUDA"}
    delegate = entry.get("structured_delegate")
    if delegate:
        keys |= _keys(delegate, by_name)
    if not keys and "dispatch" not in entry:
        keys.add("CompositeImplicitAutograd")
    return frozenset(keys)


def _status(key: str, keys: frozenset[str]) -> str:
    if key in keys:
        return "native"
    return "composite" if keys & COMPOSITE_KEYS else "missing"
