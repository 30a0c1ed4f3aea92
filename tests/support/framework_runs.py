"""Framework programs (``tests/frameworks/programs/``): the records each rank writes, and their comparison."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from dist_jobs import free_port, run

PROGRAMS = Path(__file__).resolve().parents[1] / "frameworks" / "programs"

Records = list[dict]


def records(out: Path, command: list[str], timeout: float) -> Records:
    """Run ``command`` (which writes ``out/rank<N>.json``) on a free port, the Hugging Face hub offline (the
    programs build their models from configs); the records, rank by rank."""
    done = run(command, timeout, env={"MASTER_PORT": str(free_port()), "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.output
    found = [json.loads(path.read_text()) for path in sorted(out.glob("rank*.json"))]
    assert found, done.output
    return found


def assert_numbers_close(got, expected, rtol: float = 1.3e-6, atol: float = 1e-5) -> None:
    """Numbers in nested dicts and lists equal up to the tolerances (each innermost list of numbers as one tensor). The
    defaults are assert_close's float32 ones: the same float32 kernels on the same inputs, summed in another
    order at most."""
    if isinstance(expected, dict):
        assert got.keys() == expected.keys()
        for key in expected:
            assert_numbers_close(got[key], expected[key], rtol, atol)
    elif isinstance(expected, list) and expected and isinstance(expected[0], dict | list):
        assert len(got) == len(expected)
        for mine, theirs in zip(got, expected, strict=True):
            assert_numbers_close(mine, theirs, rtol, atol)
    else:
        torch.testing.assert_close(torch.tensor(got, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64),
                                   rtol=rtol, atol=atol)
