"""Install and uninstall: every patch goes through one :class:`~torchdevice.patching.Patcher`.

:func:`install` resolves the target (:func:`resolve`; the simulated Mac is built by
:func:`torchdevice.simulated.activate`), makes the :class:`~.installation.Installation` every patch is handed,
and installs in this order: the generated device wrappers (``torchdevice_generated.device_wrappers``), the
hand-written entry points (tensors, checkpoints, autocast and GradScaler, the device-taking classes), the
``torch.cuda`` emulation table (``torchdevice_generated.cuda_table``, built by :class:`~.emulation.Emulation`),
then each feature package (the fallback engine, distributed, the stand-ins), which patches through the same
patcher, so ``uninstall()`` undoes everything, newest first, and Triton's interpreter for the program's Triton
kernels (:mod:`.triton_interpreter`).
Last, the environment that redirects the processes the program starts (:mod:`.processes`), and a warning naming
the torch functions that modules had already bound by name (:mod:`.bindings`).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from torchdevice.callers import outside, patch_warning_places
from torchdevice.device import gpus
from torchdevice.device.gpus import Gpu
from torchdevice.device.target import SIMULATED, SIMULATED_CUDA, SIMULATED_MPS, TARGETS, Target, for_name
from torchdevice.logs import configure_logging
from torchdevice.patching import Patcher
from torchdevice.records import HAND_WRITTEN
from torchdevice.runtime import bindings, device_classes, processes, triton_interpreter
from torchdevice.runtime.compilers import Compilers
from torchdevice.runtime.device_maps import resolve_devices
from torchdevice.runtime.emulation import Emulation, unsupported
from torchdevice.runtime.installation import Installation

log = logging.getLogger("torchdevice")


@dataclass
class State:
    """An installation in place: its options and how to undo it."""

    device: torch.device
    """The device ``"cuda"`` means, as the program sees it."""
    options: dict[str, Any]
    patcher: Patcher = field(default_factory=Patcher)
    installation: Installation | None = None  # None: passthrough, nothing patched
    emulation: Emulation | None = None


_lock = threading.RLock()
_state: State | None = None


def install(target: str | torch.device | None = None, *, prefer_mlx: bool = False, devices: int | None = None,
            gpu: str | Gpu | None = None, gpu_memory: str | int | None = None,
            report: str | os.PathLike[str] | None = None) -> torch.device:
    """Activate the runtime; return the device ``"cuda"`` now means. Idempotent; a new target or option
    reinstalls. ``devices``: how many CUDA devices to emulate (see :func:`.device_maps.resolve_devices`);
    ``gpu``, ``gpu_memory``: the card a simulated GPU is, or its memory (``cuda-sim``; see
    :func:`torchdevice.device.gpus.choose`); ``report``: where the program's report goes (else
    ``$TORCHDEVICE_REPORT``, see :mod:`torchdevice.reporting.program`)."""
    _start_report(report)
    device = _install(target, prefer_mlx, devices, gpu, gpu_memory)
    if report is not None:
        processes.join_report()  # installed already with the same options: the environment still needs it
    return device


def _install(target: str | torch.device | None, prefer_mlx: bool, devices: int | None, gpu: str | Gpu | None,
             gpu_memory: str | int | None) -> torch.device:
    global _state
    with _lock:
        configure_logging()
        name = resolve(target)
        options: dict[str, Any] = {"prefer_mlx": prefer_mlx or os.environ.get("TORCHDEVICE_PREFER_MLX") == "1",
                                   "devices": resolve_devices(devices), "target": name}
        if name == SIMULATED_CUDA:
            options["gpu"] = gpus.choose(gpu, gpu_memory)  # a bad card or size: said before anything is patched
        if _state is not None:
            if _state.options == options:
                return _state.device
            uninstall()
        check_torch_version()
        state = _state = State(torch.device("cuda"), options)
        try:
            if name != "cuda":
                _activate(state, name)
                card = options.get("gpu")
                processes.propagate(state.patcher, name, options["prefer_mlx"], devices,
                                    *((card.key, card.memory) if card is not None else ()))
        except BaseException:
            state.patcher.restore()
            _state = None
            raise
        stale = bindings.stale_bindings(state.patcher.replaced)
        if stale:
            warnings.warn(bindings.message(stale), stacklevel=4)
        log.info("installed: cuda -> %s%s", state.device if name != "cuda" else "cuda (passthrough)",
                 f" ({name})" if name not in ("cuda", state.device.type) else "")
        return state.device


_CUDA = (torch.cuda.is_available, torch.cuda.device_count)
"""torch's own answers, bound before any install replaces them (which then answer the program, not the machine)."""


