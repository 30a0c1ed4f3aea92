"""``torch.autocast("cuda")`` under the runtime follows CUDA's autocast policy, op by op.

What CUDA does is read here from ATen's own header (``torch/include/ATen/autocast_mode.h``, shipped in
the wheel) with a few regular expressions, independently of the scanner and the generated table;
the calls are PyTorch's OpInfo samples of every op in those lists that has some, and a few written
here for the ops without. Each result must have CUDA's dtype and the values of the same computation
written with explicit casts, run without autocast.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_map

import torchdevice

HEADER = Path(torch.__file__).parent / "include" / "ATen" / "autocast_mode.h"
LISTS = {"LOWER_PRECISION_FP": "lower", "FP32": "fp32", "FP32_SET_OPT_DTYPE": "fp32_dtype", "PROMOTE": "promote"}
LOWER = [torch.float16, torch.bfloat16]
SAMPLES_PER_OP = 2
TOLERANCES = {torch.float32: (1e-4, 1e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2)}
"""(rtol, atol) by result dtype: both sides run the same kernels on the same cast inputs."""


@cache
def cuda_policy() -> dict[str, str]:
    """aten op -> ``lower`` (runs in the autocast dtype), ``fp32`` (inputs cast to float32), ``fp32_dtype``
    (called with ``dtype=torch.float32``) or ``promote`` (runs in the widest input's dtype)."""
    text = HEADER.read_text(encoding="utf-8")
    policy = {}
    for macro, body in re.findall(r"^#define AT_FORALL_(\w+)\(_\)((?:.*\\\n)*.*)$", text, re.MULTILINE):
        if macro in LISTS:
            policy.update((op, LISTS[macro]) for op in re.findall(r"_\((\w+)", body))
        elif macro == "DIFFERENT_REDISPATCH_SIGNATURE":  # norm: appends dtype=float32
            policy.update((op, "fp32_dtype") for op in re.findall(r'"(\w+)\.\w+"', body))
    return policy


def _opinfos() -> list[Any]:
    return [o for o in op_db if o.aten_name in cuda_policy() and not o.name.startswith(("masked.", "sparse."))]


@pytest.fixture(scope="module")
def installed() -> Iterator[None]:
    torchdevice.install("cpu")
    yield
    torchdevice.uninstall()


def _floats(value: Any, dtype: torch.dtype) -> Any:
    return tree_map(lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t, value)


Call = tuple[tuple[Any, ...], dict[str, Any]]


def _calls(policy: str, args: tuple[Any, ...], kwargs: dict[str, Any],
           lower: torch.dtype) -> tuple[Call, Call, torch.dtype]:
    """The call made under autocast for ``policy``, its twin with explicit casts, and CUDA's result dtype."""
    if policy == "lower":  # float32 inputs are cast down
        return (args, kwargs), _floats((args, kwargs), lower), lower
    if policy in ("fp32", "fp32_dtype"):  # lower-precision inputs: cast up, or accumulated in float32
        args, kwargs = _floats((args, kwargs), lower)
        if policy == "fp32":
            return (args, kwargs), _floats((args, kwargs), torch.float32), torch.float32
        return (args, kwargs), (args, {**kwargs, "dtype": torch.float32}), torch.float32
    # promote: the first floating input in the lower precision, the rest float32 -> all float32
    floats = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if len(floats) > 1:
        args, kwargs = tree_map(lambda t: t.to(lower) if t is floats[0] else t, (args, kwargs))
    return (args, kwargs), _floats((args, kwargs), torch.float32), torch.float32


def _check(fn: Callable[..., Any], policy: str, args: tuple[Any, ...], kwargs: dict[str, Any],
           lower: torch.dtype) -> None:
    (args, kwargs), (twin_args, twin_kwargs), expected = _calls(policy, args, kwargs, lower)
    try:
        reference = fn(*twin_args, **twin_kwargs)
    except Exception as exc:  # noqa: BLE001 - the autocast call must refuse it too
        with pytest.raises(type(exc)), torch.autocast("cuda", dtype=lower):
            fn(*args, **kwargs)
        return
    with torch.autocast("cuda", dtype=lower):
        result = fn(*args, **kwargs)
    got = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]
    want = [t for t in tree_flatten(reference)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]
    assert got, "no floating result"
    assert [t.dtype for t in got] == [expected] * len(got)
    for g, w in zip(got, want, strict=True):
        rtol, atol = TOLERANCES[expected]
        torch.testing.assert_close(g, w.to(expected), rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("lower", LOWER, ids=str)
@pytest.mark.parametrize("opinfo", _opinfos(), ids=lambda o: "-".join(filter(None, (o.name, o.variant_test_name))))
def test_opinfo_samples_get_cudas_dtype(installed: None, opinfo: Any, lower: torch.dtype) -> None:
    policy = cuda_policy()[opinfo.aten_name]
    checked = 0
    for sample in opinfo.sample_inputs_func(opinfo, "cpu", torch.float32, False):
        args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if "dtype" in kwargs:  # a dtype the call names is respected
                args = _floats(args, lower)
                with torch.autocast("cuda", dtype=lower):
                    result = opinfo.op(*args, **kwargs)
                assert result.dtype == kwargs["dtype"]
                torch.testing.assert_close(result, opinfo.op(*args, **kwargs), equal_nan=True)
            else:
                _check(opinfo.op, policy, args, kwargs, lower)
        checked += 1
        if checked == SAMPLES_PER_OP:
            break
    assert checked, f"no sample of {opinfo.name} was checked"


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device="cuda")


