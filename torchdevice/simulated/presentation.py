"""What the program sees of the simulated Mac: Apple silicon's answers, where the device is torch's ``mps_sim``.

While the simulation is installed (every patch through the runtime's patcher):

- device tensors and their storages say they are on ``mps:0`` (``x.device``, ``x.is_mps``, printing,
  ``x.untyped_storage().device``), as a Mac's do, to the program
  and the libraries it uses; torch's own code, which computes with them, gets their device as torch knows it;
- ``torch.backends.mps`` says MPS is built and available, on the simulated macOS version
  (:func:`torchdevice.device.limits.macos`), so libraries that pick ``"mps"`` themselves (transformers, peft) do, and
  the runtime translates ``"mps"`` as it translates ``"cuda"`` (the target's ``aliases``);
- ``torch.mps`` answers for the simulated device: its generator, which ``torch.manual_seed`` seeds too, the bytes
  of its live allocations, synchronisation (nothing to wait for);
- checkpoints record device storages at ``mps:0``, as a Mac writes them, and storages recorded at ``mps`` (or
  ``mps_sim``) are restored onto the device;
- ``Module.to`` keeps each parameter object, as a Mac's does (assigning ``param.data`` on the compiled backend,
  :mod:`.backend`; swapping the parameters' tensors on the Python one);
- ``torch.compile`` compiles: Dynamo and AOTAutograd trace as for any device, and the graphs of the simulated device
  run through its kernels (where a Mac's Inductor generates Metal kernels);
- storages of the device are copied by its kernels (``copy.deepcopy``, ``Storage.to``), and ``.numpy()`` of a
  device tensor raises the Mac's error.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.__future__
import torch.backends.mps
import torch.mps
import torch.serialization

from torchdevice.callers import torch_internal
from torchdevice.device.aten import cpp_device
from torchdevice.device.host import system_memory
from torchdevice.device.hosted import HostedTensor
from torchdevice.patching import Patcher
from torchdevice.simulated.device import GENERATOR, NAME, allocate, allocated, compiled, host_alias, host_bytes

SHOWN = torch.device("mps", 0)
"""What the device's tensors say they are on."""
_IS_MPS = vars(torch._C.TensorBase)["is_mps"].__get__


def _device(self: torch.Tensor) -> torch.device:
    """``mps:0`` for the program; torch's own code (Dynamo, the optimizers, serialization) gets the device it
    computes with, as :func:`torchdevice.callers.torch_internal` tells the two apart."""
    device = cpp_device(self)
    return SHOWN if device.type == NAME and not torch_internal() else device


_STORAGE_DEVICE = vars(torch._C.StorageBase)["device"].__get__


def _storage_device(self: torch.UntypedStorage) -> torch.device:
    """A storage's device as :func:`_device` answers a tensor's."""
    device = _STORAGE_DEVICE(self)
    return SHOWN if device.type == NAME and not torch_internal() else device


def _is_mps(self: torch.Tensor) -> bool:
    return cpp_device(self).type == NAME or _IS_MPS(self)


def activate(patcher: Patcher, macos: tuple[int, int]) -> None:
    """Present the simulated device as Apple silicon on macOS ``macos`` until ``patcher.restore()``."""
    patcher.set(torch.Tensor, "device", property(_device, doc=torch.Tensor.device.__doc__))
    patcher.set(torch.Tensor, "is_mps", property(_is_mps, doc=torch.Tensor.is_mps.__doc__))
    patcher.set(torch.UntypedStorage, "device", property(_storage_device))
    patcher.set(torch.backends.mps, "is_available", lambda: True)
    patcher.set(torch.backends.mps, "is_built", lambda: True)
    patcher.set(torch.backends.mps, "is_macos_or_newer", lambda major, minor: macos >= (major, minor))
    answers = {
        "is_available": lambda: True, "device_count": lambda: 1, "_is_in_bad_fork": lambda: False,
        "synchronize": lambda: None, "empty_cache": lambda: None,
        "manual_seed": lambda seed: GENERATOR.manual_seed(int(seed)) and None, "seed": lambda: GENERATOR.seed(),
        "get_rng_state": lambda device="mps": GENERATOR.get_state(),
        "set_rng_state": lambda new_state, device="mps": GENERATOR.set_state(new_state),
        "_get_default_mps_generator": lambda: GENERATOR,
        "current_allocated_memory": allocated, "driver_allocated_memory": allocated,
        "recommended_max_memory": lambda: system_memory()[1],
        "set_per_process_memory_fraction": lambda fraction: None,
    }
    for name, answer in answers.items():
        patcher.set(torch.mps, name, answer)
    # ``Module.to`` keeps each parameter object (an optimizer built before ``model.cuda()`` trains it): on a Mac by
    # assigning its data, which torch allows between the host and MPS and not with the device that stands for it
    # here; the compiled backend assigns it as torch does for MPS, the Python one can only swap the parameters'
    # tensors, torch's other way (which weak references to a parameter and tensor subclasses' own ``.to`` defeat)
    # (hosted tensors, as torch's wrapper subclasses, are swapped in)
    if compiled():
        patcher.set(torch, "_has_compatible_shallow_copy_type", _compatible(torch._has_compatible_shallow_copy_type))
        patcher.set(torch.Tensor, "data", _data(vars(torch._C.TensorBase)["data"]))
        module = torch.nn.modules.module
        patcher.set(module, "is_traceable_wrapper_subclass", _or_hosted(module.is_traceable_wrapper_subclass))
    else:
        patcher.set(torch.__future__, "get_swap_module_params_on_conversion", lambda: True)
    patcher.set(torch.UntypedStorage, "clone", _clone(torch.UntypedStorage.clone))
    patcher.set(torch.storage, "_to", _to(torch.storage._to))
    patcher.set(torch.Tensor, "numpy", _numpy(torch.Tensor.numpy))
    patcher.set(torch._TorchCompileInductorWrapper, "__call__",
                _compiled_eagerly(torch._TorchCompileInductorWrapper.__call__))
    registry = torch.serialization._package_registry
    entry = (0, _tag, _restore)
    registry.insert(0, entry)
    patcher.defer(lambda: registry.remove(entry))


