"""Device tensors of the dtypes the device has none of (float64 and complex128 on MPS), kept by the host.

MPS refuses float64: ``torch.from_numpy(a).to("mps")``, ``torch.ones(4, dtype=torch.float64, device="mps")``
and ``x.double()`` raise. A CUDA program that puts float64 on "cuda" gets a :class:`HostedTensor`
instead: a tensor that says it is on the device (``x.device`` is ``mps:0``, ``x.is_mps``) and whose
data is a host tensor. Every op with a hosted tensor among its arguments runs on the host
(:func:`torchdevice.device.host_call.call`, the way :class:`_Unwrapped`) and is reported as a fallback: device
tensors among its arguments are copied to the host, the results of dtypes the device cannot hold are hosted, the
others go to the device (``x64.float()`` is a device tensor again), device tensors it writes are written back. A
host tensor of one element or more mixed
with a hosted one raises MPS's error, as with any device tensor. The program sees CUDA's dtypes,
values, type promotion and gradients.

Where they come from: every result computed on the host for the device is placed by one rule
(:meth:`torchdevice.device.host_call.Way.place`: hosted in a dtype of :attr:`Hosting.dtypes`), so the fallback engine
hosts the float64 results it computes: the calls MPS's limits table says refuse float64 (a conversion on the device,
at any level: ``x.double()``, ``torch.ops.aten._to_copy``; a ``dtype=float64`` asked of float32 tensors; a function
computing in float64 inside) are routed there. A call the device refused with that ``TypeError`` where the runtime
already stands (the factory wrappers, moves onto the device, checkpoints loaded onto it; :class:`Hosting`) is made
again on the host, its result hosted. A
function made of ops that the device refuses midway (``torch.quantile`` converts its sort's indices)
runs whole on the host when no gradient is to be followed. A program that never asks for float64 pays
nothing.

One code path for the Mac and the simulated Mac (:mod:`torchdevice.simulated`, whose device also refuses
float64): device tensors are reached only through ``aten._to_copy``. What differs is the hosted tensor's own
device in C++ (which autograd checks gradients against): ``mps`` on a Mac, the simulated device on the simulated
Mac.

A :class:`Hosting` belongs to its target (:attr:`~torchdevice.device.target.Target.hosting`); each hosted tensor
carries the device it says it is on, so nothing of an installation is kept in this module.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import Any

import torch

from torchdevice.device import host_call
from torchdevice.device.aten import cpp_device, tensors
from torchdevice.device.errors import classify
from torchdevice.device.host_call import CPU, Way
from torchdevice.device.limits import WIDE
from torchdevice.device.placement import HOST_ARGUMENTS, placement_error
from torchdevice.device.to_arguments import parse_to
from torchdevice.reporting.counts import record_fallback

_COUNTED = "_torchdevice_hosted"
"""The storage attribute that says a hosted storage is counted."""
_aten = torch.ops.aten
class HostBacked(torch.Tensor):
    """A tensor of the MPS device whose values are host memory, answering as an MPS tensor does: the simulated
    Mac's device tensors and the hosted ones (``values_on_host()``: those values as a plain host tensor)."""

    is_mps = property(lambda self: True)  # type: ignore[assignment]
    is_cpu = property(lambda self: False)  # type: ignore[assignment]

    def values_on_host(self) -> torch.Tensor:
        raise NotImplementedError

    def get_device(self) -> int:
        return 0

    def tolist(self) -> Any:
        return self.values_on_host().tolist()

    def numpy(self, *, force: bool = False) -> Any:
        if force:
            return self.values_on_host().numpy(force=True)
        raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the "
                        "tensor to host memory first.")

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        """As torch prints an MPS tensor: ``tensor([...], device='mps:0'[, dtype=...][, grad_fn=...])``."""
        text = torch._tensor_str._str(self.values_on_host().detach(), tensor_contents=tensor_contents)
        end = re.search(r", (?:size|dtype)=[^\n]*\)$", text)
        at = end.start() if end else len(text) - 1
        text = f"{text[:at]}, device='{self.device}'{text[at:]}"
        if self.grad_fn is not None:
            return f"{text[:-1]}, grad_fn=<{type(self.grad_fn).__name__}>)"
        return f"{text[:-1]}, requires_grad=True)" if self.requires_grad else text

    def __format__(self, spec: str) -> str:
        return self.item().__format__(spec) if self.dim() == 0 else object.__format__(self, spec)


