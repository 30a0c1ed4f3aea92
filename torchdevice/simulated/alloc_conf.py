"""CUDA's allocator settings as torch reads them, for the simulated GPU's allocator (``caching_allocator.h``).

The string is ``PYTORCH_CUDA_ALLOC_CONF``, else ``PYTORCH_ALLOC_CONF`` (``c10/cuda/CUDAAllocatorConfig.h``). It is
checked by torch's own parser where the installed torch has it (``torch._C._accelerator_setAllocatorSettings``: its
words for a bad value) and against the keys CUDA's parser knows (read from the installed torch's
``CUDAAllocatorConfig.h``), then read here: ``max_split_size_mb``, ``max_non_split_rounding_mb``,
``large_segment_size_mb``, ``roundup_power2_divisions``, ``garbage_collection_threshold`` and
``per_process_memory_fraction`` change what the allocator decides. A bad string is not raised here: CUDA raises it
at the first allocation, and so does the simulated GPU. ``expandable_segments:True`` and
``backend:cudaMallocAsync`` are not simulated (said once at INFO): the segments are those of cudaMalloc.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

import torch

log = logging.getLogger("torchdevice")

MIB = 1 << 20
LARGE_BUFFER = 20 * MIB
INTERVALS = 16
"""roundup_power2_divisions' intervals: 1 MiB ... 64 GiB, by powers of two."""
COMMON_KEYS = frozenset({"large_segment_size_mb", "max_split_size_mb", "max_non_split_rounding_mb",
                         "garbage_collection_threshold", "roundup_power2_divisions", "expandable_segments",
                         "pinned_use_background_threads", "pinned_max_round_threshold_mb",
                         "pinned_max_cached_size_mb"})
"""The keys of torch's common allocator parser (``c10/core/AllocatorConfig.cpp``)."""
CHECK = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
"""torch's own parser of the settings (the releases that have it; a simulated GPU's ``_set_allocator_settings``
calls it too)."""
NOT_SIMULATED = {("expandable_segments", "true"): "expandable segments",
                 ("backend", "cudamallocasync"): "the cudaMallocAsync backend"}


class Settings(NamedTuple):
    max_split: int = -1
    """Bytes; -1: unlimited."""
    max_non_split_rounding: int = LARGE_BUFFER
    large_segment: int = LARGE_BUFFER
    divisions: tuple[int, ...] = (0,) * INTERVALS
    gc_threshold: float = 0.0
    fraction: float | None = None
    """``per_process_memory_fraction``: what ``torch.cuda.set_per_process_memory_fraction`` would set."""
    error: str = ""
    """torch's words for a bad string, raised at the first allocation."""


_given: list[str] = []
"""The strings the program gave while it runs (``torch.cuda.memory._set_allocator_settings``), in order."""


def give(conf: str) -> Settings:
    """``_set_allocator_settings(conf)``: torch's parser takes it (raising its error for a bad string, as on a GPU);
    the settings the allocator then decides by (:func:`current`)."""
    if CHECK is not None:
        CHECK(conf)
    _given.append(conf)
    return current()


def forget() -> None:
    """The strings given are forgotten (at uninstall): the environment's decides again."""
    _given.clear()


def current() -> Settings:
    """The environment's string, then each string given, the later keys replacing the earlier (each checked by
    torch's parser when it came)."""
    if not _given:
        return settings()
    return settings(",".join(conf for conf in (text(), *_given) if conf.strip()), checked=True)


def reported(conf: Settings) -> dict[str, Any]:
    """``conf`` as ``torch.cuda.memory._snapshot()`` reports CUDA's settings (its ``allocator_settings``: the string
    last given, as CUDA keeps it; -1: no max_split_size; the pinned-memory settings torch's defaults)."""
    return {"PYTORCH_CUDA_ALLOC_CONF": _given[-1] if _given else text(), "max_split_size": conf.max_split,
            "garbage_collection_threshold": conf.gc_threshold, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): divisions for i, divisions in enumerate(conf.divisions)}}


def text() -> str:
    """The settings string CUDA's allocator reads."""
    return os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") or ""


def settings(conf: str | None = None, checked: bool = False) -> Settings:
    """``conf`` (default :func:`text`) as CUDA's allocator takes it; ``checked``: torch's parser took it already."""
    conf = text() if conf is None else conf
    if not conf.strip():
        return Settings()
    if CHECK is not None and not checked:
        try:
            CHECK(conf)
        except (ValueError, RuntimeError) as exc:
            return Settings(error=str(exc))
    try:
        return _read(_tokens(conf))
    except ValueError as exc:
        return Settings(error=str(exc))


