"""``torchdevice run --report FILE.html``: the report as a page, opened in a real headless browser (Chromium). A
real program's fallbacks on the simulated Mac, per process and for the program, as the document the page
carries and the program itself count them; a hand-made document's texts (markup, quotes, ampersands) shown as
written, a section the page has no heading of its own for (``triton``) shown, and the page fitting a narrow
window."""

from __future__ import annotations

import json
from pathlib import Path

import browser
import pytest
import torch
from program_runs import json_lines, torchdevice_run

from torchdevice.reporting import page, program
from torchdevice.version import __version__

pytestmark = pytest.mark.processes

FALLBACKS = str(Path(__file__).parent / "programs" / "fallbacks.py")


def fallback_rows(section: browser.Element) -> dict[tuple[str, str], tuple[int, str]]:
    """(op, route) -> (calls, why) in a section's table of fallbacks, as the browser shows it."""
    rows = {}
    for tr in section.one("div", data_section="fallbacks").one("tbody").select("tr"):
        cells = {td.attrs["data-column"]: td.text() for td in tr.select("td") if "data-column" in td.attrs}
        rows[cells["op"], cells["route"]] = (int(cells["count"].replace(",", "")), cells["why"])
    return rows


def counted(rows: list[dict]) -> dict[tuple[str, str], tuple[int, str]]:
    return {(r["op"], r["route"]): (r["count"], r["why"]) for r in rows}


def facts(section: browser.Element) -> dict[str, str]:
    dl = section.select("dl", class_="facts")[0]
    return dict(zip([dt.text() for dt in dl.select("dt")], [dd.text() for dd in dl.select("dd")], strict=True))


def test_the_page_shows_each_process_fallbacks_as_they_were_counted(tmp_path):
    browser.chromium()  # skips, or fails in CI, before the program runs
    path = tmp_path / "report.html"
    done = torchdevice_run("--target", "mps-sim", "--report", str(path), FALLBACKS, timeout=300)
    pools = {line["pid"]: line["pools"] for line in json_lines(done)}
    assert "torchdevice report: 2 processes, " in done.stderr and f"written to {path}" in done.stderr, done.stderr
    shown = browser.dom(path, tmp_path / "profile")
    document = json.loads(shown.one("script", id="torchdevice-report").text())
    assert [p["pid"] for p in document["processes"]] == list(pools)
    for process in document["processes"]:
        rows = fallback_rows(shown.one("section", id=f"process-{process['pid']}"))
        assert rows == counted(process["fallbacks"])
        assert rows["aten::adaptive_max_pool3d", "cpu"] == (pools[process["pid"]], "no MPS kernel")
        assert rows["aten::erfinv", "cpu"] == (1, "float64 not supported on MPS")
    rows = fallback_rows(shown.one("section", id="program"))
    assert rows == counted(document["fallbacks"])
    assert rows["aten::adaptive_max_pool3d", "cpu"][0] == sum(pools.values())
    header = facts(shown.one("header"))
    assert (header["target"], header["processes"]) == ("mps", "2")
    assert (header["torch"], header["torchdevice"]) == (str(torch.__version__), __version__)
    assert document["versions"]["python"] == header["python"]


NASTY = "<script>alert(\"x\")</script> & 'quoted' <!-- <b>bold</b>"
LONG = "aten::_" + "very_long_overload_name_" * 8 + ".Tensor"


def entry(pid: int, role: str, scale: int) -> dict:
    """A process's entry as the runtime writes it, with a ``triton`` section and texts a page must escape."""
    return {"pid": pid, "parent_pid": 1, "role": role, "target": "mps", "seconds": 10.0 * scale,
            "command": f"python train.py --name \"{NASTY}\" --out a&b --path " + "/x" * 120,
            "redirects": {"torch.zeros": {"cuda->mps": 3 * scale}, NASTY: {"cuda->mps": 1}},
            "fallbacks": [{"op": op, "route": route, "count": n * scale, "seconds": s * scale, "why": why}
                          for op, route, n, s, why in (("aten::add.Tensor", "cpu", 1200, 0.25, "float64 not supported"),
                                                       (NASTY, "mlx", 7, 1.5, "MLX preferred"),
                                                       (LONG, "cpu", 3, 0.01, NASTY))],
            "standins": {"flash_attn.flash_attn_func": 4 * scale},
            "triton": {"triton_poi_fused_add_0": {"launches": 1000 * scale, "seconds": 0.5 * scale},
                       NASTY: {"launches": 2, "seconds": 2.0}},
            "warnings": [NASTY, "torchdevice: </script><script>alert(1)</script>"]}


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    """A hand-made document, its page, and the DOM Chromium builds from it in a narrow window, with the width of
    its content measured by a script added for the test."""
    folder = tmp_path_factory.mktemp("page")
    document = program.merge(entry(100, "main", 1), [entry(101, "DataLoader worker 0", 2)])
    triton: dict[str, dict] = {}
    for process in document["processes"]:
        for kernel, numbers in process["triton"].items():
            total = triton.setdefault(kernel, {"launches": 0, "seconds": 0.0})
            total["launches"] += numbers["launches"]
            total["seconds"] += numbers["seconds"]
    document["triton"] = triton
    document["note"] = NASTY  # a plain value the page has no place of its own for: shown with the program's facts
    measure = ('<script id="measure">document.body.dataset.width = document.documentElement.scrollWidth;'
               'document.body.dataset.window = window.innerWidth;</script>')
    path = folder / "report.html"
    path.write_text(page.render(document).replace("</body>", measure + "</body>"), encoding="utf-8")
    return document, browser.dom(path, folder / "profile", width=820)


def test_every_text_of_the_document_shows_as_written(handmade):
    document, shown = handmade
    assert [s.attrs["id"] for s in shown.select("script")] == ["torchdevice-report", "measure"]
    assert shown.select("b") == [] and shown.one("title").text() == f"torchdevice report: {document['command']}"
    assert json.loads(shown.one("script", id="torchdevice-report").text()) == document
    assert facts(shown.one("header"))["note"] == NASTY
    for process in document["processes"]:
        section = shown.one("section", id=f"process-{process['pid']}")
        assert section.one("code").text() == process["command"]
        assert set(fallback_rows(section)) == {(r["op"], r["route"]) for r in process["fallbacks"]}
        assert {why for _, why in fallback_rows(section).values()} == {r["why"] for r in process["fallbacks"]}
        redirected = section.one("div", data_section="redirects").one("tbody")
        assert [td.text() for td in redirected.select("td", data_column="op")] == list(process["redirects"])
        assert [li.text() for li in section.one("div", data_section="warnings").select("li")] == process["warnings"]


def test_a_section_the_page_has_no_table_of_its_own_for_is_shown(handmade):
    document, shown = handmade
    for where, numbers in [("program", document["triton"])] + [
            (f"process-{p['pid']}", p["triton"]) for p in document["processes"]]:
        table = shown.one("section", id=where).one("div", data_section="triton")
        assert table.one("h3").text() == "Triton launches"
        rows = [{td.attrs["data-column"]: td.text() for td in tr.select("td") if "data-column" in td.attrs}
                for tr in table.one("tbody").select("tr")]
        by_time = sorted(numbers.items(), key=lambda item: -item[1]["seconds"])
        assert rows == [{"kernel": kernel, "seconds": f"{n['seconds']:,.3f}", "launches": f"{n['launches']:,}"}
                        for kernel, n in by_time]


def test_the_page_fits_a_narrow_window(handmade):
    _, shown = handmade
    body = shown.one("body")
    assert 0 < int(body.attrs["data-width"]) <= int(body.attrs["data-window"])
