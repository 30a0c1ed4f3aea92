"""Everyday lines of CUDA programs give the CPU target's values on the simulated Mac, and what MPS refuses (as CUDA
does) it refuses: Python numbers as operands, ``*_like``/``new_*`` given the device, host index tensors, the
parameter objects a model keeps through ``.cuda()``, tensors that are real tensors to the code that checks."""

from __future__ import annotations

import copy
import gc
import io
from collections.abc import Callable
from typing import Any

import pytest
import torch
from mac_runs import host, on_both

import torchdevice


def x() -> torch.Tensor:
    return torch.arange(12.0, device="cuda").reshape(3, 4) - 5


def i() -> torch.Tensor:
    return torch.arange(12, device="cuda").reshape(3, 4) - 5


SCALAR_FORMS: dict[str, Callable[[], Any]] = {
    "x % 2": lambda: x() % 2, "2 % x": lambda: 2 % x(), "fmod": lambda: torch.fmod(x(), 5),
    "remainder": lambda: x().remainder(4), "i & 1": lambda: i() & 1, "i | 2": lambda: i() | 2, "i ^ 3": lambda: i() ^ 3,
    "i << 1": lambda: i() << 1, "i >> 1": lambda: i() >> 1, "x // 3": lambda: x() // 3, "i // 3": lambda: i() // 3,
    "x ** 2": lambda: x() ** 2, "2 ** x": lambda: 2 ** x(), "x / 3": lambda: x() / 3, "i / 2": lambda: i() / 2,
    "x * 2.5": lambda: x() * 2.5, "i * 2.5": lambda: i() * 2.5, "x - 1": lambda: x() - 1, "1 - x": lambda: 1 - x(),
    "x > 0": lambda: x() > 0, "x == 3": lambda: x() == 3, "clamp": lambda: x().clamp(-2, 2),
    "where": lambda: torch.where(x() > 0, x(), 0.0), "maximum": lambda: torch.maximum(x(), torch.tensor(1.0)),
    "pow_": lambda: x().pow_(2), "add_(alpha)": lambda: x().add_(x(), alpha=2), "lerp": lambda: x().lerp(x() * 2, 0.5),
    "addcmul": lambda: x().addcmul(x(), x(), value=0.5), "masked_fill": lambda: x().masked_fill(x() > 0, 1.0),
    "fill_": lambda: x().fill_(7), "i.sum()": lambda: i().sum(), "x.mean(0)": lambda: x().mean(0),
    "take_along_dim": lambda: torch.take_along_dim(x(), torch.tensor([[0], [1], [2]], device="cuda"), dim=1),
}
MADE_LIKE: dict[str, Callable[[], Any]] = {
    "zeros_like(device=x.device)": lambda: torch.zeros_like(x(), device=x().device),
    "ones_like(device='cuda')": lambda: torch.ones_like(x(), device="cuda"),
    "new_zeros(device=x.device)": lambda: x().new_zeros(3, device=x().device),
    "full_like(device='cuda')": lambda: torch.full_like(x(), 7, device="cuda"),
    "empty_like(...).fill_": lambda: torch.empty_like(x()).fill_(2),
    "linspace of tensor bounds": lambda: torch.linspace(torch.tensor(0.0), torch.tensor(1.0), 5, device="cuda"),
    "kaiser window": lambda: torch.signal.windows.kaiser(6, device="cuda"),
    "arange.type_as": lambda: torch.arange(3).type_as(x()),
    "tensor_split at host indices": lambda: torch.tensor_split(x(), torch.tensor([1, 3]), dim=1),
    "bincount with integer weights": lambda: torch.tensor([0, 1, 1], device="cuda").bincount(
        weights=torch.tensor([1, 2, 3], device="cuda")),
    "group_norm of channels last": lambda: torch.nn.functional.group_norm(
        torch.arange(72.0, device="cuda").reshape(2, 4, 3, 3).to(memory_format=torch.channels_last), 2),
}


@pytest.mark.parametrize("form", sorted(SCALAR_FORMS))
def test_python_numbers_as_operands(form):
    native, mac = on_both(SCALAR_FORMS[form])
    torch.testing.assert_close(mac, native, equal_nan=True)


@pytest.mark.parametrize("form", sorted(MADE_LIKE))
def test_tensors_made_like_device_tensors_or_given_the_device(form):
    def made() -> Any:
        value = MADE_LIKE[form]()
        device = x().device
        assert all(t.device == device for t in ([value] if isinstance(value, torch.Tensor) else value))
        return value

    native, mac = on_both(made)
    torch.testing.assert_close(mac, native, equal_nan=True)


