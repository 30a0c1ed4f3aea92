"""The catalog's view of the installed release: tests that compare the installed torch with the scanned facts compare
it with its own release's (``catalog/scanned/`` for the catalog's release, ``catalog/releases/`` for another known
one); on a release the catalog does not know they skip, saying so."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torchdevice_generated
from torchdevice_generated import TORCH_VERSION

from codegen.scan import release as scanned_release
from torchdevice import releases
from torchdevice.releases import release

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = next((v for v in (TORCH_VERSION, *scanned_release.known()) if release(v) == release()), None)
"""The known release (its scanned version) the installed torch is; None if the catalog does not know it."""

scanned_here = pytest.mark.skipif(release() != release(TORCH_VERSION),
                                  reason=f"compares this torch with facts only torch {TORCH_VERSION}'s files give")
known_here = pytest.mark.skipif(INSTALLED is None,
                                reason=f"torch {torch.__version__} is not a release the catalog has the facts of")


@contextlib.contextmanager
def installed_scanned() -> Iterator[Path]:
    """The folder of the installed release's scanned files (its view, for a release other than the catalog's)."""
    assert INSTALLED is not None
    if INSTALLED == TORCH_VERSION:
        yield ROOT / "catalog" / "scanned"
    else:
        with scanned_release.view(INSTALLED) as folder:
            yield folder


def unknown_release(folder: Path, drop: tuple[str, ...] = ()) -> tuple[dict[str, str], str]:
    """The environment of a torchdevice that does not know the installed release (a copy of its generated package in
    ``folder`` whose known releases stop before this one, first on the path, without the files ``drop``; its own
    cache directory), and the newest release it knows."""
    here = releases.release()
    older = [v for v in releases.known().values() if releases.release(v) < here]
    if not older:
        pytest.skip(f"no known release is older than torch {torch.__version__}")
    package = folder / "torchdevice_generated"
    shutil.copytree(Path(torchdevice_generated.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", *drop))
    with (package / "releases.py").open("a", encoding="utf-8") as f:
        f.write(f"\nKNOWN = {tuple(older)!r}\nCHANGES = {{v: c for v, c in CHANGES.items() if v in KNOWN}}\n")
    path = os.pathsep.join(filter(None, (str(folder), os.environ.get("PYTHONPATH"))))
    return {"PYTHONPATH": path, "TORCHDEVICE_CACHE_DIR": str(folder / "cache")}, older[-1]
