"""``torchdevice run NOTEBOOK.ipynb``: every cell in order through a real Jupyter kernel (``nbclient``), as
``jupyter nbconvert --to notebook --execute`` runs it, and the executed notebook written out.

The kernel is ipykernel on this Python, started by ``jupyter_client`` with this process's environment, which
holds ``TORCHDEVICE_INSTALL`` once the runtime is installed here (:mod:`torchdevice.runtime.processes`): the
kernel installs the runtime with the same target and options as soon as the notebook imports torch, and joins
the report of ``--report``. Its working directory is the notebook's, as in Jupyter. The notebook's own
kernelspec (``metadata.kernelspec``) is not used: the kernel is always this Python's.

The executed notebook (outputs, execution counts) is written whole (:mod:`torchdevice.atomic`) to the given path,
by default beside the notebook as nbconvert names it, ``NAME.nbconvert.ipynb``; also when a cell fails, with the
outputs up to the failing cell, as a record of the run. A failing cell stops the run (later cells are not run, as
in nbconvert): :class:`CellFailed` carries its number (among all cells, from 1) and its traceback.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from torchdevice import atomic
from torchdevice.notebooks import require
from torchdevice.source import files, notebooks

DISPLAY_NAME = "Python 3 (torchdevice)"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class CellFailed(Exception):
    """A cell raised; ``str()`` is its traceback (without terminal colours)."""

    def __init__(self, cell: int, traceback: str) -> None:
        super().__init__(traceback)
        self.cell = cell


def default_output(path: Path) -> Path:
    """Where the executed notebook goes by default: ``NAME.nbconvert.ipynb`` beside it, as nbconvert writes it."""
    return path.with_name(f"{path.name.removesuffix(notebooks.SUFFIX)}.nbconvert{notebooks.SUFFIX}")


def kernel_command() -> list[str]:
    """The command that starts an ipykernel on this Python (``{connection_file}``: Jupyter's placeholder)."""
    return [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]


def load(path: Path) -> Any:
    """The notebook at ``path`` (an ``nbformat`` node), read before any kernel starts. Raises ``files.Unreadable``
    (a bad notebook, said as ``check`` and ``rewrite`` say it), MissingExtra."""
    data, _ = files.read(path)
    notebooks.read(path, data)
    nbformat = require("nbformat")
    require("nbclient")
    require("ipykernel")
    try:
        return nbformat.reads(data.decode("utf-8-sig"), as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat's validation errors have no common class
        raise notebooks.NotebookError(f"{path}: not a notebook: {exc}") from None


def execute(document: Any, path: Path, output: Path) -> int:
    """Run every code cell of ``document`` (:func:`load` read it from ``path``) in order, in ``path``'s directory,
    and write the executed notebook to ``output``; the number of code cells run. Raises CellFailed."""
    nbclient = require("nbclient")
    failed: list[int] = []
    client = nbclient.NotebookClient(document, km=_kernel_manager(), timeout=None, allow_errors=False,
                                     resources={"metadata": {"path": str(path.resolve().parent)}},
                                     on_cell_error=lambda cell, cell_index, execute_reply: failed.append(cell_index))
    try:
        client.execute(cleanup_kc=True)  # the kernel ends, writing its part of the report, before this process
    except nbclient.exceptions.CellExecutionError as exc:
        raise CellFailed(failed[-1] + 1 if failed else 0, _ANSI.sub("", str(exc)).strip()) from None
    finally:
        text = require("nbformat").writes(document)
        atomic.write(output, text if text.endswith("\n") else text + "\n")
    return sum(1 for cell in document.cells if cell.cell_type == "code")


def _kernel_manager() -> Any:
    """A kernel manager that starts ipykernel on this Python, whatever kernelspecs are installed."""
    kernelspec = require("jupyter_client.kernelspec")
    manager = require("jupyter_client.manager")

    class ThisPython(kernelspec.KernelSpecManager):  # type: ignore[misc, name-defined]
        def get_kernel_spec(self, kernel_name: str) -> Any:
            return kernelspec.KernelSpec(argv=kernel_command(), display_name=DISPLAY_NAME, language="python")

    return manager.KernelManager(kernel_name="torchdevice", kernel_spec_manager=ThisPython())