class HostedTensor(HostBacked):
    """A device tensor whose data (``host``) the host keeps."""

    host: torch.Tensor
    shown: torch.device
    """The device it says it is on (``mps:0``)."""
    hosting: Hosting

    @staticmethod
    def __new__(cls, host: torch.Tensor, hosting: Hosting, requires_grad: bool = False) -> HostedTensor:
        if host.layout == torch.strided:
            made = torch.Tensor._make_wrapper_subclass(cls, host.size(), host.stride(), host.storage_offset(),
                                                       dtype=host.dtype, device=hosting.physical,
                                                       requires_grad=requires_grad)
        elif host.layout == torch.sparse_coo:  # to_sparse() of a hosted tensor: no strides or storage of its own
            made = torch.Tensor._make_wrapper_subclass(cls, host.size(), dtype=host.dtype, layout=host.layout,
                                                       device=hosting.physical, requires_grad=requires_grad)
        else:
            raise NotImplementedError(f"torchdevice: {host.layout} tensors of {host.dtype} are not supported on "
                                      f"{hosting.shown.type}, which has no {host.dtype}: torchdevice keeps strided "
                                      "and sparse COO ones for it; run this program on the cpu target")
        made.host, made.shown, made.hosting = host, hosting.shown, hosting
        hosting.count(host)
        return made

    device = property(lambda self: self.shown, doc="The device, ``mps:0``.")  # type: ignore[assignment]

    def follow_host(self) -> None:
        """Take the host data's geometry, where an op changed it in place (``resize_``, ``unsqueeze_``, an ``out=``
        tensor the kernel sized): a wrapper keeps the sizes it was made with."""
        host = self.host
        with torch._C.DisableTorchFunctionSubclass():
            if (self.shape, self.stride(), self.storage_offset()) != (host.shape, host.stride(),
                                                                       host.storage_offset()):
                remade = HostedTensor(host, self.hosting)
                with torch._C._DisableTorchDispatch():
                    self.data = remade

    def values_on_host(self) -> torch.Tensor:
        return self.host

    def untyped_storage(self) -> torch.UntypedStorage:
        """The host data's storage (where the runtime's residence marks go)."""
        return self.host.untyped_storage()

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Saved as a host tensor (``torch.save``, pickling to other processes)."""
        return self.host.detach().__reduce_ex__(protocol)

    def __deepcopy__(self, memo: dict[int, Any]) -> HostedTensor:
        copy = HostedTensor(self.host.detach().clone(), self.hosting, self.requires_grad)
        copy.__dict__.update({k: v for k, v in self.__dict__.items() if k != "host"})
        memo[id(self)] = copy
        return copy

    @classmethod
    def __torch_function__(cls, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        hosting = _hosting((args, kwargs))
        if getattr(func, "__name__", None) == "to" and args and isinstance(args[0], HostedTensor):
            asked = parse_to(args[1:], kwargs)
            there = asked.device is None or asked.device.type in (hosting.shown.type, hosting.physical.type)
            if there and asked.dtype in (None, args[0].dtype) and not asked.copy:
                return args[0]  # already there: as on a Mac, where its device in C++ is the device
        with torch._C.DisableTorchFunctionSubclass():
            try:
                return func(*args, **kwargs)
            except TypeError as error:
                # a function made of ops (torch.quantile) put a result on the device and converted it to a
                # dtype the device refuses: without gradients to follow, the whole call runs on the host
                if not hosting.refused(error) or torch.is_grad_enabled() and any(
                        t.requires_grad for t in tensors((args, kwargs))):
                    raise
                record_fallback(f"{getattr(func, '__module__', None) or 'torch'}.{func.__name__}", "cpu",
                                why="a float64 step the device refuses")
                return hosting.on_host(func, args, kwargs, takes_host=True)

    @classmethod
    def __torch_dispatch__(cls, func: torch._ops.OpOverload, types: Any, args: Any = (),  # type: ignore[override]
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        hosting = _hosting((args, kwargs))
        value = hosting.on_host(func, args, kwargs, takes_host=func._opname in HOST_ARGUMENTS)
        if func.namespace == "aten" and not func.is_view and func._opname not in _BOOKKEEPING:
            record_fallback(func._name, "cpu", why=lambda: _why(args, hosting.shown))
        return value


def _bits_seen() -> Any:
    """A context where the host's kernels see conjugate and negative views (a wrapper's dispatch excludes the keys
    that resolve them, so ``z.conj()`` would be read as ``z``)."""
    excluded = torch._C._dispatch_tls_local_exclude_set()
    for key in (torch._C.DispatchKey.Conjugate, torch._C.DispatchKey.Negative):
        excluded = excluded.remove(key)
    return torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), excluded)


def _hosting(value: Any) -> Hosting:
    """The hosting of the first hosted tensor in ``value`` (a call a hosted tensor's own code handles has one)."""
    return next(t.hosting for t in tensors(value) if isinstance(t, HostedTensor))


_BOOKKEEPING = frozenset({"_to_copy", "copy_", "lift_fresh", "_local_scalar_dense", "clone"})
"""Ops that move or keep data rather than compute: not counted as fallbacks (nor are views)."""


def _why(args: Any, shown: torch.device) -> str:
    """Why an op with these arguments ran on the host: ``float64 not supported on MPS``."""
    dtypes = sorted({str(x.dtype).removeprefix("torch.") for x in tensors(args) if isinstance(x, HostedTensor)})
    return f"{'/'.join(dtypes) or 'float64'} not supported on {shown.type.upper()}"


class _Hold(torch.autograd.Function):
    """``x`` converted to ``dtype`` as a hosted tensor, in the autograd graph: its gradient goes back to where
    ``x`` is, in ``x``'s dtype."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dtype: torch.dtype, hosting: Hosting) -> HostedTensor:
        ctx.back = {"dtype": x.dtype, "device": hosting.physical if hosting.holds(x) else CPU}
        host = x.host if isinstance(x, HostedTensor) else _aten._to_copy.default(x.detach(), device=CPU)
        return HostedTensor(_aten._to_copy.default(host, dtype=dtype), hosting)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return _aten._to_copy.default(grad, **ctx.back), None, None


class _Unwrapped(Way):
    """Hosted tensors' way to the host: a hosted tensor as its data (which the op changes in place), a device tensor
    copied; a conversion to the host (``.cpu()``) leaves its result there."""

    def __init__(self, hosting: Hosting, func: Callable[..., Any], kwargs: dict[str, Any], takes_host: bool) -> None:
        super().__init__()
        self.hosting, self.devices = hosting, (hosting.shown.type, hosting.physical.type)
        self.real = func is _aten.view_as_real.default  # a conjugate view has its values as the view of its real parts
        self.leaves_host = func is _aten._to_copy.default and kwargs.get("device") == CPU
        self.takes_host = takes_host
        self.hosted: list[HostedTensor] = []

    def tensor(self, x: torch.Tensor) -> torch.Tensor:
        hosting = self.hosting
        assert hosting is not None
        if isinstance(x, HostedTensor):
            self.hosted.append(x)
            self.own[id(x.host)] = x
            return x.host.resolve_conj() if self.real else x.host
        if hosting.holds(x):
            copy = _aten._to_copy.default(x, device=CPU)
            self.copies.append((x, copy))
            self.own[id(copy)] = x
            return copy
        if x.dim() > 0 and not self.takes_host:
            raise placement_error(hosting.shown)
        return x

    def run(self, op: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        with _bits_seen():
            value = op(*args, **kwargs)
        for x in self.hosted:
            x.follow_host()
        return value

    def place(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.leaves_host else super().place(x)

    def to_device(self, x: torch.Tensor) -> torch.Tensor:
        assert self.hosting is not None
        return _aten._to_copy.default(x, device=self.hosting.physical)


class Hosting:
    """How a device keeps the dtypes it has no tensors of (:data:`WIDE`): hosted tensors that say they are on
    ``shown`` and are tensors of ``physical`` in C++."""

    dtypes = WIDE

    def __init__(self, shown: torch.device, physical: torch.device) -> None:
        self.shown = torch.device(shown.type, 0)
        self.physical = physical
        self.allocated = 0
        """Bytes of the live host storages of hosted tensors (device memory, to the program)."""

    def count(self, host: torch.Tensor) -> None:
        """Count ``host``'s storage (a sparse one's values') among the hosted bytes while it lives (once)."""
        if host.layout == torch.sparse_coo:
            host = host._values()
        storage = host.untyped_storage()
        if not storage.__dict__.get(_COUNTED):
            storage.__dict__[_COUNTED] = True
            self.allocated += storage.nbytes()
            weakref.finalize(storage, self._release, storage.nbytes())

    def _release(self, nbytes: int) -> None:
        self.allocated -= nbytes

    def holds(self, x: torch.Tensor) -> bool:
        """Whether ``x`` is a tensor of the device (a hosted one, or one of the device in C++)."""
        return isinstance(x, HostedTensor) or cpp_device(x).type == self.physical.type

    def refused(self, error: BaseException) -> bool:
        """Whether ``error`` is this device refusing a dtype."""
        return classify(error, self.shown.type.upper()) == "dtype"

    def hold(self, x: Any) -> Any:
        """Host tensor ``x`` as a hosted device tensor (other values as they are)."""
        if not isinstance(x, torch.Tensor) or isinstance(x, HostedTensor):
            return x
        if x.requires_grad and x.grad_fn is None:
            return HostedTensor(x.detach(), self, requires_grad=True)
        return HostedTensor(x.detach(), self) if not x.requires_grad else _Hold.apply(x, x.dtype, self)

    def on_host(self, func: Callable[..., Any], args: Any, kwargs: dict[str, Any], *, takes_host: bool) -> Any:
        """``func`` run on the host (:func:`~torchdevice.device.host_call.call`, the way :class:`_Unwrapped`):
        hosted tensors as their data, device tensors copied (and written back where an aten op writes them), the
        device as the host; results of the dtypes the device lacks hosted, the others on the device, arguments
        returned as the caller's own (``takes_host``: host tensors that are not scalars are allowed among the
        arguments)."""
        return host_call.call(func, args, kwargs, _Unwrapped(self, func, kwargs, takes_host))

    def remade(self, error: BaseException, call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
               device: Any) -> Any:
        """``call(*args, **kwargs)``, which the device refused with ``error``, made on the host with ``device``
        (the device value it was given; ``None``: it was given none) replaced by the host; its result hosted.
        ``error`` is raised again unless it is that refusal and the result has a dtype the device lacks."""
        if not self.refused(error):
            raise error
        if device is None:
            kwargs = {**kwargs, "device": CPU}
        else:
            args = tuple(CPU if a is device else a for a in args)
            kwargs = {k: CPU if v is device else v for k, v in kwargs.items()}
        value = call(*args, **kwargs)
        if not isinstance(value, torch.Tensor) or value.dtype not in self.dtypes:
            raise error
        return self.hold(value)

    def moved(self, error: BaseException, t: torch.Tensor, dtype: torch.dtype | None) -> HostedTensor:
        """``t`` moved to the device as ``dtype``, which the device refused with ``error``: hosted (a copy, in
        the autograd graph)."""
        dtype = dtype or t.dtype
        if not self.refused(error) or dtype not in self.dtypes:
            raise error
        return _Hold.apply(t, dtype, self)  # recorded only where t requires a gradient