def _tokens(conf: str) -> list[str]:
    return [t for t in re.split(r"([,:\[\]])|\s+", conf) if t]


def _read(tokens: list[str]) -> Settings:
    found: dict[str, object] = {}
    keys = COMMON_KEYS | cuda_keys()
    i = 0
    while i < len(tokens):
        key = tokens[i]
        if key not in keys:
            raise ValueError(f"Unrecognized key '{key}' in CUDA allocator config.")
        if i + 2 >= len(tokens) or tokens[i + 1] != ":":
            got = tokens[i + 1] if i + 1 < len(tokens) else ""
            raise ValueError(f"Expected ':' in ConfigTokenizer but got '{got}'")
        if tokens[i + 2] == "[":
            end = tokens.index("]", i + 2) if "]" in tokens[i + 2:] else -1
            if end < 0:
                raise ValueError("Expected closing bracket ']' in ConfigTokenizer but reached end of config")
            found[key] = tokens[i + 3:end]
            i = end + 1
        else:
            found[key] = tokens[i + 2]
            i += 3
        if i < len(tokens):
            i += 1  # the ',' torch's parser checked
    for (key, value), what in NOT_SIMULATED.items():
        if str(found.get(key, "")).lower() == value:
            _not_simulated(f"{key}:{found[key]}", what)
    divisions = _divisions(found.get("roundup_power2_divisions"))
    fraction = found.get("per_process_memory_fraction")
    return Settings(
        max_split=int(str(found["max_split_size_mb"])) * MIB if "max_split_size_mb" in found else -1,
        max_non_split_rounding=int(str(found.get("max_non_split_rounding_mb", LARGE_BUFFER // MIB))) * MIB,
        large_segment=int(str(found.get("large_segment_size_mb", LARGE_BUFFER // MIB))) * MIB,
        divisions=divisions,
        gc_threshold=float(str(found.get("garbage_collection_threshold", 0.0))),
        fraction=None if fraction is None else float(str(fraction)))


def _divisions(value: object) -> tuple[int, ...]:
    """roundup_power2_divisions: one value for every interval, or ``[MB:N, ..., >:N]`` (each interval from its key's
    power of two; the first key's value also below it, ``>``'s above the last)."""
    if value is None:
        return (0,) * INTERVALS
    if isinstance(value, str):
        return (int(value),) * INTERVALS
    found = [0] * INTERVALS
    items = [t for t in value if t != ","] if isinstance(value, list) else []
    last, first = -1, True
    for key, number in zip(items[::3], items[2::3], strict=False):
        if key == ">":
            for index in range(last + 1, INTERVALS):
                found[index] = int(number)
            continue
        index = min(max(int(key).bit_length() - 1, 0), INTERVALS - 1)
        for below in range(0 if first else index, index + 1):
            found[below] = int(number)
        first, last = False, index
    return tuple(found)


@functools.cache
def _not_simulated(setting: str, what: str) -> None:
    log.info("%s: %s are not simulated; the simulated GPU's segments are cudaMalloc's", setting, what)


@functools.cache
def cuda_keys() -> frozenset[str]:
    """The keys CUDA's own parser knows, as the installed torch's ``c10/cuda/CUDAAllocatorConfig.h`` lists them
    (``getKeys``); 2.13's where the header is not there."""
    header = Path(torch.__file__).parent / "include" / "c10" / "cuda" / "CUDAAllocatorConfig.h"
    try:
        source = header.read_text(encoding="utf-8")
    except OSError:
        source = ""
    block = re.search(r"getKeys\(\)\s*\{.*?keys\{(.*?)\};", source, re.DOTALL)
    if block is None:
        return _KEYS_213
    body = re.sub(r"//[^\n]*", "", block.group(1))
    names = re.findall(r'((?:"[^"]*"\s*)+)', body)
    return frozenset("".join(re.findall(r'"([^"]*)"', n)) for n in names)


_KEYS_213 = frozenset({"backend", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
                       "release_lock_on_hipmalloc", "pinned_use_hip_host_register",
                       "graph_capture_record_stream_reuse", "pinned_reserve_segment_size_mb",
                       "pinned_num_register_threads", "per_process_memory_fraction", "pinned_free_catch_all",
                       "throw_on_cudamalloc_oom"})
