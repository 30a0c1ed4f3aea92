"""What the program sees of a simulated device: its profile's answers (:mod:`.profile`: Apple silicon's, an NVIDIA
GPU's), where the device is torch's ``simulated``.

While the simulation is installed (every patch through the runtime's patcher):

- device tensors and their storages say they are on the profile's device (``mps:0``, ``cuda:1``: ``x.device``,
  ``x.is_mps``, printing, ``x.untyped_storage().device``), as a Mac's or a GPU's do, to the program
  and the libraries it uses; torch's own code, which computes with them, gets their device as torch knows it;
- on a Mac (a profile with a macOS version), ``torch.backends.mps`` says MPS is built and available, on that
  version (:func:`torchdevice.device.limits.macos`), so libraries that pick ``"mps"`` themselves (transformers,
  peft) do, and the runtime translates ``"mps"`` as it translates ``"cuda"`` (the profile's ``aliases``);
  and ``torch.mps`` answers for the simulated device: its generator, which ``torch.manual_seed`` seeds too, the
  bytes of its live allocations, synchronisation (nothing to wait for); on a GPU ``torch.cuda`` is the runtime's
  (:mod:`torchdevice.runtime.emulation`), reading the device's memory and card;
- checkpoints record device storages at ``mps:0`` or ``cuda:i``, as a Mac or a GPU writes them, and storages recorded
  at the profile's device type (or ``simulated``) are restored onto the device, at their index;
- ``Module.to`` keeps each parameter object, as a Mac's does (assigning ``param.data``: the compiled backend's
  ``set_data``, :mod:`.backend`);
- ``torch.compile`` compiles: Dynamo and AOTAutograd trace as for any device, and the graphs of the simulated device
  run through its kernels (where a Mac's Inductor generates Metal kernels); flex attention takes the device's inputs
  as the device the program sees;
- storages of the device are copied by its kernels (``copy.deepcopy``, ``Storage.to``), and ``.numpy()`` of a
  device tensor raises the device's error;
- the messages torch's C++ writes with the device in them (``expected device cuda:0 but got cpu``) name the device the
  program sees, where torch's checks that print a tensor's device meet the program's calls (:data:`_NAMING`): the
  autograd engine's, assigning ``.grad``, ``set_``, packing sequences, attention.
"""

from __future__ import annotations

import functools
import re
import types
from typing import Any

import torch
import torch.__future__
import torch.backends.mps
import torch.mps
import torch.serialization

from torchdevice.callers import told_the_truth
from torchdevice.device.aten import cpp_device, cpp_storage_device
from torchdevice.device.host import system_memory
from torchdevice.device.hosted import HostedTensor
from torchdevice.device.placement import invalid_ordinal
from torchdevice.patching import Patcher, TensorAttribute
from torchdevice.simulated.device import (
    GENERATOR,
    MAX_DEVICES,
    NAME,
    allocate,
    allocated,
    host_alias,
    host_bytes,
)
from torchdevice.simulated.profile import Profile

_IS_MPS = vars(torch._C.TensorBase)["is_mps"].__get__


