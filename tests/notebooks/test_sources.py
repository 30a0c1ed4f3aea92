"""Notebooks as sources of ``check`` and ``rewrite`` (``torchdevice.source.notebooks``), in this process: code cells
read as one module with IPython's lines masked and put back, findings and notes by cell, the JSON written back as
nbformat (or Colab) wrote it, bad notebooks refused naming the file, ``.ipynb`` files found by walking."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from torchdevice.check.scan import check_file
from torchdevice.rewrite import ruleset
from torchdevice.rewrite.jobs import Options, rewrite_file, rewrite_files
from torchdevice.rewrite.source import rewrite_source
from torchdevice.source import files, notebooks

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "colab_train.ipynb"


def write(path: Path, *cells: str, markdown_first: bool = True) -> Path:
    made = [new_code_cell(c) for c in cells]
    nbformat.write(new_notebook(cells=[new_markdown_cell("# A notebook")] + made if markdown_first else made), path)
    return path


def sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_the_code_cells_are_one_module_and_lines_are_found_by_cell(tmp_path):
    path = write(tmp_path / "nb.ipynb", "import torch", "x = 1\ny = torch.zeros(2).cuda()")
    report = check_file((str(path), "", "cpu", None))
    [finding] = [f for f in report.findings if f.name == ".cuda()"]
    assert (finding.cell, finding.line, finding.column) == (3, 2, 5)  # the markdown cell is cell 1


def test_ipython_lines_are_left_alone_and_the_rest_of_the_cell_is_rewritten(tmp_path):
    cell = ("!nvidia-smi\n%matplotlib inline\nfiles = !ls\nimport torch\nfor i in range(2):\n    !echo {i}\n"
            "torch.zeros?\nx = torch.ones(3, device=\"cuda\")")
    path = write(tmp_path / "nb.ipynb", cell, "%%bash\necho cuda", "%%time\ny = x.cuda()")
    result = rewrite_file(path, Options(mode="write"))
    assert result.status == "changed", result.reason
    files.replace(path, result.snapshot, result.data)
    first, bash, timed = sources(path)
    ipython = ["!nvidia-smi", "%matplotlib inline", "files = !ls", "    !echo {i}", "torch.zeros?"]
    assert [line for line in first.splitlines() if line in ipython] == ipython  # each as it was, in order
    assert "for i in range(2):\n    !echo {i}\n" in first
    assert "cuda" not in first.splitlines()[-1] and "torch.accelerator" in first
    assert bash == "%%bash\necho cuda"
    assert timed.startswith("%%time\n") and ".cuda()" not in timed
    assert result.cells == ((3, "cell magic %%bash: not Python, left as it is"),)


def test_a_cell_that_does_not_parse_is_skipped_and_the_others_rewritten(tmp_path):
    path = write(tmp_path / "nb.ipynb", "import torch\nx = torch.zeros(1).cuda()", "def broken(:\n    pass")
    result = rewrite_file(path, Options(mode="write"))
    assert result.status == "changed" and result.cells[0][0] == 3 and "line 1" in result.cells[0][1]
    files.replace(path, result.snapshot, result.data)
    assert sources(path)[1] == "def broken(:\n    pass" and ".cuda()" not in sources(path)[0]


def test_only_changed_sources_change_and_the_json_is_as_nbformat_writes_it(tmp_path):
    executed = nbformat.read(EXAMPLE, as_version=4)
    executed.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="no GPU\n")]
    executed.cells[1].execution_count = 1
    path = tmp_path / "nb.ipynb"
    nbformat.write(executed, path)
    result = rewrite_file(path, Options(mode="write"))
    files.replace(path, result.snapshot, result.data)
    after = nbformat.read(path, as_version=4)
    changed = [i for i, (a, b) in enumerate(zip(executed.cells, after.cells, strict=True)) if a != b]
    assert changed and all(executed.cells[i].cell_type == "code" for i in changed)
    for i in changed:  # the source alone differs: outputs, metadata, ids, counts kept
        assert {k: v for k, v in after.cells[i].items() if k != "source"} == \
            {k: v for k, v in executed.cells[i].items() if k != "source"}
    assert path.read_text(encoding="utf-8") == nbformat.writes(after) + "\n"  # indent 1, sorted keys, newline


def test_a_colab_notebook_keeps_its_own_formatting(tmp_path):
    document = {"nbformat": 4, "nbformat_minor": 0, "metadata": {"colab": {"provenance": []}, "accelerator": "GPU"},
                "cells": [{"cell_type": "code", "source": ["import torch\n", "x = torch.zeros(2).cuda()  # é"],
                           "metadata": {"id": "abc"}, "execution_count": None, "outputs": []}]}
    path = tmp_path / "colab.ipynb"
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")  # no final newline
    result = rewrite_file(path, Options(mode="write"))
    files.replace(path, result.snapshot, result.data)
    document["cells"][0]["source"] = json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"]
    assert ".cuda()" not in "".join(document["cells"][0]["source"])
    assert path.read_text(encoding="utf-8") == json.dumps(document, indent=2, ensure_ascii=False)


@pytest.mark.parametrize(("content", "message"), [
    (b"{\"cells\": [", "nb.ipynb:1: not a notebook: invalid JSON"),
    (b"[]", "nb.ipynb: not a notebook: no nbformat version"),
    (json.dumps({"nbformat": 3, "worksheets": []}).encode(), "nb.ipynb: not a notebook of nbformat 4 (version 3)"),
    (json.dumps({"nbformat": 4, "cells": [{"cell_type": "code"}]}).encode(), "nb.ipynb: cell 1: not a notebook cell"),
    (b"\xff\xfe{}", "nb.ipynb: not a notebook: not UTF-8"),
])
def test_a_bad_notebook_is_refused_naming_the_file_and_left_as_it_is(tmp_path, content, message):
    path = tmp_path / "nb.ipynb"
    path.write_bytes(content)
    before = path.read_bytes()
    [result] = rewrite_files([files.Found(path)], Options(mode="write"), jobs=1)
    assert result.status == "failed" and result.reason.startswith(str(tmp_path / message.split(":")[0])), result
    assert message.split(":", 1)[1] in result.reason
    assert check_file((str(path), "", "cpu", None)).error == result.reason
    assert path.read_bytes() == before


def test_walking_finds_notebooks_but_not_jupyter_checkpoints(tmp_path):
    write(tmp_path / "a.ipynb", "x = 1")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    write(tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb", "x = 1")
    (tmp_path / "b.py").write_text("x = 1\n")
    assert [f.path.name for f in files.discover([str(tmp_path)])] == ["a.ipynb", "b.py"]


def test_a_rewritten_script_whose_markers_are_lost_is_refused(tmp_path):
    notebook = notebooks.read(EXAMPLE, EXAMPLE.read_bytes())
    with pytest.raises(ValueError, match="cannot be told apart"):
        notebook.rewritten(notebook.script.replace("__torchdevice_cell_3__\n", ""))


def test_the_size_limit_is_the_code_cells_not_the_outputs(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[new_code_cell("import torch\nx = torch.zeros(2).cuda()")])
    notebook.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="0" * 2_000_000)]
    path = tmp_path / "big.ipynb"
    nbformat.write(notebook, path)
    assert rewrite_file(path, Options(max_bytes=1_000_000)).status == "changed"
    assert check_file((str(path), "", "cpu", 1_000_000)).findings
    small = rewrite_file(path, Options(max_bytes=20))
    assert small.status == "skipped" and small.reason.endswith("bytes of code cells, over the limit of 20 "
                                                               "(--max-file-size)")


FIXTURES = sorted((Path(__file__).resolve().parents[1] / "rewrite" / "fixtures").rglob("*.in.py"))


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_module_cut_into_cells_is_rewritten_as_the_module_is(fixture):
    """Each of the rewriter's fixtures, one top-level statement per cell: each rewritten cell parses, and the cells
    say what the module's rewrite says, but for blank lines and guards, which never join statements of two cells."""
    source = fixture.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        pytest.skip("not Python that this Python parses")
    lines = source.splitlines(keepends=True)
    cuts = [0, *(min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))]) - 1 for n in tree.body[1:]),
            len(lines)]
    cells = ["".join(lines[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]
    document = new_notebook(cells=[new_code_cell(c) for c in cells])
    notebook = notebooks.read(Path("cut.ipynb"), nbformat.writes(document).encode())
    rules = ruleset.default()
    changed = dict((n, new) for n, _, new in notebook.rewritten(rewrite_source(notebook.script, rules).code))
    for new in changed.values():
        ast.parse(new)

    def said(code: str) -> list[str]:
        guard = "if torch.accelerator.is_available():"
        return [line.strip() for line in code.splitlines() if line.strip() and line.strip() != guard]

    assert said("".join(changed.get(n, c) for n, c in enumerate(cells, 1))) == \
        said(rewrite_source(source, rules).code)


def test_a_first_cell_with_a_docstring_and_future_imports_stays_first(tmp_path):
    first = '"""A tutorial."""\nfrom __future__ import annotations'
    path = write(tmp_path / "nb.ipynb", first, "x = 1", "y = x.cuda()", markdown_first=False)
    result = rewrite_file(path, Options(mode="write"))
    assert result.status == "changed", result.reason
    files.replace(path, result.snapshot, result.data)
    cells = sources(path)
    assert cells[0] == f"{first}\nimport torch" and cells[1] == "x = 1" and ".cuda()" not in cells[2]
    ast.parse("\n".join(cells))
