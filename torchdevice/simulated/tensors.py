"""The simulated Mac's device tensors: placement, moves and memory of the device ``mps:0`` on the host.

Device tensors are :class:`DeviceTensor`\\ s: host memory, but ``x.device`` is ``mps:0`` and
``x.is_mps`` is True, as torch's Python code and the program see them; host tensors stay plain
tensors, untouched. Where the device tensors come from: factories and moves name ``mps:0`` (what
``"cuda"`` means on this target), which dispatch to the ``MPS`` key, where a backend fallback makes
the tensor on the host and marks it (:func:`_allocate`).

Each op on device tensors runs as on a Mac (:meth:`DeviceTensor.__torch_dispatch__`): on MPS's
simulated kernels (:mod:`.simulated`, with Apple silicon's whole table), through the fallback
engine's kernels registered under ``PrivateUse1``, as they are under ``MPS`` on a Mac. float64 and
complex128 are refused as MPS refuses them, and the runtime hosts them as it does on a Mac
(:mod:`torchdevice.device.hosted`): the program sees CUDA's dtypes and values. A Python call that mixes a device
tensor with a host tensor of one element or more raises MPS's error (:func:`_check_placement`), as
do ``.numpy()`` and the like; ``.cpu()``/``.to("cpu")`` copy to the host.

What it cannot show: speed, memory use (the CPU computes everything), and which exact kernels the
C++ code of an op picks on a Mac (torch's C++ sees CPU tensors).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch._C import DispatchKey, DispatchKeySet

from torchdevice.device.aten import tensors, tree_map
from torchdevice.device.hosted import WIDE, HostBacked, HostedTensor, placement_error
from torchdevice.device.residence import MARK
from torchdevice.device.to_arguments import parse_to
from torchdevice.simulated.kernels import NO_FLOAT64, including

DEVICE = torch.device("mps", 0)
CPU = torch.device("cpu")
NAME = "mps-sim"
"""The target's name in the capability cache."""
_GRAD: Any = vars(torch._C.TensorBase)["grad"]
_PYTHON = DispatchKeySet(DispatchKey.Python) | DispatchKeySet(DispatchKey.PythonTLSSnapshot)
_HOST_ARGUMENTS = frozenset({
    "to", "copy_", "__getitem__", "__setitem__", "index_put_", "index_put", "new_tensor", "set_",
    "_pack_padded_sequence", "_pad_packed_sequence", "ctc_loss",
})
"""Python calls that take host tensors with device tensors, as on a GPU (copies, indices, lengths)."""
_RNNS = frozenset({"lstm", "gru", "rnn_tanh", "rnn_relu"})
"""Recurrent layers' ops: a packed sequence's batch sizes (the second argument) are a host tensor on every device."""
_HOST_RESULTS = {"_pack_padded_sequence": 1, "_pad_packed_sequence": 1}
"""Ops that return a host tensor at this position on every device (a packed sequence's batch sizes)."""


class DeviceTensor(HostBacked):
    """A tensor of the simulated device, in host memory."""

    device = property(lambda self: DEVICE, doc="The simulated device, ``mps:0``.")  # type: ignore[assignment]

    def values_on_host(self) -> torch.Tensor:
        return host_view(self)

    @property  # type: ignore[override]
    def grad(self) -> torch.Tensor | None:
        """The gradient, on the device: one that torch's C++ made on the host (a backward formula's
        zeros) is marked as the device's."""
        grad = _GRAD.__get__(self)
        if grad is not None and type(grad) is torch.Tensor:
            grad = on_device(grad)
            _GRAD.__set__(self, grad)
        return grad

    @grad.setter
    def grad(self, value: torch.Tensor | None) -> None:
        _GRAD.__set__(self, value)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Saved as a host tensor (``torch.save``, pickling to other processes)."""
        return self.cpu().__reduce_ex__(protocol)

    @classmethod
    def __torch_function__(cls, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if HostedTensor in types:  # a Mac's device tensors have no Python code: the hosted tensor's runs
            return NotImplemented
        kwargs = kwargs or {}
        name = getattr(func, "__name__", None)
        if name == "to" or name == "cpu":
            return _to(*args, **kwargs) if name == "to" else _to(args[0], CPU)
        if name in _RNNS and len(args) > 1 and isinstance(args[1], torch.Tensor):
            _check_placement((args[0], *args[2:]), kwargs)
        elif name not in _HOST_ARGUMENTS:
            _check_placement(args, kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            value = func(*args, **kwargs)
        # what torch's C++ made of device tensors with their options (a host device) is the device's
        return value if isinstance(kwargs.get("device"), (str, torch.device)) else _placed(name, value, args, kwargs)

    @classmethod
    def __torch_dispatch__(cls, func: torch._ops.OpOverload, types: Any, args: Any = (),  # type: ignore[override]
                           kwargs: Any = None) -> Any:
        if HostedTensor in types:
            return NotImplemented
        kwargs = kwargs or {}
        to_host = kwargs.get("device") == CPU
        with torch._C.DisableTorchFunctionSubclass():
            if func.namespace != "aten" or to_host:
                with torch._C._ExcludeDispatchKeyGuard(_PYTHON):
                    value = func(*args, **kwargs)
            else:
                value = _simulated(func, args, kwargs)
        return value if to_host else _placed(func._opname, value, args, kwargs)


def on_device(x: torch.Tensor) -> DeviceTensor:
    """Host tensor ``x`` marked as the device's (the same memory, the same place in the autograd graph); one
    of a dtype MPS has no tensors of raises MPS's error, as its allocation does there."""
    if x.dtype in WIDE:
        raise TypeError(NO_FLOAT64)
    with torch._C._ExcludeDispatchKeyGuard(_PYTHON):
        return torch._C.TensorBase.as_subclass(x, DeviceTensor)


