"""``torchdevice run --report``, ``install(report=)`` and ``TORCHDEVICE_REPORT``: one report for every process of
a real program (real subprocesses, spawn ranks, DataLoader workers, forks), its summary, and a report file
that cannot be written."""

from __future__ import annotations

import json
import sys

import pytest
from dist_jobs import run
from program_runs import PROGRAMS, json_lines, torchdevice_run

pytestmark = pytest.mark.processes

FAMILY = str(PROGRAMS.parents[1] / "report" / "programs" / "family.py")


def zeros(entry: dict) -> int:
    return entry["redirects"].get("torch.zeros", {}).get("cuda->cpu", 0)


def test_report_covers_every_process_of_the_program(tmp_path):
    path = tmp_path / "report.json"
    done = torchdevice_run("--report", str(path), FAMILY, timeout=300)
    printed = {line["pid"]: line for line in json_lines(done)}
    document = json.loads(path.read_text())
    by_pid = {p["pid"]: p for p in document["processes"]}
    main = document["processes"][0]
    assert main["role"] == "main" and printed[main["pid"]]["role"] == "main"
    for pid, line in printed.items():  # each process that says what it did is in the report, with its own counts
        assert pid in by_pid, f"{line['role']} {pid} missing from the report"
        assert zeros(by_pid[pid]) == line["zeros"], by_pid[pid]
        assert by_pid[pid]["parent_pid"] == main["pid"] or pid == main["pid"]
    roles = [p["role"] for p in document["processes"]]
    assert sorted(r for r in roles if r.startswith("multiprocessing SpawnProcess")) == \
        ["multiprocessing SpawnProcess-1", "multiprocessing SpawnProcess-2"]
    assert "forked child" in roles and "subprocess" in roles
    workers = [p for p in document["processes"] if p["role"].startswith("DataLoader worker")]
    assert len(workers) == 2 and sum(zeros(w) for w in workers) == 6  # one call per item of the data set
    assert len(document["processes"]) == len(printed) + 2
    total = sum(zeros(p) for p in document["processes"])
    assert document["redirects"]["torch.zeros"]["cuda->cpu"] == total
    assert document["fallbacks"] == [] and document["standins"] == {}
    assert f"torchdevice report: {len(document['processes'])} processes" in done.stderr
    assert f"written to {path}" in done.stderr and f"torch.zeros {total}" in done.stderr


PROGRAM = """
import subprocess, sys, torch, torchdevice

torchdevice.install("cpu"{report})
torch.zeros(1, device="cuda")
subprocess.run([sys.executable, "-c", "import torch; torch.ones(2, device='cuda'); torch.ones(2, device='cuda')"],
               check=True)
print("done")
"""


def test_install_report_and_the_environment_variable_make_the_same_report(tmp_path):
    by_argument, by_variable = tmp_path / "a.json", tmp_path / "b.json"
    first = run([sys.executable, "-c", PROGRAM.format(report=f", report={str(by_argument)!r}")], 120)
    second = run([sys.executable, "-c", PROGRAM.format(report="")], 120, {"TORCHDEVICE_REPORT": str(by_variable)})
    for done, path in ((first, by_argument), (second, by_variable)):
        assert done.returncode == 0 and done.stdout == "done\n", done.output
        document = json.loads(path.read_text())
        assert [p["role"] for p in document["processes"]] == ["main", "subprocess"]
        assert [zeros(p) for p in document["processes"]] == [1, 0]
        assert document["processes"][1]["redirects"]["torch.ones"] == {"cuda->cpu": 2}


@pytest.mark.parametrize("name", ["report.json", "report.html"])
def test_unwritable_report_file_costs_the_run_nothing(tmp_path, name):
    path = tmp_path / "missing" / name
    script = tmp_path / "sums.py"
    script.write_text("import torch\nprint(torch.zeros(2, device='cuda').sum())\n")
    done = torchdevice_run("--report", str(path), str(script))
    assert done.returncode == 0 and done.stdout == "tensor(0.)\n", done.output
    lines = done.stderr.splitlines()
    assert sum(f"report to {path}" in line for line in lines) == 1, done.stderr
    assert any(line.startswith("torchdevice report: 1 process") for line in lines)
    assert not path.parent.exists()


def test_no_report_unless_asked(tmp_path):
    script = tmp_path / "asks.py"
    script.write_text("import sys, torch\ntorch.zeros(1, device='cuda')\n"
                      "print('torchdevice.reporting.program' in sys.modules)\n")
    done = torchdevice_run(str(script))
    assert done.stdout == "False\n" and "torchdevice report" not in done.stderr, done.output


def test_the_report_says_on_which_cards_the_run_fits(tmp_path):
    """The simulated A100's peaks as the program reads them, and per card of the table: fits where its memory holds
    the peak reserved, may fit where it holds only the peak allocated (the cache given back), as said."""
    from torchdevice.device import gpus

    path = tmp_path / "report.json"
    program = str(PROGRAMS.parents[1] / "report" / "programs" / "fragments.py")
    done = torchdevice_run("--target", "cuda-sim", "--gpu", "A100-80GB", "--report", str(path), program,
                           timeout=300)
    (peaks,) = json_lines(done)
    assert peaks == {"reserved": 21 << 30, "allocated": 11 << 30}  # two segments, the larger one in use
    document = json.loads(path.read_text())
    (device,) = document["processes"][0]["gpu_memory"]
    assert (device["card"], device["peak_reserved"], device["peak_allocated"]) == ("A100-80GB", 21 << 30, 11 << 30)
    verdicts = {row["card"]: row["verdict"] for row in document["fit"]}
    assert set(verdicts) == set(gpus.CARDS)
    assert verdicts["T4"] == verdicts["V100-16GB"] == "may fit"  # 11 GiB in use at most, 21 GiB reserved
    assert verdicts["A10G"] == verdicts["A100-40GB"] == verdicts["H100"] == "fits"
    assert "memory: peak 21.00 GiB reserved (11.00 GiB allocated) of the A100-80GB's" in done.stderr
    assert "may fit: T4, V100-16GB" in done.stderr and "not counted" in done.stderr


def test_the_page_shows_the_verdict_per_card_without_totals(tmp_path):
    page = tmp_path / "report.html"
    program = str(PROGRAMS.parents[1] / "report" / "programs" / "fragments.py")
    done = torchdevice_run("--target", "cuda-sim", "--gpu", "A100-80GB", "--report", str(page), program, timeout=300)
    assert done.returncode == 0, done.output
    text = page.read_text(encoding="utf-8")
    section = text[text.index('data-section="fit"'):]
    section = section[:section.index("</div>")]
    assert section.count('data-column="verdict">may fit<') == 2 and "<tfoot>" not in section
