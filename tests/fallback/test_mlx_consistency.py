"""Every aten overload with an MLX route against torch, on OpInfo samples and error inputs.

Like PyTorch's ``TestConsistency`` for MPS (``test/test_mps.py``): each case runs calls natively
and through the MLX route (:mod:`mlx_consistency`) and requires the same outcome
(:func:`outcomes.assert_same`): the same exception, type and message, or the same result type,
dtype, shape and values within the dtype's tolerance (``outcomes.TOLERANCES``). Cases:

- ``route``: the engine registers the overload (one that decomposes above the backend keys never
  reaches its shim);
- one per dtype the mapping claims (float32, float16, bfloat16, int64, bool, complex64): OpInfo
  samples (and the calls of :data:`EXTRA_SAMPLES`) until ``MAX_RAN`` of them ran on MLX or
  ``MAX_TRIED`` were tried; at least one must run on MLX, or the claim is false;
- ``errors``: the OpInfo error inputs (and :data:`EXTRA_ERRORS`) that reach the overload.

What fails today is data, ``mlx_expected_failures.yaml``: such a case is an expected failure
(reported as ``xfail`` with its reason), and one that passes fails (``XPASS(strict)``), so the
list cannot go stale.
"""

from __future__ import annotations

from itertools import chain, islice

import mlx_consistency as mc
import pytest
import torch
import torch.nn.functional as F
from outcomes import Call, assert_same
from torchdevice_generated.mlx_shims import SHIMS

from torchdevice.fallback.mlx_bridge import MlxUnsupported

STATUS_FIELD = "mlx"


def status_entry(params: dict[str, str]) -> str:
    """``make status`` records each case for its record's entry (:func:`mlx_consistency.status_entry`)."""
    return mc.status_entry(params["overload"])


MAX_RAN = 6
"""Calls run on MLX per (overload, dtype): enough to meet broadcasting, dims, keepdim, scalars."""
MAX_TRIED = 30
"""Calls tried per (overload, dtype), including those MLX refuses."""
MAX_ERRORS = 20

HALF = (torch.float16, torch.bfloat16)


def _ones(n: int, dtype: torch.dtype, value: float = 1.0) -> torch.Tensor:
    return torch.full((n,), value, dtype=dtype)


def _spread(dtype: torch.dtype, seed: int, n: int = 4000) -> torch.Tensor:
    return (torch.randn(n, generator=torch.Generator().manual_seed(seed)) * 100).to(dtype)


def _near_100(dtype: torch.dtype) -> torch.Tensor:
    return 100 + _spread(dtype, 2, 70000) / 100


EXTRA_SAMPLES: dict[tuple[str, torch.dtype], list[Call]] = {
    # long half-precision reductions: torch accumulates in float32
    **{("aten::mean.dim", d): [Call(torch.mean, (_ones(70000, d),), {})] for d in HALF},
    **{("aten::sum.dim_IntList", d): [Call(torch.sum, (_ones(20000, d, 0.1),), {})] for d in HALF},
    **{("aten::cumsum", d): [Call(torch.cumsum, (_ones(20000, d, 0.1), 0), {})] for d in HALF},
    **{(f"aten::{name}.correction", d): [Call(getattr(torch, name), (_near_100(d),), {})]
       for name in ("var", "std", "var_mean", "std_mean") for d in HALF},
    **{("aten::logsumexp", d): [Call(torch.logsumexp, (_ones(20000, d), 0), {})] for d in HALF},
    # floor division of halves, many quotients near integers
    **{("aten::floor_divide", d): [Call(torch.floor_divide, (_spread(d, 0), _spread(d, 1) / 7), {})] for d in HALF},
    **{("aten::floor_divide_.Tensor", d): [Call(torch.Tensor.floor_divide_, (_spread(d, 0), _spread(d, 1) / 7), {})]
       for d in HALF},
    **{(f"aten::{name}.Scalar", d): [Call(getattr(torch.ops.aten, name).Scalar, (_spread(d, 0), 0.7), {})]
       for name in ("floor_divide", "floor_divide_") for d in HALF},
    **{("aten::remainder.Tensor", d): [Call(torch.remainder, (_spread(d, 0), _spread(d, 1) / 7), {})] for d in HALF},
    # a reduction asked for a bool result
    ("aten::prod.dim_int", torch.bool): [Call(torch.prod, (torch.tensor([[True, False], [True, True]]), 1),
                                              {"dtype": torch.bool})],
    ("aten::sum.dim_IntList", torch.bool): [Call(torch.sum, (torch.tensor([[True, False], [True, True]]), 1),
                                                 {"dtype": torch.bool})],
}
"""Calls beyond OpInfo's samples, tried first: the audit's findings (issue 12)."""

