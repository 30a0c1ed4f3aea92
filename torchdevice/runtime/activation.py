"""Install and uninstall: every patch goes through one :class:`~torchdevice.runtime.patching.Patcher`.

Order of installation: the generated device wrappers (``torchdevice_generated.device_wrappers``),
the hand-written entry points (tensors, checkpoints and data loading, autocast and GradScaler,
generator/stream/event classes), the ``torch.cuda`` emulation table
(``torchdevice_generated.cuda_table``), then each feature module in :data:`FEATURES`, which patches
through the same patcher, so ``uninstall()`` undoes everything, newest first. Last, the environment
that redirects the processes the program starts (:mod:`.processes`), and a warning naming the torch
functions that modules had already bound by name (:mod:`.bindings`).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

import torchdevice
from torchdevice.runtime import amp, bindings, classes, data, emulation, processes, tensors
from torchdevice.runtime.compilers import Compilers
from torchdevice.runtime.devices import resolve_devices, resolve_target
from torchdevice.runtime.patching import Patcher
from torchdevice.runtime.redirect import Redirect
from torchdevice.runtime.report import configure_logging
from torchdevice.runtime.views import outside, patch_warning_places

FEATURES = ("torchdevice.fallback", "torchdevice.distributed")
"""Modules whose ``activate(patcher, target, options)`` runs after the runtime's own patches."""

HAND_WRITTEN = (tensors, data, amp, classes)
"""Modules whose ``patch(patcher, redirect)`` installs the entry points written by hand."""

log = logging.getLogger("torchdevice")


@dataclass
class State:
    """An installation: what ``"cuda"`` means and how to undo it."""

    target: torch.device
    options: dict[str, Any]
    patcher: Patcher = field(default_factory=Patcher)
    redirect: Redirect | None = None  # None: passthrough, nothing patched


_lock = threading.RLock()
_state: State | None = None


def install(target: str | torch.device | None = None, *, prefer_mlx: bool = False,
            devices: int | None = None) -> torch.device:
    """Activate the runtime; return the device ``"cuda"`` now means. Idempotent; a new target or option
    reinstalls. ``devices``: how many CUDA devices to emulate (see :func:`.devices.resolve_devices`)."""
    global _state
    with _lock:
        device = resolve_target(target)
        options: dict[str, Any] = {"prefer_mlx": prefer_mlx or os.environ.get("TORCHDEVICE_PREFER_MLX") == "1",
                                   "devices": resolve_devices(devices)}
        if _state is not None:
            if _state.target == device and _state.options == options:
                return device
            uninstall()
        configure_logging()
        check_torch_version()
        state = _state = State(device, options)  # visible to features while they activate
        try:
            if device.type != "cuda":
                _activate(state)
                processes.propagate(state.patcher, device, options["prefer_mlx"], devices)
        except BaseException:
            _deactivate(state)
            _state = None
            raise
        stale = bindings.stale_bindings(state.patcher.replaced)
        if stale:
            warnings.warn(bindings.message(stale), stacklevel=3)
        log.info("installed: cuda -> %s", device if device.type != "cuda" else "cuda (passthrough)")
        return device


def uninstall() -> None:
    """Restore every patched attribute to the identical original object. Idempotent."""
    global _state
    with _lock:
        if _state is None:
            return
        flush()
        _deactivate(_state)
        _state = None


def current_target() -> torch.device:
    """The device ``"cuda"`` means now (``cuda`` itself when not installed or passing through)."""
    state = _state
    return state.target if state is not None else torch.device("cuda")


def options() -> dict[str, Any] | None:
    """The options of the active installation, ``None`` when not installed."""
    state = _state
    return dict(state.options) if state is not None else None


def flush() -> None:
    """Fold pending redirect counts into :mod:`torchdevice.runtime.report`."""
    state = _state
    if state is not None and state.redirect is not None:
        state.redirect.flush()


@functools.cache
def check_torch_version() -> None:
    """Warn once when the installed torch is not the release the catalog (and so every generated wrapper
    and table) was made from: entry points may have moved, and what is not cataloged is not translated."""
    from torchdevice_generated import TORCH_VERSION

    if _release(torch.__version__) != _release(TORCH_VERSION):
        warnings.warn(f"torchdevice {torchdevice.__version__} was built for torch {TORCH_VERSION} "
                      f"(any {'.'.join(_release(TORCH_VERSION))}.x); this is torch {torch.__version__}: "
                      "device entry points it does not know are left untranslated", stacklevel=outside())


def _release(version: str) -> tuple[str, ...]:
    """``"2.13.0+cpu"`` -> ``("2", "13")``."""
    return tuple(version.split("+")[0].split(".")[:2])


def _activate(state: State) -> None:
    from torchdevice_generated import cuda_table, device_wrappers

    r = state.redirect = Redirect(state.target, state.options["devices"])
    patcher = state.patcher
    patcher.set(emulation, "_active", r)
    patcher.set(emulation, "_streams", {})  # each installation starts on the default stream
    patch_warning_places(patcher)
    compilers = Compilers(patcher)
    for module, path, attr, op, factory in device_wrappers.WRAPPERS:
        owner = resolve(module, path)
        original = getattr(owner, attr)
        # help(), IDEs and inspect.signature see the original through the wrapper: set once, free per call
        wrapper = functools.update_wrapper(factory(original, r, r.slot(op)), original)
        patcher.set(owner, attr, wrapper)
        compilers.add(original, wrapper)
    for hand_written in HAND_WRITTEN:
        hand_written.patch(patcher, r)
    for module, path, attr, policy, does, value, why, is_class in cuda_table.EMULATION:
        name = ".".join((module, *path, attr))
        if policy == "unsupported":
            patcher.set(resolve(module, path), attr, emulation.unsupported(name, why, is_class))
        elif policy == "emulate":
            patcher.set(resolve(module, path), attr, emulation.build(does, value, name))
    for name in FEATURES:
        importlib.import_module(name).activate(patcher, state.target, dict(state.options))


def _deactivate(state: State) -> None:
    state.patcher.restore()


def resolve(module: str, path: tuple[str, ...]) -> Any:
    """The object at ``module`` then attribute ``path`` (``("Tensor",)`` in ``torch``: ``torch.Tensor``)."""
    owner: Any = importlib.import_module(module)
    for part in path:
        owner = getattr(owner, part)
    return owner