def cuda_devices() -> int:
    """The CUDA devices this machine has."""
    available, count = _CUDA
    return count() if available() else 0


def resolve(requested: str | torch.device | None = None) -> str:
    """The name of the target ``"cuda"`` should mean: ``requested``, else ``$TORCHDEVICE_TARGET``, else the best
    present.

    Real CUDA is preferred where present (the runtime then passes everything through), then MPS, then a simulated GPU
    (``cuda-sim``). A simulated target needs the simulated devices' compiled backend; where it cannot be had, the
    target is the cpu one (:func:`_simulated_or_cpu`). Asking for a target this machine lacks, or one that is not a
    target, is an error (``ValueError``, ``RuntimeError``) naming where the request came from. On a Mac, ``mps-sim``
    is ``mps``.
    """
    name = requested if requested is not None else os.environ.get("TORCHDEVICE_TARGET") or None
    if name is None:
        if cuda_devices():
            return "cuda"
        return "mps" if torch.backends.mps.is_available() else _simulated_or_cpu(SIMULATED_CUDA, asked=False)
    source = "" if requested is not None else f" (TORCHDEVICE_TARGET={name})"
    kind = name.type if isinstance(name, torch.device) else str(name).partition(":")[0]
    if kind not in TARGETS:
        raise ValueError(f"torchdevice: unknown target {name!r}{source}; expected one of {', '.join(TARGETS)}")
    if kind == SIMULATED_MPS and torch.backends.mps.is_available():
        return "mps"
    if kind in (SIMULATED_MPS, SIMULATED_CUDA):
        return _simulated_or_cpu(kind, asked=True)
    if kind == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"torchdevice: target 'mps' requested{source} but MPS is not available on this machine")
    if kind == "cuda" and not cuda_devices():
        raise RuntimeError(f"torchdevice: target 'cuda' requested{source} but CUDA is not available on this machine")
    return kind


@functools.cache
def _simulated_or_cpu(kind: str, asked: bool) -> str:
    """Simulated target ``kind`` where the simulated devices' compiled backend can be had (built once with the
    machine's C++ compiler), else the cpu target, said once with why: as a warning where ``kind`` was asked for, at
    INFO where it was the default (docs/targets/cuda-sim.md, "Which is the default")."""
    from torchdevice.callers import outside
    from torchdevice.simulated import backend

    configure_logging()  # the backend's first build is said
    if backend.loadable():
        return kind
    why = (f"\"cuda\" means the cpu target here: {kind} needs the simulated devices' compiled backend, which cannot be "
           f"had ({backend.why_not()})")
    if asked:
        warnings.warn(f"torchdevice: {why}", stacklevel=outside())
    else:
        log.info("%s", why)
    return "cpu"


def _start_report(report: str | os.PathLike[str] | None) -> None:
    """Start the program's report where asked (``report``, else ``$TORCHDEVICE_REPORT`` in a process that is
    not already part of one)."""
    if report is None:
        report = os.environ.get("TORCHDEVICE_REPORT") or None
        if report is None or "torchdevice.reporting.program" in sys.modules:
            return
    from torchdevice.reporting import program

    program.start(report)


def uninstall() -> None:
    """Restore every patched attribute to the identical original object. Idempotent."""
    global _state
    with _lock:
        if _state is None:
            return
        _state.patcher.restore()
        _state = None


def current_target() -> torch.device:
    """The device ``"cuda"`` means now (``cuda`` itself when not installed or passing through)."""
    state = _state
    return state.device if state is not None else torch.device("cuda")


def installation() -> Installation | None:
    """The installation in place (None when not installed or passing through)."""
    state = _state
    return state.installation if state is not None else None


def emulation() -> Emulation | None:
    """The ``torch.cuda`` emulation in place (None when not installed or passing through)."""
    state = _state
    return state.emulation if state is not None else None


def options() -> dict[str, Any] | None:
    """What the installation in place was made with (``target``: the target's name, ``prefer_mlx``, ``devices``),
    None when not installed: ``install(**options())`` makes it again."""
    state = _state
    return dict(state.options) if state is not None else None


