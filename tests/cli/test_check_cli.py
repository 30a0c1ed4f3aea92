"""``torchdevice check`` from the command line, in a subprocess: linter lines, the grouped summary, JSON, exit
statuses, ``[tool.torchdevice]`` exclusions, files it cannot read."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

FIXTURES = Path(__file__).resolve().parents[1] / "check" / "fixtures"
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<column>\d+): (?P<severity>blocker|warning|info) (?P<name>\S+) ")


def check(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchdevice", "check", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_blockers_are_linter_lines_then_a_grouped_summary_and_exit_1():
    done = check(FIXTURES / "blockers.py", "--target", "mps")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    flagged = [LINE.match(line) for line in lines if LINE.match(line)]
    source = (FIXTURES / "blockers.py").read_text().splitlines()
    for m in flagged:  # each line names a place that says what it expects there
        assert f"# expect: {m['severity']} {m['name']}" in source[int(m["line"]) - 1], m.string
    assert lines[len(flagged)].startswith("blockers (")
    assert re.fullmatch(r"1 file checked for mps in \d+\.\ds: \d+ blockers, \d+ warnings, \d+ info; "
                        r"0 unreadable, 0 skipped", lines[-1])


def test_nothing_blocking_exits_0_and_json_holds_every_finding():
    done = check(FIXTURES / "guarded.py", "--json", "--target", "mps")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["target"] == "mps" and document["counts"]["blocker"] == 0
    findings = document["findings"]
    assert {"path", "line", "column", "name", "severity", "message", "todo"} <= set(findings[0])
    assert sum(f["severity"] == "info" for f in findings) == document["counts"]["info"] > 0


def test_usage_errors_exit_2_with_one_line():
    missing = check(FIXTURES / "nothing-here.py")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "nothing-here.py" in missing.stderr
    target = check(FIXTURES, "--target", "tpu")
    assert target.returncode == 2 and "invalid choice: 'tpu'" in target.stderr


def test_project_configuration_excludes_files_and_a_broken_file_is_reported(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice]\nexclude = ["vendor"]\n')
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "kernels.py").write_text("import cupy\n")
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(1, device='cuda')\n")
    assert check(tmp_path).returncode == 0
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    done = check(tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"error: {tmp_path / 'broken.py'}:2: syntax error: invalid syntax"]
    assert done.stdout.splitlines()[-1].endswith("1 unreadable, 0 skipped")


SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="fused_ops",
    ext_modules=[CUDAExtension("fused_ops", ["fused_ops.cpp", "fused_kernel.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
"""


def _flagged(done: subprocess.CompletedProcess[str]) -> set[tuple[str, int, str, str]]:
    found = (LINE.match(line) for line in done.stdout.splitlines())
    return {(Path(m["path"]).name, int(m["line"]), m["severity"], m["name"]) for m in found if m}


def test_every_module_that_builds_cuda_code_blocks_at_its_line(tmp_path):
    (tmp_path / "setup.py").write_text(SETUP)  # no other word of CUDA in it
    (tmp_path / "kernels.py").write_text('from torch.utils.cpp_extension import load\n\n'
                                         'ops = load("ops", sources=["ops.cpp", "ops_kernel.cu"])\n')
    (tmp_path / "inline.py").write_text("import torch.utils.cpp_extension as ext\n\n"
                                        'ops = ext.load_inline("ops", cpp_sources=CPP, cuda_sources=KERNEL)\n')
    (tmp_path / "cpu.py").write_text('from torch.utils.cpp_extension import load\n\nops = load("ops", ["ops.cpp"])\n')
    done = check(tmp_path)
    assert done.returncode == 1, done.stderr
    assert _flagged(done) == {
        ("setup.py", 6, "blocker", "torch.utils.cpp_extension.CUDAExtension"),
        ("kernels.py", 3, "blocker", "torch.utils.cpp_extension.load"),
        ("inline.py", 3, "blocker", "torch.utils.cpp_extension.load_inline"),
    }
    assert "  CUDA extension builds: torch.utils.cpp_extension.CUDAExtension x1: " in done.stdout
    assert done.stdout.splitlines()[-1].endswith(": 3 blockers, 0 warnings, 0 info; 0 unreadable, 0 skipped")