HAND_WRITTEN: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
    # ops of CUDA's lists that no OpInfo reaches: aten op -> (call, its arguments)
    "upsample_nearest2d": (lambda x: F.interpolate(x, scale_factor=2.0), lambda: (_x(1, 2, 4, 4),)),
    "upsample_bilinear2d": (lambda x: F.interpolate(x, scale_factor=2.0, mode="bilinear"), lambda: (_x(1, 2, 4, 4),)),
    "upsample_bicubic2d": (lambda x: F.interpolate(x, scale_factor=2.0, mode="bicubic"), lambda: (_x(1, 2, 4, 4),)),
    "upsample_trilinear3d": (lambda x: F.interpolate(x, scale_factor=2.0, mode="trilinear"),
                             lambda: (_x(1, 1, 2, 2, 2),)),
    "norm": (lambda x, **dtype: torch.ops.aten.norm(x, 2, **dtype), lambda: (_x(3, 4),)),  # norm.Scalar
    "nll_loss2d": (F.nll_loss, lambda: (_x(2, 3, 4, 4).log_softmax(1), torch.randint(0, 3, (2, 4, 4), device="cuda"))),
    "lstm_cell": (torch._VF.lstm_cell, lambda: (_x(2, 4), (_x(2, 3), _x(2, 3)), _x(12, 4), _x(12, 3), _x(12), _x(12))),
    "gru_cell": (torch._VF.gru_cell, lambda: (_x(2, 4), _x(2, 3), _x(9, 4), _x(9, 3), _x(9), _x(9))),
    "rnn_tanh_cell": (torch._VF.rnn_tanh_cell, lambda: (_x(2, 4), _x(2, 3), _x(3, 4), _x(3, 3), _x(3), _x(3))),
    "grid_sampler": (lambda x, g: F.grid_sample(x, g, align_corners=False), lambda: (_x(1, 2, 4, 4), _x(1, 3, 3, 2))),
    "chain_matmul": (torch.chain_matmul, lambda: (_x(2, 3), _x(3, 4), _x(4, 2))),
}


@pytest.mark.parametrize("lower", LOWER, ids=str)
@pytest.mark.parametrize("op", sorted(HAND_WRITTEN))
def test_ops_without_opinfo_get_cudas_dtype(installed: None, op: str, lower: torch.dtype) -> None:
    fn, args = HAND_WRITTEN[op]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # chain_matmul is deprecated
        _check(fn, cuda_policy()[op], args(), {}, lower)


