"""One way to run an aten call on the host for a device, and to hand back what the device's kernel would return.

Three callers run calls on the host: the fallback engine's CPU route (:mod:`torchdevice.fallback.route`), hosted
float64 tensors (:mod:`torchdevice.device.hosted`) and the simulated devices' kernels
(:mod:`torchdevice.simulated.kernels`). :func:`call` is what they share; a :class:`Way` is how each reaches the host
(one small subclass each):

- the call's tensors are mapped to host tensors by the way (:meth:`Way.to_host`: copied, unwrapped, or host aliases
  over device memory; ``out=`` tensors by :meth:`Way.output`), each tensor once per call, so that a tensor given
  twice is one tensor to the kernel; devices of the target become the host;
- an ``out=`` call whose ``out`` is its ``self`` runs as the in-place overload
  (:func:`~torchdevice.device.aten.in_place_of_out`);
- the host tensors the op wrote that are not the caller's memory (copies, fresh ``out=`` tensors) are written into
  the caller's tensors, resized first where the kernel resized them (:meth:`Way.write`);
- the results: a host tensor standing for an argument (in place, ``out=``, an argument returned as is) is the
  caller's own tensor; a packed sequence's batch sizes stay host tensors (:data:`HOST_RESULTS`); every new tensor
  goes where :meth:`Way.place` puts it, by one rule: hosted where the device has no tensors of its dtype
  (float64 and complex128 on MPS: :class:`~torchdevice.device.hosted.Hosting`), else onto the device
  (:meth:`Way.to_device`). The result keeps its structure (tensor, tuple, list, ``torch.return_types``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torchdevice.device.aten import OpSchema, in_place_of_out, tree_map
from torchdevice.device.placement import HOST_RESULTS

if TYPE_CHECKING:
    from torchdevice.device.hosted import Hosting

CPU = torch.device("cpu")


class Way:
    """How one call's tensors reach the host and its new results the device; made per call (it keeps the call's
    tensors: :attr:`own`, :attr:`copies`)."""

    hosting: Hosting | None = None
    """How the device keeps the dtypes it has none of; None: it has every dtype the host computes."""
    devices: tuple[str, ...] = ()
    """The device types that name the device: such a device argument becomes the host."""

    def __init__(self) -> None:
        self.hosts: dict[int, torch.Tensor] = {}
        """The caller's tensor (by id) -> its host tensor."""
        self.own: dict[int, torch.Tensor] = {}
        """Host tensor (by id) -> the caller's tensor it stands for (each kept alive by the call: :attr:`hosts`,
        :attr:`copies`, the host arguments)."""
        self.copies: list[tuple[torch.Tensor, torch.Tensor]] = []
        """(caller's tensor, host tensor) where the host tensor is not the caller's memory: written back if written."""

    def to_host(self, x: Any) -> Any:
        """An argument (a leaf) as the host kernel takes it."""
        if isinstance(x, torch.Tensor):
            host = self.hosts.get(id(x))
            if host is None:
                host = self.hosts[id(x)] = self.tensor(x)
            return host
        if isinstance(x, torch.device) and x.type in self.devices:
            return CPU
        return x

    def tensor(self, x: torch.Tensor) -> torch.Tensor:
        """Tensor argument ``x`` on the host, once per call (recorded in :attr:`own`, and :attr:`copies` where it is a
        copy)."""
        raise NotImplementedError

    def output(self, x: Any) -> Any:
        """An ``out=`` argument (a leaf) as the host kernel takes it (default: as any argument)."""
        return self.to_host(x)

    def run(self, op: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The op on the host arguments."""
        return op(*args, **kwargs)

    def write(self, original: torch.Tensor, host: torch.Tensor) -> None:
        """The caller's tensor ``original`` given what the op wrote into its host copy ``host``."""
        write_back(original, host)

    def place(self, x: torch.Tensor) -> torch.Tensor:
        """A new host result where the device keeps it: hosted in a dtype the device lacks, else on the device."""
        if self.hosting is not None and x.dtype in self.hosting.dtypes:
            return self.hosting.hold(x)
        return self.to_device(x)

    def to_device(self, x: torch.Tensor) -> torch.Tensor:
        """A new host result of a dtype the device has, on the device."""
        raise NotImplementedError

    def placed(self, x: Any) -> Any:
        """A result (a leaf): the caller's tensor it stands for, else placed (:meth:`place`)."""
        if not isinstance(x, torch.Tensor):
            return x
        own = self.own.get(id(x))
        return own if own is not None else self.place(x)


def write_back(original: torch.Tensor, computed: torch.Tensor) -> None:
    """``computed`` into the caller's tensor ``original``, resized first where the kernel resized it (``out=``)."""
    if original.shape != computed.shape:
        original.resize_(computed.shape)
    original.copy_(computed)


def call(op: Any, args: Any, kwargs: dict[str, Any], way: Way) -> Any:
    """``op(*args, **kwargs)`` computed on the host the ``way`` says, returned as the device's kernel returns it (see
    the module docstring). ``op`` may be another callable than an aten overload (a function a hosted tensor runs
    whole): its arguments are then neither written back nor read as a schema."""
    overload = isinstance(op, torch._ops.OpOverload)
    schema = None
    if overload:
        in_place = in_place_of_out(op, args, kwargs)
        if in_place is not None:
            op, kwargs = in_place, {k: v for k, v in kwargs.items() if k != "out"}
        schema = OpSchema.of(op)
    outputs = schema.outputs if schema is not None else ()
    host_args = [tree_map(way.to_host, a) for a in args]
    host_kwargs = {k: tree_map(way.output if k in outputs else way.to_host, v) for k, v in kwargs.items()}
    value = way.run(op, host_args, host_kwargs)
    if way.copies and schema is not None:
        written = {id(t) for t in schema.written_tensors(args, kwargs)}
        for original, host in way.copies:
            if id(original) in written:
                way.write(original, host)
    at = HOST_RESULTS.get(op._opname) if overload else None
    if at is not None:  # a packed sequence's batch sizes: a host tensor on every device
        return (*tree_map(way.placed, value[:at]), value[at], *tree_map(way.placed, value[at + 1:]))
    return tree_map(way.placed, value)
