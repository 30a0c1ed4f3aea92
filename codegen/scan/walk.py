"""Which objects are public torch API, and by which access paths.

A public name of a scanned namespace is an entry when the object is *defined by torch*
(``__module__`` is ``torch`` or ``torch.*``), is callable (or a flag property of a
``torch.backends`` module), is not junk (see :func:`is_junk`), and the namespace *declares* it.
Data values ``torch.cuda`` lists in its ``__all__`` (``default_generators``, ``has_half``) are entries
too, of kind ``attribute``: CUDA code reads them. Declared means:

* it is in the namespace's ``__all__``; or
* it is defined in the namespace itself or in a public submodule of it (``torch.unique`` from
  ``torch.functional``); without an ``__all__``, private submodules count too (``torch.nn.Linear``
  from ``torch.nn.modules.linear``); or
* it is a builtin of one of torchgen's Python binding modules (``torch.nn.functional.conv2d`` is
  ``torch.conv2d``; ``torch.fft.hfft2`` is from ``torch._C._fft``); or
* without an ``__all__``, it is a class bound in ``torch._C`` (``torch.linalg.LinAlgError``,
  ``torch.distributed.TCPStore``), except at the top level, which re-exports all of ``torch._C``; or
* it is an exception class (``torch.cuda.OutOfMemoryError`` is ``torch.OutOfMemoryError``).

The public methods and properties of some classes are entries too: of those in the device
namespaces (``torch.cuda``, ``torch.mps``, ``torch.accelerator``, ``torch.amp``) and of
:data:`METHOD_CLASSES`; inherited ones count when a torch class defines them.
Aten operator overloads (``torch.ops.aten.<op>.<overload>``) come from :mod:`codegen.scan.aten`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

# namespace -> group (the catalog file it is written to)
NAMESPACES: dict[str, str] = {
    "torch": "torch",
    "torch.nn": "nn",
    "torch.nn.parallel": "nn",
    "torch.nn.attention": "nn",
    "torch.nn.functional": "nn_functional",
    "torch.nn.init": "nn_init",
    "torch.nn.utils": "nn_utils",
    "torch.nn.utils.rnn": "nn_utils",
    "torch.nn.utils.parametrize": "nn_utils",
    "torch.nn.utils.parametrizations": "nn_utils",
    "torch.linalg": "linalg",
    "torch.fft": "fft",
    "torch.special": "special",
    "torch.cuda": "cuda",
    "torch.cuda.amp": "cuda",
    "torch.cuda.memory": "cuda",
    "torch.cuda.nvtx": "cuda",
    "torch.cuda.graphs": "cuda",
    "torch.cuda.random": "cuda",
    "torch.cuda.streams": "cuda",
    "torch.cuda.comm": "cuda",
    "torch.cuda.jiterator": "cuda",
    "torch.cuda.tunable": "cuda",
    "torch.cuda.gds": "cuda",
    "torch.mps": "mps",
    "torch.mps.event": "mps",
    "torch.mps.profiler": "mps",
    "torch.backends": "backends",  # and its public submodules, found by pkgutil
    "torch.accelerator": "accelerator",
    "torch.amp": "amp",
    "torch.autograd": "autograd",
    "torch.autograd.functional": "autograd",
    "torch.autograd.graph": "autograd",
    "torch.autograd.forward_ad": "autograd",
    "torch.autograd.profiler": "autograd",
    "torch.random": "random",
    "torch.distributions": "distributions",
    "torch.sparse": "sparse",
    "torch.nested": "nested",
    "torch.masked": "masked",
    "torch.optim": "optim",
    "torch.optim.lr_scheduler": "optim",
    "torch.optim.swa_utils": "optim",
    "torch.utils.data": "utils_data",
    "torch.distributed": "distributed",  # only where torch.distributed.is_available()
    "torch.func": "func",
    "torch.jit": "jit",
    "torch.compiler": "compiler",
    "torch.export": "export",
    "torch.profiler": "profiler",
    "torch.signal.windows": "signal",
}
# Namespaces whose exported data values (not only callables) are entries.
DEVICE_DATA_NAMESPACES = frozenset({"torch.cuda"})
# Groups whose classes get their methods scanned, and further classes that do.
DEVICE_GROUPS = frozenset({"cuda", "mps", "accelerator", "amp"})
METHOD_CLASSES: dict[str, str] = {
    "torch.Tensor": "tensor",
    "torch.nn.Module": "nn",
    "torch.Generator": "torch",
    "torch.Stream": "torch",
    "torch.Event": "torch",
    "torch.optim.Optimizer": "optim",
    "torch.optim.lr_scheduler.LRScheduler": "optim",
    "torch.utils.data.DataLoader": "utils_data",
}
# torchgen's Python bindings of aten ops (python_torch_functions.cpp, python_nn_functions.cpp, ...).
BINDING_MODULES = frozenset(
    {"torch", "torch._C._VariableFunctions"}
    | {f"torch._C._{m}" for m in ("nn", "linalg", "fft", "special", "sparse", "nested")}
)


@dataclass(frozen=True)
class Found:
    """A public object and the path users write to reach it."""

    name: str
    module: str  # importable module; the rest of ``name`` is a getattr chain from it
    kind: str
    group: str
    obj: object = field(compare=False, repr=False)
    owner: type | None = field(default=None, compare=False, repr=False)  # class defining a method

    @property
    def attr(self) -> str:
        return self.name.rpartition(".")[2]

    @property
    def namespace(self) -> str:
        return self.name.rpartition(".")[0]


def namespaces() -> dict[str, str]:
    """The scanned namespaces that import here, with the public ``torch.backends`` submodules."""
    found: dict[str, str] = {}
    for name, group in NAMESPACES.items():
        if name == "torch.distributed" and not torch.distributed.is_available():
            continue
        found[name] = group
        if name == "torch.backends":
            for sub in sorted(m.name for m in pkgutil.iter_modules(torch.backends.__path__)):
                if not sub.startswith("_"):
                    found[f"torch.backends.{sub}"] = group
    return found


def walk() -> Iterator[Found]:
    """Every public object of the scanned namespaces and classes, in a deterministic order."""
    method_classes = {}
    for namespace, group in namespaces().items():
        module = importlib.import_module(namespace)
        for found in _module_members(namespace, module, group):
            yield found
            if found.kind == "class" and (group in DEVICE_GROUPS or found.name in METHOD_CLASSES) \
                    and not isinstance(found.obj, _LEGACY_TENSOR_TYPE):  # its members are Tensor's
                method_classes[found.name] = (found, METHOD_CLASSES.get(found.name, group))
    for name in sorted(method_classes):
        found, group = method_classes[name]
        yield from _class_members(found, group)


def _module_members(namespace: str, module: types.ModuleType, group: str) -> Iterator[Found]:
    real = getattr(module, "m", module)  # torch.backends.X modules are PropModule wrappers of `m`
    declared_all = getattr(real, "__all__", None)
    names = {n for n in {*dir(module), *dir(real), *vars(type(module))} if not n.startswith("_")}
    for name in sorted(names):
        descriptor = vars(type(module)).get(name)
        if _is_flag(descriptor):
            yield Found(f"{namespace}.{name}", namespace, "property", group, descriptor)
            continue
        try:
            obj = getattr(module, name)
        except AttributeError:
            continue
        if _is_declared_data(obj, namespace, name, declared_all):
            yield Found(f"{namespace}.{name}", namespace, "attribute", group, obj)
            continue
        if not _is_candidate(obj) or is_junk(obj, namespace):
            continue
        if _declared(namespace, name, obj, declared_all):
            yield Found(f"{namespace}.{name}", namespace, _kind(obj), group, obj)


def _class_members(cls_found: Found, group: str) -> Iterator[Found]:
    cls = typing.cast(type, cls_found.obj)
    for name in sorted(n for n in dir(cls) if not n.startswith("_")):
        owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
        if owner is None or owner is object or not _is_torch(owner.__module__):
            continue
        raw = owner.__dict__[name]
        if not _is_torch(getattr(raw, "__module__", owner.__module__)):
            continue  # e.g. a typing alias stored on the class
        if isinstance(raw, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
            kind = "property"
        elif isinstance(raw, (classmethod, staticmethod)) or (callable(raw) and not isinstance(raw, type)):
            kind = "method"
        else:
            continue
        yield Found(f"{cls_found.name}.{name}", cls_found.module, kind, group, getattr(cls, name), owner)


def _is_declared_data(obj: object, namespace: str, name: str, declared_all: list[str] | None) -> bool:
    """A value a device namespace exports by name (``torch.cuda.default_generators``, ``has_half``): CUDA
    code reads it, so the runtime must say what it is without CUDA."""
    return (namespace in DEVICE_DATA_NAMESPACES and declared_all is not None and name in declared_all
            and not callable(obj) and not isinstance(obj, types.ModuleType))


def _is_flag(descriptor: object) -> bool:
    """A ``ContextProp``-style flag defined on a ``torch.backends`` module class."""
    return descriptor is not None and not callable(descriptor) and hasattr(type(descriptor), "__get__")


def _is_candidate(obj: object) -> bool:
    return callable(obj) and not isinstance(obj, types.ModuleType) and _is_torch(getattr(obj, "__module__", None))


def _is_torch(module: object) -> bool:
    return isinstance(module, str) and (module == "torch" or module.startswith("torch."))


_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)
_STORAGE_TYPES = (torch.storage.TypedStorage, torch.storage.UntypedStorage, torch._C.StorageBase)


def is_junk(obj: object, namespace: str) -> bool:
    """Objects that are not API users call: pybind enums, storage classes, legacy tensor-type classes
    (except ``torch.cuda.FloatTensor`` and kin, which CUDA code still calls and passes to ``.type()``),
    module classes, typing constructs, and the ``torch._C`` pybind classes (JIT internals) the top
    level re-exports wholesale."""
    if isinstance(obj, typing.NewType):
        return True
    if isinstance(obj, _LEGACY_TENSOR_TYPE):
        return namespace != "torch.cuda"
    if not isinstance(obj, type):
        return False
    if issubclass(obj, types.ModuleType):
        return True  # torch.backends' PropModule machinery
    pybind = type(obj).__name__ == "pybind11_type"
    if pybind and (hasattr(obj, "__members__") or namespace == "torch"):
        return True
    return issubclass(obj, _STORAGE_TYPES) or type(obj).__name__ == "_LegacyStorageMeta"


def _declared(namespace: str, name: str, obj: object, declared_all: list[str] | None) -> bool:
    if declared_all is not None and name in declared_all:
        return True
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return True  # code catches torch.cuda.OutOfMemoryError wherever torch exposes it
    home: str = obj.__module__
    if inspect.isbuiltin(obj):
        return home in BINDING_MODULES or (declared_all is None and _within(home, namespace))
    if home == namespace:
        return True
    if _within(home, namespace):
        rest = home[len(namespace) + 1 :].split(".")
        return declared_all is None or not any(part.startswith("_") for part in rest)
    return (
        declared_all is None
        and namespace != "torch"
        and isinstance(obj, type)
        and (home == "torch._C" or home.startswith("torch._C."))
    )


def _within(home: str, namespace: str) -> bool:
    return home.startswith(namespace + ".")


def _kind(obj: object) -> str:
    if isinstance(obj, type):
        return "class"
    return "builtin" if inspect.isbuiltin(obj) else "function"