def test_a_guarded_build_is_a_warning_and_blocks_nothing(tmp_path):
    (tmp_path / "kernels.py").write_text(
        "try:\n    from torch.utils.cpp_extension import load\n\n    ops = load('ops', sources=['ops.cu'])\n"
        "except (ImportError, RuntimeError):\n    ops = None\n")
    done = check(tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    [finding] = json.loads(done.stdout)["findings"]
    assert (finding["line"], finding["severity"], finding["kind"]) == (4, "warning", "extension")


def test_the_build_fixtures_are_flagged_where_they_say():
    builds = FIXTURES / "builds"
    done = check(builds, "--jobs", "2", "--target", "mps")
    assert done.returncode == 1, done.stderr
    marked = {(path.name, n, *m.groups()) for path in builds.glob("*.py")
              for n, line in enumerate(path.read_text().splitlines(), 1)
              for m in re.finditer(r"# expect: (\w+) (\S+)", line)}
    assert _flagged(done) == marked


def test_on_the_simulated_gpu_float64_and_mps_fallbacks_are_no_findings_and_cuda_only_packages_are(tmp_path):
    program = tmp_path / "train.py"
    program.write_text("import torch\nimport triton\n"
                       "x = torch.randn(3).cuda()\n"
                       "y = x.double().cumsum(0)\n"
                       "torch.cuda.synchronize()\n")
    findings = {target: json.loads(check(program, "--target", target, "--json").stdout)["findings"]
                for target in ("mps-sim", "cuda-sim")}
    names = {target: {f["name"] for f in found} for target, found in findings.items()}
    assert ".double()" in names["mps-sim"] and ".double()" not in names["cuda-sim"]  # a GPU has float64
    assert {"triton", "torch.cuda.synchronize", ".cuda()"} <= names["cuda-sim"]
    moved = next(f for f in findings["cuda-sim"] if f["name"] == ".cuda()")
    assert moved["severity"] == "info" and "cuda:0 (simulated)" in moved["message"]


def test_without_a_target_check_checks_for_the_one_run_takes_on_this_machine_and_says_so(tmp_path):
    (tmp_path / "hello.py").write_text("print('hello')\n")
    ran = subprocess.run([sys.executable, "-m", "torchdevice", "run", "--report", "run.json", "hello.py"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    chosen = json.loads((tmp_path / "run.json").read_text())["target"]  # what run took here
    program = tmp_path / "train.py"
    program.write_text("import torch\n\nx = torch.ones(3).cuda()\ntorch.cuda.synchronize()\nprint(x.double())\n")
    done = check(program)
    assert done.returncode == 0, done.stderr
    expected = chosen if chosen != "cuda" else "mps"  # real CUDA passes through: the question left is a Mac
    assert done.stdout.splitlines()[-1].startswith(f"1 file checked for {expected} (this machine's default, as "
                                                   "torchdevice run; --target mps: a Mac) in ")
    assert json.loads(check(program, "--json").stdout)["target"] == expected
    # the same findings as asking for that target by name, and --target mps still says what a Mac does
    named = check(program, "--target", expected)
    assert named.stdout.splitlines()[:-1] == done.stdout.splitlines()[:-1]
    assert re.match(r"1 file checked for mps in ", check(program, "--target", "mps").stdout.splitlines()[-1])


def test_torchdevice_target_chooses_check_s_default_as_it_chooses_run_s(tmp_path):
    program = tmp_path / "train.py"
    program.write_text("import torch\n\nx = torch.ones(3).cuda().double()\n")
    env = {**os.environ, "TORCHDEVICE_TARGET": "cpu"}
    done = subprocess.run([sys.executable, "-m", "torchdevice", "check", str(program), "--show-info"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "checked for cpu (TORCHDEVICE_TARGET=cpu, as torchdevice run; --target mps: a Mac)" in done.stdout
    assert ".double()" not in done.stdout  # the CPU has float64
    env["TORCHDEVICE_TARGET"] = "tpu"
    bad = subprocess.run([sys.executable, "-m", "torchdevice", "check", str(program)], capture_output=True, text=True,
                         timeout=120, env=env)
    ran = subprocess.run([sys.executable, "-m", "torchdevice", "run", str(program)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert bad.returncode == 2 and ran.returncode != 0
    assert bad.stderr.startswith("torchdevice check: error: unknown target 'tpu' (TORCHDEVICE_TARGET=tpu)")
