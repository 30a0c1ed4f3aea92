"""Every device-bearing entry the runtime translates: called with ``"cuda"`` through the runtime (target:
CPU), it gives what the native call with ``"cpu"`` gives, and each tensor it returns says it lives on the
emulated device (``is_cuda``, ``get_device()``) as it would on a GPU. Sample calls: ``codegen/plan/samples.py``
(the ``sample`` of ``catalog/overlays/devices.yaml``, else derived from the signature); the helpers samples
name are defined below."""

from __future__ import annotations

import io
import os
import tempfile
import warnings
from typing import Any

import pytest
import torch
from planned import planned

import torchdevice

STATUS_FIELD = "cpu"


@pytest.mark.parametrize("name", [s.name for s in planned().samples])
def test_cuda_through_the_runtime_equals_cpu_natively(name):
    sample = next(s for s in planned().samples if s.name == name)
    call, values = eval(f"lambda DEVICE: {sample.call}"), sample.values  # the sample is source text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations and prototype notices, alike on both sides
        torch.manual_seed(0)
        with torchdevice.installed("cpu"):
            on_target = call("cuda")
            residence = [(t.is_cuda, t.get_device()) for t in _tensors(on_target)]
        torch.manual_seed(0)
        native = call("cpu")
    assert_same(on_target, native, values)
    if sample.places:
        on_host = [t.device.type == "cpu" for t in _tensors(native)]
        assert residence == [(True, 0) if host else (False, -1) for host in on_host]


def _tensors(value: Any) -> list[torch.Tensor]:
    """The dense tensors a call returned (a module's parameters and buffers), in order."""
    if isinstance(value, torch.nn.Module):
        value = list(value.state_dict().values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    is_dense = isinstance(value, torch.Tensor) and value.layout == torch.strided and not value.is_nested
    return [value] if is_dense and not isinstance(value, torch.nn.parameter.UninitializedTensorMixin) else []


def assert_same(a: Any, b: Any, values: bool) -> None:
    """``a`` and ``b`` agree: tensors in device, dtype, layout, shape and (with ``values``) contents;
    modules in type and state; other objects in type, device and value."""
    if isinstance(a, torch.nn.parameter.UninitializedTensorMixin):
        assert type(a) is type(b) and a.device == b.device
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert (a.device, a.dtype, a.layout, a.shape if not a.is_nested else None) == (
            b.device, b.dtype, b.layout, b.shape if not b.is_nested else None)
        if values:
            assert all(torch.equal(x, y) for x, y in zip(_parts(a), _parts(b), strict=True))
    elif isinstance(a, torch.nn.Module):
        assert type(a) is type(b)
        assert_same(list(a.state_dict().values()), list(b.state_dict().values()), values)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y, values)
    elif isinstance(a, torch.Generator):
        assert a.device == b.device and torch.equal(a.get_state(), b.get_state())
    elif isinstance(a, (bool, int, float, str, torch.dtype, type(None))):
        assert a == b
    else:
        assert isinstance(a, type(b)) and getattr(a, "device", None) == getattr(b, "device", None)


def _parts(t: torch.Tensor) -> list[torch.Tensor]:
    if t.is_nested:
        return list(t.unbind())
    if t.layout != torch.strided:
        return [t.to_dense()]
    return [t.int_repr() if t.is_quantized else t]


def checkpoint() -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save({"weight": torch.arange(4.0)}, buffer)
    buffer.seek(0)
    return buffer


def script_archive() -> io.BytesIO:
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(3, 3)), buffer)
    buffer.seek(0)
    return buffer


def data_file() -> str:
    handle, path = tempfile.mkstemp()
    with os.fdopen(handle, "wb") as f:
        f.write(torch.arange(3.0).numpy().tobytes())
    return path


def quantized() -> torch.Tensor:
    return torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8)


def made_by_default(device: str) -> torch.Tensor:
    torch.set_default_device(device)
    try:
        return torch.ones(2, 3)
    finally:
        torch.set_default_device(None)


def autocast_enabled_after(device_type: str) -> bool:
    torch.set_autocast_enabled(device_type, True)
    try:
        return torch.is_autocast_enabled(device_type)
    finally:
        torch.set_autocast_enabled(device_type, False)


def autocast_dtype_after(device_type: str) -> torch.dtype:
    before = torch.get_autocast_dtype(device_type)
    torch.set_autocast_dtype(device_type, torch.float16)
    try:
        return torch.get_autocast_dtype(device_type)
    finally:
        torch.set_autocast_dtype(device_type, before)


def autocast_output(context: Any) -> torch.Tensor:
    layer = torch.nn.Linear(3, 3)
    with context:
        return layer(torch.ones(2, 3))


def scaled(scaler: torch.amp.GradScaler) -> list[Any]:
    return [scaler.is_enabled(), scaler.scale(torch.ones(2))]


def custom_function_output(device_type: str) -> list[torch.Tensor]:
    class Square(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type=device_type, cast_inputs=torch.float64)
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @torch.amp.custom_bwd(device_type=device_type)
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = torch.ones(2, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = Square.apply(x)
    y.sum().backward()
    return [y, x.grad]


def saved_on_cpu_gradient(device_type: str) -> torch.Tensor:
    x = torch.ones(2, 3, requires_grad=True)
    with torch.autograd.graph.save_on_cpu(pin_memory=device_type == "cuda", device_type=device_type):
        (x * x).sum().backward()
    return x.grad


def forked(device_type: str | None) -> torch.Tensor:
    """``fork_rng`` of ``device_type``, or (None) of its default (torch 2.10's does not take None)."""
    with torch.random.fork_rng(**({} if device_type is None else {"device_type": device_type})):
        torch.randn(4)
    return torch.randn(2)


def loaded(device: str) -> list[torch.Tensor]:
    return list(torch.utils.data.DataLoader([1.0, 2.0], batch_size=2, pin_memory=True, pin_memory_device=device))


def batch_norm_statistics(device: str) -> torch.Tensor:
    model = torch.nn.BatchNorm1d(3)
    torch.optim.swa_utils.update_bn([torch.ones(4, 3)], model, device=device)
    return model.running_mean