_PYTHON = torch._C.DispatchKey.Python


def _across(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two strided tensors with their own data (no ``__torch_dispatch__`` wrapper, as a hosted tensor is)
    are one on the host and one on the device (as one on the host and one on MPS)."""
    return ({cpp_device(a).type, cpp_device(b).type} == {"cpu", NAME} and a.layout == b.layout == torch.strided
            and not torch._C._dispatch_keys(a).has(_PYTHON) and not torch._C._dispatch_keys(b).has(_PYTHON))


def _or_hosted(original: Any) -> Any:
    """``is_traceable_wrapper_subclass`` for ``Module._apply``: hosted tensors too, which it swaps in."""
    @functools.wraps(original)
    def swapped(t: object) -> bool:
        return isinstance(t, HostedTensor) or original(t)

    return swapped


def _compatible(original: Any) -> Any:
    """``torch._has_compatible_shallow_copy_type``: true between the host and the device, as between the host and
    MPS (``Module._apply`` then assigns ``param.data``)."""
    @functools.wraps(original)
    def compatible(self: torch.Tensor, from_: torch.Tensor) -> bool:
        return original(self, from_) or _across(self, from_)

    return compatible


def _data(original: Any) -> property:
    """``Tensor.data``, whose assignment between the host and the device is the compiled backend's ``set_data``."""
    def assign(self: torch.Tensor, value: torch.Tensor) -> None:
        if isinstance(value, torch.Tensor) and _across(self, value):
            if self.requires_grad and not (value.is_floating_point() or value.is_complex()):
                original.__set__(self, value)  # torch's own error for a tensor that cannot require grad
            torch.ops.torchdevice_sim.set_data(self, value)
        else:
            original.__set__(self, value)

    return property(original.__get__, assign, doc=original.__doc__)


def _clone(original: Any) -> Any:
    """``UntypedStorage.clone`` (``copy.deepcopy`` of a device tensor): device memory for a device storage."""
    @functools.wraps(original)
    def clone(self: Any) -> Any:
        if self.device.type != NAME:
            return original(self)
        copied = allocate([self.nbytes()], None, torch.uint8)
        host_alias(copied).copy_(host_bytes(self))
        return copied.untyped_storage()

    return clone


def _to(original: Any) -> Any:
    """``Storage.to(device=...)``: through tensors, which the device's kernels make."""
    @functools.wraps(original)
    def to(self: Any, device: torch.device, non_blocking: bool = False) -> Any:
        if device.type not in (NAME, "mps") and self.device.type != NAME:
            return original(self, device, non_blocking)
        moved = torch.empty(0, dtype=torch.uint8, device=self.device).set_(self).to(device)
        return moved.untyped_storage()

    return to


def _numpy(original: Any) -> Any:
    """``Tensor.numpy`` of a device tensor raises the Mac's error (torch's would name ``mps_sim:0``)."""
    @functools.wraps(original)
    def numpy(self: torch.Tensor, *, force: bool = False) -> Any:
        if cpp_device(self).type == NAME and not force:
            raise TypeError(f"can't convert {SHOWN} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                            "to host memory first.")
        return original(self, force=force)

    return numpy


def _compiled_eagerly(inductor: Any) -> Any:
    """``torch.compile``'s default compiler: a graph of the simulated device runs as traced, through its kernels
    (AOTAutograd's graphs, forward and backward, run eagerly), where a Mac generates Metal kernels for it."""
    @functools.wraps(inductor)
    def compile_graph(self: Any, model: Any, inputs: Any, **kwargs: Any) -> Any:
        if not any(isinstance(t, torch.Tensor) and t.device.type == NAME for t in inputs):
            return inductor(self, model, inputs, **kwargs)
        from torch._dynamo.backends.debugging import aot_eager

        return aot_eager(model, inputs)

    return compile_graph


def _tag(storage: Any) -> str | None:
    """Device storages are recorded at ``mps:0``, as a Mac records them."""
    return "mps:0" if storage.device.type == NAME else None


def _restore(storage: Any, location: str) -> Any:
    """Storages recorded at ``mps`` (or at the simulated device) restored onto the simulated device."""
    if not location.startswith(("mps", NAME)):
        return None
    host = storage if storage.device.type == "cpu" else storage.cpu()
    restored = allocate([host.nbytes()], None, torch.uint8)
    host_alias(restored).copy_(host_bytes(host))
    return restored.untyped_storage()


