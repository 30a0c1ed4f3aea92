"""Finding files, decoding them, writing them back, and keeping their bytes outside rewritten statements."""

from __future__ import annotations

import codecs
import os
import stat

import pytest

from torchdevice.rewrite import files
from torchdevice.rewrite.jobs import rewrite_file, rewrite_files
from torchdevice.rewrite.rules import default
from torchdevice.rewrite.source import SourceError, rewrite_source


def _tree(root, paths):
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x = 1\n")


def test_discover_skips_environments_caches_and_excluded(tmp_path):
    _tree(tmp_path, [
        "pkg/a.py", "pkg/sub/b.py", "pkg/notes.txt", "pkg/.git/hooks/c.py", "pkg/__pycache__/d.py",
        "pkg/venv/e.py", "pkg/.venv/f.py", "pkg/lib/site-packages/g.py", "pkg/myenv/pyvenv.cfg", "pkg/myenv/h.py",
        "pkg/build/i.py", "pkg/sub/gen_pb2.py", "outside.py",
    ])
    found = files.discover([str(tmp_path / "pkg"), str(tmp_path / "outside.py"), str(tmp_path / "pkg/a.py")],
                           exclude=["build", "*_pb2.py"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["pkg/a.py", "pkg/sub/b.py", "outside.py"]


def test_exclude_matches_relative_paths(tmp_path):
    _tree(tmp_path, ["src/keep/a.py", "src/skip/b.py"])
    found = files.discover([str(tmp_path / "src")], exclude=["skip/*"])
    assert [p.name for p in found] == ["a.py"]


def test_write_atomic_keeps_mode_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("old\n")
    path.chmod(0o754)
    files.write_atomic(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert os.listdir(tmp_path) == ["train.py"]


def test_write_follows_symlinks(tmp_path):
    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    files.write_atomic(link, b"y = 2\n")
    assert link.is_symlink() and real.read_text() == "y = 2\n"


def test_not_utf8_names_path_and_line(tmp_path):
    path = tmp_path / "latin.py"
    data = "x = 1\ny = 'café'\n".encode("latin-1")
    with pytest.raises(files.Unreadable, match=r"latin\.py:2: not UTF-8 \(byte 0xe9\)"):
        files.decode(path, data)


def test_byte_order_mark_survives_a_rewrite(tmp_path):
    path = tmp_path / "bom.py"
    data = codecs.BOM_UTF8 + b"import torch\nx = torch.ones(1).cuda()\n"
    path.write_bytes(data)
    result = rewrite_file(path, data, "write")
    assert result.status == "changed"
    assert path.read_bytes().startswith(codecs.BOM_UTF8 + b"import torch\n")
    assert b".to(_DEVICE)" in path.read_bytes()


def test_windows_line_endings_are_kept_everywhere():
    source = "import torch\r\n\r\ndef f(x):\r\n    torch.cuda.synchronize()\r\n    return x.cuda()\r\n"
    code = rewrite_source(source, default()).code
    assert "torch.accelerator.synchronize()" in code and "_DEVICE = " in code
    assert code.count("\n") == code.count("\r\n")


def test_text_outside_rewritten_statements_is_kept_byte_for_byte():
    head = "import torch  # noqa\n"
    tail = "\n\n# comment \t with trailing spaces   \nx   =   torch.ones(1)   # odd spacing\nz = [1,\n     2]\n"
    code = rewrite_source(head + "y = torch.ones(1).cuda()" + tail, default()).code
    helper = '\n_DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
    assert code == head + helper + "y = torch.ones(1).to(_DEVICE)" + tail


def test_syntax_error_names_the_line():
    with pytest.raises(SourceError) as info:
        rewrite_source("import torch\n\nx = torch.cuda.synchronize(\n", default())
    assert (info.value.line, str(info.value)) == (3, "'(' was never closed")


def test_files_without_cuda_are_not_parsed(tmp_path):
    path = tmp_path / "plain.py"
    path.write_text("this is not python but mentions nothing to rewrite (\n")
    [result] = rewrite_files([path], "check", jobs=1)
    assert result.status == "skipped"
