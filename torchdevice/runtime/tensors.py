"""Where tensors live: moves between the host and the emulated CUDA devices, and what tensors say of it.

On a GPU, a move between the host and a device makes a copy and a move to where a tensor already is
returns it. The emulated devices keep that, with :mod:`torchdevice.device.residence` telling device tensors from host
tensors (a mark on the storage):

* to CUDA (``Tensor.to("cuda")``, ``.cuda()``, ``Module.to/cuda`` through them, ``x.to(device_tensor)``,
  ``Tensor.type(torch.cuda.HalfTensor)``, ``Storage.cuda()``): a tensor already on that emulated device
  is returned as is (converted if a dtype is asked); anything else is copied and the copy marked;
* to the host, spelled as such (``.cpu()``, ``.to("cpu")``): a copy, unless the tensor is pinned host
  memory or a parameter not made on a device. ``.to(torch.device("cpu"))`` is left to torch: on the CPU
  target ``x.device`` of a device tensor is that same device object, so ``mask.to(x.device)`` must stay
  the no-op it is on a GPU;
* ``pin_memory()`` copies into memory marked as pinned; ``is_pinned()`` says so; ``copy.deepcopy`` of device
  memory is device memory;
* ``is_cuda``, ``is_cpu``, ``get_device()`` and ``type()`` answer as on a GPU for device tensors (torch's
  own code still gets the machine's answer, see :mod:`torchdevice.callers`).

``torch.set_default_device("cuda")`` and ``with torch.device("cuda"):`` build a DeviceContext whose
device is translated and whose tensors are marked (``torch.get_default_device()`` then says
``cuda:N``); every DeviceContext sees the factories it expects also while the runtime's wrappers
stand in for them.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.utils._device

from torchdevice.callers import told_the_truth
from torchdevice.device.aten import cpp_device, true_device
from torchdevice.device.residence import MARK, PINNED, device_index, mark_of, on_device
from torchdevice.device.target import Target
from torchdevice.device.to_arguments import parse_to
from torchdevice.patching import Patcher, TensorAttribute
from torchdevice.runtime.emulation import Emulation
from torchdevice.runtime.installation import Installation

ASKED = "_torchdevice_asked"
"""DeviceContext attribute: the CUDA device value the context was asked for."""


def patch(patcher: Patcher, r: Installation, emulation: Emulation) -> None:
    mover = Mover(r)
    patcher.set(torch.Tensor, "to", mover.to())
    patcher.set(torch.Tensor, "cuda", mover.cuda())
    patcher.set(torch.Tensor, "cpu", mover.cpu())
    patcher.set(torch.Tensor, "pin_memory", mover.pin_memory())
    patcher.set(torch.Tensor, "is_pinned", _is_pinned(torch.Tensor.is_pinned))
    patcher.set(torch.Tensor, "type", mover.legacy_type())
    patcher.set(torch.Tensor, "get_device", _get_device(torch.Tensor.get_device))
    patcher.set(torch.Tensor, "record_stream", _record_stream(torch.Tensor.record_stream, emulation))
    for name, answer in (("is_cuda", True), ("is_cpu", False)):
        patcher.set(torch.Tensor, name, _residence_property(name, answer, r.target))
    patcher.set(torch.UntypedStorage, "cuda", mover.storage_cuda())
    for owner in (torch.UntypedStorage, torch.nn.Parameter):
        patcher.set(owner, "__deepcopy__", _deepcopy_keeps_residence(owner.__deepcopy__, r))
    patcher.set(torch.UntypedStorage, "pin_memory", mover.storage_pin_memory())
    patcher.set(torch.UntypedStorage, "is_pinned", _is_pinned(torch.UntypedStorage.is_pinned))
    patcher.set(torch.nn.Module, "to", _module_to(torch.nn.Module.to, r))
    _patch_default_device(patcher, r)


class Mover:
    """The hand-written moves of one installation."""

    def __init__(self, r: Installation) -> None:
        self.r = r
        self.mark = r.ledger.mark
        self.original_to = torch._C.TensorBase.to

    def onto(self, t: torch.Tensor, index: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
        """``t.to(target, *args, **kwargs)`` as a move to emulated device ``index``: ``t`` itself (or its
        conversion) when it is there already, else a copy, marked; hosted in a dtype the target refuses."""
        there = mark_of(t) == index
        target = self.r.device_of(index)
        try:
            if not (args or kwargs or there):  # x.to("cuda") of a host tensor: a copy, nothing to convert
                return self.mark(self.original_to(t, target, copy=True), index)
            out = self.original_to(t, target, *args, **kwargs)
        except TypeError as error:
            if self.r.hosting is None:
                raise
            return self.mark(self.r.hosting.moved(error, t, parse_to((target, *args), kwargs).dtype), index)
        if there:
            return out if out is t else self.mark(out, index)
        if out is t:
            out = self.original_to(t, target, t.dtype, copy=True)
        return self.mark(out, index)

    def to(self) -> Any:
        original, devices, r, onto = self.original_to, self.r.devices, self.r, self.onto
        slot = r.counts.slot("torch.Tensor.to")

        @functools.wraps(torch.Tensor.to)
        def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            if args:
                value, rest, options = args[0], args[1:], kwargs
            elif "device" in kwargs:
                value, rest = kwargs["device"], ()
                options = {k: v for k, v in kwargs.items() if k != "device"}
            else:
                try:
                    return original(self, **kwargs)
                except TypeError as error:
                    return converted(error, self, args, kwargs)
            if isinstance(value, torch.Tensor):
                index = device_index(value)
                if index is None or device_index(self) == index:
                    return original(self, *args, **kwargs)
                return onto(self, index, (value.dtype, *rest), options)
            try:
                translated = devices[value]
            except TypeError:  # unhashable: not a device; torch reports the bad argument
                return original(self, *args, **kwargs)
            if translated != value:
                r.counts.count(slot)
                if torch.compiler.is_compiling():  # traced tensors are not the ones that will run
                    return original(self, translated, *rest, **options)
                return onto(self, r.index(value), rest, options)
            if type(value) is str and value.startswith("cpu") and _copied_to_host(self):
                return original(self, value, *rest, **{**options, "copy": True})
            try:
                return original(self, *args, **kwargs)
            except TypeError as error:  # a dtype the target refuses, for a tensor already there
                return converted(error, self, args, kwargs)

        converted = self.converted
        return to

    def converted(self, error: TypeError, t: torch.Tensor, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> torch.Tensor:
        """``t.to(*args, **kwargs)``, which raised ``error``: hosted where it makes a tensor of the target in a
        dtype the target refuses (a conversion there, or a move there named as the target's own device)."""
        if self.r.hosting is None:
            raise error
        try:
            asked = parse_to(args, kwargs)
        except TypeError:
            raise error from None
        if (asked.device or cpp_device(t)).type != self.r.device.type:
            raise error
        return self.r.hosting.moved(error, t, asked.dtype)

    def cuda(self) -> Any:
        r, onto = self.r, self.onto
        slot = r.counts.slot("torch.Tensor.cuda")

        @functools.wraps(torch.Tensor.cuda)
        def cuda(self: torch.Tensor, device: Any = None, non_blocking: bool = False,
                 memory_format: torch.memory_format = torch.preserve_format) -> torch.Tensor:
            if device is not None:
                r.devices[device]  # an index of no emulated device raises CUDA's error
            r.counts.count(slot)
            index = r.current() if device is None else r.index(device)
            if not non_blocking and memory_format is torch.preserve_format:
                return onto(self, index, (), {})
            return onto(self, index, (), {"non_blocking": non_blocking, "memory_format": memory_format})

        return cuda

    def cpu(self) -> Any:
        original = self.original_to
        host = torch.device("cpu")

        @functools.wraps(torch.Tensor.cpu)
        def cpu(self: torch.Tensor, memory_format: torch.memory_format = torch.preserve_format) -> torch.Tensor:
            return original(self, host, copy=_copied_to_host(self), memory_format=memory_format)

        return cpu

    def pin_memory(self) -> Any:
        mark = self.mark

        @functools.wraps(torch.Tensor.pin_memory)
        def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
            where = mark_of(self)
            if where == PINNED:
                return self
            if where is not None:
                raise RuntimeError(f"cannot pin '{_cuda_type(self)}' only dense CPU tensors can be pinned")
            return mark(self.clone(), PINNED)

        return pin_memory

    def legacy_type(self) -> Any:
        """``Tensor.type()`` names a device tensor's CUDA type; ``Tensor.type("torch.cuda.HalfTensor")`` and
        ``Tensor.type(torch.cuda.HalfTensor)`` (the emulated class) convert and move to the device."""
        original, r, onto = torch.Tensor.type, self.r, self.onto
        slot = r.counts.slot("torch.Tensor.type")
        there = on_device(r.target)

        @functools.wraps(original)
        def legacy_type(self: torch.Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
            if dtype is None and not kwargs:
                return _cuda_type(self) if there(self) else original(self)
            if isinstance(dtype, str) and dtype.startswith("torch.cuda."):
                legacy = getattr(torch, dtype.removeprefix("torch.cuda."), None)
                converted = getattr(legacy, "dtype", None)
            else:
                converted = getattr(dtype, "dtype", None) if getattr(dtype, "is_cuda", False) is True else None
            if converted is None:
                return original(self, dtype, non_blocking, **kwargs)
            r.counts.count(slot)
            return onto(self, r.current(), (converted,), {"non_blocking": non_blocking})

        return legacy_type

    def storage_cuda(self) -> Any:
        """``Storage.cuda()`` (``map_location`` callables use it): a copy on the device, unless already there."""
        r, mark = self.r, self.mark
        slot = r.counts.slot("torch.UntypedStorage.cuda")

        target = r.device

        @functools.wraps(torch.UntypedStorage.cuda)
        def cuda(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
            if device is not None:
                r.devices[device]  # an index of no emulated device raises CUDA's error
            r.counts.count(slot)
            index = r.current() if device is None else r.index(device)
            if getattr(self, MARK, None) == index or true_device(self).type == target.type != "cpu":
                return self
            if target.type == "cpu":
                return mark(self.clone(), index)
            moved = torch.empty(0, dtype=torch.uint8, device=true_device(self)).set_(self).to(r.device_of(index))
            return mark(moved.untyped_storage(), index)

        return cuda

    def storage_pin_memory(self) -> Any:
        mark = self.mark

        @functools.wraps(torch.UntypedStorage.pin_memory)
        def pin_memory(self: Any, device: Any = None) -> Any:
            return mark(self.clone(), PINNED)

        return pin_memory


def _deepcopy_keeps_residence(original: Any, r: Installation) -> Any:
    """``copy.deepcopy`` of device memory (a storage, which a tensor's deep copy copies, or a parameter, which
    ``nn.Parameter`` clones: ``nn.Transformer``'s cloned layers) is device memory, as on a GPU: the copy takes the
    original's mark."""
    @functools.wraps(original)
    def __deepcopy__(self: Any, memo: dict[int, Any]) -> Any:
        copied = original(self, memo)
        index = getattr(self, MARK, None) if isinstance(self, torch.UntypedStorage) else device_index(self)
        return copied if index is None or index < 0 else r.ledger.mark(copied, index)

    return __deepcopy__


def _copied_to_host(t: torch.Tensor) -> bool:
    """Whether a move of ``t`` to the host copies: a device tensor, or a tensor not known as a host one (it may
    have been computed from device tensors); pinned memory and parameters not made on a device are host
    tensors already (``nn.Parameter(x).to("cpu")`` returns the parameter, as on a GPU machine)."""
    where = mark_of(t)
    return where is not None and where >= 0 or where is None and not isinstance(t, torch.nn.Parameter)


def _cuda_type(t: torch.Tensor) -> str:
    """``torch.cuda.FloatTensor`` for a float32 tensor (of the host or of a simulated device)."""
    return "torch.cuda." + torch._C.TensorBase.type(t).rpartition(".")[2]


def _record_stream(original: Any, emulation: Emulation) -> Any:
    """``x.record_stream(stream)`` of an emulated stream records nothing: its work runs in order, so no memory is
    reused before it is done (torch's would refuse the stream object: "unknown parameter type")."""
    stream_class = emulation.classes["Stream"]

    @functools.wraps(original)
    def record_stream(self: torch.Tensor, stream: Any) -> None:
        if not isinstance(stream, stream_class):
            return original(self, stream)
        return None

    return record_stream


def _is_pinned(original: Any) -> Any:
    @functools.wraps(original)
    def is_pinned(self: Any, device: Any = None) -> bool:
        where = getattr(self, MARK, None) if isinstance(self, torch.UntypedStorage) else mark_of(self)
        return where == PINNED or original(self)

    return is_pinned


def _get_device(original: Any) -> Any:
    @functools.wraps(original)
    def get_device(self: torch.Tensor) -> int:
        index = device_index(self)
        return original(self) if index is None else index

    return get_device


def _residence_property(name: str, answer: bool, target: Target) -> TensorAttribute:
    """``is_cuda``/``is_cpu``: a device tensor's answer on a GPU for the program (:func:`on_device`); torch's own
    code gets the machine's (it would take CUDA-only paths)."""
    real = vars(torch._C.TensorBase)[name].__get__
    there = on_device(target)
    point = f"Tensor.{name}"

    def get(self: torch.Tensor) -> bool:
        if not there(self) or told_the_truth(point):
            return real(self)
        return answer

    return TensorAttribute(name, get)


def _module_to(original: Any, r: Installation) -> Any:
    """``Module.to``: a bare index (``model.to(rank)``) names a CUDA device, as on a GPU machine; the parameters
    and buffers then move through ``Tensor.to``."""

    @functools.wraps(original)
    def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if args and _is_index(args[0]):
            r.devices[args[0]]  # an index of no emulated device raises CUDA's error
            args = (torch.device("cuda", args[0]), *args[1:])
        elif _is_index(kwargs.get("device")):
            r.devices[kwargs["device"]]
            kwargs = {**kwargs, "device": torch.device("cuda", kwargs["device"])}
        return original(self, *args, **kwargs)

    return to


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _patch_default_device(patcher: Patcher, r: Installation) -> None:
    """DeviceContext (``torch.set_default_device``, ``with torch.device(...)``): its device translated, the
    tensors it makes for a CUDA device marked, and its set of factories holding the originals the
    runtime's wrappers call, so that ``with torch.device("meta"):`` still makes meta tensors."""
    context = torch.utils._device.DeviceContext
    init, handle = context.__init__, context.__torch_function__
    constructors = torch.utils._device._device_constructors
    slot = r.counts.slot("torch.set_default_device")

    @functools.wraps(init)
    def __init__(self: Any, device: Any) -> None:
        translated = r.device_value(slot, device)
        if translated != device:
            setattr(self, ASKED, device)
        init(self, translated)

    @functools.cache
    def _device_constructors() -> set[Any]:
        found = constructors()
        return found | {getattr(f, "__wrapped__", f) for f in found}

    @functools.wraps(handle)
    def __torch_function__(self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        asked = getattr(self, ASKED, None)
        if asked is not None and func in _device_constructors() and (kwargs or {}).get("device") is None:
            try:
                return r.born(handle(self, func, types, args, kwargs), asked)
            except TypeError as error:  # a dtype the target refuses (float64 on MPS): hosted
                return r.born(r.remade(error, func, args, kwargs or {}, None), asked)
        return handle(self, func, types, args, kwargs)

    original_default = torch.get_default_device

    @functools.wraps(original_default)
    def get_default_device() -> torch.device:
        stack = torch.overrides._get_current_function_mode_stack()
        mode = next((m for m in reversed(stack) if isinstance(m, context)), None)
        if mode is None:
            mode = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
        asked = getattr(mode, ASKED, None)
        return original_default() if asked is None else torch.device("cuda", r.index(asked))

    patcher.set(context, "__init__", __init__)
    patcher.set(context, "__torch_function__", __torch_function__)
    patcher.set(torch.utils._device, "_device_constructors", _device_constructors)
    patcher.set(torch, "get_default_device", get_default_device)
