"""A program written for CUDA trains on a target that lacks several of its ops, with the native results."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from fallback_support import simulating
from torch import nn

import torchdevice
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import chosen

MISSING = {"gelu", "gelu_backward", "nll_loss_forward", "nll_loss_backward", "cumsum", "topk"}
TABLE = {"aten::gelu", "aten::gelu_backward", "aten::nll_loss_forward", "aten::nll_loss_backward",
         "aten::cumsum", "aten::topk"}


Training = tuple[list[float], list[float], list[torch.Tensor]]


def train(steps: int = 4) -> Training:
    """Written the way CUDA programs are: ``cuda`` device, ``.cuda()``, ``torch.cuda.*``."""
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)
    x = torch.randn(32, 8, device=device)
    y = torch.randint(0, 4, (32,), device=device)
    losses, accuracies = [], []
    for _ in range(steps):
        optimizer.zero_grad()
        logits = model(x)
        ranked = logits.topk(2, dim=1).values
        loss = F.cross_entropy(logits, y) + 0.01 * torch.cumsum(ranked, 1).pow(2).mean()
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        losses.append(loss.item())
        accuracies.append((logits.argmax(1) == y).double().mean().item())  # float64: the target lacks it
    return losses, accuracies, [p.detach().cpu() for p in model.parameters()]


def assert_same_training(got: Training, expected: Training) -> None:
    """The same training, up to float32 rounding: losses and parameters are float32 computed partly by
    other kernels (MLX's cumsum and gelu, the CPU route), whose results differ from torch's by a few
    ulps per op, and four Adam steps carry those differences on; 1e-4 relative is far below what a
    wrong kernel gives (the losses move by ~1e-2 per step). An accuracy may differ by one sample of 32,
    where two logits tie within that rounding."""
    (got_losses, got_accuracy, got_params), (losses, accuracy, params) = got, expected
    torch.testing.assert_close(torch.tensor(got_losses), torch.tensor(losses), rtol=1e-4, atol=1e-5)
    assert all(abs(a - b) <= 1 / 32 for a, b in zip(got_accuracy, accuracy, strict=True)), (got_accuracy, accuracy)
    torch.testing.assert_close(got_params, params, rtol=1e-4, atol=1e-5)


def test_cuda_program_runs_with_native_results(fallbacks):
    from torchdevice_generated.fallback_table import MLX_ROUTES

    with torchdevice.installed("cpu"):
        native = train()
    sim = SimulatedKernels(chosen(missing=MISSING, float64_ops={"mean"}, table_missing=TABLE, try_first={"aten::mean"}))
    with simulating(sim), torchdevice.installed("mps-sim"):
        completed = train()
    assert_same_training(completed, native)
    assert all(sim.attempts[op] == 0 for op in MISSING)  # known missing: never tried
    assert sim.attempts["mean"] > 0
    for op in MISSING:  # each ran through its verified MLX shim where it has one, else on the CPU
        route = "mlx" if f"aten::{op}" in MLX_ROUTES else "cpu"
        assert fallbacks[f"aten::{op}", route] > 0, (op, route)
    assert {op for op in MISSING if f"aten::{op}" in MLX_ROUTES} == {"cumsum", "gelu"}
    # the float64 accuracies, once per step: mean's decomposition reaches mean.dim, which the engine guards (a
    # float64 dtype= is one of MPS's limits), so that is where the call the target refuses falls back
    assert fallbacks["aten::mean.dim", "cpu"] == 4


def test_cuda_program_with_prefer_mlx_gives_native_results(fallbacks):
    from torchdevice_generated.fallback_table import MLX_ROUTES

    with torchdevice.installed("cpu"):
        native = train()
    with torchdevice.installed("cpu", prefer_mlx=True):
        through_mlx = train()
    assert_same_training(through_mlx, native)
    used = {op for op in MLX_ROUTES if fallbacks[op, "mlx"]}
    assert bool(used) == bool(MLX_ROUTES)  # every verified shim the program reaches ran on MLX


def test_cuda_program_on_the_simulated_mac_with_the_whole_table(fallbacks):
    """The same program on ``mps-sim``: all of MPS's missing kernels and its float64 refusal, not chosen ops."""
    with torchdevice.installed("cpu"):
        native = train()
    with torchdevice.installed("mps-sim"):
        on_mac = train()
    assert_same_training(on_mac, native)
    assert fallbacks["aten::mean", "cpu"] == 4  # the float64 accuracies: MPS has no float64
    assert fallbacks["aten::topk", "cpu"] == 0  # MPS has topk