def test_the_lists_differ_from_the_cpus_where_the_issue_says(installed: None) -> None:
    """The well-known cases: CUDA runs these in float32 for range and precision, the CPU's policy does not."""
    x = _x(4, 8)
    with torch.autocast("cuda", dtype=torch.float16):
        h = x @ x.T  # float16 on both
        results = [h, h.softmax(-1), h.log_softmax(-1), F.layer_norm(h, (4,)), h.sum(), h.exp(), h.log(),
                   h.pow(2), h.cumsum(0), torch.linalg.vector_norm(h), h.rsqrt()]
    assert [r.dtype for r in results] == [torch.float16] + [torch.float32] * (len(results) - 1)


def untouched_calls(autocast: str) -> list[torch.Tensor]:
    """Ops outside CUDA's lists that the CPU's policy runs in float32, in a bfloat16 region."""
    torch.manual_seed(2)
    logits = (torch.randn(6, 5, device="cuda") * 4).to(torch.bfloat16)
    target = torch.tensor([0, 1, 2, 3, 4, 0], device="cuda")
    signal = torch.randn(16, device="cuda").to(torch.bfloat16)
    with torch.autocast(autocast, dtype=torch.bfloat16):
        return [F.cross_entropy(logits, target), torch.fft.rfft(signal.float()).abs(), torch.stack([logits, logits])]


