"""CUDA graphs without CUDA: ``torch.cuda.CUDAGraph``, ``torch.cuda.graph``, ``make_graphed_callables``.

A capture (``with torch.cuda.graph(g): ...``, or ``g.capture_begin()``/``capture_end()``) runs the region once and
records each aten call it makes, with the tensors it read and the tensors it made or wrote, then gives the tensors
made before the region back what they held (a GPU's capture launches nothing: a captured optimizer step has not
stepped); ``g.replay()`` calls them again in order on the same tensors and writes what each makes into the tensors
the capture made, so new values copied into a static input flow to the static outputs, as a replay re-launches the
captured kernels on the captured memory. What differs from a GPU: the tensors the capture made hold its values
(a GPU's are unwritten until the first replay), and a replay costs what the region costs eagerly.

Inside a capture, what a GPU refuses is refused: reading a value back to the host (``.item()``, ``.tolist()``,
printing a tensor) raises CUDA's error for an operation not permitted while capturing.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from torchdevice.runtime.vocabulary import word

_CAPTURING = threading.local()
_SYNCS = frozenset({torch.ops.aten._local_scalar_dense.default, torch.ops.aten.equal.default,
                    torch.ops.aten.is_nonzero.default})
"""Calls that read a value back to the host: a GPU refuses them while capturing."""
_NOT_PERMITTED = ("CUDA error: operation not permitted when stream is capturing\nCUDA kernel errors might be "
                  "asynchronously reported at some other API call, so the stacktrace below might be incorrect.")


@word
def capturing() -> bool:
    """Whether this thread is capturing a graph (``torch.cuda.is_current_stream_capturing()``)."""
    return getattr(_CAPTURING, "graph", None) is not None


class _Recorder(TorchDispatchMode):
    """Records every aten call of the region it is active in (its results computed as usual), and what the tensors
    made before the region held before the region first wrote them (:meth:`undo` writes it back)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple[Any, ...], dict[str, Any], list[torch.Tensor]]] = []
        self.made: set[int] = set()
        self.saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _SYNCS:
            raise torch.AcceleratorError(_NOT_PERMITTED)
        for t in _written(func, args, kwargs):
            if id(t) not in self.made and id(t) not in self._seen:
                self._seen.add(id(t))
                self.saved.append((t, t.clone()))
        out = func(*args, **kwargs)
        made = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.made.update(id(t) for t in made)
        self.calls.append((func, args, kwargs, made))
        return out

    def undo(self) -> None:
        """The tensors made before the region hold what they held before it (a GPU's capture writes nothing)."""
        with torch.no_grad():
            for t, before in reversed(self.saved):
                t.copy_(before)
        self.saved.clear()


def _written(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors a call writes (in place, ``out=``), as its schema says."""
    found: list[torch.Tensor] = []
    for i, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        found += [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]
    return found


@word
class CUDAGraph:
    """A recorded region (``torch.cuda.CUDAGraph``)."""

    def __init__(self, keep_graph: bool = False) -> None:
        self._recorder: _Recorder | None = None
        self._calls: list[tuple[Any, tuple[Any, ...], dict[str, Any], list[torch.Tensor]]] = []

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        if capturing():
            raise RuntimeError("torchdevice: a CUDA graph capture is already under way in this thread")
        self._recorder = _Recorder()
        self._recorder.__enter__()
        _CAPTURING.graph = self

    def capture_end(self) -> None:
        if self._recorder is None:
            raise RuntimeError("torchdevice: capture_end() without capture_begin()")
        recorder, self._recorder = self._recorder, None
        _CAPTURING.graph = None
        recorder.__exit__(None, None, None)
        recorder.undo()
        self._calls = recorder.calls

    def replay(self) -> None:
        """Every recorded call again, its results written into the tensors the capture made."""
        with torch.no_grad():  # the calls recorded are below autograd: its own were recorded too
            for func, args, kwargs, made in self._calls:
                again = [t for t in tree_leaves(func(*args, **kwargs)) if isinstance(t, torch.Tensor)]
                for before, now in zip(made, again, strict=False):
                    if now is not before and now.data_ptr() != before.data_ptr():
                        before.copy_(now)

    def instantiate(self) -> None:
        """Nothing to instantiate: the recorded calls replay as they are."""

    def reset(self) -> None:
        self._calls = []

    def get_graph_data(self) -> dict[str, Any]:
        """The graph's nodes: the recorded calls, in order (a GPU's describe its kernels)."""
        return {"nodes": [{"op": str(func)} for func, *_ in self._calls]}

    def raw_cuda_graph(self) -> int:
        raise NotImplementedError("torchdevice: a recorded graph has no cudaGraph_t (there is no CUDA runtime)")

    def raw_cuda_graph_exec(self) -> int:
        raise NotImplementedError("torchdevice: a recorded graph has no cudaGraphExec_t (there is no CUDA runtime)")

    def pool(self) -> tuple[int, int]:
        return (0, id(self))

    def enable_debug_mode(self) -> None:
        """Nothing to debug: the recorded calls are Python's."""

    def debug_dump(self, debug_path: str) -> None:
        with open(debug_path, "w", encoding="utf-8") as file:
            file.writelines(f"{func}\n" for func, *_ in self._calls)

    def pools(self) -> list[tuple[int, int]]:
        return [self.pool()]

    @staticmethod
    def get_currently_capturing_graph() -> CUDAGraph:
        found = getattr(_CAPTURING, "graph", None)
        if found is None:
            raise RuntimeError("torchdevice: no CUDA graph capture is under way in this thread")
        return found




def _refusal(name: str) -> Any:
    def refuse(self: CUDAGraph, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"torch.cuda.CUDAGraph.{name} is not supported by torchdevice: a recorded region "
                                  "replays its calls as Python calls, without CUDA graph nodes, conditional nodes or "
                                  "hooks")

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


for _name in ("begin_capture_to_if_node", "begin_capture_to_while_node", "end_capture_to_conditional_node",
              "set_conditional_handle_for_current_node", "capture_end_pre", "capture_end_post",
              "register_generator_state", "register_capture_start_hook", "register_capture_end_hook",
              "register_post_instantiate_hook", "register_replay_start_hook", "register_replay_end_hook",
              "register_destroy_callback", "retain_object"):  # torch 2.14's and 2.15's members
    setattr(CUDAGraph, _name, _refusal(_name))

@word
class graph:
    """``with torch.cuda.graph(g): ...``: capture the block into ``g``."""

    def __init__(self, cuda_graph: CUDAGraph, pool: Any = None, stream: Any = None,
                 capture_error_mode: str = "global") -> None:
        self.cuda_graph = cuda_graph

    def __enter__(self) -> None:
        torch.cuda.synchronize()
        self.cuda_graph.capture_begin()

    def __exit__(self, *exc: object) -> None:
        self.cuda_graph.capture_end()


@word
def graph_pool_handle() -> tuple[int, int]:
    """A token naming a memory pool graphs may share (the host's allocator serves them all)."""
    return (0, 0)


@word
def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Any = None) -> Any:
    """The callables themselves: each call computes what the graphed callable would (forward and backward)."""
    return callables

