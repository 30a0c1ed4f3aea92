"""The measurements the documentation shows: ``python -m bench --record FILE`` (``make bench RECORD=1``) writes a
run's results into the document the Performance page is rendered from (``docs/measurements/bench.json``), in place
of the recorded results of the benchmarks it ran; ``docs/hooks.py`` renders each result's figures and command."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from bench.record import record

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "docs" / "measurements" / "bench.json"


@pytest.fixture
def hooks(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    copy = tmp_path / "bench.json"
    shutil.copy(RECORDED, copy)
    monkeypatch.setattr(module, "MEASUREMENTS", copy)
    return module


def test_the_recorded_document_names_a_command_for_every_result():
    document = json.loads(RECORDED.read_text())
    assert document["machine"]
    for result in document["results"]:
        assert result["bench"] and result["name"] and result["command"], result
        assert "measured" in result or set(result) - {"bench", "name", "command", "recorded", "what", "goal"}


def test_a_run_replaces_the_results_of_its_benchmarks_and_keeps_the_others(hooks):
    before = json.loads(hooks.MEASUREMENTS.read_text())["results"]
    run = [{"bench": "runtime", "name": "torch.zeros(8, device='cuda') vs plain device='cpu'", "candidate_s": 2.5e-06,
            "baseline_s": 1.25e-06, "ratio": 2.0},
           {"bench": "runtime", "name": "installed in", "seconds": 0.0201, "entries": 6269}]
    document = record(hooks.MEASUREMENTS, run, ["runtime"], torch_version="2.13.0")
    assert document == json.loads(hooks.MEASUREMENTS.read_text())
    runtime = [r for r in document["results"] if r["bench"] == "runtime"]
    assert [r["name"] for r in runtime] == [r["name"] for r in run]
    assert all(r["command"] == "python -m bench runtime" and "torch 2.13.0" in r["recorded"] for r in runtime)
    assert [r for r in document["results"] if r["bench"] != "runtime"] == [r for r in before
                                                                            if r["bench"] != "runtime"]
    assert [r["bench"] for r in document["results"]][0] == before[0]["bench"]  # the page's order is kept

    page = hooks.measurements()
    assert "candidate: 2.5 µs; baseline: 1.25 µs; 2.00×" in page
    assert "seconds: 20.1 ms; entries: 6,269" in page
    assert page.count("`python -m bench runtime`") == 2
    assert "Recorded: " in page  # one run's date, said once above its table
    old = next(r for r in before if r["bench"] == "runtime")
    assert old["measured"] not in page  # the figures written before are gone with their run


def test_every_recorded_result_is_on_the_page_with_its_figures(hooks):
    page = hooks.measurements()
    for result in json.loads(hooks.MEASUREMENTS.read_text())["results"]:
        assert hooks.cell(result["measured"]) in page
        assert f"`{result['command']}`" in page