def activate(patcher: Patcher, profile: Profile) -> None:
    """Present the simulated device as ``profile`` says until ``patcher.restore()``."""
    shown = tuple(profile.shown(i) for i in range(MAX_DEVICES))
    as_shown = {torch.device(NAME, i): device for i, device in enumerate(shown)}
    """The device the program is shown, by the simulated one (looked up whole: a device's ``type`` is slower)."""

    def device(self: torch.Tensor) -> torch.device:
        """The profile's device for the program; torch's own code (Dynamo, the optimizers, serialization) gets the
        device it computes with, as :func:`torchdevice.callers.told_the_truth` tells the two apart."""
        found = cpp_device(self)
        program = as_shown.get(found)
        return found if program is None or told_the_truth("Tensor.device") else program

    def storage_device(self: torch.UntypedStorage) -> torch.device:
        """A storage's device as ``device`` answers a tensor's."""
        found = cpp_storage_device(self)
        program = as_shown.get(found)
        return found if program is None or told_the_truth("UntypedStorage.device") else program

    patcher.set(torch.Tensor, "device", TensorAttribute("device", device))
    patcher.set(torch.UntypedStorage, "device", property(storage_device))
    if profile.macos is not None:  # (``is_cuda``, for every target, is the runtime's)
        _as_a_mac(patcher, profile.macos)
    # ``Module.to`` keeps each parameter object (an optimizer built before ``model.cuda()`` trains it): on a Mac by
    # assigning its data, which torch allows between the host and MPS and not with the device that stands for it
    # here; the compiled backend assigns it as torch does for MPS (hosted tensors, as torch's wrapper subclasses, are
    # swapped in)
    patcher.set(torch, "_has_compatible_shallow_copy_type", _compatible(torch._has_compatible_shallow_copy_type))
    patcher.set(torch.Tensor, "data", _data(vars(torch._C.TensorBase)["data"]))
    module = torch.nn.modules.module
    patcher.set(module, "is_traceable_wrapper_subclass", _or_hosted(module.is_traceable_wrapper_subclass))
    patcher.set(torch.UntypedStorage, "clone", _clone(torch.UntypedStorage.clone))
    patcher.set(torch.storage, "_to", _to(torch.storage._to, profile))
    patcher.set(torch.Tensor, "numpy", _numpy(torch.Tensor.numpy, shown))
    for owner, name in _NAMING:
        patcher.set(owner, name, _named_as_shown(getattr(owner, name), profile))
    grad = vars(torch._C.TensorBase)["grad"]
    patcher.set(torch.Tensor, "grad", TensorAttribute("grad", grad.__get__, _named_as_shown(grad.__set__, profile),
                                                      grad.__delete__))
    patcher.set(torch._TorchCompileInductorWrapper, "__call__",
                _compiled_eagerly(torch._TorchCompileInductorWrapper.__call__))
    patcher.after_import("torch.nn.attention.flex_attention", lambda flex: patcher.set(
        flex, "_validate_device", _validated_as_shown(flex._validate_device, shown)))
    registry = torch.serialization._package_registry
    entry = (0, lambda storage: _tag(storage, profile), lambda storage, location: _restore(storage, location, profile))
    registry.insert(0, entry)
    patcher.defer(lambda: registry.remove(entry))


def _as_a_mac(patcher: Patcher, macos: tuple[int, int]) -> None:
    """``is_mps``, ``torch.backends.mps`` and ``torch.mps`` as on Apple silicon with macOS ``macos``."""
    patcher.set(torch.Tensor, "is_mps", TensorAttribute("is_mps", lambda self: cpp_device(self).type == NAME or
                                                        _IS_MPS(self)))
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
        if cpp_storage_device(self).type != NAME:
            return original(self)
        copied = allocate([self.nbytes()], None, torch.uint8, cpp_storage_device(self).index)
        host_alias(copied).copy_(host_bytes(self))
        return copied.untyped_storage()

    return clone


def _to(original: Any, profile: Profile) -> Any:
    """``Storage.to(device=...)``: through tensors, which the device's kernels make."""
    @functools.wraps(original)
    def to(self: Any, device: torch.device, non_blocking: bool = False) -> Any:
        if device.type not in (NAME, profile.type) and cpp_storage_device(self).type != NAME:
            return original(self, device, non_blocking)
        moved = torch.empty(0, dtype=torch.uint8, device=self.device).set_(self).to(device)
        return moved.untyped_storage()

    return to


def _numpy(original: Any, shown: tuple[torch.device, ...]) -> Any:
    """``Tensor.numpy`` of a device tensor raises the device's error (torch's would name ``simulated:0``)."""
    @functools.wraps(original)
    def numpy(self: torch.Tensor, *, force: bool = False) -> Any:
        found = cpp_device(self)
        if found.type == NAME and not force:
            raise TypeError(f"can't convert {shown[found.index]} device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first.")
        return original(self, force=force)

    return numpy


