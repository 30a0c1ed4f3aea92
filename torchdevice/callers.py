"""Who is calling, and who is told what: the program sees emulated CUDA, torch's own code the machine as it is.

Torch internals branch on ``torch.cuda.is_available()``, ``device_count()`` and ``Tensor.is_cuda``
and then call CUDA-only C functions (pinned memory, fused kernels, cuDNN paths). Those gates, the answer points of
:data:`POINTS`, therefore answer truthfully to torch's own code and to the packages that probe CUDA to choose a
backend of their own (bitsandbytes, DeepSpeed), and as a CUDA machine would to everyone else: the program and the
other libraries it uses. Each point asks :func:`told_the_truth` with its name. The asker is the first frame, going
outwards, that is neither torchdevice's own nor one that only passes a call on (:data:`_PASSING`), however many
such frames sit between; its module's audience (:class:`Audience`, from ``catalog/overlays/packages.yaml``) is kept
per module name until the audiences change (:func:`tell_as_program`). torchdevice's own code that needs the truth
calls the truthful function itself (``torchdevice.device.aten.cpp_device``, the C attributes,
``torchdevice.runtime.activation.cuda_devices``).

Warnings torch raises while a wrapper of ours calls it name the wrapper's line as their place (C
code names the calling Python frame; ``stacklevel=2`` in Python names the caller): such warnings
are shown at the program's own line instead, the line that called the wrapped function.
"""

from __future__ import annotations

import enum
import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import torchdevice_generated
from torchdevice_generated.truth_table import TOLD_AS_PROGRAM, TOLD_THE_TRUTH

from torchdevice.patching import Patcher

_OURS = tuple(os.path.join(os.path.dirname(os.path.abspath(path)), "")
              for path in (__file__, torchdevice_generated.__file__ or ""))
"""The folders of torchdevice and of its generated package: warnings placed there are placed at the caller's line."""


class Audience(enum.Enum):
    """Who asks an answer point, by the module of the asking code."""

    PROGRAM = "the program and the libraries it uses"
    TORCH = "torch's own code"
    TOLD_THE_TRUTH = "a package told the truth (TOLD_THE_TRUTH)"
    AS_PROGRAM = "a module of torch, or of a package told the truth, told as the program is (TOLD_AS_PROGRAM)"


TRUTHFUL = frozenset({Audience.TORCH, Audience.TOLD_THE_TRUTH})
"""The audiences told the truth; the others get the program's answers."""


@dataclass(frozen=True)
class Point:
    """An answer point: what it tells the program, and the truth it tells :data:`TRUTHFUL` audiences."""

    program: str
    truth: str


POINTS: dict[str, Point] = {
    "cuda.is_available": Point("True", "False: torch's code takes no CUDA path"),
    "cuda.is_initialized": Point("True", "False"),
    "cuda.device_count": Point("the emulated devices", "0"),
    "accelerator.current_accelerator": Point("cuda", "None"),
    "Tensor.is_cuda": Point("True for the target's device tensors", "the C attribute's answer"),
    "Tensor.is_cpu": Point("False for the target's device tensors", "the C attribute's answer"),
    "Tensor.device": Point("the device the simulated profile shows (mps:0, cuda:0)", "the simulated device"),
    "UntypedStorage.device": Point("as Tensor.device", "the simulated device"),
    "_C._get_accelerator": Point("cuda (a simulated GPU)", "the simulated backend's device"),
    "distributed.backend": Point("NCCL's names (get_backend, get_backend_config, ProcessGroup.name)",
                                 "gloo's names"),
}
"""Every answer point (the function or attribute it stands for, as ``torch.`` names it), by the name it asks with."""


_PASSING = frozenset({"functools", "contextlib", "torch.utils._contextlib"})
"""Modules whose frames only pass a call on (decorators' wrappers, ``partialmethod``, context managers, torch's
``no_grad()`` as a decorator): the asker is the first frame above them."""

_OWN = ("torchdevice", "torchdevice_generated")
_TRUTH_PREFIXES = tuple(f"{module}." for module in TOLD_THE_TRUTH)

_told_as_program = set(TOLD_AS_PROGRAM)
"""Modules answered as the program is: the catalog's, and those a target adds (:func:`tell_as_program`)."""

_verdicts: dict[str, bool | None] = {}
"""Module name -> whether its code is told the truth (None: looked through), filled as modules ask; emptied when
:data:`_told_as_program` changes."""


def told_the_truth(point: str) -> bool:
    """Whether the code asking answer point ``point`` (a key of :data:`POINTS`) is told the truth: the first frame
    outwards whose module is neither torchdevice's nor passing (:data:`_PASSING`) is of a :data:`TRUTHFUL`
    audience, or there is none (torchdevice asks for itself)."""
    POINTS[point]  # a point that is not registered is an error
    frame: FrameType | None = sys._getframe(2)  # past the point's own frame
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        try:
            verdict = _verdicts[name]
        except KeyError:
            audience = _audience_of(name)
            verdict = _verdicts[name] = None if audience is None else audience in TRUTHFUL
        if verdict is not None:
            return verdict
        frame = frame.f_back
    return True


def _audience_of(module: str) -> Audience | None:
    """The audience of the code of ``module``; None for frames looked through (torchdevice's, :data:`_PASSING`)."""
    if module in _PASSING or module.partition(".")[0] in _OWN:
        return None
    if module in _told_as_program:
        return Audience.AS_PROGRAM
    if module == "torch" or module.startswith("torch."):
        return Audience.TORCH
    if module in TOLD_THE_TRUTH or module.startswith(_TRUTH_PREFIXES):
        return Audience.TOLD_THE_TRUTH
    return Audience.PROGRAM


def tell_as_program(patcher: Patcher, modules: tuple[str, ...] = (), packages: tuple[str, ...] = ()) -> None:
    """Answer ``modules``, and ``packages`` with every module below them (torch's, or packages told the truth), as
    the program is answered until ``patcher.restore()``: on a target that has what they call where CUDA is available
    (a simulated GPU, for ``nn.DataParallel``, FSDP and DeepSpeed)."""
    added = {*modules, *(m for package in packages for m in _modules_of(package))} - _told_as_program
    _told_as_program.update(added)
    _verdicts.clear()

    def restore() -> None:
        _told_as_program.difference_update(added)
        _verdicts.clear()

    patcher.defer(restore)


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
