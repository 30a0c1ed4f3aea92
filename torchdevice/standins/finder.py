"""The ``sys.meta_path`` finder that serves the stand-in packages (``torchdevice/standins/packages/``).

It sits last on ``sys.meta_path``, so it is asked only for names no other finder found: a real
``flash_attn`` that is installed is always the one imported. A submodule the stand-in lacks raises
:class:`ModuleNotFoundError` naming it and the torch equivalent (:func:`.missing.explain`).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGES_DIR = Path(__file__).resolve().parent / "packages"


class StandinFinder:
    """Finds ``flash_attn``, ``xformers``, ``apex`` (the generated table's packages) in ``PACKAGES_DIR``."""

    def __init__(self, packages: Iterable[str]):
        self.packages = frozenset(packages)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top not in self.packages:
            return None
        if fullname == top:
            init = PACKAGES_DIR / top / "__init__.py"
            return importlib.util.spec_from_file_location(top, init, submodule_search_locations=[str(init.parent)])
        parent = sys.modules.get(top)
        if parent is None or not is_standin(parent):
            return None  # a submodule of the real package: not ours to answer
        from torchdevice.standins.missing import explain

        raise ModuleNotFoundError(explain(fullname), name=fullname)


def is_standin(module: ModuleType) -> bool:
    """Whether ``module`` is one of the stand-ins (not the real package)."""
    origin = getattr(getattr(module, "__spec__", None), "origin", None)
    return origin is not None and Path(origin).is_relative_to(PACKAGES_DIR)
