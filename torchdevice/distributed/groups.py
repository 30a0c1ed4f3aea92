"""Process groups asked for NCCL, created on gloo.

``init_process_group`` and ``new_group`` keep every argument the program gave (``init_method``,
``world_size``, ``rank``, ``store``, ``timeout``...) except three that only mean something with CUDA:

- ``backend``: each NCCL spelling becomes its gloo equivalent (:func:`gloo_backend`); an
  ``init_process_group`` without one asks for NCCL, as it does on a CUDA machine;
- ``device_id``: NCCL's eager-init hint names a CUDA device; gloo groups take none;
- ``pg_options``: NCCL options have no meaning for gloo.

Each group asked for NCCL is remembered with what a CUDA machine would call it
(:func:`asked_for`), so that the program's questions get CUDA's answers
(:mod:`torchdevice.distributed.answers`).

A group asked for NCCL with no ``timeout`` gets NCCL's default (10 minutes) rather than gloo's
(30 minutes): a rank that stops taking part in collectives fails the run as soon as it would have
with NCCL.

Exit: a gloo worker thread can still hold the last reference to a finished collective's tensors
when the interpreter starts to shut down; releasing them then needs the GIL, which aborts the
process ("terminate called without an active exception") after the program succeeded. Plain torch
does it in about 1 run in 30 here. Once a gloo group stands in for NCCL, an ``atexit`` handler
gives those threads :data:`SETTLE_SECONDS` with the GIL released, while the interpreter is alive.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import time
import weakref
from collections.abc import Callable
from datetime import timedelta
from typing import Any

NCCL_DEFAULT_TIMEOUT = timedelta(minutes=10)
SETTLE_SECONDS = 0.1

_asked: weakref.WeakKeyDictionary[Any, tuple[str, str]] = weakref.WeakKeyDictionary()
"""Group -> ``(backend, backend config)`` a CUDA machine gives it, for the groups asked for NCCL."""


def gloo_backend(backend: Any) -> Any:
    """The backend to ask for instead of ``backend`` where there is no CUDA.

    ``"nccl"`` (any case, or ``Backend.NCCL``) becomes ``"gloo"``. In the ``"device:backend,..."``
    form the ``cuda`` entry is dropped, because "cuda" tensors live on the CPU (or are staged
    through it) and are served by the ``cpu`` entry, which is ``gloo`` unless the program named
    one. Anything else, ``None`` included, is returned unchanged.
    """
    if not isinstance(backend, str):
        return backend
    text = backend.lower().replace(" ", "")
    if ":" not in text:
        return "gloo" if text == "nccl" else backend
    pairs = [pair.split(":") for pair in text.split(",")]
    if any(len(pair) != 2 for pair in pairs) or not any(device == "cuda" for device, _ in pairs):
        return backend
    devices = {device: name for device, name in pairs if device != "cuda"}
    devices.setdefault("cpu", "gloo")
    return ",".join(f"{device}:{name}" for device, name in devices.items())


def on_gloo(create: Callable[..., Any], unspecified: str | None) -> Callable[..., Any]:
    """Wrap a group-creating function as described above.

    ``unspecified`` is what an omitted ``backend`` asks for: ``"nccl"`` for ``init_process_group``
    (torch's choice on a CUDA machine), ``None`` for ``new_group`` (the default group's backend).
    """
    signature = inspect.signature(create)

    @functools.wraps(create)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import torch.distributed.distributed_c10d as c10d

        call = signature.bind(*args, **kwargs)
        arguments = call.arguments
        device_id = arguments.pop("device_id", None)
        given = arguments.get("backend")
        requested = given or unspecified
        arguments["backend"] = gloo_backend(requested)
        if isinstance(requested, str) and "nccl" in requested.lower():
            undefined = given is None and device_id is None  # init_process_group() names no backend
            names: tuple[str, str] | None = cuda_names(c10d.Backend.UNDEFINED if undefined else requested)
        elif requested is None:  # new_group() takes the default group's backend
            names = asked_for(c10d.GroupMember.WORLD)
        else:
            names = None
        if names is None:
            return create(*call.args, **call.kwargs)
        arguments.pop("pg_options", None)
        if arguments.get("timeout") is None:
            arguments["timeout"] = NCCL_DEFAULT_TIMEOUT
        _settle_at_exit()
        group = create(*call.args, **call.kwargs)
        created = c10d._get_default_group() if unspecified is not None else group
        if isinstance(created, c10d.ProcessGroup):
            _asked[created] = names
        return group

    return wrapper


def cuda_names(requested: str) -> tuple[str, str]:
    """``(get_backend(), get_backend_config())`` of a group asked for ``requested`` on a CUDA machine.

    ``"undefined"`` (``init_process_group()`` with neither backend nor device) is configured for
    the machine's accelerator, CUDA."""
    import torch.distributed.distributed_c10d as c10d

    backend = c10d.Backend(requested)
    if backend == c10d.Backend.UNDEFINED:
        return backend, f"cuda:{c10d.Backend.default_device_backend_map['cuda']}"
    return backend, str(c10d.BackendConfig(backend))


def asked_for(group: Any) -> tuple[str, str] | None:
    """What a CUDA machine calls ``group`` (see :func:`cuda_names`), if it was asked for NCCL."""
    try:
        return _asked.get(group)
    except TypeError:  # not weakly referenceable: not a process group
        return None


def nccl_call_group(group: Any, *tensors: Any) -> Any:
    """The group of a collective on ``tensors`` that runs as NCCL would: plain tensors (a subclass's
    ``__torch_function__`` comes back with plain ones), a group asked for NCCL that this rank is in, no
    coalescing manager open on it. None for the calls the collective handles as it is."""
    import torch
    import torch.distributed.distributed_c10d as c10d
    from torch.overrides import has_torch_function

    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors) or has_torch_function(tensors):
        return None
    if c10d._rank_not_in_group(group):
        return None
    chosen = c10d._group_or_default_group(group)
    return chosen if asked_for(chosen) is not None and chosen not in c10d._world.pg_coalesce_state else None


@functools.cache
def _settle_at_exit() -> None:
    """Register (once) the exit handler described in the module's docstring."""
    atexit.register(time.sleep, SETTLE_SECONDS)