_X = torch.arange(12.0).reshape(3, 4)
EXTRA_ERRORS: dict[str, list[Call]] = {
    "aten::index_select": [Call(torch.index_select, (_X, 0, torch.tensor([0, 7])), {}),
                           Call(torch.index_select, (_X, 1, torch.tensor([0, 7])), {}),
                           Call(torch.index_select, (_X, 0, torch.tensor([-1])), {}),
                           Call(F.embedding, (torch.tensor([0, 9]), torch.ones(4, 3)), {})],
    "aten::take": [Call(torch.take, (_X, torch.tensor([100])), {}), Call(torch.take, (_X, torch.tensor([-13])), {})],
    "aten::dot": [Call(torch.dot, (_X, _X), {})],
    "aten::trace": [Call(torch.trace, (torch.ones(3, 4, 5),), {})],
    "aten::flip": [Call(torch.flip, (_X, [0, 0]), {})],
    "aten::linalg_cross": [Call(torch.linalg.cross, (torch.ones(3, 3), torch.ones(2, 3)), {}),
                           Call(torch.linalg.cross, (torch.ones(3, 2), torch.ones(3, 2)), {})],
    "aten::masked_fill.Tensor": [Call(torch.masked_fill, (_X, _X > 5, torch.tensor([1.0, 2.0])), {}),
                                 Call(torch.masked_fill, (_X, _X > 5, torch.tensor(1j)), {})],
    "aten::softshrink": [Call(F.softshrink, (_X, -0.5), {})],
    "aten::mean.dim": [Call(torch.mean, (_X, []), {"dtype": torch.int64})],
    "aten::floor_divide": [Call(torch.floor_divide, (torch.tensor([4, 5]), torch.tensor([2, 0])), {})],
    "aten::remainder.Tensor": [Call(torch.remainder, (torch.tensor([4, 5]), torch.tensor([2, 0])), {})],
}
"""User errors beyond OpInfo's error inputs: the audit's findings (issue 12)."""


def _cases() -> list:
    """(overload, check) for every routed overload, each marked with its expected failure if any."""
    expected = mc.expected_failures()
    cases = []
    for overload in sorted(mc.ROUTED):
        checks = ["route"]
        if overload in mc.registered():
            checks += [str(d).removeprefix("torch.") for d in mc.DTYPES if d in mc.claimed(overload)]
            if overload in EXTRA_ERRORS or next(mc.error_calls(overload), None) is not None:
                checks.append("errors")
        for check in checks:
            marks = []
            if failure := expected.get((overload, check)):
                marks.append(pytest.mark.xfail(strict=True, raises=AssertionError,
                                               reason=f"{failure.group}: {failure.reason}"))
            cases.append(pytest.param(overload, check, marks=marks, id=f"{overload}-{check}"))
    return cases


CASES = _cases()


def test_expected_failures_name_cases_of_the_suite():
    known = {tuple(c.values) for c in CASES}
    assert not set(mc.expected_failures()) - known, "expected failures of cases the suite does not have"


@pytest.mark.parametrize(("overload", "check"), CASES)
def test_mlx_route_matches_torch(overload, check, fallbacks):
    if check == "route":
        assert overload in mc.registered(), "the engine registers no kernel for it: never on MLX"
    elif check == "errors":
        _check_errors(overload)
    else:
        _check_samples(overload, getattr(torch, check), fallbacks)


def test_the_suite_fails_a_wrong_mapping_and_a_shim_that_never_runs(fallbacks):
    _check_samples("aten::cos", torch.float32, fallbacks)
    with pytest.raises(AssertionError, match="not close"):
        _check_samples("aten::cos", torch.float32, fallbacks, shim=SHIMS["sin"])

    def refuses(*args, **kwargs):
        raise MlxUnsupported("never")

    with pytest.raises(AssertionError, match="MLX ran none of"):
        _check_samples("aten::cos", torch.float32, fallbacks, shim=refuses)


def _check_samples(overload: str, dtype: torch.dtype, fallbacks, shim=None) -> None:
    torch.manual_seed(0)
    ran = tried = rejected = 0
    for call in chain(_natively(EXTRA_SAMPLES.get((overload, dtype), [])), mc.calls(overload, dtype)):
        if ran == MAX_RAN or tried == MAX_TRIED:
            break
        tried += 1
        rejected += isinstance(call.native.result, Exception)  # torch refuses it: MLX must not run it either
        before = fallbacks[overload, "mlx"]
        with mc.mlx_route(overload, shim):
            outcome = call.run()
        assert_same(outcome, call.native)
        ran += fallbacks[overload, "mlx"] - before
    assert tried, f"no {dtype} sample reaches {overload}"
    assert ran or rejected == tried, f"claimed for {dtype}, but MLX ran none of {tried} calls"


def _check_errors(overload: str) -> None:
    torch.manual_seed(0)
    calls = list(islice(chain(_natively(EXTRA_ERRORS.get(overload, [])), mc.error_calls(overload)), MAX_ERRORS))
    for call in calls:
        with mc.mlx_route(overload):
            outcome = call.run()
        assert_same(outcome, call.native)


def _natively(calls: list[Call]) -> list[Call]:
    for call in calls:
        call.native = call.run()
    return calls
