"""libdevice's math functions in Triton's interpreter, which has none of its own.

Kernels import them by name (``from triton.language.extra.libdevice import rsqrt``: liger-kernel's norms, its
GeGLU's ``tanh``) or through the module (``libdevice.tanh(x)``); compiled, they become calls of NVIDIA's libdevice,
and in Triton's interpreter they are stubs that return None (or refuse an extern call). While a kernel (or a device
function) runs, :func:`swapped` puts in their place, in its module's globals and in the libdevice modules it
names: ``triton.language.math``'s function of the same name, which the interpreter runs (``rsqrt``, ``exp``,
``sqrt``...), or NumPy's elementwise function (``tanh``, ``atan2``, ``pow``...). The others stay as they are, and a
kernel that calls one fails, named (:class:`~.triton_interpreter.TritonKernelError`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterator
from types import FunctionType, ModuleType
from typing import Any

import numpy
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")
NUMPY = {"tanh": "tanh", "sinh": "sinh", "cosh": "cosh", "tan": "tan", "asin": "arcsin", "acos": "arccos",
         "atan": "arctan", "atan2": "arctan2", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh",
         "log1p": "log1p", "expm1": "expm1", "log10": "log10", "pow": "power", "hypot": "hypot", "trunc": "trunc",
         "rint": "rint", "nearbyint": "rint", "round": "round", "fmod": "fmod", "copysign": "copysign",
         "cbrt": "cbrt", "fmax": "fmax", "fmin": "fmin"}
"""libdevice's name -> NumPy's, for the functions ``triton.language.math`` lacks."""


@functools.cache
def _table() -> tuple[dict[int, Callable[..., Any]], dict[int, ModuleType]]:
    """``id(stub) -> its implementation``, ``id(module) -> module`` of the libdevice modules."""
    functions: dict[int, Callable[..., Any]] = {}
    modules: dict[int, ModuleType] = {}
    for name in MODULES:
        module = importlib.import_module(name)
        modules[id(module)] = module
        for attr, stub in vars(module).items():
            implementation = _implementation(attr)
            if callable(stub) and getattr(stub, "__module__", None) == name and implementation is not None:
                functions[id(stub)] = implementation
    return functions, modules


def _implementation(name: str) -> Callable[..., Any] | None:
    if hasattr(tl.math, name):
        return lambda *args, **_: getattr(tl.math, name)(*args)  # the interpreter's, looked up while it runs
    if name in NUMPY:
        return functools.partial(_elementwise, getattr(numpy, NUMPY[name]))
    return None


def _elementwise(function: Callable[..., Any], *args: Any, **_: Any) -> tl.tensor:
    first = next(a for a in args if isinstance(a, tl.tensor))
    data = function(*(a.handle.data if isinstance(a, tl.tensor) else a for a in args))
    return tl.tensor(TensorHandle(numpy.asarray(data, first.handle.data.dtype), first.handle.dtype), first.type)


@contextlib.contextmanager
def swapped(fn: FunctionType) -> Iterator[None]:
    """libdevice's functions in ``fn``'s module globals and in the libdevice modules they name, interpreted."""
    functions, modules = _table()
    namespaces = [fn.__globals__, *(vars(modules[id(v)]) for v in fn.__globals__.values() if id(v) in modules)]
    saved = [(namespace, name, value) for namespace in namespaces for name, value in list(namespace.items())
             if id(value) in functions]
    for namespace, name, value in saved:
        namespace[name] = functions[id(value)]
    try:
        yield
    finally:
        for namespace, name, value in saved:
            namespace[name] = value
