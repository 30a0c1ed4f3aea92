"""``torchdevice check``'s reading of one module: findings at the lines the fixtures mark (``# expect: SEVERITY
NAME``), none blocking in guarded code, names resolved through imports and aliases, and per target; every
module that builds CUDA code is found, text prefilter included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchdevice.check.analyze import CUDA_EXTENSION, EXTENSION_BUILDERS, EXTENSION_WORDS, check_source
from torchdevice.check.scan import check_files
from torchdevice.source.files import Found

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXPECT = re.compile(r"# expect: (\w+) (\S+)")


def expected(path: Path) -> set[tuple[int, str, str]]:
    return {(n, *m.groups()) for n, line in enumerate(path.read_text().splitlines(), 1)
            for m in EXPECT.finditer(line)}


@pytest.mark.parametrize("name", ["blockers.py", "guarded.py"])
def test_findings_are_at_the_marked_lines(name):
    path = FIXTURES / name
    findings = check_source(path.read_text(), str(path), "mps")
    found = {(f.line, f.severity, f.name) for f in findings}
    marked = expected(path)
    assert {f for f in found if f[1] != "info"} == {m for m in marked if m[1] != "info"}
    assert {m for m in marked if m[1] == "info"} <= found
    for f in findings:
        line = path.read_text().splitlines()[f.line - 1]
        assert f.column >= 1 and line[f.column - 1:].strip(), f  # the column points into the line
        if f.severity == "blocker":
            assert f.todo and f.message, f


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "builds").glob("*.py")))
@pytest.mark.parametrize("target", ["mps", "cpu"])
def test_every_module_building_cuda_code_is_found_where_it_builds(name, target):
    path = FIXTURES / "builds" / name
    [report] = check_files([Found(path)], target, jobs=1, max_bytes=None)  # read as the command reads it
    found = {(f.line, f.severity, f.name) for f in report.findings if f.kind == "extension"}
    assert found == expected(path)
    assert {f.severity for f in report.findings} & {"blocker", "warning"}


def test_the_prefilter_has_a_word_of_each_extension_builder():
    assert [n for n in (CUDA_EXTENSION, *EXTENSION_BUILDERS) if not set(n.split(".")) & EXTENSION_WORDS] == []


def test_guarded_code_has_no_blocker():
    path = FIXTURES / "guarded.py"
    assert not [f for f in check_source(path.read_text(), str(path), "mps") if f.severity == "blocker"]


def test_the_cpu_lacks_no_op_and_simulated_mps_lacks_what_mps_lacks():
    """What MPS lacks is the installed release's: torch 2.13's MPS has no ``take`` kernel, 2.15's has."""
    from torchdevice_generated.check_table import MISSING_ON_MPS

    source = "import torch.nn.functional as F\ny = F.adaptive_max_pool3d(x, 2)\nz = x.take(i)\n"
    assert [f.name for f in check_source(source, "m.py", "cpu")] == []
    mps = [(f.name, f.severity) for f in check_source(source, "m.py", "mps")]
    lacking = [n for n in ("torch.nn.functional.adaptive_max_pool3d", "torch.Tensor.take") if n in MISSING_ON_MPS]
    assert lacking and mps == [(n, "info" if MISSING_ON_MPS[n][2] else "warning") for n in lacking]
    assert [(f.name, f.severity) for f in check_source(source, "m.py", "mps-sim")] == mps


def test_triton_is_a_warning_with_its_cost_where_it_installs_and_a_blocker_with_advice_on_mps():
    source = "import triton\ntry:\n    import triton.language as tl\nexcept ImportError:\n    tl = None\n"
    for target in ("cpu", "mps-sim"):
        findings = check_source(source, "m.py", target)
        assert [(f.line, f.severity, f.name) for f in findings] == [(1, "warning", "triton"), (3, "warning", "triton")]
        assert "Triton's interpreter" in findings[0].message and f"on {target}:" in findings[0].message
    mps = check_source(source, "m.py", "mps")
    assert [(f.line, f.severity) for f in mps] == [(1, "blocker"), (3, "warning")]
    assert "no macOS wheels" in mps[0].todo


