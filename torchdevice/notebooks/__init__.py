"""Running Jupyter notebooks under the runtime: headless (``execute``: ``torchdevice run NOTEBOOK.ipynb``), as an
installed Jupyter kernel (``kernelspec``: ``torchdevice kernel install``) and in a running session
(``extension``: ``%load_ext torchdevice``). Reading notebooks as sources (``check``, ``rewrite``) is
:mod:`torchdevice.source.notebooks`.

Jupyter's packages (``nbclient``, ``nbformat``, ``jupyter_client``, ``ipykernel``) are the optional extra
``notebook`` of the distribution, imported only here and only when used (:func:`require`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRA = "pip install 'torchdevice-toolkit[notebook]'"


class MissingExtra(ImportError):
    """A Jupyter package the notebook commands need is not installed; the message says how to install it."""


def require(name: str) -> ModuleType:
    """Import ``name`` (one of Jupyter's packages), or raise MissingExtra naming the extra to install."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingExtra(f"notebooks need the package {(exc.name or name).split('.')[0]}, which is not "
                           f"installed: {EXTRA}") from None
