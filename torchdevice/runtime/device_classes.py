"""Device-taking classes that are C types: ``torch.Generator``, ``torch.Stream``, ``torch.Event``, and
``torch.device`` itself.

A C type's constructor cannot be patched, and replacing the class with a function would break
``isinstance``. The module attribute is replaced by a stand-in class (a subclass, where the C type
allows one) whose metaclass builds real instances of the original type from translated arguments and
recognises every instance of the original type, so ``isinstance(torch.default_generator,
torch.Generator)`` still holds and pickling, which names the original type, is unaffected. The
stand-in compares and hashes equal to the original type, so the tables that torch's compilers key by
type (Dynamo's constant types, FX's globals) find it either way.

``torch.device`` cannot be subclassed; its stand-in makes an integer ordinal name a CUDA device, as on
a CUDA machine (``torch.device(0)`` is ``cuda:0``; without an accelerator torch raises). Other
arguments build the device they build natively: ``torch.device("cuda")`` stays a CUDA device, which
every device-taking entry point translates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torchdevice.patching import Patcher
from torchdevice.runtime.emulation import Emulation
from torchdevice.runtime.installation import Installation


def shim(real: type, construct: Callable[..., Any]) -> type:
    """A stand-in for ``real``, installed as ``torch.<name>``: calls go to ``construct``, instance checks
    are ``real``'s, and pickles that name ``torch.<name>`` find the stand-in while it is installed."""

    subclassable = bool(real.__flags__ & BASETYPE)

    class Meta(type(real) if subclassable else type):  # type: ignore[misc]
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            return construct(*args, **kwargs)

        def __instancecheck__(cls, instance: object) -> bool:
            return isinstance(instance, real)

        def __subclasscheck__(cls, subclass: type) -> bool:
            return issubclass(subclass, real)

        def __eq__(cls, other: object) -> bool:
            return other is cls or other is real

        def __hash__(cls) -> int:
            return hash(real)

    namespace = {"__module__": "torch", "__qualname__": real.__name__, "__doc__": real.__doc__}
    return Meta(real.__name__, (real,) if subclassable else (), namespace)


DEVICE = torch.device
"""The C type ``torch.device``, which its stand-in builds."""

BASETYPE = 1 << 10
"""``Py_TPFLAGS_BASETYPE``: the type can be subclassed."""


def make_device(device: type) -> Callable[..., Any]:
    """``torch.device(...)`` as on a CUDA machine: a bare integer ordinal names a CUDA device."""

    def construct(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], int) and not isinstance(args[0], bool):
            return device("cuda", args[0])
        return device(*args, **kwargs)

    return construct


def patch(patcher: Patcher, r: Installation, emulation: Emulation) -> None:
    """Install the stand-ins for ``torch.device``, ``torch.Generator``, ``torch.Stream`` and ``torch.Event``."""
    event_class = emulation.classes["Event"]
    generator_slot, stream_slot, event_slot = (r.counts.slot(f"torch.{n}") for n in ("Generator", "Stream", "Event"))
    generator, stream, event = torch.Generator, torch.Stream, torch.Event

    def make_generator(device: Any = "cpu") -> torch.Generator:
        translated = r.device_value(generator_slot, device)
        # a device torch was not built for (the simulated Mac's) draws with host generators
        on_target = isinstance(translated, torch.device) and translated.type == r.device.type
        return generator("cpu" if on_target and not r.target.native else translated)

    # With no device, streams and events belong to the current accelerator: the emulated CUDA device.
    def make_stream(device: Any = None, *args: Any, **kwargs: Any) -> torch.Stream:
        return stream(r.device_value(stream_slot, "cuda" if device is None else device), *args, **kwargs)

    timing_events = not r.target.native

    def make_event(device: Any = None, *args: Any, **kwargs: Any) -> Any:
        device = "cuda" if device is None else device
        translated = r.device_value(event_slot, device)
        if translated != device and timing_events:
            return event_class(*args, **kwargs)  # CPU events cannot record: a timing event stands in
        return event(translated, *args, **kwargs)

    patcher.set(torch, "device", shim(DEVICE, make_device(DEVICE)))
    patcher.set(torch, "Generator", shim(generator, make_generator))
    patcher.set(torch, "Stream", shim(stream, make_stream))
    patcher.set(torch, "Event", shim(event, make_event))
