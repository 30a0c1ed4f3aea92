"""Every OpInfo op and dtype, written for CUDA, through the runtime against the CPU.

In the spirit of PyTorch's ``TestConsistency`` (``test/test_mps.py``): for each op of PyTorch's OpInfo
database (``op_db``) and each dtype that both CUDA and the CPU support (a case, ``OP-DTYPE``), the op's
samples are made with ``device="cuda"`` with the runtime installed on the target
(``--consistency-target``: ``mps-sim``, the simulated Mac, by default, ``cuda-sim``, the simulated GPU, or
``cpu``) and the op runs on
each there; its outcome, copied to the CPU, must be what the op does natively (the runtime not
installed) on a CPU copy of the same sample, made before the call (:func:`outcomes.assert_same`: the
same exception, type and message, or the same result type, dtype, shape and values within the
dtype's tolerance, the same arguments after the call, which in-place and ``out=`` calls write, and the
same aliasing). The tier sees the runtime only through ``torchdevice.installed``, tensors' ``.cpu()``
and values on the CPU: that a result's ``.device`` names the target is by design.

A case runs the first :data:`MAX_SAMPLES` samples of its op and dtype, in OpInfo's order, on CPU copies
of each sample's tensors that keep their layout (strides, storage offsets, the rest of the storage).
Ops whose values cannot be compared across devices are skipped, with OpInfo's reason: a
nondeterministic output (uninitialized memory), or random or undefined values (PyTorch's own
``test_compare_cpu`` skips them). Expected failures are data, ``expected_failures.yaml``: one
record per group of cases that fail for one reason, with the ``targets`` it fails them on (a case is an
expected failure there only); a listed case that passes on one of them fails the tier. Each case reports how many
of its samples passed (and, an expected failure, how many failed as expected), and the tier's summary the pass rate
over all samples (``conftest.py``).
"""

from __future__ import annotations

import copy
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from functools import cache, lru_cache
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
import torch
from expected_failures import ExpectedFailure, load
from outcomes import Outcome, assert_same, map_leaves, outcome
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

import torchdevice

pytestmark = pytest.mark.consistency

MAX_SAMPLES = 3
"""Samples run per case: the first ones OpInfo makes for the op and dtype."""
UNDEFINED = ("non-deterministic", "undefined")
"""Words of the reasons PyTorch's ``test_compare_cpu`` skips an op for that say its values are random or
undefined (its other skips are tolerances of CUDA's kernels, which this tier does not run)."""
EXPECTED_FAILURES = Path(__file__).with_name("expected_failures.yaml")
TARGETS = ("mps-sim", "cuda-sim", "cpu")
"""The targets the tier runs on (``--consistency-target``)."""


@cache
def expected_failures() -> dict[tuple[str, str], ExpectedFailure]:
    """(op, dtype) -> why the case fails, from :data:`EXPECTED_FAILURES`."""
    return load(EXPECTED_FAILURES, lists={"targets": TARGETS})


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def undefined(op: OpInfo, dtype: torch.dtype) -> str | None:
    """Why the op's values cannot be compared across devices, where OpInfo says so: its output is
    nondeterministic (uninitialized memory), or PyTorch's ``test_compare_cpu`` skips it as random or
    undefined."""
    if getattr(op, "has_nondeterministic_output", False):  # OpInfo's flag from torch 2.11
        return "OpInfo: nondeterministic output (uninitialized memory)"
    for decorator in op.get_decorators("TestCommon", "test_compare_cpu", "cuda", dtype, {}):
        probe = decorator(lambda: None)
        reason = getattr(probe, "__unittest_skip_why__", "")
        if getattr(probe, "__unittest_skip__", False) and any(word in reason for word in UNDEFINED):
            return f"PyTorch's test_compare_cpu: {reason}"
    return None


def _cases() -> list[Any]:
    cases = []
    for op in op_db:
        for dtype in sorted(op.supported_dtypes("cuda") & op.supported_dtypes("cpu"), key=str):
            reason = undefined(op, dtype)
            cases.append(pytest.param(op, dtype, id=f"{op.full_name}-{dtype_name(dtype)}",
                                      marks=[pytest.mark.skip(reason=reason)] if reason else []))
    return cases


CASES = _cases()
OPS = {op.full_name: op for op in op_db}


def test_expected_failures_name_cases_of_the_tier():
    known = {tuple(c.id.rsplit("-", 1)) for c in CASES}
    assert not set(expected_failures()) - known, "expected failures of cases the tier does not have"


