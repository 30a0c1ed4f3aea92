"""What programs expect of a library: quiet logging, warnings at their own lines, wrappers that look like
what they wrap, and a clear warning for a torch the catalog was not made from."""

from __future__ import annotations

import inspect
import textwrap

import pytest
import torch


@pytest.mark.processes
def test_logging_at_info_in_the_program_shows_nothing_of_ours(python, tmp_path):
    program = tmp_path / "train.py"
    program.write_text(textwrap.dedent("""\
        import logging, torch
        logging.basicConfig(level=logging.INFO)  # as timm and many training scripts do
        logging.getLogger("train").info("program's own record")
        print(torch.zeros(2, device="cuda").device)
    """))
    quiet = python("-m", "torchdevice", "run", str(program))
    assert quiet.returncode == 0 and quiet.stdout.strip() == "cpu", quiet.stderr
    assert "program's own record" in quiet.stderr and "redirect" not in quiet.stderr
    asked = python("-m", "torchdevice", "run", str(program), env={"TORCHDEVICE_LOG": "info"})
    assert asked.stderr.count("torchdevice: redirect torch.zeros: cuda->cpu") == 1  # ours once, not also via root


@pytest.mark.processes
def test_an_unknown_log_level_warns_and_the_program_goes_on(python, tmp_path):
    program = tmp_path / "p.py"
    program.write_text("import torch\nprint(torch.ones(1, device='cuda').device)\n")
    done = python("-m", "torchdevice", "run", str(program), env={"TORCHDEVICE_LOG": "chatty"})
    assert done.returncode == 0 and done.stdout.strip() == "cpu", done.stderr
    assert "TORCHDEVICE_LOG='chatty' is not a logging level" in done.stderr


@pytest.mark.processes
def test_warnings_from_wrapped_torch_calls_name_the_programs_line(python, tmp_path):
    program = tmp_path / "amp.py"
    program.write_text(textwrap.dedent("""\
        import warnings, torch
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            with torch.autocast("cuda", dtype=torch.float32):  # line 4: CPU autocast refuses float32
                pass
            torch.tensor(torch.ones(2), device="cuda")  # line 6: torch's copy-construct warning
        for w in caught:
            print(w.filename.rsplit("/", 1)[-1], w.lineno)
    """))
    done = python("-m", "torchdevice", "run", str(program))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["amp.py 4", "amp.py 6"], done.stdout


def test_wrappers_carry_what_they_wrap(on_cpu):
    original = torch._C._VariableFunctions.zeros
    assert torch.zeros is not original
    assert torch.zeros.__wrapped__ is original
    assert (torch.zeros.__name__, torch.zeros.__doc__, torch.zeros.__module__) == (
        original.__name__, original.__doc__, original.__module__)
    assert inspect.signature(torch.nn.Module.to) == inspect.signature(torch.nn.Module.to.__wrapped__)


@pytest.mark.processes
@pytest.mark.parametrize(("version", "warned", "said"), [
    ("2.99.0", False, "newer than the newest known release (2.15): the facts (entry points, kernel tables, MPS's "
                      "messages, CUDA's alerts) are torch 2.15.0's; its own could not be scanned: no user cache "
                      "directory to keep its scan in"),
    ("2.9.1", True, "older than the oldest supported release (2.10): the facts are torch 2.10.0's")])
def test_a_torch_other_than_the_catalogs_release_is_said_once_where_its_facts_come_from(python, version, warned,
                                                                                          said):
    """A newer release than the newest known, where its own files cannot be scanned (no cache directory: the scan is
    tests/releases'), runs on the newest known's facts, said once at INFO with why; an older one than the oldest
    supported is warned about once, at the caller's line."""
    probe = textwrap.dedent(f"""\
        import warnings, torch, torchdevice
        torch.__version__ = "{version}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torchdevice.install("cpu")
            torchdevice.uninstall()
            torchdevice.install("cpu")
        print(len(caught), all(w.filename.endswith("<string>") for w in caught))
        print(*(w.message for w in caught), sep="\\n")
    """)
    done = python("-c", probe, env={"TORCHDEVICE_LOG": "info", "TORCHDEVICE_CACHE_DIR": "", "HOME": ""})
    assert done.returncode == 0, done.stderr
    count, *warnings = done.stdout.splitlines()
    assert count == f"{int(warned)} True", done.stdout
    said_where = warnings if warned else done.stderr.splitlines()
    lines = [line for line in said_where if f"torch {version} is " in line]
    assert len(lines) == 1 and said in lines[0], (done.stdout, done.stderr)