@pytest.mark.parametrize("target", ["cpu", "mps-sim", "cuda-sim"])
def test_ops_outside_cudas_lists_are_cast_by_nothing_in_a_cuda_region(target: str) -> None:
    """``cross_entropy_loss`` has no CUDA autocast kernel: its ``log_softmax`` gets the logits' dtype (it names it),
    then ``nll_loss`` (CUDA's float32 list) casts; the CPU's own policy would run the whole loss in float32."""
    with torchdevice.installed(target):
        loss, spectrum, stacked = (t.cpu() for t in untouched_calls("cuda"))
    torch.manual_seed(2)
    logits = (torch.randn(6, 5) * 4).to(torch.bfloat16)
    expected = F.nll_loss(F.log_softmax(logits, 1, dtype=torch.bfloat16).float(), torch.tensor([0, 1, 2, 3, 4, 0]))
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-6)
    assert (spectrum.dtype, stacked.dtype) == (torch.float32, torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu_policy = F.cross_entropy(logits, torch.tensor([0, 1, 2, 3, 4, 0]))
    assert abs(cpu_policy.item() - expected.item()) > 1e-3  # what the CPU's policy would have given


def test_named_dtype_is_respected(installed: None) -> None:
    with torch.autocast("cuda", dtype=torch.float16):
        assert _x(3, 4).softmax(-1, dtype=torch.float64).dtype == torch.float64
        assert _x(3, 4).half().sum(dtype=torch.float16).dtype == torch.float16
        assert torch.ones(3, 4, dtype=torch.int64, device="cuda").sum().dtype == torch.int64  # not eligible
        assert _x(3, 4).double().exp().dtype == torch.float64  # float64 is never cast


def test_binary_cross_entropy_is_refused_as_cuda_refuses_it(installed: None) -> None:
    p, t = torch.rand(4, device="cuda"), torch.rand(4, device="cuda")
    with torch.autocast("cuda"), pytest.raises(RuntimeError, match="are unsafe to autocast"):
        F.binary_cross_entropy(p, t)
    with torch.autocast("cuda"):
        assert F.binary_cross_entropy_with_logits(p, t).dtype == torch.float32  # what the message advises
    with torch.autocast("cpu"):  # the CPU's policy allows it
        torch.testing.assert_close(F.binary_cross_entropy(p, t), F.binary_cross_entropy(p, t))


def _cpu_calls() -> list[Any]:
    torch.manual_seed(1)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    p, t = torch.rand(4), torch.rand(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w
        return [h, h.softmax(-1), h.sum(), h.exp(), F.layer_norm(h, (8,)), torch.addcmul(h, x, h),
                F.binary_cross_entropy(p, t), torch.cumsum(h, 0), F.conv1d(x.T[None], w[:, :, None]), h.norm(),
                F.cross_entropy(h, torch.tensor([0, 1, 2, 3]))]


def test_cpu_policy_is_unchanged_under_autocast_cpu() -> None:
    native = _cpu_calls()
    with torchdevice.installed("cpu"):
        redirected = _cpu_calls()
    assert [r.dtype for r in redirected] == [r.dtype for r in native]
    for r, n in zip(redirected, native, strict=True):
        torch.testing.assert_close(r, n)


def test_cuda_region_inside_and_outside(installed: None) -> None:
    assert torch.get_autocast_dtype("cuda") == torch.float16 and not torch.is_autocast_enabled("cuda")
    x = _x(2, 3)
    with torch.autocast("cuda"):  # no dtype: CUDA's default
        assert torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") == torch.float16
        assert (x @ x.T).dtype == torch.float16
        with torch.autocast("cuda", enabled=False):
            assert not torch.is_autocast_enabled("cuda")
            assert (x @ x.T).dtype == torch.float32 and x.exp().dtype == torch.float32
        assert torch.is_autocast_enabled("cuda")
    with torch.cuda.amp.autocast():
        assert (x @ x.T).dtype == torch.float16
    assert not torch.is_autocast_enabled("cuda") and not torch.is_autocast_enabled("cpu")
    torch.set_autocast_dtype("cuda", torch.bfloat16)
    try:
        with torch.autocast("cuda"):
            assert (x @ x.T).dtype == torch.bfloat16 and (x @ x.T).softmax(-1).dtype == torch.float32
    finally:
        torch.set_autocast_dtype("cuda", torch.float16)
    assert torch.get_autocast_dtype("cuda") == torch.float16


def _train(device: str, steps: int, explicit: bool) -> tuple[list[float], list[float]]:
    """A small MLP trained with float16 AMP (autocast and GradScaler on ``device``), or with the casts CUDA's
    policy makes written out. Its loss has a sum of squares that overflows float16 (about 3e5): CUDA
    computes ``pow`` and ``sum`` in float32."""
    torch.manual_seed(0)
    lin1, norm, lin2 = torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)
    model = torch.nn.ModuleList([lin1, norm, lin2]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**24, growth_interval=2)  # the first steps overflow
    data = torch.Generator(device).manual_seed(1)  # the same draws where "cuda" has its own generator
    x = 10 * torch.randn(256, 16, device=device, generator=data)
    y = torch.randint(0, 4, (256,), device=device, generator=data)
    losses, scales = [], []
    for _ in range(steps):
        optimizer.zero_grad()
        if explicit:
            h = F.linear(x.half(), lin1.weight.half(), lin1.bias.half())
            squares = h.float().pow(2).sum()
            h = F.layer_norm(h.float(), (32,), norm.weight, norm.bias).relu()
            logits = F.linear(h.half(), lin2.weight.half(), lin2.bias.half())
            loss = F.cross_entropy(logits.float(), y) + 1e-6 * squares
        else:
            with torch.autocast(device, dtype=torch.float16):
                h = lin1(x)
                squares = h.pow(2).sum()
                loss = F.cross_entropy(lin2(norm(h).relu()), y) + 1e-6 * squares
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return losses, scales


def test_amp_training_loop_matches_explicit_casts(installed: None) -> None:
    losses, scales = _train("cuda", 12, explicit=False)
    torchdevice.uninstall()
    try:
        want_losses, want_scales = _train("cpu", 12, explicit=True)
    finally:
        torchdevice.install("cpu")
    assert scales == want_scales and min(scales) < 2.0**24  # the same overflowing steps were skipped
    torch.testing.assert_close(losses, want_losses, rtol=2e-3, atol=2e-3)
    assert losses[-1] < losses[0]
