"""Programs written for NVIDIA GPUs against flash-attn, xformers, apex and SDPA backend pins
(``programs/``), run unmodified by ``torchdevice run`` in real subprocesses, their results compared with
plain-torch references; the same programs under plain ``python`` are unaffected (they fail as they would
without a GPU and the packages)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from standin_references import attention, flash_mask, xformers_mask

import torchdevice

PROGRAMS = Path(__file__).resolve().parent / "programs"


def run(how: str, program: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``torchdevice run PROGRAM ARGS`` or ``python PROGRAM ARGS``, without inherited TORCHDEVICE_ settings, on the cpu
    target unless ``env`` names another."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
    environment.update({"OMP_NUM_THREADS": "1", "TORCHDEVICE_LOG": "info", "TORCHDEVICE_TARGET": "cpu", **(env or {})})
    prefix = [sys.executable, "-m", "torchdevice", "run"] if how == "torchdevice" else [sys.executable]
    path = str(PROGRAMS / program) if (PROGRAMS / program).exists() else program
    return subprocess.run([*prefix, path, *args], env=environment, capture_output=True, text=True, timeout=300)


def ran(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def close(actual: torch.Tensor, expected: torch.Tensor, tol: float) -> None:
    torch.testing.assert_close(actual.double(), expected.double(), rtol=tol, atol=tol)


@pytest.mark.processes
def test_flash_attn_program_and_its_spawn_worker(tmp_path):
    out = tmp_path / "out.pt"
    done = ran(run("torchdevice", "flash_llm.py", str(out)))
    r = torch.load(out)
    assert r["is_cuda"]
    close(r["dense"], attention(r["q"], r["k"], r["v"], flash_mask(2, 16, 16, True, (-1, -1))), 4e-3)
    close(r["gqa_in_child"], attention(r["q"], r["k2"], r["v2"], flash_mask(2, 16, 16, True, (-1, -1))), 4e-3)
    lengths = r["mask"].sum(1).tolist()
    for i, n in enumerate(lengths):
        x = r["x"][i:i + 1, :n]
        close(r["varlen"][i, :n], attention(x, x, x, flash_mask(1, n, n, True, (4, 0)))[0], 3e-2)
        assert not r["varlen"][i, n:].any()
    assert "stand-in flash_attn.flash_attn_func: cpu" in done.stderr
    assert "stand-in flash_attn.bert_padding.unpad_input: cpu" in done.stderr
    plain = run("python", "flash_llm.py", str(out))
    assert plain.returncode != 0 and "No module named 'flash_attn'" in plain.stderr


@pytest.mark.processes
def test_xformers_program(tmp_path):
    out = tmp_path / "out.pt"
    ran(run("torchdevice", "xformers_diffusion.py", str(out)))
    r = torch.load(out)
    mask = xformers_mask("LowerTriangularMask", [10], [10]).expand(2, -1, -1)
    close(r["causal"], attention(r["q"], r["k"], r["v"], mask), 4e-3)
    lengths = r["lengths"]
    mask = xformers_mask("BlockDiagonalCausalMask", lengths, lengths)[None]
    close(r["packed"], attention(r["qb"], r["kb"], r["vb"], mask, 0.2), 1e-5)
    assert run("python", "xformers_diffusion.py", str(out)).returncode != 0


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")  # torch's RMSNorm under autocast
@pytest.mark.processes
def test_apex_program_trains_like_plain_torch(tmp_path):
    out = tmp_path / "out.pt"
    ran(run("torchdevice", "apex_train.py", str(out)))
    r = torch.load(out)
    with torchdevice.installed("cpu"):  # the same training in plain torch: LayerNorm, RMSNorm, AdamW, autocast
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                                    torch.nn.RMSNorm(16, eps=1e-5), torch.nn.Linear(16, 1)).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
        scaler = torch.amp.GradScaler("cuda")
        x, y = torch.randn(32, 8).cuda(), torch.randn(32, 1).cuda()
        losses = []
        for _ in range(5):
            with torch.autocast("cuda", dtype=torch.float16):
                prediction = model(x)
            loss = F.mse_loss(prediction.float(), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
    torch.testing.assert_close(r["losses"], losses, rtol=2e-3, atol=2e-3)
    for value, expected in zip(r["state"].values(), model.state_dict().values(), strict=True):
        close(value, expected.cpu(), 2e-3)


def test_amp_skips_the_step_after_an_overflow():
    with torchdevice.installed("cpu"):
        from apex import amp

        weight = torch.nn.Parameter(torch.ones(3, device="cuda"))
        optimizer = torch.optim.SGD([weight], lr=0.1)
        model = torch.nn.Linear(3, 1).cuda()
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
        optimizer.param_groups[0]["params"] = [weight]
        with amp.scale_loss((weight * float("inf")).sum(), optimizer) as scaled:
            scaled.backward()
        optimizer.step()
        assert torch.equal(weight.detach(), torch.ones(3))  # skipped
        optimizer.zero_grad()
        with amp.scale_loss(weight.sum(), optimizer) as scaled:
            scaled.backward()
        optimizer.step()
        torch.testing.assert_close(weight.detach(), torch.full((3,), 0.9))  # unscaled gradient 1, lr 0.1


@pytest.mark.processes
def test_sdpa_backend_pins_run_on_the_target(tmp_path):
    out = tmp_path / "out.pt"
    done = ran(run("torchdevice", "sdpa_backends.py", str(out)))
    said, r = json.loads(done.stdout.splitlines()[-1]), torch.load(out)
    expected = attention(r["q"].transpose(1, 2), r["k"].transpose(1, 2), r["v"].transpose(1, 2),
                         flash_mask(2, 12, 12, True, (-1, -1))).transpose(1, 2)
    for name in ("efficient", "cudnn_flash", "sdp_kernel", "math"):
        close(r[name], expected, 1e-5)
    assert said == {"in_efficient": [False, True, False], "available": True, "can_use": [True, True],
                    "after": [True, True, True]}
    assert "redirect torch.nn.attention.sdpa_kernel: EFFICIENT_ATTENTION->cpu:" in done.stderr
    plain = run("python", "sdpa_backends.py", str(out), env={"CUDA_VISIBLE_DEVICES": ""})
    assert plain.returncode != 0


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed")
@pytest.mark.processes
def test_timm_fast_norm_takes_the_apex_path_and_it_works(tmp_path):
    out = tmp_path / "out.pt"
    done = ran(run("torchdevice", "timm_fast_norm.py", str(out)))
    assert json.loads(done.stdout.splitlines()[-1]) == {"has_apex": True, "has_apex_rmsnorm": True}
    r = torch.load(out)
    x, w, b = r["x"].double(), r["w"].double(), r["b"].double()
    layer = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5) * w + b
    rms = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    close(r["layer"], layer, 1e-5)
    close(r["rms"], rms * w, 1e-5)
    close(r["rms_plain"], rms, 1e-5)
    close(r["layer_autocast"], layer, 3e-2)
    assert "stand-in apex.normalization.fused_layer_norm.fused_layer_norm_affine: cpu" in done.stderr
    plain = ran(run("python", "timm_fast_norm.py", str(out), "cpu"))
    assert json.loads(plain.stdout.splitlines()[-1]) == {"has_apex": False, "has_apex_rmsnorm": False}


@pytest.fixture(scope="module")
def mamba_reference(tmp_path_factory):
    """What ``mamba_train.py`` gives through mamba-ssm's own reference code, natively on the CPU."""
    expected = tmp_path_factory.mktemp("mamba") / "expected.pt"
    ran(run("python", "mamba_train.py", str(expected), "reference"))
    return torch.load(expected)