def test_device_index_tensors_are_refused_as_cuda_and_mps_refuse_them(mac):
    with pytest.raises(RuntimeError, match="expected tensor_indices_or_sections to be on cpu"):
        torch.tensor_split(x(), torch.tensor([1, 3], device="cuda"), dim=1)


def test_an_optimizer_built_before_cuda_trains_the_model():
    def train() -> Any:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        weight = model.weight
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        model.cuda()
        assert model.weight is weight and weight.is_cuda  # the same Parameter object, as on a GPU
        for _ in range(3):
            optimizer.zero_grad()
            model(torch.ones(2, 4, device="cuda")).pow(2).sum().backward()
            optimizer.step()
        return model.weight

    native, mac = on_both(train)
    torch.testing.assert_close(mac, native, equal_nan=True)
    assert not torch.equal(mac, torch.nn.Linear(4, 2).weight)


def test_device_tensors_are_real_tensors_to_code_that_checks(mac):
    t = torch.ones(3, device="cuda")
    parameter = torch.nn.Linear(2, 2).cuda().weight
    assert type(t) is torch.Tensor and type(parameter) is torch.nn.Parameter
    rebuilt = parameter.__class__(parameter.data * 2, requires_grad=parameter.requires_grad)  # accelerate's way
    assert type(rebuilt) is torch.nn.Parameter and rebuilt.is_mps
    subclass = torch.Tensor._make_subclass(torch.nn.Parameter, t)  # bitsandbytes' Params4bit
    assert type(subclass) is torch.nn.Parameter and subclass.device == torch.device("mps", 0)
    assert torch.Event(device=t.device).device.type in ("cuda", "mps")  # transformers' generate
    assert torch.ones(2, device="mps").is_mps and torch.ones(2).to("mps").is_mps  # libraries that name "mps"


def test_a_reloaded_model_and_a_deep_copy_with_host_buffers_move_to_the_device():
    """ultralytics' ways: ``torch.save`` of the model object, reloaded and moved; an EMA made with
    ``copy.deepcopy`` of a model holding a host tensor attribute; anchors made with ``type_as``."""
    def work() -> Any:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).cuda()
        model.strides = torch.tensor([8.0, 16.0])  # a host tensor attribute
        ema = copy.deepcopy(model).eval()
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        reloaded = torch.load(buffer, weights_only=False).to("cuda")
        anchors = torch.arange(3).type_as(next(model.parameters())) * ema.strides[0]
        image = torch.ones(1, 3, 8, 8, device="cuda")
        return [reloaded(image), ema(image), anchors]

    native, mac = on_both(work)
    torch.testing.assert_close(mac, native, equal_nan=True)


@pytest.mark.processes  # inductor compiles the CPU target's graphs in worker processes
def test_compiled_programs_give_the_eager_numbers():
    def work() -> Any:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2)).cuda()
        compiled = torch.compile(model)
        data = torch.randn(4, 8, device="cuda")
        loss = compiled(data).pow(2).sum()
        loss.backward()
        return [loss, model[0].weight.grad]

    native, mac = on_both(work)
    torch.testing.assert_close(mac, native, equal_nan=True)


def test_the_simulated_device_is_gone_with_the_installation():
    with torchdevice.installed("mps-sim"):
        kept = torch.ones(2, device="cuda")
        values = host(kept)
    assert values.tolist() == [1.0, 1.0]
    with pytest.raises(NotImplementedError):  # no kernels left for its tensors
        kept + 1


def test_metrics_accumulated_on_the_device_give_the_cpu_values():
    """torchmetrics' regression and classification metrics, updated batch by batch on the device."""
    from torchmetrics import ConcordanceCorrCoef, KendallRankCorrCoef, PearsonCorrCoef, R2Score, SpearmanCorrCoef
    from torchmetrics.classification import BinaryAUROC, MulticlassAccuracy, MulticlassConfusionMatrix

    def work() -> Any:
        torch.manual_seed(0)
        predicted = torch.randn(50, device="cuda")
        target = predicted * 0.5 + torch.randn(50, device="cuda") * 0.1
        values = {}
        for metric in (PearsonCorrCoef(), SpearmanCorrCoef(), R2Score(), ConcordanceCorrCoef(),
                       KendallRankCorrCoef()):
            metric = metric.to("cuda")
            metric.update(predicted[:25], target[:25])
            metric.update(predicted[25:], target[25:])
            values[type(metric).__name__] = metric.compute()
        logits, labels = torch.randn(50, 3, device="cuda"), torch.randint(0, 3, (50,), device="cuda")
        values["accuracy"] = MulticlassAccuracy(3).to("cuda")(logits, labels)
        values["confusion"] = MulticlassConfusionMatrix(3).to("cuda")(logits, labels)
        values["auroc"] = BinaryAUROC().to("cuda")(predicted.sigmoid(), (target > 0).long())
        return values

    native, mac = on_both(work)
    torch.testing.assert_close(mac, native)


