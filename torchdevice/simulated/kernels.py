"""The simulated device's kernels (:mod:`.device`): they compute on the host, and refuse what its profile
(:mod:`.profile`) refuses.

Every aten call that reaches the device's dispatch key (``PrivateUse1``) runs a kernel registered here, as every
call reaching ``MPS`` on a Mac runs one of MPS's: the ops the device has no kernel for raise its missing-kernel
``NotImplementedError`` (MPS's, or the dispatcher's), calls with float64 (or complex128) raise its ``TypeError``
where it refuses them, calls under one of MPS's limits (:mod:`torchdevice.device.limits`, on the simulated macOS
version) raise that limit's exception, those under one of CUDA's determinism alerts that alert's, a device tensor
mixed with a host tensor that is not a scalar raises the placement error; everything else
computes on host tensors over the device tensors' memory (:mod:`torchdevice.device.host_call`, the way
:class:`_Aliased`) and returns device tensors, so results, in-place writes,
``out=`` arguments and views are exactly what the same call makes on the CPU. Sparse COO tensors of the device
(``SparsePrivateUse1``, a Mac's ``SparseMPS``) run the kernels it has a sparse kernel of, as the CPU computes
them, and raise the dispatcher's error for the others; sparse compressed tensors (CSR, CSC, BSR, BSC:
``SparseCsrPrivateUse1``, a GPU's ``SparseCsrCUDA``) likewise. A few kernels are the
device's rather than an op's: allocation, copies, resizing and the views that torch's own code makes for any device
(``as_strided``, ``view``...: the CPU's kernels, which share the device tensor's storage).

The fallback engine registers its kernels on the same key for the overloads it completes, as it does on a Mac
under ``MPS``: it cannot tell the two apart.

:class:`SimulatedKernels` registers the kernels of a profile; ``attempts`` counts the calls each of its chosen ops
(``missing``, ``float64_ops``) got and ``raised`` keeps what the kernels raised.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import torch

from torchdevice.device import determinism, host_call, limits
from torchdevice.device.aten import (
    Kernel,
    OpSchema,
    cpp_device,
    kernel_below,
    leaves,
    overload,
    tensors,
    tree_map,
)
from torchdevice.device.host_call import Way
from torchdevice.device.hosted import Hosting
from torchdevice.device.limits import WIDE
from torchdevice.device.placement import HOST_ARGUMENTS, HOST_RESULTS, placement_error
from torchdevice.device.target import Target
from torchdevice.simulated import cuda_only
from torchdevice.simulated import device as simulated_device
from torchdevice.simulated import profile as profile_module
from torchdevice.simulated.device import GENERATORS, allocate, current, device_tensor, host_alias, host_bytes
from torchdevice.simulated.profile import NO_FLOAT64, Profile, active

_MISSING_KERNEL = next(limit.row for limit in limits.generic() if limit.name == "missing_kernel")
MISSING = (
    "Could not run '{op}' with arguments from the '{backend}' backend. This could be because the operator doesn't "
    "exist for this backend, or was omitted during the selective/custom build process (if using custom build). If "
    "you are a Facebook employee using PyTorch on mobile, please visit https://fburl.com/ptmfixes for possible "
    "resolutions."
)
"""What the dispatcher raises for an op the backend has no kernel for (a sparse tensor's: ``SparseMPS``,
``SparseCsrCUDA``)."""

_aten = torch.ops.aten
_VIEWS = (_aten.as_strided.default, _aten.view.default, _aten._reshape_alias.default, _aten.unfold.default,
          _aten.view_as_real.default, _aten.view_as_complex.default, _aten.set_.source_Storage,
          _aten.set_.source_Storage_storage_offset, _aten.set_.source_Tensor)
"""Kernels torch writes for any device (new views of a storage, a storage swapped in): the CPU's run on device
tensors as they are."""
_SPARSE_PARTS = (_aten._sparse_coo_tensor_with_dims.default, _aten._sparse_coo_tensor_with_dims_and_tensors.default,
                 _aten._indices.default, _aten._values.default, _aten.indices.default, _aten.values.default,
                 _aten.sparse_dim.default, _aten.dense_dim.default, _aten._nnz.default, _aten.is_coalesced.default,
                 _aten._coalesced_.default, _aten.sparse_resize_.default, _aten.sparse_resize_and_clear_.default,
                 _aten.copy_sparse_to_sparse_.default)
"""Kernels that make a sparse tensor of its parts, or hand them out, and compute nothing: the CPU's run on the
device's sparse tensors, whose parts are device tensors."""
_COMPRESSED_PARTS = (_aten.crow_indices.default, _aten.col_indices.default, _aten.ccol_indices.default,
                     _aten.row_indices.default, _aten.values.default, _aten._nnz.default, _aten.sparse_dim.default,
                     _aten.dense_dim.default, _aten.empty.memory_format, _aten.resize_as_sparse_.default,
                     _aten.copy_.default, _aten.clone.default)