@pytest.mark.parametrize(("op", "dtype"), CASES)
def test_op_matches_the_cpu(op: OpInfo, dtype: torch.dtype, target: str, request: pytest.FixtureRequest,
                            record_property: Callable[[str, object], None]) -> None:
    failure = expected_failures().get((op.full_name, dtype_name(dtype)))
    expected = failure is not None and target in failure.extra["targets"]
    if expected:
        request.applymarker(pytest.mark.xfail(strict=True, raises=AssertionError,
                                              reason=f"{failure.group} (expected_failures.yaml)"))
    differences = _compared_op(op.full_name, target)[dtype]
    record_property("samples", len(differences))
    record_property("passed", differences.count(None))
    record_property("expected", (len(differences) - differences.count(None)) if expected else 0)
    assert differences, "no sample"
    found = [d for d in differences if d is not None]
    assert not found, f"{len(found)} of {len(differences)} samples differ from the CPU's:\n" + "\n".join(found[:3])


def test_the_tier_fails_other_values_and_other_errors(target: str) -> None:
    sin = next(op for op in op_db if op.name == "sin")
    samples = len(compared(sin, [torch.float32], target)[torch.float32])
    assert compared(sin, [torch.float32], target)[torch.float32] == [None] * samples and samples

    def off(x: torch.Tensor) -> torch.Tensor:  # other values on the target
        return torch.sin(x) + (1e-3 if installed() else 0.0)

    def refuses(x: torch.Tensor) -> torch.Tensor:  # an error on the target only
        if installed():
            raise RuntimeError("refused")
        return torch.sin(x)

    for fn, message in ((off, "not close"), (refuses, "got RuntimeError: refused; native: ")):
        differences = compared(_with_op(sin, fn), [torch.float32], target)[torch.float32]
        assert len(differences) == samples and all(message in str(d) for d in differences), differences


def installed() -> bool:
    """Whether the runtime is installed (a call on the target) rather than not (natively): ``torchdevice.target()``
    is ``cuda`` itself then, and the target's device while installed (``cuda:0`` on cuda-sim)."""
    return torchdevice.target() != torch.device("cuda")


def _with_op(op: OpInfo, fn: Callable[..., Any]) -> OpInfo:
    other = copy.copy(op)
    other.op = fn
    return other


def compared(op: OpInfo, dtypes: list[torch.dtype], target: str) -> dict[torch.dtype, list[str | None]]:
    """For each dtype, for each of its samples: None where the target's outcome is the CPU's, else what
    differs. One installation of the runtime for them all: installing costs more than an op's samples."""
    made: dict[torch.dtype, list[list[Run]]] = {}  # each sample's calls on the target
    refused: dict[torch.dtype, Exception] = {}
    with (tempfile.TemporaryDirectory() as cache, pytest.MonkeyPatch.context() as env,
          warnings.catch_warnings()):
        env.setenv("TORCHDEVICE_CACHE_DIR", cache)  # a capability cache of the op's own
        warnings.simplefilter("ignore")
        with torchdevice.installed(target):
            device = torch.empty(0, device="cuda").device  # what device tensors say they are on
            for dtype in dtypes:
                made[dtype] = []
                try:
                    for sample in _samples(op, "cuda", dtype):
                        made[dtype].append(_on_target(op, sample))
                except Exception as exc:  # noqa: BLE001 - the samples cannot be made on the target: they fail
                    refused[dtype] = exc
    differences = {dtype: [_difference(runs, str(device)) for runs in samples] for dtype, samples in made.items()}
    for dtype, runs in differences.items():
        if len(runs) == MAX_SAMPLES:
            continue
        with warnings.catch_warnings():  # fewer samples on the target than natively fail, as unmade samples
            warnings.simplefilter("ignore")
            natively = len(list(_samples(op, "cpu", dtype)))
        if dtype in refused:
            exc = refused[dtype]
            runs += [f"making the samples raised {type(exc).__name__}: {exc}"] * max(natively - len(runs), 1)
        else:
            runs += [f"made {len(runs)} samples on the target, {natively} natively"] * (natively - len(runs))
    return differences


@lru_cache(maxsize=1)
def _compared_op(name: str, target: str) -> dict[torch.dtype, list[str | None]]:
    """Every case of the op ``name`` (pytest runs them one after another)."""
    return compared(OPS[name], [c.values[1] for c in CASES if c.id.rsplit("-", 1)[0] == name and not c.marks],
                    target)


def _samples(op: OpInfo, device: str, dtype: torch.dtype) -> Iterator[SampleInput]:
    """The first :data:`MAX_SAMPLES` samples of ``dtype`` on ``device``, from a fixed seed
    (``sample_inputs_func`` directly: ``OpInfo.sample_inputs`` inspects the call stack on every call)."""
    torch.manual_seed(0)
    return islice(op.sample_inputs_func(op, device, dtype, False), MAX_SAMPLES)


