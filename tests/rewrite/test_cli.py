"""``torchdevice rewrite`` as users run it: a real subprocess, real files, exit statuses like black's, rule
codes and configuration like ruff's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CUDA = "import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n"
PLAIN = "import torch\n\nmodel = torch.nn.Linear(2, 2)\n"
IDIOM = 'torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'


def _summary(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


@pytest.mark.processes
def test_check_reports_and_changes_nothing(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    (tmp_path / "plain.py").write_text(PLAIN)
    result = cli(tmp_path)
    assert result.returncode == 1
    assert f"would rewrite {tmp_path / 'train.py'}" in result.stderr
    assert "plain.py" not in result.stderr.replace(_summary(result.stderr), "")
    assert _summary(result.stderr).startswith("2 files scanned")
    assert ("1 would be rewritten, 0 unchanged, 1 without CUDA code, 0 skipped, 0 failed; 1 sites rewritten, "
            "0 reported; the rewritten code needs torch>=") in _summary(result.stderr)
    assert (tmp_path / "train.py").read_text() == CUDA
    assert result.stdout == ""
    assert cli("--check", tmp_path).returncode == 1


@pytest.mark.processes
def test_diff_prints_a_unified_diff(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    result = cli("--diff", tmp_path / "train.py")
    assert result.returncode == 1
    assert result.stdout.startswith(f"--- {tmp_path / 'train.py'}\n+++ {tmp_path / 'train.py'}\n")
    assert "\n-model = torch.nn.Linear(2, 2).cuda()\n" in result.stdout
    assert f"\n+model = torch.nn.Linear(2, 2).to({IDIOM})\n" in result.stdout
    assert (tmp_path / "train.py").read_text() == CUDA


@pytest.mark.processes
def test_write_rewrites_then_there_is_nothing_to_do(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    written = cli("--write", tmp_path)
    assert written.returncode == 0
    assert f"rewrote {tmp_path / 'train.py'}" in written.stderr
    assert f".to({IDIOM})" in (tmp_path / "train.py").read_text()
    again = cli("--check", tmp_path)
    assert again.returncode == 0
    assert "0 would be rewritten" in _summary(again.stderr)


@pytest.mark.processes
def test_nothing_to_do_exits_zero(tmp_path, cli):
    (tmp_path / "plain.py").write_text(PLAIN)
    result = cli(tmp_path)
    assert (result.returncode, result.stdout) == (0, "")
    assert "0 would be rewritten, 0 unchanged, 1 without CUDA code" in _summary(result.stderr)


@pytest.mark.processes
def test_reports_name_file_line_column_and_code_without_failing(tmp_path, cli):
    (tmp_path / "props.py").write_text("import torch\n\nname = torch.cuda.get_device_name(0)\n")
    result = cli(tmp_path)
    assert result.returncode == 0
    assert f"{tmp_path / 'props.py'}:3:8: TD899 torch.cuda.get_device_name: no device-agnostic" in result.stderr
    assert "0 sites rewritten, 1 reported" in _summary(result.stderr)


@pytest.mark.processes
def test_bad_files_are_reported_and_the_others_processed(tmp_path, cli):
    (tmp_path / "good.py").write_text(CUDA)
    (tmp_path / "syntax.py").write_text("import torch\n\nx = torch.ones(1).cuda(\n")
    (tmp_path / "latin.py").write_bytes("import torch\nx = 'café'.cuda()\n".encode("latin-1"))
    (tmp_path / "broken.py").symlink_to(tmp_path / "missing.py")
    result = cli("--write", tmp_path)
    assert result.returncode == 123
    assert f".to({IDIOM})" in (tmp_path / "good.py").read_text()
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert f"error: {tmp_path / 'broken.py'}: no such file or directory" in errors
    assert f"error: {tmp_path / 'latin.py'}:2: not UTF-8 (byte 0xe9); skipped" in errors
    assert f"error: {tmp_path / 'syntax.py'}:3: syntax error: '(' was never closed" in errors
    assert "1 rewritten, 0 unchanged, 0 without CUDA code, 0 skipped, 3 failed" in _summary(result.stderr)


@pytest.mark.skipif(os.geteuid() == 0, reason="file permissions do not bind root")
def test_unreadable_file_is_reported(tmp_path, cli):
    path = tmp_path / "secret.py"
    path.write_text(CUDA)
    path.chmod(0)
    result = cli(path)
    assert result.returncode == 123
    assert f"error: {path}: cannot read: Permission denied" in result.stderr


@pytest.mark.processes
def test_missing_path_is_an_error(tmp_path, cli):
    result = cli(tmp_path / "nope.py")
    assert result.returncode == 123
    assert f"error: {tmp_path / 'nope.py'}: no such file or directory" in result.stderr


@pytest.mark.processes
def test_parallel_and_serial_runs_agree(tmp_path, cli):
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(CUDA.replace("(2, 2)", f"({i}, 2)") + f"torch.cuda.synchronize({i})\n")
    serial, parallel = cli("--diff", "--jobs", "1", tmp_path), cli("--diff", "--jobs", "3", tmp_path)
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout == parallel.stdout and serial.stdout.count("+++ ") == 6
    assert serial.stderr.splitlines()[:-1] == parallel.stderr.splitlines()[:-1]


@pytest.mark.processes
def test_exclude_and_environments_are_skipped(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    for folder in ("venv", "generated", "env"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mod.py").write_text(CUDA)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    result = cli("--exclude", "generated", tmp_path)
    assert _summary(result.stderr).startswith("1 file scanned")


# --- rule codes and configuration -----------------------------------------------------------------------

TWO_RULES = "import torch\n\nx = torch.ones(1).cuda()\ntorch.cuda.synchronize()\n"


@pytest.mark.processes
def test_select_and_ignore_choose_rules_by_code_or_prefix(tmp_path, cli):
    (tmp_path / "train.py").write_text(TWO_RULES)
    only_calls = cli("--diff", "--select", "TD2", tmp_path)
    assert "+    torch.accelerator.synchronize()" in only_calls.stdout and "-x = torch" not in only_calls.stdout
    no_method = cli("--diff", "--ignore", "TD102,TD205", tmp_path)
    assert (no_method.returncode, no_method.stdout) == (0, "")


@pytest.mark.processes
def test_unknown_codes_are_errors(tmp_path, cli):
    (tmp_path / "train.py").write_text(TWO_RULES)
    result = cli("--select", "TD1,TD999", tmp_path)
    assert result.returncode == 2
    assert "torchdevice rewrite: error: --select: 'TD999' is not a rule code or prefix" in result.stderr


@pytest.mark.processes
def test_pyproject_configuration_is_found_above_the_paths_and_options_override_it(tmp_path, cli):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.torchdevice]\nignore = ["TD102"]\n'
                                             'exclude = ["skipped"]\n')
    (tmp_path / "src" / "skipped").mkdir(parents=True)
    (tmp_path / "src" / "train.py").write_text(TWO_RULES)
    (tmp_path / "src" / "skipped" / "mod.py").write_text(TWO_RULES)
    configured = cli("--diff", tmp_path / "src", cwd=tmp_path / "src")
    assert "+    torch.accelerator.synchronize()" in configured.stdout
    assert "-x = torch.ones(1).cuda()" not in configured.stdout  # TD102 is ignored
    assert _summary(configured.stderr).startswith("1 file scanned")
    overridden = cli("--diff", "--ignore", "TD205", tmp_path / "src")
    assert "+x = torch.ones(1).to(" in overridden.stdout and "-torch.cuda.synchronize()" not in overridden.stdout


@pytest.mark.processes
def test_bad_configuration_is_an_error_naming_the_file(tmp_path, cli):
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice]\nselect = ["TD1"]\nfix = true\n')
    (tmp_path / "train.py").write_text(TWO_RULES)
    result = cli(tmp_path / "train.py")
    assert result.returncode == 2
    assert f"error: {tmp_path / 'pyproject.toml'}: [tool.torchdevice]: unknown key 'fix'" in result.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice]\nignore = ["TD1O1"]\n')
    result = cli(tmp_path / "train.py")
    assert result.returncode == 2
    assert f"error: {tmp_path / 'pyproject.toml'}: ignore: 'TD1O1' is not a rule code" in result.stderr


# --- bad input and safe writes --------------------------------------------------------------------------


@pytest.mark.processes
def test_a_fifo_and_a_link_loop_do_not_stop_the_run(tmp_path, cli):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    (tmp_path / "loop").symlink_to(tmp_path)
    (tmp_path / "train.py").write_text(CUDA)
    result = cli("--write", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert f"skipped {tmp_path / 'pipe.py'}: not a regular file" in result.stderr
    assert f"skipped {tmp_path / 'a.py'}: symbolic link loop" in result.stderr
    assert IDIOM in (tmp_path / "train.py").read_text()
    assert "1 rewritten, 0 unchanged, 0 without CUDA code, 3 skipped, 0 failed" in _summary(result.stderr)


@pytest.mark.processes
def test_a_link_out_of_the_given_paths_is_not_followed(tmp_path, cli):
    (tmp_path / "project").mkdir()
    (tmp_path / "outside.py").write_text(CUDA)
    (tmp_path / "project" / "linked.py").symlink_to(tmp_path / "outside.py")
    result = cli("--write", tmp_path / "project")
    assert result.returncode == 0
    assert (tmp_path / "outside.py").read_text() == CUDA
    assert f"skipped {tmp_path / 'project' / 'linked.py'}: symbolic link to a file outside" in result.stderr


@pytest.mark.processes
def test_a_coding_declaration_is_honoured(tmp_path, cli):
    text = "# -*- coding: latin-1 -*-\nimport torch\nlabel = \"données\"\nx = torch.ones(1).cuda()\n"
    (tmp_path / "latin.py").write_bytes(text.encode("latin-1"))
    result = cli("--write", tmp_path)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "latin.py").read_bytes()
    assert "label = \"données\"".encode("latin-1") in written and IDIOM.encode() in written


@pytest.mark.processes
def test_refused_writes_fail_the_run_and_leave_the_file(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    os.link(tmp_path / "train.py", tmp_path / "same.txt")
    result = cli("--write", tmp_path)
    assert result.returncode == 123
    assert f"error: {tmp_path / 'train.py'}: not written: it has 2 hard links" in result.stderr
    assert (tmp_path / "train.py").read_text() == CUDA


@pytest.mark.processes
def test_a_huge_generated_file_is_set_aside_quickly(tmp_path):
    """A 5 MB file with ~99k sites must not stall the run nor take gigabytes: it is set aside by size."""
    (tmp_path / "generated.py").write_text("import torch\n" + "x = torch.zeros(1).cuda()\n" * 99_000)
    (tmp_path / "train.py").write_text(CUDA)
    measure = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "sys.stderr.write(r.stderr); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
               "sys.exit(r.returncode)")
    result = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "torchdevice", "rewrite",
                             "--jobs", "2", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"skipped {tmp_path / 'generated.py'}: 2,574,013 bytes, over the limit of 1,000,000" in result.stderr
    assert f"would rewrite {tmp_path / 'train.py'}" in result.stderr
    assert int(result.stdout) < 400_000  # kilobytes


@pytest.mark.processes
def test_a_slow_file_is_given_up_at_the_time_limit(tmp_path, cli):
    (tmp_path / "slow.py").write_text("import torch\n" + "x = torch.zeros(1).cuda()\n" * 20_000)
    (tmp_path / "train.py").write_text(CUDA)
    result = cli("--timeout", "0.5", "--jobs", "1", tmp_path)
    assert result.returncode == 1
    assert f"skipped {tmp_path / 'slow.py'}: still rewriting after 0.5 s (--timeout)" in result.stderr
    assert f"would rewrite {tmp_path / 'train.py'}" in result.stderr


# --- the command line itself ----------------------------------------------------------------------------


@pytest.mark.processes
def test_help_documents_codes_configuration_and_exit_statuses(cli):
    result = cli("--help")
    assert result.returncode == 0
    assert "123" in result.stdout and "--write" in result.stdout and "[tool.torchdevice]" in result.stdout
    assert "TD101  device-string" in result.stdout and "TD901  cuda-comparison" in result.stdout


@pytest.mark.processes
def test_jobs_must_be_positive(cli, tmp_path):
    result = cli("--jobs", "0", tmp_path)
    assert result.returncode == 2 and "must be positive" in result.stderr


@pytest.mark.processes
def test_the_command_does_not_import_torch(tmp_path):
    (tmp_path / "train.py").write_text(CUDA)
    code = ("import sys; from torchdevice.cli import main; code = main(['rewrite', sys.argv[1]]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr


def test_progress_shows_on_a_terminal_for_long_runs_only():
    import pty
    import select

    from torchdevice.source.progress import Progress

    def age(progress: Progress) -> None:  # as if the run had been going for a while
        progress.start -= Progress.AFTER
        progress.last -= Progress.AFTER

    main, secondary = pty.openpty()
    with os.fdopen(secondary, "w") as terminal:
        progress = Progress("rewrite", "parsed", terminal)
        progress(1, 10)  # a run that just started: nothing yet
        age(progress)
        progress(5, 10)
        progress.clear()
        assert select.select([main], [], [], 10)[0], "nothing was written to the terminal"
        chunks = [os.read(main, 1000)]
        while select.select([main], [], [], 1)[0]:  # the terminal may hand the writes over in pieces
            chunks.append(os.read(main, 1000))
        shown = b"".join(chunks).decode()
    os.close(main)
    assert shown == "\rrewrite: 5/10 files parsed\r\x1b[K"
    read, write = os.pipe()
    with os.fdopen(write, "w") as pipe:
        quiet = Progress("rewrite", "parsed", pipe)
        age(quiet)
        quiet(5, 10)
        quiet.clear()
    with os.fdopen(read) as output:
        assert output.read() == ""