def _frozen_backbone_attention() -> Any:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.2, batch_first=True).cuda().train()
    with torch.no_grad():  # a frozen backbone in train mode: attention dropout without grad
        torch.manual_seed(1)
        return layer(torch.randn(2, 5, 16, device="cuda"))


def _lstm_with_projections() -> Any:
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 6, proj_size=3, batch_first=True).cuda()
    output, _ = lstm(torch.randn(2, 5, 4, device="cuda"))
    output.sum().backward()
    return output, lstm.weight_hh_l0.grad


def _conv_transpose_3d_under_autocast() -> Any:
    torch.manual_seed(0)
    conv = torch.nn.ConvTranspose3d(2, 2, 2).cuda()
    with torch.autocast("cuda", dtype=torch.float16):
        return conv(torch.randn(1, 2, 3, 3, 3, device="cuda"))


UNDER_MPS_LIMITS: dict[str, Callable[[], Any]] = {
    "adaptive_avg_pool2d to 3 of 7 (PSP pooling)": lambda: torch.nn.AdaptiveAvgPool2d(3)(
        torch.arange(98.0, device="cuda").reshape(1, 2, 7, 7)),
    "adaptive_max_pool2d to (2, 3) of 7": lambda: torch.nn.AdaptiveMaxPool2d((2, 3))(
        torch.arange(98.0, device="cuda").reshape(1, 2, 7, 7)),
    "attention dropout over a frozen backbone": _frozen_backbone_attention,
    "LSTM with proj_size": _lstm_with_projections,
    "ConvTranspose3d under float16 autocast": _conv_transpose_3d_under_autocast,
    "conv1d of 70,000 samples": lambda: torch.nn.functional.conv1d(
        torch.linspace(-1, 1, 70_000, device="cuda").reshape(1, 1, -1), torch.ones(1, 1, 5, device="cuda")),
    "index_reduce of int64": lambda: torch.zeros(3, dtype=torch.int64, device="cuda").index_reduce(
        0, torch.tensor([0, 2, 0], device="cuda"), torch.tensor([4, 5, 6], device="cuda"), "amax"),
    "addr of integers": lambda: torch.addr(torch.ones(2, 3, dtype=torch.int64, device="cuda"),
                                           torch.tensor([1, 2], device="cuda"), torch.tensor([3, 4, 5], device="cuda")),
    "scatter_reduce amin of int64": lambda: torch.zeros(3, dtype=torch.int64, device="cuda").scatter_reduce(
        0, torch.tensor([0, 1, 0], device="cuda"), torch.tensor([-4, 5, 6], device="cuda"), "amin"),
    "complex inverse and solve": lambda: (
        torch.linalg.inv(torch.eye(3, dtype=torch.complex64, device="cuda") * (2 + 1j)),
        torch.linalg.solve(torch.eye(2, dtype=torch.complex64, device="cuda") * 3j,
                           torch.ones(2, 1, dtype=torch.complex64, device="cuda"))),
    "float64 statistics of float32 activations": lambda: (
        torch.arange(6.0, device="cuda").sum(dtype=torch.float64),
        torch.softmax(torch.arange(6.0, device="cuda").reshape(2, 3), 1, dtype=torch.float64)),
}


@pytest.mark.parametrize("line", sorted(UNDER_MPS_LIMITS))
def test_lines_under_mps_limits_give_cudas_values_and_report_the_limit(line):
    """MPS refuses these (its limits); CUDA runs them: the runtime routes them on the simulated Mac, as on a Mac."""
    with torchdevice.installed("cpu"):
        native = host(UNDER_MPS_LIMITS[line]())
    with torchdevice.installed("mps-sim"):
        before = torchdevice.report()["fallbacks"]
        mac = host(UNDER_MPS_LIMITS[line]())
        after = torchdevice.report()["fallbacks"]
    torch.testing.assert_close(mac, native, rtol=1e-3, atol=1e-4)
    assert after != before, "no call was routed"


def test_a_trained_model_moves_back_to_the_host(mac):
    """``Module.to`` swaps a parameter between devices only when nothing else holds it: the simulated kernels leave
    no reference behind (none waiting for the cyclic collector, which is off here)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GroupNorm(2, 4), torch.nn.SiLU(),
                                torch.nn.Linear(4, 2)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gc.collect()
    gc.disable()
    try:
        for _ in range(2):
            model(torch.randn(3, 4, device="cuda")).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        model.to("cpu")
    finally:
        gc.enable()
    assert all(p.device.type == "cpu" for p in model.parameters())
