"""Real programs: CUDA-written code run by ``torchdevice run`` in a fresh interpreter gives the results
its CPU-written twin gives when run plainly (in this process, which has no runtime installed)."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest
import torch
import torchdevice_generated

from torchdevice.cli import catalog, doctor

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")


def run_plainly(monkeypatch, capsys, script: str, *args: str) -> str:
    """The stdout of ``python examples/SCRIPT ARGS``, run in this process on one thread."""
    monkeypatch.syspath_prepend(EXAMPLES)
    monkeypatch.setattr(sys, "argv", [script, *args])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    capsys.readouterr()
    try:
        runpy.run_path(f"{EXAMPLES}/{script}", run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    return capsys.readouterr().out


@pytest.mark.processes
def test_gpt_training_written_for_cuda_matches_the_cpu_version(python, monkeypatch, capsys):
    on_target = python("-m", "torchdevice", "run", "examples/gpt_train.py", "--steps", "6")
    assert on_target.returncode == 0, on_target.stderr
    losses = [float(v) for v in on_target.stdout.split()]
    assert len(losses) == 6 and losses[-1] < losses[0]
    native = [float(v) for v in run_plainly(monkeypatch, capsys, "gpt_train_cpu.py", "--steps", "6").split()]
    # The same CPU kernels on both sides; the CUDA program's GradScaler scales by powers of two (exact).
    # Printed with 6 decimals, so one rounding step apart at most; far below a step's change (~1e-2).
    assert losses == pytest.approx(native, rel=0, abs=2e-6)


@pytest.mark.processes
def test_hugging_face_model_moved_with_cuda_generates_the_cpu_tokens(python, monkeypatch, capsys):
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    on_target = python("-m", "torchdevice", "run", "examples/hf_generate.py", env={"HF_HUB_OFFLINE": "1"})
    assert on_target.returncode == 0, on_target.stderr
    assert "tokens [5, 17, 42, 8, 1," in on_target.stdout
    assert on_target.stdout == run_plainly(monkeypatch, capsys, "hf_generate.py", "--device", "cpu")


@pytest.mark.processes
def test_doctor_reports_devices_target_and_catalog(python, monkeypatch, capsys):
    done = python("-m", "torchdevice", "doctor", "--json", env={"TORCHDEVICE_TARGET": "cpu"})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["target"] == "cpu" and facts["target_from"] == "TORCHDEVICE_TARGET"
    assert facts["catalog_torch"] == torchdevice_generated.TORCH_VERSION
    # one wrapper per entry the catalog gives the policy wrap (`torchdevice catalog`)
    assert facts["wrapped_entry_points"] == sum(e.policy == "wrap" for e in catalog.load()[1])
    assert facts["fallback"]["active"] is False
    monkeypatch.setenv("TORCHDEVICE_TARGET", "cpu")
    assert 'target: "cuda" means cpu' in doctor.format_facts(doctor.facts())


def test_doctor_says_when_the_mac_is_simulated_and_how_float64_is_kept(monkeypatch):
    monkeypatch.setenv("TORCHDEVICE_TARGET", "mps-sim")
    facts = doctor.facts()
    assert facts["simulated"] is True and facts["fallback"]["active"] is True
    text = doctor.format_facts(facts)
    assert "mps:0 (simulated Apple silicon" in text and "float64: float64 and complex128" in text
    monkeypatch.setenv("TORCHDEVICE_TARGET", "cpu")
    assert doctor.facts()["simulated"] is False and doctor.facts()["float64"] is None
