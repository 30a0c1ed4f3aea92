"""Whole CUDA-written programs under ``torchdevice run --target mps-sim``, each compared with the same program on
the CPU target, and the report naming what fell back."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from dist_jobs import free_port, run

pytestmark = pytest.mark.processes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = HERE / "programs"


def on(target: str, *program: str, devices: int | None = None) -> list[str]:
    """The lines ``torchdevice run --target TARGET`` of ``program`` printed, the last one its report."""
    more = ["--devices", str(devices)] if devices else []
    env = {"MASTER_PORT": str(free_port()), "TORCHDEVICE_CACHE_DIR": os.environ["TORCHDEVICE_CACHE_DIR"]}
    done = run([sys.executable, "-m", "torchdevice", "run", "--target", target, *more,
                str(PROGRAMS / "with_report.py"), *program], 300, env)
    assert done.returncode == 0, done.output
    return done.stdout.splitlines()


def both(*program: str) -> tuple[list[Any], list[Any], dict]:
    """(CPU target's printed lines, mps-sim's, mps-sim's fallbacks), JSON lines decoded; the CPU target has no
    fallbacks."""
    *native, native_report = map(_decoded, on("cpu", *program))
    *mac, mac_report = map(_decoded, on("mps-sim", *program))
    assert native_report["report"]["fallbacks"] == {}
    return native, mac, mac_report["report"]["fallbacks"]


def _decoded(line: str) -> Any:
    return json.loads(line) if line.startswith("{") else line


def close(got, expected, rtol: float, atol: float) -> None:
    torch.testing.assert_close(torch.tensor(got, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64),
                               rtol=rtol, atol=atol)


def test_gpt_example():
    """bf16 autocast, GradScaler, fused AdamW, a checkpoint resumed with map_location="cuda": the losses are the
    CPU's up to bf16 rounding in different orders (a wrong kernel moves them by 1e-1)."""
    native, mac, fallbacks = both(str(ROOT / "examples" / "gpt_train.py"), "--steps", "4")
    assert len(mac) == 4
    close([float(x) for x in mac], [float(x) for x in native], rtol=2e-3, atol=1e-4)
    assert set(fallbacks) <= {"aten::_scaled_dot_product_flash_attention_for_cpu",  # C++ picks the CPU's kernel
                              "aten::_scaled_dot_product_flash_attention_for_cpu_backward"}


def test_packed_lstm_gru_training():
    native, mac, fallbacks = both(str(PROGRAMS / "rnn_packed.py"))
    assert mac[0]["device"] == "mps:0" and native[0]["device"] == "cpu"
    close(mac[0]["losses"], native[0]["losses"], rtol=1e-5, atol=1e-6)


def test_numpy_float64_program():
    native, mac, fallbacks = both(str(PROGRAMS / "numpy_float64.py"))
    assert (mac[0]["dtype"], mac[0]["device"]) == ("torch.float64", "mps:0")
    close(mac[0]["solution"], native[0]["solution"], rtol=1e-10, atol=1e-12)
    assert mac[0]["printed"] == native[0]["printed"].replace("], dtype", "], device='mps:0', dtype")
    assert mac[1]["loss_dtype"] == "torch.float64"
    close(mac[1]["losses"], native[1]["losses"], rtol=1e-6, atol=1e-8)
    close(mac[1]["weight"], native[1]["weight"], rtol=1e-5, atol=1e-7)
    assert fallbacks["aten::linalg_lstsq"] == {"cpu": 1}


def test_program_calling_ops_mps_lacks():
    from torchdevice_generated.fallback_table import MLX_ROUTES

    native, mac, fallbacks = both(str(PROGRAMS / "missing_ops.py"))
    assert mac[0].pop("device") == "mps:0"
    native[0].pop("device")
    for key, expected in native[0].items():
        close(mac[0][key], expected, rtol=1e-5, atol=1e-6)
    for op in ("adaptive_max_pool3d", "adaptive_max_pool3d_backward", "heaviside", "logit_", "put_",
               "multilabel_margin_loss_forward", "multilabel_margin_loss_backward"):
        route = "mlx" if f"aten::{op}" in MLX_ROUTES else "cpu"
        assert fallbacks[f"aten::{op}"].get(route, 0) >= 1, (op, fallbacks)


def ranks(program: Path, tmp_path: Path) -> dict[str, list[dict]]:
    """What each rank of ``program`` (``mp.spawn`` over 2 emulated devices) wrote, per target."""
    results = {}
    for target in ("cpu", "mps-sim"):
        out = tmp_path / target
        out.mkdir()
        assert "fallbacks" in on(target, str(program), str(out), devices=2)[-1]
        results[target] = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    return results


@pytest.mark.timeout(600)
def test_mp_spawn_ddp_on_two_emulated_devices(tmp_path):
    """Two ranks, each on the Mac's one device, gloo under NCCL's name: the same parameters as the CPU target."""
    results = ranks(ROOT / "tests" / "processes" / "programs" / "ddp_spawn.py", tmp_path)
    assert [(r["rank"], r["device_count"], r["on"]) for r in results["mps-sim"]] == [(0, 2, "mps:0"), (1, 2, "mps:0")]
    assert results["mps-sim"][0]["params"] == results["mps-sim"][1]["params"]
    for got, expected in zip(results["mps-sim"][0]["params"], results["cpu"][0]["params"], strict=True):
        close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.timeout(600)
def test_ddp_finding_unused_parameters_with_a_static_graph_and_bucket_views(tmp_path):
    """DDP's reducer pins host memory for the device's map of used parameters (the compiled backend's hooks give
    it): unused-parameter detection, a static graph and gradients as bucket views train as on the CPU target."""
    results = ranks(PROGRAMS / "ddp_options.py", tmp_path)
    assert [r["on"] for r in results["mps-sim"]] == ["mps:0", "mps:0"]
    for option, expected in results["cpu"][0]["trained"].items():
        assert results["mps-sim"][0]["trained"][option] == results["mps-sim"][1]["trained"][option]
        for got, want in zip(results["mps-sim"][0]["trained"][option], expected, strict=True):
            close(got, want, rtol=1e-5, atol=1e-6)


def test_the_target_reaches_every_process():
    """``TORCHDEVICE_TARGET=mps-sim`` (not ``--target``): spawned processes and DataLoader workers are on the
    simulated Mac too."""
    env = {"TORCHDEVICE_TARGET": "mps-sim", "TORCHDEVICE_CACHE_DIR": os.environ["TORCHDEVICE_CACHE_DIR"]}
    done = run([sys.executable, "-m", "torchdevice", "run", str(PROGRAMS / "processes.py")], 300, env)
    assert done.returncode == 0, done.output
    assert json.loads(done.stdout.splitlines()[-1]) == {"main": "mps:0", "spawned": "mps:0", "worker": "mps:0"}
