"""The report's rows of fallen-back aten overloads, from the engine on a simulated MPS target: how many calls,
by which route, how long they took there and why; and how rows of several processes add up (each
with its share of its process's time)."""

from __future__ import annotations

import pytest
import torch
from fallback_support import activated, host, on

from torchdevice.reporting import counts as report
from torchdevice.reporting import program as program_report
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import chosen


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHDEVICE_CACHE_DIR", str(tmp_path / "cache"))
    report.reset()
    yield
    report.reset()


def row(op: str, route: str) -> dict:
    return next(r for r in report.fallback_rows() if (r["op"], r["route"]) == (op, route))


def test_missing_kernel_and_unsupported_dtype_are_counted_timed_and_explained():
    sim = SimulatedKernels(chosen(missing={"cummax"}, table_missing={"aten::cummax"}, float64_ops={"erfinv"},
                       try_first={"aten::erfinv"}))
    x, d = torch.randn(50), torch.rand(5, dtype=torch.float64)
    with activated(sim) as target:
        maxima = host([torch.cummax(on(target, x), 0) for _ in range(3)])
        inverse = host(torch.erfinv(on(target, d)))
    torch.testing.assert_close(tuple(maxima[0]), tuple(torch.cummax(x, 0)))
    torch.testing.assert_close(inverse, torch.erfinv(d))
    cummax = row("aten::cummax", "cpu")
    assert cummax["count"] == 3 and cummax["why"] == "no MPS kernel" and cummax["seconds"] > 0
    erfinv = row("aten::erfinv", "cpu")
    assert erfinv["count"] == 1 and erfinv["why"] == "float64 not supported on MPS"


def test_rows_of_several_processes_add_up_and_get_their_share_of_the_wall_time():
    def entry(pid: int, seconds: float, rows: list[dict]) -> dict:
        return {"pid": pid, "seconds": seconds, "command": "p", "target": "mps", "redirects": {},
                "fallbacks": rows, "standins": {}, "warnings": []}

    a = {"op": "aten::cummax", "route": "cpu", "count": 2, "seconds": 1.0, "why": "no MPS kernel"}
    b = {**a, "count": 3, "seconds": 0.5}
    document = program_report.merge(entry(1, 10.0, [a]), [entry(2, 4.0, [b])])
    assert [p["pid"] for p in document["processes"]] == [1, 2]
    [total] = document["fallbacks"]
    assert (total["count"], total["seconds"], total["share"]) == (5, 1.5, pytest.approx(0.15))
    assert [p["fallbacks"][0]["share"] for p in document["processes"]] == [pytest.approx(0.1), pytest.approx(0.125)]
    assert document["versions"]["torch"] == torch.__version__
    text = program_report.summary(document, "")
    assert "aten::cummax  cpu  5 calls  1.500 s  15.0%  (no MPS kernel)" in text


def test_triton_launches_of_several_processes_add_up_per_kernel():
    def entry(pid: int, triton: dict | None) -> dict:
        found = {"pid": pid, "seconds": 2.0, "command": "p", "target": "cpu", "redirects": {}, "fallbacks": [],
                 "standins": {}, "warnings": []}
        return found if triton is None else {**found, "triton": triton}

    main = entry(1, {"m.add_kernel": {"launches": 2, "seconds": 0.5}})
    worker = entry(2, {"m.add_kernel": {"launches": 3, "seconds": 0.25}, "m.softmax": {"launches": 1, "seconds": 1.0}})
    document = program_report.merge(main, [worker, entry(3, None)])  # an entry written before the section existed
    assert document["triton"] == {"m.add_kernel": {"launches": 5, "seconds": 0.75},
                                  "m.softmax": {"launches": 1, "seconds": 1.0}}
    assert main["triton"] == {"m.add_kernel": {"launches": 2, "seconds": 0.5}}  # each process keeps its own
    text = program_report.summary(document, "")
    assert "  triton kernels: 2, 6 launches in Triton's interpreter, 1.750 s (softmax 1, add_kernel 5)" in text
    assert "triton" not in program_report.summary(program_report.merge(entry(1, None), []), "")


def test_triton_launches_are_counted_per_kernel_until_reset():
    report.record_triton("m.add_kernel", 0.5)
    report.record_triton("m.add_kernel", 0.25)
    assert report.triton() == {"m.add_kernel": {"launches": 2, "seconds": 0.75}}
    report.reset()
    assert report.triton() == {}
