"""The simulated devices' compiled backend (``backend.cpp``): what torch's C++ asks of a ``PrivateUse1`` backend that a
Python backend cannot answer.

A Python backend registers hooks that answer three questions (built, available, a primary context); torch's C++ asks
more of a device: DDP's reducer pins host memory for it (``find_unused_parameters=True``), ``param.data = tensor``
between the host and it must pass the check torch makes between the host and its own devices (``Module.to`` keeps
each parameter object so on a Mac), storages are resized through it. ``backend.cpp`` answers them, and holds the
device's memory (counted in C++, made without a DLPack round trip).

It is built at first use with the machine's C++ compiler, through torch's ``cpp_extension``, into
``$TORCHDEVICE_BUILD_DIR``, else ``backend/`` in the user cache directory (:func:`torchdevice.cachedir.user_cache_dir`),
one build per torch, Python and source, as DeepSpeed builds its CPU ops; later processes load it. Where it cannot be
built (no compiler, no ``ninja``, no cache directory) or ``TORCHDEVICE_BACKEND=python`` asks for it, the Python backend
stands in, said once at INFO: everything runs but what needs the C++ hooks (see :data:`WITHOUT`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path

import torch

from torchdevice.cachedir import user_cache_dir

log = logging.getLogger("torchdevice")

SOURCE = Path(__file__).with_name("backend.cpp")
BUILD_DIR = "TORCHDEVICE_BUILD_DIR"
CHOICE = "TORCHDEVICE_BACKEND"
"""``python``: never build or load the compiled backend; ``compiled``: fail where it cannot be had."""
WITHOUT = ("DDP with find_unused_parameters=True (pinned host memory for the device), Module.to assigning "
           "param.data (it swaps parameter tensors instead, which DeepSpeed's weak references and bitsandbytes' "
           "int8 parameters do not survive)")
"""What the Python backend cannot give."""

_state: dict[str, object] = {}


def why_not() -> str | None:
    """Why the compiled backend is not used in this process (None: it is), after :func:`load`."""
    return _state.get("why")  # type: ignore[return-value]


def load() -> bool:
    """Whether the compiled backend's ops (``torch.ops.torchdevice_sim``) are loaded, building them first where
    needed; False (said once, at INFO) where the Python backend stands in."""
    if loadable():
        return True
    if os.environ.get(CHOICE) == "compiled":
        raise RuntimeError(f"torchdevice: {CHOICE}=compiled, but the simulated devices' compiled backend cannot be "
                           f"had: {why_not()}")
    if "said" not in _state:
        _state["said"] = True
        log.info("the simulated devices run on the Python backend (%s); without the compiled one: %s",
                 why_not(), WITHOUT)
    return False


def loadable() -> bool:
    """Whether the compiled backend is loaded, building and loading it first where needed (once per process)."""
    if "why" not in _state:
        _state["why"] = _load()
    return _state["why"] is None


def _load() -> str | None:
    """Load (building if needed) the compiled backend; why not, where it cannot be."""
    if os.environ.get(CHOICE) == "python":
        return f"{CHOICE}=python"
    explicit = os.environ.get(BUILD_DIR)
    cache = Path(explicit) if explicit else user_cache_dir()
    if cache is None:
        return "no user cache directory to build it in"
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + torch.__version__.encode() + sys.version.encode()).hexdigest()[:16]
    name = f"torchdevice_sim_{key}"
    directory = cache / name if explicit else cache / "backend" / name
    try:
        from torch.utils import cpp_extension

        directory.mkdir(parents=True, exist_ok=True)
        library = directory / f"{name}{_suffix()}"
        if library.exists():
            torch.ops.load_library(str(library))
        else:
            log.info("building the simulated devices' backend in %s (once, about 20 s)", directory)
            cpp_extension.load(name, [str(SOURCE)], build_directory=str(directory), is_python_module=False,
                               extra_cflags=["-O2"], verbose=False)
    except Exception as exc:  # no compiler, no ninja, a build that failed: the Python backend stands in
        first = str(exc).strip().splitlines()
        return f"it could not be built in {directory}: {type(exc).__name__}: {first[0] if first else ''}"
    return None


def _suffix() -> str:
    return ".dylib" if sys.platform == "darwin" else ".so"