def test_names_are_resolved_through_the_module_imports_only():
    source = (
        "from torch import cuda as c\n"
        "import torch as th\n"
        "c.ExternalStream(0)\n"           # torch.cuda.ExternalStream through an alias of torch.cuda
        "th.cuda.streams.ExternalStream\n"  # a submodule's name for it
        "cuda = object()\n"
        "other.cuda.ExternalStream(0)\n"    # not torch
        "def f(stream: th.cuda.ExternalStream): pass\n"  # an annotation runs nothing
    )
    found = [(f.line, f.name, f.severity) for f in check_source(source, "m.py", "mps")]
    assert found == [(3, "torch.cuda.ExternalStream", "blocker"), (4, "torch.cuda.streams.ExternalStream", "blocker")]


def test_columns_count_characters_not_bytes():
    source = "import torch\nétiquette = 'é'; torch.cuda.current_blas_handle()\n"
    [finding] = check_source(source, "m.py", "mps")
    assert source.splitlines()[1][finding.column - 1:].startswith("torch.cuda.current_blas_handle")


def test_columns_are_read_on_the_lines_python_numbers():
    source = "import torch\n\x0c\n# \u2028 étiquette\nx = 'é'; torch.cuda.current_blas_handle()\n"  # not line breaks
    [finding] = check_source(source, "m.py", "mps")
    assert finding.line == 4 and finding.column == len("x = 'é'; ") + 1


def test_a_cuda_test_guards_nothing_under_the_runtime():
    source = "import torch\nif torch.cuda.is_available():\n    import cupy\nif use_cupy:\n    import cupy\n"
    found = [(f.line, f.severity) for f in check_source(source, "m.py", "mps") if f.name == "cupy"]
    assert found == [(3, "blocker"), (5, "warning")]


def test_float64_on_the_device_is_told_for_mps_only():
    source = ("import torch\nfrom torch import float64 as f64\nx = torch.ones(3, dtype=torch.float64).cuda()\n"
              "y = x.double()\nz = torch.zeros(2, dtype=f64)\nw = model.float()\n")
    for target in ("mps", "mps-sim"):
        found = [(f.line, f.name, f.severity) for f in check_source(source, "m.py", target) if f.kind == "dtype"]
        assert found == [(3, "torch.float64", "info"), (4, ".double()", "info"), (5, "torch.float64", "info")]
    assert not [f for f in check_source(source, "m.py", "cpu") if f.kind == "dtype"]


def test_packages_told_the_truth_are_info_saying_what_they_do():
    source = ("import bitsandbytes as bnb\n"
              "from deepspeed.ops.adam import FusedAdam\n"
              "try:\n    import bitsandbytes.optim\nexcept ImportError:\n    pass\n")
    findings = check_source(source, "m.py", "mps")
    assert [(f.line, f.name, f.severity) for f in findings] == [
        (1, "bitsandbytes", "info"), (2, "deepspeed", "info"), (4, "bitsandbytes", "info")]
    assert "told the truth" in findings[0].message and "CPU backend" in findings[0].message
    assert "accelerator of the machine" in findings[1].message


def test_the_progress_is_told_each_file_done_in_order_of_the_total():
    """``check_files`` tells its progress (the terminal line of ``torchdevice check``) each file as it is done."""
    paths = sorted((FIXTURES / "builds").glob("*.py"))
    told: list[tuple[int, int]] = []
    reports = check_files([Found(p) for p in paths], "mps", jobs=1, max_bytes=None,
                          progress=lambda done, total: told.append((done, total)))
    assert told == [(n, len(paths)) for n in range(1, len(paths) + 1)] and len(reports) == len(paths)