Run = tuple[str, Callable[..., Any], SampleInput | None, Outcome | str]
"""One call of a sample on the target: its variant and function, a CPU copy of its arguments made before
the call, and its outcome copied to the CPU (or what went wrong copying either)."""


def _on_target(op: OpInfo, sample: SampleInput) -> list[Run]:
    """The sample's calls on the target: the op's function, again with ``out=`` tensors of its result's
    shapes and dtypes made on the device (where the op has an ``out=`` form), then its in-place variant
    (where it has one)."""
    runs = [_call("function", op.op, sample)]
    result = runs[0][3].result if isinstance(runs[0][3], Outcome) else None
    if op.supports_out and isinstance(result, torch.Tensor | tuple | list) and tensors_only(result):
        out = map_leaves(result, lambda t: torch.zeros(t.shape, dtype=t.dtype, device="cuda"))
        runs.append(_call("out=", op.op, SampleInput(sample.input, args=sample.args, kwargs={
            **sample.kwargs, "out": out if isinstance(out, torch.Tensor) else tuple(out)})))
    if op.inplace_variant is not None:
        runs.append(_call("in-place", op.inplace_variant, sample))
    return runs


def tensors_only(value: Any) -> bool:
    return isinstance(value, torch.Tensor) or bool(value) and all(isinstance(v, torch.Tensor) for v in value)


def _call(variant: str, fn: Callable[..., Any], sample: SampleInput) -> Run:
    try:
        host = SampleInput(_on_host(sample.input), args=_on_host(sample.args), kwargs=_on_host(sample.kwargs))
    except Exception as exc:  # noqa: BLE001 - a sample that cannot be copied to the CPU fails
        return variant, fn, None, f"copying the sample to the CPU raised {type(exc).__name__}: {exc}"
    done = _run(fn, sample)
    try:
        return variant, fn, host, done.on_host()
    except Exception as exc:  # noqa: BLE001 - so does an outcome that cannot
        return variant, fn, host, f"copying the outcome to the CPU raised {type(exc).__name__}: {exc}"


def _run(fn: Callable[..., Any], sample: SampleInput) -> Outcome:
    return outcome(as_called(fn), (sample.input, *sample.args), dict(sample.kwargs))


def as_called(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What a program calls by ``fn``'s name now: OpInfo holds the functions as they were when it was
    imported, and the runtime replaces some (``torch.arange``, ``torch.zeros_like``: those taking a
    device). ``fn`` itself where it has no such name (a lambda, which looks its callees up as called)."""
    name = getattr(fn, "__name__", "")
    if getattr(fn, "__objclass__", None) is not None:  # a method of Tensor's C base
        return getattr(torch.Tensor, name, fn)
    path = getattr(fn, "__qualname__", "") or ""
    owner: Any = sys.modules.get(getattr(fn, "__module__", None) or "")
    if path.startswith("_VariableFunctionsClass."):  # a function of torch's C core, bound as torch.<name>
        path = name
    for part in path.split("."):
        owner = getattr(owner, part, None)
    return owner if callable(owner) else fn


def _difference(runs: list[Run], device: str) -> str | None:
    """None where each call of a sample did natively what it did on the target, else what differs."""
    found = []
    for variant, fn, host, on_target in runs:
        if not isinstance(on_target, Outcome) or host is None:
            found.append(f"{variant}: {on_target}")
            continue
        try:
            assert_same(on_target, _run(fn, host), device)
        except AssertionError as exc:
            found.append(f"{variant}: {exc}")
    where = next((host.summary() for _, _, host, _ in runs if host is not None), "a sample")
    return f"{where}: " + "; ".join(found) if found else None


def _on_host(value: Any) -> Any:
    """A sample's ``value`` with its tensors copied to the CPU (:func:`host_copy`) and its CUDA devices the CPU."""
    def host(item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            return host_copy(item)
        if isinstance(item, torch.device) and item.type == "cuda":
            return torch.device("cpu")
        return "cpu" if isinstance(item, str) and item.startswith("cuda") else item

    return map_leaves(value, host)


def host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU copy of ``tensor`` over a copy of its whole storage, with its sizes, strides and storage offset
    (OpInfo's non-contiguous, expanded and partial views stay such); a copy of the values where it has
    no strides (sparse layouts)."""
    with torch.no_grad():
        if tensor.layout != torch.strided:
            return tensor.to("cpu", copy=True)
        storage = tensor.as_strided((tensor.untyped_storage().nbytes() // tensor.element_size(),), (1,), 0)
        return storage.to("cpu", copy=True).as_strided(tensor.size(), tensor.stride(), tensor.storage_offset())