_NAMING = ((torch.autograd, "_engine_run_backward"), (torch._VF, "_pack_padded_sequence"), (torch.Tensor, "set_"),
           (torch.nn.functional, "scaled_dot_product_attention"))
"""Where the program calls torch's C++ that checks tensors' devices and prints them (the autograd engine's gradients,
for ``backward`` and ``torch.autograd.grad``; ``pack_padded_sequence``'s lengths; ``set_``'s storage; attention's
inputs, which the device's kernels get only after): exceptions passing out of them are renamed; ``.grad``'s assignment
too."""
_DEVICE_NAME = re.compile(rf"\b{NAME}(?::(\d+))?(?![\w-])")


def _named_as_shown(function: Any, profile: Profile) -> Any:
    """``function``, whose exceptions say the device the program sees where torch's C++ named the simulated one
    (``simulated:0`` as ``cuda:0``, the type ``'simulated'`` as ``'cuda'``); torchdevice's own messages are kept."""
    def shown(found: re.Match[str]) -> str:
        return profile.type if found[1] is None else str(profile.shown(int(found[1])))

    @functools.wraps(function)
    def named(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            message = exc.args[0] if len(exc.args) == 1 else None
            if isinstance(message, str) and NAME in message and not message.startswith("torchdevice"):
                exc.args = (_DEVICE_NAME.sub(shown, message),)
            raise

    return named


def _compiled_eagerly(inductor: Any) -> Any:
    """``torch.compile``'s default compiler: a graph of the simulated device runs as traced, through its kernels
    (AOTAutograd's graphs, forward and backward, run eagerly), where a Mac generates Metal kernels for it. A graph
    is the device's when a tensor it takes or makes is (flex attention's block masks are made from no tensor)."""
    @functools.wraps(inductor)
    def compile_graph(self: Any, model: Any, inputs: Any, **kwargs: Any) -> Any:
        made = [node.meta.get("example_value") for node in model.graph.nodes]
        if not any(isinstance(t, torch.Tensor) and t.device.type == NAME
                   for t in torch.utils._pytree.tree_leaves([inputs, made])):
            return inductor(self, model, inputs, **kwargs)
        from torch._dynamo.backends.debugging import aot_eager

        return aot_eager(model, inputs)

    return compile_graph


def _validated_as_shown(validate: Any, shown: tuple[torch.device, ...]) -> Any:
    """Flex attention checks its inputs on the device the program sees (its list of devices, MPS's refusal of
    backward): the check reads only their device and ``requires_grad``."""
    @functools.wraps(validate)
    def validate_device(*tensors: torch.Tensor) -> None:
        if cpp_device(tensors[0]).type != NAME:
            return validate(*tensors)
        return validate(*(types.SimpleNamespace(device=shown[cpp_device(t).index], requires_grad=t.requires_grad)
                          for t in tensors))

    return validate_device


def _tag(storage: Any, profile: Profile) -> str | None:
    """Device storages are recorded at the profile's device (``mps:0``, ``cuda:1``), as the device records them."""
    found = cpp_storage_device(storage)
    return str(profile.shown(found.index)) if found.type == NAME else None


def _restore(storage: Any, location: str, profile: Profile) -> Any:
    """Storages recorded at the profile's device type (or at the simulated device) restored onto the simulated
    device of their index (CUDA's error for one past the devices)."""
    kind, _, index = location.partition(":")
    if kind not in (profile.type, NAME):
        return None
    at = int(index) if index.isdigit() else 0
    if at >= profile.devices:
        raise invalid_ordinal(at, profile.devices) if profile.indexed else RuntimeError(
            f"Attempting to deserialize object on {location}, but the device has {profile.devices} device(s)")
    host = storage if cpp_storage_device(storage).type == "cpu" else storage.cpu()
    restored = allocate([host.nbytes()], None, torch.uint8, at)
    host_alias(restored).copy_(host_bytes(host))
    return restored.untyped_storage()
