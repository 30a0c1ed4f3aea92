"""Who is calling, and who is told what: the program sees emulated CUDA, torch's own code the machine as it is.

Torch internals branch on ``torch.cuda.is_available()``, ``device_count()`` and ``Tensor.is_cuda``
and then call CUDA-only C functions (pinned memory, fused kernels, cuDNN paths). Those gates
therefore answer truthfully to callers inside ``torch`` (and ``torchdevice``), and to the packages that
probe CUDA to choose a backend of their own (bitsandbytes, DeepSpeed: ``TOLD_THE_TRUTH``, from
``catalog/overlays/packages.yaml``), and answer as a CUDA machine would to everyone else: the program and
the other libraries it uses.

Warnings torch raises while a wrapper of ours calls it name the wrapper's line as their place (C
code names the calling Python frame; ``stacklevel=2`` in Python names the caller): such warnings
are shown at the program's own line instead, the line that called the wrapped function.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import FrameType
from typing import Any

import torchdevice_generated
from torchdevice_generated.truth_table import TOLD_AS_PROGRAM, TOLD_THE_TRUTH

from torchdevice.patching import Patcher

_OURS = tuple(os.path.join(os.path.dirname(os.path.abspath(path)), "")
              for path in (__file__, torchdevice_generated.__file__ or ""))
"""The folders of torchdevice and of its generated package: warnings placed there are placed at the caller's line."""


_TRUTHFUL = frozenset({"torch", *TOLD_THE_TRUTH})
_TRUTHFUL_PREFIXES = ("torch.", "torchdevice", *(f"{module}." for module in TOLD_THE_TRUTH))


_told_as_program = set(TOLD_AS_PROGRAM)
"""Torch's modules answered as the program is: the catalog's, and those a target adds (:func:`tell_as_program`)."""

_PASSING = frozenset({"functools", "contextlib"})
"""Modules whose frames only pass a call on (decorators' wrappers, ``partialmethod``, context managers): the asker
is the first frame above them."""


def torch_internal(depth: int = 2) -> bool:
    """Whether the code that asks, ``depth`` frames up (default: the caller's caller) past the frames of
    :data:`_PASSING`, belongs to torch or torchdevice, or to a package told the truth
    (``torchdevice_generated.truth_table``), and is not among those told as the program is (:data:`TOLD_AS_PROGRAM`,
    :func:`tell_as_program`)."""
    frame = sys._getframe(depth)
    name = frame.f_globals.get("__name__", "")
    while name in _PASSING and frame.f_back is not None:
        frame = frame.f_back
        name = frame.f_globals.get("__name__", "")
    return (name in _TRUTHFUL or name.startswith(_TRUTHFUL_PREFIXES)) and name not in _told_as_program


def tell_as_program(patcher: Patcher, modules: tuple[str, ...] = (), packages: tuple[str, ...] = ()) -> None:
    """Answer ``modules``, and ``packages`` with every module below them (torch's, or packages told the truth), as
    the program is answered until ``patcher.restore()``: on a target that has what they call where CUDA is available
    (a simulated GPU, for ``nn.DataParallel``, FSDP and DeepSpeed)."""
    added = {*modules, *(m for package in packages for m in _modules_of(package))} - _told_as_program
    _told_as_program.update(added)
    patcher.defer(lambda: _told_as_program.difference_update(added))


def _modules_of(package: str) -> list[str]:
    """``package`` and the modules below it, read from its folder (nothing imported); none where it is absent."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    found = [package]
    for folder in spec.submodule_search_locations:
        root = Path(folder)
        for path in root.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            found.append(".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts))))
    return found


def outside() -> int:
    """The ``stacklevel`` that makes a warning raised here name the first caller outside torchdevice."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("torchdevice"):
        frame, level = frame.f_back, level + 1
    return level


def patch_warning_places(patcher: Patcher) -> None:
    """Show warnings placed in a torchdevice file at the program's line that called into it.

    Patched where the interpreter hands every warning that is shown or recorded (``warnings.
    _showwarnmsg``, called by the C implementation too), so nothing is paid until a warning is
    actually shown; ``catch_warnings(record=True)`` records the corrected place as well. Python's
    once-per-place registry still counts the wrapper's place: a warning that natively shows once per
    calling line shows once per wrapped function.
    """
    show = getattr(warnings, "_showwarnmsg", None)
    if show is None:  # another interpreter's warnings module: warnings keep their places
        return
    ours = _OURS

    def _showwarnmsg(message: Any) -> None:
        if str(message.filename).startswith(ours):
            frame = _caller_outside(sys._getframe(1), ours)
            if frame is not None:
                message.filename, message.lineno, message.line = frame.f_code.co_filename, frame.f_lineno, None
        show(message)

    patcher.set(warnings, "_showwarnmsg", _showwarnmsg)


def _caller_outside(frame: FrameType | None, ours: tuple[str, ...]) -> FrameType | None:
    """The first frame, going outwards, that runs outside torchdevice, once a torchdevice frame was passed."""
    inside = False
    while frame is not None:
        mine = frame.f_code.co_filename.startswith(ours)
        if inside and not mine:
            return frame
        inside = inside or mine
        frame = frame.f_back
    return None
