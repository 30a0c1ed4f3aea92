"""The simulated devices' backend (``backend.cpp``): what torch's C++ asks of a ``PrivateUse1`` backend.

Its hooks answer more than whether the device is built and available: DDP's reducer pins host memory for it
(``find_unused_parameters=True``), ``param.data = tensor`` between the host and it must pass the check torch makes
between the host and its own devices (``Module.to`` keeps each parameter object so on a Mac), storages are resized
through it. It holds the devices' memory (counted in C++; a GPU's through CUDA's caching allocator,
``caching_allocator.h``), their device guard and the kernel that computes most ops on the host.

It is built at first use with the machine's C++ compiler, through torch's ``cpp_extension``, into
``$TORCHDEVICE_BUILD_DIR``, else ``backend/`` in the user cache directory (:func:`torchdevice.cachedir.user_cache_dir`),
one build per torch, Python and source, as DeepSpeed builds its CPU ops, said on a terminal and at INFO with the time
it took; later processes load it. A build that failed is remembered there with the compiler's first error, and not
tried again. Where it cannot be had (no compiler, no ``ninja``, no cache directory), no simulated target runs: the
runtime takes the cpu target and says why, once (:func:`torchdevice.runtime.activation.resolve_target`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import time
from pathlib import Path

import torch

from torchdevice.cachedir import user_cache_dir
from torchdevice.logs import say

SOURCE = Path(__file__).with_name("backend.cpp")
HEADERS = (Path(__file__).with_name("caching_allocator.h"),)
"""What ``backend.cpp`` includes of its own (a build is keyed by them too)."""
BUILD_DIR = "TORCHDEVICE_BUILD_DIR"

FAILED = "build-failed.txt"
"""Beside a build that failed: why, so that no later process of the same torch, Python and source builds again."""

_state: dict[str, object] = {}


def why_not() -> str | None:
    """Why the compiled backend is not used in this process (None: it is), after :func:`load`."""
    return _state.get("why")  # type: ignore[return-value]


def library() -> Path:
    """The loaded backend's shared library (its C functions: :mod:`.memory_tools`' observers), after
    :func:`loadable`."""
    return _state["library"]  # type: ignore[return-value]


def loadable() -> bool:
    """Whether the backend's ops (``torch.ops.torchdevice_sim``) are loaded, building and loading them first where
    needed (once per process)."""
    if "why" not in _state:
        _state["why"] = _load()
    return _state["why"] is None


def _load() -> str | None:
    """Load (building if needed) the compiled backend; why not, where it cannot be."""
    explicit = os.environ.get(BUILD_DIR)
    cache = Path(explicit) if explicit else user_cache_dir()
    if cache is None:
        return "no user cache directory to build it in"
    source = b"".join(path.read_bytes() for path in (SOURCE, *HEADERS))
    key = hashlib.sha256(source + torch.__version__.encode() + sys.version.encode()).hexdigest()[:16]
    name = f"torchdevice_sim_{key}"
    directory = cache / name if explicit else cache / "backend" / name
    library = directory / f"{name}{_suffix()}"
    failed = directory / FAILED
    try:
        if library.exists():
            torch.ops.load_library(str(library))
            _state["library"] = library
            return None
        if failed.exists():  # built once and failed: not tried again for this torch, Python and source
            return failed.read_text(encoding="utf-8").strip()
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"it could not be loaded from {directory}: {exc}"
    return _build(name, directory, failed)


def _build(name: str, directory: Path, failed: Path) -> str | None:
    """Build the backend into ``directory`` with torch's ``cpp_extension`` (imported only here: on a CUDA build of
    torch its import warns where there is no CUDA), saying so and how long it took; why not, remembered in
    ``failed``, where the build fails."""
    say(f"building the simulated devices' compiled backend in {directory} (once per torch and Python; about 30 s)")
    start = time.monotonic()
    quiet = logging.getLogger("torch.utils.cpp_extension")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "No CUDA runtime is found" on a CUDA build without a GPU: not the program's doing
    try:
        from torch.utils import cpp_extension

        cpp_extension.load(name, [str(SOURCE)], build_directory=str(directory), is_python_module=False,
                           extra_cflags=["-O2"], verbose=False)
    except Exception as exc:  # no compiler, no ninja, a build that failed
        why = f"its build in {directory} failed: {type(exc).__name__}: {first_error(str(exc))}"
        with contextlib.suppress(OSError):
            failed.write_text(why + "\n", encoding="utf-8")
        return why
    finally:
        quiet.setLevel(level)
    say(f"built the simulated devices' compiled backend in {time.monotonic() - start:.1f} s")
    _state["library"] = directory / f"{name}{_suffix()}"
    return None


def first_error(output: str) -> str:
    """The compiler's first error in a build's output (``file:line:col: error: ...``), else the shell's (``/bin/sh: 1:
    c++: not found``), else its first line."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    shell = (line for line in lines if line.endswith(("not found", "No such file or directory", "Permission denied")))
    return next((line for line in lines if "error:" in line), None) or next(shell, lines[0] if lines else "")


def _suffix() -> str:
    return ".dylib" if sys.platform == "darwin" else ".so"