@pytest.mark.skipif(importlib.util.find_spec("mamba_ssm") is None or importlib.util.find_spec("triton") is None,
                    reason="mamba-ssm (or Triton, which it imports) is not installed")
@pytest.mark.slow
@pytest.mark.parametrize("target", ["cpu", "mps-sim"])
def test_mamba_block_trains_like_its_reference(tmp_path, target, mamba_reference):
    """mamba-ssm installed without its CUDA build: its Mamba block, fused (mamba_inner_fn) and not, trains under
    the runtime on the stand-ins as mamba-ssm's own reference code (nn.Conv1d, selective_scan_ref) trains on the
    CPU: forward, gradients, losses and weights; under autocast to bfloat16 too, within bfloat16's tolerance."""
    out = tmp_path / "out.pt"
    done = ran(run("torchdevice", "--target", target, str(PROGRAMS / "mamba_train.py"), str(out)))
    r, want = torch.load(out), mamba_reference
    for path in ("fast", "unfused"):
        torch.testing.assert_close(r[path]["losses"], want[path]["losses"], rtol=1e-5, atol=1e-6)
        close(r[path]["out"], want[path]["out"], 1e-5)
        for name, grad in want[path]["grads"].items():
            torch.testing.assert_close(r[path]["grads"][name], grad, rtol=1e-4, atol=1e-7, msg=name)
        for name, value in want[path]["state"].items():
            close(r[path]["state"][name], value, 1e-5)
    # under autocast to bfloat16 (the reference: float32): within a few of bfloat16's epsilons
    torch.testing.assert_close(r["bf16"]["losses"], want["bf16"]["losses"], rtol=3e-2, atol=1e-3)
    close(r["bf16"]["out"], want["bf16"]["out"], 3e-2)
    device = {"cpu": "cpu", "mps-sim": "mps"}[target]
    for name in ("causal_conv1d_cuda.causal_conv1d_fwd", "causal_conv1d_cuda.causal_conv1d_bwd",
                 "selective_scan_cuda.fwd", "selective_scan_cuda.bwd"):
        assert f"stand-in {name}: {device}" in done.stderr
    if target == "cpu":
        plain = run("python", "mamba_train.py", str(out))
        assert plain.returncode != 0 and "No module named 'selective_scan_cuda'" in plain.stderr
