"""Real code to test on: pinned releases of packages fetched from PyPI as wheels (``pip download --no-deps``, never
installed) and unpacked into ``.bench/corpus`` once."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CACHE = Path(__file__).resolve().parents[2] / ".bench" / "corpus"
PACKAGES = ("transformers==5.23.0", "timm==1.0.31", "accelerate==1.15.0", "diffusers==0.42.1")
"""Releases full of CUDA code that the rewriter and the check are tried on."""


def sources(requirement: str) -> Path:
    """The package's files, unpacked from its wheel (downloaded once; several test processes may ask at once)."""
    name, version = requirement.split("==")
    tree = CACHE / f"{name}-{version}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tree.is_dir():
            fetched = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
                 requirement, "-d", str(CACHE / "wheels")], capture_output=True, text=True, timeout=600)
            wheel = next(iter(sorted((CACHE / "wheels").glob(f"{name}-{version}-*.whl"))), None)
            if fetched.returncode != 0 or wheel is None:
                pytest.fail(f"cannot download {requirement} from PyPI: {fetched.stderr.strip()[-500:]}")
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(f"{tree}.partial", [n for n in archive.namelist() if n.endswith(".py")])
            os.replace(f"{tree}.partial", tree)
    return tree