def host_view(x: torch.Tensor) -> torch.Tensor:
    """Device tensor ``x`` as a plain host tensor (the same memory)."""
    with torch._C._ExcludeDispatchKeyGuard(_PYTHON), torch._C.DisableTorchFunctionSubclass():
        return torch.ops.aten.alias(x).detach()


def _simulated(func: torch._ops.OpOverload, args: Any, kwargs: dict[str, Any]) -> Any:
    """``func`` on MPS's simulated kernels (or the engine's), given host views of the device tensors
    (a Python kernel registered as a backend fallback cannot take tensors with a Python key); what it
    returns of them and what it resized are the device tensors again."""
    views: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def view(x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, DeviceTensor):
            return x
        v = host_view(x)
        views[id(v)] = (x, v)
        return v

    with including(_PYTHON):
        value = func(*tree_map(view, args), **{k: tree_map(view, v) for k, v in kwargs.items()})
    with torch._C._ExcludeDispatchKeyGuard(_PYTHON):
        for device_tensor, v in views.values():  # an out= tensor resized, an in-place change of shape
            if v.shape != device_tensor.shape or v.stride() != device_tensor.stride() or (
                    v.untyped_storage().data_ptr() != device_tensor.untyped_storage().data_ptr()):
                torch.ops.aten.set_.source_Tensor(device_tensor, v)
    return tree_map(lambda t: views[id(t)][0] if id(t) in views else t, value)


def _placed(name: str | None, value: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """Each new host tensor of the result of ``name`` marked as the device's (arguments returned stay what
    they are, and so do the results every device returns on the host)."""
    if isinstance(value, DeviceTensor) or not isinstance(value, (torch.Tensor, list, tuple)) or (
            type(value) is torch.Size):
        return value
    if name in _HOST_RESULTS:
        at = _HOST_RESULTS[name]
        return (*_placed(None, value[:at], args, kwargs), value[at], *_placed(None, value[at + 1:], args, kwargs))
    given = {id(t) for t in tensors((args, kwargs))}
    return tree_map(lambda t: on_device(t) if isinstance(t, torch.Tensor) and id(t) not in given and not isinstance(
        t, HostBacked) else t, value)


def _to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``Tensor.to`` of a device tensor: to the host, a copy; on the device, itself or a converted tensor."""
    asked = parse_to(args, kwargs)
    device, dtype, non_blocking, copy, memory_format = (asked.device, asked.dtype, asked.non_blocking, asked.copy,
                                                        asked.memory_format)
    with torch._C.DisableTorchFunctionSubclass():
        if device is None or device.type == "mps":
            return torch._C.TensorBase.to(self, dtype=dtype or self.dtype, non_blocking=non_blocking, copy=copy,
                                          memory_format=memory_format or torch.preserve_format)
        if device.type != "cpu":
            return torch._C.TensorBase.to(self, device, dtype or self.dtype, non_blocking, copy)
        return torch.ops.aten._to_copy(self, dtype=dtype or self.dtype, device=CPU,
                                       memory_format=memory_format or torch.preserve_format)


def _check_placement(args: Any, kwargs: dict[str, Any]) -> None:
    """MPS's error for a Python call that mixes device tensors with a host tensor that is not a scalar."""
    found = tensors((args, kwargs))
    if any(type(t) is not DeviceTensor and t.dim() > 0 and t.device.type == "cpu" for t in found) and any(
            isinstance(t, DeviceTensor) for t in found):
        raise placement_error(DEVICE)


def allocate(keyset: Any, op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    """The simulated device's memory: an op that makes tensors on ``mps`` makes them on the host and
    marks them (float64 and complex128 are refused there, as MPS refuses them)."""
    kwargs = {k: CPU if isinstance(v, torch.device) and v.type == "mps" else v for k, v in kwargs.items()}
    args = tuple(CPU if isinstance(a, torch.device) and a.type == "mps" else a for a in args)
    return tree_map(lambda t: on_device(t) if isinstance(t, torch.Tensor) else t, op(*args, **kwargs))


def compatible(original: Callable[[torch.Tensor, torch.Tensor], bool]) -> Callable[..., bool]:
    """``Module.to`` replaces a parameter moved between host and device (or hosted) instead of swapping its data,
    as on a Mac, where their tensors differ in C++."""
    @functools.wraps(original)
    def compatible(a: torch.Tensor, b: torch.Tensor) -> bool:
        return _kind(a) == _kind(b) and original(a, b)

    return compatible


def _kind(t: torch.Tensor) -> type | None:
    return DeviceTensor if isinstance(t, DeviceTensor) else HostedTensor if isinstance(t, HostedTensor) else None


def restore_on_host(obj: Any, location: str) -> Any:
    """``torch.load`` to ``mps``: the storage stays in host memory (the runtime marks it as the device's)."""
    return obj if location.startswith("mps") else None


def rebuilt_on_device(rebuild: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``torch._utils._rebuild_tensor``: a tensor of a storage restored on the device is a device tensor, as
    on a Mac (whose allocation refuses float64: so does :func:`on_device`)."""
    @functools.wraps(rebuild)
    def rebuilt(storage: Any, *args: Any) -> torch.Tensor:
        t = rebuild(storage, *args)
        where = getattr(storage._untyped_storage, MARK, None)
        return t if where is None or where < 0 else on_device(t)

    return rebuilt