def install_inherited() -> torch.device:
    """Install as ``TORCHDEVICE_INSTALL`` says (what the start-up hook calls once torch is imported; see
    :mod:`.processes`)."""
    value = os.environ.get(processes.VARIABLE, "")
    try:
        arguments = processes.decode(value)
    except ValueError as exc:
        warnings.warn(f"torchdevice: {processes.VARIABLE}={value!r}: {exc}; installing with the defaults",
                      stacklevel=2)
        arguments = {}
    report = arguments.pop("report", None)
    if report is not None:
        from torchdevice.reporting import program

        program.join(report)
    try:
        arguments["target"] = resolve(arguments.get("target"))
    except (ValueError, RuntimeError) as exc:  # the parent's target is not one this process can have
        raise type(exc)(f"{exc} ({processes.VARIABLE}={value})") from None
    return install(**arguments)


@functools.cache
def check_torch_version() -> None:
    """Say once, at INFO, where the facts used on the installed torch come from; warn on a release older than the
    oldest supported (:mod:`torchdevice.releases`)."""
    from torchdevice import releases

    if not releases.supported():
        warnings.warn(f"torchdevice: {releases.facts()}", stacklevel=outside())
    else:
        log.info("%s", releases.facts())


def _target(patcher: Patcher, name: str, options: dict[str, Any]) -> Target:
    """The target called ``name``; the simulated devices are set up here, their one activation point."""
    if name in SIMULATED:
        from torchdevice import simulated

        return simulated.activate(patcher, name, options["devices"], options.get("gpu"))
    return for_name(name)


def _activate(state: State, name: str) -> None:
    from torchdevice_generated import cuda_table, device_wrappers

    patcher = state.patcher
    target = _target(patcher, name, state.options)
    inst = state.installation = Installation(target, state.options["devices"], state.options["prefer_mlx"])
    state.device = target.shown or inst.device  # as the program sees it: the simulated Mac's says mps:0
    patcher.defer(inst.counts.close)
    patch_warning_places(patcher)
    compilers = Compilers(patcher)
    for w in device_wrappers.WRAPPERS:
        owner = resolve_attribute(w.module, w.path)
        original = getattr(owner, w.attr)
        # help(), IDEs and inspect.signature see the original through the wrapper: set once, free per call
        wrapper = functools.update_wrapper(w.factory(original, inst, inst.counts.slot(w.op)), original)
        patcher.set(owner, w.attr, wrapper)
        compilers.add(original, wrapper)
    emulation = state.emulation = Emulation(inst)
    for module in HAND_WRITTEN:
        importlib.import_module(f"torchdevice.runtime.{module}").patch(patcher, inst, emulation)
    compilers.add(device_classes.DEVICE, torch.device)
    for e in cuda_table.EMULATION:
        owner = resolve_attribute(e.module, e.path)
        if e.policy == "unsupported":
            patcher.set(owner, e.attr, unsupported(e.name, e.why, e.is_class, inst.device))
        elif e.policy == "emulate":
            patcher.set(owner, e.attr, emulation.build(e.does, e.value, e.name))
    from torchdevice import distributed, fallback, standins  # the features, whose activate() runs last

    for feature in (fallback, distributed, standins):
        feature.activate(patcher, target, dict(state.options))
    triton_interpreter.activate(patcher, target.shown or target.device)


def resolve_for(requested: str | None, gpu: str | None, gpu_memory: str | None, options: str) -> str:
    """:func:`resolve`, and a GPU's card and memory checked where given (named by the user's ``options``, as in
    ``--gpu and --gpu-memory``): only cuda-sim has them, and the card must be known, the memory a size."""
    target = resolve(requested)
    if gpu or gpu_memory:
        if target != SIMULATED_CUDA:
            raise ValueError(f"torchdevice: {options} are for the cuda-sim target, not {target}")
        from torchdevice.device import gpus

        gpus.choose(gpu, gpu_memory)
    return target


def resolve_attribute(module: str, path: tuple[str, ...]) -> Any:
    """The object at ``module`` then attribute ``path`` (``("Tensor",)`` in ``torch``: ``torch.Tensor``)."""
    owner: Any = importlib.import_module(module)
    for part in path:
        owner = getattr(owner, part)
    return owner


if getattr(sys.modules.get("_torchdevice_startup"), "PENDING", None):  # torch was imported by this module's loading
    sys.modules["_torchdevice_startup"].PENDING.clear()
    install_inherited()