"""The same for sparse compressed tensors: their parts, new tensors of new or cloned device parts, parts copied."""
_OVERRIDABLE = {"convolution_overrideable": _aten.convolution.default,
                "convolution_backward_overrideable": _aten.convolution_backward.default}
"""Ops torch's composite code calls for a device it has no branch for (where a Mac runs MPS's own convolution):
the CPU's equivalent computes them."""
_CUDA_BRANCHES = (_aten.conj_physical_.default, _aten.mode.values)
"""Composite kernels with a branch for CUDA that no ``PrivateUse1`` backend has (``conj_physical_`` calls CUDA's
DispatchStub, ``mode``'s ``out=`` runs on the CPU, CUDA and XPU only): a device with :attr:`.Profile.cuda_kernels`
computes them as the CPU does (a Mac refuses them, as its limits table says)."""
_WHOLE = tuple(getattr(getattr(_aten, op), overload) for op in ("lstm", "gru", "rnn_tanh", "rnn_relu")
               for overload in ("input", "data"))
"""Recurrent layers, which a Mac runs as one MPS kernel (``_lstm_mps``) or decomposed into MPS's matrix products,
and torch's composite code would run through CUDA's fused cells on a device it has no branch for: run whole on the
host, gradients included."""


def uses_float64(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a call has a float64 or complex128 tensor, or asks for one."""
    return any((isinstance(x, torch.Tensor) and x.dtype in WIDE) or (isinstance(x, torch.dtype) and x in WIDE)
               for x in leaves((args, kwargs)))


class SimulatedKernels:
    """The kernels of a device that refuses what ``profile`` says. ``keep_raised``: keep what the kernels raise
    (:attr:`raised`); ``in_cpp``: the compiled backend's kernel computes what it can (:meth:`_in_cpp`), where else
    every call runs through :meth:`_kernel` (counted in :attr:`attempts`). ``with SimulatedKernels(...) as target:``
    registers the kernels for a block."""

    def __init__(self, profile: Profile, *, keep_raised: bool = True, in_cpp: bool = False) -> None:
        self.profile = profile
        self.attempts: Counter[str] = Counter()
        self.raised: list[BaseException] = []
        """What the kernels raised (tests'; a kept exception keeps its traceback's tensors alive)."""
        self.keep_raised = keep_raised
        self.in_cpp = in_cpp
        self.kernels: dict[tuple[str, str], Kernel] = {}
        """The Python kernels registered (:func:`torchdevice.device.aten.kernel_below`)."""
        self._stack = contextlib.ExitStack()

    def target(self) -> Target:
        """The target the runtime and the fallback engine complete (the device registered: :func:`.device.register`)."""
        device = simulated_device.register()
        p = self.profile
        shown = p.shown(0)
        return Target(p.target, device, "PrivateUse1", p.backend, p.table_missing, p.try_first,
                      Hosting(shown, device) if p.hosted else None, shown=shown, aliases=p.aliases, gpu=p.gpu,
                      own=simulated_device.OWN if p.indexed else None, kernels=self.kernels)

    def refusal(self, op: torch._ops.OpOverload, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> BaseException | None:
        """What the device raises for this call, if it refuses it."""
        p = self.profile
        name = op._schema.name.removeprefix("aten::")
        if name in p.missing or name in p.float64_ops:
            self.attempts[name] += 1
        if name in p.missing or op._name in p.missing_overloads:
            if p.missing_as_mps:
                return limits.Limit(_MISSING_KERNEL, op).exception(args, kwargs)
            return NotImplementedError(MISSING.format(op=op._name, backend=p.backend))
        if (p.no_float64 is not None or name in p.float64_ops) and uses_float64(args, kwargs):
            return TypeError(p.no_float64 or NO_FLOAT64)
        return None

    def refuse(self, op: torch._ops.OpOverload, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Callable[..., Any] | None:
        """Raise what MPS raises for a call under one of ``op``'s limits; for a limit MPS meets with other values than
        the CPU's, the computation MPS makes instead. A GPU's limited overloads are those CUDA's determinism alerts
        are in: raised (or warned) as CUDA's kernel does under ``torch.use_deterministic_algorithms(True)``."""
        if self.profile.alerts:
            determinism.check(op, args, kwargs)
            return None
        macos = self.profile.macos or limits.DEFAULT_MACOS
        for limit in limits.limits_of(op):
            if limit.applies(args, kwargs, macos):
                if limit.raises is not None:
                    raise self._kept(limit.exception(args, kwargs))
                return _INSTEAD.get(limit.name)
        return None

    def _kept(self, exc: BaseException) -> BaseException:
        """``exc``, kept in :attr:`raised` where the tests ask for it."""
        if self.keep_raised:
            self.raised.append(exc)
        return exc

    def register(self) -> torch.library.Library:
        """Register the device's kernels; they stay registered while the returned library is alive."""
        self.target()
        p = self.profile
        simulated_device.configure(p)
        profiled = _Profiled(p)
        kernels = self.kernels
        kernels.clear()
        library = torch.library.Library("_", "IMPL")
        library.fallback(self._kernel, "PrivateUse1", with_keyset=True)
        # autocast passes through, as torch's own devices' autocast keys do (CUDA's policy is the runtime's)
        library.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
        sparse = _no_kernel(f"Sparse{p.backend}") if p.sparse is not None else self._any_sparse_kernel
        library.fallback(sparse, "SparsePrivateUse1", with_keyset=True)
        kernels[("", "PrivateUse1")], kernels[("", "SparsePrivateUse1")] = self._kernel, sparse
        ops = torch.library.Library("aten", "IMPL")
        library._ops = ops  # type: ignore[attr-defined]  # one lifetime for both

        def impl(op: torch._ops.OpOverload, kernel: Kernel, key: str = "PrivateUse1") -> None:
            # (allow_override: torch before 2.13 refuses a second Python registration of one overload and key)
            ops.impl(op, kernel, key, with_keyset=True, allow_override=True)
            kernels[(op._name, key)] = kernel

        for op in self._sparse():
            impl(op, _cpu_kernel(op, "SparseCPU") if op in _SPARSE_PARTS else self._sparse_kernel_of(op),
                 "SparsePrivateUse1")
        if p.compressed is not None:
            no_compressed = _no_kernel(f"SparseCsr{p.backend}")
            library.fallback(no_compressed, "SparseCsrPrivateUse1", with_keyset=True)
            kernels[("", "SparseCsrPrivateUse1")] = no_compressed
            for op in (op for op in map(overload, sorted(p.compressed)) if op is not None):
                impl(op, _cpu_kernel(op, "SparseCsrCPU") if op in _COMPRESSED_PARTS else self._sparse_kernel_of(op),
                     "SparseCsrPrivateUse1")
        own: dict[torch._ops.OpOverload, Kernel] = {
            _aten.set_.default: _set_empty, _aten._copy_from.default: _copy_from,
            _aten._copy_from_and_resize.default: _copy_from_and_resize}
        if p.cuda_kernels:
            own.update(cuda_only.kernels())
        in_cpp = self.in_cpp
        computed: set[str] = set()
        if in_cpp:  # the compiled backend's kernel computes them (and allocates and copies)
            plain, host_arguments = self._in_cpp()
            views = [op._name.removeprefix("aten::") for op in _VIEWS]
            torch.ops.torchdevice_sim.use_kernels(plain, host_arguments, views, p.no_float64 is not None,
                                                  p.no_float64 or "", _device_checks(p.device_checks))
            computed.update(f"aten::{name}" for name in (*plain, *host_arguments))
        else:
            for op in _VIEWS:
                impl(op, _cpu_kernel(op, "CPU"))
            own.update({_aten.empty.memory_format: self._empty, _aten.empty_strided.default: self._empty_strided,
                        _aten.resize_.default: _resize, _aten.copy_.default: _copy})
        for op, kernel in own.items():
            impl(op, kernel)
        for op in self._with_kernels():
            if op._name not in computed:
                impl(op, self._kernel_of(op))
        for name, equivalent in _OVERRIDABLE.items():
            impl(getattr(_aten, name).default, _equivalent(equivalent))
        above = {op: _whole_on_host(op) for op in _WHOLE}
        above[_aten.group_norm.default] = _group_norm
        for op, kernel in above.items():
            impl(op, _keyset_unused(kernel), "AutogradPrivateUse1")
        for name in p.missing_overloads:  # refused also where torch has a kernel for every device
            missing = overload(name)
            if missing is not None and torch._C._dispatch_has_kernel_for_dispatch_key(
                    name, "CompositeExplicitAutograd"):
                impl(missing, self._kernel_of(missing))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Warning only once for all operators")  # over torch's own kernels
            for name in p.limited:  # over the kernels above: the device checks a call before computing it
                limited = overload(name)
                if limited is not None and not self._refused_anyway(limited):
                    key = "AutogradPrivateUse1" if torch._C._dispatch_has_kernel_for_dispatch_key(
                        name, "CompositeImplicitAutograd") else "PrivateUse1"  # limits met in its decomposition
                    impl(limited, self._limited(limited, key, above.get(limited)), key)
        # Backward passes run in the thread that asks for them: the autograd engine sizes its device threads once,
        # at the process's first backward pass, which may have run before the device was registered.
        multithreaded = torch._C._is_multithreading_enabled()
        torch._C._set_multithreading_enabled(False)
        simulated_device.power(True)
        destroy = library._destroy

        def destroy_all() -> None:
            if in_cpp:
                torch.ops.torchdevice_sim.release_kernels()
            simulated_device.power(False)
            profiled.close()
            torch._C._set_multithreading_enabled(multithreaded)
            ops._destroy()
            destroy()

        library._destroy = destroy_all  # type: ignore[method-assign]
        return library

    def _with_kernels(self) -> list[torch._ops.OpOverload]:
        """The overloads that MPS, like the CPU, computes with a kernel of its own where torch also has a composite
        one for other devices (structured ops' functional and in-place overloads, which would call the ``out=``
        overload and pay an extra output; ``addr``, ``native_layer_norm``, whose composite code checks less): those
        the table does not refuse or have MPS compose; and with CUDA's kernels, :data:`_CUDA_BRANCHES`."""
        p = self.profile
        found = {*torch._C._dispatch_get_registrations_for_dispatch_key("CompositeExplicitAutogradNonFunctional"),
                 *torch._C._dispatch_get_registrations_for_dispatch_key("CompositeExplicitAutograd")}
        names = [name for name in sorted(found) if name.startswith("aten::") and name not in p.missing_overloads
                 and name not in p.composed and name.partition(".")[0].removeprefix("aten::") not in p.missing
                 and torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU")]
        branches = _CUDA_BRANCHES if p.cuda_kernels else ()
        return [*(op for op in map(overload, names) if op is not None), *branches]

    def _in_cpp(self) -> tuple[list[str], list[str]]:
        """The overloads the compiled backend's kernel computes (:mod:`.backend`: the CPU's kernel on host views of
        the device's memory, after the same refusals), and apart those of them that take host tensors with device
        tensors: those :meth:`_kernel` would compute (the fallback's and :meth:`_with_kernels`'), whose refusals are
        no more than float64 and a host tensor mixed in."""
        registered = torch._C._dispatch_get_registrations_for_dispatch_key
        composite = {*registered("CompositeExplicitAutograd"), *registered("CompositeImplicitAutograd"),
                     *registered("CompositeExplicitAutogradNonFunctional")}
        names = {name for name in registered("CPU") if name.startswith("aten::") and name not in composite}
        names.update(op._name for op in self._with_kernels())
        p = self.profile
        skipped = {*p.missing_overloads, *p.composed,
                   *(op._name for op in (*_VIEWS, *_WHOLE, _aten.group_norm.default, _aten.set_.default,
                                         _aten._copy_from.default, _aten._copy_from_and_resize.default,
                                         _aten.empty.memory_format, _aten.empty_strided.default, _aten.copy_.default))}
        chosen = sorted(name for name in names if name not in skipped and "sparse" not in name
                        and name.removeprefix("aten::").partition(".")[0] not in {*p.missing, *HOST_RESULTS})
        host = [name for name in chosen if name.removeprefix("aten::").partition(".")[0] in HOST_ARGUMENTS]
        return [name.removeprefix("aten::") for name in chosen if name not in host], \
            [name.removeprefix("aten::") for name in host]

    def _limited(self, op: torch._ops.OpOverload, key: str, own: Any = None) -> Any:
        """The kernel ``key`` has for ``op`` (on the autograd key: the device's ``own`` kernel there, else the
        overload's decomposition), refusing the calls its limits refuse."""
        if key.startswith("Autograd"):
            computed = own or op.decompose

            def decomposed(keyset: Any, *args: Any, **kwargs: Any) -> Any:
                return (self.refuse(op, args, kwargs) or computed)(*args, **kwargs)

            return decomposed
        below = kernel_below(op, key, self.kernels)

        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            instead = self.refuse(op, args, kwargs)
            if instead is not None:
                return instead(*args, **kwargs)
            return below(keyset, *args, **kwargs)

        return kernel

    def _refused_anyway(self, op: torch._ops.OpOverload) -> bool:
        """Whether every limit of ``op`` is MPS's float64 refusal met where a composite kernel (``op`` has no CPU
        kernel) makes float64 memory on the device (a conversion, float64 statistics), which the device refuses
        itself: no check before the call is needed (nor its cost on every call)."""
        return (self.profile.no_float64 == NO_FLOAT64 and not self.profile.alerts
                and not torch._C._dispatch_has_kernel_for_dispatch_key(op._name, "CPU")
                and all(limit.row.raises == "TypeError" and "".join(limit.row.message) == NO_FLOAT64
                        for limit in limits.limits_of(op)))

    def _sparse(self) -> list[torch._ops.OpOverload]:
        """The overloads the device has a sparse kernel of (which a Mac runs rather than a composite one)."""
        if self.profile.sparse is None:
            return list(_SPARSE_PARTS)  # and the others computed on the host (:meth:`_any_sparse_kernel`)
        return [op for op in map(overload, sorted(self.profile.sparse)) if op is not None]

    def _sparse_kernel_of(self, op: torch._ops.OpOverload) -> Any:
        refusal = self.profile.no_float64

        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            if refusal is not None and uses_float64(args, kwargs):
                raise TypeError(refusal)
            return on_host(op, args, kwargs)

        return kernel

    def _any_sparse_kernel(self, keyset: Any, op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
        """An op of sparse tensors, as the CPU's sparse kernel computes it (a GPU's sparse kernels)."""
        return self._sparse_kernel_of(op)(keyset, *args, **kwargs)

    def _kernel_of(self, op: torch._ops.OpOverload) -> Any:
        def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            return self._kernel(keyset, op, *args, **kwargs)

        return kernel

    def _dtype(self, dtype: torch.dtype | None) -> torch.dtype:
        """The dtype of new device memory; a device without float64 refuses it (MPS's allocation)."""
        dtype = dtype or torch.get_default_dtype()
        if self.profile.no_float64 is not None and dtype in WIDE:
            raise TypeError(self.profile.no_float64)
        return dtype

    def _empty(self, keyset: Any, size: list[int], dtype: torch.dtype | None = None, layout: Any = None,
               device: Any = None, pin_memory: bool | None = None,
               memory_format: torch.memory_format | None = None) -> torch.Tensor:
        stride = None
        if memory_format is not None and memory_format not in (torch.contiguous_format, torch.preserve_format):
            stride = torch.empty(size, device="meta").to(memory_format=memory_format).stride()
        return allocate(size, stride, self._dtype(dtype))

    def _empty_strided(self, keyset: Any, size: list[int], stride: list[int], dtype: torch.dtype | None = None,
                       layout: Any = None, device: Any = None, pin_memory: bool | None = None) -> torch.Tensor:
        return allocate(size, stride, self._dtype(dtype))

    def __enter__(self) -> Target:
        self._stack.callback(self.register()._destroy)
        return self.target()

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _kernel(self, keyset: Any, op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
        refused = self.refusal(op, args, kwargs)
        if refused is not None:
            raise refused
        try:
            return on_host(op, args, kwargs)
        except Exception as exc:  # a user error of the CPU kernel: what the caller must get
            self._kept(exc)
            raise


def _no_kernel(backend: str) -> Kernel:
    """The kernel of the ops of sparse tensors that ``backend`` (``SparseMPS``, ``SparseCsrCUDA``) has no kernel
    of, and no composite kernel serves."""
    def missing(keyset: Any, op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(MISSING.format(op=op._name, backend=backend))

    return missing


def on_host(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``op`` computed on host tensors over the device tensors' memory, as MPS's kernel of it would
    (:func:`~torchdevice.device.host_call.call`, the way :class:`_Aliased`): arguments it writes written in place
    (``out=`` ones resized as the CPU's kernel resizes them), its new tensors device tensors, the arguments it returns
    the caller's own. A sparse tensor of the device (COO or compressed) is computed as the host's sparse tensor of
    its parts' host aliases; one the op writes takes the parts the host one ends with."""
    if op._opname not in HOST_ARGUMENTS:
        _check_placement(tensors((args, kwargs)))
    args = OpSchema.of(op).boxed(args)
    return host_call.call(op, args, kwargs, _Aliased(args))


class _Aliased(Way):
    """The simulated device's way to the host: a device tensor as its host alias (which the op writes in place); an
    ``out=`` tensor as a fresh host tensor of its geometry (:meth:`output`); new results as device tensors over their
    host memory, without a copy (:meth:`to_device`)."""

    devices = (simulated_device.NAME,)

    def __init__(self, args: tuple[Any, ...]) -> None:
        super().__init__()
        self.args = args
        self.outs: set[int] = set()
        """The fresh host tensors of ``out=`` arguments (by id)."""

    def tensor(self, x: torch.Tensor) -> torch.Tensor:
        if not _is_device(x):
            return x
        if x.layout == torch.strided:
            alias = _alias(x)
        else:
            alias = _sparse_of(x, self.to_host)  # its parts kept by the call
            self.copies.append((x, alias))  # written: it takes the host tensor's parts
        self.own[id(alias)] = x
        return alias

    def output(self, x: Any) -> Any:
        """A host tensor of an ``out=`` argument's geometry: the CPU's kernel reads it (some size their result from
        it), resizes it as it resizes outputs (with torch's warning where it had elements) and writes it, then the
        result goes into the device tensor (:meth:`write`); a sparse one's host tensor, whose parts it takes after
        (a compressed one's host parts are copies, which the kernel resizes)."""
        if not isinstance(x, torch.Tensor) or not _is_device(x) or x.is_sparse:
            return self.to_host(x)
        if x.layout != torch.strided:
            fresh = _sparse_of(x, lambda part: _alias(part).clone())
        else:
            fresh = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype)
        self.copies.append((x, fresh))
        self.own[id(fresh)] = x
        self.outs.add(id(fresh))
        return fresh

    def run(self, op: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        schema = OpSchema.of(op)
        _give_generator(schema, args, kwargs)
        try:
            return op(*args, **kwargs)
        except RuntimeError as exc:  # an in-place kernel resizing its tensor, whose host view cannot grow
            if "not resizable" not in str(exc):
                raise
        for i in schema.written:
            if isinstance(i, int) and i < len(args) and isinstance(self.args[i], torch.Tensor) \
                    and _is_device(self.args[i]):
                args[i] = _alias(self.args[i]).clone()
                self.copies.append((self.args[i], args[i]))
                self.own[id(args[i])] = self.args[i]
        return op(*args, **kwargs)

    def write(self, original: torch.Tensor, host: torch.Tensor) -> None:
        """``host`` into device tensor ``original``: a sparse one takes its parts; an ``out=`` tensor the op also
        reads (an in-place op through its ``out=`` overload) keeps its shape, as a kernel refuses to resize a tensor
        it reads."""
        if original.is_sparse:
            _COPY_SPARSE.call_boxed(_SPARSE_KEYS, original, host)
            return
        if original.layout != torch.strided:
            _RESIZE_COMPRESSED.call_boxed(_COMPRESSED_KEYS, original, host)
            _COPY_COMPRESSED.call_boxed(_COMPRESSED_KEYS, original, host)
            return
        if id(host) in self.outs and original.shape != host.shape and any(_same(original, t)
                                                                          for t in tensors(self.args)):
            raise RuntimeError(f"output with shape {list(original.shape)} doesn't match the broadcast shape "
                               f"{list(host.shape)}")
        _copy_resized(original, host)

    def to_device(self, x: torch.Tensor) -> torch.Tensor:
        if x.layout == torch.sparse_coo or (x.layout != torch.strided and active().compressed is not None):
            return _sparse_of(x, self.part)
        if x.layout != torch.strided:
            raise NotImplementedError(f"torchdevice: {x.layout} tensors are not simulated on {active().target}; run "
                                      "this program on the cpu target")
        return device_tensor(x.resolve_conj().resolve_neg())


    def part(self, x: torch.Tensor) -> torch.Tensor:
        """A sparse result's part on the device: where it is the memory of a device argument (a kernel handing out
        its arguments' parts: ``sparse_mask``, a CSR tensor as COO), a view of that argument, which keeps the memory
        alive; else as any result (:meth:`placed`)."""
        if id(x) not in self.own and x.untyped_storage().data_ptr():
            for host in self.hosts.values():
                device = self.own.get(id(host))
                if device is not None and host.layout == torch.strided and host.dtype == x.dtype \
                        and host.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
                    return device.as_strided(x.shape, x.stride(), x.storage_offset())
        return self.placed(x)


def _is_device(t: torch.Tensor) -> bool:
    return cpp_device(t).type == simulated_device.NAME


def _check_placement(found: Iterable[torch.Tensor]) -> None:
    """Raise the device's placement error for tensors of two devices, or of a device and the host (but a host
    scalar)."""
    first: torch.device | None = None
    other: torch.device | str | None = None
    for t in found:
        device = cpp_device(t)
        if device.type == simulated_device.NAME:
            if first is None:
                first = device
            elif device != first and other is None:
                other = active().shown(device.index or 0)
        elif t.dim() > 0 and other is None:
            other = "cpu"
    if first is not None and other is not None:
        raise placement_error(active().shown(first.index or 0), other)


class _Profiled:
    """The profile made active while the kernels are registered."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        profile_module.activate(profile)

    def close(self) -> None:
        profile_module.deactivate(self.profile)


def _alias(t: torch.Tensor) -> torch.Tensor:
    """The host alias of device tensor ``t``, with its conjugate and negative bits."""
    alias = host_alias(t)
    if t.is_conj():
        alias = alias._conj()
    if t.is_neg():
        alias = alias._neg_view()
    return alias


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors are the same view of the same memory (``is_set_to``, without dispatching)."""
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
            and a.dtype == b.dtype)


def _copy_resized(original: torch.Tensor, computed: torch.Tensor) -> None:
    """``computed`` into device tensor ``original``, resized to its shape and strides first."""
    if original.shape != computed.shape or original.stride() != computed.stride():
        original.resize_(computed.shape)
        if original.stride() != computed.stride():
            original.as_strided_(computed.shape, computed.stride())
    _alias(original).copy_(computed)


def _give_generator(schema: OpSchema, args: list[Any], kwargs: dict[str, Any]) -> None:
    """An op that draws random numbers and was given no generator draws from the device's own, as on a Mac."""
    if "generator" not in schema.names:
        return
    at = schema.names.index("generator")
    if at < len(args):
        if args[at] is None:
            args[at] = GENERATORS[current()]
    elif kwargs.get("generator") is None:
        kwargs["generator"] = GENERATORS[current()]


def _sparse_of(x: torch.Tensor, place: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Sparse tensor ``x`` (COO or compressed) made anew of its parts placed by ``place`` (on the host, on the
    device), on their device."""
    if x.layout == torch.sparse_coo:
        indices = place(x._indices())
        return _aten._sparse_coo_tensor_with_dims_and_tensors(
            x.sparse_dim(), x.dense_dim(), x.shape, indices, place(x._values()), dtype=x.dtype,
            layout=torch.sparse_coo, device=cpp_device(indices), is_coalesced=x.is_coalesced())
    rows = x.layout in (torch.sparse_csr, torch.sparse_bsr)
    compressed = place(x.crow_indices() if rows else x.ccol_indices())
    plain = place(x.col_indices() if rows else x.row_indices())
    return _aten._sparse_compressed_tensor_unsafe(compressed, plain, place(x.values()), x.shape, dtype=x.dtype,
                                                  layout=x.layout, device=cpp_device(compressed))


_COPY_SPARSE = torch.library.get_kernel(_aten.copy_sparse_to_sparse_.default, "SparseCPU")
_SPARSE_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.SparsePrivateUse1)
_RESIZE_COMPRESSED = torch.library.get_kernel(_aten.resize_as_sparse_.default, "SparseCsrCPU")
_COPY_COMPRESSED = torch.library.get_kernel(_aten.copy_.default, "SparseCsrCPU")
_COMPRESSED_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.SparseCsrPrivateUse1)


class _OnHost(torch.autograd.Function):
    """An op run whole on host copies of its tensors, with its gradients computed there too."""

    @staticmethod
    def forward(ctx: Any, op: torch._ops.OpOverload, structure: Any, *flat: Any) -> Any:
        inputs = [_alias(t).detach().clone().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor)
                  and _is_device(t) else t for t in flat]
        with torch.enable_grad():
            outputs = op(*_rebuild(structure, inputs))
        ctx.inputs, ctx.outputs = inputs, [t for t in tensors(outputs)]
        return tuple(device_tensor(t.detach()) for t in ctx.outputs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        wanted = [t for t in ctx.inputs if isinstance(t, torch.Tensor) and t.requires_grad]
        pairs = [(o, _alias(g) if _is_device(g) else g) for o, g in zip(ctx.outputs, grads, strict=True)
                 if g is not None and o.requires_grad]
        found = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True))
        computed = [next(found) if isinstance(t, torch.Tensor) and t.requires_grad else None for t in ctx.inputs]
        return (None, None, *(device_tensor(g) if g is not None else None for g in computed))


def _rebuild(structure: Any, flat: list[Any]) -> Any:
    """The arguments ``structure`` (lists of tensors and values) with its tensors taken from ``flat`` in order."""
    values = iter(flat)
    return tree_map(lambda x: next(values), structure)


def _whole_on_host(op: torch._ops.OpOverload) -> Any:
    packed = op._overloadname == "data"  # a packed sequence's batch sizes (the second argument) are host tensors

    def whole(*args: Any) -> Any:
        _check_placement(tensors((args[0], *args[2:]) if packed else args))  # the layer left on the host, or its input
        return _OnHost.apply(op, list(args), *leaves(list(args)))

    return whole


def _group_norm(input: torch.Tensor, num_groups: int, weight: torch.Tensor | None = None,
                bias: torch.Tensor | None = None, eps: float = 1e-5, cudnn_enabled: bool = True) -> torch.Tensor:
    """``group_norm`` as a Mac runs it: MPS's ``native_group_norm`` of the contiguous input (torch's composite code
    reshapes with views on a device it has no branch for, which a channels-last input cannot take)."""
    n, c = input.shape[:2]
    return _aten.native_group_norm(input.contiguous(), weight, bias, n, c, math.prod(input.shape[2:]), num_groups,
                                   eps)[0]


def _fixed_window_max_pool(self: torch.Tensor, output_size: list[int], **out: torch.Tensor) -> Any:
    """``adaptive_max_pool2d`` of sizes that do not divide, as MPS computes it: one window size and stride for the
    whole input (``set_kernel_params`` of ``AdaptivePooling.mm``), where the CPU's windows vary."""
    (ih, iw), (oh, ow) = self.shape[-2:], output_size
    big, small = ((ih, iw), (oh, ow)) if ih >= oh else ((oh, ow), (ih, iw))
    stride = [big[0] // small[0], big[1] // small[1]]
    kernel = [big[0] - (small[0] - 1) * stride[0], big[1] - (small[1] - 1) * stride[1]]
    pool = _aten.max_pool2d_with_indices.out if out else _aten.max_pool2d_with_indices.default
    return pool(self, kernel, stride, [0, 0], [1, 1], False, **out)


_INSTEAD: dict[str, Callable[..., Any]] = {"adaptive_max_pool_not_divisible": _fixed_window_max_pool}
"""What MPS computes for a call under a limit it meets with other values than the CPU's (``raises: none``)."""


def _keyset_unused(kernel: Callable[..., Any]) -> Kernel:
    def with_keyset(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        return kernel(*args, **kwargs)

    return with_keyset


def _device_checks(checks: tuple[tuple[str, str, tuple[str, ...]], ...]) -> list[str]:
    """A profile's kernel wrappers' device checks as the compiled backend takes them: ``op|wrapper|`` then each
    checked argument's ``position:name`` (the overloads this torch lacks left out)."""
    rows = []
    for name, wrapper, arguments in checks:
        op = overload(name)
        if op is None:
            continue
        positions = {a.name: i for i, a in enumerate(op._schema.arguments)}
        rows.append("|".join((name, wrapper, *(f"{positions[a]}:{a}" for a in arguments if a in positions))))
    return rows


def _cpu_kernel(op: torch._ops.OpOverload, key: str) -> Any:
    kernel = torch.library.get_kernel(op, key)

    def device_agnostic(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        return kernel.call_boxed(keyset, *args, **kwargs)

    return device_agnostic


def _equivalent(equivalent: torch._ops.OpOverload) -> Any:
    def computed(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if equivalent is _aten.convolution_backward.default:  # which also takes the bias's sizes
            grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, mask = args
            channels = weight.shape[1] * groups if transposed else weight.shape[0]
            args = (grad_output, input, weight, [channels], stride, padding, dilation, transposed, output_padding,
                    groups, mask)
        return on_host(equivalent, args, kwargs)

    return computed


def _resize(keyset: Any, self: torch.Tensor, size: list[int],
            memory_format: torch.memory_format | None = None) -> torch.Tensor:
    """``resize_``: a storage too small for the new size is replaced by new device memory holding its bytes (device
    memory is allocated, not grown in place); then the CPU's kernel sets the sizes."""
    needed = (self.storage_offset() + math.prod(size)) * self.element_size()
    storage = self.untyped_storage()
    if needed > storage.nbytes():
        grown = allocate([int(needed)], None, torch.uint8)
        host_alias(grown)[: storage.nbytes()].copy_(host_bytes(storage))
        _aten.set_.source_Storage_storage_offset(self, grown.untyped_storage(), self.storage_offset(), self.shape,
                                                  self.stride())
    return _RESIZE.call_boxed(keyset, self, size, memory_format=memory_format)


_RESIZE = torch.library.get_kernel(_aten.resize_.default, "CPU")


def _set_empty(keyset: Any, self: torch.Tensor) -> torch.Tensor:
    """``set_()``: an empty storage of the device."""
    empty = allocate([0], None, self.dtype)
    return _aten.set_.source_Storage_storage_offset(self, empty.untyped_storage(), 0, [0], [])


def _copy(keyset: Any, self: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    (_alias(self) if _is_device(self) else self).copy_(_alias(src) if _is_device(src) else src)
    return self


def _copy_from(keyset: Any, self: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    return _copy(keyset, dst, self)


def _copy_from_and_resize(keyset: Any, self: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    dst.resize_(self.shape)
    return _copy(keyset, dst, self)
